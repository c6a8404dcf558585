#include "loader/plugin_library.hpp"

#include "loader/plugin_exception.hpp"
#include "loader/rejection.hpp"
#include "services/cuda_services.hpp"
#include "services/dlpack_util.hpp"
#include "services/log.hpp"
#include "status.hpp"

#include <fmt/core.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>
// Boost.DLL needs <string> and <vector> before its headers when built on std::filesystem.
#include <boost/dll/shared_library.hpp>

namespace deltakern::detail {
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

void announce(const PhaseListener& on_phase, std::string_view phase, const PluginInfo& info) {
  if (on_phase) on_phase(phase, info);
}

}  // namespace

PluginLibrary::PluginLibrary(const std::filesystem::path& path, PluginInfo& info,
                             const PhaseListener& on_phase,
                             const std::function<void(const PluginInfo&)>& named) {
  auto library = std::make_shared<boost::dll::shared_library>();
  announce(on_phase, "loading", info);
  try {
    library->load(path, boost::dll::load_mode::rtld_now | boost::dll::load_mode::rtld_local);
  } catch (const std::exception& e) {
    reject(fmt::format("dlopen failed: {}", loader_message(e.what())));
  }
  // has() asks the loader; Boost 1.74's library_info would read only .symtab, which a
  // stripped plugin does not have.
  if (!library->has(DK_PLUGIN_ENTRY_SYMBOL))
    reject(fmt::format("no entry symbol '{}'", DK_PLUGIN_ENTRY_SYMBOL));
  const auto entry = library->get<const dk_plugin*(uint16_t, uint16_t)>(DK_PLUGIN_ENTRY_SYMBOL);
  const dk_plugin* d = nullptr;
  announce(on_phase, "calling " DK_PLUGIN_ENTRY_SYMBOL, info);
  try {
    d = entry(DK_ABI_MAJOR, DK_ABI_MINOR);
  } catch (...) {
    reject("the entry threw " + current_exception_text());
  }
  descriptor_ = read_descriptor(d, info, [&](const PluginInfo& so_far) {
    if (named) named(so_far);
  });
  host_ = std::make_unique<PluginHost>(info.name);
  library_ = std::move(library);
}

PluginLibrary::~PluginLibrary() {
  stop();
  library_.reset();  // the plugin's static destructors run as it is unmapped
}

void PluginLibrary::start(PluginInfo& info, const PhaseListener& on_phase, const StartRound& round) {
  char error[kWhySize] = {};
  int32_t status = DK_ERR_INTERNAL;
  void* instance = nullptr;
  announce(on_phase, round.init_phase, info);
  try {
    status = descriptor_.init(host_->table(), &instance, error, sizeof error);
  } catch (...) {
    reject(fmt::format("{}: threw {}", round.init_failed, current_exception_text()));
  }
  error[sizeof error - 1] = '\0';
  if (status != DK_OK) reject(fmt::format("{}: {}", round.init_failed, message_or_status(error, status)));
  instance_ = instance;
  started_ = true;

  announce(on_phase, round.probe_phase, info);
  info.devices.clear();
  for (const auto& op : info.ops) {
    for (const auto& device : op.devices) {
      const bool seen = std::any_of(info.devices.begin(), info.devices.end(),
                                    [&](const auto& d) { return d.type == device.type; });
      if (seen) continue;
      PluginInfo::DeviceStatus device_status{device.type, true, {}};
      // The core's services (allocation, metadata reads) exist for the host and CUDA only.
      const cuda::Failure no_cuda = device.type == kDLCPU ? nullptr : cuda::built_with_cuda();
      if (no_cuda != nullptr) {
        device_status = {device.type, false, no_cuda};
      } else if (descriptor_.probe != nullptr) {
        char why[kWhySize] = {};
        int32_t result = DK_ERR_INTERNAL;
        try {
          result = descriptor_.probe(instance_, device.type, why, sizeof why);
        } catch (...) {
          std::snprintf(why, sizeof why, "probe threw %s", current_exception_text().c_str());
        }
        why[sizeof why - 1] = '\0';
        if (result != DK_OK) device_status = {device.type, false, message_or_status(why, result)};
      }
      if (!device_status.available)
        logger().info("plugin '{}' is unavailable on {}: {}", info.name, device_type_name(device.type),
                      device_status.reason);
      info.devices.push_back(std::move(device_status));
    }
  }
}

void PluginLibrary::stop() noexcept {
  if (!started_) return;
  started_ = false;
  if (descriptor_.shutdown == nullptr) return;
  try {
    descriptor_.shutdown(instance_);
  } catch (...) {
    // A plugin that throws out of shutdown must not stop the others' shutdown, nor lose what it said.
    try {
      logger().error("plugin '{}': shutdown threw {}", host_->name(), current_exception_text());
    } catch (...) {
    }
  }
}

}  // namespace deltakern::detail
