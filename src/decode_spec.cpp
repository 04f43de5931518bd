// decode_spec: the decode-size kernel's specialization (DecodeSpec), its tiling, its source
// (templates/fused_proj_kv.cu) and the measured crossover that decides when it is used. The
// host object that loads and launches it is in decode.cpp.
#include <algorithm>
#include <cctype>
#include <cstring>
#include <sstream>

#include "fkv/codegen.hpp"
#include "fkv/decode.hpp"
#include "fkv/driver.hpp"
#include "fkv/errors.hpp"
#include "fkv/runtime.hpp"
#include "fkv/version.hpp"

namespace fkv {
namespace {

constexpr const char* kTemplate = "fused_proj_kv.cu";
constexpr const char* kHeaders[] = {"fkv_types.cuh",
                                    "decode_params.h"};  // as the template includes them

// Rows of one CTA tile: whole heads, 16-row MMA tiles, about 128 rows where head_dim allows.
int tile_rows_for(int head_dim, int units) {
  int per = 1;
  if (head_dim < 128 && 128 % head_dim == 0) per = 128 / head_dim;
  while (per > 1 && units % per != 0) per /= 2;
  return head_dim * per;
}

// One x stage: bucket rows of k_slice activations, padded as the template pads them (16 bytes for
// 8-bit weights, 64 for dense ones: conflict-free fragment loads).
int stage_bytes(int bucket, int k_slice, WeightFormat weight) {
  return bucket * (2 * k_slice + (is_quantized(weight) ? 16 : 64));
}

// The template's WQ (weight storage) and WS (scale layout) arguments.
int weight_code(WeightFormat w) {
  if (!is_quantized(w)) return 0;
  return w == WeightFormat::Int8Channel ? 2 : 1;
}
int scale_code(WeightFormat w) {
  switch (scale_layout(w)) {
    case ScaleLayout::None:
      return 0;
    case ScaleLayout::PerLayer:
      return 1;
    case ScaleLayout::PerRow:
      return 2;
    case ScaleLayout::Block128:
      return 3;
  }
  return 0;
}

// The cold-L2 sweeps over FP8 weights of the Qwen3-8B draft's shape (10240 x 4096 on 132 SMs;
// quant_bench --sweep, docs/performance.md) against the general rules' tiling (4 splits,
// one-head tiles of 128 rows):
//   - 8 tokens: the most splits whose CTAs number at most twice the SMs (3: 240 CTAs; per-tensor
//     17.8 against 18.4 us, 16.5 against 16.6 at one token), with 4 chunks in flight and x
//     stages of 256 columns (a later sweep: per-tensor 16.0 against 17.0 us with the general
//     rules' 512-column stages; block scales 16.5 against 18.4 with 2 chunks and 512 columns);
//   - 16, 32 and 64 tokens: tiles of 256 rows (now 16 warps x 1 MMA tile, below; before,
//     8 warps x 2: the hidden states are read from L2 half as often as with one-head tiles) and
//     the most splits whose CTAs do not outnumber the SMs (3: 120 CTAs; splits need not divide
//     the x stages), 2 chunks in flight and x stages of 128 columns. Per-tensor at 64 tokens 36.1
//     against 49.2 us; at 16 and 32, two sweeps on 2026-12-02 against the tilings chosen before (2
//     MMA tiles per warp at 16; 4 chunks and 512-column stages at 32): 17.96 and 17.99
//     against 18.29 and 18.41 us, 22.79 and 22.83 against 24.01 and 24.15. Block scales: the same
//     from 32 tokens (25.5 against 33.4, 37.1 against 51.8); at 16 the general rules (within 3% of
//     the sweep's best then).
DecodeTuning quantized_tiling(const KernelSpec& epilogue, int num_layers, int token_bucket,
                              int sm_count, WeightFormat weight) {
  DecodeTuning t;
  if (!is_quantized(weight)) return t;
  const int rows = num_layers * 2 * epilogue.num_kv_heads * epilogue.head_dim;
  const int sms = std::max(sm_count, 1);
  if (token_bucket <= 8) {
    const int tiles = rows / tile_rows_for(epilogue.head_dim, rows / epilogue.head_dim);
    t.splits = std::max(1, 2 * sms / std::max(tiles, 1));
    t.pipeline = 4;
    t.mma_tiles_per_warp = 1;
    t.k_slice = 256;
    // INT8 weights: x re-encoded as scaled fp16 stage by stage (bf16 activations; fp16 ones
    // fall back to the same tiling without it, below), so that a pair of weights converts in two
    // instructions instead of five. The eleventh session's sweep (2026-12-03) measured 14.94
    // and 15.59 us at 1 and 8 tokens against 15.21 and 15.69; FP8 weights gained at one token
    // (14.48 against 14.65) but lost at eight (15.14 against 15.04) and keep bf16 x.
    t.x_fp16 = weight == WeightFormat::Int8Channel ? 1 : 0;
    return t;
  }
  // Block-scaled weights at 16 tokens took the general rules until the ninth session's sweep
  // (2026-12-03, with the four-instruction conversion): 16 warps x 1 as below measured 17.01 us
  // against their 18.63.
  t.pipeline = 2;
  t.k_slice = 128;
  t.splits = std::max(1, sms / std::max(rows / 256, 1));
  // 64 tokens: 8 warps of two MMA tiles, x staged. 16 warps of one (below) have 128 registers
  // per thread, which the block sums exceed, and since the four-instruction e4m3 -> bf16
  // conversion (fkv_types.cuh) the other formats too by a few bytes of spills; and the sweep of
  // 2026-12-03 (ninth session) measured per-tensor 31.03 us here against 31.98 for 16 warps
  // with x resident (the fifth session: 32.44 against 31.78, with the five-instruction one).
  if (token_bucket == 64) {
    t.warps = 8;
    t.mma_tiles_per_warp = 2;
    return t;
  }
  // 16 warps of one MMA tile each (2026-12-02, fifth session, after the x rows' pad fix:
  // 17.45 and 20.33 us at 16 and 32 tokens against 18.84 and 23.73 for 8 warps of two; twice
  // the warps hide twice the latency), and at 32 tokens every x stage of the split resident
  // behind mbarriers (20.51 and 20.37 us in two sweeps, where the staged x measured 20.33 and
  // then 22.09).
  t.warps = 16;
  t.mma_tiles_per_warp = 1;
  t.x_resident = token_bucket >= 32 ? 1 : 0;
  return t;
}

}  // namespace

int decode_bucket(std::int64_t num_tokens) {
  if (num_tokens <= 0) throw ArgumentError("decode_bucket: num_tokens must be positive");
  for (int b = 8; b < kDecodeMaxBucket; b *= 2)
    if (num_tokens <= b) return b;
  return kDecodeMaxBucket;
}

// ---- spec ---------------------------------------------------------------------------------------

int DecodeSpec::shared_bytes() const {
  const int tail = 4 * token_bucket * tile_rows();            // the summed partials [T, rows]
  const int most = (hidden / k_slice + splits - 1) / splits;  // x stages of the longest split
  const int stages = x_resident ? most : most > 1 ? 2 : 1;
  return std::max(stages * stage_bytes(token_bucket, k_slice, weight), tail);
}

std::size_t DecodeSpec::workspace_bytes() const {
  return static_cast<std::size_t>(splits) * token_bucket * static_cast<std::size_t>(rows()) *
         sizeof(float);
}

std::string DecodeSpec::canonical() const {
  std::ostringstream o;
  o << "decode;hidden=" << hidden << ";L=" << num_layers << ";" << epilogue.canonical()
    << ";tb=" << token_bucket << ";S=" << splits << ";warps=" << warps
    << ";mw=" << mma_tiles_per_warp << ";P=" << pipeline << ";ksl=" << k_slice;
  if (x_resident) o << ";xr=1";
  if (x_fp16) o << ";xh=1";
  if (is_quantized(weight)) o << ";w=" << to_string(weight);
  return o.str();
}

std::string DecodeSpec::short_name() const {
  const KernelSpec& e = epilogue;
  std::ostringstream o;
  o << "fkvdec_h" << e.num_kv_heads << "_d" << e.head_dim << "_r" << e.rotary_dim
    << (e.neox ? "_neox" : "_gptj") << k_norm_suffix(e.k_norm) << "_" << to_string(e.act) << "_"
    << to_string(e.cache) << "_" << to_string(e.mode) << "_L" << num_layers << "_x" << hidden
    << "_tb" << token_bucket;
  if (is_quantized(weight)) o << "_" << to_string(weight);
  return o.str();
}

std::string decode_unsupported(const KernelSpec& e, int hidden, int num_layers) {
  if (e.act != DType::BF16 && e.act != DType::FP16)
    return "the decode kernel takes bf16 or fp16 activations (tensor-core MMA), not " +
           to_string(e.act);
  if (e.head_dim <= 0 || e.head_dim % 16 != 0)
    return "head_dim " + std::to_string(e.head_dim) +
           " is not a multiple of 16 (the MMA tile height)";
  if (hidden <= 0 || hidden % 256 != 0)
    return "hidden size " + std::to_string(hidden) + " is not a multiple of 256";
  if (num_layers < 1 || num_layers > FKV_DECODE_MAX_LAYERS)
    return std::to_string(num_layers) + " layers: the decode kernel covers 1.." +
           std::to_string(FKV_DECODE_MAX_LAYERS) + " layers in one launch";
  if (e.debug_checks) return "device-side debug checks are only in the epilogue-only kernel";
  if (e.paged || e.kv_bias)
    return "paged layouts and K/V bias are only in the epilogue-only kernel";
  return "";
}

std::string decode_unsupported(const KernelSpec& e, int hidden, int num_layers,
                               WeightFormat weight) {
  if (std::string why = decode_unsupported(e, hidden, num_layers); !why.empty()) return why;
  if (weight == WeightFormat::Fp8Block && (e.num_kv_heads * e.head_dim) % 64 != 0)
    return "128 x 128 weight blocks need num_kv_heads * head_dim a multiple of 64 (each layer's K "
           "and V rows whole blocks), got " +
           std::to_string(e.num_kv_heads * e.head_dim);
  return "";
}

void DecodeSpec::check() const {
  epilogue.check();
  if (const std::string why = decode_unsupported(epilogue, hidden, num_layers, weight);
      !why.empty())
    throw UnsupportedError(why);
  if (token_bucket < 8 || token_bucket > kDecodeMaxBucket || token_bucket % 8 != 0)
    throw ArgumentError("decode token bucket must be a multiple of 8 in [8, 64], got " +
                        std::to_string(token_bucket));
  const int mt = tile_rows();
  auto bad = [&](const std::string& what) {
    throw ArgumentError("decode tiling " + canonical() + ": " + what);
  };
  if (warps < 1 || warps > 16 || mma_tiles_per_warp < 1 || pipeline < 1 || splits < 1 ||
      k_slice < 32 || x_resident < 0 || x_resident > 1 || x_fp16 < 0 || x_fp16 > 1)
    bad("out of range");
  if (x_fp16 && (!is_quantized(weight) || epilogue.act != DType::BF16))
    bad("x_fp16 needs 8-bit weights and bf16 activations");
  if (x_fp16 && !x_resident && weight == WeightFormat::Fp8Block && k_slice % kWeightBlock != 0)
    bad("staged x_fp16 with block scales needs k_slice a multiple of 128");
  if (mt % epilogue.head_dim != 0)
    bad("a tile of " + std::to_string(mt) + " rows does not cover whole heads");
  if (rows() % mt != 0)
    bad(std::to_string(rows()) + " rows are not whole tiles of " + std::to_string(mt));
  // Split s takes x stages [s * stages / splits, (s + 1) * stages / splits) (the template's).
  const int cw = chunk_columns();
  if (hidden % k_slice != 0 || k_slice % cw != 0)
    bad("k_slice must be a multiple of " + std::to_string(cw) + " dividing hidden");
  const int stages = hidden / k_slice;
  if (stages < splits) bad("more splits than the " + std::to_string(stages) + " x stages");
  const int per_stage = k_slice / cw;
  const int fewest = stages / splits * per_stage, most = (stages + splits - 1) / splits * per_stage;
  if (fewest % pipeline != 0 || most % pipeline != 0 || fewest < pipeline)
    bad("pipeline must divide the " + std::to_string(cw) + "-column chunks of every split");
  if (weight == WeightFormat::Fp8Block)
    for (int i = 0; i <= splits; ++i)
      if (i * stages / splits * k_slice % kWeightBlock != 0)
        bad("a split must hold whole 128-column scale blocks");
  if (shared_bytes() > 200 * 1024)
    bad("needs " + std::to_string(shared_bytes()) + " bytes of shared memory");
}

DecodeSpec make_decode_spec(const KernelSpec& epilogue, int hidden, int num_layers,
                            int token_bucket, int sm_count, const DecodeTuning& tuning,
                            WeightFormat weight) {
  if (const std::string why = decode_unsupported(epilogue, hidden, num_layers, weight);
      !why.empty())
    throw UnsupportedError(why);
  // 8-bit weights: the tilings the cold-L2 sweeps chose on the H200 (quantized_tiling above),
  // where the shape takes them; otherwise, and for dense weights, the rules below.
  if (tuning == DecodeTuning{})
    if (const DecodeTuning q =
            quantized_tiling(epilogue, num_layers, token_bucket, sm_count, weight);
        q.mma_tiles_per_warp) {
      // Resident x stages that do not fit in shared memory (a larger hidden size) fall back to
      // staged ones with the same tiling.
      DecodeTuning staged = q;
      staged.x_resident = 0;
      staged.x_fp16 = 0;
      for (const DecodeTuning& t : {q, staged}) {
        try {
          return make_decode_spec(epilogue, hidden, num_layers, token_bucket, sm_count, t, weight);
        } catch (const ArgumentError&) {
          // a shape the tiling does not divide: the next candidate, then the general rules
        }
      }
    }
  DecodeSpec s;
  s.epilogue = epilogue;
  s.hidden = hidden;
  s.num_layers = num_layers;
  s.token_bucket = token_bucket;
  s.weight = weight;
  const int cw = s.chunk_columns();
  // Block scales: splits and stages hold whole 128-column blocks.
  const int unit = weight == WeightFormat::Fp8Block ? kWeightBlock : cw;
  const int D = epilogue.head_dim;
  int mt = tile_rows_for(D, num_layers * 2 * epilogue.num_kv_heads);
  if (tuning.warps) {
    if (!tuning.mma_tiles_per_warp)
      throw ArgumentError("a warps tuning override needs mma_tiles_per_warp as well");
    mt = tuning.warps * tuning.mma_tiles_per_warp * 16;  // check() refuses partial heads
  }
  const int n16 = mt / 16;

  // Two MMA row tiles per warp from 32 tokens on: each x fragment read from shared memory then
  // feeds two MMAs, which keeps shared-memory traffic at twice the weight bytes.
  int mw = tuning.mma_tiles_per_warp;
  if (mw == 0) {
    // Block scales keep a second set of accumulators (the current block's partial sums): one
    // MMA tile per warp leaves them room (two spill at 64 tokens).
    const bool block = weight == WeightFormat::Fp8Block;
    mw = token_bucket >= 32 && n16 % 2 == 0 && !block ? 2 : 1;
    while (n16 / mw > (block ? 16 : 8) && n16 % (2 * mw) == 0) mw *= 2;
  }
  if (n16 % mw != 0)
    throw ArgumentError("mma_tiles_per_warp " + std::to_string(mw) + " does not divide the " +
                        std::to_string(n16) + " MMA tiles of a CTA");
  s.mma_tiles_per_warp = mw;
  s.warps = n16 / mw;

  // Pipeline depth: 8 chunks (16 KB per warp in flight) for the 16-token bucket of dense
  // weights, 4 otherwise (at 8 tokens the H200 sweep in docs/decode.md found 4 chunks with twice
  // as many CTAs faster: more CTAs in flight hide latency as well as deeper rings, with fewer
  // partials). 8-bit weights: 4 at every bucket (the sweep over FP8 weights in
  // docs/performance.md: 18.8 us at 16 tokens against 22.8 with 8 chunks in flight).
  const bool quantized = is_quantized(weight);
  int p = tuning.pipeline ? tuning.pipeline : (token_bucket == 16 && !quantized ? 8 : 4);
  const int chunks = hidden / cw;
  if (!tuning.pipeline)
    while (p > 1 && chunks % p != 0) p /= 2;
  s.pipeline = p;
  s.x_resident = tuning.x_resident;
  s.x_fp16 = tuning.x_fp16;

  // Splits: the fewest that give each SM several CTAs (4 for the 16-token bucket, 2 otherwise,
  // where the partials grow with the bucket or the shallower pipeline wants fewer), among those
  // that divide the chunks evenly by the pipeline. 8-bit weights: 2 per SM at every bucket (at
  // 64 tokens the warm-L2 sweep preferred 2 splits, 44 against 49 us, but with the weights read
  // from HBM, as in a server, 2 splits took 56 us against 49: quant_bench, docs/performance.md).
  const int tiles = s.rows() / mt;
  if (tuning.splits) {
    s.splits = tuning.splits;
  } else {
    const int per_sm = token_bucket == 16 && !quantized ? 4 : 2;
    const int want = per_sm * std::max(sm_count, 1);
    int best = 0;
    for (int sp = 1; sp <= 64; ++sp) {
      if (chunks % sp != 0 || (chunks / sp) % p != 0 || (hidden / sp) % unit != 0) continue;
      best = sp;
      if (tiles * sp >= want) break;
    }
    s.splits = best ? best : 1;
  }

  // x stage: the largest multiple of 32 columns dividing a split that keeps two stages within
  // 32 KB (<= 16 tokens) or 80 KB of shared memory.
  if (tuning.k_slice) {
    s.k_slice = tuning.k_slice;
  } else {
    // Splits that do not divide hidden are cut at stage boundaries: a stage dividing hidden
    // into at least one stage per split, every split's chunks a multiple of the pipeline.
    const bool even = hidden % s.splits == 0;
    const int kr = even ? hidden / s.splits : hidden;
    const int budget = token_bucket <= 16 ? 32 * 1024 : 80 * 1024;
    auto uneven_fits = [&](int k) {
      const int n = hidden / k;
      return n >= s.splits && (n / s.splits * (k / cw)) % s.pipeline == 0 &&
             ((n + s.splits - 1) / s.splits * (k / cw)) % s.pipeline == 0;
    };
    s.k_slice = cw;
    for (int k = cw; k <= kr; k += cw)
      if (kr % k == 0 && 2 * stage_bytes(token_bucket, k, weight) <= budget &&
          (even || uneven_fits(k)))
        s.k_slice = k;
  }
  s.check();
  return s;
}

KernelSource generate_decode(const DecodeSpec& spec) {
  spec.check();
  const KernelSpec& e = spec.epilogue;
  KernelSource out;
  out.short_name = spec.short_name();
  out.specialization = spec.canonical();  // the cache key's specialization field

  std::ostringstream expr;
  expr << "fkv_kernels::fused_proj_kv<" << spec.hidden << ", " << spec.num_layers << ", "
       << e.num_kv_heads << ", " << e.head_dim << ", " << e.rotary_dim << ", "
       << (e.neox ? "true" : "false") << ", " << static_cast<int>(e.k_norm) << ", "
       << device_type(e.act) << ", " << device_type(e.cache) << ", " << device_type(e.cos_sin)
       << ", " << device_type(e.positions) << ", " << device_type(e.slots) << ", "
       << (e.mode == OutputMode::Pool ? "true" : "false") << ", " << spec.token_bucket << ", "
       << spec.splits << ", " << spec.warps << ", " << spec.mma_tiles_per_warp << ", "
       << spec.pipeline << ", " << spec.k_slice << ", " << weight_code(spec.weight) << ", "
       << scale_code(spec.weight) << ", " << spec.x_resident << ", " << spec.x_fp16 << ">";
  out.name_expression = expr.str();

  std::ostringstream note;
  note << " (" << spec.grid() << " CTAs of " << spec.threads() << " threads, "
       << spec.shared_bytes() << " bytes of shared memory)";
  assemble_source(out, kTemplate, kHeaders, JitOptions::global(), note.str(),
                  "template __global__ void " + out.name_expression + "(const FkvDecodeParams);\n");
  return out;
}

// ---- choosing the path --------------------------------------------------------------------------

namespace {
// GPUs on which bench/decode_bench measured the crossover ("crossover" in its JSON): the largest
// T at which the decode kernel was no slower than cuBLASLt + the epilogue at every T up to it.
// Matched by device name and SM count. A GPU not listed keeps cuBLASLt + epilogue (0).
struct MeasuredCrossover {
  const char* name_contains;
  int sm_count;
  std::int64_t crossover;
};
constexpr MeasuredCrossover kMeasured[] = {
    // H200 (132 SMs), Qwen3-8B DFlash draft shape, docs/decode.md: fused / (cuBLASLt +
    // epilogue) = 0.94, 0.95, 0.97, 1.00 at T = 1, 2, 4, 8 and 1.09 at T = 16. Since the
    // epilogue's shared-memory ring T = 8 measures 1.003-1.008 (decode_bench now says 4); kept
    // at 8 for the ~7.7 us of host time an eager call saves there (docs/decode.md).
    {"H200", 132, 8},
    {"", 0, 0},  // sentinel; measured entries go above it
};
}  // namespace

std::int64_t decode_crossover(int device) { return decode_crossover(device, JitOptions::global()); }

std::vector<MeasuredDecodeGpu> measured_decode_gpus() {
  std::vector<MeasuredDecodeGpu> out;
  for (const MeasuredCrossover& m : kMeasured)
    if (*m.name_contains) out.push_back({m.name_contains, m.sm_count, m.crossover});
  return out;
}

MeasuredDecodeGpu measured_decode_gpu(const std::string& name) {
  auto lower = [](std::string s) {
    for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return s;
  };
  std::string known;
  for (const MeasuredDecodeGpu& g : measured_decode_gpus()) {
    if (!name.empty() && lower(g.name).find(lower(name)) != std::string::npos) return g;
    known += (known.empty() ? "" : ", ") + g.name + " (" + std::to_string(g.sm_count) + " SMs)";
  }
  throw ArgumentError("decode GPU '" + name + "': no measured crossover for that GPU; measured: " +
                      (known.empty() ? "none" : known) +
                      " (bench/decode_bench measures one; docs/decode.md)");
}

std::int64_t decode_crossover(int device, const JitOptions& options) {
  if (options.decode_crossover >= 0) return options.decode_crossover;  // FKV_DECODE_CROSSOVER
  char name[256] = {};
  FKV_CU(cuDeviceGetName, name, sizeof name - 1, device_handle(device));
  int sms = 0;
  FKV_CU(cuDeviceGetAttribute, &sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT,
         device_handle(device));
  for (const MeasuredCrossover& m : kMeasured)
    if (m.sm_count == sms && *m.name_contains && std::strstr(name, m.name_contains))
      return m.crossover;
  return 0;
}

}  // namespace fkv
