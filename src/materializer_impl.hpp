// materializer_impl (internal): FusedKVMaterializer's state, and the steps its construction and
// its calls share. fused_kv_materializer.cpp builds and refreshes it; materializer_calls.cpp runs
// the calls (decode-size kernel, or the projection then the epilogue kernels per group).
#pragma once

#include <spdlog/spdlog.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "dequant.hpp"
#include "fkv/decode.hpp"
#include "fkv/driver.hpp"
#include "fkv/errors.hpp"
#include "fkv/fused_kv_materializer.hpp"
#include "fkv/materialize.hpp"
#include "fp8_gemm_path.hpp"
#include "int8_gemm_path.hpp"
#include "projection_gemm.hpp"

namespace fkv {
namespace materializer_detail {

[[noreturn]] inline void fail(const std::string& what) {
  throw ArgumentError("FusedKVMaterializer: " + what);
}

}  // namespace materializer_detail
using materializer_detail::fail;

struct FusedKVMaterializer::Impl {
  struct Group {
    const LayerGroup* plan_group = nullptr;
    std::vector<std::size_t> members;  // indices into layers_ (attention-layer order)
    std::int64_t offset = 0;           // first proj column
    std::int64_t width = 0;            // 2*H*D
    DeviceBuffer k_norm;               // fp32 [L_g, D], folded
    DeviceBuffer kv_bias;              // fp32 [L_g, 2*H*D], when the weights have a bias
    bool adjacent = true;              // members are consecutive attention layers
    std::vector<float> eps;
    DeviceBuffer cos_sin;
    std::int64_t cos_sin_rows = 0;
    const void* cos_sin_external = nullptr;  // set_cos_sin(): the caller's table, not owned
    std::int64_t cos_sin_stride = 0;         // elements; 0 = R
    const LoadedKernel* stacked = nullptr;
    const LoadedKernel* pool = nullptr;
    // Per-call scratch for pool launches, sized here so that a call allocates nothing.
    std::vector<void*> k_ptrs, v_ptrs;
    std::vector<float> k_scales, v_scales;
    std::vector<const void*> slot_maps;
    KVAddressing addressing;  // the call's layout for this group, resolved once before launching
  };

  MaterializerOptions opt;
  Plan plan;
  std::vector<int> layers;
  std::vector<Group> groups;
  std::int64_t hidden = 0;
  std::int64_t width = 0;  // N
  DeviceBuffer w_packed;   // [N, hidden], in act or one byte per element (quantized)
  WeightFormat format = WeightFormat::Dense;
  DeviceBuffer w_scales;  // quantized: each group's scales in plan order (scale_offset below)
  std::vector<std::int64_t> scale_offset;  // per group: first float of its scales in w_scales
  // The cuBLASLt path of quantized weights: up to dq_rows rows at a time are dequantized into
  // dq_scratch ([dq_rows, hidden] in act), then multiplied.
  std::unique_ptr<Dequantizer> dequant;
  DeviceBuffer dq_scratch;
  std::int64_t dq_rows = 0;
  // FP8 weights above the decode crossover (MaterializerOptions::fp8_gemm): cuBLASLt's FP8 GEMM
  // over w_packed (fp8_gemm_path.hpp). Null when unused; a call it has no algorithm for takes
  // the dequantized slices.
  std::unique_ptr<Fp8GemmPath> fp8;
  // INT8 weights above the decode crossover, up to int8->max_tokens() tokens: cuBLASLt's int8
  // GEMM (int8_gemm_path.hpp). Null when unused.
  std::unique_ptr<Int8GemmPath> int8;
  DeviceBuffer proj;                  // [proj_rows(max_tokens), N]
  std::vector<DeviceBuffer> retired;  // earlier projection buffers (reserve_tokens)
  DeviceBuffer error_word;
  // The decode-size path (decode.hpp) for calls of 1..crossover tokens; null when unused.
  std::unique_ptr<DecodeKV> decode;
  std::int64_t crossover = 0;

  std::unique_ptr<ProjectionGemm> gemm;

  // proj[:T] = hidden · dequant(W_packed)^T, slice by slice: the dequantized rows live only in
  // dq_scratch, reused for each slice in stream order.
  void project_quantized(const MaterializerInput& in, CUstream stream) {
    const std::int64_t T = in.num_tokens;
    const std::int64_t ld = in.hidden_stride ? in.hidden_stride : hidden;
    if (fp8 && fp8->run(w_packed.ptr(), in.hidden, ld, T, proj.ptr(), stream)) return;
    if (int8 && int8->run(w_packed.ptr(), in.hidden, ld, T, proj.ptr(), stream)) return;
    const int es = dtype_size(opt.act);
    for (std::size_t gi = 0; gi < groups.size(); ++gi) {
      const Group& g = groups[gi];
      const std::int64_t rows = g.width * static_cast<std::int64_t>(g.members.size());
      const char* w = static_cast<const char*>(w_packed.ptr()) + g.offset * hidden;
      const float* scales = static_cast<const float*>(w_scales.ptr()) + scale_offset[gi];
      for (std::int64_t r0 = 0; r0 < rows; r0 += dq_rows) {
        const std::int64_t n = std::min(dq_rows, rows - r0);
        dequant->run(w, scales, dq_scratch.ptr(), r0, n, g.width, stream);
        gemm->slice(dq_scratch.ptr(), n, in.hidden, T, ld,
                    static_cast<char*>(proj.ptr()) + (g.offset + r0) * es, stream);
      }
    }
  }

  // The decode crossover of 8-bit weights when the FP8 or INT8 GEMM takes the calls above it.
  static constexpr std::int64_t kGemmCrossover = 32;

  // Rows of the projection buffer for `tokens` (the FP8 GEMM's padded token count).
  static std::int64_t proj_rows(std::int64_t tokens) { return Fp8GemmPath::rows(tokens); }

  // Sets up the FP8 GEMM path where the options and the format allow it.
  void setup_fp8_gemm(CUstream stream) {
    if (!opt.fp8_gemm || format == WeightFormat::Dense || format == WeightFormat::Int8Channel)
      return;
    std::vector<Fp8GemmGroup> shares;
    for (std::size_t gi = 0; gi < groups.size(); ++gi)
      shares.push_back({groups[gi].offset, groups[gi].width,
                        static_cast<std::int64_t>(groups[gi].members.size()), scale_offset[gi]});
    fp8 = Fp8GemmPath::make(format, opt.act, hidden, width, std::move(shares),
                            static_cast<const float*>(w_scales.ptr()), opt.max_tokens,
                            gemm->workspace(), opt.device, stream, opt.fp8_stream_gemm);
  }

  // Sets up the INT8 GEMM path where the options and the format allow it: INT8 weights'
  // packed scales are per row, in projection column order.
  void setup_int8_gemm() {
    if (format != WeightFormat::Int8Channel || opt.int8_gemm_tokens <= 0) return;
    int8 = Int8GemmPath::make(opt.act, hidden, width, static_cast<const float*>(w_scales.ptr()),
                              std::min(opt.max_tokens, opt.int8_gemm_tokens), gemm->workspace(),
                              opt.device);
  }

  // proj[:T] = hidden · W_packed^T on `stream`.
  void project(const MaterializerInput& in, CUstream stream) {
    if (is_quantized(format)) return project_quantized(in, stream);
    gemm->dense(w_packed.ptr(), in.hidden, in.num_tokens,
                in.hidden_stride ? in.hidden_stride : hidden, proj.ptr(), stream);
  }

  FusedKVInputs inputs(const Group& g, const MaterializerInput& in) const {
    FusedKVInputs r;
    r.proj = static_cast<const char*>(proj.ptr()) + g.offset * dtype_size(opt.act);
    r.num_tokens = in.num_tokens;
    r.num_layers = static_cast<std::int64_t>(g.members.size());
    r.proj_stride_token = width;
    r.proj_stride_layer = g.width;
    r.positions = in.positions;
    r.cos_sin = g.cos_sin_external != nullptr ? g.cos_sin_external : g.cos_sin.ptr();
    r.max_position = g.cos_sin_rows;
    r.cos_sin_stride = g.cos_sin_stride;
    r.k_norm_weight = static_cast<const float*>(g.k_norm.ptr());
    r.eps = g.eps;
    r.error_flag = static_cast<unsigned int*>(error_word.ptr());  // bounds are always checked
    r.kv_bias = static_cast<const float*>(g.kv_bias.ptr());
    return r;
  }

  // The checks every call makes; false when there is nothing to do.
  bool check_call(const MaterializerInput& in) const {
    if (in.num_tokens < 0 || in.num_tokens > opt.max_tokens)
      fail("num_tokens " + std::to_string(in.num_tokens) +
           " is outside [0, max_tokens=" + std::to_string(opt.max_tokens) +
           "]: construct with a larger MaterializerOptions::max_tokens");
    if (in.num_tokens == 0) return false;
    if (opt.external_cos_sin)
      for (std::size_t g = 0; g < groups.size(); ++g)
        if (groups[g].plan_group->attn.rotary_dim > 0 && groups[g].cos_sin_external == nullptr)
          fail("group " + std::to_string(g) +
               " has no cos/sin table: constructed with external_cos_sin, so "
               "call set_cos_sin() for every group with RoPE before materializing");
    if (in.hidden == nullptr) fail("hidden is null");
    if (in.positions == nullptr) fail("positions is null");
    if (in.hidden_stride != 0 && in.hidden_stride < hidden)
      fail("hidden_stride " + std::to_string(in.hidden_stride) + " is smaller than hidden " +
           std::to_string(hidden));
    return true;
  }

  // True when this call goes to the decode kernel: few enough tokens, and hidden rows as it
  // reads them (16-byte vectors).
  bool decode_call(const MaterializerInput& in) const {
    const std::int64_t ld = in.hidden_stride ? in.hidden_stride : hidden;
    return decode != nullptr && use_decode_path(in.num_tokens, crossover) && ld % 8 == 0 &&
           reinterpret_cast<std::uintptr_t>(in.hidden) % 16 == 0;
  }

  DecodeInput decode_input(const MaterializerInput& in) const {
    DecodeInput d;
    d.hidden = in.hidden;
    d.num_tokens = in.num_tokens;
    d.hidden_stride = in.hidden_stride;
    d.positions = in.positions;
    return d;
  }

  // The decode path, when the model allows it and the crossover for this GPU is positive.
  // Compiling its kernels needs NVRTC: a read-only cache made without them on a machine with no
  // NVRTC keeps the cuBLASLt path (with a warning) rather than failing.
  void setup_decode(const MaterializerWeights& w, const ModelConfig& config) {
    crossover =
        opt.decode_crossover >= 0 ? opt.decode_crossover : fkv::decode_crossover(opt.device);
    if (crossover <= 0) return;
    // Quantized weights, unless the caller set a crossover (H200, docs/performance.md): with
    // the FP8 or INT8 GEMM, the decode kernel takes calls up to 32 tokens (22.8 against 30.3 us
    // at 32; from 33 it runs its 64-token bucket, 35.6 us against the FP8 GEMM's 27.6 at 64);
    // otherwise it takes every call up to 64 tokens (2.5x faster than dequantized slices at 64).
    if (is_quantized(format) && opt.decode_crossover < 0)
      crossover = fp8 || int8 ? kGemmCrossover : kDecodeMaxBucket;
    const Group& g = groups.front();
    const AttentionSpec& attn = g.plan_group->attn;
    KernelSpec spec = make_kernel_spec(attn, opt.act, opt.cache, OutputMode::Pool, opt.cos_sin,
                                       opt.index, opt.index);
    spec.debug_checks = opt.debug_checks;
    spec.kv_bias = !w.kv_bias.empty();
    spec.paged = opt.paged;
    const int L = static_cast<int>(g.members.size());
    std::string why;
    if (groups.size() != 1)
      why = "the plan has " + std::to_string(groups.size()) + " groups";
    else
      why = decode_unsupported(spec, static_cast<int>(hidden), L, format);
    if (!why.empty()) {
      spdlog::debug("fkv: {}: no decode-size path ({})", config.path, why);
      crossover = 0;
      return;
    }
    DecodeModel dm;
    dm.epilogue = spec;
    dm.hidden = static_cast<int>(hidden);
    dm.num_layers = L;
    dm.w_kv = w_packed.ptr();
    dm.weight = format;
    dm.w_scale = static_cast<const float*>(w_scales.ptr());
    dm.k_norm = static_cast<const float*>(g.k_norm.ptr());
    dm.eps = g.eps;
    dm.cos_sin = opt.external_cos_sin ? nullptr : g.cos_sin.ptr();
    dm.max_position = g.cos_sin_rows;
    dm.error_flag = static_cast<unsigned int*>(error_word.ptr());
    DecodeOptions dopt;
    dopt.device = opt.device;
    dopt.max_tokens = std::min<std::int64_t>(crossover, kDecodeMaxBucket);
    dopt.stacked = opt.stacked;
    dopt.pool = opt.pool;
    try {
      decode = std::make_unique<DecodeKV>(dm, dopt);
    } catch (const CompileError& e) {
      spdlog::warn(
          "fkv: {}: the decode-size kernels could not be compiled, so every call takes "
          "cuBLASLt + the epilogue kernel: {}",
          config.path, e.what());
      crossover = 0;
      return;
    }
    crossover = std::min<std::int64_t>(crossover, kDecodeMaxBucket);
  }

  // The checks shared by the constructor and refresh_weights (counts and strides; per-layer
  // sizes are checked where the values are gathered).
  std::int64_t check_weights(const MaterializerWeights& w) const {
    const std::size_t L = layers.size();
    if (w.w_kv.size() != L)
      fail("w_kv has " + std::to_string(w.w_kv.size()) + " layers; the config has " +
           std::to_string(L) + " attention layers (one W_kv per attention layer, in model order)");
    if (!w.eps.empty() && w.eps.size() != L)
      fail("eps has " + std::to_string(w.eps.size()) + " values for " + std::to_string(L) +
           " layers");
    if (!w.kv_bias.empty() && w.kv_bias.size() != L)
      fail("kv_bias has " + std::to_string(w.kv_bias.size()) +
           " layers; give one bias per attention layer (" + std::to_string(L) + ") or none");
    const std::int64_t row_stride = w.w_kv_row_stride ? w.w_kv_row_stride : hidden;
    if (row_stride < hidden) fail("w_kv_row_stride is smaller than hidden_size");
    if (w.format != format)
      fail("the weights are " + to_string(w.format) + ", but this materializer was built for " +
           to_string(format) + " weights");
    if (is_quantized(format)) {
      if (w.w_scale.size() != L)
        fail("w_scale has " + std::to_string(w.w_scale.size()) + " entries; " + to_string(format) +
             " weights need one scale pointer per attention layer (" + std::to_string(L) + ")");
      for (std::size_t i = 0; i < L; ++i)
        if (w.w_scale[i] == nullptr)
          fail("w_scale of layer " + std::to_string(layers[i]) + " is null");
      if (row_stride % 16 != 0)
        fail("quantized w_kv rows are read in 16-byte vectors: w_kv_row_stride " +
             std::to_string(row_stride) + " must be a multiple of 16");
    } else if (!w.w_scale.empty()) {
      fail("w_scale is given for dense weights: set MaterializerWeights::format");
    }
    return row_stride;
  }

  // The checks a quantized format makes of the model, once at construction.
  void check_format() const {
    if (!is_quantized(format)) return;
    if (opt.act != DType::BF16 && opt.act != DType::FP16)
      fail(to_string(format) + " weights take bf16 or fp16 activations, not " + to_string(opt.act));
    if (hidden % 16 != 0)
      fail(to_string(format) + " weights need hidden_size a multiple of 16, got " +
           std::to_string(hidden));
    if (format == WeightFormat::Fp8Block)
      for (const Group& g : groups)
        if (g.width % kWeightBlock != 0)
          throw UnsupportedError("fp8_block weights: each layer's K/V rows (2*H*D = " +
                                 std::to_string(g.width) + ") must be whole 128-row scale blocks");
  }

  // Each layer's scales into w_scales (allocated), groups in plan order, on `stream`.
  void pack_scales(const MaterializerWeights& w, CUstream stream) const {
    if (!is_quantized(format)) return;
    for (std::size_t gi = 0; gi < groups.size(); ++gi) {
      const Group& g = groups[gi];
      const std::int64_t per = layer_scale_count(format, g.width, hidden);
      for (std::size_t j = 0; j < g.members.size(); ++j)
        FKV_CU(cuMemcpyDtoDAsync,
               w_scales.get() + static_cast<CUdeviceptr>((scale_offset[gi] + j * per) * 4),
               reinterpret_cast<CUdeviceptr>(w.w_scale[g.members[j]]),
               static_cast<std::size_t>(per) * sizeof(float), stream);
    }
  }

  // W_kv of every layer into w_packed (allocated), groups in plan order, on `stream`.
  void pack(const MaterializerWeights& w, std::int64_t row_stride, CUstream stream) const {
    const int es = weight_element_bytes(format, dtype_size(opt.act));
    for (const Group& g : groups) {
      for (std::size_t j = 0; j < g.members.size(); ++j) {
        const void* src = w.w_kv[g.members[j]];
        if (src == nullptr)
          fail("w_kv of layer " + std::to_string(layers[g.members[j]]) + " is null");
        const CUdeviceptr dst =
            w_packed.get() + static_cast<CUdeviceptr>((g.offset + j * g.width) * hidden * es);
        if (row_stride == hidden) {
          FKV_CU(cuMemcpyDtoDAsync, dst, reinterpret_cast<CUdeviceptr>(src),
                 static_cast<std::size_t>(g.width * hidden * es), stream);
        } else {
          for (std::int64_t r = 0; r < g.width; ++r)
            FKV_CU(
                cuMemcpyDtoDAsync, dst + static_cast<CUdeviceptr>(r * hidden * es),
                reinterpret_cast<CUdeviceptr>(src) + static_cast<CUdeviceptr>(r * row_stride * es),
                static_cast<std::size_t>(hidden * es), stream);
        }
      }
    }
  }

  // Group g's K-norm weights as the kernel reads them: [L_g, D] fp32, (1 + w) folded.
  std::vector<float> folded_norms(const Group& g, const MaterializerWeights& w) const {
    const AttentionSpec& attn = g.plan_group->attn;
    const std::size_t D = static_cast<std::size_t>(attn.head_dim);
    if (w.k_norm.size() != layers.size())
      fail("the config has a K norm (" + to_string(attn.k_norm) +
           "): give k_norm weights for all " + std::to_string(layers.size()) + " attention layers");
    std::vector<float> folded;
    for (std::size_t i : g.members) {
      if (w.k_norm[i].size() != D)
        fail("k_norm weight of layer " + std::to_string(layers[i]) + " has " +
             std::to_string(w.k_norm[i].size()) +
             " values, expected head_dim=" + std::to_string(D));
      for (float v : w.k_norm[i]) folded.push_back(fold_k_norm_weight(attn.k_norm, v));
    }
    return folded;
  }

  // Group g's K/V bias: [L_g, 2*H*D] fp32.
  std::vector<float> packed_bias(const Group& g, const MaterializerWeights& w) const {
    const AttentionSpec& attn = g.plan_group->attn;
    const std::size_t row =
        2 * static_cast<std::size_t>(attn.num_kv_heads) * static_cast<std::size_t>(attn.head_dim);
    std::vector<float> packed;
    for (std::size_t i : g.members) {
      if (w.kv_bias[i].size() != row)
        fail("kv_bias of layer " + std::to_string(layers[i]) + " has " +
             std::to_string(w.kv_bias[i].size()) +
             " values, expected 2*H*D=" + std::to_string(row) +
             (plan.tp_size > 1
                  ? " (H = this rank's " + std::to_string(attn.num_kv_heads) + " KV heads)"
                  : ""));
      packed.insert(packed.end(), w.kv_bias[i].begin(), w.kv_bias[i].end());
    }
    return packed;
  }
};

}  // namespace fkv
