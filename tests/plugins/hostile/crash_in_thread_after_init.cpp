// init starts a thread that segfaults 20 ms later and returns at once: the crash comes after
// init has succeeded, while the probe child waits before shutting the plugin down.
#include "hostile_init.hpp"

#include <chrono>
#include <thread>

namespace {

int* volatile nowhere = nullptr;  // volatile: the compiler cannot turn the store into a trap

int32_t start_a_doomed_thread(const dk_host* host, void** plugin, char* error, size_t error_size) {
  std::thread([] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    *nowhere = 42;
  }).detach();
  return deltakern::testplugins::init_keep_host(host, plugin, error, error_size);
}

}  // namespace

DK_HOSTILE_INIT_PLUGIN("crash_in_thread_after_init", start_a_doomed_thread)
