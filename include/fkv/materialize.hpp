// materialize: the user-facing operation. Checks arguments on the host against the kernel's
// spec, fills the parameter block and launches the fused norm + RoPE + KV-write kernel for up
// to FKV_MAX_LAYERS layers per launch (more layers take more launches), with the block of the
// kernel's Tiling and the grid of launch_grid (both decided in spec.hpp).
#pragma once

#include <cuda.h>

#include <cstdint>
#include <span>

#include "fkv/kv_layout.hpp"
#include "fkv/runtime.hpp"

namespace fkv {

// Inputs shared by both output modes. All pointers are device pointers.
struct FusedKVInputs {
  const void* proj = nullptr;            // [T, L, 2*H*D] in spec.act; last dim contiguous
  std::int64_t num_tokens = 0;           // T; 0 launches nothing
  std::int64_t num_layers = 0;           // L
  std::int64_t proj_stride_token = 0;    // elements; 0 = L*2*H*D (contiguous)
  std::int64_t proj_stride_layer = 0;    // elements; 0 = 2*H*D
  const void* positions = nullptr;       // [T] spec.positions
  const void* cos_sin = nullptr;         // [max_position, R] spec.cos_sin; unused when R = 0
  std::int64_t max_position = 0;         // rows of cos_sin
  std::int64_t cos_sin_stride = 0;       // elements; 0 = R
  const float* k_norm_weight = nullptr;  // [L, D] fp32 folded; iff k_norm_weighted(spec.k_norm)
  std::span<const float> eps;            // [L] (K norm only); empty = 1e-6 each
  // Device word, 4-byte aligned (optional; required when spec.debug_checks). The kernel never
  // reads or writes out of bounds: a token whose position is outside [0, max_position), or
  // whose slot is >= num_slots, is not written and the kernel ORs FKV_ERROR_BAD_POSITION /
  // FKV_ERROR_BAD_SLOT into this word. The caller clears it (e.g. cuMemsetD32Async).
  unsigned int* error_flag = nullptr;
  // K/V bias, fp32 [L, 2*H*D] (K heads, then V heads: proj's row layout), 16-byte aligned.
  // Required by, and only accepted by, a kernel with spec.kv_bias: k += bias before the K norm,
  // v = round(v + bias). fp32 holds any bf16/fp16 bias exactly.
  const float* kv_bias = nullptr;
  std::int64_t kv_bias_stride_layer = 0;  // elements; 0 = 2*H*D; a multiple of 4
};

// stacked mode: k_out, v_out [L, T, H, D] contiguous in spec.cache.
struct StackedOutput {
  void* k_out = nullptr;
  void* v_out = nullptr;
};

// pool mode: any pool layout of kv_layout.hpp (per-layer flat rows or paged blocks, a
// token-major pool, ...), checked by resolve_kv_layout against the kernel's heads, cache dtype
// and vector width. Paged addressing (block_size, block_stride, head_stride other than the
// layout's default, slot_mappings) needs a kernel with spec.paged. In this call "layer l" is
// the l-th of in.num_layers.
using PoolOutput = KVLayout;

// Throw ArgumentError naming the argument and the fix when shapes, strides, alignment or
// dtypes do not fit `kernel.spec`. No allocation beyond the error path; no sync.
void materialize_stacked(const LoadedKernel& kernel, const FusedKVInputs& in,
                         const StackedOutput& out, CUstream stream);
void materialize_pool(const LoadedKernel& kernel, const FusedKVInputs& in, const PoolOutput& out,
                      CUstream stream);

}  // namespace fkv
