// deltakern: inspect the installed backends, explain dispatch decisions, prove a backend
// conformant, and run the demo workload.
#include "commands.hpp"

#include <deltakern/deltakern.hpp>

#include <fmt/core.h>

#include <exception>

int main(int argc, char** argv) {
  CLI::App app{"deltakern: linear-attention kernels with run-time backend plugins"};
  app.require_subcommand(1);
  deltakern::cli::add_list_command(app);
  deltakern::cli::add_explain_command(app);
  deltakern::cli::add_conformance_command(app);
  deltakern::cli::add_demo_command(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const deltakern::Error& e) {
    fmt::print(stderr, "deltakern: {}\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    fmt::print(stderr, "deltakern: unexpected error: {}\n", e.what());
    return 3;
  }
  return 0;
}
