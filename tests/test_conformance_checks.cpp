// The suite's own checks, each shown to fire on a hand-made fault: guard zones around the
// suite's tensors and the allocator's outputs, the two poisons, and the result's identity
// (a fresh result overlapping an argument, an in-place result that is not x, a result
// reaching past what it was allocated). The liars show the same end to end.
#define BOOST_TEST_MODULE conformance_checks
#include <boost/test/unit_test.hpp>

#include "contract.hpp"
#include "poison.hpp"
#include "tensor.hpp"
#include "test_support.hpp"

#include <deltakern/conformance.hpp>

#include <cstring>

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
  BOOST_TEST(contains(check_result(fresh, view_of(weight, x), x, args), "overlaps the memory of weight"));
  // Inside weight's guard zone: memory no one gave the backend.
  BOOST_TEST(
      contains(check_result(fresh, view_of(weight, x, -200), x, args), "overlaps the memory of weight"));
  // x itself, under a schema that promises a fresh result.
  BOOST_TEST(contains(check_result(fresh, view_of(x, x), x, args), "overlaps the memory of x"));
}

BOOST_AUTO_TEST_CASE(an_in_place_result_must_be_x_itself) {
  auto x = TensorBuf::compact(kCpu, DType::f32, {4, 8});
  std::vector<NamedArg> args{{"x", &x}};
  const auto in_place = info_with({"x", "conv_states"}, "x");
  BOOST_TEST(check_result(in_place, view_of(x, x), x, args).empty());
  BOOST_TEST(contains(check_result(in_place, view_of(x, x, 4), x, args), "is not x's view"));
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
  BOOST_TEST(contains(check_result(fresh, result, x, args), "reach 4 byte(s) past the end of the 124 bytes"),
             check_result(fresh, result, x, args));
  a.deallocate(kCpu, memory, nullptr);
}
