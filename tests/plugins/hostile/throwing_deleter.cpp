// Its results' deleter gives the output's memory back and then throws. The core calls a
// result's deleter from Tensor's destructor, which is noexcept: an exception escaping there
// would terminate the engine.
#include "hostile_init.hpp"

#include <stdexcept>

namespace {

using namespace deltakern::testplugins;

void release_then_throw(DLManagedTensor* self) {
  deltakern::plugin::detail::delete_managed_result(self);
  throw std::runtime_error("deleter boom");
}

int32_t varlen_with_a_throwing_deleter(void* p, const dk_call* c, DLManagedTensor** r, char* e, size_t n) {
  const int32_t status = run_varlen(p, c, r, e, n, {.in_place = false});
  if (status == DK_OK) (*r)->deleter = release_then_throw;
  return status;
}

const dk_caps kCaps = {sizeof(dk_caps), 1, kCpu, 1, kF32Only, 2, 4, DK_LAYOUT_TIME_CONTIGUOUS};
const dk_op kOps[] = {{sizeof(dk_op), DK_OP_CAUSAL_CONV1D_VARLEN, kVarlenFreshSchema, &kCaps, nullptr,
                       varlen_with_a_throwing_deleter}};
const dk_plugin kPlugin = {sizeof(dk_plugin),
                           DK_ABI_MAJOR,
                           DK_ABI_MINOR,
                           "throwing_deleter",
                           "test",
                           init_keep_host,
                           probe_cpu_only,
                           shutdown_nothing,
                           1,
                           kOps,
                           nullptr};

}  // namespace

DK_TEST_PLUGIN_EXPORT const dk_plugin* deltakern_plugin_entry(uint16_t, uint16_t) { return &kPlugin; }
