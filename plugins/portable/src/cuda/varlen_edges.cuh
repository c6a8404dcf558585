// The flat walk: when a call's sequences are short against x, the prefill kernels convolve x as one
// sequence [0, T) with no state, so any mix of lengths runs like one long sequence (the grid has one
// row of tiles, none idle, no per-sequence start-up). Only each sequence's first W-1 outputs are then
// wrong (their windows reached into the sequence before), its state row is not written, and a
// padded sequence holds convolved values instead of zeros: varlen_edges_kernel repairs all three,
// one thread per (sequence, channel), reading only x, which a fresh output leaves intact.
#pragma once

#include "common.cuh"
#include "launch.hpp"

namespace deltakern::portable::cuda {

// The flat walk treats x as this one sequence.
__device__ __forceinline__ SeqInfo flat_seq(const VarlenParams& p) {
  return SeqInfo{0, p.tokens, 0, false, false, false};
}

// A separate launch, so every raw output is written before it is replaced; each state row is read
// before it is written, by the same thread. Same arithmetic, in the same order, as the per-sequence
// walks, so the two cuts give bit-identical results. Consecutive threads take consecutive channels:
// coalesced for channel-last x, a row apart for time-contiguous x (a few entries per row). The
// work per thread is a few loads and stores, so the kernel is latency-bound: every load that does
// not depend on another is issued before the first store (two round trips for S <= kStateRegs).
constexpr int kEdgeThreads = 128;
template <typename input_t, int kWidth>
__global__ __launch_bounds__(kEdgeThreads) void varlen_edges_kernel(VarlenParams params) {
  constexpr int kStateRegs = 4;
  const int64_t c = int64_t(blockIdx.y) * kEdgeThreads + threadIdx.x;
  const bool live = c < params.dim;
  const int64_t cc = live ? c : 0;  // loads stay in bounds; a dead thread stores nothing
  // Round trip 1: the sequence and the channel's taps.
  const SeqInfo seq = load_seq(params, blockIdx.x);
  float w[kWidth];
#pragma unroll
  for (int k = 0; k < kWidth; ++k)
    w[k] = load_param<input_t>(params.weight, cc * params.weight_c_stride + k * params.weight_k_stride,
                               params.weight_f32);
  const float bias = params.bias != nullptr
                         ? load_param<input_t>(params.bias, cc * params.bias_stride, params.bias_f32)
                         : 0.f;
  if (seq.out_of_range && c == 0) flag_error(params.error_word, DK_DEVICE_ERROR_CACHE_INDEX_OUT_OF_RANGE);
  if (!live) return;
  const input_t* x = static_cast<const input_t*>(params.x) + c * params.x_c_stride;
  input_t* out = static_cast<input_t*>(params.out) + c * params.out_c_stride;
  if (seq.skip) {
    for (int64_t t = seq.start; t < seq.end; ++t) out[t * params.out_t_stride] = from_float<input_t>(0.f);
    return;
  }
  const int64_t S = params.state_len;
  const int64_t len = seq.end - seq.start;
  const int64_t row = seq.line * params.state_l_stride + c * params.state_c_stride;
  auto prior = [&](int64_t j) {
    return seq.has_init
               ? load_state<input_t>(params.states, row + j * params.state_s_stride, params.state_f32)
               : 0.f;
  };
  // e = concat(prior, x_b) at absolute token a < seq.end. x is read through the read-only path: a
  // fresh output never aliases it.
  auto entry = [&](int64_t a) {
    if (a >= seq.start) return to_float(__ldg(x + a * params.x_t_stride));
    const int64_t j = S - (seq.start - a);
    return j >= 0 ? prior(j) : 0.f;
  };
  // New state entry j: the last S entries of e. For len < S the row shifts left: entry j reads old
  // entry j + len, above every entry written before it.
  auto new_state = [&](int64_t j) {
    const int64_t rel = len - S + j;
    return j >= S     ? 0.f
           : rel >= 0 ? to_float(__ldg(x + (seq.start + rel) * params.x_t_stride))
                      : prior(j + len);
  };
  // Round trip 2: the windows of the first W-1 outputs (entries start-(W-1) .. start+W-2) and the
  // first kStateRegs entries of the new state row.
  constexpr int kSpan = 2 * kWidth - 2;
  float e[kSpan];
#pragma unroll
  for (int i = 0; i < kSpan; ++i) {
    const int64_t a = seq.start - (kWidth - 1) + i;
    e[i] = a < seq.end ? entry(a) : 0.f;
  }
  float v[kStateRegs];
#pragma unroll
  for (int m = 0; m < kStateRegs; ++m) v[m] = new_state(m);
#pragma unroll
  for (int i = 0; i < kWidth - 1; ++i) {
    const int64_t t = seq.start + i;
    if (t >= seq.end) break;
    float o = bias;
#pragma unroll
    for (int k = 0; k < kWidth; ++k) o += w[k] * e[i + k];
    if (params.silu) o = silu<input_t>(o);
    out[t * params.out_t_stride] = from_float<input_t>(o);
  }
  for (int64_t j0 = 0;;) {
#pragma unroll
    for (int m = 0; m < kStateRegs; ++m) {
      if (j0 + m < S)
        store_state<input_t>(params.states, row + (j0 + m) * params.state_s_stride, v[m], params.state_f32);
    }
    j0 += kStateRegs;
    if (j0 >= S) break;
#pragma unroll
    for (int m = 0; m < kStateRegs; ++m) v[m] = new_state(j0 + m);
  }
}

// Enqueues the repair after a flat walk of x.
template <typename input_t, int kWidth>
void launch_varlen_edges(const VarlenParams& p, cudaStream_t stream) {
  const dim3 grid = make_grid(p.batch, ceil_div(p.dim, int64_t(kEdgeThreads)), 1);
  varlen_edges_kernel<input_t, kWidth><<<grid, kEdgeThreads, 0, stream>>>(p);
}

}  // namespace deltakern::portable::cuda
