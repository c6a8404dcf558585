// The project's one dtype vocabulary: the element types deltakern's tensors may have, their
// DLPack codes, sizes and names. Used by the core, every plugin, the conformance suite, the
// apps and the benchmarks. Header-only and constexpr, with no standard-library strings, so that
// CUDA device code and the kernels' parameter structs can use it too.
#pragma once

#include <dlpack/dlpack.h>

#include <cstddef>
#include <cstdint>

namespace deltakern {

// The values are stable (kernels' parameter structs carry them as int32).
enum class ScalarType : int32_t { f32 = 0, f16 = 1, bf16 = 2, i32 = 3, u8 = 4 };

inline constexpr ScalarType kScalarTypes[] = {ScalarType::f32, ScalarType::f16, ScalarType::bf16,
                                              ScalarType::i32, ScalarType::u8};

constexpr DLDataType to_dl(ScalarType t) {
  switch (t) {
    case ScalarType::f32:
      return {kDLFloat, 32, 1};
    case ScalarType::f16:
      return {kDLFloat, 16, 1};
    case ScalarType::bf16:
      return {kDLBfloat, 16, 1};
    case ScalarType::i32:
      return {kDLInt, 32, 1};
    case ScalarType::u8:
      return {kDLUInt, 8, 1};
  }
  return {kDLOpaqueHandle, 0, 0};
}

// Whether `t` is one of the vocabulary's types; `*out` is set when it is.
constexpr bool scalar_type_of(const DLDataType& t, ScalarType* out) {
  for (ScalarType s : kScalarTypes) {
    const DLDataType d = to_dl(s);
    if (d.code == t.code && d.bits == t.bits && d.lanes == t.lanes) {
      *out = s;
      return true;
    }
  }
  return false;
}

constexpr size_t size_of(ScalarType t) {
  switch (t) {
    case ScalarType::f32:
    case ScalarType::i32:
      return 4;
    case ScalarType::f16:
    case ScalarType::bf16:
      return 2;
    case ScalarType::u8:
      return 1;
  }
  return 0;
}

constexpr bool is_floating(ScalarType t) {
  return t == ScalarType::f32 || t == ScalarType::f16 || t == ScalarType::bf16;
}

// The short spelling, for case and benchmark names: "f32", "bf16". Messages use the long one,
// plugin::dtype_name ("float32", "bfloat16"), which is the same DLPack spelling torch prints.
constexpr const char* short_name(ScalarType t) {
  switch (t) {
    case ScalarType::f32:
      return "f32";
    case ScalarType::f16:
      return "f16";
    case ScalarType::bf16:
      return "bf16";
    case ScalarType::i32:
      return "i32";
    case ScalarType::u8:
      return "u8";
  }
  return "?";
}

}  // namespace deltakern
