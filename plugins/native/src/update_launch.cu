// causal_conv1d_update (decode): which kernel and which instantiation serve a call, and the
// instantiations themselves, each enumerated once for both the launch and the preload.
// Every kernel reads x and writes its outputs to out (x itself in place, causal_conv1d_update; a
// separate tensor with its own strides for causal_conv1d_update_out), skipped rows of out left as
// they were; each output is stored once, after every input it depends on was loaded.
#include "conv1d_common.cuh"
#include "instantiations.cuh"
#include "launch.h"
#include "update_direct.cuh"
#include "update_staged.cuh"
#include "update_vec.cuh"

namespace deltakern::native {
namespace {

using StateLens = Values<1, 2, 3, 4>;  // S of the register kernels

// (x dtype, circular).
struct Lean {
  using Configs = native::Configs<Dtypes, Bools>;
  static auto traits(auto dtype, auto circular) {
    return std::type_identity<UpdateLeanTraits<element_t<dtype()>, circular()>>{};
  }
  template <typename Kt>
  static auto kernel() {
    return update_lean_kernel<Kt>;
  }
};

// (x dtype, S).
struct Direct {
  using Configs = native::Configs<Dtypes, StateLens>;
  static auto traits(auto dtype, auto s) {
    return std::type_identity<UpdateDirectTraits<element_t<dtype()>, s()>>{};
  }
  template <typename Kt>
  static auto kernel() {
    return update_direct_kernel<Kt>;
  }
};

// (x dtype, S, chan-major state). At S = 1 both layouts are one vector at the row's start and
// compile to the same code: the chan-major instantiation serves both.
struct Vec {
  using Configs = native::Configs<Dtypes, StateLens, Bools>;
  static auto traits(auto dtype, auto s, auto chan_major) {
    return std::type_identity<UpdateVecTraits<element_t<dtype()>, s(), chan_major() || s() == 1>>{};
  }
  template <typename Kt>
  static auto kernel() {
    return update_vec_kernel<Kt>;
  }
};

struct Staged {
  using Configs = native::Configs<Dtypes>;
  static auto traits(auto dtype) { return std::type_identity<UpdateStagedTraits<element_t<dtype()>>>{}; }
  template <typename Kt>
  static auto kernel() {
    return update_staged_kernel<Kt>;
  }
};

// From batch 16 on the 16-byte kernel wins (H200, D=8192, bf16, graph replay: the lean kernel 1.19 /
// 1.57 / 10.2 / 39.8 / 158 us at batch 1 / 8 / 64 / 256 / 1024, the 16-byte kernel 4.4 / 12.6 / 39.4
// us from batch 64; the direct kernel's general shape took 2.45 / 2.77 us at batch 1 / 8).
constexpr int kLeanMaxBatch = 16;

bool lean_shape(const UpdateParams& p, ScalarType x_dtype) {
  const ConvCommon& c = p.conv;
  return p.batch < kLeanMaxBatch && p.tokens == 1 && p.state.len == 3 && c.width == kMaxWidth &&
         c.w_dtype == x_dtype && p.state.dtype == x_dtype && (c.bias == nullptr || c.bias_dtype == x_dtype) &&
         p.dim / UpdateLeanTraits<float, false>::kNThreads < INT32_MAX;
}

// Whether the call has the layout update_vec_kernel serves, and which state layout.
bool vec_layout(const UpdateParams& p, ScalarType x_dtype, bool& chan_major) {
  const int64_t es = static_cast<int64_t>(size_of(x_dtype));
  const int64_t kC = 16 / es;
  auto a16 = [](const void* q) { return (reinterpret_cast<uintptr_t>(q) & 15) == 0; };
  const StateView& st = p.state;
  if (p.tokens != 1 || p.x_chan_stride != 1 || p.dim % kC != 0 || !a16(p.x) ||
      (p.x_batch_stride * es) % 16 != 0)
    return false;
  // out takes the same 16-byte stores (its own strides and alignment: the *_out op's out may differ).
  if (p.out_chan_stride != 1 || !a16(p.out) || (p.out_batch_stride * es) % 16 != 0) return false;
  if (st.len < 1 || st.len > 4 || !a16(st.data) || (st.line_stride * es) % 16 != 0) return false;
  if (st.pos_stride == 1 && st.chan_stride == st.len) {
    chan_major = true;
    return true;
  }
  if (st.chan_stride == 1 && (st.pos_stride * es) % 16 == 0) {
    chan_major = false;
    return true;
  }
  return false;
}

}  // namespace

int preload_update() {
  int err = preload<Lean>();
  if (err == cudaSuccess) err = preload<Vec>();
  if (err == cudaSuccess) err = preload<Direct>();
  if (err == cudaSuccess) err = preload<Staged>();
  return err;
}

// Small batches are latency-bound: the fewest dependent round trips win (the lean kernel, else
// many thin threads, the direct kernel). From batch 16 on bytes dominate: the 16-byte kernel
// where the layout allows. Long states and many draft tokens take the staged kernel.
int launch_update(UpdateParams p, ScalarType x_dtype, const LaunchOptions& o, void* stream) {
  if (p.batch == 0 || p.dim == 0 || p.tokens == 0) return cudaSuccess;
  auto s = static_cast<cudaStream_t>(stream);
  if (lean_shape(p, x_dtype))
    return with_instantiation<Lean>(
        [&](auto kt, auto kernel) {
          return launch_update_lean<typename decltype(kt)::type>(kernel, p, o, s);
        },
        x_dtype, p.cache_seqlens.data != nullptr);
  bool chan_major = false;
  if (p.state.dtype == x_dtype && p.batch >= 16 && vec_layout(p, x_dtype, chan_major))
    return with_instantiation<Vec>(
        [&](auto kt, auto kernel) { return launch_update_vec<typename decltype(kt)::type>(kernel, p, o, s); },
        x_dtype, p.state.len, chan_major);
  if (p.state.len <= 4 && p.tokens <= UpdateDirectTraits<float, 4>::kMaxTokens)
    return with_instantiation<Direct>(
        [&](auto kt, auto kernel) {
          return launch_update_direct<typename decltype(kt)::type>(kernel, p, o, s);
        },
        x_dtype, p.state.len);
  return with_instantiation<Staged>(
      [&](auto kt, auto kernel) {
        return launch_update_staged<typename decltype(kt)::type>(kernel, p, o, s);
      },
      x_dtype);
}

}  // namespace deltakern::native
