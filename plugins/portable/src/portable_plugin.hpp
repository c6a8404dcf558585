// One initialised instance of the portable plugin: what dk_plugin.init hands the core as its
// opaque `plugin` pointer, and every op receives back.
#pragma once

#include <deltakern/plugin_abi.h>

#include <atomic>
#include <cstdint>

#include "cpu/launch.hpp"
#include "cpu/plan.hpp"
#include "cpu/thread_pool.hpp"

namespace deltakern::portable {

struct PortablePlugin {
  PortablePlugin(const dk_host& h, unsigned threads, const cpu::KernelTable& k)
      : host(h), pool(threads), kernels(k) {}

  cpu::Device cpu_device() { return {host, pool, kernels, cpu_error_word}; }

  const dk_host& host;  // the core's; valid until shutdown
  cpu::ThreadPool pool;
  const cpu::KernelTable& kernels;
  // The CPU "device" error word: kernels flag, check_errors reads and clears.
  std::atomic<uint32_t> cpu_error_word{0};
};

}  // namespace deltakern::portable
