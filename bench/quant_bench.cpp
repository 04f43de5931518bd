// quant_bench: the whole KV materialization step with quantized draft weights against the bf16
// step, in one run, for the Qwen3-8B DFlash draft (hidden 4096, 5 layers, 8 KV heads, head_dim
// 128, rotary 128 neox, K RMSNorm; packed W_kv 10240 x 4096: 84 MB in bf16, 42 MB in FP8/INT8):
//   probe_bf16 / probe_q   a kernel that reads the packed weights once (84 MB / 42 MB) and
//                          nothing else: the weight-read floors of this run, each the faster
//                          of the LSU probe (read_probe.hpp) and, on sm_90 and newer, the TMA
//                          probe (tma_probe.hpp); the JSON keeps both;
//   bf16                   fkv::FusedKVMaterializer over bf16 weights (pool mode): the decode
//                          kernel up to the GPU's crossover, cuBLASLt + epilogue above it;
//   fp8_tensor, fp8_channel, fp8_block, int8_channel
//                          the same over quantized weights read as stored (the decode kernel
//                          converts them in registers, up to 32 tokens; above, FP8 weights go
//                          through cuBLASLt's FP8 GEMM with the activations quantized per token,
//                          INT8 ones through its int8 GEMM with the activations split into two
//                          int8 parts per token up to 512 tokens, then as slices of up to 32 MB
//                          dequantized into scratch and multiplied by cuBLASLt);
//   fp8_t/slices, fp8_t/slice8M, fp8_t/slice16M   fp8_tensor above 64 tokens as dequantized
//                          slices of 32, 8 and 16 MB (MaterializerOptions::fp8_gemm = false);
//   fp8_t/gemm             fp8_tensor up to 64 tokens through the FP8 GEMM (no decode kernel);
//   fp8_t/stream, fp8_c/stream  fp8_tensor, fp8_channel up to 64 tokens through the FP8 stream
//                          GEMM (MaterializerOptions::fp8_stream_gemm; sm_90; no decode kernel);
//   int8/slices            int8_channel without the INT8 GEMM (MaterializerOptions::
//                          int8_gemm_tokens = 0): the decode kernel up to 64 tokens, then slices;
//   int8/gemm              int8_channel up to 64 tokens through the INT8 GEMM (no decode kernel);
//   int8/gemm4k            int8_channel above 64 tokens with the INT8 GEMM up to 4096 tokens.
// at T = 1, 8, 64, 512, 4096 (--tokens). Timing: bench_timing.hpp's time_graph (CUDA-graph
// replays of `calls` back-to-back calls, median per call, warm-up first).
// Cold L2: in a server the draft's weights are evicted between two steps (the target model's
// forward pass reads gigabytes in between), so each timed call reads them from HBM. The 42 MB
// of 8-bit weights would otherwise stay partly in the H200's 50 MB L2 across replays, and the
// figures would be part L2 (earlier runs measured the 8-bit probe at 8.3-13.1 us that way).
// So the bench builds `copies` materializers, each with its own packed weights, enough that one
// round over them reads at least --cold-mb MB (default 160 MB, three L2s: 4 copies of the 8-bit
// weights, 2 of the bf16 ones), and the captured calls go round them; the probes do the same
// over as many copies of their buffer. --cold-mb 0 measures the warm case (one copy).
//
// --sweep: then a cold tiling sweep of the decode kernel alone (fkv::DecodeKV::run_pool) over
// --sweep-weight's 8-bit weights (default fp8_tensor; the same random bytes without the FP8 NaN
// pattern, every scale 1e-3), at T = 8, 16, 32, 64 (--tokens up to 64 when given): the default
// tiling (DecodeTuning all 0, what the materializer launches) and splits {1,2,4,8,16} x pipeline
// {2,4,8} x MMA tiles per warp {1,2,4} (k_slice as make_decode_spec chooses it); from 16 tokens,
// 8-warp tiles of 256 and 512 rows; splits {3,5,6} that do not divide the x stages; and, from 16
// tokens, 8-warp 256-row tiles with 3 or 6 splits and k_slice {128,256,512}; up to 8 tokens, 3
// splits with k_slice {64,128,256}; a tiling
// make_decode_spec refuses is recorded with its error. A DecodeKV keeps its DecodeModel's weight
// pointer, so each tiling gets one DecodeKV per weight copy (the same copies as above), and the
// captured calls go round them as in the table; the copies share the compiled kernels
// (KernelCache's memory level, one NVRTC compile per spec; all tilings are built side by side
// first). Each tiling's pool output (one call into a pool filled with NaN) is checked against the
// default tiling's: more than 4 bf16 ulps of the row's largest element marks the row "mismatch" and
// keeps it out of the best list. Each tiling is timed with --sweep-target-ms (default 15 ms against
// the table's 200: 20 to 40 samples of `calls` calls at these sizes; under 300 tilings, about a
// minute of GPU time with the warm-ups and the output checks). Prints per T the default's median
// and spec and the 5 fastest tilings with their ratio to the default; "sweep" in the JSON holds
// every row. Every T also tries every x stage of a split resident behind mbarriers
// (DecodeTuning::x_resident): from 16 tokens 8-warp 256-row tiles with 3 splits, k_slice
// {128,256} and 2 chunks in flight or 128 and 4, and 512-row tiles with 6 splits; up to 8 tokens
// one-head tiles with 3 splits, k_slice {128,256} and 2 or 4 chunks. From 16 tokens also
// 16-warp 256-row tiles of one MMA tile per warp (3 splits, k_slice 128, 2 or 4 chunks, x staged
// or resident). And at every T the default tiling with x staged or resident, each as bf16 or
// as scaled fp16 (DecodeTuning::x_fp16), for a side-by-side comparison; scaled fp16 x also with
// 16 warps and 4 chunks from 16 tokens, and up to 8 tokens with 2 chunks, or 6 splits.
// --sweep-short: only those and the default.
// --no-table skips the main table (the probes still run); --weights dense,fp8_tensor keeps only
// the rows named (the ratios to bf16 need dense among them, else they are written as 0).
// --act fp16: the table's materializers take fp16 hidden states and an fp16 pool (default bf16;
// the "dense" row is then fp16 weights): 8-bit weights are then converted by the hardware's
// e4m3 -> fp16 instruction instead of bf16's integer sequence, so the two runs show what that
// conversion costs. The sweep stays bf16.
//
// Prints a table and writes JSON (--out): per T and format the median, ratio to the bf16 step
// and to the quantized weight-read probe.
//
//   build-gpu/bench/quant_bench --out quant_bench.json
//   build-gpu/bench/quant_bench --tokens 8,16,32,64 --sweep --out quant_sweep.json
#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
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
#include "tma_probe.hpp"

using json = nlohmann::json;
using fkv_bench::time_graph;
using namespace fkv_bench;  // the draft's shape and data helpers (draft_shape.hpp)

namespace {

// ---- --sweep: the decode kernel's tiling, cold ----------------------------------------------

// What the sweep reads and writes besides the weights.
struct SweepIO {
  CUstream stream = nullptr;
  fkv::DecodeModel model;                   // w_kv set per copy
  std::vector<const void*> weights;         // the FP8 copies, [rows, hidden] bytes each
  const void* x = nullptr;                  // [>= 64, hidden] bf16
  const void* positions = nullptr;          // [>= 64] int64
  fkv::DecodePool pool;                     // flat per-layer pool, slot t for token t
  std::vector<CUdeviceptr> pool_k, pool_v;  // the same buffers, for the output check
  int calls = 20;
  double target_ms = 15;
  double probe_q = 0;       // the 8-bit read floor of this run (us)
  bool short_grid = false;  // --sweep-short: the default and the resident-x and 16-warp tilings
};

// The T tokens' rows of every layer's K and V pool, as written by one call (bf16 bits).
std::vector<std::uint16_t> read_pool(const SweepIO& io, std::int64_t T) {
  const std::size_t n = static_cast<std::size_t>(T * kKV);
  std::vector<std::uint16_t> out(n * 2 * kLayers);
  FKV_CU(cuStreamSynchronize, io.stream);
  for (int l = 0; l < kLayers; ++l) {
    FKV_CU(cuMemcpyDtoH, out.data() + (2 * l) * n, io.pool_k[static_cast<std::size_t>(l)], n * 2);
    FKV_CU(cuMemcpyDtoH, out.data() + (2 * l + 1) * n, io.pool_v[static_cast<std::size_t>(l)],
           n * 2);
  }
  return out;
}

// The sweep: returns every row (see the header comment); prints the summary per T. `flush`
// is called with the rows so far after each T (the JSON is rewritten then).
json tiling_sweep(const SweepIO& io, const std::vector<std::int64_t>& sweep_tokens,
                  const std::function<void(const json&)>& flush) {
  struct Try {
    std::int64_t T;
    fkv::DecodeTuning t;                             // all 0: the default tiling
    std::string refused;                             // make_decode_spec's error
    std::vector<std::unique_ptr<fkv::DecodeKV>> kv;  // one per weight copy
    std::string error;                               // construction (compile, load) error
  };
  int sms = 0;
  FKV_CU(cuDeviceGetAttribute, &sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT,
         fkv::device_handle(0));
  const fkv::KernelSpec e = draft_epilogue(fkv::OutputMode::Pool);
  std::vector<Try> tries;
  for (std::int64_t T : sweep_tokens) {
    tries.push_back({T, {}, {}, {}, {}});
    // The default tiling with x staged or resident, each as bf16 or as scaled fp16
    // (DecodeTuning::x_fp16; bf16 activations), side by side.
    try {
      const fkv::DecodeSpec d = fkv::make_decode_spec(e, kHidden, kLayers, fkv::decode_bucket(T),
                                                      sms, {}, io.model.weight);
      for (int xr : {0, 1})
        for (int xh : {0, 1})
          tries.push_back({T,
                           {d.splits, d.pipeline, d.mma_tiles_per_warp, d.k_slice, d.warps, xr, xh},
                           {},
                           {},
                           {}});
    } catch (const std::exception&) {
      // the default itself is refused: its row says why
    }
    // Every x stage of a split resident at once behind mbarriers (no CTA barrier in the k-loop).
    if (T >= 16) {
      // 16 warps of one MMA tile (256 rows): twice the warps per SM to hide latency, x read
      // from shared memory twice as often per weight byte; x staged or resident.
      for (int p : {2, 4})
        for (int xr : {0, 1}) tries.push_back({T, {3, p, 1, 128, 16, xr}, {}, {}, {}});
      tries.push_back({T, {3, 4, 1, 128, 16, 1, 1}, {}, {}, {}});  // and as scaled fp16
      for (int ksl : {128, 256}) tries.push_back({T, {3, 2, 2, ksl, 8, 1}, {}, {}, {}});
      tries.push_back({T, {3, 4, 2, 128, 8, 1}, {}, {}, {}});
      tries.push_back({T, {6, 2, 4, 128, 8, 1}, {}, {}, {}});
    } else {
      for (int ksl : {128, 256})
        for (int p : {2, 4}) tries.push_back({T, {3, p, 1, ksl, 0, 1}, {}, {}, {}});
      // Scaled fp16 x with 2 chunks in flight, and with 6 shorter splits (a shorter prologue).
      tries.push_back({T, {3, 2, 1, 256, 0, 1, 1}, {}, {}, {}});
      tries.push_back({T, {6, 4, 1, 256, 0, 1, 1}, {}, {}, {}});
    }
    if (io.short_grid) continue;
    for (int sp : {1, 2, 4, 8, 16})
      for (int p : {2, 4, 8})
        for (int mw : {1, 2, 4}) tries.push_back({T, {sp, p, mw, 0}, {}, {}, {}});
    // Larger row tiles (8 warps x 2 or 4 MMA tiles: 256 or 512 rows per CTA), where x is read
    // from L2 fewer times per weight byte (it is read once per row tile).
    if (T >= 16)
      for (int sp : {2, 4, 8})
        for (int p : {2, 4})
          for (int mw : {2, 4}) tries.push_back({T, {sp, p, mw, 0, 8}, {}, {}, {}});
    // Splits that do not divide the x stages (each split a run of whole stages, some one
    // longer): grids closer to a multiple of the SM count.
    for (int sp : {3, 5, 6})
      for (int p : {2, 4})
        for (int mw : {1, 2}) tries.push_back({T, {sp, p, mw, 0}, {}, {}, {}});
    if (T >= 16)
      for (int sp : {3, 6})
        for (int p : {2, 4})
          for (int ksl : {128, 256, 512}) tries.push_back({T, {sp, p, 2, ksl, 8}, {}, {}, {}});
    // Up to 8 tokens: 3 splits with shorter x stages, whose splits differ by less (512-column
    // stages cut 4096 columns into 2, 3 and 3 stages; 128-column ones into 10, 11 and 11).
    if (T <= 8)
      for (int p : {2, 4})
        for (int ksl : {64, 128, 256}) tries.push_back({T, {3, p, 1, ksl}, {}, {}, {}});
  }
  // Refusals first, on the host (the same call DecodeKV's constructor makes for each bucket up
  // to T; a smaller bucket never refuses what a larger one takes).
  for (Try& t : tries) {
    try {
      (void)fkv::make_decode_spec(e, kHidden, kLayers, fkv::decode_bucket(t.T), sms, t.t,
                                  io.model.weight);
    } catch (const std::exception& ex) {
      t.refused = ex.what();
    }
  }

  // Build every tiling's DecodeKVs side by side (each constructor compiles its buckets up to T
  // through the global KernelCache: the first copy compiles, the others are memory hits; one
  // spec asked for by several threads compiles once).
  const auto t_build = std::chrono::steady_clock::now();
  std::atomic<std::size_t> next{0};
  const unsigned workers = std::max(2u, std::min(16u, std::thread::hardware_concurrency()));
  std::vector<std::thread> threads;
  for (unsigned w = 0; w < workers; ++w)
    threads.emplace_back([&] {
      while (true) {
        const std::size_t i = next.fetch_add(1);
        if (i >= tries.size()) break;
        Try& t = tries[i];
        if (!t.refused.empty()) continue;
        try {
          fkv::ensure_context(0);
          for (const void* w_kv : io.weights) {
            fkv::DecodeModel m = io.model;
            m.w_kv = w_kv;
            fkv::DecodeOptions o;
            o.max_tokens = t.T;
            o.stacked = false;
            o.tuning = t.t;
            t.kv.push_back(std::make_unique<fkv::DecodeKV>(m, o));
          }
        } catch (const std::exception& ex) {
          t.error = ex.what();
          t.kv.clear();
        }
      }
    });
  for (std::thread& th : threads) th.join();
  const double build_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t_build).count();
  std::printf("\nsweep: %zu tilings built in %.1f s (%u threads, %zu DecodeKV per tiling)\n",
              tries.size(), build_s, workers, io.weights.size());

  json rows = json::array();
  fkv::DecodeInput in;
  in.hidden = io.x;
  in.positions = io.positions;
  std::vector<std::uint16_t> reference;  // the default tiling's output at this T
  std::string default_spec;
  double default_us = 0;
  const auto t_run = std::chrono::steady_clock::now();
  for (std::size_t i = 0; i < tries.size(); ++i) {
    Try& t = tries[i];
    const bool is_default = t.t.splits == 0;
    in.num_tokens = t.T;
    json r = {{"T", t.T},
              {"default", is_default},
              {"splits", t.t.splits},
              {"pipeline", t.t.pipeline},
              {"mma_tiles_per_warp", t.t.mma_tiles_per_warp}};
    if (is_default) {
      reference.clear();
      default_spec.clear();
      default_us = 0;
    }
    if (!t.refused.empty()) {
      r["refused"] = t.refused;
    } else if (!t.error.empty()) {
      r["error"] = t.error;
    } else {
      try {
        const fkv::DecodeSpec& spec = t.kv.front()->spec_for(t.T, fkv::OutputMode::Pool);
        r["spec"] = spec.canonical();
        r["tiling"] = {{"splits", spec.splits},         {"pipeline", spec.pipeline},
                       {"mw", spec.mma_tiles_per_warp}, {"warps", spec.warps},
                       {"k_slice", spec.k_slice},       {"grid", spec.grid()},
                       {"x_resident", spec.x_resident}, {"x_fp16", spec.x_fp16},
                       {"threads", spec.threads()},     {"shared_bytes", spec.shared_bytes()}};
        // The output check: one call into a pool of NaN, then against the default's output.
        for (int l = 0; l < kLayers; ++l) {
          const std::size_t n = static_cast<std::size_t>(t.T * kKV * 2);
          FKV_CU(cuMemsetD8Async, io.pool_k[static_cast<std::size_t>(l)], 0xff, n, io.stream);
          FKV_CU(cuMemsetD8Async, io.pool_v[static_cast<std::size_t>(l)], 0xff, n, io.stream);
        }
        t.kv.front()->run_pool(in, io.pool, io.stream);
        const std::vector<std::uint16_t> got = read_pool(io, t.T);
        if (is_default) {
          reference = got;
          default_spec = spec.canonical();
        }
        // No reference when the default tiling itself failed: not checked.
        const double ulps = reference.empty() ? 0.0 : ulp_disagreement(got, reference);
        r["ulp_vs_default"] = reference.empty()     ? json(nullptr)
                              : std::isfinite(ulps) ? json(ulps)
                                                    : json("non-finite");
        r["mismatch"] = !(ulps <= 4.0);
        r["same_spec_as_default"] = spec.canonical() == default_spec;

        std::size_t k = 0;
        const json tm = time_graph(
            io.stream, [&](CUstream st) { t.kv[k++ % t.kv.size()]->run_pool(in, io.pool, st); },
            io.calls, io.target_ms);
        const double us = tm["median_us"].get<double>();
        if (is_default) default_us = us;
        r["median_us"] = us;
        r["p10_us"] = tm["p10_us"];
        r["p90_us"] = tm["p90_us"];
        r["samples"] = tm["samples"];
        if (default_us > 0) r["vs_default"] = us / default_us;
        if (io.probe_q > 0) r["vs_probe_q"] = us / io.probe_q;
      } catch (const std::exception& ex) {
        r["error"] = ex.what();
      }
    }
    t.kv.clear();  // frees this tiling's workspaces and modules
    rows.push_back(r);

    // The summary once the last tiling of this T is measured.
    if (i + 1 == tries.size() || tries[i + 1].T != t.T) {
      std::vector<const json*> ok;
      int refused = 0, failed = 0, mismatched = 0;
      const json* def = nullptr;
      for (const json& x : rows) {
        if (x["T"] != t.T) continue;
        if (x["default"].get<bool>()) def = &x;
        if (x.contains("refused")) ++refused;
        if (x.contains("error")) ++failed;
        if (!x.contains("median_us")) continue;
        if (x["mismatch"].get<bool>()) {
          ++mismatched;
          continue;
        }
        if (!x["default"].get<bool>()) ok.push_back(&x);
      }
      std::sort(ok.begin(), ok.end(), [](const json* a, const json* b) {
        return (*a)["median_us"].get<double>() < (*b)["median_us"].get<double>();
      });
      std::printf("\nsweep T=%lld: %zu measured, %d refused, %d failed, %d mismatched\n",
                  static_cast<long long>(t.T), ok.size(), refused, failed, mismatched);
      if (def && def->contains("median_us"))
        std::printf("  default  %8.2f us  (%.3f x probe_q)  %s\n",
                    (*def)["median_us"].get<double>(),
                    (*def)["median_us"].get<double>() / std::max(io.probe_q, 1e-9),
                    (*def)["spec"].get<std::string>().c_str());
      else if (def)
        std::printf("  default  not measured: %s\n",
                    def->value("error", def->value("refused", std::string("?"))).c_str());
      std::printf("  %6s %4s %4s %5s %7s %3s %3s %6s %10s %10s\n", "splits", "P", "mw", "warps",
                  "k_slice", "xr", "xh", "grid", "median_us", "/default");
      for (std::size_t j = 0; j < ok.size() && j < 5; ++j) {
        const json& x = *ok[j];
        const json& tl = x["tiling"];
        std::printf("  %6d %4d %4d %5d %7d %3d %3d %6d %10.2f %10.3f%s\n", tl["splits"].get<int>(),
                    tl["pipeline"].get<int>(), tl["mw"].get<int>(), tl["warps"].get<int>(),
                    tl["k_slice"].get<int>(), tl["x_resident"].get<int>(), tl["x_fp16"].get<int>(),
                    tl["grid"].get<int>(), x["median_us"].get<double>(), x.value("vs_default", 0.0),
                    x["same_spec_as_default"].get<bool>() ? "  (= default)" : "");
      }
      std::fflush(stdout);
      flush(rows);
    }
  }
  std::printf("\nsweep: measured in %.1f s (target %.0f ms per tiling)\n",
              std::chrono::duration<double>(std::chrono::steady_clock::now() - t_run).count(),
              io.target_ms);
  return rows;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"quantized draft weights: the KV materialization step vs bf16 and the read floor"};
  std::string out = "quant_bench.json";
  std::vector<std::int64_t> tokens = {1, 8, 64, 512, 4096};
  double target_ms = 200;
  int calls = 20;
  double cold_mb = 160;
  bool sweep = false, no_table = false, sweep_short = false;
  double sweep_target_ms = 15;
  std::string sweep_weight = "fp8_tensor";
  std::vector<std::string> only;
  std::string act = "bf16";
  app.add_option("--out", out, "JSON output file");
  app.add_option("--act", act, "the table's activation and pool dtype")
      ->check(CLI::IsMember({"bf16", "fp16"}));
  app.add_option("--cold-mb", cold_mb,
                 "weights read per round of copies (MB): at least this much, so that each call "
                 "reads its weights from HBM; 0 = one copy (warm L2)");
  CLI::Option* tokens_opt = app.add_option("--tokens", tokens, "token counts")->delimiter(',');
  app.add_option("--target-ms", target_ms, "about this much GPU time per measurement");
  app.add_option("--calls", calls, "calls per captured graph");
  app.add_flag(
      "--sweep", sweep,
      "then a cold tiling sweep of the decode kernel over 8-bit weights (--sweep-weight) at T = 8, "
      "16, 32, 64 (--tokens up to 64 when given)");
  app.add_option("--sweep-target-ms", sweep_target_ms,
                 "about this much GPU time per tiling of the sweep");
  app.add_option("--sweep-weight", sweep_weight,
                 "the sweep's 8-bit format (fp8_tensor, fp8_channel, fp8_block, int8_channel)");
  app.add_flag("--sweep-short", sweep_short,
               "sweep only the default tiling, the resident x stages and the 16-warp tiles");
  app.add_flag("--no-table", no_table, "skip the main table (the probes still run)");
  app.add_option("--weights", only,
                 "the table's rows by name (dense, fp8_tensor, fp8_channel, fp8_block, "
                 "int8_channel, fp8_t/slice8M, fp8_t/slice16M); default all. Ratios to bf16 need "
                 "dense (bf16) among them")
      ->delimiter(',');
  CLI11_PARSE(app, argc, argv);
  // The sweep's token counts: --tokens up to the decode kernel's 64 when given.
  std::vector<std::int64_t> sweep_tokens = {8, 16, 32, 64};
  if (tokens_opt->count() > 0) {
    sweep_tokens.clear();
    for (std::int64_t t : tokens)
      if (t > 0 && t <= fkv::kDecodeMaxBucket) sweep_tokens.push_back(t);
  }
  try {
    CUcontext ctx = fkv::ensure_context(0);
    fkv::Stream stream;
    CUstream s = stream.get();
    char name[256] = {};
    FKV_CU(cuDeviceGetName, name, sizeof name - 1, fkv::device_handle(0));
    int sms = 0;
    FKV_CU(cuDeviceGetAttribute, &sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT,
           fkv::device_handle(0));
    std::int64_t max_t = *std::max_element(tokens.begin(), tokens.end());
    if (sweep)
      for (std::int64_t t : sweep_tokens) max_t = std::max(max_t, t);
    json doc;
    doc["environment"] = {{"device", name}, {"sms", sms}, {"fkv_version", fkv::kVersion}};
    doc["method"] = "median over CUDA-graph replays of " + std::to_string(calls) +
                    " back-to-back calls, per call (pool mode)";

    // Copies of a weight buffer of `bytes` that one round must cross to read cold_mb.
    auto copies_for = [&](double bytes) {
      return std::max(1, static_cast<int>(std::ceil(cold_mb * 1e6 / bytes)));
    };
    doc["cold_mb"] = cold_mb;
    doc["act"] = act;

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
    const double probe_bf16_ldg = probe_us(d_wd, wd.size() * 2);
    const double probe_q_ldg = probe_us(d_wq, wq.size());
    // The TMA probe (sm_90 and newer): each weight buffer read by TMA copies of one column
    // block (8 or 16 ring stages) or of 2 or 4 (3-D boxes, as many stages as fit); the fastest;
    // 0 where it does not run.
    std::unique_ptr<fkv_bench::TmaProbe> tma;
    if (copts.arch.major >= 9) tma = std::make_unique<fkv_bench::TmaProbe>(ctx, copts);
    auto tma_us = [&](const std::vector<fkv::DeviceBuffer>& w, std::size_t bytes) {
      if (!tma) return 0.0;
      std::vector<CUdeviceptr> copies;
      for (const fkv::DeviceBuffer& b : w) copies.push_back(b.get());
      const int rows = static_cast<int>(wq.size() / kHidden);
      const int cols = static_cast<int>(bytes / rows);
      double best = 1e30;
      for (int kb : {1, 2, 4}) {
        tma->prepare(copies, rows, cols, sms, kb);
        for (int stages : {2, 4, 8, 16}) {
          if ((kb == 1) != (stages >= 8) || tma->shared_bytes(stages) > tma->kMaxShared) continue;
          std::size_t next = 0;
          const json t = time_graph(
              s, [&](CUstream st) { tma->run(next++ % copies.size(), stages, sum.get(), st); },
              calls, target_ms);
          best = std::min(best, t["median_us"].get<double>());
        }
      }
      return best;
    };
    const double probe_bf16_tma = tma_us(d_wd, wd.size() * 2);
    const double probe_q_tma = tma_us(d_wq, wq.size());
    // The weight-read floors: the faster of the two reads.
    auto floor_of = [](double ldg, double tma) { return tma > 0 ? std::min(ldg, tma) : ldg; };
    const double probe_bf16 = floor_of(probe_bf16_ldg, probe_bf16_tma);
    const double probe_q = floor_of(probe_q_ldg, probe_q_tma);
    doc["probe_bf16_us"] = probe_bf16;
    doc["probe_bf16_ldg_us"] = probe_bf16_ldg;
    doc["probe_bf16_tma_us"] = probe_bf16_tma;
    doc["probe_q_us"] = probe_q;
    doc["probe_q_ldg_us"] = probe_q_ldg;
    doc["probe_q_tma_us"] = probe_q_tma;
    doc["copies"] = {{"bf16", copies_d}, {"q", copies_q}};
    std::printf(
        "quant_bench: %s, probe bf16 %.2f us (84 MB; LSU %.2f, TMA %.2f), probe 8-bit %.2f us "
        "(42 MB; LSU %.2f, TMA %.2f); rounds over %d / %d copies\n",
        name, probe_bf16, probe_bf16_ldg, probe_bf16_tma, probe_q, probe_q_ldg, probe_q_tma,
        copies_d, copies_q);

    const fkv::ModelConfig config = draft_config();
    std::vector<std::vector<float>> norms(kLayers, std::vector<float>(kHeadDim, 1.0f));
    auto materializer = [&](fkv::WeightFormat f, int copy, std::int64_t crossover = -1,
                            std::size_t slice = 8u << 20, bool fp8_gemm = true,
                            std::int64_t int8_gemm_tokens = 512, bool stream_gemm = false) {
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
      o.act = o.cache = act == "fp16" ? fkv::DType::FP16 : fkv::DType::BF16;
      o.max_tokens = max_t;
      o.max_position = kMaxPos;
      o.decode_crossover = crossover;
      o.dequant_slice_bytes = slice;
      o.fp8_gemm = fp8_gemm;
      o.int8_gemm_tokens = int8_gemm_tokens;
      o.fp8_stream_gemm = stream_gemm;
      return std::make_unique<fkv::FusedKVMaterializer>(config, kHidden, w, o);
    };
    const fkv::WeightFormat formats[] = {fkv::WeightFormat::Dense, fkv::WeightFormat::Fp8Tensor,
                                         fkv::WeightFormat::Fp8Channel, fkv::WeightFormat::Fp8Block,
                                         fkv::WeightFormat::Int8Channel};
    // Variants of fp8_tensor, each timed on one side of 64 tokens (the quantized decode
    // crossover) only: above it, dequantized slices of 32 (W8A16, the path before the FP8 GEMM),
    // 8 and 16 MB; at or below it, the FP8 GEMM path with no decode kernel.
    struct Variant {
      fkv::WeightFormat format;
      std::string name;
      std::int64_t crossover;
      std::size_t slice;
      bool fp8_gemm = true;
      int side = 0;  // 0: every T; 1: T > 64 only; -1: T <= 64 only
      std::int64_t int8_gemm_tokens = 512;
      bool stream_gemm = false;
    };
    std::vector<Variant> variants;
    for (fkv::WeightFormat f : formats) variants.push_back({f, fkv::to_string(f), -1, 32u << 20});
    variants.push_back({fkv::WeightFormat::Fp8Tensor, "fp8_t/slices", -1, 32u << 20, false, 1});
    variants.push_back({fkv::WeightFormat::Fp8Tensor, "fp8_t/slice8M", 0, 8u << 20, false, 1});
    variants.push_back({fkv::WeightFormat::Fp8Tensor, "fp8_t/slice16M", 0, 16u << 20, false, 1});
    variants.push_back({fkv::WeightFormat::Fp8Tensor, "fp8_t/gemm", 0, 32u << 20, true, -1});
    // INT8 above 32 tokens as before the INT8 GEMM: the decode kernel up to 64 tokens, then
    // dequantized slices (int8_gemm_tokens 0); and the INT8 GEMM from 1 token (no decode kernel).
    variants.push_back({fkv::WeightFormat::Int8Channel, "int8/slices", 64, 32u << 20, true, 0, 0});
    variants.push_back({fkv::WeightFormat::Int8Channel, "int8/gemm", 0, 32u << 20, true, -1});
    // ... and above 64 tokens with the INT8 GEMM up to 4096 tokens (the default stops at 512).
    variants.push_back(
        {fkv::WeightFormat::Int8Channel, "int8/gemm4k", -1, 32u << 20, true, 1, 4096});
    // fp8_tensor and fp8_channel up to 64 tokens through the FP8 stream GEMM (fp8_stream_gemm =
    // true, no decode kernel).
    variants.push_back(
        {fkv::WeightFormat::Fp8Tensor, "fp8_t/stream", 0, 32u << 20, true, -1, 512, true});
    variants.push_back(
        {fkv::WeightFormat::Fp8Channel, "fp8_c/stream", 0, 32u << 20, true, -1, 512, true});
    if (!only.empty()) {
      for (const std::string& n : only)
        if (std::none_of(variants.begin(), variants.end(),
                         [&](const Variant& v) { return v.name == n; }))
          throw std::runtime_error("--weights: no row is named " + n);
      std::erase_if(variants, [&](const Variant& v) {
        return std::find(only.begin(), only.end(), v.name) == only.end();
      });
    }
    json rows = json::array();
    if (!no_table)
      std::printf("\n%6s %-15s %10s %9s %9s\n", "T", "weights", "step_us", "/bf16", "/probe_q");
    for (std::int64_t T : no_table ? std::vector<std::int64_t>{} : tokens) {
      double bf16_us = 0;
      for (const Variant& var : variants) {
        const fkv::WeightFormat f = var.format;
        if ((var.side == 1 && T <= 64) || (var.side == -1 && T > 64)) continue;
        // One materializer per copy of the weights (each packs its own), called in turn.
        std::vector<std::unique_ptr<fkv::FusedKVMaterializer>> mats;
        const int copies = fkv::is_quantized(f) ? copies_q : copies_d;
        for (int c = 0; c < copies; ++c)
          mats.push_back(materializer(f, c, var.crossover, var.slice, var.fp8_gemm,
                                      var.int8_gemm_tokens, var.stream_gemm));
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
        const double vs_bf16 = bf16_us > 0 ? us / bf16_us : 0;  // 0: no bf16 row in this run
        const json row = {
            {"T", T},
            {"weights", var.name},
            {"median_us", us},
            {"decode_path", T <= mat->decode_crossover()},
            {"fp8_gemm", T > mat->decode_crossover() && mat->fp8_gemm()},
            {"fp8_stream_gemm", T > mat->decode_crossover() && T <= 64 && mat->fp8_stream_gemm()},
            {"int8_gemm", T > mat->decode_crossover() && T <= mat->int8_gemm_tokens()},
            {"vs_bf16", vs_bf16},
            {"vs_probe_q", us / probe_q}};
        rows.push_back(row);
        std::printf("%6lld %-15s %10.2f %9.3f %9.3f\n", static_cast<long long>(T), var.name.c_str(),
                    us, vs_bf16, us / probe_q);
      }
    }
    doc["rows"] = rows;
    std::ofstream(out) << doc.dump(2) << "\n";

    if (sweep) {
      if (sweep_tokens.empty()) {
        std::printf("\nsweep: no token count of --tokens is in 1..64; nothing to sweep\n");
        return 0;
      }
      // The decode kernel's inputs as the materializer gives them: K norm weights 1, eps 1e-6,
      // the config's cos/sin table (theta 1e6), an error word.
      SweepIO io;
      io.stream = s;
      io.calls = calls;
      io.target_ms = sweep_target_ms;
      io.short_grid = sweep_short;
      io.probe_q = probe_q;
      const fkv::DeviceBuffer d_norm =
          upload(std::vector<float>(static_cast<std::size_t>(kLayers * kHeadDim), 1.0f));
      fkv::RopeFrequencies freq;
      freq.theta = 1e6;
      const fkv::RopeTable table(freq, kHeadDim, kMaxPos);
      fkv::DeviceBuffer d_cos_sin(table.size_bytes(fkv::DType::FP32));
      fkv::upload(table, fkv::DType::FP32, d_cos_sin.get(), s);
      fkv::DeviceBuffer d_error(sizeof(unsigned int));
      FKV_CU(cuMemsetD8Async, d_error.get(), 0, sizeof(unsigned int), s);
      FKV_CU(cuStreamSynchronize, s);
      io.model.epilogue = draft_epilogue(fkv::OutputMode::Pool);
      io.model.hidden = kHidden;
      io.model.num_layers = kLayers;
      io.model.weight = fkv::parse_weight_format(sweep_weight);
      if (!fkv::is_quantized(io.model.weight))
        throw std::runtime_error("--sweep-weight takes an 8-bit format, not " + sweep_weight);
      // 1e-3 everywhere, more values than any layout of the packed weights' scales needs
      io.model.w_scale = static_cast<const float*>(d_scales.ptr());
      io.model.k_norm = static_cast<const float*>(d_norm.ptr());
      io.model.eps.assign(kLayers, 1e-6f);
      io.model.cos_sin = d_cos_sin.ptr();
      io.model.max_position = kMaxPos;
      io.model.error_flag = static_cast<unsigned int*>(d_error.ptr());
      for (const fkv::DeviceBuffer& w : d_wq) io.weights.push_back(w.ptr());
      io.x = d_x.ptr();
      io.positions = d_pos.ptr();
      io.pool.cache_loc = d_loc.ptr();
      io.pool.k_buffers = pk;
      io.pool.v_buffers = pv;
      io.pool.num_slots = max_t;
      for (int l = 0; l < kLayers; ++l) {
        io.pool_k.push_back(pool[static_cast<std::size_t>(2 * l)].get());
        io.pool_v.push_back(pool[static_cast<std::size_t>(2 * l + 1)].get());
      }
      doc["sweep_method"] = {
          {"weights", fkv::to_string(io.model.weight)},
          {"kernel", "fkv::DecodeKV::run_pool alone (the materializer's decode path)"},
          {"copies", d_wq.size()},
          {"target_ms", sweep_target_ms},
          {"calls", calls},
          {"grid", sweep_short
                       ? "default, then the resident x stages and 16-warp tiles (quant_bench.cpp)"
                       : "default, the resident x stages and 16-warp tiles, then splits "
                         "{1,2,4,8,16} x pipeline {2,4,8} x mma_tiles_per_warp {1,2,4}, "
                         "k_slice by make_decode_spec, and the rest (quant_bench.cpp)"},
          {"check", "pool output vs the default tiling's, <= 4 bf16 ulps of the row max"}};
      doc["sweep_tokens"] = sweep_tokens;
      doc["sweep"] = tiling_sweep(io, sweep_tokens, [&](const json& so_far) {
        doc["sweep"] = so_far;
        std::ofstream(out) << doc.dump(2) << "\n";
      });
      unsigned int flag = 0;
      FKV_CU(cuMemcpyDtoH, &flag, d_error.get(), sizeof flag);
      doc["sweep_error_flag"] = flag;
      if (flag) std::printf("sweep: the kernels flagged skipped tokens (error word %u)\n", flag);
      std::ofstream(out) << doc.dump(2) << "\n";
      std::printf("wrote %s\n", out.c_str());
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "quant_bench: %s\n", e.what());
    return 1;
  }
}
