// Memory and streams on the devices the suite tests: plain host memory on the CPU, the
// CUDA runtime on CUDA (built with DELTAKERN_HAVE_CUDA only). The suite's own copies and
// syncs go through here, never through a backend, so they are not host_syncs().
#pragma once

#include <dlpack/dlpack.h>

#include <cstddef>
#include <string>

namespace deltakern::conformance {

// Throws: this library was built without CUDA (every CUDA entry point of a CPU-only build).
[[noreturn]] void no_cuda();

// Throws "<what>: <error name> (<error string>)" unless `status`, a cudaError_t, is
// cudaSuccess. Defined in CUDA builds only.
void check_cuda(int status, const char* what);

// One allocation, owned. Host copies in and out are synchronous.
class DeviceMemory {
 public:
  DeviceMemory() = default;
  DeviceMemory(DLDevice device, size_t bytes);
  ~DeviceMemory();
  DeviceMemory(DeviceMemory&& other) noexcept;
  DeviceMemory& operator=(DeviceMemory&& other) noexcept;
  DeviceMemory(const DeviceMemory&) = delete;
  DeviceMemory& operator=(const DeviceMemory&) = delete;

  void* get() const noexcept { return ptr_; }
  size_t size() const noexcept { return bytes_; }
  DLDevice device() const noexcept { return device_; }

 private:
  void reset() noexcept;
  DLDevice device_{kDLCPU, 0};
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

// Copies between host memory and any pointer on `device` (a backend's result as well).
// On CUDA these wait for the copy only: synchronize() the call's stream first.
void copy_to_host(DLDevice device, void* host_dst, const void* src, size_t bytes);
void copy_from_host(DLDevice device, void* dst, const void* host_src, size_t bytes);

// A stream to run a case's calls on: none (nullptr) on the CPU, a non-blocking CUDA
// stream on CUDA, so the legacy default stream never orders it behind other work.
class Stream {
 public:
  explicit Stream(DLDevice device);
  ~Stream();
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  void* get() const noexcept { return stream_; }
  void synchronize() const;

 private:
  DLDevice device_;
  void* stream_ = nullptr;
};

// Makes `device` current for the calling thread (CUDA); a no-op on the CPU.
void activate(DLDevice device);

// Whether the suite was built with CUDA and a CUDA device `id` is usable here.
bool cuda_usable(int id, std::string* why = nullptr);
// major*10+minor of CUDA device `id`; 0 when unknown.
int cuda_compute_capability(int id);

}  // namespace deltakern::conformance
