// bench_gpu's serving section (bench_rows.hpp says what it measures). Every time here is a CUDA
// graph's replay divided by the calls captured in it, so launch gaps are out of the figures as
// they are out of an engine's decode and piecewise-graphed prefill.
#include <algorithm>
#include <cstdio>
#include <numeric>
#include <string>
#include <vector>

#include "bench_rows.hpp"

namespace dkgpu {
namespace {

constexpr int64_t kPoolLines = 256;
constexpr int64_t kStateLen = 3, kWidth = 4;

// conv_states (lines, D, S): compact per line (strides D*S, S, 1) or dim-contiguous (D*S, 1, D).
View pool_view(void* data, int64_t lines, int64_t D, bool dim_contiguous) {
  const DLDataType bf16 = to_dl(ScalarType::bf16);
  return dim_contiguous ? View(data, 0, bf16, {lines, D, kStateLen}, {D * kStateLen, 1, D})
                        : View(data, 0, bf16, {lines, D, kStateLen}, {D * kStateLen, kStateLen, 1});
}

// n distinct lines of a pool of `lines`, in random order.
std::vector<int32_t> random_lines(int64_t n, int64_t lines, std::mt19937_64& rng) {
  std::vector<int32_t> all(lines);
  std::iota(all.begin(), all.end(), 0);
  std::shuffle(all.begin(), all.end(), rng);
  all.resize(n);
  return all;
}

DeviceBuffer upload(const void* host, size_t bytes) {
  DeviceBuffer d(bytes);
  DKGPU_CHECK(cudaMemcpy(d.get(), host, bytes, cudaMemcpyHostToDevice));
  return d;
}

void prefill_rows(std::vector<Backend>& backends, cudaStream_t s, EventTimer& ev, std::mt19937_64& rng,
                  const ServingShapes& shapes, std::vector<Row>& rows) {
  const DLDataType bf16 = to_dl(ScalarType::bf16), i32 = to_dl(ScalarType::i32), u8 = to_dl(ScalarType::u8);
  const std::vector<int64_t>& extra_mixed = shapes.extra_mixed;
  for (const int64_t D : shapes.dims)
    for (const int64_t T : shapes.tokens) {
      const size_t x_bytes = static_cast<size_t>(D * T * 2);
      // Enough buffers that a replay reads from DRAM, not L2 (50 MB on the H200).
      const int nbuf = static_cast<int>(std::clamp<size_t>((size_t{512} << 20) / x_bytes, 2, 16));
      std::vector<DeviceBuffer> xs;
      for (int i = 0; i < nbuf; ++i) {
        xs.emplace_back(x_bytes);
        fill_random_bf16(xs.back().get(), x_bytes, s, rng);
      }
      DeviceBuffer copy_dst(x_bytes), pool(kPoolLines * D * kStateLen * 2), weight(D * kWidth * 2),
          bias(D * 2);
      fill_random_bf16(pool.get(), pool.bytes(), s, rng);
      fill_random_bf16(weight.get(), weight.bytes(), s, rng);
      fill_random_bf16(bias.get(), bias.bytes(), s, rng);
      const View wv(weight.get(), 0, bf16, {D, kWidth}, {kWidth, 1}), bv(bias.get(), 0, bf16, {D}, {1});
      const View pv = pool_view(pool.get(), kPoolLines, D, true);

      const double copy_us = graph_us(s, ev, nbuf, [&](int i) {
        DKGPU_CHECK(cudaMemcpyAsync(copy_dst.get(), xs[i].get(), x_bytes, cudaMemcpyDeviceToDevice, s));
      });
      const double copy_gbs = 2.0 * x_bytes / copy_us * 1e-3;
      char size[48];
      std::snprintf(size, sizeof size, "D=%ld T=%ldk", static_cast<long>(D), static_cast<long>(T / 1024));
      rows.push_back({"copy (graph)", size, "-", "cuda", copy_us, copy_gbs, 100.0});

      for (size_t pattern = 0; pattern < 3 + extra_mixed.size(); ++pattern) {
        const std::vector<int64_t> lens = pattern < 3 ? batch_lengths(T, static_cast<int>(pattern), rng)
                                                      : mixed_lengths(T, extra_mixed[pattern - 3], rng);
        const int64_t B = static_cast<int64_t>(lens.size());
        std::vector<int32_t> starts = {0};
        for (auto l : lens) starts.push_back(starts.back() + static_cast<int32_t>(l));
        std::vector<uint8_t> init(B);
        for (auto& v : init) v = static_cast<uint8_t>(rng() & 1);
        const std::vector<int32_t> lines = random_lines(B, kPoolLines, rng);
        DeviceBuffer q = upload(starts.data(), starts.size() * 4),
                     idx = upload(lines.data(), lines.size() * 4), flags = upload(init.data(), init.size());
        const View qv(q.get(), 0, i32, {B + 1}, {1}), iv(idx.get(), 0, i32, {B}, {1}),
            fv(flags.get(), 0, u8, {B}, {1});
        const double bytes = 2.0 * x_bytes + 2.0 * B * D * kStateLen * 2;  // x in, out, states in + out
        char shape[64];
        if (pattern == 0)
          std::snprintf(shape, sizeof shape, "%s 1 seq", size);
        else if (pattern == 1)
          std::snprintf(shape, sizeof shape, "%s 8 eq", size);
        else
          std::snprintf(shape, sizeof shape, "%s %ld mixed", size, static_cast<long>(B));
        for (const bool channel_last : {false, true}) {
          std::vector<View> xv;
          for (auto& b : xs)
            xv.emplace_back(b.get(), 0, bf16, std::vector<int64_t>{D, T},
                            channel_last ? std::vector<int64_t>{1, D} : std::vector<int64_t>{T, 1});
          for (auto& be : backends)
            try_row(std::string("prefill ") + shape + (channel_last ? " channel-last " : " time ") + be.name,
                    s, [&] {
                      const double us = graph_us(s, ev, nbuf, [&](int i) {
                        deltakern::CausalConv1dVarlenArgs a;
                        a.x = xv[i].get();
                        a.weight = wv.get();
                        a.bias = bv.get();
                        a.conv_states = pv.get();
                        a.query_start_loc = qv.get();
                        a.cache_indices = iv.get();
                        a.has_initial_state = fv.get();
                        a.activation = deltakern::Activation::silu;
                        a.max_seq_len = *std::max_element(lens.begin(), lens.end());
                        a.stream = s;
                        deltakern::Tensor r = be.rt->causal_conv1d_varlen(a);
                      });
                      const double gbs = bytes / us * 1e-3;
                      rows.push_back({"prefill (graph)", shape, channel_last ? "channel-last" : "time",
                                      be.name, us, gbs, 100.0 * gbs / copy_gbs});
                    });
        }
      }
      std::printf("serving prefill %s: copy %.2f us\n", size, copy_us);
      std::fflush(stdout);
    }
}

void decode_rows(std::vector<Backend>& backends, cudaStream_t s, EventTimer& ev, std::mt19937_64& rng,
                 double ceiling_gbs, std::vector<Row>& rows) {
  const DLDataType bf16 = to_dl(ScalarType::bf16), i32 = to_dl(ScalarType::i32);
  constexpr int64_t D = 8192;
  for (const int64_t batch : {1, 8, 64, 256, 1024}) {
    const int64_t lines = std::max(kPoolLines, batch);
    const size_t pool_bytes = static_cast<size_t>(lines * D * kStateLen * 2);
    // Rotate whole pools too: a batch of 1024 touches 50 MB of states a call.
    const int nbuf =
        static_cast<int>(std::clamp<size_t>((size_t{512} << 20) / (pool_bytes + batch * D * 2), 2, 32));
    std::vector<DeviceBuffer> xs, pools, outs;
    for (int i = 0; i < nbuf; ++i) {
      xs.emplace_back(batch * D * 2);
      outs.emplace_back(batch * D * 2);
      pools.emplace_back(pool_bytes);
      fill_random_bf16(xs.back().get(), xs.back().bytes(), s, rng);
      fill_random_bf16(pools.back().get(), pool_bytes, s, rng);
    }
    DeviceBuffer weight(D * kWidth * 2), bias(D * 2);
    fill_random_bf16(weight.get(), weight.bytes(), s, rng);
    fill_random_bf16(bias.get(), bias.bytes(), s, rng);
    const std::vector<int32_t> chosen = random_lines(batch, lines, rng);
    DeviceBuffer idx = upload(chosen.data(), chosen.size() * 4);
    const View wv(weight.get(), 0, bf16, {D, kWidth}, {kWidth, 1}), bv(bias.get(), 0, bf16, {D}, {1});
    const View iv(idx.get(), 0, i32, {batch}, {1});
    // Circular mode: each row's count of tokens seen so far, any value (the ring position is it mod S).
    std::vector<int32_t> seen(batch);
    std::uniform_int_distribution<int32_t> seen_dist(0, 4095);
    for (auto& n : seen) n = seen_dist(rng);
    DeviceBuffer seqlens = upload(seen.data(), seen.size() * 4);
    const View nv(seqlens.get(), 0, i32, {batch}, {1});
    char shape[48];
    std::snprintf(shape, sizeof shape, "batch=%ld D=8192 pool %ld", static_cast<long>(batch),
                  static_cast<long>(lines));
    for (const bool circular : {false, true})
      for (const bool dim_contiguous : {false, true}) {
        std::vector<View> xv, sv, ov;
        for (int i = 0; i < nbuf; ++i) {
          xv.emplace_back(xs[i].get(), 0, bf16, std::vector<int64_t>{batch, D}, std::vector<int64_t>{D, 1});
          ov.emplace_back(outs[i].get(), 0, bf16, std::vector<int64_t>{batch, D}, std::vector<int64_t>{D, 1});
          sv.push_back(pool_view(pools[i].get(), lines, D, dim_contiguous));
        }
        // Shift mode reads and rewrites the whole state row; circular mode reads W-1 entries and writes one.
        const size_t per_call =
            static_cast<size_t>(batch * D * 2 * (circular ? 2 + kWidth : 2 + 2 * kStateLen));
        const std::string layout =
            std::string(dim_contiguous ? "dim-contiguous" : "compact") + (circular ? " circular" : "");
        // The op, and its out-variant into a caller's buffer: a backend with fresh outputs (portable)
        // allocates in every call of the op, which graph replay keeps as nodes between the kernels.
        for (auto& be : backends)
          for (const bool out_variant : {false, true})
            try_row(std::string("decode ") + shape + " " + layout + (out_variant ? " out " : " ") + be.name,
                    s, [&] {
                      const int calls = std::max(nbuf, 32);
                      const double us = graph_us(s, ev, calls, [&](int i) {
                        deltakern::CausalConv1dUpdateArgs a;
                        a.x = xv[i % nbuf].get();
                        a.conv_state = sv[i % nbuf].get();
                        a.weight = wv.get();
                        a.bias = bv.get();
                        a.conv_state_indices = iv.get();
                        if (circular) a.cache_seqlens = nv.get();
                        a.activation = deltakern::Activation::silu;
                        a.stream = s;
                        if (out_variant) {
                          be.rt->causal_conv1d_update_out(a, *ov[i % nbuf].get());
                        } else {
                          deltakern::Tensor r = be.rt->causal_conv1d_update(a);
                        }
                      });
                      const double gbs = per_call / us * 1e-3;
                      rows.push_back({"decode (graph)", shape, layout + (out_variant ? " out" : ""), be.name,
                                      us, gbs, 100.0 * gbs / ceiling_gbs});
                    });
      }
    std::printf("serving decode %s done\n", shape);
    std::fflush(stdout);
  }
}

}  // namespace

void serving_rows(std::vector<Backend>& backends, cudaStream_t stream, EventTimer& ev, std::mt19937_64& rng,
                  double ceiling_gbs, const ServingShapes& shapes, std::vector<Row>& rows) {
  if (shapes.prefill) prefill_rows(backends, stream, ev, rng, shapes, rows);
  if (shapes.decode) decode_rows(backends, stream, ev, rng, ceiling_gbs, rows);
}

}  // namespace dkgpu
