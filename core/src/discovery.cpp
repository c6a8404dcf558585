#include "discovery.hpp"

#include "dlpack_util.hpp"
#include "install_paths.hpp"
#include "log.hpp"
#include "plugin_exception.hpp"
#include "probe_gate.hpp"
#include "rejection.hpp"
#include "status.hpp"

#include <fmt/core.h>

#include <algorithm>
#include <cstddef>
#include <cstdlib>
#include <optional>
#include <set>
#include <string>
#include <vector>
// Boost.DLL needs <string> and <vector> before its headers when built on std::filesystem.
#include <boost/dll/shared_library.hpp>

namespace deltakern::detail {
namespace fs = std::filesystem;

Backend::~Backend() {
  if (!initialized || descriptor.shutdown == nullptr) return;
  try {
    descriptor.shutdown(instance);
  } catch (...) {
    // A plugin that throws out of shutdown must not stop the others' shutdown, nor lose what it said.
    try {
      logger().error("plugin '{}': shutdown threw {}", name, current_exception_text());
    } catch (...) {
    }
  }
}

Plugins::~Plugins() {
  while (!backends.empty()) backends.pop_back();
}

const Backend* Plugins::find(std::string_view name) const {
  for (const auto& b : backends)
    if (b->name == name) return b.get();
  return nullptr;
}

namespace {

constexpr size_t kWhySize = 512;

// Boost.DLL puts the loader's own words in parentheses after its message.
std::string loader_message(std::string_view what) {
  constexpr std::string_view marker = "(dlerror system message: ";
  const size_t at = what.find(marker);
  if (at == std::string_view::npos) return std::string(what);
  const size_t begin = at + marker.size();
  size_t end = what.rfind(')');
  if (end == std::string_view::npos || end < begin) end = what.size();
  return std::string(what.substr(begin, end - begin));
}

std::string message_or_status(const char* buffer, int32_t status) {
  if (buffer[0] != '\0') return buffer;
  return fmt::format("status {} ({})", status, status_name(status));
}

class Loader {
 public:
  Loader(Plugins& plugins, HostServices& host, PhaseListener on_phase = {})
      : plugins_(plugins), host_(host), on_phase_(std::move(on_phase)) {}

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
    } catch (const Rejection& e) {
      info.reason = e.what();
    } catch (const std::exception& e) {
      info.reason = fmt::format("unexpected failure while loading: {}", e.what());
    } catch (...) {
      info.reason = "unexpected failure while loading";
    }
    logger().warn("rejected plugin {}: {}", path.string(), info.reason);
    plugins_.infos.push_back(std::move(info));
  }

 private:
  void load_into(PluginInfo& info) {
    auto backend = std::make_unique<Backend>();
    boost::dll::shared_library library;
    phase("loading", info);
    try {
      library.load(info.path, boost::dll::load_mode::rtld_now | boost::dll::load_mode::rtld_local);
    } catch (const std::exception& e) {
      reject(fmt::format("dlopen failed: {}", loader_message(e.what())));
    }
    // has() asks the loader; Boost 1.74's library_info would read only .symtab, which a
    // stripped plugin does not have.
    if (!library.has(DK_PLUGIN_ENTRY_SYMBOL))
      reject(fmt::format("no entry symbol '{}'", DK_PLUGIN_ENTRY_SYMBOL));
    const auto entry = library.get<const dk_plugin*(uint16_t, uint16_t)>(DK_PLUGIN_ENTRY_SYMBOL);
    const dk_plugin* d = nullptr;
    phase("calling " DK_PLUGIN_ENTRY_SYMBOL, info);
    try {
      d = entry(DK_ABI_MAJOR, DK_ABI_MINOR);
    } catch (...) {
      reject("the entry threw " + current_exception_text());
    }
    // Read through copies that cannot fault and checked against bounds: the core keeps its own.
    backend->descriptor = read_descriptor(d, info, [&](const PluginInfo& named) {
      if (const Backend* first = plugins_.find(named.name))
        reject(
            fmt::format("duplicate of '{}' loaded from {}", named.name, plugins_.info(*first).path.string()));
    });
    for (size_t slot = 0; slot < kOpCount; ++slot) backend->ops[slot] = backend->descriptor.op(slot);
    backend->op_info = backend->descriptor.op_info;
    backend->check_errors = backend->descriptor.check_errors;
    backend->name = info.name;
    backend->library = std::make_shared<boost::dll::shared_library>(std::move(library));
    initialize(*backend, info);
    probe(*backend, info);

    info.state = PluginInfo::State::loaded;
    logger().info("loaded plugin '{}' {} (ABI {}.{}) from {}", info.name, info.version, info.abi_major,
                  info.abi_minor, info.path.string());
    backend->info_index = plugins_.infos.size();
    plugins_.infos.push_back(std::move(info));
    plugins_.backends.push_back(std::move(backend));
  }

  void initialize(Backend& backend, const PluginInfo& info) {
    char error[kWhySize] = {};
    int32_t status = DK_ERR_INTERNAL;
    phase("running init", info);
    try {
      status = backend.descriptor.init(host_.table_for(info.name), &backend.instance, error, sizeof error);
    } catch (...) {
      reject("init failed: threw " + current_exception_text());
    }
    error[sizeof error - 1] = '\0';
    if (status != DK_OK) reject(fmt::format("init failed: {}", message_or_status(error, status)));
    backend.initialized = true;
  }

  void probe(Backend& backend, PluginInfo& info) {
    phase("running probe", info);
    for (const auto& op : info.ops) {
      for (const auto& device : op.devices) {
        const bool seen = std::any_of(info.devices.begin(), info.devices.end(),
                                      [&](const auto& d) { return d.type == device.type; });
        if (seen) continue;
        PluginInfo::DeviceStatus status{device.type, true, {}};
        if (backend.descriptor.probe != nullptr) {
          char why[kWhySize] = {};
          int32_t result = DK_ERR_INTERNAL;
          try {
            result = backend.descriptor.probe(backend.instance, device.type, why, sizeof why);
          } catch (...) {
            std::snprintf(why, sizeof why, "probe threw %s", current_exception_text().c_str());
          }
          why[sizeof why - 1] = '\0';
          if (result != DK_OK) status = {device.type, false, message_or_status(why, result)};
        }
        if (!status.available)
          logger().info("plugin '{}' is unavailable on {}: {}", info.name, device_type_name(device.type),
                        status.reason);
        info.devices.push_back(std::move(status));
      }
    }
  }

  void phase(std::string_view name, const PluginInfo& so_far) const {
    if (on_phase_) on_phase_(name, so_far);
  }

  Plugins& plugins_;
  HostServices& host_;
  PhaseListener on_phase_;
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

Plugins discover_plugins(std::span<const fs::path> files, std::span<const fs::path> dirs, HostServices& host,
                         const ProbeConfig& probe) {
  Plugins plugins;
  Loader loader(plugins, host);
  std::optional<ProbeGate> gate;
  if (probe.mode == ProbeMode::child) gate.emplace(probe);
  std::set<fs::path> seen;  // one file reached twice (a --plugin inside a searched dir) loads once
  const auto consider = [&](const fs::path& file) {
    if (seen.insert(normalized(file)).second)
      loader.load(fs::absolute(file).lexically_normal(), gate ? &*gate : nullptr);
  };
  for (const auto& file : files) consider(file);
  for (const auto& dir : dirs) {
    logger().debug("searching {} for plugins", dir.string());
    for (const auto& file : libraries_in(dir)) consider(file);
  }
  if (gate) {
    gate->save_cache();
    plugins.probe_children = gate->children_spawned();
  }
  return plugins;
}

PluginInfo check_library_alone(const fs::path& path, HostServices& host, const PhaseListener& on_phase) {
  PluginInfo info;
  {
    Plugins plugins;
    Loader(plugins, host, on_phase).load(path);
    info = plugins.infos.at(0);
    on_phase("shutting down and unloading", info);
  }  // the plugin's shutdown, then its static destructors as it is unmapped
  return info;
}

}  // namespace deltakern::detail
