// Small host-side helpers of the GPU programs: error checks, owning device buffers, dtype
// conversions, DLTensor views and the float64 reference of both ops (docs/design.md section 5).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>
#include <dlpack/dlpack.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

namespace dkgpu {

inline void cuda_check(cudaError_t err, const char* what, const char* file, int line) {
  if (err != cudaSuccess)
    throw std::runtime_error(std::string(file) + ":" + std::to_string(line) + ": " + what + ": " +
                             cudaGetErrorString(err));
}
#define DKGPU_CHECK(call) ::dkgpu::cuda_check((call), #call, __FILE__, __LINE__)

class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(size_t bytes) : bytes_(bytes) {
    if (bytes > 0) DKGPU_CHECK(cudaMalloc(&ptr_, bytes));
  }
  ~DeviceBuffer() {
    if (ptr_ != nullptr) cudaFree(ptr_);
  }
  DeviceBuffer(DeviceBuffer&& o) noexcept : ptr_(o.ptr_), bytes_(o.bytes_) { o.ptr_ = nullptr; }
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    std::swap(ptr_, o.ptr_);
    std::swap(bytes_, o.bytes_);
    return *this;
  }
  void* get() const { return ptr_; }
  size_t bytes() const { return bytes_; }

 private:
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

// Fills device memory with random nonzero bf16 values in [-1, 1): one random block uploaded,
// then replicated on the device, which is fast for gigabytes.
inline void fill_random_bf16(void* dst, size_t bytes, cudaStream_t s, std::mt19937_64& rng) {
  std::uniform_real_distribution<double> dist(-1.0, 1.0);
  const size_t block = std::min<size_t>((bytes + 1) / 2 * 2, size_t{4} << 20);
  std::vector<uint16_t> h(block / 2);
  for (auto& v : h) {
    float f = static_cast<float>(dist(rng));
    if (f == 0.f) f = 0.5f;
    const __nv_bfloat16 b = __float2bfloat16_rn(f);
    std::memcpy(&v, &b, 2);
  }
  DKGPU_CHECK(cudaMemcpyAsync(dst, h.data(), std::min(block, bytes), cudaMemcpyHostToDevice, s));
  for (size_t off = block; off < bytes; off += block)
    DKGPU_CHECK(cudaMemcpyAsync(static_cast<char*>(dst) + off, dst, std::min(block, bytes - off),
                                cudaMemcpyDeviceToDevice, s));
  DKGPU_CHECK(cudaStreamSynchronize(s));
}

enum class Dt { f32, f16, bf16 };
inline const char* dt_name(Dt d) { return d == Dt::f32 ? "f32" : d == Dt::f16 ? "f16" : "bf16"; }
inline size_t dt_size(Dt d) { return d == Dt::f32 ? 4 : 2; }
inline DLDataType dt_dl(Dt d) {
  return d == Dt::f32   ? DLDataType{kDLFloat, 32, 1}
         : d == Dt::f16 ? DLDataType{kDLFloat, 16, 1}
                        : DLDataType{kDLBfloat, 16, 1};
}

// Host arrays of one dtype, kept as raw bytes; values read and written as double.
struct HostArray {
  Dt dt = Dt::f32;
  std::vector<unsigned char> bytes;
  HostArray() = default;
  HostArray(Dt d, size_t n) : dt(d), bytes(n * dt_size(d)) {}
  size_t size() const { return bytes.size() / dt_size(dt); }
  double get(size_t i) const {
    switch (dt) {
      case Dt::f32: {
        float v;
        std::memcpy(&v, &bytes[i * 4], 4);
        return v;
      }
      case Dt::f16: {
        __half v;
        std::memcpy(&v, &bytes[i * 2], 2);
        return __half2float(v);
      }
      default: {
        __nv_bfloat16 v;
        std::memcpy(&v, &bytes[i * 2], 2);
        return __bfloat162float(v);
      }
    }
  }
  void set(size_t i, double value) {
    const float f = static_cast<float>(value);
    switch (dt) {
      case Dt::f32:
        std::memcpy(&bytes[i * 4], &f, 4);
        break;
      case Dt::f16: {
        const __half v = __float2half_rn(f);
        std::memcpy(&bytes[i * 2], &v, 2);
        break;
      }
      default: {
        const __nv_bfloat16 v = __float2bfloat16_rn(f);
        std::memcpy(&bytes[i * 2], &v, 2);
        break;
      }
    }
  }
  bool same_bits(const HostArray& o, size_t i) const {
    const size_t s = dt_size(dt);
    return std::memcmp(&bytes[i * s], &o.bytes[i * s], s) == 0;
  }
  void upload(void* dst) const {
    DKGPU_CHECK(cudaMemcpy(dst, bytes.data(), bytes.size(), cudaMemcpyHostToDevice));
  }
  void download(const void* src) {
    DKGPU_CHECK(cudaMemcpy(bytes.data(), src, bytes.size(), cudaMemcpyDeviceToHost));
  }
};

// A DLTensor view with its own shape and strides storage.
struct View {
  int64_t shape[4]{};
  int64_t strides[4]{};
  DLTensor t{};
  View() = default;
  View(void* data, int device, DLDataType dtype, std::vector<int64_t> shp, std::vector<int64_t> str,
       uint64_t byte_offset = 0) {
    t.data = data;
    t.device = DLDevice{kDLCUDA, device};
    t.ndim = static_cast<int32_t>(shp.size());
    t.dtype = dtype;
    for (size_t i = 0; i < shp.size(); ++i) {
      shape[i] = shp[i];
      strides[i] = str[i];
    }
    t.shape = shape;
    t.strides = strides;
    t.byte_offset = byte_offset;
  }
  View(const View& o) { *this = o; }
  View& operator=(const View& o) {
    std::memcpy(shape, o.shape, sizeof shape);
    std::memcpy(strides, o.strides, sizeof strides);
    t = o.t;
    t.shape = shape;
    t.strides = strides;
    return *this;
  }
  const DLTensor* get() const { return &t; }
};

inline DLDataType i32_dl() { return DLDataType{kDLInt, 32, 1}; }
inline DLDataType u8_dl() { return DLDataType{kDLUInt, 8, 1}; }

// ---- float64 reference (docs/design.md section 5), on logical index functions

struct RefConv {
  int width = 4;
  bool silu = false;
  std::vector<double> w;     // D x W
  std::vector<double> bias;  // D or empty
  double point(int64_t d, const double* e /* W values, oldest first */) const {
    double acc = bias.empty() ? 0.0 : bias[d];
    for (int k = 0; k < width; ++k) acc += w[d * width + k] * e[k];
    return silu ? acc / (1.0 + std::exp(-acc)) : acc;
  }
};

inline double tolerance(Dt d) { return d == Dt::f32 ? 2e-5 : d == Dt::f16 ? 2e-3 : 1.6e-2; }

// CUDA events around `iters` back-to-back calls on one stream: the device time per call.
struct EventTimer {
  cudaEvent_t a{}, b{};
  EventTimer() {
    DKGPU_CHECK(cudaEventCreate(&a));
    DKGPU_CHECK(cudaEventCreate(&b));
  }
  ~EventTimer() {
    cudaEventDestroy(a);
    cudaEventDestroy(b);
  }
  // Mean device time per call of `iters` back-to-back calls, after 3 warm-ups.
  template <class F>
  double us_per_call(cudaStream_t s, int iters, F&& f) {
    for (int i = 0; i < 3; ++i) f(i);
    DKGPU_CHECK(cudaStreamSynchronize(s));
    DKGPU_CHECK(cudaEventRecord(a, s));
    for (int i = 0; i < iters; ++i) f(i);
    DKGPU_CHECK(cudaEventRecord(b, s));
    DKGPU_CHECK(cudaEventSynchronize(b));
    float ms = 0;
    DKGPU_CHECK(cudaEventElapsedTime(&ms, a, b));
    return ms * 1000.0 / iters;
  }
};

}  // namespace dkgpu
