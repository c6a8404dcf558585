// Built "for ABI 99": discovery must refuse it, naming both versions.
#include "kernels.hpp"

namespace {

using namespace deltakern::testplugins;

const dk_plugin kPlugin = {
    sizeof(dk_plugin), 99, 0,       "wrong_abi", "test", init_keep_host, probe_cpu_only,
    shutdown_nothing,  0,  nullptr, nullptr};

}  // namespace

DK_TEST_PLUGIN_EXPORT const dk_plugin* deltakern_plugin_entry(uint16_t, uint16_t) { return &kPlugin; }
