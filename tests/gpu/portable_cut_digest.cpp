// portable_cut_digest: one digest (FNV-1a over the output's and the state pool's bytes) per
// causal_conv1d_varlen call of a fixed, seeded set, through the public API with the portable
// backend on cuda:0. The CUDA launcher cuts a call from its shape (DELTAKERN_PORTABLE_CUDA_TILING
// forces a cut), and every cut must give the same bits: scripts/gpu-check.sh runs this under
// several cuts (the flat walk and its repair, the per-sequence walk) and compares the digests.
//
// Cases: f32 / f16 / bf16, widths 2..4, time-contiguous and channel-last x, D = 64, 40 sequences
// of mixed lengths (0, 1, W-1 and up to 300 tokens) with padded slots and mixed initial states;
// T a multiple of 16 (16-byte runs, whole sectors) and one not (element-wise paths).
//
//   portable_cut_digest            prints "<case> <digest>" lines
#include <deltakern/deltakern.hpp>
#include <deltakern/runtime.hpp>

#include <cstdio>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "gpu_util.hpp"
#include "host_array.hpp"

using namespace dkgpu;

namespace {

uint64_t fnv1a(const std::vector<unsigned char>& bytes, uint64_t h = 1469598103934665603ull) {
  for (unsigned char b : bytes) h = (h ^ b) * 1099511628211ull;
  return h;
}

HostArray random_array(ScalarType dt, size_t n, std::mt19937_64& rng) {
  std::uniform_real_distribution<double> dist(-1.0, 1.0);
  HostArray a(dt, n);
  for (size_t i = 0; i < n; ++i) a.set(i, dist(rng));
  return a;
}

}  // namespace

int main() {
  unsetenv("DELTAKERN_BACKEND");  // it would win over force_backend
  try {
    deltakern::RuntimeOptions opt;
    opt.force_backend = "portable";
    deltakern::Runtime rt(opt);
    cudaStream_t stream;
    DKGPU_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));

    for (bool aligned_t : {true, false})
      for (ScalarType dt : {ScalarType::f32, ScalarType::f16, ScalarType::bf16})
        for (int W : {2, 3, 4})
          for (bool channel_last : {false, true}) {
            std::mt19937_64 rng(1000 * W + 10 * static_cast<int>(dt) + (channel_last ? 1 : 0) +
                                (aligned_t ? 0 : 5));
            const int64_t D = 64, S = W - 1;
            std::vector<int32_t> lengths{0, 1, W - 1, 2, 17, 300, 5};
            std::uniform_int_distribution<int32_t> len(1, 200);
            while (lengths.size() < 40) lengths.push_back(len(rng));
            int64_t T = std::accumulate(lengths.begin(), lengths.end(), int64_t{0});
            // Whole 16-token multiples, or one token past one.
            const int64_t want = aligned_t ? (T + 15) / 16 * 16 : (T + 15) / 16 * 16 + 1;
            lengths.back() += static_cast<int32_t>(want - T);
            T = want;
            const int64_t B = static_cast<int64_t>(lengths.size());
            const int64_t lines = B + 3;
            std::vector<int32_t> qsl{0}, cache(B);
            std::vector<uint8_t> init(B);
            for (int64_t b = 0; b < B; ++b) {
              qsl.push_back(qsl.back() + lengths[b]);
              cache[b] = b % 9 == 4 ? -1 : static_cast<int32_t>((b * 7) % lines);  // -1: padded
              init[b] = static_cast<uint8_t>(b % 3 != 0);
            }
            const size_t es = size_of(dt);
            HostArray x = random_array(dt, D * T, rng), w = random_array(dt, D * W, rng),
                      bias = random_array(dt, D, rng), states = random_array(dt, lines * D * S, rng);
            DeviceBuffer dx(x.bytes.size()), dw(w.bytes.size()), db(bias.bytes.size()),
                ds(states.bytes.size()), dq(qsl.size() * 4), dc(cache.size() * 4), di(init.size());
            x.upload(dx.get());
            w.upload(dw.get());
            bias.upload(db.get());
            states.upload(ds.get());
            DKGPU_CHECK(cudaMemcpy(dq.get(), qsl.data(), qsl.size() * 4, cudaMemcpyHostToDevice));
            DKGPU_CHECK(cudaMemcpy(dc.get(), cache.data(), cache.size() * 4, cudaMemcpyHostToDevice));
            DKGPU_CHECK(cudaMemcpy(di.get(), init.data(), init.size(), cudaMemcpyHostToDevice));
            const DLDataType dl = to_dl(dt);
            const View xv(dx.get(), 0, dl, {D, T},
                          channel_last ? std::vector<int64_t>{1, D} : std::vector<int64_t>{T, 1});
            const View wv(dw.get(), 0, dl, {D, W}, {W, 1}), bv(db.get(), 0, dl, {D}, {1});
            const View sv(ds.get(), 0, dl, {lines, D, S}, {D * S, S, 1});
            const View qv(dq.get(), 0, to_dl(ScalarType::i32), {B + 1}, {1}),
                cv(dc.get(), 0, to_dl(ScalarType::i32), {B}, {1});
            const View iv(di.get(), 0, to_dl(ScalarType::u8), {B}, {1});

            deltakern::CausalConv1dVarlenArgs a;
            a.x = xv.get();
            a.weight = wv.get();
            a.bias = bv.get();
            a.conv_states = sv.get();
            a.query_start_loc = qv.get();
            a.cache_indices = cv.get();
            a.has_initial_state = iv.get();
            a.activation = deltakern::Activation::silu;
            a.max_seq_len = *std::max_element(lengths.begin(), lengths.end());
            a.stream = stream;
            deltakern::Tensor r = rt.causal_conv1d_varlen(a);
            DKGPU_CHECK(cudaStreamSynchronize(stream));

            // The result is compact in x's layout; read it element by element in (d, t) order, so
            // that the digest does not depend on the layout's byte order.
            std::vector<unsigned char> out_bytes(D * T * es);
            const DLTensor& o = r.dl();
            std::vector<unsigned char> raw(D * T * es);
            DKGPU_CHECK(cudaMemcpy(raw.data(), static_cast<char*>(o.data) + o.byte_offset, raw.size(),
                                   cudaMemcpyDeviceToHost));
            const int64_t sd = o.strides != nullptr ? o.strides[0] : T,
                          st = o.strides != nullptr ? o.strides[1] : 1;
            for (int64_t d = 0; d < D; ++d)
              for (int64_t t = 0; t < T; ++t)
                std::memcpy(&out_bytes[(d * T + t) * es], &raw[(d * sd + t * st) * es], es);
            states.download(ds.get());
            std::printf("%s w%d %s T=%ld %016llx\n", short_name(dt), W,
                        channel_last ? "channel-last" : "time", static_cast<long>(T),
                        static_cast<unsigned long long>(fnv1a(states.bytes, fnv1a(out_bytes))));
          }
    return 0;
  } catch (const std::exception& e) {
    std::printf("portable_cut_digest: %s\n", e.what());
    return 1;
  }
}
