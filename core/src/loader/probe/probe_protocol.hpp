// What the probe helper (deltakern-probe) and the core that spawns it agree on: the helper
// writes "phase <step>" before each step of loading a library, "named <json>" once it has
// read the descriptor's name and ABI, and "verdict <json>" at the end, one line each, on a pipe at a fixed
// descriptor (so a plugin printing to stdout cannot garble it). A child that dies leaves the last phase it
// announced: that is where it died.
#pragma once

#include <string_view>

namespace deltakern::detail::probe_protocol {

inline constexpr int kVerdictFd = 3;
inline constexpr std::string_view kPhase = "phase";
inline constexpr std::string_view kNamed = "named";  // a ProbeVerdict's name, version and ABI
inline constexpr std::string_view kVerdict = "verdict";
// The helper's own failures (bad arguments, its parent gone): no verdict on the library.
inline constexpr int kExitUsage = 64;
inline constexpr int kExitOrphaned = 65;

}  // namespace deltakern::detail::probe_protocol
