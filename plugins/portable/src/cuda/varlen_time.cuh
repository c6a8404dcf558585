// causal_conv1d_varlen for time-contiguous x (stride(1) == 1). A warp owns a few channels of a token
// tile; each lane holds a 16-byte run of consecutive tokens per channel, so a warp step covers
// 32 runs. The W-1 entries before a run are the tail of the previous lane's run, fetched by
// shuffle, and the step's last lanes hand theirs to the next step the same way: x is read once,
// plus W-1 halo tokens per tile.
#pragma once

#include "common.cuh"

namespace deltakern::portable::cuda {

template <int kNThreads_, int kWidth_, int kNChannels_, int kNSteps_, bool kIsVecLoad_, typename input_t_>
struct VarlenTimeKernelTraits {
  using input_t = input_t_;
  static constexpr int kNThreads = kNThreads_;
  static_assert(kNThreads % 32 == 0);
  static constexpr int kNWarps = kNThreads / 32;
  static constexpr int kWidth = kWidth_;
  static constexpr int kNElts = Pack<input_t>::kN;  // tokens per lane, channel and step
  // Channels per warp: their loads are independent, so a lane keeps kNChannels 16-byte loads in
  // flight. More channels per block also keeps blocks busy when sequences are short.
  static constexpr int kNChannels = kNChannels_;
  static constexpr int kBlockChannels = kNWarps * kNChannels;
  // Steps run in order and stop at the sequence's end, so a short sequence costs one step while a
  // long one amortises the block's start over kNSteps.
  static constexpr int kNSteps = kNSteps_;
  static constexpr int kStepLen = 32 * kNElts;
  static constexpr int kTileLen = kStepLen * kNSteps;
  static constexpr bool kIsVecLoad = kIsVecLoad_;
  // Blocks per SM that the register budget must allow: 16 warps with 4 x 16 bytes in flight per
  // lane (32 KiB per SM) covers the H200's bandwidth-latency product about twice over. Widths
  // above 4 need more than 128 registers; they get 3 rather than spill.
  static constexpr int kMinBlocks = kWidth <= 4 ? 4 : 3;
  // A lane's halo then lies in at most the two lanes before it.
  static_assert(kWidth - 1 <= 2 * kNElts);
  // Then only the first tile of a sequence reaches before the sequence, into the prior state.
  static_assert(kTileLen >= (kNElts - 1) + (kWidth - 1));
};

// Entries of e = concat(prior, x_b), kN consecutive ones from absolute token a0 on, for channels
// c0 .. c0 + kNCh - 1 (zeros for channels past D): x inside the sequence, the prior state before it
// (zeros without one, or where it does not reach back that far), zeros past its end (they only
// feed outputs that are never stored). For the first tile's halo and for runs that straddle a
// sequence boundary or miss the vector path's preconditions: rare, so out of line, where its
// address arithmetic holds no registers across the hot path, and one call for all channels, so
// that their loads share one round trip.
template <int kN>
struct Entries {
  float v[kN];
};
template <typename input_t, int kNCh, int kN>
__device__ __noinline__ Entries<kNCh * kN> load_entries(const VarlenParams params, int64_t c0, int64_t a0,
                                                        int64_t start, int64_t end, int64_t state_line,
                                                        bool has_init) {
  Entries<kNCh * kN> r;
#pragma unroll
  for (int i = 0; i < kNCh; ++i) {
    const int64_t c = c0 + i;
    const input_t* x = static_cast<const input_t*>(params.x) + c * params.x_c_stride;
#pragma unroll
    for (int e = 0; e < kN; ++e) {
      const int64_t a = a0 + e;
      const int64_t s = params.state_len - (start - a);
      float v = 0.f;
      if (c < params.dim && a < end) {
        if (a >= start) {
          v = to_float(__ldg(x + a * params.x_t_stride));
        } else if (has_init && s >= 0) {
          v = load_state<input_t>(params.states,
                                  state_line + c * params.state_c_stride + s * params.state_s_stride,
                                  params.state_f32);
        }
      }
      r.v[i * kN + e] = v;
    }
  }
  return r;
}

template <typename Ktraits>
__global__ __launch_bounds__(Ktraits::kNThreads,
                             Ktraits::kMinBlocks) void varlen_time_kernel(VarlenParams params) {
  constexpr int kWidth = Ktraits::kWidth;
  constexpr int kNElts = Ktraits::kNElts;
  constexpr int kNChannels = Ktraits::kNChannels;
  constexpr int kStepLen = Ktraits::kStepLen;
  constexpr bool kIsVecLoad = Ktraits::kIsVecLoad;
  constexpr unsigned kFullMask = 0xffffffffu;
  using input_t = typename Ktraits::input_t;

  const int lane = threadIdx.x % 32;
  const int64_t c0 = (int64_t(blockIdx.z) * Ktraits::kNWarps + threadIdx.x / 32) * kNChannels;
  const SeqInfo seq = load_seq(params, blockIdx.y);
  // Tiles start on absolute multiples of kNElts so that every run is one aligned 16-byte access;
  // the first run may then begin before the sequence.
  const int64_t tile_start = seq.start - seq.start % kNElts + int64_t(blockIdx.x) * Ktraits::kTileLen;
  const bool first_tile = blockIdx.x == 0;
  // The first tile always runs: it owns the state row, which changes even for an empty sequence.
  if (!first_tile && tile_start >= seq.end) return;
  if (first_tile && seq.out_of_range && blockIdx.z == 0 && threadIdx.x == 0) {
    flag_error(params.error_word, DK_DEVICE_ERROR_CACHE_INDEX_OUT_OF_RANGE);
  }
  // Everything below that decides on a channel or a step is uniform over the warp, so the shuffles
  // always see 32 lanes.
  if (c0 >= params.dim) return;
  const input_t* x = static_cast<const input_t*>(params.x);
  input_t* out = static_cast<input_t*>(params.out);

  // A run that straddles a sequence boundary shares its 16 bytes with the neighbouring sequence,
  // whose tile writes the other part: such runs are stored token by token.
  auto store_run = [&](int64_t c, int64_t a0, const float(&v)[kNElts]) {
    input_t* row = out + c * params.out_c_stride;
    if (kIsVecLoad && a0 >= seq.start && a0 + kNElts <= seq.end) {
      Pack<input_t> pk;
#pragma unroll
      for (int e = 0; e < kNElts; ++e) pk.v[e] = from_float<input_t>(v[e]);
      store_pack(row + a0, pk);
    } else {
#pragma unroll
      for (int e = 0; e < kNElts; ++e) {
        const int64_t a = a0 + e;
        if (a >= seq.start && a < seq.end) row[a * params.out_t_stride] = from_float<input_t>(v[e]);
      }
    }
  };

  if (seq.skip) {
    const float zeros[kNElts] = {};
    for (int step = 0; step < Ktraits::kNSteps; ++step) {
      const int64_t step_start = tile_start + int64_t(step) * kStepLen;
      if (step_start >= seq.end) break;
#pragma unroll
      for (int i = 0; i < kNChannels; ++i) {
        if (c0 + i < params.dim) store_run(c0 + i, step_start + lane * kNElts, zeros);
      }
    }
    return;
  }

  const int64_t state_line = seq.line * params.state_l_stride;
  float w[kNChannels][kWidth];
  float bias[kNChannels];
#pragma unroll
  for (int i = 0; i < kNChannels; ++i) {
    const int64_t c = c0 + i;
    const bool valid = c < params.dim;
#pragma unroll
    for (int k = 0; k < kWidth; ++k) {
      w[i][k] =
          valid ? load_param<input_t>(params.weight, c * params.weight_c_stride + k * params.weight_k_stride,
                                      params.weight_f32)
                : 0.f;
    }
    bias[i] = valid && params.bias != nullptr
                  ? load_param<input_t>(params.bias, c * params.bias_stride, params.bias_f32)
                  : 0.f;
  }
  // halo[i][j]: entry j of the W-1 before this lane's run, for the lanes (one or two) whose halo
  // reaches into the previous step; f32, as in the first tile it can be the prior state.
  float halo[kNChannels][kWidth - 1];
  // In order, one at a time: the halo and the bytes in flight per lane stay those of one step.
#pragma unroll 1
  for (int step = 0; step < Ktraits::kNSteps; ++step) {
    const int64_t step_start = tile_start + int64_t(step) * kStepLen;
    if (step_start >= seq.end) break;
    const int64_t a0 = step_start + lane * kNElts;
    const bool full = a0 >= seq.start && a0 + kNElts <= seq.end;
    float xv[kNChannels][kNElts];
    if (kIsVecLoad && full) {
#pragma unroll
      for (int i = 0; i < kNChannels; ++i) {
        const int64_t c = c0 + i;
        Pack<input_t> pk{};
        if (c < params.dim) pk = load_pack(x + c * params.x_c_stride + a0);
#pragma unroll
        for (int e = 0; e < kNElts; ++e) xv[i][e] = to_float(pk.v[e]);
      }
    } else {
      const Entries<kNChannels* kNElts> run = load_entries<input_t, kNChannels, kNElts>(
          params, c0, a0, seq.start, seq.end, state_line, seq.has_init);
#pragma unroll
      for (int i = 0; i < kNChannels; ++i) {
#pragma unroll
        for (int e = 0; e < kNElts; ++e) xv[i][e] = run.v[i * kNElts + e];
      }
    }
    if (step == 0) {
      // The first step's halo, fetched after its runs so that the loads overlap.
      if (first_tile || !kIsVecLoad) {
        // It may reach before the sequence: the lanes that need it take it entry by entry.
        Entries<kNChannels*(kWidth - 1)> h{};
        if (lane * kNElts < kWidth - 1) {
          h = load_entries<input_t, kNChannels, kWidth - 1>(params, c0, a0 - (kWidth - 1), seq.start, seq.end,
                                                            state_line, seq.has_init);
        }
#pragma unroll
        for (int i = 0; i < kNChannels; ++i) {
#pragma unroll
          for (int j = 0; j < kWidth - 1; ++j) halo[i][j] = h.v[i * (kWidth - 1) + j];
        }
      } else {
        // A later tile's halo is the tail of the (one or two) runs before the tile, whole runs
        // inside the sequence: the last lanes load them as if for a step before this one, and
        // hand them over as between steps.
        constexpr int kMaxBack = (kWidth - 1 + kNElts - 1) / kNElts;
#pragma unroll
        for (int i = 0; i < kNChannels; ++i) {
          const int64_t c = c0 + i;
          Pack<input_t> prev{};
          if (lane >= 32 - kMaxBack && c < params.dim) {
            prev = load_pack(x + c * params.x_c_stride + a0 - kStepLen);
          }
#pragma unroll
          for (int j = 0; j < kWidth - 1; ++j) {
            const int back = (kWidth - 1 - j + kNElts - 1) / kNElts;
            const int elt = j - (kWidth - 1) + back * kNElts;
            halo[i][j] = __shfl_sync(kFullMask, to_float(prev.v[elt]), (lane - back) & 31);
          }
        }
      }
    }

#pragma unroll
    for (int i = 0; i < kNChannels; ++i) {
      if (c0 + i >= params.dim) break;
      float ev[kWidth - 1 + kNElts];
#pragma unroll
      for (int j = 0; j < kWidth - 1; ++j) {
        // Entry j lies `back` lanes before this one, at element `elt` of that lane's run.
        const int back = (kWidth - 1 - j + kNElts - 1) / kNElts;
        const int elt = j - (kWidth - 1) + back * kNElts;
        const float v = __shfl_up_sync(kFullMask, xv[i][elt], back);
        ev[j] = lane < back ? halo[i][j] : v;
        // The same entry for the next step's first lanes: this step's last lanes.
        halo[i][j] = __shfl_sync(kFullMask, xv[i][elt], (lane - back) & 31);
      }
#pragma unroll
      for (int e = 0; e < kNElts; ++e) ev[kWidth - 1 + e] = xv[i][e];

      float o[kNElts];
#pragma unroll
      for (int e = 0; e < kNElts; ++e) {
        float acc = bias[i];
#pragma unroll
        for (int k = 0; k < kWidth; ++k) acc += w[i][k] * ev[e + k];
        o[e] = params.silu ? silu<input_t>(acc) : acc;
      }
      store_run(c0 + i, a0, o);
    }
  }

  if (!first_tile) return;
  // The new row is the last S entries of e. Only the first tile reads the prior and only it writes
  // the row, so no other tile of the sequence can observe a half-updated state; the barrier orders
  // this warp's prior reads above before the writes below.
  __syncwarp();
  const int64_t len = seq.end - seq.start;
  // All channels' entries are read before any is written, so a pass costs one round trip, not
  // one per channel (short sequences are all start-up: this was most of their time).
  for (int64_t i0 = 0; i0 < params.state_len; i0 += 32) {
    const int64_t s = i0 + lane;
    const bool active = s < params.state_len;
    const int64_t rel = len - params.state_len + s;  // token of the sequence, or before it
    float v[kNChannels];
#pragma unroll
    for (int i = 0; i < kNChannels; ++i) {
      const int64_t c = c0 + i;
      v[i] = 0.f;
      if (!active || c >= params.dim) continue;
      if (rel >= 0) {
        v[i] = to_float(__ldg(x + c * params.x_c_stride + (seq.start + rel) * params.x_t_stride));
      } else if (seq.has_init) {
        v[i] = load_state<input_t>(params.states,
                                   state_line + c * params.state_c_stride + (s + len) * params.state_s_stride,
                                   params.state_f32);
      }
    }
    // For len < S the row shifts left: a lane reads the entry another lane of this pass
    // overwrites. Later passes only read entries above those written so far.
    __syncwarp();
#pragma unroll
    for (int i = 0; i < kNChannels; ++i) {
      const int64_t c = c0 + i;
      if (active && c < params.dim)
        store_state<input_t>(params.states,
                             state_line + c * params.state_c_stride + s * params.state_s_stride, v[i],
                             params.state_f32);
    }
  }
}

// Picks the instantiation and the grid; `launch(Ktraits{}, grid)` enqueues it.
template <typename input_t, class Launch>
void varlen_time_dispatch(const VarlenParams& p, int64_t max_seq_len, Launch&& launch) {
  constexpr int kNThreads = 128;
  constexpr int kNChannels = 4;
  constexpr int kNSteps = 4;
  constexpr int kNElts = Pack<input_t>::kN;
  // Vector access needs every run's address 16-byte aligned: unit token stride, a channel stride
  // that keeps rows aligned, and aligned bases. Anything else takes the element-wise path.
  const bool vec = p.x_t_stride == 1 && p.out_t_stride == 1 && p.x_c_stride % kNElts == 0 &&
                   p.out_c_stride % kNElts == 0 && aligned16(p.x) && aligned16(p.out);
  width_switch(p.width, [&](auto width) {
    bool_switch(vec, [&](auto is_vec) {
      using Ktraits = VarlenTimeKernelTraits<kNThreads, decltype(width)::value, kNChannels, kNSteps,
                                             decltype(is_vec)::value, input_t>;
      // Aligning its first run down lets a sequence span up to kNElts - 1 more tokens.
      const int64_t tiles = std::max<int64_t>(1, ceil_div(max_seq_len + kNElts - 1, Ktraits::kTileLen));
      launch(Ktraits{}, make_grid(tiles, p.batch, ceil_div(p.dim, Ktraits::kBlockChannels)));
    });
  });
}

}  // namespace deltakern::portable::cuda
