// The subcommands of the `deltakern` command line; each lives in its own file.
#pragma once

#include <CLI/CLI.hpp>

namespace deltakern::cli {

void add_list_command(CLI::App& app);
void add_explain_command(CLI::App& app);
void add_conformance_command(CLI::App& app);
void add_demo_command(CLI::App& app);

}  // namespace deltakern::cli
