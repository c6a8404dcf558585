// A test plugin that keeps the fresh-output contract's declarations and lies about exactly one
// thing; tests/CMakeLists.txt builds one library per lie from this file:
//   DK_LIAR_NAME    the plugin's name;
//   DK_LIAR_LIE     the Behaviour field it sets (kernels.hpp says what each one does wrong);
//   DK_LIAR_UPDATE  1 when it also declares causal_conv1d_update.
// The conformance suite must catch each one for its lie, and pass its declarations.

#include "kernels.hpp"

namespace {

using namespace deltakern::testplugins;

constexpr Behaviour kLie = [] {
  Behaviour b;
  b.in_place = false;
  b.DK_LIAR_LIE = true;
  return b;
}();

int32_t varlen_lying(void* p, const dk_call* c, DLManagedTensor** r, char* e, size_t n) {
  return run_varlen(p, c, r, e, n, kLie);
}
[[maybe_unused]] int32_t update_lying(void* p, const dk_call* c, DLManagedTensor** r, char* e, size_t n) {
  return run_update(p, c, r, e, n, kLie);
}

const dk_caps kCaps = {sizeof(dk_caps), 1, kCpu, 1, kF32Only, 2, 4, DK_LAYOUT_TIME_CONTIGUOUS};
const dk_op kOps[] = {
    {sizeof(dk_op), DK_OP_CAUSAL_CONV1D_VARLEN, kVarlenFreshSchema, &kCaps, nullptr, varlen_lying},
#if DK_LIAR_UPDATE
    {sizeof(dk_op), DK_OP_CAUSAL_CONV1D_UPDATE, kUpdateFreshSchema, &kCaps, nullptr, update_lying},
#endif
};
const dk_plugin kPlugin = {sizeof(dk_plugin), DK_ABI_MAJOR,   DK_ABI_MINOR,     DK_LIAR_NAME,   "test",
                           init_keep_host,    probe_cpu_only, shutdown_nothing, count_of(kOps), kOps,
                           check_errors_cpu};

}  // namespace

DK_TEST_PLUGIN_EXPORT const dk_plugin* deltakern_plugin_entry(uint16_t, uint16_t) { return &kPlugin; }
