// Loads, initialises and probes cleanly, then segfaults in shutdown: in-process it would
// take the engine down at exit, so the probe runs shutdown too.
#include "hostile_init.hpp"

namespace {

int* volatile nowhere = nullptr;  // volatile: the compiler cannot turn the store into a trap

void crash(void*) { *nowhere = 42; }

}  // namespace

DK_HOSTILE_PLUGIN("crash_in_shutdown", deltakern::testplugins::init_keep_host, crash)
