// A plain copy kernel: 16-byte loads and stores, four in flight per thread, a full grid striding
// over the buffer. What a kernel that only moves the bytes reaches, read against the driver's
// device-to-device copy that every bench row is a share of.
#include <cuda_runtime.h>

#include <cstddef>

__global__ void __launch_bounds__(256)
    dkgpu_copy_kernel(uint4* __restrict__ dst, const uint4* __restrict__ src, size_t n) {
  constexpr int kUnroll = 4;
  const size_t stride = size_t(gridDim.x) * blockDim.x;
  size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  for (; i + (kUnroll - 1) * stride < n; i += kUnroll * stride) {
    uint4 v[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) v[u] = src[i + u * stride];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) dst[i + u * stride] = v[u];
  }
  for (; i < n; i += stride) dst[i] = src[i];
}

// bytes: a multiple of 16; dst and src 16-byte aligned.
cudaError_t dkgpu_launch_copy(void* dst, const void* src, size_t bytes, cudaStream_t stream) {
  static const int blocks = [] {
    int dev = 0, sms = 1;
    cudaGetDevice(&dev);
    cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
    return sms * 8;  // 2048 threads an SM
  }();
  dkgpu_copy_kernel<<<blocks, 256, 0, stream>>>(static_cast<uint4*>(dst), static_cast<const uint4*>(src),
                                                bytes / 16);
  return cudaGetLastError();
}
