// Case inputs: seeded from the case's name, so a failure reproduces, and fresh for every
// case, so no case sees what another left behind. Values are never zero: a zero input
// hides a backend that skips it.
#pragma once

#include "dtype.hpp"

#include <algorithm>
#include <cstdint>
#include <random>
#include <string_view>
#include <vector>

namespace deltakern::conformance {

class Random {
 public:
  explicit Random(std::string_view seed_text) {
    uint64_t h = 1469598103934665603ull;  // FNV-1a
    for (char c : seed_text) h = (h ^ static_cast<unsigned char>(c)) * 1099511628211ull;
    engine_.seed(h);
  }
  // Uniform magnitude in [0.1, 1) times `scale`, random sign.
  double value(double scale = 1.0) {
    const double m = std::uniform_real_distribution<double>(0.1, 1.0)(engine_);
    return (coin() ? m : -m) * scale;
  }
  std::vector<double> values(size_t n, double scale = 1.0) {
    std::vector<double> v(n);
    for (auto& x : v) x = value(scale);
    return v;
  }
  int64_t integer(int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(engine_); }
  bool coin(double p = 0.5) { return std::bernoulli_distribution(p)(engine_); }
  template <class T>
  void shuffle(std::vector<T>& v) {
    std::shuffle(v.begin(), v.end(), engine_);
  }
  uint64_t bits() { return engine_(); }

 private:
  std::mt19937_64 engine_;
};

// The same distribution as Random::value for tensors of engine size (hundreds of millions of
// elements): splitmix64, a few nanoseconds a value, seeded from a Random so it stays reproducible.
class BulkValues {
 public:
  explicit BulkValues(Random& seed) : state_(seed.bits()) {}
  double value(double scale = 1.0) {
    const uint64_t r = next();
    const double u = static_cast<double>(r >> 11) * 0x1p-53;
    const double m = 0.1 + 0.9 * u;
    return ((r & 1u) != 0 ? m : -m) * scale;
  }

 private:
  uint64_t next() {
    uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  uint64_t state_;
};

// NaN patterns with varying payloads and signs: garbage a backend must neither read nor
// overwrite, distinguishable bit for bit from anything it could write.
inline uint32_t nan_garbage(DType t, uint64_t i) {
  const auto salt = static_cast<uint32_t>((i * 2654435761u) >> 7);
  const uint32_t sign = (i & 1u) != 0 ? 1u : 0u;
  switch (t) {
    case DType::f32:
      return (sign << 31) | 0x7FC00000u | (salt & 0x3FFFFFu) | 1u;
    case DType::f16:
      return (sign << 15) | 0x7E00u | (salt & 0x1FFu) | 1u;
    case DType::bf16:
      return (sign << 15) | 0x7FC0u | (salt & 0x3Fu) | 1u;
    default:
      return 0xA5A5A5A5u & ((1ull << (8 * size_of(t))) - 1);
  }
}

}  // namespace deltakern::conformance
