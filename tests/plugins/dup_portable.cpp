// A second plugin named "portable": searched after the real one, discovery must skip it
// as a duplicate. (Where it is found first it works, fresh outputs, so nothing breaks.)
#include "kernels.hpp"

namespace {

using namespace deltakern::testplugins;

int32_t varlen_fresh(void* p, const dk_call* c, DLManagedTensor** r, char* e, size_t n) {
  return run_varlen(p, c, r, e, n, {.in_place = false});
}
int32_t update_fresh(void* p, const dk_call* c, DLManagedTensor** r, char* e, size_t n) {
  return run_update(p, c, r, e, n, {.in_place = false});
}

const dk_caps kCaps = {sizeof(dk_caps), 1, kCpu, 3,
                       kFloatDtypes,    2, 4,    DK_LAYOUT_TIME_CONTIGUOUS | DK_LAYOUT_CHANNEL_LAST};
const dk_op kOps[] = {
    {sizeof(dk_op), DK_OP_CAUSAL_CONV1D_VARLEN, kVarlenFreshSchema, &kCaps, nullptr, varlen_fresh},
    {sizeof(dk_op), DK_OP_CAUSAL_CONV1D_UPDATE, kUpdateFreshSchema, &kCaps, nullptr, update_fresh},
};
const dk_plugin kPlugin = {sizeof(dk_plugin),
                           DK_ABI_MAJOR,
                           DK_ABI_MINOR,
                           "portable",
                           "test-duplicate",
                           init_keep_host,
                           probe_cpu_only,
                           shutdown_nothing,
                           2,
                           kOps,
                           nullptr};

}  // namespace

DK_TEST_PLUGIN_EXPORT const dk_plugin* deltakern_plugin_entry(uint16_t, uint16_t) { return &kPlugin; }
