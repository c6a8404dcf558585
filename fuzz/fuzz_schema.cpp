// Fuzz target: the op schema parser. A plugin declares its schema string; whatever it says,
// the core must parse it or reject it with SchemaError, then compare it with the canonical
// schemas and read its mutation contract without crashing.
#include "loader/schema.hpp"
#include "ops.hpp"

#include <cstddef>
#include <cstdint>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace deltakern::detail;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    const Schema declared = parse_schema(text);
    for (const auto& op : kOps) {
      const Schema canonical = parse_schema(op.canonical_schema);
      (void)schema_difference(declared, canonical);
    }
    (void)mutation_contract(declared);
  } catch (const SchemaError&) {
    // A clean rejection; any other exception escapes and libFuzzer reports it.
  }
  return 0;
}
