#include "isa.hpp"

namespace deltakern::portable::cpu {

namespace {

struct Candidate {
  const char* name;
  const KernelTable& (*table)();
  bool runs_here;
};

}  // namespace

const KernelTable& select_kernels(const std::string& requested, std::string& why) {
#if defined(DELTAKERN_PORTABLE_X86_ISAS)
  __builtin_cpu_init();
  const bool v4 = __builtin_cpu_supports("x86-64-v4") != 0;
  const Candidate candidates[] = {
      {"x86-64-v4+avx512bf16", &x86_64_v4_bf16::kernel_table,
       v4 && __builtin_cpu_supports("avx512bf16") != 0},
      {"x86-64-v4", &x86_64_v4::kernel_table, v4},
      {"x86-64-v3", &x86_64_v3::kernel_table, __builtin_cpu_supports("x86-64-v3") != 0},
      {"generic", &generic::kernel_table, true},
  };
#else
  const Candidate candidates[] = {{"generic", &generic::kernel_table, true}};
#endif
  why.clear();
  if (!requested.empty()) {
    for (const Candidate& c : candidates) {
      if (requested != c.name) continue;
      if (c.runs_here) return c.table();
      why = "DELTAKERN_PORTABLE_ISA=" + requested + ": this CPU cannot run it";
      break;
    }
    if (why.empty()) why = "DELTAKERN_PORTABLE_ISA=" + requested + ": not built into this plugin";
  }
  for (const Candidate& c : candidates)
    if (c.runs_here) return c.table();
  return generic::kernel_table();
}

}  // namespace deltakern::portable::cpu
