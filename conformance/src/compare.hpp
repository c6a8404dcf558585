// Tolerances per dtype and the comparisons that name the first differing element.
#pragma once

#include "dtype.hpp"

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

namespace deltakern::conformance {

// The allowed |got - expected| of an output in `dtype` whose largest expected magnitude
// is `max_abs`: f32 1e-5 relative; f16 and bf16 two units in the last place of the
// dtype at that magnitude (accumulating in f32 and rounding once costs half of one).
double output_tolerance(DType dtype, double max_abs);

std::string format_value(double v);
std::string format_bits(DType dtype, uint32_t bits);

// Names element i for a message, e.g. "[3, 17] (channel 3, sequence 2, token 4)".
using Describe = std::function<std::string(int64_t i)>;

// Compares `got` (raw bits of `dtype`) with float64 `expected` where `mask` is set,
// within output_tolerance(). Empty when they agree; else the first differing element,
// got, expected, the tolerance and how many differ.
std::string compare_values(std::string_view what, DType dtype, std::span<const uint32_t> got,
                           std::span<const double> expected, std::span<const uint8_t> mask,
                           const Describe& describe);

// Bit-exact comparison where `mask` is set (empty mask: everywhere).
std::string compare_bits(std::string_view what, DType dtype, std::span<const uint32_t> got,
                         std::span<const uint32_t> expected, std::span<const uint8_t> mask,
                         const Describe& describe);

}  // namespace deltakern::conformance
