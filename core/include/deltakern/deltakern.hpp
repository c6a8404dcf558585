// deltakern: the public C++ API an inference engine calls.
//
// Tensors go in as DLPack DLTensor views (borrowed: the caller keeps them alive for the
// call and, on CUDA, until the stream has run it) and come out as an owning
// deltakern::Tensor, which releases to a DLManagedTensor for a Python binding.
//
// THE RETURNED TENSOR IS THE RESULT (or, for the *_out variants, the caller's out). Which backend serves a
// call depends on the install and the configuration, and the backends keep different contracts: `native`
// convolves x in place and returns a view of x; `portable` leaves x untouched and returns a fresh tensor.
// Always use the returned tensor, and never rely on x afterwards, whether it changed or not. Both update the
// conv state pool in place.
//
// Errors throw deltakern::Error. A rejected call has written nothing.
#pragma once

#include <dlpack/dlpack.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace deltakern {

enum class ErrorCode {
  invalid_argument,  // bad shape, dtype, device, layout, or index contents (validate)
  unsupported,       // no backend (or the forced one) declares this call
  unavailable,       // a backend declares it but cannot use the device here (no driver, no GPU)
  out_of_memory,
  runtime,  // a launch or device failure inside a backend
  config,   // the configuration file or environment is wrong
  internal
};

class Error : public std::runtime_error {
 public:
  Error(ErrorCode code, const std::string& what) : std::runtime_error(what), code_(code) {}
  ErrorCode code() const noexcept { return code_; }

 private:
  ErrorCode code_;
};

namespace detail {
// Calls managed->deleter (when there is one). A deleter is a backend's code, and one that
// throws (a defect) is logged, once, instead of terminating the process.
void delete_result(DLManagedTensor* managed) noexcept;
}  // namespace detail

// An owning DLPack tensor: a fresh output, or a view of an input it aliases.
class Tensor {
 public:
  Tensor() = default;
  explicit Tensor(DLManagedTensor* managed) noexcept : managed_(managed) {}
  Tensor(Tensor&&) noexcept = default;
  Tensor& operator=(Tensor&&) noexcept = default;

  explicit operator bool() const noexcept { return managed_ != nullptr; }
  const DLTensor& dl() const noexcept { return managed_->dl_tensor; }
  const DLTensor* operator->() const noexcept { return &managed_->dl_tensor; }
  // Hands ownership to the caller (e.g. a DLPack capsule); call its deleter when done.
  DLManagedTensor* release() noexcept { return managed_.release(); }
  // True when this tensor's elements are those of `other` (an in-place result).
  bool aliases(const DLTensor& other) const noexcept;

 private:
  struct Deleter {
    void operator()(DLManagedTensor* m) const noexcept { detail::delete_result(m); }
  };
  std::unique_ptr<DLManagedTensor, Deleter> managed_;
};

enum class Activation { none, silu };
// "none", "silu" and its alias "swish"; anything else throws invalid_argument.
Activation activation_from_string(std::string_view name);

// Arguments of causal_conv1d_varlen; see docs/design.md section 5 for the exact semantics.
struct CausalConv1dVarlenArgs {
  const DLTensor* x = nullptr;                  // (D, T): time-contiguous or channel-last
  const DLTensor* weight = nullptr;             // (D, W), x's dtype or float32
  const DLTensor* bias = nullptr;               // (D) or none
  const DLTensor* conv_states = nullptr;        // (lines, D, S): updated in place
  const DLTensor* query_start_loc = nullptr;    // (batch+1) int32, on x's device
  const DLTensor* cache_indices = nullptr;      // (batch) int32, or none: identity
  const DLTensor* has_initial_state = nullptr;  // (batch) uint8, or none: all false
  Activation activation = Activation::none;
  int64_t pad_slot_id = -1;
  // The longest sequence, known on the host. Given, the call reads nothing back from the
  // device and is capturable in a CUDA graph. Omitted, a backend that sizes its launch
  // with it derives it with one device-to-host sync.
  std::optional<int64_t> max_seq_len;
  std::optional<bool> validate;  // check index contents first (one sync); default: config
  void* stream = nullptr;        // cudaStream_t on CUDA
};

// Arguments of causal_conv1d_update (decode).
struct CausalConv1dUpdateArgs {
  const DLTensor* x = nullptr;                   // (batch, D) or (batch, D, Tq)
  const DLTensor* conv_state = nullptr;          // (lines, D, S): updated in place
  const DLTensor* weight = nullptr;              // (D, W)
  const DLTensor* bias = nullptr;                // (D) or none
  const DLTensor* conv_state_indices = nullptr;  // (batch) int32, or none: identity
  const DLTensor* cache_seqlens = nullptr;       // (batch) int32: circular state; none: shift
  Activation activation = Activation::none;
  int64_t pad_slot_id = -1;
  std::optional<bool> validate;
  void* stream = nullptr;
};

// The ops go through Runtime::global() (see runtime.hpp for explicit runtimes).
[[nodiscard]] Tensor causal_conv1d_varlen(const CausalConv1dVarlenArgs& args);
[[nodiscard]] Tensor causal_conv1d_update(const CausalConv1dUpdateArgs& args);

// The out-variants: the result is written into the caller's `out` and nothing is allocated
// for it; x is left untouched on every backend, and the conv states update as above. `out`
// has x's shape, dtype, device and layout (time-contiguous or channel-last, any strides
// within it) and shares memory with no other argument. Out's tokens (update: rows) of a
// skipped sequence (pad_slot_id, or an out-of-range index) are unspecified afterwards; its
// elements outside the view (a padded row pitch) are never written.
void causal_conv1d_varlen_out(const CausalConv1dVarlenArgs& args, const DLTensor& out);
void causal_conv1d_update_out(const CausalConv1dUpdateArgs& args, const DLTensor& out);

// Calls served by a backend other than the op's configured first choice (the first name of
// its preference list) since the runtime was built or its counts were last reset. One entry
// per (op, serving backend, first choice, reason); plain data, for a binding to return.
// With dispatch.strict (or DELTAKERN_STRICT=1) such calls are errors instead, and none is
// counted.
struct FallbackCount {
  std::string op;
  std::string backend;       // served the calls
  std::string first_choice;  // was passed over
  std::string reason;        // why the first choice could not serve them
  uint64_t count = 0;        // calls, each counted when it is handed to `backend`
};
// The global runtime's counts, entries with count 0 left out; and setting them all to 0.
std::vector<FallbackCount> fallback_counts();
void reset_fallback_counts();

// Host-side metadata of a varlen batch. Engines know the lengths on the host; building
// query_start_loc and max_seq_len here is what makes the prefill sync-free.
struct VarlenMetadata {
  std::vector<int32_t> query_start_loc;  // host copy, batch+1 entries
  int64_t max_seq_len = 0;
  int64_t total_tokens = 0;
  int64_t batch() const { return static_cast<int64_t>(query_start_loc.size()) - 1; }

  static VarlenMetadata from_lengths(std::span<const int64_t> lengths);
  // query_start_loc as an int32 tensor on `device`, allocated through the runtime's
  // allocator; on CUDA the copy is enqueued on `stream` and does not wait.
  Tensor upload(DLDevice device, void* stream = nullptr) const;
};

// Device-to-host reads made by backends on this thread (each read_to_host counts one).
uint64_t host_syncs() noexcept;

// Reads (and clears) the device-side error words of every loaded backend on `device`:
// kernels skip an out-of-range cache index instead of writing out of bounds, and flag it
// there. A sync. Throws Error(invalid_argument) naming what was flagged; returns quietly
// when clean.
void check_errors(DLDevice device = DLDevice{kDLCPU, 0}, void* stream = nullptr);

}  // namespace deltakern
