// deltakern-probe: checks one plugin library in a process of its own, so that a library
// that crashes or hangs while loading takes down this helper and not the engine.
#include "loader/probe/probe_child.hpp"

int main(int argc, char** argv) { return deltakern::detail::run_probe_child(argc, argv); }
