#include "update.hpp"

#include "compare.hpp"

#include <numeric>

namespace deltakern::conformance {

std::vector<NamedArg> UpdateInputs::args() {
  return {{"x", &x},
          {"conv_state", &states},
          {"weight", &weight},
          {"bias", bias ? &*bias : nullptr},
          {"conv_state_indices", state_indices ? &*state_indices : nullptr},
          {"cache_seqlens", cache_seqlens ? &*cache_seqlens : nullptr}};
}

namespace {

TensorBuf make_x(DLDevice device, const UpdateConfig& c) {
  const int64_t B = c.batch, D = c.dim, Tq = c.tokens;
  if (!c.three_d) return TensorBuf(device, c.x, {B, D}, {D + c.row_padding, 1}, 0, 2);
  if (c.layout == Layout::channel_last) {
    const int64_t row = D + 3;  // channels contiguous, token rows longer than D
    return TensorBuf(device, c.x, {B, D, Tq}, {Tq * row, 1, row}, 0, 2);
  }
  return TensorBuf(device, c.x, {B, D, Tq}, {D * Tq, Tq, 1}, 0, 2);
}

std::vector<int64_t> state_strides(StateLayout layout, int64_t D, int64_t S) {
  switch (layout) {
    case StateLayout::padded_lines:
      return {D * S + 3, S, 1};
    case StateLayout::channel_minor:
      return {D * S, 1, D};
    default:
      return {D * S, S, 1};
  }
}

std::optional<TensorBuf> make_optional(bool present, DLDevice device, DType dtype,
                                       std::vector<int64_t> shape) {
  if (!present) return std::nullopt;
  return TensorBuf::compact(device, dtype, std::move(shape));
}

}  // namespace

UpdateInputs make_update_inputs(DLDevice device, const UpdateConfig& c, Random& rng) {
  const int64_t B = c.batch, D = c.dim, S = c.state_len, lines = c.lines();
  UpdateInputs in{make_x(device, c),
                  TensorBuf(device, c.state, {lines, D, S}, state_strides(c.state_layout, D, S), 0, 3),
                  TensorBuf::compact(device, c.weight, {D, c.width}),
                  make_optional(c.has_bias, device, c.bias, {D}),
                  make_optional(!c.identity_indices, device, DType::i32, {B}),
                  make_optional(c.circular, device, DType::i32, {B}),
                  {},
                  {}};
  std::vector<int32_t> pool(static_cast<size_t>(lines));
  std::iota(pool.begin(), pool.end(), 0);
  if (!c.identity_indices) rng.shuffle(pool);
  for (int64_t b = 0; b < B; ++b) {
    const auto ub = static_cast<size_t>(b);
    const bool padded = !c.identity_indices && ub < c.padded.size() && c.padded[ub];
    in.indices.push_back(!c.fixed_indices.empty() ? c.fixed_indices[ub]
                         : padded                 ? static_cast<int32_t>(c.pad_slot_id)
                                                  : pool[ub]);
    // Circular positions: below W-1 (the history wraps), within one lap, and several laps on.
    if (c.circular) in.seqlens.push_back(static_cast<int32_t>(b == 0 ? 0 : rng.integer(0, 4 * S + 3)));
  }
  if (in.state_indices)
    in.state_indices->set_values(std::vector<double>(in.indices.begin(), in.indices.end()));
  if (in.cache_seqlens)
    in.cache_seqlens->set_values(std::vector<double>(in.seqlens.begin(), in.seqlens.end()));
  refill_update_inputs(in, c, rng);
  return in;
}

void refill_update_inputs(UpdateInputs& in, const UpdateConfig& c, Random& rng) {
  const int64_t D = c.dim, S = c.state_len, lines = c.lines();
  in.x.set_values(rng.values(static_cast<size_t>(in.x.numel())));
  in.weight.set_values(rng.values(static_cast<size_t>(in.weight.numel()), 0.5));
  if (in.bias) in.bias->set_values(rng.values(static_cast<size_t>(D), 0.5));
  std::vector<uint8_t> read(static_cast<size_t>(lines), 0);
  for (int32_t line : in.indices)
    if (line != c.pad_slot_id) read[static_cast<size_t>(line)] = 1;
  std::vector<uint32_t> bits(static_cast<size_t>(lines * D * S));
  for (size_t i = 0; i < bits.size(); ++i) {
    const size_t line = i / static_cast<size_t>(D * S);
    bits[i] = read[line] ? encode(c.state, rng.value()) : nan_garbage(c.state, i + 31 * line);
  }
  in.states.set_bits(bits);
}

reference::UpdateResult update_reference(const UpdateInputs& in, const UpdateConfig& c) {
  const auto x = in.x.values(), s = in.states.values(), w = in.weight.values();
  const auto bias = in.bias ? in.bias->values() : std::vector<double>{};
  reference::UpdateProblem p;
  p.batch = c.batch;
  p.dim = c.dim;
  p.tokens = c.tokens;
  p.width = c.width;
  p.state_len = c.state_len;
  p.lines = c.lines();
  p.x = x;
  p.states = s;
  p.weight = w;
  p.bias = bias;
  if (!c.identity_indices) p.state_indices = in.indices;
  if (c.circular) p.cache_seqlens = in.seqlens;
  p.act = c.act;
  p.pad_slot_id = c.pad_slot_id;
  return reference::causal_conv1d_update(p);
}

CausalConv1dUpdateArgs update_args(const UpdateInputs& in, const UpdateConfig& c, void* stream) {
  CausalConv1dUpdateArgs a;
  a.x = in.x.dl();
  a.conv_state = in.states.dl();
  a.weight = in.weight.dl();
  a.bias = in.bias ? in.bias->dl() : nullptr;
  a.conv_state_indices = in.state_indices ? in.state_indices->dl() : nullptr;
  a.cache_seqlens = in.cache_seqlens ? in.cache_seqlens->dl() : nullptr;
  a.activation = c.act == reference::Act::silu ? Activation::silu : Activation::none;
  a.pad_slot_id = c.pad_slot_id;
  a.validate = false;
  a.stream = stream;
  return a;
}

UpdateBefore capture(UpdateInputs& in) {
  const auto args = in.args();
  return {snapshot(args), in.x.bits()};
}

std::string check_update(const OpInfo& info, UpdateInputs& in, const UpdateConfig& c,
                         const UpdateBefore& before, const reference::UpdateResult& ref,
                         const Tensor& result) {
  const auto args = in.args();
  if (auto m = check_result(info, result, in.x, args); !m.empty()) return m;
  if (auto m = check_guards(args); !m.empty()) return m;
  if (auto m = check_unannotated(info, args, before.bytes); !m.empty()) return m;

  const int64_t B = c.batch, D = c.dim, Tq = c.tokens, S = c.state_len;
  const Describe out_at = [&](int64_t i) {
    const int64_t b = i / (D * Tq), d = (i / Tq) % D, t = i % Tq;
    std::string s = "[" + std::to_string(b) + ", " + std::to_string(d);
    if (c.three_d) s += ", " + std::to_string(t);
    s += "] (row " + std::to_string(b) + ", channel " + std::to_string(d) + ", token " + std::to_string(t);
    if (c.circular) s += ", cache_seqlens " + std::to_string(in.seqlens[static_cast<size_t>(b)]);
    return s + ")";
  };
  std::vector<uint8_t> live(static_cast<size_t>(B * D * Tq)), dead(live.size());
  for (size_t i = 0; i < live.size(); ++i) {
    live[i] = ref.row_live[i / static_cast<size_t>(D * Tq)];
    dead[i] = !live[i];
  }
  if (is_mutated(info, "x")) {
    if (auto m = check_changes_only_in(args[0], before.bytes[0], live, out_at); !m.empty())
      return m + " (a padded row)";
  }
  const auto got = read_bits(result.dl());
  if (auto m = compare_values("output", c.x, got, ref.out, live, out_at); !m.empty()) return m;
  if (returns_x(info)) {
    if (auto m = compare_bits("output at padded rows (in place: x left as it was)", c.x, got, before.x_bits,
                              dead, out_at);
        !m.empty())
      return m;
  } else {
    const std::vector<double> zeros(got.size(), 0.0);
    if (auto m = compare_values("output at padded rows (a fresh output holds zeros there)", c.x, got, zeros,
                                dead, out_at);
        !m.empty())
      return m;
  }

  const int64_t lines = c.lines(), per_line = D * S;
  const Describe state_at = [&](int64_t i) {
    const int64_t line = i / per_line, d = (i % per_line) / S, s = i % S;
    return "[" + std::to_string(line) + ", " + std::to_string(d) + ", " + std::to_string(s) + "] (line " +
           std::to_string(line) + (ref.line_live[static_cast<size_t>(line)] ? ", live" : ", not live") + ")";
  };
  std::vector<uint8_t> line_live(static_cast<size_t>(lines * per_line));
  for (size_t i = 0; i < line_live.size(); ++i)
    line_live[i] = ref.line_live[i / static_cast<size_t>(per_line)];
  if (is_mutated(info, "conv_state")) {
    if (auto m = check_changes_only_in(args[1], before.bytes[1], line_live, state_at); !m.empty()) return m;
  }
  std::vector<uint32_t> expected(ref.states.size());
  for (size_t i = 0; i < expected.size(); ++i)
    expected[i] = line_live[i] ? encode(c.state, ref.states[i]) : 0;
  return compare_bits("conv_state", c.state, in.states.bits(), expected, line_live, state_at);
}

}  // namespace deltakern::conformance
