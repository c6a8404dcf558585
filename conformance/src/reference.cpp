#include "reference.hpp"

#include <cmath>
#include <stdexcept>
#include <string>

namespace deltakern::conformance::reference {

namespace {

double activate(Act act, double v) { return act == Act::silu ? v / (1.0 + std::exp(-v)) : v; }

// Cache line of sequence b, or -1 when it is padded (skipped).
int64_t line_of(std::span<const int32_t> indices, int64_t b, int64_t pad_slot_id, int64_t lines) {
  const int64_t line = indices.empty() ? b : indices[static_cast<size_t>(b)];
  if (line == pad_slot_id) return -1;
  if (line < 0 || line >= lines)
    throw std::logic_error("reference: cache index " + std::to_string(line) + " out of range");
  return line;
}

}  // namespace

VarlenResult causal_conv1d_varlen(const VarlenProblem& p) {
  const int64_t D = p.dim, T = p.tokens, W = p.width, S = p.state_len;
  const int64_t batch = static_cast<int64_t>(p.query_start_loc.size()) - 1;
  VarlenResult r;
  r.out.assign(static_cast<size_t>(D * T), 0.0);
  r.token_live.assign(static_cast<size_t>(T), 0);
  r.states.assign(p.states.begin(), p.states.end());
  r.line_live.assign(static_cast<size_t>(p.lines), 0);
  for (int64_t b = 0; b < batch; ++b) {
    const int64_t begin = p.query_start_loc[static_cast<size_t>(b)],
                  end = p.query_start_loc[static_cast<size_t>(b) + 1];
    const int64_t L = end - begin;
    const int64_t line = line_of(p.cache_indices, b, p.pad_slot_id, p.lines);
    if (line < 0) continue;
    const bool initial = !p.has_initial_state.empty() && p.has_initial_state[static_cast<size_t>(b)] != 0;
    r.line_live[static_cast<size_t>(line)] = 1;
    for (int64_t t = begin; t < end; ++t) r.token_live[static_cast<size_t>(t)] = 1;
    for (int64_t d = 0; d < D; ++d) {
      // e = concat(prior, x_b): S + L entries.
      std::vector<double> e(static_cast<size_t>(S + L));
      for (int64_t i = 0; i < S; ++i)
        e[static_cast<size_t>(i)] = initial ? p.states[static_cast<size_t>((line * D + d) * S + i)] : 0.0;
      for (int64_t t = 0; t < L; ++t)
        e[static_cast<size_t>(S + t)] = p.x[static_cast<size_t>(d * T + begin + t)];
      for (int64_t t = 0; t < L; ++t) {
        double acc = p.bias.empty() ? 0.0 : p.bias[static_cast<size_t>(d)];
        for (int64_t k = 0; k < W; ++k)
          acc += p.weight[static_cast<size_t>(d * W + k)] * e[static_cast<size_t>(S + t - (W - 1) + k)];
        r.out[static_cast<size_t>(d * T + begin + t)] = activate(p.act, acc);
      }
      for (int64_t i = 0; i < S; ++i)
        r.states[static_cast<size_t>((line * D + d) * S + i)] = e[static_cast<size_t>(L + i)];
    }
  }
  return r;
}

UpdateResult causal_conv1d_update(const UpdateProblem& p) {
  const int64_t B = p.batch, D = p.dim, Tq = p.tokens, W = p.width, S = p.state_len;
  UpdateResult r;
  r.out.assign(static_cast<size_t>(B * D * Tq), 0.0);
  r.row_live.assign(static_cast<size_t>(B), 0);
  r.states.assign(p.states.begin(), p.states.end());
  r.line_live.assign(static_cast<size_t>(p.lines), 0);
  for (int64_t b = 0; b < B; ++b) {
    const int64_t line = line_of(p.state_indices, b, p.pad_slot_id, p.lines);
    if (line < 0) continue;
    r.row_live[static_cast<size_t>(b)] = 1;
    r.line_live[static_cast<size_t>(line)] = 1;
    for (int64_t d = 0; d < D; ++d) {
      double* state = &r.states[static_cast<size_t>((line * D + d) * S)];
      const double* x = &p.x[static_cast<size_t>((b * D + d) * Tq)];
      const double bias = p.bias.empty() ? 0.0 : p.bias[static_cast<size_t>(d)];
      const double* w = &p.weight[static_cast<size_t>(d * W)];
      double* out = &r.out[static_cast<size_t>((b * D + d) * Tq)];
      if (p.cache_seqlens.empty()) {
        // Shift: e = concat(state, x_b); the new state is e's last S entries.
        std::vector<double> e(state, state + S);
        e.insert(e.end(), x, x + Tq);
        for (int64_t t = 0; t < Tq; ++t) {
          double acc = bias;
          for (int64_t k = 0; k < W; ++k) acc += w[k] * e[static_cast<size_t>(S + t - (W - 1) + k)];
          out[t] = activate(p.act, acc);
        }
        for (int64_t i = 0; i < S; ++i) state[i] = e[static_cast<size_t>(Tq + i)];
      } else {
        // Circular: token t reads its W-1 history at (n + t - (W-1) + j) mod S, then is
        // written at (n + t) mod S.
        const int64_t n = p.cache_seqlens[static_cast<size_t>(b)];
        const auto wrap = [S](int64_t i) { return ((i % S) + S) % S; };
        for (int64_t t = 0; t < Tq; ++t) {
          double acc = bias;
          for (int64_t j = 0; j < W - 1; ++j) acc += w[j] * state[wrap(n + t - (W - 1) + j)];
          acc += w[W - 1] * x[t];
          out[t] = activate(p.act, acc);
          state[wrap(n + t)] = x[t];
        }
      }
    }
  }
  return r;
}

}  // namespace deltakern::conformance::reference
