// `standin`: declares and performs the in-place contract as the native backend does
// (x convolved in place and returned, no max_seq_len needed, no sync either way), so
// that contract is exercised on a machine without a GPU; and both out-variants.
#include "kernels.hpp"

namespace {

using namespace deltakern::testplugins;

int32_t varlen_in_place(void* p, const dk_call* c, DLManagedTensor** r, char* e, size_t n) {
  return run_varlen(p, c, r, e, n, {.in_place = true});
}
int32_t update_in_place(void* p, const dk_call* c, DLManagedTensor** r, char* e, size_t n) {
  return run_update(p, c, r, e, n, {.in_place = true});
}
int32_t varlen_out(void* p, const dk_call* c, DLManagedTensor** r, char* e, size_t n) {
  return run_varlen(p, c, r, e, n, {.in_place = false, .out_variant = true});
}
int32_t update_out(void* p, const dk_call* c, DLManagedTensor** r, char* e, size_t n) {
  return run_update(p, c, r, e, n, {.in_place = false, .out_variant = true});
}

const dk_caps kCaps = {sizeof(dk_caps), 1, kCpu, 3,
                       kFloatDtypes,    2, 4,    DK_LAYOUT_TIME_CONTIGUOUS | DK_LAYOUT_CHANNEL_LAST};
const dk_op kOps[] = {
    {sizeof(dk_op), DK_OP_CAUSAL_CONV1D_VARLEN, kVarlenInPlaceSchema, &kCaps, nullptr, varlen_in_place},
    {sizeof(dk_op), DK_OP_CAUSAL_CONV1D_UPDATE, kUpdateInPlaceSchema, &kCaps, nullptr, update_in_place},
    {sizeof(dk_op), DK_OP_CAUSAL_CONV1D_VARLEN_OUT, kVarlenOutSchema, &kCaps, nullptr, varlen_out},
    {sizeof(dk_op), DK_OP_CAUSAL_CONV1D_UPDATE_OUT, kUpdateOutSchema, &kCaps, nullptr, update_out},
};
const dk_plugin kPlugin = {sizeof(dk_plugin), DK_ABI_MAJOR,   DK_ABI_MINOR,     "standin", "test",
                           init_keep_host,    probe_cpu_only, shutdown_nothing, 4,         kOps,
                           check_errors_cpu};

}  // namespace

DK_TEST_PLUGIN_EXPORT const dk_plugin* deltakern_plugin_entry(uint16_t, uint16_t) { return &kPlugin; }
