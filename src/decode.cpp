// decode: spec + tiling, codegen, load and launch of the decode-size fused kernel.
#include "fkv/decode.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <cstring>
#include <future>
#include <sstream>

#include "fkv/cache.hpp"
#include "fkv/codegen.hpp"
#include "fkv/compiler.hpp"
#include "fkv/driver.hpp"
#include "fkv/errors.hpp"
#include "fkv/runtime.hpp"
#include "fkv/version.hpp"

namespace fkv {
namespace {

constexpr const char* kTemplate = "fused_proj_kv.cu";
constexpr const char* kHeaders[] = {"fkv_types.cuh",
                                    "decode_params.h"};  // as the template includes them
constexpr int kDefaultSharedLimit = 48 * 1024;           // above this a kernel must opt in

int index_size(IndexType t) { return t == IndexType::I32 ? 4 : 8; }

// Rows of one CTA tile: whole heads, 16-row MMA tiles, about 128 rows where head_dim allows.
int tile_rows_for(int head_dim, int units) {
  int per = 1;
  if (head_dim < 128 && 128 % head_dim == 0) per = 128 / head_dim;
  while (per > 1 && units % per != 0) per /= 2;
  return head_dim * per;
}

int stage_bytes(int bucket, int k_slice) { return bucket * (2 * k_slice + 64); }

[[noreturn]] void fail(const std::string& what) { throw ArgumentError("DecodeKV: " + what); }

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

}  // namespace

int decode_bucket(std::int64_t num_tokens) {
  if (num_tokens <= 0) throw ArgumentError("decode_bucket: num_tokens must be positive");
  for (int b = 8; b < kDecodeMaxBucket; b *= 2)
    if (num_tokens <= b) return b;
  return kDecodeMaxBucket;
}

// ---- spec ---------------------------------------------------------------------------------------

int DecodeSpec::shared_bytes() const {
  const int stages = hidden / splits / k_slice > 1 ? 2 : 1;
  return std::max(stages * stage_bytes(token_bucket, k_slice), 4 * token_bucket * tile_rows());
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
  if (is_quantized(weight)) o << ";w=" << to_string(weight);
  return o.str();
}

std::string DecodeSpec::short_name() const {
  const KernelSpec& e = epilogue;
  std::ostringstream o;
  o << "fkvdec_h" << e.num_kv_heads << "_d" << e.head_dim << "_r" << e.rotary_dim
    << (e.neox ? "_neox" : "_gptj") << (e.k_norm ? "_kn" : "") << "_" << to_string(e.act) << "_"
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
      k_slice < 32)
    bad("out of range");
  if (mt % epilogue.head_dim != 0)
    bad("a tile of " + std::to_string(mt) + " rows does not cover whole heads");
  if (rows() % mt != 0)
    bad(std::to_string(rows()) + " rows are not whole tiles of " + std::to_string(mt));
  if (hidden % splits != 0) bad("splits do not divide hidden");
  const int kr = hidden / splits;
  const int cw = chunk_columns();
  if (kr % k_slice != 0 || k_slice % cw != 0)
    bad("k_slice must be a multiple of " + std::to_string(cw) + " dividing hidden / splits");
  if ((kr / cw) % pipeline != 0)
    bad("pipeline must divide the " + std::to_string(cw) + "-column chunks of a split");
  if (weight == WeightFormat::Fp8Block && kr % kWeightBlock != 0)
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
  const int mt = tile_rows_for(D, num_layers * 2 * epilogue.num_kv_heads);
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

  // Splits: the fewest that give each SM several CTAs (4 for the 16-token bucket, 2 otherwise,
  // where the partials grow with the bucket or the shallower pipeline wants fewer), among those
  // that divide the chunks evenly by the pipeline. 8-bit weights: 2 per SM, 1 at 64 tokens
  // (the same FP8 sweep: 44 us with 2 splits against 49 with 4).
  const int tiles = s.rows() / mt;
  if (tuning.splits) {
    s.splits = tuning.splits;
  } else {
    const int per_sm = quantized ? (token_bucket >= 64 ? 1 : 2) : (token_bucket == 16 ? 4 : 2);
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
    const int kr = hidden / s.splits;
    const int budget = token_bucket <= 16 ? 32 * 1024 : 80 * 1024;
    s.k_slice = cw;
    for (int k = cw; k <= kr; k += cw)
      if (kr % k == 0 && 2 * stage_bytes(token_bucket, k) <= budget) s.k_slice = k;
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
       << (e.neox ? "true" : "false") << ", " << (e.k_norm ? "true" : "false") << ", "
       << device_type(e.act) << ", " << device_type(e.cache) << ", " << device_type(e.cos_sin)
       << ", " << device_type(e.positions) << ", " << device_type(e.slots) << ", "
       << (e.mode == OutputMode::Pool ? "true" : "false") << ", " << spec.token_bucket << ", "
       << spec.splits << ", " << spec.warps << ", " << spec.mma_tiles_per_warp << ", "
       << spec.pipeline << ", " << spec.k_slice << ", " << weight_code(spec.weight) << ", "
       << scale_code(spec.weight) << ">";
  out.name_expression = expr.str();

  const std::string body = read_template(out, kTemplate, kHeaders, JitOptions::global());

  std::ostringstream src;
  src << "// fkv spec: " << spec.canonical() << "\n"
      << "// Generated by fkv-jit " << kVersion << " from templates/" << kTemplate << " ("
      << spec.grid() << " CTAs of " << spec.threads() << " threads, " << spec.shared_bytes()
      << " bytes of shared memory)\n"
      << "#line 1 \"" << kTemplate << "\"\n"
      << body << "\n"
      << "template __global__ void " << out.name_expression << "(const FkvDecodeParams);\n";
  out.source = src.str();
  return out;
}

// ---- the host object
// ------------------------------------------------------------------------------

struct DecodeKV::Impl {
  struct Kernel {
    DecodeSpec spec;
    Module module;
    CUfunction function = nullptr;
  };
  DecodeModel model;
  DecodeOptions opt;
  CUcontext ctx = nullptr;
  std::vector<Kernel> stacked, pool;  // by bucket: 8, 16, 32, 64
  DeviceBuffer workspace, counters;
  std::int64_t kv = 0;  // H * D

  static std::size_t slot_of(int bucket) {
    std::size_t i = 0;
    for (int b = 8; b < bucket; b *= 2) ++i;
    return i;
  }

  const Kernel& kernel(OutputMode mode, std::int64_t tokens) const {
    const std::vector<Kernel>& v = mode == OutputMode::Pool ? pool : stacked;
    const std::size_t i = slot_of(decode_bucket(tokens));
    if (i >= v.size())
      fail("no kernel prepared for " + std::to_string(tokens) + " tokens in " + to_string(mode) +
           " mode: construct with DecodeOptions::max_tokens >= " + std::to_string(tokens) +
           " and " + (mode == OutputMode::Pool ? "pool" : "stacked") + " = true");
    return v[i];
  }

  // What NVRTC builds for the device (the runtime's arch rule): its arch, or PTX for a device
  // newer than this NVRTC.
  CompileOptions compile_options() const {
    const ArchTarget target = Runtime::device_target(opt.device);
    CompileOptions options;
    options.arch = target.arch;
    options.ptx = target.ptx;
    return options;
  }

  Kernel load(const DecodeSpec& spec, const CacheResult& image) const {
    Kernel k;
    k.spec = spec;
    k.module = Module(ctx, image.kernel->image);
    k.function = k.module.function(image.kernel->lowered_name);
    if (spec.shared_bytes() > kDefaultSharedLimit)
      FKV_CU(cuFuncSetAttribute, k.function, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
             spec.shared_bytes());
    spdlog::debug("fkv: loaded {} ({}; {})", spec.short_name(), spec.canonical(),
                  to_string(image.outcome));
    return k;
  }

  FkvDecodeParams base_params(const DecodeInput& in) const {
    FkvDecodeParams p;
    std::memset(&p, 0, sizeof p);
    p.x = in.hidden;
    p.x_stride = in.hidden_stride ? in.hidden_stride : model.hidden;
    p.w = model.w_kv;
    p.w_scale = model.w_scale;
    p.w_scale_cols = (model.hidden + kWeightBlock - 1) / kWeightBlock;
    p.workspace = static_cast<float*>(workspace.ptr());
    p.counters = static_cast<unsigned int*>(counters.ptr());
    p.positions = in.positions;
    p.cos_sin = model.cos_sin;
    p.cos_sin_stride = model.cos_sin_stride ? model.cos_sin_stride : model.epilogue.rotary_dim;
    p.max_position = model.max_position;
    p.error_flag = model.error_flag;
    p.k_norm_weight = model.k_norm;
    for (int l = 0; l < model.num_layers; ++l) {
      p.eps[l] = model.eps.empty() ? 1e-6f : model.eps[static_cast<std::size_t>(l)];
      p.k_scale[l] = 1.0f;
      p.v_scale[l] = 1.0f;
    }
    return p;
  }

  void check_table(std::int64_t stride, std::int64_t rows) const {
    if (stride != 0 && stride < model.epilogue.rotary_dim)
      fail("cos_sin_stride " + std::to_string(stride) + " is smaller than rotary_dim " +
           std::to_string(model.epilogue.rotary_dim));
    if (model.epilogue.rotary_dim > 0 && rows <= 0)
      fail("max_position (rows of the cos/sin table) must be positive, got " +
           std::to_string(rows));
  }

  void check_input(const DecodeInput& in) const {
    if (in.num_tokens < 0) fail("num_tokens must be >= 0, got " + std::to_string(in.num_tokens));
    if (in.num_tokens == 0) return;
    if (in.hidden == nullptr) fail("hidden is null");
    const std::int64_t stride = in.hidden_stride ? in.hidden_stride : model.hidden;
    if (stride < model.hidden || stride % 8 != 0)
      fail("hidden_stride " + std::to_string(stride) + " must be >= hidden (" +
           std::to_string(model.hidden) +
           ") and a multiple of 8 (rows are read in 16-byte vectors)");
    if (reinterpret_cast<std::uintptr_t>(in.hidden) % 16 != 0)
      fail("hidden must be 16-byte aligned");
    if (model.epilogue.rotary_dim > 0) {
      if (in.positions == nullptr) fail("positions is null");
      if (model.cos_sin == nullptr)
        fail(
            "rotary_dim > 0 but there is no cos/sin table: set DecodeModel::cos_sin or call "
            "set_cos_sin()");
    }
  }

  // Launches chunk by chunk of at most 64 tokens; `fill` sets the chunk's outputs.
  template <class Fill>
  void launch_chunks(const DecodeInput& in, OutputMode mode, FkvDecodeParams p, CUstream stream,
                     Fill fill) {
    const int act = dtype_size(model.epilogue.act);
    const int pos = index_size(model.epilogue.positions);
    const std::int64_t stride = p.x_stride;
    for (std::int64_t t0 = 0; t0 < in.num_tokens; t0 += kDecodeMaxBucket) {
      const std::int64_t n = std::min<std::int64_t>(kDecodeMaxBucket, in.num_tokens - t0);
      const Kernel& k = kernel(mode, n);
      p.x = static_cast<const char*>(in.hidden) + t0 * stride * act;
      p.num_tokens = n;
      p.positions = in.positions ? static_cast<const char*>(in.positions) + t0 * pos : nullptr;
      fill(p, t0);
      void* args[] = {&p};
      Driver& d = Driver::get();
      const CUresult r =
          d.cuLaunchKernel(k.function, static_cast<unsigned>(k.spec.grid()), 1, 1,
                           static_cast<unsigned>(k.spec.threads()), 1, 1,
                           static_cast<unsigned>(k.spec.shared_bytes()), stream, args, nullptr);
      if (r != CUDA_SUCCESS) d.check(r, "cuLaunchKernel");
    }
  }
};

std::vector<DecodeSpec> decode_specs(const KernelSpec& epilogue, int hidden, int num_layers,
                                     const DecodeOptions& options, int sm_count,
                                     WeightFormat weight) {
  const int top = decode_bucket(std::min<std::int64_t>(options.max_tokens, kDecodeMaxBucket));
  std::vector<DecodeSpec> specs;
  for (OutputMode mode : {OutputMode::Stacked, OutputMode::Pool}) {
    if ((mode == OutputMode::Stacked && !options.stacked) ||
        (mode == OutputMode::Pool && !options.pool))
      continue;
    for (int b = 8; b <= top; b *= 2) {
      KernelSpec ke = epilogue;
      ke.mode = mode;
      if (mode == OutputMode::Stacked) ke.cache = epilogue.act;  // stacked output: activation dtype
      specs.push_back(
          make_decode_spec(ke, hidden, num_layers, b, sm_count, options.tuning, weight));
    }
  }
  return specs;
}

DecodeKV::DecodeKV(const DecodeModel& model, const DecodeOptions& options)
    : impl_(std::make_unique<Impl>()) {
  Impl& m = *impl_;
  m.model = model;
  m.opt = options;
  const KernelSpec& e = model.epilogue;
  if (const std::string why = decode_unsupported(e, model.hidden, model.num_layers, model.weight);
      !why.empty())
    throw UnsupportedError(why);
  if (model.w_kv == nullptr) fail("w_kv is null");
  if (is_quantized(model.weight) && model.w_scale == nullptr)
    fail("w_kv is " + to_string(model.weight) + " but w_scale is null");
  if (!is_quantized(model.weight) && model.w_scale != nullptr)
    fail("w_scale is given for dense weights");
  if (reinterpret_cast<std::uintptr_t>(model.w_kv) % 16 != 0) fail("w_kv must be 16-byte aligned");
  if (e.k_norm && model.k_norm == nullptr) fail("the spec has a K norm but k_norm is null");
  if (model.cos_sin != nullptr) m.check_table(model.cos_sin_stride, model.max_position);
  if (!model.eps.empty() && static_cast<int>(model.eps.size()) != model.num_layers)
    fail("eps has " + std::to_string(model.eps.size()) + " values for " +
         std::to_string(model.num_layers) + " layers");
  if (options.max_tokens <= 0) fail("max_tokens must be positive");
  if (!options.stacked && !options.pool)
    fail("neither stacked nor pool is asked for: nothing to prepare");
  m.kv = std::int64_t{e.num_kv_heads} * e.head_dim;

  m.ctx = ensure_context(options.device);
  int sms = options.sm_count;
  if (sms <= 0)
    FKV_CU(cuDeviceGetAttribute, &sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT,
           device_handle(options.device));
  const std::vector<DecodeSpec> specs =
      decode_specs(e, model.hidden, model.num_layers, options, sms, model.weight);
  // Compile (or read from the cache) side by side: NVRTC runs one program per thread, and a
  // decode kernel takes a quarter of a second or more to build cold (an epilogue kernel about
  // 20 ms once NVRTC has started). Loading stays on this thread (its context).
  const CompileOptions copts = m.compile_options();
  std::vector<std::future<CacheResult>> images;
  for (const DecodeSpec& spec : specs)
    images.push_back(std::async(std::launch::async, [&copts, spec] {
      return KernelCache::global().get(generate_decode(spec), copts);
    }));
  std::size_t ws = 0;
  int tiles = 0;
  for (std::size_t i = 0; i < specs.size(); ++i) {
    const CacheResult image = images[i].get();
    const DecodeSpec& spec = specs[i];
    ws = std::max(ws, spec.workspace_bytes());
    tiles = std::max(tiles, spec.tiles());
    (spec.epilogue.mode == OutputMode::Pool ? m.pool : m.stacked).push_back(m.load(spec, image));
  }
  m.workspace = DeviceBuffer(ws);
  m.counters = DeviceBuffer(static_cast<std::size_t>(tiles) * sizeof(unsigned int));
  // Zeroed before the constructor returns (then kept at zero by the kernel): a plain cuMemsetD8
  // runs on the legacy stream, which the caller's non-blocking stream does not wait for.
  Stream zeroing;
  FKV_CU(cuMemsetD8Async, m.counters.get(), 0, m.counters.size(), zeroing.get());
  zeroing.synchronize();
}

DecodeKV::~DecodeKV() = default;

const DecodeSpec& DecodeKV::spec_for(std::int64_t num_tokens, OutputMode mode) const {
  return impl_->kernel(mode, std::min<std::int64_t>(num_tokens, kDecodeMaxBucket)).spec;
}

void DecodeKV::run_stacked(const DecodeInput& in, void* k_out, void* v_out, CUstream stream) {
  Impl& m = *impl_;
  m.check_input(in);
  if (in.num_tokens == 0) return;
  if (k_out == nullptr || v_out == nullptr) fail("k_out / v_out is null");
  const int out = dtype_size(m.model.epilogue.act);
  FkvDecodeParams p = m.base_params(in);
  p.out_layer_stride = in.num_tokens * m.kv;
  m.launch_chunks(in, OutputMode::Stacked, p, stream, [&](FkvDecodeParams& q, std::int64_t t0) {
    q.k_out = static_cast<char*>(k_out) + t0 * m.kv * out;
    q.v_out = static_cast<char*>(v_out) + t0 * m.kv * out;
  });
}

void DecodeKV::run_pool(const DecodeInput& in, const DecodePool& pool, CUstream stream) {
  Impl& m = *impl_;
  m.check_input(in);
  const auto L = static_cast<std::size_t>(m.model.num_layers);
  if (pool.k_buffers.size() != L || pool.v_buffers.size() != L)
    fail("pool output takes one K and one V buffer per layer (" + std::to_string(L) + "), got " +
         std::to_string(pool.k_buffers.size()) + " and " + std::to_string(pool.v_buffers.size()));
  if ((!pool.k_scales.empty() && pool.k_scales.size() != L) ||
      (!pool.v_scales.empty() && pool.v_scales.size() != L))
    fail("k_scales / v_scales take one value per layer (" + std::to_string(L) + ") or none");
  if (pool.num_slots <= 0)
    fail("num_slots must be positive (slots of each pool buffer), got " +
         std::to_string(pool.num_slots));
  const std::int64_t slot_stride = pool.slot_stride ? pool.slot_stride : m.kv;
  if (slot_stride < m.kv)
    fail("slot_stride " + std::to_string(slot_stride) +
         " is smaller than H*D = " + std::to_string(m.kv));
  if (in.num_tokens == 0) return;
  if (pool.cache_loc == nullptr) fail("cache_loc is null");
  FkvDecodeParams p = m.base_params(in);
  p.slot_stride = slot_stride;
  p.num_slots = pool.num_slots;
  for (std::size_t l = 0; l < L; ++l) {
    if (pool.k_buffers[l] == nullptr || pool.v_buffers[l] == nullptr)
      fail("pool buffer of layer " + std::to_string(l) + " is null");
    p.k_pool[l] = pool.k_buffers[l];
    p.v_pool[l] = pool.v_buffers[l];
    if (!pool.k_scales.empty()) p.k_scale[l] = pool.k_scales[l];
    if (!pool.v_scales.empty()) p.v_scale[l] = pool.v_scales[l];
  }
  const int slot = index_size(m.model.epilogue.slots);
  m.launch_chunks(in, OutputMode::Pool, p, stream, [&](FkvDecodeParams& q, std::int64_t t0) {
    q.cache_loc = static_cast<const char*>(pool.cache_loc) + t0 * slot;
  });
}

void DecodeKV::set_cos_sin(const void* table, std::int64_t rows, std::int64_t row_stride) {
  Impl& m = *impl_;
  if (table == nullptr) fail("set_cos_sin: the table is null");
  m.check_table(row_stride, rows);
  m.model.cos_sin = table;
  m.model.max_position = rows;
  m.model.cos_sin_stride = row_stride;
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
