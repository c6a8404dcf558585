// How portable's time-contiguous CUDA prefill cuts a call, and which walk the channel-last one
// takes (varlen_time_cut.hpp): host code, so checked here on any machine. The kernels themselves
// are checked on the GPU, under every cut, by scripts/gpu-check.sh.
#include <boost/test/unit_test.hpp>

#include "varlen_time_cut.hpp"

#include <vector>

using namespace deltakern::portable::cuda;

namespace {

constexpr int kSms = 132;      // an H200
constexpr int kMinBlocks = 5;  // width <= 4
constexpr int64_t kWave = int64_t(kSms) * kMinBlocks;

TimeCallShape bf16(int64_t dim, int64_t tokens, int64_t batch) {
  return {dim, tokens, batch, 4, 8, kMinBlocks};
}

// Blocks that hold work: tiles that start before the longest walk ends (the last may hold only the
// alignment slack), times sequences, times channel blocks.
int64_t working_blocks(const TimeCut& c, int64_t walk_len, int elts) {
  const int64_t tile = int64_t(c.tiling.steps_per_tile) * c.tiling.lanes_per_row * elts;
  return (walk_len + tile - 1) / tile * c.seqs * c.channel_blocks;
}

// What holds for every cut: the grid covers every token and channel of the longest walk (aligned
// down to a run), and a row group walks no more channels than the staged tables hold.
void check_covers(const TimeCut& c, const TimeCallShape& call, int64_t walk_len) {
  const TimeTiling& t = c.tiling;
  BOOST_TEST((t.lanes_per_row == 8 || t.lanes_per_row == 16 || t.lanes_per_row == 32));
  BOOST_TEST(c.tiles * t.steps_per_tile * t.lanes_per_row * call.elts >= walk_len + call.elts - 1);
  BOOST_TEST(c.channel_blocks * (kTimeThreads / t.lanes_per_row) * t.channel_iters >= call.dim);
  BOOST_TEST(t.channel_iters >= 1);
  BOOST_TEST(t.channel_iters <= t.lanes_per_row);  // (kTimeThreads / L) groups x L channels
}

}  // namespace

BOOST_AUTO_TEST_CASE(one_sequence_fills_one_wave) {
  for (int64_t dim : {8192, 4096}) {
    const auto call = bf16(dim, 8192, 1);
    const TimeCut c = plan_time_cut(call, 8192, kSms, {});
    BOOST_TEST_CONTEXT("D=" << dim) {
      check_covers(c, call, 8192);
      BOOST_TEST(!c.tiling.flat);
      BOOST_TEST(c.seqs == 1);
      const int64_t blocks = working_blocks(c, 8192, 8);
      BOOST_TEST(blocks <= kWave);
      BOOST_TEST(4 * blocks >= 3 * kWave);
    }
  }
}

BOOST_AUTO_TEST_CASE(short_sequences_walk_x_as_one_in_one_wave) {
  // 64 sequences of about 128 tokens: the flat walk, cut as one sequence of T tokens.
  const auto call = bf16(8192, 8192, 64);
  const TimeCut c = plan_time_cut(call, 256, kSms, {});
  check_covers(c, call, 8192);
  BOOST_TEST(c.tiling.flat);
  BOOST_TEST(c.seqs == 1);
  const int64_t blocks = working_blocks(c, 8192, 8);
  BOOST_TEST(blocks <= kWave);
  BOOST_TEST(4 * blocks >= 3 * kWave);
}

BOOST_AUTO_TEST_CASE(equal_sequences_keep_their_walk_where_it_fits_one_wave) {
  // 8 x 1k and 8 x 4k tokens: per sequence, one wave.
  for (int64_t len : {1024, 4096}) {
    const auto call = bf16(8192, 8 * len, 8);
    const TimeCut c = plan_time_cut(call, len, kSms, {});
    BOOST_TEST_CONTEXT("8 x " << len) {
      check_covers(c, call, len);
      BOOST_TEST(!c.tiling.flat);
      BOOST_TEST(c.seqs == 8);
      const int64_t blocks = working_blocks(c, len, 8);
      BOOST_TEST(blocks <= kWave);
      BOOST_TEST(4 * blocks >= 3 * kWave);
    }
  }
  // 8 x 16k fits no wave (too many channel blocks per sequence for the tables): x as one.
  const auto call = bf16(8192, 8 * 16384, 8);
  const TimeCut c = plan_time_cut(call, 16384, kSms, {});
  check_covers(c, call, 8 * 16384);
  BOOST_TEST(c.tiling.flat);
  // Lengths that only look equal (max_seq_len above the real longest) take the flat walk.
  BOOST_TEST(plan_time_cut(bf16(8192, 8192, 8), 2048, kSms, {}).tiling.flat);
}

BOOST_AUTO_TEST_CASE(a_few_long_sequences_keep_their_walk) {
  // Longest above half of x: per sequence, the grid sized by max_seq_len.
  const auto call = bf16(8192, 32768, 3);
  const TimeCut c = plan_time_cut(call, 20000, kSms, {});
  check_covers(c, call, 20000);
  BOOST_TEST(!c.tiling.flat);
  BOOST_TEST(c.seqs == 3);
  BOOST_TEST(c.tiling.channel_iters <= kMaxTimeChannelIters);
}

BOOST_AUTO_TEST_CASE(channel_last_walks_equal_sequences_one_by_one) {
  const TilingOverride none;
  for (int64_t tokens : {8192, 32768, 131072}) {
    BOOST_TEST_CONTEXT("T=" << tokens) {
      BOOST_TEST(!use_flat_walk_channel_last(8, tokens, tokens / 8, none));
      // Mixed lengths (the longest below half of x) take the flat walk, as the time-contiguous cut
      // does; lengths that only look equal too.
      BOOST_TEST(use_flat_walk_channel_last(64, tokens, tokens / 32, none));
      BOOST_TEST(use_flat_walk_channel_last(8, tokens, tokens / 4, none));
      // One sequence, or a few long ones: per sequence.
      BOOST_TEST(!use_flat_walk_channel_last(1, tokens, tokens, none));
      BOOST_TEST(!use_flat_walk_channel_last(3, tokens, tokens - 2, none));
    }
  }
  // The override wins both ways.
  TilingOverride flat, per_seq;
  flat.flat = 1;
  per_seq.flat = 2;
  BOOST_TEST(use_flat_walk_channel_last(8, 8192, 1024, flat));
  BOOST_TEST(!use_flat_walk_channel_last(64, 8192, 256, per_seq));
}

BOOST_AUTO_TEST_CASE(the_override_wins) {
  TilingOverride force;
  force.lanes = 8;
  force.steps = 3;
  force.iters = 2;
  force.flat = 2;  // forbid
  const auto call = bf16(4096, 8192, 64);
  TimeCut c = plan_time_cut(call, 256, kSms, force);
  BOOST_TEST(c.tiling.lanes_per_row == 8);
  BOOST_TEST(c.tiling.steps_per_tile == 3);
  BOOST_TEST(c.tiling.channel_iters == 2);
  BOOST_TEST(!c.tiling.flat);
  BOOST_TEST(c.seqs == 64);
  check_covers(c, call, 256);
  // Forcing the flat walk on equal sequences skips the one-wave exception.
  TilingOverride flat;
  flat.flat = 1;
  c = plan_time_cut(bf16(8192, 8192, 8), 1024, kSms, flat);
  BOOST_TEST(c.tiling.flat);
  BOOST_TEST(c.seqs == 1);
  // One forced key leaves the others to the launcher, and a forced step count turns the one-wave
  // cut off (the sweep wants exactly what it asked for).
  TilingOverride steps;
  steps.steps = 5;
  c = plan_time_cut(bf16(8192, 8192, 1), 8192, kSms, steps);
  BOOST_TEST(c.tiling.steps_per_tile == 5);
  BOOST_TEST(c.tiling.channel_iters <= kMaxTimeChannelIters);
  check_covers(c, bf16(8192, 8192, 1), 8192);
}

BOOST_AUTO_TEST_CASE(degenerate_calls_still_get_a_grid) {
  // No token, one token, one channel, f32 runs of 4, a width whose kernel keeps 4 blocks per SM.
  const std::vector<TimeCallShape> calls{bf16(8192, 0, 1),
                                         bf16(8192, 1, 1),
                                         bf16(1, 5000, 1),
                                         {4096, 8192, 1, 2, 4, 5},
                                         {4096, 8192, 1, 8, 8, 4}};
  for (const auto& call : calls) {
    const TimeCut c = plan_time_cut(call, call.tokens, kSms, {});
    BOOST_TEST_CONTEXT("D=" << call.dim << " T=" << call.tokens << " W=" << call.width) {
      check_covers(c, call, call.tokens);
      BOOST_TEST(c.tiles >= 1);
      BOOST_TEST(c.channel_blocks >= 1);
    }
  }
  // Zero SMs reported: treated as one.
  check_covers(plan_time_cut(bf16(4096, 8192, 1), 8192, 0, {}), bf16(4096, 8192, 1), 8192);
}
