// The CUDA services of a core built without CUDA: every call fails with the reason.
#include "services/cuda_services.hpp"

namespace deltakern::detail::cuda {
namespace {
constexpr Failure kNoCuda = "deltakern was built without CUDA";
}

Failure built_with_cuda() noexcept {
  return "this deltakern core was built without CUDA (DELTAKERN_WITH_CUDA=OFF; the Python wheel: "
         "pip install with -C cmake.define.DELTAKERN_WITH_CUDA=ON)";
}

Failure device_count(int& count) noexcept {
  count = 0;
  return kNoCuda;
}
Failure compute_capability(int, int& capability) noexcept {
  capability = 0;
  return kNoCuda;
}
Failure malloc_async(int, size_t, void*, void** out) noexcept {
  *out = nullptr;
  return kNoCuda;
}
Failure free_async(int, void*, void*) noexcept { return kNoCuda; }
Failure copy_to_host_async(void*, const void*, size_t, void*) noexcept { return kNoCuda; }
Failure copy_to_device_async(void*, const void*, size_t, void*) noexcept { return kNoCuda; }
Failure synchronize(void*) noexcept { return kNoCuda; }
Failure is_capturing(void*, bool& capturing) noexcept {
  capturing = false;
  return kNoCuda;
}

}  // namespace deltakern::detail::cuda
