// The batch mixes every benchmark measures prefill on (the CPU's bench_portable_cpu and the GPU's
// bench_gpu, native_kernel_bench): T tokens as one sequence, eight equal ones, or sixty-four of
// random lengths, the short packed batches of a server that admits many users' prompts at once.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

namespace deltakern::bench {

// n sequences of random lengths summing to T (weights uniform in [0.1, 2), the last takes the
// remainder).
inline std::vector<int64_t> mixed_lengths(int64_t T, int64_t n, std::mt19937_64& rng) {
  std::uniform_real_distribution<double> weight(0.1, 2.0);
  std::vector<double> w(static_cast<size_t>(n));
  double sum = 0;
  for (auto& v : w) sum += (v = weight(rng));
  std::vector<int64_t> lens;
  int64_t used = 0;
  for (int64_t i = 0; i + 1 < n; ++i) used += lens.emplace_back(static_cast<int64_t>(w[i] / sum * T));
  lens.push_back(T - used);
  return lens;
}

// Pattern 0: one sequence; 1: eight equal ones; 2: sixty-four of random lengths.
inline std::vector<int64_t> batch_lengths(int64_t T, int pattern, std::mt19937_64& rng) {
  if (pattern == 0) return {T};
  if (pattern == 1) return std::vector<int64_t>(8, T / 8);
  return mixed_lengths(T, 64, rng);
}

}  // namespace deltakern::bench
