// Host-built varlen metadata and its upload: what lets an engine's prefill skip the
// device-to-host read of the longest sequence.
#include "runtime_impl.hpp"
#include "services/cuda_services.hpp"
#include "services/dlpack_util.hpp"

#include <fmt/core.h>
#include <deltakern/deltakern.hpp>

#include <cstring>
#include <limits>
#include <memory>

namespace deltakern {
namespace {

// The DLManagedTensor of an upload and what its deleter needs to give the memory back.
struct Uploaded {
  DLManagedTensor managed{};
  int64_t shape[1] = {0};
  int64_t strides[1] = {1};
  void* stream = nullptr;

  static void release(DLManagedTensor* self) {
    const std::unique_ptr<Uploaded> owned(static_cast<Uploaded*>(self->manager_ctx));
    detail::deallocate(owned->managed.dl_tensor.device, owned->managed.dl_tensor.data, owned->stream);
  }
};

}  // namespace

VarlenMetadata VarlenMetadata::from_lengths(std::span<const int64_t> lengths) {
  VarlenMetadata m;
  m.query_start_loc.reserve(lengths.size() + 1);
  m.query_start_loc.push_back(0);
  for (size_t i = 0; i < lengths.size(); ++i) {
    if (lengths[i] < 0)
      throw Error(
          ErrorCode::invalid_argument,
          fmt::format("VarlenMetadata::from_lengths: lengths[{}]: expected >= 0, got {}", i, lengths[i]));
    m.total_tokens += lengths[i];
    if (m.total_tokens > std::numeric_limits<int32_t>::max())
      throw Error(
          ErrorCode::invalid_argument,
          fmt::format("VarlenMetadata::from_lengths: expected at most {} tokens in total (query_start_loc is "
                      "int32), got {} by lengths[{}]",
                      std::numeric_limits<int32_t>::max(), m.total_tokens, i));
    m.max_seq_len = std::max(m.max_seq_len, lengths[i]);
    m.query_start_loc.push_back(static_cast<int32_t>(m.total_tokens));
  }
  return m;
}

Tensor VarlenMetadata::upload(DLDevice device, void* stream) const {
  if (query_start_loc.empty())
    throw Error(ErrorCode::invalid_argument,
                "VarlenMetadata::upload: query_start_loc is empty (build the metadata with from_lengths)");
  detail::RuntimeAllocator& allocator = detail::global_allocator();
  const size_t bytes = query_start_loc.size() * sizeof(int32_t);
  auto uploaded = std::make_unique<Uploaded>();
  uploaded->stream = stream;
  uploaded->shape[0] = static_cast<int64_t>(query_start_loc.size());
  void* data = allocator.allocate(device, bytes, stream);
  if (detail::host_accessible(device.device_type)) {
    std::memcpy(data, query_start_loc.data(), bytes);
  } else if (detail::cuda::Failure f =
                 detail::cuda::copy_to_device_async(data, query_start_loc.data(), bytes, stream)) {
    detail::deallocate(device, data, stream);
    throw Error(ErrorCode::runtime,
                fmt::format("VarlenMetadata::upload to {}: {}", detail::device_name(device), f));
  }
  DLTensor& t = uploaded->managed.dl_tensor;
  t.data = data;
  t.device = device;
  t.ndim = 1;
  t.dtype = detail::kInt32;
  t.shape = uploaded->shape;
  t.strides = uploaded->strides;
  t.byte_offset = 0;
  uploaded->managed.manager_ctx = uploaded.get();
  uploaded->managed.deleter = &Uploaded::release;
  return Tensor(&uploaded.release()->managed);
}

}  // namespace deltakern
