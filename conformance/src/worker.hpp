// The conformance worker's program (deltakern-conformance-worker): runs one target's cases
// from a given position and reports each one as it starts and ends (worker_protocol.hpp),
// so that run_isolated() can tell which case a crash, an exit or a hang happened in.
#pragma once

namespace deltakern::conformance {

// The worker's main: `--report-fd N --parent PID -- REQUEST` (a worker_protocol::Request as JSON).
int run_worker(int argc, char** argv);

}  // namespace deltakern::conformance
