// Guard zones: bytes the suite owns on either side of every buffer it hands a backend
// (its own tensors, and the fresh outputs its allocator returns), filled with a known
// byte and compared after each call. A write one element past the end of a buffer, or
// before its start, lands in a guard and is reported with its byte offset, on the CPU
// and on CUDA through the same code (the copies go through device.hpp).
#pragma once

#include "device.hpp"

#include <dlpack/dlpack.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace deltakern::conformance {

// 256 bytes keep the buffer between the guards at the 256-byte alignment cudaMalloc
// gives (and the 64 bytes the host path promises), and wide enough that a vector store
// of a whole tile past the end still lands inside the guard.
inline constexpr size_t kGuardBytes = 256;
// One byte value throughout, so that cudaMemsetAsync can lay it down inside a stream
// capture (where a copy from host memory is not allowed). Distinct from the slack
// (0xA5) and poison (0xFF, 0x5A) bytes, so each kind of stray write is told apart.
inline constexpr unsigned char kGuardByte = 0xDB;

// Empty when the kGuardBytes before `buffer` and after its `bytes` all still hold
// kGuardByte; else "wrote outside <name>: byte offset N after the end ..." (or "before
// the start"), naming the changed byte nearest to the buffer. On CUDA the caller syncs
// the stream first.
std::string check_guards(DLDevice device, const void* buffer, size_t bytes, std::string_view name);

// An owned buffer of `bytes` with a filled guard zone on each side.
class GuardedMemory {
 public:
  GuardedMemory() = default;
  GuardedMemory(DLDevice device, size_t bytes);

  void* get() const noexcept { return start(); }
  size_t size() const noexcept { return bytes_; }
  std::string check(std::string_view name) const {
    return check_guards(memory_.device(), start(), bytes_, name);
  }

 private:
  char* start() const noexcept {
    return memory_.get() == nullptr ? nullptr : static_cast<char*>(memory_.get()) + kGuardBytes;
  }
  DeviceMemory memory_;  // guard, the buffer, guard
  size_t bytes_ = 0;
};

}  // namespace deltakern::conformance
