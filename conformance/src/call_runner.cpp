// The three ways one call is exercised (host and derived max_seq_len, graph replay,
// gate), written once for both ops through a small traits struct per op.
#include "case_util.hpp"
#include "cuda_checks.hpp"
#include "device.hpp"
#include "poison.hpp"
#include "runners.hpp"

#include <deltakern/op_schemas.h>

#include <exception>

namespace deltakern::conformance {

namespace {

struct VarlenOp {
  using Config = VarlenConfig;
  using Inputs = VarlenInputs;
  static constexpr const char* name = DK_OP_CAUSAL_CONV1D_VARLEN;
  static constexpr bool has_max_seq_len = true;
  static Inputs make(DLDevice d, const Config& c, Random& r) { return make_varlen_inputs(d, c, r); }
  static void refill(Inputs& in, const Config& c, Random& r) { refill_varlen_inputs(in, c, r); }
  static auto reference(const Inputs& in, const Config& c) { return varlen_reference(in, c); }
  static VarlenBefore before(Inputs& in) { return capture(in); }
  static Tensor call(Runtime& rt, const Inputs& in, const Config& c, std::optional<int64_t> max,
                     void* stream) {
    return rt.causal_conv1d_varlen(varlen_args(in, c, max, stream));
  }
  static std::optional<int64_t> max_len(const Config& c) { return c.max_len(); }
  template <class Ref>
  static std::string check(const OpInfo& info, Inputs& in, const Config& c, const VarlenBefore& b,
                           const Ref& ref, const Tensor& result) {
    return check_varlen(info, in, c, b, ref, result);
  }
  static TensorBuf& states(Inputs& in) { return in.states; }
  static DType state_dtype(const Config& c) { return c.state; }
};

struct UpdateOp {
  using Config = UpdateConfig;
  using Inputs = UpdateInputs;
  static constexpr const char* name = DK_OP_CAUSAL_CONV1D_UPDATE;
  static constexpr bool has_max_seq_len = false;
  static Inputs make(DLDevice d, const Config& c, Random& r) { return make_update_inputs(d, c, r); }
  static void refill(Inputs& in, const Config& c, Random& r) { refill_update_inputs(in, c, r); }
  static auto reference(const Inputs& in, const Config& c) { return update_reference(in, c); }
  static UpdateBefore before(Inputs& in) { return capture(in); }
  static Tensor call(Runtime& rt, const Inputs& in, const Config& c, std::optional<int64_t>, void* stream) {
    return rt.causal_conv1d_update(update_args(in, c, stream));
  }
  static std::optional<int64_t> max_len(const Config&) { return std::nullopt; }
  template <class Ref>
  static std::string check(const OpInfo& info, Inputs& in, const Config& c, const UpdateBefore& b,
                           const Ref& ref, const Tensor& result) {
    return check_update(info, in, c, b, ref, result);
  }
  static TensorBuf& states(Inputs& in) { return in.states; }
  static DType state_dtype(const Config& c) { return c.state; }
};

std::string with_context(std::string_view context, const std::string& message) {
  return message.empty() ? message : std::string(context) + ": " + message;
}

const Describe plain_index(const std::vector<int64_t>& shape) {
  return [shape](int64_t i) { return index_string(shape, i); };
}

// Two calls from the same inputs, x and states included (the review thread's lesson: an
// in-place backend changed x, so not restoring it compared different inputs). The first
// passes max_seq_len and gets fresh memory poisoned with NaN bytes; the second omits it
// (decode has none: the same call again) and gets finite poison. Both must match the
// reference and each other bit for bit, so an element left unwritten shows whatever the
// backend does with the poison it finds.
template <class Op>
std::string host_and_derived(Runtime& rt, const OpInfo& info, const OpInfo::Device& dev,
                             typename Op::Inputs& in, const typename Op::Config& cfg, const Stream& stream) {
  const auto ref = Op::reference(in, cfg);
  const auto before = Op::before(in);
  const auto max = Op::max_len(cfg);
  Tensor a;
  uint64_t made = 0;
  {
    const PoisonScope poison(Poison::nan);
    const uint64_t s0 = host_syncs();
    a = Op::call(rt, in, cfg, max, stream.get());
    made = host_syncs() - s0;
  }
  stream.synchronize();
  const char* first = Op::has_max_seq_len ? "max_seq_len given" : "the call";
  if (auto m = check_syncs(made, 0, Op::has_max_seq_len ? "with max_seq_len given" : "in a decode call");
      !m.empty())
    return with_context(first, m);
  if (auto m = Op::check(info, in, cfg, before, ref, a); !m.empty()) return with_context(first, m);

  const auto a_out = read_bits(a.dl());
  const auto a_states = Op::states(in).bits();
  std::vector<int64_t> out_shape(a.dl().shape, a.dl().shape + a.dl().ndim);
  a = Tensor{};  // an in-place result is a view of x, which is restored next
  const auto args = in.args();
  restore(args, before.bytes);

  const bool omit = Op::has_max_seq_len;
  const uint64_t expected = omit && dev.derives_max_seq_len ? 1 : 0;
  Tensor b;
  {
    const PoisonScope poison(Poison::finite);
    const uint64_t s0 = host_syncs();
    b = Op::call(rt, in, cfg, omit ? std::nullopt : max, stream.get());
    made = host_syncs() - s0;
  }
  stream.synchronize();
  const std::string second = omit ? "max_seq_len omitted" : "the second call";
  const std::string situation = !omit ? "in the second decode call"
                                : dev.derives_max_seq_len
                                    ? "with max_seq_len omitted (declares derives_max_seq_len: one)"
                                    : "with max_seq_len omitted (declares no derives_max_seq_len)";
  if (auto m = check_syncs(made, expected, situation); !m.empty()) return with_context(second, m);
  // Bit identity before the reference: an element still holding the second poison names
  // the fault (never written) better than a value far from the expected one would.
  const DType xdt = from_dl(in.x.dl()->dtype);
  const std::string versus = std::string(omit ? " (max_seq_len omitted" : " (") + (omit ? "; " : "") +
                             "fresh memory poisoned with " + poison_name(Poison::finite) +
                             ") against the first" + (omit ? " (max_seq_len given; " : " (") +
                             poison_name(Poison::nan) + "),";
  if (auto m = compare_bits("output of the second call" + versus, xdt, read_bits(b.dl()), a_out, {},
                            plain_index(out_shape));
      !m.empty())
    return m;
  if (auto m = Op::check(info, in, cfg, before, ref, b); !m.empty()) return with_context(second, m);
  return compare_bits("conv_states after the second call" + versus, Op::state_dtype(cfg),
                      Op::states(in).bits(), a_states, {}, plain_index(Op::states(in).shape()));
}

// One untimed call first, so that lazily loaded kernels are loaded outside the capture
// and the gate; the inputs are restored afterwards.
template <class Op>
void warm_up(Runtime& rt, typename Op::Inputs& in, const typename Op::Config& cfg, const Stream& stream) {
  const auto before = Op::before(in);
  {
    Tensor w = Op::call(rt, in, cfg, Op::max_len(cfg), stream.get());
    stream.synchronize();
  }
  const auto args = in.args();
  restore(args, before.bytes);
}

template <class Op>
std::string graph_replay(Runtime& rt, const OpInfo& info, typename Op::Inputs& in,
                         const typename Op::Config& cfg, const Stream& stream, Random& rng) {
  warm_up<Op>(rt, in, cfg, stream);
  Capture capture(stream.get());
  const uint64_t s0 = host_syncs();
  Tensor result;
  try {
    result = Op::call(rt, in, cfg, Op::max_len(cfg), stream.get());
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
  const auto ref = Op::reference(in, cfg);
  const auto before = Op::before(in);
  if (auto m = capture.replay(); !m.empty()) return m;
  return with_context("graph replay on new inputs", Op::check(info, in, cfg, before, ref, result));
}

template <class Op>
std::string gated(Runtime& rt, const Target& target, const OpInfo& info, typename Op::Inputs& in,
                  const typename Op::Config& cfg, const Stream& stream) {
  warm_up<Op>(rt, in, cfg, stream);
  const auto ref = Op::reference(in, cfg);
  const auto before = Op::before(in);
  Gate gate(target.device, stream.get());
  gate.close();
  const uint64_t s0 = host_syncs();
  Tensor result;
  try {
    result = Op::call(rt, in, cfg, Op::max_len(cfg), stream.get());
  } catch (...) {
    gate.open();
    throw;
  }
  const uint64_t made = host_syncs() - s0;
  const bool held = gate.holding();
  gate.open();
  stream.synchronize();
  if (!held)
    return gate.timed_out()
               ? "the call returned only after the gate kernel gave up waiting: it waited for the GPU"
               : "the call returned after the blocked stream had run: it waited for the GPU";
  if (auto m = check_syncs(made, 0, "while the stream was blocked"); !m.empty()) return m;
  return with_context("gated call", Op::check(info, in, cfg, before, ref, result));
}

template <class Op>
std::string run_call(Runtime& rt, const Target& target, const typename Op::Config& cfg, Mode mode,
                     std::string_view seed) {
  const OpInfo& info = op_info(rt, target, Op::name);
  const OpInfo::Device* dev = device_caps(info, target.device.device_type);
  if (dev == nullptr) return std::string("the backend declares no device of this type for ") + Op::name;
  Random rng(seed);
  activate(target.device);
  const Stream stream(target.device);
  auto in = Op::make(target.device, cfg, rng);
  switch (mode) {
    case Mode::host_and_derived:
      return host_and_derived<Op>(rt, info, *dev, in, cfg, stream);
    case Mode::graph_replay:
      return graph_replay<Op>(rt, info, in, cfg, stream, rng);
    case Mode::gate:
      return gated<Op>(rt, target, info, in, cfg, stream);
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
