// causal_conv1d_update (decode), element-wise: one thread per (row, channel), any strides, any
// dtype mix and any S. The 16-byte update_vec_kernel serves the engines' usual shapes; this one
// serves the rest, and is shaped for latency at batch 1 and coalesced channel-wise access at large
// batch.
#pragma once

#include "common.cuh"

namespace deltakern::portable::cuda {

template <int kNThreads_, int kWidth_, typename input_t_>
struct UpdateKernelTraits {
  using input_t = input_t_;
  static constexpr int kNThreads = kNThreads_;  // at most; the launch picks 64 or 256
  static constexpr int kWidth = kWidth_;
  // Shift mode: state entries a thread reads before it writes any. A row of S <= kStateRegs (the
  // usual S = W-1 up to W = 5) shifts in one round trip to memory; 8 would double the registers.
  static constexpr int kStateRegs = 4;
};

__device__ __forceinline__ int64_t wrap(int64_t v, int64_t m) {
  const int64_t r = v % m;
  return r < 0 ? r + m : r;
}

template <typename Ktraits>
__global__ __launch_bounds__(Ktraits::kNThreads) void update_kernel(UpdateParams params) {
  constexpr int kWidth = Ktraits::kWidth;
  constexpr int kStateRegs = Ktraits::kStateRegs;
  using input_t = typename Ktraits::input_t;

  wait_for_previous_grid();  // launched with PDL on sm_90 (launch_with_pdl)
  allow_next_grid();

  const int64_t b = blockIdx.x;
  const int64_t c = int64_t(blockIdx.y) * blockDim.x + threadIdx.x;
  if (c >= params.dim) return;
  const input_t* x = static_cast<const input_t*>(params.x) + b * params.x_b_stride + c * params.x_c_stride;
  input_t* out = static_cast<input_t*>(params.out) + b * params.out_b_stride + c * params.out_c_stride;

  float w[kWidth];
#pragma unroll
  for (int k = 0; k < kWidth; ++k) {
    w[k] = load_param<input_t>(params.weight, c * params.weight_c_stride + k * params.weight_k_stride,
                               params.weight_f32);
  }
  const float bias = params.bias == nullptr
                         ? 0.f
                         : load_param<input_t>(params.bias, c * params.bias_stride, params.bias_f32);

  // x's first token and the ring position do not depend on the row's line: requested with the
  // taps before the index, a small batch waits on two round trips to memory, not three.
  const float x_first = params.tokens > 0 ? to_float(__ldg(x)) : 0.f;
  const bool circular = params.cache_seqlens != nullptr;
  const int64_t n = circular ? int64_t(params.cache_seqlens[b * params.cache_seqlens_stride]) : 0;
  const int64_t line = update_line(params, b, c == 0);
  if (line < 0) {
    for (int64_t t = 0; t < params.tokens; ++t) out[t * params.out_t_stride] = from_float<input_t>(0.f);
    return;
  }

  const int64_t S = params.state_len;
  const int64_t state_row = line * params.state_l_stride + c * params.state_c_stride;

  // The W-1 entries before the first token. Later tokens take their history from the tokens before
  // them, held in registers: in circular mode, a slot a token of this call writes is never one a
  // later token of the call still needs from the old state, since W-1 <= S.
  float hist[kWidth - 1];
#pragma unroll
  for (int j = 0; j < kWidth - 1; ++j) {
    const int64_t i = circular ? wrap(n - (kWidth - 1) + j, S) : S - (kWidth - 1) + j;
    hist[j] = load_state<input_t>(params.states, state_row + i * params.state_s_stride, params.state_f32);
  }
  for (int64_t t = 0; t < params.tokens; ++t) {
    const float xt = t == 0 ? x_first : to_float(__ldg(x + t * params.x_t_stride));
    // Same order of summation as the prefill kernels, so prefill + updates == one prefill.
    float acc = bias;
#pragma unroll
    for (int k = 0; k < kWidth - 1; ++k) acc += w[k] * hist[k];
    acc += w[kWidth - 1] * xt;
    out[t * params.out_t_stride] = from_float<input_t>(params.silu ? silu<input_t>(acc) : acc);
#pragma unroll
    for (int j = 0; j + 1 < kWidth - 1; ++j) hist[j] = hist[j + 1];
    hist[kWidth - 2] = xt;
    if (circular) {
      store_state<input_t>(params.states, state_row + wrap(n + t, S) * params.state_s_stride, xt,
                           params.state_f32);
    }
  }
  if (circular) return;
  if (params.state_len == kWidth - 1) {
    // The usual S = W-1: the history now holds the last W-1 entries of concat(old row, x_b), which
    // is the new row, so it is written without reading the row again.
#pragma unroll
    for (int j = 0; j < kWidth - 1; ++j)
      store_state<input_t>(params.states, state_row + j * params.state_s_stride, hist[j], params.state_f32);
    return;
  }

  // Shift mode: the new row is the last S entries of concat(old row, x_b). Entry i comes from entry
  // Tq + i > i, so a pass that reads its entries before writing them never reads an entry it
  // already overwrote, and later passes read only above what earlier passes wrote.
  const int64_t tq = params.tokens;
  for (int64_t i0 = 0; i0 < S; i0 += kStateRegs) {
    float v[kStateRegs];
#pragma unroll
    for (int m = 0; m < kStateRegs; ++m) {
      const int64_t src = tq + i0 + m;
      v[m] = 0.f;
      if (i0 + m < S) {
        v[m] = src < S ? load_state<input_t>(params.states, state_row + src * params.state_s_stride,
                                             params.state_f32)
                       : to_float(__ldg(x + (src - S) * params.x_t_stride));
      }
    }
#pragma unroll
    for (int m = 0; m < kStateRegs; ++m) {
      if (i0 + m < S) {
        store_state<input_t>(params.states, state_row + (i0 + m) * params.state_s_stride, v[m],
                             params.state_f32);
      }
    }
  }
}

}  // namespace deltakern::portable::cuda
