// The gate's kernel: waits, on the device, for a host-written flag in mapped pinned
// memory; everything behind it on the stream waits with it.
#include <cuda_runtime.h>

namespace deltakern::conformance {

namespace {

__device__ unsigned long long now_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__global__ void wait_for_flag(const volatile unsigned* flag, volatile unsigned* status,
                              unsigned long long timeout_ns) {
  const unsigned long long start = now_ns();
  while (*flag == 0u) {
    if (now_ns() - start > timeout_ns) {
      *status = 2u;  // gave up: the host never opened the gate in time
      __threadfence_system();
      return;
    }
    __nanosleep(2000);
  }
  *status = 1u;
  __threadfence_system();
}

}  // namespace

cudaError_t launch_gate_kernel(void* stream, const unsigned* flag, unsigned* status,
                               unsigned long long timeout_ns) {
  wait_for_flag<<<1, 1, 0, static_cast<cudaStream_t>(stream)>>>(flag, status, timeout_ns);
  return cudaGetLastError();
}

}  // namespace deltakern::conformance
