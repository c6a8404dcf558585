#include "sample.hpp"

#include "random.hpp"

#include <algorithm>
#include <string>

namespace deltakern::conformance {

namespace {

constexpr int64_t kRandomElements = int64_t{1} << 20;
constexpr int64_t kBoundaryElements = int64_t{1} << 22;

// Distinct indices in [0, n): the edges, the middle, and `extra` random ones.
std::vector<int64_t> picks(int64_t n, int extra, Random& rng) {
  std::vector<int64_t> v{0, 1, n / 2, n - 2, n - 1};
  for (int i = 0; i < extra; ++i) v.push_back(rng.integer(0, n - 1));
  v.erase(std::remove_if(v.begin(), v.end(), [n](int64_t i) { return i < 0 || i >= n; }), v.end());
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
  return v;
}

void sort_unique(std::vector<int64_t>& v) {
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
}

}  // namespace

std::vector<int64_t> varlen_sample(const VarlenConfig& c, std::span<const int32_t> qsl,
                                   const reference::Varlen& ref, std::string_view seed) {
  const int64_t D = c.dim, T = c.tokens();
  const std::vector<uint8_t> live = ref.live_tokens();
  std::vector<int64_t> out;
  if (D * T <= kDenseElements) {
    for (int64_t d = 0; d < D; ++d)
      for (int64_t t = 0; t < T; ++t)
        if (live[static_cast<size_t>(t)]) out.push_back(d * T + t);
    return out;
  }
  Random rng(std::string(seed) + "#sample");
  for (const int64_t d : picks(D, 6, rng))
    for (int64_t t = 0; t < T; ++t)
      if (live[static_cast<size_t>(t)]) out.push_back(d * T + t);
  // Each live sequence's first and last W + S tokens, on every channel while that stays within
  // kBoundaryElements, else on a random share of them.
  std::vector<int64_t> edge_tokens;
  const int64_t edge = c.width + c.state_len;
  for (int64_t b = 0; b + 1 < static_cast<int64_t>(qsl.size()); ++b) {
    if (!ref.sequence_live(b)) continue;
    const int64_t begin = qsl[static_cast<size_t>(b)], end = qsl[static_cast<size_t>(b) + 1];
    for (int64_t t = begin; t < std::min(end, begin + edge); ++t) edge_tokens.push_back(t);
    for (int64_t t = std::max(begin + edge, end - edge); t < end; ++t) edge_tokens.push_back(t);
  }
  const auto per_channel = static_cast<int64_t>(edge_tokens.size());
  if (per_channel * D <= kBoundaryElements) {
    for (int64_t d = 0; d < D; ++d)
      for (const int64_t t : edge_tokens) out.push_back(d * T + t);
  } else {
    for (int64_t k = 0; k < kBoundaryElements; ++k)
      out.push_back(rng.integer(0, D - 1) * T +
                    edge_tokens[static_cast<size_t>(rng.integer(0, per_channel - 1))]);
  }
  for (int64_t k = 0; k < kRandomElements; ++k) {
    const int64_t i = rng.integer(0, D * T - 1);
    if (live[static_cast<size_t>(i % T)]) out.push_back(i);
  }
  sort_unique(out);
  return out;
}

std::vector<int64_t> update_sample(const UpdateConfig& c, const reference::Update& ref,
                                   std::string_view seed) {
  const int64_t B = c.batch, D = c.dim, Tq = c.tokens, n = B * D * Tq;
  std::vector<int64_t> out;
  if (n <= kDenseElements) {
    for (int64_t i = 0; i < n; ++i)
      if (ref.row_live(i / (D * Tq))) out.push_back(i);
    return out;
  }
  Random rng(std::string(seed) + "#sample");
  for (const int64_t b : picks(B, 6, rng))
    if (ref.row_live(b))
      for (int64_t i = 0; i < D * Tq; ++i) out.push_back(b * D * Tq + i);
  for (const int64_t d : picks(D, 6, rng))
    for (int64_t b = 0; b < B; ++b)
      if (ref.row_live(b))
        for (int64_t t = 0; t < Tq; ++t) out.push_back((b * D + d) * Tq + t);
  for (int64_t k = 0; k < kRandomElements; ++k) {
    const int64_t i = rng.integer(0, n - 1);
    if (ref.row_live(i / (D * Tq))) out.push_back(i);
  }
  sort_unique(out);
  return out;
}

}  // namespace deltakern::conformance
