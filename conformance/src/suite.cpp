// The public face of the suite: which targets exist here, the case list of a target
// (DESIGN.md section 6), and running it against a runtime that forces the backend.
#include "case_util.hpp"
#include "device.hpp"
#include "poison.hpp"
#include "runners.hpp"

#include <deltakern/op_schemas.h>
#include <deltakern/conformance.hpp>

#include <algorithm>
#include <chrono>
#include <exception>
#include <set>

namespace deltakern::conformance {

std::string Target::label() const {
  if (device.device_type == kDLCUDA) return backend + "/cuda:" + std::to_string(device.device_id);
  if (device.device_type == kDLCPU) return backend + "/cpu";
  return backend + "/device" + std::to_string(device.device_type) + ":" + std::to_string(device.device_id);
}

std::vector<Target> targets(const Runtime& runtime) {
  std::vector<Target> out;
  for (const auto& p : runtime.plugins()) {
    if (p.state != PluginInfo::State::loaded) continue;
    for (const auto& d : p.devices) {
      if (!d.available) continue;
      if (d.type == kDLCPU) out.push_back({p.name, {kDLCPU, 0}});
      // CUDA device 0: the suite needs its own CUDA build to make device tensors.
      if (d.type == kDLCUDA && cuda_usable(0)) out.push_back({p.name, {kDLCUDA, 0}});
    }
  }
  return out;
}

namespace {

// Widths 2..4 within what the backend declares, plus its widest when wider.
std::vector<int64_t> widths_of(const OpInfo& info) {
  std::vector<int64_t> w;
  for (int64_t k = std::max(info.min_width, 2); k <= std::min(info.max_width, 4); ++k) w.push_back(k);
  if (info.max_width > 4 || w.empty()) w.push_back(info.max_width);
  return w;
}

std::vector<DType> dtypes_of(const OpInfo& info) {
  std::vector<DType> out;
  for (DType d : {DType::f32, DType::f16, DType::bf16})
    if (std::any_of(info.dtypes.begin(), info.dtypes.end(),
                    [&](const DLDataType& t) { return same(t, to_dl(d)); }))
      out.push_back(d);
  return out;
}

// Whether the op can run on the target's device at all (CUDA: compute capability).
bool serves(const OpInfo& info, const Target& target) {
  const OpInfo::Device* d = device_caps(info, target.device.device_type);
  if (d == nullptr) return false;
  if (target.device.device_type == kDLCUDA && d->min_compute_capability > 0)
    return cuda_compute_capability(target.device.device_id) >= d->min_compute_capability;
  return true;
}

// The dtype combination of a case: weight, bias and states each x's dtype or f32. Varied
// across cases (the knobs are seeded by the case name) rather than crossed in full.
struct Dtypes {
  DType weight, bias, state;
};
Dtypes pick_dtypes(DType x, Random& knobs) {
  if (x == DType::f32) return {x, x, x};
  const DType w = knobs.coin() ? x : DType::f32;
  const DType b = knobs.coin(0.75) ? w : (w == x ? DType::f32 : x);
  const DType s = knobs.coin() ? x : DType::f32;
  return {w, b, s};
}

int64_t pick_pad(Random& knobs) {
  const int64_t r = knobs.integer(0, 9);
  return r < 7 ? -1 : r < 9 ? -7 : 1000000;
}

// Lengths 0, 1, W-2, W-1, W, chunk edges 63..65 and 127..129, one long, in a random
// order; two padded sequences among them when there are cache indices.
void pick_lengths(VarlenConfig& c, Random& knobs) {
  const auto W = static_cast<int32_t>(c.width);
  std::vector<int32_t> lengths{0,  1,  W - 2, W - 1, W,   63,
                               64, 65, 127,   128,   129, static_cast<int32_t>(knobs.integer(280, 320))};
  knobs.shuffle(lengths);
  std::vector<uint8_t> padded(lengths.size(), 0);
  if (!c.identity_indices) {
    for (int32_t len : {3, 70}) {
      const auto at = static_cast<size_t>(knobs.integer(0, static_cast<int64_t>(lengths.size())));
      lengths.insert(lengths.begin() + static_cast<std::ptrdiff_t>(at), len);
      padded.insert(padded.begin() + static_cast<std::ptrdiff_t>(at), 1);
    }
  }
  c.lengths = std::move(lengths);
  c.padded = std::move(padded);
}

VarlenConfig varlen_config(DType x, int64_t width, Layout layout, bool bias, reference::Act act, bool init,
                           Random& knobs) {
  VarlenConfig c;
  c.x = x;
  const auto d = pick_dtypes(x, knobs);
  c.weight = d.weight;
  c.bias = d.bias;
  c.state = d.state;
  c.width = width;
  c.dim = std::vector<int64_t>{16, 13, 24, 8}[static_cast<size_t>(knobs.integer(0, 3))];
  c.state_len = knobs.coin(0.6) ? width - 1 : width - 1 + knobs.integer(1, 3);
  c.layout = layout;
  c.has_bias = bias;
  c.act = act;
  c.init = init ? VarlenConfig::Init::mixed
                : (knobs.coin() ? VarlenConfig::Init::none_tensor : VarlenConfig::Init::all_false);
  c.identity_indices = knobs.coin(0.2);
  c.pad_slot_id = pick_pad(knobs);
  c.state_layout = static_cast<StateLayout>(knobs.integer(0, 2));
  c.row_padding = knobs.coin() ? 0 : 5;
  c.byte_offset = knobs.coin(0.25);
  pick_lengths(c, knobs);
  return c;
}

UpdateConfig update_config(DType x, int64_t width, int64_t tokens, Layout layout, bool bias,
                           reference::Act act, bool circular, Random& knobs) {
  UpdateConfig c;
  c.x = x;
  const auto d = pick_dtypes(x, knobs);
  c.weight = d.weight;
  c.bias = d.bias;
  c.state = d.state;
  c.width = width;
  c.dim = std::vector<int64_t>{16, 13, 24, 8}[static_cast<size_t>(knobs.integer(0, 3))];
  c.state_len = knobs.coin(0.6) ? width - 1 : width - 1 + knobs.integer(1, 3);
  c.tokens = tokens;
  c.three_d = tokens > 1 || knobs.coin(0.25);
  c.layout = layout;
  c.row_padding = knobs.coin() ? 0 : 6;
  c.has_bias = bias;
  c.act = act;
  c.circular = circular;
  c.identity_indices = knobs.coin(0.2);
  c.batch = knobs.integer(5, 8);
  c.padded.assign(static_cast<size_t>(c.batch), 0);
  if (!c.identity_indices) {
    c.padded[static_cast<size_t>(knobs.integer(0, c.batch - 1))] = 1;
    c.padded[static_cast<size_t>(knobs.integer(0, c.batch - 1))] = 1;
  }
  c.pad_slot_id = pick_pad(knobs);
  c.state_layout = static_cast<StateLayout>(knobs.integer(0, 2));
  return c;
}

std::string layout_name(Layout l) { return to_string(l); }

void add_varlen_cases(std::vector<Case>& out, const OpInfo& info, const Target& target) {
  const std::string op = DK_OP_CAUSAL_CONV1D_VARLEN;
  const auto dtypes = dtypes_of(info);
  for (DType x : dtypes)
    for (int64_t w : widths_of(info))
      for (Layout layout : info.layouts)
        for (bool bias : {true, false})
          for (auto act : {reference::Act::none, reference::Act::silu})
            for (bool init : {true, false}) {
              const std::string name = std::string(name_of(x)) + "/w" + std::to_string(w) + "/" +
                                       layout_name(layout) + "/" + (bias ? "bias" : "nobias") + "/" +
                                       act_name(act) + "/" + (init ? "init" : "noinit");
              Random knobs(op + "/" + name + "#knobs");
              const auto cfg = varlen_config(x, w, layout, bias, act, init, knobs);
              out.push_back({op, name, [cfg, seed = op + "/" + name](Runtime& rt, const Target& t) {
                               return run_varlen(rt, t, cfg, Mode::host_and_derived, seed);
                             }});
            }
  if (dtypes.empty()) return;
  // Every sequence empty: T = 0, yet states of sequences without an initial state become zeros.
  {
    const std::string name = std::string("edge/all_empty/") + name_of(dtypes.front());
    Random knobs(op + "/" + name + "#knobs");
    auto cfg = varlen_config(dtypes.front(), widths_of(info).back(), info.layouts.front(), true,
                             reference::Act::silu, true, knobs);
    cfg.lengths = {0, 0, 0, 0};
    cfg.padded = {0, 1, 0, 0};
    cfg.identity_indices = false;
    out.push_back({op, name, [cfg, seed = op + "/" + name](Runtime& rt, const Target& t) {
                     return run_varlen(rt, t, cfg, Mode::host_and_derived, seed);
                   }});
  }
  if (target.device.device_type != kDLCUDA) return;
  const OpInfo::Device* dev = device_caps(info, kDLCUDA);
  const int64_t w = std::min<int64_t>(widths_of(info).back(), 4);
  for (DType x : dtypes) {
    for (Mode mode : {Mode::graph_replay, Mode::gate}) {
      if (mode == Mode::graph_replay && !dev->graph_capturable) continue;
      const std::string name = std::string(mode == Mode::gate ? "cuda_gate/" : "cuda_graph/") + name_of(x) +
                               "/w" + std::to_string(w);
      Random knobs(op + "/" + name + "#knobs");
      const auto cfg = varlen_config(x, w, info.layouts.front(), true, reference::Act::silu, true, knobs);
      out.push_back({op, name, [cfg, mode, seed = op + "/" + name](Runtime& rt, const Target& t) {
                       return run_varlen(rt, t, cfg, mode, seed);
                     }});
    }
  }
}

void add_update_cases(std::vector<Case>& out, const OpInfo& info, const Target& target) {
  const std::string op = DK_OP_CAUSAL_CONV1D_UPDATE;
  const auto dtypes = dtypes_of(info);
  // x forms: (batch, D) with one token; (batch, D, 3) in each declared layout.
  std::vector<std::pair<int64_t, Layout>> forms{{1, Layout::time_contiguous}};
  for (Layout l : info.layouts) forms.emplace_back(3, l);
  for (DType x : dtypes)
    for (int64_t w : widths_of(info))
      for (const auto& [tq, layout] : forms)
        for (bool bias : {true, false})
          for (auto act : {reference::Act::none, reference::Act::silu})
            for (bool circular : {false, true}) {
              const std::string form =
                  tq == 1 ? "tq1" : "tq" + std::to_string(tq) + "/" + layout_name(layout);
              const std::string name = std::string(name_of(x)) + "/w" + std::to_string(w) + "/" + form + "/" +
                                       (bias ? "bias" : "nobias") + "/" + act_name(act) + "/" +
                                       (circular ? "circular" : "shift");
              Random knobs(op + "/" + name + "#knobs");
              const auto cfg = update_config(x, w, tq, layout, bias, act, circular, knobs);
              out.push_back({op, name, [cfg, seed = op + "/" + name](Runtime& rt, const Target& t) {
                               return run_update(rt, t, cfg, Mode::host_and_derived, seed);
                             }});
            }
  if (target.device.device_type != kDLCUDA) return;
  const OpInfo::Device* dev = device_caps(info, kDLCUDA);
  const int64_t w = std::min<int64_t>(widths_of(info).back(), 4);
  for (DType x : dtypes)
    for (Mode mode : {Mode::graph_replay, Mode::gate}) {
      if (mode == Mode::graph_replay && !dev->graph_capturable) continue;
      const std::string name = std::string(mode == Mode::gate ? "cuda_gate/" : "cuda_graph/") + name_of(x) +
                               "/w" + std::to_string(w);
      Random knobs(op + "/" + name + "#knobs");
      const auto cfg =
          update_config(x, w, 1, Layout::time_contiguous, true, reference::Act::silu, false, knobs);
      out.push_back({op, name, [cfg, mode, seed = op + "/" + name](Runtime& rt, const Target& t) {
                       return run_update(rt, t, cfg, mode, seed);
                     }});
    }
}

void add_contract_cases(std::vector<Case>& out, const std::vector<const OpInfo*>& ops) {
  for (const OpInfo* info : ops) {
    out.push_back({"contract", info->name + "/declaration",
                   [op = info->name](Runtime& rt, const Target& t) { return check_declaration(rt, t, op); }});
  }
  const OpInfo* varlen = nullptr;
  const OpInfo* update = nullptr;
  for (const OpInfo* info : ops) {
    if (info->name == DK_OP_CAUSAL_CONV1D_VARLEN) varlen = info;
    if (info->name == DK_OP_CAUSAL_CONV1D_UPDATE) update = info;
  }
  if (varlen == nullptr || update == nullptr) return;
  const auto vt = dtypes_of(*varlen), ut = dtypes_of(*update);
  const auto vw = widths_of(*varlen), uw = widths_of(*update);
  for (DType x : vt) {
    if (std::find(ut.begin(), ut.end(), x) == ut.end()) continue;
    for (int64_t w : vw) {
      if (std::find(uw.begin(), uw.end(), w) == uw.end()) continue;
      for (bool circular : {false, true}) {
        const std::string name = std::string("prefill_then_updates/") + name_of(x) + "/w" +
                                 std::to_string(w) + "/" + (circular ? "circular" : "shift");
        Random knobs("contract/" + name + "#knobs");
        SequenceConfig sc;
        sc.x = x;
        const auto d = pick_dtypes(x, knobs);
        sc.weight = d.weight;
        sc.bias = d.bias;
        sc.state = d.state;
        sc.width = w;
        sc.circular = circular;
        sc.act = knobs.coin() ? reference::Act::silu : reference::Act::none;
        out.push_back({"contract", name, [sc, seed = "contract/" + name](Runtime& rt, const Target& t) {
                         return run_prefill_then_updates(rt, t, sc, seed);
                       }});
      }
    }
  }
}

}  // namespace

const char* to_string(Tier tier) {
  switch (tier) {
    case Tier::quick:
      return "quick";
    case Tier::full:
      return "full";
    case Tier::large:
      return "large";
  }
  return "?";
}

std::optional<Tier> tier_from_string(std::string_view name) {
  for (Tier t : {Tier::quick, Tier::full, Tier::large})
    if (name == to_string(t)) return t;
  return std::nullopt;
}

std::vector<Case> cases(const Runtime& runtime, const Target& target, const SuiteOptions& options) {
  (void)options;
  std::vector<Case> out;
  const PluginInfo* plugin = runtime.plugin(target.backend);
  if (plugin == nullptr) {
    out.push_back({"contract", "loaded", [](Runtime&, const Target& t) {
                     return "backend '" + t.backend + "' is not loaded in this runtime";
                   }});
    return out;
  }
  std::vector<const OpInfo*> served;
  for (const auto& op : plugin->ops)
    if (serves(op, target)) served.push_back(&op);
  add_contract_cases(out, served);
  for (const OpInfo* op : served) {
    if (op->name == DK_OP_CAUSAL_CONV1D_VARLEN) add_varlen_cases(out, *op, target);
    if (op->name == DK_OP_CAUSAL_CONV1D_UPDATE) add_update_cases(out, *op, target);
  }
  return out;
}

Case sweep_case(const Runtime& runtime, const Target& target, const SuiteOptions& options, uint64_t k) {
  const std::string name = "sweep/" + std::to_string(options.seed) + "/" + std::to_string(k);
  const PluginInfo* plugin = runtime.plugin(target.backend);
  std::vector<const OpInfo*> served;
  if (plugin != nullptr)
    for (const auto& op : plugin->ops)
      if (serves(op, target) &&
          (op.name == DK_OP_CAUSAL_CONV1D_VARLEN || op.name == DK_OP_CAUSAL_CONV1D_UPDATE))
        served.push_back(&op);
  if (served.empty())
    return {"contract", name,
            [](Runtime&, const Target& t) { return "backend '" + t.backend + "' serves no op here"; }};
  Random knobs(name + "#knobs");
  const OpInfo& info =
      *served[static_cast<size_t>(knobs.integer(0, static_cast<int64_t>(served.size()) - 1))];
  const auto dtypes = dtypes_of(info);
  const auto widths = widths_of(info);
  const DType x = dtypes[static_cast<size_t>(knobs.integer(0, static_cast<int64_t>(dtypes.size()) - 1))];
  const int64_t w = widths[static_cast<size_t>(knobs.integer(0, static_cast<int64_t>(widths.size()) - 1))];
  const Layout layout =
      info.layouts[static_cast<size_t>(knobs.integer(0, static_cast<int64_t>(info.layouts.size()) - 1))];
  const bool bias = knobs.coin();
  const auto act = knobs.coin() ? reference::Act::silu : reference::Act::none;
  if (info.name == DK_OP_CAUSAL_CONV1D_VARLEN) {
    auto cfg = varlen_config(x, w, layout, bias, act, knobs.coin(), knobs);
    cfg.dim = knobs.integer(1, 96);
    const auto n = static_cast<size_t>(knobs.integer(1, 24));
    cfg.lengths.clear();
    cfg.padded.clear();
    for (size_t i = 0; i < n; ++i) {
      cfg.lengths.push_back(
          static_cast<int32_t>(knobs.coin(0.2) ? knobs.integer(0, 4) : knobs.integer(0, 700)));
      cfg.padded.push_back(!cfg.identity_indices && knobs.coin(0.1));
    }
    return {info.name, name, [cfg, name](Runtime& rt, const Target& t) {
              return run_varlen(rt, t, cfg, Mode::host_and_derived, name);
            }};
  }
  std::vector<int64_t> tq{1, 1, 2, 3, 4};
  const int64_t tokens = tq[static_cast<size_t>(knobs.integer(0, 4))];
  auto cfg = update_config(x, w, tokens, layout, bias, act, knobs.coin(), knobs);
  cfg.dim = knobs.integer(1, 96);
  return {info.name, name, [cfg, name](Runtime& rt, const Target& t) {
            return run_update(rt, t, cfg, Mode::host_and_derived, name);
          }};
}

std::optional<Case> case_named(const Runtime& runtime, const Target& target, const SuiteOptions& options,
                               std::string_view name) {
  constexpr std::string_view sweep = "sweep/";
  if (name.substr(0, sweep.size()) == sweep) {
    const std::string_view rest = name.substr(sweep.size());
    const size_t slash = rest.find('/');
    if (slash == std::string_view::npos) return std::nullopt;
    try {
      size_t used = 0;
      const std::string seed_text(rest.substr(0, slash)), k_text(rest.substr(slash + 1));
      SuiteOptions o = options;
      o.seed = std::stoull(seed_text, &used);
      if (used != seed_text.size()) return std::nullopt;
      const uint64_t k = std::stoull(k_text, &used);
      if (used != k_text.size()) return std::nullopt;
      return sweep_case(runtime, target, o, k);
    } catch (const std::exception&) {
      return std::nullopt;
    }
  }
  for (auto& c : cases(runtime, target, options))
    if (c.name == name) return c;
  return std::nullopt;
}

CaseResult run_case(Runtime& runtime, const Target& target, const Case& c) {
  CaseResult r{target, c.op, c.name, false, {}};
  (void)take_release_violations();  // left by the results of an earlier case, already judged
  try {
    r.detail = c.run(runtime, target);
  } catch (const Error& e) {
    r.detail = std::string("threw deltakern::Error: ") + e.what();
  } catch (const std::exception& e) {
    r.detail = std::string("threw: ") + e.what();
  } catch (...) {
    r.detail = "threw a non-standard exception";
  }
  r.passed = r.detail.empty();
  if (!r.passed) r.detail = prefix(c.op, c.name) + r.detail;
  return r;
}

std::unique_ptr<Runtime> make_runtime(const RuntimeOptions& base, const Target& target) {
  RuntimeOptions options = base;
  options.force_backend = target.backend;
  auto runtime = std::make_unique<Runtime>(options);
  const auto forced = runtime->forced_backend();
  if (!forced || *forced != target.backend)
    throw std::runtime_error("the runtime forces '" + forced.value_or("no backend") + "', not '" +
                             target.backend + "' (is DELTAKERN_BACKEND set?)");
  runtime->set_allocator(poisoning_allocator());
  return runtime;
}

Summary run(const RuntimeOptions& base, const std::vector<Target>& targets,
            const std::function<void(const CaseResult&)>& on_result, const SuiteOptions& options) {
  Summary summary;
  const auto record = [&](CaseResult r) {
    (r.passed ? summary.passed : summary.failed) += 1;
    if (on_result) on_result(r);
    summary.results.push_back(std::move(r));
  };
  for (const auto& target : targets) {
    std::unique_ptr<Runtime> runtime;
    std::vector<Case> list;
    try {
      runtime = make_runtime(base, target);
      list = cases(*runtime, target, options);
    } catch (const std::exception& e) {
      record({target, "setup", "runtime", false,
              std::string("[setup] could not build the forcing runtime: ") + e.what()});
      continue;
    }
    for (const auto& c : list) record(run_case(*runtime, target, c));
    if (options.budget_seconds > 0) {
      const auto deadline =
          std::chrono::steady_clock::now() + std::chrono::duration<double>(options.budget_seconds);
      for (uint64_t k = 0; std::chrono::steady_clock::now() < deadline; ++k)
        record(run_case(*runtime, target, sweep_case(*runtime, target, options, k)));
    }
  }
  return summary;
}

}  // namespace deltakern::conformance
