// causal_conv1d_varlen cases: building one call's tensors from a case description, the
// float64 expectation, and every check of one call's outcome.
#pragma once

#include "contract.hpp"
#include "dtype.hpp"
#include "random.hpp"
#include "reference.hpp"
#include "tensor.hpp"

#include <deltakern/runtime.hpp>

#include <optional>
#include <string>
#include <vector>

namespace deltakern::conformance {

enum class StateLayout { compact, padded_lines, channel_minor };
const char* to_string(StateLayout s);
// Strides of a (lines, D, S) pool in each layout.
std::vector<int64_t> state_strides(StateLayout layout, int64_t D, int64_t S);

// Outputs up to this many elements are compared in full; larger ones on a sample (see
// output_sample()). Every byte is still checked for the mutation contract and the guards.
inline constexpr int64_t kDenseElements = int64_t{1} << 22;

struct VarlenConfig {
  DType x = DType::f32, weight = DType::f32, bias = DType::f32, state = DType::f32;
  int64_t width = 4, dim = 16, state_len = 3;
  Layout layout = Layout::time_contiguous;
  bool has_bias = true;
  reference::Act act = reference::Act::none;
  enum class Init { none_tensor, all_false, mixed } init = Init::mixed;
  std::vector<int32_t> lengths;   // per sequence
  std::vector<uint8_t> padded;    // per sequence: cache index = pad_slot_id (needs indices)
  bool identity_indices = false;  // cache_indices = None
  int64_t pad_slot_id = -1;
  StateLayout state_layout = StateLayout::compact;
  int64_t row_padding = 0;             // time-contiguous rows longer than T
  bool byte_offset = false;            // element 0's offset in DLTensor::byte_offset
  int64_t extra_lines = 5;             // pool lines no sequence uses
  std::vector<int32_t> fixed_indices;  // non-empty: these cache indices, not random ones
  std::vector<uint8_t> fixed_initial;  // non-empty: these has_initial_state flags
  // Per sequence (empty: none): an out-of-range cache index instead of its line, which the
  // backend must skip and flag (check_errors). The pool then sits inside a margin of
  // `margin_lines` lines of slack on each side, so a write to a nearby wrong line is seen.
  std::vector<int32_t> out_of_range;
  int64_t margin_lines = 0;
  // How long after a call the arguments and results are looked at again (late writes).
  int64_t late_write_ms = 2;
  // causal_conv1d_varlen_out: the result goes into `out`, laid out as x with its own row pitch
  // (and, with byte_offset, an element 0 off 16-byte alignment), NaN-poisoned before each call.
  bool out_variant = false;

  int64_t batch() const { return static_cast<int64_t>(lengths.size()); }
  int64_t tokens() const;
  int64_t max_len() const;
  int64_t lines() const { return batch() + extra_lines; }
  bool flags_errors() const { return !out_of_range.empty(); }
};

// One call's tensors. Moves keep the DLTensor views valid.
struct VarlenInputs {
  TensorBuf x, weight;
  std::optional<TensorBuf> bias;
  TensorBuf states, query_start_loc;
  std::optional<TensorBuf> cache_indices, has_initial_state;
  std::vector<int32_t> qsl, indices;  // host copies (indices: resolved, identity included)
  std::vector<uint8_t> initial;       // host copy, all zeros for none
  std::optional<TensorBuf> out;       // the out-variant's

  std::vector<NamedArg> args();  // in schema order, by schema name (out last, when there is one)
};

// Tensors shaped per `cfg`, filled with random values from `rng`: x and weight never
// zero, state lines not read (no initial state, unused, padded) NaN garbage.
VarlenInputs make_varlen_inputs(DLDevice device, const VarlenConfig& cfg, Random& rng);
// New random values into the same tensors (x, weight, bias, states); metadata kept.
void refill_varlen_inputs(VarlenInputs& in, const VarlenConfig& cfg, Random& rng);

CausalConv1dVarlenArgs varlen_args(const VarlenInputs& in, const VarlenConfig& cfg,
                                   std::optional<int64_t> max_seq_len, void* stream);

// What the inputs were before the call, and the reference computed from that.
struct VarlenBefore {
  Snapshot bytes;
  HostImage x, weight, states;
  std::optional<HostImage> bias;
  std::optional<reference::Varlen> ref;
};
VarlenBefore capture(VarlenInputs& in, const VarlenConfig& cfg);

// Every check of one call's outcome; empty when all held. The stream must be synced.
// `call` is the PoisonScope the call ran in; `seed` picks the sample of large outputs.
std::string check_varlen(const OpInfo& info, VarlenInputs& in, const VarlenConfig& cfg,
                         const VarlenBefore& before, const Tensor& result, uint64_t call,
                         std::string_view seed);

}  // namespace deltakern::conformance
