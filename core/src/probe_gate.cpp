#include "probe_gate.hpp"

#include "discovery.hpp"
#include "install_paths.hpp"
#include "log.hpp"

#include <fmt/core.h>

#include <algorithm>

namespace deltakern::detail {
namespace {

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
  std::optional<ProbeVerdict> verdict;
  if (cache_ && identity) {
    verdict = cache_->find(*identity, how_.timeout);
    if (verdict) info.probe = PluginInfo::Probe::cache;
  }
  if (!verdict) {
    ++children_;
    ChildOutcome outcome = probe_in_child(how_, info.path);
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
    if (cache_ && identity) cache_->store(*identity, *verdict);
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

void ProbeGate::save_cache() {
  if (cache_) cache_->save();
}

}  // namespace deltakern::detail
