#include "reference.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <utility>

namespace deltakern::conformance::reference {

namespace {

double activate(Act act, double v) { return act == Act::silu ? v / (1.0 + std::exp(-v)) : v; }

// Cache line of row b, or -1 when it is skipped (padded, or out of range).
int64_t line_of(std::span<const int32_t> indices, int64_t b, int64_t pad_slot_id, int64_t lines) {
  const int64_t line = indices.empty() ? b : indices[static_cast<size_t>(b)];
  if (line == pad_slot_id || line < 0 || line >= lines) return -1;
  return line;
}

// bias + sum_k weight[k] * e(k), with the magnitudes a float32 evaluation's error depends on.
template <class Entry>
Output convolve(const std::function<double(int64_t d, int64_t k)>& weight,
                const std::function<double(int64_t)>& bias, int64_t d, int64_t width, Act act, Entry&& e) {
  Output o;
  if (bias) {
    o.pre = bias(d);
    o.magnitude = std::abs(o.pre);
    o.terms = 1;
  }
  for (int64_t k = 0; k < width; ++k) {
    const double term = weight(d, k) * e(k);
    o.pre += term;
    o.magnitude += std::abs(term);
    ++o.terms;
  }
  o.value = activate(act, o.pre);
  return o;
}

// The pool as the call finds it, [lines][dim][state_len].
std::vector<double> pool_of(const std::function<double(int64_t, int64_t, int64_t)>& states, int64_t lines,
                            int64_t D, int64_t S) {
  std::vector<double> pool(static_cast<size_t>(lines * D * S));
  for (int64_t line = 0; line < lines; ++line)
    for (int64_t d = 0; d < D; ++d)
      for (int64_t s = 0; s < S; ++s) pool[static_cast<size_t>((line * D + d) * S + s)] = states(line, d, s);
  return pool;
}

}  // namespace

Varlen::Varlen(VarlenProblem p) : p_(std::move(p)) {
  const int64_t B = batch(), D = p_.dim, S = p_.state_len;
  line_.resize(static_cast<size_t>(B));
  live_.resize(static_cast<size_t>(B));
  initial_.resize(static_cast<size_t>(B));
  line_live_.assign(static_cast<size_t>(p_.lines), 0);
  states_ = pool_of(p_.states, p_.lines, D, S);
  for (int64_t b = 0; b < B; ++b) {
    const auto ub = static_cast<size_t>(b);
    line_[ub] = line_of(p_.cache_indices, b, p_.pad_slot_id, p_.lines);
    live_[ub] = line_[ub] >= 0;
    initial_[ub] = !p_.has_initial_state.empty() && p_.has_initial_state[ub] != 0;
  }
  // New state = the last S entries of concat(prior, x_b): for L < S the old state shifts left.
  for (int64_t b = 0; b < B; ++b) {
    const auto ub = static_cast<size_t>(b);
    if (!live_[ub]) continue;
    const int64_t line = line_[ub], begin = p_.query_start_loc[ub], L = p_.query_start_loc[ub + 1] - begin;
    line_live_[static_cast<size_t>(line)] = 1;
    for (int64_t d = 0; d < D; ++d)
      for (int64_t i = 0; i < S; ++i)
        states_[static_cast<size_t>((line * D + d) * S + i)] =
            L + i < S ? prior(b, d, L + i) : p_.x(d, begin + L + i - S);
  }
}

double Varlen::prior(int64_t b, int64_t d, int64_t i) const {
  const auto ub = static_cast<size_t>(b);
  return initial_[ub] ? p_.states(line_[ub], d, i) : 0.0;
}

int64_t Varlen::sequence_of(int64_t t) const {
  const auto& q = p_.query_start_loc;
  // The last b with q[b] <= t < q[b+1]: empty sequences before it share its start.
  const auto it = std::upper_bound(q.begin(), q.end(), static_cast<int32_t>(t));
  return static_cast<int64_t>(it - q.begin()) - 1;
}

std::vector<uint8_t> Varlen::live_tokens() const {
  std::vector<uint8_t> live(static_cast<size_t>(p_.tokens), 0);
  for (int64_t b = 0; b < batch(); ++b)
    if (sequence_live(b))
      std::fill(live.begin() + p_.query_start_loc[static_cast<size_t>(b)],
                live.begin() + p_.query_start_loc[static_cast<size_t>(b) + 1], 1);
  return live;
}

Output Varlen::out(int64_t d, int64_t t) const {
  const int64_t b = sequence_of(t), S = p_.state_len, W = p_.width;
  const int64_t begin = p_.query_start_loc[static_cast<size_t>(b)], local = t - begin;
  // e = concat(prior, x_b); out[t] reads e[S + t - (W-1) + k].
  return convolve(p_.weight, p_.bias, d, W, p_.act, [&](int64_t k) {
    const int64_t j = S + local - (W - 1) + k;
    return j < S ? prior(b, d, j) : p_.x(d, begin + j - S);
  });
}

Update::Update(UpdateProblem p) : p_(std::move(p)) {
  const int64_t B = p_.batch, D = p_.dim, S = p_.state_len, Tq = p_.tokens;
  line_.resize(static_cast<size_t>(B));
  line_live_.assign(static_cast<size_t>(p_.lines), 0);
  states_ = pool_of(p_.states, p_.lines, D, S);
  for (int64_t b = 0; b < B; ++b) {
    const int64_t line = line_of(p_.state_indices, b, p_.pad_slot_id, p_.lines);
    line_[static_cast<size_t>(b)] = line;
    if (line < 0) continue;
    line_live_[static_cast<size_t>(line)] = 1;
    for (int64_t d = 0; d < D; ++d) {
      double* state = &states_[static_cast<size_t>((line * D + d) * S)];
      if (p_.cache_seqlens.empty()) {
        // Shift: the new state is the last S entries of concat(state, x_b).
        std::vector<double> e(state, state + S);
        for (int64_t t = 0; t < Tq; ++t) e.push_back(p_.x(b, d, t));
        for (int64_t i = 0; i < S; ++i) state[i] = e[static_cast<size_t>(Tq + i)];
      } else {
        // Circular: token t is written at (n + t) mod S.
        const int64_t n = p_.cache_seqlens[static_cast<size_t>(b)];
        for (int64_t t = 0; t < Tq; ++t) state[(((n + t) % S) + S) % S] = p_.x(b, d, t);
      }
    }
  }
}

Output Update::out(int64_t b, int64_t d, int64_t t) const {
  const int64_t S = p_.state_len, W = p_.width, line = line_[static_cast<size_t>(b)];
  if (line < 0) return {};
  if (p_.cache_seqlens.empty()) {
    // e = concat(state, x_b); out[t] reads e[S + t - (W-1) + k].
    return convolve(p_.weight, p_.bias, d, W, p_.act, [&](int64_t k) {
      const int64_t j = S + t - (W - 1) + k;
      return j < S ? p_.states(line, d, j) : p_.x(b, d, j - S);
    });
  }
  // Circular: token t reads its W-1 history entries at (n + t - (W-1) + j) mod S, after the
  // tokens before it in this call were written at (n + t') mod S.
  const int64_t n = p_.cache_seqlens[static_cast<size_t>(b)];
  const auto wrap = [S](int64_t i) { return ((i % S) + S) % S; };
  std::vector<double> ring(static_cast<size_t>(S));
  for (int64_t s = 0; s < S; ++s) ring[static_cast<size_t>(s)] = p_.states(line, d, s);
  for (int64_t u = 0; u < t; ++u) ring[static_cast<size_t>(wrap(n + u))] = p_.x(b, d, u);
  return convolve(p_.weight, p_.bias, d, W, p_.act, [&](int64_t k) {
    return k < W - 1 ? ring[static_cast<size_t>(wrap(n + t - (W - 1) + k))] : p_.x(b, d, t);
  });
}

}  // namespace deltakern::conformance::reference
