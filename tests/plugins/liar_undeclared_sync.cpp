// `liar_undeclared_sync`: declares no DK_CAP_DERIVES_MAX_SEQ_LEN (so: never syncs) but
// reads query_start_loc through read_to_host on every call, max_seq_len given or not.
#include "kernels.hpp"

namespace {

using namespace deltakern::testplugins;

int32_t varlen_syncing(void* p, const dk_call* c, DLManagedTensor** r, char* e, size_t n) {
  return run_varlen(p, c, r, e, n, {.in_place = false, .read_qsl_always = true});
}

const dk_caps kCaps = {sizeof(dk_caps), 1, kCpu, 1, kF32Only, 2, 4, DK_LAYOUT_TIME_CONTIGUOUS};
const dk_op kOps[] = {
    {sizeof(dk_op), DK_OP_CAUSAL_CONV1D_VARLEN, kVarlenFreshSchema, &kCaps, nullptr, varlen_syncing},
};
const dk_plugin kPlugin = {sizeof(dk_plugin),
                           DK_ABI_MAJOR,
                           DK_ABI_MINOR,
                           "liar_undeclared_sync",
                           "test",
                           init_keep_host,
                           probe_cpu_only,
                           shutdown_nothing,
                           1,
                           kOps,
                           nullptr};

}  // namespace

DK_TEST_PLUGIN_EXPORT const dk_plugin* deltakern_plugin_entry(uint16_t, uint16_t) { return &kPlugin; }
