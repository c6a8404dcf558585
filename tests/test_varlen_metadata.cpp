// VarlenMetadata::from_lengths: query_start_loc, max_seq_len and the token count built on
// the host, and its upload; what makes a prefill sync-free.
#include <boost/test/unit_test.hpp>

#include "host_tensors.hpp"
#include "test_support.hpp"

#include <cstring>
#include <limits>

using namespace deltakern;
using namespace deltakern::test;

BOOST_AUTO_TEST_CASE(builds_offsets_max_and_total) {
  const std::vector<int64_t> lengths{3, 0, 5, 1};
  const auto m = VarlenMetadata::from_lengths(lengths);
  BOOST_TEST(m.query_start_loc == (std::vector<int32_t>{0, 3, 3, 8, 9}), boost::test_tools::per_element());
  BOOST_TEST(m.max_seq_len == 5);
  BOOST_TEST(m.total_tokens == 9);
  BOOST_TEST(m.batch() == 4);
}

BOOST_AUTO_TEST_CASE(an_empty_batch) {
  const auto m = VarlenMetadata::from_lengths({});
  BOOST_TEST(m.query_start_loc == std::vector<int32_t>{0}, boost::test_tools::per_element());
  BOOST_TEST(m.max_seq_len == 0);
  BOOST_TEST(m.total_tokens == 0);
  BOOST_TEST(m.batch() == 0);
}

BOOST_AUTO_TEST_CASE(bad_lengths_are_rejected) {
  for (const auto& lengths :
       {std::vector<int64_t>{2, -1}, std::vector<int64_t>{std::numeric_limits<int32_t>::max(), 1},
        std::vector<int64_t>{int64_t{1} << 33}}) {
    try {
      (void)VarlenMetadata::from_lengths(lengths);
      BOOST_FAIL("accepted lengths whose offsets do not fit int32 or are negative");
    } catch (const Error& e) {
      BOOST_TEST((e.code() == ErrorCode::invalid_argument), e.what());
    }
  }
}

BOOST_AUTO_TEST_CASE(upload_to_the_cpu) {
  const std::vector<int64_t> lengths{4, 6};
  const auto m = VarlenMetadata::from_lengths(lengths);
  const uint64_t syncs = host_syncs();
  const Tensor t = m.upload(DLDevice{kDLCPU, 0});
  BOOST_TEST(host_syncs() == syncs);
  BOOST_TEST_REQUIRE(static_cast<bool>(t));
  BOOST_TEST(t->ndim == 1);
  BOOST_TEST(t->shape[0] == 3);
  BOOST_TEST((t->dtype.code == kDLInt && t->dtype.bits == 32 && t->dtype.lanes == 1));
  BOOST_TEST((t->device.device_type == kDLCPU));
  std::vector<int32_t> got(3);
  std::memcpy(got.data(), static_cast<const char*>(t->data) + t->byte_offset, 3 * sizeof(int32_t));
  BOOST_TEST(got == m.query_start_loc, boost::test_tools::per_element());
}

// The engine's path: lengths known on the host give a prefill with no host sync.
BOOST_AUTO_TEST_CASE(metadata_drives_a_sync_free_prefill) {
  RuntimeOptions o = base_options();
  o.force_backend = "portable";
  Runtime rt(o);
  const std::vector<int64_t> lengths{4, 6};
  const auto m = VarlenMetadata::from_lengths(lengths);
  const Tensor qsl = m.upload(DLDevice{kDLCPU, 0});
  VarlenCall call;
  auto args = call.args();
  args.query_start_loc = &qsl.dl();
  args.max_seq_len = m.max_seq_len;
  const uint64_t syncs = host_syncs();
  const Tensor out = rt.causal_conv1d_varlen(args);
  BOOST_TEST(host_syncs() == syncs);
  BOOST_TEST(static_cast<bool>(out));
}
