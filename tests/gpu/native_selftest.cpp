// native_selftest: drives the native plugin through its C ABI alone (dlopen, entry, a minimal
// host-services table: bench/gpu/native_plugin.hpp), so the kernels can be checked on a GPU
// independently of the core. Checks every dtype combination, width, layout, state layout,
// sequence edge, padded and out-of-range slots against the project's float64 reference (the
// conformance suite's, deltakern_reference), poisons what the call must not touch, checks the
// out-variants (*_out: the result in a separate out with its own strides and alignment, x
// untouched), and capture + replay in global mode. The timings of the same kernels are
// bench/gpu/native_kernel_bench.cpp.
//
//   native_selftest <path/to/libdeltakern_native.so> [--quick]
//
// Exit status: 0 all checks passed, 1 a check failed (or an error), 3 the plugin's probe refused
// the GPU, 77 no CUDA device (ctest counts it as skipped).
#include <deltakern/op_schemas.h>
#include <deltakern/plugin_abi.h>

#include <algorithm>
#include <cstdio>
#include <functional>
#include <memory>
#include <numeric>
#include <string>
#include <utility>
#include <vector>

#include "gpu_util.hpp"
#include "host_array.hpp"
#include "native_plugin.hpp"
#include "reference.hpp"  // conformance/src (deltakern_reference)

using namespace dkgpu;
namespace ref = deltakern::conformance::reference;

namespace {

std::mt19937_64 rng(12345);
double uniform(double lo, double hi) { return std::uniform_real_distribution<double>(lo, hi)(rng); }

// ---- a state pool (lines, D, S) in one of three layouts, unused lines full of NaN

struct Pool {
  ScalarType dt;
  int64_t lines, D, S;
  int layout;  // 0: compact (lines, D, S); 1: (lines, S, D) transposed; 2: padded odd strides
  int64_t sl, sc, sp, extent;
  HostArray host;
  DeviceBuffer dev;
  Pool(ScalarType d, int64_t l, int64_t dim, int64_t s, int lay)
      : dt(d), lines(l), D(dim), S(s), layout(lay) {
    if (layout == 0) {
      sc = S, sp = 1, sl = D * S;
    } else if (layout == 1) {
      sc = 1, sp = D, sl = D * S;
    } else {
      sp = 1, sc = S + 1, sl = D * (S + 1) + 3;
    }
    extent = lines * sl + 8;
    host = HostArray(dt, extent);
    for (size_t i = 0; i < host.size(); ++i) host.set(i, std::nan(""));
    dev = DeviceBuffer(host.bytes.size());
  }
  size_t at(int64_t l, int64_t c, int64_t p) const { return l * sl + c * sc + p * sp; }
  void fill_line(int64_t l) {
    for (int64_t c = 0; c < D; ++c)
      for (int64_t p = 0; p < S; ++p) host.set(at(l, c, p), uniform(-1, 1));
  }
  View view(int device) const { return View(dev.get(), device, to_dl(dt), {lines, D, S}, {sl, sc, sp}); }
};

// Weights and bias as the kernel reads them (rounded to their dtypes), and as the reference reads
// them: accessors over the same host arrays. Not to be moved once built (the accessors hold it).
struct Weights {
  ScalarType wdt, bdt;
  int64_t D;
  int W;
  bool has_bias, silu;
  HostArray w, b;
  DeviceBuffer dw, db;
  Weights(ScalarType wd, ScalarType bd, int64_t dim, int width, bool bias, bool act_silu)
      : wdt(wd), bdt(bd), D(dim), W(width), has_bias(bias), silu(act_silu), w(wd, dim * width), b(bd, dim) {
    for (size_t i = 0; i < w.size(); ++i) w.set(i, uniform(-0.6, 0.6));
    for (size_t i = 0; i < b.size(); ++i) b.set(i, uniform(-0.3, 0.3));
    dw = DeviceBuffer(w.bytes.size());
    db = DeviceBuffer(b.bytes.size());
    w.upload(dw.get());
    b.upload(db.get());
  }
  Weights(const Weights&) = delete;
  Weights& operator=(const Weights&) = delete;
  View wv(int dev) const { return View(dw.get(), dev, to_dl(wdt), {D, W}, {W, 1}); }
  View bv(int dev) const { return View(db.get(), dev, to_dl(bdt), {D}, {1}); }
  std::function<double(int64_t, int64_t)> weight() const {
    return [this](int64_t d, int64_t k) { return w.get(static_cast<size_t>(d * W + k)); };
  }
  std::function<double(int64_t)> bias() const {
    if (!has_bias) return {};
    return [this](int64_t d) { return b.get(static_cast<size_t>(d)); };
  }
  ref::Act act() const { return silu ? ref::Act::silu : ref::Act::none; }
};

struct Failures {
  int checks = 0, failed = 0;
  void report(const std::string& name, const std::string& problem) {
    ++checks;
    if (!problem.empty()) {
      ++failed;
      std::printf("FAIL %s: %s\n", name.c_str(), problem.c_str());
    } else {
      std::printf("ok   %s\n", name.c_str());
    }
    std::fflush(stdout);
  }
};

// ---- causal_conv1d_varlen cases

struct VarlenCase {
  std::string name;
  ScalarType xdt = ScalarType::bf16, wdt = ScalarType::bf16, bdt = ScalarType::bf16, sdt = ScalarType::bf16;
  int W = 4, S = 3;
  bool channel_last = false;
  int64_t D = 64;
  std::vector<int64_t> lens;
  int64_t ld_extra = 0;  // row stride beyond the minimum
  int64_t x_offset = 0;  // elements before the view (misaligns when odd)
  bool bias = true, silu = true;
  int init_mode = 2;  // 0: no tensor; 1: all true; 2: alternating
  int state_layout = 0;
  int64_t extra_lines = 5;
  bool permute = true;
  int pad_every = 0;  // every n-th sequence padded
  int64_t pad_id = -1;
  int oor_seq = -1;      // a sequence given an out-of-range index
  int64_t tile = 0;      // tile override (DELTAKERN_NATIVE_TILE)
  int vec_bytes = 0;     // channel-last bytes a thread (DELTAKERN_NATIVE_CL_VEC); 0: the plan's
  bool clusters = true;  // DELTAKERN_NATIVE_CLUSTERS=0: channel-last tiles park, the finish pass writes
  int time_staged = -1;  // DELTAKERN_NATIVE_TIME_STAGED: 0 never, 1 wherever whole rows fit; -1 the plan's
  int time_heads = -1;   // DELTAKERN_NATIVE_TIME_HEADS: staged sequence heads 0 after, 1 before the runs
  int64_t q_shift = 0;   // q[0] > 0: tokens before the first sequence belong to none
  // causal_conv1d_varlen_out: the result goes into a separate out of x's layout, with its own row
  // pitch (out_ld_extra beyond the minimum) and offset (out_offset elements; odd breaks 16-byte
  // alignment), filled with a sentinel first; x must not change at all.
  bool out = false;
  int64_t out_ld_extra = 0, out_offset = 0;
};

struct VarlenInputs {
  int64_t T, B;
  std::vector<int32_t> q, ci;
  std::vector<uint8_t> init;
  DeviceBuffer dq, dci, dinit;
};

VarlenInputs make_varlen_inputs(const VarlenCase& c, int64_t lines) {
  VarlenInputs in;
  in.B = static_cast<int64_t>(c.lens.size());
  in.q.push_back(static_cast<int32_t>(c.q_shift));
  for (auto l : c.lens) in.q.push_back(in.q.back() + static_cast<int32_t>(l));
  in.T = in.q.back();
  std::vector<int32_t> perm(lines);
  std::iota(perm.begin(), perm.end(), 0);
  if (c.permute) std::shuffle(perm.begin(), perm.end(), rng);
  for (int64_t b = 0; b < in.B; ++b) {
    int32_t idx = perm[b];
    if (c.pad_every > 0 && b % c.pad_every == c.pad_every - 1) idx = static_cast<int32_t>(c.pad_id);
    if (b == c.oor_seq) idx = static_cast<int32_t>(lines + 3);
    in.ci.push_back(idx);
    in.init.push_back(c.init_mode == 1 ? 1 : (c.init_mode == 2 ? (b % 2) : 0));
  }
  in.dq = DeviceBuffer(in.q.size() * 4);
  DKGPU_CHECK(cudaMemcpy(in.dq.get(), in.q.data(), in.q.size() * 4, cudaMemcpyHostToDevice));
  in.dci = DeviceBuffer(std::max<size_t>(1, in.ci.size()) * 4);
  in.dinit = DeviceBuffer(std::max<size_t>(1, in.init.size()));
  if (in.B > 0) {
    DKGPU_CHECK(cudaMemcpy(in.dci.get(), in.ci.data(), in.ci.size() * 4, cudaMemcpyHostToDevice));
    DKGPU_CHECK(cudaMemcpy(in.dinit.get(), in.init.data(), in.init.size(), cudaMemcpyHostToDevice));
  }
  return in;
}

// The reference's pool after the call written into `states` (the pool's host copy, in its layout):
// the lines the call wrote; every other element keeps its bits.
void write_states(const std::vector<double>& after, const std::vector<uint8_t>& line_live, const Pool& pool,
                  HostArray& states) {
  for (int64_t l = 0; l < pool.lines; ++l)
    if (line_live[static_cast<size_t>(l)])
      for (int64_t d = 0; d < pool.D; ++d)
        for (int64_t s = 0; s < pool.S; ++s)
          states.set(pool.at(l, d, s), after[static_cast<size_t>((l * pool.D + d) * pool.S + s)]);
}

// The float64 reference (conformance's reference::Varlen) of a varlen case: out_at(d, t) of every
// token of a live sequence (the tokens before q[0] and those of skipped sequences have none), and
// the pool after the call into `states`.
void varlen_reference(const VarlenCase& c, const VarlenInputs& in, const Weights& wts,
                      const std::function<double(int64_t, int64_t)>& x,
                      const std::function<void(int64_t, int64_t, double)>& out_at, const Pool& pool,
                      HostArray& states) {
  ref::VarlenProblem p;
  p.dim = c.D;
  p.tokens = in.T;
  p.width = c.W;
  p.state_len = c.S;
  p.lines = pool.lines;
  p.x = x;
  p.weight = wts.weight();
  p.bias = wts.bias();
  p.states = [&pool](int64_t l, int64_t d, int64_t s) { return pool.host.get(pool.at(l, d, s)); };
  p.query_start_loc = in.q;
  p.cache_indices = in.ci;
  if (c.init_mode != 0) p.has_initial_state = in.init;  // no tensor: no sequence has a prior
  p.act = wts.act();
  p.pad_slot_id = c.pad_id;
  const ref::Varlen r(std::move(p));
  for (int64_t b = 0; b < in.B; ++b)
    if (r.sequence_live(b))
      for (int64_t t = in.q[b]; t < in.q[b + 1]; ++t)
        for (int64_t d = 0; d < c.D; ++d) out_at(d, t, r.out(d, t).value);
  write_states(r.states(), r.line_live(), pool, states);
}

// The check's bound on |got - expected| / (1 + |expected|) for an output of dtype t: float32
// accumulation and one rounding to t.
double tolerance(ScalarType t) { return t == ScalarType::f32 ? 2e-5 : t == ScalarType::f16 ? 2e-3 : 1.6e-2; }

// Elements with a reference must match it; every other one (outside the view, skipped tokens or
// rows, everything where ref is all NaN) must hold its bits from before the call.
std::string compare_x(const HostArray& got, const HostArray& before, const std::vector<double>& ref,
                      const std::vector<char>& in_view, ScalarType dt, const char* what = "x") {
  const double tol = tolerance(dt);
  for (size_t i = 0; i < got.size(); ++i) {
    if (!in_view[i] || std::isnan(ref[i])) {
      if (!got.same_bits(before, i))
        return std::string(what) + " element " + std::to_string(i) + " outside the outputs changed";
      continue;
    }
    const double g = got.get(i), r = ref[i];
    if (!(std::fabs(g - r) <= tol * (1.0 + std::fabs(r))))
      return std::string(what) + "[" + std::to_string(i) + "] = " + std::to_string(g) + ", expected " +
             std::to_string(r);
  }
  return {};
}

// What an out-variant's out holds before the call: values no output takes (|output| stays far
// below 200 here), so an output left unwritten or a write where none belongs both show.
double sentinel(size_t i) { return 200.0 + static_cast<double>(i % 53); }

std::string compare_pool(const HostArray& got, const HostArray& ref) {
  for (size_t i = 0; i < got.size(); ++i) {
    const double g = got.get(i), r = ref.get(i);
    if (std::isnan(r) ? !got.same_bits(ref, i) : !(g == r))
      return "state element " + std::to_string(i) + " = " + std::to_string(g) + ", expected " +
             std::to_string(r);
  }
  return {};
}

// Plugin knobs (DELTAKERN_NATIVE_*) for one case: the plugin is initialized with them, and again
// without them when the case ends. No knobs, no reinitialization.
class KnobScope {
 public:
  KnobScope(Plugin& plugin, const std::vector<std::pair<const char*, std::string>>& knobs)
      : plugin_(plugin), active_(!knobs.empty()) {
    if (!active_) return;
    for (const auto& [name, value] : knobs) setenv(name, value.c_str(), 1);
    plugin_.init();
    for (const auto& [name, value] : knobs) unsetenv(name);
  }
  KnobScope(const KnobScope&) = delete;
  KnobScope& operator=(const KnobScope&) = delete;
  ~KnobScope() noexcept(false) {  // a failing init throws to the caller, as it would from the case
    if (active_) plugin_.init();
  }

 private:
  Plugin& plugin_;
  bool active_;
};

std::string run_varlen_case(Plugin& plugin, const VarlenCase& c, cudaStream_t stream, bool capture = false) {
  std::vector<std::pair<const char*, std::string>> knobs;
  if (c.tile > 0) knobs.emplace_back("DELTAKERN_NATIVE_TILE", std::to_string(c.tile));
  if (c.vec_bytes > 0) knobs.emplace_back("DELTAKERN_NATIVE_CL_VEC", std::to_string(c.vec_bytes));
  if (!c.clusters) knobs.emplace_back("DELTAKERN_NATIVE_CLUSTERS", "0");
  if (c.time_staged >= 0) knobs.emplace_back("DELTAKERN_NATIVE_TIME_STAGED", std::to_string(c.time_staged));
  if (c.time_heads >= 0) knobs.emplace_back("DELTAKERN_NATIVE_TIME_HEADS", std::to_string(c.time_heads));
  const KnobScope scope(plugin, knobs);
  const int64_t B = static_cast<int64_t>(c.lens.size());
  const int64_t lines = B + c.extra_lines;
  Pool pool(c.sdt, lines, c.D, c.S, c.state_layout);
  VarlenInputs in = make_varlen_inputs(c, lines);
  for (int64_t b = 0; b < B; ++b)
    if (in.ci[b] >= 0 && in.ci[b] < lines) pool.fill_line(in.ci[b]);
  Weights wts(c.wdt, c.bdt, c.D, c.W, c.bias, c.silu);
  const int64_t T = in.T + 0;
  // x storage: time-contiguous (D rows of ld >= T) or channel-last (T rows of ld >= D).
  const int64_t ld = (c.channel_last ? c.D : T) + c.ld_extra;
  const int64_t rows = c.channel_last ? T : c.D;
  const size_t n = static_cast<size_t>(c.x_offset + rows * ld + 7);
  HostArray xh(c.xdt, n);
  for (size_t i = 0; i < n; ++i) xh.set(i, uniform(-1, 1));
  auto xi = [&](int64_t d, int64_t t) -> size_t {
    return c.x_offset + (c.channel_last ? t * ld + d : d * ld + t);
  };
  std::vector<char> in_view(n, 0);
  std::vector<double> ref(n, std::nan(""));  // stays all NaN for an out-variant: x must not change
  for (int64_t d = 0; d < c.D; ++d)
    for (int64_t t = 0; t < T; ++t) in_view[xi(d, t)] = 1;
  // out (out-variant only): x's layout with its own pitch and offset, sentinels everywhere.
  const int64_t out_ld = (c.channel_last ? c.D : T) + c.out_ld_extra;
  const size_t n_out = c.out ? static_cast<size_t>(c.out_offset + rows * out_ld + 7) : 0;
  HostArray oh(c.xdt, n_out);
  for (size_t i = 0; i < n_out; ++i) oh.set(i, sentinel(i));
  auto oi = [&](int64_t d, int64_t t) -> size_t {
    return c.out_offset + (c.channel_last ? t * out_ld + d : d * out_ld + t);
  };
  std::vector<char> out_in_view(n_out, 0);
  std::vector<double> out_ref(n_out, std::nan(""));  // NaN: skipped tokens and slack keep the sentinel
  if (c.out)
    for (int64_t d = 0; d < c.D; ++d)
      for (int64_t t = 0; t < T; ++t) out_in_view[oi(d, t)] = 1;
  HostArray ref_states = pool.host;
  varlen_reference(
      c, in, wts, [&](int64_t d, int64_t t) { return xh.get(xi(d, t)); },
      [&](int64_t d, int64_t t, double v) { (c.out ? out_ref[oi(d, t)] : ref[xi(d, t)]) = v; }, pool,
      ref_states);

  DeviceBuffer xd(xh.bytes.size()), od(oh.bytes.size());
  xh.upload(xd.get());
  if (c.out) oh.upload(od.get());
  pool.host.upload(pool.dev.get());
  const View xv(xd.get(), 0, to_dl(c.xdt), {c.D, T},
                c.channel_last ? std::vector<int64_t>{1, ld} : std::vector<int64_t>{ld, 1},
                c.x_offset * size_of(c.xdt));
  const View ov(od.get(), 0, to_dl(c.xdt), {c.D, T},
                c.channel_last ? std::vector<int64_t>{1, out_ld} : std::vector<int64_t>{out_ld, 1},
                c.out_offset * size_of(c.xdt));
  const View wv = wts.wv(0), bv = wts.bv(0), sv = pool.view(0);
  const View qv(in.dq.get(), 0, to_dl(ScalarType::i32), {B + 1}, {1});
  const View civ(in.dci.get(), 0, to_dl(ScalarType::i32), {B}, {1});
  const View iv(in.dinit.get(), 0, to_dl(ScalarType::u8), {B}, {1});
  std::vector<const DLTensor*> tensors = {xv.get(), wv.get(),  c.bias ? bv.get() : nullptr,     sv.get(),
                                          qv.get(), civ.get(), c.init_mode ? iv.get() : nullptr};
  if (c.out) tensors.push_back(ov.get());  // DK_VARLEN_OUT, after the other tensors
  const char* op = c.out ? DK_OP_CAUSAL_CONV1D_VARLEN_OUT : DK_OP_CAUSAL_CONV1D_VARLEN;
  const std::vector<dk_scalar> scalars = {str_scalar(c.silu ? "silu" : "none"), int_scalar(c.pad_id),
                                          none_scalar()};
  std::string err;
  if (!capture) {
    if (plugin.run(op, tensors, scalars, stream, &err) != DK_OK) return "run: " + err;
  } else {
    // Capture in global mode with garbage in x, out and the pool, then write the real inputs into
    // the same buffers and replay: the graph must read them at replay time.
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    DKGPU_CHECK(cudaMemsetAsync(xd.get(), 0x7f, xh.bytes.size(), stream));
    if (c.out) DKGPU_CHECK(cudaMemsetAsync(od.get(), 0x7f, oh.bytes.size(), stream));
    DKGPU_CHECK(cudaStreamSynchronize(stream));
    DKGPU_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
    const int32_t st = plugin.run(op, tensors, scalars, stream, &err);
    DKGPU_CHECK(cudaStreamEndCapture(stream, &graph));
    if (st != DK_OK) return "run under capture: " + err;
    DKGPU_CHECK(cudaGraphInstantiate(&exec, graph, 0));
    xh.upload(xd.get());
    if (c.out) oh.upload(od.get());
    pool.host.upload(pool.dev.get());
    DKGPU_CHECK(cudaGraphLaunch(exec, stream));
    DKGPU_CHECK(cudaStreamSynchronize(stream));
    DKGPU_CHECK(cudaGraphExecDestroy(exec));
    DKGPU_CHECK(cudaGraphDestroy(graph));
  }
  DKGPU_CHECK(cudaStreamSynchronize(stream));
  HostArray xg(c.xdt, n), og(c.xdt, n_out), pg(c.sdt, pool.host.size());
  xg.download(xd.get());
  if (c.out) og.download(od.get());
  pg.download(pool.dev.get());
  std::string problem = compare_x(xg, xh, ref, in_view, c.xdt);
  if (problem.empty() && c.out) problem = compare_x(og, oh, out_ref, out_in_view, c.xdt, "out");
  if (problem.empty()) problem = compare_pool(pg, ref_states);
  const uint32_t flags = plugin.check_errors(stream);
  if (problem.empty() && (c.oor_seq >= 0) != ((flags & DK_DEVICE_ERROR_CACHE_INDEX_OUT_OF_RANGE) != 0))
    problem = "error word " + std::to_string(flags) + " (an out-of-range index " +
              (c.oor_seq >= 0 ? "was" : "was not") + " given)";
  if (problem.empty() && plugin.check_errors(stream) != 0) problem = "error word not cleared";
  return problem;
}

// ---- causal_conv1d_update cases

struct UpdateCase {
  std::string name;
  ScalarType xdt = ScalarType::bf16, wdt = ScalarType::bf16, sdt = ScalarType::bf16;
  int W = 4, S = 3, Tq = 1;
  int64_t D = 256, batch = 8;
  bool x3d = false;          // (batch, D, Tq) even for Tq == 1
  bool x_chan_last = false;  // (batch, D, Tq) with channel stride 1 (time stride D)
  int64_t batch_extra = 0;   // batch stride beyond the minimum
  int state_layout = 0;
  bool circular = false;
  bool indices = true;
  int pad_every = 0;
  int oor_row = -1;
  bool bias = true, silu = true;
  int rows = 0;  // DELTAKERN_NATIVE_UPDATE_ROWS: rows a block of the 16-byte kernel; 0: the launcher's
  // causal_conv1d_update_out: the result goes into a separate out of x's shape and layout with
  // its own strides: the contiguous dimension's neighbour (channel pitch Tq + out_pitch_extra
  // where x is time-contiguous, time pitch D + out_pitch_extra where it is channel-last), the
  // batch pitch (out_batch_extra beyond that) and an offset (out_offset elements; odd breaks
  // 16-byte alignment), sentinels first; x must not change at all.
  bool out = false;
  int64_t out_pitch_extra = 0, out_batch_extra = 0, out_offset = 0;
};

// The float64 reference (conformance's reference::Update) of an update case: out_at(b, d, t) of
// every token of a live row (padded and out-of-range rows have none), and the pool after the
// call into `states`.
void update_reference(const UpdateCase& c, const std::vector<int32_t>& idx,
                      const std::vector<int32_t>& seqlens, const Weights& wts,
                      const std::function<double(int64_t, int64_t, int64_t)>& x,
                      const std::function<void(int64_t, int64_t, int64_t, double)>& out_at, const Pool& pool,
                      HostArray& states) {
  ref::UpdateProblem p;
  p.batch = c.batch;
  p.dim = c.D;
  p.tokens = c.Tq;
  p.width = c.W;
  p.state_len = c.S;
  p.lines = pool.lines;
  p.x = x;
  p.states = [&pool](int64_t l, int64_t d, int64_t s) { return pool.host.get(pool.at(l, d, s)); };
  p.weight = wts.weight();
  p.bias = wts.bias();
  p.state_indices = idx;
  if (c.circular) p.cache_seqlens = seqlens;  // none: shift mode
  p.act = wts.act();
  p.pad_slot_id = -1;
  const ref::Update r(std::move(p));
  for (int64_t b = 0; b < c.batch; ++b)
    if (r.row_live(b))
      for (int64_t d = 0; d < c.D; ++d)
        for (int64_t t = 0; t < c.Tq; ++t) out_at(b, d, t, r.out(b, d, t).value);
  write_states(r.states(), r.line_live(), pool, states);
}

std::string run_update_case(Plugin& plugin, const UpdateCase& c, cudaStream_t stream, bool capture = false) {
  std::vector<std::pair<const char*, std::string>> knobs;
  if (c.rows > 0) knobs.emplace_back("DELTAKERN_NATIVE_UPDATE_ROWS", std::to_string(c.rows));
  const KnobScope scope(plugin, knobs);
  const int64_t lines = c.batch + 3;
  Pool pool(c.sdt, lines, c.D, c.S, c.state_layout);
  Weights wts(c.wdt, c.wdt, c.D, c.W, c.bias, c.silu);
  std::vector<int32_t> perm(lines), idx(c.batch), seqlens(c.batch);
  std::iota(perm.begin(), perm.end(), 0);
  std::shuffle(perm.begin(), perm.end(), rng);
  for (int64_t b = 0; b < c.batch; ++b) {
    idx[b] = c.indices ? perm[b] : static_cast<int32_t>(b);
    if (c.pad_every > 0 && b % c.pad_every == c.pad_every - 1) idx[b] = -1;
    if (b == c.oor_row) idx[b] = static_cast<int32_t>(lines + 7);
    seqlens[b] = static_cast<int32_t>(rng() % 50);
    if (idx[b] >= 0 && idx[b] < lines) pool.fill_line(idx[b]);
  }
  // x (batch, D, Tq): compact, or channel-last per row (time stride D).
  const int64_t sc = c.x_chan_last ? 1 : c.Tq, st = c.x_chan_last ? c.D : 1;
  const int64_t sb = c.D * c.Tq + c.batch_extra;
  const size_t n = static_cast<size_t>(c.batch * sb + 5);
  HostArray xh(c.xdt, n);
  for (size_t i = 0; i < n; ++i) xh.set(i, uniform(-1, 1));
  auto xi = [&](int64_t b, int64_t d, int64_t t) -> size_t { return b * sb + d * sc + t * st; };
  std::vector<char> in_view(n, 0);
  std::vector<double> ref(n, std::nan(""));  // stays all NaN for an out-variant: x must not change
  // out (out-variant only), sentinels everywhere.
  const int64_t osc = c.x_chan_last ? 1 : c.Tq + c.out_pitch_extra;
  const int64_t ost = c.x_chan_last ? c.D + c.out_pitch_extra : 1;
  const int64_t osb = (c.x_chan_last ? c.Tq * ost : c.D * osc) + c.out_batch_extra;
  const size_t n_out = c.out ? static_cast<size_t>(c.out_offset + c.batch * osb + 5) : 0;
  HostArray oh(c.xdt, n_out);
  for (size_t i = 0; i < n_out; ++i) oh.set(i, sentinel(i));
  auto oi = [&](int64_t b, int64_t d, int64_t t) -> size_t {
    return c.out_offset + b * osb + d * osc + t * ost;
  };
  std::vector<char> out_in_view(n_out, 0);
  std::vector<double> out_ref(n_out, std::nan(""));  // NaN: skipped rows and slack keep the sentinel
  auto ref_at = [&](int64_t b, int64_t d, int64_t t) -> double& {
    return c.out ? out_ref[oi(b, d, t)] : ref[xi(b, d, t)];
  };
  for (int64_t b = 0; b < c.batch; ++b)
    for (int64_t d = 0; d < c.D; ++d)
      for (int64_t t = 0; t < c.Tq; ++t) {
        in_view[xi(b, d, t)] = 1;
        if (c.out) out_in_view[oi(b, d, t)] = 1;
      }
  HostArray ref_states = pool.host;
  update_reference(
      c, idx, seqlens, wts, [&](int64_t b, int64_t d, int64_t t) { return xh.get(xi(b, d, t)); },
      [&](int64_t b, int64_t d, int64_t t, double v) { ref_at(b, d, t) = v; }, pool, ref_states);

  DeviceBuffer xd(xh.bytes.size()), od(oh.bytes.size()), di(c.batch * 4 + 4), ds(c.batch * 4 + 4);
  xh.upload(xd.get());
  if (c.out) oh.upload(od.get());
  pool.host.upload(pool.dev.get());
  DKGPU_CHECK(cudaMemcpy(di.get(), idx.data(), c.batch * 4, cudaMemcpyHostToDevice));
  DKGPU_CHECK(cudaMemcpy(ds.get(), seqlens.data(), c.batch * 4, cudaMemcpyHostToDevice));
  const bool three = c.x3d || c.Tq > 1 || c.x_chan_last;
  const View xv = three ? View(xd.get(), 0, to_dl(c.xdt), {c.batch, c.D, c.Tq}, {sb, sc, st})
                        : View(xd.get(), 0, to_dl(c.xdt), {c.batch, c.D}, {sb, sc});
  const uint64_t out_bytes = c.out_offset * size_of(c.xdt);
  const View ov = three ? View(od.get(), 0, to_dl(c.xdt), {c.batch, c.D, c.Tq}, {osb, osc, ost}, out_bytes)
                        : View(od.get(), 0, to_dl(c.xdt), {c.batch, c.D}, {osb, osc}, out_bytes);
  const View wv = wts.wv(0), bv = wts.bv(0), sv = pool.view(0);
  const View iv(di.get(), 0, to_dl(ScalarType::i32), {c.batch}, {1}),
      lv(ds.get(), 0, to_dl(ScalarType::i32), {c.batch}, {1});
  std::vector<const DLTensor*> tensors = {
      xv.get(), sv.get(), wv.get(), c.bias ? bv.get() : nullptr, iv.get(), c.circular ? lv.get() : nullptr};
  if (c.out) tensors.push_back(ov.get());  // DK_UPDATE_OUT, after the other tensors
  const char* op = c.out ? DK_OP_CAUSAL_CONV1D_UPDATE_OUT : DK_OP_CAUSAL_CONV1D_UPDATE;
  const std::vector<dk_scalar> scalars = {str_scalar(c.silu ? "silu" : "none"), int_scalar(-1)};
  std::string err;
  if (!capture) {
    if (plugin.run(op, tensors, scalars, stream, &err) != DK_OK) return "run: " + err;
  } else {
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    DKGPU_CHECK(cudaMemsetAsync(xd.get(), 0x7f, xh.bytes.size(), stream));
    if (c.out) DKGPU_CHECK(cudaMemsetAsync(od.get(), 0x7f, oh.bytes.size(), stream));
    DKGPU_CHECK(cudaStreamSynchronize(stream));
    DKGPU_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
    const int32_t status = plugin.run(op, tensors, scalars, stream, &err);
    DKGPU_CHECK(cudaStreamEndCapture(stream, &graph));
    if (status != DK_OK) return "run under capture: " + err;
    DKGPU_CHECK(cudaGraphInstantiate(&exec, graph, 0));
    xh.upload(xd.get());
    if (c.out) oh.upload(od.get());
    pool.host.upload(pool.dev.get());
    DKGPU_CHECK(cudaGraphLaunch(exec, stream));
    DKGPU_CHECK(cudaStreamSynchronize(stream));
    DKGPU_CHECK(cudaGraphExecDestroy(exec));
    DKGPU_CHECK(cudaGraphDestroy(graph));
  }
  DKGPU_CHECK(cudaStreamSynchronize(stream));
  HostArray xg(c.xdt, n), og(c.xdt, n_out), pg(c.sdt, pool.host.size());
  xg.download(xd.get());
  if (c.out) og.download(od.get());
  pg.download(pool.dev.get());
  std::string problem = compare_x(xg, xh, ref, in_view, c.xdt);
  if (problem.empty() && c.out) problem = compare_x(og, oh, out_ref, out_in_view, c.xdt, "out");
  if (problem.empty()) problem = compare_pool(pg, ref_states);
  const uint32_t flags = plugin.check_errors(stream);
  if (problem.empty() && (c.oor_row >= 0) != ((flags & DK_DEVICE_ERROR_CACHE_INDEX_OUT_OF_RANGE) != 0))
    problem = "error word " + std::to_string(flags);
  return problem;
}

std::vector<VarlenCase> varlen_cases(bool quick) {
  std::vector<VarlenCase> cases;
  const std::vector<int64_t> edge = {0, 1, 2, 3, 4, 5, 7, 8, 9, 15, 16, 17, 63, 64, 65, 130, 300};
  for (ScalarType xdt : {ScalarType::f32, ScalarType::f16, ScalarType::bf16})
    for (int W : {2, 3, 4})
      for (bool cl : {false, true}) {
        VarlenCase c;
        c.xdt = c.wdt = c.bdt = c.sdt = xdt;
        c.W = W;
        c.S = W - 1;
        c.channel_last = cl;
        c.lens = edge;
        c.name = std::string("varlen/") + short_name(xdt) + "/w" + std::to_string(W) +
                 (cl ? "/channel_last" : "/time");
        cases.push_back(c);
        if (quick) continue;
        VarlenCase m = c;  // mixed dtypes: f32 weights, bias and states
        if (xdt != ScalarType::f32) {
          m.wdt = m.bdt = m.sdt = ScalarType::f32;
          m.name += "/f32-weights-states";
          cases.push_back(m);
          m.wdt = xdt;
          m.bdt = ScalarType::f32;
          m.sdt = xdt;
          m.name = c.name + "/f32-bias";
          cases.push_back(m);
        }
      }
  auto add = [&](VarlenCase c, const std::string& tag) {
    c.name = "varlen/" + tag;
    cases.push_back(c);
  };
  for (bool cl : {false, true}) {
    const std::string L = cl ? "channel_last" : "time";
    VarlenCase c;
    c.channel_last = cl;
    c.lens = {5, 0, 1, 200, 3, 17};
    c.bias = false;
    c.silu = false;
    add(c, L + "/no-bias/no-act");
    c = VarlenCase{};
    c.channel_last = cl;
    c.lens = {33, 1, 2, 150, 0, 9};
    c.S = 6;
    c.W = 3;
    add(c, L + "/S6-w3");
    c.S = 2;
    c.W = 2;
    c.lens = {1, 1, 1, 0, 2, 40};
    add(c, L + "/S2-w2-short");
    c = VarlenCase{};
    c.channel_last = cl;
    c.lens = {40, 7, 0, 90, 3};
    for (int lay : {1, 2}) {
      c.state_layout = lay;
      add(c, L + "/state-layout" + std::to_string(lay));
    }
    c = VarlenCase{};
    c.channel_last = cl;
    c.lens = {50, 2, 60, 1, 0, 80};
    c.pad_every = 2;
    add(c, L + "/padded");
    c.pad_id = 7777;
    add(c, L + "/padded-custom-id");
    c.pad_every = 0;
    c.pad_id = -1;
    c.oor_seq = 3;
    add(c, L + "/out-of-range-index");
    c = VarlenCase{};
    c.channel_last = cl;
    c.lens = {30, 20, 70};
    c.init_mode = 0;
    add(c, L + "/no-init-tensor");
    c.init_mode = 1;
    c.permute = false;
    c.extra_lines = 0;
    add(c, L + "/identity-indices");
    c = VarlenCase{};
    c.channel_last = cl;
    c.lens = {100, 27};
    c.q_shift = 9;
    add(c, L + "/gap-before-first");
    // more than 32 sequences in one 512-token chunk (the time walker's table windows)
    c = VarlenCase{};
    c.channel_last = cl;
    for (int i = 0; i < 150; ++i) c.lens.push_back(i % 6);
    c.pad_every = 5;
    add(c, L + "/dense-short");
    if (cl) {
      // more than 64 sequences (one-token, empty, padded) in one clustered tile: past its table
      c = VarlenCase{};
      c.channel_last = true;
      c.tile = 64;
      c.lens = {5};
      for (int i = 0; i < 150; ++i) c.lens.push_back(i % 3 == 0 ? 0 : 1);
      c.lens.push_back(70);
      c.pad_every = 6;
      add(c, L + "/tile-of-90-seqs");
    }
    // sequences across several chunks and chunk edges, a state longer than the halo
    c = VarlenCase{};
    c.channel_last = cl;
    c.lens = {1500, 3, 700, 1, 0, 2, 513};
    c.S = 8;
    add(c, L + "/long-S8");
    // strides and alignment: padded rows, a fused-QKV-like slice (odd offset breaks 16 B alignment)
    c = VarlenCase{};
    c.channel_last = cl;
    c.lens = {77, 5, 123, 1};
    c.ld_extra = cl ? 2 * c.D : 24;
    add(c, L + "/strided-rows");
    c.x_offset = 3;
    c.ld_extra = cl ? 2 * c.D + 1 : 25;
    add(c, L + "/misaligned-scalar-path");
    c.x_offset = 0;
    c.ld_extra = 0;
    c.D = 60;  // D not a multiple of the 16-byte vector width (channel-last: the 8-byte path)
    add(c, L + "/D60");
    c.D = 58;  // nor of the 8-byte one (channel-last: the scalar path)
    add(c, L + "/D58");
    // token tiles: many tile boundaries, sequences crossing one or several, ending right
    // after a boundary (state from the previous tile's parked tail), S > tail, empty at the end
    for (int64_t tile : {64, 128}) {
      if (!cl && tile == 64) continue;
      for (int S : {3, 5, 8}) {
        VarlenCase t;
        t.channel_last = cl;
        t.tile = cl ? tile : 512;
        t.S = S;
        t.lens = cl ? std::vector<int64_t>{63, 1, 65, 2, 1, 200, 130, 0, 64, 62, 3, 0}
                    : std::vector<int64_t>{2047, 1, 2049, 2, 1, 3000, 2100, 0, 2048, 2046, 3, 0, 1023, 1025};
        t.init_mode = 2;
        add(t, L + "/tiles" + std::to_string(t.tile) + "/S" + std::to_string(S));
        t.xdt = t.wdt = t.bdt = t.sdt = ScalarType::f32;
        add(t, L + "/tiles" + std::to_string(t.tile) + "/S" + std::to_string(S) + "/f32");
      }
    }
    // Narrow widths with a longer state (S = 3 > W - 1) and sequences shorter than the state, all
    // with a prior: the new state reaches into the prior past the taps the width uses (channel-
    // last writes a short state from its window only where the window holds those entries).
    for (int W : {2, 3}) {
      VarlenCase narrow;
      narrow.channel_last = cl;
      narrow.W = W;
      narrow.S = 3;
      narrow.lens = {1, 2, 1, 5, 2, 0, 40, 1};
      narrow.init_mode = 1;
      add(narrow, L + "/short-seqs-S3-W" + std::to_string(W));
      narrow.D = 4160;  // rows over 8 KB, forced onto the 16-byte path
      narrow.vec_bytes = 16;
      add(narrow, L + "/short-seqs-S3-W" + std::to_string(W) + "/wide-rows");
    }
    // A crowded tail: more than 32 sequences (one-token, empty and padded ones) end in the last
    // tail_len = S tokens before a tile boundary, so the finish pass's lookups leave the 32
    // sequences its warps hold; then one crosses two boundaries.
    VarlenCase crowd;
    crowd.channel_last = cl;
    crowd.tile = cl ? 64 : 512;
    crowd.S = 40;
    crowd.lens = {cl ? 25 : 473};
    crowd.lens.insert(crowd.lens.end(), 35, 1);
    crowd.lens.insert(crowd.lens.end(), 8, 0);
    crowd.lens.insert(crowd.lens.end(), {cl ? 70 : 600, 5});
    crowd.pad_every = 7;
    add(crowd, L + "/crowded-tail");
    if (cl) {
      // Token rows over 8 KB in batches over 4096 tokens take 16-byte threads (every other case
      // 8-byte ones): once as the plan chooses, then forced onto short batches, with and without
      // token tiles, widths 2-4, f16 and f32.
      VarlenCase wide;
      wide.channel_last = true;
      wide.D = 4160;
      wide.lens = {3000, 1, 1200, 0, 5};
      wide.pad_every = 4;
      add(wide, L + "/wide-rows/long");
      wide.lens = {77, 5, 123, 1, 0, 40};
      wide.vec_bytes = 16;
      add(wide, L + "/wide-rows");
      wide.tile = 64;
      add(wide, L + "/wide-rows/tiles64");
      wide.tile = 0;
      wide.W = 2;
      wide.silu = false;
      add(wide, L + "/wide-rows/W2");
      wide.W = 3;
      wide.xdt = wide.wdt = wide.bdt = wide.sdt = ScalarType::f16;
      add(wide, L + "/wide-rows/W3/f16");
      wide.W = 4;
      wide.silu = true;
      wide.D = 2080;
      wide.xdt = wide.wdt = wide.bdt = wide.sdt = ScalarType::f32;
      add(wide, L + "/wide-rows/f32");
    }
    VarlenCase big;
    big.channel_last = cl;
    big.D = 512;
    big.lens = {3000, 1, 2047, 2049, 5};
    add(big, L + "/long-default-tiles");
    if (!cl) {
      // Rows over 4096 tokens on enough rows for the row walker (D >= 8 per SM on GPUs of up to
      // 260 SMs) walk its long chunks (plan_varlen's short_rows); every case above the short ones.
      VarlenCase rows;
      rows.D = 2080;
      rows.lens = {1500, 3, 2600, 1, 0, 700, 33};
      rows.pad_every = 4;
      add(rows, L + "/long-rows-walker");
    }
    {
      // Serving shapes: 64 sequences of mixed lengths in 1k tokens on 8192 channels, some padded;
      // many one- and two-token sequences (a time-staged block then holds only four rows: the
      // priors' share of shared memory; a channel-last tile meets dozens of sequence edges); 4k
      // tokens in 200 sequences.
      VarlenCase serving;
      serving.channel_last = cl;
      serving.D = 8192;
      serving.xdt = serving.wdt = serving.bdt = serving.sdt = ScalarType::bf16;
      for (int i = 0; i < 64; ++i) serving.lens.push_back(1 + (i * 37) % 31);
      serving.lens.back() += 1024 - std::accumulate(serving.lens.begin(), serving.lens.end(), int64_t{0});
      serving.pad_every = 9;
      if (!quick) add(serving, L + "/serving-1k-64");  // these three: not in the sanitizers' --quick runs
      VarlenCase dense;
      dense.channel_last = cl;
      dense.D = 1024;
      for (int i = 0; i < 1000; ++i) dense.lens.push_back(1 + i % 2);
      dense.pad_every = 11;
      if (!quick) add(dense, L + "/1000-short-seqs");
      VarlenCase mid;
      mid.channel_last = cl;
      mid.D = 2048;
      mid.S = 5;
      for (int i = 0; i < 200; ++i) mid.lens.push_back((i * 53) % 41);
      mid.lens.back() += 4096 - std::accumulate(mid.lens.begin(), mid.lens.end(), int64_t{0});
      if (!quick) add(mid, L + "/4k-200-seqs-S5");
    }
    VarlenCase empty;
    empty.channel_last = cl;
    empty.lens = {0, 0, 0};
    empty.init_mode = 2;
    add(empty, L + "/all-empty");
  }
  // On sm_90 channel-last calls of up to 16 tiles (width 4, S <= 3) run in one cluster (most of
  // the cases above): each of those once more with the tiles parked for the finish pass. Time-
  // contiguous batches of up to 4096 tokens on aligned rows stage whole rows (most of the cases
  // above): each time-contiguous case once more with staging forced on, with the sequences' heads
  // after and before the runs, and once forced off (the row walker or the tiles).
  const size_t n = cases.size();
  for (size_t i = 0; i < n; ++i) {
    if (cases[i].channel_last) {
      VarlenCase parked = cases[i];
      parked.clusters = false;
      parked.name += "/no-clusters";
      cases.push_back(parked);
    } else if (cases[i].tile == 0) {
      for (int staged : {0, 1}) {
        VarlenCase forced = cases[i];
        forced.time_staged = staged;
        if (!staged) {
          forced.name += "/not-staged";
          cases.push_back(forced);
          continue;
        }
        for (int heads : {0, 1}) {
          VarlenCase h = forced;
          h.time_heads = heads;
          h.name += heads ? "/staged-heads-first" : "/staged-heads-after";
          cases.push_back(h);
        }
      }
    }
  }
  return cases;
}

std::vector<UpdateCase> update_cases(bool quick) {
  std::vector<UpdateCase> cases;
  for (ScalarType xdt : {ScalarType::f32, ScalarType::f16, ScalarType::bf16})
    for (int W : {2, 3, 4}) {
      UpdateCase c;
      c.xdt = c.wdt = c.sdt = xdt;
      c.W = W;
      c.S = W - 1;
      c.name = std::string("update/") + short_name(xdt) + "/w" + std::to_string(W);
      cases.push_back(c);
      if (quick) continue;
      UpdateCase m = c;
      if (xdt != ScalarType::f32) {
        m.wdt = m.sdt = ScalarType::f32;
        m.name += "/f32-weights-states";
        cases.push_back(m);
      }
      m = c;
      m.circular = true;
      m.S = W + 2;
      m.name += "/circular";
      cases.push_back(m);
    }
  auto add = [&](UpdateCase c, const std::string& tag) {
    c.name = "update/" + tag;
    cases.push_back(c);
  };
  UpdateCase c;
  c.Tq = 4;
  add(c, "tq4");
  c.S = 2;
  c.W = 3;
  c.Tq = 5;
  add(c, "tq5-S2");
  c = UpdateCase{};
  c.Tq = 3;
  c.x_chan_last = true;
  add(c, "tq3-channel-last-x");
  c = UpdateCase{};
  c.x3d = true;
  c.batch_extra = 8;
  add(c, "x3d-strided-batch");
  c = UpdateCase{};
  for (int lay : {1, 2}) {
    c.state_layout = lay;
    add(c, "state-layout" + std::to_string(lay));
    c.circular = true;
    c.S = 7;
    add(c, "state-layout" + std::to_string(lay) + "/circular");
    c.circular = false;
    c.S = 3;
  }
  c = UpdateCase{};
  c.pad_every = 3;
  c.batch = 70;
  add(c, "padded-rows-batch70");
  c.pad_every = 0;
  c.oor_row = 5;
  add(c, "out-of-range-index");
  c = UpdateCase{};
  c.indices = false;
  c.bias = false;
  c.silu = false;
  add(c, "identity/no-bias/no-act");
  c = UpdateCase{};
  c.D = 200;
  c.batch = 130;
  add(c, "D200-batch130");
  c.D = 8192;
  c.batch = 3;
  c.S = 12;
  c.Tq = 2;
  add(c, "D8192-S12-tq2");
  c = UpdateCase{};  // two rows a block, the last block with one, padded rows
  c.D = 8192;
  c.batch = 301;
  c.pad_every = 7;
  add(c, "D8192-batch301-two-rows");
  c.state_layout = 1;  // position-major circular: four rows a block, the last with one
  c.circular = true;
  add(c, "D8192-batch301-four-rows-circular");
  // Blocks of 3 and 5 rows: two rows in flight, then one alone; both layouts the 16-byte kernel
  // serves, both modes.
  for (const int rows : {3, 5})
    for (int lay : {0, 1})
      for (const bool circular : {false, true}) {
        c = UpdateCase{};
        c.D = 1024;
        c.batch = 301;
        c.pad_every = 7;
        c.state_layout = lay;
        c.circular = circular;
        c.rows = rows;
        add(c, "rows" + std::to_string(rows) + "/state-layout" + std::to_string(lay) +
                   (circular ? "/circular" : ""));
      }
  // The lean kernel (batch < 16, one token, W 4, S 3, one dtype) in circular mode: every state
  // layout, padded rows and an out-of-range index, batch 1 at D=8192.
  for (ScalarType xdt : {ScalarType::f32, ScalarType::f16, ScalarType::bf16})
    for (int lay : {0, 1, 2}) {
      c = UpdateCase{};
      c.xdt = c.wdt = c.sdt = xdt;
      c.state_layout = lay;
      c.circular = true;
      c.batch = 15;
      c.pad_every = 4;
      c.oor_row = 6;
      add(c, std::string("lean-circular/") + short_name(xdt) + "/state-layout" + std::to_string(lay));
    }
  c = UpdateCase{};
  c.circular = true;
  c.D = 8192;
  c.batch = 1;
  add(c, "lean-circular/D8192-batch1");
  return cases;
}

// ---- the out-variants (causal_conv1d_varlen_out, causal_conv1d_update_out)
//
// Derived from the in-place lists: each in-place case has an out-variant twin, the same call with
// its result in a separate out of x's layout (the same reference, written into out; x must keep
// every bit, out's skipped tokens and slack their sentinels), then a few cases only the
// out-variants have, on out's alignment: where out_offset is odd its base breaks 16-byte
// alignment (the kernels must then store without vectors, or in the time-contiguous layout leave
// the row walker for the tiled kernel).

// The twin of an in-place varlen case. Out's pitch is 8 elements longer than x's (16 or 32 bytes,
// so out keeps x's 16-byte phase: time, the row walker or the vector tiled kernel; channel-last,
// the vector path); a long time-contiguous call (over 4096 tokens) with no pitch or offset of its
// own gets whole 16-byte rows (a pitch of a multiple of 8 elements, as engines' are), shorter
// ones keep rows in every phase; every third sequence is padded where the case pads none.
VarlenCase varlen_out_twin(VarlenCase c) {
  c.out = true;
  c.name = "varlen_out/" + c.name.substr(std::string("varlen/").size());
  const int64_t T = std::accumulate(c.lens.begin(), c.lens.end(), c.q_shift);
  if (!c.channel_last && T > 4096 && c.ld_extra == 0 && c.x_offset == 0) c.ld_extra = (T + 7) / 8 * 8 - T;
  c.out_ld_extra = c.ld_extra + 8;
  if (c.pad_every == 0 && c.oor_seq < 0 && c.lens.size() >= 3) {
    c.pad_every = 3;
    c.name += "/padded";
  }
  return c;
}

std::vector<VarlenCase> varlen_out_cases(bool quick) {
  std::vector<VarlenCase> cases;
  for (const VarlenCase& in_place : varlen_cases(quick)) {
    cases.push_back(varlen_out_twin(in_place));
    // Token tiles (states parked for the finish pass; out parks no outputs) into a misaligned
    // out too: its base one element off, its pitch 3 longer than x's (out of x's phase: the
    // scalar stores); f32 cases in f16 (2-byte elements an odd offset splits).
    if (in_place.tile > 0) {
      VarlenCase m = cases.back();
      if (m.xdt == ScalarType::f32 && m.sdt == ScalarType::f32) {
        m.xdt = m.wdt = m.bdt = m.sdt = ScalarType::f16;
        m.name += "/f16";
      }
      m.out_offset = 1;
      m.out_ld_extra = m.ld_extra + 3;
      m.name += "/misaligned-out";
      cases.push_back(m);
    }
  }
  auto add = [&](VarlenCase c, const std::string& tag) {
    c.out = true;
    c.name = "varlen_out/" + tag;
    cases.push_back(c);
  };
  for (bool cl : {false, true}) {
    const std::string L = cl ? "channel_last" : "time";
    // x's rows 16-byte aligned (time: pitch 248 bf16), out misaligned and out of x's phase (the
    // scalar paths; time: the tiled kernel); then both misaligned in the same phase (time: the
    // row walker on misaligned rows; channel-last: scalar); then an aligned out whose pitch is
    // not a multiple of 16 bytes.
    VarlenCase a;
    a.channel_last = cl;
    a.lens = {77, 5, 123, 1, 0, 40};  // T = 246
    a.pad_every = 3;
    a.ld_extra = cl ? 0 : 2;
    a.out_offset = 3;
    a.out_ld_extra = 5;
    add(a, L + "/misaligned-out");
    a.x_offset = 3;
    a.out_ld_extra = a.ld_extra + 8;
    add(a, L + "/misaligned-in-phase");
    a.x_offset = 0;
    a.out_offset = 0;
    a.out_ld_extra = a.ld_extra + 1;
    add(a, L + "/odd-pitch-out");
    // A longer state than the width needs, in the transposed state layout.
    VarlenCase s;
    s.channel_last = cl;
    s.lens = {33, 1, 2, 150, 0, 9};
    s.S = 6;
    s.W = 3;
    s.out_ld_extra = 8;
    s.state_layout = 1;
    add(s, L + "/S6-w3/state-layout1");
  }
  return cases;
}

// The twin of an in-place update case: out's rows 8 elements apart beyond x's; with several
// tokens (or channel-last x), out's channel pitch 2 beyond Tq where x is time-contiguous, its
// time pitch 8 beyond D where x is channel-last; every third row padded where the case pads none.
UpdateCase update_out_twin(UpdateCase c) {
  c.out = true;
  c.name = "update_out/" + c.name.substr(std::string("update/").size());
  c.out_batch_extra = 8;
  if (c.Tq > 1 || c.x_chan_last) c.out_pitch_extra = c.x_chan_last ? 8 : 2;
  if (c.pad_every == 0 && c.oor_row < 0) {
    c.pad_every = 3;
    c.name += "/padded";
  }
  return c;
}

std::vector<UpdateCase> update_out_cases(bool quick) {
  std::vector<UpdateCase> cases;
  for (const UpdateCase& in_place : update_cases(quick)) cases.push_back(update_out_twin(in_place));
  auto add = [&](UpdateCase c, const std::string& tag) {
    c.out = true;
    c.name = "update_out/" + tag;
    cases.push_back(c);
  };
  // The 16-byte kernel (batch >= 16, contiguous channels) in the transposed state layout, then
  // outs it cannot store into (misaligned; channel pitch 2): the per-channel kernel.
  UpdateCase c;
  c.batch = 70;
  c.pad_every = 3;
  c.out_batch_extra = 8;
  c.state_layout = 1;
  add(c, "vec/state-layout1");
  c.state_layout = 0;
  c.out_offset = 3;
  add(c, "vec/misaligned-out");
  c.out_offset = 0;
  c.out_pitch_extra = 1;
  add(c, "channel-pitch2-out");
  // Several tokens into outs of other pitches: compact channels with odd rows (staged, Tq 5),
  // channel-last x at Tq 5 (aligned, then misaligned), an odd channel pitch at D 8192.
  c = UpdateCase{};
  c.S = 2;
  c.W = 3;
  c.Tq = 5;
  c.pad_every = 3;
  c.out_batch_extra = 3;
  add(c, "tq5-S2/compact-rows");
  c = UpdateCase{};
  c.Tq = 5;
  c.x_chan_last = true;
  c.pad_every = 4;
  c.out_pitch_extra = 8;
  add(c, "tq5-channel-last-x");
  c.out_offset = 1;
  add(c, "tq5-channel-last-x/misaligned-out");
  c = UpdateCase{};
  c.D = 8192;
  c.batch = 3;
  c.S = 12;
  c.Tq = 2;
  c.out_pitch_extra = 1;
  add(c, "D8192-S12-tq2/odd-channel-pitch");
  c = UpdateCase{};
  c.x3d = true;
  c.batch_extra = 8;
  c.out_batch_extra = 5;
  add(c, "x3d-strided-batch/odd-batch-pitch");
  c = UpdateCase{};
  c.indices = false;
  c.bias = false;
  c.silu = false;
  c.out_offset = 1;
  add(c, "identity/no-bias/no-act/misaligned-out");
  return cases;
}

// Prefill of the first part, then single-token updates, equals one prefill of the whole.
std::string prefill_then_updates(Plugin& plugin, cudaStream_t stream, bool channel_last) {
  const int64_t D = 128, L = 40, P = 33, S = 3, W = 4;
  const ScalarType dt = ScalarType::f32;
  Weights wts(dt, dt, D, W, true, true);
  HostArray x(dt, D * L);
  for (size_t i = 0; i < x.size(); ++i) x.set(i, uniform(-1, 1));
  auto run_prefill = [&](int64_t len, DeviceBuffer& states, DeviceBuffer& xd) {
    HostArray part(dt, D * len);
    for (int64_t d = 0; d < D; ++d)
      for (int64_t t = 0; t < len; ++t) part.set(channel_last ? t * D + d : d * len + t, x.get(d * L + t));
    xd = DeviceBuffer(part.bytes.size());
    part.upload(xd.get());
    std::vector<int32_t> q = {0, static_cast<int32_t>(len)};
    DeviceBuffer dq(8);
    DKGPU_CHECK(cudaMemcpy(dq.get(), q.data(), 8, cudaMemcpyHostToDevice));
    const View xv(xd.get(), 0, to_dl(dt), {D, len},
                  channel_last ? std::vector<int64_t>{1, D} : std::vector<int64_t>{len, 1});
    const View wv = wts.wv(0), bv = wts.bv(0);
    const View sv(states.get(), 0, to_dl(dt), {1, D, S}, {D * S, S, 1});
    const View qv(dq.get(), 0, to_dl(ScalarType::i32), {2}, {1});
    std::string err;
    if (plugin.run(DK_OP_CAUSAL_CONV1D_VARLEN,
                   {xv.get(), wv.get(), bv.get(), sv.get(), qv.get(), nullptr, nullptr},
                   {str_scalar("silu"), int_scalar(-1), int_scalar(len)}, stream, &err) != DK_OK)
      throw std::runtime_error(err);
    HostArray out(dt, D * len);
    DKGPU_CHECK(cudaStreamSynchronize(stream));
    out.download(xd.get());
    return out;
  };
  DeviceBuffer s_full(D * S * 4), s_part(D * S * 4), xd;
  DKGPU_CHECK(cudaMemset(s_full.get(), 0, D * S * 4));
  DKGPU_CHECK(cudaMemset(s_part.get(), 0, D * S * 4));
  HostArray full = run_prefill(L, s_full, xd);
  run_prefill(P, s_part, xd);
  DeviceBuffer xt(D * 4);
  for (int64_t t = P; t < L; ++t) {
    HostArray tok(dt, D);
    for (int64_t d = 0; d < D; ++d) tok.set(d, x.get(d * L + t));
    tok.upload(xt.get());
    const View xv(xt.get(), 0, to_dl(dt), {1, D}, {D, 1});
    const View wv = wts.wv(0), bv = wts.bv(0);
    const View sv(s_part.get(), 0, to_dl(dt), {1, D, S}, {D * S, S, 1});
    std::string err;
    if (plugin.run(DK_OP_CAUSAL_CONV1D_UPDATE, {xv.get(), sv.get(), wv.get(), bv.get(), nullptr, nullptr},
                   {str_scalar("silu"), int_scalar(-1)}, stream, &err) != DK_OK)
      return err;
    DKGPU_CHECK(cudaStreamSynchronize(stream));
    tok.download(xt.get());
    for (int64_t d = 0; d < D; ++d) {
      const double f = full.get(channel_last ? t * D + d : d * L + t), u = tok.get(d);
      if (std::fabs(f - u) > 1e-5 * (1 + std::fabs(f)))
        return "token " + std::to_string(t) + " channel " + std::to_string(d) + ": " + std::to_string(u) +
               " vs " + std::to_string(f);
    }
  }
  HostArray a(dt, D * S), b(dt, D * S);
  a.download(s_full.get());
  b.download(s_part.get());
  for (size_t i = 0; i < a.size(); ++i)
    if (!a.same_bits(b, i)) return "final states differ";
  return {};
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s <libdeltakern_native.so> [--quick]\n", argv[0]);
    return 2;
  }
  bool quick = false;
  for (int i = 2; i < argc; ++i)
    if (std::string(argv[i]) == "--quick") quick = true;
  // No GPU (CI, a CPU box): skipped with the reason, before the plugin is loaded.
  int devices = 0;
  const cudaError_t no_device = cudaGetDeviceCount(&devices);
  if (no_device != cudaSuccess || devices == 0) {
    std::printf("skipped: no CUDA device: %s\n",
                no_device != cudaSuccess ? cudaGetErrorString(no_device) : "the driver reports none");
    return 77;
  }
  try {
    Plugin plugin(argv[1]);
    if (!probe_cuda(plugin)) return 3;
    cudaStream_t stream;
    DKGPU_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    Failures f;
    for (const auto& c : varlen_cases(quick)) f.report(c.name, run_varlen_case(plugin, c, stream));
    for (const auto& c : update_cases(quick)) f.report(c.name, run_update_case(plugin, c, stream));
    for (const auto& c : varlen_out_cases(quick)) f.report(c.name, run_varlen_case(plugin, c, stream));
    for (const auto& c : update_out_cases(quick)) f.report(c.name, run_update_case(plugin, c, stream));
    for (bool cl : {false, true})
      f.report(std::string("prefill-then-updates/") + (cl ? "channel_last" : "time"),
               prefill_then_updates(plugin, stream, cl));
    for (bool cl : {false, true}) {
      VarlenCase c;
      c.channel_last = cl;
      c.tile = cl ? 64 : 512;
      c.lens = cl ? std::vector<int64_t>{63, 1, 65, 200, 130, 0, 64}
                  : std::vector<int64_t>{2047, 1, 3000, 2100, 0, 2048};
      f.report(std::string("capture/varlen/") + (cl ? "channel_last" : "time") + "/tiled",
               run_varlen_case(plugin, c, stream, true));
    }
    UpdateCase u;
    u.batch = 33;
    f.report("capture/update", run_update_case(plugin, u, stream, true));
    u.circular = true;
    u.S = 5;
    f.report("capture/update/circular", run_update_case(plugin, u, stream, true));
    for (bool cl : {false, true}) {
      VarlenCase c;
      c.out = true;
      c.channel_last = cl;
      c.tile = cl ? 64 : 512;
      c.lens = cl ? std::vector<int64_t>{63, 1, 65, 200, 130, 0, 64}
                  : std::vector<int64_t>{2047, 1, 3000, 2100, 0, 2048};
      c.pad_every = 3;
      c.out_ld_extra = 8;
      f.report(std::string("capture/varlen_out/") + (cl ? "channel_last" : "time") + "/tiled",
               run_varlen_case(plugin, c, stream, true));
    }
    UpdateCase uo;
    uo.out = true;
    uo.batch = 33;
    uo.pad_every = 4;
    uo.out_batch_extra = 8;
    f.report("capture/update_out", run_update_case(plugin, uo, stream, true));
    std::printf("\n%d checks, %d failed\n", f.checks, f.failed);
    DKGPU_CHECK(cudaStreamDestroy(stream));
    return f.failed == 0 ? 0 : 1;
  } catch (const std::exception& e) {
    std::printf("error: %s\n", e.what());
    return 1;
  }
}
