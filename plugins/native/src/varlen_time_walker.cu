// causal_conv1d_varlen, time-contiguous x (stride(time) == 1), one warp per channel row walking
// the row's tokens in order: in place with no scratch and no second pass, because no other warp
// ever reads this row. Used when there are enough rows to fill the GPU (see plan_varlen). Loads
// read x (through the ring), stores write out's row (x's in place; into a separate out, its row
// is in the same 16-byte phase as x's, which plan_varlen requires, so the vector stores stay
// aligned).
//
// A step of the walk is a chunk of kChunk tokens: access j of lane l holds tokens
// c0 + [(j*32 + l) * kVec, +kVec), so every load and store instruction is one contiguous 512-byte
// run. The next chunk is loaded before the current one is stored, and the three originals before
// each access come from the previous lane (lane 0: lane 31 of the previous access or chunk) by
// shuffle. Every output is first computed from the raw window, the fast path that almost every
// token takes; sequence edges are then repaired per sequence, not per token:
//   - tokens outside every live sequence (padded slots, before q[0], after q[batch], the ragged
//     ends of the row) are not stored, with a per-token mask built only for chunks that hold any;
//   - the first three tokens of a sequence read its prior instead of the previous sequence's
//     tokens: three lanes per sequence start recompute and overwrite them;
//   - the new state of a sequence is written when the walk reaches its last token, from the raw
//     originals of the last two chunks, kept in a shared-memory ring (S <= kMaxStateLen < kChunk).
// The sequences around the walk sit in a 32-entry table, lane k holding sequence tb + k, so that
// "which sequence holds token t" is one ballot. A chunk that holds more than 32 sequences is
// walked in several table windows.
#include <climits>

#include "conv1d_common.cuh"
#include "launch.h"
#include "sequence_table.cuh"

namespace deltakern::native {

template <typename T_, int kNVecs_, int kPrefetch_, int kMinBlocks_, int kWidth_, bool kSilu_>
struct TimeWalkerTraits {
  using T = T_;
  static constexpr int kWidth = kWidth_;
  static constexpr bool kSilu = kSilu_;
  static constexpr int kNWarps = 4;
  static constexpr int kNThreads = 32 * kNWarps;
  static constexpr int kMinBlocks = kMinBlocks_;
  static constexpr int kVec = 16 / static_cast<int>(sizeof(T));  // tokens per access
  static constexpr int kNVecs = kNVecs_;                         // accesses per lane and chunk
  static constexpr int kChunk = 32 * kVec * kNVecs;              // tokens per step of the walk
  static constexpr int kPrefetch = kPrefetch_;                   // chunks in flight ahead of the walk
  static constexpr int kSlots = kPrefetch + 2;                   // + the current and the previous one
  static_assert(kChunk >= kMaxStateLen + kHalo, "the ring must hold a new state's originals");
  using Vec = uint4;
  union Pack {
    Vec v;
    T e[kVec];
  };
};

template <typename Kt>
struct WalkerShared {
  // Chunk m of the walk lands in slot m % kSlots through cp.async: the loads in flight, and the
  // raw originals of the current and the previous chunk (for the repairs and the new states).
  alignas(16) typename Kt::T slots[Kt::kSlots][Kt::kChunk];
  TableShared table;
};

// A warp's ring of chunks over the tokens [t_start, t_stop) of its row. Chunks start on 16-byte
// boundaries of the row (c_first may lie a few tokens before t_start).
template <typename Kt>
struct ChunkRing {
  using T = typename Kt::T;
  T (&slots)[Kt::kSlots][Kt::kChunk];
  const T* row;
  int32_t t_start, t_stop, c_first;
  int lane;

  __device__ T* slot(int32_t c) const {
    return slots[(static_cast<uint32_t>(c - c_first) / Kt::kChunk) % Kt::kSlots];
  }

  // Starts the copy of the chunk at c into its slot; the edges of the walk are copied element by
  // element (zeros outside), so nothing outside [t_start, t_stop) is read. One commit group per
  // chunk and lane, empty past the end, keeps every lane's group count the same.
  __device__ void issue(int32_t c) const {
    if (c < t_stop) {
      T* const s = slot(c);
#pragma unroll
      for (int j = 0; j < Kt::kNVecs; ++j) {
        const int32_t off = (j * 32 + lane) * Kt::kVec, t0 = c + off;
        if (t0 >= t_start && t0 + Kt::kVec <= t_stop) {
          cp_async<16>(s + off, row + t0);
        } else {
#pragma unroll
          for (int i = 0; i < Kt::kVec; ++i)
            s[off + i] = t0 + i >= t_start && t0 + i < t_stop ? row[t0 + i] : from_float<T>(0.f);
        }
      }
    }
    cp_async_commit();
  }
};

// The originals of tokens [c0 - kChunk, c0 + kChunk): the current chunk's slot and the previous
// one's (unused in the first chunk).
template <typename T, int kChunk>
struct ChunkOriginals {
  const T* slot;
  const T* prev_slot;
  int32_t c0;
  __device__ T elt(int32_t u) const { return u >= c0 ? slot[u - c0] : prev_slot[u - c0 + kChunk]; }
  __device__ float operator()(int32_t u) const { return to_float(elt(u)); }
};

// Raw outputs of a chunk (cur holds its originals), every token computed from the raw window: the
// three originals before each access come from the previous lane (lane 0: lane 31 of the previous
// access or chunk, carried in `carry`) by shuffle.
template <typename Kt>
__device__ __forceinline__ void convolve_chunk(typename Kt::Pack (&cur)[Kt::kNVecs], float (&carry)[kHalo],
                                               const ChannelTaps& taps, int lane) {
  using T = typename Kt::T;
  constexpr int kVec = Kt::kVec, first = kMaxWidth - Kt::kWidth;
#pragma unroll
  for (int j = 0; j < Kt::kNVecs; ++j) {
    float w[kHalo];
#pragma unroll
    for (int i = 0; i < kHalo; ++i) {
      const float r =
          __shfl_sync(SequenceTable::kFull, to_float(cur[j].e[kVec - kHalo + i]), (lane + 31) & 31);
      w[i] = lane == 0 ? carry[i] : r;
      carry[i] = r;  // lane 0's halo of the next access is lane 31's tail of this one
    }
    float out[kVec];
#pragma unroll
    for (int i = 0; i < kVec; ++i) {
      const float x = to_float(cur[j].e[i]);
      out[i] = conv_point<T>(taps, first, w[0], w[1], w[2], x, Kt::kSilu);
      w[0] = w[1];
      w[1] = w[2];
      w[2] = x;
    }
    round_into(cur[j].e, out);
  }
}

// Stores the raw outputs of the tokens of window [w0, w1) of chunk [c0, c1) that lie inside a live
// sequence of the table: whole vectors where the window is the chunk and covers only live
// tokens, else through a per-token mask.
template <typename Kt>
__device__ __forceinline__ void store_window(typename Kt::T* out_row,
                                             const typename Kt::Pack (&cur)[Kt::kNVecs],
                                             const SequenceTable& table, int32_t c0, int32_t c1, int32_t w0,
                                             int32_t w1) {
  using T = typename Kt::T;
  using Vec = typename Kt::Vec;
  constexpr int kVec = Kt::kVec;
  const int lane = table.lane, n = table.n;
  const TableShared& sh = table.sh;
  const int k0 = table.ended_by(c0);
  const int k1 = table.ended_by(c1 - 1);
  const int32_t start0 = __shfl_sync(SequenceTable::kFull, table.mine.start, k0 & 31);
  const uint32_t span = k1 < 31 ? (2u << k1) - (1u << k0) : ~0u << k0;
  const bool whole = w0 == c0 && w1 == c1 && k1 < n && start0 <= c0 && (table.dead & span) == 0;
#pragma unroll
  for (int j = 0; j < Kt::kNVecs; ++j) {
    const int32_t t0 = c0 + (j * 32 + lane) * kVec;
    if (whole) {
      *reinterpret_cast<Vec*>(out_row + t0) = cur[j].v;
      continue;
    }
    if (t0 + kVec <= w0 || t0 >= w1) continue;
    int k = 0;
    while (k < n && sh.start[k + 1] <= t0) ++k;
    uint32_t bits = 0;
#pragma unroll
    for (int i = 0; i < kVec; ++i) {
      const int32_t t = t0 + i;
      while (k < n && sh.start[k + 1] <= t) ++k;
      if (t >= w0 && t < w1 && k < n && t >= sh.start[k] && sh.line[k] >= 0) bits |= 1u << i;
    }
    if (bits == (1u << kVec) - 1) {
      *reinterpret_cast<Vec*>(out_row + t0) = cur[j].v;
    } else {
#pragma unroll
      for (int i = 0; i < kVec; ++i)
        if ((bits >> i) & 1u) out_row[t0 + i] = cur[j].e[i];
    }
  }
}

// Tokens start, start+1, start+2 of every live sequence starting in window [w0, w1) (the first
// window also takes starts up to two tokens before the chunk) read the sequence's prior instead of
// the previous sequence's tokens: the sequence's table lane recomputes them from its prior and the
// ring, and overwrites them.
template <typename Kt>
__device__ __forceinline__ void repair_heads(typename Kt::T* out_row, const SequenceTable& table,
                                             const ChannelTaps& taps,
                                             const ChunkOriginals<typename Kt::T, Kt::kChunk>& ring,
                                             int32_t c0, int32_t c1, int32_t w0, int32_t w1) {
  using T = typename Kt::T;
  constexpr int first = kMaxWidth - Kt::kWidth;
  constexpr bool silu = Kt::kSilu;
  const TableEntry& mine = table.mine;
  const int32_t lo = w0 == c0 ? c0 - (kHalo - 1) : w0;
  if (table.lane < table.n && mine.line >= 0 && mine.start < mine.end && mine.start >= lo &&
      mine.start < w1) {
    const float x0 = ring(mine.start);
    const float x1 = mine.start + 1 < c1 ? ring(mine.start + 1) : 0.f;
    const float x2 = mine.start + 2 < c1 ? ring(mine.start + 2) : 0.f;
    const float* e = mine.prior;
    const float v[kHalo] = {conv_point<T>(taps, first, e[0], e[1], e[2], x0, silu),
                            conv_point<T>(taps, first, e[1], e[2], x0, x1, silu),
                            conv_point<T>(taps, first, e[2], x0, x1, x2, silu)};
#pragma unroll
    for (int j = 0; j < kHalo; ++j) {
      const int32_t t = mine.start + j;
      if (t >= c0 && t < c1 && t < mine.end) out_row[t] = from_float<T>(v[j]);
    }
  }
}

// new s[j] = e[L + j] of one channel's state row, e = concat(prior, x_b): ascending j reads the
// old entries (L < S) before overwriting them; the originals come from the walk's ring. Loops
// kept rolled: this runs once per sequence end, and unrolling over a run-time S bought only
// remainder code and registers.
template <typename S, typename Originals>
__device__ __forceinline__ void write_new_state(S* row_state, const StateView& st, int32_t len, bool init,
                                                int32_t start, const Originals& ring) {
  S* q = row_state;
  int32_t j = 0;
#pragma unroll 1
  for (; j < st.len - len; ++j, q += st.pos_stride)  // short sequences keep part of the old state
    *q = init ? row_state[(len + j) * st.pos_stride] : from_float<S>(0.f);
#pragma unroll 1
  for (; j < st.len; ++j, q += st.pos_stride) *q = from_float<S>(ring(start + len + j - st.len));
}

// The new states of the table sequences whose last token (an empty one: its position) lies in
// window [w0, w1), by their table lanes (the repairs took their priors from registers).
template <typename Kt>
__device__ __forceinline__ void write_new_states(const VarlenParams& p, const SequenceTable& table,
                                                 const ChunkOriginals<typename Kt::T, Kt::kChunk>& ring,
                                                 int32_t c1, int32_t w0, int32_t w1) {
  using T = typename Kt::T;
  const StateView& st = p.state;
  const TableEntry& mine = table.mine;
  const int32_t trig = mine.end > mine.start ? mine.end - 1 : mine.start;
  const int32_t len = mine.end - mine.start;
  if (table.lane < table.n && mine.line >= 0 && trig >= w0 && trig < w1 && trig < c1 &&
      !(len == 0 && mine.init)) {
    const int64_t base = state_offset(st, mine.line, table.d, 0);
    if (st.dtype == kScalarTypeOf<T> && st.len == kHalo && len >= kHalo) {
      // S = 3 in x's dtype as three raw ring elements: the generic loop behind a dtype switch cost
      // an issue-bound walk about a tenth of its time (H200, 8 equal sequences at 8k: 72 -> 76% of copy).
      T* const q = static_cast<T*>(st.data) + base;
#pragma unroll
      for (int j = 0; j < kHalo; ++j) q[j * st.pos_stride] = ring.elt(mine.end - kHalo + j);
    } else {
      switch (st.dtype) {
        case ScalarType::f32:
          write_new_state(static_cast<float*>(st.data) + base, st, len, mine.init, mine.start, ring);
          break;
        case ScalarType::f16:
          write_new_state(static_cast<__half*>(st.data) + base, st, len, mine.init, mine.start, ring);
          break;
        default:
          write_new_state(static_cast<__nv_bfloat16*>(st.data) + base, st, len, mine.init, mine.start, ring);
      }
    }
  }
}

// Chunks with c0 >= fast_lo and c1 < fast_hi lie inside one live sequence, past its first three
// tokens and before its last: their raw outputs are final and nothing else happens there. The
// range is that of the sequence holding the token after chunk [.., c1).
__device__ __forceinline__ void fast_range_after(const SequenceTable& table, int32_t c1, int32_t& fast_lo,
                                                 int32_t& fast_hi) {
  constexpr unsigned kFull = SequenceTable::kFull;
  const int k = table.ended_by(c1);
  const int32_t start = __shfl_sync(kFull, table.mine.start, k & 31),
                end = __shfl_sync(kFull, table.mine.end, k & 31);
  const bool live = k < table.n && __shfl_sync(kFull, table.mine.line, k & 31) >= 0 && start <= c1;
  fast_lo = live ? start + kHalo : INT32_MAX;
  fast_hi = live ? end : INT32_MIN;
}

// Empty sequences at the end of the walk (the walk stopped at c_end), or every sequence when there
// were no tokens: their new state is the prior, or zeros.
__device__ __forceinline__ void write_trailing_empty_states(const VarlenParams& p, int64_t d, int lane,
                                                            int32_t c_end) {
  const StateView& st = p.state;
  if (p.batch > 0 && seq_offset(p, p.batch - 1) >= c_end) {
    for (int32_t b = p.batch - 1 - lane; b >= 0; b -= 32) {
      const bool here = seq_offset(p, b) >= c_end;
      if (!here) break;
      const int64_t line = state_line(p.cache_indices, b, st, p.conv, d == 0);
      if (line < 0 || has_initial_state(p, b)) continue;
      for (int32_t j = 0; j < st.len; ++j) store_float(st.data, state_offset(st, line, d, j), st.dtype, 0.f);
    }
  }
}

template <typename Kt>
__global__ void __launch_bounds__(Kt::kNThreads, Kt::kMinBlocks)
    varlen_time_walker_kernel(const VarlenParams p) {
  using T = typename Kt::T;
  using Vec = typename Kt::Vec;
  using Pack = typename Kt::Pack;
  constexpr int kVec = Kt::kVec, kNVecs = Kt::kNVecs, kChunk = Kt::kChunk;
  __shared__ WalkerShared<Kt> shared_all[Kt::kNWarps];
  wait_for_previous_grid();

  const int lane = threadIdx.x % 32;
  const int64_t d = static_cast<int64_t>(blockIdx.x) * Kt::kNWarps + threadIdx.x / 32;
  if (d >= p.dim) return;  // warp-uniform, and no block barrier follows
  WalkerShared<Kt>& sh = shared_all[threadIdx.x / 32];
  T* const row = static_cast<T*>(p.x) + d * p.chan_stride;
  T* const out_row = static_cast<T*>(p.out) + d * p.out_chan_stride;  // time stride 1, like x's
  const ChannelTaps taps = load_taps(p.conv, d);

  // Token positions are 32-bit (query_start_loc is int32; plan_varlen keeps T below 2^31 - 2^16).
  const int32_t t_start = static_cast<int32_t>(seq_offset(p, 0));
  const int32_t t_stop = max(t_start, static_cast<int32_t>(seq_offset(p, p.batch)));
  // Chunks start on 16-byte boundaries of this row, so the walk may begin a few tokens early.
  const int32_t row_misalign = static_cast<int32_t>((reinterpret_cast<uintptr_t>(row) / sizeof(T)) % kVec);
  const int32_t c_first = t_start - (row_misalign + t_start) % kVec;
  const ChunkRing<Kt> ring{sh.slots, row, t_start, t_stop, c_first, lane};
  SequenceTable table{p, d, lane, sh.table};

#pragma unroll
  for (int m = 0; m < Kt::kPrefetch; ++m) ring.issue(c_first + m * kChunk);
  table.cover(c_first, c_first + kChunk);  // the table's loads overlap the first copies
  float carry[kHalo] = {0.f, 0.f, 0.f};    // originals of the three tokens before the chunk
  int32_t fast_lo = INT32_MAX, fast_hi = INT32_MIN;
  int32_t c0 = c_first;
  for (; c0 < t_stop; c0 += kChunk) {
    const int32_t c1 = c0 + kChunk;
    __syncwarp();  // the slot of chunk n-2 has no readers left: it takes chunk n+kPrefetch
    ring.issue(c0 + Kt::kPrefetch * kChunk);
    cp_async_wait<Kt::kPrefetch>();
    __syncwarp();  // every lane's copies of this chunk are in
    table.load_due_priors();
    const ChunkOriginals<T, kChunk> originals{ring.slot(c0), ring.slot(c0 - kChunk), c0};
    Pack cur[kNVecs];
#pragma unroll
    for (int j = 0; j < kNVecs; ++j) cur[j].v = reinterpret_cast<const Vec*>(originals.slot)[j * 32 + lane];
    convolve_chunk<Kt>(cur, carry, taps, lane);

    if (c0 >= fast_lo && c1 < fast_hi) {
#pragma unroll
      for (int j = 0; j < kNVecs; ++j) reinterpret_cast<Vec*>(out_row + c0)[j * 32 + lane] = cur[j].v;
      continue;
    }

    // Sequence edges, one table window at a time: store, repair the heads, finish the sequences.
    table.cover(c0, c1);
    for (int32_t w0 = c0;;) {
      const int32_t w1 = max(w0 + 1, min(c1, table.end()));
      store_window<Kt>(out_row, cur, table, c0, c1, w0, w1);
      __syncwarp();  // the raw outputs are stored before the repairs overwrite them
      repair_heads<Kt>(out_row, table, taps, originals, c0, c1, w0, w1);
      write_new_states<Kt>(p, table, originals, c1, w0, w1);
      if (w1 >= c1) break;
      w0 = w1;
      table.cover(w0, c1);
    }
    fast_range_after(table, c1, fast_lo, fast_hi);
  }
  cp_async_wait<0>();  // no copy may outlive the kernel's shared memory

  allow_next_grid();
  write_trailing_empty_states(p, d, lane, c0);
}

// (x dtype, width, silu, short rows). Short rows (plan_varlen's choice) walk half-size chunks in
// half the shared memory, with registers for twice the blocks per SM, so that more warps hide
// the dependent loads at sequence edges.
struct TimeWalker {
  using Configs = native::Configs<Dtypes, Widths, Bools, Bools>;
  static auto traits(auto dtype, auto width, auto silu, auto short_rows) {
    using T = element_t<dtype()>;
    if constexpr (short_rows())
      return std::type_identity<TimeWalkerTraits<T, 2, 3, 8, width(), silu()>>{};
    else
      return std::type_identity<TimeWalkerTraits<T, 4, 3, 4, width(), silu()>>{};
  }
  template <typename Kt>
  static auto kernel() {
    return varlen_time_walker_kernel<Kt>;
  }
};

int preload_time_walker() { return preload<TimeWalker>(); }

int launch_varlen_time_walker(const VarlenParams& p, ScalarType dtype, bool short_rows,
                              const LaunchOptions& o, void* stream) {
  return with_instantiation<TimeWalker>(
      [&](auto traits, auto kernel) {
        using Kt = typename decltype(traits)::type;
        const int64_t blocks = (p.dim + Kt::kNWarps - 1) / Kt::kNWarps;
        return launch_kernel(kernel, dim3(static_cast<unsigned>(blocks)), dim3(Kt::kNThreads), 0,
                             static_cast<cudaStream_t>(stream), o.pdl, p);
      },
      dtype, p.conv.width, p.conv.silu, short_rows);
}

}  // namespace deltakern::native
