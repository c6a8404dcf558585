#include "fresh_output.hpp"

#include <algorithm>
#include <string>
#include <vector>

namespace deltakern::portable {

ResultPtr allocate_varlen_output(const dk_host& host, const DLTensor& x, XLayout layout, void* stream) {
  const int64_t dim = x.shape[0], tokens = x.shape[1];
  const int64_t shape[2] = {dim, tokens};
  const int64_t strides[2] = {layout == XLayout::channel_last ? 1 : tokens,
                              layout == XLayout::channel_last ? dim : 1};
  return ResultPtr(plugin::make_fresh_result(host, x.device, x.dtype, 2, shape, strides, stream));
}

ResultPtr allocate_update_output(const dk_host& host, const DLTensor& x, void* stream) {
  return ResultPtr(plugin::make_compact_result(host, x.device, x.dtype, x.ndim, x.shape, stream));
}

int64_t launch_max_seq_len(const dk_host& host, const plugin::VarlenArgs& args) {
  const int64_t tokens = args.tokens();
  if (args.max_seq_len) return std::min(*args.max_seq_len, tokens);
  const int64_t entries = args.query_start_loc->shape[0];
  std::vector<int32_t> starts(static_cast<size_t>(entries));
  const int32_t status = host.read_to_host(host.ctx, starts.data(), args.query_start_loc, args.stream);
  if (status == DK_ERR_INVALID_ARGUMENT)  // dk_host.read_to_host: the stream is capturing a graph
    throw plugin::Failure(
        DK_ERR_INVALID_ARGUMENT,
        "causal_conv1d_varlen: max_seq_len: required while the stream captures a CUDA graph "
        "(portable derives it by reading query_start_loc, which cannot happen in a capture)");
  if (status != DK_OK)
    throw plugin::Failure(
        static_cast<dk_status>(status),
        "causal_conv1d_varlen: reading query_start_loc to derive max_seq_len failed (status " +
            std::to_string(status) + ")");
  int64_t longest = 0;
  for (int64_t b = 0; b + 1 < entries; ++b)
    longest = std::max<int64_t>(longest, int64_t{starts[b + 1]} - starts[b]);
  return std::min(longest, tokens);
}

}  // namespace deltakern::portable
