// Op schemas in PyTorch's syntax, with alias annotations:
//   name(Tensor(a!) x, Tensor? bias, str activation="none", int? max_seq_len=None) -> Tensor(a)
// A plugin's schema is its mutation contract; the core checks that it is the canonical
// schema with only the annotations differing, and reads the contract off it.
#pragma once

#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace deltakern::detail {

class SchemaError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

enum class SchemaType { tensor, int_, float_, bool_, str };

struct SchemaDefault {
  enum class Kind { none, int_, float_, bool_, str } kind;
  std::string text;  // the value as written; a string without its quotes
  bool operator==(const SchemaDefault&) const = default;
};

struct SchemaAlias {
  std::string set;  // "a" in Tensor(a!)
  bool written = false;
};

struct SchemaArgument {
  SchemaType type;
  bool optional = false;
  std::optional<SchemaAlias> alias;
  std::string name;
  std::optional<SchemaDefault> default_value;
};

struct SchemaReturn {
  SchemaType type;
  bool optional = false;
  std::optional<SchemaAlias> alias;
};

struct Schema {
  std::string name;
  std::vector<SchemaArgument> arguments;
  std::vector<SchemaReturn> returns;
};

// Throws SchemaError naming the column and what was expected.
Schema parse_schema(std::string_view text);

// The first difference between a declared schema and the canonical one, annotations
// ignored; nullopt when they are the same.
std::optional<std::string> schema_difference(const Schema& declared, const Schema& canonical);

struct MutationContract {
  std::vector<std::string> written;             // arguments annotated (x!)
  std::optional<std::string> returns_alias_of;  // the written argument the return is a view of
};

// Throws SchemaError when the annotations contradict each other.
MutationContract mutation_contract(const Schema& schema);

}  // namespace deltakern::detail
