// A non-owning reference to a callable: what the thread pool runs, without the allocation a
// std::function may make on every call.
#pragma once

#include <memory>
#include <type_traits>
#include <utility>

namespace deltakern::portable::cpu {

template <class Signature>
class FunctionRef;

template <class R, class... Args>
class FunctionRef<R(Args...)> {
 public:
  template <class F>
  requires(!std::is_same_v<std::remove_cvref_t<F>, FunctionRef> && std::is_invocable_r_v<R, F&, Args...>)
      FunctionRef(F& f)
  noexcept  // NOLINT(google-explicit-constructor): used like a function parameter
      : object_(std::addressof(f)),
        call_([](void* o, Args... args) -> R { return (*static_cast<F*>(o))(std::forward<Args>(args)...); }) {
  }

  R operator()(Args... args) const { return call_(object_, std::forward<Args>(args)...); }

 private:
  void* object_;
  R (*call_)(void*, Args...);
};

}  // namespace deltakern::portable::cpu
