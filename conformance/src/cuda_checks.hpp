// The two GPU-only checks of docs/design.md section 7. Built only with DELTAKERN_HAVE_CUDA;
// without it every member throws.
#pragma once

#include <dlpack/dlpack.h>

#include <string>

namespace deltakern::conformance {

// Records the work enqueued on `stream` between construction and end() into a CUDA graph,
// in cudaStreamCaptureModeGlobal: any sync a backend makes meanwhile is an error there.
class Capture {
 public:
  explicit Capture(void* stream);
  ~Capture();  // ends a capture still open and drops the graph
  Capture(const Capture&) = delete;
  Capture& operator=(const Capture&) = delete;
  // Ends the capture and instantiates the graph; what went wrong, or empty.
  std::string end();
  // Launches the instantiated graph on the stream.
  std::string replay();

 private:
  void* stream_;
  void* graph_ = nullptr;
  void* exec_ = nullptr;
  bool capturing_ = false;
};

// Blocks a stream on a flag in mapped pinned host memory: a kernel spins until the host
// opens it (or gives up after a timeout, so a broken backend cannot hang the suite).
class Gate {
 public:
  Gate(DLDevice device, void* stream);
  ~Gate();  // opens a closed gate and waits for the stream
  Gate(const Gate&) = delete;
  Gate& operator=(const Gate&) = delete;
  void close();
  // The kernel is still waiting: nothing queued behind it on the stream has run.
  bool holding() const;
  void open();
  bool timed_out() const;  // the kernel gave up waiting

 private:
  void* stream_;
  unsigned* words_ = nullptr;  // [0]: flag (host writes), [1]: status (kernel writes)
  bool closed_ = false;
};

}  // namespace deltakern::conformance
