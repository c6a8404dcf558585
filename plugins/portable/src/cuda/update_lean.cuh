// causal_conv1d_update (decode) at small batch in its commonest shape: one token, width 4, S = 3,
// weight, bias and state in x's dtype (the conv layers of Qwen3-Next and Kimi Linear), any
// strides. One thread per (channel, row), 64 threads a block, so that batch 1 spreads over D / 64
// SMs; everything but the row's index and ring position is compile-time, so a thread's path is
// short: x, the taps and the ring position requested first, then the index, then the state row,
// then the stores. The 16-byte update_vec_kernel, a thread per 8 channels with every layout and
// mode at run time, took batch 1 / 8 in 2.39-2.46 / 2.62-2.67 us, this kernel 1.60-1.63 / 1.97-1.99
// (H100, bf16, D = 8192, graph replay through the op, every state layout and mode; native's lean
// kernel 1.23-1.34 / 1.64-1.73).
#pragma once

#include "common.cuh"

#include <deltakern/plugin_sdk_cuda_ring.cuh>

namespace deltakern::portable::cuda {

using ::deltakern::plugin::cuda::ring_oldest_first;  // deltakern/plugin_sdk_cuda_ring.cuh

template <typename input_t_, bool kCircular_>
struct UpdateLeanTraits {
  using input_t = input_t_;
  static constexpr bool kCircular = kCircular_;  // cache_seqlens given: the state is a ring of S
  static constexpr int kNThreads = 64;
  static constexpr int kWidth = 4;
  static constexpr int kS = 3;
  static constexpr int kMaxBatch = 16;  // from here on update_vec_kernel's bytes per request win
};

// The call's shape is the lean kernel's (the host's half of the choice).
inline bool update_lean_shape(const UpdateParams& p) {
  using Kt = UpdateLeanTraits<float, false>;
  return p.batch < Kt::kMaxBatch && p.tokens == 1 && p.width == Kt::kWidth && p.state_len == Kt::kS &&
         !p.weight_f32 && !p.bias_f32 && !p.state_f32;
}

// Grid: (channel blocks, rows).
template <typename Ktraits>
__global__ __launch_bounds__(Ktraits::kNThreads) void update_lean_kernel(UpdateParams params) {
  using input_t = typename Ktraits::input_t;
  constexpr int kS = Ktraits::kS;
  static_assert(Ktraits::kWidth == kS + 1, "the history is the whole state");

  wait_for_previous_grid();  // launched with PDL on sm_90 (launch_with_pdl)
  allow_next_grid();

  const int64_t b = blockIdx.y;
  const int64_t c = int64_t(blockIdx.x) * Ktraits::kNThreads + threadIdx.x;
  if (c >= params.dim) return;
  const auto* const w = static_cast<const input_t*>(params.weight) + c * params.weight_c_stride;
  float taps[Ktraits::kWidth];
#pragma unroll
  for (int k = 0; k < Ktraits::kWidth; ++k) taps[k] = to_float(__ldg(w + k * params.weight_k_stride));
  const float bias = params.bias == nullptr
                         ? 0.f
                         : to_float(__ldg(static_cast<const input_t*>(params.bias) + c * params.bias_stride));
  const float xv =
      to_float(__ldg(static_cast<const input_t*>(params.x) + b * params.x_b_stride + c * params.x_c_stride));
  int slot = 0;  // circular: the ring slot this token goes to, and where the history starts
  if constexpr (Ktraits::kCircular) {
    slot = params.cache_seqlens[b * params.cache_seqlens_stride] % kS;
    if (slot < 0) slot += kS;
  }
  input_t* const out = static_cast<input_t*>(params.out) + b * params.out_b_stride + c * params.out_c_stride;
  const int64_t line = update_line(params, b, c == 0);
  if (line < 0) {
    *out = from_float<input_t>(0.f);
    return;
  }
  input_t* const row =
      static_cast<input_t*>(params.states) + line * params.state_l_stride + c * params.state_c_stride;
  float s[kS];
#pragma unroll
  for (int j = 0; j < kS; ++j) s[j] = to_float(row[j * params.state_s_stride]);
  float h[kS];  // the history, oldest first: shift mode's row as it lies (slot 0), or the ring from `slot` on
  ring_oldest_first(s, slot, h);
  // Same order of summation as update_kernel and the prefill kernels.
  float acc = bias;
#pragma unroll
  for (int k = 0; k < kS; ++k) acc += taps[k] * h[k];
  acc += taps[kS] * xv;
  *out = from_float<input_t>(params.silu ? silu<input_t>(acc) : acc);
  if constexpr (Ktraits::kCircular) {
    row[slot * params.state_s_stride] = from_float<input_t>(xv);
  } else {
#pragma unroll
    for (int j = 0; j + 1 < kS; ++j) row[j * params.state_s_stride] = from_float<input_t>(h[j + 1]);
    row[(kS - 1) * params.state_s_stride] = from_float<input_t>(xv);
  }
}

}  // namespace deltakern::portable::cuda
