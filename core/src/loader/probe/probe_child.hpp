// The probe helper's side: deltakern-probe is a thin main() around this, so that it checks a
// library with the very code discovery uses.
#pragma once

namespace deltakern::detail {

// deltakern-probe --verdict-fd N --parent PID --log-level LEVEL -- LIBRARY
// Loads LIBRARY alone, checks its ABI and descriptor, runs init, the device probe, a short
// wait and shutdown, then init, probe and shutdown once more, unloads it, and writes the
// protocol's lines (probe_protocol.hpp) on descriptor N, the verdict with the non-system
// libraries that loading it added. Returns the exit status.
int run_probe_child(int argc, char** argv);

}  // namespace deltakern::detail
