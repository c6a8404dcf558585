#include "isa.hpp"

namespace deltakern::portable::cpu {

namespace {

struct Candidate {
  const char* name;
  const KernelTable& (*table)();
  bool runs_here;
};

#if defined(DELTAKERN_PORTABLE_ISA_V4_BF16)
// x86-64-v4+avx512bf16 differs from x86-64-v4 only in how bf16 outputs are rounded, so its
// translation unit builds the bf16 kernels alone: the table is v4's with those in place.
const KernelTable& v4_bf16_kernel_table() {
  static const KernelTable table = [] {
    KernelTable t = x86_64_v4::kernel_table();
    const KernelTable& own = x86_64_v4_bf16::kernel_table();
    constexpr int bf16 = static_cast<int>(ElemType::bf16);
    t.isa = own.isa;
    for (int layout = 0; layout < 2; ++layout)
      for (int w = 0; w < kWidths; ++w)
        for (int a = 0; a < kActs; ++a) t.varlen[bf16][layout][w][a] = own.varlen[bf16][layout][w][a];
    for (int w = 0; w < kWidths; ++w)
      for (int a = 0; a < kActs; ++a) t.update[bf16][w][a] = own.update[bf16][w][a];
    return t;
  }();
  return table;
}
#endif

}  // namespace

const KernelTable& select_kernels(const std::string& requested, std::string& why) {
#if defined(__x86_64__)
  __builtin_cpu_init();
#if defined(__clang__)
  // clang 14 (Debian 12's, which the sanitizer and fuzzing builds use) knows no level names in
  // __builtin_cpu_supports, so the levels are spelled as their defining features. F16C, LZCNT
  // and MOVBE are not among the features it can test; every CPU with AVX2, FMA and BMI2 has them.
  [[maybe_unused]] const bool v3 = __builtin_cpu_supports("avx2") != 0 &&
                                   __builtin_cpu_supports("fma") != 0 && __builtin_cpu_supports("bmi") != 0 &&
                                   __builtin_cpu_supports("bmi2") != 0;
  [[maybe_unused]] const bool v4 =
      v3 && __builtin_cpu_supports("avx512f") != 0 && __builtin_cpu_supports("avx512bw") != 0 &&
      __builtin_cpu_supports("avx512cd") != 0 && __builtin_cpu_supports("avx512dq") != 0 &&
      __builtin_cpu_supports("avx512vl") != 0;
#else
  [[maybe_unused]] const bool v3 = __builtin_cpu_supports("x86-64-v3") != 0;
  [[maybe_unused]] const bool v4 = __builtin_cpu_supports("x86-64-v4") != 0;
#endif
  [[maybe_unused]] const bool v4_bf16 = v4 && __builtin_cpu_supports("avx512bf16") != 0;
#endif
  const Candidate candidates[] = {
#if defined(DELTAKERN_PORTABLE_ISA_V4_BF16)
    {"x86-64-v4+avx512bf16", &v4_bf16_kernel_table, v4_bf16},
#endif
#if defined(DELTAKERN_PORTABLE_ISA_V4)
    {"x86-64-v4", &x86_64_v4::kernel_table, v4},
#endif
#if defined(DELTAKERN_PORTABLE_ISA_V3)
    {"x86-64-v3", &x86_64_v3::kernel_table, v3},
#endif
    {"generic", &generic::kernel_table, true},
  };
  why.clear();
  if (!requested.empty()) {
    for (const Candidate& c : candidates) {
      if (requested != c.name) continue;
      if (c.runs_here) return c.table();
      why = "DELTAKERN_PORTABLE_ISA=" + requested + ": this CPU cannot run it";
      break;
    }
    if (why.empty())
      why = "DELTAKERN_PORTABLE_ISA=" + requested +
            ": not built into this plugin (DELTAKERN_CPU_ISAS=all builds every level)";
  }
  for (const Candidate& c : candidates)
    if (c.runs_here) return c.table();
  return generic::kernel_table();
}

}  // namespace deltakern::portable::cpu
