// decode: the host object of the decode-size fused kernel (DecodeKV): compiles and loads its
// kernels, owns the split-K workspace, checks the inputs and the output layout, launches. The
// spec, tiling and codegen are in decode_spec.cpp.
#include "fkv/decode.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstring>
#include <future>

#include "fkv/cache.hpp"
#include "fkv/codegen.hpp"
#include "fkv/compiler.hpp"
#include "fkv/driver.hpp"
#include "fkv/errors.hpp"
#include "fkv/runtime.hpp"

namespace fkv {
namespace {

constexpr int kDefaultSharedLimit = 48 * 1024;  // above this a kernel must opt in

int index_size(IndexType t) { return t == IndexType::I32 ? 4 : 8; }

[[noreturn]] void fail(const std::string& what) { throw ArgumentError("DecodeKV: " + what); }

}  // namespace

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
    // Static shared memory (positions, slots) counts against the same 48 KB default: opt in
    // when both together exceed it (a dynamic size of exactly 48 KB failed to launch).
    int static_bytes = 0;
    FKV_CU(cuFuncGetAttribute, &static_bytes, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, k.function);
    if (spec.shared_bytes() + static_bytes > kDefaultSharedLimit)
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
  if (k_norm_weighted(e.k_norm) && model.k_norm == nullptr)
    fail("the spec has a K norm but k_norm is null");
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
  const KernelSpec& e = m.model.epilogue;
  KVGeometry geo;
  geo.num_layers = m.model.num_layers;
  geo.num_kv_heads = e.num_kv_heads;
  geo.head_dim = e.head_dim;
  geo.cache = e.cache;
  geo.slots = e.slots;
  geo.vec = 1;  // the decode kernel writes single elements
  KVAddressing a;
  try {
    a = resolve_kv_layout(pool, geo);
  } catch (const ArgumentError& err) {
    fail(err.what());
  }
  if (a.paged || pool.k_scales_device || pool.v_scales_device)
    fail(to_string(pool.kind) +
         " layout with paged addressing (block_size, block_stride, another head_stride, "
         "slot_mappings) or device scales: the decode kernel writes flat rows with host scales; "
         "use the epilogue-only kernels (FusedKVMaterializer picks them for such a layout)");
  if (in.num_tokens == 0) return;
  FkvDecodeParams p = m.base_params(in);
  p.slot_stride = a.slot_stride;
  p.num_slots = a.num_slots;
  for (std::int64_t l = 0; l < geo.num_layers; ++l) {
    p.k_pool[l] = kv_layer_buffer(pool, geo, l, false);
    p.v_pool[l] = kv_layer_buffer(pool, geo, l, true);
    if (!pool.k_scales.empty()) p.k_scale[l] = pool.k_scales[static_cast<std::size_t>(l)];
    if (!pool.v_scales.empty()) p.v_scale[l] = pool.v_scales[static_cast<std::size_t>(l)];
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

}  // namespace fkv
