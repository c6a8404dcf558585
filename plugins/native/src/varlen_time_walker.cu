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

namespace deltakern::native {

template <typename T_, int kNVecs_, int kPrefetch_, int kWidth_, bool kSilu_>
struct TimeWalkerTraits {
  using T = T_;
  static constexpr int kWidth = kWidth_;
  static constexpr bool kSilu = kSilu_;
  static constexpr int kNWarps = 4;
  static constexpr int kNThreads = 32 * kNWarps;
  static constexpr int kMinBlocks = 4;
  static constexpr int kVec = 16 / static_cast<int>(sizeof(T));  // tokens per access
  static constexpr int kNVecs = kNVecs_;                         // accesses per lane and chunk
  static constexpr int kChunk = 32 * kVec * kNVecs;              // tokens per step of the walk
  static constexpr int kPrefetch = kPrefetch_;                   // chunks in flight ahead of the walk
  static constexpr int kSlots = kPrefetch + 2;                   // + the current and the previous one
  static_assert(kChunk >= kMaxStateLen + kHalo, "the ring must hold a new state's originals");
  using Vec = uint4;
};

// The table: sequences [tb, tb + n) of the call, entry k in lane k's registers and, for the
// per-token masks of divergent code, its offsets and lines in shared memory.
template <typename Kt>
struct WalkerShared {
  // Chunk m of the walk lands in slot m % kSlots through cp.async: the loads in flight, and the
  // raw originals of the current and the previous chunk (for the repairs and the new states).
  alignas(16) typename Kt::T slots[Kt::kSlots][Kt::kChunk];
  int32_t start[33];  // start[k] = q[tb + k], start[n] = end of the last
  int32_t line[32];   // state line, or -1: skipped
};

struct TableEntry {
  int32_t start, end, line;
  bool init;
  float prior[kHalo];  // e-values of the three positions before the start
};

// new s[j] = e[L + j] of one channel's state row, e = concat(prior, x_b): ascending j reads the
// old entries (L < S) before overwriting them; the originals come from the walk's ring. Loops
// kept rolled: this runs once per sequence end, and unrolling over a run-time S bought only
// remainder code and registers.
template <typename S, typename RingAt>
__device__ __forceinline__ void write_new_state(S* row_state, const StateView& st, int32_t len, bool init,
                                                int32_t start, const RingAt& ring_at) {
  S* q = row_state;
  int32_t j = 0;
#pragma unroll 1
  for (; j < st.len - len; ++j, q += st.pos_stride)  // short sequences keep part of the old state
    *q = init ? row_state[(len + j) * st.pos_stride] : from_float<S>(0.f);
#pragma unroll 1
  for (; j < st.len; ++j, q += st.pos_stride) *q = from_float<S>(ring_at(start + len + j - st.len));
}

template <typename Kt>
__global__ void __launch_bounds__(Kt::kNThreads, Kt::kMinBlocks)
    varlen_time_walker_kernel(const VarlenParams p) {
  using T = typename Kt::T;
  using Vec = typename Kt::Vec;
  constexpr int kVec = Kt::kVec, kNVecs = Kt::kNVecs, kChunk = Kt::kChunk;
  constexpr unsigned kFull = 0xffffffffu;
  union Pack {
    Vec v;
    T e[kVec];
  };
  __shared__ WalkerShared<Kt> shared_all[Kt::kNWarps];
  wait_for_previous_grid();

  const int lane = threadIdx.x % 32;
  const int64_t d = static_cast<int64_t>(blockIdx.x) * Kt::kNWarps + threadIdx.x / 32;
  if (d >= p.dim) return;  // warp-uniform, and no block barrier follows
  WalkerShared<Kt>& sh = shared_all[threadIdx.x / 32];
  T* const row = static_cast<T*>(p.x) + d * p.chan_stride;
  T* const out_row = static_cast<T*>(p.out) + d * p.out_chan_stride;  // time stride 1, like x's
  const StateView& st = p.state;
  const ChannelTaps taps = load_taps(p.conv, d);
  constexpr int first = kMaxWidth - Kt::kWidth;
  constexpr bool silu = Kt::kSilu;

  // Token positions are 32-bit (query_start_loc is int32; plan_varlen keeps T below 2^31 - 2^16).
  const int32_t t_start = static_cast<int32_t>(seq_offset(p, 0));
  const int32_t t_stop = max(t_start, static_cast<int32_t>(seq_offset(p, p.batch)));
  // Chunks start on 16-byte boundaries of this row, so the walk may begin a few tokens early.
  const int32_t row_misalign = static_cast<int32_t>((reinterpret_cast<uintptr_t>(row) / sizeof(T)) % kVec);
  const int32_t c_first = t_start - (row_misalign + t_start) % kVec;
  auto slot_of = [&](int32_t c) {
    return sh.slots[(static_cast<uint32_t>(c - c_first) / kChunk) % Kt::kSlots];
  };

  // ---- the sequence table
  int32_t tb = 0, n = 0;
  TableEntry mine{INT32_MAX, INT32_MAX, -1, false, {}};  // sequence tb + lane, or past the table
  uint32_t dead = 0;                                     // table sequences with tokens whose slot is skipped
  // The next 32 sequences (tb + 32 + lane) are loaded ahead, so that moving the table up costs
  // shuffles instead of a round trip that every warp of the walk stalls on at about the same
  // point: their offsets, lines and flags when the table is filled, their priors (which wait on
  // the line) at the next chunk.
  TableEntry next{INT32_MAX, INT32_MAX, -1, false, {}};
  bool next_priors_due = false;
  auto load_entry = [&](int32_t b, TableEntry& e) {
    e = TableEntry{INT32_MAX, INT32_MAX, -1, false, {}};
    if (b < p.batch) {
      e.start = static_cast<int32_t>(seq_offset(p, b));
      e.end = max(e.start, static_cast<int32_t>(seq_offset(p, b + 1)));
      e.line = static_cast<int32_t>(state_line(p.cache_indices, b, st, p.conv, d == 0));
      e.init = has_initial_state(p, b);
    }
  };
  // Priors are first used by the repairs, off the walk's critical path.
  auto load_priors = [&](TableEntry& e) {
#pragma unroll
    for (int i = 0; i < kHalo; ++i) {
      const int32_t j = st.len - kHalo + i;
      e.prior[i] = e.init && e.line >= 0 && j >= 0
                       ? load_float(st.data, state_offset(st, e.line, d, j), st.dtype)
                       : 0.f;
    }
  };
  auto shfl_entry = [&](const TableEntry& e, int src) {
    TableEntry r;
    r.start = __shfl_sync(kFull, e.start, src & 31);
    r.end = __shfl_sync(kFull, e.end, src & 31);
    r.line = __shfl_sync(kFull, e.line, src & 31);
    r.init = __shfl_sync(kFull, static_cast<int>(e.init), src & 31) != 0;
#pragma unroll
    for (int i = 0; i < kHalo; ++i) r.prior[i] = __shfl_sync(kFull, e.prior[i], src & 31);
    return r;
  };
  // Makes the table hold sequences [base, base + 32). Moving up by k < 32 from a full table takes
  // entries from the table and from `next`; anything else loads afresh.
  auto fill = [&](int32_t base) {
    __syncwarp();  // divergent readers of the old table are done
    const int k = base - tb;
    if (n == 32 && k > 0 && k < 32) {
      if (next_priors_due) load_priors(next);
      next_priors_due = false;
      // Entry base + lane is lane (lane + k) mod 32 of the table, or of `next` past its end;
      // entry base + 32 + lane, that same lane of `next` while it holds it.
      const bool from_table = lane + k < 32;
      const TableEntry a = shfl_entry(mine, lane + k), b = shfl_entry(next, lane + k);
      mine = from_table ? a : b;
      if (from_table) {
        next = b;
      } else {
        load_entry(base + 32 + lane, next);
        next_priors_due = true;
      }
    } else {
      load_entry(base + lane, mine);
      load_priors(mine);
      load_entry(base + 32 + lane, next);
      next_priors_due = true;
    }
    tb = base;
    n = min(32, p.batch - base);
    if (lane < n) {
      sh.start[lane] = mine.start;
      sh.line[lane] = mine.line;
      if (lane == n - 1) sh.start[n] = mine.end;
    }
    dead = __ballot_sync(kFull, lane < n && mine.line < 0 && mine.start < mine.end);
    __syncwarp();
  };
  // End of the tokens the table describes (everything, once it holds the last sequence).
  auto table_end = [&]() -> int32_t {
    return tb + n >= p.batch ? INT32_MAX : __shfl_sync(kFull, mine.end, (n - 1) & 31);
  };
  // Makes the table hold the first sequence with an end >= pos, refilling only when it does not,
  // or when moving the table up would let it reach `until`.
  auto cover = [&](int32_t pos, int32_t until) {
    const int k = __popc(__ballot_sync(kFull, lane < n && mine.end < pos));
    if (k < n && (k == 0 || table_end() >= until)) return;
    if (k < n)
      fill(tb + k);
    else if (tb + n < p.batch || n == 0)
      fill(warp_first_sequence_ending_at_or_after(p, pos));
  };
  // Starts the copy of the chunk at c into its slot; the edges of the walk are copied element by
  // element (zeros outside), so nothing outside [t_start, t_stop) is read. One commit group per
  // chunk and lane, empty past the end, keeps every lane's group count the same.
  auto issue_chunk = [&](int32_t c) {
    if (c < t_stop) {
      T* const slot = slot_of(c);
#pragma unroll
      for (int j = 0; j < kNVecs; ++j) {
        const int32_t off = (j * 32 + lane) * kVec, t0 = c + off;
        if (t0 >= t_start && t0 + kVec <= t_stop) {
          cp_async<16>(slot + off, row + t0);
        } else {
#pragma unroll
          for (int i = 0; i < kVec; ++i)
            slot[off + i] = t0 + i >= t_start && t0 + i < t_stop ? row[t0 + i] : from_float<T>(0.f);
        }
      }
    }
    cp_async_commit();
  };

#pragma unroll
  for (int m = 0; m < Kt::kPrefetch; ++m) issue_chunk(c_first + m * kChunk);
  cover(c_first, c_first + kChunk);      // the table's loads overlap the first copies
  float carry[kHalo] = {0.f, 0.f, 0.f};  // originals of the three tokens before the chunk
  // Chunks with c0 >= fast_lo and c1 < fast_hi lie inside one live sequence, past its first three
  // tokens and before its last: their raw outputs are final and nothing else happens there.
  int32_t fast_lo = INT32_MAX, fast_hi = INT32_MIN;
  int32_t c0 = c_first;
  for (; c0 < t_stop; c0 += kChunk) {
    const int32_t c1 = c0 + kChunk;
    __syncwarp();  // the slot of chunk n-2 has no readers left: it takes chunk n+kPrefetch
    issue_chunk(c0 + Kt::kPrefetch * kChunk);
    cp_async_wait<Kt::kPrefetch>();
    __syncwarp();           // every lane's copies of this chunk are in
    if (next_priors_due) {  // the lines of `next` have had a chunk to arrive
      load_priors(next);
      next_priors_due = false;
    }
    const T* const slot = slot_of(c0);
    const T* const prev_slot = slot_of(c0 - kChunk);  // (unused in the first chunk)
    // Original of token u in [c0 - kChunk, c1): the element, and its value.
    auto ring_elt = [&](int32_t u) -> T { return u >= c0 ? slot[u - c0] : prev_slot[u - c0 + kChunk]; };
    auto ring_at = [&](int32_t u) -> float { return to_float(ring_elt(u)); };
    Pack cur[kNVecs];
#pragma unroll
    for (int j = 0; j < kNVecs; ++j) cur[j].v = reinterpret_cast<const Vec*>(slot)[j * 32 + lane];
#pragma unroll
    for (int j = 0; j < kNVecs; ++j) {
      float w[kHalo];
#pragma unroll
      for (int i = 0; i < kHalo; ++i) {
        const float r = __shfl_sync(kFull, to_float(cur[j].e[kVec - kHalo + i]), (lane + 31) & 31);
        w[i] = lane == 0 ? carry[i] : r;
        carry[i] = r;  // lane 0's halo of the next access is lane 31's tail of this one
      }
      float out[kVec];
#pragma unroll
      for (int i = 0; i < kVec; ++i) {
        const float x = to_float(cur[j].e[i]);
        out[i] = conv_point<T>(taps, first, w[0], w[1], w[2], x, silu);
        w[0] = w[1];
        w[1] = w[2];
        w[2] = x;
      }
      round_into(cur[j].e, out);
    }

    if (c0 >= fast_lo && c1 < fast_hi) {
#pragma unroll
      for (int j = 0; j < kNVecs; ++j) reinterpret_cast<Vec*>(out_row + c0)[j * 32 + lane] = cur[j].v;
      continue;
    }

    // ---- store, repair and finish sequences, one table window at a time
    cover(c0, c1);
    for (int32_t w0 = c0;;) {
      const int32_t w1 = max(w0 + 1, min(c1, table_end()));
      const int k0 = __popc(__ballot_sync(kFull, lane < n && mine.end <= c0));
      const int k1 = __popc(__ballot_sync(kFull, lane < n && mine.end <= c1 - 1));
      const int32_t start0 = __shfl_sync(kFull, mine.start, k0 & 31);
      const uint32_t span = k1 < 31 ? (2u << k1) - (1u << k0) : ~0u << k0;
      const bool whole = w0 == c0 && w1 == c1 && k1 < n && start0 <= c0 && (dead & span) == 0;
#pragma unroll
      for (int j = 0; j < kNVecs; ++j) {
        const int32_t t0 = c0 + (j * 32 + lane) * kVec;
        if (whole) {
          *reinterpret_cast<Vec*>(out_row + t0) = cur[j].v;
          continue;
        }
        // Tokens of this window inside a live sequence of the table.
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
      __syncwarp();  // the raw outputs are stored before the repairs overwrite them

      // Repairs: tokens start, start+1, start+2 of every live sequence starting in this window
      // (the first window also takes starts up to two tokens before the chunk), by the sequence's
      // table lane, from its prior and the ring.
      {
        const int32_t lo = w0 == c0 ? c0 - (kHalo - 1) : w0;
        if (lane < n && mine.line >= 0 && mine.start < mine.end && mine.start >= lo && mine.start < w1) {
          const float x0 = ring_at(mine.start);
          const float x1 = mine.start + 1 < c1 ? ring_at(mine.start + 1) : 0.f;
          const float x2 = mine.start + 2 < c1 ? ring_at(mine.start + 2) : 0.f;
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
      // New states of the table sequences whose last token (an empty one: its position) lies in
      // this window, by the same lanes (the repairs took their priors from registers).
      {
        const int32_t trig = mine.end > mine.start ? mine.end - 1 : mine.start;
        const int32_t len = mine.end - mine.start;
        if (lane < n && mine.line >= 0 && trig >= w0 && trig < w1 && trig < c1 && !(len == 0 && mine.init)) {
          const int64_t base = state_offset(st, mine.line, d, 0);
          if (st.dtype == kScalarTypeOf<T> && st.len == kHalo && len >= kHalo) {
            // The common case (S = 3 in x's dtype, a sequence of three tokens or more) as three
            // raw elements of the ring: the generic loop behind a dtype switch cost an issue-bound
            // walk about a tenth of its time on 8 equal sequences at 8k (H200).
            T* const q = static_cast<T*>(st.data) + base;
#pragma unroll
            for (int j = 0; j < kHalo; ++j) q[j * st.pos_stride] = ring_elt(mine.end - kHalo + j);
          } else {
            switch (st.dtype) {
              case ScalarType::f32:
                write_new_state(static_cast<float*>(st.data) + base, st, len, mine.init, mine.start, ring_at);
                break;
              case ScalarType::f16:
                write_new_state(static_cast<__half*>(st.data) + base, st, len, mine.init, mine.start,
                                ring_at);
                break;
              default:
                write_new_state(static_cast<__nv_bfloat16*>(st.data) + base, st, len, mine.init, mine.start,
                                ring_at);
            }
          }
        }
      }
      if (w1 >= c1) break;
      w0 = w1;
      cover(w0, c1);
    }
    {
      const int k = __popc(__ballot_sync(kFull, lane < n && mine.end <= c1));
      const int32_t start = __shfl_sync(kFull, mine.start, k & 31),
                    end = __shfl_sync(kFull, mine.end, k & 31);
      const bool live = k < n && __shfl_sync(kFull, mine.line, k & 31) >= 0 && start <= c1;
      fast_lo = live ? start + kHalo : INT32_MAX;
      fast_hi = live ? end : INT32_MIN;
    }
  }
  cp_async_wait<0>();  // no copy may outlive the kernel's shared memory

  allow_next_grid();
  // Empty sequences at the end of the walk (or every sequence, when there were no tokens):
  // their new state is the prior, or zeros.
  if (p.batch > 0 && seq_offset(p, p.batch - 1) >= c0) {
    for (int32_t b = p.batch - 1 - lane; b >= 0; b -= 32) {
      const bool here = seq_offset(p, b) >= c0;
      if (!here) break;
      const int64_t line = state_line(p.cache_indices, b, st, p.conv, d == 0);
      if (line < 0 || has_initial_state(p, b)) continue;
      for (int32_t j = 0; j < st.len; ++j) store_float(st.data, state_offset(st, line, d, j), st.dtype, 0.f);
    }
  }
}

// (x dtype, width, silu).
struct TimeWalker {
  using Configs = native::Configs<Dtypes, Widths, Bools>;
  static auto traits(auto dtype, auto width, auto silu) {
    return std::type_identity<TimeWalkerTraits<element_t<dtype()>, 4, 3, width(), silu()>>{};
  }
  template <typename Kt>
  static auto kernel() {
    return varlen_time_walker_kernel<Kt>;
  }
};

int preload_time_walker() { return preload<TimeWalker>(); }

int launch_varlen_time_walker(const VarlenParams& p, ScalarType dtype, const LaunchOptions& o, void* stream) {
  return with_instantiation<TimeWalker>(
      [&](auto traits, auto kernel) {
        using Kt = typename decltype(traits)::type;
        const int64_t blocks = (p.dim + Kt::kNWarps - 1) / Kt::kNWarps;
        return launch_kernel(kernel, dim3(static_cast<unsigned>(blocks)), dim3(Kt::kNThreads), 0,
                             static_cast<cudaStream_t>(stream), o.pdl, p);
      },
      dtype, p.conv.width, p.conv.silu);
}

}  // namespace deltakern::native
