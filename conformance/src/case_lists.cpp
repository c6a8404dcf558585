#include "case_lists.hpp"

#include "case_util.hpp"
#include "device.hpp"

#include <deltakern/plugin_sdk.hpp>

#include <deltakern/op_schemas.h>

#include <algorithm>
#include <climits>
#include <iterator>
#include <numeric>
#include <tuple>

namespace deltakern::conformance {

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
                    [&](const DLDataType& t) { return plugin::same_dtype(t, to_dl(d)); }))
      out.push_back(d);
  return out;
}

bool serves(const OpInfo& info, const Target& target) {
  const OpInfo::Device* d = device_caps(info, target.device.device_type);
  if (d == nullptr) return false;
  if (target.device.device_type == kDLCUDA && d->min_compute_capability > 0)
    return cuda_compute_capability(target.device.device_id) >= d->min_compute_capability;
  return true;
}

namespace {

// Late writes are looked for this long after each call: short in the quick tier, which runs
// in every ctest, longer where the shapes (and a backend's threads) are larger.
int64_t late_write_ms(const SuiteOptions& o) { return o.tier == Tier::quick ? 2 : 10; }

template <class T>
const T& pick(const std::vector<T>& v, Random& knobs) {
  return v[static_cast<size_t>(knobs.integer(0, static_cast<int64_t>(v.size()) - 1))];
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

// What both ops' configs share: the dtypes, a small D, the state length (W - 1 or a little
// longer), the case's axes and how long late writes are looked for.
template <class Config>
Config config_of(DType x, int64_t width, Layout layout, bool bias, reference::Act act, Random& knobs,
                 const SuiteOptions& o) {
  Config c;
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
  c.late_write_ms = late_write_ms(o);
  return c;
}

VarlenConfig varlen_config(DType x, int64_t width, Layout layout, bool bias, reference::Act act, bool init,
                           Random& knobs, const SuiteOptions& o) {
  auto c = config_of<VarlenConfig>(x, width, layout, bias, act, knobs, o);
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
                           reference::Act act, bool circular, Random& knobs, const SuiteOptions& o) {
  auto c = config_of<UpdateConfig>(x, width, layout, bias, act, knobs, o);
  c.tokens = tokens;
  c.three_d = tokens > 1 || knobs.coin(0.25);
  c.row_padding = knobs.coin() ? 0 : 6;
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

bool is_varlen(const OpInfo& info) { return is_varlen_op(info.name); }
bool is_update(const OpInfo& info) { return is_update_op(info.name); }
bool is_out_variant(const OpInfo& info) { return is_out_variant_op(info.name); }

// A case of `info`'s op: an out-variant's cases are its op's, with the result going into out.
Case varlen_case(const OpInfo& info, std::string name, VarlenConfig cfg, Mode mode = Mode::host_and_derived) {
  const std::string op = info.name;
  cfg.out_variant = is_out_variant(info);
  const int64_t tokens = std::accumulate(cfg.lengths.begin(), cfg.lengths.end(), int64_t{0});
  return {op,
          name,
          [cfg, mode, seed = op + "/" + name](Runtime& rt, const Target& t) {
            return run_varlen(rt, t, cfg, mode, seed);
          },
          {{"dim", cfg.dim},
           {"tokens", tokens},
           {"batch", cfg.batch()},
           {"width", cfg.width},
           {"state_len", cfg.state_len}}};
}

Case update_case(const OpInfo& info, std::string name, UpdateConfig cfg, Mode mode = Mode::host_and_derived) {
  const std::string op = info.name;
  cfg.out_variant = is_out_variant(info);
  return {op,
          name,
          [cfg, mode, seed = op + "/" + name](Runtime& rt, const Target& t) {
            return run_update(rt, t, cfg, mode, seed);
          },
          {{"batch", cfg.batch},
           {"dim", cfg.dim},
           {"tokens_per_update", cfg.tokens},
           {"width", cfg.width},
           {"state_len", cfg.state_len}}};
}

// The largest size the op admits along `dim`, capped where the suite's reference stays cheap.
int64_t edge_of(const OpInfo& info, std::string_view dim, int64_t cap) {
  int64_t edge = cap;
  for (const auto& l : info.limits)
    if (l.dim == dim) edge = std::min(edge, l.max);
  return edge;
}

// Out-of-range indices near the pool (one and two lines past its end, two before its start)
// land inside the margin around it; the full tier adds the int32 extremes.
std::vector<int32_t> out_of_range_values(int64_t lines, int64_t pad_slot_id, Tier tier) {
  std::vector<int32_t> v{static_cast<int32_t>(lines), static_cast<int32_t>(lines + 1), -2};
  if (tier != Tier::quick) v.insert(v.end(), {INT32_MAX, INT32_MIN});
  v.erase(std::remove(v.begin(), v.end(), static_cast<int32_t>(pad_slot_id)), v.end());
  return v;
}

}  // namespace

void add_varlen_cases(std::vector<Case>& out, const OpInfo& info, const Target& target,
                      const SuiteOptions& o) {
  const std::string op = DK_OP_CAUSAL_CONV1D_VARLEN;
  const auto dtypes = dtypes_of(info);
  for (DType x : dtypes)
    for (int64_t w : widths_of(info))
      for (Layout layout : info.layouts)
        for (bool bias : {true, false})
          for (auto act : {reference::Act::none, reference::Act::silu})
            for (bool init : {true, false}) {
              const std::string name = std::string(short_name(x)) + "/w" + std::to_string(w) + "/" +
                                       layout_name(layout) + "/" + (bias ? "bias" : "nobias") + "/" +
                                       act_name(act) + "/" + (init ? "init" : "noinit");
              Random knobs(op + "/" + name + "#knobs");
              out.push_back(varlen_case(info, name, varlen_config(x, w, layout, bias, act, init, knobs, o)));
            }
  if (dtypes.empty()) return;
  // Every sequence empty: T = 0, yet states of sequences without an initial state become zeros.
  {
    const std::string name = std::string("edge/all_empty/") + short_name(dtypes.front());
    Random knobs(op + "/" + name + "#knobs");
    auto cfg = varlen_config(dtypes.front(), widths_of(info).back(), info.layouts.front(), true,
                             reference::Act::silu, true, knobs, o);
    cfg.lengths = {0, 0, 0, 0};
    cfg.padded = {0, 1, 0, 0};
    cfg.identity_indices = false;
    out.push_back(varlen_case(info, name, cfg));
  }
  // One sequence of a few hundred tokens with an initial state, in every layout: a call with one
  // sequence takes a backend's single-sequence path (long tiles whose first one starts from the
  // prior), which the many-sequence cases above never reach.
  for (DType x : dtypes)
    for (Layout layout : info.layouts) {
      const std::string name = std::string("edge/one_sequence/") + short_name(x) + "/" + layout_name(layout);
      Random knobs(op + "/" + name + "#knobs");
      auto cfg = varlen_config(x, widths_of(info).back(), layout, true, reference::Act::silu, true, knobs, o);
      cfg.lengths = {static_cast<int32_t>(knobs.integer(280, 320))};
      cfg.padded = {0};
      out.push_back(varlen_case(info, name, cfg));
    }
  // The longest state the backend admits (at most 64): a declared limit is served up to its edge.
  for (DType x : dtypes) {
    const int64_t edge = edge_of(info, "state_len", 64);
    const std::string name = std::string("limits/state_len_") + std::to_string(edge) + "/" + short_name(x);
    Random knobs(op + "/" + name + "#knobs");
    auto cfg = varlen_config(x, widths_of(info).back(), info.layouts.back(), true, reference::Act::silu, true,
                             knobs, o);
    cfg.state_len = std::max<int64_t>(edge, cfg.width - 1);
    out.push_back(varlen_case(info, name, cfg));
  }
  if (target.device.device_type != kDLCUDA) return;
  const OpInfo::Device* dev = device_caps(info, kDLCUDA);
  const int64_t w = std::min<int64_t>(widths_of(info).back(), 4);
  for (DType x : dtypes) {
    for (Mode mode : {Mode::graph_replay, Mode::gate}) {
      if (mode == Mode::graph_replay && !dev->graph_capturable) continue;
      const std::string name = std::string(mode == Mode::gate ? "cuda_gate/" : "cuda_graph/") +
                               short_name(x) + "/w" + std::to_string(w);
      Random knobs(op + "/" + name + "#knobs");
      out.push_back(varlen_case(
          info, name, varlen_config(x, w, info.layouts.front(), true, reference::Act::silu, true, knobs, o),
          mode));
    }
  }
}

void add_update_cases(std::vector<Case>& out, const OpInfo& info, const Target& target,
                      const SuiteOptions& o) {
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
              const std::string name = std::string(short_name(x)) + "/w" + std::to_string(w) + "/" + form +
                                       "/" + (bias ? "bias" : "nobias") + "/" + act_name(act) + "/" +
                                       (circular ? "circular" : "shift");
              Random knobs(op + "/" + name + "#knobs");
              out.push_back(
                  update_case(info, name, update_config(x, w, tq, layout, bias, act, circular, knobs, o)));
            }
  // The edges of the declared limits (at most 64 each): the longest state, the most draft tokens.
  for (DType x : dtypes) {
    const int64_t s_edge = edge_of(info, "state_len", 64), tq_edge = edge_of(info, "tokens_per_update", 64);
    const std::string name = std::string("limits/state_len_") + std::to_string(s_edge) + "/tq" +
                             std::to_string(tq_edge) + "/" + short_name(x);
    Random knobs(op + "/" + name + "#knobs");
    auto cfg = update_config(x, widths_of(info).back(), tq_edge, info.layouts.back(), true,
                             reference::Act::silu, true, knobs, o);
    cfg.state_len = std::max<int64_t>(s_edge, cfg.width - 1);
    out.push_back(update_case(info, name, cfg));
  }
  if (target.device.device_type != kDLCUDA) return;
  const OpInfo::Device* dev = device_caps(info, kDLCUDA);
  const int64_t w = std::min<int64_t>(widths_of(info).back(), 4);
  for (DType x : dtypes)
    for (Mode mode : {Mode::graph_replay, Mode::gate}) {
      if (mode == Mode::graph_replay && !dev->graph_capturable) continue;
      const std::string name = std::string(mode == Mode::gate ? "cuda_gate/" : "cuda_graph/") +
                               short_name(x) + "/w" + std::to_string(w);
      Random knobs(op + "/" + name + "#knobs");
      out.push_back(update_case(
          info, name,
          update_config(x, w, 1, Layout::time_contiguous, true, reference::Act::silu, false, knobs, o),
          mode));
    }
}

void add_contract_cases(std::vector<Case>& out, const std::vector<const OpInfo*>& ops, const SuiteOptions&) {
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
        const std::string name = std::string("prefill_then_updates/") + short_name(x) + "/w" +
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

void add_out_of_range_cases(std::vector<Case>& out, const OpInfo& info, const Target&,
                            const SuiteOptions& o) {
  const auto dtypes = dtypes_of(info);
  const auto widths = widths_of(info);
  if (dtypes.empty()) return;
  for (DType x : dtypes) {
    const std::string name = std::string("out_of_range_index/") + short_name(x);
    Random knobs(info.name + "/" + name + "#knobs");
    const int64_t w = pick(widths, knobs);
    const Layout layout = pick(info.layouts, knobs);
    if (is_varlen(info)) {
      auto cfg = varlen_config(x, w, layout, true, reference::Act::silu, true, knobs, o);
      cfg.identity_indices = false;
      pick_lengths(cfg, knobs);
      cfg.margin_lines = 2;
      const auto values = out_of_range_values(cfg.lines(), cfg.pad_slot_id, o.tier);
      cfg.out_of_range.assign(cfg.lengths.size(), 0);
      // Sequences with tokens, none of them padded, get the out-of-range indices.
      size_t given = 0;
      for (size_t b = 0; b < cfg.lengths.size() && given < values.size(); ++b)
        if (!cfg.padded[b] && cfg.lengths[b] > 0) cfg.out_of_range[b] = values[given++];
      out.push_back(varlen_case(info, name, cfg));
    } else if (is_update(info)) {
      auto cfg = update_config(x, w, knobs.coin() ? 1 : 3, layout, true, reference::Act::silu, knobs.coin(),
                               knobs, o);
      cfg.identity_indices = false;
      cfg.batch = 9;
      cfg.padded.assign(9, 0);
      cfg.padded[4] = 1;
      cfg.margin_lines = 2;
      const auto values = out_of_range_values(cfg.lines(), cfg.pad_slot_id, o.tier);
      cfg.out_of_range.assign(9, 0);
      const size_t rows[] = {0, 2, 6, 8, 7};  // row 4 is padded
      for (size_t i = 0; i < values.size() && i < std::size(rows); ++i) cfg.out_of_range[rows[i]] = values[i];
      out.push_back(update_case(info, name, cfg));
    }
  }
}

namespace {

// Engine-sized D for the device: what a 2-core CI box checks in minutes, what an H200 takes.
struct SizeDims {
  int64_t widest, wide, medium, narrow;
};
SizeDims size_dims(const Target& t) {
  if (t.device.device_type == kDLCUDA) return {12288, 8192, 4096, 2048};
  return {4096, 2048, 1024, 512};
}

// The lengths of 64 sequences of mixed sizes: the edges (0, 1, W-1), a few beyond 1000 and
// one beyond 4096 when `long_one`, the rest short, in a random order, summing to about `total`.
std::vector<int32_t> mixed_lengths(int64_t count, int64_t total, int64_t width, bool long_one,
                                   Random& knobs) {
  std::vector<int32_t> v{0, 1, static_cast<int32_t>(width - 1), 1001, 1500, 2500};
  if (long_one) v.push_back(4500);
  const int64_t used = std::accumulate(v.begin(), v.end(), int64_t{0});
  const int64_t rest = static_cast<int64_t>(count) - static_cast<int64_t>(v.size());
  const int64_t mean = std::max<int64_t>(2, (total - used) / std::max<int64_t>(rest, 1));
  while (static_cast<int64_t>(v.size()) < count)
    v.push_back(static_cast<int32_t>(knobs.integer(1, 2 * mean - 1)));
  knobs.shuffle(v);
  return v;
}

// A case at size: the knobs of a small case (dtypes, state length, pool layout, flags),
// the shape of an engine's call.
struct VarlenShape {
  std::string label;
  int64_t dim;
  std::vector<int32_t> lengths;
  bool every_dtype = true;  // false: one dtype per layout (the GPU-sized ones)
};

}  // namespace

void add_size_cases(std::vector<Case>& out, const OpInfo& info, const Target& target, const SuiteOptions& o) {
  if (o.tier == Tier::quick) return;
  const auto dtypes = dtypes_of(info);
  const auto widths = widths_of(info);
  if (dtypes.empty()) return;
  const SizeDims dims = size_dims(target);
  const bool large = o.tier == Tier::large && target.device.device_type == kDLCUDA;
  const std::string op = info.name;
  size_t variant = 0;  // walks widths and pool layouts across the cases of every size
  if (is_varlen(info)) {
    Random shapes(op + "/size#shapes");
    std::vector<VarlenShape> list{
        {"one_sequence_8k", dims.widest, {8192}},
        {"64_mixed_16k", dims.medium, mixed_lengths(64, 16384, 4, true, shapes)},
        {"32k_tokens", dims.narrow, {20000, 4097, 8671}},
        {"4k_tokens_16_sequences", dims.widest, mixed_lengths(16, 4096, 4, false, shapes)},
        {"1024_short_prompts", 256, {}},
        {"narrow_channels_long", 64, {30000, 2768}},
    };
    for (int i = 0; i < 1024; ++i) list[4].lengths.push_back(static_cast<int32_t>(shapes.integer(1, 16)));
    if (large) {
      list.push_back({"one_sequence_128k", 8192, {131072}, false});
      list.push_back({"64_mixed_128k", 8192, mixed_lengths(64, 131072, 4, true, shapes), false});
      list.push_back({"32k_tokens_widest", dims.widest, {32768}, false});
    }
    // Each shape in as many cases as it takes for every declared width, layout, pool layout
    // and dtype to appear at that size (not crossed: that is the quick tier's job).
    for (const auto& shape : list) {
      const size_t n = shape.every_dtype
                           ? std::max({widths.size(), info.layouts.size(), dtypes.size(), size_t{3}})
                           : info.layouts.size();
      for (size_t k = 0; k < n; ++k, ++variant) {
        const DType x = dtypes[(k + variant) % dtypes.size()];
        const int64_t w = widths[k % widths.size()];
        const Layout layout = info.layouts[k % info.layouts.size()];
        const std::string name = "size/" + shape.label + "/D" + std::to_string(shape.dim) + "/" +
                                 short_name(x) + "/w" + std::to_string(w) + "/" + layout_name(layout);
        Random knobs(op + "/" + name + "#knobs");
        auto cfg = varlen_config(x, w, layout, knobs.coin(),
                                 variant % 2 ? reference::Act::silu : reference::Act::none, true, knobs, o);
        cfg.dim = shape.dim;
        cfg.lengths = shape.lengths;
        cfg.state_layout = static_cast<StateLayout>(k % 3);
        cfg.identity_indices = false;
        cfg.init = VarlenConfig::Init::mixed;
        cfg.row_padding = variant % 2 ? 0 : 8;
        // Two sequences padded (cache index = pad_slot_id) among the first ones.
        cfg.padded.assign(cfg.lengths.size(), 0);
        if (cfg.lengths.size() > 3) cfg.padded[1] = cfg.padded[3] = 1;
        out.push_back(varlen_case(info, name, cfg));
      }
    }
    return;
  }
  if (!is_update(info)) return;
  // Decode: batches 1, 64 and 1024 at Tq 1 (plain decode), 4 and 64 (speculative drafts), D as
  // wide as a call of about 4M elements (GPU: 128M) allows; then every Tq up to 64 at a small D.
  std::vector<std::tuple<int64_t, int64_t, int64_t>> shapes;  // (batch, Tq, D)
  const int64_t budget = large ? int64_t{1} << 27 : int64_t{1} << 22;
  for (int64_t batch : {1, 64, 1024})
    for (int64_t tq : {1, 4, 64})
      shapes.emplace_back(batch, tq, std::clamp<int64_t>(budget / (batch * tq), 64, dims.widest));
  for (int64_t tq = 1; tq <= 64; ++tq) shapes.emplace_back(8, tq, 96);
  for (const auto& [batch, tq, dim] : shapes) {
    const DType x = dtypes[variant % dtypes.size()];
    const int64_t w = widths[variant % widths.size()];
    const Layout layout = info.layouts[variant % info.layouts.size()];
    const bool circular = variant % 2 == 1;
    const std::string name = "size/batch" + std::to_string(batch) + "/tq" + std::to_string(tq) + "/D" +
                             std::to_string(dim) + "/" + short_name(x) + "/w" + std::to_string(w) + "/" +
                             (tq > 1 ? layout_name(layout) + "/" : std::string()) +
                             (circular ? "circular" : "shift");
    Random knobs(op + "/" + name + "#knobs");
    auto cfg = update_config(x, w, tq, layout, knobs.coin(),
                             variant % 3 ? reference::Act::silu : reference::Act::none, circular, knobs, o);
    cfg.dim = dim;
    cfg.batch = batch;
    cfg.state_layout = static_cast<StateLayout>(variant % 3);
    cfg.identity_indices = batch == 1 && variant % 2 == 0;
    cfg.padded.assign(static_cast<size_t>(batch), 0);
    if (!cfg.identity_indices && batch > 2) cfg.padded[1] = cfg.padded[static_cast<size_t>(batch / 2)] = 1;
    ++variant;
    out.push_back(update_case(info, name, cfg));
  }
}

Case make_sweep_case(const std::vector<const OpInfo*>& served, const SuiteOptions& o, uint64_t k) {
  const std::string name = "sweep/" + std::to_string(o.seed) + "/" + std::to_string(k);
  if (served.empty())
    return {"contract", name,
            [](Runtime&, const Target& t) { return "backend '" + t.backend + "' serves no op here"; }};
  Random knobs(name + "#knobs");
  const OpInfo& info = *pick(served, knobs);
  const auto dtypes = dtypes_of(info);
  const DType x = pick(dtypes, knobs);
  const int64_t w = knobs.integer(std::max(info.min_width, 2), std::max(std::min(info.max_width, 8), 2));
  const Layout layout = pick(info.layouts, knobs);
  const bool bias = knobs.coin();
  const auto act = knobs.coin() ? reference::Act::silu : reference::Act::none;
  if (is_varlen(info)) {
    auto cfg = varlen_config(x, w, layout, bias, act, knobs.coin(), knobs, o);
    cfg.dim = knobs.coin(0.2) ? knobs.integer(1, 4) : knobs.integer(1, 320);
    cfg.state_len = std::min(w - 1 + (knobs.coin(0.6) ? 0 : knobs.integer(1, 5)),
                             std::max(edge_of(info, "state_len", 64), w - 1));
    const auto n = static_cast<size_t>(knobs.integer(1, 40));
    cfg.lengths.clear();
    cfg.padded.clear();
    for (size_t i = 0; i < n; ++i) {
      cfg.lengths.push_back(
          static_cast<int32_t>(knobs.coin(0.3) ? knobs.integer(0, 2 * w) : knobs.integer(0, 1500)));
      cfg.padded.push_back(!cfg.identity_indices && knobs.coin(0.1));
    }
    cfg.extra_lines = knobs.integer(0, 8);
    return varlen_case(info, name, cfg);
  }
  // Within the declared limits, so that every sweep case is a claim of the backend's.
  const int64_t tokens = std::min(knobs.coin(0.5) ? 1 : knobs.integer(2, 64),
                                  std::max<int64_t>(edge_of(info, "tokens_per_update", 64), 1));
  auto cfg = update_config(x, w, tokens, layout, bias, act, knobs.coin(), knobs, o);
  cfg.dim = knobs.coin(0.2) ? knobs.integer(1, 4) : knobs.integer(1, 320);
  cfg.state_len = std::min(w - 1 + (knobs.coin(0.6) ? 0 : knobs.integer(1, 5)),
                           std::max(edge_of(info, "state_len", 64), w - 1));
  cfg.batch = knobs.integer(1, 96);
  cfg.padded.assign(static_cast<size_t>(cfg.batch), 0);
  if (!cfg.identity_indices)
    for (auto& p : cfg.padded) p = knobs.coin(0.1);
  cfg.extra_lines = knobs.integer(0, 8);
  return update_case(info, name, cfg);
}

}  // namespace deltakern::conformance
