// Shared by the test-only plugins: a plain, obviously correct CPU implementation of both
// ops (f32 accumulation, the W-1 history kept in locals so x can be written in place)
// and the ABI boilerplate. It is a backend (the in-place stand-in the suite is run against),
// not a reference: what a result should be is decided by the project's one float64
// reference (conformance/src/reference.cpp), with which it shares nothing.
#pragma once

#include <deltakern/op_schemas.h>
#include <deltakern/plugin_abi.h>

#include <cstddef>
#include <cstdint>

#define DK_TEST_PLUGIN_EXPORT extern "C" __attribute__((visibility("default")))

namespace deltakern::testplugins {

// An array's length: std::size without <iterator>, whose parsing was 60% of the compile time of
// each of the 68 test plugins (0.22 of 0.37 CPU-s).
template <class T, size_t N>
constexpr size_t count_of(const T (&)[N]) {
  return N;
}

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

// The out-variants' contract: out written, x never (portable and native declare the same).
inline constexpr const char* kVarlenOutSchema =
    "causal_conv1d_varlen_out(Tensor x, Tensor weight, Tensor? bias, Tensor(b!) conv_states, "
    "Tensor query_start_loc, Tensor? cache_indices, Tensor? has_initial_state, Tensor(a!) out, "
    "str activation=\"none\", int pad_slot_id=-1, int? max_seq_len=None) -> ()";
inline constexpr const char* kUpdateOutSchema =
    "causal_conv1d_update_out(Tensor x, Tensor(b!) conv_state, Tensor weight, Tensor? bias, "
    "Tensor? conv_state_indices, Tensor? cache_seqlens, Tensor(a!) out, str activation=\"none\", "
    "int pad_slot_id=-1) -> ()";

// One defect each for the test plugins of tests/plugins/defects.cpp: every one is correct except
// for this, and most only at the shapes engines use, so that only the full tier can see them.
enum class Defect {
  none,
  // at size
  writes_x_when_long,                    // a fresh backend that changes x when T > 2048
  writes_past_end_when_long,             // one element past its fresh output when T >= 2048
  skips_token_in_long_sequence,          // token 1000 of a sequence longer than 1000 never written
  drops_initial_state_in_long_sequence,  // a sequence longer than 1000 starts from zeros
  writes_bias_when_wide,                 // changes bias when D >= 64
  returns_bias_at_batch1,                // update: the result in bias's memory at batch 1
  wrong_beyond_tq3,                      // update: draft tokens 3 and on read a wrong tap
  wrong_at_wide_channels,                // channels from 1000 on lose their bias
  crashes_when_long,                     // SIGSEGV when T > 4096
  // numerics
  rounds_products_to_bf16,  // every product rounded to bf16 before it is added
  rounds_sum_to_bf16,       // the running sum rounded to bf16 after each add
  // clauses
  writes_out_of_range_line,     // an out-of-range cache index used as it is, nothing flagged
  skips_out_of_range_silently,  // skipped correctly, but never flagged
  static_workspace,             // the fresh result in a buffer of the plugin's own
  reuses_first_buffer,          // the first call's allocation returned by every later call
  result_in_conv_states,        // the fresh result placed in conv_states' memory
  late_write,                   // a thread writes into x just after run returned
  throwing_deleter,             // the result's deleter throws
  // the process (each strikes some calls only, so that the cases around it still run)
  exit_in_run,        // exit(0) in every varlen call: a process that ends "successfully" mid-case
  abort_in_run,       // abort() in update calls of width 2
  segfault_in_run,    // a store through a null pointer in every update call
  hang_in_run,        // sleeps forever in varlen calls of width 3 without bias, with silu
  writes_far_in_run,  // after an update of width 4, a write every 4 KiB up to 64 MiB past its output
  // the out-variants
  out_variant_writes_x,      // the result copied into x as well (an in-place kernel behind an out schema)
  out_variant_writes_slack,  // one element written just past out's last one in memory
};

struct Behaviour {
  bool in_place = true;
  bool out_variant = false;  // the call is an out-variant's: the result goes into its out
  Defect defect = Defect::none;
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
// Reads and clears the library's error word (an out-of-range cache index skipped sets it).
int32_t check_errors_cpu(void* plugin, DLDevice device, void* stream, uint32_t* flags, char* msg,
                         size_t msg_size);
int32_t probe_cpu_only(void* plugin, int32_t device_type, char* why, size_t why_size);
void shutdown_nothing(void* plugin);

extern const DLDataType kFloatDtypes[3];  // f32, f16, bf16
extern const DLDataType kF32Only[1];
extern const dk_device_caps kCpu[1];  // CPU, no flags

}  // namespace deltakern::testplugins
