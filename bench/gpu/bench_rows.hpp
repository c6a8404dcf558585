// bench_gpu's vocabulary: a row of its table, a backend under test, and the sections that live in
// files of their own (serving_rows.cpp).
#pragma once

#include <deltakern/runtime.hpp>

#include <cstdio>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "gpu_util.hpp"

namespace dkgpu {

struct Row {
  std::string op, shape, layout, backend;
  double us = 0, gbs = 0, pct = 0;
  double ratio = 0;  // native us / portable us, on native rows
};

struct Backend {
  std::string name;
  std::unique_ptr<deltakern::Runtime> rt;
};

// Device time per call: call(0 .. calls-1) captured into one graph on `s` (global mode), the
// graph replayed 20 times.
template <class F>
double graph_us(cudaStream_t s, EventTimer& ev, int calls, F&& call) {
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  DKGPU_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  try {
    for (int i = 0; i < calls; ++i) call(i);
  } catch (...) {
    cudaStreamEndCapture(s, &graph);
    cudaGetLastError();
    throw;
  }
  DKGPU_CHECK(cudaStreamEndCapture(s, &graph));
  DKGPU_CHECK(cudaGraphInstantiate(&exec, graph, 0));
  const double us = ev.us_per_call(s, 20, [&](int) { DKGPU_CHECK(cudaGraphLaunch(exec, s)); }) / calls;
  DKGPU_CHECK(cudaGraphExecDestroy(exec));
  DKGPU_CHECK(cudaGraphDestroy(graph));
  return us;
}

// Runs one backend's measurement, reporting a failure (a refused call, an uncapturable one) as
// "<what>: <error>" without stopping the section.
template <class F>
void try_row(const std::string& what, cudaStream_t s, F&& f) {
  try {
    f();
  } catch (const std::exception& e) {
    std::printf("%s: %s\n", what.c_str(), e.what());
    cudaGetLastError();
    DKGPU_CHECK(cudaStreamSynchronize(s));
  }
}

// Fills each throughput row's ratio (rows with a GB/s figure): a native row's time over the
// portable row of the same op, shape and layout ("native (out)" over "portable (out)").
inline void native_over_portable(std::vector<Row>& rows) {
  std::map<std::string, double> portable;
  const auto key = [](const Row& r, const std::string& suffix) {
    return r.op + '|' + r.shape + '|' + r.layout + suffix;
  };
  for (const Row& r : rows)
    if (r.gbs > 0 && r.backend.rfind("portable", 0) == 0) portable[key(r, r.backend.substr(8))] = r.us;
  for (Row& r : rows)
    if (r.gbs > 0 && r.backend.rfind("native", 0) == 0)
      if (auto it = portable.find(key(r, r.backend.substr(6))); it != portable.end())
        r.ratio = r.us / it->second;
}

// The shapes servers see (issue 19), every call replayed from a CUDA graph over rotating cold
// buffers: short packed prefill (1k and 8k tokens, D 8192 and 4096, one sequence / 8 equal / 64
// mixed, both layouts of x) with conv_states a 256-line pool stored dim-contiguous (stride(1) == 1,
// as vLLM and SGLang keep it), random distinct cache lines and random initial-state flags, against
// a same-size device copy replayed the same way; and decode (one token, D 8192, batch 1 to 1024)
// on a pool of max(256, batch) lines in both state layouts, compact and dim-contiguous, against the
// 1 GiB copy's rate `ceiling_gbs`.
struct ServingShapes {
  std::vector<int64_t> dims = {8192, 4096}, tokens = {1024, 8192};  // the prefill rows'
  // More prefill mixes, of that many random lengths (after the three above, so their inputs stay
  // the same).
  std::vector<int64_t> extra_mixed;
  bool prefill = true, decode = true;
};
void serving_rows(std::vector<Backend>& backends, cudaStream_t stream, EventTimer& ev, std::mt19937_64& rng,
                  double ceiling_gbs, const ServingShapes& shapes, std::vector<Row>& rows);

}  // namespace dkgpu
