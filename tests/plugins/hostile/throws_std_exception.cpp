// Lets a std::exception escape across the C ABI from run, supports (for width 3), the CUDA
// device probe, check_errors and shutdown: a defect (the SDK's guarded() would have caught
// them), but one that happens. The core must contain each and keep what it said.
#include "hostile_init.hpp"

#include <stdexcept>

namespace {

using namespace deltakern::testplugins;

int32_t run_throws(void*, const dk_call*, DLManagedTensor**, char*, size_t) {
  throw std::runtime_error("boom at token 17");
}

int32_t supports_throws_for_width_3(void*, const dk_call* call, char*, size_t) {
  if (call->tensors[DK_VARLEN_WEIGHT]->shape[1] == 3) throw std::runtime_error("supports boom at width 3");
  return DK_OK;
}

int32_t probe_throws_for_cuda(void* plugin, int32_t device_type, char* why, size_t why_size) {
  if (device_type == kDLCUDA) throw std::runtime_error("no CUDA here, and said so by throwing");
  return probe_cpu_only(plugin, device_type, why, why_size);
}

int32_t check_errors_throws(void*, DLDevice, void*, uint32_t*, char*, size_t) {
  throw std::runtime_error("check boom");
}

void shutdown_throws(void*) { throw std::runtime_error("shutdown boom"); }

const dk_device_caps kCpuAndCuda[] = {{sizeof(dk_device_caps), kDLCPU, 0, 0},
                                      {sizeof(dk_device_caps), kDLCUDA, 0, 0}};
const dk_caps kCaps = {sizeof(dk_caps), 2, kCpuAndCuda, 1, kF32Only, 2, 4, DK_LAYOUT_TIME_CONTIGUOUS};
const dk_op kOps[] = {{sizeof(dk_op), DK_OP_CAUSAL_CONV1D_VARLEN, kVarlenFreshSchema, &kCaps,
                       supports_throws_for_width_3, run_throws}};
const dk_plugin kPlugin = {sizeof(dk_plugin),
                           DK_ABI_MAJOR,
                           DK_ABI_MINOR,
                           "throws_std_exception",
                           "test",
                           init_keep_host,
                           probe_throws_for_cuda,
                           shutdown_throws,
                           1,
                           kOps,
                           check_errors_throws};

}  // namespace

DK_TEST_PLUGIN_EXPORT const dk_plugin* deltakern_plugin_entry(uint16_t, uint16_t) { return &kPlugin; }
