// causal_conv1d_varlen: the kernel choice (plan_varlen: layout, vector or scalar, row walker or
// tiles, and the tiling), the finish pass, and the device error word.
#include <algorithm>
#include <climits>

#include "conv1d_common.cuh"
#include "launch.h"

namespace deltakern::native {

// One word per device (a __device__ variable lives once per device context).
__device__ uint32_t g_error_word;

uint32_t* error_word_address(int* err) {
  void* ptr = nullptr;
  *err = cudaGetSymbolAddress(&ptr, g_error_word);
  return static_cast<uint32_t*>(ptr);
}

// The finish pass, one block per (tile boundary, 256 channels): writes the parked outputs of
// the tail before boundary g into x (in place only: into a separate out the main pass stored
// them, see parks_tail), and the parked new state of the sequence that crosses boundary g and
// ends in tile g. Runs after every tile of the main pass has read its halo and its prior.
// Copies raw element bits, so it is instantiated per element size only.
//
// A thread's work is a few loads and stores, so its time is its chain of dependent loads. Which
// sequence holds each tail token, and which one crosses the boundary, is the same for the whole
// block: each warp finds the first sequence ending in the tail with 32-way probes and holds the
// next 32 sequences' bounds and lines in its lanes, so every lookup after that is a ballot (H200,
// bf16, D = 8192, 8k tokens: one binary search and a load per token made this pass cost 7 us of
// a 91 us call with one sequence, 12 us with 64). A tail where more than 32 sequences end (empty
// ones) takes the scalar lookups.
template <typename E>
__global__ void varlen_finish_kernel(const VarlenParams p, bool channel_last) {
  constexpr unsigned kFull = 0xffffffffu;
  wait_for_previous_grid();
  const int32_t g = blockIdx.x + 1;
  const int64_t c = static_cast<int64_t>(blockIdx.y) * blockDim.x + threadIdx.x;
  const bool live = c < p.dim;  // the others still take part in their warp's lookups
  const int lane = threadIdx.x % 32;
  E* const out = static_cast<E*>(p.out);  // x itself wherever a tail was parked
  const E* const park = static_cast<const E*>(p.park);
  const int64_t boundary = static_cast<int64_t>(g) * p.tile_len;
  const int64_t from = boundary - p.tail_len;

  // Lane k: sequence b0 + k (bounds past the batch never match).
  const int32_t b0 = warp_first_sequence_ending_at_or_after(p, from + 1);
  const int32_t bk = b0 + lane;
  const bool in_batch = bk < p.batch;
  const int64_t start_k = in_batch ? seq_offset(p, bk) : INT64_MAX;
  const int64_t end_k = in_batch ? seq_offset(p, bk + 1) : INT64_MAX;
  const int64_t line_k = in_batch ? state_line(p.cache_indices, bk, p.state, p.conv, false) : -1;
  const bool window_short = b0 + 32 < p.batch;  // sequences past the window exist
  // The first sequence whose end is past `pos`: (b, its start, its end, its line); b == batch
  // when there is none.
  struct Seq {
    int32_t b;
    int64_t start, end, line;
  };
  auto sequence_ending_after = [&](int64_t pos) {
    const int k = __popc(__ballot_sync(kFull, end_k <= pos));
    Seq s{b0 + k, __shfl_sync(kFull, start_k, k & 31), __shfl_sync(kFull, end_k, k & 31),
          __shfl_sync(kFull, line_k, k & 31)};
    if (k == 32 && window_short) {
      s.b = first_sequence_ending_at_or_after(p, pos + 1);
      if (s.b < p.batch) {
        s.start = seq_offset(p, s.b);
        s.end = seq_offset(p, s.b + 1);
        s.line = state_line(p.cache_indices, s.b, p.state, p.conv, false);
      }
    }
    return s;
  };

  // Same skip rules as the main pass: a token is written iff the main pass parked it (none when
  // out is not x: the loop is empty).
  const int64_t tail_begin = !parks_tail(p) ? boundary : (from > 0 ? from : 0);
  for (int64_t t = tail_begin; t < boundary; ++t) {
    const Seq s = sequence_ending_after(t);
    if (s.b >= p.batch) break;
    if (!live || t < s.start || s.line < 0) continue;
    const int64_t i = t - from;
    const int64_t src = channel_last ? (static_cast<int64_t>(g - 1) * p.tail_len + i) * p.dim + c
                                     : (static_cast<int64_t>(g - 1) * p.dim + c) * p.tail_len + i;
    out[c * p.out_chan_stride + t * p.out_time_stride] = park[src];
  }

  const Seq s = sequence_ending_after(boundary);
  const int64_t tile_end = min(boundary + p.tile_len, p.tokens);
  if (!live || s.b >= p.batch || !(s.start < boundary && s.end <= tile_end) || s.line < 0) return;
  const StateView& st = p.state;
  const float* sp = p.state_park + static_cast<int64_t>(g - 1) * st.len * p.dim + c;
  for (int32_t j = 0; j < st.len; ++j)
    store_float(st.data, state_offset(st, s.line, c, j), st.dtype, sp[j * p.dim]);
}

// Per element size of x.
struct Finish {
  using Configs = native::Configs<Values<4, 2>>;
  static auto traits(auto bytes) { return std::type_identity<typename BytesToType<bytes()>::Type>{}; }
  template <typename E>
  static auto kernel() {
    return varlen_finish_kernel<E>;
  }
};

int preload_varlen() {
  int err = preload<Finish>();
  if (err == cudaSuccess) err = preload_channel_last();
  if (err == cudaSuccess) err = preload_time_contiguous();
  if (err == cudaSuccess) err = preload_time_walker();
  if (err == cudaSuccess) err = preload_time_staged();
  return err;
}

static int64_t round_up(int64_t v, int64_t m) { return (v + m - 1) / m * m; }
static int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

static bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

// Bytes of channels a thread of the vectorized channel-last kernel. An H200 sweep (bf16, one
// sequence to 64 mixed, 8k-128k tokens, the same tiles and bytes per thread) found 8-byte threads
// 0-16% faster than 16-byte ones where a token row is 8 KB (D = 4096) and 10-29% slower where it
// is 16 KB (D = 8192); why is not established. Rows of up to 8 KB take 8-byte threads, and so do
// longer rows in batches of up to 4096 tokens: twice the threads, where the 64-token tile floor
// leaves the 16-byte grid short of two blocks per SM (H200, bf16, D = 8192, 1 / 8 equal / 64 mixed
// sequences: 1k 17.6 / 18.4 / 28.2 -> 16.6 / 17.0 / 24.2 us, 4k 45.2 / 47.0 / 57.2 -> 44.1 / 44.6
// / 50.0; 6k and 8k one sequence 8-9% slower; 4-byte threads slower than 8-byte ones up to 4k).
static int channel_last_vec_bytes(int64_t esz, int64_t dim, int64_t tokens) {
  return dim * esz <= 8192 || tokens <= 4096 ? 8 : 16;
}

// Rows of one staged time-contiguous block: the most (a power of two up to 32, a warp's worth of
// channels in each prior and state access) whose shared memory fits two blocks per SM and whose
// grid still gives every SM two blocks; 0 when not even 4 rows fit.
// forced: a power of two from 4 to 32 (DELTAKERN_NATIVE_TIME_STAGED, sweeps) takes that many rows.
static int32_t time_staged_rows(const VarlenParams& p, int64_t esz, int64_t sms, int forced,
                                bool heads_first) {
  for (int32_t rows = 32; rows >= 4; rows /= 2)
    if (time_staged_smem_bytes(p.batch, rows, p.tokens, static_cast<int>(esz), heads_first) <=
            kTimeStagedSmemBytes &&
        (forced >= 4 ? rows <= forced : ceil_div(p.dim, rows) >= 2 * sms || rows == 4))
      return rows;
  return 0;
}

VarlenPlan plan_varlen(const VarlenParams& p, ScalarType x_dtype, bool channel_last, const LaunchOptions& o,
                       int64_t tile_tokens) {
  VarlenPlan plan;
  plan.channel_last = channel_last;
  plan.tail_len = std::max<int32_t>(kHalo, p.state.len);
  const int64_t T = p.tokens, D = p.dim;
  const int64_t sms = std::max(o.sm_count, 1);
  const int64_t esz = static_cast<int64_t>(size_of(x_dtype));
  // Vector accesses along the contiguous dimension (16 bytes; channel-last: 8 or 16) when the
  // base, the other stride and the contiguous extent allow, for x's loads and out's stores alike
  // (out has its own base and strides; in place it is x); otherwise the scalar instantiation. out
  // is in x's layout class, so its contiguous stride is 1 where x's is.
  if (channel_last) {
    const auto rows_allow = [&](const void* base, int64_t time_stride) {
      return aligned16(base) && (T <= 1 || (time_stride * esz) % 16 == 0);
    };
    const int vec_bytes = o.channel_last_vec_bytes == 8 || o.channel_last_vec_bytes == 16
                              ? o.channel_last_vec_bytes
                              : channel_last_vec_bytes(esz, D, T);
    plan.vectorized =
        rows_allow(p.x, p.time_stride) && rows_allow(p.out, p.out_time_stride) && D % (vec_bytes / esz) == 0;
    plan.vec_bytes = plan.vectorized ? vec_bytes : 0;
  } else {
    const auto rows_allow = [&](const void* base, int64_t chan_stride) {
      return aligned16(base) && (D <= 1 || (chan_stride * esz) % 16 == 0);
    };
    plan.vectorized = rows_allow(p.x, p.chan_stride) && rows_allow(p.out, p.out_chan_stride);
  }
  // The walker's chunks start on x's 16-byte boundaries and store whole vectors at the same token
  // positions of out: every out row must be in its x row's 16-byte phase (always in place). A
  // separate out in another phase (a misaligned slice, another row pitch) takes the tiled
  // kernel, whose scalar instantiation serves any alignment.
  const bool out_in_phase =
      (reinterpret_cast<uintptr_t>(p.x) - reinterpret_cast<uintptr_t>(p.out)) % 16 == 0 &&
      (D <= 1 || ((p.chan_stride - p.out_chan_stride) * esz) % 16 == 0);
  // Time-contiguous rows of up to 2 KB (1k tokens of 16 bits): whole rows staged per block, every
  // sequence edge handled by the whole block at once; but one sequence on fewer rows, where the
  // walker's warps are enough. H200, bf16, graph replay, 1 / 8 equal / 64 mixed sequences, walker
  // -> staged: D = 8192 1k 18.2 / 20.6 / 62.7 -> 17.4 / 18.6 / 38.3 us, D = 4096 10.1 / 11.6 / 33.7
  // -> 11.3 / 11.8 / 20.2; at 2k and 4k the walker is faster but for 64 mixed.
  if (!channel_last && tile_tokens == 0 && plan.vectorized && o.time_staged != 0 && p.batch < 65536 &&
      T <= INT32_MAX - 16) {
    const bool heads_first = o.time_heads >= 0 ? o.time_heads == 1 : time_staged_heads_first(p.batch);
    const int32_t rows = time_staged_rows(p, esz, sms, o.time_staged, heads_first);
    const bool pays = T * esz <= 2048 && (p.batch > 1 || D >= 60 * sms);
    if (rows > 0 && (o.time_staged >= 1 || pays)) {
      plan.time_staged = true;
      plan.heads_first = heads_first;
      plan.rows_per_block = rows;
      plan.tile_len = std::max<int64_t>(T, 1);
      return plan;
    }
  }
  // Time-contiguous with enough rows to fill the GPU (or few tokens per row): one warp walks each
  // row, in place without tiles or scratch. Fewer, longer rows leave too few warps in flight, so
  // those are tiled; a tile override (sweeps, tests of the tiled kernel) also tiles.
  if (!channel_last && tile_tokens == 0 && (D >= 8 * sms || T <= 2048) && T <= INT32_MAX - 65536 &&
      out_in_phase) {
    plan.row_walker = true;
    // Rows of up to 4096 tokens walk half-size chunks with twice the warps per SM: H200, bf16,
    // D = 8192, 64 mixed sequences: 1k tokens 98.1 -> 64.8 us, 2k 103.0 -> 62.6, 4k 89.1 -> 81.5;
    // from 8k up the long chunks are 1-10% faster (D = 4096, 8 equal sequences: 4-6% slower at
    // 2k and 4k, every other row at or under 4k 1-39% faster).
    plan.short_rows = T <= 4096;
    plan.tile_len = std::max<int64_t>(T, 1);
    return plan;
  }
  int64_t granule, tile;
  if (channel_last) {
    // Walkers are threads of kVec channels. Size the tiles for about two blocks per SM: each
    // thread's walk is then long enough to amortise its start-up (sequence lookup, prior, state),
    // and the tiles still cover every SM. An H200 sweep of the tile length (NOTES.md) put the best
    // at 1-2 blocks per SM for D = 4096 and 8192 from 8k to 32k tokens; tiles under 64 tokens
    // would spend too much on parked tails.
    granule = 8;
    const int64_t channel_blocks =
        ceil_div(ceil_div(D, plan.vectorized ? plan.vec_bytes / esz : 1), channel_last_threads());
    tile = std::max<int64_t>(64, round_up(ceil_div(T * channel_blocks, 2 * sms), granule));
  } else {
    // A block is rows_per_block rows of (warps / rows) warp segments; the tile is what one block
    // covers. One warp segment per row measured best on the H200 (many sequences per tile cost
    // least when each warp owns its row); the override can lengthen it for sweeps.
    const int64_t seg = time_contiguous_segment(x_dtype, plan.vectorized), warps = time_contiguous_warps();
    int64_t rows = warps;
    if (tile_tokens > 0) {
      rows = 1;
      while (rows < warps && (warps / rows) * seg > tile_tokens) rows *= 2;
    }
    plan.rows_per_block = static_cast<int32_t>(rows);
    granule = tile = (warps / rows) * seg;
  }
  if (tile_tokens > 0 && channel_last) tile = round_up(tile_tokens, granule);
  tile = std::max<int64_t>(tile, round_up(plan.tail_len, granule));
  plan.tile_len = tile;
  plan.ntiles = static_cast<int32_t>(std::max<int64_t>(1, ceil_div(T, tile)));
  // Channel-last with every tile in one thread block cluster: tiles hold their tails and crossing
  // states until the cluster's barriers, so there is no scratch and no finish pass
  // (H200, bf16, graph replay, 1k tokens, 1 / 8 equal / 64 mixed sequences: D = 8192 16.0 / 16.5 /
  // 23.0 -> 14.4 / 14.7 / 23.6 us, D = 4096 11.9 / 12.5 / 18.5 -> 11.4 / 11.7 / 18.7). Width 4 and
  // S <= 3: the window then holds every new state, and no tile reads another's originals after
  // the first barrier. Longer tiles, to put a longer call in one cluster, lose: H100, D = 8192,
  // 1 seq / 64 mixed, 8k 105.3 / 113.3 -> 115.4 / 120.6 us (512-token tiles), 16k 198.2 / 204.9
  // -> 224.5 / 227.9 (1024).
  if (channel_last && plan.vectorized && plan.ntiles > 1 && plan.ntiles <= o.cluster_tiles &&
      p.conv.width == kMaxWidth && p.state.len <= kHalo) {
    plan.clustered = true;
    return plan;
  }
  const size_t boundaries = static_cast<size_t>(plan.ntiles - 1);
  plan.park_bytes =
      parks_tail(p) ? round_up(static_cast<int64_t>(boundaries * plan.tail_len * D * esz), 256) : 0;
  plan.state_park_bytes = boundaries * p.state.len * D * sizeof(float);
  return plan;
}

int launch_varlen(VarlenParams p, ScalarType x_dtype, const VarlenPlan& plan, const LaunchOptions& o,
                  void* stream) {
  p.tile_len = plan.tile_len;
  p.ntiles = plan.ntiles;
  p.tail_len = plan.tail_len;
  p.rows_per_block = plan.rows_per_block;
  p.clustered = plan.clustered;
  if (plan.row_walker) return launch_varlen_time_walker(p, x_dtype, plan.short_rows, o, stream);
  if (plan.time_staged) return launch_varlen_time_staged(p, x_dtype, plan.heads_first, o, stream);
  int err = plan.channel_last ? launch_varlen_channel_last(p, x_dtype, plan.vec_bytes, o, stream)
                              : launch_varlen_time_contiguous(p, x_dtype, plan.vectorized, o, stream);
  if (err != cudaSuccess || plan.ntiles == 1 || plan.clustered) return err;
  constexpr int kThreads = 256;
  const dim3 grid(plan.ntiles - 1, static_cast<unsigned>(ceil_div(p.dim, kThreads)));
  return with_instantiation<Finish>(
      [&](auto, auto kernel) {
        return launch_kernel(kernel, grid, dim3(kThreads), 0, static_cast<cudaStream_t>(stream), o.pdl, p,
                             plan.channel_last);
      },
      static_cast<int>(size_of(x_dtype)));
}

}  // namespace deltakern::native
