// init refuses while an instance it made is alive, as a plugin holding a process-wide resource
// does (a CUDA context, a global thread pool, a registration with a framework): two Runtimes of
// one process must share one instance, not initialise the plugin twice. It may be started again
// after its shutdown. Each init and shutdown is logged (at warn) so a test can count them, and
// it returns fresh outputs through host->alloc, so a test sees which allocator served a call.
#include "hostile_init.hpp"

#include <atomic>
#include <chrono>
#include <string>
#include <thread>

namespace {

using namespace deltakern::testplugins;

std::atomic<int> alive{0};

int32_t init_once(const dk_host* host, void** plugin, char* error, size_t error_size) {
  if (alive.load() > 0) {
    deltakern::plugin::write_message(error, error_size,
                                     "single_instance: init while an instance is alive (a second Runtime?)");
    return DK_ERR_INTERNAL;
  }
  ++alive;
  deltakern::plugin::log(host, DK_LOG_WARN, "single_instance: init");
  return init_keep_host(host, plugin, error, error_size);
}

// Takes a while, as a real shutdown does (joining threads, destroying a context): long enough
// for a Runtime being created meanwhile to start the plugin again before it is done, were
// that not prevented.
void shutdown_once(void* plugin) {
  deltakern::plugin::log(static_cast<const dk_host*>(plugin), DK_LOG_WARN, "single_instance: shutdown");
  std::this_thread::sleep_for(std::chrono::milliseconds(5));
  --alive;
}

}  // namespace

DK_HOSTILE_PLUGIN("single_instance", init_once, shutdown_once)
