#include "host_services.hpp"

#include "cuda_services.hpp"
#include "dlpack_util.hpp"
#include "log.hpp"
#include "status.hpp"

#include <fmt/core.h>

#include <cstddef>
#include <cstring>
#include <new>

namespace deltakern {
namespace {
thread_local uint64_t host_sync_count = 0;
}

uint64_t host_syncs() noexcept { return host_sync_count; }

namespace detail {
namespace {

constexpr size_t kHostAlignment = 64;

bool is_cuda_memory(int32_t device_type) { return device_type == kDLCUDA || device_type == kDLCUDAManaged; }

void* allocate_default(DLDevice device, size_t bytes, void* stream) {
  if (device.device_type == kDLCPU) {
    const size_t rounded =
        (std::max<size_t>(bytes, 1) + kHostAlignment - 1) / kHostAlignment * kHostAlignment;
    return ::operator new (rounded, std::align_val_t{kHostAlignment}, std::nothrow);
  }
  if (device.device_type == kDLCUDA) {
    void* ptr = nullptr;
    if (cuda::Failure f = cuda::malloc_async(device.device_id, bytes, stream, &ptr))
      throw Error(ErrorCode::out_of_memory,
                  fmt::format("cudaMallocAsync of {} bytes on {}: {}", bytes, device_name(device), f));
    return ptr;
  }
  throw Error(ErrorCode::unsupported, fmt::format("the default allocator has no memory for {}",
                                                  device_type_name(device.device_type)));
}

void deallocate_default(DLDevice device, void* ptr, void* stream) {
  if (device.device_type == kDLCPU) {
    ::operator delete (ptr, std::align_val_t{kHostAlignment});
  } else if (device.device_type == kDLCUDA) {
    if (cuda::Failure f = cuda::free_async(device.device_id, ptr, stream))
      logger().error("cudaFreeAsync on {}: {}", device_name(device), f);
  }
}

spdlog::level::level_enum spdlog_level(int32_t level) {
  switch (level) {
    case DK_LOG_TRACE:
      return spdlog::level::trace;
    case DK_LOG_DEBUG:
      return spdlog::level::debug;
    case DK_LOG_INFO:
      return spdlog::level::info;
    case DK_LOG_WARN:
      return spdlog::level::warn;
    default:
      return spdlog::level::err;
  }
}

bool is_compact(const DLTensor& t) {
  if (t.strides == nullptr) return true;
  int64_t expected = 1;
  for (int d = t.ndim - 1; d >= 0; --d) {
    if (t.shape[d] != 1 && t.strides[d] != expected) return false;
    expected *= t.shape[d];
  }
  return true;
}

// Copies the elements of `src` in row-major order into dst; `origin` is where the element
// at offset `origin_offset` lives (src's own data, or a staging copy of its byte range).
void gather(std::byte* dst, const DLTensor& src, const std::byte* origin, int64_t origin_offset) {
  const size_t bytes = element_bytes(src.dtype);
  const int64_t n = numel(src);
  if (is_compact(src)) {
    std::memcpy(dst, origin - origin_offset * static_cast<int64_t>(bytes), static_cast<size_t>(n) * bytes);
    return;
  }
  std::vector<int64_t> index(static_cast<size_t>(src.ndim), 0);
  for (int64_t i = 0; i < n; ++i) {
    int64_t offset = 0;
    for (int d = 0; d < src.ndim; ++d) offset += index[d] * stride_of(src, d);
    std::memcpy(dst + i * static_cast<int64_t>(bytes),
                origin + (offset - origin_offset) * static_cast<int64_t>(bytes), bytes);
    for (int d = src.ndim - 1; d >= 0; --d) {
      if (++index[d] < src.shape[d]) break;
      index[d] = 0;
    }
  }
}

const std::byte* element_zero(const DLTensor& t) {
  return static_cast<const std::byte*>(t.data) + t.byte_offset;
}

// The element offset of the lowest byte a tensor touches (strides may be negative).
int64_t lowest_offset(const DLTensor& t) {
  int64_t lowest = 0;
  for (int d = 0; d < t.ndim; ++d) lowest += std::min<int64_t>(0, (t.shape[d] - 1) * stride_of(t, d));
  return lowest;
}

}  // namespace

Allocator default_allocator() { return Allocator{allocate_default, deallocate_default}; }

HostServices::HostServices() : allocator_(std::make_shared<const Allocator>(default_allocator())) {}

HostServices::~HostServices() {
  if (!owners_.empty())
    logger().warn("{} allocation(s) made for plugins are still alive as the runtime goes away",
                  owners_.size());
}

void HostServices::set_allocator(Allocator allocator) {
  if (!allocator.allocate || !allocator.deallocate)
    throw Error(ErrorCode::invalid_argument, "set_allocator: both allocate and deallocate must be set");
  auto shared = std::make_shared<const Allocator>(std::move(allocator));
  const std::lock_guard lock(mutex_);
  allocator_ = std::move(shared);
}

void* HostServices::allocate(DLDevice device, size_t bytes, void* stream) {
  std::shared_ptr<const Allocator> allocator;
  {
    const std::lock_guard lock(mutex_);
    allocator = allocator_;
  }
  void* ptr = allocator->allocate(device, bytes, stream);
  if (ptr == nullptr) {
    if (bytes == 0) return nullptr;
    throw Error(ErrorCode::out_of_memory,
                fmt::format("the allocator gave no memory for {} bytes on {}", bytes, device_name(device)));
  }
  const std::lock_guard lock(mutex_);
  owners_.emplace(ptr, std::move(allocator));
  return ptr;
}

void HostServices::deallocate(DLDevice device, void* ptr, void* stream) noexcept {
  if (ptr == nullptr) return;
  std::shared_ptr<const Allocator> owner;
  {
    const std::lock_guard lock(mutex_);
    const auto it = owners_.find(ptr);
    if (it == owners_.end()) {
      logger().error("release of {} on {}, which the core did not allocate; ignored", ptr,
                     device_name(device));
      return;
    }
    owner = std::move(it->second);
    owners_.erase(it);
  }
  try {
    owner->deallocate(device, ptr, stream);
  } catch (const std::exception& e) {
    logger().error("deallocate on {} failed: {}", device_name(device), e.what());
  } catch (...) {
    logger().error("deallocate on {} failed", device_name(device));
  }
}

const dk_host* HostServices::table_for(std::string_view plugin_name) {
  auto context = std::make_unique<PluginContext>();
  context->name = plugin_name;
  context->services = this;
  dk_host& t = context->table;
  t.struct_size = sizeof(dk_host);
  t.ctx = context.get();
  t.log = [](void* ctx, int32_t level, const char* msg) {
    try {
      const auto& c = *static_cast<PluginContext*>(ctx);
      logger().log(spdlog_level(level), "{}: {}", c.name, msg != nullptr ? msg : "");
    } catch (...) {
      // A failing log sink must not take the plugin down.
    }
  };
  t.alloc = [](void* ctx, DLDevice device, size_t bytes, void* stream, void** out) -> int32_t {
    if (out == nullptr) return DK_ERR_INVALID_ARGUMENT;
    *out = nullptr;
    const auto& c = *static_cast<PluginContext*>(ctx);
    try {
      *out = c.services->allocate(device, bytes, stream);
      return DK_OK;
    } catch (const Error& e) {
      logger().warn("{}: alloc: {}", c.name, e.what());
      return status_of(e.code());
    } catch (const std::bad_alloc&) {
      return DK_ERR_OUT_OF_MEMORY;
    } catch (const std::exception& e) {
      logger().warn("{}: alloc: {}", c.name, e.what());
      return DK_ERR_INTERNAL;
    } catch (...) {
      return DK_ERR_INTERNAL;
    }
  };
  t.release = [](void* ctx, DLDevice device, void* ptr, void* stream) {
    static_cast<PluginContext*>(ctx)->services->deallocate(device, ptr, stream);
  };
  t.read_to_host = [](void* ctx, void* dst, const DLTensor* src, void* stream) -> int32_t {
    const auto& c = *static_cast<PluginContext*>(ctx);
    try {
      const HostRead read{dst, src};
      detail::read_to_host(std::span(&read, 1), stream);
      return DK_OK;
    } catch (const Error& e) {
      logger().warn("{}: read_to_host: {}", c.name, e.what());
      return status_of(e.code());
    } catch (const std::bad_alloc&) {
      return DK_ERR_OUT_OF_MEMORY;
    } catch (...) {
      return DK_ERR_INTERNAL;
    }
  };
  const dk_host* table = &context->table;
  contexts_.push_back(std::move(context));
  return table;
}

void read_to_host(std::span<const HostRead> reads, void* stream) {
  ++host_sync_count;
  struct Staged {
    const HostRead* read;
    std::vector<std::byte> bytes;
    int64_t lowest;
  };
  std::vector<Staged> staged;  // strided device tensors: their byte range comes over whole
  bool waits_on_device = false;
  for (const HostRead& read : reads) {
    if (read.src == nullptr) throw Error(ErrorCode::invalid_argument, "read_to_host: no source tensor");
    const DLTensor& src = *read.src;
    if (numel(src) == 0) continue;
    if (read.dst == nullptr || src.data == nullptr)
      throw Error(ErrorCode::invalid_argument, "read_to_host: null destination or source data");
    const int32_t type = src.device.device_type;
    if (host_accessible(type)) {
      gather(static_cast<std::byte*>(read.dst), src, element_zero(src), 0);
      continue;
    }
    if (!is_cuda_memory(type))
      throw Error(ErrorCode::invalid_argument,
                  fmt::format("read_to_host: cannot read {} memory", device_type_name(type)));
    waits_on_device = true;
    const ByteRange range = byte_range(src);
    cuda::Failure f = nullptr;
    if (is_compact(src)) {
      f = cuda::copy_to_host_async(read.dst, element_zero(src), range.end - range.begin, stream);
    } else {
      Staged& s = staged.emplace_back(
          Staged{&read, std::vector<std::byte>(range.end - range.begin), lowest_offset(src)});
      f = cuda::copy_to_host_async(s.bytes.data(), reinterpret_cast<const void*>(range.begin), s.bytes.size(),
                                   stream);
    }
    if (f != nullptr)
      throw Error(ErrorCode::runtime,
                  fmt::format("read_to_host: copy from {}: {}", device_name(src.device), f));
  }
  if (waits_on_device) {
    if (cuda::Failure f = cuda::synchronize(stream))
      throw Error(ErrorCode::runtime, fmt::format("read_to_host: stream synchronize: {}", f));
  }
  for (const Staged& s : staged)
    gather(static_cast<std::byte*>(s.read->dst), *s.read->src, s.bytes.data(), s.lowest);
}

}  // namespace detail
}  // namespace deltakern
