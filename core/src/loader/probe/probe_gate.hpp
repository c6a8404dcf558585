// The gate discovery passes each candidate library through before loading it in-process:
// a cached verdict, or else a fresh one from a child process. A library the verdict turns
// away is never loaded into this process.
#pragma once

#include "config/config.hpp"
#include "loader/probe/probe_spawn.hpp"
#include "loader/probe/verdict_cache.hpp"

#include <deltakern/runtime_types.hpp>

#include <filesystem>
#include <map>
#include <optional>
#include <vector>

namespace deltakern::detail {

struct Plugins;

class ProbeGate {
 public:
  explicit ProbeGate(const ProbeConfig& config);

  // True when discovery may load the library here. Fills info's probe fields and, when it
  // says no, the name, version, ABI and reason the verdict found; a name already loaded is
  // turned away as a duplicate without loading it at all.
  bool admit(PluginInfo& info, const Plugins& loaded);

  // Spawns the children of those `libraries` that have no cached verdict several at a time,
  // so that their fixed costs (the helper's start, the wait after init) overlap instead of
  // adding up; admit() then takes their outcomes, in search order.
  void probe_ahead(const std::vector<std::filesystem::path>& libraries);

  void save_cache();
  size_t children_spawned() const { return children_; }

 private:
  ChildProbe how_;
  std::optional<VerdictCache> cache_;
  std::map<std::filesystem::path, ChildOutcome> ahead_;  // by probe_ahead, not yet admitted
  size_t children_ = 0;
  bool warned_about_helper_ = false;
};

// Where the cache of this configuration lives; empty when there is none.
std::filesystem::path verdict_cache_file(const ProbeConfig& config);

}  // namespace deltakern::detail
