// Shared by the test-only plugins: a plain, obviously correct CPU implementation of both
// ops (f32 accumulation, the W-1 history kept in locals so x can be written in place)
// and the ABI boilerplate. It shares nothing with the conformance suite's reference.
#pragma once

#include <deltakern/op_schemas.h>
#include <deltakern/plugin_abi.h>

#include <cstddef>
#include <cstdint>

#define DK_TEST_PLUGIN_EXPORT extern "C" __attribute__((visibility("default")))

namespace deltakern::testplugins {

// The in-place contract, as the native backend declares it.
inline constexpr const char* kVarlenInPlaceSchema =
    "causal_conv1d_varlen(Tensor(a!) x, Tensor weight, Tensor? bias, Tensor(b!) conv_states, "
    "Tensor query_start_loc, Tensor? cache_indices, Tensor? has_initial_state, "
    "str activation=\"none\", int pad_slot_id=-1, int? max_seq_len=None) -> Tensor(a)";
inline constexpr const char* kUpdateInPlaceSchema =
    "causal_conv1d_update(Tensor(a!) x, Tensor(b!) conv_state, Tensor weight, Tensor? bias, "
    "Tensor? conv_state_indices, Tensor? cache_seqlens, str activation=\"none\", "
    "int pad_slot_id=-1) -> Tensor(a)";
// The fresh-output contract, as portable declares it.
inline constexpr const char* kVarlenFreshSchema =
    "causal_conv1d_varlen(Tensor x, Tensor weight, Tensor? bias, Tensor(b!) conv_states, "
    "Tensor query_start_loc, Tensor? cache_indices, Tensor? has_initial_state, "
    "str activation=\"none\", int pad_slot_id=-1, int? max_seq_len=None) -> Tensor";
inline constexpr const char* kUpdateFreshSchema =
    "causal_conv1d_update(Tensor x, Tensor(b!) conv_state, Tensor weight, Tensor? bias, "
    "Tensor? conv_state_indices, Tensor? cache_seqlens, str activation=\"none\", "
    "int pad_slot_id=-1) -> Tensor";

struct Behaviour {
  bool in_place = true;
  bool also_write_x = false;     // the liar: a fresh contract that writes x anyway
  bool read_qsl_always = false;  // the liar: a read_to_host it never declares
  bool write_past_end = false;   // the liar: one element more than its fresh output holds
  bool fill_only_nan = false;    // the liar: some fresh-output elements written only over a NaN
};

int32_t run_varlen(void* plugin, const dk_call* call, DLManagedTensor** result, char* error,
                   size_t error_size, Behaviour behaviour);
int32_t run_update(void* plugin, const dk_call* call, DLManagedTensor** result, char* error,
                   size_t error_size, Behaviour behaviour);

// The plugin instance is the host table itself.
int32_t init_keep_host(const dk_host* host, void** plugin, char* error, size_t error_size);
int32_t probe_cpu_only(void* plugin, int32_t device_type, char* why, size_t why_size);
void shutdown_nothing(void* plugin);

extern const DLDataType kFloatDtypes[3];  // f32, f16, bf16
extern const DLDataType kF32Only[1];
extern const dk_device_caps kCpu[1];  // CPU, no flags

}  // namespace deltakern::testplugins
