// causal_conv1d_update for short states and few tokens: one thread per (channel, row), state
// and x read straight into registers (consecutive threads are consecutive channels, so every
// access is coalesced in both state layouts). Two kernels: the general one (S <= 4, Tq <= 4, any
// strides and dtypes) and the lean one, the same arithmetic in decode's commonest shape with
// everything but the row's index compile-time.
#pragma once

#include <deltakern/plugin_sdk_cuda_ring.cuh>

#include <algorithm>

#include "conv1d_common.cuh"
#include "launch.h"

namespace deltakern::native {

// Weights loaded once per thread for all its rows. Two dependent round trips (the index, then the
// state row) and no barrier: what a small batch needs.
template <typename T_, int kS_>
struct UpdateDirectTraits {
  using T = T_;
  static constexpr int kS = kS_;
  static constexpr int kNThreads = 256;
  static constexpr int kMaxTokens = 4;
};

template <typename Kt>
__global__ void __launch_bounds__(Kt::kNThreads) update_direct_kernel(const UpdateParams p) {
  using T = typename Kt::T;
  constexpr int kS = Kt::kS, kDirectThreads = Kt::kNThreads, kDirectMaxTokens = Kt::kMaxTokens;
  wait_for_previous_grid();
  allow_next_grid();
  const int64_t c = static_cast<int64_t>(blockIdx.x) * kDirectThreads + threadIdx.x;
  if (c >= p.dim) return;
  const StateView& st = p.state;
  const ChannelTaps taps = load_taps(p.conv, c);
  const int first = kMaxWidth - p.conv.width;
  const bool silu = p.conv.silu;
  const int32_t tq = p.tokens;
  const int64_t b0 = static_cast<int64_t>(blockIdx.y) * p.rows_per_block;
  const int64_t b1 = min(b0 + p.rows_per_block, static_cast<int64_t>(p.batch));
#pragma unroll 2
  for (int64_t b = b0; b < b1; ++b) {
    // x and the ring position are requested before the row's index (two round trips, not three).
    const T* const xr = static_cast<const T*>(p.x) + b * p.x_batch_stride + c * p.x_chan_stride;
    float xv[kDirectMaxTokens], sv[kS];
#pragma unroll
    for (int t = 0; t < kDirectMaxTokens; ++t) xv[t] = t < tq ? to_float(xr[t * p.x_time_stride]) : 0.f;
    const bool circular = p.cache_seqlens.data != nullptr;
    const int64_t n = circular ? load_index(p.cache_seqlens, b) : 0;
    const int64_t line = state_line(p.state_indices, b, st, p.conv, c == 0);
    if (line < 0) continue;
    T* const outr = static_cast<T*>(p.out) + b * p.out_batch_stride + c * p.out_chan_stride;
#pragma unroll
    for (int j = 0; j < kS; ++j) sv[j] = load_float(st.data, state_offset(st, line, c, j), st.dtype);
    float out[kDirectMaxTokens];
    // Positions to store: all of them in shift mode, the ones this call's tokens wrote in circular mode.
    uint32_t written = (1u << kS) - 1;
    if (!circular) {
      // Shift: e = concat(state, x); e[i] for a compile-time i.
      auto e = [&](int i) {
        return i < 0 ? 0.f : (i < kS ? sv[i < kS ? i : 0] : xv[i - kS < kDirectMaxTokens ? i - kS : 0]);
      };
#pragma unroll
      for (int t = 0; t < kDirectMaxTokens; ++t)
        out[t] = conv_point<T>(taps, first, e(kS + t - 3), e(kS + t - 2), e(kS + t - 1), e(kS + t), silu);
      // New state s'[j] = e[tq + j], tq known at run time only: select it.
      float ns[kS];
#pragma unroll
      for (int j = 0; j < kS; ++j) {
        ns[j] = e(j);
#pragma unroll
        for (int q = 1; q <= kDirectMaxTokens; ++q)
          if (q == tq) ns[j] = e(q + j);
      }
#pragma unroll
      for (int j = 0; j < kS; ++j) sv[j] = ns[j];
    } else {
      // Circular: token t reads history at (n + t - 3 + k) mod S, then is written at (n + t) mod S.
      const int32_t n0 = static_cast<int32_t>(((n % kS) + kS) % kS);
      written = 0;
#pragma unroll
      for (int t = 0; t < kDirectMaxTokens; ++t) {
        if (t >= tq) break;
        float h[kHalo];
#pragma unroll
        for (int k = 0; k < kHalo; ++k) {
          const int32_t pos = ((n0 + t - kHalo + k) % kS + kS) % kS;
          h[k] = 0.f;
#pragma unroll
          for (int j = 0; j < kS; ++j)
            if (j == pos) h[k] = sv[j];
        }
        out[t] = conv_point<T>(taps, first, h[0], h[1], h[2], xv[t], silu);
        const int32_t w = (n0 + t) % kS;
        written |= 1u << w;
#pragma unroll
        for (int j = 0; j < kS; ++j)
          if (j == w) sv[j] = xv[t];
      }
    }
#pragma unroll
    for (int t = 0; t < kDirectMaxTokens; ++t)
      if (t < tq) outr[t * p.out_time_stride] = from_float<T>(out[t]);
#pragma unroll
    for (int j = 0; j < kS; ++j)
      if (written & (1u << j)) store_float(st.data, state_offset(st, line, c, j), st.dtype, sv[j]);
  }
}

// Rows per thread: enough blocks to fill the machine, then longer per-thread loops.
template <typename Kt, typename Kernel>
cudaError_t launch_update_direct(Kernel kernel, UpdateParams p, const LaunchOptions& o, cudaStream_t stream) {
  const int64_t chan_blocks = (p.dim + Kt::kNThreads - 1) / Kt::kNThreads;
  const int64_t target_blocks = static_cast<int64_t>(std::max(o.sm_count, 1)) * 8;
  int64_t rows = std::max<int64_t>(1, (p.batch * chan_blocks) / target_blocks);
  rows = std::min<int64_t>(rows, 16);
  p.rows_per_block = static_cast<int32_t>(rows);
  const int64_t blocks_y = (p.batch + rows - 1) / rows;
  if (chan_blocks > INT32_MAX || blocks_y > 65535) return cudaErrorInvalidValue;
  const dim3 grid(static_cast<unsigned>(chan_blocks), static_cast<unsigned>(blocks_y));
  return launch_kernel(kernel, grid, dim3(Kt::kNThreads), 0, stream, o.pdl, p);
}

// Decode at small batch in its commonest shape: one token, width 4, S = 3, weights, bias and
// state in x's dtype (the conv layers of Qwen3-Next and Kimi Linear), in shift or circular mode.
// With the rest compile-time, a thread's path is the row's index, then the state row (x, the taps
// and the ring position are loaded before the index is known), then the stores; 64 threads a
// block, so that batch 1 spreads over D / 64 SMs. Same arithmetic as the general kernel.
template <typename T_, bool kCircular_>
struct UpdateLeanTraits {
  using T = T_;
  static constexpr bool kCircular = kCircular_;  // cache_seqlens given: the state is a ring of 3
  static constexpr int kNThreads = 64;
};

template <typename Kt>
__global__ void __launch_bounds__(Kt::kNThreads) update_lean_kernel(const UpdateParams p) {
  using T = typename Kt::T;
  constexpr int kLeanThreads = Kt::kNThreads, kS = 3;
  wait_for_previous_grid();
  allow_next_grid();
  const int64_t c = static_cast<int64_t>(blockIdx.x) * kLeanThreads + threadIdx.x;
  const int64_t b = blockIdx.y;
  if (c >= p.dim) return;
  const ConvCommon& conv = p.conv;
  const StateView& st = p.state;
  const T* const w = static_cast<const T*>(conv.weight) + c * conv.w_chan_stride;
  ChannelTaps taps;
#pragma unroll
  for (int k = 0; k < kMaxWidth; ++k) taps.w[k] = to_float(__ldg(w + k * conv.w_tap_stride));
  taps.bias =
      conv.bias != nullptr ? to_float(__ldg(static_cast<const T*>(conv.bias) + c * conv.bias_stride)) : 0.f;
  const T* const xr = static_cast<const T*>(p.x) + b * p.x_batch_stride + c * p.x_chan_stride;
  T* const outr = static_cast<T*>(p.out) + b * p.out_batch_stride + c * p.out_chan_stride;
  const float xv = to_float(*xr);
  int32_t slot = 0;  // circular: where this token goes, and where the history starts
  if constexpr (Kt::kCircular) slot = static_cast<int32_t>(((load_index(p.cache_seqlens, b) % kS) + kS) % kS);
  const int64_t line = state_line(p.state_indices, b, st, conv, c == 0);
  if (line < 0) return;  // padded: out and the row stay as they are
  T* const row = static_cast<T*>(st.data) + line * st.line_stride + c * st.chan_stride;
  float s[kS];
#pragma unroll
  for (int j = 0; j < kS; ++j) s[j] = to_float(row[j * st.pos_stride]);
  float h[kS];  // the history, oldest first: the row as it lies (slot 0), or the ring from `slot` on
  plugin::cuda::ring_oldest_first(s, slot, h);
  *outr = from_float<T>(conv_point<T>(taps, 0, h[0], h[1], h[2], xv, conv.silu));
  if constexpr (Kt::kCircular) {
    row[slot * st.pos_stride] = from_float<T>(xv);
  } else {
    row[0] = from_float<T>(h[1]);
    row[st.pos_stride] = from_float<T>(h[2]);
    row[2 * st.pos_stride] = from_float<T>(xv);
  }
}

template <typename Kt, typename Kernel>
cudaError_t launch_update_lean(Kernel kernel, const UpdateParams& p, const LaunchOptions& o,
                               cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>((p.dim + Kt::kNThreads - 1) / Kt::kNThreads),
                  static_cast<unsigned>(p.batch));
  return launch_kernel(kernel, grid, dim3(Kt::kNThreads), 0, stream, o.pdl, p);
}

}  // namespace deltakern::native
