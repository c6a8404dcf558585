// Where the install (or the build tree, which mirrors it) keeps plugins and the default
// configuration, found relative to libdeltakern itself so a relocated install still works.
#pragma once

#include <filesystem>

namespace deltakern::detail {

// The directory libdeltakern was loaded from.
std::filesystem::path library_dir();
// <libdir>/deltakern/plugins.
std::filesystem::path installed_plugin_dir();
// <prefix>/share/deltakern/deltakern.toml (it may not exist).
std::filesystem::path installed_config_file();

}  // namespace deltakern::detail
