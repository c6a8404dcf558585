// bench_gpu: CUDA-event benchmark of causal_conv1d_varlen and causal_conv1d_update through the
// public API (deltakern::Runtime), each backend forced in turn, against a device-to-device copy
// of the same size measured in the same run (the bandwidth ceiling, read + write counted).
//
// - varlen: bf16, width 4, silu, D 8192 and 4096, 1k..128k tokens as one sequence, 8 equal and
//   64 mixed lengths, both layouts of x; eager calls timed back to back with events.
// - update: single token, D 8192, batch 1..1024, recorded into a CUDA graph and replayed.
// - serving: the shapes servers see, replayed from graphs (serving_rows.cpp): short packed
//   prefill on a dim-contiguous 256-line state pool, decode on both state layouts in shift and
//   circular mode.
// - host time of one eager call (checks, dispatch, launch), host clock, median.
// - a plain 16-byte copy kernel on x's bytes (copy_kernel.cu), as a share of the driver's copy:
//   the part of the ceiling that a kernel moving the bytes and nothing else reaches.
// Inputs are random and non-zero; buffers rotate so that L2 does not flatter small cases.
//
//   bench_gpu [--out results.md] [--quick] [--backends native,portable]
//             [--only varlen|update|serving|serving-prefill|serving-decode|eager]
//             [--dims 8192,4096] [--tokens 8192,32768]   (varlen sweeps; serving's prefill rows too)
//             [--layouts time,channel-last]   (varlen sweeps)
//             [--mixed 16,32]   (serving: prefill mixes of that many random lengths, beside the three)
#include <deltakern/deltakern.hpp>
#include <deltakern/runtime.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <memory>
#include <numeric>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "bench_rows.hpp"
#include "gpu_util.hpp"

using namespace dkgpu;

cudaError_t dkgpu_launch_empty(cudaStream_t stream);
cudaError_t dkgpu_launch_copy(void* dst, const void* src, size_t bytes, cudaStream_t stream);

namespace {

std::mt19937_64 rng(7);
double uniform(double lo, double hi) { return std::uniform_real_distribution<double>(lo, hi)(rng); }

void fill_random_bf16(void* dst, size_t bytes, cudaStream_t s) {
  dkgpu::fill_random_bf16(dst, bytes, s, rng);
}

template <class F>
double median_host_us(cudaStream_t s, F&& f) {
  std::vector<double> us;
  for (int rep = 0; rep < 20; ++rep) {
    DKGPU_CHECK(cudaStreamSynchronize(s));
    for (int i = 0; i < 50; ++i) {
      const auto t0 = std::chrono::steady_clock::now();
      f();
      us.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
    }
  }
  DKGPU_CHECK(cudaStreamSynchronize(s));
  std::nth_element(us.begin(), us.begin() + us.size() / 2, us.end());
  return us[us.size() / 2];
}

std::vector<int64_t> int_list(const std::string& text) {
  std::vector<int64_t> v;
  std::stringstream ss(text);
  for (std::string n; std::getline(ss, n, ',');) v.push_back(std::stoll(n));
  return v;
}

std::string fmt(const char* f, double v) {
  char b[64];
  std::snprintf(b, sizeof b, f, v);
  return b;
}

}  // namespace

int main(int argc, char** argv) {
  std::string out_path;
  bool quick = false;
  std::string only;  // one section, for profiling runs
  std::vector<int64_t> dims, tokens, extra_mixed;
  std::string layouts = "time,channel-last";
  std::vector<std::string> names = {"native", "portable"};
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--out" && i + 1 < argc) out_path = argv[++i];
    if (a == "--quick") quick = true;
    if (a == "--only" && i + 1 < argc) only = argv[++i];
    if (a == "--dims" && i + 1 < argc) dims = int_list(argv[++i]);
    if (a == "--tokens" && i + 1 < argc) tokens = int_list(argv[++i]);
    if (a == "--layouts" && i + 1 < argc) layouts = argv[++i];
    if (a == "--mixed" && i + 1 < argc) extra_mixed = int_list(argv[++i]);
    if (a == "--backends" && i + 1 < argc) {
      names.clear();
      std::stringstream ss(argv[++i]);
      for (std::string n; std::getline(ss, n, ',');) names.push_back(n);
    }
  }
  unsetenv("DELTAKERN_BACKEND");  // it would win over force_backend

  try {
    cudaDeviceProp prop{};
    DKGPU_CHECK(cudaGetDeviceProperties(&prop, 0));
    std::printf("device: %s (sm_%d%d, %d SMs, %.0f MB L2)\n", prop.name, prop.major, prop.minor,
                prop.multiProcessorCount, prop.l2CacheSize / 1e6);
    cudaStream_t stream;
    DKGPU_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));

    std::vector<Backend> backends;
    for (const auto& n : names) {
      try {
        deltakern::RuntimeOptions opt;
        opt.force_backend = n;
        auto rt = std::make_unique<deltakern::Runtime>(opt);
        const auto* info = rt->plugin(n);
        bool usable = info != nullptr;
        if (info != nullptr)
          for (const auto& d : info->devices)
            if (d.type == kDLCUDA && !d.available) {
              std::printf("backend %s: unavailable on CUDA: %s\n", n.c_str(), d.reason.c_str());
              usable = false;
            }
        if (info == nullptr) std::printf("backend %s: not loaded\n", n.c_str());
        if (usable) backends.push_back({n, std::move(rt)});
      } catch (const std::exception& e) {
        std::printf("backend %s: %s\n", n.c_str(), e.what());
      }
    }
    if (backends.empty()) {
      std::printf("no usable backend\n");
      return 1;
    }

    std::vector<Row> rows;
    EventTimer ev;
    const DLDevice dev{kDLCUDA, 0};
    const DLDataType bf16 = to_dl(ScalarType::bf16), i32 = to_dl(ScalarType::i32), u8 = to_dl(ScalarType::u8);

    // ---- varlen
    const auto section = [&](const char* name) { return only.empty() || only == name; };
    std::vector<int64_t> Ds = quick ? std::vector<int64_t>{8192} : std::vector<int64_t>{8192, 4096};
    std::vector<int64_t> Ts =
        quick ? std::vector<int64_t>{8192, 131072} : std::vector<int64_t>{1024, 8192, 32768, 131072};
    if (!dims.empty()) Ds = dims;
    if (!tokens.empty()) Ts = tokens;
    std::vector<bool> cls;
    if (layouts.find("time") != std::string::npos) cls.push_back(false);
    if (layouts.find("channel-last") != std::string::npos) cls.push_back(true);
    for (bool cl : cls)
      for (int64_t D : section("varlen") ? Ds : std::vector<int64_t>{})
        for (int64_t T : Ts)
          for (int pattern : {0, 1, 2}) {
            const std::vector<int64_t> lens = dkgpu::batch_lengths(T, pattern, rng);
            const int64_t B = static_cast<int64_t>(lens.size()), S = 3, W = 4;
            const size_t x_bytes = static_cast<size_t>(D * T * 2);
            const int nbuf = static_cast<int>(std::clamp<size_t>((size_t{512} << 20) / x_bytes, 1, 8));
            std::vector<DeviceBuffer> xs;
            for (int i = 0; i < nbuf; ++i) {
              xs.emplace_back(x_bytes);
              fill_random_bf16(xs.back().get(), x_bytes, stream);
            }
            DeviceBuffer copy_dst(x_bytes), states(B * D * S * 2), w(D * W * 2), bias(D * 2), q((B + 1) * 4),
                init(B);
            fill_random_bf16(states.get(), states.bytes(), stream);
            fill_random_bf16(w.get(), w.bytes(), stream);
            fill_random_bf16(bias.get(), bias.bytes(), stream);
            std::vector<int32_t> hq = {0};
            for (auto l : lens) hq.push_back(hq.back() + static_cast<int32_t>(l));
            DKGPU_CHECK(cudaMemcpy(q.get(), hq.data(), hq.size() * 4, cudaMemcpyHostToDevice));
            DKGPU_CHECK(cudaMemset(init.get(), 1, B));
            const View wv(w.get(), 0, bf16, {D, W}, {W, 1}), bv(bias.get(), 0, bf16, {D}, {1});
            const View sv(states.get(), 0, bf16, {B, D, S}, {D * S, S, 1});
            const View qv(q.get(), 0, i32, {B + 1}, {1}), iv(init.get(), 0, u8, {B}, {1});
            std::vector<View> xv;
            for (auto& b : xs)
              xv.emplace_back(b.get(), 0, bf16, std::vector<int64_t>{D, T},
                              cl ? std::vector<int64_t>{1, D} : std::vector<int64_t>{T, 1});
            const int iters = T >= 32768 ? 20 : 50;
            const double copy_us = ev.us_per_call(stream, iters, [&](int i) {
              DKGPU_CHECK(cudaMemcpyAsync(copy_dst.get(), xs[i % nbuf].get(), x_bytes,
                                          cudaMemcpyDeviceToDevice, stream));
            });
            const double ceiling = 2.0 * x_bytes / copy_us * 1e-3;
            if (pattern == 0 && cl == cls.front()) {
              // What a plain copy kernel reaches on the same bytes: the share of the ceiling that
              // any kernel, not only these, can expect.
              const double kernel_us = ev.us_per_call(stream, iters, [&](int i) {
                DKGPU_CHECK(dkgpu_launch_copy(copy_dst.get(), xs[i % nbuf].get(), x_bytes, stream));
              });
              char size[64];
              std::snprintf(size, sizeof size, "D=%ld T=%ldk", static_cast<long>(D),
                            static_cast<long>(T / 1024));
              rows.push_back({"copy kernel", size, "-", "cuda", kernel_us, 2.0 * x_bytes / kernel_us * 1e-3,
                              100.0 * copy_us / kernel_us});
            }
            const double bytes = 2.0 * x_bytes + 2.0 * B * D * S * 2;  // x in, out, states in + out
            char shape[64];
            std::snprintf(shape, sizeof shape, "D=%ld T=%ldk %s", static_cast<long>(D),
                          static_cast<long>(T / 1024),
                          pattern == 0   ? "1 seq"
                          : pattern == 1 ? "8 eq"
                                         : "64 mixed");
            std::map<std::string, double> us_of;
            // The out-variant writes into copy_dst, laid out as x.
            const View ov(copy_dst.get(), 0, bf16, std::vector<int64_t>{D, T},
                          cl ? std::vector<int64_t>{1, D} : std::vector<int64_t>{T, 1});
            for (auto& be : backends) {
              const auto args = [&](int i) {
                deltakern::CausalConv1dVarlenArgs a;
                a.x = xv[i % nbuf].get();
                a.weight = wv.get();
                a.bias = bv.get();
                a.conv_states = sv.get();
                a.query_start_loc = qv.get();
                a.has_initial_state = iv.get();
                a.activation = deltakern::Activation::silu;
                a.max_seq_len = *std::max_element(lens.begin(), lens.end());
                a.stream = stream;
                return a;
              };
              const auto one = [&](int i) { deltakern::Tensor r = be.rt->causal_conv1d_varlen(args(i)); };
              const auto one_out = [&](int i) { be.rt->causal_conv1d_varlen_out(args(i), *ov.get()); };
              for (const bool out_variant : {false, true}) {
                const std::string name = out_variant ? be.name + " (out)" : be.name;
                try_row(std::string("varlen ") + shape + (cl ? " channel-last " : " time ") + name, stream,
                        [&] {
                          const double us = out_variant ? ev.us_per_call(stream, iters, one_out)
                                                        : ev.us_per_call(stream, iters, one);
                          us_of[name] = us;
                          rows.push_back({"varlen", shape, cl ? "channel-last" : "time", name, us,
                                          bytes / us * 1e-3, 100.0 * bytes / us * 1e-3 / ceiling});
                        });
              }
            }
            std::printf("varlen %-24s %-12s copy %8.2f us", shape, cl ? "channel-last" : "time", copy_us);
            for (auto& [n, us] : us_of) std::printf("  %s %8.2f us", n.c_str(), us);
            std::printf("\n");
            std::fflush(stdout);
          }

    // ---- update: graph replay
    double ceiling_gbs = 0;
    {
      const size_t bytes = size_t{1} << 30;
      DeviceBuffer a(bytes), b(bytes);
      const double us = ev.us_per_call(stream, 20, [&](int) {
        DKGPU_CHECK(cudaMemcpyAsync(b.get(), a.get(), bytes, cudaMemcpyDeviceToDevice, stream));
      });
      ceiling_gbs = 2.0 * bytes / us * 1e-3;
      std::printf("D2D copy ceiling (1 GiB): %.1f GB/s\n", ceiling_gbs);
    }
    for (int64_t batch :
         section("update") ? std::vector<int64_t>{1, 8, 64, 256, 1024} : std::vector<int64_t>{}) {
      const int64_t D = 8192, S = 3, W = 4;
      const size_t per_call = static_cast<size_t>(batch * D * 2 * (1 + S));
      const int nbuf = static_cast<int>(std::clamp<size_t>((size_t{256} << 20) / per_call, 1, 32));
      std::vector<DeviceBuffer> xs, ss;
      for (int i = 0; i < nbuf; ++i) {
        xs.emplace_back(batch * D * 2);
        ss.emplace_back(batch * D * S * 2);
        fill_random_bf16(xs.back().get(), xs.back().bytes(), stream);
        fill_random_bf16(ss.back().get(), ss.back().bytes(), stream);
      }
      DeviceBuffer w(D * W * 2), bias(D * 2), idx(batch * 4);
      fill_random_bf16(w.get(), w.bytes(), stream);
      fill_random_bf16(bias.get(), bias.bytes(), stream);
      std::vector<int32_t> hi(batch);
      std::iota(hi.begin(), hi.end(), 0);
      DKGPU_CHECK(cudaMemcpy(idx.get(), hi.data(), batch * 4, cudaMemcpyHostToDevice));
      const View wv(w.get(), 0, bf16, {D, W}, {W, 1}), bv(bias.get(), 0, bf16, {D}, {1});
      const View iv(idx.get(), 0, i32, {batch}, {1});
      std::vector<View> xv, sv;
      for (int i = 0; i < nbuf; ++i) {
        xv.emplace_back(xs[i].get(), 0, bf16, std::vector<int64_t>{batch, D}, std::vector<int64_t>{D, 1});
        sv.emplace_back(ss[i].get(), 0, bf16, std::vector<int64_t>{batch, D, S},
                        std::vector<int64_t>{D * S, S, 1});
      }
      char shape[64];
      std::snprintf(shape, sizeof shape, "batch=%ld D=8192", static_cast<long>(batch));
      std::map<std::string, double> us_of;
      for (auto& be : backends) {
        auto call = [&](int i) {
          deltakern::CausalConv1dUpdateArgs a;
          a.x = xv[i % nbuf].get();
          a.conv_state = sv[i % nbuf].get();
          a.weight = wv.get();
          a.bias = bv.get();
          a.conv_state_indices = iv.get();
          a.activation = deltakern::Activation::silu;
          a.stream = stream;
          deltakern::Tensor r = be.rt->causal_conv1d_update(a);
        };
        try_row(std::string("update ") + shape + " " + be.name, stream, [&] {
          const double us = graph_us(stream, ev, std::max(nbuf, 32), call);
          us_of[be.name] = us;
          const double gbs = 2.0 * per_call / us * 1e-3;
          rows.push_back({"update (graph)", shape, "-", be.name, us, gbs, 100.0 * gbs / ceiling_gbs});
          if (batch == 1) {
            const double host = median_host_us(stream, [&] { call(0); });
            rows.push_back({"host time", "update batch=1 eager", "-", be.name, host, 0, 0});
          }
        });
      }
      std::printf("update %-24s", shape);
      for (auto& [n, us] : us_of) std::printf("  %s %7.2f us", n.c_str(), us);
      std::printf("\n");
    }
    if (section("serving") || section("serving-prefill") || section("serving-decode")) {
      dkgpu::ServingShapes shapes;
      if (!dims.empty()) shapes.dims = dims;
      if (!tokens.empty()) shapes.tokens = tokens;
      shapes.extra_mixed = extra_mixed;
      shapes.prefill = only != "serving-decode";
      shapes.decode = only != "serving-prefill";
      serving_rows(backends, stream, ev, rng, ceiling_gbs, shapes, rows);
    }
    // The floor under every host time above and below: one bare kernel launch on this machine.
    rows.push_back({"host time", "bare empty-kernel launch (floor)", "-", "cuda",
                    median_host_us(stream, [&] { DKGPU_CHECK(dkgpu_launch_empty(stream)); }), 0, 0});
    // One eager varlen call (one sequence), max_seq_len given and omitted: the host time of a call,
    // and the time per call back to back on the GPU's clock. Omitted, portable derives it through
    // read_to_host (one sync per call: the host waits for the stream, and the GPU idles while the
    // host launches the next call); native needs no max_seq_len, so its two rows are the same path.
    // The fresh outputs come from the core's default allocator, whose pool keeps freed memory across
    // syncs (the device's default pool, release threshold 0, trimmed it at every sync and cost 385
    // instead of 109 us a call at 8k tokens).
    for (const int64_t T : section("eager") ? std::vector<int64_t>{1024, 8192} : std::vector<int64_t>{}) {
      const int64_t D = 8192, S = 3, W = 4;
      DeviceBuffer x(D * T * 2), states(D * S * 2), w(D * W * 2), q(8);
      fill_random_bf16(x.get(), x.bytes(), stream);
      fill_random_bf16(states.get(), states.bytes(), stream);
      fill_random_bf16(w.get(), w.bytes(), stream);
      const int32_t hq[2] = {0, static_cast<int32_t>(T)};
      DKGPU_CHECK(cudaMemcpy(q.get(), hq, 8, cudaMemcpyHostToDevice));
      const View xv(x.get(), 0, bf16, {D, T}, {T, 1}), wv(w.get(), 0, bf16, {D, W}, {W, 1});
      const View sv(states.get(), 0, bf16, {1, D, S}, {D * S, S, 1}), qv(q.get(), 0, i32, {2}, {1});
      for (auto& be : backends) {
        for (const bool given : {true, false}) {
          const auto call = [&](int) {
            deltakern::CausalConv1dVarlenArgs a;
            a.x = xv.get();
            a.weight = wv.get();
            a.conv_states = sv.get();
            a.query_start_loc = qv.get();
            a.activation = deltakern::Activation::silu;
            if (given) a.max_seq_len = T;
            a.stream = stream;
            deltakern::Tensor r = be.rt->causal_conv1d_varlen(a);
          };
          char shape[80];
          std::snprintf(shape, sizeof shape, "varlen D=8192 T=%ldk, max_seq_len %s",
                        static_cast<long>(T / 1024), given ? "given" : "omitted");
          try_row(std::string(shape) + " " + be.name, stream, [&] {
            rows.push_back(
                {"eager, back to back", shape, "time", be.name, ev.us_per_call(stream, 50, call), 0, 0});
            if (T == 8192)
              rows.push_back(
                  {"host time", shape, "time", be.name, median_host_us(stream, [&] { call(0); }), 0, 0});
          });
        }
      }
    }

    // ---- tables
    native_over_portable(rows);
    std::ostringstream md;
    md << "| op | shape | layout | backend | us | GB/s | % of copy | native/portable |\n"
       << "|---|---|---|---|---:|---:|---:|---:|\n";
    for (const auto& r : rows)
      md << "| " << r.op << " | " << r.shape << " | " << r.layout << " | " << r.backend << " | "
         << fmt("%.2f", r.us) << " | " << (r.gbs > 0 ? fmt("%.0f", r.gbs) : "-") << " | "
         << (r.pct > 0 ? fmt("%.1f", r.pct) : "-") << " | " << (r.ratio > 0 ? fmt("%.2f", r.ratio) : "")
         << " |\n";
    md << "\nnative/portable: time ratio (below 1: native faster). Bytes: x read + output written + states "
          "read and written; % of a device-to-device copy of the same size measured in the same run.\n";
    std::printf("\n%-15s %-26s %-12s %-9s %9s %8s %7s %7s\n", "op", "shape", "layout", "backend", "us",
                "GB/s", "%copy", "n/p");
    for (const auto& r : rows)
      std::printf("%-15s %-26s %-12s %-9s %9.2f %8.0f %6.1f%% %7s\n", r.op.c_str(), r.shape.c_str(),
                  r.layout.c_str(), r.backend.c_str(), r.us, r.gbs, r.pct,
                  r.ratio > 0 ? fmt("%.2f", r.ratio).c_str() : "");
    if (!out_path.empty()) {
      FILE* f = std::fopen(out_path.c_str(), "w");
      if (f != nullptr) {
        std::fputs(("# bench_gpu on " + std::string(prop.name) + "\n\n" + md.str()).c_str(), f);
        std::fclose(f);
      }
    }
    DKGPU_CHECK(cudaStreamDestroy(stream));
    return 0;
  } catch (const std::exception& e) {
    std::printf("error: %s\n", e.what());
    return 1;
  }
}
