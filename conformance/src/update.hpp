// causal_conv1d_update cases: one decode call's tensors, its expectation and checks.
#pragma once

#include "contract.hpp"
#include "dtype.hpp"
#include "random.hpp"
#include "reference.hpp"
#include "tensor.hpp"
#include "varlen.hpp"

#include <deltakern/runtime.hpp>

#include <optional>
#include <string>
#include <vector>

namespace deltakern::conformance {

struct UpdateConfig {
  DType x = DType::f32, weight = DType::f32, bias = DType::f32, state = DType::f32;
  int64_t width = 4, dim = 16, state_len = 3, batch = 7, tokens = 1;
  bool three_d = false;                     // x (batch, D, Tq) rather than (batch, D); always for tokens > 1
  Layout layout = Layout::time_contiguous;  // of a 3-d x
  int64_t row_padding = 0;                  // a 2-d x: rows longer than D (a fused slice)
  bool has_bias = true;
  reference::Act act = reference::Act::none;
  bool circular = false;          // cache_seqlens given
  std::vector<uint8_t> padded;    // per row: index = pad_slot_id (needs indices)
  bool identity_indices = false;  // conv_state_indices = None
  int64_t pad_slot_id = -1;
  StateLayout state_layout = StateLayout::compact;
  int64_t extra_lines = 4;
  std::vector<int32_t> fixed_indices;  // non-empty: these state indices, not random ones
  // Per row (empty: none): an out-of-range state index to be skipped and flagged; the pool
  // then sits inside `margin_lines` lines of slack on each side (as VarlenConfig).
  std::vector<int32_t> out_of_range;
  int64_t margin_lines = 0;
  // How long after a call the arguments and results are looked at again (late writes).
  int64_t late_write_ms = 2;
  // causal_conv1d_update_out: the result goes into `out`, x's shape and layout with rows of its
  // own pitch, NaN-poisoned before each call.
  bool out_variant = false;

  int64_t lines() const { return batch + extra_lines; }
  bool flags_errors() const { return !out_of_range.empty(); }
};

struct UpdateInputs {
  TensorBuf x, states, weight;
  std::optional<TensorBuf> bias, state_indices, cache_seqlens;
  std::vector<int32_t> indices, seqlens;  // host copies (indices resolved)
  std::optional<TensorBuf> out;           // the out-variant's

  std::vector<NamedArg> args();  // schema order and names
};

UpdateInputs make_update_inputs(DLDevice device, const UpdateConfig& cfg, Random& rng);
void refill_update_inputs(UpdateInputs& in, const UpdateConfig& cfg, Random& rng);
CausalConv1dUpdateArgs update_args(const UpdateInputs& in, const UpdateConfig& cfg, void* stream);

// What the inputs were before the call, and the reference computed from that.
struct UpdateBefore {
  Snapshot bytes;
  HostImage x, states, weight;
  std::optional<HostImage> bias;
  std::optional<reference::Update> ref;
};
UpdateBefore capture(UpdateInputs& in, const UpdateConfig& cfg);

std::string check_update(const OpInfo& info, UpdateInputs& in, const UpdateConfig& cfg,
                         const UpdateBefore& before, const Tensor& result, uint64_t call,
                         std::string_view seed);

}  // namespace deltakern::conformance
