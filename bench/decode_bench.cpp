// decode_bench: the whole KV materialization step at decode sizes, three ways in one run
// (issue 14, item 2), for the Qwen3-8B DFlash draft (hidden 4096, 5 layers, 8 KV heads,
// head_dim 128, rotary 128 neox, K RMSNorm, bf16; packed W_kv 10240 x 4096 = 84 MB):
//   probe    a kernel that reads the 84 MB of packed weights once and nothing else (the
//            weight-read floor of this run; the best of a few grid sizes);
//   cublas   fkv::FusedKVMaterializer: cuBLASLt GEMM into a projection buffer, then the
//            epilogue kernel (pool mode; stacked too);
//   fused    fkv::DecodeKV: one kernel, GEMM + epilogue (pool mode; stacked too).
// at T = 1, 2, 4, 8, 16, 32, 64, 128, 256 (--tokens). Then, unless --no-sweep, a sweep of the
// decode kernel's tiling (splits x pipeline x MMA tiles per warp) at T = 8, 16, 32 and 64.
//
// Timing (bench_timing.hpp, shared with fkv_bench): `calls` back-to-back calls captured in one
// CUDA graph; one sample = one replay between two CUDA events / calls; median over 20..200
// samples (--target-ms each); two warm-up calls and three warm-up replays first. Weights,
// inputs and outputs stay on the device; 84 MB of weights do not fit in L2, so every call reads
// them from HBM.
//
// Checks (the run fails if they fail): the probe's sum of the weight words matches the host's;
// the fused kernel's pool output agrees with the cuBLASLt path's to within 4 units in the last
// place of bf16 relative to the row's largest element (the cuBLASLt path rounds the
// projection to bf16 before the epilogue, the fused kernel does not).
//
// Prints a table and writes JSON (--out): per T the medians, fused / probe, fused / cublas;
// "crossover" = the largest T of the list up to which the fused kernel was no slower than
// cuBLASLt + epilogue at every T (what fkv::decode_crossover wants for this GPU).
//
//   build-gpu/bench/decode_bench --out decode_bench.json
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <future>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "bench_timing.hpp"
#include "draft_shape.hpp"
#include "fkv/compiler.hpp"
#include "fkv/config.hpp"
#include "fkv/decode.hpp"
#include "fkv/driver.hpp"
#include "fkv/fused_kv_materializer.hpp"
#include "fkv/rope.hpp"
#include "fkv/runtime.hpp"
#include "fkv/version.hpp"
#include "fkv/weights.hpp"
#include "read_probe.hpp"

using json = nlohmann::json;
using fkv_bench::Probe;       // the weight-read floor (read_probe.hpp)
using fkv_bench::time_graph;  // the timing method (bench_timing.hpp)
using namespace fkv_bench;    // the draft's shape and data helpers (draft_shape.hpp)

namespace {

void say(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
void say(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  std::vfprintf(stdout, fmt, ap);
  va_end(ap);
  std::fputc('\n', stdout);
  std::fflush(stdout);
}

// ---- the model --------------------------------------------------------------------------------

struct Data {
  std::vector<std::uint16_t> w_host;  // packed [rows, hidden] bf16
  fkv::DeviceBuffer w, k_norm, cos_sin;
  std::vector<float> k_norm_host, eps;
  fkv::DeviceBuffer x, positions, cache_loc;
  std::vector<fkv::DeviceBuffer> pool_k, pool_v, pool_k2, pool_v2;  // fused / cublas outputs
  std::vector<void*> pk, pv, pk2, pv2;
  fkv::DeviceBuffer stacked_k, stacked_v;
  std::int64_t max_tokens = 0, slots = 0;
};

Data make_data(std::int64_t max_tokens, CUstream s) {
  Data d;
  d.max_tokens = max_tokens;
  d.slots = max_tokens;
  Rng rng{1234};
  const double wsig = 1.0 / std::sqrt(double(kHidden));
  d.w_host.resize(static_cast<std::size_t>(kRows * kHidden));
  for (auto& v : d.w_host) v = to_bf16(wsig * rng.normal());
  d.w = upload(d.w_host);
  for (int i = 0; i < kLayers * kHeadDim; ++i)
    d.k_norm_host.push_back(static_cast<float>(1.0 + 0.2 * rng.normal()));
  d.k_norm = upload(d.k_norm_host);
  d.eps.assign(kLayers, static_cast<float>(kEps));
  fkv::RopeFrequencies freq;
  freq.theta = kTheta;
  const fkv::RopeTable table(freq, kRotary, kMaxPos);
  d.cos_sin = fkv::DeviceBuffer(table.size_bytes(fkv::DType::FP32));
  fkv::upload(table, fkv::DType::FP32, d.cos_sin.get(), s);
  std::vector<std::uint16_t> x(static_cast<std::size_t>(max_tokens * kHidden));
  for (auto& v : x) v = to_bf16(rng.normal());
  d.x = upload(x);
  std::vector<std::int64_t> pos, loc;
  for (std::int64_t t = 0; t < max_tokens; ++t) {
    pos.push_back(static_cast<std::int64_t>(rng.next() % kMaxPos));
    loc.push_back(max_tokens - 1 - t);  // distinct slots
  }
  d.positions = upload(pos);
  d.cache_loc = upload(loc);
  const std::size_t pool_bytes = static_cast<std::size_t>(d.slots * kKV * 2);
  for (int l = 0; l < kLayers; ++l) {
    d.pool_k.emplace_back(pool_bytes);
    d.pool_v.emplace_back(pool_bytes);
    d.pool_k2.emplace_back(pool_bytes);
    d.pool_v2.emplace_back(pool_bytes);
    d.pk.push_back(d.pool_k.back().ptr());
    d.pv.push_back(d.pool_v.back().ptr());
    d.pk2.push_back(d.pool_k2.back().ptr());
    d.pv2.push_back(d.pool_v2.back().ptr());
  }
  d.stacked_k = fkv::DeviceBuffer(static_cast<std::size_t>(kLayers * max_tokens * kKV * 2));
  d.stacked_v = fkv::DeviceBuffer(static_cast<std::size_t>(kLayers * max_tokens * kKV * 2));
  FKV_CU(cuStreamSynchronize, s);
  return d;
}

fkv::DecodeModel decode_model(const Data& d) {
  fkv::DecodeModel m;
  m.epilogue = draft_epilogue();
  m.hidden = kHidden;
  m.num_layers = kLayers;
  m.w_kv = d.w.ptr();
  m.k_norm = static_cast<const float*>(d.k_norm.ptr());
  m.eps = d.eps;
  m.cos_sin = d.cos_sin.ptr();
  m.max_position = kMaxPos;
  return m;
}

// The first T tokens and the pool, as the decode kernel takes them.
fkv::DecodeInput decode_input(const Data& d, std::int64_t T) {
  fkv::DecodeInput in;
  in.hidden = d.x.ptr();
  in.num_tokens = T;
  in.positions = d.positions.ptr();
  return in;
}
fkv::DecodePool decode_pool(const Data& d) {
  fkv::DecodePool p;
  p.cache_loc = d.cache_loc.ptr();
  p.k_buffers = d.pk;
  p.v_buffers = d.pv;
  p.num_slots = d.slots;
  return p;
}

// Max |fused - cublas| over the written pool rows of T tokens, in units of bf16's ulp at each
// row's largest element (the rows are heads of one layer and token).
double pool_disagreement(const Data& d, std::int64_t T) {
  double worst = 0;
  for (int l = 0; l < kLayers; ++l)
    for (int which = 0; which < 2; ++which) {
      const CUdeviceptr a = (which ? d.pool_v : d.pool_k)[static_cast<std::size_t>(l)].get();
      const CUdeviceptr b = (which ? d.pool_v2 : d.pool_k2)[static_cast<std::size_t>(l)].get();
      std::vector<std::uint16_t> ha(static_cast<std::size_t>(T * kKV)), hb(ha.size());
      // Token t went to slot max_tokens - 1 - t: the last T slots.
      const std::size_t off = static_cast<std::size_t>((d.slots - T) * kKV * 2);
      FKV_CU(cuMemcpyDtoH, ha.data(), a + off, ha.size() * 2);
      FKV_CU(cuMemcpyDtoH, hb.data(), b + off, hb.size() * 2);
      worst = std::max(worst, ulp_disagreement(ha, hb));
    }
  return worst;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "decode-size KV materialization: weight-read probe vs cuBLASLt + epilogue vs the fused "
      "kernel"};
  std::string out = "decode_bench.json";
  std::vector<std::int64_t> tokens = {1, 2, 4, 8, 16, 32, 64, 128, 256};
  double target_ms = 200;
  int calls = 20;
  bool no_sweep = false;
  std::string weight = "dense";
  app.add_option("--out", out, "JSON output file");
  app.add_option("--tokens", tokens, "token counts")->delimiter(',');
  app.add_option("--target-ms", target_ms, "about this much GPU time per measurement");
  app.add_option("--calls", calls, "calls per captured graph");
  app.add_flag("--no-sweep", no_sweep, "skip the tiling sweep at T = 8 and 64");
  app.add_option("--weight", weight,
                 "weight format of the sweep's kernels (dense, fp8_tensor, fp8_channel, "
                 "fp8_block, int8_channel): random bytes with scales 1e-3");
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
    doc["environment"] = {{"device", name},
                          {"sms", sms},
                          {"fkv_version", fkv::kVersion},
                          {"nvrtc", fkv::nvrtc_version()},
                          {"arch", fkv::Runtime::device_arch(0).name()}};
    doc["shape"] = {{"model", "Qwen3-8B DFlash draft"},
                    {"hidden", kHidden},
                    {"layers", kLayers},
                    {"kv_heads", kHeads},
                    {"head_dim", kHeadDim},
                    {"rotary_dim", kRotary},
                    {"k_norm", "rms"},
                    {"dtype", "bf16"},
                    {"weight_bytes", kRows * kHidden * 2}};
    doc["method"] = "median over CUDA-graph replays of " + std::to_string(calls) +
                    " back-to-back calls, per call";
    say("decode_bench: %s (%d SMs), weights %lld x %d bf16 = %.1f MB", name, sms,
        static_cast<long long>(kRows), kHidden, double(kRows * kHidden * 2) / 1e6);

    Data d = make_data(max_t, s);

    // -- probe: the best of a few grid sizes; its checksum against the host's
    fkv::CompileOptions copts;
    copts.arch = fkv::Runtime::device_arch(0);
    const Probe probe(ctx, copts);
    fkv::DeviceBuffer sum(8);
    const std::size_t wbytes = static_cast<std::size_t>(kRows * kHidden * 2);
    unsigned long long host_sum = 0;
    for (std::size_t i = 0; i + 1 < d.w_host.size(); i += 2)
      host_sum += std::uint64_t(d.w_host[i]) | (std::uint64_t(d.w_host[i + 1]) << 16);
    FKV_CU(cuMemsetD8Async, sum.get(), 0, 8, s);
    probe.run(d.w.get(), wbytes, sum.get(), static_cast<unsigned>(sms * 4), s);
    stream.synchronize();
    unsigned long long dev_sum = 0;
    FKV_CU(cuMemcpyDtoH, &dev_sum, sum.get(), 8);
    if (dev_sum != host_sum)
      throw std::runtime_error("the weight-read probe's checksum is wrong: the probe is broken");
    json best_probe;
    for (int per_sm : {2, 4, 8, 16}) {
      const unsigned blocks = static_cast<unsigned>(sms * per_sm);
      json t = time_graph(
          s, [&](CUstream st) { probe.run(d.w.get(), wbytes, sum.get(), blocks, st); }, calls,
          target_ms);
      t["blocks"] = blocks;
      t["GBps"] = double(wbytes) / (t["median_us"].get<double>() * 1e-6) / 1e9;
      say("  probe, %u blocks: %.2f us (%.0f GB/s)", blocks, t["median_us"].get<double>(),
          t["GBps"].get<double>());
      if (best_probe.is_null() || t["median_us"] < best_probe["median_us"]) best_probe = t;
    }
    doc["probe"] = best_probe;
    const double floor_us = best_probe["median_us"].get<double>();

    // -- both paths
    fkv::MaterializerOptions mo;
    mo.max_tokens = max_t;
    mo.max_position = kMaxPos;
    mo.decode_crossover = 0;  // the cuBLASLt + epilogue path, for comparison
    fkv::MaterializerWeights mw;
    for (int l = 0; l < kLayers; ++l)
      mw.w_kv.push_back(static_cast<const char*>(d.w.ptr()) +
                        std::size_t(l) * 2 * kKV * kHidden * 2);
    for (int l = 0; l < kLayers; ++l)
      mw.k_norm.emplace_back(d.k_norm_host.begin() + l * kHeadDim,
                             d.k_norm_host.begin() + (l + 1) * kHeadDim);
    fkv::FusedKVMaterializer mat(draft_config(), kHidden, mw, mo);
    // The fused kernel reads the same cos/sin table as the materializer (built from the same
    // config), so the two outputs can be compared.
    fkv::DecodeKV dec(decode_model(d));

    json rows = json::array();
    std::int64_t crossover = 0;
    bool fused_ahead = true;
    say("\n%6s %10s %12s %12s %12s %12s %8s %8s %8s", "T", "probe_us", "cublas_pool", "fused_pool",
        "cublas_stk", "fused_stk", "f/probe", "f/cublas", "ulp");
    for (std::int64_t T : tokens) {
      fkv::MaterializerInput mi;
      mi.hidden = d.x.ptr();
      mi.num_tokens = T;
      mi.positions = d.positions.ptr();
      fkv::FusedKVMaterializer::Pool mp;
      mp.cache_loc = d.cache_loc.ptr();
      mp.k_buffers = d.pk2;
      mp.v_buffers = d.pv2;
      mp.num_slots = d.slots;
      const fkv::DecodeInput di = decode_input(d, T);
      const fkv::DecodePool dp = decode_pool(d);
      void* sk[] = {d.stacked_k.ptr()};
      void* sv[] = {d.stacked_v.ptr()};

      json r;
      r["T"] = T;
      r["cublas_pool"] = time_graph(
          s, [&](CUstream st) { mat.materialize_pool(mi, mp, st); }, calls, target_ms);
      r["fused_pool"] = time_graph(
          s, [&](CUstream st) { dec.run_pool(di, dp, st); }, calls, target_ms);
      r["cublas_stacked"] = time_graph(
          s, [&](CUstream st) { mat.materialize_stacked(mi, sk, sv, st); }, calls, target_ms);
      r["fused_stacked"] = time_graph(
          s, [&](CUstream st) { dec.run_stacked(di, d.stacked_k.ptr(), d.stacked_v.ptr(), st); },
          calls, target_ms);
      r["fused_spec"] = dec.spec_for(T, fkv::OutputMode::Pool).canonical();
      stream.synchronize();
      const double ulps = pool_disagreement(d, T);
      r["pool_disagreement_ulp"] = ulps;
      const double cp = r["cublas_pool"]["median_us"], fp = r["fused_pool"]["median_us"];
      r["fused_over_probe"] = fp / floor_us;
      r["fused_over_cublas"] = fp / cp;
      say("%6lld %10.2f %12.2f %12.2f %12.2f %12.2f %8.3f %8.3f %8.2f", static_cast<long long>(T),
          floor_us, cp, fp, r["cublas_stacked"]["median_us"].get<double>(),
          r["fused_stacked"]["median_us"].get<double>(), fp / floor_us, fp / cp, ulps);
      if (!(ulps <= 4.0))
        throw std::runtime_error(
            "the fused kernel's pool output differs from the cuBLASLt path's by " +
            std::to_string(ulps) + " ulp at T=" + std::to_string(T));
      fused_ahead = fused_ahead && fp <= cp;
      if (fused_ahead) crossover = T;
      rows.push_back(r);
      doc["rows"] = rows;
      std::ofstream(out) << doc.dump(2);
    }
    doc["crossover"] = crossover;
    say("\ncrossover (fused no slower than cuBLASLt + epilogue at every T up to it): %lld",
        static_cast<long long>(crossover));
    for (const json& r : rows)
      if (r["T"] == 8 || r["T"] == 64)
        say("target T=%lld: fused %.2f us = %.3f x probe (target <= 1.25)",
            static_cast<long long>(r["T"].get<std::int64_t>()),
            r["fused_pool"]["median_us"].get<double>(), r["fused_over_probe"].get<double>());
    std::ofstream(out) << doc.dump(2);

    // -- tiling sweep (pool mode), with --weight's format
    if (!no_sweep) {
      const fkv::WeightFormat wf = fkv::parse_weight_format(weight);
      fkv::DecodeModel sweep_model = decode_model(d);
      fkv::DeviceBuffer wq, wscale;
      if (fkv::is_quantized(wf)) {
        Rng qrng{99};
        std::vector<std::uint8_t> bytes(static_cast<std::size_t>(kRows * kHidden));
        for (auto& b : bytes) {
          b = static_cast<std::uint8_t>(qrng.next() >> 56);
          if ((b & 0x7f) == 0x7f) b &= 0xfe;  // no FP8 NaN
        }
        wq = upload(bytes);
        wscale = upload(std::vector<float>(
            static_cast<std::size_t>(fkv::layer_scale_count(wf, kRows, kHidden)), 1e-3f));
        sweep_model.w_kv = wq.ptr();
        sweep_model.weight = wf;
        sweep_model.w_scale = static_cast<const float*>(wscale.ptr());
      }
      doc["sweep_weight"] = fkv::to_string(wf);
      const auto chunk = fkv::is_quantized(wf) ? "64-column" : "32-column";
      say("\nsweep weights: %s (pipeline counts %s chunks)", fkv::to_string(wf).c_str(), chunk);
      struct Try {
        std::int64_t T;
        fkv::DecodeTuning t;
      };
      std::vector<Try> tries;
      for (std::int64_t T : {8, 16})
        for (int sp : {2, 4, 8, 16})
          for (int p : {2, 4, 8}) tries.push_back({T, {sp, p, 1, 0}});
      for (std::int64_t T : {32, 64})
        for (int sp : {1, 2, 4, 8})
          for (int mw : {1, 2})
            for (int p : {2, 4}) tries.push_back({T, {sp, p, mw, 0}});
      // Compile every variant side by side first (each DecodeKV compiles in its constructor).
      std::vector<std::future<std::unique_ptr<fkv::DecodeKV>>> built;
      for (const Try& t : tries)
        built.push_back(std::async(std::launch::async, [&, t] {
          fkv::ensure_context(0);
          fkv::DecodeOptions o;
          o.max_tokens = t.T;
          o.stacked = false;
          o.tuning = t.t;
          return std::make_unique<fkv::DecodeKV>(sweep_model, o);
        }));
      json sweep = json::array();
      say("\nsweep (pool): T splits pipeline mw -> us");
      for (std::size_t i = 0; i < tries.size(); ++i) {
        json r = {{"T", tries[i].T},
                  {"splits", tries[i].t.splits},
                  {"pipeline", tries[i].t.pipeline},
                  {"mma_tiles_per_warp", tries[i].t.mma_tiles_per_warp}};
        try {
          std::unique_ptr<fkv::DecodeKV> k = built[i].get();
          const fkv::DecodeInput di = decode_input(d, tries[i].T);
          const fkv::DecodePool dp = decode_pool(d);
          r["fused_pool"] = time_graph(
              s, [&](CUstream st) { k->run_pool(di, dp, st); }, calls, target_ms);
          r["spec"] = k->spec_for(tries[i].T, fkv::OutputMode::Pool).canonical();
          say("  %3lld %3d %3d %3d -> %8.2f", static_cast<long long>(tries[i].T), tries[i].t.splits,
              tries[i].t.pipeline, tries[i].t.mma_tiles_per_warp,
              r["fused_pool"]["median_us"].get<double>());
        } catch (const std::exception& e) {
          r["error"] = e.what();
          say("  %3lld %3d %3d %3d -> not built: %s", static_cast<long long>(tries[i].T),
              tries[i].t.splits, tries[i].t.pipeline, tries[i].t.mma_tiles_per_warp, e.what());
        }
        sweep.push_back(r);
      }
      doc["sweep"] = sweep;
    }
    std::ofstream(out) << doc.dump(2);
    say("\nwrote %s", out.c_str());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "decode_bench: %s\n", e.what());
    return 1;
  }
  return 0;
}
