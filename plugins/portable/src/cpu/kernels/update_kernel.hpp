// causal_conv1d_update work items: item = (batch row b, channel block). Within an item the
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

// x's element as a state element: the same dtype keeps its bits; an f32 state (the only
// other kind) holds it exactly.
template <class ST, class XT>
inline ST as_state(XT v) {
  if constexpr (sizeof(ST) == sizeof(XT)) {
    return v;
  } else {
    return to_f32(v);
  }
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
  for (int64_t item = begin; item < end; ++item) {
    const int64_t b = item / p.n_channel_blocks;
    const int64_t d0 = (item % p.n_channel_blocks) * p.channel_block;
    const int64_t n = min_i64(p.dim, d0 + p.channel_block) - d0;
    XT* out = static_cast<XT*>(p.out.data) + b * p.out.stride[0] + d0 * p.out.stride[1];
    const Slot slot = resolve_slot(p.state_indices, b, p.lines, p.pad_slot_id);
    if (slot.kind != SlotKind::ok) {
      if (slot.kind == SlotKind::out_of_range) errors |= kErrorCacheIndexOutOfRange;
      for (int64_t t = 0; t < Tq; ++t) fill_zero(out + t * p.out.stride[2], p.out.stride[1], n);
      continue;
    }
    load_weights<W>(p.weight, p.bias, d0, n, weights, R, bias, scratch, width);
    const XT* x = static_cast<const XT*>(p.x.data) + b * p.x.stride[0] + d0 * p.x.stride[1];
    const int64_t state_base = slot.line * st.stride[0] + d0 * st.stride[1];
    float* taps[kTapSlots<W>];
    for (int k = 0; k < width; ++k) taps[k] = ring + k * R;
    // Packed rows: the block's whole state as f32 in scratch, [c * H + i].
    if (packed) load_contiguous(st, state_base, n * H, scratch);

    if (p.cache_seqlens.data != nullptr) {
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
        for (int64_t c = 0; c < n; ++c)
          move_elem(st.data, dst + c * st.stride[1], src + c * st.stride[1], st.type);
      } else {
        store_x_column(st, dst, st.stride[1], x + (m - S) * p.x.stride[2], p.x.stride[1], n);
      }
    }
  }
  return errors;
}

}  // namespace deltakern::portable::cpu::DK_CPU_ISA
