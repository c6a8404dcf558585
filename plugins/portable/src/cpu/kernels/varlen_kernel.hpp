// causal_conv1d_varlen work items: item = (sequence b, token tile, channel block), the
// decomposition a GPU grid would use. Every item reads its sequence's bounds itself and
// returns at once when its tile lies past the sequence's end. The tile-0 item of (b, block)
// owns the sequence's state for its channels: it is the only one that reads the prior state
// (its halo) and it writes the new state after it has read it, so no item races another.
//
// Per sequence, with prior p (S entries; zeros without an initial state) and e = concat(p, x_b):
//   out[t] = act(bias + sum_k w[k] * e[S + t - (W-1) + k]),   new state = e[L .. L + S).
//
// A tile is computed one of two ways, with the same arithmetic (convolve.hpp), so the bits do
// not depend on the way:
//  - along time, one channel row at a time (time-contiguous x, tiles of 32 tokens or more);
//  - across channels, one token at a time (channel-last x; and short time-contiguous tiles,
//    where a row is too short to pay for its setup: those are first transposed into a small
//    buffer, since gathering a column of x at a power-of-two row stride thrashes the cache).
// A time-contiguous batch of several sequences takes other items instead (plan.whole_rows):
// blocks of channel rows over the whole batch, see rows_time_contiguous.
#pragma once

#ifndef DK_CPU_ISA
#error "varlen_kernel.hpp is compiled once per instruction set: define DK_CPU_ISA first"
#endif

#include <cstdint>

#include "../plan.hpp"
#include "convolve.hpp"
#include "numeric.hpp"
#include "strided.hpp"
#include "width.hpp"

namespace deltakern::portable::cpu::DK_CPU_ISA {

// Tokens converted and convolved per pass along a time-contiguous row: the f32 window stays in
// L1.
inline constexpr int64_t kTimeChunk = 512;

// Consecutive item indices, decoded once and then advanced (tile fastest, then sequence, then
// channel block; see plan.hpp).
struct ItemCursor {
  int64_t tile, b, block;
  ItemCursor(const VarlenPlan& p, int64_t item)
      : tile(item % p.n_tiles), b(item / p.n_tiles % p.batch), block(item / p.n_tiles / p.batch) {}
  void advance(const VarlenPlan& p) {
    if (++tile < p.n_tiles) return;
    tile = 0;
    if (++b < p.batch) return;
    b = 0;
    ++block;
  }
};

struct VarlenItem {
  int64_t b, tile, d0, d1;
  SeqRange seq;
  int64_t t0, t1;  // the tile's tokens, relative to the sequence start
  Slot slot;
  bool has_prior;
};

// The item at the cursor; false when its tile is empty (past the sequence's end). Tile 0 always
// runs: it owns the state, which changes even for an empty sequence (zeroed without a prior).
inline bool decode_item(const VarlenPlan& p, const ItemCursor& at, VarlenItem& it) {
  it.tile = at.tile;
  it.b = at.b;
  it.seq = sequence_range(p.query_start_loc, it.b, p.tokens);
  it.t0 = it.tile * p.token_tile;
  if (it.tile > 0 && it.t0 >= it.seq.len) return false;
  // The last tile takes everything that is left: a max_seq_len smaller than the longest
  // sequence then costs balance, not correctness.
  it.t1 = it.tile == p.n_tiles - 1 ? it.seq.len : min_i64(it.seq.len, it.t0 + p.token_tile);
  it.t0 = min_i64(it.t0, it.t1);
  it.d0 = at.block * p.channel_block;
  it.d1 = min_i64(p.dim, it.d0 + p.channel_block);
  it.slot = resolve_slot(p.cache_indices, it.b, p.lines, p.pad_slot_id);
  it.has_prior = p.has_initial_state.data != nullptr && flag_at(p.has_initial_state, it.b) != 0;
  return true;
}

// Writes zeros to the output tokens [from, to) of channels [d0, d1). (Out of line, as
// write_state: once per item, and not worth a copy in every kernel.)
template <class XT>
[[gnu::noinline]] inline void zero_tokens(const VarlenPlan& p, int64_t from, int64_t to, int64_t d0,
                                          int64_t d1) {
  if (to <= from) return;
  XT* out = static_cast<XT*>(p.out.data);
  const int64_t sd = p.out.stride[0], st = p.out.stride[1];
  if (st == 1) {
    for (int64_t d = d0; d < d1; ++d) fill_zero(out + d * sd + from, 1, to - from);
  } else {
    for (int64_t t = from; t < to; ++t) fill_zero(out + t * st + d0, sd, d1 - d0);
  }
}

// Everything an item does besides computing its tile: zeros for tokens that belong to no
// sequence (before query_start_loc[0], after query_start_loc[batch]: every element of a fresh
// output is written), and for a padded or out-of-range slot, whose state is not touched (the
// latter is flagged). True when the tile is to be computed.
template <class XT>
inline bool prepare_item(const VarlenPlan& p, const VarlenItem& it, uint32_t& errors) {
  if (it.tile == 0) {
    if (it.b == 0) zero_tokens<XT>(p, 0, it.seq.start, it.d0, it.d1);
    if (it.b == p.batch - 1) zero_tokens<XT>(p, it.seq.start + it.seq.len, p.tokens, it.d0, it.d1);
  }
  if (it.slot.kind == SlotKind::ok) return true;
  if (it.slot.kind == SlotKind::out_of_range) errors |= kErrorCacheIndexOutOfRange;
  zero_tokens<XT>(p, it.seq.start + it.t0, it.seq.start + it.t1, it.d0, it.d1);
  return false;
}

// New state of the item's channels: s[i] = e[L + i]. In increasing i, s[L + i] is read before
// anything at or after it is written, so the shift works in place.
template <class XT>
[[gnu::noinline]] inline void write_state(const VarlenPlan& p, const VarlenItem& it) {
  const int64_t len = it.seq.len, S = p.state_len;
  if (len == 0 && it.has_prior) return;  // e's last S entries are the prior itself
  const StridedRef& st = p.states;
  const XT* x = static_cast<const XT*>(p.x.data);
  const int64_t n = it.d1 - it.d0;
  const int64_t base = it.slot.line * st.stride[0] + it.d0 * st.stride[1];
  for (int64_t i = 0; i < S; ++i) {
    const int64_t m = len + i;  // index into e
    const int64_t dst = base + i * st.stride[2];
    if (m < S) {
      if (it.has_prior) {
        for (int64_t c = 0; c < n; ++c)
          move_elem(st.data, dst + c * st.stride[1], base + m * st.stride[2] + c * st.stride[1], st.type);
      } else {
        for (int64_t c = 0; c < n; ++c) store_f32(st.data, dst + c * st.stride[1], st.type, 0.0f);
      }
    } else {
      const XT* src = x + (it.seq.start + m - S) * p.x.stride[1] + it.d0 * p.x.stride[0];
      store_x_column(st, dst, st.stride[1], src, p.x.stride[0], n);
    }
  }
}

// The per-thread scratch of the across-channels path: weights, ring and conversion buffer (W
// rows of R floats each), the bias, and for short time-contiguous tiles the transposed tile
// (kShortTile + kMaxWidth rows) and its staged output (kShortTile rows). R = channel_block
// rounded up to 16, so every row is 64-byte aligned; kScratchRows (plan.hpp) counts the rows.

struct ChannelScratch {
  int64_t row;
  float *weights, *ring, *convert, *bias, *tile, *staged;
  ChannelScratch(const VarlenPlan& p, int width, float* base)
      : row((p.channel_block + 15) / 16 * 16),
        weights(base),
        ring(base + width * row),
        convert(base + 2 * width * row),
        bias(base + 3 * width * row),
        tile(bias + row),
        staged(tile + (kShortTile + kMaxWidth) * row) {}
};

// The tile across channels (channel-last x): per token, the block's channels in one vectorised
// pass. taps[] rotates through a ring of W rows, so each element of x is converted once.
template <class XT, int W, Act ACT>
inline void tile_across_channels(const VarlenPlan& p, const VarlenItem& it, const ChannelScratch& s) {
  const int width = width_of<W>(p.width);
  const int64_t H = width - 1;
  const XT* x = static_cast<const XT*>(p.x.data) + it.d0;  // channel stride 1
  XT* out = static_cast<XT*>(p.out.data) + it.d0;
  const int64_t x_step = p.x.stride[1], out_step = p.out.stride[1];
  const StridedRef& st = p.states;
  const int64_t n = it.d1 - it.d0;
  load_weights<W>(p.weight, p.bias, it.d0, n, s.weights, s.row, s.bias, s.convert, width);
  float* taps[kTapSlots<W>];
  for (int k = 0; k < width; ++k) taps[k] = s.ring + k * s.row;
  for (int64_t i = 0; i < H; ++i) {
    const int64_t t = it.t0 - H + i;  // relative to the sequence start; < 0: the prior
    if (t >= 0) {
      load_row(x + (it.seq.start + t) * x_step, taps[i], n);
    } else if (it.has_prior) {
      load_column(st, it.slot.line * st.stride[0] + it.d0 * st.stride[1] + (p.state_len + t) * st.stride[2],
                  st.stride[1], taps[i], n);
    } else {
      for (int64_t c = 0; c < n; ++c) taps[i][c] = 0.0f;
    }
  }
  for (int64_t t = it.t0; t < it.t1; ++t) {
    const int64_t token = it.seq.start + t;
    // A row of the block is a short run (1 KiB); the hardware prefetchers need help.
    if (p.prefetch_ahead > 0 && t + p.prefetch_ahead < it.t1) {
      prefetch_span(x + (token + p.prefetch_ahead) * x_step, n * int64_t{sizeof(XT)});
      if (!p.stream_output)
        prefetch_span_for_write(out + (token + p.prefetch_ahead) * out_step, n * int64_t{sizeof(XT)});
    }
    load_row(x + token * x_step, taps[H], n);
    convolve_channels_store<W, ACT>(taps, width, s.weights, s.row, s.bias, out + token * out_step, n,
                                    p.stream_output);
    float* oldest = taps[0];
    for (int k = 0; k < H; ++k) taps[k] = taps[k + 1];
    taps[H] = oldest;
  }
}

// Channel d's taps (zeros in the slots a runtime width leaves unused); returns its bias.
template <int W>
inline float channel_taps(const VarlenPlan& p, int64_t d, int width, float (&w)[kTapSlots<W>]) {
  for (int k = 0; k < width; ++k)
    w[k] = load_f32(p.weight.data, d * p.weight.stride[0] + k * p.weight.stride[1], p.weight.type);
  for (int k = width; k < kTapSlots<W>; ++k) w[k] = 0.0f;
  return p.bias.data != nullptr ? load_f32(p.bias.data, d * p.bias.stride[0], p.bias.type) : 0.0f;
}

// Tokens [from, to) of one channel row (x_row and out_row point at the row's token 0), in chunks
// converted into an f32 window behind their W-1 history, which stays in L1. The first chunk's
// history is `history` where given (a prior state, or zeros), else x's tokens before `from`.
template <int W, Act ACT, class XT>
inline void convolve_row(const XT* x_row, XT* out_row, int64_t from, int64_t to, const float* history,
                         const float (&w)[kTapSlots<W>], int width, float bias, bool stream) {
  const int64_t H = width - 1;
  alignas(64) float window[kTimeChunk + kMaxWidth];
  for (int64_t c0 = from; c0 < to; c0 += kTimeChunk) {
    const int64_t n = min_i64(kTimeChunk, to - c0);
    if (c0 > from || history == nullptr) {
      load_row(x_row + c0 - H, window, H);
    } else {
      for (int64_t i = 0; i < H; ++i) window[i] = history[i];
    }
    load_row(x_row + c0, window + H, n);
    convolve_time_store<W, ACT>(window, w, width, bias, out_row + c0, n, stream);
  }
}

// The tile along time (time-contiguous x): per channel row, convolve_row over the tile, its
// history from the prior state (or zeros) at the sequence's start.
template <class XT, int W, Act ACT>
inline void tile_along_time(const VarlenPlan& p, const VarlenItem& it) {
  const int width = width_of<W>(p.width);
  const int64_t H = width - 1;
  const XT* x = static_cast<const XT*>(p.x.data) + it.seq.start;
  XT* out = static_cast<XT*>(p.out.data) + it.seq.start;
  const StridedRef& st = p.states;
  const int64_t state_base = it.slot.line * st.stride[0] + (p.state_len - H) * st.stride[2];
  float history[kMaxWidth] = {};
  for (int64_t d = it.d0; d < it.d1; ++d) {
    float w[kTapSlots<W>];
    const float bias = channel_taps<W>(p, d, width, w);
    if (it.t0 == 0 && it.has_prior) load_column(st, state_base + d * st.stride[1], st.stride[2], history, H);
    convolve_row<W, ACT>(x + d * p.x.stride[0], out + d * p.out.stride[0], it.t0, it.t1,
                         it.t0 == 0 ? history : nullptr, w, width, bias, p.stream_output);
  }
}

// A short tile of time-contiguous x, across channels: each channel's few tokens (and history)
// are read as the contiguous run they are and transposed into s.tile; the results are staged
// the same way and written back as runs.
template <class XT, int W, Act ACT>
inline void short_tile_time_contiguous(const VarlenPlan& p, const VarlenItem& it, const ChannelScratch& s) {
  const int width = width_of<W>(p.width);
  const int64_t H = width - 1;
  const int64_t n = it.d1 - it.d0, len = it.t1 - it.t0, R = s.row;
  const XT* x = static_cast<const XT*>(p.x.data) + it.seq.start;
  XT* out = static_cast<XT*>(p.out.data) + it.seq.start;
  const StridedRef& st = p.states;
  // History from the prior state comes as whole rows of the tile; from x, with the tokens.
  int64_t from_x = H;  // the first history row that lies in x
  for (int64_t i = 0; i < H; ++i) {
    const int64_t t = it.t0 - H + i;
    if (t >= 0) {
      from_x = i;
      break;
    }
    if (it.has_prior) {
      load_column(st, it.slot.line * st.stride[0] + it.d0 * st.stride[1] + (p.state_len + t) * st.stride[2],
                  st.stride[1], s.tile + i * R, n);
    } else {
      for (int64_t c = 0; c < n; ++c) s.tile[i * R + c] = 0.0f;
    }
  }
  for (int64_t c = 0; c < n; ++c) {
    const XT* x_row = x + (it.d0 + c) * p.x.stride[0] + it.t0 - H;
    for (int64_t i = from_x; i < H + len; ++i) s.tile[i * R + c] = to_f32(x_row[i]);
  }
  load_weights<W>(p.weight, p.bias, it.d0, n, s.weights, R, s.bias, s.convert, width);
  XT* staged = reinterpret_cast<XT*>(s.staged);
  for (int64_t t = 0; t < len; ++t) {
    float* taps[kTapSlots<W>];
    for (int k = 0; k < width; ++k) taps[k] = s.tile + (t + k) * R;
    convolve_channels_store<W, ACT>(taps, width, s.weights, R, s.bias, staged + t * R, n);
  }
  for (int64_t c = 0; c < n; ++c) {
    XT* out_row = out + (it.d0 + c) * p.out.stride[0] + it.t0;
    for (int64_t t = 0; t < len; ++t) out_row[t] = staged[t * R + c];
  }
}

// Time-contiguous x in a batch of several sequences (plan.whole_rows): an item is a block of
// channel rows over the whole batch. Each row is convolved in one pass as if it held one
// sequence; then every sequence's first W-1 outputs are computed again from its prior, a row's
// heads in one more pass over windows [prior's last W-1, first W-1 tokens] laid end to end. The
// arithmetic is convolve_time's, so the bits are those of the per-sequence items, whose setup
// per (sequence, row) a batch of short sequences paid for each row again.

// A group of up to kHeadGroup sequences, looked up once per item.
struct HeadGroup {
  int64_t start[kHeadGroup], len[kHeadGroup], line[kHeadGroup];  // line < 0: skipped
  bool prior[kHeadGroup];
};

inline uint32_t lookup_group(const VarlenPlan& p, int64_t g0, int64_t g1, HeadGroup& g) {
  uint32_t errors = 0;
  for (int64_t b = g0; b < g1; ++b) {
    const SeqRange seq = sequence_range(p.query_start_loc, b, p.tokens);
    const Slot slot = resolve_slot(p.cache_indices, b, p.lines, p.pad_slot_id);
    if (slot.kind == SlotKind::out_of_range) errors |= kErrorCacheIndexOutOfRange;
    g.start[b - g0] = seq.start;
    g.len[b - g0] = seq.len;
    g.line[b - g0] = slot.kind == SlotKind::ok ? slot.line : -1;
    g.prior[b - g0] = p.has_initial_state.data != nullptr && flag_at(p.has_initial_state, b) != 0;
  }
  return errors;
}

// One channel row's heads and new states for a group; ST is the state's element type.
template <class XT, class ST, int W, Act ACT>
inline void row_heads(const VarlenPlan& p, const HeadGroup& g, int64_t n_seq, int64_t d,
                      const float (&w)[kTapSlots<W>], float bias, float* __restrict heads_in,
                      XT* __restrict heads_out) {
  const int width = width_of<W>(p.width);
  const int64_t H = width - 1, G = 2 * H, S = p.state_len;
  const StridedRef& st = p.states;
  ST* const states = static_cast<ST*>(st.data) + d * st.stride[1];
  const XT* const x_row = static_cast<const XT*>(p.x.data) + d * p.x.stride[0];
  XT* const out_row = static_cast<XT*>(p.out.data) + d * p.out.stride[0];
  for (int64_t j = 0; j < n_seq; ++j) {
    float* const e = heads_in + j * G;
    const bool has_prior = g.line[j] >= 0 && g.prior[j];
    const ST* const prior = has_prior ? states + g.line[j] * st.stride[0] : nullptr;
    for (int64_t i = 0; i < H; ++i) e[i] = has_prior ? to_f32(prior[(S - H + i) * st.stride[2]]) : 0.0f;
    for (int64_t i = 0; i < H; ++i) e[H + i] = i < g.len[j] ? to_f32(x_row[g.start[j] + i]) : 0.0f;
  }
  convolve_time_store<W, ACT>(heads_in, w, width, bias, heads_out, n_seq * G - H);
  for (int64_t j = 0; j < n_seq; ++j) {
    const int64_t start = g.start[j], len = g.len[j];
    if (g.line[j] < 0) {  // skipped: zeros out, the state untouched
      fill_zero(out_row + start, 1, len);
      continue;
    }
    for (int64_t i = 0; i < min_i64(H, len); ++i) out_row[start + i] = heads_out[j * G + i];
    // New state s[i] = e[len + i], e = concat(prior, the sequence's tokens); ascending i reads
    // the prior at len + i > i before it is overwritten.
    if (len == 0 && g.prior[j]) continue;
    ST* const state = states + g.line[j] * st.stride[0];
    for (int64_t i = 0; i < S; ++i) {
      const int64_t m = len + i;
      ST& dst = state[i * st.stride[2]];
      if (m >= S)
        dst = as_state<ST>(x_row[start + m - S]);
      else
        dst = g.prior[j] ? state[m * st.stride[2]] : ST{};
    }
  }
}

template <class XT, int W, Act ACT>
uint32_t rows_time_contiguous(const VarlenPlan& p, int64_t begin, int64_t end, float* scratch) {
  const int width = width_of<W>(p.width);
  const int64_t H = width - 1, G = 2 * H;
  float* const heads_in = scratch;                                        // kHeadGroup * G floats
  XT* const heads_out = reinterpret_cast<XT*>(scratch + kHeadGroup * G);  // kHeadGroup * G outputs
  const SeqRange first = sequence_range(p.query_start_loc, 0, p.tokens);
  const SeqRange last = sequence_range(p.query_start_loc, p.batch - 1, p.tokens);
  const int64_t lo = first.start, hi = last.start + last.len;  // monotonic offsets (the plan's rule)
  const float no_history[kMaxWidth] = {};                      // every sequence's head is redone
  uint32_t errors = 0;
  // A batch of one group is looked up once per item, a larger one per row and group. The heads
  // follow each row's pass while its x and output are in cache (after the whole block, 8k
  // tokens of 64 sequences took 1.6x as long).
  HeadGroup group;
  const bool one_group = p.batch <= kHeadGroup;
  for (int64_t block = begin; block < end; ++block) {
    const int64_t d0 = block * p.channel_block, d1 = min_i64(p.dim, d0 + p.channel_block);
    zero_tokens<XT>(p, 0, lo, d0, d1);
    zero_tokens<XT>(p, hi, p.tokens, d0, d1);
    if (one_group) errors |= lookup_group(p, 0, p.batch, group);
    for (int64_t d = d0; d < d1; ++d) {
      float w[kTapSlots<W>];
      const float bias = channel_taps<W>(p, d, width, w);
      convolve_row<W, ACT>(static_cast<const XT*>(p.x.data) + d * p.x.stride[0],
                           static_cast<XT*>(p.out.data) + d * p.out.stride[0], lo, hi, no_history, w, width,
                           bias, false);
      for (int64_t g0 = 0; g0 < p.batch; g0 += kHeadGroup) {
        const int64_t g1 = min_i64(p.batch, g0 + kHeadGroup);
        if (!one_group) errors |= lookup_group(p, g0, g1, group);
        if (p.states.type == elem_type_of<XT>)
          row_heads<XT, XT, W, ACT>(p, group, g1 - g0, d, w, bias, heads_in, heads_out);
        else
          row_heads<XT, float, W, ACT>(p, group, g1 - g0, d, w, bias, heads_in, heads_out);
      }
    }
  }
  return errors;
}

template <class XT, int W, Act ACT>
uint32_t varlen_time_contiguous(const VarlenPlan& p, int64_t begin, int64_t end, float* scratch) {
  if (p.whole_rows) return rows_time_contiguous<XT, W, ACT>(p, begin, end, scratch);
  const ChannelScratch s(p, width_of<W>(p.width), scratch);
  uint32_t errors = 0;
  ItemCursor at(p, begin);
  for (int64_t item = begin; item < end; ++item, at.advance(p)) {
    VarlenItem it;
    if (!decode_item(p, at, it) || !prepare_item<XT>(p, it, errors)) continue;
    if (it.t1 - it.t0 >= kShortTile) {
      tile_along_time<XT, W, ACT>(p, it);
    } else if (it.t1 > it.t0) {
      short_tile_time_contiguous<XT, W, ACT>(p, it, s);
    }
    if (it.tile == 0) write_state<XT>(p, it);
  }
  if (p.stream_output) fence_streaming_stores();
  return errors;
}

template <class XT, int W, Act ACT>
uint32_t varlen_channel_last(const VarlenPlan& p, int64_t begin, int64_t end, float* scratch) {
  const ChannelScratch s(p, width_of<W>(p.width), scratch);
  uint32_t errors = 0;
  ItemCursor at(p, begin);
  for (int64_t item = begin; item < end; ++item, at.advance(p)) {
    VarlenItem it;
    if (!decode_item(p, at, it) || !prepare_item<XT>(p, it, errors)) continue;
    if (it.t1 > it.t0) tile_across_channels<XT, W, ACT>(p, it, s);
    if (it.tile == 0) write_state<XT>(p, it);
  }
  if (p.stream_output) fence_streaming_stores();
  return errors;
}

}  // namespace deltakern::portable::cpu::DK_CPU_ISA
