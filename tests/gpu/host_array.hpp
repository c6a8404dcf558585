// Host arrays of one element type, kept as raw bytes, read and written as float64 through the
// conformance suite's own conversions (dtype.hpp: encode rounds to nearest even once, decode is
// exact), so that no CUDA or backend conversion code decides what a check expects. Shared by
// tests/gpu's native_selftest and portable_cut_digest.
#pragma once

#include <cstdint>
#include <cstring>
#include <vector>

#include "dtype.hpp"  // conformance/src (deltakern_reference)
#include "gpu_util.hpp"

namespace dkgpu {

struct HostArray {
  ScalarType dt = ScalarType::f32;
  std::vector<unsigned char> bytes;
  HostArray() = default;
  HostArray(ScalarType d, size_t n) : dt(d), bytes(n * size_of(d)) {}
  size_t size() const { return bytes.size() / size_of(dt); }
  // An element's bits are the low size_of(dt) bytes of encode()'s word (little-endian hosts).
  double get(size_t i) const {
    uint32_t bits = 0;
    std::memcpy(&bits, &bytes[i * size_of(dt)], size_of(dt));
    return deltakern::conformance::decode(dt, bits);
  }
  void set(size_t i, double value) {
    const uint32_t bits = deltakern::conformance::encode(dt, value);
    std::memcpy(&bytes[i * size_of(dt)], &bits, size_of(dt));
  }
  bool same_bits(const HostArray& o, size_t i) const {
    const size_t s = size_of(dt);
    return std::memcmp(&bytes[i * s], &o.bytes[i * s], s) == 0;
  }
  void upload(void* dst) const {
    DKGPU_CHECK(cudaMemcpy(dst, bytes.data(), bytes.size(), cudaMemcpyHostToDevice));
  }
  void download(const void* src) {
    DKGPU_CHECK(cudaMemcpy(bytes.data(), src, bytes.size(), cudaMemcpyDeviceToHost));
  }
};

}  // namespace dkgpu
