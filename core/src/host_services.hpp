// What the core gives plugins (the dk_host table) and uses itself: the allocator behind
// fresh outputs and uploads, and the counted device-to-host read.
#pragma once

#include <deltakern/plugin_abi.h>
#include <deltakern/runtime.hpp>

#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace deltakern::detail {

// 64-byte-aligned host memory on kDLCPU; cudaMallocAsync on the call's stream on kDLCUDA.
Allocator default_allocator();

class HostServices {
 public:
  HostServices();
  ~HostServices();
  HostServices(const HostServices&) = delete;
  HostServices& operator=(const HostServices&) = delete;

  // Later allocations use it; memory already handed out still goes back to the allocator
  // that gave it.
  void set_allocator(Allocator allocator);

  // Throws Error (out_of_memory when the allocator gives nothing). Zero bytes may give null.
  void* allocate(DLDevice device, size_t bytes, void* stream);
  void deallocate(DLDevice device, void* ptr, void* stream) noexcept;

  // The table one plugin gets at init; its ctx names the plugin in log lines. Valid until
  // this object is destroyed, which the Runtime does only after the plugin's shutdown.
  const dk_host* table_for(std::string_view plugin_name);

 private:
  struct PluginContext {
    dk_host table;
    std::string name;
    HostServices* services;
  };

  std::mutex mutex_;  // guards allocator_ and owners_
  std::shared_ptr<const Allocator> allocator_;
  // Which allocator gave each live pointer: set_allocator may come while outputs are alive.
  std::unordered_map<void*, std::shared_ptr<const Allocator>> owners_;
  std::vector<std::unique_ptr<PluginContext>> contexts_;
};

struct HostRead {
  void* dst;  // compact, numel(src) elements
  const DLTensor* src;
};

// Copies every src whole (any rank, any strides) into its dst and waits once: the one
// read of device memory a call may make, counted once in host_syncs() of this thread.
// Throws Error(runtime) when a copy fails, Error(invalid_argument) for an unreadable device.
void read_to_host(std::span<const HostRead> reads, void* stream);

}  // namespace deltakern::detail
