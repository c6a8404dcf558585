// (a) The dispatcher's cost: a call through the public API with a cached decision against
// the same call made straight to the backend's op entry, on the smallest real call (one
// decode token, D = 8, float32, portable on the CPU), so the kernel's own time is tiny and
// the difference is argument checks + decision lookup + packing the dk_call.
#include <deltakern/op_schemas.h>
#include <deltakern/runtime.hpp>

#include <benchmark/benchmark.h>

#include <chrono>
#include <random>
#include <vector>

namespace {

using namespace deltakern;

struct SmallUpdate {
  static constexpr int64_t B = 1, D = 8, W = 4, S = 3;
  std::vector<float> x, state, weight;
  int64_t x_shape[2] = {B, D}, state_shape[3] = {B, D, S}, weight_shape[2] = {D, W};
  DLTensor x_dl{}, state_dl{}, weight_dl{};
  SmallUpdate() : x(B * D), state(B * D * S), weight(D * W) {
    std::mt19937 rng(7);
    std::uniform_real_distribution<float> u(-1, 1);
    for (auto* v : {&x, &state, &weight})
      for (auto& e : *v) e = u(rng);
    x_dl = {x.data(), {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, x_shape, nullptr, 0};
    state_dl = {state.data(), {kDLCPU, 0}, 3, {kDLFloat, 32, 1}, state_shape, nullptr, 0};
    weight_dl = {weight.data(), {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, weight_shape, nullptr, 0};
  }
  CausalConv1dUpdateArgs args() const {
    return {.x = &x_dl, .conv_state = &state_dl, .weight = &weight_dl, .activation = Activation::silu};
  }
  // The same call as the core packs it, for the direct path.
  const DLTensor* tensors[DK_UPDATE_N_TENSORS] = {&x_dl, &state_dl, &weight_dl, nullptr, nullptr, nullptr};
  dk_scalar scalars[DK_UPDATE_N_SCALARS] = {{DK_SCALAR_STRING, 0, 0, "silu"},
                                            {DK_SCALAR_INT, -1, 0, nullptr}};
  dk_call call() const {
    return {sizeof(dk_call),     nullptr, DK_UPDATE_N_TENSORS, tensors,
            DK_UPDATE_N_SCALARS, scalars, sizeof(dk_scalar)};
  }
};

Runtime& portable_runtime() {
  static Runtime runtime(RuntimeOptions{.read_environment = false, .force_backend = "portable"});
  return runtime;
}

void BM_UpdateDirectEntry(benchmark::State& state) {
  SmallUpdate u;
  const BoundOp op = portable_runtime().bound_op("portable", "causal_conv1d_update");
  const dk_call call = u.call();
  for (auto _ : state) Tensor result(op.run(call));
}

void BM_UpdateThroughDispatcher(benchmark::State& state) {
  SmallUpdate u;
  Runtime& runtime = portable_runtime();
  const auto args = u.args();
  for (auto _ : state) Tensor result = runtime.causal_conv1d_update(args);
}

// Both paths interleaved in one run, so the overhead and the ratio come from the same
// conditions; the goal is overhead_ns <= 100.
void BM_DispatchOverhead(benchmark::State& state) {
  SmallUpdate u;
  Runtime& runtime = portable_runtime();
  const BoundOp op = runtime.bound_op("portable", "causal_conv1d_update");
  const dk_call call = u.call();
  const auto args = u.args();
  constexpr int kCalls = 2000;
  double direct_s = 0, dispatch_s = 0;
  int64_t rounds = 0;
  using Clock = std::chrono::steady_clock;
  for (auto _ : state) {
    const auto t0 = Clock::now();
    for (int i = 0; i < kCalls; ++i) Tensor r(op.run(call));
    const auto t1 = Clock::now();
    for (int i = 0; i < kCalls; ++i) Tensor r = runtime.causal_conv1d_update(args);
    const auto t2 = Clock::now();
    direct_s += std::chrono::duration<double>(t1 - t0).count();
    dispatch_s += std::chrono::duration<double>(t2 - t1).count();
    ++rounds;
  }
  const double n = double(rounds) * kCalls;
  state.counters["direct_ns"] = direct_s / n * 1e9;
  state.counters["dispatch_ns"] = dispatch_s / n * 1e9;
  state.counters["overhead_ns"] = (dispatch_s - direct_s) / n * 1e9;
  state.counters["ratio"] = dispatch_s / direct_s;
}

// The same call served as a fallback: the built-in order [native, portable] on the CPU,
// where native cannot serve, so every call also adds one to its fallback counter.
void BM_UpdateThroughDispatcherFallback(benchmark::State& state) {
  SmallUpdate u;
  static Runtime runtime(RuntimeOptions{.read_environment = false});
  const auto args = u.args();
  for (auto _ : state) Tensor result = runtime.causal_conv1d_update(args);
  const auto counts = runtime.fallback_counts();
  state.counters["fallbacks_counted"] = counts.empty() ? 0.0 : double(counts.front().count);
}

BENCHMARK(BM_UpdateDirectEntry);
BENCHMARK(BM_UpdateThroughDispatcher);
BENCHMARK(BM_UpdateThroughDispatcherFallback);
BENCHMARK(BM_DispatchOverhead)->Iterations(50);

}  // namespace

BENCHMARK_MAIN();
