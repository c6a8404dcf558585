// One in-place CPU plugin (the standin's behaviour) built against three versions of the ABI
// header: DK_VERSIONED_MINOR 0 (tests/abi/v1_0, the structs as ABI 1.0 released them), 1 (the
// current header) and 2 (tests/abi/v1_2, a field appended to every struct). A 1.1 core must load
// and route all three. State lengths above 64 are refused as native refuses them: a 1.0 plugin
// can say so only in supports(), which looks at the call's shapes; 1.1 and on declare limits.
// DK_VERSIONED_CUDA_ONLY declares CUDA alone (and is never asked to run on a CPU-only machine).
#include "kernels.hpp"

#include <cstdio>

namespace {

using namespace deltakern::testplugins;

// DK_VERSIONED_TIGHT: limits well inside the suite's shapes (state_len ..5, Tq ..2), so that the
// suite must leave out the cases they exclude and still test each limit's edge.
#if DK_VERSIONED_TIGHT
constexpr int64_t kMaxStateLen = 5, kMaxDraft = 2;
#else
constexpr int64_t kMaxStateLen = 64, kMaxDraft = 64;
#endif

int32_t varlen_in_place(void* p, const dk_call* c, DLManagedTensor** r, char* e, size_t n) {
  return run_varlen(p, c, r, e, n, {.in_place = true});
}
int32_t update_in_place(void* p, const dk_call* c, DLManagedTensor** r, char* e, size_t n) {
  return run_update(p, c, r, e, n, {.in_place = true});
}

#if DK_VERSIONED_MINOR == 0
// What a 1.0 plugin had to do: look at the call (conv_states is tensor 3 of varlen, conv_state
// tensor 1 of update; both (lines, D, S)).
int32_t refuse_long_state(const dk_call* call, size_t state_arg, char* why, size_t why_size) {
  const DLTensor* states = call->tensors[state_arg];
  if (states->shape[2] <= kMaxStateLen) return DK_OK;
  std::snprintf(why, why_size, "state length %lld exceeds %lld", static_cast<long long>(states->shape[2]),
                static_cast<long long>(kMaxStateLen));
  return DK_ERR_UNSUPPORTED;
}
int32_t varlen_supports(void*, const dk_call* call, char* why, size_t why_size) {
  return refuse_long_state(call, DK_VARLEN_CONV_STATES, why, why_size);
}
int32_t update_supports(void*, const dk_call* call, char* why, size_t why_size) {
  return refuse_long_state(call, DK_UPDATE_CONV_STATE, why, why_size);
}
constexpr auto* kVarlenSupports = varlen_supports;
constexpr auto* kUpdateSupports = update_supports;
#else
constexpr decltype(dk_op::supports) kVarlenSupports = nullptr;
constexpr decltype(dk_op::supports) kUpdateSupports = nullptr;
#endif

#if DK_VERSIONED_MINOR >= 2
#define DK_ADDED_IN_1_2 , 0xdeadbeefu  // what a 1.1 core must never read
#else
#define DK_ADDED_IN_1_2
#endif

#if DK_VERSIONED_CUDA_ONLY
const dk_device_caps kDevices[1] = {{sizeof(dk_device_caps), kDLCUDA, 80, 0 DK_ADDED_IN_1_2}};
int32_t probe(void*, int32_t, char* why, size_t why_size) {
  std::snprintf(why, why_size, "a test plugin that never runs");
  return DK_ERR_UNAVAILABLE;
}
#else
const dk_device_caps kDevices[1] = {{sizeof(dk_device_caps), kDLCPU, 0, 0 DK_ADDED_IN_1_2}};
constexpr auto* probe = probe_cpu_only;
#endif

#if DK_VERSIONED_MINOR >= 1
const dk_limit kVarlenLimits[] = {{sizeof(dk_limit), "state_len", 1, kMaxStateLen DK_ADDED_IN_1_2}};
const dk_limit kUpdateLimits[] = {{sizeof(dk_limit), "state_len", 1, kMaxStateLen DK_ADDED_IN_1_2},
                                  {sizeof(dk_limit), "tokens_per_update", 1, kMaxDraft DK_ADDED_IN_1_2}};
#define DK_LIMITS(table) , count_of(table), table DK_ADDED_IN_1_2
#else
#define DK_LIMITS(table)
#endif

constexpr uint32_t kLayouts = DK_LAYOUT_TIME_CONTIGUOUS | DK_LAYOUT_CHANNEL_LAST;
const dk_caps kVarlenCaps = {sizeof(dk_caps), 1, kDevices, 3,
                             kFloatDtypes,    2, 4,        kLayouts DK_LIMITS(kVarlenLimits)};
const dk_caps kUpdateCaps = {sizeof(dk_caps), 1, kDevices, 3,
                             kFloatDtypes,    2, 4,        kLayouts DK_LIMITS(kUpdateLimits)};
const dk_op kOps[] = {
    {sizeof(dk_op), DK_OP_CAUSAL_CONV1D_VARLEN, kVarlenInPlaceSchema, &kVarlenCaps, kVarlenSupports,
     varlen_in_place DK_ADDED_IN_1_2},
    {sizeof(dk_op), DK_OP_CAUSAL_CONV1D_UPDATE, kUpdateInPlaceSchema, &kUpdateCaps, kUpdateSupports,
     update_in_place DK_ADDED_IN_1_2},
};
const dk_plugin kPlugin = {sizeof(dk_plugin),
                           DK_ABI_MAJOR,
                           DK_ABI_MINOR,
                           DK_VERSIONED_NAME,
                           "test",
                           init_keep_host,
                           probe,
                           shutdown_nothing,
                           2,
                           kOps,
                           check_errors_cpu DK_ADDED_IN_1_2};
static_assert(DK_ABI_MINOR == DK_VERSIONED_MINOR, "built against the wrong copy of plugin_abi.h");

}  // namespace

DK_TEST_PLUGIN_EXPORT const dk_plugin* deltakern_plugin_entry(uint16_t, uint16_t) { return &kPlugin; }
