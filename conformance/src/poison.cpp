// Fresh outputs come from here in the suite's runtimes: a guard zone on each side, the
// buffer filled with the poison of the running call. The ledger of live allocations is
// process-wide because a Runtime keeps its Allocator by value and gives no way back to
// it; cases run one at a time, the mutex only keeps concurrent users from tearing it.
#include "poison.hpp"

#include "device.hpp"
#include "guard.hpp"
#include "tensor.hpp"

#include <deltakern/conformance.hpp>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <utility>

#if DELTAKERN_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

namespace deltakern::conformance {

namespace {

thread_local Poison current_poison = Poison::nan;
thread_local uint64_t current_call = 0;
std::atomic<uint64_t> calls{0};

struct Ledger {
  std::mutex mutex;
  std::map<uintptr_t, Allocation> live;  // by start
  std::string violations;                // found on release, not yet taken
};
Ledger& ledger() {
  static Ledger l;
  return l;
}

void remember(DLDevice device, void* start, size_t bytes) {
  auto& l = ledger();
  const std::lock_guard lock(l.mutex);
  const auto at = reinterpret_cast<uintptr_t>(start);
  l.live[at] = {device, at, bytes, current_call};
}

std::optional<Allocation> forget(void* start) {
  auto& l = ledger();
  const std::lock_guard lock(l.mutex);
  const auto it = l.live.find(reinterpret_cast<uintptr_t>(start));
  if (it == l.live.end()) return std::nullopt;
  const Allocation a = it->second;
  l.live.erase(it);
  return a;
}

void record_violation(const std::string& message) {
  auto& l = ledger();
  const std::lock_guard lock(l.mutex);
  if (l.violations.empty()) l.violations = message;  // the first one; later ones add nothing
}

// Host memory: [guard][bytes, poisoned][guard], 64-aligned throughout.
void* allocate_host(size_t bytes) {
  const size_t total = (2 * kGuardBytes + bytes + 63) / 64 * 64;
  auto* base = static_cast<unsigned char*>(std::aligned_alloc(64, total));
  if (base == nullptr) return nullptr;
  std::memset(base, kGuardByte, total);
  std::memset(base + kGuardBytes, poison_byte(current_poison), bytes);
  return base + kGuardBytes;
}

#if DELTAKERN_HAVE_CUDA
// Stream-ordered and memset only, so it is legal inside a stream capture.
void* allocate_cuda(DLDevice device, size_t bytes, cudaStream_t s) {
  void* base = nullptr;
  if (cudaSetDevice(device.device_id) != cudaSuccess) return nullptr;
  const size_t total = 2 * kGuardBytes + bytes;
  if (cudaMallocAsync(&base, total, s) != cudaSuccess) return nullptr;
  auto* start = static_cast<char*>(base) + kGuardBytes;
  if (cudaMemsetAsync(base, kGuardByte, total, s) != cudaSuccess ||
      cudaMemsetAsync(start, poison_byte(current_poison), bytes, s) != cudaSuccess) {
    cudaFreeAsync(base, s);
    return nullptr;
  }
  return start;
}
#endif

}  // namespace

unsigned char poison_byte(Poison p) { return p == Poison::nan ? 0xFF : 0x5A; }

std::string poison_name(Poison p) { return p == Poison::nan ? "NaN bytes 0xFF" : "finite bytes 0x5A"; }

PoisonScope::PoisonScope(Poison p)
    : previous_(current_poison), previous_call_(current_call), call_(calls.fetch_add(1) + 1) {
  current_poison = p;
  current_call = call_;
}
PoisonScope::~PoisonScope() {
  current_poison = previous_;
  current_call = previous_call_;
}

void poison_out(TensorBuf& out) {
  const uint32_t bits = size_of(out.dtype()) == 4 ? 0xFFFFFFFFu : size_of(out.dtype()) == 2 ? 0xFFFFu : 0xFFu;
  out.fill([bits](int64_t) { return bits; });
}

std::optional<Poison> poison_of(uint32_t bits, size_t size) {
  const uint64_t mask = size >= 4 ? 0xFFFFFFFFull : (1ull << (8 * size)) - 1;
  for (Poison p : {Poison::nan, Poison::finite})
    if (bits == (mask & (poison_byte(p) * 0x01010101u))) return p;
  return std::nullopt;
}

std::optional<Allocation> find_allocation(uintptr_t p) {
  auto& l = ledger();
  const std::lock_guard lock(l.mutex);
  auto it = l.live.upper_bound(p);
  if (it == l.live.begin()) return std::nullopt;
  --it;
  const Allocation& a = it->second;
  if (p >= a.start + std::max<size_t>(a.bytes, 1)) return std::nullopt;
  return a;
}

std::string take_release_violations() {
  auto& l = ledger();
  const std::lock_guard lock(l.mutex);
  return std::exchange(l.violations, {});
}

Allocator poisoning_allocator() {
  Allocator a;
  a.allocate = [](DLDevice device, size_t bytes, void* stream) -> void* {
    void* start = nullptr;
    if (device.device_type == kDLCPU) start = allocate_host(bytes);
#if DELTAKERN_HAVE_CUDA
    if (device.device_type == kDLCUDA)
      start = allocate_cuda(device, bytes, static_cast<cudaStream_t>(stream));
#endif
    (void)stream;
    if (start != nullptr) remember(device, start, bytes);
    return start;
  };
  a.deallocate = [](DLDevice device, void* ptr, void* stream) {
    if (ptr == nullptr) return;
    const auto allocation = forget(ptr);
    auto* base = static_cast<char*>(ptr) - kGuardBytes;
    if (device.device_type == kDLCPU) {
      if (allocation)
        if (auto m = check_guards(device, ptr, allocation->bytes,
                                  "a buffer of " + std::to_string(allocation->bytes) +
                                      " bytes it allocated from the host and released");
            !m.empty())
          record_violation(m);
      std::free(base);
      return;
    }
#if DELTAKERN_HAVE_CUDA
    cudaSetDevice(device.device_id);
    cudaFreeAsync(base, static_cast<cudaStream_t>(stream));
#else
    (void)stream;
#endif
  };
  return a;
}

}  // namespace deltakern::conformance
