// Where the install (or the build tree, which mirrors it) keeps plugins and the default
// configuration, found relative to libdeltakern itself so a relocated install still works.
#pragma once

#include <filesystem>

namespace deltakern::detail {

// libdeltakern itself, and the directory it was loaded from.
std::filesystem::path library_file();
std::filesystem::path library_dir();
// <libdir>/deltakern/plugins.
std::filesystem::path installed_plugin_dir();
// <libdir>/deltakern/deltakern-probe: the helper that checks a plugin in a child process.
std::filesystem::path probe_helper_file();
// <prefix>/share/deltakern/deltakern.toml (it may not exist).
std::filesystem::path installed_config_file();

}  // namespace deltakern::detail
