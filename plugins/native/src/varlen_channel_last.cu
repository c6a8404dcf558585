// causal_conv1d_varlen, channel-last x (stride(channel) == 1, time stride >= D): each thread
// owns kVec consecutive channels of one token tile and walks the tile's tokens in order,
// carrying the last three inputs in registers; consecutive threads cover consecutive channels,
// so a warp reads and writes whole token rows. Token rows reach the thread through a private
// ring in shared memory filled by cp.async, kStages batches ahead: many bytes in flight per
// thread without registers held for them. The ring is private to the thread (it reads only
// what it copied), so no block barrier is needed.
//
// In place without races: a thread reads and writes only its own channels, and the only tokens
// of this tile that another tile reads are its last tail_len (the next tile's halo, and the
// originals a crossing sequence's new state is made of). Their outputs are parked, and the
// finish pass writes them (varlen_launch.cu). Into a separate out (causal_conv1d_varlen_out)
// every load still reads x, which nothing writes, so nothing is parked (parks_tail).
//
// A call of up to 16 tiles (sm_90, width 4, S <= 3; plan_varlen) runs its tiles as one thread
// block cluster instead, with nothing parked and no finish pass: a tile reads the three rows
// before it and arrives at the cluster's barrier, walks, holds its tail's outputs (in the ring
// slots they were read from) and the new state of a sequence that started in an earlier tile (in
// registers), writes the tail once every tile has arrived, arrives again (every prior it reads is
// read), and writes the state once every tile has arrived a second time. Its walk is one stream
// of rows through the sequence edges (see the kernel).
#include <algorithm>

#include "conv1d_common.cuh"
#include "launch.h"

namespace deltakern::native {

// kVecBytes: bytes of channels a thread, 16 or 8 (plan_varlen picks); 0 is the scalar path
// (misaligned x): one channel and plain loads. kWidth == 0: the call's width and activation, read
// at run time (the scalar path's instantiations, see ChannelLast).
// kClustered: the call's tiles form one thread block cluster (p.clustered; plan_varlen). A
// template parameter: as a run-time flag its registers slowed every unclustered call (H200, 8k
// tokens: 3%).
template <typename T_, int kVecBytes_, int kWidth_, bool kSilu_, bool kClustered_ = false>
struct ChannelLastTraits {
  using T = T_;
  static constexpr int kWidth = kWidth_;
  static constexpr bool kSilu = kSilu_;
  static constexpr bool kClustered = kClustered_;
  static constexpr int kNThreads = 128;
  // plan_varlen sizes the tiles for about two blocks per SM, so a thread may use the registers
  // of two: at four, the 16-byte path spilled in its inner loop (H200: 3-5% slower at 8k-32k).
  static constexpr int kMinBlocks = 2;
  static constexpr int kVec = kVecBytes_ > 0 ? kVecBytes_ / static_cast<int>(sizeof(T)) : 1;
  static constexpr int kBatch = 4;   // token rows per cp.async group
  static constexpr int kStages = 4;  // groups in flight
  static constexpr int kDepth = kBatch * kStages;
  static constexpr int kSmemBytes = kDepth * kNThreads * kVecBytes_;
  using Vec = typename BytesToType<sizeof(T) * kVec>::Type;
};

template <typename T, int kVec, typename Vec>
__device__ __forceinline__ void unpack(const Vec& raw, float (&out)[kVec]) {
  union {
    Vec v;
    T e[kVec];
  } u;
  u.v = raw;
#pragma unroll
  for (int i = 0; i < kVec; ++i) out[i] = to_float(u.e[i]);
}

template <typename Kt>
__global__ void __launch_bounds__(Kt::kNThreads, Kt::kMinBlocks)
    varlen_channel_last_kernel(const VarlenParams p) {
  using T = typename Kt::T;
  using Vec = typename Kt::Vec;
  constexpr int kVec = Kt::kVec;
  constexpr int kBatch = Kt::kBatch, kStages = Kt::kStages;
  constexpr bool kVectorized = Kt::kSmemBytes > 0;
  constexpr bool kClustered = Kt::kClustered;
  extern __shared__ __align__(16) unsigned char smem[];
  wait_for_previous_grid();

  const int32_t g = blockIdx.x;
  const int64_t t_begin = static_cast<int64_t>(g) * p.tile_len;
  const int64_t c0 = (static_cast<int64_t>(blockIdx.y) * Kt::kNThreads + threadIdx.x) * kVec;
  const int64_t t_end = min(t_begin + p.tile_len, p.tokens);
  const int64_t ts = p.time_stride, out_ts = p.out_time_stride;
  T* const x = static_cast<T*>(p.x) + c0;
  auto load = [&](int64_t t) { return *reinterpret_cast<const Vec*>(x + t * ts); };

  // The token ring: stage sg holds rows sg * kBatch + [0, kBatch) at [row][thread]. Rows are
  // counted in 32 bits from the walk's first row (a walk lies inside one tile), and the walk keeps
  // running pointers (the next row to copy, the stage to fill): per batch, a few adds instead of
  // 64-bit products and a modulo per row.
  Vec* const ring = reinterpret_cast<Vec*>(smem) + threadIdx.x;
  int32_t rows = 0, next_row = 0;
  const T* next_src = x;
  auto start_ring = [&](int64_t first, int32_t count) {
    rows = count;
    next_row = 0;
    next_src = x + first * ts;
  };
  auto issue = [&](Vec* stage) {
    if (kClustered && next_row + kBatch <= rows) {  // one guard a batch
#pragma unroll
      for (int k = 0; k < kBatch; ++k) cp_async<sizeof(Vec)>(stage + k * Kt::kNThreads, next_src + k * ts);
    } else {
#pragma unroll
      for (int k = 0; k < kBatch; ++k)
        if (next_row + k < rows) cp_async<sizeof(Vec)>(stage + k * Kt::kNThreads, next_src + k * ts);
    }
    cp_async_commit();  // one group per batch, empty or not, keeps the wait counts uniform
    next_row += kBatch;
    next_src += kBatch * ts;
  };
  auto issue_all = [&] {
#pragma unroll
    for (int sg = 0; sg < kStages; ++sg) issue(ring + sg * kBatch * Kt::kNThreads);
  };

  // A clustered tile walks its rows as one stream: the ring runs across sequence edges, and the
  // tile's sequences (offsets, line, flag) are read once into shared memory, so an edge inside the
  // tile costs the finished sequence's state and the next one's window (its prior loaded one
  // sequence ahead), not a lookup chain and a drained ring. Its ring, the rows before it and the
  // table are all in flight at once here, before the threads past D leave.
  constexpr int kTable = 64;  // the tile's first sequences; any further ones are read as met
  __shared__ int4 table[kClustered ? kTable : 1];
  auto load_seq = [&](int32_t b, bool flag) {
    const int32_t q0 = static_cast<int32_t>(seq_offset(p, b));
    const int32_t q1 = max(q0, static_cast<int32_t>(seq_offset(p, b + 1)));
    const int32_t line = static_cast<int32_t>(state_line(p.cache_indices, b, p.state, p.conv, flag));
    return make_int4(q0, q1, line, has_initial_state(p, b) ? 1 : 0);
  };
  Vec tile_halo[kHalo];
  if constexpr (kClustered) {
    if (c0 < p.dim) {
      start_ring(t_begin, static_cast<int32_t>(t_end - t_begin));
      issue_all();
#pragma unroll
      for (int i = 0; i < kHalo; ++i)
        tile_halo[i] = t_begin - kHalo + i >= 0 ? load(t_begin - kHalo + i) : Vec{};
    }
  }
  // table[k] is sequence table_base + k. A batch that fits is read whole, and the tile's first
  // sequence found in it: one round trip where the search and then the table took two (H100, 1k
  // tokens, every mix of 1-64 sequences: 0.2-0.45 us faster). One fill for both branches, from
  // table_base, is 72 instructions shorter and was 0.04-0.28 us slower on every mix.
  int32_t b_first, table_base = 0;
  if (kClustered && p.batch <= kTable) {
    if (threadIdx.x < p.batch)
      table[threadIdx.x] = load_seq(static_cast<int32_t>(threadIdx.x), blockIdx.y == 0);
    __syncthreads();
    const int lane = static_cast<int>(threadIdx.x % 32);
    const unsigned low = __ballot_sync(0xffffffffu, lane < p.batch && table[lane].y < t_begin);
    const unsigned high = __ballot_sync(0xffffffffu, lane + 32 < p.batch && table[lane + 32].y < t_begin);
    b_first = __popc(low) + __popc(high);  // the first sequence ending at or after t_begin
  } else {
    b_first = warp_first_sequence_ending_at_or_after(p, t_begin);  // whole warps
    if constexpr (kClustered) {
      table_base = b_first;
      const int32_t b = b_first + static_cast<int32_t>(threadIdx.x);
      if (threadIdx.x < kTable && b < p.batch) table[threadIdx.x] = load_seq(b, blockIdx.y == 0);
      __syncthreads();
    }
  }
  if (c0 >= p.dim) {  // no block-wide barrier below; the cluster's (see the end) these threads too
    if constexpr (kClustered) {
      cluster_arrive_relaxed();
      cluster_wait();
      cluster_arrive_relaxed();
    }
    return;
  }
  const bool last_tile = g == p.ntiles - 1;
  // The tail's outputs are parked for the finish pass, or held until the cluster's barrier.
  const bool parks = !last_tile && parks_tail(p);
  const int64_t park_from = parks ? t_end - p.tail_len : t_end;
  T* const out_base = static_cast<T*>(p.out) + c0;  // x in place; vector-aligned where x is (plugin.cpp)
  // Park layout (ntiles-1, tail_len, D): a parked row is as coalesced as an x row.
  T* const park = parks && !kClustered
                      ? static_cast<T*>(p.park) + static_cast<int64_t>(g) * p.tail_len * p.dim + c0
                      : nullptr;
  // In a cluster the previous tile writes its tail once every tile has arrived at the cluster's
  // barrier: the rows before this tile are read first, and used, because the arrive is relaxed
  // (it orders no load still in flight). A releasing arrive would wait for every copy in flight,
  // the ring's included (H100, 1k tokens: relaxed arrives 0.4-0.9 us faster on every mix).
  if constexpr (kClustered) {
#pragma unroll
    for (int i = 0; i < kHalo; ++i) {
      float used[kVec];
      unpack<T, kVec>(tile_halo[i], used);
      asm volatile("" ::"f"(used[0]));
    }
    cluster_arrive_relaxed();
  }
  unsigned held_rows = 0;  // in a cluster, the tail's outputs (bit k: tail row k, in the ring)
  int64_t held_line = -1;  // and the new state of a sequence that started in an earlier tile
  float held_state[kHalo][kVec];

  ChannelTaps taps[kVec];
  if constexpr (kVectorized)
    load_taps_vec<T, kVec>(p.conv, c0, taps);
  else
    taps[0] = load_taps(p.conv, c0);
  const int first = kMaxWidth - (Kt::kWidth > 0 ? Kt::kWidth : p.conv.width);
  const bool silu = Kt::kWidth > 0 ? Kt::kSilu : p.conv.silu;
  const StateView& st = p.state;
  // Where the state pool is in x's dtype with S == 3 and holds this thread's channels as whole
  // vectors, compact per channel ((lines, D, 3): three vectors cover the kVec rows) or per
  // position ((lines, 3, D): a vector a position), a prior or a new state is three vector loads
  // or stores instead of 3 * kVec scalar ones, each behind a dtype switch: a visible share of a
  // piece's start where a tile holds several sequences.
  enum class StateForm { scalar, chan_major, pos_major };
  StateForm form = StateForm::scalar;
  if constexpr (kVectorized) {
    const bool whole = st.dtype == kScalarTypeOf<T> && st.len == kHalo && st.line_stride % kVec == 0 &&
                       reinterpret_cast<uintptr_t>(st.data) % sizeof(Vec) == 0;
    if (whole && st.pos_stride == 1 && st.chan_stride == kHalo) form = StateForm::chan_major;
    if (whole && st.chan_stride == 1 && st.pos_stride % kVec == 0) form = StateForm::pos_major;
  }
  union StateVecs {
    Vec v[kHalo];
    T e[kHalo * kVec];
  };
  // Vector k of this thread's state block on `line`.
  auto state_vec = [&](int64_t line, int k) {
    T* const row = static_cast<T*>(st.data) + line * st.line_stride;
    return form == StateForm::chan_major ? reinterpret_cast<Vec*>(row + c0 * kHalo) + k
                                         : reinterpret_cast<Vec*>(row + k * st.pos_stride + c0);
  };
  // Entry (channel v, position j) of a block is e[v * 3 + j] or e[j * kVec + v]: two loops with
  // constant indices, not one with a computed index (which would put the block in local memory).
  auto state_to_window = [&](const StateVecs& sv, float(&w)[kHalo][kVec], bool use) {
    if (form == StateForm::chan_major) {
#pragma unroll
      for (int j = 0; j < kHalo; ++j)
#pragma unroll
        for (int v = 0; v < kVec; ++v) w[j][v] = use && j >= first ? to_float(sv.e[v * kHalo + j]) : 0.f;
    } else {
#pragma unroll
      for (int j = 0; j < kHalo; ++j)
#pragma unroll
        for (int v = 0; v < kVec; ++v) w[j][v] = use && j >= first ? to_float(sv.e[j * kVec + v]) : 0.f;
    }
  };
  auto window_to_state = [&](const float(&w)[kHalo][kVec], StateVecs& sv) {
    if (form == StateForm::chan_major) {
#pragma unroll
      for (int j = 0; j < kHalo; ++j)
#pragma unroll
        for (int v = 0; v < kVec; ++v) sv.e[v * kHalo + j] = from_float<T>(w[j][v]);
    } else {
#pragma unroll
      for (int j = 0; j < kHalo; ++j)
#pragma unroll
        for (int v = 0; v < kVec; ++v) sv.e[j * kVec + v] = from_float<T>(w[j][v]);
    }
  };

  // A new state of S <= 3 from the window that holds its sequence's last three e-values: into the
  // state row, or the finish pass's park.
  auto write_window_state = [&](int64_t line, const float(&w)[kHalo][kVec], float* spark) {
    if (spark == nullptr && form != StateForm::scalar) {
      StateVecs next;  // S == 3: the window is the new state
      window_to_state(w, next);
#pragma unroll
      for (int k = 0; k < kHalo; ++k) *state_vec(line, k) = next.v[k];
      return;
    }
#pragma unroll
    for (int v = 0; v < kVec; ++v)
#pragma unroll
      for (int i = 0; i < kHalo; ++i) {
        const int32_t j = i - (kHalo - st.len);  // window entry i is new state entry j
        if (j < 0) continue;
        if (spark != nullptr)
          spark[static_cast<int64_t>(j) * p.dim + c0 + v] = w[i][v];
        else
          store_float(st.data, state_offset(st, line, c0 + v, j), st.dtype, w[i][v]);
      }
  };
  // The window of a piece that starts at a: e-values of the three tokens before it, from x
  // (`halo`, rows a - 3 .. a - 1 where they are in the sequence) or from the prior, entry
  // S + (pos - q0).
  auto scalar_window = [&](float(&w)[kHalo][kVec], const Vec(&halo)[kHalo], int64_t q0, int64_t a,
                           int64_t line, bool init) {
#pragma unroll
    for (int i = 0; i < kHalo; ++i) {
      const int64_t pos = a - kHalo + i;
      if (pos >= q0) {
        unpack<T, kVec>(halo[i], w[i]);
      } else {
        const int64_t j = st.len + (pos - q0);
#pragma unroll
        for (int v = 0; v < kVec; ++v)
          w[i][v] = init && j >= 0 && i >= first
                        ? load_float(st.data, state_offset(st, line, c0 + v, j), st.dtype)
                        : 0.f;
      }
    }
  };
  // One step of the walk: the output of the row `raw`, the window moved on.
  auto convolve = [&](const Vec& raw, float(&win)[kHalo][kVec], float(&out)[kVec]) {
    float cur[kVec];
    unpack<T, kVec>(raw, cur);
#pragma unroll
    for (int v = 0; v < kVec; ++v) {
      out[v] = conv_point<T>(taps[v], first, win[0][v], win[1][v], win[2][v], cur[v], silu);
      win[0][v] = win[1][v];
      win[1][v] = win[2][v];
      win[2][v] = cur[v];
    }
  };

  if constexpr (kClustered) {
    // Width 4 and S <= 3 (plan_varlen): the window holds every new state, and nothing is parked.
    const int32_t tile_rows = rows;
    const int32_t held_from = static_cast<int32_t>(park_from - t_begin);  // tail rows held from here
    auto seq = [&](int32_t b) {
      return b - table_base < kTable ? table[b - table_base] : load_seq(b, c0 == 0);
    };
    // The current piece: rows [.., piece_end) of the tile, of sequence b - 1 (b is the next one).
    int32_t b = b_first, piece_end = 0, line = -1;
    int32_t fast_end = 0;  // the batches before it are the piece's, walked without checks
    bool live = false, ends_here = false, crossing = false;
    float win[kHalo][kVec];
    Vec ahead[kHalo];  // the prior of sequence ahead_b, loaded while the piece before it walks
    int32_t ahead_b = -1;
    auto load_ahead = [&](int32_t next) {
      if (form == StateForm::scalar || next >= p.batch) return;
      const int4 s = seq(next);
      if (s.x >= t_end || s.z < 0 || s.w == 0) return;
#pragma unroll
      for (int k = 0; k < kHalo; ++k) ahead[k] = *state_vec(s.z, k);
      ahead_b = next;
    };
    // Ends the current piece at tile row r and starts the one at r, past every sequence without
    // rows here (an empty one's state is written on the way).
    auto advance = [&](int32_t r) {
      if (live && ends_here) {
        if (crossing) {  // written after the cluster's second barrier
          held_line = line;
#pragma unroll
          for (int i = 0; i < kHalo; ++i)
#pragma unroll
            for (int v = 0; v < kVec; ++v) held_state[i][v] = win[i][v];
        } else {
          write_window_state(line, win, nullptr);
        }
      }
      live = false;
      piece_end = INT32_MAX;
      fast_end = 0;
      for (; b < p.batch; ++b) {
        const int4 s = seq(b);
        const int32_t q0 = s.x, q1 = s.y;
        if (q0 >= t_end && !last_tile) return;
        if (q0 == q1 ? tile_of(p, q0) != g : q1 <= t_begin) continue;
        const int64_t a = max(static_cast<int64_t>(q0), t_begin);
        if (a - t_begin > r) {  // rows before query_start_loc[0] are no sequence's
          piece_end = static_cast<int32_t>(a - t_begin);
          return;
        }
        line = s.z;
        const bool init = s.w != 0;
        if (q0 == q1) {  // an empty one keeps its prior, or gets zeros
          if (line >= 0 && !init) {
            const float zeros[kHalo][kVec] = {};
            write_window_state(line, zeros, nullptr);
          }
          continue;
        }
        ends_here = q1 <= t_end;
        crossing = a != q0;
        live = line >= 0;
        piece_end = static_cast<int32_t>(min(static_cast<int64_t>(q1), t_end) - t_begin);
        if (live) {
          if (form != StateForm::scalar && !crossing) {  // the whole window is the prior
            StateVecs prior;
#pragma unroll
            for (int k = 0; k < kHalo; ++k)
              prior.v[k] = !init ? Vec{} : ahead_b == b ? ahead[k] : *state_vec(line, k);
            state_to_window(prior, win, init);
          } else {
            scalar_window(win, tile_halo, q0, a, line, init);
          }
        }
        if (live) fast_end = min(piece_end, held_from);
        load_ahead(++b);
        return;
      }
    };
    auto step = [&](const Vec& raw, int32_t r, T* o) {
      float out[kVec];
      convolve(raw, win, out);
      if (r >= held_from) {  // into the ring slot the row came from: no row is copied after the tail
        union {
          Vec v;
          T e[kVec];
        } u;
        round_into(u.e, out);
        ring[(r % Kt::kDepth) * Kt::kNThreads] = u.v;
        held_rows |= 1u << (r - held_from);
      } else {
        store_elems<T, kVec>(o, out);
      }
    };

    advance(0);
    T* out_x = out_base + t_begin * out_ts;  // row r0 of the tile
    Vec* stage = ring;                       // the stage of the batch at r0
    auto next_stage = [&] {
      stage = stage == ring + (kStages - 1) * kBatch * Kt::kNThreads ? ring : stage + kBatch * Kt::kNThreads;
      out_x += kBatch * out_ts;
    };
    for (int32_t r0 = 0; r0 < tile_rows; r0 += kBatch) {
      // A piece's whole batches in a loop of their own: its code stays together (the fetch stalls
      // when its back edge jumps over the edge code).
      for (; r0 + kBatch <= fast_end; r0 += kBatch) {
        cp_async_wait<kStages - 1>();  // the batch at r0 has landed
        Vec cur[kBatch];
#pragma unroll
        for (int k = 0; k < kBatch; ++k) cur[k] = stage[k * Kt::kNThreads];
        issue(stage);  // into the slots just read
#pragma unroll
        for (int k = 0; k < kBatch; ++k) {
          float out[kVec];
          convolve(cur[k], win, out);
          store_elems<T, kVec>(out_x + k * out_ts, out);
        }
        next_stage();
      }
      if (r0 >= tile_rows) break;
      cp_async_wait<kStages - 1>();
      if (live || r0 + kBatch > piece_end) {  // an edge, the held tail, or the tile's end
#pragma unroll 1
        for (int k = 0; k < kBatch && r0 + k < tile_rows; ++k) {
          while (r0 + k >= piece_end) advance(r0 + k);
          if (live) step(stage[k * Kt::kNThreads], r0 + k, out_x + k * out_ts);
        }
      }  // else a skipped sequence's rows
      issue(stage);
      next_stage();
    }
    cp_async_wait<0>();
    advance(tile_rows);  // the last piece, and any empty sequences after it in the last tile
  } else {
    for (int32_t b = b_first; b < p.batch; ++b) {
      const int64_t q0 = seq_offset(p, b);
      const int64_t q1 = max(q0, seq_offset(p, b + 1));
      if (q0 >= t_end && !last_tile) break;
      if (q0 == q1 ? tile_of(p, q0) != g : q1 <= t_begin) continue;
      const bool ends_here = q1 <= t_end;  // exactly one tile sees the end (or the empty sequence)
      const int64_t a = max(q0, t_begin), e = min(q1, t_end);

      // The ring first (it depends on a and e only), so that its loads overlap the lookups, prior
      // and state work below.
      start_ring(a, static_cast<int32_t>(e - a));
      if constexpr (kVectorized) issue_all();

      // e-values of the three tokens before a: x (originals: this tile has not written them, they
      // are the previous tile's parked tail, or out is not x), or the prior before the sequence
      // starts. The x rows and the flag are loaded with the line, not after it: one round trip less.
      Vec halo[kHalo];
#pragma unroll
      for (int i = 0; i < kHalo; ++i)
        if (a - kHalo + i >= q0) halo[i] = load(a - kHalo + i);
      const bool init = has_initial_state(p, b);
      const int64_t line = state_line(p.cache_indices, b, st, p.conv, ends_here && c0 == 0);
      if (line < 0) {
        if constexpr (kVectorized) cp_async_wait<0>();  // the ring is reused by the next piece
        continue;
      }
      float win[kHalo][kVec];
      if (form != StateForm::scalar && a == q0) {  // the whole window is the prior
        StateVecs prior;
#pragma unroll
        for (int k = 0; k < kHalo; ++k) prior.v[k] = init ? *state_vec(line, k) : Vec{};
        state_to_window(prior, win, init);
      } else {
        scalar_window(win, halo, q0, a, line, init);
      }
      // The new state is the last S entries of e = concat(prior, x). For S <= 3 the window holds
      // them when the walk ends (its entries are e, except the taps a narrow width skips, which
      // start as zeros): written then from registers. Otherwise from the originals, before the walk
      // overwrites them: this thread has not written them yet, and those before the tile are the
      // previous tile's parked tail (or out is not x). A sequence that started in an earlier tile,
      // whose first tile reads the old prior, parks its new state for the finish pass.
      const bool crossing = a != q0;
      float* const spark = crossing ? p.state_park + static_cast<int64_t>(g - 1) * st.len * p.dim : nullptr;
      const bool state_from_window = st.len <= kHalo && (first == 0 || q1 - q0 >= kHalo);
      if (ends_here && !state_from_window) {
#pragma unroll
        for (int v = 0; v < kVec; ++v) write_new_state<T>(p, x + v, ts, q0, q1, line, c0 + v, init, spark);
      }

      // Row r of the piece is written at out_x (then out_x += out_ts) until the parked tail, whose
      // rows go to the park buffer.
      T* out_x = out_base + a * out_ts;
      const int32_t park_row =
          static_cast<int32_t>(min(max(park_from - a, int64_t{0}), static_cast<int64_t>(rows)));
      T* const park_at = park != nullptr ? park + (a + park_row - park_from) * p.dim : nullptr;
      auto step = [&](const Vec& raw, int32_t r) {
        float out[kVec];
        convolve(raw, win, out);
        T* o = out_x;
        if (r >= park_row) o = park_at + static_cast<int64_t>(r - park_row) * p.dim;
        store_elems<T, kVec>(o, out);
        out_x += out_ts;
      };

      if constexpr (kVectorized) {
        Vec* stage = ring;  // the stage of the batch at r
        for (int32_t r = 0; r < rows; r += kBatch) {
          cp_async_wait<kStages - 1>();  // the batch at r has landed
          Vec cur[kBatch];
#pragma unroll
          for (int k = 0; k < kBatch; ++k) cur[k] = stage[k * Kt::kNThreads];
          issue(stage);  // into the slots just read
          stage =
              stage == ring + (kStages - 1) * kBatch * Kt::kNThreads ? ring : stage + kBatch * Kt::kNThreads;
          if (r + kBatch <= rows) {
#pragma unroll
            for (int k = 0; k < kBatch; ++k) step(cur[k], r + k);
          } else {
#pragma unroll
            for (int k = 0; k < kBatch; ++k)
              if (r + k < rows) step(cur[k], r + k);
          }
        }
        cp_async_wait<0>();  // the ring is reused by the next piece
      } else {
        for (int32_t r = 0; r < rows; ++r) step(load(a + r), r);
      }
      if (ends_here && state_from_window && !(q1 == q0 && init))  // an empty one keeps its prior
        write_window_state(line, win, spark);
    }
  }
  if constexpr (kClustered) {
    cluster_wait();  // every tile has read the rows before it: the tail is written
#pragma unroll
    for (int k = 0; k < kHalo; ++k)
      if (held_rows & (1u << k))
        *reinterpret_cast<Vec*>(out_base + (park_from + k) * out_ts) =
            ring[((park_from - t_begin + k) % Kt::kDepth) * Kt::kNThreads];
    cluster_arrive_relaxed();  // this thread has read (and used) every prior it reads
    if (held_line >= 0) {
      cluster_wait();
      write_window_state(held_line, held_state, nullptr);
    }
  }
  allow_next_grid();
}

// (x dtype, bytes of channels a thread, width, silu, clustered). The scalar path serves misaligned
// x only, so one instantiation per dtype takes width and activation at run time; clusters take
// vectors and width 4 (plan_varlen): 51 kernels, not 108.
struct ChannelLast {
  using Configs = native::Configs<Dtypes, Values<16, 8, 0>, Widths, Bools, Bools>;
  static auto traits(auto dtype, auto vec_bytes, auto width, auto silu, auto clustered) {
    if constexpr (vec_bytes() == 0)
      return std::type_identity<ChannelLastTraits<element_t<dtype()>, 0, 0, false>>{};
    else
      return std::type_identity<ChannelLastTraits<element_t<dtype()>, vec_bytes(), width(), silu(),
                                                  clustered() && width() == kMaxWidth>>{};
  }
  template <typename Kt>
  static auto kernel() {
    return varlen_channel_last_kernel<Kt>;
  }
};

int channel_last_threads() { return ChannelLastTraits<float, 16, 4, false>::kNThreads; }

// Every instantiation may run in clusters of up to 16 blocks (more than the portable 8); returns
// the first error.
int preload_channel_last() {
  return for_each_config(ChannelLast::Configs{}, [](auto... cs) {
    using Kt = typename decltype(ChannelLast::traits(cs...))::type;
    return cudaFuncSetAttribute(ChannelLast::kernel<Kt>(), cudaFuncAttributeNonPortableClusterSizeAllowed, 1);
  });
}

// The most tiles one cluster of the vectorized kernel can hold on this device (a cluster must fit
// in one GPC at once), or 0 where clusters are not available.
int channel_last_cluster_limit() {
  using Kt = ChannelLastTraits<float, 16, 4, true, true>;  // the most shared memory a block
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = dim3(16, 1);
  cfg.blockDim = dim3(Kt::kNThreads);
  cfg.dynamicSmemBytes = Kt::kSmemBytes;
  int size = 0;
  if (cudaOccupancyMaxPotentialClusterSize(&size, varlen_channel_last_kernel<Kt>, &cfg) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return size > 1 ? std::min(size, 16) : 0;
}

int launch_varlen_channel_last(const VarlenParams& p, ScalarType dtype, int vec_bytes, const LaunchOptions& o,
                               void* stream) {
  return with_instantiation<ChannelLast>(
      [&](auto traits, auto kernel) {
        using Kt = typename decltype(traits)::type;
        if (Kt::kClustered != p.clustered) return cudaErrorInvalidValue;  // plan_varlen keeps them equal
        const int64_t threads = (p.dim + Kt::kVec - 1) / Kt::kVec;
        const dim3 grid(p.ntiles, static_cast<unsigned>((threads + Kt::kNThreads - 1) / Kt::kNThreads));
        return launch_kernel_in_clusters(kernel, grid, dim3(Kt::kNThreads), Kt::kSmemBytes,
                                         static_cast<cudaStream_t>(stream), o.pdl,
                                         p.clustered ? static_cast<unsigned>(p.ntiles) : 1u, p);
      },
      dtype, vec_bytes, p.conv.width, p.conv.silu, p.clustered);
}

}  // namespace deltakern::native
