// Host-side checks of a call's tensors: shapes, dtypes, devices and layout, read from the
// DLTensor headers only (index contents live on the device and are never read here). The
// core validates calls before they reach a plugin; these checks keep the plugin safe when it
// is driven directly (deltakern conformance --plugin, tests) and say what it cannot serve.
#pragma once

#include <deltakern/plugin_sdk.hpp>

#include <string>

namespace deltakern::portable {

inline constexpr int kMinWidth = 2;
inline constexpr int kMaxWidth = 8;

enum class XLayout { time_contiguous, channel_last };

// Throws plugin::Failure: DK_ERR_INVALID_ARGUMENT for an inconsistent call, DK_ERR_UNSUPPORTED
// for a valid one this backend does not serve (then `supports` reports the same reason).
XLayout check_varlen(const plugin::VarlenArgs& args);
void check_update(const plugin::UpdateArgs& args);

std::string dtype_name(const DLDataType& t);

}  // namespace deltakern::portable
