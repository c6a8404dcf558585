// The CPU path's launchers: the host side of a kernel launch. They check nothing about index
// contents, derive max_seq_len when the host did not give it (the one counted sync), size a
// grid of work items from it, and run the items on the thread pool, which plays the device.
#pragma once

#include <deltakern/plugin_sdk.hpp>

#include <atomic>
#include <cstdint>

#include "plan.hpp"
#include "thread_pool.hpp"

namespace deltakern::portable::cpu {

struct Device {
  const dk_host& host;
  ThreadPool& pool;
  const KernelTable& kernels;
  std::atomic<uint32_t>& error_word;  // dk_error_bits, read and cleared by check_errors
};

// A fresh output (the op), or the caller's args.out (the out-variant: nothing returned).
DLManagedTensor* causal_conv1d_varlen(const Device& device, const plugin::VarlenArgs& args);
DLManagedTensor* causal_conv1d_update(const Device& device, const plugin::UpdateArgs& args);
void causal_conv1d_varlen_out(const Device& device, const plugin::VarlenArgs& args);
void causal_conv1d_update_out(const Device& device, const plugin::UpdateArgs& args);

}  // namespace deltakern::portable::cpu
