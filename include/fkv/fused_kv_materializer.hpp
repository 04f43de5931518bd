// fused_kv_materializer: the whole operation for one draft model, built once and called per
// step: proj = hidden · W_kvᵀ (one cuBLASLt GEMM for every layer), then one fused
// norm + RoPE + KV-write launch per layer group, stacked or straight into the KV pool.
//
// Everything that allocates, copies or compiles happens in the constructor ("prepare"):
// packing the K/V weights of all layers into one matrix, folding (1 + w) K-norm weights,
// building and uploading each group's cos/sin table (fkv::RopeTable), the projection buffer for
// max_tokens, the cuBLASLt handle and workspace, and loading every kernel. materialize_*() then
// only launches on the caller's stream: no allocation, no synchronization, no host-device copy,
// so it can be captured in a CUDA graph.
//
// Small calls, 1..decode_crossover() tokens, take the decode-size kernel instead (include/
// fkv/decode.hpp): one launch that streams the packed weights once and runs the same epilogue,
// with no projection buffer and no cuBLASLt call (docs/decode.md says when it is used).
//
// cuBLASLt is loaded with dlopen on first construction (libcublasLt.so.<major>), so that the
// rest of fkv-jit still needs only libnvrtc at run time; its absence is a clear CudaError.
#pragma once

#include <cuda.h>

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "fkv/config.hpp"
#include "fkv/kv_layout.hpp"
#include "fkv/runtime.hpp"
#include "fkv/spec.hpp"
#include "fkv/validate.hpp"
#include "fkv/weights.hpp"

namespace fkv {

// Loads cuBLASLt if it is not loaded yet and returns the file it came from. It is found as NVRTC
// is (open_cuda_library in nvrtc_loader.hpp: the folders given to set_cuda_library_dirs, e.g.
// the pip nvidia-* wheels', then the dynamic linker, then /usr/local/cuda/lib64), of the CUDA
// major fkv-jit was built against. Throws CudaError saying what was tried when there is none.
std::string cublaslt_library();

struct MaterializerOptions {
  ValidationMode mode = ValidationMode::Strict;  // Strict: the seed's semantics (one group)
  DType act = DType::BF16;    // hidden, W_kv and proj dtype: bf16 or fp16 (the GEMM's)
  DType cache = DType::BF16;  // pool dtype: act, fp8_e4m3 or fp8_e5m2 (stacked output is act)
  DType cos_sin = DType::FP32;
  IndexType index = IndexType::I64;  // positions and cache_loc
  std::int64_t max_tokens = 8192;    // rows of the projection buffer: the largest T per call
  std::int64_t max_position = 0;     // rows of each cos/sin table; 0 = max_position_embeddings
  int device = 0;
  bool stacked = true;  // prepare the stacked-output kernels
  bool pool = true;     // prepare the pool kernels
  // Pool kernels for the paged layouts (Pool::block_size, strides, slot_mappings); off: the
  // flat layout [num_slots, slot_stride].
  bool paged = false;
  // Positions and slots are always bounds-checked on the device (error_flag()); this only
  // marks the kernels' specs as debug builds (kept for compatibility).
  bool debug_checks = false;
  // Tensor parallelism: this materializer serves rank tp_rank of tp_size (see shard_plan in
  // validate.hpp): the weights and outputs hold only the rank's KV heads.
  int tp_size = 1;
  int tp_rank = 0;
  // The cos/sin tables are the caller's (set_cos_sin), e.g. a serving engine's own table, so
  // that K is rotated with exactly the values the engine rotates Q with. The constructor then
  // builds no table (max_position is unused) and materialize_*() refuses to run until every
  // group with RoPE has one.
  bool external_cos_sin = false;
  std::size_t gemm_workspace_bytes = 32u << 20;
  // Quantized weights above the decode crossover: the bytes of one dequantized slice (whole
  // 128-row blocks; at least one block). Each slice is one more GEMM launch: on the H200 32 MB
  // slices were faster than 8 or 4 MB ones at 512 and 4096 tokens (docs/performance.md), and
  // they keep less than half of a Qwen3-8B draft's weights dense at a time.
  std::size_t dequant_slice_bytes = 32u << 20;
  // FP8 weights above the decode crossover (docs/quantized.md, "Above the decode crossover"):
  // true = cuBLASLt's FP8 GEMM over the stored bytes, the call's activations quantized to e4m3
  // on the fly with one scale per token (per token and 128 columns for fp8_block, and for
  // fp8_tensor calls of up to 64 tokens, whose scales then go as blocks): W8A8, as the
  // engines' FP8 linear methods compute, and about 0.6-0.7x the bf16 step from 512 tokens on
  // the H200. false, INT8 weights, or a GPU whose cuBLASLt has no such GEMM (before sm_90):
  // dequantized slices with the activations kept (W8A16).
  bool fp8_gemm = true;
  // With fp8_gemm, fp8_tensor and fp8_channel calls of up to 64 tokens above the decode
  // crossover on sm_90 (H100, H200): true = fkv-jit's own FP8 stream GEMM (docs/quantized.md,
  // "The FP8 stream GEMM": TMA, warpgroup MMAs, the rows shared out over one CTA per SM), the
  // activations quantized per token and 128 columns as for cuBLASLt's block-scaled GEMM.
  // Experimental and off by default: on the H200 it is no faster than cuBLASLt's GEMM up to 32
  // tokens and slower above, and the decode kernel beats both up to 32 (docs/performance.md).
  // Other GPUs and formats: ignored. C++ only.
  bool fp8_stream_gemm = false;
  // INT8 weights above the decode crossover, calls of up to this many tokens (docs/quantized.md):
  // cuBLASLt's int8 GEMM over the stored bytes, the activations split into two int8 parts per
  // token (x = s * (hi + lo / 254): within 2^-16 of the token's largest value, so W8A16 but for
  // that), int32 sums, then the scales; it holds 2 * hidden + 8 * N bytes of scratch per token
  // (N = the packed K/V rows). Larger calls, 0, or a GPU whose cuBLASLt has no int8 GEMM:
  // dequantized slices.
  std::int64_t int8_gemm_tokens = 512;
  // Calls of 1..decode_crossover tokens take the decode-size kernel when the model allows it
  // (one group, bf16/fp16, no K/V bias, not paged, no debug checks: decode_unsupported()).
  // -1 = fkv::decode_crossover(device): FKV_DECODE_CROSSOVER, else the value measured for this
  // GPU, else 0; whenever that is positive, quantized weights take 32 when the FP8 or INT8
  // GEMM serves the calls above it (fp8_gemm(), int8_gemm_tokens()), else 64. 0 = never (cuBLASLt +
  // the epilogue kernel for every call).
  std::int64_t decode_crossover = -1;
};

// Per attention layer, in model order (non-attention layers have none).
struct MaterializerWeights {
  // W_kv of the layer: the K rows then the V rows of its QKV projection, [2*H*D, hidden]
  // row-major in options.act, device memory. Copied (packed) by the constructor.
  // Under tensor parallelism H is the rank's share: the K rows of its heads, then the V rows
  // of its heads (what a TP-local qkv_proj holds after its Q rows).
  std::vector<const void*> w_kv;
  std::int64_t w_kv_row_stride = 0;  // elements between rows; 0 = hidden
  // How w_kv is stored (include/fkv/weights.hpp). Quantized: one byte per element (FP8 e4m3 or
  // INT8), read as stored by the decode-size kernel and dequantized a few thousand rows at a
  // time for the cuBLASLt path; never kept as a dense copy. Activations bf16 or fp16.
  WeightFormat format = WeightFormat::Dense;
  // Quantized formats: per attention layer, its fp32 scales in device memory, as the engines
  // store them for the K/V rows: 1 value (fp8_tensor), 2*H*D values (fp8_channel,
  // int8_channel), [2*H*D / 128, ceil(hidden / 128)] row-major (fp8_block; 2*H*D a multiple of
  // 128). Copied by the constructor and by refresh_weights. Empty for dense weights.
  std::vector<const float*> w_scale;
  // K-norm weight [D] as stored in the checkpoint (host, fp32): w for Rms, w for RmsOnePlus
  // too (the constructor folds it into 1 + w). Empty when the config has no K norm.
  std::vector<std::vector<float>> k_norm;
  std::vector<float> eps;  // empty: the config's per-layer eps
  // Optional K/V bias per layer (host, fp32, [2*H*D]: the K part then the V part, rank-local
  // under tensor parallelism). Empty: no bias. Given: every layer has one; k += bias before
  // the K norm and v = round(v + bias).
  std::vector<std::vector<float>> kv_bias;
};

// Per-call inputs. Device pointers.
struct MaterializerInput {
  const void* hidden = nullptr;     // [T, hidden] in options.act, rows contiguous
  std::int64_t num_tokens = 0;      // T <= max_tokens; 0 launches nothing
  std::int64_t hidden_stride = 0;   // elements between rows; 0 = hidden
  const void* positions = nullptr;  // [T] options.index
};

class FusedKVMaterializer {
 public:
  // Validates `config` (Strict throws ConfigError with the seed helper's mismatch texts), checks
  // the weights against it and prepares everything (see above) on `options.device`, in the calling
  // thread's current context (or the device's primary context). Throws ConfigError, ArgumentError,
  // CompileError, CudaError.
  FusedKVMaterializer(const ModelConfig& config, std::int64_t hidden_size,
                      const MaterializerWeights& weights, const MaterializerOptions& options = {});
  ~FusedKVMaterializer();
  FusedKVMaterializer(const FusedKVMaterializer&) = delete;
  FusedKVMaterializer& operator=(const FusedKVMaterializer&) = delete;

  const Plan& plan() const;
  // Model numbers of the attention layers, in model order: the order of MaterializerWeights,
  // of pool buffers and of stacked outputs.
  const std::vector<int>& layers() const;

  // Stacked output: per group g, k_out[g] and v_out[g] are [L_g, T, H_g, D_g] contiguous in
  // options.act, layers in the group's order (plan().groups[g].layers).
  void materialize_stacked(const MaterializerInput& in, std::span<void* const> k_out,
                           std::span<void* const> v_out, CUstream stream);

  // Pool output: any pool layout of kv_layout.hpp, in options.cache, its layer l the l-th
  // attention layer (layers() order): per-layer buffers k_buffers[i], v_buffers[i] with flat
  // rows [num_slots, slot_stride] or (options.paged) paged blocks; a token-major pool `base`
  // holding every layer's K and V of a slot in one row; ... Slot cache_loc[t] (< 0 skipped;
  // >= num_slots skipped and flagged). Scales: per attention layer, fp8 pools only; empty =
  // 1.0; device scales (read at run time, graph-safe) need every group's layers adjacent in
  // layers() order. Layouts the decode kernel covers (flat rows, host scales) take it for small
  // calls; the others take cuBLASLt + the epilogue kernel. A token-major pool in a grouped plan
  // whose groups differ in H*D needs explicit layer_stride, kv_offset and slot_stride.
  using Pool = KVLayout;
  void materialize_pool(const MaterializerInput& in, const Pool& pool, CUstream stream);
  // Either of the above, as `out.kind` says: KVLayoutKind::Stacked writes k_buffers[g],
  // v_buffers[g] per group as materialize_stacked; every other kind is a pool.
  void materialize(const MaterializerInput& in, const KVLayout& out, CUstream stream);

  // Copies new weights into the buffers the constructor filled, in place: the packed W_kv, the
  // folded K-norm weights and the K/V bias keep their device addresses, so a CUDA graph
  // captured earlier replays with the new values. `weights` is checked as by the constructor
  // and must have the same layout (a bias iff constructed with one); eps is a launch argument
  // (baked into captured graphs), so values different from the constructor's are refused.
  // The copies are ordered on `stream`; the caller makes sure no launch on another stream
  // reads the weights meanwhile. Throws ArgumentError, CudaError.
  void refresh_weights(const MaterializerWeights& weights, CUstream stream);

  // Uses the caller's cos/sin table for group `group`: `rows` rows of R = rotary_dim values
  // (cos in columns [0, R/2), sin in [R/2, R)), options.cos_sin dtype, device memory, rows
  // `row_stride` elements apart (0 = R). Not copied: the table must stay alive and unchanged
  // in size while launches (and graphs captured with it) may read it. Positions >= rows are
  // skipped and flagged (error_flag()). A later call replaces the table for later launches
  // only. Throws ArgumentError.
  void set_cos_sin(std::size_t group, const void* table, std::int64_t rows,
                   std::int64_t row_stride = 0);

  // Grows the projection buffer to `max_tokens` rows (nothing when it has them already), for
  // engines whose largest call is known only at run time. It allocates, so not while a stream
  // is capturing; the old buffer is kept until destruction, so a graph captured earlier still
  // reads and writes valid memory. Throws ArgumentError, CudaError.
  void reserve_tokens(std::int64_t max_tokens);
  std::int64_t max_tokens() const;

  // The device buffers the launches read, for engines that expose them (e.g. sglang's
  // flat_kv_weight_t): the packed W_kv [N, hidden] row-major in options.act, or one byte per
  // element for quantized weights (their packed scales: packed_weight_scales()) (N =
  // projection_width(), groups in plan order), and group g's folded K-norm weights
  // [L_g, D_g] fp32 (0 without a K norm). Owned by the materializer.
  CUdeviceptr packed_weights() const;
  CUdeviceptr packed_weight_scales() const;  // 0 for dense weights
  WeightFormat weight_format() const;
  CUdeviceptr k_norm_weights(std::size_t group) const;

  // The projection of the last call, [T, N] row-major (N = sum over layers of 2*H*D, layers in
  // group order), e.g. for tests.
  CUdeviceptr projection() const;
  std::int64_t projection_width() const;

  // The device word the kernels set when they skip a token for a position outside the cos/sin
  // table or a slot >= num_slots (FKV_ERROR_BAD_POSITION | FKV_ERROR_BAD_SLOT); zero at
  // construction, cleared only by the caller or take_error_flag().
  CUdeviceptr error_flag() const;

  // The largest token count a call sends to the decode-size kernel (0: none; see
  // MaterializerOptions::decode_crossover). Such a call launches once and leaves projection()
  // untouched; a pool call with device scales or slot mappings takes the cuBLASLt path anyway.
  std::int64_t decode_crossover() const;
  // Whether calls above the decode crossover take cuBLASLt's FP8 GEMM (MaterializerOptions::
  // fp8_gemm, FP8 weights, a cuBLASLt with that GEMM for this GPU); else dequantized slices or,
  // for dense weights, the dense GEMM.
  bool fp8_gemm() const;
  // Whether that path's calls of up to 64 tokens take the FP8 stream GEMM
  // (MaterializerOptions::fp8_stream_gemm; fp8_tensor or fp8_channel on sm_90).
  bool fp8_stream_gemm() const;
  // The largest call above the decode crossover that takes the INT8 GEMM (MaterializerOptions::
  // int8_gemm_tokens, INT8 weights, a cuBLASLt with that GEMM for this GPU); 0: none.
  std::int64_t int8_gemm_tokens() const;
  // Synchronizes `stream`, returns the error word and clears it.
  unsigned int take_error_flag(CUstream stream);

  // Not thread-safe per object: one materializer serves one stream at a time.
 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace fkv
