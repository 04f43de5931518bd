// spec: the specialization key of one fused-KV kernel and the launch policy that follows from
// it. Both halves of the policy are decided here and nowhere else: the block (Tiling, from the
// spec and the tuning knobs) and the grid (launch_grid, from the tiling, the device's SM count
// and the call's sizes). codegen bakes the tiling into the kernel as template arguments;
// materialize launches with the tiling's block and launch_grid's grid, so the two cannot
// disagree.
//
// Vocabulary: one name per thing; where two names remain, they name two things:
//  - `neox` is the rotary pair layout, named `is_neox_style` where it comes from a model
//    config (AttentionSpec, the C API's fkv_attention, the CLI's JSON: sglang's and vLLM's name);
//  - `k_norm` here is the K norm the kernel computes (k_norm.hpp: a kernel kind, None or Rms);
//    AttentionSpec::k_norm is the model's kind (Rms or RmsOnePlus), which the host folds into
//    the weight it passes: make_kernel_spec maps one to the other (kernel_k_norm);
//  - a slot is one token's row in a KV pool; `slots` is the index type of the per-token slot
//    arrays (`cache_loc`, sglang's out_cache_loc, and vLLM-style per-layer `slot_mappings`);
//    VariantOptions::index sets `positions` and `slots` together;
//  - Plan (validate.hpp) is a model's layer groups; LaunchGrid is one launch's geometry.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "fkv/options.hpp"
#include "fkv/validate.hpp"
#include "fkv/weights.hpp"

namespace fkv {

enum class DType { BF16, FP16, FP32, FP8_E4M3, FP8_E5M2 };
enum class IndexType { I32, I64 };
enum class OutputMode { Stacked, Pool };

std::string to_string(DType);       // "bf16", "fp16", "fp32", "fp8_e4m3", "fp8_e5m2"
const char* dtype_name(DType);      // the same, static storage ("?" for a value outside the enum)
std::string to_string(IndexType);   // "int32", "int64"
std::string to_string(OutputMode);  // "stacked", "pool"
DType parse_dtype(const std::string&);  // accepts the names above and torch-style aliases
int dtype_size(DType);
bool is_fp8(DType);

// How the threads cover the work. A (token, head) pair is handled by `lanes_per_head`
// consecutive lanes of one warp (a warp never splits a pair, so K-norm sums and RoPE partners
// move by warp shuffles); each lane owns elems_per_thread = vec * loads elements of K and of V
// for every layer of its block's layer chunk. Pairs are numbered token-major.
// KernelSpec::tiling derives it; FKV_BLOCK_WARPS, FKV_LAYERS_PER_BLOCK and FKV_LOADS_PER_LANE
// (JitOptions) tune it.
struct Tiling {
  int vec = 0;               // elements per load (16 bytes of activations where head_dim allows)
  int loads = 0;             // loads per lane and row
  int elems_per_thread = 0;  // vec * loads
  int lanes_per_head = 0;    // head_dim / elems_per_thread, <= 32
  int heads_per_warp = 0;    // 32 / lanes_per_head; the other lanes of a warp idle
  int warps_per_block = 0;
  int block_threads = 0;    // 32 * warps_per_block
  int heads_per_block = 0;  // (token, head) pairs per block
  int idle_lanes = 0;       // per warp: 32 - heads_per_warp * lanes_per_head
  // Layers per block pinned by FKV_LAYERS_PER_BLOCK; 0 = launch_grid chooses per call. A launch
  // parameter, not a template argument: kernels of any value are the same cache entry.
  int fixed_layers_per_block = 0;
};

// The most K elements of one token and layer (num_kv_heads * head_dim) a kernel may have. The
// kernels index a token's K/V row, and the decode kernel its packed weight rows
// (layers * 2 * num_kv_heads * head_dim), with 32-bit ints, and NVRTC only warns when such a
// constant overflows: with this bound 2 * kMaxLayers * kMaxHeadElements fits an int. 262143 is
// 32x a 64-head x 128 MHA layer (num_kv_heads = 16777216 with head_dim 128 is refused).
inline constexpr std::int64_t kMaxHeadElements = 2147483647 / (2 * kMaxLayers);
// The message for a spec over that bound (KernelSpec::check, validate).
std::string head_elements_error(int num_kv_heads, int head_dim);

struct KernelSpec {
  int num_kv_heads = 0;
  int head_dim = 0;
  int rotary_dim = 0;                    // 0 = no RoPE
  bool neox = true;                      // false = GPT-J interleaved pairs (is_neox_style)
  KNormKind k_norm = KNormKind::None;    // a kernel kind: kernel_k_norm(AttentionSpec::k_norm)
  DType act = DType::BF16;               // proj dtype (bf16, fp16, fp32)
  DType cache = DType::BF16;             // output dtype: act, fp8_e4m3 or fp8_e5m2
  DType cos_sin = DType::FP32;           // fp32 or act
  IndexType positions = IndexType::I64;  // of positions[T]
  IndexType slots = IndexType::I64;      // of cache_loc[T] and the slot_mappings (pool mode)
  OutputMode mode = OutputMode::Stacked;
  // Positions and slots are bounds-checked on the device in every build (an out-of-range token
  // is skipped and flagged in error_flag when one is given); debug_checks makes the host
  // require an error_flag, so that a debug run cannot miss them. The kernel code is the same.
  bool debug_checks = false;
  // Pool mode only: a general paged layout (block size, block/slot/head strides) with optional
  // per-layer slot mappings (vLLM, FlashInfer). Off: the flat layout [num_slots, slot_stride].
  bool paged = false;
  // An fp32 K/V bias [L, 2*H*D] added before the K norm; V is then rounded, not copied.
  bool kv_bias = false;

  // Canonical text, stable across versions of this struct's field order; part of cache keys.
  // e.g.
  // "H=8;D=128;R=128;neox=1;knorm=1;act=bf16;cache=bf16;cs=fp32;pos=int64;slot=int64;mode=stacked;debug=0"
  // (";paged=1" and ";bias=1" are appended only when set, so older keys stay the same; knorm=
  // is the kind's KNormInfo::key: 0 and 1 for None and Rms, as when it was a bool).
  std::string canonical() const;
  // A short file-system-safe name, e.g. "fkv_h8_d128_r128_neox_kn_bf16_bf16_stacked" (the
  // K norm's part is its KNormInfo::suffix; "_paged", "_bias" appended when set).
  std::string short_name() const;
  // The block policy: load width and loads per lane (fewest idle lanes; options.loads_per_lane
  // pins the loads where they tile the head, with the widest load that does), warps per block
  // (options.block_warps, else 2), the pinned layer chunk (options.layers_per_block). vec == 0
  // when head_dim cannot be tiled (check() says why).
  Tiling tiling(const JitOptions& options) const;
  Tiling tiling() const;  // with JitOptions::global()
  // Throws ConfigError/ArgumentError when the combination cannot be compiled, among them an
  // ArgumentError when num_kv_heads * head_dim > kMaxHeadElements or k_norm is not a kernel kind.
  void check() const;
  bool operator==(const KernelSpec& o) const { return canonical() == o.canonical(); }
};

// Launch geometry of one materialize launch: grid (x, y, z) and the layers each block covers.
struct LaunchGrid {
  unsigned x = 0, y = 0, z = 0;  // x: blocks of (token, head) pairs; y: layer chunks; z = 1
  int layers_per_block = 0;
};

// The grid policy for `num_tokens` tokens and `num_layers` layers (1..FKV_MAX_LAYERS, one
// launch) on a device that runs `resident_blocks` blocks of this kernel at once (SMs x the
// driver's occupancy for it: LoadedKernel::resident_blocks): x covers T*H pairs in blocks of
// tiling.heads_per_block; y splits the layers into the smallest chunks whose grid still fits in
// one wave (x * y <= resident_blocks), so that a small call spreads over the whole device and a
// large one keeps every layer of a token in one block (cos/sin read once, most loads in
// flight). tiling.fixed_layers_per_block pins the chunk instead. T = 0 or L = 0 gives an
// all-zero grid (nothing to launch). Pure: no CUDA call, so it is tested on the CPU.
LaunchGrid launch_grid(const KernelSpec& spec, const Tiling& tiling, std::int64_t resident_blocks,
                       std::int64_t num_tokens, int num_layers);

// The kernel spec for a validated group, with the dtypes chosen by the caller.
KernelSpec make_kernel_spec(const AttentionSpec& attn, DType act, DType cache,
                            OutputMode mode = OutputMode::Stacked, DType cos_sin = DType::FP32,
                            IndexType positions = IndexType::I64, IndexType slots = IndexType::I64);

// The dtypes, modes and weight format a deployment uses; with a Plan they give every kernel it
// needs.
struct VariantOptions {
  DType act = DType::BF16;
  DType cache = DType::BF16;  // act, fp8_e4m3 or fp8_e5m2
  DType cos_sin = DType::FP32;
  IndexType index = IndexType::I64;  // positions and cache_loc
  bool stacked = true;
  bool pool = true;
  // How the draft's K/V weights are stored (include/fkv/weights.hpp). The epilogue kernels do
  // not depend on it; the decode kernels and the quantized weights' own kernels do
  // (precompile.hpp).
  WeightFormat weights = WeightFormat::Dense;
};

// Activation dtype named by a config's dtype ("bfloat16", "float16", "float32"); bf16 if absent.
// An 8-bit dtype ("float8_e4m3fn": how the checkpoint stores its weights) gives bf16, with an
// info log line; a name that is no dtype ("auto") throws ConfigError naming `key` and the
// override (--dtype, act_dtype).
DType act_dtype_of(const std::string& config_dtype, const std::string& key = "torch_dtype");
// The same for a read config, naming its file and the key as written (text_config.torch_dtype).
DType act_dtype_of(const ModelConfig& config);

// One spec per (group, mode), in plan order, without duplicates.
std::vector<KernelSpec> kernel_specs_for(const Plan& plan, const VariantOptions& options);

}  // namespace fkv
