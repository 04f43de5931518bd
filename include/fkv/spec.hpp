// spec: the specialization key of one fused-KV kernel (SPEC §4) and the launch tiling that
// follows from it. The tiling is derived here, in one place, and used both by codegen (as
// template arguments) and by the runtime (as launch dimensions), so the two cannot disagree.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "fkv/validate.hpp"

namespace fkv {

enum class DType { BF16, FP16, FP32, FP8_E4M3, FP8_E5M2 };
enum class IndexType { I32, I64 };
enum class OutputMode { Stacked, Pool };

std::string to_string(DType);       // "bf16", "fp16", "fp32", "fp8_e4m3", "fp8_e5m2"
std::string to_string(IndexType);   // "int32", "int64"
std::string to_string(OutputMode);  // "stacked", "pool"
DType parse_dtype(const std::string&);  // accepts the names above and torch-style aliases
int dtype_size(DType);
bool is_fp8(DType);

// How the threads cover the work. A (token, head) pair is handled by `lanes_per_head`
// consecutive lanes of one warp (a warp never splits a pair, so K-norm sums and RoPE partners
// move by warp shuffles); each lane owns elems_per_thread = vec * loads elements of K and of V
// for every layer of its block's layer chunk. Pairs are numbered token-major.
struct Tiling {
  int vec = 0;               // elements per load (16 bytes of activations where head_dim allows)
  int loads = 0;             // loads per lane and row
  int elems_per_thread = 0;  // vec * loads
  int lanes_per_head = 0;    // head_dim / elems_per_thread, <= 32
  int heads_per_warp = 0;    // 32 / lanes_per_head; the other lanes of a warp idle
  int warps_per_block = 0;
  int block_threads = 0;     // 32 * warps_per_block
  int heads_per_block = 0;   // (token, head) pairs per block
  int idle_lanes = 0;        // per warp: 32 - heads_per_warp * lanes_per_head
};

struct KernelSpec {
  int num_kv_heads = 0;
  int head_dim = 0;
  int rotary_dim = 0;  // 0 = no RoPE
  bool neox = true;    // false = GPT-J interleaved pairs
  bool k_norm = false;
  DType act = DType::BF16;      // proj dtype (bf16, fp16, fp32)
  DType cache = DType::BF16;    // output dtype: act, fp8_e4m3 or fp8_e5m2
  DType cos_sin = DType::FP32;  // fp32 or act
  IndexType positions = IndexType::I64;
  IndexType slots = IndexType::I64;
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
  // e.g. "H=8;D=128;R=128;neox=1;knorm=1;act=bf16;cache=bf16;cs=fp32;pos=int64;slot=int64;mode=stacked;debug=0"
  // (";paged=1" and ";bias=1" are appended only when set, so older keys stay the same).
  std::string canonical() const;
  // A short file-system-safe name, e.g. "fkv_h8_d128_r128_neox_kn_bf16_bf16_stacked"
  // ("_paged", "_bias" appended when set).
  std::string short_name() const;
  Tiling tiling() const;
  // Throws ConfigError/ArgumentError when the combination cannot be compiled.
  void check() const;
  bool operator==(const KernelSpec& o) const { return canonical() == o.canonical(); }
};

// The kernel spec for a validated group, with the dtypes chosen by the caller.
KernelSpec make_kernel_spec(const AttentionSpec& attn, DType act, DType cache,
                            OutputMode mode = OutputMode::Stacked,
                            DType cos_sin = DType::FP32,
                            IndexType positions = IndexType::I64,
                            IndexType slots = IndexType::I64);

// The dtypes and modes a deployment uses; with a Plan they give every kernel it needs.
struct VariantOptions {
  DType act = DType::BF16;
  DType cache = DType::BF16;  // act, fp8_e4m3 or fp8_e5m2
  DType cos_sin = DType::FP32;
  IndexType index = IndexType::I64;  // positions and cache_loc
  bool stacked = true;
  bool pool = true;
};

// Activation dtype named by a config's dtype ("bfloat16", "float16", "float32"); bf16 if absent.
DType act_dtype_of(const std::string& config_dtype);

// One spec per (group, mode), in plan order, without duplicates.
std::vector<KernelSpec> kernel_specs_for(const Plan& plan, const VariantOptions& options);

}  // namespace fkv
