// Device discovery and the device-side error word of the portable CUDA path.
#include <array>
#include <atomic>
#include <cstdlib>
#include <sstream>

#include "host.cuh"
#include "launch.hpp"

namespace deltakern::portable::cuda {
namespace {

// Kernels never write out of bounds; they skip the offending sequence and set dk_error_bits here,
// which the plugin's check_errors reads later through read_to_host. One word per device: every
// context that loads the plugin's module gets its own instance.
__device__ uint32_t g_error_word;

// The address is resolved once per device: cudaGetSymbolAddress may load the module, which is best
// kept out of the hot path and out of a stream capture that starts later.
constexpr int kMaxCachedDevices = 64;
std::array<std::atomic<uint32_t*>, kMaxCachedDevices> g_error_word_ptrs{};
std::array<std::atomic<int>, kMaxCachedDevices> g_sm_counts{};
// Whether the device runs code compiled for sm_90 or later: 1 yes, -1 no, 0 not asked yet.
std::array<std::atomic<int>, kMaxCachedDevices> g_pdl{};
// Compiled like every kernel of the plugin: the image the driver picks for it is theirs.
__global__ void pdl_probe_kernel() {}

// Set once by the plugin's init, before any call.
TilingOverride g_tiling_override;

}  // namespace

bool available(std::string& why) {
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    // With no driver installed at all the runtime reports an "insufficient" driver: say both.
    why = err == cudaErrorInsufficientDriver || err == cudaErrorNoDevice
              ? std::string("no usable CUDA driver or device (") + cudaGetErrorString(err) + ")"
              : std::string("CUDA runtime: ") + cudaGetErrorString(err);
    cudaGetLastError();  // not sticky, but keep it from surfacing in a later launch check
    return false;
  }
  if (count == 0) {
    why = "no CUDA device";
    return false;
  }
  return true;
}

int compute_capability(int device_id) {
  int major = 0;
  int minor = 0;
  const std::string what = "compute capability of CUDA device " + std::to_string(device_id);
  check_cuda(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device_id), what);
  check_cuda(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device_id), what);
  return major * 10 + minor;
}

TilingOverride parse_tiling_override(const std::string& spec, std::string& why) {
  TilingOverride o;
  std::istringstream in(spec);
  std::string item;
  while (std::getline(in, item, ',')) {
    const auto eq = item.find('=');
    const std::string key = item.substr(0, eq);
    char* end = nullptr;
    const long v = eq == std::string::npos ? -1 : std::strtol(item.c_str() + eq + 1, &end, 10);
    const bool number =
        eq != std::string::npos && end != nullptr && *end == '\0' && end != item.c_str() + eq + 1;
    auto take = [&](int& field, bool ok) {
      if (!number || !ok) {
        why = "DELTAKERN_PORTABLE_CUDA_TILING: bad value in '" + item + "'";
        return false;
      }
      field = int(v);
      return true;
    };
    bool ok = false;
    if (key == "lanes") {
      ok = take(o.lanes, v == 8 || v == 16 || v == 32);
    } else if (key == "steps") {
      ok = take(o.steps, v >= 1 && v <= 64);
    } else if (key == "iters") {
      ok = take(o.iters, v >= 1 && v <= kMaxTimeChannelIters);
    } else if (key == "chunks") {
      ok = take(o.chunks, v >= 1 && v <= 64);
    } else if (key == "flat") {
      ok = take(o.flat, v == 0 || v == 1);
      if (ok) o.flat = v == 1 ? 1 : 2;
    } else {
      why = "DELTAKERN_PORTABLE_CUDA_TILING: unknown key '" + key + "' (lanes, steps, iters, chunks, flat)";
    }
    if (!ok) return TilingOverride{};
  }
  return o;
}

void set_tiling_override(const TilingOverride& o) { g_tiling_override = o; }
const TilingOverride& tiling_override() { return g_tiling_override; }

int sm_count(int device_id) {
  const bool cached = device_id >= 0 && device_id < kMaxCachedDevices;
  if (cached) {
    if (const int n = g_sm_counts[device_id].load(std::memory_order_relaxed); n > 0) return n;
  }
  int n = 0;
  check_cuda(cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, device_id),
             "multiprocessor count of CUDA device " + std::to_string(device_id));
  if (cached) g_sm_counts[device_id].store(n, std::memory_order_relaxed);
  return n;
}

bool has_pdl(int device_id) {
  const bool cached = device_id >= 0 && device_id < kMaxCachedDevices;
  if (cached) {
    if (const int v = g_pdl[device_id].load(std::memory_order_relaxed); v != 0) return v > 0;
  }
  // The kernels wait for the previous grid only where they were compiled for sm_90 or later; on
  // any other GPU the driver runs the compute_75 PTX, which has no wait, so no PDL there.
  DeviceGuard guard(device_id);
  cudaFuncAttributes attrs{};
  check_cuda(cudaFuncGetAttributes(&attrs, pdl_probe_kernel),
             "the kernel image of CUDA device " + std::to_string(device_id));
  const bool pdl = attrs.ptxVersion >= 90;
  if (cached) g_pdl[device_id].store(pdl ? 1 : -1, std::memory_order_relaxed);
  return pdl;
}

uint32_t* error_word_ptr(int device_id) {
  const bool cached = device_id >= 0 && device_id < kMaxCachedDevices;
  if (cached) {
    if (uint32_t* p = g_error_word_ptrs[device_id].load(std::memory_order_acquire)) return p;
  }
  DeviceGuard guard(device_id);
  void* p = nullptr;
  check_cuda(cudaGetSymbolAddress(&p, g_error_word),
             "the error word of CUDA device " + std::to_string(device_id));
  if (cached) g_error_word_ptrs[device_id].store(static_cast<uint32_t*>(p), std::memory_order_release);
  return static_cast<uint32_t*>(p);
}

DLTensor error_word(int device_id) {
  static int64_t shape[1] = {1};
  DLTensor t{};
  t.data = error_word_ptr(device_id);
  t.device = DLDevice{kDLCUDA, device_id};
  t.ndim = 1;
  t.dtype = DLDataType{kDLUInt, 32, 1};
  t.shape = shape;
  t.strides = nullptr;
  t.byte_offset = 0;
  return t;
}

void clear_error_word(int device_id, void* stream) {
  uint32_t* word = error_word_ptr(device_id);
  DeviceGuard guard(device_id);
  check_cuda(cudaMemsetAsync(word, 0, sizeof(uint32_t), static_cast<cudaStream_t>(stream)),
             "clearing the error word of CUDA device " + std::to_string(device_id));
}

}  // namespace deltakern::portable::cuda
