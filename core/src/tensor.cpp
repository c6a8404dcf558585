#include "loader/plugin_exception.hpp"
#include "services/dlpack_util.hpp"
#include "services/log.hpp"

#include <deltakern/deltakern.hpp>

#include <atomic>

namespace deltakern {

bool Tensor::aliases(const DLTensor& other) const noexcept {
  return managed_ != nullptr && detail::memory_overlaps(managed_->dl_tensor, other);
}

void detail::delete_result(DLManagedTensor* managed) noexcept {
  if (managed == nullptr || managed->deleter == nullptr) return;
  try {
    managed->deleter(managed);
  } catch (...) {
    // Once: a deleter that throws will throw for every tensor, and the memory it held may be lost.
    static std::atomic<bool> logged{false};
    if (logged.exchange(true)) return;
    try {
      logger().error("a backend's result deleter threw {}; the tensor's memory may be lost (logged once)",
                     current_exception_text());
    } catch (...) {
    }
  }
}

}  // namespace deltakern
