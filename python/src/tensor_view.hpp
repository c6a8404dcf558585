// A borrowed DLTensor over any Python object that speaks DLPack (torch, numpy, nanobind's own
// ndarray, a capsule). nanobind's ndarray import does the protocol; no copy is ever made: an
// array the core cannot take as it is (a layout, dtype or device it rejects) is the core's error,
// naming the argument, never a silent .contiguous().
#pragma once

#include <dlpack/dlpack.h>
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>

#include <optional>

namespace deltakern::python {

class TensorView {
 public:
  // Throws deltakern::Error(invalid_argument) naming `op` and `name` when `object` is not a
  // DLPack producer.
  TensorView(nanobind::handle object, const char* op, const char* name);

  const DLTensor& dl() const noexcept { return dl_; }

 private:
  nanobind::ndarray<> array_;  // keeps the producer's memory alive for the call
  DLTensor dl_{};
};

// None stays none (an optional argument left out).
std::optional<TensorView> optional_view(nanobind::handle object, const char* op, const char* name);

inline const DLTensor* pointer(const std::optional<TensorView>& view) {
  return view ? &view->dl() : nullptr;
}

}  // namespace deltakern::python
