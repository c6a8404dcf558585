// Segfaults while the loader runs its static initialisers, before any deltakern code is
// reached: only a child process can survive loading it.
#include "hostile_init.hpp"

namespace {

// Read through a volatile so the compiler cannot see the null and turn the store into a trap.
int* volatile nowhere = nullptr;

struct WritesThroughNull {
  WritesThroughNull() { *nowhere = 42; }
};
const WritesThroughNull crash_on_load;

}  // namespace

DK_HOSTILE_INIT_PLUGIN("crash_in_static_init", deltakern::testplugins::init_keep_host)
