// What every work item needs before it computes anything: which cache line its sequence uses,
// where the sequence lies in x, and column-wise access to strided tensors of runtime dtype.
// (Per-instruction-set, like numeric.hpp.)
#pragma once

#ifndef DK_CPU_ISA
#error "strided.hpp is compiled once per instruction set: define DK_CPU_ISA first"
#endif

#include <cstdint>

#include "../plan.hpp"
#include "numeric.hpp"
#include "width.hpp"

namespace deltakern::portable::cpu::DK_CPU_ISA {

inline constexpr uint32_t kErrorCacheIndexOutOfRange = 1u;  // DK_DEVICE_ERROR_CACHE_INDEX_OUT_OF_RANGE

inline int32_t index_at(const IndexRef& ref, int64_t i) {
  return static_cast<const int32_t*>(ref.data)[i * ref.stride];
}
inline uint8_t flag_at(const IndexRef& ref, int64_t i) {
  return static_cast<const uint8_t*>(ref.data)[i * ref.stride];
}

enum class SlotKind { ok, padded, out_of_range };
struct Slot {
  SlotKind kind;
  int64_t line;
};

// The state line of batch entry b. Padding is checked first: an engine may use a pad id that
// is also a valid line number.
inline Slot resolve_slot(const IndexRef& indices, int64_t b, int64_t lines, int64_t pad_slot_id) {
  const int64_t line = indices.data != nullptr ? int64_t{index_at(indices, b)} : b;
  if (line == pad_slot_id) return {SlotKind::padded, 0};
  if (line < 0 || line >= lines) return {SlotKind::out_of_range, 0};
  return {SlotKind::ok, line};
}

// Sequence b's tokens [start, start + len) of x, clamped into [0, tokens) so that a corrupt
// query_start_loc cannot make a kernel touch memory outside x or the output.
struct SeqRange {
  int64_t start, len;
};
inline SeqRange sequence_range(const IndexRef& query_start_loc, int64_t b, int64_t tokens) {
  const int64_t s = min_i64(max_i64(index_at(query_start_loc, b), 0), tokens);
  const int64_t e = min_i64(max_i64(index_at(query_start_loc, b + 1), s), tokens);
  return {s, e - s};
}

// n elements t[base + i * stride] as f32; the dtype switch sits outside the loop, and unit
// strides (a dim-contiguous state's positions) take the vectorised row loop.
// This and the other runtime-dtype column and row helpers here are called once per column or
// per item, never per element: out of line they are one copy per translation unit instead of
// three vectorised loops at every call site of every kernel (13% of a kernel TU's code).
[[gnu::noinline]] inline void load_column(const StridedRef& t, int64_t base, int64_t stride,
                                          float* __restrict dst, int64_t n) {
  switch (t.type) {
    case ElemType::bf16: {
      load_strided(static_cast<const Bf16*>(t.data) + base, stride, dst, n);
      return;
    }
    case ElemType::f16: {
      load_strided(static_cast<const F16*>(t.data) + base, stride, dst, n);
      return;
    }
    case ElemType::f32: {
      load_strided(static_cast<const float*>(t.data) + base, stride, dst, n);
      return;
    }
  }
}

[[gnu::noinline]] inline void store_column(const StridedRef& t, int64_t base, int64_t stride,
                                           const float* __restrict src, int64_t n) {
  switch (t.type) {
    case ElemType::bf16: {
      Bf16* dst = static_cast<Bf16*>(t.data) + base;
      for (int64_t i = 0; i < n; ++i) dst[i * stride] = bf16_from_f32(src[i]);
      return;
    }
    case ElemType::f16: {
      F16* dst = static_cast<F16*>(t.data) + base;
      for (int64_t i = 0; i < n; ++i) dst[i * stride] = f16_from_f32(src[i]);
      return;
    }
    case ElemType::f32: {
      float* dst = static_cast<float*>(t.data) + base;
      for (int64_t i = 0; i < n; ++i) dst[i * stride] = src[i];
      return;
    }
  }
}

// x's elements (type XT, contiguous or strided) written into a state column of type
// t.type: x's own dtype, copied as is, or f32, converted exactly.
template <class XT>
[[gnu::noinline]] inline void store_x_column(const StridedRef& t, int64_t base, int64_t stride, const XT* src,
                                             int64_t src_stride, int64_t n) {
  if (t.type == elem_type_of<XT>) {
    XT* dst = static_cast<XT*>(t.data) + base;
    if (stride == 1 && src_stride == 1) {  // a dim-contiguous state: one copy, not n stores
      __builtin_memcpy(dst, src, static_cast<size_t>(n) * sizeof(XT));
      return;
    }
    for (int64_t i = 0; i < n; ++i) dst[i * stride] = src[i * src_stride];
  } else {
    float* dst = static_cast<float*>(t.data) + base;  // states are x's dtype or f32
    for (int64_t i = 0; i < n; ++i) dst[i * stride] = to_f32(src[i * src_stride]);
  }
}

template <class T>
inline void fill_zero(T* dst, int64_t stride, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i * stride] = from_f32<T>(0.0f);
}

// n contiguous elements of t from base, as f32.
[[gnu::noinline]] inline void load_contiguous(const StridedRef& t, int64_t base, int64_t n,
                                              float* __restrict dst) {
  switch (t.type) {
    case ElemType::bf16:
      load_row(static_cast<const Bf16*>(t.data) + base, dst, n);
      return;
    case ElemType::f16:
      load_row(static_cast<const F16*>(t.data) + base, dst, n);
      return;
    case ElemType::f32:
      load_row(static_cast<const float*>(t.data) + base, dst, n);
      return;
  }
}

// Per-channel rows of G elements, stored one after the other (weights (D, W), a state line
// (D, S) with S contiguous), turned into columns: columns[j][c] = row c's element first + j.
// One contiguous conversion, then a de-interleave the compiler does with permutes; a strided
// load per column would be a gather, which is slow.
template <int G>
inline void deinterleave(const float* __restrict rows, int64_t n, float* const* columns, int64_t first,
                         int64_t count) {
  for (int64_t j = 0; j < count; ++j) {
    float* __restrict column = columns[j];
    const float* __restrict src = rows + first + j;
    for (int64_t c = 0; c < n; ++c) column[c] = src[c * G];
  }
}

// The same for a group size known only at run time (the runtime-width kernels' G = width or
// width - 1): the loops with a constant stride are one small copy per G, shared by every kernel
// of the translation unit; a loop with a runtime stride would run element by element.
[[gnu::noinline]] inline void deinterleave_runtime(int group, const float* __restrict rows, int64_t n,
                                                   float* const* columns, int64_t first, int64_t count) {
  switch (group) {
    case 4:
      return deinterleave<4>(rows, n, columns, first, count);
    case 5:
      return deinterleave<5>(rows, n, columns, first, count);
    case 6:
      return deinterleave<6>(rows, n, columns, first, count);
    case 7:
      return deinterleave<7>(rows, n, columns, first, count);
    case 8:
      return deinterleave<8>(rows, n, columns, first, count);
    default:
      for (int64_t j = 0; j < count; ++j)
        for (int64_t c = 0; c < n; ++c) columns[j][c] = rows[first + j + c * group];
  }
}

template <int G>
inline void load_interleaved(const StridedRef& t, int64_t base, int64_t n, float* __restrict scratch,
                             float* const* columns, int64_t first, int64_t count) {
  load_contiguous(t, base, n * G, scratch);
  deinterleave<G>(scratch, n, columns, first, count);
}

// The weights of channels [d0, d0 + n) as weights[k * row + c], and their bias (0 when none).
// `scratch` holds n * W floats.
template <int W>
inline void load_weights(const StridedRef& weight, const StridedRef& bias, int64_t d0, int64_t n,
                         float* __restrict weights, int64_t row, float* __restrict bias_out,
                         float* __restrict scratch, int width) {
  width = width_of<W>(width);
  if (weight.stride[1] == 1 && weight.stride[0] == width) {
    float* columns[kTapSlots<W>];
    for (int k = 0; k < width; ++k) columns[k] = weights + k * row;
    if constexpr (W == kRuntimeWidth) {
      load_contiguous(weight, d0 * width, n * width, scratch);
      deinterleave_runtime(width, scratch, n, columns, 0, width);
    } else {
      load_interleaved<W>(weight, d0 * W, n, scratch, columns, 0, W);
    }
  } else {
    for (int k = 0; k < width; ++k)
      load_column(weight, d0 * weight.stride[0] + k * weight.stride[1], weight.stride[0], weights + k * row,
                  n);
  }
  if (bias.data != nullptr) {
    load_column(bias, d0 * bias.stride[0], bias.stride[0], bias_out, n);
  } else {
    for (int64_t c = 0; c < n; ++c) bias_out[c] = 0.0f;
  }
}

}  // namespace deltakern::portable::cpu::DK_CPU_ISA
