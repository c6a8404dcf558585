// init refuses: discovery must skip the plugin with init's own message.
#include "kernels.hpp"

#include <deltakern/plugin_sdk.hpp>

namespace {

using namespace deltakern::testplugins;

int32_t refuse(const dk_host*, void**, char* error, size_t error_size) {
  deltakern::plugin::write_message(error, error_size, "init_fails refuses to start (test plugin)");
  return DK_ERR_INTERNAL;
}

int32_t varlen_fresh(void* p, const dk_call* c, DLManagedTensor** r, char* e, size_t n) {
  return run_varlen(p, c, r, e, n, {.in_place = false});
}

const dk_caps kCaps = {sizeof(dk_caps), 1, kCpu, 1, kF32Only, 2, 4, DK_LAYOUT_TIME_CONTIGUOUS};
const dk_op kOps[] = {
    {sizeof(dk_op), DK_OP_CAUSAL_CONV1D_VARLEN, kVarlenFreshSchema, &kCaps, nullptr, varlen_fresh},
};
const dk_plugin kPlugin = {sizeof(dk_plugin),
                           DK_ABI_MAJOR,
                           DK_ABI_MINOR,
                           "init_fails",
                           "test",
                           refuse,
                           probe_cpu_only,
                           shutdown_nothing,
                           1,
                           kOps,
                           nullptr};

}  // namespace

DK_TEST_PLUGIN_EXPORT const dk_plugin* deltakern_plugin_entry(uint16_t, uint16_t) { return &kPlugin; }
