#include "compare.hpp"

#include "poison.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>

namespace deltakern::conformance {

double output_tolerance(DType dtype, reference::Act act, const reference::Output& e) {
  constexpr double u = 0x1p-24;
  const double n = e.terms;
  double err = n * u / (1.0 - n * u) * e.magnitude;
  if (act == reference::Act::silu) {
    err = 1.1 * err + (8.0 + 2.0 * std::abs(e.pre)) * u * std::abs(e.value);
    // A bf16 output may take silu(v) = h + h tanh(h), h = v/2, with tanh.approx (one MUFU op,
    // relative error below 2^-10.98): at most 2^-11 |h tanh(h)|, here with a factor of 2.
    if (dtype == DType::bf16) {
      const double h = 0.5 * std::abs(e.pre);
      err += 0x1p-10 * h * std::min(1.0, h);
    }
  }
  return 0.5 * ulp(dtype, std::abs(e.value) + err) + err;
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

std::string compare_outputs(std::string_view what, const HostImage& got, reference::Act act,
                            std::span<const int64_t> which,
                            const std::function<reference::Output(int64_t i)>& expected,
                            const Describe& describe) {
  const DType dtype = got.dtype();
  int64_t first = -1, count = 0;
  uint32_t first_bits = 0;
  reference::Output first_expected;
  double first_tolerance = 0;
  for (const int64_t i : which) {
    const uint32_t bits = got.bits(i);
    const reference::Output e = expected(i);
    const double tol = output_tolerance(dtype, act, e);
    if (std::abs(decode(dtype, bits) - e.value) <= tol) continue;  // NaN fails here too
    if (first < 0) {
      first = i;
      first_bits = bits;
      first_expected = e;
      first_tolerance = tol;
    }
    ++count;
  }
  if (first < 0) return {};
  return std::string(what) + " differs at " + describe(first) + ": got " + describe_got(dtype, first_bits) +
         ", expected " + format_value(first_expected.value) + " (tolerance " + format_value(first_tolerance) +
         ": half an ulp of " + short_name(dtype) + " plus float32 accumulation over " +
         std::to_string(first_expected.terms) + " terms of total magnitude " +
         format_value(first_expected.magnitude) + "); " + std::to_string(count) + " of " +
         std::to_string(which.size()) + " elements compared differ";
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

std::string check_skipped(std::string_view unit, DType dtype, bool in_place, uint32_t got, uint32_t before,
                          const std::string& where) {
  const uint32_t expected = in_place ? before : encode(dtype, 0.0);
  if (got == expected || (!in_place && decode(dtype, got) == 0.0)) return {};
  return "output at a skipped " + std::string(unit) +
         (in_place ? " (in place: x left as it was)" : " (a fresh output holds zeros there)") +
         " differs at " + where + ": got " + format_value(decode(dtype, got)) + " [" +
         format_bits(dtype, got) + "], expected " + format_value(decode(dtype, expected));
}

std::string compare_states(std::string_view what, const HostImage& states, std::span<const double> expected,
                           const std::function<bool(int64_t)>& live, const Describe& describe) {
  const DType dtype = states.dtype();
  for (int64_t i = 0; i < states.numel(); ++i) {
    if (!live(i)) continue;
    const uint32_t e = encode(dtype, expected[static_cast<size_t>(i)]);
    if (const uint32_t g = states.bits(i); g != e)
      return std::string(what) + " differs at " + describe(i) + ": got " + format_value(decode(dtype, g)) +
             " [" + format_bits(dtype, g) + "], expected " + format_value(decode(dtype, e)) + " [" +
             format_bits(dtype, e) + "] (bit-exact)";
  }
  return {};
}

std::string compare_images(std::string_view what, const HostImage& got, const HostImage& expected,
                           const Describe& describe) {
  if (got.shape() != expected.shape()) return std::string(what) + ": the shapes differ";
  const DType dtype = got.dtype();
  // Same layout (an in-place result and its repeat, two compact fresh results): the bytes
  // the elements span are compared at once, element by element only to name the first.
  if (got.strides() == expected.strides() && got.offset_of(0) == expected.offset_of(0) &&
      got.byte_size() == expected.byte_size() &&
      (got.byte_size() == 0 || std::memcmp(got.data(), expected.data(), got.byte_size()) == 0))
    return {};
  int64_t first = -1, count = 0;
  for (int64_t i = 0; i < got.numel(); ++i) {
    if (got.bits(i) == expected.bits(i)) continue;
    if (first < 0) first = i;
    ++count;
  }
  if (first < 0) return {};
  const uint32_t g = got.bits(first), e = expected.bits(first);
  return std::string(what) + " differs at " + describe(first) + ": got " + describe_got(dtype, g) + " [" +
         format_bits(dtype, g) + "], expected " + format_value(decode(dtype, e)) + " [" +
         format_bits(dtype, e) + "] (bit-exact); " + std::to_string(count) + " of " +
         std::to_string(got.numel()) + " elements differ";
}

}  // namespace deltakern::conformance
