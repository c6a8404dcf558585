// Plugin discovery: where the core looks, and loading each library it finds into either a
// usable backend or a rejection with its reason. Nothing a plugin does here may take the
// process down.
#pragma once

#include "config.hpp"
#include "descriptor.hpp"
#include "host_services.hpp"
#include "ops.hpp"

#include <deltakern/plugin_abi.h>
#include <deltakern/runtime.hpp>

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

// A loaded plugin: its library stays mapped and its instance alive while this lives; the
// destructor calls the plugin's shutdown before the library is unmapped.
struct Backend {
  Backend() = default;
  Backend(const Backend&) = delete;
  Backend& operator=(const Backend&) = delete;
  ~Backend();

  std::string name;
  size_t info_index = 0;                                     // into Plugins::infos
  Descriptor descriptor;                                     // the core's copy, read and checked
  void* instance = nullptr;                                  // what init returned
  bool initialized = false;                                  // init succeeded, so shutdown is owed
  std::array<const dk_op*, kOpCount> ops{};                  // by OpId; null where the plugin lacks the op
  std::array<int, kOpCount> op_info{-1, -1};                 // index into the PluginInfo's ops
  decltype(dk_plugin::check_errors) check_errors = nullptr;  // null when absent
  std::shared_ptr<void> library;                             // the boost::dll::shared_library, type-erased
};

struct Plugins {
  Plugins() = default;
  Plugins(Plugins&&) = default;
  Plugins& operator=(Plugins&&) = default;
  ~Plugins();  // shuts the backends down in reverse load order

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
// "in-process".
Plugins discover_plugins(std::span<const std::filesystem::path> files,
                         std::span<const std::filesystem::path> dirs, HostServices& host,
                         const ProbeConfig& probe);

// Told the step a load is about to take ("loading", "running init", ...) and what is known
// of the library so far, so that a process that dies during it can be said to have died
// there, and which plugin it was.
using PhaseListener = std::function<void(std::string_view phase, const PluginInfo& so_far)>;

// Loads one library exactly as discovery does, but alone (nothing to be a duplicate of),
// then shuts it down and unloads it, announcing each step first: what the probe child runs.
PluginInfo check_library_alone(const std::filesystem::path& path, HostServices& host,
                               const PhaseListener& on_phase);

}  // namespace deltakern::detail
