// A test plugin with one defect (kernels.hpp's Defect) and otherwise correct; tests/CMakeLists.txt
// builds one library per defect from this file:
//   DK_DEFECT_NAME   the plugin's name;
//   DK_DEFECT        the Defect it has;
//   DK_DEFECT_OPS    bits: 1 varlen, 2 update, 4 varlen_out, 8 update_out;
//   DK_DEFECT_DTYPE  0: float32, 1: bfloat16 (the numeric defects round to bfloat16);
//   DK_DEFECT_MIN_WIDTH  the narrowest width it declares (the widest is 4).
// It keeps the fresh-output contract (as portable does) and declares few widths and one layout,
// so that a conformance run of it stays short: the suite must catch each defect naming the case.

#include "kernels.hpp"

namespace {

using namespace deltakern::testplugins;

constexpr Behaviour kDefect = [] {
  Behaviour b;
  b.in_place = false;
  b.defect = Defect::DK_DEFECT;
  return b;
}();

int32_t varlen_defective(void* p, const dk_call* c, DLManagedTensor** r, char* e, size_t n) {
  return run_varlen(p, c, r, e, n, kDefect);
}
int32_t update_defective(void* p, const dk_call* c, DLManagedTensor** r, char* e, size_t n) {
  return run_update(p, c, r, e, n, kDefect);
}
constexpr Behaviour kOutDefect = [] {
  Behaviour b = kDefect;
  b.out_variant = true;
  return b;
}();
int32_t varlen_out_defective(void* p, const dk_call* c, DLManagedTensor** r, char* e, size_t n) {
  return run_varlen(p, c, r, e, n, kOutDefect);
}
int32_t update_out_defective(void* p, const dk_call* c, DLManagedTensor** r, char* e, size_t n) {
  return run_update(p, c, r, e, n, kOutDefect);
}

const DLDataType kDtype[1] = {DK_DEFECT_DTYPE == 1 ? DLDataType{kDLBfloat, 16, 1}
                                                   : DLDataType{kDLFloat, 32, 1}};
const dk_caps kCaps = {sizeof(dk_caps),          1, kCpu, 1, kDtype, DK_DEFECT_MIN_WIDTH, 4,
                       DK_LAYOUT_TIME_CONTIGUOUS};
[[maybe_unused]] const dk_op kVarlen = {
    sizeof(dk_op), DK_OP_CAUSAL_CONV1D_VARLEN, kVarlenFreshSchema, &kCaps, nullptr, varlen_defective};
[[maybe_unused]] const dk_op kUpdate = {
    sizeof(dk_op), DK_OP_CAUSAL_CONV1D_UPDATE, kUpdateFreshSchema, &kCaps, nullptr, update_defective};
[[maybe_unused]] const dk_op kVarlenOut = {
    sizeof(dk_op), DK_OP_CAUSAL_CONV1D_VARLEN_OUT, kVarlenOutSchema, &kCaps, nullptr, varlen_out_defective};
[[maybe_unused]] const dk_op kUpdateOut = {
    sizeof(dk_op), DK_OP_CAUSAL_CONV1D_UPDATE_OUT, kUpdateOutSchema, &kCaps, nullptr, update_out_defective};
const dk_op kOps[] = {
#if DK_DEFECT_OPS & 1
    kVarlen,
#endif
#if DK_DEFECT_OPS & 2
    kUpdate,
#endif
#if DK_DEFECT_OPS & 4
    kVarlenOut,
#endif
#if DK_DEFECT_OPS & 8
    kUpdateOut,
#endif
};
const dk_plugin kPlugin = {sizeof(dk_plugin), DK_ABI_MAJOR,   DK_ABI_MINOR,     DK_DEFECT_NAME, "test",
                           init_keep_host,    probe_cpu_only, shutdown_nothing, count_of(kOps), kOps,
                           check_errors_cpu};

}  // namespace

DK_TEST_PLUGIN_EXPORT const dk_plugin* deltakern_plugin_entry(uint16_t, uint16_t) { return &kPlugin; }
