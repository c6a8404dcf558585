#include "loader/probe/probe_gate.hpp"

#include "config/install_paths.hpp"
#include "loader/discovery.hpp"
#include "services/log.hpp"

#include <fmt/core.h>

#include <algorithm>
#include <atomic>
#include <system_error>
#include <thread>

namespace deltakern::detail {
namespace {

// Children mostly wait (for the helper to start, in the settle after init, on a device), so
// more of them than cores overlap well; a bound keeps a directory of plugins from forking a crowd.
constexpr size_t kParallelChildren = 8;

std::optional<VerdictCache> open_cache(const ProbeConfig& config, const std::filesystem::path& helper) {
  const auto file = verdict_cache_file(config);
  if (file.empty()) return std::nullopt;
  const auto core = identity_of(library_file());
  const auto helper_identity = identity_of(helper);
  if (!core || !helper_identity) return std::nullopt;  // nothing to key verdicts by: probe every time
  return VerdictCache(file, {fmt::format("{}.{}", DK_ABI_MAJOR, DK_ABI_MINOR), *core, *helper_identity});
}

}  // namespace

std::filesystem::path verdict_cache_file(const ProbeConfig& config) {
  if (config.cache) return *config.cache;
  return default_verdict_cache_file().value_or(std::filesystem::path());
}

ProbeGate::ProbeGate(const ProbeConfig& config)
    // The child repeats nothing the parent will log about the verdict: errors and worse only.
    : how_{probe_helper_file(), config.timeout, std::max(config.child_log_level, spdlog::level::err)},
      cache_(open_cache(config, how_.helper)) {}

bool ProbeGate::admit(PluginInfo& info, const Plugins& loaded) {
  const auto identity = identity_of(info.path);
  const std::string ld_library_path = current_ld_library_path();
  std::optional<ProbeVerdict> verdict;
  if (cache_ && identity) {
    verdict = cache_->find(*identity, how_.timeout, ld_library_path);
    if (verdict) info.probe = PluginInfo::Probe::cache;
  }
  if (!verdict) {
    ChildOutcome outcome;
    if (const auto ahead = ahead_.find(info.path); ahead != ahead_.end()) {
      outcome = std::move(ahead->second);
      ahead_.erase(ahead);
    } else {
      ++children_;
      outcome = probe_in_child(how_, info.path);
    }
    if (!outcome.verdict) {
      // The helper is broken or missing: an installation fault, not this library's. Load it
      // as the core did before probing existed rather than refuse every plugin.
      if (!warned_about_helper_)
        logger().warn("{}; loading plugins in this process, unprotected from crashes",
                      outcome.helper_failure);
      warned_about_helper_ = true;
      info.probe = PluginInfo::Probe::in_process;
      info.probe_note = outcome.helper_failure;
      return true;
    }
    verdict = std::move(outcome.verdict);
    info.probe = PluginInfo::Probe::child;
    info.probe_note = fmt::format("{} ms", outcome.took.count());
    if (cache_ && identity) cache_->store(*identity, *verdict, ld_library_path);
  }
  info.name = verdict->name;
  info.version = verdict->version;
  info.abi_major = verdict->abi_major;
  info.abi_minor = verdict->abi_minor;
  const char* from = info.probe == PluginInfo::Probe::cache ? " (cached verdict)" : "";
  if (!verdict->passed) {
    info.reason = verdict->reason;
    logger().warn("rejected plugin {}: {}{}", info.path.string(), info.reason, from);
    return false;
  }
  if (const Backend* first = loaded.find(verdict->name)) {
    info.reason =
        fmt::format("duplicate of '{}' loaded from {}", info.name, loaded.info(*first).path.string());
    logger().warn("rejected plugin {}: {}", info.path.string(), info.reason);
    return false;
  }
  logger().debug("plugin {} passed its probe{}", info.path.string(), from);
  return true;
}

void ProbeGate::probe_ahead(const std::vector<std::filesystem::path>& libraries) {
  const std::string ld_library_path = current_ld_library_path();
  std::vector<std::filesystem::path> wanted;
  for (const auto& path : libraries) {
    const auto identity = identity_of(path);
    if (!cache_ || !identity || !cache_->find(*identity, how_.timeout, ld_library_path))
      wanted.push_back(path);
  }
  if (wanted.size() < 2) return;  // nothing to overlap
  std::vector<std::optional<ChildOutcome>> outcomes(wanted.size());
  std::atomic<size_t> next{0};
  const auto work = [&] {
    for (size_t i = next++; i < wanted.size(); i = next++) {
      try {
        outcomes[i] = probe_in_child(how_, wanted[i]);
      } catch (...) {
        // Out of memory, or of descriptors: left to admit(), which tries again in its own time.
      }
    }
  };
  {
    std::vector<std::jthread> helpers;
    try {
      for (size_t h = 1; h < std::min(kParallelChildren, wanted.size()); ++h) helpers.emplace_back(work);
    } catch (const std::system_error&) {
      // No more threads: the ones there are share the work.
    }
    work();
  }  // joined
  for (size_t i = 0; i < wanted.size(); ++i) {
    if (!outcomes[i]) continue;
    ahead_.insert_or_assign(wanted[i], std::move(*outcomes[i]));
    ++children_;
  }
}

void ProbeGate::save_cache() {
  if (cache_) cache_->save();
}

}  // namespace deltakern::detail
