// The plugin libraries loaded into this process. Each is loaded and initialised once, however
// many Runtimes discover it, and shared by them: a plugin need not survive a second init while
// its first instance is alive (many cannot: a CUDA context, a process-wide thread pool, a
// registration with a framework). The last Runtime to let go of one shuts it down and unloads
// it; a Runtime created after that starts it afresh. The global runtime never lets go.
#pragma once

#include "loader/plugin_library.hpp"
#include "loader/probe/probe_verdict.hpp"

#include <deltakern/runtime_types.hpp>

#include <functional>
#include <memory>
#include <mutex>
#include <vector>

namespace deltakern::detail {

// A started library, as every Runtime sharing it sees it.
struct LoadedPlugin {
  FileIdentity identity;
  PluginInfo checked;  // name, version, ABI, ops and devices as loading found them
  std::unique_ptr<PluginLibrary> library;
};

class PluginRegistry {
 public:
  static PluginRegistry& instance();  // never destroyed

  struct Acquired {
    std::shared_ptr<const LoadedPlugin> plugin;
    bool loaded_now = false;  // false: another Runtime had it loaded already
  };
  using Load = std::function<std::unique_ptr<LoadedPlugin>()>;

  // The library of this identity when the process has it loaded already, else the one `load`
  // makes. Both happen under the registry's lock, as does the last release's shutdown, so two
  // Runtimes never start one library twice and a library is never started again before its
  // last shutdown has returned. A file whose older build at the same path (or whose inode,
  // before it was rewritten) is still loaded is a Rejection: the loader would hand back the
  // old code. Throws what `load` throws.
  Acquired acquire(const FileIdentity& identity, const Load& load);

 private:
  PluginRegistry() = default;
  void release(const LoadedPlugin* plugin) noexcept;  // one holder let go

  struct Entry {
    std::unique_ptr<LoadedPlugin> plugin;
    size_t holders = 0;  // Runtimes (each one reference), counted under the lock
  };
  std::mutex mutex_;
  std::vector<Entry> entries_;
};

}  // namespace deltakern::detail
