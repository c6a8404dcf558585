// deltakern-conformance-worker: runs conformance cases in a process of its own, started by
// run_isolated() (deltakern conformance), so that a backend that crashes or hangs takes
// down this worker and not the run.
#include "worker.hpp"

int main(int argc, char** argv) { return deltakern::conformance::run_worker(argc, argv); }
