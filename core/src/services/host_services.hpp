// What the core gives plugins (the dk_host table) and uses itself: the allocator behind
// fresh outputs and uploads, and the counted device-to-host read.
//
// A plugin library is initialised once per process and shared by every Runtime that finds
// it, so its dk_host table is process-wide, while each Runtime keeps its own allocator. A
// plugin's alloc therefore uses the allocator of the Runtime whose call is running on the
// calling thread (CallAllocatorScope, set by the core around every call into a plugin it
// makes for a Runtime), and its release goes back to whichever allocator gave the pointer,
// from a process-wide record.
#pragma once

#include <deltakern/plugin_abi.h>
#include <deltakern/runtime_types.hpp>

#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>

namespace deltakern::detail {

// 64-byte-aligned host memory on kDLCPU; cudaMallocAsync on the call's stream on kDLCUDA.
Allocator default_allocator();

// One Runtime's allocator (Runtime::set_allocator).
class RuntimeAllocator {
 public:
  RuntimeAllocator();
  ~RuntimeAllocator();  // warns about memory it handed out that is still alive
  RuntimeAllocator(const RuntimeAllocator&) = delete;
  RuntimeAllocator& operator=(const RuntimeAllocator&) = delete;

  // Later allocations use it; memory already handed out still goes back to the allocator
  // that gave it.
  void set(Allocator allocator);

  // Throws Error (out_of_memory when the allocator gives nothing). Zero bytes may give null.
  void* allocate(DLDevice device, size_t bytes, void* stream);

 private:
  mutable std::mutex mutex_;  // guards allocator_
  std::shared_ptr<const Allocator> allocator_;
  const uint64_t id_;  // names this runtime's entries in the process-wide record
};

// Gives `ptr` back to the allocator that handed it out, whichever Runtime that was and
// whether or not it still exists. A pointer the core did not hand out is logged and ignored.
void deallocate(DLDevice device, void* ptr, void* stream) noexcept;

// The allocator a plugin's alloc uses on this thread: that of the innermost CallAllocatorScope,
// else the process's default one. Initial-exec: every call reads and writes it twice, and the
// default model for a shared library makes each access a call of __tls_get_addr (three of
// them cost about 30 ns a call on the development box; with this, about 3). The price is 8
// bytes of the static TLS surplus glibc keeps for libraries loaded later with dlopen.
inline thread_local constinit RuntimeAllocator* call_allocator [[gnu::tls_model("initial-exec")]] = nullptr;
RuntimeAllocator& current_allocator();

// Set around each call into a plugin made for a Runtime (run, supports, check_errors); null:
// the default allocator. It sits on the hot path: a load and two stores of a thread-local.
class CallAllocatorScope {
 public:
  explicit CallAllocatorScope(RuntimeAllocator* allocator) noexcept : previous_(call_allocator) {
    call_allocator = allocator;
  }
  ~CallAllocatorScope() { call_allocator = previous_; }
  CallAllocatorScope(const CallAllocatorScope&) = delete;
  CallAllocatorScope& operator=(const CallAllocatorScope&) = delete;

 private:
  RuntimeAllocator* previous_;
};

// The dk_host table of one loaded plugin library: the same for every Runtime sharing it. Its
// ctx names the plugin in log lines. Neither copied nor moved: the table points to it.
class PluginHost {
 public:
  explicit PluginHost(std::string plugin_name);
  PluginHost(const PluginHost&) = delete;
  PluginHost& operator=(const PluginHost&) = delete;
  const dk_host* table() const { return &table_; }
  const std::string& name() const { return name_; }

 private:
  dk_host table_{};
  std::string name_;
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
