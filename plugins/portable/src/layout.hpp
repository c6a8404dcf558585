// What portable's launchers share about a call, beyond what the SDK says: the widths the kernels
// are instantiated for, and x's layout in the form the launchers switch on. There are no argument
// checks here: the core validated the call against portable's declarations before run().
#pragma once

#include <deltakern/plugin_sdk.hpp>

namespace deltakern::portable {

inline constexpr int kMinWidth = 2;
inline constexpr int kMaxWidth = 8;

enum class XLayout { time_contiguous, channel_last };

// The SDK's rule (plugin::layout_of), the one the core validated x with.
inline XLayout varlen_layout(const plugin::VarlenArgs& args) {
  return args.channel_last() ? XLayout::channel_last : XLayout::time_contiguous;
}

}  // namespace deltakern::portable
