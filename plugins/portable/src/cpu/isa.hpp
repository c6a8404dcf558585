// Which build of the CPU kernels runs: the best instruction set this CPU has among those
// compiled in (x86-64: baseline, x86-64-v3 with AVX2/FMA/F16C, x86-64-v4 with AVX-512, and
// x86-64-v4 with AVX512-BF16).
#pragma once

#include <string>

#include "plan.hpp"

namespace deltakern::portable::cpu {

namespace generic {
const KernelTable& kernel_table();
}
// The x86-64 levels built in (DELTAKERN_CPU_ISAS in CMakeLists.txt): DELTAKERN_PORTABLE_ISA_<level>.
namespace x86_64_v3 {
const KernelTable& kernel_table();
}
namespace x86_64_v4 {
const KernelTable& kernel_table();
}
namespace x86_64_v4_bf16 {
const KernelTable& kernel_table();  // the bf16 entries only: select_kernels completes it from v4's
}

// The kernels for this CPU. `requested` (from DELTAKERN_PORTABLE_ISA: "generic", "x86-64-v3",
// "x86-64-v4", "x86-64-v4+avx512bf16"; empty: the best available) lets tests run every build on one
// machine; a build the CPU cannot run, or one not built in, is refused with the reason in `why`
// and the best available is used.
const KernelTable& select_kernels(const std::string& requested, std::string& why);

}  // namespace deltakern::portable::cpu
