#include "loader/probe/verdict_cache.hpp"

#include "services/log.hpp"

#include <fmt/core.h>
#include <unistd.h>
#include <nlohmann/json.hpp>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <sstream>

namespace deltakern::detail {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// 2: entries record the library's dependencies and LD_LIBRARY_PATH. A format-1 file is read as
// empty without a warning: every verdict in it lacks what a lookup now needs.
constexpr int kFormat = 2;

json context_json(const ProbeContext& c) { return {{"abi", c.abi}, {"core", c.core}, {"helper", c.helper}}; }

ProbeContext context_from(const json& j) {
  return {j.at("abi").get<std::string>(), j.at("core").get<FileIdentity>(),
          j.at("helper").get<FileIdentity>()};
}

bool same_slot(const VerdictCache::Entry& a, const VerdictCache::Entry& b) {
  // One verdict per library per core install: other builds sharing the file keep theirs.
  return a.library.path == b.library.path && a.context.core.path == b.context.core.path;
}

}  // namespace

VerdictCache::VerdictCache(fs::path file, ProbeContext context)
    : file_(std::move(file)), context_(std::move(context)), entries_(read(true)) {}

std::vector<VerdictCache::Entry> VerdictCache::read(bool warn) const {
  std::vector<Entry> entries;
  std::error_code ec;
  if (!fs::exists(file_, ec)) return entries;
  const auto ignore = [&](std::string_view why) {
    if (warn)
      logger().warn("probe verdict cache {}: {}; ignoring it (every plugin is probed again)", file_.string(),
                    why);
    return std::vector<Entry>();
  };
  std::ifstream in(file_, std::ios::binary);
  if (!in) return ignore(fmt::format("cannot read: {}", std::strerror(errno)));
  std::ostringstream text;
  text << in.rdbuf();
  json root;
  try {
    root = json::parse(text.str());
    if (root.is_object() && root.contains("format") && root["format"] == 1) return entries;
    if (!root.is_object() || !root.contains("format") || root["format"] != kFormat ||
        !root.contains("entries") || !root["entries"].is_array())
      return ignore(fmt::format("not a format-{} verdict cache", kFormat));
  } catch (const std::exception& e) {
    return ignore(fmt::format("not valid JSON: {}", e.what()));
  }
  size_t skipped = 0;
  for (const auto& e : root["entries"]) {
    try {
      entries.push_back({e.at("library").get<FileIdentity>(), context_from(e.at("context")),
                         e.at("verdict").get<ProbeVerdict>(), e.at("ld_library_path").get<std::string>()});
    } catch (const std::exception&) {
      ++skipped;
    }
  }
  if (skipped != 0 && warn)
    logger().warn("probe verdict cache {}: ignoring {} malformed entries", file_.string(), skipped);
  return entries;
}

std::optional<ProbeVerdict> VerdictCache::find(const FileIdentity& library, std::chrono::milliseconds timeout,
                                               const std::string& ld_library_path) const {
  for (const auto& e : entries_) {
    if (!(e.library == library) || !(e.context == context_)) continue;
    if (e.verdict.timed_out && std::chrono::milliseconds(e.verdict.timeout_ms) < timeout) return std::nullopt;
    // The loader may now resolve its dependencies elsewhere, or find them changed or gone.
    if (e.ld_library_path != ld_library_path) return std::nullopt;
    for (const auto& dependency : e.verdict.dependencies)
      if (identity_of(dependency.path) != dependency) return std::nullopt;
    return e.verdict;
  }
  return std::nullopt;
}

void VerdictCache::store(const FileIdentity& library, const ProbeVerdict& verdict,
                         const std::string& ld_library_path) {
  Entry entry{library, context_, verdict, ld_library_path};
  for (auto* list : {&entries_, &stored_}) {
    std::erase_if(*list, [&](const Entry& e) { return same_slot(e, entry); });
    list->push_back(entry);
  }
}

void VerdictCache::save() {
  if (stored_.empty()) return;
  try {
    write_merged();
  } catch (const std::exception& e) {
    logger().warn("probe verdict cache {}: not written: {}", file_.string(), e.what());
  }
}

void VerdictCache::write_merged() {
  std::vector<Entry> merged = read(false);
  for (const auto& mine : stored_) {
    std::erase_if(merged, [&](const Entry& e) { return same_slot(e, mine); });
    merged.push_back(mine);
  }
  json entries = json::array();
  for (const auto& e : merged) {
    std::error_code ec;
    if (!fs::exists(e.library.path, ec)) continue;
    entries.push_back({{"library", e.library},
                       {"context", context_json(e.context)},
                       {"verdict", e.verdict},
                       {"ld_library_path", e.ld_library_path}});
  }
  const json root = {{"format", kFormat}, {"entries", std::move(entries)}};

  std::error_code ec;
  fs::create_directories(file_.parent_path(), ec);
  std::random_device random;
  const fs::path temporary =
      file_.parent_path() / fmt::format(".{}.{}-{:x}.tmp", file_.filename().string(), ::getpid(), random());
  {
    std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
    // A plugin's reason may hold any bytes; the file must stay valid UTF-8 JSON.
    out << root.dump(1, ' ', false, json::error_handler_t::replace) << '\n';
    out.close();
    if (!out) {
      logger().warn("probe verdict cache {}: cannot write {}: {}", file_.string(), temporary.string(),
                    std::strerror(errno));
      fs::remove(temporary, ec);
      return;
    }
  }
  fs::rename(temporary, file_, ec);
  if (ec) {
    logger().warn("probe verdict cache {}: cannot replace it: {}", file_.string(), ec.message());
    fs::remove(temporary, ec);
    return;
  }
  stored_.clear();
}

std::string current_ld_library_path() {
  const char* value = std::getenv("LD_LIBRARY_PATH");
  return value != nullptr ? value : "";
}

std::optional<fs::path> default_verdict_cache_file() {
  fs::path base;
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg != nullptr && fs::path(xdg).is_absolute())
    base = xdg;
  else if (const char* home = std::getenv("HOME"); home != nullptr && *home != '\0')
    base = fs::path(home) / ".cache";
  else
    return std::nullopt;
  return base / "deltakern" / "probe-verdicts.json";
}

}  // namespace deltakern::detail
