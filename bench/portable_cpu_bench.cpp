// (b), (c) The portable backend's CPU path through the public API, forced to "portable".
//
// (b) causal_conv1d_varlen, bf16, D = 8192, W = 4, silu, 64k tokens in a fixed seeded mix of
//     lengths, max_seq_len given, both layouts of x. Bytes processed = x read + output written.
//     The same run measures memcpy of the same size (one thread, and split over every
//     hardware thread as the kernel is), and each varlen benchmark reports its rate against
//     both: the kernel should reach half of what the machine can copy.
// (c) causal_conv1d_update, one token, D = 8192, W = 4, bf16, silu, batch 1, 64, 256, on both
//     state layouts engines use (compact, dim-contiguous) in shift and circular mode.
// (d) (b) and (c) at W = 8 (BM_VarlenW8, BM_UpdateW8): widths above 4 share one kernel that
//     reads the width at run time, and these rows keep its cost in view.
// (e) causal_conv1d_varlen on serving shapes (BM_VarlenServing): 1k and 8k tokens as one
//     sequence, eight equal ones or 64 mixed, both layouts of x, states in a 256-line pool.
//
// Outputs come from a caching allocator installed on the runtime, as an engine installs its
// own: the default allocator returns fresh pages, and faulting in a 1 GiB output per call
// would measure the kernel's page zeroing, not the kernel. Large buffers ask for huge pages,
// for memcpy and kernel alike.
//
// Environment: DELTAKERN_PORTABLE_THREADS caps the kernel's threads (memcpy follows it).
#include <deltakern/runtime.hpp>

#include "batch_mixes.hpp"

#include <benchmark/benchmark.h>
#include <sys/mman.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <span>
#include <string>
#include <thread>
#include <vector>

namespace {

using namespace deltakern;
using Clock = std::chrono::steady_clock;

constexpr int64_t kDim = 8192;
constexpr int64_t kWidth = 4;
constexpr int64_t kWideWidth = 8;
constexpr int64_t kTokens = 65536;
constexpr DLDataType kBf16{kDLBfloat, 16, 1};
constexpr DLDevice kCpu{kDLCPU, 0};

// ---- memory

struct FreeDeleter {
  void operator()(void* p) const noexcept { std::free(p); }
};
using Buffer = std::unique_ptr<void, FreeDeleter>;

// 2 MiB-aligned, huge pages requested, every page touched once so no iteration faults.
Buffer allocate_buffer(size_t bytes) {
  constexpr size_t kAlign = size_t{2} << 20;
  const size_t rounded = (bytes + kAlign - 1) / kAlign * kAlign;
  void* p = std::aligned_alloc(kAlign, std::max(rounded, kAlign));
  if (p == nullptr) throw std::bad_alloc();
  madvise(p, rounded, MADV_HUGEPAGE);
  std::memset(p, 0, rounded);
  return Buffer(p);
}

// The engine-style allocator: blocks freed by the runtime are kept and handed out again for
// the same size.
class CachingAllocator {
 public:
  Allocator as_allocator() {
    return Allocator{[this](DLDevice, size_t bytes, void*) { return take(bytes); },
                     [this](DLDevice, void* ptr, void*) { give_back(ptr); }};
  }

 private:
  void* take(size_t bytes) {
    std::lock_guard lock(mutex_);
    auto& free_list = free_[bytes];
    if (!free_list.empty()) {
      void* p = free_list.back();
      free_list.pop_back();
      return p;
    }
    Buffer b = allocate_buffer(bytes);
    void* p = b.get();
    owned_.emplace(p, std::make_pair(bytes, std::move(b)));
    return p;
  }
  void give_back(void* ptr) {
    std::lock_guard lock(mutex_);
    free_[owned_.at(ptr).first].push_back(ptr);
  }
  std::mutex mutex_;
  std::map<void*, std::pair<size_t, Buffer>> owned_;
  std::map<size_t, std::vector<void*>> free_;
};

Runtime& portable_runtime() {
  static CachingAllocator allocator;
  static Runtime runtime(RuntimeOptions{.read_environment = false, .force_backend = "portable"});
  static const bool installed = (runtime.set_allocator(allocator.as_allocator()), true);
  (void)installed;
  return runtime;
}

unsigned kernel_threads() {
  if (const char* env = std::getenv("DELTAKERN_PORTABLE_THREADS"); env != nullptr && std::atoi(env) > 0)
    return static_cast<unsigned>(std::atoi(env));
  return std::max(1u, std::thread::hardware_concurrency());
}

// Random bf16 values, never zero: uniform magnitude in [2^-3, 2), random sign.
void fill_bf16(std::span<uint16_t> values, uint32_t seed) {
  std::mt19937 rng(seed);
  for (uint16_t& v : values) {
    const uint32_t r = rng();
    const uint16_t exponent = static_cast<uint16_t>(124 + (r % 4));  // 2^-3 .. 2^0
    v = static_cast<uint16_t>(((r >> 8) & 0x8000u) | (exponent << 7) | ((r >> 2) & 0x7fu));
  }
}

DLTensor view(void* data, DLDataType dtype, std::span<int64_t> shape, int64_t* strides = nullptr) {
  return DLTensor{data, kCpu, static_cast<int32_t>(shape.size()), dtype, shape.data(), strides, 0};
}

// ---- (b) varlen

// A fixed mix of sequence lengths summing to kTokens: log-uniform in [1, 8192], seeded.
std::vector<int64_t> mixed_lengths() {
  std::mt19937 rng(2024);
  std::uniform_real_distribution<double> log_len(0.0, std::log(8192.0));
  std::vector<int64_t> lengths;
  int64_t total = 0;
  while (total < kTokens) {
    const int64_t len = std::min<int64_t>(static_cast<int64_t>(std::exp(log_len(rng))), kTokens - total);
    lengths.push_back(len);
    total += len;
  }
  return lengths;
}

// x, shared by the problems of every width (1 GiB, filled once).
Buffer& varlen_x() {
  static Buffer x = [] {
    Buffer b = allocate_buffer(kDim * kTokens * 2);
    fill_bf16({static_cast<uint16_t*>(b.get()), static_cast<size_t>(kDim * kTokens)}, 1);
    return b;
  }();
  return x;
}

// A varlen call's host data and its views: x (one buffer, seen in both layouts), the weights,
// a state pool, the batch's metadata, lines and flags. (b) and (e) fill it their own ways.
struct VarlenData {
  int64_t width, tokens;
  std::vector<int64_t> lengths;
  VarlenMetadata meta = VarlenMetadata::from_lengths(lengths);
  int64_t batch = meta.batch();
  int64_t lines;  // the pool's; 0 asks for one per sequence
  std::vector<uint16_t> weight = std::vector<uint16_t>(kDim * width), bias = std::vector<uint16_t>(kDim),
                        states = std::vector<uint16_t>(lines * kDim * (width - 1));
  std::vector<int32_t> cache_indices = std::vector<int32_t>(batch);
  std::vector<uint8_t> has_initial_state = std::vector<uint8_t>(batch);
  int64_t x_shape[2] = {kDim, tokens}, time_contiguous_strides[2] = {tokens, 1},
          channel_last_strides[2] = {1, kDim}, weight_shape[2] = {kDim, width}, bias_shape[1] = {kDim},
          states_shape[3] = {lines, kDim, width - 1}, qsl_shape[1] = {batch + 1}, batch_shape[1] = {batch};
  DLTensor x_time{}, x_channel_last{}, weight_dl{}, bias_dl{}, states_dl{}, qsl_dl{}, indices_dl{}, init_dl{};

  // Random weights, bias and states from `seed` on; x's views once the caller has filled x.
  VarlenData(int64_t w, int64_t t, int64_t pool_lines, std::vector<int64_t> lens, uint32_t seed)
      : width(w), tokens(t), lengths(std::move(lens)), lines(pool_lines > 0 ? pool_lines : batch) {
    fill_bf16(weight, seed);
    fill_bf16(bias, seed + 1);
    fill_bf16(states, seed + 2);
    weight_dl = view(weight.data(), kBf16, weight_shape);
    bias_dl = view(bias.data(), kBf16, bias_shape);
    states_dl = view(states.data(), kBf16, states_shape);
    qsl_dl = view(meta.query_start_loc.data(), {kDLInt, 32, 1}, qsl_shape);
    indices_dl = view(cache_indices.data(), {kDLInt, 32, 1}, batch_shape);
    init_dl = view(has_initial_state.data(), {kDLUInt, 8, 1}, batch_shape);
  }
  void view_x(void* x) {
    x_time = view(x, kBf16, x_shape, time_contiguous_strides);
    x_channel_last = view(x, kBf16, x_shape, channel_last_strides);
  }
  CausalConv1dVarlenArgs args(bool channel_last) const {
    return {.x = channel_last ? &x_channel_last : &x_time,
            .weight = &weight_dl,
            .bias = &bias_dl,
            .conv_states = &states_dl,
            .query_start_loc = &qsl_dl,
            .cache_indices = &indices_dl,
            .has_initial_state = &init_dl,
            .activation = Activation::silu,
            .max_seq_len = meta.max_seq_len,
            .validate = false};
  }
};

// 64k tokens in mixed_lengths(), a line per sequence in reverse order, x shared by both widths.
struct VarlenProblem : VarlenData {
  Buffer& x = varlen_x();
  explicit VarlenProblem(int64_t w) : VarlenData(w, kTokens, 0, mixed_lengths(), 2) {
    std::mt19937 rng(5);
    for (int64_t b = 0; b < batch; ++b) {
      cache_indices[b] = static_cast<int32_t>(batch - 1 - b);
      has_initial_state[b] = static_cast<uint8_t>(rng() % 2);
    }
    view_x(x.get());
  }
};

VarlenProblem& varlen_problem(int64_t width = kWidth) {
  static VarlenProblem problem(kWidth);
  if (width == kWidth) return problem;
  static VarlenProblem wide(kWideWidth);
  return wide;
}

constexpr double kVarlenBytes = 2.0 * kDim * kTokens * 2;  // x read + output written

// Filled by the memcpy benchmarks, which run first; read by the varlen ones.
double memcpy_gbps_one_thread = 0;
double memcpy_gbps_threads = 0;

void copy_split(void* dst, const void* src, size_t bytes, unsigned threads) {
  std::vector<std::jthread> helpers;
  const size_t part = (bytes / threads + 4095) / 4096 * 4096;
  for (unsigned i = 1; i < threads; ++i) {
    const size_t begin = std::min(bytes, part * i), end = std::min(bytes, part * (i + 1));
    helpers.emplace_back([=] {
      std::memcpy(static_cast<char*>(dst) + begin, static_cast<const char*>(src) + begin, end - begin);
    });
  }
  std::memcpy(dst, src, std::min(bytes, part));
}

void BM_Memcpy(benchmark::State& state) {
  const unsigned threads = state.range(0) == 0 ? 1 : kernel_threads();
  const size_t bytes = kDim * kTokens * 2;
  const VarlenProblem& p = varlen_problem();
  static Buffer dst = allocate_buffer(bytes);
  const auto start = Clock::now();
  for (auto _ : state) {
    copy_split(dst.get(), p.x.get(), bytes, threads);
    benchmark::DoNotOptimize(dst.get());
    benchmark::ClobberMemory();
  }
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  const double gbps = kVarlenBytes * static_cast<double>(state.iterations()) / seconds / 1e9;
  (threads == 1 ? memcpy_gbps_one_thread : memcpy_gbps_threads) = gbps;
  state.SetBytesProcessed(static_cast<int64_t>(kVarlenBytes) * state.iterations());
  state.counters["GBps"] = gbps;
  state.counters["threads"] = threads;
}

void run_varlen(benchmark::State& state, int64_t width) {
  const bool channel_last = state.range(0) != 0;
  Runtime& runtime = portable_runtime();
  VarlenProblem& p = varlen_problem(width);
  const CausalConv1dVarlenArgs args = p.args(channel_last);
  { Tensor warm = runtime.causal_conv1d_varlen(args); }  // allocates the cached output
  const auto start = Clock::now();
  for (auto _ : state) {
    Tensor out = runtime.causal_conv1d_varlen(args);
    benchmark::DoNotOptimize(out->data);
  }
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  const double gbps = kVarlenBytes * static_cast<double>(state.iterations()) / seconds / 1e9;
  state.SetBytesProcessed(static_cast<int64_t>(kVarlenBytes) * state.iterations());
  state.counters["GBps"] = gbps;
  state.counters["batch"] = static_cast<double>(p.batch);
  state.counters["max_seq_len"] = static_cast<double>(p.meta.max_seq_len);
  if (memcpy_gbps_one_thread > 0) {
    state.counters["memcpy1_GBps"] = memcpy_gbps_one_thread;
    state.counters["vs_memcpy1"] = gbps / memcpy_gbps_one_thread;
  }
  if (memcpy_gbps_threads > 0) {
    state.counters["memcpyN_GBps"] = memcpy_gbps_threads;
    state.counters["vs_memcpyN"] = gbps / memcpy_gbps_threads;
  }
}

void BM_Varlen(benchmark::State& state) { run_varlen(state, kWidth); }
void BM_VarlenW8(benchmark::State& state) { run_varlen(state, kWideWidth); }

// ---- (e) varlen on serving shapes: short packed batches (issue 19's prefill rows)

// T tokens of D=8192 as one sequence, eight equal ones or 64 mixed (bench/batch_mixes.hpp), states
// in a 256-line pool through random distinct lines, random initial-state flags.
struct ServingProblem : VarlenData {
  static constexpr int64_t kPoolLines = 256;
  Buffer x;
  ServingProblem(int64_t T, int pattern)
      : VarlenData(kWidth, T, kPoolLines, mixed(T, pattern), 22), x(allocate_buffer(kDim * T * 2)) {
    fill_bf16({static_cast<uint16_t*>(x.get()), static_cast<size_t>(kDim * T)}, 21);
    std::mt19937_64 rng(25);
    std::vector<int32_t> pool(kPoolLines);
    for (int32_t i = 0; i < kPoolLines; ++i) pool[i] = i;
    std::shuffle(pool.begin(), pool.end(), rng);
    for (int64_t b = 0; b < batch; ++b) {
      cache_indices[b] = pool[b];
      has_initial_state[b] = static_cast<uint8_t>(rng() % 2);
    }
    view_x(x.get());
  }
  static std::vector<int64_t> mixed(int64_t T, int pattern) {
    std::mt19937_64 rng(26);
    return bench::batch_lengths(T, pattern, rng);
  }
};

// Arguments: tokens, batch mix (0 one sequence, 1 eight equal, 2 64 mixed), channel-last x.
void BM_VarlenServing(benchmark::State& state) {
  Runtime& runtime = portable_runtime();
  const ServingProblem p(state.range(0), static_cast<int>(state.range(1)));
  const CausalConv1dVarlenArgs args = p.args(state.range(2) != 0);
  { Tensor warm = runtime.causal_conv1d_varlen(args); }  // allocates the cached output
  for (auto _ : state) {
    Tensor out = runtime.causal_conv1d_varlen(args);
    benchmark::DoNotOptimize(out->data);
  }
  state.SetBytesProcessed(2 * kDim * p.tokens * 2 * state.iterations());  // x read + output written
  state.counters["batch"] = static_cast<double>(p.batch);
}

// ---- (c) update

// The state pool (lines, D, W-1) compact, or dim-contiguous as vLLM and SGLang keep it (a
// (lines, W-1, D) buffer seen through its transpose); shift mode, or circular mode with each row's
// count of tokens seen so far.
struct UpdateProblem {
  int64_t batch, lines, width;
  bool dim_contiguous, circular;
  std::vector<uint16_t> x, weight, bias, state;
  std::vector<int32_t> indices, seen;
  int64_t x_shape[2], weight_shape[2], bias_shape[1] = {kDim}, state_shape[3], state_strides[3],
                                       index_shape[1];
  DLTensor x_dl, weight_dl, bias_dl, state_dl, indices_dl, seen_dl;

  UpdateProblem(int64_t b, int64_t w, bool dim_contiguous_state, bool circular_state)
      : batch(b),
        lines(2 * b),  // a pool larger than the batch, addressed through permuted indices
        width(w),
        dim_contiguous(dim_contiguous_state),
        circular(circular_state),
        x(b * kDim),
        weight(kDim * w),
        bias(kDim),
        state(2 * b * kDim * (w - 1)),
        indices(b),
        seen(b),
        x_shape{b, kDim},
        weight_shape{kDim, w},
        state_shape{2 * b, kDim, w - 1},
        state_strides{kDim * (w - 1), dim_contiguous ? 1 : w - 1, dim_contiguous ? kDim : 1},
        index_shape{b} {
    fill_bf16(x, 11);
    fill_bf16(weight, 12);
    fill_bf16(bias, 13);
    fill_bf16(state, 14);
    for (int64_t i = 0; i < b; ++i) indices[i] = static_cast<int32_t>((i * 7 + 3) % lines);
    for (int64_t i = 0; i < b; ++i) seen[i] = static_cast<int32_t>((i * 2654435761u) % 4096);
    x_dl = view(x.data(), kBf16, x_shape);
    weight_dl = view(weight.data(), kBf16, weight_shape);
    bias_dl = view(bias.data(), kBf16, bias_shape);
    state_dl = view(state.data(), kBf16, state_shape, state_strides);
    indices_dl = view(indices.data(), {kDLInt, 32, 1}, index_shape);
    seen_dl = view(seen.data(), {kDLInt, 32, 1}, index_shape);
  }
  CausalConv1dUpdateArgs args() const {
    return {.x = &x_dl,
            .conv_state = &state_dl,
            .weight = &weight_dl,
            .bias = &bias_dl,
            .conv_state_indices = &indices_dl,
            .cache_seqlens = circular ? &seen_dl : nullptr,
            .activation = Activation::silu,
            .validate = false};
  }
};

// Arguments: batch, dim-contiguous state, circular mode.
void run_update(benchmark::State& state, int64_t width) {
  Runtime& runtime = portable_runtime();
  UpdateProblem p(state.range(0), width, state.range(1) != 0, state.range(2) != 0);
  const CausalConv1dUpdateArgs args = p.args();
  for (auto _ : state) {
    Tensor out = runtime.causal_conv1d_update(args);
    benchmark::DoNotOptimize(out->data);
  }
  // x read and the output written; shift mode reads and rewrites each state row, circular mode
  // reads W-1 entries and writes one.
  const int64_t bytes = p.batch * kDim * 2 * (p.circular ? 2 + width : 2 + 2 * (width - 1));
  state.SetBytesProcessed(bytes * state.iterations());
  state.SetItemsProcessed(p.batch * state.iterations());  // tokens
}

void BM_Update(benchmark::State& state) { run_update(state, kWidth); }
void BM_UpdateW8(benchmark::State& state) { run_update(state, kWideWidth); }

}  // namespace

// The rows of each width: both layouts of x, and the decode batches.
void varlen_rows(benchmark::internal::Benchmark* b) {
  b->ArgName("channel_last")->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond)->UseRealTime();
}
void serving_rows(benchmark::internal::Benchmark* b) {
  b->ArgNames({"tokens", "mix", "channel_last"})
      ->ArgsProduct({{1024, 8192}, {0, 1, 2}, {0, 1}})
      ->Unit(benchmark::kMicrosecond)
      ->UseRealTime();
}
void update_rows(benchmark::internal::Benchmark* b) {
  b->ArgNames({"batch", "dim_contiguous", "circular"})
      ->ArgsProduct({{1, 64, 256}, {0, 1}, {0, 1}})
      ->Unit(benchmark::kMicrosecond)
      ->UseRealTime();
}

// Registration order is run order: memcpy first, so the varlen benchmarks can report against it.
BENCHMARK(BM_Memcpy)->ArgName("all_threads")->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_Varlen)->Apply(varlen_rows);
BENCHMARK(BM_Update)->Apply(update_rows);
BENCHMARK(BM_VarlenServing)->Apply(serving_rows);
BENCHMARK(BM_VarlenW8)->Apply(varlen_rows);
BENCHMARK(BM_UpdateW8)->Apply(update_rows);

BENCHMARK_MAIN();
