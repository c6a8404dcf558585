// The CPU kernels built for generic (the baseline of the target: runs anywhere).
#define DK_CPU_ISA generic
#define DK_CPU_ISA_NAME "generic"
#include "kernel_table.inc"
