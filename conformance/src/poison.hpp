// What fresh outputs hold before a backend writes them, and the ledger of the buffers the
// suite's allocator handed out. Each call case runs twice, its fresh outputs poisoned
// first with NaN bytes and then with finite bytes: an element left unwritten fails the
// comparison in the first run, and in the second, even a backend that wrote only where
// it found a NaN gives a result that is not bit-identical to the first.
#pragma once

#include <dlpack/dlpack.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

namespace deltakern::conformance {

enum class Poison {
  nan,    // 0xFF bytes: a NaN in every float dtype
  finite  // 0x5A bytes: 1.5e16 in f32 and bf16, 203.25 in f16; far from any output
};
unsigned char poison_byte(Poison p);
std::string poison_name(Poison p);  // "NaN bytes 0xFF"

// One call of a case: fresh outputs allocated on this thread while it lives are filled with
// `p` (NaN outside any scope) and recorded as allocated for this call.
class PoisonScope {
 public:
  explicit PoisonScope(Poison p);
  ~PoisonScope();
  PoisonScope(const PoisonScope&) = delete;
  PoisonScope& operator=(const PoisonScope&) = delete;
  // This call's number (process-wide, from 1): what allocations made during it carry.
  uint64_t call() const noexcept { return call_; }

 private:
  Poison previous_;
  uint64_t previous_call_, call_;
};

class TensorBuf;
// An out-variant's out before each call: NaN bytes in every element (its slack keeps its own
// pattern), so that an element the call never writes fails the comparison, as in a fresh output.
void poison_out(TensorBuf& out);

// Whether `bits` of an element of `size` bytes are all one poison byte; which one.
std::optional<Poison> poison_of(uint32_t bits, size_t size);

// A live allocation of the poisoning allocator: `bytes` from `start`, guarded both sides.
struct Allocation {
  DLDevice device{kDLCPU, 0};
  uintptr_t start = 0;
  size_t bytes = 0;
  uint64_t call = 0;  // the PoisonScope it was made in; 0: outside any
};
// The live allocation that holds address `p`, if the poisoning allocator made one.
std::optional<Allocation> find_allocation(uintptr_t p);

// Stray writes found in the guards of host allocations the backend released (scratch
// it allocated and freed within a call), since the last take; empty if none. CUDA
// releases are stream-ordered and not checked: the result's guards are, after a sync.
std::string take_release_violations();

}  // namespace deltakern::conformance
