#include "dtype.hpp"

#include <deltakern/plugin_sdk.hpp>

#include <bit>
#include <cmath>
#include <stdexcept>

namespace deltakern::conformance {

DType from_dl(const DLDataType& t) {
  DType d{};
  if (!scalar_type_of(t, &d))
    throw std::invalid_argument("the conformance suite has no tensors of dtype " + plugin::dtype_name(t));
  return d;
}

uint16_t f32_to_f16(float v) {
  const uint32_t x = std::bit_cast<uint32_t>(v);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t absx = x & 0x7FFFFFFFu;
  if (absx >= 0x7F800000u)  // infinity, or NaN kept quiet with the top payload bits
    return static_cast<uint16_t>(sign | 0x7C00u |
                                 (absx > 0x7F800000u ? 0x200u | ((absx >> 13) & 0x3FFu) : 0u));
  if (absx <= 0x33000000u) return static_cast<uint16_t>(sign);  // <= 2^-25: ties to the even zero
  const uint32_t exponent = absx >> 23;
  if (exponent < 113) {  // a binary16 subnormal: units of 2^-24
    const uint32_t mant = (absx & 0x7FFFFFu) | 0x800000u;
    const uint32_t shift = 126 - exponent;
    uint32_t h = mant >> shift;
    const uint32_t rem = mant & ((1u << shift) - 1u), half = 1u << (shift - 1);
    if (rem > half || (rem == half && (h & 1u))) ++h;  // may carry into the smallest normal: right
    return static_cast<uint16_t>(sign | h);
  }
  uint32_t h = (absx - 0x38000000u) >> 13;  // rebias 127 -> 15, keep 10 mantissa bits
  const uint32_t rem = absx & 0x1FFFu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;  // a carry may reach the exponent: right
  if (h >= 0x7C00u) h = 0x7C00u;
  return static_cast<uint16_t>(sign | h);
}

float f16_to_f32(uint16_t bits) {
  const uint32_t sign = static_cast<uint32_t>(bits & 0x8000u) << 16;
  const uint32_t exponent = (bits >> 10) & 0x1Fu, mant = bits & 0x3FFu;
  if (exponent == 0) {
    const float magnitude = std::ldexp(static_cast<float>(mant), -24);
    return sign ? -magnitude : magnitude;
  }
  if (exponent == 31) return std::bit_cast<float>(sign | 0x7F800000u | (mant << 13));
  return std::bit_cast<float>(sign | ((exponent + 112) << 23) | (mant << 13));
}

uint16_t f32_to_bf16(float v) {
  const uint32_t x = std::bit_cast<uint32_t>(v);
  if ((x & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);
  return static_cast<uint16_t>((x + 0x7FFFu + ((x >> 16) & 1u)) >> 16);
}

float bf16_to_f32(uint16_t bits) { return std::bit_cast<float>(static_cast<uint32_t>(bits) << 16); }

uint32_t encode(DType t, double value) {
  switch (t) {
    case DType::f32:
      return std::bit_cast<uint32_t>(static_cast<float>(value));
    case DType::f16:
      return f32_to_f16(static_cast<float>(value));
    case DType::bf16:
      return f32_to_bf16(static_cast<float>(value));
    case DType::i32:
      return static_cast<uint32_t>(static_cast<int32_t>(value));
    case DType::u8:
      return static_cast<uint32_t>(static_cast<uint8_t>(value));
  }
  return 0;
}

double decode(DType t, uint32_t bits) {
  switch (t) {
    case DType::f32:
      return std::bit_cast<float>(bits);
    case DType::f16:
      return f16_to_f32(static_cast<uint16_t>(bits));
    case DType::bf16:
      return bf16_to_f32(static_cast<uint16_t>(bits));
    case DType::i32:
      return static_cast<int32_t>(bits);
    case DType::u8:
      return static_cast<uint8_t>(bits);
  }
  return 0;
}

double ulp(DType t, double v) {
  // Below the smallest normal the spacing is the smallest subnormal's.
  const int min_exponent = t == DType::f16 ? -14 : -126;  // of the smallest normal, 2^min_exponent
  const int mantissa_bits = t == DType::f16 ? 10 : t == DType::bf16 ? 7 : 23;
  int e = 0;
  std::frexp(std::abs(v), &e);  // |v| = m * 2^e, m in [0.5, 1): the binade's exponent is e - 1
  if (v == 0 || e - 1 < min_exponent) e = min_exponent + 1;
  return std::ldexp(1.0, e - 1 - mantissa_bits);
}

}  // namespace deltakern::conformance
