// init aborts the process it runs in.
#include "hostile_init.hpp"

#include <cstdlib>

namespace {

int32_t abort_process(const dk_host*, void**, char*, size_t) { std::abort(); }

}  // namespace

DK_HOSTILE_INIT_PLUGIN("abort_in_init", abort_process)
