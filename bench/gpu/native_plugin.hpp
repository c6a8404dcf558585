// The native plugin loaded as the core would load it (dlopen, its entry, init with a minimal
// host-services table of our own) and called through its C ABI alone, with no core: shared by
// tests/gpu/native_selftest.cpp (the checks) and bench/gpu/native_kernel_bench.cpp (the timings).
#pragma once

#include <cuda_runtime_api.h>
#include <deltakern/op_schemas.h>
#include <deltakern/plugin_abi.h>
#include <dlfcn.h>

#include <cstdint>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <vector>

#include "gpu_util.hpp"

namespace dkgpu {

// Host services: stream-ordered CUDA allocation, a device-to-host read of compact tensors (the
// error word) and logging to stderr.
struct Host {
  static int32_t alloc(void*, DLDevice, size_t bytes, void* stream, void** out) {
    return cudaMallocAsync(out, bytes, static_cast<cudaStream_t>(stream)) == cudaSuccess
               ? DK_OK
               : DK_ERR_OUT_OF_MEMORY;
  }
  static void release(void*, DLDevice, void* ptr, void* stream) {
    cudaFreeAsync(ptr, static_cast<cudaStream_t>(stream));
  }
  static int32_t read_to_host(void*, void* dst, const DLTensor* src, void* stream) {
    size_t n = (src->dtype.bits / 8);
    for (int d = 0; d < src->ndim; ++d) n *= src->shape[d];  // compact sources only (the error word)
    if (cudaMemcpyAsync(dst, static_cast<char*>(src->data) + src->byte_offset, n, cudaMemcpyDeviceToHost,
                        static_cast<cudaStream_t>(stream)) != cudaSuccess)
      return DK_ERR_RUNTIME;
    return cudaStreamSynchronize(static_cast<cudaStream_t>(stream)) == cudaSuccess ? DK_OK : DK_ERR_RUNTIME;
  }
  static void log(void*, int32_t level, const char* msg) {
    std::fprintf(stderr, "[plugin %d] %s\n", level, msg);
  }
};

struct Plugin {
  void* so = nullptr;
  const dk_plugin* table = nullptr;
  void* self = nullptr;
  dk_host host{sizeof(dk_host), nullptr, Host::log, Host::alloc, Host::release, Host::read_to_host};

  explicit Plugin(const std::string& path) {
    so = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (so == nullptr) throw std::runtime_error(std::string("dlopen: ") + dlerror());
    auto entry = reinterpret_cast<dk_plugin_entry_fn>(dlsym(so, DK_PLUGIN_ENTRY_SYMBOL));
    if (entry == nullptr) throw std::runtime_error("no entry symbol");
    table = entry(DK_ABI_MAJOR, DK_ABI_MINOR);
    init();
  }
  Plugin(const Plugin&) = delete;
  Plugin& operator=(const Plugin&) = delete;
  // (Re)initialises the plugin: it reads its environment (DELTAKERN_NATIVE_TILE) in init.
  void init() {
    if (self != nullptr) table->shutdown(self);
    char err[512] = {};
    if (table->init(&host, &self, err, sizeof err) != DK_OK)
      throw std::runtime_error(std::string("init: ") + err);
  }
  ~Plugin() {
    if (self != nullptr) table->shutdown(self);
  }
  const dk_op& op(const char* name) const {
    for (size_t i = 0; i < table->n_ops; ++i)
      if (std::string(table->ops[i].name) == name) return table->ops[i];
    throw std::runtime_error(std::string("no op ") + name);
  }
  // Runs and returns the status; the result (a view of x) must alias x, and an out-variant's
  // (*_out, which returns nothing) must be null.
  int32_t run(const char* name, const std::vector<const DLTensor*>& tensors,
              const std::vector<dk_scalar>& scalars, void* stream, std::string* error = nullptr) const {
    const dk_call call{sizeof(dk_call), stream,         tensors.size(),   tensors.data(),
                       scalars.size(),  scalars.data(), sizeof(dk_scalar)};
    const dk_op& o = op(name);
    char why[512] = {};
    if (o.supports != nullptr && o.supports(self, &call, why, sizeof why) != DK_OK) {
      if (error) *error = std::string("supports: ") + why;
      return DK_ERR_UNSUPPORTED;
    }
    const std::string op_name = name;
    const bool out_variant = op_name.size() > 4 && op_name.compare(op_name.size() - 4, 4, "_out") == 0;
    // An out-variant must set *result to null whatever it held: it starts as a non-null poison.
    static DLManagedTensor poison{};
    DLManagedTensor* result = out_variant ? &poison : nullptr;
    const int32_t st = o.run(self, &call, &result, why, sizeof why);
    if (st != DK_OK) {
      if (error) *error = why;
      return st;
    }
    if (out_variant) {
      if (result == nullptr) return DK_OK;
      if (error)
        *error =
            result == &poison ? "an out-variant left *result as it was" : "an out-variant returned a result";
      if (result != &poison && result->deleter != nullptr) result->deleter(result);
      return DK_ERR_INTERNAL;
    }
    if (result == nullptr || result->dl_tensor.data != tensors[0]->data ||
        result->dl_tensor.byte_offset != tensors[0]->byte_offset) {
      if (error) *error = "result does not alias x";
      if (result) result->deleter(result);
      return DK_ERR_INTERNAL;
    }
    result->deleter(result);
    return DK_OK;
  }
  uint32_t check_errors(cudaStream_t stream) const {
    uint32_t flags = 0;
    char msg[256] = {};
    if (table->check_errors(self, DLDevice{kDLCUDA, 0}, stream, &flags, msg, sizeof msg) != DK_OK)
      throw std::runtime_error(std::string("check_errors: ") + msg);
    return flags;
  }
};

inline dk_scalar str_scalar(const char* s) { return dk_scalar{DK_SCALAR_STRING, 0, 0.0, s}; }
inline dk_scalar int_scalar(int64_t v) { return dk_scalar{DK_SCALAR_INT, v, 0.0, nullptr}; }
inline dk_scalar none_scalar() { return dk_scalar{DK_SCALAR_NONE, 0, 0.0, nullptr}; }

// Whether the plugin serves CUDA here (its reason printed when not), and which GPU it runs on.
inline bool probe_cuda(const Plugin& plugin) {
  char why[256] = {};
  if (plugin.table->probe(plugin.self, kDLCUDA, why, sizeof why) != DK_OK) {
    std::printf("probe: %s\n", why);
    return false;
  }
  cudaDeviceProp prop{};
  DKGPU_CHECK(cudaGetDeviceProperties(&prop, 0));
  std::printf("device: %s, sm_%d%d, %d SMs\n", prop.name, prop.major, prop.minor, prop.multiProcessorCount);
  return true;
}

}  // namespace dkgpu
