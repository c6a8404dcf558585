// causal_conv1d_varlen for channel-last x (stride(0) == 1, token stride >= D, e.g. a slice of a fused
// QKV projection): a block stages chunks of kChunkL tokens x one 128-byte line of channels in shared
// memory with 16-byte loads along the channels, then each thread convolves one channel over a run
// of tokens, and the result leaves through the same staging buffer. Each thread loads its rows of
// the next chunk into registers before the current chunk is convolved, so loads stay in flight
// across the barriers.
#pragma once

#include <algorithm>

#include "common.cuh"
#include "varlen_edges.cuh"
#include "varlen_time_cut.hpp"

namespace deltakern::portable::cuda {

template <int kNThreads_, int kWidth_, int kChunkL_, bool kIsVecLoad_, typename input_t_>
struct VarlenChannelLastKernelTraits {
  using input_t = input_t_;
  static constexpr int kNThreads = kNThreads_;
  static constexpr int kWidth = kWidth_;
  static constexpr int kChunkL = kChunkL_;  // tokens staged at once
  static constexpr bool kIsVecLoad = kIsVecLoad_;
  static constexpr int kNElts = Pack<input_t>::kN;
  // One 128-byte line of channels per token, 16 bytes per thread: each load instruction of a warp
  // covers four tokens with whole lines.
  static constexpr int kChunkC = 128 / int(sizeof(input_t));
  static constexpr int kNThreadsPerRow = kChunkC / kNElts;
  static constexpr int kNRowsPerLoad = kNThreads / kNThreadsPerRow;
  static constexpr int kNLoads = kChunkL / kNRowsPerLoad;
  static_assert(kNLoads * kNRowsPerLoad == kChunkL);
  static_assert(kWidth - 1 <= kNRowsPerLoad);  // one pass of threads loads the halo rows
  // Compute: consecutive threads take consecutive channels, so a warp's shared-memory accesses hit
  // distinct banks; kNThreadsPerC threads split a channel's tokens into runs of kLPerThread.
  static_assert(kChunkC >= 32);
  static constexpr int kNThreadsPerC = kNThreads / kChunkC;
  static_assert(kNThreadsPerC * kChunkC == kNThreads);
  static constexpr int kLPerThread = kChunkL / kNThreadsPerC;
  static_assert(kLPerThread * kNThreadsPerC == kChunkL && kLPerThread >= kWidth - 1);
  // State entries a thread reads per pass before the block writes any.
  static constexpr int kStateRegs = 4;
  // Blocks per SM that the register budget must allow (80 registers for 6): enough 16-byte loads
  // in flight, and what widths up to 4 fit without spilling.
  static constexpr int kMinBlocks = kWidth <= 4 ? 6 : 4;
};

template <typename Ktraits>
__global__ __launch_bounds__(Ktraits::kNThreads,
                             Ktraits::kMinBlocks) void varlen_channel_last_kernel(VarlenParams params,
                                                                                  int tile_chunks,
                                                                                  bool flat) {
  constexpr int kWidth = Ktraits::kWidth;
  constexpr int kNElts = Ktraits::kNElts;
  constexpr int kChunkL = Ktraits::kChunkL;
  constexpr int kChunkC = Ktraits::kChunkC;
  constexpr int kNRowsPerLoad = Ktraits::kNRowsPerLoad;
  constexpr int kLPerThread = Ktraits::kLPerThread;
  constexpr bool kIsVecLoad = Ktraits::kIsVecLoad;
  using input_t = typename Ktraits::input_t;

  // Padded by one pack per row so that the rows of a load pass start in different banks.
  alignas(16) __shared__ input_t x_smem[kChunkL][kChunkC + kNElts];
  // The W-1 entries before the chunk, in f32: in the first chunk of the first tile they are the prior
  // state, which may hold more precision than x.
  __shared__ float halo_smem[kWidth - 1][kChunkC];

  const int tid = threadIdx.x;
  const SeqInfo seq = flat ? flat_seq(params) : load_seq(params, blockIdx.y);
  const int64_t tile_start = seq.start + int64_t(blockIdx.x) * kChunkL * tile_chunks;
  const bool first_tile = blockIdx.x == 0;
  // The first tile always runs: it owns the state row, which changes even for an empty sequence.
  // Both exits are uniform over the block, ahead of any barrier.
  if (!first_tile && tile_start >= seq.end) return;
  if (first_tile && seq.out_of_range && blockIdx.z == 0 && tid == 0) {
    flag_error(params.error_word, DK_DEVICE_ERROR_CACHE_INDEX_OUT_OF_RANGE);
  }

  const int64_t c0 = int64_t(blockIdx.z) * kChunkC;
  const input_t* x = static_cast<const input_t*>(params.x);
  input_t* out = static_cast<input_t*>(params.out);
  // Load and store mapping: 16-byte channel group c_idx of token row l_idx (+ kNRowsPerLoad per pass).
  const int l_idx = tid / Ktraits::kNThreadsPerRow;
  const int c_idx = tid % Ktraits::kNThreadsPerRow;
  const int64_t cv = c0 + c_idx * kNElts;

  auto store_row = [&](int64_t t, const Pack<input_t>& pk) {
    if (t >= seq.end) return;
    if (kIsVecLoad) {
      if (cv < params.dim) store_pack(out + cv + t * params.out_t_stride, pk);
    } else {
#pragma unroll
      for (int i = 0; i < kNElts; ++i) {
        if (cv + i < params.dim) out[(cv + i) * params.out_c_stride + t * params.out_t_stride] = pk.v[i];
      }
    }
  };

  if (seq.skip) {
    Pack<input_t> zeros;
#pragma unroll
    for (int i = 0; i < kNElts; ++i) zeros.v[i] = from_float<input_t>(0.f);
    for (int chunk = 0; chunk < tile_chunks; ++chunk) {
      const int64_t chunk_start = tile_start + int64_t(chunk) * kChunkL;
      if (chunk_start >= seq.end) break;
#pragma unroll
      for (int l = 0; l < Ktraits::kNLoads; ++l) store_row(chunk_start + l * kNRowsPerLoad + l_idx, zeros);
    }
    return;
  }

  const int64_t state_base = seq.line * params.state_l_stride;
  // Entry of e = concat(prior, x_b) at absolute token t < seq.end, channel ch; zeros where the
  // prior does not reach back that far or there is none.
  auto value_at = [&](int64_t t, int64_t ch) -> float {
    if (ch >= params.dim) return 0.f;
    if (t >= seq.start) return to_float(__ldg(x + ch * params.x_c_stride + t * params.x_t_stride));
    const int64_t i = params.state_len - (seq.start - t);
    if (!seq.has_init || i < 0) return 0.f;
    return load_state<input_t>(
        params.states, state_base + ch * params.state_c_stride + i * params.state_s_stride, params.state_f32);
  };

  // This thread's kNLoads token rows (16 bytes of channels each) of a chunk, zeros past the
  // sequence's end.
  Pack<input_t> rows[Ktraits::kNLoads];
  auto load_rows = [&](int64_t chunk_start) {
#pragma unroll
    for (int l = 0; l < Ktraits::kNLoads; ++l) {
      const int64_t t = chunk_start + l * kNRowsPerLoad + l_idx;
#pragma unroll
      for (int i = 0; i < kNElts; ++i) rows[l].v[i] = from_float<input_t>(0.f);
      if (t < seq.end) {
        if (kIsVecLoad) {
          if (cv < params.dim) rows[l] = load_pack(x + cv + t * params.x_t_stride);
        } else {
#pragma unroll
          for (int i = 0; i < kNElts; ++i) {
            if (cv + i < params.dim)
              rows[l].v[i] = __ldg(x + (cv + i) * params.x_c_stride + t * params.x_t_stride);
          }
        }
      }
    }
  };
  load_rows(tile_start);

  const int row = tid % kChunkC;  // compute: channel within the tile
  const int col = tid / kChunkC;  // compute: run of tokens within the chunk
  const int64_t ch = c0 + row;
  float w[kWidth];
  float bias = 0.f;
#pragma unroll
  for (int k = 0; k < kWidth; ++k) w[k] = 0.f;
  if (ch < params.dim) {
#pragma unroll
    for (int k = 0; k < kWidth; ++k) {
      w[k] = load_param<input_t>(params.weight, ch * params.weight_c_stride + k * params.weight_k_stride,
                                 params.weight_f32);
    }
    if (params.bias != nullptr)
      bias = load_param<input_t>(params.bias, ch * params.bias_stride, params.bias_f32);
  }

#pragma unroll 1
  for (int chunk = 0; chunk < tile_chunks; ++chunk) {
    const int64_t chunk_start = tile_start + int64_t(chunk) * kChunkL;
    if (chunk_start >= seq.end) break;  // uniform over the block
    // Today a thread's loads overwrite only the slots its own stores just read; the barrier keeps
    // the chunks independent of that mapping for a few cycles per chunk.
    if (chunk > 0) __syncthreads();
#pragma unroll
    for (int l = 0; l < Ktraits::kNLoads; ++l)
      store_pack_shared(&x_smem[l * kNRowsPerLoad + l_idx][c_idx * kNElts], rows[l]);
    // The next chunk's rows are loaded now, so that they are in flight while this chunk is
    // convolved and stored (without it a block has loads in flight only between its barriers).
    if (chunk + 1 < tile_chunks) load_rows(chunk_start + kChunkL);
    if (l_idx < kWidth - 1) {
      // Only the first chunk of the first tile reaches before the sequence; other halos are x.
      const int64_t t = chunk_start - (kWidth - 1) + l_idx;
      if (kIsVecLoad && t >= seq.start && cv < params.dim) {
        const Pack<input_t> pk = load_pack(x + cv + t * params.x_t_stride);
#pragma unroll
        for (int i = 0; i < kNElts; ++i) halo_smem[l_idx][c_idx * kNElts + i] = to_float(pk.v[i]);
      } else {
#pragma unroll
        for (int i = 0; i < kNElts; ++i) halo_smem[l_idx][c_idx * kNElts + i] = value_at(t, cv + i);
      }
    }
    __syncthreads();

    float xw[kWidth - 1 + kLPerThread];
#pragma unroll
    for (int i = 0; i < kWidth - 1; ++i) {
      xw[i] = col == 0 ? halo_smem[i][row] : to_float(x_smem[col * kLPerThread + i - (kWidth - 1)][row]);
    }
#pragma unroll
    for (int i = 0; i < kLPerThread; ++i) xw[kWidth - 1 + i] = to_float(x_smem[col * kLPerThread + i][row]);

    float o[kLPerThread];
#pragma unroll
    for (int i = 0; i < kLPerThread; ++i) {
      o[i] = bias;
#pragma unroll
      for (int k = 0; k < kWidth; ++k) o[i] += w[k] * xw[i + k];
    }
    if (params.silu) {  // one branch per run, not one per element
#pragma unroll
      for (int i = 0; i < kLPerThread; ++i) o[i] = silu<input_t>(o[i]);
    }
    // The outputs go back through the staging buffer (rounded once, to x's dtype) to leave with the
    // same 16-byte, line-wide stores as x came in.
    __syncthreads();
#pragma unroll
    for (int i = 0; i < kLPerThread; ++i) x_smem[col * kLPerThread + i][row] = from_float<input_t>(o[i]);
    __syncthreads();
#pragma unroll
    for (int l = 0; l < Ktraits::kNLoads; ++l) {
      const int r = l * kNRowsPerLoad + l_idx;
      store_row(chunk_start + r, load_pack_shared(&x_smem[r][c_idx * kNElts]));
    }
  }

  if (!first_tile || flat) return;
  // The new row is the last S entries of e. Only the first tile reads the prior (its halo, ordered
  // before the barriers above) and only it writes the row, so no other tile can race with it.
  constexpr int kRows = Ktraits::kNThreadsPerC;
  constexpr int kRegs = Ktraits::kStateRegs;
  const int64_t len = seq.end - seq.start;
  const int64_t state_row = state_base + ch * params.state_c_stride;
  for (int64_t i0 = 0; i0 < params.state_len; i0 += kRows * kRegs) {
    float v[kRegs];
#pragma unroll
    for (int m = 0; m < kRegs; ++m) {
      const int64_t i = i0 + col + m * kRows;
      v[m] = 0.f;
      if (ch < params.dim && i < params.state_len) {
        const int64_t rel = len - params.state_len + i;  // token of the sequence, or before it
        if (rel >= 0) {
          v[m] = to_float(__ldg(x + ch * params.x_c_stride + (seq.start + rel) * params.x_t_stride));
        } else if (seq.has_init) {
          v[m] = load_state<input_t>(params.states, state_row + (i + len) * params.state_s_stride,
                                     params.state_f32);
        }
      }
    }
    // For len < S the row shifts left: a thread reads the entry another thread of this pass
    // overwrites. Later passes only read entries above those written so far.
    __syncthreads();
#pragma unroll
    for (int m = 0; m < kRegs; ++m) {
      const int64_t i = i0 + col + m * kRows;
      if (ch < params.dim && i < params.state_len) {
        store_state<input_t>(params.states, state_row + i * params.state_s_stride, v[m], params.state_f32);
      }
    }
  }
}

// Picks the instantiation, the grid, the tile length and the flat walk; `launch(Ktraits{}, grid,
// tile_chunks, flat)` enqueues it.
template <typename input_t, class Launch>
void varlen_channel_last_dispatch(const VarlenParams& p, int64_t max_seq_len, const TilingOverride& force,
                                  Launch&& launch) {
  constexpr int kNThreads = 128;
  constexpr int kChunkL = 64;
  constexpr int kChunkC = 128 / int(sizeof(input_t));  // channels a block stages
  constexpr int kNElts = Pack<input_t>::kN;
  // Vector access needs every 16-byte channel group aligned and inside D: unit channel stride,
  // token strides and D multiples of a pack, aligned bases. Anything else goes element-wise.
  const bool vec = p.x_c_stride == 1 && p.out_c_stride == 1 && p.dim % kNElts == 0 &&
                   p.x_t_stride % kNElts == 0 && p.out_t_stride % kNElts == 0 && aligned16(p.x) &&
                   aligned16(p.out);
  // A tile is tile_chunks chunks, run in order and stopped at the sequence's end: a short sequence
  // costs one chunk, a long one amortises the block's start. Four, from a sweep on the H200 (D=8192
  // and 4096, 8k to 128k tokens, 1 / 8 / 64 sequences: 2, 8, 16 or 32 chunks were never better by
  // more than the noise, and up to 14 points worse at 8k tokens).
  const bool flat = use_flat_walk_channel_last(p.batch, p.tokens, max_seq_len, force);
  const int64_t batch = flat ? 1 : p.batch;
  if (flat) max_seq_len = p.tokens;
  const int64_t channel_blocks = ceil_div(p.dim, int64_t(kChunkC));
  int tile_chunks = 4;
  if (force.chunks != 0) tile_chunks = force.chunks;
  width_switch(p.width, [&](auto width) {
    bool_switch(vec, [&](auto is_vec) {
      using Ktraits = VarlenChannelLastKernelTraits<kNThreads, decltype(width)::value, kChunkL,
                                                    decltype(is_vec)::value, input_t>;
      static_assert(Ktraits::kChunkC == kChunkC);
      const int64_t tiles = std::max<int64_t>(1, ceil_div(max_seq_len, int64_t(kChunkL) * tile_chunks));
      launch(Ktraits{}, make_grid(tiles, batch, channel_blocks), tile_chunks, flat);
    });
  });
}

}  // namespace deltakern::portable::cuda
