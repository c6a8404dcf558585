// Instantiations of the time-contiguous varlen kernels (3 dtypes x 7 widths x vector/element-wise, and
// the flat walk's edge repair per dtype and width).
#include "host.cuh"
#include "varlen_time.cuh"

namespace deltakern::portable::cuda {

void launch_varlen_time(const VarlenParams& p, DType dtype, int64_t max_seq_len, int sm_count,
                        cudaStream_t stream) {
  dtype_switch(dtype, [&](auto tag) {
    varlen_time_dispatch<decltype(tag)>(
        p, max_seq_len, sm_count, tiling_override(), [&](auto traits, dim3 grid, TimeTiling t) {
          using Ktraits = decltype(traits);
          varlen_time_kernel<Ktraits><<<grid, Ktraits::kNThreads, 0, stream>>>(p, t);
          check_launch("portable causal_conv1d_varlen (CUDA, time-contiguous)");
          if (t.flat) {
            launch_varlen_edges<typename Ktraits::input_t, Ktraits::kWidth>(p, stream);
            check_launch("portable causal_conv1d_varlen (CUDA, time-contiguous, sequence edges)");
          }
        });
  });
}

}  // namespace deltakern::portable::cuda
