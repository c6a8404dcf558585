#include "loader/discovery.hpp"

#include "config/install_paths.hpp"
#include "loader/plugin_registry.hpp"
#include "loader/probe/probe_gate.hpp"
#include "loader/rejection.hpp"
#include "services/log.hpp"

#include <fmt/core.h>

#include <algorithm>
#include <cstdlib>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace deltakern::detail {
namespace fs = std::filesystem;

Plugins::~Plugins() {
  while (!backends.empty()) backends.pop_back();
}

const Backend* Plugins::find(std::string_view name) const {
  for (const auto& b : backends)
    if (b->name == name) return b.get();
  return nullptr;
}

namespace {

class Loader {
 public:
  explicit Loader(Plugins& plugins) : plugins_(plugins) {}

  // Loads in this process whatever the gate has not already turned away.
  void load(const fs::path& path, ProbeGate* gate = nullptr) {
    PluginInfo info;
    info.path = path;
    info.state = PluginInfo::State::rejected;
    try {
      if (gate != nullptr && !gate->admit(info, plugins_)) {
        // Turned away by its verdict, which the gate has logged: never loaded here.
        plugins_.infos.push_back(std::move(info));
        return;
      }
      load_into(info);
      return;
    } catch (...) {
      info.reason = rejection_reason();
    }
    logger().warn("rejected plugin {}: {}", path.string(), info.reason);
    plugins_.infos.push_back(std::move(info));
  }

 private:
  void load_into(PluginInfo& info) {
    const auto identity = identity_of(info.path);
    if (!identity) {
      // Gone since it was listed: the loader says so in its own words.
      const PluginLibrary vanished(info.path, info, {}, {});
      reject("the file cannot be examined");
    }
    const auto acquired = PluginRegistry::instance().acquire(*identity, [&] {
      auto loaded = std::make_unique<LoadedPlugin>();
      loaded->identity = *identity;
      loaded->library = std::make_unique<PluginLibrary>(
          info.path, info, PhaseListener(), [&](const PluginInfo& named) { refuse_duplicate(named); });
      loaded->library->start(info, {});
      loaded->checked = info;
      return loaded;
    });
    const LoadedPlugin& loaded = *acquired.plugin;
    if (!acquired.loaded_now) {
      // Started by another Runtime: what it found holds here too.
      info.name = loaded.checked.name;
      info.version = loaded.checked.version;
      info.abi_major = loaded.checked.abi_major;
      info.abi_minor = loaded.checked.abi_minor;
      info.ops = loaded.checked.ops;
      info.devices = loaded.checked.devices;
      refuse_duplicate(info);
    }

    auto backend = std::make_unique<Backend>();
    const Descriptor& d = loaded.library->descriptor();
    backend->name = info.name;
    for (size_t slot = 0; slot < kOpCount; ++slot) backend->ops[slot] = d.op(slot);
    backend->op_info = d.op_info;
    backend->instance = loaded.library->instance();
    backend->check_errors = d.check_errors;
    backend->loaded = acquired.plugin;
    info.state = PluginInfo::State::loaded;
    logger().info("loaded plugin '{}' {} (ABI {}.{}) from {}{}", info.name, info.version, info.abi_major,
                  info.abi_minor, info.path.string(),
                  acquired.loaded_now ? "" : " (shared with another Runtime of this process)");
    backend->info_index = plugins_.infos.size();
    plugins_.infos.push_back(std::move(info));
    plugins_.backends.push_back(std::move(backend));
  }

  void refuse_duplicate(const PluginInfo& info) const {
    if (const Backend* first = plugins_.find(info.name))
      reject(fmt::format("duplicate of '{}' loaded from {}", info.name, plugins_.info(*first).path.string()));
  }

  Plugins& plugins_;
};

fs::path normalized(const fs::path& path) {
  std::error_code ec;
  const fs::path absolute = fs::absolute(path, ec);
  if (ec) return path.lexically_normal();
  fs::path canonical = fs::weakly_canonical(absolute, ec);
  return ec ? absolute.lexically_normal() : canonical;
}

std::vector<fs::path> libraries_in(const fs::path& dir) {
  std::vector<fs::path> found;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    std::error_code type_ec;
    if (entry.path().extension() == ".so" && entry.is_regular_file(type_ec)) found.push_back(entry.path());
  }
  if (ec) logger().debug("plugin directory {} not searched: {}", dir.string(), ec.message());
  std::sort(found.begin(), found.end(),
            [](const fs::path& a, const fs::path& b) { return a.filename() < b.filename(); });
  return found;
}

}  // namespace

std::vector<fs::path> plugin_search_dirs(const RuntimeOptions& options, const Config& config) {
  std::vector<fs::path> dirs;
  const auto add = [&](const fs::path& dir) {
    if (dir.empty()) return;
    fs::path n = normalized(dir);
    if (std::find(dirs.begin(), dirs.end(), n) == dirs.end()) dirs.push_back(std::move(n));
  };
  if (options.read_environment) {
    if (const char* env = std::getenv("DELTAKERN_PLUGIN_PATH"); env != nullptr) {
      std::string_view rest(env);
      while (!rest.empty()) {
        const size_t colon = rest.find(':');
        add(fs::path(rest.substr(0, colon)));
        rest = colon == std::string_view::npos ? std::string_view() : rest.substr(colon + 1);
      }
    }
  }
  for (const auto& dir : options.plugin_path) add(dir);
  for (const auto& dir : config.search_paths) add(dir);
  if (options.search_default_dirs) {
    // The build tree mirrors the install layout, so the directory beside libdeltakern is the
    // build tree's own when run from there. The compile-time build directory is a last resort
    // for a core copied away from its plugins, never searched by an installed core that has
    // its own (it would list every build-tree plugin as a duplicate).
    const fs::path beside = installed_plugin_dir();
    add(beside);
    std::error_code ec;
    if (!fs::is_directory(beside, ec)) add(fs::path(DELTAKERN_BUILD_PLUGIN_DIR));
  }
  return dirs;
}

Plugins discover_plugins(std::span<const fs::path> files, std::span<const fs::path> dirs,
                         const ProbeConfig& probe) {
  Plugins plugins;
  Loader loader(plugins);
  std::optional<ProbeGate> gate;
  if (probe.mode == ProbeMode::child) gate.emplace(probe);
  std::vector<fs::path> candidates;  // in search order
  std::set<fs::path> seen;           // one file reached twice (a --plugin inside a searched dir) loads once
  const auto consider = [&](const fs::path& file) {
    if (seen.insert(normalized(file)).second) candidates.push_back(fs::absolute(file).lexically_normal());
  };
  for (const auto& file : files) consider(file);
  for (const auto& dir : dirs) {
    logger().debug("searching {} for plugins", dir.string());
    for (const auto& file : libraries_in(dir)) consider(file);
  }
  if (gate) gate->probe_ahead(candidates);
  for (const auto& file : candidates) loader.load(file, gate ? &*gate : nullptr);
  if (gate) {
    gate->save_cache();
    plugins.probe_children = gate->children_spawned();
  }
  return plugins;
}

}  // namespace deltakern::detail
