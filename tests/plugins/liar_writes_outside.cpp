// `liar_writes_outside`: declares the fresh-output contract and returns a correct fresh
// result, but writes one element past the end of it (an off-by-one loop bound), into
// memory it was never given. The suite's guard zones must catch it.
#include "kernels.hpp"

namespace {

using namespace deltakern::testplugins;

int32_t varlen_lying(void* p, const dk_call* c, DLManagedTensor** r, char* e, size_t n) {
  return run_varlen(p, c, r, e, n, {.in_place = false, .write_past_end = true});
}
int32_t update_lying(void* p, const dk_call* c, DLManagedTensor** r, char* e, size_t n) {
  return run_update(p, c, r, e, n, {.in_place = false, .write_past_end = true});
}

const dk_caps kCaps = {sizeof(dk_caps), 1, kCpu, 1, kF32Only, 2, 4, DK_LAYOUT_TIME_CONTIGUOUS};
const dk_op kOps[] = {
    {sizeof(dk_op), DK_OP_CAUSAL_CONV1D_VARLEN, kVarlenFreshSchema, &kCaps, nullptr, varlen_lying},
    {sizeof(dk_op), DK_OP_CAUSAL_CONV1D_UPDATE, kUpdateFreshSchema, &kCaps, nullptr, update_lying},
};
const dk_plugin kPlugin = {sizeof(dk_plugin),
                           DK_ABI_MAJOR,
                           DK_ABI_MINOR,
                           "liar_writes_outside",
                           "test",
                           init_keep_host,
                           probe_cpu_only,
                           shutdown_nothing,
                           2,
                           kOps,
                           nullptr};

}  // namespace

DK_TEST_PLUGIN_EXPORT const dk_plugin* deltakern_plugin_entry(uint16_t, uint16_t) { return &kPlugin; }
