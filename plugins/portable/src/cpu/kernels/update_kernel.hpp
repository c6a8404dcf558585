// causal_conv1d_update work items: item = (channel block, batch row b), b fastest. Within an item the
// tokens are processed in order and each token's arithmetic is vectorised across the block's
// channels (decode is a handful of tokens over thousands of channels).
//
// Shift mode: e = concat(state, x_b); out[t] = act(bias + sum_k w[k] * e[S + t - (W-1) + k]);
//   new state = e[Tq .. Tq + S).
// Circular mode (n = cache_seqlens[b]): token t reads its history at (n + t - (W-1) + j) mod S,
//   j < W-1, then is written at (n + t) mod S.
#pragma once

#ifndef DK_CPU_ISA
#error "update_kernel.hpp is compiled once per instruction set: define DK_CPU_ISA first"
#endif

#include <cstdint>
#include <type_traits>

#include "../plan.hpp"
#include "convolve.hpp"
#include "numeric.hpp"
#include "strided.hpp"
#include "width.hpp"

namespace deltakern::portable::cpu::DK_CPU_ISA {

inline int64_t wrap(int64_t i, int64_t n) {
  const int64_t r = i % n;
  return r < 0 ? r + n : r;
}

// The state of channels [0, n) as packed rows of exactly S = W-1 elements (the layout a pool
// (lines, D, W-1) has when it is compact): history comes in through one contiguous load, and
// a shift is one memmove.
inline bool packed_state(const StridedRef& st, int64_t state_len, int width) {
  return state_len == width - 1 && st.stride[2] == 1 && st.stride[1] == width - 1;
}

// Shift mode on packed rows of S = W-1: s[c][i] = e[Tq + i] with e = concat(s[c], x[c]). A flat
// move of the whole block by Tq elements puts every s[c][i + Tq] in place (and the next row's
// head in each row's last Tq slots), then x fills those slots. S is a compile-time constant so
// that the strided fills vectorise (with permutes) instead of running element by element.
template <int S, class ST, class XT>
inline void shift_packed(ST* block, int64_t n, const XT* x, int64_t x_channel, int64_t x_token, int64_t Tq) {
  const int64_t kept = Tq < S ? S - Tq : 0;  // old entries each row keeps
  if (kept > 0) __builtin_memmove(block, block + Tq, static_cast<size_t>(n * S - Tq) * sizeof(ST));
  for (int64_t i = kept; i < S; ++i) {
    ST* __restrict dst = block + i;
    const XT* __restrict src = x + (Tq - S + i) * x_token;
    if (x_channel == 1) {
      for (int64_t c = 0; c < n; ++c) dst[c * S] = as_state<ST>(src[c]);
    } else {
      for (int64_t c = 0; c < n; ++c) dst[c * S] = as_state<ST>(src[c * x_channel]);
    }
  }
}

// shift_packed for the runtime-width kernels (S = width - 1 from 4 up), one small copy per S.
template <int W, class ST, class XT>
inline void shift_packed_width(int width, ST* block, int64_t n, const XT* x, int64_t x_channel,
                               int64_t x_token, int64_t Tq) {
  if constexpr (W != kRuntimeWidth) {
    (void)width;
    shift_packed<W - 1>(block, n, x, x_channel, x_token, Tq);
  } else {
    static_assert(kMinRuntimeWidth == 5 && kMaxWidth == 8, "shift_packed_width lists the widths");
    switch (width) {
      case 5:
        return shift_packed<4>(block, n, x, x_channel, x_token, Tq);
      case 6:
        return shift_packed<5>(block, n, x, x_channel, x_token, Tq);
      case 7:
        return shift_packed<6>(block, n, x, x_channel, x_token, Tq);
      default:
        return shift_packed<7>(block, n, x, x_channel, x_token, Tq);
    }
  }
}

// Decode's commonest call on a compact pool: one token, x contiguous across channels, packed
// rows of S = W-1 at a fixed width. The history goes from the row straight into S f32 columns
// (in ring order, so circular mode only picks which column is which), and the new rows are
// built whole in `raw`, element-exact (a move keeps every bit, NaN payloads included), then
// copied over the old ones: no f32 round trip, no stores with a stride. CPU box, bf16, D=8192,
// batch 64, one thread: 674 / 876 -> 490 / 512 us in shift / circular mode.
template <int S, class ST>
inline void packed_columns(const ST* __restrict rows, int64_t n, float* const* columns) {
  for (int j = 0; j < S; ++j) {
    float* __restrict column = columns[j];
    for (int64_t c = 0; c < n; ++c) column[c] = to_f32(rows[c * S + j]);
  }
}

// Each row's position `slot` takes x (slot = S - 1 after the rows moved one position left: shift
// mode; slot = the ring position: circular mode, where the rest stay).
// A state in x's dtype moves as plain integers of its size, which the compiler vectorises (with
// permutes); the 16-bit structs it copied one by one.
template <int S, int kSlot, bool kShift, class ST, class XT>
inline void packed_new_rows(ST* __restrict raw, const ST* __restrict rows, const XT* __restrict x,
                            int64_t n) {
  if constexpr (sizeof(ST) == sizeof(XT) && sizeof(ST) == 2 && !std::is_integral_v<ST>) {
    packed_new_rows<S, kSlot, kShift>(reinterpret_cast<uint16_t*>(raw),
                                      reinterpret_cast<const uint16_t*>(rows),
                                      reinterpret_cast<const uint16_t*>(x), n);
  } else {
    for (int64_t c = 0; c < n; ++c)
      for (int i = 0; i < S; ++i)
        raw[c * S + i] = i == kSlot ? as_state<ST>(x[c]) : rows[c * S + (kShift ? i + 1 : i)];
  }
}

template <int W, Act ACT, class ST, class XT>
inline void decode_packed(ST* rows, const XT* x, XT* out, int64_t out_stride, int64_t n, int64_t seen,
                          bool circular, const float* weights, int64_t R, const float* bias, float* ring,
                          void* raw_buffer) {
  constexpr int S = W - 1;
  static_assert(S >= 1 && S <= 3, "fixed widths 2..4");
  float* columns[W];
  for (int k = 0; k < W; ++k) columns[k] = ring + k * R;
  packed_columns<S>(rows, n, columns);
  const int slot = circular ? static_cast<int>(wrap(seen, S)) : S - 1;
  // Circular: entry j of the history is ring position (seen + j) mod S (S = W-1).
  float* taps[W];
  for (int j = 0; j < S; ++j) taps[j] = columns[circular ? (slot + j) % S : j];
  taps[S] = columns[S];
  load_row(x, taps[S], n);
  convolve_channels_store_strided<W, ACT>(taps, W, weights, R, bias, out, out_stride, n);
  ST* const raw = static_cast<ST*>(raw_buffer);
  if (!circular)
    packed_new_rows<S, S - 1, true>(raw, rows, x, n);
  else if (slot == 0)
    packed_new_rows<S, 0, false>(raw, rows, x, n);
  else if (slot == 1)
    packed_new_rows<S, (S > 1 ? 1 : 0), false>(raw, rows, x, n);
  else
    packed_new_rows<S, (S > 2 ? 2 : 0), false>(raw, rows, x, n);
  __builtin_memcpy(rows, raw, static_cast<size_t>(n * S) * sizeof(ST));
}

template <class XT, int W, Act ACT>
uint32_t update_kernel(const UpdatePlan& p, int64_t begin, int64_t end, float* scratch_base) {
  const int width = width_of<W>(p.width);
  const int64_t H = width - 1;
  // Weights, ring and conversion buffer (W rows of R floats each) and the bias:
  // plan.scratch_floats = (3W + 1) R.
  const int64_t R = (p.channel_block + 15) / 16 * 16;
  float* weights = scratch_base;
  float* ring = weights + width * R;
  float* scratch = ring + width * R;
  float* bias = scratch + width * R;
  const StridedRef& st = p.state;
  const int64_t S = p.state_len, Tq = p.new_tokens;
  const bool packed = packed_state(st, S, width);
  uint32_t errors = 0;
  // Items run batch row fastest, so that a thread's consecutive items share a channel block and
  // its weights, converted once (reloaded per item, the weights took 21% of a batch-64 call).
  int64_t weights_d0 = -1;
  for (int64_t item = begin; item < end; ++item) {
    const int64_t b = item % p.batch;
    const int64_t d0 = (item / p.batch) * p.channel_block;
    const int64_t n = min_i64(p.dim, d0 + p.channel_block) - d0;
    XT* out = static_cast<XT*>(p.out.data) + b * p.out.stride[0] + d0 * p.out.stride[1];
    const Slot slot = resolve_slot(p.state_indices, b, p.lines, p.pad_slot_id);
    if (slot.kind != SlotKind::ok) {
      if (slot.kind == SlotKind::out_of_range) errors |= kErrorCacheIndexOutOfRange;
      for (int64_t t = 0; t < Tq; ++t) fill_zero(out + t * p.out.stride[2], p.out.stride[1], n);
      continue;
    }
    if (d0 != weights_d0) {
      load_weights<W>(p.weight, p.bias, d0, n, weights, R, bias, scratch, width);
      weights_d0 = d0;
    }
    const XT* x = static_cast<const XT*>(p.x.data) + b * p.x.stride[0] + d0 * p.x.stride[1];
    const int64_t state_base = slot.line * st.stride[0] + d0 * st.stride[1];
    const bool circular = p.cache_seqlens.data != nullptr;
    if constexpr (W != kRuntimeWidth) {
      if (packed && Tq == 1 && p.x.stride[1] == 1) {
        const int64_t seen = circular ? index_at(p.cache_seqlens, b) : 0;
        if (st.type == elem_type_of<XT>)
          decode_packed<W, ACT>(static_cast<XT*>(st.data) + state_base, x, out, p.out.stride[1], n, seen,
                                circular, weights, R, bias, ring, scratch);
        else
          decode_packed<W, ACT>(static_cast<float*>(st.data) + state_base, x, out, p.out.stride[1], n, seen,
                                circular, weights, R, bias, ring, scratch);
        continue;
      }
    }
    float* taps[kTapSlots<W>];
    for (int k = 0; k < width; ++k) taps[k] = ring + k * R;
    // Packed rows: the block's whole state as f32 in scratch, [c * H + i].
    if (packed) load_contiguous(st, state_base, n * H, scratch);

    if (circular) {
      const int64_t written = index_at(p.cache_seqlens, b);
      for (int64_t t = 0; t < Tq; ++t) {
        for (int64_t j = 0; j < H; ++j) {
          const int64_t slot_j = wrap(written + t - H + j, S);
          if (packed) {
            for (int64_t c = 0; c < n; ++c) taps[j][c] = scratch[c * H + slot_j];
          } else {
            load_column(st, state_base + slot_j * st.stride[2], st.stride[1], taps[j], n);
          }
        }
        const XT* x_t = x + t * p.x.stride[2];
        load_strided(x_t, p.x.stride[1], taps[H], n);
        convolve_channels_store_strided<W, ACT>(taps, width, weights, R, bias, out + t * p.out.stride[2],
                                                p.out.stride[1], n);
        const int64_t slot_t = wrap(written + t, S);
        store_x_column(st, state_base + slot_t * st.stride[2], st.stride[1], x_t, p.x.stride[1], n);
        if (packed) {  // later tokens of this call read it back as history
          for (int64_t c = 0; c < n; ++c) scratch[c * H + slot_t] = taps[H][c];
        }
      }
      continue;
    }

    if (packed && W == kRuntimeWidth) {  // the loop below would have a runtime stride
      deinterleave_runtime(static_cast<int>(H), scratch, n, taps, 0, H);
    } else {
      for (int64_t i = 0; i < H; ++i) {
        if (packed) {
          for (int64_t c = 0; c < n; ++c) taps[i][c] = scratch[c * H + i];
        } else {
          load_column(st, state_base + (S - H + i) * st.stride[2], st.stride[1], taps[i], n);
        }
      }
    }
    for (int64_t t = 0; t < Tq; ++t) {
      load_strided(x + t * p.x.stride[2], p.x.stride[1], taps[H], n);
      convolve_channels_store_strided<W, ACT>(taps, width, weights, R, bias, out + t * p.out.stride[2],
                                              p.out.stride[1], n);
      float* oldest = taps[0];
      for (int k = 0; k < H; ++k) taps[k] = taps[k + 1];
      taps[H] = oldest;
    }
    if (packed) {
      if (st.type == elem_type_of<XT>) {
        shift_packed_width<W>(width, static_cast<XT*>(st.data) + state_base, n, x, p.x.stride[1],
                              p.x.stride[2], Tq);
      } else {
        shift_packed_width<W>(width, static_cast<float*>(st.data) + state_base, n, x, p.x.stride[1],
                              p.x.stride[2], Tq);
      }
      continue;
    }
    // s[i] = e[Tq + i]: in increasing i the source lies at or after the destination.
    for (int64_t i = 0; i < S; ++i) {
      const int64_t m = Tq + i;
      const int64_t dst = state_base + i * st.stride[2];
      if (m < S) {
        const int64_t src = state_base + m * st.stride[2];
        // A dim-contiguous position moves whole (with the unit-stride column paths, batch 64 as
        // above: 550 -> 387 us).
        if (st.stride[1] == 1) {
          const size_t bytes = st.type == ElemType::f32 ? 4 : 2;
          __builtin_memmove(static_cast<char*>(st.data) + dst * bytes,
                            static_cast<char*>(st.data) + src * bytes, static_cast<size_t>(n) * bytes);
        } else {
          for (int64_t c = 0; c < n; ++c)
            move_elem(st.data, dst + c * st.stride[1], src + c * st.stride[1], st.type);
        }
      } else {
        store_x_column(st, dst, st.stride[1], x + (m - S) * p.x.stride[2], p.x.stride[1], n);
      }
    }
  }
  return errors;
}

}  // namespace deltakern::portable::cpu::DK_CPU_ISA
