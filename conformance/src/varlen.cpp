#include "varlen.hpp"

#include "compare.hpp"

#include <algorithm>
#include <numeric>

namespace deltakern::conformance {

const char* to_string(StateLayout s) {
  switch (s) {
    case StateLayout::compact:
      return "compact";
    case StateLayout::padded_lines:
      return "padded_lines";
    case StateLayout::channel_minor:
      return "channel_minor";
  }
  return "?";
}

int64_t VarlenConfig::tokens() const { return std::accumulate(lengths.begin(), lengths.end(), int64_t{0}); }
int64_t VarlenConfig::max_len() const {
  return lengths.empty() ? 0 : *std::max_element(lengths.begin(), lengths.end());
}

std::vector<NamedArg> VarlenInputs::args() {
  return {{"x", &x},
          {"weight", &weight},
          {"bias", bias ? &*bias : nullptr},
          {"conv_states", &states},
          {"query_start_loc", &query_start_loc},
          {"cache_indices", cache_indices ? &*cache_indices : nullptr},
          {"has_initial_state", has_initial_state ? &*has_initial_state : nullptr}};
}

namespace {

std::vector<int64_t> state_strides(StateLayout layout, int64_t D, int64_t S) {
  switch (layout) {
    case StateLayout::padded_lines:
      return {D * S + 5, S, 1};
    case StateLayout::channel_minor:
      return {D * S, 1, D};
    default:
      return {D * S, S, 1};
  }
}

TensorBuf make_x(DLDevice device, const VarlenConfig& c) {
  const int64_t D = c.dim, T = c.tokens();
  if (c.layout == Layout::channel_last) {
    // The K slice of a fused QKV projection (T, 3D + 2): channels contiguous, rows longer than D.
    const int64_t row = 3 * D + 2;
    return TensorBuf(device, c.x, {D, T}, {1, row}, D, 2 * D, c.byte_offset);
  }
  return TensorBuf(device, c.x, {D, T}, {T + c.row_padding, 1}, c.byte_offset ? 8 : 0, 3, c.byte_offset);
}

std::optional<TensorBuf> make_optional(bool present, DLDevice device, DType dtype,
                                       std::vector<int64_t> shape) {
  if (!present) return std::nullopt;
  return TensorBuf::compact(device, dtype, std::move(shape));
}

}  // namespace

VarlenInputs make_varlen_inputs(DLDevice device, const VarlenConfig& c, Random& rng) {
  const int64_t D = c.dim, W = c.width, S = c.state_len, B = c.batch(), lines = c.lines();
  VarlenInputs in{make_x(device, c),
                  TensorBuf::compact(device, c.weight, {D, W}),
                  make_optional(c.has_bias, device, c.bias, {D}),
                  TensorBuf(device, c.state, {lines, D, S}, state_strides(c.state_layout, D, S), 0, 4),
                  TensorBuf::compact(device, DType::i32, {B + 1}),
                  make_optional(!c.identity_indices, device, DType::i32, {B}),
                  make_optional(c.init != VarlenConfig::Init::none_tensor, device, DType::u8, {B}),
                  {},
                  {},
                  {}};
  in.qsl.assign(1, 0);
  for (int32_t len : c.lengths) in.qsl.push_back(in.qsl.back() + len);
  std::vector<int32_t> pool(static_cast<size_t>(lines));
  std::iota(pool.begin(), pool.end(), 0);
  if (!c.identity_indices) rng.shuffle(pool);
  in.indices.resize(static_cast<size_t>(B));
  in.initial.assign(static_cast<size_t>(B), 0);
  bool seen_true = false, seen_false = false;
  for (int64_t b = 0; b < B; ++b) {
    const auto ub = static_cast<size_t>(b);
    const bool padded = !c.identity_indices && ub < c.padded.size() && c.padded[ub];
    in.indices[ub] = padded ? static_cast<int32_t>(c.pad_slot_id) : pool[ub];
    if (!c.fixed_indices.empty()) in.indices[ub] = c.fixed_indices[ub];
    if (!c.fixed_initial.empty()) {
      in.initial[ub] = c.fixed_initial[ub];
    } else if (c.init == VarlenConfig::Init::mixed && !padded) {
      // Random, but both values among the live sequences.
      const bool v = !seen_true ? true : !seen_false ? false : rng.coin();
      in.initial[ub] = v ? 1 : 0;
      (v ? seen_true : seen_false) = true;
    }
  }
  std::vector<double> q(in.qsl.begin(), in.qsl.end());
  in.query_start_loc.set_values(q);
  if (in.cache_indices)
    in.cache_indices->set_values(std::vector<double>(in.indices.begin(), in.indices.end()));
  if (in.has_initial_state)
    in.has_initial_state->set_values(std::vector<double>(in.initial.begin(), in.initial.end()));
  refill_varlen_inputs(in, c, rng);
  return in;
}

void refill_varlen_inputs(VarlenInputs& in, const VarlenConfig& c, Random& rng) {
  const int64_t D = c.dim, S = c.state_len, lines = c.lines();
  in.x.set_values(rng.values(static_cast<size_t>(in.x.numel())));
  in.weight.set_values(rng.values(static_cast<size_t>(in.weight.numel()), 0.5));
  if (in.bias) in.bias->set_values(rng.values(static_cast<size_t>(D), 0.5));
  // Lines the call reads hold values; every other element is NaN garbage.
  std::vector<uint8_t> read(static_cast<size_t>(lines), 0);
  for (size_t b = 0; b < in.indices.size(); ++b)
    if (in.initial[b] && in.indices[b] != c.pad_slot_id) read[static_cast<size_t>(in.indices[b])] = 1;
  std::vector<uint32_t> bits(static_cast<size_t>(lines * D * S));
  for (size_t i = 0; i < bits.size(); ++i) {
    const size_t line = i / static_cast<size_t>(D * S);
    bits[i] = read[line] ? encode(c.state, rng.value()) : nan_garbage(c.state, i + 17 * line);
  }
  in.states.set_bits(bits);
}

reference::VarlenResult varlen_reference(const VarlenInputs& in, const VarlenConfig& c) {
  const auto x = in.x.values(), w = in.weight.values(), s = in.states.values();
  const auto bias = in.bias ? in.bias->values() : std::vector<double>{};
  reference::VarlenProblem p;
  p.dim = c.dim;
  p.tokens = c.tokens();
  p.width = c.width;
  p.state_len = c.state_len;
  p.lines = c.lines();
  p.x = x;
  p.weight = w;
  p.bias = bias;
  p.states = s;
  p.query_start_loc = in.qsl;
  if (!c.identity_indices) p.cache_indices = in.indices;
  if (c.init != VarlenConfig::Init::none_tensor) p.has_initial_state = in.initial;
  p.act = c.act;
  p.pad_slot_id = c.pad_slot_id;
  return reference::causal_conv1d_varlen(p);
}

CausalConv1dVarlenArgs varlen_args(const VarlenInputs& in, const VarlenConfig& c,
                                   std::optional<int64_t> max_seq_len, void* stream) {
  CausalConv1dVarlenArgs a;
  a.x = in.x.dl();
  a.weight = in.weight.dl();
  a.bias = in.bias ? in.bias->dl() : nullptr;
  a.conv_states = in.states.dl();
  a.query_start_loc = in.query_start_loc.dl();
  a.cache_indices = in.cache_indices ? in.cache_indices->dl() : nullptr;
  a.has_initial_state = in.has_initial_state ? in.has_initial_state->dl() : nullptr;
  a.activation = c.act == reference::Act::silu ? Activation::silu : Activation::none;
  a.pad_slot_id = c.pad_slot_id;
  a.max_seq_len = max_seq_len;
  a.validate = false;  // a validating call syncs on purpose: not what the counts below are about
  a.stream = stream;
  return a;
}

VarlenBefore capture(VarlenInputs& in) {
  const auto args = in.args();
  return {snapshot(args), in.x.bits()};
}

std::string check_varlen(const OpInfo& info, VarlenInputs& in, const VarlenConfig& c,
                         const VarlenBefore& before, const reference::VarlenResult& ref,
                         const Tensor& result) {
  const auto args = in.args();
  if (auto m = check_result(info, result, in.x, args); !m.empty()) return m;
  if (auto m = check_guards(args); !m.empty()) return m;
  if (auto m = check_unannotated(info, args, before.bytes); !m.empty()) return m;

  const int64_t D = c.dim, T = c.tokens(), S = c.state_len;
  const auto sequence_of = [&](int64_t t) {
    return static_cast<int64_t>(std::upper_bound(in.qsl.begin(), in.qsl.end(), t) - in.qsl.begin()) - 1;
  };
  const Describe out_at = [&](int64_t i) {
    const int64_t d = i / T, t = i % T, b = sequence_of(t);
    return "[" + std::to_string(d) + ", " + std::to_string(t) + "] (channel " + std::to_string(d) +
           ", sequence " + std::to_string(b) + " of length " +
           std::to_string(c.lengths[static_cast<size_t>(b)]) + ", token " +
           std::to_string(t - in.qsl[static_cast<size_t>(b)]) + ")";
  };
  std::vector<uint8_t> live(static_cast<size_t>(D * T)), dead(static_cast<size_t>(D * T));
  for (int64_t i = 0; i < D * T; ++i) {
    live[static_cast<size_t>(i)] = ref.token_live[static_cast<size_t>(i % T)];
    dead[static_cast<size_t>(i)] = !live[static_cast<size_t>(i)];
  }

  if (is_mutated(info, "x")) {
    if (auto m = check_changes_only_in(args[0], before.bytes[0], live, out_at); !m.empty())
      return m + " (a padded sequence's tokens)";
  }
  const auto got = read_bits(result.dl());
  if (auto m = compare_values("output", c.x, got, ref.out, live, out_at); !m.empty()) return m;
  if (returns_x(info)) {
    if (auto m = compare_bits("output at padded sequences (in place: x left as it was)", c.x, got,
                              before.x_bits, dead, out_at);
        !m.empty())
      return m;
  } else {
    const std::vector<double> zeros(got.size(), 0.0);
    if (auto m = compare_values("output at padded sequences (a fresh output holds zeros there)", c.x, got,
                                zeros, dead, out_at);
        !m.empty())
      return m;
  }

  const int64_t lines = c.lines(), per_line = D * S;
  std::vector<int64_t> sequence_of_line(static_cast<size_t>(lines), -1);
  for (size_t b = 0; b < in.indices.size(); ++b)
    if (in.indices[b] != c.pad_slot_id)
      sequence_of_line[static_cast<size_t>(in.indices[b])] = static_cast<int64_t>(b);
  const Describe state_at = [&](int64_t i) {
    const int64_t line = i / per_line, d = (i % per_line) / S, s = i % S;
    const int64_t b = sequence_of_line[static_cast<size_t>(line)];
    std::string who = b < 0 ? "no live sequence" : "sequence " + std::to_string(b);
    if (b >= 0)
      who += " of length " + std::to_string(c.lengths[static_cast<size_t>(b)]) + ", initial state " +
             (in.initial[static_cast<size_t>(b)] ? "yes" : "no");
    return "[" + std::to_string(line) + ", " + std::to_string(d) + ", " + std::to_string(s) + "] (line " +
           std::to_string(line) + ": " + who + ")";
  };
  std::vector<uint8_t> line_live(static_cast<size_t>(lines * per_line));
  for (size_t i = 0; i < line_live.size(); ++i)
    line_live[i] = ref.line_live[i / static_cast<size_t>(per_line)];
  if (is_mutated(info, "conv_states")) {
    if (auto m = check_changes_only_in(args[3], before.bytes[3], line_live, state_at); !m.empty()) return m;
  }
  std::vector<uint32_t> expected(ref.states.size());
  for (size_t i = 0; i < expected.size(); ++i)
    expected[i] = line_live[i] ? encode(c.state, ref.states[i]) : 0;
  return compare_bits("conv_states", c.state, in.states.bits(), expected, line_live, state_at);
}

}  // namespace deltakern::conformance
