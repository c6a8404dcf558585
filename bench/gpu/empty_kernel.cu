// An empty kernel: the per-launch floor of a CUDA graph node on this machine, against which the
// update's time at batch 1 is read.
#include <cuda_runtime.h>

__global__ void dkgpu_empty_kernel() {}

cudaError_t dkgpu_launch_empty(cudaStream_t stream) {
  dkgpu_empty_kernel<<<1, 32, 0, stream>>>();
  return cudaGetLastError();
}
