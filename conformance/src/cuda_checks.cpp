#include "cuda_checks.hpp"

#include "device.hpp"

#include <stdexcept>

#if DELTAKERN_HAVE_CUDA
#include <cuda_runtime_api.h>

#include <atomic>
#endif

namespace deltakern::conformance {

#if DELTAKERN_HAVE_CUDA

cudaError_t launch_gate_kernel(void* stream, const unsigned* flag, unsigned* status,
                               unsigned long long timeout_ns);

namespace {

std::string error_text(cudaError_t e) {
  return std::string(cudaGetErrorName(e)) + " (" + cudaGetErrorString(e) + ")";
}

// Long enough for any call to return; short enough that a call that waits for the GPU
// fails the case instead of hanging the suite.
constexpr unsigned long long kGateTimeoutNs = 8'000'000'000ull;

}  // namespace

Capture::Capture(void* stream) : stream_(stream) {
  check_cuda(cudaStreamBeginCapture(static_cast<cudaStream_t>(stream_), cudaStreamCaptureModeGlobal),
             "cudaStreamBeginCapture");
  capturing_ = true;
}

Capture::~Capture() {
  if (capturing_) {
    cudaGraph_t g = nullptr;
    cudaStreamEndCapture(static_cast<cudaStream_t>(stream_), &g);
    if (g != nullptr) cudaGraphDestroy(g);
    cudaGetLastError();  // the capture failed already; clear its sticky-free error
  }
  if (exec_ != nullptr) cudaGraphExecDestroy(static_cast<cudaGraphExec_t>(exec_));
  if (graph_ != nullptr) cudaGraphDestroy(static_cast<cudaGraph_t>(graph_));
}

std::string Capture::end() {
  cudaGraph_t g = nullptr;
  capturing_ = false;
  const cudaError_t e = cudaStreamEndCapture(static_cast<cudaStream_t>(stream_), &g);
  if (e != cudaSuccess) {
    if (g != nullptr) cudaGraphDestroy(g);
    cudaGetLastError();
    return "the capture failed (a sync or another call illegal in cudaStreamCaptureModeGlobal?): " +
           error_text(e);
  }
  graph_ = g;
  cudaGraphExec_t exec = nullptr;
  if (const cudaError_t ie = cudaGraphInstantiate(&exec, g, 0); ie != cudaSuccess) {
    cudaGetLastError();
    return "instantiating the captured graph failed: " + error_text(ie);
  }
  exec_ = exec;
  return {};
}

std::string Capture::replay() {
  if (exec_ == nullptr) return "no graph to replay";
  if (const cudaError_t e =
          cudaGraphLaunch(static_cast<cudaGraphExec_t>(exec_), static_cast<cudaStream_t>(stream_));
      e != cudaSuccess)
    return "cudaGraphLaunch failed: " + error_text(e);
  if (const cudaError_t e = cudaStreamSynchronize(static_cast<cudaStream_t>(stream_)); e != cudaSuccess)
    return "the replayed graph failed: " + error_text(e);
  return {};
}

Gate::Gate(DLDevice device, void* stream) : stream_(stream) {
  activate(device);
  void* p = nullptr;
  check_cuda(cudaHostAlloc(&p, 2 * sizeof(unsigned), cudaHostAllocMapped), "cudaHostAlloc (mapped)");
  words_ = static_cast<unsigned*>(p);
  words_[0] = 1u;
  words_[1] = 0u;
}

Gate::~Gate() {
  if (closed_) open();
  cudaStreamSynchronize(static_cast<cudaStream_t>(stream_));
  cudaFreeHost(words_);
}

void Gate::close() {
  std::atomic_ref<unsigned>(words_[0]).store(0u);
  std::atomic_ref<unsigned>(words_[1]).store(0u);
  unsigned* flag_dev = nullptr;
  unsigned* status_dev = nullptr;
  check_cuda(cudaHostGetDevicePointer(reinterpret_cast<void**>(&flag_dev), words_, 0),
             "cudaHostGetDevicePointer");
  status_dev = flag_dev + 1;
  check_cuda(launch_gate_kernel(stream_, flag_dev, status_dev, kGateTimeoutNs), "launching the gate kernel");
  closed_ = true;
}

bool Gate::holding() const { return closed_ && std::atomic_ref<unsigned>(words_[1]).load() == 0u; }

bool Gate::timed_out() const { return std::atomic_ref<unsigned>(words_[1]).load() == 2u; }

void Gate::open() {
  std::atomic_ref<unsigned>(words_[0]).store(1u);
  closed_ = false;
}

#else

Capture::Capture(void* stream) : stream_(stream) { no_cuda(); }
Capture::~Capture() = default;
std::string Capture::end() { no_cuda(); }
std::string Capture::replay() { no_cuda(); }
Gate::Gate(DLDevice, void* stream) : stream_(stream) { no_cuda(); }
Gate::~Gate() = default;
void Gate::close() { no_cuda(); }
bool Gate::holding() const { return false; }
void Gate::open() {}
bool Gate::timed_out() const { return false; }

#endif

}  // namespace deltakern::conformance
