// first_call_capture: the first call of a process may be made inside an engine's CUDA graph
// capture. Through the public API with portable forced on cuda:0 (a fresh output: the core's first
// allocation happens inside the capture), one causal_conv1d_varlen and one causal_conv1d_update are
// captured in the default (global) capture mode before any other call of the process, the graph is
// replayed, and each replayed output must equal, bit for bit, the same call made eagerly afterwards.
// No initial state is read (has_initial_state 0; update on a fresh pool of zeros), so replay and
// eager call see the same inputs although both write the states.
//
//   first_call_capture     exit 0: passed; 1: failed; 77: no CUDA device here (ctest: skipped)
#include <deltakern/deltakern.hpp>
#include <deltakern/runtime.hpp>

#include <cstdio>
#include <cstring>
#include <vector>

#include "gpu_util.hpp"

using namespace dkgpu;

namespace {

std::vector<unsigned char> to_host(const DLTensor& t, size_t bytes) {
  std::vector<unsigned char> h(bytes);
  DKGPU_CHECK(
      cudaMemcpy(h.data(), static_cast<const char*>(t.data) + t.byte_offset, bytes, cudaMemcpyDeviceToHost));
  return h;
}

// Captures call() as the first work of the process on `s`, replays it, and returns its output's bytes.
template <class F>
std::vector<unsigned char> replayed(cudaStream_t s, size_t bytes, F&& call) {
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  DKGPU_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  deltakern::Tensor out;
  try {
    out = call();
  } catch (...) {
    cudaStreamEndCapture(s, &graph);
    throw;
  }
  DKGPU_CHECK(cudaStreamEndCapture(s, &graph));
  DKGPU_CHECK(cudaGraphInstantiate(&exec, graph, 0));
  DKGPU_CHECK(cudaGraphLaunch(exec, s));
  DKGPU_CHECK(cudaStreamSynchronize(s));
  std::vector<unsigned char> h = to_host(out.dl(), bytes);
  DKGPU_CHECK(cudaGraphExecDestroy(exec));
  DKGPU_CHECK(cudaGraphDestroy(graph));
  return h;
}

}  // namespace

int main() {
  unsetenv("DELTAKERN_BACKEND");  // it would win over force_backend
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("skipped: no CUDA device (%s)\n", cudaGetErrorString(cudaGetDeviceCount(&devices)));
    return 77;
  }
  int failed = 0;
  try {
    deltakern::RuntimeOptions opt;
    opt.force_backend = "portable";
    deltakern::Runtime rt(opt);
    cudaStream_t s;
    DKGPU_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    std::mt19937_64 rng(5);
    const DLDataType bf16 = to_dl(ScalarType::bf16), i32 = to_dl(ScalarType::i32), u8 = to_dl(ScalarType::u8);
    constexpr int64_t D = 256, T = 300, W = 4, S = W - 1, B = 3;
    DeviceBuffer x(D * T * 2), w(D * W * 2), bias(D * 2), states(B * D * S * 2), q(4 * (B + 1)), init(B);
    DeviceBuffer x1(B * D * 2), pool(B * D * S * 2);
    for (auto* b : {&x, &w, &bias, &states, &x1}) fill_random_bf16(b->get(), b->bytes(), s, rng);
    const int32_t starts[B + 1] = {0, 7, 7, T};  // an empty sequence among them
    DKGPU_CHECK(cudaMemcpy(q.get(), starts, sizeof starts, cudaMemcpyHostToDevice));
    DKGPU_CHECK(cudaMemset(init.get(), 0, B));
    DKGPU_CHECK(cudaMemset(pool.get(), 0, pool.bytes()));
    const View xv(x.get(), 0, bf16, {D, T}, {T, 1}), wv(w.get(), 0, bf16, {D, W}, {W, 1});
    const View bv(bias.get(), 0, bf16, {D}, {1}), sv(states.get(), 0, bf16, {B, D, S}, {D * S, S, 1});
    const View qv(q.get(), 0, i32, {B + 1}, {1}), iv(init.get(), 0, u8, {B}, {1});
    const View x1v(x1.get(), 0, bf16, {B, D}, {D, 1}), pv(pool.get(), 0, bf16, {B, D, S}, {D * S, S, 1});

    deltakern::CausalConv1dVarlenArgs varlen;
    varlen.x = xv.get();
    varlen.weight = wv.get();
    varlen.bias = bv.get();
    varlen.conv_states = sv.get();
    varlen.query_start_loc = qv.get();
    varlen.has_initial_state = iv.get();
    varlen.activation = deltakern::Activation::silu;
    varlen.max_seq_len = T - 7;
    varlen.stream = s;
    deltakern::CausalConv1dUpdateArgs update;
    update.x = x1v.get();
    update.conv_state = pv.get();
    update.weight = wv.get();
    update.bias = bv.get();
    update.activation = deltakern::Activation::silu;
    update.stream = s;

    const auto check = [&](const char* what, const std::vector<unsigned char>& replay,
                           const deltakern::Tensor& eager, size_t bytes) {
      DKGPU_CHECK(cudaStreamSynchronize(s));
      const bool same = replay == to_host(eager.dl(), bytes);
      std::printf("%s %s\n", same ? "ok  " : "FAIL", what);
      failed += same ? 0 : 1;
    };
    // Only the first of the two is the process's first call; the update captures after it.
    const std::vector<unsigned char> v =
        replayed(s, D * T * 2, [&] { return rt.causal_conv1d_varlen(varlen); });
    check("varlen captured as the process's first call, replayed = eager", v, rt.causal_conv1d_varlen(varlen),
          D * T * 2);
    DKGPU_CHECK(cudaMemset(pool.get(), 0, pool.bytes()));
    const std::vector<unsigned char> u =
        replayed(s, B * D * 2, [&] { return rt.causal_conv1d_update(update); });
    DKGPU_CHECK(cudaMemset(pool.get(), 0, pool.bytes()));
    check("update captured, replayed = eager", u, rt.causal_conv1d_update(update), B * D * 2);
    DKGPU_CHECK(cudaStreamDestroy(s));
  } catch (const std::exception& e) {
    std::printf("FAIL %s\n", e.what());
    return 1;
  }
  return failed == 0 ? 0 : 1;
}
