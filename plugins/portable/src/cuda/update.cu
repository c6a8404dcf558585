// Entry of the portable decode on CUDA: the kernel choice and the instantiations (3 dtypes x 7
// widths, element-wise and 16-byte; 3 dtypes x 2 modes, lean).
#include <algorithm>

#include "host.cuh"
#include "launch.hpp"
#include "update.cuh"
#include "update_lean.cuh"
#include "update_vec.cuh"

namespace deltakern::portable::cuda {

// Batch < 16 in decode's commonest shape: the lean kernel (channel blocks, rows). Element-wise: rows on
// grid.x (up to 2^31 - 1), channel blocks on grid.y; 16-byte: channel blocks on grid.x, row groups on grid.y.
// Small batches take 64 threads a block, so that a batch of 1 still spreads over many SMs. Element-wise,
// large batches take 256 (H200, D=8192, batch 1024: the 64-thread grid of 131072 blocks ran at 18% of copy).
void causal_conv1d_update(const plugin::UpdateArgs& args, const DLTensor& out) {
  UpdateParams p = make_update_params(args, out);
  if (p.batch == 0 || p.dim == 0) return;
  const int device = args.x->device.device_id;
  DeviceGuard guard(device);
  p.error_word = error_word_ptr(device);
  const auto stream = static_cast<cudaStream_t>(args.stream);
  const bool small = p.batch < 16;
  const bool pdl = has_pdl(device);
  constexpr const char* kOp = "portable causal_conv1d_update (CUDA)";
  dtype_switch(x_dtype(*args.x, kOp), [&](auto tag) {
    using input_t = decltype(tag);
    if (update_lean_shape(p)) {
      bool_switch(p.cache_seqlens != nullptr, [&](auto circular) {
        using Ktraits = UpdateLeanTraits<input_t, decltype(circular)::value>;
        launch_with_pdl(kOp, update_lean_kernel<Ktraits>,
                        make_grid(ceil_div(p.dim, int64_t(Ktraits::kNThreads)), p.batch, 1),
                        dim3(Ktraits::kNThreads), stream, pdl, p);
      });
      return;
    }
    StateBlock block;
    const bool vec = update_vec_layout<input_t>(p, block);
    width_switch(p.width, [&](auto width) {
      if (vec) {
        using Ktraits = UpdateVecTraits<128, decltype(width)::value, input_t>;
        const int threads = small ? 64 : Ktraits::kNThreads;
        const int64_t chan_blocks = ceil_div(p.dim / Ktraits::kChannels, int64_t(threads));
        // Two rows a block where that still leaves about eight blocks per SM: a thread's taps are
        // loaded once for both (native's measured choice, update_vec.cuh there).
        int64_t rows = p.batch * chan_blocks >= 16 * sm_count(device) ? 2 : 1;
        rows = std::max(rows, ceil_div(p.batch, int64_t(65535)));
        launch_with_pdl(kOp, update_vec_kernel<Ktraits>, make_grid(chan_blocks, ceil_div(p.batch, rows), 1),
                        dim3(threads), stream, pdl, p, block, rows);
      } else {
        using Ktraits = UpdateKernelTraits<256, decltype(width)::value, input_t>;
        const int threads = small ? 64 : Ktraits::kNThreads;
        launch_with_pdl(kOp, update_kernel<Ktraits>, make_grid(p.batch, ceil_div(p.dim, threads), 1),
                        dim3(threads), stream, pdl, p);
      }
    });
  });
}

}  // namespace deltakern::portable::cuda
