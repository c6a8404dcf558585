// Entry of the portable decode on CUDA and its instantiations (3 dtypes x 7 widths).
#include "host.cuh"
#include "launch.hpp"
#include "update.cuh"

namespace deltakern::portable::cuda {

void causal_conv1d_update(const plugin::UpdateArgs& args, const DLTensor& out) {
  UpdateParams p = make_update_params(args, out);
  if (p.batch == 0 || p.dim == 0) return;
  const int device = args.x->device.device_id;
  DeviceGuard guard(device);
  p.error_word = error_word_ptr(device);
  const auto stream = static_cast<cudaStream_t>(args.stream);
  dtype_switch(x_dtype(*args.x, "portable causal_conv1d_update (CUDA)"), [&](auto tag) {
    update_dispatch<decltype(tag)>(p, [&](auto traits, dim3 grid, int threads) {
      using Ktraits = decltype(traits);
      update_kernel<Ktraits><<<grid, threads, 0, stream>>>(p);
      check_launch("portable causal_conv1d_update (CUDA)");
    });
  });
}

}  // namespace deltakern::portable::cuda
