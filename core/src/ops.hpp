// The ops this core knows: their ids (the hot path indexes arrays with them instead of
// comparing names) and canonical schemas from op_schemas.h.
#pragma once

#include <deltakern/op_schemas.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace deltakern::detail {

enum class OpId : uint8_t { causal_conv1d_varlen, causal_conv1d_update };
inline constexpr size_t kOpCount = 2;

struct OpDefinition {
  OpId id;
  std::string_view name;
  std::string_view canonical_schema;
};

inline constexpr std::array<OpDefinition, kOpCount> kOps{{
    {OpId::causal_conv1d_varlen, DK_OP_CAUSAL_CONV1D_VARLEN, DK_SCHEMA_CAUSAL_CONV1D_VARLEN},
    {OpId::causal_conv1d_update, DK_OP_CAUSAL_CONV1D_UPDATE, DK_SCHEMA_CAUSAL_CONV1D_UPDATE},
}};

constexpr size_t index_of(OpId op) { return static_cast<size_t>(op); }
constexpr std::string_view op_name(OpId op) { return kOps[index_of(op)].name; }

constexpr std::optional<OpId> op_from_name(std::string_view name) {
  for (const auto& op : kOps)
    if (op.name == name) return op.id;
  return std::nullopt;
}

// "causal_conv1d_varlen, causal_conv1d_update": for messages that list what is known.
inline constexpr std::string_view kKnownOpNames = DK_OP_CAUSAL_CONV1D_VARLEN ", " DK_OP_CAUSAL_CONV1D_UPDATE;

}  // namespace deltakern::detail
