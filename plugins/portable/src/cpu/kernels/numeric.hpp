// Element types, conversions and the activation, written as straight-line integer and float
// arithmetic so that loops over them vectorise (no branches, no libm calls).
//
// Included only by the per-instruction-set kernel translation units, inside the namespace
// DK_CPU_ISA names, so each instruction set gets its own copy (see plan.hpp for why).
#pragma once

#ifndef DK_CPU_ISA
#error "numeric.hpp is compiled once per instruction set: define DK_CPU_ISA first"
#endif

#include <cstdint>

#include "../plan.hpp"

#if defined(__F16C__) || defined(__AVX512F__)
#include <immintrin.h>
#endif

namespace deltakern::portable::cpu::DK_CPU_ISA {

struct Bf16 {
  uint16_t bits;
};
struct F16 {
  uint16_t bits;
};

template <class T>
inline constexpr ElemType elem_type_of = ElemType::f32;
template <>
inline constexpr ElemType elem_type_of<Bf16> = ElemType::bf16;
template <>
inline constexpr ElemType elem_type_of<F16> = ElemType::f16;

inline float bits_to_float(uint32_t u) { return __builtin_bit_cast(float, u); }
inline uint32_t float_to_bits(float f) { return __builtin_bit_cast(uint32_t, f); }

inline int64_t min_i64(int64_t a, int64_t b) { return a < b ? a : b; }
inline int64_t max_i64(int64_t a, int64_t b) { return a > b ? a : b; }

// ---- bf16: the top half of an f32

inline float to_f32(float v) { return v; }
inline float to_f32(Bf16 v) { return bits_to_float(uint32_t{v.bits} << 16); }

// Round to nearest even; a NaN stays a (quiet) NaN: adding the rounding bias to a NaN whose
// payload lies in the low half could carry into the sign, so NaNs take their top half instead.
inline Bf16 bf16_from_f32(float f) {
  const uint32_t u = float_to_bits(f);
  const uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
  const uint32_t nan = (u >> 16) | 0x40u;
  const bool is_nan = (u & 0x7fffffffu) > 0x7f800000u;
  return Bf16{static_cast<uint16_t>(is_nan ? nan : rounded)};
}

// ---- f16, in integer arithmetic (after F. Giesen's half <-> float conversions). Both are
// exact or correctly rounded (to nearest even) and involve no denormal float operation, so
// they give the same bits when an engine has set flush-to-zero / denormals-are-zero.

inline float to_f32(F16 v) {
  const uint32_t h = v.bits;
  const uint32_t sign = (h & 0x8000u) << 16;
  const uint32_t shifted = (h & 0x7fffu) << 13;  // exponent and mantissa in f32 position
  const uint32_t exponent = shifted & 0x0f800000u;
  const uint32_t rebias = shifted + ((127u - 15u) << 23);
  const uint32_t inf_nan = rebias + ((128u - 16u) << 23);
  // A subnormal half: let the FPU normalise it, through a subtraction of two normal numbers.
  const float magic = bits_to_float(113u << 23);
  const uint32_t subnormal = float_to_bits(bits_to_float(rebias + (1u << 23)) - magic);
  const uint32_t magnitude = exponent == 0x0f800000u ? inf_nan : (exponent == 0 ? subnormal : rebias);
  return bits_to_float(magnitude | sign);
}

inline F16 f16_from_f32(float f) {
  const uint32_t u = float_to_bits(f);
  const uint32_t sign = u & 0x80000000u;
  const uint32_t a = u ^ sign;
  const uint32_t f32_infinity = 255u << 23;
  const uint32_t f16_overflow = (127u + 16u) << 23;
  const uint32_t inf_nan = a > f32_infinity ? 0x7e00u : 0x7c00u;
  // Below the smallest normal half: adding 0.5 lets the FPU round the mantissa into place.
  const uint32_t denorm_magic = ((127u - 15u) + (23u - 10u) + 1u) << 23;
  const uint32_t subnormal = float_to_bits(bits_to_float(a) + bits_to_float(denorm_magic)) - denorm_magic;
  const uint32_t odd = (a >> 13) & 1u;
  const uint32_t normal = (a + (static_cast<uint32_t>(15 - 127) << 23) + 0xfffu + odd) >> 13;
  const uint32_t magnitude = a >= f16_overflow ? inf_nan : (a < (113u << 23) ? subnormal : normal);
  return F16{static_cast<uint16_t>(magnitude | (sign >> 16))};
}

template <class T>
inline T from_f32(float v);
template <>
inline float from_f32<float>(float v) {
  return v;
}
template <>
inline Bf16 from_f32<Bf16>(float v) {
  return bf16_from_f32(v);
}
template <>
inline F16 from_f32<F16>(float v) {
  return f16_from_f32(v);
}

// Software prefetch of a span: a channel-last tile jumps from one short run (its block of a
// token row) to the next, each too short for the hardware prefetchers to ramp up.
inline void prefetch_span(const void* p, int64_t bytes) {
  const char* c = static_cast<const char*>(p);
  for (int64_t off = 0; off < bytes; off += 64) __builtin_prefetch(c + off, 0, 3);
}
inline void prefetch_span_for_write(void* p, int64_t bytes) {
  char* c = static_cast<char*>(p);
  for (int64_t off = 0; off < bytes; off += 64) __builtin_prefetch(c + off, 1, 3);
}

// ---- contiguous rows: the hot loops convert whole rows at once

template <class T>
inline void load_row(const T* __restrict src, float* __restrict dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] = to_f32(src[i]);
}

template <class T>
inline void store_row(const float* __restrict src, T* __restrict dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] = from_f32<T>(src[i]);
}

#if defined(__F16C__)
// The F16C instructions convert eight halves at once; the compiler does not vectorise
// _Float16 conversions by itself. Same results as the integer versions above, up to the
// payload bits of a NaN.
template <>
inline void load_row<F16>(const F16* __restrict src, float* __restrict dst, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i));
    _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(h));
  }
  for (; i < n; ++i) dst[i] = to_f32(src[i]);
}

template <>
inline void store_row<F16>(const float* __restrict src, F16* __restrict dst, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h =
        _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i), h);
  }
  for (; i < n; ++i) dst[i] = f16_from_f32(src[i]);
}
#endif

// Rows with a stride (decode's x and output columns); unit stride takes the row paths above.
template <class T>
inline void load_strided(const T* src, int64_t stride, float* __restrict dst, int64_t n) {
  if (stride == 1) {
    load_row(src, dst, n);
  } else {
    for (int64_t i = 0; i < n; ++i) dst[i] = to_f32(src[i * stride]);
  }
}

template <class T>
inline void store_strided(const float* __restrict src, T* dst, int64_t stride, int64_t n) {
  if (stride == 1) {
    store_row(src, dst, n);
  } else {
    for (int64_t i = 0; i < n; ++i) dst[i * stride] = from_f32<T>(src[i]);
  }
}

// ---- elements of runtime type (weights, bias, states: read once per channel, not per token)

inline float load_f32(const void* base, int64_t index, ElemType type) {
  switch (type) {
    case ElemType::bf16:
      return to_f32(static_cast<const Bf16*>(base)[index]);
    case ElemType::f16:
      return to_f32(static_cast<const F16*>(base)[index]);
    case ElemType::f32:
      break;
  }
  return static_cast<const float*>(base)[index];
}

inline void store_f32(void* base, int64_t index, ElemType type, float v) {
  switch (type) {
    case ElemType::bf16:
      static_cast<Bf16*>(base)[index] = bf16_from_f32(v);
      return;
    case ElemType::f16:
      static_cast<F16*>(base)[index] = f16_from_f32(v);
      return;
    case ElemType::f32:
      static_cast<float*>(base)[index] = v;
      return;
  }
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

// A state element moved within its row: copied bit for bit, whatever it holds.
inline void move_elem(void* base, int64_t to, int64_t from, ElemType type) {
  if (type == ElemType::f32) {
    static_cast<uint32_t*>(base)[to] = static_cast<const uint32_t*>(base)[from];
  } else {
    static_cast<uint16_t*>(base)[to] = static_cast<const uint16_t*>(base)[from];
  }
}

// x's element written into a state of type `type` (x's dtype or f32: exact either way).
template <class XT>
inline void store_x_elem(void* base, int64_t index, ElemType type, XT v) {
  if (type == elem_type_of<XT>) {
    static_cast<XT*>(base)[index] = v;
  } else {
    store_f32(base, index, type, to_f32(v));
  }
}

// ---- silu(x) = x * sigmoid(x) = x / (1 + exp(-x)), to within a few f32 ulps.
//
// exp(t), t = -x clamped to [-86, 88] (beyond, silu is x itself or below 1e-36 in magnitude):
// t = n ln2 + r with |r| <= ln2/2, exp(t) = 2^n e^r; e^r by a degree-5 polynomial fitted for
// relative error (9e-8). 2^n goes straight into the exponent bits: adding 1.5 * 2^23 rounds
// t log2(e) to the integer n and leaves it in the low mantissa bits, from where a shift moves
// it into place; the clamp keeps 2^n e^r a normal number. A NaN x propagates.
inline constexpr float kExpMin = -86.0f;
inline constexpr float kExpMax = 88.0f;
inline constexpr float kRoundMagic = 12582912.0f;  // 1.5 * 2^23
inline constexpr float kLog2e = 1.44269504088896341f;
inline constexpr float kLn2 = 0.693147180559945309f;
inline constexpr float kLn2Hi = 0.693359375f;  // few bits: n * kLn2Hi is exact without an FMA
inline constexpr float kLn2Lo = -2.12194440e-4f;
inline constexpr float kExpPoly[6] = {0.008290312654217863f, 0.04189793029286644f, 0.16667636227755614f,
                                      0.49999149520274627f,  0.9999997071784459f,  1.0f};

inline float silu(float x) {
  float t = -x;
  t = t < kExpMin ? kExpMin : t;
  t = t > kExpMax ? kExpMax : t;
  const float shifted = t * kLog2e + kRoundMagic;
  const float n = shifted - kRoundMagic;
  float r = n * -kLn2Hi + t;
  r = n * -kLn2Lo + r;
  float p = kExpPoly[0];
  for (int i = 1; i < 6; ++i) p = p * r + kExpPoly[i];
  const float z = bits_to_float(float_to_bits(p) + (float_to_bits(shifted) << 23));
  return x / (1.0f + z);
}

template <Act ACT>
inline float activate(float v) {
  if constexpr (ACT == Act::silu) {
    return silu(v);
  } else {
    return v;
  }
}

}  // namespace deltakern::portable::cpu::DK_CPU_ISA
