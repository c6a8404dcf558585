// A borrowed DLTensor over any Python object that speaks DLPack (torch, numpy, nanobind's own
// ndarray, a capsule), or a fresh tensor from a producer's allocator. A type with the DLPack C
// exchange API (torch.Tensor) is imported through it, in C, with no Python method run; anything
// else through nanobind's ndarray import, which does the protocol. No copy is ever made: an array
// the core cannot take as it is (a layout, dtype or device it rejects) is the core's error,
// naming the argument, never a silent .contiguous().
#pragma once

#include "dlpack_exchange.hpp"

#include <dlpack/dlpack.h>
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>

#include <memory>
#include <optional>

namespace deltakern::python {

class TensorView {
 public:
  // Throws deltakern::Error(invalid_argument) naming `op` and `name` when `object` is not a
  // DLPack producer.
  TensorView(nanobind::handle object, const char* op, const char* name);

  // Through `api` only (`object` must be of the type it came from); nullopt when the producer
  // refuses the tensor, so that the caller can take the general path and its errors.
  static std::optional<TensorView> from_exchange(nanobind::handle object, const dlpack_exchange::Api& api);

  // A fresh tensor from `api`'s allocator with x's shape, dtype and device, in x's layout: compact,
  // and channel-last (channel stride 1, time stride D) when `channel_last`, x's channels at
  // `channel_dim` and its time right after. Throws Error(out_of_memory) naming `op` on failure.
  static TensorView allocate_like(const dlpack_exchange::Api& api, const DLTensor& x, int channel_dim,
                                  bool channel_last, const char* op);

  const DLTensor& dl() const noexcept { return dl_; }
  // The exchange table the tensor came through (its producer's stream and allocator), or nullptr.
  const dlpack_exchange::Api* exchange_api() const noexcept { return api_; }

  // An allocated tensor as its producer's Python object (a torch.Tensor), ownership handed over.
  nanobind::object release_to_python() &&;

 private:
  TensorView() = default;

  struct ManagedDeleter {
    void operator()(dlpack_exchange::ManagedTensorVersioned* m) const noexcept {
      if (m->deleter != nullptr) m->deleter(m);
    }
  };

  nanobind::ndarray<> array_;  // keeps the producer's memory alive for the call (nanobind path)
  const dlpack_exchange::Api* api_ = nullptr;
  // An allocated tensor until it is handed to Python; its own view of the memory (x's layout,
  // which the allocator does not take) lives in layout_.
  std::unique_ptr<dlpack_exchange::ManagedTensorVersioned, ManagedDeleter> managed_;
  std::unique_ptr<int64_t[]> layout_;  // shape then strides, for an allocated tensor
  DLTensor dl_{};
};

// None stays none (an optional argument left out).
std::optional<TensorView> optional_view(nanobind::handle object, const char* op, const char* name);

inline const DLTensor* pointer(const std::optional<TensorView>& view) { return view ? &view->dl() : nullptr; }

}  // namespace deltakern::python
