// deltakern plugin SDK, CUDA device code: programmatic dependent launch (sm_90 and later). A kernel
// launched with cudaLaunchAttributeProgrammaticStreamSerialization may be placed on the GPU while
// the kernel before it in the stream still runs; it must call wait_for_previous_grid before its
// first access to memory that kernel may write. Compiled for an earlier architecture, both calls
// are no-ops: a plugin launches with the attribute only where its kernels run from sm_90 code.
#pragma once

namespace deltakern::plugin::cuda {

// Waits until the previous grid of the stream has finished and its memory is visible.
__device__ __forceinline__ void wait_for_previous_grid() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

// Lets the next grid of the stream (if launched with the attribute) be placed on the GPU now.
__device__ __forceinline__ void allow_next_grid() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

}  // namespace deltakern::plugin::cuda
