// quant_bench: the whole KV materialization step with quantized draft weights against the bf16
// step, in one run, for the Qwen3-8B DFlash draft (hidden 4096, 5 layers, 8 KV heads, head_dim
// 128, rotary 128 neox, K RMSNorm; packed W_kv 10240 x 4096: 84 MB in bf16, 42 MB in FP8/INT8):
//   probe_bf16 / probe_q   a kernel that reads the packed weights once (84 MB / 42 MB) and
//                          nothing else: the weight-read floors of this run;
//   bf16                   fkv::FusedKVMaterializer over bf16 weights (pool mode): the decode
//                          kernel up to the GPU's crossover, cuBLASLt + epilogue above it;
//   fp8_tensor, fp8_channel, fp8_block, int8_channel
//                          the same over quantized weights read as stored (the decode kernel
//                          converts them in registers, up to 64 tokens; above, slices of up to
//                          32 MB are dequantized into scratch and multiplied by cuBLASLt);
//   fp8_t/slice8M, fp8_t/slice16M   fp8_tensor above 64 tokens with other slice sizes.
// at T = 1, 8, 64, 512, 4096 (--tokens). Timing: bench_timing.hpp's time_graph (CUDA-graph
// replays of `calls` back-to-back calls, median per call, warm-up first).
// Cold L2: in a server the draft's weights are evicted between two steps (the target model's
// forward pass reads gigabytes in between), so each timed call reads them from HBM. The 42 MB
// of 8-bit weights would otherwise stay partly in the H200's 50 MB L2 across replays, and the
// figures would be part L2 (earlier runs measured the 8-bit probe at 8.3-13.1 us that way).
// So the bench builds `copies` materializers, each with its own packed weights, enough that one
// round over them reads at least --cold-bytes (default 160 MB, three L2s), and the captured
// calls go round them; the probes do the same over as many copies of their buffer.
// --cold-bytes 0 measures the warm case (one copy).
//
// Prints a table and writes JSON (--out): per T and format the median, ratio to the bf16 step
// and to the quantized weight-read probe.
//
//   build-gpu/bench/quant_bench --out quant_bench.json
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "bench_timing.hpp"
#include "fkv/compiler.hpp"
#include "fkv/config.hpp"
#include "fkv/driver.hpp"
#include "fkv/fused_kv_materializer.hpp"
#include "fkv/runtime.hpp"
#include "fkv/version.hpp"
#include "fkv/weights.hpp"
#include "read_probe.hpp"

using json = nlohmann::json;
using fkv_bench::time_graph;

namespace {

constexpr int kHidden = 4096, kLayers = 5, kHeads = 8, kHeadDim = 128;
constexpr std::int64_t kMaxPos = 4096;
constexpr std::int64_t kKV = std::int64_t{kHeads} * kHeadDim;
constexpr std::int64_t kRows = std::int64_t{kLayers} * 2 * kKV;

struct Rng {
  std::uint64_t s;
  std::uint64_t next() {
    std::uint64_t z = (s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
};

template <class T>
fkv::DeviceBuffer upload(const std::vector<T>& host) {
  fkv::DeviceBuffer b(std::max<std::size_t>(host.size() * sizeof(T), 256));
  FKV_CU(cuMemcpyHtoD, b.get(), host.data(), host.size() * sizeof(T));
  FKV_CU(cuCtxSynchronize);
  return b;
}

fkv::ModelConfig draft_config() {
  json layer = {{"num_kv_heads", kHeads},
                {"head_dim", kHeadDim},
                {"rotary_dim", kHeadDim},
                {"is_neox_style", true},
                {"rope_theta", 1e6},
                {"k_norm", "rms"},
                {"eps", 1e-6}};
  json doc = {{"hidden_size", kHidden},
              {"max_position_embeddings", kMaxPos},
              {"fkv", {{"layers", json::array()}}}};
  for (int l = 0; l < kLayers; ++l) doc["fkv"]["layers"].push_back(layer);
  return fkv::ModelConfig::from_json(doc, "qwen3-8b-dflash-draft");
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"quantized draft weights: the KV materialization step vs bf16 and the read floor"};
  std::string out = "quant_bench.json";
  std::vector<std::int64_t> tokens = {1, 8, 64, 512, 4096};
  double target_ms = 200;
  int calls = 20;
  double cold_mb = 160;
  app.add_option("--out", out, "JSON output file");
  app.add_option("--cold-mb", cold_mb,
                 "weights read per round of copies (MB): at least this much, so that each call "
                 "reads its weights from HBM; 0 = one copy (warm L2)");
  app.add_option("--tokens", tokens, "token counts")->delimiter(',');
  app.add_option("--target-ms", target_ms, "about this much GPU time per measurement");
  app.add_option("--calls", calls, "calls per captured graph");
  CLI11_PARSE(app, argc, argv);
  try {
    CUcontext ctx = fkv::ensure_context(0);
    fkv::Stream stream;
    CUstream s = stream.get();
    char name[256] = {};
    FKV_CU(cuDeviceGetName, name, sizeof name - 1, fkv::device_handle(0));
    int sms = 0;
    FKV_CU(cuDeviceGetAttribute, &sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT,
           fkv::device_handle(0));
    const std::int64_t max_t = *std::max_element(tokens.begin(), tokens.end());
    json doc;
    doc["environment"] = {{"device", name}, {"sms", sms}, {"fkv_version", fkv::kVersion}};
    doc["method"] = "median over CUDA-graph replays of " + std::to_string(calls) +
                    " back-to-back calls, per call (pool mode)";

    // Copies of a weight buffer of `bytes` that one round must cross to read cold_mb.
    auto copies_for = [&](double bytes) {
      return std::max(1, static_cast<int>(std::ceil(cold_mb * 1e6 / bytes)));
    };
    doc["cold_mb"] = cold_mb;

    Rng rng{4321};
    // Random bytes serve every format: FP8 bytes whose exponent field is all ones are NaN, so
    // they are cleared; INT8 takes any byte.
    std::vector<std::uint8_t> wq(static_cast<std::size_t>(kRows * kHidden));
    for (auto& b : wq) {
      b = static_cast<std::uint8_t>(rng.next() >> 56);
      if ((b & 0x7f) == 0x7f) b &= 0xfe;
    }
    std::vector<std::uint16_t> wd(wq.size());
    for (auto& h : wd) h = static_cast<std::uint16_t>(0x3c00 + ((rng.next() >> 60) & 0xff));
    const int copies_q = copies_for(double(wq.size())), copies_d = copies_for(2.0 * wd.size());
    std::vector<fkv::DeviceBuffer> d_wq, d_wd;  // copies of the same bytes
    for (int c = 0; c < copies_q; ++c) d_wq.push_back(upload(wq));
    for (int c = 0; c < copies_d; ++c) d_wd.push_back(upload(wd));
    std::vector<float> scales(static_cast<std::size_t>(kRows * kHidden / 128 / 128 + kRows), 1e-3f);
    const fkv::DeviceBuffer d_scales = upload(scales);
    std::vector<std::uint16_t> x(static_cast<std::size_t>(max_t * kHidden));
    for (auto& h : x) h = static_cast<std::uint16_t>(0x3c00 + ((rng.next() >> 60) & 0xff));
    const fkv::DeviceBuffer d_x = upload(x);
    std::vector<std::int64_t> pos, loc;
    for (std::int64_t t = 0; t < max_t; ++t) {
      pos.push_back(static_cast<std::int64_t>(rng.next() % kMaxPos));
      loc.push_back(t);
    }
    const fkv::DeviceBuffer d_pos = upload(pos), d_loc = upload(loc);
    std::vector<fkv::DeviceBuffer> pool;
    std::vector<void*> pk, pv;
    for (int l = 0; l < 2 * kLayers; ++l) {
      pool.emplace_back(static_cast<std::size_t>(max_t * kKV * 2));
      (l % 2 ? pv : pk).push_back(pool.back().ptr());
    }

    // Weight-read probes: 84 MB (bf16) and 42 MB (one byte per weight).
    fkv::CompileOptions copts;
    copts.arch = fkv::Runtime::device_arch(0);
    const fkv_bench::Probe probe(ctx, copts);
    fkv::DeviceBuffer sum(8);
    auto probe_us = [&](const std::vector<fkv::DeviceBuffer>& w, std::size_t bytes) {
      double best = 1e30;
      for (int per_sm : {2, 4, 8, 16}) {
        const unsigned blocks = static_cast<unsigned>(sms * per_sm);
        std::size_t next = 0;
        const json t = time_graph(
            s,
            [&](CUstream st) {
              probe.run(w[next++ % w.size()].get(), bytes, sum.get(), blocks, st);
            },
            calls, target_ms);
        best = std::min(best, t["median_us"].get<double>());
      }
      return best;
    };
    const double probe_bf16 = probe_us(d_wd, wd.size() * 2);
    const double probe_q = probe_us(d_wq, wq.size());
    doc["probe_bf16_us"] = probe_bf16;
    doc["probe_q_us"] = probe_q;
    doc["copies"] = {{"bf16", copies_d}, {"q", copies_q}};
    std::printf(
        "quant_bench: %s, probe bf16 %.2f us (84 MB), probe 8-bit %.2f us (42 MB); "
        "rounds over %d / %d copies\n",
        name, probe_bf16, probe_q, copies_d, copies_q);

    const fkv::ModelConfig config = draft_config();
    std::vector<std::vector<float>> norms(kLayers, std::vector<float>(kHeadDim, 1.0f));
    auto materializer = [&](fkv::WeightFormat f, int copy, std::int64_t crossover = -1,
                            std::size_t slice = 8u << 20) {
      fkv::MaterializerWeights w;
      w.format = f;
      w.k_norm = norms;
      const std::int64_t per = fkv::layer_scale_count(f, 2 * kKV, kHidden);
      for (int l = 0; l < kLayers; ++l) {
        if (fkv::is_quantized(f)) {
          w.w_kv.push_back(static_cast<const char*>(d_wq[copy].ptr()) + l * 2 * kKV * kHidden);
          w.w_scale.push_back(static_cast<const float*>(d_scales.ptr()) + l * per);
        } else {
          w.w_kv.push_back(static_cast<const char*>(d_wd[copy].ptr()) + l * 2 * kKV * kHidden * 2);
        }
      }
      fkv::MaterializerOptions o;
      o.max_tokens = max_t;
      o.max_position = kMaxPos;
      o.decode_crossover = crossover;
      o.dequant_slice_bytes = slice;
      return std::make_unique<fkv::FusedKVMaterializer>(config, kHidden, w, o);
    };
    const fkv::WeightFormat formats[] = {fkv::WeightFormat::Dense, fkv::WeightFormat::Fp8Tensor,
                                         fkv::WeightFormat::Fp8Channel, fkv::WeightFormat::Fp8Block,
                                         fkv::WeightFormat::Int8Channel};
    // Variants of fp8_tensor: dequantized slices of 8 and 16 MB (the default is 32 MB).
    struct Variant {
      fkv::WeightFormat format;
      std::string name;
      std::int64_t crossover;
      std::size_t slice;
    };
    std::vector<Variant> variants;
    for (fkv::WeightFormat f : formats) variants.push_back({f, fkv::to_string(f), -1, 32u << 20});
    variants.push_back({fkv::WeightFormat::Fp8Tensor, "fp8_t/slice8M", 0, 8u << 20});
    variants.push_back({fkv::WeightFormat::Fp8Tensor, "fp8_t/slice16M", 0, 16u << 20});
    json rows = json::array();
    std::printf("\n%6s %-15s %10s %9s %9s\n", "T", "weights", "step_us", "/bf16", "/probe_q");
    for (std::int64_t T : tokens) {
      double bf16_us = 0;
      for (const Variant& var : variants) {
        const fkv::WeightFormat f = var.format;
        if (var.crossover > 0 && T > var.crossover) continue;
        if (var.crossover == 0 && T <= 64) continue;
        // One materializer per copy of the weights (each packs its own), called in turn.
        std::vector<std::unique_ptr<fkv::FusedKVMaterializer>> mats;
        const int copies = fkv::is_quantized(f) ? copies_q : copies_d;
        for (int c = 0; c < copies; ++c)
          mats.push_back(materializer(f, c, var.crossover, var.slice));
        const auto& mat = mats.front();
        fkv::MaterializerInput in;
        in.hidden = d_x.ptr();
        in.num_tokens = T;
        in.positions = d_pos.ptr();
        fkv::FusedKVMaterializer::Pool p;
        p.cache_loc = d_loc.ptr();
        p.k_buffers = pk;
        p.v_buffers = pv;
        p.num_slots = max_t;
        std::size_t next = 0;
        const json t = time_graph(
            s, [&](CUstream st) { mats[next++ % mats.size()]->materialize_pool(in, p, st); }, calls,
            target_ms);
        const double us = t["median_us"].get<double>();
        if (f == fkv::WeightFormat::Dense) bf16_us = us;
        const json row = {{"T", T},
                          {"weights", var.name},
                          {"median_us", us},
                          {"decode_path", T <= mat->decode_crossover()},
                          {"vs_bf16", us / bf16_us},
                          {"vs_probe_q", us / probe_q}};
        rows.push_back(row);
        std::printf("%6lld %-15s %10.2f %9.3f %9.3f\n", static_cast<long long>(T), var.name.c_str(),
                    us, us / bf16_us, us / probe_q);
      }
    }
    doc["rows"] = rows;
    std::ofstream(out) << doc.dump(2) << "\n";
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "quant_bench: %s\n", e.what());
    return 1;
  }
}
