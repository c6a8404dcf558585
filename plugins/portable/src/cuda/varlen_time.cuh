// causal_conv1d_varlen for time-contiguous x (stride(1) == 1). A row group of L lanes (8, 16 or 32,
// chosen per call from max_seq_len) walks one channel's token tile in steps of L 16-byte runs, so
// each step is L * 16 contiguous bytes. The W-1 entries before a run are the tail of the run before
// it, fetched by shuffle: from the previous lane, or for the first lanes from the last lanes of the
// previous step. A row group walks several channels in turn, and its loads run kDepth runs ahead of
// the compute through a ring of registers that crosses channel boundaries, so a lane keeps kDepth
// loads in flight whether sequences are long or short. What a block needs once per channel (taps,
// bias and, in a sequence's first tile, the sequence's head: its first run and the W-1 entries
// before it, prior state included) is staged in shared memory at the block's start, and the first
// tile writes the new state rows of all its channels at its end: the walk itself reads only x and
// writes only out.
#pragma once

#include <algorithm>

#include "common.cuh"
#include "varlen_edges.cuh"
#include "varlen_time_cut.hpp"

namespace deltakern::portable::cuda {

template <int kNThreads_, int kWidth_, int kDepth_, int kMaxIters_, bool kIsVecLoad_, typename input_t_>
struct VarlenTimeKernelTraits {
  using input_t = input_t_;
  static constexpr int kNThreads = kNThreads_;
  static_assert(kNThreads % 32 == 0);
  static constexpr int kWidth = kWidth_;
  static constexpr int kNElts = Pack<input_t>::kN;  // tokens per run
  static constexpr int kDepth = kDepth_;            // runs a lane has in flight
  static constexpr int kMaxIters = kMaxIters_;      // channels a row group walks, at most
  static constexpr int kMinLanes = 8;
  static constexpr int kMaxBlockChannels = kNThreads / kMinLanes * kMaxIters;
  static constexpr bool kIsVecLoad = kIsVecLoad_;
  // A run's halo lies in at most the kMaxBack runs before it.
  static constexpr int kMaxBack = (kWidth - 1 + kNElts - 1) / kNElts;
  static_assert(kMaxBack <= 2);
  // The staged head of a sequence: the W-1 entries before its aligned first run, then that run.
  static constexpr int kHead = kWidth - 1 + kNElts;
  // 20 warps per SM at up to 102 registers, what the walk needs without spilling for widths up to
  // 4: with kDepth runs in flight per lane, 40 KiB per SM.
  static constexpr int kMinBlocks = kWidth <= 4 ? 5 : 4;
};

template <typename Ktraits>
__global__ __launch_bounds__(Ktraits::kNThreads,
                             Ktraits::kMinBlocks) void varlen_time_kernel(VarlenParams params,
                                                                          TimeTiling tiling) {
  constexpr int kNThreads = Ktraits::kNThreads;
  constexpr int kWidth = Ktraits::kWidth;
  constexpr int kNElts = Ktraits::kNElts;
  constexpr int kDepth = Ktraits::kDepth;
  constexpr int kHead = Ktraits::kHead;
  constexpr int kMaxBack = Ktraits::kMaxBack;
  constexpr bool kIsVecLoad = Ktraits::kIsVecLoad;
  constexpr unsigned kFullMask = 0xffffffffu;
  using input_t = typename Ktraits::input_t;

  __shared__ float taps_smem[Ktraits::kMaxBlockChannels][kWidth + 1];  // the taps, then the bias
  __shared__ float head_smem[Ktraits::kMaxBlockChannels][kHead];

  const int L = tiling.lanes_per_row;
  const int lane = threadIdx.x % L;
  const int group = threadIdx.x / L;
  const int groups = kNThreads / L;
  const SeqInfo seq = tiling.flat ? flat_seq(params) : load_seq(params, blockIdx.y);
  // Runs start on absolute multiples of kNElts so that each is one aligned 16-byte access; the
  // sequence's first run may then begin before it.
  const int64_t step_len = int64_t(L) * kNElts;
  const int64_t tile_len = step_len * tiling.steps_per_tile;
  const int64_t seq_base = seq.start - seq.start % kNElts;
  const int64_t tile_start = seq_base + int64_t(blockIdx.x) * tile_len;
  const bool first_tile = blockIdx.x == 0;
  // The first tile always runs: it owns the state rows, which change even for an empty sequence.
  if (!first_tile && tile_start >= seq.end) return;
  if (first_tile && seq.out_of_range && blockIdx.z == 0 && threadIdx.x == 0) {
    flag_error(params.error_word, DK_DEVICE_ERROR_CACHE_INDEX_OUT_OF_RANGE);
  }
  const int64_t block_c0 = int64_t(blockIdx.z) * groups * tiling.channel_iters;
  if (block_c0 >= params.dim) return;
  const int64_t block_span = int64_t(groups) * tiling.channel_iters;
  const int block_channels = int(params.dim - block_c0 < block_span ? params.dim - block_c0 : block_span);
  const int iters = (block_channels + groups - 1) / groups;
  const int64_t tile_end = tile_start + tile_len < seq.end ? tile_start + tile_len : seq.end;
  const int nsteps = tile_end > tile_start ? int((tile_end - tile_start + step_len - 1) / step_len) : 0;
  const input_t* x = static_cast<const input_t*>(params.x);
  input_t* out = static_cast<input_t*>(params.out);

  // Positions inside the tile are 32-bit offsets from tile_start (a tile is at most 32 * 32 runs),
  // with the sequence's bounds clamped to just outside the tile: the per-run bookkeeping stays a
  // few integer instructions.
  const int step_tokens = L * kNElts;
  auto clamp_rel = [&](int64_t v) {
    return int(v < -int64_t(step_len) ? -step_len : (v > tile_len + kNElts ? tile_len + kNElts : v));
  };
  const int rel_end = int(tile_end - tile_start);  // runs from here on are not stored
  const int rel_seq_start = clamp_rel(seq.start - tile_start);
  const int rel_seq_end = clamp_rel(seq.end - tile_start);
  auto out_row = [&](int64_t c) { return out + c * params.out_c_stride + tile_start * params.out_t_stride; };
  // A run that straddles a sequence boundary shares its 16 bytes with the neighbouring sequence,
  // whose tile writes the other part: such runs are stored token by token.
  auto store_run = [&](input_t* o_row, int rel, const float(&v)[kNElts]) {
    if (kIsVecLoad && rel >= rel_seq_start && rel + kNElts <= rel_seq_end) {
      Pack<input_t> pk;
#pragma unroll
      for (int e = 0; e < kNElts; ++e) pk.v[e] = from_float<input_t>(v[e]);
      store_pack(o_row + rel, pk);  // unit token stride on this path
    } else {
#pragma unroll
      for (int e = 0; e < kNElts; ++e) {
        if (rel + e >= rel_seq_start && rel + e < rel_seq_end)
          o_row[(rel + e) * params.out_t_stride] = from_float<input_t>(v[e]);
      }
    }
  };

  if (seq.skip) {
    const float zeros[kNElts] = {};
    for (int it = 0; it < iters; ++it) {
      const int64_t c = block_c0 + int64_t(it) * groups + group;
      if (c >= params.dim) continue;
      for (int rel = lane * kNElts; rel < rel_end; rel += step_tokens) store_run(out_row(c), rel, zeros);
    }
    return;
  }

  // Items: (channel iteration, step), steps from -1 in a later tile, where the last lanes load the
  // runs before the tile for the first lanes' halo, and from 0 in the first tile, whose first lanes
  // take their halo from the staged head. Rows are pointers set once per channel.
  const int s_begin = first_tile ? 0 : -1;
  const int per_channel = nsteps - s_begin;
  const int items = nsteps > 0 ? iters * per_channel : 0;
  const int rel_first = s_begin * step_tokens + lane * kNElts;  // this lane's first run of a channel
  // A run is loaded whole when it lies before x's end; one that reaches past it (T not a multiple
  // of the run) goes element by element.
  const int rel_whole = clamp_rel(params.tokens - tile_start - kNElts + 1);
  const int rel_load = rel_end < rel_whole ? rel_end : rel_whole;
  auto row_of = [&](int it, int64_t& c) {
    c = block_c0 + int64_t(it) * groups + group;
    return c < params.dim;
  };
  // The prefetch side of the ring: the next item to load.
  int p_it = 0, p_rel = rel_first;
  int64_t p_c;
  bool p_valid = row_of(0, p_c);
  const input_t* p_row = x + p_c * params.x_c_stride + tile_start;
  // Step -1 serves only the last lanes.
  const bool loads_before = lane >= L - kMaxBack;
  auto prefetch = [&](uint4& raw) {
    if (kIsVecLoad && p_valid && p_rel < rel_load && (p_rel >= 0 || loads_before)) {
      raw = __ldg(reinterpret_cast<const uint4*>(p_row + p_rel));
    }
    p_rel += step_tokens;
    if (p_rel >= nsteps * step_tokens) {
      p_rel = rel_first;
      p_valid = ++p_it < iters && row_of(p_it, p_c);
      p_row = x + p_c * params.x_c_stride + tile_start;
    }
  };
  uint4 raw[kDepth];
#pragma unroll
  for (int d = 0; d < kDepth; ++d) {
    raw[d] = make_uint4(0, 0, 0, 0);
    if (d < items) prefetch(raw[d]);
  }

  // Staging, while the first runs are in flight. Entries [0, taps) are the taps and bias of each
  // channel; in the first tile, the next ones are each channel's head: e = concat(prior, x_b) from
  // token seq_base - (W-1) on (prior entries before the sequence, zeros without one or where it
  // does not reach back, x inside it, zeros past its end). A thread issues kStageLoads loads before
  // it stores any: a block that walks many channels stages hundreds of entries, and one round trip
  // per entry would hold every block of a wave at its start.
  const int64_t state_line = seq.line * params.state_l_stride;
  const int taps = block_channels * (kWidth + 1);
  const int staged = taps + (first_tile ? block_channels * kHead : 0);
  auto stage_entry = [&](int i) {
    if (i < taps) {
      const int lc = i / (kWidth + 1), k = i % (kWidth + 1);
      const int64_t c = block_c0 + lc;
      if (k < kWidth)
        return load_param<input_t>(params.weight, c * params.weight_c_stride + k * params.weight_k_stride,
                                   params.weight_f32);
      return params.bias != nullptr
                 ? load_param<input_t>(params.bias, c * params.bias_stride, params.bias_f32)
                 : 0.f;
    }
    const int lc = (i - taps) / kHead, j = (i - taps) % kHead;
    const int64_t c = block_c0 + lc;
    const int64_t a = seq_base - (kWidth - 1) + j;
    const int64_t s = params.state_len - (seq.start - a);
    if (a >= seq.start && a < seq.end)
      return to_float(__ldg(x + c * params.x_c_stride + a * params.x_t_stride));
    if (a < seq.start && seq.has_init && s >= 0)
      return load_state<input_t>(params.states,
                                 state_line + c * params.state_c_stride + s * params.state_s_stride,
                                 params.state_f32);
    return 0.f;
  };
  constexpr int kStageLoads = 4;
  for (int i0 = threadIdx.x; i0 < staged; i0 += kNThreads * kStageLoads) {
    float v[kStageLoads];
#pragma unroll
    for (int u = 0; u < kStageLoads; ++u) {
      const int i = i0 + u * kNThreads;
      v[u] = i < staged ? stage_entry(i) : 0.f;
    }
#pragma unroll
    for (int u = 0; u < kStageLoads; ++u) {
      const int i = i0 + u * kNThreads;
      if (i < taps) {
        taps_smem[i / (kWidth + 1)][i % (kWidth + 1)] = v[u];
      } else if (i < staged) {
        head_smem[(i - taps) / kHead][(i - taps) % kHead] = v[u];
      }
    }
  }
  __syncthreads();

  // The compute side: item (it, rel).
  int it = 0, rel = rel_first;
  int64_t c;
  bool valid = row_of(0, c);
  int lc = group;  // the channel's row in the staged tables
  input_t* o_row = out_row(c);
  float w[kWidth], bias = 0.f;
  float sh_prev[kWidth - 1];
#pragma unroll
  for (int j = 0; j < kWidth - 1; ++j) sh_prev[j] = 0.f;
  auto load_taps = [&] {
#pragma unroll
    for (int k = 0; k < kWidth; ++k) w[k] = taps_smem[lc][k];
    bias = taps_smem[lc][kWidth];
  };
  load_taps();
  // The first tile's first lanes take their halo, and lane 0 its run, from the staged head.
  const bool head_lane = first_tile && lane * kNElts < kWidth - 1;

#pragma unroll 1
  for (int i0 = 0; i0 < items; i0 += kDepth) {
#pragma unroll
    for (int d = 0; d < kDepth; ++d) {
      if (i0 + d >= items) break;  // uniform over the block
      const uint4 cur = raw[d];
      if (i0 + d + kDepth < items) prefetch(raw[d]);

      const bool head_run = head_lane && rel == lane * kNElts;
      float xv[kNElts];
      if (head_run && lane == 0) {
#pragma unroll
        for (int e = 0; e < kNElts; ++e) xv[e] = head_smem[lc][kWidth - 1 + e];
      } else if (kIsVecLoad && rel < rel_whole) {
        Pack<input_t> pk;
        memcpy(&pk, &cur, sizeof(pk));
#pragma unroll
        for (int e = 0; e < kNElts; ++e) xv[e] = to_float(pk.v[e]);
      } else if (valid && rel < rel_end && (rel >= 0 || loads_before)) {
        // Inline: a call here would make every live register of the walk caller-saved.
        const input_t* x_row = x + c * params.x_c_stride;
#pragma unroll
        for (int e = 0; e < kNElts; ++e) {
          const int64_t t = tile_start + rel + e;
          xv[e] = t >= seq.start && t < seq.end ? to_float(__ldg(x_row + t * params.x_t_stride)) : 0.f;
        }
      } else {
#pragma unroll
        for (int e = 0; e < kNElts; ++e) xv[e] = 0.f;
      }

      // Entry j of a run's halo lies `back` runs before it, at element `elt` of that run: from lane
      // l - back of this step, or for the first lanes from the last lanes of the previous step.
      float ev[kWidth - 1 + kNElts];
#pragma unroll
      for (int j = 0; j < kWidth - 1; ++j) {
        const int back = (kWidth - 1 - j + kNElts - 1) / kNElts;
        const int elt = j - (kWidth - 1) + back * kNElts;
        const float sh = __shfl_sync(kFullMask, xv[elt], (lane - back) & (L - 1), L);
        ev[j] = lane >= back ? sh : sh_prev[j];
        if (head_run) ev[j] = head_smem[lc][lane * kNElts + j];
        sh_prev[j] = sh;
      }
#pragma unroll
      for (int e = 0; e < kNElts; ++e) ev[kWidth - 1 + e] = xv[e];

      if (valid && rel >= 0 && rel < rel_end) {
        float o[kNElts];
#pragma unroll
        for (int e = 0; e < kNElts; ++e) {
          o[e] = bias;
#pragma unroll
          for (int k = 0; k < kWidth; ++k) o[e] += w[k] * ev[e + k];
        }
        // One branch per run, not one per element.
        if (params.silu) {
#pragma unroll
          for (int e = 0; e < kNElts; ++e) o[e] = silu<input_t>(o[e]);
        }
        store_run(o_row, rel, o);
      }
      rel += step_tokens;
      if (rel >= nsteps * step_tokens) {
        rel = rel_first;
        valid = ++it < iters && row_of(it, c);
        lc += groups;
        o_row = out_row(c);
        if (valid) load_taps();
      }
    }
  }

  if (!first_tile || tiling.flat) return;
  // The new rows are the last S entries of e. Only the first tile reads the prior (staged above,
  // before the barrier) and only it writes the rows, so no other tile of the sequence can observe a
  // half-updated state. For len < S a row shifts left: a thread reads an entry another thread of
  // this pass overwrites, hence the barrier between reads and writes; later passes (higher flat
  // indices) only read entries above those written so far.
  constexpr int kRegs = 4;
  const int64_t len = seq.end - seq.start;
  const int64_t S = params.state_len;
  const int64_t entries = int64_t(block_channels) * S;
  for (int64_t i0 = 0; i0 < entries; i0 += kNThreads * kRegs) {
    float v[kRegs];
#pragma unroll
    for (int r = 0; r < kRegs; ++r) {
      const int64_t i = i0 + r * kNThreads + threadIdx.x;
      const int64_t c = block_c0 + i / S, j = i % S;
      const int64_t rel = len - S + j;  // token of the sequence, or before it
      v[r] = 0.f;
      if (i >= entries) continue;
      if (rel >= 0) {
        v[r] = to_float(__ldg(x + c * params.x_c_stride + (seq.start + rel) * params.x_t_stride));
      } else if (seq.has_init) {
        v[r] = load_state<input_t>(params.states,
                                   state_line + c * params.state_c_stride + (j + len) * params.state_s_stride,
                                   params.state_f32);
      }
    }
    __syncthreads();
#pragma unroll
    for (int r = 0; r < kRegs; ++r) {
      const int64_t i = i0 + r * kNThreads + threadIdx.x;
      if (i >= entries) continue;
      const int64_t c = block_c0 + i / S, j = i % S;
      store_state<input_t>(params.states, state_line + c * params.state_c_stride + j * params.state_s_stride,
                           v[r], params.state_f32);
    }
  }
}

// Picks the instantiation and the cut (varlen_time_cut.hpp); `launch(Ktraits{}, grid, tiling)`
// enqueues it.
template <typename input_t, class Launch>
void varlen_time_dispatch(const VarlenParams& p, int64_t max_seq_len, int sm_count,
                          const TilingOverride& force, Launch&& launch) {
  constexpr int kNThreads = kTimeThreads;
  constexpr int kDepth = 4;
  constexpr int kMaxIters = kMaxTimeChannelIters;
  constexpr int kNElts = Pack<input_t>::kN;
  // Vector access needs every run's address 16-byte aligned: unit token stride, a channel stride
  // that keeps rows aligned, and aligned bases. Anything else takes the element-wise path.
  const bool vec = p.x_t_stride == 1 && p.out_t_stride == 1 && p.x_c_stride % kNElts == 0 &&
                   p.out_c_stride % kNElts == 0 && aligned16(p.x) && aligned16(p.out);
  // min_blocks: the kernel's kMinBlocks.
  const TimeCut cut = plan_time_cut({p.dim, p.tokens, p.batch, p.width, kNElts, p.width <= 4 ? 5 : 4},
                                    max_seq_len, sm_count, force);
  width_switch(p.width, [&](auto width) {
    bool_switch(vec, [&](auto is_vec) {
      using Ktraits = VarlenTimeKernelTraits<kNThreads, decltype(width)::value, kDepth, kMaxIters,
                                             decltype(is_vec)::value, input_t>;
      static_assert(Ktraits::kMinBlocks == (decltype(width)::value <= 4 ? 5 : 4));
      launch(Ktraits{}, make_grid(cut.tiles, cut.seqs, cut.channel_blocks), cut.tiling);
    });
  });
}

}  // namespace deltakern::portable::cuda
