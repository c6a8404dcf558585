// init segfaults when it has run before in this process, even after a clean shutdown: a plugin
// that cannot be started again, as a Runtime created after the last one holding it was
// destroyed would start it.
#include "hostile_init.hpp"

#include <atomic>

namespace {

int* volatile nowhere = nullptr;  // volatile: the compiler cannot turn the store into a trap
std::atomic<int> inits{0};

int32_t init_only_once(const dk_host* host, void** plugin, char* error, size_t error_size) {
  if (inits++ > 0) *nowhere = 42;
  return deltakern::testplugins::init_keep_host(host, plugin, error, error_size);
}

}  // namespace

DK_HOSTILE_INIT_PLUGIN("crash_on_second_init", init_only_once)
