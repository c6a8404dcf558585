// The few CUDA runtime calls the core makes, behind one interface: cuda_services.cpp when
// built with CUDA, cuda_services_none.cpp otherwise. The rest of the core includes no CUDA
// header and never needs to know which one it got.
//
// Every function returns nullptr on success, else a message that stays valid for the
// whole process (so the allocator and copy paths never build strings).
#pragma once

#include <cstddef>

namespace deltakern::detail::cuda {

using Failure = const char*;

// nullptr in a core built with CUDA; else why a plugin's CUDA device cannot be served here (its
// kernels would run, but the core could neither allocate for them nor read their metadata).
Failure built_with_cuda() noexcept;
// Devices visible here; a machine with no driver fails with the runtime's reason.
Failure device_count(int& count) noexcept;
// major * 10 + minor, cached per device.
Failure compute_capability(int device, int& capability) noexcept;
// Stream-ordered (legal inside graph capture), from a per-device pool of the core's own that keeps
// freed memory for later calls (cuda_services.cpp says why).
Failure malloc_async(int device, size_t bytes, void* stream, void** out) noexcept;
Failure free_async(int device, void* ptr, void* stream) noexcept;
Failure copy_to_host_async(void* host_dst, const void* device_src, size_t bytes, void* stream) noexcept;
Failure copy_to_device_async(void* device_dst, const void* host_src, size_t bytes, void* stream) noexcept;
Failure synchronize(void* stream) noexcept;
// Whether work on `stream` is being captured into a CUDA graph (cudaStreamIsCapturing: legal
// during any capture, and no sync).
Failure is_capturing(void* stream, bool& capturing) noexcept;

}  // namespace deltakern::detail::cuda
