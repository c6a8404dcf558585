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

enum class OpId : uint8_t {
  causal_conv1d_varlen,
  causal_conv1d_update,
  causal_conv1d_varlen_out,  // 1.1: the result goes into the caller's `out`
  causal_conv1d_update_out,
};
inline constexpr size_t kOpCount = 4;

// The most dimensions an op names (op_schemas.h, DK_DIMS_*).
inline constexpr size_t kMaxDims = 6;
using DimNames = std::array<std::string_view, kMaxDims>;
// A call's dimensions, in the order of its op's DimNames.
using CallDims = std::array<int64_t, kMaxDims>;

struct OpDefinition {
  OpId id;
  std::string_view name;
  std::string_view canonical_schema;
  DimNames dims;
  // An out-variant's op (the same call with `out` after the tensors, -> ()); its own id otherwise.
  OpId base;
  bool out_variant;
};

inline constexpr std::array<OpDefinition, kOpCount> kOps{{
    {OpId::causal_conv1d_varlen, DK_OP_CAUSAL_CONV1D_VARLEN, DK_SCHEMA_CAUSAL_CONV1D_VARLEN,
     DimNames{DK_DIMS_CAUSAL_CONV1D_VARLEN}, OpId::causal_conv1d_varlen, false},
    {OpId::causal_conv1d_update, DK_OP_CAUSAL_CONV1D_UPDATE, DK_SCHEMA_CAUSAL_CONV1D_UPDATE,
     DimNames{DK_DIMS_CAUSAL_CONV1D_UPDATE}, OpId::causal_conv1d_update, false},
    {OpId::causal_conv1d_varlen_out, DK_OP_CAUSAL_CONV1D_VARLEN_OUT, DK_SCHEMA_CAUSAL_CONV1D_VARLEN_OUT,
     DimNames{DK_DIMS_CAUSAL_CONV1D_VARLEN}, OpId::causal_conv1d_varlen, true},
    {OpId::causal_conv1d_update_out, DK_OP_CAUSAL_CONV1D_UPDATE_OUT, DK_SCHEMA_CAUSAL_CONV1D_UPDATE_OUT,
     DimNames{DK_DIMS_CAUSAL_CONV1D_UPDATE}, OpId::causal_conv1d_update, true},
}};
// "Not declared" in per-op tables of indices.
inline constexpr std::array<int, kOpCount> kNoOpInfo = [] {
  std::array<int, kOpCount> none{};
  none.fill(-1);
  return none;
}();

// Positions in CallDims, by the names of op_schemas.h.
enum VarlenDim : uint8_t {
  kVarlenDim,
  kVarlenTokens,
  kVarlenBatch,
  kVarlenWidth,
  kVarlenStateLen,
  kVarlenLines
};
enum UpdateDim : uint8_t {
  kUpdateBatch,
  kUpdateDim,
  kUpdateTokens,
  kUpdateWidth,
  kUpdateStateLen,
  kUpdateLines
};

constexpr size_t index_of(OpId op) { return static_cast<size_t>(op); }
constexpr std::string_view op_name(OpId op) { return kOps[index_of(op)].name; }
constexpr OpId base_of(OpId op) { return kOps[index_of(op)].base; }
constexpr bool is_out_variant(OpId op) { return kOps[index_of(op)].out_variant; }

constexpr std::optional<OpId> op_from_name(std::string_view name) {
  for (const auto& op : kOps)
    if (op.name == name) return op.id;
  return std::nullopt;
}

constexpr std::optional<uint8_t> dim_index(OpId op, std::string_view dim) {
  const DimNames& names = kOps[static_cast<size_t>(op)].dims;
  for (size_t i = 0; i < kMaxDims; ++i)
    if (!names[i].empty() && names[i] == dim) return static_cast<uint8_t>(i);
  return std::nullopt;
}

// "causal_conv1d_varlen, causal_conv1d_update, ...": for messages that list what is known.
inline constexpr std::string_view kKnownOpNames = DK_OP_CAUSAL_CONV1D_VARLEN
    ", " DK_OP_CAUSAL_CONV1D_UPDATE ", " DK_OP_CAUSAL_CONV1D_VARLEN_OUT ", " DK_OP_CAUSAL_CONV1D_UPDATE_OUT;

}  // namespace deltakern::detail
