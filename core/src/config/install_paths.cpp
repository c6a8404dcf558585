#include "config/install_paths.hpp"

#include <string>
#include <vector>
// Boost.DLL needs <string> and <vector> before its headers when built on std::filesystem.
#include <boost/dll/runtime_symbol_info.hpp>

namespace deltakern::detail {
namespace {

// DELTAKERN_PLUGIN_SUBDIR is "<libdir>/deltakern/plugins" relative to the prefix.
std::filesystem::path libdir_relative_to_prefix() {
  return std::filesystem::path(DELTAKERN_PLUGIN_SUBDIR).parent_path().parent_path();
}

}  // namespace

std::filesystem::path library_file() { return boost::dll::this_line_location(); }

std::filesystem::path library_dir() { return library_file().parent_path(); }

std::filesystem::path installed_plugin_dir() { return library_dir() / "deltakern" / "plugins"; }

std::filesystem::path probe_helper_file() { return library_dir() / "deltakern" / "deltakern-probe"; }

std::filesystem::path installed_config_file() {
  // Climb out of the libdir (one level for lib, two for lib/x86_64-linux-gnu) to the prefix.
  std::filesystem::path prefix = library_dir();
  const auto libdir = libdir_relative_to_prefix();
  if (libdir.is_relative() && !libdir.empty()) {
    for ([[maybe_unused]] const auto& part : libdir) prefix = prefix.parent_path();
  } else {
    prefix = prefix.parent_path();
  }
  return prefix / DELTAKERN_CONFIG_SUBDIR / "deltakern.toml";
}

}  // namespace deltakern::detail
