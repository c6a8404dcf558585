// The host side every device path shares before it launches: the fresh output tensor (the
// portable contract: x is never written) and the launch grid's max_seq_len.
#pragma once

#include <deltakern/plugin_sdk.hpp>

#include <memory>

#include "layout.hpp"

namespace deltakern::portable {

struct ResultDeleter {
  void operator()(DLManagedTensor* t) const noexcept {
    if (t != nullptr && t->deleter != nullptr) t->deleter(t);
  }
};
// A fresh result, released again if the launch fails before it is handed to the core.
using ResultPtr = std::unique_ptr<DLManagedTensor, ResultDeleter>;

// x's shape, compact in x's layout: time-contiguous (T, 1), channel-last (1, D).
ResultPtr allocate_varlen_output(const dk_host& host, const DLTensor& x, XLayout layout, void* stream);
// (batch, D[, Tq]), compact.
ResultPtr allocate_update_output(const dk_host& host, const DLTensor& x, void* stream);

// The longest sequence, bounded by the token count. Given by the host, it is used as is and
// nothing is read; omitted, query_start_loc is read through dk_host.read_to_host: exactly one
// counted sync.
int64_t launch_max_seq_len(const dk_host& host, const plugin::VarlenArgs& args);

}  // namespace deltakern::portable
