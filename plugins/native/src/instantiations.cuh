// The configurations a kernel is instantiated for, written once per kernel as compile-time
// lists (the role of Dao's BOOL_SWITCH / DTYPE_SWITCH): the launch maps the call's run-time
// values onto one of them (with_instantiation), and the preload walks all of them (preload), so
// that the two cannot drift apart.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <deltakern/scalar_type.hpp>

#include <type_traits>
#include <utility>

namespace deltakern::native {

// The values one template parameter is instantiated for. A run-time value outside the list takes
// the last one (the default of a switch).
template <auto... kValues>
struct Values {};

// Every combination of the parameters' values.
template <typename... Params>
struct Configs {};

template <auto kValue>
using Constant = std::integral_constant<decltype(kValue), kValue>;

// The element type of a floating ScalarType, and back.
template <ScalarType kType>
struct ElementOf;
template <>
struct ElementOf<ScalarType::f32> {
  using type = float;
};
template <>
struct ElementOf<ScalarType::f16> {
  using type = __half;
};
template <>
struct ElementOf<ScalarType::bf16> {
  using type = __nv_bfloat16;
};
template <ScalarType kType>
using element_t = typename ElementOf<kType>::type;

template <typename T>
inline constexpr ScalarType kScalarTypeOf = std::is_same_v<T, float>
                                                ? ScalarType::f32
                                                : (std::is_same_v<T, __half> ? ScalarType::f16
                                                                             : ScalarType::bf16);

// What every varlen kernel is instantiated for: x's dtype, the conv's width (2..4) and its
// activation. Width and silu are template parameters because as run-time values every skipped
// tap cost a predicated FMA and a move per token; the scalar kernels for misaligned x, a rare
// and already slow case, take them at run time instead (one instantiation per dtype).
using Dtypes = Values<ScalarType::f32, ScalarType::f16, ScalarType::bf16>;
using Widths = Values<2, 3, 4>;
using Bools = Values<false, true>;

namespace detail {

template <auto kFirst, auto... kRest, typename V, typename F>
decltype(auto) pick(Values<kFirst, kRest...>, V v, F&& f) {
  if constexpr (sizeof...(kRest) == 0) {
    return f(Constant<kFirst>{});
  } else {
    if (v == kFirst) return f(Constant<kFirst>{});
    return pick(Values<kRest...>{}, v, std::forward<F>(f));
  }
}

}  // namespace detail

// f(Constant<v0>{}, Constant<v1>{}, ...) for the configuration holding the run-time values vs.
template <typename F>
decltype(auto) dispatch(Configs<>, F&& f) {
  return f();
}
template <typename Param, typename... Params, typename F, typename V, typename... Vs>
decltype(auto) dispatch(Configs<Param, Params...>, F&& f, V v, Vs... vs) {
  return detail::pick(Param{}, v, [&](auto c) -> decltype(auto) {
    return dispatch(
        Configs<Params...>{}, [&](auto... cs) -> decltype(auto) { return f(c, cs...); }, vs...);
  });
}

// f(Constant<v0>{}, ...) for every configuration, until one returns an error.
template <typename F>
int for_each_config(Configs<>, F&& f) {
  return static_cast<int>(f());
}
template <typename... Params, typename F>
int for_each_config(Configs<Values<>, Params...>, F&&) {
  return cudaSuccess;
}
template <auto kFirst, auto... kRest, typename... Params, typename F>
int for_each_config(Configs<Values<kFirst, kRest...>, Params...>, F&& f) {
  const int err =
      for_each_config(Configs<Params...>{}, [&](auto... cs) { return f(Constant<kFirst>{}, cs...); });
  if (err != cudaSuccess) return err;
  return for_each_config(Configs<Values<kRest...>, Params...>{}, f);
}

// A kernel template and the configurations it is instantiated for:
//   struct Family {
//     using Configs = native::Configs<...>;               // the lists, once
//     static auto traits(auto... constants);              // std::type_identity<the traits of one>
//     template <typename Kt> static auto kernel() { return the_kernel<Kt>; }
//   };
// f(std::type_identity<Kt>{}, kernel) for the configuration holding the run-time values vs.
template <typename Family, typename F, typename... Vs>
decltype(auto) with_instantiation(F&& f, Vs... vs) {
  return dispatch(
      typename Family::Configs{},
      [&](auto... cs) -> decltype(auto) {
        using Kt = typename decltype(Family::traits(cs...))::type;
        return f(std::type_identity<Kt>{}, Family::template kernel<Kt>());
      },
      vs...);
}

// Loads every instantiation of the family on the current device, so that a first call made
// inside a stream capture loads nothing.
template <typename Family>
int preload() {
  return for_each_config(typename Family::Configs{}, [](auto... cs) {
    using Kt = typename decltype(Family::traits(cs...))::type;
    cudaFuncAttributes a;
    return cudaFuncGetAttributes(&a, Family::template kernel<Kt>());
  });
}

}  // namespace deltakern::native
