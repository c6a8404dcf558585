// init exits the process it runs in, with status 3.
#include "hostile_init.hpp"

#include <cstdlib>

namespace {

int32_t exit_process(const dk_host*, void**, char*, size_t) { std::exit(3); }

}  // namespace

DK_HOSTILE_INIT_PLUGIN("exit_in_init", exit_process)
