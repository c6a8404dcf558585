// Instantiations of the channel-last varlen kernel (3 dtypes x 7 widths x vector/element-wise, and
// the flat walk's edge repair per dtype and width).
#include "host.cuh"
#include "varlen_channel_last.cuh"

namespace deltakern::portable::cuda {

void launch_varlen_channel_last(const VarlenParams& p, DType dtype, int64_t max_seq_len,
                                cudaStream_t stream) {
  dtype_switch(dtype, [&](auto tag) {
    varlen_channel_last_dispatch<decltype(tag)>(
        p, max_seq_len, tiling_override(), [&](auto traits, dim3 grid, int tile_chunks, bool flat) {
          using Ktraits = decltype(traits);
          varlen_channel_last_kernel<Ktraits><<<grid, Ktraits::kNThreads, 0, stream>>>(p, tile_chunks, flat);
          check_launch("portable causal_conv1d_varlen (CUDA, channel-last)");
          if (flat) {
            launch_varlen_edges<typename Ktraits::input_t, Ktraits::kWidth>(p, stream);
            check_launch("portable causal_conv1d_varlen (CUDA, channel-last, sequence edges)");
          }
        });
  });
}

}  // namespace deltakern::portable::cuda
