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
//
// Time-contiguous x (kSectors): a head's W-1 outputs are a few bytes of a 32-byte sector that the
// walk wrote long before, so DRAM would read the sector back to merge them. Where the sector's other
// tokens are plain outputs (windows inside their own sequence: the sequence before starts at least
// W-1 tokens before the sector and is not padded, this one runs past it), the thread rewrites the
// whole sector, those tokens recomputed bit for bit as the walk computed them (H200, bf16, 64 x 8192
// (sequence, channel) pairs: the repair's head stores cost 56 us as partial writes, 17 as whole
// sectors). Otherwise it writes the head tokens alone.
constexpr int kEdgeThreads = 128;
template <typename input_t, int kWidth, bool kSectors>
__global__ __launch_bounds__(kEdgeThreads) void varlen_edges_kernel(VarlenParams params) {
  constexpr int kStateRegs = 4;
  const int64_t c = int64_t(blockIdx.y) * kEdgeThreads + threadIdx.x;
  const bool live = c < params.dim;
  const int64_t cc = live ? c : 0;  // loads stay in bounds; a dead thread stores nothing
  // Round trip 1: the sequence (and the one before it), and the channel's taps.
  const SeqInfo seq = load_seq(params, blockIdx.x);
  SeqInfo prev{};
  if (kSectors && blockIdx.x > 0) prev = load_seq(params, blockIdx.x - 1);
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
  // Whole sectors [a0, a0 + nsec * kSec) over the head, where they may be rewritten.
  constexpr int kPack = Pack<input_t>::kN, kSec = 32 / int(sizeof(input_t));
  static_assert(kSec == 2 * kPack);
  const int64_t head_end = min(seq.start + kWidth - 1, seq.end);
  int64_t a0 = 0;
  int nsec = 0;
  if constexpr (kSectors) {
    const int64_t off = int64_t(reinterpret_cast<uintptr_t>(out) / sizeof(input_t)) % kSec;
    a0 = seq.start - (seq.start + off) % kSec;
    const int n = head_end > seq.start ? int((head_end - 1 - a0) / kSec) + 1 : 0;
    // The sector lies in the row (its first token is not before token 0). Tokens before the
    // sequence in it: outputs of the sequence before, far enough from its start (or, before the
    // first sequence, outputs of no sequence, which the walk left as it computed them); after the
    // head: this sequence's.
    const bool before = a0 == seq.start || blockIdx.x == 0 || (!prev.skip && prev.start <= a0 - (kWidth - 1));
    if (a0 >= 0 && before && seq.end >= a0 + n * kSec) nsec = n;
  }
  // Round trip 2: the windows of the first W-1 outputs (entries start-(W-1) .. start+W-2; over
  // whole sectors only the prior ones, the sector's window holds the others) and the first
  // kStateRegs entries of the new state row.
  constexpr int kSpan = 2 * kWidth - 2;
  float e[kSpan];
#pragma unroll
  for (int i = 0; i < kSpan; ++i) {
    const int64_t a = seq.start - (kWidth - 1) + i;
    e[i] = a < seq.end && (nsec == 0 || a < seq.start) ? entry(a) : 0.f;
  }
  float v[kStateRegs];
#pragma unroll
  for (int m = 0; m < kStateRegs; ++m) v[m] = new_state(m);

  // A sector's window: tokens a-(W-1) .. a+kSec-1 of x (zeros before token 0, as the flat walk).
  float xs[kWidth - 1 + kSec];
  auto load_sector = [&](int64_t a) {
#pragma unroll
    for (int j = 0; j < kWidth - 1; ++j)
      xs[j] = a - (kWidth - 1) + j >= 0 ? to_float(__ldg(x + a - (kWidth - 1) + j)) : 0.f;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const Pack<input_t> pk = load_pack(x + a + h * kPack);
#pragma unroll
      for (int i = 0; i < kPack; ++i) xs[kWidth - 1 + h * kPack + i] = to_float(pk.v[i]);
    }
  };
  // Token u's window entry at token u-(W-1)+k: the prior (e) where u is in the sequence and the entry
  // before it, x otherwise.
  auto store_sector = [&](int64_t a) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      Pack<input_t> pk;
#pragma unroll
      for (int i = 0; i < kPack; ++i) {
        const int64_t u = a + h * kPack + i;
        float o = bias;
#pragma unroll
        for (int k = 0; k < kWidth; ++k) {
          const int64_t tok = u - (kWidth - 1) + k;
          const float xe = xs[h * kPack + i + k];
          float pe = xe;
          if (u >= seq.start && tok < seq.start) {
            // e[tok - (start - (W-1))] by selects: a run-time index would put e in local memory.
            const int64_t idx = tok - (seq.start - (kWidth - 1));
#pragma unroll
            for (int j = 0; j < kWidth - 1; ++j) pe = idx == j ? e[j] : pe;
          }
          o += w[k] * pe;
        }
        if (params.silu) o = silu<input_t>(o);
        pk.v[i] = from_float<input_t>(o);
      }
      store_pack(out + a + h * kPack, pk);
    }
  };
  if (nsec > 0) {
    load_sector(a0);
    store_sector(a0);
    if (nsec > 1) {
      load_sector(a0 + kSec);
      store_sector(a0 + kSec);
    }
  } else {
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
  // Whole sectors need unit token strides and 16-byte aligned rows of x and out.
  constexpr int kPack = Pack<input_t>::kN;
  const bool sectors = p.x_t_stride == 1 && p.out_t_stride == 1 && p.x_c_stride % kPack == 0 &&
                       p.out_c_stride % kPack == 0 && aligned16(p.x) && aligned16(p.out);
  bool_switch(sectors, [&](auto is_sectors) {
    varlen_edges_kernel<input_t, kWidth, decltype(is_sectors)::value><<<grid, kEdgeThreads, 0, stream>>>(p);
  });
}

}  // namespace deltakern::portable::cuda
