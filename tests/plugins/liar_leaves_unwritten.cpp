// `liar_leaves_unwritten`: declares the fresh-output contract and computes a correct
// result, but takes NaN for "not yet written": every fifth output element is written only
// where the memory held a NaN. Under the suite's NaN poison it looks perfect; only the
// second, finite poison shows the elements it leaves as it found them.
#include "kernels.hpp"

namespace {

using namespace deltakern::testplugins;

int32_t varlen_lying(void* p, const dk_call* c, DLManagedTensor** r, char* e, size_t n) {
  return run_varlen(p, c, r, e, n, {.in_place = false, .fill_only_nan = true});
}
int32_t update_lying(void* p, const dk_call* c, DLManagedTensor** r, char* e, size_t n) {
  return run_update(p, c, r, e, n, {.in_place = false, .fill_only_nan = true});
}

const dk_caps kCaps = {sizeof(dk_caps), 1, kCpu, 1, kF32Only, 2, 4, DK_LAYOUT_TIME_CONTIGUOUS};
const dk_op kOps[] = {
    {sizeof(dk_op), DK_OP_CAUSAL_CONV1D_VARLEN, kVarlenFreshSchema, &kCaps, nullptr, varlen_lying},
    {sizeof(dk_op), DK_OP_CAUSAL_CONV1D_UPDATE, kUpdateFreshSchema, &kCaps, nullptr, update_lying},
};
const dk_plugin kPlugin = {sizeof(dk_plugin),
                           DK_ABI_MAJOR,
                           DK_ABI_MINOR,
                           "liar_leaves_unwritten",
                           "test",
                           init_keep_host,
                           probe_cpu_only,
                           shutdown_nothing,
                           2,
                           kOps,
                           nullptr};

}  // namespace

DK_TEST_PLUGIN_EXPORT const dk_plugin* deltakern_plugin_entry(uint16_t, uint16_t) { return &kPlugin; }
