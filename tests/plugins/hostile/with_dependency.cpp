// Linked against a small library of its own (answer.cpp, found beside it through
// RUNPATH=$ORIGIN); init fails unless that library answers 1. A verdict on it must not
// outlive a change to the dependency.
#include "hostile_init.hpp"

#include <string>

extern "C" __attribute__((visibility("default"))) int deltakern_test_answer();

namespace {

int32_t init_if_answered(const dk_host* host, void** plugin, char* error, size_t error_size) {
  if (const int answer = deltakern_test_answer(); answer != 1) {
    deltakern::plugin::write_message(
        error, error_size, "with_dependency: its dependency answered " + std::to_string(answer) + ", not 1");
    return DK_ERR_INTERNAL;
  }
  return deltakern::testplugins::init_keep_host(host, plugin, error, error_size);
}

}  // namespace

DK_HOSTILE_INIT_PLUGIN("with_dependency", init_if_answered)
