// The three ways one call is exercised (host and derived max_seq_len, graph replay,
// gate), written once for both ops through a small traits struct per op.
#include "case_util.hpp"
#include "cuda_checks.hpp"
#include "device.hpp"
#include "poison.hpp"
#include "runners.hpp"

#include <deltakern/op_schemas.h>
#include <deltakern/plugin_sdk.hpp>

#include <chrono>
#include <exception>
#include <thread>

namespace deltakern::conformance {

namespace {

// An out-variant's call returns nothing: the case holds a view of its out as the call's result
// (the SDK's view, owning only its shape and strides), which every check then reads as it reads
// a result.
Tensor view_of_out(const DLTensor& out) { return Tensor(plugin::make_view_result(out)); }

struct VarlenOp {
  using Config = VarlenConfig;
  using Inputs = VarlenInputs;
  using Before = VarlenBefore;
  static const char* name(const Config& c) {
    return c.out_variant ? DK_OP_CAUSAL_CONV1D_VARLEN_OUT : DK_OP_CAUSAL_CONV1D_VARLEN;
  }
  static constexpr const char* states_name = "conv_states";
  static constexpr bool has_max_seq_len = true;
  static Inputs make(DLDevice d, const Config& c, Random& r) { return make_varlen_inputs(d, c, r); }
  static void refill(Inputs& in, const Config& c, Random& r) { refill_varlen_inputs(in, c, r); }
  static Before before(Inputs& in, const Config& c) { return capture(in, c); }
  static Tensor call(Runtime& rt, const Inputs& in, const Config& c, std::optional<int64_t> max,
                     void* stream) {
    if (!in.out) return rt.causal_conv1d_varlen(varlen_args(in, c, max, stream));
    rt.causal_conv1d_varlen_out(varlen_args(in, c, max, stream), *in.out->dl());
    return view_of_out(*in.out->dl());
  }
  static std::optional<int64_t> max_len(const Config& c) { return c.max_len(); }
  static std::string check(const OpInfo& info, Inputs& in, const Config& c, const Before& b,
                           const Tensor& result, uint64_t call, std::string_view seed) {
    return check_varlen(info, in, c, b, result, call, seed);
  }
  static TensorBuf& states(Inputs& in) { return in.states; }
};

struct UpdateOp {
  using Config = UpdateConfig;
  using Inputs = UpdateInputs;
  using Before = UpdateBefore;
  static const char* name(const Config& c) {
    return c.out_variant ? DK_OP_CAUSAL_CONV1D_UPDATE_OUT : DK_OP_CAUSAL_CONV1D_UPDATE;
  }
  static constexpr const char* states_name = "conv_state";
  static constexpr bool has_max_seq_len = false;
  static Inputs make(DLDevice d, const Config& c, Random& r) { return make_update_inputs(d, c, r); }
  static void refill(Inputs& in, const Config& c, Random& r) { refill_update_inputs(in, c, r); }
  static Before before(Inputs& in, const Config& c) { return capture(in, c); }
  static Tensor call(Runtime& rt, const Inputs& in, const Config& c, std::optional<int64_t>, void* stream) {
    if (!in.out) return rt.causal_conv1d_update(update_args(in, c, stream));
    rt.causal_conv1d_update_out(update_args(in, c, stream), *in.out->dl());
    return view_of_out(*in.out->dl());
  }
  static std::optional<int64_t> max_len(const Config&) { return std::nullopt; }
  static std::string check(const OpInfo& info, Inputs& in, const Config& c, const Before& b,
                           const Tensor& result, uint64_t call, std::string_view seed) {
    return check_update(info, in, c, b, result, call, seed);
  }
  static TensorBuf& states(Inputs& in) { return in.states; }
};

std::string with_context(std::string_view context, const std::string& message) {
  return message.empty() ? message : std::string(context) + ": " + message;
}

Describe plain_index(const std::vector<int64_t>& shape) {
  return [shape](int64_t i) { return index_string(shape, i); };
}

// Late writes: what the arguments and a result were just after the call, looked at again
// after `delay` (a backend thread still writing once run() returned).
struct AfterCall {
  Snapshot args;
  HostImage result;
};
// An in-place result is x itself, which the arguments' snapshot covers. An argument the schema
// does not annotate must still hold its bytes from before the call: a late write that lands before
// the snapshot is taken (while the call's own checks ran) is a late write all the same.
AfterCall after_call(const OpInfo& info, std::span<const NamedArg> args, const Snapshot& before,
                     const Tensor& result, bool fresh) {
  AfterCall after{snapshot(args), fresh && result ? image_of(result.dl()) : HostImage()};
  for (size_t i = 0; i < args.size(); ++i)
    if (args[i].buf != nullptr && !is_mutated(info, args[i].name)) after.args[i] = before[i];
  return after;
}
std::string check_late_writes(std::span<const NamedArg> args, const Tensor& result, const AfterCall& then,
                              std::chrono::milliseconds delay, std::string_view when) {
  if (delay.count() > 0) std::this_thread::sleep_for(delay);
  if (auto m = check_unchanged_since(args, then.args, when); !m.empty()) return m;
  if (result && then.result.numel() > 0)
    return compare_images("the result " + std::string(when) + " (a write after the call returned)",
                          image_of(result.dl()), then.result, plain_index(then.result.shape()));
  return {};
}

// The device error words: cleared before the call; after it, the target must have flagged
// the out-of-range index (and a second read must find the word cleared).
void clear_device_errors(Runtime& rt, const Target& target, const Stream& stream) {
  try {
    rt.check_errors(target.device, stream.get());
  } catch (const Error&) {
  }
}
std::string check_flagged(Runtime& rt, const Target& target, const Stream& stream) {
  std::string what;
  try {
    rt.check_errors(target.device, stream.get());
  } catch (const Error& e) {
    what = e.what();
  }
  if (what.find(target.backend + ": cache index out of range") == std::string::npos)
    return "an out-of-range cache index was skipped but not flagged: check_errors reported " +
           (what.empty() ? std::string("nothing") : "'" + what + "'") + ", expected '" + target.backend +
           ": cache index out of range'" +
           " (a backend flags it in its device error word and reports it through dk_plugin.check_errors)";
  try {
    rt.check_errors(target.device, stream.get());
  } catch (const Error& e) {
    return std::string("check_errors did not clear the device error word: a second read reported '") +
           e.what() + "'";
  }
  return {};
}

// Two calls from the same inputs, x and states included (the review thread's lesson: an
// in-place backend changed x, so not restoring it compared different inputs). The first
// passes max_seq_len and gets fresh memory poisoned with NaN bytes; the second omits it
// (decode has none: the same call again) and gets finite poison. Both must match the
// reference and each other bit for bit, so an element left unwritten shows whatever the
// backend does with the poison it finds. A fresh first result stays held during the second
// call: the two must not share memory, and the first must not change. After each call, and
// after the next, the arguments and results are looked at again for late writes.
template <class Op>
std::string host_and_derived(Runtime& rt, const Target& target, const OpInfo& info, const OpInfo::Device& dev,
                             typename Op::Inputs& in, const typename Op::Config& cfg, const Stream& stream,
                             std::string_view seed) {
  const auto before = Op::before(in, cfg);
  const auto max = Op::max_len(cfg);
  const auto args = in.args();
  const auto delay = std::chrono::milliseconds(cfg.late_write_ms);
  // An out-variant's result is out, an argument: restored, poisoned and watched as the others are.
  const bool fresh = info.returns_tensor && !returns_x(info);
  HeldResults held;
  if (cfg.flags_errors()) clear_device_errors(rt, target, stream);
  uint64_t made = 0, call_a = 0;
  Tensor* a = nullptr;
  {
    const PoisonScope poison(Poison::nan);
    call_a = poison.call();
    const uint64_t s0 = host_syncs();
    a = &held.add(Op::call(rt, in, cfg, max, stream.get()));
    made = host_syncs() - s0;
  }
  stream.synchronize();
  const char* first = Op::has_max_seq_len ? "max_seq_len given" : "the call";
  if (auto m = check_syncs(made, 0, Op::has_max_seq_len ? "with max_seq_len given" : "in a decode call");
      !m.empty())
    return with_context(first, m);
  if (auto m = Op::check(info, in, cfg, before, *a, call_a, seed); !m.empty()) return with_context(first, m);
  if (cfg.flags_errors())
    if (auto m = check_flagged(rt, target, stream); !m.empty()) return with_context(first, m);
  AfterCall after_a = after_call(info, args, before.bytes, *a, fresh);
  if (auto m = check_late_writes(args, *a, after_a, delay,
                                 std::to_string(delay.count()) + " ms after the call returned");
      !m.empty())
    return with_context(first, m);
  const HostImage a_out = fresh ? std::move(after_a.result) : image_of(a->dl());
  const auto a_states = Op::states(in).bits();
  std::vector<int64_t> out_shape(a->dl().shape, a->dl().shape + a->dl().ndim);
  // Once more, just before the inputs are restored (which would hide a write landing now).
  if (auto m = check_unchanged_since(args, after_a.args, "when the inputs were restored for the second call");
      !m.empty())
    return with_context(first, m);
  if (!fresh)
    if (auto m = held.release_all(); !m.empty()) return with_context(first, m);  // a view of x, restored next
  restore(args, before.bytes);

  const bool omit = Op::has_max_seq_len;
  const uint64_t expected = omit && dev.derives_max_seq_len ? 1 : 0;
  uint64_t call_b = 0;
  Tensor* b = nullptr;
  {
    const PoisonScope poison(Poison::finite);
    call_b = poison.call();
    const uint64_t s0 = host_syncs();
    b = &held.add(Op::call(rt, in, cfg, omit ? std::nullopt : max, stream.get()));
    made = host_syncs() - s0;
  }
  stream.synchronize();
  const std::string second = omit ? "max_seq_len omitted" : "the second call";
  const std::string situation = !omit ? "in the second decode call"
                                : dev.derives_max_seq_len
                                    ? "with max_seq_len omitted (declares derives_max_seq_len: one)"
                                    : "with max_seq_len omitted (declares no derives_max_seq_len)";
  if (auto m = check_syncs(made, expected, situation); !m.empty()) return with_context(second, m);
  if (fresh) {
    if (auto m = check_apart(*a, *b); !m.empty()) return with_context(second, m);
    if (auto m = compare_images("the first call's result, still held, after the second call",
                                image_of(a->dl()), a_out, plain_index(out_shape));
        !m.empty())
      return m;
  }
  // Bit identity before the reference: an element still holding the second poison names
  // the fault (never written) better than a value far from the expected one would.
  const std::string versus = std::string(omit ? " (max_seq_len omitted" : " (") + (omit ? "; " : "") +
                             "fresh memory poisoned with " + poison_name(Poison::finite) +
                             ") against the first" + (omit ? " (max_seq_len given; " : " (") +
                             poison_name(Poison::nan) + "),";
  if (auto m = compare_images("output of the second call" + versus, image_of(b->dl()), a_out,
                              plain_index(out_shape));
      !m.empty())
    return m;
  if (auto m = Op::check(info, in, cfg, before, *b, call_b, seed); !m.empty()) return with_context(second, m);
  if (cfg.flags_errors())
    if (auto m = check_flagged(rt, target, stream); !m.empty()) return with_context(second, m);
  if (auto m = compare_bits(std::string(Op::states_name) + " after the second call" + versus,
                            from_dl(Op::states(in).dl()->dtype), Op::states(in).bits(), a_states, {},
                            plain_index(Op::states(in).shape()));
      !m.empty())
    return m;
  if (auto m = check_late_writes(args, *b, after_call(info, args, before.bytes, *b, fresh), delay,
                                 std::to_string(delay.count()) + " ms after the second call returned");
      !m.empty())
    return with_context(second, m);
  return held.release_all();
}

// One untimed call first, so that lazily loaded kernels are loaded outside the capture
// and the gate; the inputs are restored afterwards.
template <class Op>
std::string warm_up(Runtime& rt, typename Op::Inputs& in, const typename Op::Config& cfg,
                    const Stream& stream) {
  const Snapshot before = snapshot(in.args());
  std::string m;
  {
    Tensor w = Op::call(rt, in, cfg, Op::max_len(cfg), stream.get());
    stream.synchronize();
    m = release_result(w);
  }
  restore(in.args(), before);
  return m;
}

template <class Op>
std::string graph_replay(Runtime& rt, const OpInfo& info, typename Op::Inputs& in,
                         const typename Op::Config& cfg, const Stream& stream, Random& rng,
                         std::string_view seed) {
  if (auto m = warm_up<Op>(rt, in, cfg, stream); !m.empty()) return m;
  HeldResults held;
  Capture capture(stream.get());
  const uint64_t s0 = host_syncs();
  Tensor* result = nullptr;
  uint64_t call = 0;
  try {
    const PoisonScope poison(Poison::nan);
    call = poison.call();
    result = &held.add(Op::call(rt, in, cfg, Op::max_len(cfg), stream.get()));
  } catch (const std::exception& e) {
    const auto m = capture.end();
    return std::string("the call failed while its stream was captured into a CUDA graph: ") + e.what() +
           (m.empty() ? "" : "; " + m);
  }
  const uint64_t made = host_syncs() - s0;
  if (auto m = capture.end(); !m.empty()) return m;
  if (auto m = check_syncs(made, 0, "during graph capture"); !m.empty()) return m;
  // New values into the very buffers the graph recorded.
  Op::refill(in, cfg, rng);
  const auto before = Op::before(in, cfg);
  if (auto m = capture.replay(); !m.empty()) return m;
  if (auto m =
          with_context("graph replay on new inputs", Op::check(info, in, cfg, before, *result, call, seed));
      !m.empty())
    return m;
  return held.release_all();
}

template <class Op>
std::string gated(Runtime& rt, const Target& target, const OpInfo& info, typename Op::Inputs& in,
                  const typename Op::Config& cfg, const Stream& stream, std::string_view seed) {
  if (auto m = warm_up<Op>(rt, in, cfg, stream); !m.empty()) return m;
  const auto before = Op::before(in, cfg);
  HeldResults held;
  Gate gate(target.device, stream.get());
  gate.close();
  const uint64_t s0 = host_syncs();
  Tensor* result = nullptr;
  uint64_t call = 0;
  try {
    const PoisonScope poison(Poison::nan);
    call = poison.call();
    result = &held.add(Op::call(rt, in, cfg, Op::max_len(cfg), stream.get()));
  } catch (...) {
    gate.open();
    throw;
  }
  const uint64_t made = host_syncs() - s0;
  const bool holding = gate.holding();
  gate.open();
  stream.synchronize();
  if (!holding)
    return gate.timed_out()
               ? "the call returned only after the gate kernel gave up waiting: it waited for the GPU"
               : "the call returned after the blocked stream had run: it waited for the GPU";
  if (auto m = check_syncs(made, 0, "while the stream was blocked"); !m.empty()) return m;
  if (auto m = with_context("gated call", Op::check(info, in, cfg, before, *result, call, seed)); !m.empty())
    return m;
  return held.release_all();
}

template <class Op>
std::string run_call(Runtime& rt, const Target& target, const typename Op::Config& cfg, Mode mode,
                     std::string_view seed) {
  const OpInfo& info = op_info(rt, target, Op::name(cfg));
  const OpInfo::Device* dev = device_caps(info, target.device.device_type);
  if (dev == nullptr) return std::string("the backend declares no device of this type for ") + Op::name(cfg);
  Random rng(seed);
  activate(target.device);
  const Stream stream(target.device);
  auto in = Op::make(target.device, cfg, rng);
  switch (mode) {
    case Mode::host_and_derived:
      return host_and_derived<Op>(rt, target, info, *dev, in, cfg, stream, seed);
    case Mode::graph_replay:
      return graph_replay<Op>(rt, info, in, cfg, stream, rng, seed);
    case Mode::gate:
      return gated<Op>(rt, target, info, in, cfg, stream, seed);
  }
  return "unknown mode";
}

}  // namespace

std::string run_varlen(Runtime& runtime, const Target& target, const VarlenConfig& cfg, Mode mode,
                       std::string_view seed) {
  return run_call<VarlenOp>(runtime, target, cfg, mode, seed);
}

std::string run_update(Runtime& runtime, const Target& target, const UpdateConfig& cfg, Mode mode,
                       std::string_view seed) {
  return run_call<UpdateOp>(runtime, target, cfg, mode, seed);
}

}  // namespace deltakern::conformance
