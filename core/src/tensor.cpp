#include "dlpack_util.hpp"

#include <deltakern/deltakern.hpp>

namespace deltakern {

bool Tensor::aliases(const DLTensor& other) const noexcept {
  return managed_ != nullptr && detail::memory_overlaps(managed_->dl_tensor, other);
}

}  // namespace deltakern
