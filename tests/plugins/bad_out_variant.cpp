// An out-variant whose schema breaks the out-variant's rule (tests/CMakeLists.txt builds one per
// DK_BAD_OUT): `writes_x` annotates x as written too, `out_unwritten` leaves out unannotated. The core
// must refuse the plugin at load, naming the op and the rule, whatever its kernels would do.
#include "kernels.hpp"

namespace {

using namespace deltakern::testplugins;

#define DK_BAD_OUT_writes_x 1
#define DK_BAD_OUT_out_unwritten 2
#define DK_BAD_OUT_ID_(name) DK_BAD_OUT_##name
#define DK_BAD_OUT_ID(name) DK_BAD_OUT_ID_(name)

int32_t varlen_out(void* p, const dk_call* c, DLManagedTensor** r, char* e, size_t n) {
  return run_varlen(p, c, r, e, n, {.in_place = false, .out_variant = true});
}

const dk_caps kCaps = {sizeof(dk_caps), 1, kCpu, 1, kF32Only, 2, 4, DK_LAYOUT_TIME_CONTIGUOUS};
const dk_op kOps[] = {
    {sizeof(dk_op), DK_OP_CAUSAL_CONV1D_VARLEN_OUT,
#if DK_BAD_OUT_ID(DK_BAD_OUT) == DK_BAD_OUT_writes_x
     "causal_conv1d_varlen_out(Tensor(c!) x, Tensor weight, Tensor? bias, Tensor(b!) conv_states, "
     "Tensor query_start_loc, Tensor? cache_indices, Tensor? has_initial_state, Tensor(a!) out, "
     "str activation=\"none\", int pad_slot_id=-1, int? max_seq_len=None) -> ()",
#else
     "causal_conv1d_varlen_out(Tensor x, Tensor weight, Tensor? bias, Tensor(b!) conv_states, "
     "Tensor query_start_loc, Tensor? cache_indices, Tensor? has_initial_state, Tensor out, "
     "str activation=\"none\", int pad_slot_id=-1, int? max_seq_len=None) -> ()",
#endif
     &kCaps, nullptr, varlen_out},
};
const dk_plugin kPlugin = {sizeof(dk_plugin),
                           DK_ABI_MAJOR,
                           DK_ABI_MINOR,
                           "bad_out_variant",
                           "test",
                           init_keep_host,
                           probe_cpu_only,
                           shutdown_nothing,
                           1,
                           kOps,
                           nullptr};

}  // namespace

DK_TEST_PLUGIN_EXPORT const dk_plugin* deltakern_plugin_entry(uint16_t, uint16_t) { return &kPlugin; }
