// Plugin discovery: where the core looks, and loading each library it finds into either a
// usable backend or a rejection with its reason. Nothing a plugin does here may take the
// process down.
#pragma once

#include "config/config.hpp"
#include "ops.hpp"

#include <deltakern/plugin_abi.h>
#include <deltakern/runtime_types.hpp>

#include <array>
#include <filesystem>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace deltakern::detail {

class ProbeGate;
struct LoadedPlugin;

// A loaded plugin as one Runtime holds it. The library itself, its instance and the copies of
// its descriptor are shared with every other Runtime that discovered the same file
// (plugin_registry.hpp); the pointers here point into it and live as long as `loaded`.
struct Backend {
  std::string name;
  size_t info_index = 0;                                     // into Plugins::infos
  std::array<const dk_op*, kOpCount> ops{};                  // by OpId; null where the plugin lacks the op
  std::array<int, kOpCount> op_info = kNoOpInfo;             // index into the PluginInfo's ops
  void* instance = nullptr;                                  // what init returned
  decltype(dk_plugin::check_errors) check_errors = nullptr;  // null when absent
  std::shared_ptr<const LoadedPlugin> loaded;
};

struct Plugins {
  Plugins() = default;
  Plugins(Plugins&&) = default;
  Plugins& operator=(Plugins&&) = default;
  ~Plugins();  // lets go of the backends in reverse load order

  std::vector<PluginInfo> infos;                   // every library found, in search order
  std::vector<std::unique_ptr<Backend>> backends;  // the loaded ones, in search order
  size_t probe_children = 0;                       // child processes discovery spawned

  const Backend* find(std::string_view name) const;
  const PluginInfo& info(const Backend& backend) const { return infos[backend.info_index]; }
};

// The directories searched, in order, duplicates removed: $DELTAKERN_PLUGIN_PATH, the
// options' plugin_path, the config's search_paths, the install's and the build tree's.
std::vector<std::filesystem::path> plugin_search_dirs(const RuntimeOptions& options, const Config& config);

// Loads options' plugin_files, then every *.so of each directory in name order, each one
// first judged by the gate (a child process or a cached verdict) unless config.probe says
// "in-process". A library another Runtime has loaded already is shared, not loaded again.
Plugins discover_plugins(std::span<const std::filesystem::path> files,
                         std::span<const std::filesystem::path> dirs, const ProbeConfig& probe);

}  // namespace deltakern::detail
