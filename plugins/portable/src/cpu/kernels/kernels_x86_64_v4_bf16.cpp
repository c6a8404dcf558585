// The CPU kernels built for x86-64-v4 with AVX512-BF16 (AMD Zen 4, Intel Sapphire Rapids and
// later): bf16 outputs are rounded by one instruction instead of eight. Only the bf16 kernels
// differ from x86-64-v4's, so only they are built here; isa.cpp takes the others from v4.
#define DK_CPU_ISA x86_64_v4_bf16
#define DK_CPU_ISA_NAME "x86-64-v4+avx512bf16"
#define DK_CPU_ISA_BF16_ONLY 1
#include "kernel_table.inc"
