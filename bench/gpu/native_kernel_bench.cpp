// native_kernel_bench: times the native plugin's kernels through its C ABI alone (no core:
// native_plugin.hpp), with CUDA events, against a device-to-device copy of the same size measured
// in the same run. The rows are docs/performance.md's "native kernel" rows; the checks of the same
// kernels are tests/gpu/native_selftest.cpp.
//
// - varlen: bf16, width 4, silu, D 8192 and 4096, 1k..128k tokens as one sequence, 8 equal and
//   64 mixed lengths, both layouts of x; eager calls back to back.
// - update: single token, D 8192, batch 1..1024, recorded into a CUDA graph and replayed; the
//   floor (an empty kernel in a graph) and the host time of one eager call.
//
//   native_kernel_bench <path/to/libdeltakern_native.so> [--bench-update] [--filter TEXT] [--iters N]
//     --bench-update  the update rows only; --filter: the varlen rows whose name holds TEXT
//     (and the update rows only for "update"); --iters: calls timed per row (default 20-50)
#include <deltakern/op_schemas.h>
#include <deltakern/plugin_abi.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <numeric>
#include <string>
#include <vector>

#include "gpu_util.hpp"
#include "native_plugin.hpp"

using namespace dkgpu;

cudaError_t dkgpu_launch_empty(cudaStream_t stream);

namespace {

std::mt19937_64 rng(12345);
double uniform(double lo, double hi) { return std::uniform_real_distribution<double>(lo, hi)(rng); }

void fill_random(void* dst, size_t bytes, cudaStream_t s) { dkgpu::fill_random_bf16(dst, bytes, s, rng); }

void bench(Plugin& plugin, cudaStream_t stream, bool update_only, const std::string& filter,
           int iters_override) {
  if (!update_only)
    std::printf("\n%-34s %9s %9s %8s %8s\n", "varlen (bf16, w4, silu)", "us", "GB/s", "copy us", "%copy");
  for (bool cl : {false, true})
    for (int64_t D : {8192, 4096})
      for (int64_t T : {1024, 8192, 32768, 131072})
        for (int pattern : {0, 1, 2}) {
          if (update_only) break;
          const std::vector<int64_t> lens = dkgpu::batch_lengths(T, pattern, rng);
          char name[64];
          std::snprintf(name, sizeof name, "%s D%ld T%ldk %s", cl ? "chl" : "time", static_cast<long>(D),
                        static_cast<long>(T / 1024),
                        pattern == 0   ? "1seq"
                        : pattern == 1 ? "8eq"
                                       : "64mix");
          if (!filter.empty() && std::string(name).find(filter) == std::string::npos) continue;
          const int64_t B = static_cast<int64_t>(lens.size()), S = 3;
          const size_t x_bytes = static_cast<size_t>(D * T * 2);
          const int nbuf = static_cast<int>(std::clamp<size_t>((size_t{512} << 20) / x_bytes, 1, 8));
          std::vector<DeviceBuffer> xs;
          for (int i = 0; i < nbuf; ++i) {
            xs.emplace_back(x_bytes);
            fill_random(xs.back().get(), x_bytes, stream);
          }
          DeviceBuffer copy_dst(x_bytes), states(B * D * S * 2), w(D * 4 * 2), bias(D * 2), q((B + 1) * 4),
              init(B);
          fill_random(states.get(), states.bytes(), stream);
          fill_random(w.get(), w.bytes(), stream);
          fill_random(bias.get(), bias.bytes(), stream);
          std::vector<int32_t> hq = {0};
          for (auto l : lens) hq.push_back(hq.back() + static_cast<int32_t>(l));
          DKGPU_CHECK(cudaMemcpy(q.get(), hq.data(), hq.size() * 4, cudaMemcpyHostToDevice));
          DKGPU_CHECK(cudaMemset(init.get(), 1, B));
          const View wv(w.get(), 0, to_dl(ScalarType::bf16), {D, 4}, {4, 1}),
              bv(bias.get(), 0, to_dl(ScalarType::bf16), {D}, {1});
          const View sv(states.get(), 0, to_dl(ScalarType::bf16), {B, D, S}, {D * S, S, 1});
          const View qv(q.get(), 0, to_dl(ScalarType::i32), {B + 1}, {1}),
              iv(init.get(), 0, to_dl(ScalarType::u8), {B}, {1});
          std::vector<View> xv;
          for (auto& b : xs)
            xv.emplace_back(b.get(), 0, to_dl(ScalarType::bf16), std::vector<int64_t>{D, T},
                            cl ? std::vector<int64_t>{1, D} : std::vector<int64_t>{T, 1});
          const std::vector<dk_scalar> scalars = {str_scalar("silu"), int_scalar(-1), int_scalar(T)};
          EventTimer timer;
          const int iters = iters_override > 0 ? iters_override : (T >= 32768 ? 20 : 50);
          std::string err;
          const double us = timer.us_per_call(stream, iters, [&](int i) {
            if (plugin.run(DK_OP_CAUSAL_CONV1D_VARLEN,
                           {xv[i % nbuf].get(), wv.get(), bv.get(), sv.get(), qv.get(), nullptr, iv.get()},
                           scalars, stream, &err) != DK_OK)
              throw std::runtime_error(err);
          });
          const double copy_us = timer.us_per_call(stream, iters, [&](int i) {
            DKGPU_CHECK(cudaMemcpyAsync(copy_dst.get(), xs[i % nbuf].get(), x_bytes, cudaMemcpyDeviceToDevice,
                                        stream));
          });
          const double bytes = 2.0 * x_bytes + 2.0 * B * D * S * 2;
          const double copy_gbs = 2.0 * x_bytes / copy_us * 1e-3;
          const double gbs = bytes / us * 1e-3;
          std::printf("%-34s %9.2f %9.1f %8.2f %7.1f%%\n", name, us, gbs, copy_us, 100.0 * gbs / copy_gbs);
          std::fflush(stdout);
        }

  if (!filter.empty() && filter != "update") return;
  std::printf("\n%-34s %9s %9s %8s\n", "update (bf16, D8192, w4, graph)", "us/call", "GB/s", "%copy");
  double ceiling_gbs = 0;
  {
    const size_t bytes = size_t{1} << 30;
    DeviceBuffer a(bytes), b(bytes);
    EventTimer timer;
    const double us = timer.us_per_call(stream, 20, [&](int) {
      DKGPU_CHECK(cudaMemcpyAsync(b.get(), a.get(), bytes, cudaMemcpyDeviceToDevice, stream));
    });
    ceiling_gbs = 2.0 * bytes / us * 1e-3;
    std::printf("D2D copy ceiling: %.1f GB/s\n", ceiling_gbs);
  }
  {
    // The floor: a graph of 32 empty kernels.
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    DKGPU_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
    for (int i = 0; i < 32; ++i) DKGPU_CHECK(dkgpu_launch_empty(stream));
    DKGPU_CHECK(cudaStreamEndCapture(stream, &graph));
    DKGPU_CHECK(cudaGraphInstantiate(&exec, graph, 0));
    EventTimer timer;
    const double us =
        timer.us_per_call(stream, 20, [&](int) { DKGPU_CHECK(cudaGraphLaunch(exec, stream)); }) / 32;
    std::printf("empty kernel in a graph: %.2f us per node\n", us);
    DKGPU_CHECK(cudaGraphExecDestroy(exec));
    DKGPU_CHECK(cudaGraphDestroy(graph));
  }
  for (int64_t batch : {1, 8, 64, 256, 1024}) {
    const int64_t D = 8192, S = 3;
    const size_t per_call = static_cast<size_t>(batch * D * 2 * (1 + S));
    const int nbuf = static_cast<int>(std::clamp<size_t>((size_t{256} << 20) / per_call, 1, 32));
    std::vector<DeviceBuffer> xs, ss;
    for (int i = 0; i < nbuf; ++i) {
      xs.emplace_back(batch * D * 2);
      ss.emplace_back(batch * D * S * 2);
      fill_random(xs.back().get(), xs.back().bytes(), stream);
      fill_random(ss.back().get(), ss.back().bytes(), stream);
    }
    DeviceBuffer w(D * 8), bias(D * 2), idx(batch * 4);
    fill_random(w.get(), w.bytes(), stream);
    fill_random(bias.get(), bias.bytes(), stream);
    std::vector<int32_t> hi(batch);
    std::iota(hi.begin(), hi.end(), 0);
    DKGPU_CHECK(cudaMemcpy(idx.get(), hi.data(), batch * 4, cudaMemcpyHostToDevice));
    const View wv(w.get(), 0, to_dl(ScalarType::bf16), {D, 4}, {4, 1}),
        bv(bias.get(), 0, to_dl(ScalarType::bf16), {D}, {1});
    const View iv(idx.get(), 0, to_dl(ScalarType::i32), {batch}, {1});
    std::vector<View> xv, sv;
    for (int i = 0; i < nbuf; ++i) {
      xv.emplace_back(xs[i].get(), 0, to_dl(ScalarType::bf16), std::vector<int64_t>{batch, D},
                      std::vector<int64_t>{D, 1});
      sv.emplace_back(ss[i].get(), 0, to_dl(ScalarType::bf16), std::vector<int64_t>{batch, D, S},
                      std::vector<int64_t>{D * S, S, 1});
    }
    const std::vector<dk_scalar> scalars = {str_scalar("silu"), int_scalar(-1)};
    const int per_graph = std::max(nbuf, 32);
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    std::string err;
    DKGPU_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
    for (int i = 0; i < per_graph; ++i)
      if (plugin.run(DK_OP_CAUSAL_CONV1D_UPDATE,
                     {xv[i % nbuf].get(), sv[i % nbuf].get(), wv.get(), bv.get(), iv.get(), nullptr}, scalars,
                     stream, &err) != DK_OK)
        throw std::runtime_error(err);
    DKGPU_CHECK(cudaStreamEndCapture(stream, &graph));
    DKGPU_CHECK(cudaGraphInstantiate(&exec, graph, 0));
    EventTimer timer;
    const double us =
        timer.us_per_call(stream, 20, [&](int) { DKGPU_CHECK(cudaGraphLaunch(exec, stream)); }) / per_graph;
    const double gbs = 2.0 * per_call / us * 1e-3;
    std::printf("batch %-28ld %9.2f %9.1f %7.1f%%\n", static_cast<long>(batch), us, gbs,
                100.0 * gbs / ceiling_gbs);
    // Host time of one eager call through the plugin ABI (no core): median over many calls.
    if (batch == 1) {
      std::vector<double> host_us;
      for (int rep = 0; rep < 20; ++rep) {
        DKGPU_CHECK(cudaStreamSynchronize(stream));
        for (int i = 0; i < 100; ++i) {
          const auto t0 = std::chrono::steady_clock::now();
          plugin.run(DK_OP_CAUSAL_CONV1D_UPDATE,
                     {xv[0].get(), sv[0].get(), wv.get(), bv.get(), iv.get(), nullptr}, scalars, stream,
                     &err);
          host_us.push_back(
              std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
        }
      }
      std::nth_element(host_us.begin(), host_us.begin() + host_us.size() / 2, host_us.end());
      std::printf("host time of one eager update call (plugin ABI only, incl. supports): %.2f us median\n",
                  host_us[host_us.size() / 2]);
    }
    DKGPU_CHECK(cudaGraphExecDestroy(exec));
    DKGPU_CHECK(cudaGraphDestroy(graph));
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s <libdeltakern_native.so> [--bench-update] [--filter TEXT] [--iters N]\n",
                 argv[0]);
    return 2;
  }
  bool update_only = false;
  std::string filter;
  int iters = 0;
  for (int i = 2; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--bench-update") update_only = true;
    if (a == "--filter" && i + 1 < argc) filter = argv[++i];
    if (a == "--iters" && i + 1 < argc) iters = std::atoi(argv[++i]);
  }
  try {
    Plugin plugin(argv[1]);
    if (!probe_cuda(plugin)) return 3;
    cudaStream_t stream;
    DKGPU_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    bench(plugin, stream, update_only, filter, iters);
    DKGPU_CHECK(cudaStreamDestroy(stream));
    return 0;
  } catch (const std::exception& e) {
    std::printf("error: %s\n", e.what());
    return 1;
  }
}
