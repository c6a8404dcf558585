// The suite's own checks, each shown to fire on a hand-made fault: guard zones around the
// suite's tensors and the allocator's outputs, the two poisons, and the result's identity
// (a fresh result overlapping an argument, an in-place result that is not x, a result
// reaching past what it was allocated). The liars show the same end to end.
#include <boost/test/unit_test.hpp>

#include "contract.hpp"
#include "poison.hpp"
#include "tensor.hpp"
#include "test_support.hpp"

#include <deltakern/conformance.hpp>

#include <cstring>
#include <stdexcept>

using namespace deltakern;
using namespace deltakern::conformance;
using deltakern::test::contains;

namespace {

constexpr DLDevice kCpu{kDLCPU, 0};

std::byte* first_byte(const TensorBuf& t) { return static_cast<std::byte*>(t.dl()->data); }

OpInfo info_with(std::vector<std::string> mutated, std::optional<std::string> returns) {
  OpInfo info;
  info.name = "causal_conv1d_varlen";
  info.schema = "(test)";
  info.mutated = std::move(mutated);
  info.returns_alias_of = std::move(returns);
  return info;
}

// A view of `t`'s memory that does not own it, shaped like `like`, starting `offset` bytes in.
Tensor view_of(const TensorBuf& t, const TensorBuf& like, std::ptrdiff_t offset = 0) {
  auto* m = new DLManagedTensor{};
  m->dl_tensor = *like.dl();
  m->dl_tensor.data = first_byte(t) + offset;
  m->dl_tensor.byte_offset = 0;
  m->deleter = [](DLManagedTensor* self) { delete self; };
  return Tensor(m);
}

}  // namespace

BOOST_AUTO_TEST_CASE(a_tensors_guards_name_a_write_past_either_end) {
  auto t = TensorBuf::compact(kCpu, DType::f32, {3, 5});
  BOOST_TEST(t.check_guards("x").empty());
  const std::byte before = first_byte(t)[-1];
  first_byte(t)[-1] = std::byte{0};
  BOOST_TEST(contains(t.check_guards("x"), "wrote outside x: byte offset 1 before the start"),
             t.check_guards("x"));
  first_byte(t)[-1] = before;
  first_byte(t)[t.alloc_bytes() + 2] = std::byte{0};
  BOOST_TEST(contains(t.check_guards("x"), "wrote outside x: byte offset 2 after the end"),
             t.check_guards("x"));
}

BOOST_AUTO_TEST_CASE(fresh_memory_holds_the_scopes_poison_between_guards) {
  const Allocator a = poisoning_allocator();
  for (const Poison p : {Poison::nan, Poison::finite}) {
    const PoisonScope scope(p);
    auto* out = static_cast<unsigned char*>(a.allocate(kCpu, 10, nullptr));
    BOOST_TEST_REQUIRE(out != nullptr);
    for (int i = 0; i < 10; ++i) BOOST_TEST(out[i] == poison_byte(p));
    const auto found = find_allocation(reinterpret_cast<uintptr_t>(out) + 9);
    BOOST_TEST_REQUIRE(found.has_value());
    BOOST_TEST(found->bytes == 10u);
    BOOST_TEST(check_guards(kCpu, out, 10, "the output").empty());
    out[10] = 0;  // one byte too many
    BOOST_TEST(contains(check_guards(kCpu, out, 10, "the output"),
                        "wrote outside the output: byte offset 0 after the end"));
    (void)take_release_violations();
    a.deallocate(kCpu, out, nullptr);
    BOOST_TEST(contains(take_release_violations(), "released"));
    BOOST_TEST(!find_allocation(reinterpret_cast<uintptr_t>(out)).has_value());
  }
  BOOST_TEST((poison_of(0x5A5Au, 2) == Poison::finite));
  BOOST_TEST((poison_of(0xFFFFFFFFu, 4) == Poison::nan));
  BOOST_TEST(!poison_of(0x3F800000u, 4).has_value());
}

BOOST_AUTO_TEST_CASE(a_fresh_result_overlapping_an_argument_is_refused) {
  auto x = TensorBuf::compact(kCpu, DType::f32, {4, 8});
  auto weight = TensorBuf::compact(kCpu, DType::f32, {4, 64});
  std::vector<NamedArg> args{{"x", &x}, {"weight", &weight}};
  const auto fresh = info_with({"conv_states"}, std::nullopt);
  BOOST_TEST(contains(check_result(fresh, view_of(weight, x), x, args, 0), "overlaps the memory of weight"));
  // Inside weight's guard zone: memory no one gave the backend.
  BOOST_TEST(
      contains(check_result(fresh, view_of(weight, x, -200), x, args, 0), "overlaps the memory of weight"));
  // x itself, under a schema that promises a fresh result.
  BOOST_TEST(contains(check_result(fresh, view_of(x, x), x, args, 0), "overlaps the memory of x"));
}

BOOST_AUTO_TEST_CASE(an_in_place_result_must_be_x_itself) {
  auto x = TensorBuf::compact(kCpu, DType::f32, {4, 8});
  std::vector<NamedArg> args{{"x", &x}};
  const auto in_place = info_with({"x", "conv_states"}, "x");
  BOOST_TEST(check_result(in_place, view_of(x, x), x, args, 0).empty());
  BOOST_TEST(contains(check_result(in_place, view_of(x, x, 4), x, args, 0), "is not x's view"));
}

BOOST_AUTO_TEST_CASE(a_fresh_result_must_lie_inside_its_allocation) {
  auto x = TensorBuf::compact(kCpu, DType::f32, {4, 8});
  std::vector<NamedArg> args{{"x", &x}};
  const Allocator a = poisoning_allocator();
  const size_t bytes = 4 * 8 * 4 - 4;  // one element short
  void* memory = a.allocate(kCpu, bytes, nullptr);
  auto* m = new DLManagedTensor{};
  m->dl_tensor = *x.dl();
  m->dl_tensor.data = memory;
  m->dl_tensor.strides = nullptr;
  m->dl_tensor.byte_offset = 0;
  m->deleter = [](DLManagedTensor* self) { delete self; };
  const Tensor result(m);
  const auto fresh = info_with({"conv_states"}, std::nullopt);
  BOOST_TEST(
      contains(check_result(fresh, result, x, args, 0), "reach 4 byte(s) past the end of the 124 bytes"),
      check_result(fresh, result, x, args, 0));
  a.deallocate(kCpu, memory, nullptr);
}

// A result in the backend's own memory, or in a block handed out for an earlier call, would be
// shared by two results an engine holds at once.
BOOST_AUTO_TEST_CASE(a_fresh_result_is_memory_allocated_for_its_own_call) {
  auto x = TensorBuf::compact(kCpu, DType::f32, {4, 8});
  auto elsewhere = TensorBuf::compact(kCpu, DType::f32, {4, 8});  // not an argument, not allocated
  std::vector<NamedArg> args{{"x", &x}};
  const auto fresh = info_with({"conv_states"}, std::nullopt);
  BOOST_TEST(contains(check_result(fresh, view_of(elsewhere, x), x, args, 0),
                      "not handed out by the host allocator"));

  const Allocator a = poisoning_allocator();
  void* memory = nullptr;
  uint64_t first_call = 0, second_call = 0;
  {
    const PoisonScope call(Poison::nan);
    first_call = call.call();
    memory = a.allocate(kCpu, 4 * 8 * 4, nullptr);
  }
  {
    const PoisonScope call(Poison::finite);
    second_call = call.call();
  }
  BOOST_TEST(second_call > first_call);
  auto* m = new DLManagedTensor{};
  m->dl_tensor = *x.dl();
  m->dl_tensor.data = memory;
  m->dl_tensor.byte_offset = 0;
  m->deleter = [](DLManagedTensor* self) { delete self; };
  const Tensor result(m);
  BOOST_TEST(check_result(fresh, result, x, args, first_call).empty(),
             check_result(fresh, result, x, args, first_call));
  BOOST_TEST(contains(check_result(fresh, result, x, args, second_call), "handed out for an earlier call"),
             check_result(fresh, result, x, args, second_call));
  // Two results held at once must not share memory.
  const Tensor again = view_of(x, x);
  BOOST_TEST(check_apart(again, result).empty());
  BOOST_TEST(contains(check_apart(again, view_of(x, x, 8)), "shares memory with the first call's"));
  a.deallocate(kCpu, memory, nullptr);
}

// An overlap names the argument overlapped, for either contract.
BOOST_AUTO_TEST_CASE(an_overlap_names_the_argument_it_overlaps) {
  auto x = TensorBuf::compact(kCpu, DType::f32, {4, 8});
  auto states = TensorBuf::compact(kCpu, DType::f32, {6, 4, 8});
  std::vector<NamedArg> args{{"x", &x}, {"conv_states", &states}};
  const auto in_place = info_with({"x", "conv_states"}, "x");
  const auto fresh = info_with({"conv_states"}, std::nullopt);
  for (const auto* info : {&in_place, &fresh}) {
    const auto m = check_result(*info, view_of(states, x, 32), x, args, 0);
    BOOST_TEST((contains(m, "overlaps conv_states") || contains(m, "overlaps the memory of conv_states")), m);
    BOOST_TEST((!contains(m, "overlaps x") && !contains(m, "memory of x")), m);
  }
}

BOOST_AUTO_TEST_CASE(a_throwing_deleter_is_a_failure_not_the_end) {
  auto* m = new DLManagedTensor{};
  m->deleter = [](DLManagedTensor* self) {
    delete self;
    throw std::runtime_error("deleter exploded");
  };
  Tensor t(m);
  BOOST_TEST(contains(release_result(t),
                      "the result's deleter threw (nothing may unwind across the ABI): deleter exploded"));
  BOOST_TEST(!t);
}

// Changes allowed only in some elements: the rest, slack included, must be identical, and a
// stray change is named by its element or its byte.
BOOST_AUTO_TEST_CASE(changes_only_where_allowed) {
  TensorBuf t(kCpu, DType::f32, {3, 4}, {6, 1}, 2, 3);  // rows of 6, slack before and after
  t.set_values(std::vector<double>(12, 1.0));
  const auto before = t.bytes();
  auto after = before;
  const NamedArg arg{"conv_states", &t};
  const auto row1 = [](int64_t i) { return i / 4 == 1; };
  const Describe describe = [](int64_t i) { return "element " + std::to_string(i); };
  float two = 2.0f;
  std::memcpy(after.data() + (2 + 6 + 1) * 4, &two, 4);  // [1, 1]: allowed
  BOOST_TEST(check_changes_only_in(arg, before, after, row1, describe).empty());
  std::memcpy(after.data() + (2 + 12 + 3) * 4, &two, 4);  // [2, 3]: not allowed
  BOOST_TEST(contains(check_changes_only_in(arg, before, after, row1, describe), "changed at element 11"));
  after = before;
  after[(2 + 4) * 4] = std::byte{7};  // between rows 0 and 1: slack
  BOOST_TEST(contains(check_changes_only_in(arg, before, after, row1, describe), "outside its elements"));
  BOOST_TEST((t.element_at_byte((2 + 6 + 3) * 4 + 1) == std::optional<int64_t>(7)));
  BOOST_TEST(!t.element_at_byte(4).has_value());
}
