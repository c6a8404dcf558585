// Entry of the portable prefill on CUDA: unpacks the call and picks the kernel for x's layout. Every
// tile of a sequence reads its W-1 halo from x, so the result is a fresh tensor, and the grid is sized
// by max_seq_len, which the caller supplies.
#include "host.cuh"
#include "launch.hpp"

namespace deltakern::portable::cuda {

void causal_conv1d_varlen(const plugin::VarlenArgs& args, const DLTensor& out, int64_t max_seq_len) {
  VarlenParams p = make_varlen_params(args, out);
  // An empty batch changes nothing; with T == 0 the state rows still change (to zeros without an
  // initial state), so only the batch and D decide.
  if (p.batch == 0 || p.dim == 0) return;
  const int device = args.x->device.device_id;
  DeviceGuard guard(device);
  p.error_word = error_word_ptr(device);
  const auto stream = static_cast<cudaStream_t>(args.stream);
  const DType dtype = x_dtype(*args.x, "portable causal_conv1d_varlen (CUDA)");
  // Both kernels take any strides (element-wise where vector access does not fit); the layout only
  // decides which dimension the 16-byte accesses run along.
  if (args.channel_last()) {
    launch_varlen_channel_last(p, dtype, max_seq_len, stream);
  } else {
    launch_varlen_time(p, dtype, max_seq_len, sm_count(device), stream);
  }
}

}  // namespace deltakern::portable::cuda
