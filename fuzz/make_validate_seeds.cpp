// Writes fuzz_validate's seed corpus: named argument sets, valid and invalid, of both ops,
// encoded in argument_wire.hpp's format. Usage: make_validate_seeds DIR
// Each set starts from a valid call (the shapes the tests and the demo use) and changes one
// thing, so the fuzzer starts next to every rejection branch and both layouts.
#include "argument_wire.hpp"

#include <dlpack/dlpack.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

namespace {

using namespace deltakern::fuzz;

struct TensorSpec {
  bool present = true;
  DLDataType dtype{kDLFloat, 32, 1};
  DLDevice device{kDLCPU, 0};
  std::vector<int64_t> shape;
  std::vector<int64_t> strides;  // empty: compact
  uint64_t byte_offset = 0;
  uint8_t data = kOwnBuffer;
  uint8_t other = 0;
  uint32_t offset = 0;
  std::vector<uint8_t> content;
  bool null_shape = false;
};

std::vector<uint8_t> int32s(std::initializer_list<int32_t> values) {
  std::vector<uint8_t> out(values.size() * 4);
  std::memcpy(out.data(), std::data(values), out.size());
  return out;
}

struct CallSpec {
  bool varlen = true;
  bool check_contents = true;
  int32_t activation = 1;
  int64_t pad_slot_id = -1;
  bool max_seq_len_given = true;
  int64_t max_seq_len = 4;
  std::vector<TensorSpec> tensors;

  std::vector<uint8_t> encode() const {
    std::vector<uint8_t> out;
    const auto put = [&](auto value) {
      const auto* p = reinterpret_cast<const uint8_t*>(&value);
      out.insert(out.end(), p, p + sizeof value);
    };
    put(static_cast<uint8_t>(varlen ? 0 : 1));
    put(uint8_t((check_contents ? kCheckContents : 0) | (max_seq_len_given ? kMaxSeqLenGiven : 0)));
    put(activation);
    put(pad_slot_id);
    put(max_seq_len);
    for (const TensorSpec& t : tensors) {
      put(uint8_t{t.present});
      if (!t.present) continue;
      put(static_cast<int8_t>(t.shape.size()));
      put(t.dtype.code);
      put(t.dtype.bits);
      put(t.dtype.lanes);
      put(static_cast<int32_t>(t.device.device_type));
      put(static_cast<int32_t>(t.device.device_id));
      put(uint8_t{t.null_shape ? kNullShape : t.strides.empty() ? kCompact : kExplicitStrides});
      for (const int64_t s : t.shape) put(s);
      for (const int64_t s : t.strides) put(s);
      put(t.byte_offset);
      put(t.data);
      put(t.other);
      put(t.offset);
      put(static_cast<uint16_t>(t.content.size()));
      out.insert(out.end(), t.content.begin(), t.content.end());
    }
    return out;
  }
};

constexpr DLDataType kF32{kDLFloat, 32, 1}, kBf16{kDLBfloat, 16, 1}, kI32{kDLInt, 32, 1}, kU8{kDLUInt, 8, 1};

// D=4 channels, T=9 tokens in 3 sequences (3, 2, 4), width 4, 4 state lines of S=3.
CallSpec valid_varlen() {
  CallSpec c;
  c.tensors = {
      {.shape = {4, 9}},                                               // x
      {.shape = {4, 4}},                                               // weight
      {.shape = {4}},                                                  // bias
      {.shape = {4, 4, 3}},                                            // conv_states
      {.dtype = kI32, .shape = {4}, .content = int32s({0, 3, 5, 9})},  // query_start_loc
      {.dtype = kI32, .shape = {3}, .content = int32s({2, 0, 1})},     // cache_indices
      {.dtype = kU8, .shape = {3}, .content = {1, 0, 1}},              // has_initial_state
  };
  return c;
}

// batch 3, D=4, width 4, 5 state lines of S=3.
CallSpec valid_update() {
  CallSpec c;
  c.varlen = false;
  c.max_seq_len_given = false;
  c.tensors = {
      {.shape = {3, 4}},                                             // x
      {.shape = {5, 4, 3}},                                          // conv_state
      {.shape = {4, 4}},                                             // weight
      {.shape = {4}},                                                // bias
      {.dtype = kI32, .shape = {3}, .content = int32s({4, -1, 0})},  // conv_state_indices
      {.dtype = kI32, .shape = {3}, .content = int32s({0, 5, 7})},   // cache_seqlens
  };
  return c;
}

CallSpec changed(CallSpec c, const std::function<void(CallSpec&)>& change) {
  change(c);
  return c;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s DIR\n", argv[0]);
    return 2;
  }
  const std::filesystem::path dir = argv[1];
  std::filesystem::create_directories(dir);
  const std::vector<std::pair<std::string, CallSpec>> seeds = {
      {"varlen-valid", valid_varlen()},
      {"varlen-valid-channel-last", changed(valid_varlen(),
                                            [](CallSpec& c) {
                                              c.tensors[0].strides = {1, 6};
                                            })},
      {"varlen-valid-bf16-no-optionals", changed(valid_varlen(),
                                                 [](CallSpec& c) {
                                                   c.tensors[0].dtype = kBf16;
                                                   c.tensors[2].present = false;
                                                   c.tensors[5].present = false;
                                                   c.tensors[6].present = false;
                                                 })},
      {"varlen-valid-empty-batch", changed(valid_varlen(),
                                           [](CallSpec& c) {
                                             c.tensors[0].shape = {4, 0};
                                             c.tensors[4] = {
                                                 .dtype = kI32, .shape = {1}, .content = int32s({0})};
                                             c.tensors[5].shape = {0};
                                             c.tensors[6].shape = {0};
                                           })},
      {"varlen-x-int32", changed(valid_varlen(), [](CallSpec& c) { c.tensors[0].dtype = kI32; })},
      {"varlen-x-rank3", changed(valid_varlen(),
                                 [](CallSpec& c) {
                                   c.tensors[0].shape = {1, 4, 9};
                                 })},
      {"varlen-x-null-shape", changed(valid_varlen(), [](CallSpec& c) { c.tensors[0].null_shape = true; })},
      {"varlen-x-bad-layout", changed(valid_varlen(),
                                      [](CallSpec& c) {
                                        c.tensors[0].strides = {2, 2};
                                      })},
      {"varlen-x-negative-stride", changed(valid_varlen(),
                                           [](CallSpec& c) {
                                             c.tensors[0].strides = {9, -1};
                                           })},
      {"varlen-x-huge-shape", changed(valid_varlen(),
                                      [](CallSpec& c) {
                                        c.tensors[0].shape = {int64_t{1} << 40, int64_t{1} << 40};
                                      })},
      {"varlen-x-huge-stride", changed(valid_varlen(),
                                       [](CallSpec& c) {
                                         c.tensors[0].strides = {int64_t{1} << 62, 1};
                                       })},
      {"varlen-weight-wrong-dim", changed(valid_varlen(),
                                          [](CallSpec& c) {
                                            c.tensors[1].shape = {5, 4};
                                          })},
      {"varlen-weight-on-cuda", changed(valid_varlen(),
                                        [](CallSpec& c) {
                                          c.tensors[1].device = {kDLCUDA, 0};
                                        })},
      {"varlen-states-too-short", changed(valid_varlen(),
                                          [](CallSpec& c) {
                                            c.tensors[3].shape = {4, 4, 2};
                                          })},
      {"varlen-states-overlap-x", changed(valid_varlen(),
                                          [](CallSpec& c) {
                                            c.tensors[3].data = kOtherBuffer;
                                            c.tensors[3].other = 0;
                                            c.tensors[3].offset = 16;
                                          })},
      {"varlen-weight-inside-states", changed(valid_varlen(),
                                              [](CallSpec& c) {
                                                c.tensors[1].data = kOtherBuffer;
                                                c.tensors[1].other = 3;
                                              })},
      {"varlen-x-null-data", changed(valid_varlen(), [](CallSpec& c) { c.tensors[0].data = kNullData; })},
      {"varlen-offsets-decreasing", changed(valid_varlen(),
                                            [](CallSpec& c) {
                                              c.tensors[4].content = int32s({0, 5, 3, 9});
                                            })},
      {"varlen-offsets-short-of-T", changed(valid_varlen(),
                                            [](CallSpec& c) {
                                              c.tensors[4].content = int32s({0, 3, 5, 8});
                                            })},
      {"varlen-cache-index-out-of-range", changed(valid_varlen(),
                                                  [](CallSpec& c) {
                                                    c.tensors[5].content = int32s({2, 7, 1});
                                                  })},
      {"varlen-cache-index-duplicate", changed(valid_varlen(),
                                               [](CallSpec& c) {
                                                 c.tensors[5].content = int32s({2, 2, 1});
                                               })},
      {"varlen-initial-state-not-bool", changed(valid_varlen(),
                                                [](CallSpec& c) {
                                                  c.tensors[6].content = {1, 2, 0};
                                                })},
      {"varlen-max-seq-len-too-small", changed(valid_varlen(), [](CallSpec& c) { c.max_seq_len = 2; })},
      {"varlen-index-int64", changed(valid_varlen(),
                                     [](CallSpec& c) {
                                       c.tensors[5].dtype = {kDLInt, 64, 1};
                                     })},
      {"varlen-activation-unknown", changed(valid_varlen(), [](CallSpec& c) { c.activation = 7; })},
      {"varlen-pad-slot-beyond-int32",
       changed(valid_varlen(), [](CallSpec& c) { c.pad_slot_id = int64_t{1} << 40; })},
      {"update-valid", valid_update()},
      {"update-valid-drafts", changed(valid_update(),
                                      [](CallSpec& c) {
                                        c.tensors[0].shape = {3, 4, 2};
                                      })},
      {"update-valid-no-optionals", changed(valid_update(),
                                            [](CallSpec& c) {
                                              c.tensors[3].present = false;
                                              c.tensors[4].present = false;
                                              c.tensors[5].present = false;
                                            })},
      {"update-x-rank1", changed(valid_update(), [](CallSpec& c) { c.tensors[0].shape = {12}; })},
      {"update-indices-wrong-batch", changed(valid_update(), [](CallSpec& c) { c.tensors[4].shape = {2}; })},
      {"update-indices-out-of-range", changed(valid_update(),
                                              [](CallSpec& c) {
                                                c.tensors[4].content = int32s({4, 5, 0});
                                              })},
      {"update-seqlens-negative", changed(valid_update(),
                                          [](CallSpec& c) {
                                            c.tensors[5].content = int32s({0, -5, 7});
                                          })},
      {"update-state-overlap-weight", changed(valid_update(),
                                              [](CallSpec& c) {
                                                c.tensors[2].data = kOtherBuffer;
                                                c.tensors[2].other = 1;
                                                c.tensors[2].offset = 8;
                                              })},
      {"update-x-self-overlap", changed(valid_update(),
                                        [](CallSpec& c) {
                                          c.tensors[0].strides = {1, 1};
                                        })},
      {"update-dangling-data",
       changed(valid_update(), [](CallSpec& c) { c.tensors[1].data = kDanglingPointer; })},
  };
  for (const auto& [name, spec] : seeds) {
    const auto bytes = spec.encode();
    std::ofstream(dir / name, std::ios::binary)
        .write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  }
  std::printf("%zu seeds written to %s\n", seeds.size(), dir.c_str());
  return 0;
}
