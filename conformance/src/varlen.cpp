#include "varlen.hpp"

#include "compare.hpp"
#include "poison.hpp"
#include "sample.hpp"

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

int64_t VarlenConfig::tokens() const { return std::accumulate(lengths.begin(), lengths.end(), int64_t{0}); }
int64_t VarlenConfig::max_len() const {
  return lengths.empty() ? 0 : *std::max_element(lengths.begin(), lengths.end());
}

std::vector<NamedArg> VarlenInputs::args() {
  std::vector<NamedArg> named{{"x", &x},
                              {"weight", &weight},
                              {"bias", bias ? &*bias : nullptr},
                              {"conv_states", &states},
                              {"query_start_loc", &query_start_loc},
                              {"cache_indices", cache_indices ? &*cache_indices : nullptr},
                              {"has_initial_state", has_initial_state ? &*has_initial_state : nullptr}};
  if (out) named.push_back({"out", &*out});
  return named;
}

namespace {

TensorBuf make_x(DLDevice device, const VarlenConfig& c) {
  const int64_t D = c.dim, T = c.tokens();
  if (c.layout == Layout::channel_last) {
    // A slice of a fused projection (T, row): channels contiguous, rows longer than D. Small
    // cases take the K slice of QKV (row 3D + 2); engine-sized ones a narrower row.
    const int64_t row = D <= 64 ? 3 * D + 2 : D + 40;
    return TensorBuf(device, c.x, {D, T}, {1, row}, D <= 64 ? D : 24, row - D, c.byte_offset);
  }
  return TensorBuf(device, c.x, {D, T}, {T + c.row_padding, 1}, c.byte_offset ? 8 : 0, 3, c.byte_offset);
}

// The out-variant's out: x's layout with a row pitch of its own (slack between rows that must stay
// untouched), element 0 off 16-byte alignment with byte_offset, so that a kernel vectorizing on
// x's geometry alone writes it wrong.
TensorBuf make_out(DLDevice device, const VarlenConfig& c) {
  const int64_t D = c.dim, T = c.tokens(), offset = c.byte_offset ? 1 : 0;
  if (c.layout == Layout::channel_last)
    return TensorBuf(device, c.x, {D, T}, {1, D + 8}, offset, 8, c.byte_offset);
  return TensorBuf(device, c.x, {D, T}, {T + 5, 1}, offset, 5, c.byte_offset);
}

TensorBuf make_states(DLDevice device, const VarlenConfig& c) {
  const int64_t D = c.dim, S = c.state_len;
  const auto strides = state_strides(c.state_layout, D, S);
  const int64_t margin = c.margin_lines * strides[0];
  return TensorBuf(device, c.state, {c.lines(), D, S}, strides, margin, 4 + margin);
}

bool skipped(const VarlenConfig& c, const VarlenInputs& in, size_t b) {
  const int32_t line = in.indices[b];
  return line == c.pad_slot_id || line < 0 || line >= c.lines();
}

}  // namespace

VarlenInputs make_varlen_inputs(DLDevice device, const VarlenConfig& c, Random& rng) {
  const int64_t D = c.dim, W = c.width, B = c.batch(), lines = c.lines();
  VarlenInputs in{make_x(device, c),
                  TensorBuf::compact(device, c.weight, {D, W}),
                  TensorBuf::compact_if(c.has_bias, device, c.bias, {D}),
                  make_states(device, c),
                  TensorBuf::compact(device, DType::i32, {B + 1}),
                  TensorBuf::compact_if(!c.identity_indices, device, DType::i32, {B}),
                  TensorBuf::compact_if(c.init != VarlenConfig::Init::none_tensor, device, DType::u8, {B}),
                  {},
                  {},
                  {},
                  std::nullopt};
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
    if (!c.out_of_range.empty() && c.out_of_range[ub] != 0) in.indices[ub] = c.out_of_range[ub];
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
  if (c.out_variant) in.out.emplace(make_out(device, c));
  refill_varlen_inputs(in, c, rng);
  return in;
}

void refill_varlen_inputs(VarlenInputs& in, const VarlenConfig& c, Random& rng) {
  const int64_t D = c.dim, S = c.state_len, lines = c.lines();
  BulkValues bulk(rng);
  in.x.fill([&](int64_t) { return encode(c.x, bulk.value()); });
  in.weight.fill([&](int64_t) { return encode(c.weight, bulk.value(0.5)); });
  if (in.bias) in.bias->fill([&](int64_t) { return encode(c.bias, bulk.value(0.5)); });
  // Lines the call reads hold values; every other element is NaN garbage.
  std::vector<uint8_t> read(static_cast<size_t>(lines), 0);
  for (size_t b = 0; b < in.indices.size(); ++b)
    if (in.initial[b] && !skipped(c, in, b)) read[static_cast<size_t>(in.indices[b])] = 1;
  in.states.fill([&](int64_t i) {
    const auto line = static_cast<size_t>(i / (D * S));
    return read[line] ? encode(c.state, bulk.value())
                      : nan_garbage(c.state, static_cast<uint64_t>(i) + 17 * line);
  });
  if (in.out) poison_out(*in.out);
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

VarlenBefore capture(VarlenInputs& in, const VarlenConfig& c) {
  VarlenBefore b;
  b.bytes = snapshot(in.args());
  b.x = in.x.view_of(b.bytes[0]);
  b.weight = in.weight.view_of(b.bytes[1]);
  if (in.bias) b.bias = in.bias->view_of(b.bytes[2]);
  b.states = in.states.view_of(b.bytes[3]);
  reference::VarlenProblem p;
  p.dim = c.dim;
  p.tokens = c.tokens();
  p.width = c.width;
  p.state_len = c.state_len;
  p.lines = c.lines();
  const HostImage* x = &b.x;
  const HostImage* w = &b.weight;
  const HostImage* s = &b.states;
  p.x = [x](int64_t d, int64_t t) { return x->value_at(d, t); };
  p.weight = [w](int64_t d, int64_t k) { return w->value_at(d, k); };
  if (b.bias) {
    const HostImage* bias = &*b.bias;
    p.bias = [bias](int64_t d) { return bias->value_at(d); };
  }
  p.states = [s](int64_t line, int64_t d, int64_t i) { return s->value_at(line, d, i); };
  p.query_start_loc = in.qsl;
  if (!c.identity_indices) p.cache_indices = in.indices;
  if (c.init != VarlenConfig::Init::none_tensor) p.has_initial_state = in.initial;
  p.act = c.act;
  p.pad_slot_id = c.pad_slot_id;
  b.ref.emplace(std::move(p));
  return b;
}

std::string check_varlen(const OpInfo& info, VarlenInputs& in, const VarlenConfig& c,
                         const VarlenBefore& before, const Tensor& result, uint64_t call,
                         std::string_view seed) {
  const auto args = in.args();
  // An out-variant returns nothing (the core holds it to that); its result is out.
  if (!in.out)
    if (auto m = check_result(info, result, in.x, args, call); !m.empty()) return m;
  if (auto m = check_guards(args); !m.empty()) return m;
  if (auto m = check_unannotated(info, args, before.bytes); !m.empty()) return m;

  const reference::Varlen& ref = *before.ref;
  const int64_t D = c.dim, T = c.tokens(), S = c.state_len;
  const Describe out_at = [&](int64_t i) {
    const int64_t d = i / T, t = i % T, b = ref.sequence_of(t);
    return "[" + std::to_string(d) + ", " + std::to_string(t) + "] (channel " + std::to_string(d) +
           ", sequence " + std::to_string(b) + " of length " +
           std::to_string(c.lengths[static_cast<size_t>(b)]) + ", token " +
           std::to_string(t - in.qsl[static_cast<size_t>(b)]) + ")";
  };
  const std::vector<uint8_t> live_tokens = ref.live_tokens();
  const auto live = [&](int64_t i) { return live_tokens[static_cast<size_t>(i % T)] != 0; };

  if (is_mutated(info, "x")) {
    if (auto m = check_changes_only_in(args[0], before.bytes[0], in.x.bytes(), live, out_at); !m.empty())
      return m + " (a skipped sequence's tokens)";
  }
  // Writes outside the lines the call may write first: the gravest fault, named as such.
  const int64_t per_line = D * S;
  std::vector<int64_t> sequence_of_line(static_cast<size_t>(c.lines()), -1);
  for (size_t b = 0; b < in.indices.size(); ++b)
    if (ref.sequence_live(static_cast<int64_t>(b)))
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
  const auto line_live = [&](int64_t i) { return ref.line_live()[static_cast<size_t>(i / per_line)] != 0; };
  const auto states_now = in.states.bytes();
  if (is_mutated(info, "conv_states")) {
    if (auto m = check_changes_only_in(args[3], before.bytes[3], states_now, line_live, state_at); !m.empty())
      return m;
  }
  if (in.out)  // the last argument
    if (auto m = check_out_slack(args.back(), before.bytes.back(), out_at); !m.empty()) return m;
  const HostImage got = image_of(in.out ? *in.out->dl() : result.dl());
  const auto which = varlen_sample(c, in.qsl, ref, seed);
  if (auto m = compare_outputs(
          "output", got, c.act, which, [&](int64_t i) { return ref.out(i / T, i % T); }, out_at);
      !m.empty())
    return m;
  // Skipped sequences (padded, out of range): x as it was in place, zeros in a fresh output;
  // unspecified in an out-variant's out.
  const bool in_place = returns_x(info);
  for (int64_t b = 0; b < ref.batch() && !in.out; ++b) {
    if (ref.sequence_live(b)) continue;
    for (int64_t d = 0; d < D; ++d)
      for (int32_t t = in.qsl[static_cast<size_t>(b)]; t < in.qsl[static_cast<size_t>(b) + 1]; ++t)
        if (auto m = check_skipped("sequence", c.x, in_place, got.bits_at(d, t), before.x.bits_at(d, t),
                                   out_at(d * T + t));
            !m.empty())
          return m;
  }
  return compare_states("conv_states", in.states.view_of(states_now), ref.states(), line_live, state_at);
}

}  // namespace deltakern::conformance
