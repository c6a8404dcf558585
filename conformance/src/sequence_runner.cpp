// "A prefill followed by single-token updates equals one prefill": states bit for bit,
// outputs within the output tolerance. In circular mode every prefill length and the
// number of updates are multiples of S, where the linear and circular layouts coincide.
#include "case_util.hpp"
#include "compare.hpp"
#include "device.hpp"
#include "runners.hpp"

#include <deltakern/plugin_sdk.hpp>

#include <deltakern/op_schemas.h>

#include <numeric>

namespace deltakern::conformance {

namespace {

VarlenConfig prefill_config(const SequenceConfig& sc, int64_t dim, int64_t state_len,
                            std::vector<int32_t> lengths, std::vector<int32_t> indices,
                            std::vector<uint8_t> initial, int64_t extra_lines) {
  VarlenConfig c;
  c.x = sc.x;
  c.weight = sc.weight;
  c.bias = sc.bias;
  c.state = sc.state;
  c.width = sc.width;
  c.dim = dim;
  c.state_len = state_len;
  c.act = sc.act;
  c.init = VarlenConfig::Init::mixed;
  c.lengths = std::move(lengths);
  c.fixed_indices = std::move(indices);
  c.fixed_initial = std::move(initial);
  c.extra_lines = extra_lines;
  return c;
}

}  // namespace

std::string run_prefill_then_updates(Runtime& rt, const Target& target, const SequenceConfig& sc,
                                     std::string_view seed) {
  (void)op_info(rt, target, DK_OP_CAUSAL_CONV1D_VARLEN);
  (void)op_info(rt, target, DK_OP_CAUSAL_CONV1D_UPDATE);
  Random rng(seed);
  activate(target.device);
  const Stream stream(target.device);
  const DLDevice dev = target.device;

  const int64_t W = sc.width, S = W, D = 12, B = 3, extra = 3, lines = B + extra;
  const std::vector<int32_t> first = sc.circular
                                         ? std::vector<int32_t>{int32_t(S), int32_t(2 * S), int32_t(3 * S)}
                                         : std::vector<int32_t>{int32_t(W + 1), 1, 0};
  const int64_t steps = sc.circular ? 2 * S : 5;
  std::vector<int32_t> whole(first);
  for (auto& l : whole) l += static_cast<int32_t>(steps);
  std::vector<int32_t> pool(static_cast<size_t>(lines));
  std::iota(pool.begin(), pool.end(), 0);
  rng.shuffle(pool);
  const std::vector<int32_t> indices(pool.begin(), pool.begin() + B);
  const std::vector<uint8_t> initial{1, 0, 1};

  // The tokens [b][d][t], the parameters and the initial pool, shared by every call.
  std::vector<std::vector<double>> tok(static_cast<size_t>(B));
  for (int64_t b = 0; b < B; ++b)
    tok[static_cast<size_t>(b)] = rng.values(static_cast<size_t>(D * whole[static_cast<size_t>(b)]));
  const auto weight = rng.values(static_cast<size_t>(D * W), 0.5),
             bias = rng.values(static_cast<size_t>(D), 0.5);
  std::vector<uint32_t> pool_bits(static_cast<size_t>(lines * D * S));
  for (size_t i = 0; i < pool_bits.size(); ++i) pool_bits[i] = nan_garbage(sc.state, i);
  for (int64_t b = 0; b < B; ++b)
    if (initial[static_cast<size_t>(b)])
      for (int64_t i = 0; i < D * S; ++i)
        pool_bits[static_cast<size_t>(indices[static_cast<size_t>(b)] * D * S + i)] =
            encode(sc.state, rng.value());

  // Prefill over `lengths` tokens of each sequence: its inputs (kept: the whole prefill's are
  // the reference's) and its output.
  HeldResults held;
  struct Prefill {
    VarlenConfig cfg;
    VarlenInputs in;
    Tensor* out = nullptr;
  };
  const auto prefill = [&](const std::vector<int32_t>& lengths) {
    auto cfg = prefill_config(sc, D, S, lengths, indices, initial, extra);
    Random unused(std::string(seed) + "/prefill");
    auto in = make_varlen_inputs(dev, cfg, unused);
    const int64_t T = cfg.tokens();
    std::vector<double> x(static_cast<size_t>(D * T));
    for (int64_t b = 0, t0 = 0; b < B; t0 += lengths[static_cast<size_t>(b)], ++b)
      for (int64_t d = 0; d < D; ++d)
        for (int64_t t = 0; t < lengths[static_cast<size_t>(b)]; ++t)
          x[static_cast<size_t>(d * T + t0 + t)] =
              tok[static_cast<size_t>(b)][static_cast<size_t>(d * whole[static_cast<size_t>(b)] + t)];
    in.x.set_values(x);
    in.weight.set_values(weight);
    in.bias->set_values(bias);
    in.states.set_bits(pool_bits);
    return Prefill{std::move(cfg), std::move(in), nullptr};
  };

  auto whole_run = prefill(whole);
  const VarlenBefore reference = capture(whole_run.in, whole_run.cfg);  // the float64 whole prefill
  whole_run.out = &held.add(rt.causal_conv1d_varlen(
      varlen_args(whole_run.in, whole_run.cfg, whole_run.cfg.max_len(), stream.get())));
  stream.synchronize();
  const std::vector<uint32_t> states_whole = whole_run.in.states.bits();
  auto first_run = prefill(first);
  first_run.out = &held.add(rt.causal_conv1d_varlen(
      varlen_args(first_run.in, first_run.cfg, first_run.cfg.max_len(), stream.get())));
  stream.synchronize();
  const std::vector<uint32_t> states_first = first_run.in.states.bits();
  const int64_t T_whole = whole_run.cfg.tokens(), T_first = first_run.cfg.tokens();
  const auto start_of = [](const std::vector<int32_t>& lengths, int64_t b) {
    return std::accumulate(lengths.begin(), lengths.begin() + b, int64_t{0});
  };
  const auto expected_at = [&](int64_t b, int64_t d, int64_t t) {
    return reference.ref->out(d, start_of(whole, b) + t);
  };

  // The first prefill's outputs are the whole prefill's first tokens.
  {
    std::vector<int64_t> which(static_cast<size_t>(D * T_first));
    std::iota(which.begin(), which.end(), int64_t{0});
    const auto sequence_of = [&](int64_t t) {
      int64_t b = 0;
      while (t >= start_of(first, b + 1)) ++b;
      return b;
    };
    if (auto m = compare_outputs(
            "output of the first prefill against the float64 whole prefill", image_of(first_run.out->dl()),
            sc.act, which,
            [&](int64_t i) {
              const int64_t d = i / T_first, t = i % T_first, b = sequence_of(t);
              return expected_at(b, d, t - start_of(first, b));
            },
            [&](int64_t i) {
              return index_string(std::vector<int64_t>{D, T_first}, i);
            });
        !m.empty())
      return m;
  }
  (void)T_whole;

  UpdateConfig uc;
  uc.x = sc.x;
  uc.weight = sc.weight;
  uc.bias = sc.bias;
  uc.state = sc.state;
  uc.width = W;
  uc.dim = D;
  uc.state_len = S;
  uc.batch = B;
  uc.act = sc.act;
  uc.circular = sc.circular;
  uc.fixed_indices = indices;
  uc.extra_lines = extra;
  Random unused(std::string(seed) + "/update");
  auto up = make_update_inputs(dev, uc, unused);
  up.weight.set_values(weight);
  up.bias->set_values(bias);
  up.states.set_bits(states_first);
  std::vector<int64_t> all(static_cast<size_t>(B * D));
  std::iota(all.begin(), all.end(), int64_t{0});
  for (int64_t step = 0; step < steps; ++step) {
    std::vector<double> x(static_cast<size_t>(B * D)), seqlens;
    for (int64_t b = 0; b < B; ++b) {
      const int64_t t = first[static_cast<size_t>(b)] + step;
      for (int64_t d = 0; d < D; ++d)
        x[static_cast<size_t>(b * D + d)] =
            tok[static_cast<size_t>(b)][static_cast<size_t>(d * whole[static_cast<size_t>(b)] + t)];
      seqlens.push_back(static_cast<double>(t));
    }
    up.x.set_values(x);
    if (up.cache_seqlens) up.cache_seqlens->set_values(seqlens);
    Tensor& out = held.add(rt.causal_conv1d_update(update_args(up, uc, stream.get())));
    stream.synchronize();
    if (auto m = compare_outputs(
            "update " + std::to_string(step + 1) + " of " + std::to_string(steps) +
                "'s output against the float64 whole prefill",
            image_of(out.dl()), sc.act, all,
            [&](int64_t i) { return expected_at(i / D, i % D, first[static_cast<size_t>(i / D)] + step); },
            [&](int64_t i) {
              return "[" + std::to_string(i / D) + ", " + std::to_string(i % D) + "] (sequence " +
                     std::to_string(i / D) + ", channel " + std::to_string(i % D) + ")";
            });
        !m.empty())
      return m;
    if (auto m = release_result(out); !m.empty()) return m;
  }
  if (auto m = held.release_all(); !m.empty()) return m;
  return compare_bits(
      "conv_states after the prefill and " + std::to_string(steps) + " updates, against one whole prefill,",
      sc.state, up.states.bits(), states_whole, {}, [&](int64_t i) {
        return index_string(std::vector<int64_t>{lines, D, S}, i);
      });
}

std::string check_declaration(const Runtime& rt, const Target& target, std::string_view op) {
  const OpInfo& info = op_info(rt, target, op);
  const bool out_variant = is_out_variant_op(op);
  const std::string states = is_varlen_op(op) ? "conv_states" : "conv_state";
  const std::string schema = " (schema: " + info.schema + ")";
  if (!is_mutated(info, states))
    return "the schema does not mark " + states + " written (Tensor(b!)), but the op updates it in place" +
           schema;
  for (const auto& m : info.mutated)
    if (m != states && m != (out_variant ? "out" : "x"))
      return "the schema marks " + m + " written, which the op never writes" + schema;
  if (out_variant) {
    // The core refuses an out-variant that does not write out or that writes x; said again here
    // so that the verdict stands on its own.
    if (!is_mutated(info, "out")) return "the schema does not mark out written (Tensor(a!) out)" + schema;
  } else if (info.returns_alias_of.has_value()) {
    if (*info.returns_alias_of != "x")
      return "the result aliases " + *info.returns_alias_of + "; the op returns either x or a fresh tensor" +
             schema;
    if (!is_mutated(info, "x"))
      return "the result aliases x (-> Tensor(a)) but x is not marked written" + schema;
  } else if (is_mutated(info, "x")) {
    return "x is marked written but the result is a fresh tensor: an in-place backend returns x (-> "
           "Tensor(a))" +
           schema;
  }
  if (info.devices.empty()) return "the op declares no device";
  if (info.dtypes.empty()) return "the op declares no dtype";
  for (const auto& t : info.dtypes) {
    bool known = false;
    for (DType d : {DType::f32, DType::f16, DType::bf16}) known = known || plugin::same_dtype(to_dl(d), t);
    if (!known) return "the op declares dtype " + plugin::dtype_name(t) + ", which it does not define";
  }
  if (info.min_width < 1 || info.max_width < info.min_width)
    return "the op declares widths " + std::to_string(info.min_width) + ".." + std::to_string(info.max_width);
  if (info.layouts.empty()) return "the op declares no layout";
  return {};
}

}  // namespace deltakern::conformance
