// Declares a schema that is not causal_conv1d_varlen's signature (arguments missing):
// discovery must skip it.
#include "kernels.hpp"

namespace {

using namespace deltakern::testplugins;

int32_t varlen_fresh(void* p, const dk_call* c, DLManagedTensor** r, char* e, size_t n) {
  return run_varlen(p, c, r, e, n, {.in_place = false});
}

const dk_caps kCaps = {sizeof(dk_caps), 1, kCpu, 1, kF32Only, 2, 4, DK_LAYOUT_TIME_CONTIGUOUS};
const dk_op kOps[] = {
    {sizeof(dk_op), DK_OP_CAUSAL_CONV1D_VARLEN,
     "causal_conv1d_varlen(Tensor x, Tensor weight, Tensor(b!) conv_states) -> Tensor", &kCaps, nullptr,
     varlen_fresh},
};
const dk_plugin kPlugin = {sizeof(dk_plugin),
                           DK_ABI_MAJOR,
                           DK_ABI_MINOR,
                           "bad_schema",
                           "test",
                           init_keep_host,
                           probe_cpu_only,
                           shutdown_nothing,
                           1,
                           kOps,
                           nullptr};

}  // namespace

DK_TEST_PLUGIN_EXPORT const dk_plugin* deltakern_plugin_entry(uint16_t, uint16_t) { return &kPlugin; }
