#include "loader/schema.hpp"

#include <fmt/core.h>

#include <cctype>

namespace deltakern::detail {
namespace {

std::string_view type_name(SchemaType type) {
  switch (type) {
    case SchemaType::tensor:
      return "Tensor";
    case SchemaType::int_:
      return "int";
    case SchemaType::float_:
      return "float";
    case SchemaType::bool_:
      return "bool";
    case SchemaType::str:
      return "str";
  }
  return "?";
}

std::optional<SchemaType> type_from_name(std::string_view name) {
  if (name == "Tensor") return SchemaType::tensor;
  if (name == "int") return SchemaType::int_;
  if (name == "float") return SchemaType::float_;
  if (name == "bool") return SchemaType::bool_;
  if (name == "str") return SchemaType::str;
  return std::nullopt;
}

// A recursive-descent reader over the text; every error names the column (1-based).
class Parser {
 public:
  explicit Parser(std::string_view text) : text_(text) {}

  Schema schema() {
    Schema s;
    s.name = qualified_identifier("the op name");
    expect('(');
    skip_space();
    if (!at(')')) {
      do s.arguments.push_back(argument());
      while (accept(','));
    }
    expect(')');
    expect("->");
    if (accept('(')) {
      skip_space();
      if (!at(')')) {
        do s.returns.push_back(return_value());
        while (accept(','));
      }
      expect(')');
    } else {
      s.returns.push_back(return_value());
    }
    skip_space();
    if (pos_ != text_.size()) fail("the end of the schema");
    return s;
  }

 private:
  [[noreturn]] void fail(std::string_view expected) const {
    skip_space_const();
    const std::string got =
        pos_ >= text_.size() ? std::string("the end") : fmt::format("'{}'", text_.substr(pos_, 12));
    throw SchemaError(fmt::format("column {}: expected {}, got {}", pos_ + 1, expected, got));
  }

  void skip_space_const() const {
    while (pos_ < text_.size() && std::isspace(static_cast<unsigned char>(text_[pos_]))) ++pos_;
  }
  void skip_space() { skip_space_const(); }

  bool at(char c) const { return pos_ < text_.size() && text_[pos_] == c; }

  bool accept(char c) {
    skip_space();
    if (!at(c)) return false;
    ++pos_;
    return true;
  }

  void expect(char c) {
    if (!accept(c)) fail(fmt::format("'{}'", c));
  }

  void expect(std::string_view token) {
    skip_space();
    if (text_.substr(pos_, token.size()) != token) fail(fmt::format("'{}'", token));
    pos_ += token.size();
  }

  static bool identifier_char(char c, bool first) {
    return c == '_' || std::isalpha(static_cast<unsigned char>(c)) ||
           (!first && std::isdigit(static_cast<unsigned char>(c)));
  }

  std::optional<std::string> try_identifier() {
    skip_space();
    const size_t begin = pos_;
    if (pos_ < text_.size() && identifier_char(text_[pos_], true)) {
      ++pos_;
      while (pos_ < text_.size() && identifier_char(text_[pos_], false)) ++pos_;
      return std::string(text_.substr(begin, pos_ - begin));
    }
    return std::nullopt;
  }

  std::string identifier(std::string_view what) {
    auto id = try_identifier();
    if (!id) fail(what);
    return *id;
  }

  // Op names may carry an overload name: "add.Tensor".
  std::string qualified_identifier(std::string_view what) {
    std::string name = identifier(what);
    while (at('.')) {
      ++pos_;
      name += '.' + identifier(what);
    }
    return name;
  }

  SchemaType type() {
    skip_space();
    const size_t begin = pos_;
    const std::string name = identifier("a type (Tensor, int, float, bool, str)");
    if (auto t = type_from_name(name)) return *t;
    pos_ = begin;
    fail("a type (Tensor, int, float, bool, str)");
  }

  std::optional<SchemaAlias> alias() {
    if (!accept('(')) return std::nullopt;
    SchemaAlias a{identifier("an alias set name"), false};
    a.written = accept('!');
    expect(')');
    return a;
  }

  SchemaDefault default_value() {
    skip_space();
    if (at('"') || at('\'')) {
      const char quote = text_[pos_++];
      const size_t begin = pos_;
      while (pos_ < text_.size() && text_[pos_] != quote) ++pos_;
      if (pos_ == text_.size()) fail(fmt::format("a closing {}", quote));
      std::string value(text_.substr(begin, pos_ - begin));
      ++pos_;
      return {SchemaDefault::Kind::str, std::move(value)};
    }
    if (auto id = try_identifier()) {
      if (*id == "None") return {SchemaDefault::Kind::none, *id};
      if (*id == "True" || *id == "False") return {SchemaDefault::Kind::bool_, *id};
      pos_ -= id->size();
      fail("a default value");
    }
    const size_t begin = pos_;
    bool is_float = false;
    if (at('-') || at('+')) ++pos_;
    const auto digits = [&] {
      const size_t from = pos_;
      while (pos_ < text_.size() && std::isdigit(static_cast<unsigned char>(text_[pos_]))) ++pos_;
      return pos_ > from;
    };
    bool any = digits();
    if (at('.')) {
      ++pos_;
      is_float = true;
      any = digits() || any;
    }
    if (any && (at('e') || at('E'))) {
      ++pos_;
      is_float = true;
      if (at('-') || at('+')) ++pos_;
      any = digits();
    }
    if (!any) {
      pos_ = begin;
      fail("a default value");
    }
    return {is_float ? SchemaDefault::Kind::float_ : SchemaDefault::Kind::int_,
            std::string(text_.substr(begin, pos_ - begin))};
  }

  SchemaArgument argument() {
    SchemaArgument a;
    a.type = type();
    a.alias = alias();
    a.optional = accept('?');
    a.name = identifier("an argument name");
    if (accept('=')) a.default_value = default_value();
    return a;
  }

  SchemaReturn return_value() {
    SchemaReturn r;
    r.type = type();
    r.alias = alias();
    r.optional = accept('?');
    try_identifier();  // returns may be named; the name is not part of the contract
    return r;
  }

  std::string_view text_;
  mutable size_t pos_ = 0;
};

std::string without_annotations(const SchemaArgument& a) {
  std::string s = fmt::format("{}{} {}", type_name(a.type), a.optional ? "?" : "", a.name);
  if (a.default_value) {
    s += '=';
    s += a.default_value->kind == SchemaDefault::Kind::str ? fmt::format("\"{}\"", a.default_value->text)
                                                           : a.default_value->text;
  }
  return s;
}

std::string without_annotations(const SchemaReturn& r) {
  return fmt::format("{}{}", type_name(r.type), r.optional ? "?" : "");
}

bool same_without_annotations(const SchemaArgument& a, const SchemaArgument& b) {
  return a.type == b.type && a.optional == b.optional && a.name == b.name &&
         a.default_value == b.default_value;
}

}  // namespace

Schema parse_schema(std::string_view text) { return Parser(text).schema(); }

std::optional<std::string> schema_difference(const Schema& declared, const Schema& canonical) {
  if (declared.name != canonical.name)
    return fmt::format("op name: expected '{}', got '{}'", canonical.name, declared.name);
  const size_t n = std::max(declared.arguments.size(), canonical.arguments.size());
  for (size_t i = 0; i < n; ++i) {
    const bool have_declared = i < declared.arguments.size(), have_canonical = i < canonical.arguments.size();
    if (have_declared && have_canonical &&
        same_without_annotations(declared.arguments[i], canonical.arguments[i]))
      continue;
    return fmt::format("argument {}: expected {}, got {}", i + 1,
                       have_canonical ? fmt::format("'{}'", without_annotations(canonical.arguments[i]))
                                      : std::string("nothing"),
                       have_declared ? fmt::format("'{}'", without_annotations(declared.arguments[i]))
                                     : std::string("nothing"));
  }
  const size_t m = std::max(declared.returns.size(), canonical.returns.size());
  for (size_t i = 0; i < m; ++i) {
    const bool have_declared = i < declared.returns.size(), have_canonical = i < canonical.returns.size();
    if (have_declared && have_canonical && declared.returns[i].type == canonical.returns[i].type &&
        declared.returns[i].optional == canonical.returns[i].optional)
      continue;
    return fmt::format("return {}: expected {}, got {}", i + 1,
                       have_canonical ? fmt::format("'{}'", without_annotations(canonical.returns[i]))
                                      : std::string("nothing"),
                       have_declared ? fmt::format("'{}'", without_annotations(declared.returns[i]))
                                     : std::string("nothing"));
  }
  return std::nullopt;
}

MutationContract mutation_contract(const Schema& schema) {
  MutationContract contract;
  for (size_t i = 0; i < schema.arguments.size(); ++i) {
    const auto& a = schema.arguments[i];
    if (!a.alias) continue;
    if (a.type != SchemaType::tensor)
      throw SchemaError(fmt::format("alias annotation on non-tensor argument '{}'", a.name));
    for (size_t j = 0; j < i; ++j)
      if (schema.arguments[j].alias && schema.arguments[j].alias->set == a.alias->set)
        throw SchemaError(fmt::format("alias set '{}' is on both '{}' and '{}'", a.alias->set,
                                      schema.arguments[j].name, a.name));
    if (a.alias->written) contract.written.push_back(a.name);
  }
  for (const auto& r : schema.returns) {
    if (!r.alias) continue;
    if (r.type != SchemaType::tensor) throw SchemaError("alias annotation on a non-tensor return");
    const SchemaArgument* source = nullptr;
    for (const auto& a : schema.arguments)
      if (a.alias && a.alias->set == r.alias->set) source = &a;
    if (source == nullptr)
      throw SchemaError(fmt::format("the return aliases set '{}', which no argument has", r.alias->set));
    // A view of an input that the op does not write would be an alias the caller could not
    // tell from a fresh result; the contract only allows the in-place case.
    if (!source->alias->written)
      throw SchemaError(
          fmt::format("the return aliases '{}' (set '{}'), but '{}' is not annotated as written ({}!)",
                      source->name, r.alias->set, source->name, r.alias->set));
    if (!contract.returns_alias_of) contract.returns_alias_of = source->name;
  }
  return contract;
}

}  // namespace deltakern::detail
