#include "update.hpp"

#include "compare.hpp"
#include "poison.hpp"
#include "sample.hpp"

#include <numeric>

namespace deltakern::conformance {

std::vector<NamedArg> UpdateInputs::args() {
  std::vector<NamedArg> named{{"x", &x},
                              {"conv_state", &states},
                              {"weight", &weight},
                              {"bias", bias ? &*bias : nullptr},
                              {"conv_state_indices", state_indices ? &*state_indices : nullptr},
                              {"cache_seqlens", cache_seqlens ? &*cache_seqlens : nullptr}};
  if (out) named.push_back({"out", &*out});
  return named;
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

// The out-variant's out: x's shape and layout, rows of a pitch of their own (slack that must stay
// untouched) and element 0 off 16-byte alignment.
TensorBuf make_out(DLDevice device, const UpdateConfig& c) {
  const int64_t B = c.batch, D = c.dim, Tq = c.tokens;
  if (!c.three_d) return TensorBuf(device, c.x, {B, D}, {D + 5, 1}, 1, 3);
  if (c.layout == Layout::channel_last)
    return TensorBuf(device, c.x, {B, D, Tq}, {Tq * (D + 6), 1, D + 6}, 1, 3);
  return TensorBuf(device, c.x, {B, D, Tq}, {D * (Tq + 2), Tq + 2, 1}, 1, 3);
}

TensorBuf make_states(DLDevice device, const UpdateConfig& c) {
  const auto strides = state_strides(c.state_layout, c.dim, c.state_len);
  const int64_t margin = c.margin_lines * strides[0];
  return TensorBuf(device, c.state, {c.lines(), c.dim, c.state_len}, strides, margin, 3 + margin);
}

}  // namespace

UpdateInputs make_update_inputs(DLDevice device, const UpdateConfig& c, Random& rng) {
  const int64_t B = c.batch, D = c.dim, S = c.state_len, lines = c.lines();
  UpdateInputs in{make_x(device, c),
                  make_states(device, c),
                  TensorBuf::compact(device, c.weight, {D, c.width}),
                  TensorBuf::compact_if(c.has_bias, device, c.bias, {D}),
                  TensorBuf::compact_if(!c.identity_indices, device, DType::i32, {B}),
                  TensorBuf::compact_if(c.circular, device, DType::i32, {B}),
                  {},
                  {},
                  std::nullopt};
  if (c.out_variant) in.out.emplace(make_out(device, c));
  std::vector<int32_t> pool(static_cast<size_t>(lines));
  std::iota(pool.begin(), pool.end(), 0);
  if (!c.identity_indices) rng.shuffle(pool);
  for (int64_t b = 0; b < B; ++b) {
    const auto ub = static_cast<size_t>(b);
    const bool padded = !c.identity_indices && ub < c.padded.size() && c.padded[ub];
    in.indices.push_back(!c.fixed_indices.empty() ? c.fixed_indices[ub]
                         : padded                 ? static_cast<int32_t>(c.pad_slot_id)
                                                  : pool[ub]);
    if (!c.out_of_range.empty() && c.out_of_range[ub] != 0) in.indices.back() = c.out_of_range[ub];
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
  BulkValues bulk(rng);
  in.x.fill([&](int64_t) { return encode(c.x, bulk.value()); });
  in.weight.fill([&](int64_t) { return encode(c.weight, bulk.value(0.5)); });
  if (in.bias) in.bias->fill([&](int64_t) { return encode(c.bias, bulk.value(0.5)); });
  std::vector<uint8_t> read(static_cast<size_t>(lines), 0);
  for (int32_t line : in.indices)
    if (line != c.pad_slot_id && line >= 0 && line < lines) read[static_cast<size_t>(line)] = 1;
  in.states.fill([&](int64_t i) {
    const auto line = static_cast<size_t>(i / (D * S));
    return read[line] ? encode(c.state, bulk.value())
                      : nan_garbage(c.state, static_cast<uint64_t>(i) + 31 * line);
  });
  if (in.out) poison_out(*in.out);
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

UpdateBefore capture(UpdateInputs& in, const UpdateConfig& c) {
  UpdateBefore b;
  b.bytes = snapshot(in.args());
  b.x = in.x.view_of(b.bytes[0]);
  b.states = in.states.view_of(b.bytes[1]);
  b.weight = in.weight.view_of(b.bytes[2]);
  if (in.bias) b.bias = in.bias->view_of(b.bytes[3]);
  reference::UpdateProblem p;
  p.batch = c.batch;
  p.dim = c.dim;
  p.tokens = c.tokens;
  p.width = c.width;
  p.state_len = c.state_len;
  p.lines = c.lines();
  const HostImage* x = &b.x;
  const HostImage* s = &b.states;
  const HostImage* w = &b.weight;
  p.x = [x](int64_t row, int64_t d, int64_t t) { return x->value_at(row, d, t); };
  p.states = [s](int64_t line, int64_t d, int64_t i) { return s->value_at(line, d, i); };
  p.weight = [w](int64_t d, int64_t k) { return w->value_at(d, k); };
  if (b.bias) {
    const HostImage* bias = &*b.bias;
    p.bias = [bias](int64_t d) { return bias->value_at(d); };
  }
  if (!c.identity_indices) p.state_indices = in.indices;
  if (c.circular) p.cache_seqlens = in.seqlens;
  p.act = c.act;
  p.pad_slot_id = c.pad_slot_id;
  b.ref.emplace(std::move(p));
  return b;
}

std::string check_update(const OpInfo& info, UpdateInputs& in, const UpdateConfig& c,
                         const UpdateBefore& before, const Tensor& result, uint64_t call,
                         std::string_view seed) {
  const auto args = in.args();
  // An out-variant returns nothing (the core holds it to that); its result is out.
  if (!in.out)
    if (auto m = check_result(info, result, in.x, args, call); !m.empty()) return m;
  if (auto m = check_guards(args); !m.empty()) return m;
  if (auto m = check_unannotated(info, args, before.bytes); !m.empty()) return m;

  const reference::Update& ref = *before.ref;
  const int64_t B = c.batch, D = c.dim, Tq = c.tokens, S = c.state_len;
  const Describe out_at = [&](int64_t i) {
    const int64_t b = i / (D * Tq), d = (i / Tq) % D, t = i % Tq;
    std::string s = "[" + std::to_string(b) + ", " + std::to_string(d);
    if (c.three_d) s += ", " + std::to_string(t);
    s += "] (row " + std::to_string(b) + ", channel " + std::to_string(d) + ", token " + std::to_string(t);
    if (c.circular) s += ", cache_seqlens " + std::to_string(in.seqlens[static_cast<size_t>(b)]);
    return s + ")";
  };
  const auto live = [&](int64_t i) { return ref.row_live(i / (D * Tq)); };
  if (is_mutated(info, "x")) {
    if (auto m = check_changes_only_in(args[0], before.bytes[0], in.x.bytes(), live, out_at); !m.empty())
      return m + " (a skipped row)";
  }
  // Writes outside the lines the call may write first: the gravest fault, named as such.
  const int64_t per_line = D * S;
  const Describe state_at = [&](int64_t i) {
    const int64_t line = i / per_line, d = (i % per_line) / S, s = i % S;
    return "[" + std::to_string(line) + ", " + std::to_string(d) + ", " + std::to_string(s) + "] (line " +
           std::to_string(line) + (ref.line_live()[static_cast<size_t>(line)] ? ", live" : ", not live") +
           ")";
  };
  const auto line_live = [&](int64_t i) { return ref.line_live()[static_cast<size_t>(i / per_line)] != 0; };
  const auto states_now = in.states.bytes();
  if (is_mutated(info, "conv_state")) {
    if (auto m = check_changes_only_in(args[1], before.bytes[1], states_now, line_live, state_at); !m.empty())
      return m;
  }
  // Row-major indices of the (B, D) or (B, D, Tq) result coincide with those of (B, D, Tq).
  if (in.out)  // the last argument
    if (auto m = check_out_slack(args.back(), before.bytes.back(), out_at); !m.empty()) return m;
  const HostImage got = image_of(in.out ? *in.out->dl() : result.dl());
  const auto which = update_sample(c, ref, seed);
  if (auto m = compare_outputs(
          "output", got, c.act, which, [&](int64_t i) { return ref.out(i / (D * Tq), (i / Tq) % D, i % Tq); },
          out_at);
      !m.empty())
    return m;
  // Skipped rows (padded, out of range): x as it was in place, zeros in a fresh output.
  const bool in_place = returns_x(info);
  for (int64_t b = 0; b < B && !in.out; ++b) {  // an out-variant's skipped rows are unspecified
    if (ref.row_live(b)) continue;
    for (int64_t k = 0; k < D * Tq; ++k) {
      const int64_t i = b * D * Tq + k;
      if (auto m = check_skipped("row", c.x, in_place, got.bits(i), before.x.bits(i), out_at(i)); !m.empty())
        return m;
    }
  }
  return compare_states("conv_state", in.states.view_of(states_now), ref.states(), line_live, state_at);
}

}  // namespace deltakern::conformance
