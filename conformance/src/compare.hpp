// The error bound every output element is held to, and the comparisons that name the first
// element that misses it.
#pragma once

#include "dtype.hpp"
#include "reference.hpp"
#include "tensor.hpp"

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

namespace deltakern::conformance {

// The error allowed on one element of an output in `dtype`, for a backend that accumulates
// in float32 and rounds once (docs/design.md, "Numerics"): half a unit in the last place of
// `dtype` at the reference value, plus a bound on any float32 evaluation of the sum (any
// order, products rounded or fused: gamma_n = n u / (1 - n u) times the magnitudes of the n
// terms, u = 2^-24), carried through the activation (|silu'| < 1.1) with the activation's
// own float32 error ((8 + 2 |pre|) u relative; for a bf16 output also the error of silu
// through tanh.approx, 2^-10 |h tanh(h)| with h = pre/2). A backend that rounds a product or a
// running sum to bf16 or f16 misses it; one that keeps float32 throughout is within it.
double output_tolerance(DType dtype, reference::Act act, const reference::Output& expected);

std::string format_value(double v);
std::string format_bits(DType dtype, uint32_t bits);

// Names element i for a message, e.g. "[3, 17] (channel 3, sequence 2, token 4)".
using Describe = std::function<std::string(int64_t i)>;

// Compares the elements `which` (row-major indices) of `got` with the reference, each within
// output_tolerance(). Empty when all agree; else the first differing element, got, expected,
// its tolerance and how many of those compared differ.
std::string compare_outputs(std::string_view what, const HostImage& got, reference::Act act,
                            std::span<const int64_t> which,
                            const std::function<reference::Output(int64_t i)>& expected,
                            const Describe& describe);

// Bit-exact comparison where `mask` is set (empty mask: everywhere).
std::string compare_bits(std::string_view what, DType dtype, std::span<const uint32_t> got,
                         std::span<const uint32_t> expected, std::span<const uint8_t> mask,
                         const Describe& describe);

// The element of a skipped sequence or row (padded, or out of range): x as it was for an
// in-place backend (`before`), zero for a fresh output. Empty when it holds; `where` names it.
std::string check_skipped(std::string_view unit, DType dtype, bool in_place, uint32_t got, uint32_t before,
                          const std::string& where);

// The pool after a call, bit for bit, where live(i) holds: each element the reference's value
// rounded to the pool's dtype.
std::string compare_states(std::string_view what, const HostImage& states, std::span<const double> expected,
                           const std::function<bool(int64_t)>& live, const Describe& describe);

// Bit-exact comparison of every element of two images of the same shape.
std::string compare_images(std::string_view what, const HostImage& got, const HostImage& expected,
                           const Describe& describe);

}  // namespace deltakern::conformance
