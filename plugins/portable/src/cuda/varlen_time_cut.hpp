// How the time-contiguous prefill (varlen_time.cuh) cuts a call: the walk (per sequence or x as one),
// lanes per channel, steps per tile and channels per row group, from the call's shape, max_seq_len
// and the machine's size; and which walk the channel-last prefill takes. Host code only, with no
// CUDA type, so that tests check the choice on any machine (tests/test_portable_cuda_cut.cpp).
#pragma once

#include <algorithm>
#include <cstdint>

#include "launch.hpp"

namespace deltakern::portable::cuda {

// Threads of a time-contiguous block, and channels a row group walks at most where the host does not
// know the work (the kernel's staging tables hold kMaxTimeChannelIters channels of 8-lane groups,
// which is L channels of L-lane groups).
constexpr int kTimeThreads = 128;
constexpr int kMaxTimeChannelIters = 8;

// The flat walk, in both layouts: x convolved as one sequence, edges repaired after
// (varlen_edges.cuh). Where there are several sequences and the longest is at most half of x: one
// sequence, or a few long ones, keep the per-sequence walk, which repairs the edges and writes the
// state inside the walk. TilingOverride::flat forces it (1) or forbids it (2).
inline bool use_flat_walk(int64_t batch, int64_t tokens, int64_t max_seq_len, const TilingOverride& force) {
  if (force.flat != 0) return force.flat == 1;
  return batch > 1 && 2 * max_seq_len <= tokens;
}

// The channel-last prefill (varlen_channel_last.cuh) walks equal sequences one by one whatever their
// length: its per-sequence tiles are as full as the flat walk's, and they fix the edges and write the
// states inside the walk, where the flat walk's repair is a second launch (H200, bf16, width 4, 8
// equal sequences, us flat / per sequence: D=8192 87.5 / 83.8 at 8k, 322 / 318 at 32k, 1305 / 1300
// at 128k; D=4096 49.7 / 45.8, 165 / 161, 652 / 648). Mixed lengths keep the flat walk (64 mixed at
// 8k: 95.9 / 104.3 and 53.2 / 56.1).
inline bool use_flat_walk_channel_last(int64_t batch, int64_t tokens, int64_t max_seq_len,
                                       const TilingOverride& force) {
  if (force.flat == 0 && tokens == batch * max_seq_len) return false;
  return use_flat_walk(batch, tokens, max_seq_len, force);
}

// How a call is cut (a kernel argument).
struct TimeTiling {
  int lanes_per_row;   // L: a power of two from 8 to 32
  int steps_per_tile;  // a tile is steps_per_tile * L runs of one channel
  int channel_iters;   // channels a row group walks in turn
  bool flat;           // one walk over [0, T), edges repaired after (varlen_edges.cuh)
};

// The cut and its grid: (tiles, sequences, channel blocks).
struct TimeCut {
  TimeTiling tiling;
  int64_t tiles, seqs, channel_blocks;
};

// The shape of a call as the cut sees it. `elts`: tokens per 16-byte run (8 for 16-bit x, 4 for
// f32); `min_blocks`: blocks resident per SM (the kernel's launch bounds).
struct TimeCallShape {
  int64_t dim, tokens, batch, width;
  int elts, min_blocks;
};

namespace cut_detail {
struct WaveCut {
  int steps = 0, iters = 0;
};

// One wave: the cut (steps per tile, channels per row group) whose blocks fill the most of one wave
// of resident blocks, at least three quarters of it, for `seqs` sequences of `len` tokens each;
// {0, 0} when none does. Every block then has the same work and they finish together, where a wave
// and a half leaves the last half-wave's SMs short of loads in flight (H200, 8k tokens, one
// sequence, % of copy: D=8192 71.0 at 16 steps x 4 channels, 1024 blocks, 78.8 at 16 x 7, 586
// blocks; D=4096 69.9 at 16 x 4, 74.4 at 8 x 7, 588 blocks). A group walks up to L channels: the
// staged tables hold (kTimeThreads / L) * L of them.
inline WaveCut one_wave_cut(int64_t seqs, int64_t len, int64_t row_blocks, int64_t step_len, int lanes,
                            int64_t wave) {
  WaveCut best;
  int64_t best_blocks = 0;
  for (int steps : {16, 8, 32}) {
    const int64_t work_tiles = seqs * ceil_div(len, steps * step_len);
    for (int iters = 1; iters <= lanes; ++iters) {
      const int64_t blocks = work_tiles * ceil_div(row_blocks, iters);
      if (blocks > wave) continue;
      if (blocks > best_blocks && 4 * blocks >= 3 * wave) {
        best_blocks = blocks;
        best = {steps, iters};
      }
      break;
    }
  }
  return best;
}
}  // namespace cut_detail

inline TimeCut plan_time_cut(const TimeCallShape& call, int64_t max_seq_len, int sm_count,
                             const TilingOverride& force) {
  const int64_t wave = int64_t(std::max(sm_count, 1)) * call.min_blocks;
  // Lanes per channel: the fewest whose four steps cover the longest sequence, so that short
  // sequences leave few lanes idle and long ones walk whole-warp steps.
  auto lanes_for = [&](int64_t len) {
    if (force.lanes != 0) return force.lanes;
    for (int lanes : {8, 16})
      if (4 * int64_t(lanes) * call.elts >= len) return lanes;
    return 32;
  };
  auto row_blocks_for = [&](int lanes) { return ceil_div(call.dim, int64_t(kTimeThreads / lanes)); };
  const bool free_cut = force.steps == 0 && force.iters == 0;

  TimeTiling t{32, 16, 1, use_flat_walk(call.batch, call.tokens, max_seq_len, force)};
  cut_detail::WaveCut cut;
  // Equal sequences keep the per-sequence walk where it fits one wave: its grid has no idle tile
  // and its first tiles fix the edges and write the states, where the flat walk's repair is a
  // second launch (H200, 8 x 1k tokens, % of copy: D=8192 68.6 flat, 72.5 per sequence; D=4096
  // 63.5, 69.7; 8 x 4k: 85.0, 87.1 and 80.2, 82.7; 8 x 16k fits no wave and stays flat).
  if (t.flat && force.flat == 0 && free_cut && call.tokens == call.batch * max_seq_len) {
    const int lanes = lanes_for(max_seq_len);
    cut = cut_detail::one_wave_cut(call.batch, max_seq_len, row_blocks_for(lanes), int64_t(lanes) * call.elts,
                                   lanes, wave);
    if (cut.steps != 0) t.flat = false;
  }
  const int64_t batch = t.flat ? 1 : call.batch;
  if (t.flat) max_seq_len = call.tokens;
  t.lanes_per_row = lanes_for(max_seq_len);
  const int64_t row_blocks = row_blocks_for(t.lanes_per_row);
  const int64_t step_len = int64_t(t.lanes_per_row) * call.elts;
  // Aligning its first run down lets a sequence span up to elts - 1 more tokens.
  const int64_t span = max_seq_len + call.elts - 1;
  // Where the host knows the work (one sequence, x walked as one, or equal sequences), the
  // one-wave cut. Otherwise tiles of 16 steps, or 32 where the grid still holds about four waves
  // of blocks: long walks amortise a group's start (H200, D=8192, 128k tokens in one sequence:
  // 75.5% of copy at 16 steps, 78.6% at 32).
  if (cut.steps == 0 && (t.flat || batch == 1) && free_cut)
    cut = cut_detail::one_wave_cut(batch, max_seq_len, row_blocks, step_len, t.lanes_per_row, wave);
  if (cut.steps != 0) {
    t.steps_per_tile = cut.steps;
    t.channel_iters = cut.iters;
  } else {
    if (ceil_div(span, 32 * step_len) * batch * row_blocks >= 4 * wave) t.steps_per_tile = 32;
    if (force.steps != 0) t.steps_per_tile = force.steps;
    const int64_t tile_len = t.steps_per_tile * step_len;
    // A row group walks several channels when a channel's tile is short (up to about 64 steps of
    // work per group for a sequence of mean length, which amortises the block's start: sequence
    // bounds, staging, state rows), down to about four working blocks per SM, below one wave (H200,
    // 8k tokens in one sequence, 32 lanes, 16 steps, % of copy for 1 / 2 / 4 / 8 channels a group:
    // D=8192 67.4 / 70.9 / 71.0 / 73.6, D=4096 64.7 / 67.4 / 70.6 / 51.6; at 32k and 128k tokens 2
    // beat 4 and 8 by 1 to 7 points). Tiles are counted by the work in them: the last, which only
    // holds the alignment slack, does not count.
    const int64_t mean_len = call.tokens / std::max<int64_t>(batch, 1);
    const int64_t steps = ceil_div(std::min(mean_len + call.elts - 1, tile_len), step_len);
    const int64_t work_iters = ceil_div(64, std::max<int64_t>(steps, 1));
    const int64_t working_tiles = std::max<int64_t>(1, max_seq_len / tile_len);
    const int64_t parallel_iters =
        ceil_div(working_tiles * batch * row_blocks, 4 * int64_t(std::max(sm_count, 1)));
    t.channel_iters = int(std::clamp<int64_t>(std::min(work_iters, parallel_iters), 1, kMaxTimeChannelIters));
    if (force.iters != 0) t.channel_iters = force.iters;
  }
  const int64_t tiles = std::max<int64_t>(1, ceil_div(span, t.steps_per_tile * step_len));
  return {t, tiles, batch, ceil_div(row_blocks, t.channel_iters)};
}

}  // namespace deltakern::portable::cuda
