// init never returns: the probe's time-out must end it.
#include "hostile_init.hpp"

#include <chrono>
#include <thread>

namespace {

int32_t hang(const dk_host*, void**, char*, size_t) {
  for (;;) std::this_thread::sleep_for(std::chrono::hours(1));
}

}  // namespace

DK_HOSTILE_INIT_PLUGIN("hang_in_init", hang)
