// Dispatch from 8 threads at once through shared runtimes: both ops, many call signatures
// (width, bias, layout, max_seq_len given or derived), so the decision cache is filled by
// racing first calls and then hit; backends chosen by config order, by a per-op override
// and forced through RuntimeOptions. Every call must give what the same call gives on a
// runtime used by one thread, bit for bit, with the same backend and the same host syncs
// on the calling thread. CI runs this program under ThreadSanitizer
// (scripts/ci-sanitizers.sh); here it checks the results.
#include <boost/test/unit_test.hpp>

#include "host_tensors.hpp"
#include "test_support.hpp"

#include <fmt/core.h>

#include <array>
#include <barrier>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

using namespace deltakern;
using namespace deltakern::test;

namespace {

constexpr int kThreads = 8;
constexpr int kRounds = 20;

// One call signature: the op and what the cache key is made of.
struct Variant {
  bool varlen;
  int64_t width;
  bool bias;
  bool channel_last;  // varlen's x as a slice of a wider row (stride(0) == 1)
  bool max_seq_len;   // varlen: given, or derived by a backend that needs it

  std::string name() const {
    return fmt::format("{} W={} bias={} {} max_seq_len={}", varlen ? "varlen" : "update", width, bias,
                       channel_last ? "channel-last" : "time-contiguous", max_seq_len ? "given" : "omitted");
  }
};

std::vector<Variant> all_variants() {
  std::vector<Variant> out;
  for (const int64_t width : {2, 3, 4})
    for (const bool bias : {false, true}) {
      out.push_back({false, width, bias, false, false});
      for (const bool channel_last : {false, true})
        for (const bool max_seq_len : {false, true})
          out.push_back({true, width, bias, channel_last, max_seq_len});
    }
  return out;
}

// What a call gave: which contract served it, the output, the states, the syncs it made.
struct Outcome {
  bool in_place = false;
  std::vector<float> out;
  std::vector<std::byte> states;
  uint64_t syncs = 0;
  bool operator==(const Outcome&) const = default;
};

// The output's elements in logical order, read through its strides.
std::vector<float> elements(const DLTensor& t) {
  std::vector<int64_t> strides(t.ndim);
  for (int d = t.ndim - 1, compact = 1; d >= 0; compact *= static_cast<int>(t.shape[d]), --d)
    strides[d] = t.strides != nullptr ? t.strides[d] : compact;
  int64_t n = 1;
  for (int d = 0; d < t.ndim; ++d) n *= t.shape[d];
  std::vector<float> out(static_cast<size_t>(n));
  const auto* base = reinterpret_cast<const float*>(static_cast<const std::byte*>(t.data) + t.byte_offset);
  for (int64_t i = 0; i < n; ++i) {
    int64_t offset = 0;
    for (int64_t d = t.ndim - 1, rest = i; d >= 0; --d) {
      offset += rest % t.shape[d] * strides[d];
      rest /= t.shape[d];
    }
    out[static_cast<size_t>(i)] = base[offset];
  }
  return out;
}

// Builds the tensors of one variant (D = 8, S = 3, lengths {5, 1, 7}, 6 pool lines), makes
// the call and reads what it gave. Each call has tensors of its own: only the runtime is shared.
Outcome run(Runtime& rt, const Variant& v, int seed) {
  constexpr int64_t D = 8, S = 3, lines = 6, T = 13, B = 3;
  HostTensor weight(kF32, {D, v.width});
  HostTensor bias(kF32, {D});
  HostTensor states(kF32, {lines, D, S});
  weight.fill(ramp(static_cast<size_t>(D * v.width), 0.02f + 0.001f * seed));
  bias.fill(ramp(D, 0.03f));
  states.fill(ramp(lines * D * S, 0.05f));
  HostTensor indices(kI32, {B});
  indices.fill(std::vector<int32_t>{4, 0, 2});
  Outcome o;
  const uint64_t syncs_before = host_syncs();
  if (v.varlen) {
    // Channel-last: x is the first D channels of rows of 2D, as a slice of a fused projection.
    HostTensor x = v.channel_last ? HostTensor(kF32, {D, T}, {1, 2 * D}) : HostTensor(kF32, {D, T});
    x.fill(ramp(x.bytes().size() / sizeof(float), 0.01f + 0.001f * seed));
    HostTensor qsl(kI32, {B + 1});
    qsl.fill(std::vector<int32_t>{0, 5, 6, 13});
    HostTensor initial(kU8, {B});
    initial.fill(std::vector<uint8_t>{1, 0, 1});
    CausalConv1dVarlenArgs a;
    a.x = x.dl();
    a.weight = weight.dl();
    a.bias = v.bias ? bias.dl() : nullptr;
    a.conv_states = states.dl();
    a.query_start_loc = qsl.dl();
    a.cache_indices = indices.dl();
    a.has_initial_state = initial.dl();
    a.activation = Activation::silu;
    if (v.max_seq_len) a.max_seq_len = 7;
    const Tensor out = rt.causal_conv1d_varlen(a);
    o.in_place = out.aliases(*x.dl());
    o.out = elements(out.dl());
  } else {
    HostTensor x(kF32, {B, D});
    x.fill(ramp(x.bytes().size() / sizeof(float), 0.01f + 0.001f * seed));
    CausalConv1dUpdateArgs a;
    a.x = x.dl();
    a.conv_state = states.dl();
    a.weight = weight.dl();
    a.bias = v.bias ? bias.dl() : nullptr;
    a.conv_state_indices = indices.dl();
    a.activation = Activation::silu;
    const Tensor out = rt.causal_conv1d_update(a);
    o.in_place = out.aliases(*x.dl());
    o.out = elements(out.dl());
  }
  o.syncs = host_syncs() - syncs_before;
  o.states = states.bytes();
  return o;
}

// The runtimes under test: each shared by all threads, and a twin of it for the references.
struct Setup {
  std::string name;
  std::function<RuntimeOptions()> options;
};

std::vector<Setup> setups(const TempDir& dir) {
  const fs::path config = dir.write("concurrent.toml",
                                    "[dispatch]\norder = [\"standin\", \"portable\"]\n"
                                    "[dispatch.ops.causal_conv1d_update]\nbackend = \"portable\"\n"
                                    "[logging]\nlevel = \"error\"\n");
  return {
      {"config order standin, per-op portable",
       [config] {
         RuntimeOptions o = base_options();
         o.config_file = config;
         return o;
       }},
      {"forced portable",
       [] {
         RuntimeOptions o = base_options();
         o.force_backend = "portable";
         return o;
       }},
      {"forced standin",
       [] {
         RuntimeOptions o = base_options();
         o.force_backend = "standin";
         return o;
       }},
  };
}

}  // namespace

BOOST_AUTO_TEST_CASE(eight_threads_dispatching_at_once_get_the_single_threaded_results) {
  const TempDir dir;
  const auto variants = all_variants();
  for (const Setup& setup : setups(dir)) {
    BOOST_TEST_CONTEXT(setup.name) {
      // References: the same calls, one thread, a runtime of their own.
      std::map<std::pair<size_t, int>, Outcome> reference;
      {
        Runtime single(setup.options());
        for (size_t v = 0; v < variants.size(); ++v)
          for (int seed = 0; seed < kThreads; ++seed) reference[{v, seed}] = run(single, variants[v], seed);
      }

      Runtime shared(setup.options());
      std::vector<std::vector<std::string>> failures(kThreads);  // Boost.Test is not thread-safe
      std::barrier start(kThreads);
      std::vector<std::jthread> threads;
      for (int t = 0; t < kThreads; ++t) {
        threads.emplace_back([&, t] {
          start.arrive_and_wait();  // all first calls race for the empty cache
          for (int round = 0; round < kRounds; ++round)
            for (size_t i = 0; i < variants.size(); ++i) {
              // Each thread walks the signatures from a different place: fills and hits interleave.
              const size_t v = (i + static_cast<size_t>(t) * 3) % variants.size();
              try {
                if (run(shared, variants[v], t) != reference.at({v, t}))
                  failures[t].push_back(fmt::format("round {}: {}: differs from one thread's result", round,
                                                    variants[v].name()));
              } catch (const std::exception& e) {
                failures[t].push_back(
                    fmt::format("round {}: {}: threw {}", round, variants[v].name(), e.what()));
              }
            }
        });
      }
      threads.clear();  // joins
      size_t failed = 0;
      for (int t = 0; t < kThreads; ++t)
        for (const auto& f : failures[t]) {
          if (++failed <= 10) BOOST_ERROR("thread " << t << ": " << f);
        }
      BOOST_TEST(failed == 0u);
    }
  }
}

BOOST_AUTO_TEST_CASE(the_references_exercise_both_contracts_and_both_sync_paths) {
  // Guards the test above against passing vacuously: the setups reach both backends, and
  // the derived max_seq_len path makes its one sync.
  const TempDir dir;
  const auto variants = all_variants();
  bool saw_in_place = false, saw_fresh = false, saw_sync = false;
  for (const Setup& setup : setups(dir)) {
    Runtime rt(setup.options());
    for (const Variant& v : variants) {
      const Outcome o = run(rt, v, 0);
      (o.in_place ? saw_in_place : saw_fresh) = true;
      saw_sync |= o.syncs == 1;
      BOOST_TEST(!o.out.empty(), v.name());
    }
  }
  BOOST_TEST(saw_in_place);
  BOOST_TEST(saw_fresh);
  BOOST_TEST(saw_sync);
}

BOOST_AUTO_TEST_CASE(
    two_runtimes_sharing_a_plugin_allocate_each_with_their_own_allocator_from_eight_threads) {
  // One portable instance serves both; its host table is the same for both, so only the
  // thread's current call says whose allocator a fresh output comes from.
  const auto forced_portable = [] {
    RuntimeOptions o = base_options();
    o.force_backend = "portable";
    return o;
  };
  Runtime counted(forced_portable()), plain(forced_portable());
  const CountingAllocator counting;
  counted.set_allocator(counting.allocator());
  const auto call = [](Runtime& rt) {
    UpdateCall c;
    const Tensor out = rt.causal_conv1d_update(c.args());
  };
  call(counted);
  const int64_t per_call = counting.allocated();
  BOOST_TEST_REQUIRE(per_call >= 1);
  call(plain);
  BOOST_TEST_REQUIRE(counting.allocated() == per_call,
                     "the other runtime's call used the counting allocator");

  constexpr int kCalls = 50;
  std::barrier start(kThreads);
  std::vector<std::string> failures(kThreads);
  {
    std::vector<std::jthread> threads;
    for (int t = 0; t < kThreads; ++t)
      threads.emplace_back([&, t] {
        start.arrive_and_wait();
        try {
          for (int i = 0; i < kCalls; ++i) call((i + t) % 2 == 0 ? counted : plain);
        } catch (const std::exception& e) {
          failures[t] = e.what();
        }
      });
  }
  for (const auto& f : failures) BOOST_TEST(f.empty(), f);
  BOOST_TEST(counting.allocated() == per_call * (1 + kThreads * kCalls / 2));
  BOOST_TEST(counting.released() == counting.allocated());
}

BOOST_AUTO_TEST_CASE(runtimes_created_and_destroyed_on_four_threads_never_start_a_plugin_twice) {
  // single_instance refuses an init while an instance is alive, and its shutdown takes 5 ms: a
  // Runtime that started it beside another (two inits), or while the last holder was still
  // shutting it down, would be refused. Each round every thread holds a runtime; all but one
  // let go; then that one lets go (the last release: a shutdown) while the others make their
  // next runtime (acquires racing it); then all four are alive at once and call.
  const TempDir dir;
  RuntimeOptions o;
  o.read_environment = false;
  o.search_default_dirs = false;
  o.plugin_files = {hostile_plugin("shared", "single_instance")};
  o.force_backend = "single_instance";
  o.config_file =
      dir.write("deltakern.toml", "[plugins]\nprobe = \"in-process\"\n[logging]\nlevel = \"error\"\n");
  constexpr int kWorkers = 4, kRounds = 8;
  std::barrier step(kWorkers);
  std::vector<std::string> failures(kWorkers);
  const auto attempt = [&](int t, const std::function<void()>& f) {
    try {
      f();
    } catch (const std::exception& e) {
      if (failures[t].empty()) failures[t] = e.what();
    }
  };
  {
    std::vector<std::jthread> threads;
    for (int t = 0; t < kWorkers; ++t)
      threads.emplace_back([&, t] {
        std::optional<Runtime> rt;
        const auto make = [&] {
          rt.emplace(o);
          if (rt->plugin("single_instance") == nullptr && failures[t].empty())
            failures[t] = "not loaded: " + rt->plugins().at(0).reason;
        };
        attempt(t, make);
        for (int round = 0; round < kRounds; ++round) {
          const bool last_holder = t == round % kWorkers;
          step.arrive_and_wait();
          if (!last_holder) rt.reset();
          step.arrive_and_wait();  // one runtime left
          attempt(t, [&] {
            if (last_holder)
              rt.reset();
            else
              make();
          });
          if (last_holder) attempt(t, make);
          step.arrive_and_wait();  // all four alive at once
          attempt(t, [&] {
            if (rt && rt->plugin("single_instance") != nullptr) {
              VarlenCall c;
              const Tensor out = rt->causal_conv1d_varlen(c.args());
            }
          });
        }
      });
  }
  for (const auto& f : failures) BOOST_TEST(f.empty(), f);
}
