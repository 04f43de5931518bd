// materialize: the user-facing operation. Checks arguments on the host against the kernel's
// spec, fills the parameter block and launches the fused norm + RoPE + KV-write kernel for up
// to FKV_MAX_LAYERS layers per launch (more layers take more launches), with the block of the
// kernel's Tiling and the grid of launch_grid (both decided in spec.hpp).
#pragma once

#include <cuda.h>

#include <cstdint>
#include <span>

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
  const float* k_norm_weight = nullptr;  // [L, D] fp32, (1+w) folded; required iff spec.k_norm
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

// pool mode: each layer's buffers in spec.cache; token t goes to slot cache_loc[t]
// (cache_loc[t] < 0 is skipped, >= num_slots skipped and flagged).
//  - flat layout (spec.paged = false): slot s is row s of [num_slots, slot_stride];
//  - paged layout (spec.paged = true): element (s, h, d) of a layer's buffer is at
//      (s / block_size) * block_stride + (s % block_size) * slot_stride + h * head_stride + d,
//    e.g. vLLM's [num_blocks, block_size, H, D] (block_stride = block_size*H*D, slot_stride =
//    H*D, head_stride = D; k and v separate tensors or kv_cache[0] / kv_cache[1] of
//    [2, num_blocks, block_size, H, D]), FlashInfer's NHD [num_blocks, 2, block_size, H, D]
//    (v buffer = k buffer + block_size*H*D, block_stride = 2*block_size*H*D) and HND
//    [num_blocks, 2, H, block_size, D] (slot_stride = D, head_stride = block_size*D).
//    All layers of one call share the layout; each has its own buffers.
struct PoolOutput {
  const void* cache_loc =
      nullptr;  // [T] spec.slots (may be null when every layer has a slot mapping)
  std::span<void* const> k_buffers;  // [L]
  std::span<void* const> v_buffers;  // [L]
  std::int64_t num_slots = 0;        // slots per layer buffer (paged: num_blocks * block_size)
  std::int64_t slot_stride = 0;      // elements; 0 = H*D
  std::span<const float> k_scales;   // [L] host values for FP8 caches; empty = 1.0
  std::span<const float> v_scales;
  // FP8 caches: [L] fp32 scales in device memory, read by the kernel at run time (graph-safe:
  // a replayed graph sees the current values). Instead of k_scales / v_scales, not with them.
  const float* k_scales_device = nullptr;
  const float* v_scales_device = nullptr;
  // Paged layout only (spec.paged); 0 = default. Strides in elements, multiples of the
  // kernel's vector width; the rows of one block must not overlap (checked).
  std::int64_t block_size = 0;    // slots per block; 0 = 1
  std::int64_t block_stride = 0;  // 0 = one block's extent (contiguous blocks)
  std::int64_t head_stride = 0;   // 0 = D
  // Paged layout only: per-layer slot mappings, [L] device pointers to [T] spec.slots; a null
  // entry uses cache_loc. Empty = cache_loc for every layer.
  std::span<const void* const> slot_mappings;
};

// Throw ArgumentError naming the argument and the fix when shapes, strides, alignment or
// dtypes do not fit `kernel.spec`. No allocation beyond the error path; no sync.
void materialize_stacked(const LoadedKernel& kernel, const FusedKVInputs& in,
                         const StackedOutput& out, CUstream stream);
void materialize_pool(const LoadedKernel& kernel, const FusedKVInputs& in, const PoolOutput& out,
                      CUstream stream);

}  // namespace fkv
