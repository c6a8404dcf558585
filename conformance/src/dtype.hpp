// Element types the suite builds tensors of, and their conversion to and from the
// float64 values the reference works in. The 16-bit conversions are the suite's own:
// a backend's conversion code must not be able to agree with itself.
#pragma once

#include <dlpack/dlpack.h>
#include <deltakern/scalar_type.hpp>

#include <cstddef>
#include <cstdint>
#include <string>

namespace deltakern::conformance {

// The project's dtype vocabulary (deltakern/scalar_type.hpp): to_dl, size_of, short_name and
// is_floating come with it; names in messages are plugin::dtype_name's.
using DType = ScalarType;

// Throws std::invalid_argument for a dtype the suite has no use for.
DType from_dl(const DLDataType& t);

// IEEE binary16 and bfloat16, round to nearest even (the rounding every backend must
// use for its single final rounding); subnormals, infinities and NaN kept.
uint16_t f32_to_f16(float v);
float f16_to_f32(uint16_t bits);
uint16_t f32_to_bf16(float v);
float bf16_to_f32(uint16_t bits);

// The raw bits of one element (zero-extended) and their value. encode() rounds the
// value to the dtype once: the values fed to it are exact in float32, so going through
// float first is not a double rounding.
uint32_t encode(DType t, double value);
double decode(DType t, uint32_t bits);

// The smallest spacing of representable values at magnitude `v` (v > 0).
double ulp(DType t, double v);

}  // namespace deltakern::conformance
