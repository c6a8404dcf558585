// init starts a process that outlives it (and so holds the probe's pipe open) and then
// succeeds: a legitimate plugin may start a helper. The probe must judge by the child's own
// exit, not wait for end of file on the pipe until the time-out.
#include "hostile_init.hpp"

#include <unistd.h>

namespace {

int32_t start_a_lingering_process(const dk_host* host, void** plugin, char* error, size_t error_size) {
  if (::fork() == 0) {
    ::sleep(2);  // longer than the test's probe time-out
    ::_exit(0);
  }
  return deltakern::testplugins::init_keep_host(host, plugin, error, error_size);
}

}  // namespace

DK_HOSTILE_INIT_PLUGIN("forks_in_init", start_a_lingering_process)
