#include "compare.hpp"

#include "poison.hpp"

#include <cmath>
#include <cstdio>

namespace deltakern::conformance {

double output_tolerance(DType dtype, double max_abs) {
  if (!(max_abs > 0)) return 0.0;
  if (dtype == DType::f32) return 1e-5 * max_abs;
  return 2.0 * ulp(dtype, max_abs);
}

std::string format_value(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

std::string format_bits(DType dtype, uint32_t bits) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "0x%0*X", static_cast<int>(2 * size_of(dtype)), bits);
  return buf;
}

namespace {

std::string describe_got(DType dtype, uint32_t bits) {
  std::string s = format_value(decode(dtype, bits));
  if (const auto p = poison_of(bits, size_of(dtype)))
    s += " (" + format_bits(dtype, bits) + ": the poison, " + poison_name(*p) + ", never written)";
  return s;
}

}  // namespace

std::string compare_values(std::string_view what, DType dtype, std::span<const uint32_t> got,
                           std::span<const double> expected, std::span<const uint8_t> mask,
                           const Describe& describe) {
  if (got.size() != expected.size())
    return std::string(what) + ": " + std::to_string(got.size()) + " elements, expected " +
           std::to_string(expected.size());
  double max_abs = 0;
  for (size_t i = 0; i < expected.size(); ++i)
    if (mask.empty() || mask[i]) max_abs = std::max(max_abs, std::abs(expected[i]));
  const double tol = output_tolerance(dtype, max_abs);
  int64_t first = -1, count = 0, checked = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (!mask.empty() && !mask[i]) continue;
    ++checked;
    const double g = decode(dtype, got[i]);
    if (!(std::abs(g - expected[i]) <= tol)) {
      if (first < 0) first = static_cast<int64_t>(i);
      ++count;
    }
  }
  if (first < 0) return {};
  const auto i = static_cast<size_t>(first);
  return std::string(what) + " differs at " + describe(first) + ": got " + describe_got(dtype, got[i]) +
         ", expected " + format_value(expected[i]) + " (tolerance " + format_value(tol) +
         " at max|expected| " + format_value(max_abs) + ", " + name_of(dtype) + "); " +
         std::to_string(count) + " of " + std::to_string(checked) + " elements differ";
}

std::string compare_bits(std::string_view what, DType dtype, std::span<const uint32_t> got,
                         std::span<const uint32_t> expected, std::span<const uint8_t> mask,
                         const Describe& describe) {
  if (got.size() != expected.size())
    return std::string(what) + ": " + std::to_string(got.size()) + " elements, expected " +
           std::to_string(expected.size());
  int64_t first = -1, count = 0, checked = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (!mask.empty() && !mask[i]) continue;
    ++checked;
    if (got[i] != expected[i]) {
      if (first < 0) first = static_cast<int64_t>(i);
      ++count;
    }
  }
  if (first < 0) return {};
  const auto i = static_cast<size_t>(first);
  return std::string(what) + " differs at " + describe(first) + ": got " + describe_got(dtype, got[i]) +
         " [" + format_bits(dtype, got[i]) + "], expected " + format_value(decode(dtype, expected[i])) +
         " [" + format_bits(dtype, expected[i]) + "] (bit-exact); " + std::to_string(count) + " of " +
         std::to_string(checked) + " elements differ";
}

}  // namespace deltakern::conformance
