// A well-formed plugin around one misbehaving piece: each hostile plugin supplies its init
// and shutdown (and whatever else it does wrong).
#pragma once

#include "../kernels.hpp"

#include <deltakern/plugin_sdk.hpp>

#define DK_HOSTILE_PLUGIN(plugin_name, init_function, shutdown_function)                                    \
  namespace {                                                                                               \
  int32_t varlen_fresh(void* p, const dk_call* c, DLManagedTensor** r, char* e, size_t n) {                 \
    return deltakern::testplugins::run_varlen(p, c, r, e, n, {.in_place = false});                          \
  }                                                                                                         \
  const dk_caps kCaps = {                                                                                   \
      sizeof(dk_caps),          1, deltakern::testplugins::kCpu, 1, deltakern::testplugins::kF32Only, 2, 4, \
      DK_LAYOUT_TIME_CONTIGUOUS};                                                                           \
  const dk_op kOps[] = {{sizeof(dk_op), DK_OP_CAUSAL_CONV1D_VARLEN,                                         \
                         deltakern::testplugins::kVarlenFreshSchema, &kCaps, nullptr, varlen_fresh}};       \
  const dk_plugin kPlugin = {sizeof(dk_plugin),                                                             \
                             DK_ABI_MAJOR,                                                                  \
                             DK_ABI_MINOR,                                                                  \
                             plugin_name,                                                                   \
                             "test",                                                                        \
                             init_function,                                                                 \
                             deltakern::testplugins::probe_cpu_only,                                        \
                             shutdown_function,                                                             \
                             1,                                                                             \
                             kOps,                                                                          \
                             deltakern::testplugins::check_errors_cpu};                                     \
  }                                                                                                         \
  DK_TEST_PLUGIN_EXPORT const dk_plugin* deltakern_plugin_entry(uint16_t, uint16_t) { return &kPlugin; }

#define DK_HOSTILE_INIT_PLUGIN(plugin_name, init_function) \
  DK_HOSTILE_PLUGIN(plugin_name, init_function, deltakern::testplugins::shutdown_nothing)
