// decode: the decode-size path. One NVRTC-specialized kernel (templates/fused_proj_kv.cu) does
// the projection GEMM (hidden · W_kvᵀ, tensor cores, split-K) and the epilogue (K RMSNorm +
// RoPE + stacked or pool write) for up to 64 tokens per launch, streaming the packed K/V
// weights once and never writing the projection to memory.
//
// Data flow, as for the epilogue-only kernel: KernelSpec (the epilogue's specialization) +
// model sizes + token bucket -> DecodeSpec (with its tiling) -> generate_decode (source + name
// expression) -> KernelCache (NVRTC, disk, memory) -> DecodeKV (loads, owns the split-K
// workspace and arrival counters, launches).
//
// Results: per element within one unit in the last place of the output dtype of the float64
// value of (x · Wᵀ, then norm and RoPE), like the epilogue kernel's; V is rounded once from the
// fp32 sum (there is no intermediate projection in the activation dtype).
#pragma once

#include <cuda.h>

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "fkv/codegen.hpp"
#include "fkv/decode_params.h"
#include "fkv/kv_layout.hpp"
#include "fkv/spec.hpp"
#include "fkv/weights.hpp"

namespace fkv {

constexpr int kDecodeMaxBucket = 64;  // tokens per launch; more tokens take more launches

// The token bucket of `num_tokens` tokens: 8, 16, 32 or 64 (64 also for more tokens, which are
// launched in chunks of 64). num_tokens must be positive.
int decode_bucket(std::int64_t num_tokens);

// Tiling overrides for tuning (bench/decode_bench --sweep); 0 = chosen by make_decode_spec.
struct DecodeTuning {
  int splits = 0;              // k-splits (CTAs per row tile)
  int pipeline = 0;            // chunks of W in flight per thread (32 columns, 64 quantized)
  int mma_tiles_per_warp = 0;  // 16-row MMA tiles per warp
  int k_slice = 0;             // columns of hidden per shared-memory stage
  // Warps per CTA, with mma_tiles_per_warp: a tile of warps * mma_tiles_per_warp * 16 rows
  // (whole heads) instead of one head's (more rows per CTA read x fewer times).
  int warps = 0;
  // 1: every x stage of a split resident in shared memory at once, each published by an
  // mbarrier (no CTA barrier in the k-loop); 0: two x stages, double-buffered.
  int x_resident = 0;
  // 1 (bf16 activations and 8-bit weights): x re-encoded in shared memory as fp16 times a power
  // of two per token (and per stage, when staged), so that the weights convert to fp16 (cheaper
  // than to bf16) and the MMAs run in fp16; exact (templates/fused_proj_kv.cu says for which
  // elements).
  int x_fp16 = 0;
  bool operator==(const DecodeTuning&) const = default;
};

struct DecodeSpec {
  KernelSpec epilogue;  // heads, head_dim, rotary, neox, K norm, dtypes, index types, mode
  int hidden = 0;
  int num_layers = 0;
  int token_bucket = 8;
  // How W is stored (include/fkv/weights.hpp): dense in the activation dtype, or one byte per
  // element (FP8 e4m3, INT8) with fp32 scales.
  WeightFormat weight = WeightFormat::Dense;
  // Tiling (see fused_proj_kv.cu): a CTA of `warps` warps owns warps * mma_tiles_per_warp * 16
  // rows of W (whole heads) and hidden / splits columns.
  int splits = 1;
  int warps = 8;
  int mma_tiles_per_warp = 1;
  int pipeline = 4;
  int k_slice = 512;
  int x_resident = 0;  // 1: all of a split's x stages in shared memory, behind mbarriers
  int x_fp16 = 0;      // 1: x re-encoded as scaled fp16 in shared memory (DecodeTuning::x_fp16)

  int rows() const { return num_layers * 2 * epilogue.num_kv_heads * epilogue.head_dim; }
  int tile_rows() const { return warps * mma_tiles_per_warp * 16; }
  int tiles() const { return rows() / tile_rows(); }
  int grid() const { return tiles() * splits; }
  int threads() const { return warps * 32; }
  int shared_bytes() const;             // dynamic shared memory per CTA
  std::size_t workspace_bytes() const;  // fp32 split partials
  // "decode;hidden=4096;L=5;<KernelSpec::canonical()>;tb=8;S=8;warps=8;mw=1;P=8;ksl=512" (then
  // ";w=fp8_channel" for quantized weights; ";xr=1" and ";xh=1" for resident and fp16 x): part of
  // the cache key.
  std::string canonical() const;
  std::string short_name()
      const;  // e.g. "fkvdec_h8_d128_r128_neox_kn_bf16_bf16_stacked_L5_x4096_tb8" (+ "_fp8_block")
  int chunk_columns() const { return is_quantized(weight) ? 64 : 32; }  // columns per W chunk
  // Throws ConfigError (shape the kernel cannot take) or ArgumentError (bad tiling).
  void check() const;
};

// Why the decode kernel cannot serve `epilogue` at this hidden size and layer count, or "" when
// it can: activations bf16/fp16, head_dim a multiple of 16, hidden a multiple of 256, at most
// FKV_DECODE_MAX_LAYERS layers, no device-side debug checks.
std::string decode_unsupported(const KernelSpec& epilogue, int hidden, int num_layers);
// The same, for weights stored as `weight`: quantized weights also need head_dim * num_kv_heads
// a multiple of 64 for 128 x 128 block scales (each layer's K and V rows whole blocks).
std::string decode_unsupported(const KernelSpec& epilogue, int hidden, int num_layers,
                               WeightFormat weight);

// The spec for one token bucket, tiled for a GPU with `sm_count` SMs (enough CTAs to cover
// the SMs several times; few enough splits to keep the partials small). Throws ConfigError
// when decode_unsupported() says so, ArgumentError for an impossible tuning override.
DecodeSpec make_decode_spec(const KernelSpec& epilogue, int hidden, int num_layers,
                            int token_bucket, int sm_count, const DecodeTuning& tuning = {},
                            WeightFormat weight = WeightFormat::Dense);

// The specialized source: templates/fused_proj_kv.cu plus one explicit instantiation; its
// first line is "// fkv spec: " + spec.canonical(), which is also its specialization (cache key).
KernelSource generate_decode(const DecodeSpec& spec);

// ---- the host object --------------------------------------------------------------------------

// What the kernel reads of the model. Device memory owned by the caller, alive as long as the
// DecodeKV (FusedKVMaterializer owns exactly these buffers).
struct DecodeModel {
  KernelSpec epilogue;  // mode is ignored: DecodeOptions says which modes to prepare
  int hidden = 0;
  int num_layers = 0;
  const void* w_kv = nullptr;  // [L * 2 * H * D, hidden], per layer K rows then V rows, dense
  // How w_kv is stored, and its fp32 scales (device) for a quantized format: [L] for
  // Fp8Tensor, [L * 2 * H * D] for the per-channel formats, [rows / 128, hidden / 128] for
  // Fp8Block (include/fkv/weights.hpp).
  WeightFormat weight = WeightFormat::Dense;
  const float* w_scale = nullptr;
  const float* k_norm = nullptr;  // [L, D] fp32 folded; needed iff k_norm_weighted(epilogue.k_norm)
  std::vector<float> eps;         // [L]; empty = 1e-6 each
  // [max_position, R] in epilogue.cos_sin; needed iff R > 0, here or by set_cos_sin() before
  // the first run. A position outside [0, max_position) skips its token (flagged).
  const void* cos_sin = nullptr;
  std::int64_t cos_sin_stride = 0;  // elements between rows; 0 = R
  std::int64_t max_position = 0;    // rows of cos_sin
  // Device word the kernel or-s FKV_ERROR_BAD_POSITION / FKV_ERROR_BAD_SLOT into for each token
  // it skips; null: skipped silently.
  unsigned int* error_flag = nullptr;
};

struct DecodeOptions {
  int device = 0;
  std::int64_t max_tokens = kDecodeMaxBucket;  // largest bucket prepared: decode_bucket(max_tokens)
  bool stacked = true;
  bool pool = true;
  DecodeTuning tuning;
  int sm_count = 0;  // 0 = the device's; set to tile for another GPU
};

// The kernels a DecodeKV prepares for `epilogue` (its mode ignored) on a GPU with `sm_count`
// SMs: per output mode asked for (stacked first, its cache dtype the activation dtype, then
// pool), one per token bucket up to decode_bucket(min(max_tokens, 64)). DecodeKV's constructor
// compiles exactly these; precompile() can build them ahead of time. Throws as make_decode_spec.
std::vector<DecodeSpec> decode_specs(const KernelSpec& epilogue, int hidden, int num_layers,
                                     const DecodeOptions& options, int sm_count,
                                     WeightFormat weight = WeightFormat::Dense);

struct DecodeInput {
  const void* hidden = nullptr;     // [T, hidden] in the activation dtype, rows 16-byte aligned
  std::int64_t num_tokens = 0;      // any T >= 0; 0 launches nothing, > 64 launches per 64
  std::int64_t hidden_stride = 0;   // elements between rows (a multiple of 8); 0 = hidden
  const void* positions = nullptr;  // [T] epilogue.positions; outside the table: skipped
};

// Pool output: a layout of kv_layout.hpp that the decode kernel's flat addressing covers:
// per-layer flat rows, or a token-major pool with head_stride D; host scales only. Paged
// blocks, other head strides, slot mappings and device scales take the epilogue-only kernel.
using DecodePool = KVLayout;

// Compiles (or finds in the cache) and loads every kernel it may launch, and allocates the
// split-K workspace and the arrival counters once, in the constructor. run_*() then only
// launches on the caller's stream: no allocation, no synchronization, no copy (capturable in a
// CUDA graph; replays reuse the workspace, the counters return to zero after every launch).
// One DecodeKV serves one stream at a time (launches on two streams at once would share the
// workspace). Throws ConfigError, ArgumentError, CompileError, CudaError.
class DecodeKV {
 public:
  DecodeKV(const DecodeModel& model, const DecodeOptions& options = {});
  ~DecodeKV();
  DecodeKV(const DecodeKV&) = delete;
  DecodeKV& operator=(const DecodeKV&) = delete;

  // k_out, v_out: [L, T, H, D] contiguous in the activation dtype.
  void run_stacked(const DecodeInput& in, void* k_out, void* v_out, CUstream stream);
  // Slot cache_loc[t] of `pool` (see DecodePool).
  void run_pool(const DecodeInput& in, const DecodePool& pool, CUstream stream);

  // Later launches read this cos/sin table (`rows` rows `row_stride` elements apart, 0 = R),
  // e.g. a serving engine's own; not copied. Throws ArgumentError.
  void set_cos_sin(const void* table, std::int64_t rows, std::int64_t row_stride = 0);

  // The spec launched for `num_tokens` tokens (per launch of up to 64) in `mode`.
  const DecodeSpec& spec_for(std::int64_t num_tokens, OutputMode mode) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// ---- choosing the path -----------------------------------------------------------------------

// The largest token count for which the decode kernel beats cuBLASLt + the epilogue kernel on
// `device`, as measured by bench/decode_bench ("crossover" in its JSON): options.decode_crossover
// (FKV_DECODE_CROSSOVER) when set (0 turns the decode path off), else the table of measured GPUs
// in decode.cpp, else 0.
std::int64_t decode_crossover(int device, const JitOptions& options);
std::int64_t decode_crossover(int device);  // with JitOptions::global()

// The table behind decode_crossover(): GPUs (name substring, SM count) on which
// bench/decode_bench measured the crossover, e.g. to precompile their decode kernels.
struct MeasuredDecodeGpu {
  std::string name;  // matched as a substring of the device name, e.g. "H200"
  int sm_count = 0;
  std::int64_t crossover = 0;
};
std::vector<MeasuredDecodeGpu> measured_decode_gpus();
// The entry whose name contains `name` (case-insensitive); ArgumentError listing the measured
// GPUs when none does.
MeasuredDecodeGpu measured_decode_gpu(const std::string& name);

// True when a call of `num_tokens` tokens should take the decode kernel.
inline bool use_decode_path(std::int64_t num_tokens, std::int64_t crossover) {
  return num_tokens > 0 && num_tokens <= crossover;
}

}  // namespace fkv
