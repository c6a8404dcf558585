// Compile-time and run-time widths. The widths engines use (2, 3 and above all 4) each get
// kernels of their own, every loop over the taps unrolled on the constant W. The wider ones
// (5..8) share one set, instantiated with W = kRuntimeWidth, that reads the width from the
// plan: seven widths' worth of kernels per instruction set cost most of the plugin's build
// (portable's four kernel translation units took 2.2x the CPU time they do with four). Both
// kinds do the same float operations in the same order (bias, then the taps k = 0 .. W-1),
// so a width gives the same bits whichever kind serves it.
#pragma once

#ifndef DK_CPU_ISA
#error "width.hpp is compiled once per instruction set: define DK_CPU_ISA first"
#endif

#include <cstdint>

#include "../plan.hpp"

namespace deltakern::portable::cpu::DK_CPU_ISA {

inline constexpr int kRuntimeWidth = 0;
inline constexpr int kMaxFixedWidth = 4;
// The runtime-width kernels serve kMaxFixedWidth + 1 and up: that many taps are always there,
// and the hot loops unroll them as a fixed width would.
inline constexpr int kMinRuntimeWidth = kMaxFixedWidth + 1;

// Room for the taps of width W: W itself, or kMaxWidth for the runtime-width kernels.
template <int W>
inline constexpr int kTapSlots = W == kRuntimeWidth ? kMaxWidth : W;

// The width a kernel runs with: the constant W, or the plan's.
template <int W>
inline int width_of(int64_t plan_width) {
  if constexpr (W == kRuntimeWidth) {
    return static_cast<int>(plan_width);
  } else {
    return W;
  }
}

// Whether tap k (a constant once the loop over kTapSlots<W> is unrolled) takes part: always
// for a fixed width and for the first kMinRuntimeWidth taps, otherwise when the width has it.
template <int W>
inline bool tap_in_use(int k, int width) {
  return W != kRuntimeWidth || k < kMinRuntimeWidth || k < width;
}

}  // namespace deltakern::portable::cpu::DK_CPU_ISA
