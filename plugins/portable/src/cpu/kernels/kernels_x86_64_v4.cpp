// The CPU kernels built for x86-64-v4 (selected at run time when the CPU has it).
#define DK_CPU_ISA x86_64_v4
#define DK_CPU_ISA_NAME "x86-64-v4"
#include "kernel_table.inc"
