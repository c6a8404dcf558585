#include "loader/plugin_registry.hpp"

#include "loader/rejection.hpp"

#include <fmt/core.h>

#include <algorithm>

namespace deltakern::detail {

PluginRegistry& PluginRegistry::instance() {
  // Never destroyed: a Runtime destroyed during static destruction still lets go of its plugins here.
  static auto* registry = new PluginRegistry;
  return *registry;
}

PluginRegistry::Acquired PluginRegistry::acquire(const FileIdentity& identity, const Load& load) {
  const LoadedPlugin* plugin = nullptr;
  bool loaded_now = false;
  {
    const std::lock_guard lock(mutex_);
    for (Entry& e : entries_) {
      const FileIdentity& loaded = e.plugin->identity;
      // The loader itself matches a library already mapped by its path as given, then by device
      // and inode: either way it would hand back the mapped code.
      if (loaded.path != identity.path &&
          (loaded.device != identity.device || loaded.inode != identity.inode))
        continue;
      if (!(loaded == identity))
        reject(fmt::format(
            "another build of this library ({}, {} bytes) is still loaded in this process by another "
            "Runtime; "
            "the loader would hand back its code, so this file can be loaded once every Runtime holding that "
            "one is gone",
            loaded.path, loaded.size));
      ++e.holders;
      plugin = e.plugin.get();
      break;
    }
    if (plugin == nullptr) {
      entries_.reserve(entries_.size() + 1);  // so that registering it below cannot throw
      std::unique_ptr<LoadedPlugin> made = load();
      plugin = made.get();
      entries_.push_back({std::move(made), 1});
      loaded_now = true;
    }
  }
  // Outside the lock: should making the handle fail, its deleter, which takes the lock, still runs.
  return {std::shared_ptr<const LoadedPlugin>(plugin, [this](const LoadedPlugin* p) { release(p); }),
          loaded_now};
}

void PluginRegistry::release(const LoadedPlugin* plugin) noexcept {
  const std::lock_guard lock(mutex_);
  const auto it = std::find_if(entries_.begin(), entries_.end(),
                               [&](const Entry& e) { return e.plugin.get() == plugin; });
  if (it == entries_.end() || --it->holders != 0) return;
  // Under the lock: no Runtime may start this library again before its shutdown has returned.
  entries_.erase(it);  // shuts it down and unloads it
}

}  // namespace deltakern::detail
