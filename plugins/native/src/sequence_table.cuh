// The row walker's window onto the call's sequences (varlen_time_walker.cu): 32 entries, lane k
// of the warp holding sequence tb + k, so that "which sequence holds token t" is one ballot. The
// next 32 entries are loaded ahead, so that moving the window up costs shuffles instead of a round
// trip that every warp of the walk stalls on at about the same point: their offsets, lines and
// flags when the window is filled, their priors (which wait on the line) a chunk later.
#pragma once

#include <climits>

#include "conv1d_common.cuh"

namespace deltakern::native {

struct TableEntry {
  int32_t start, end, line;
  bool init;
  float prior[kHalo];  // e-values of the three positions before the start
};

// The entries' offsets and lines in shared memory, for the per-token masks of divergent code.
struct TableShared {
  int32_t start[33];  // start[k] = q[tb + k], start[n] = end of the last
  int32_t line[32];   // state line, or -1: skipped
};

// Every method is called by the whole warp (convergent). The methods are left to the inliner, as
// the lambdas they were: forcing them inline early changed the walker's code (more registers).
struct SequenceTable {
  static constexpr unsigned kFull = 0xffffffffu;
  const VarlenParams& p;
  int64_t d;  // the channel row whose priors the entries hold
  int lane;
  TableShared& sh;
  int32_t tb = 0, n = 0;                                 // sequences [tb, tb + n)
  TableEntry mine{INT32_MAX, INT32_MAX, -1, false, {}};  // sequence tb + lane, or past the table
  TableEntry next{INT32_MAX, INT32_MAX, -1, false, {}};  // sequence tb + 32 + lane
  bool next_priors_due = false;
  uint32_t dead = 0;  // table sequences with tokens whose slot is skipped

  __device__ void load_entry(int32_t b, TableEntry& e) const {
    e = TableEntry{INT32_MAX, INT32_MAX, -1, false, {}};
    if (b < p.batch) {
      e.start = static_cast<int32_t>(seq_offset(p, b));
      e.end = max(e.start, static_cast<int32_t>(seq_offset(p, b + 1)));
      e.line = static_cast<int32_t>(state_line(p.cache_indices, b, p.state, p.conv, d == 0));
      e.init = has_initial_state(p, b);
    }
  }

  // Priors are first used by the repairs, off the walk's critical path.
  __device__ void load_priors(TableEntry& e) const {
    const StateView& st = p.state;
#pragma unroll
    for (int i = 0; i < kHalo; ++i) {
      const int32_t j = st.len - kHalo + i;
      e.prior[i] = e.init && e.line >= 0 && j >= 0
                       ? load_float(st.data, state_offset(st, e.line, d, j), st.dtype)
                       : 0.f;
    }
  }

  // The priors of `next`, once its lines have had a chunk to arrive.
  __device__ void load_due_priors() {
    if (next_priors_due) {
      load_priors(next);
      next_priors_due = false;
    }
  }

  static __device__ TableEntry shuffled(const TableEntry& e, int src) {
    TableEntry r;
    r.start = __shfl_sync(kFull, e.start, src & 31);
    r.end = __shfl_sync(kFull, e.end, src & 31);
    r.line = __shfl_sync(kFull, e.line, src & 31);
    r.init = __shfl_sync(kFull, static_cast<int>(e.init), src & 31) != 0;
#pragma unroll
    for (int i = 0; i < kHalo; ++i) r.prior[i] = __shfl_sync(kFull, e.prior[i], src & 31);
    return r;
  }

  // Makes the table hold sequences [base, base + 32). Moving up by k < 32 from a full table takes
  // entries from the table and from `next`; anything else loads afresh.
  __device__ void fill(int32_t base) {
    __syncwarp();  // divergent readers of the old table are done
    const int k = base - tb;
    if (n == 32 && k > 0 && k < 32) {
      if (next_priors_due) load_priors(next);
      next_priors_due = false;
      // Entry base + lane is lane (lane + k) mod 32 of the table, or of `next` past its end;
      // entry base + 32 + lane, that same lane of `next` while it holds it.
      const bool from_table = lane + k < 32;
      const TableEntry a = shuffled(mine, lane + k), b = shuffled(next, lane + k);
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
  }

  // End of the tokens the table describes (everything, once it holds the last sequence).
  __device__ int32_t end() const {
    return tb + n >= p.batch ? INT32_MAX : __shfl_sync(kFull, mine.end, (n - 1) & 31);
  }

  // How many table sequences end before pos, and at or before pos.
  __device__ int ending_before(int32_t pos) const {
    return __popc(__ballot_sync(kFull, lane < n && mine.end < pos));
  }
  __device__ int ended_by(int32_t pos) const {
    return __popc(__ballot_sync(kFull, lane < n && mine.end <= pos));
  }

  // Makes the table hold the first sequence with an end >= pos, refilling only when it does not,
  // or when moving the table up would let it reach `until`.
  __device__ void cover(int32_t pos, int32_t until) {
    const int k = ending_before(pos);
    if (k < n && (k == 0 || end() >= until)) return;
    if (k < n)
      fill(tb + k);
    else if (tb + n < p.batch || n == 0)
      fill(warp_first_sequence_ending_at_or_after(p, pos));
  }
};

}  // namespace deltakern::native
