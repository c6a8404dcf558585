#include "services/host_services.hpp"

#include "services/cuda_services.hpp"
#include "services/dlpack_util.hpp"
#include "services/log.hpp"
#include "status.hpp"

#include <fmt/core.h>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstring>
#include <new>
#include <optional>
#include <unordered_map>

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
  if (n == 0) return;
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

// Which allocator gave each live pointer, for every Runtime of the process: a release may
// come through any plugin's table, on any thread, after set_allocator or after the Runtime
// that made the allocation is gone. Never destroyed: a tensor may be dropped during static
// destruction.
class AllocationRecord {
 public:
  struct Owner {
    std::shared_ptr<const Allocator> allocator;
    uint64_t runtime;
  };
  void add(void* ptr, Owner owner) {
    const std::lock_guard lock(mutex_);
    owners_.insert_or_assign(ptr, std::move(owner));
  }
  std::optional<Owner> take(void* ptr) {
    const std::lock_guard lock(mutex_);
    const auto it = owners_.find(ptr);
    if (it == owners_.end()) return std::nullopt;
    Owner owner = std::move(it->second);
    owners_.erase(it);
    return owner;
  }
  size_t live_from(uint64_t runtime) const {
    const std::lock_guard lock(mutex_);
    return static_cast<size_t>(std::count_if(
        owners_.begin(), owners_.end(), [&](const auto& entry) { return entry.second.runtime == runtime; }));
  }

 private:
  mutable std::mutex mutex_;
  std::unordered_map<void*, Owner> owners_;
};

AllocationRecord& allocation_record() {
  static auto* record = new AllocationRecord;
  return *record;
}

std::atomic<uint64_t> next_runtime_id{1};

}  // namespace

Allocator default_allocator() { return Allocator{allocate_default, deallocate_default}; }

RuntimeAllocator::RuntimeAllocator()
    : allocator_(std::make_shared<const Allocator>(default_allocator())),
      id_(next_runtime_id.fetch_add(1, std::memory_order_relaxed)) {}

RuntimeAllocator::~RuntimeAllocator() {
  if (const size_t live = allocation_record().live_from(id_); live != 0)
    logger().warn("{} allocation(s) made for plugins are still alive as the runtime goes away", live);
}

void RuntimeAllocator::set(Allocator allocator) {
  if (!allocator.allocate || !allocator.deallocate)
    throw Error(ErrorCode::invalid_argument, "set_allocator: both allocate and deallocate must be set");
  auto shared = std::make_shared<const Allocator>(std::move(allocator));
  const std::lock_guard lock(mutex_);
  allocator_ = std::move(shared);
}

void* RuntimeAllocator::allocate(DLDevice device, size_t bytes, void* stream) {
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
  allocation_record().add(ptr, {std::move(allocator), id_});
  return ptr;
}

void deallocate(DLDevice device, void* ptr, void* stream) noexcept {
  if (ptr == nullptr) return;
  std::optional<AllocationRecord::Owner> owner;
  try {
    owner = allocation_record().take(ptr);
  } catch (...) {
    // Only a failing mutex gets here; the memory is lost rather than the process.
  }
  if (!owner) {
    logger().error("release of {} on {}, which the core did not allocate; ignored", ptr, device_name(device));
    return;
  }
  try {
    owner->allocator->deallocate(device, ptr, stream);
  } catch (const std::exception& e) {
    logger().error("deallocate on {} failed: {}", device_name(device), e.what());
  } catch (...) {
    logger().error("deallocate on {} failed", device_name(device));
  }
}

RuntimeAllocator& current_allocator() {
  if (call_allocator != nullptr) return *call_allocator;
  // Outside any call (a plugin's init, or a thread of its own): the default allocator. Never
  // destroyed, like the record its allocations go to.
  static auto* process_default = new RuntimeAllocator;
  return *process_default;
}

PluginHost::PluginHost(std::string plugin_name) : name_(std::move(plugin_name)) {
  dk_host& t = table_;
  t.struct_size = sizeof(dk_host);
  t.ctx = this;
  t.log = [](void* ctx, int32_t level, const char* msg) {
    try {
      const auto& host = *static_cast<const PluginHost*>(ctx);
      logger().log(spdlog_level(level), "{}: {}", host.name_, msg != nullptr ? msg : "");
    } catch (...) {
      // A failing log sink must not take the plugin down.
    }
  };
  t.alloc = [](void* ctx, DLDevice device, size_t bytes, void* stream, void** out) -> int32_t {
    if (out == nullptr) return DK_ERR_INVALID_ARGUMENT;
    *out = nullptr;
    const auto& host = *static_cast<const PluginHost*>(ctx);
    try {
      *out = current_allocator().allocate(device, bytes, stream);
      return DK_OK;
    } catch (const Error& e) {
      logger().warn("{}: alloc: {}", host.name_, e.what());
      return status_of(e.code());
    } catch (const std::bad_alloc&) {
      return DK_ERR_OUT_OF_MEMORY;
    } catch (const std::exception& e) {
      logger().warn("{}: alloc: {}", host.name_, e.what());
      return DK_ERR_INTERNAL;
    } catch (...) {
      return DK_ERR_INTERNAL;
    }
  };
  t.release = [](void*, DLDevice device, void* ptr, void* stream) { deallocate(device, ptr, stream); };
  t.read_to_host = [](void* ctx, void* dst, const DLTensor* src, void* stream) -> int32_t {
    const auto& host = *static_cast<const PluginHost*>(ctx);
    try {
      const HostRead read{dst, src};
      detail::read_to_host(std::span(&read, 1), stream);
      return DK_OK;
    } catch (const Error& e) {
      logger().warn("{}: read_to_host: {}", host.name_, e.what());
      return status_of(e.code());
    } catch (const std::bad_alloc&) {
      return DK_ERR_OUT_OF_MEMORY;
    } catch (...) {
      return DK_ERR_INTERNAL;
    }
  };
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
    if (!waits_on_device) {
      bool capturing = false;
      if (cuda::Failure f = cuda::is_capturing(stream, capturing))
        throw Error(ErrorCode::runtime, fmt::format("read_to_host: stream capture status: {}", f));
      if (capturing)
        throw Error(ErrorCode::invalid_argument,
                    "read_to_host: the stream is capturing a CUDA graph, where no device-to-host read can "
                    "happen (give the host metadata, e.g. max_seq_len, to a call made during capture)");
    }
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
