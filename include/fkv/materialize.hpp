// materialize: the user-facing operation. Checks arguments on the host against the kernel's
// spec, fills the parameter block and launches the fused norm + RoPE + KV-write kernel for up
// to FKV_MAX_LAYERS layers per launch (more layers take more launches).
#pragma once

#include <cuda.h>

#include <cstdint>
#include <span>

#include "fkv/runtime.hpp"

namespace fkv {

// Inputs shared by both output modes. All pointers are device pointers.
struct FusedKVInputs {
  const void* proj = nullptr;          // [T, L, 2*H*D] in spec.act; last dim contiguous
  std::int64_t num_tokens = 0;         // T; 0 launches nothing
  std::int64_t num_layers = 0;         // L
  std::int64_t proj_stride_token = 0;  // elements; 0 = L*2*H*D (contiguous)
  std::int64_t proj_stride_layer = 0;  // elements; 0 = 2*H*D
  const void* positions = nullptr;     // [T] spec.positions
  const void* cos_sin = nullptr;       // [max_position, R] spec.cos_sin; unused when R = 0
  std::int64_t max_position = 0;       // rows of cos_sin
  std::int64_t cos_sin_stride = 0;     // elements; 0 = R
  const float* k_norm_weight = nullptr;  // [L, D] fp32, (1+w) folded; required iff spec.k_norm
  std::span<const float> eps;          // [L] (K norm only); empty = 1e-6 each
  unsigned int* error_flag = nullptr;  // device word, debug mode only (optional)
};

// stacked mode: k_out, v_out [L, T, H, D] contiguous in spec.cache.
struct StackedOutput {
  void* k_out = nullptr;
  void* v_out = nullptr;
};

// pool mode: each layer's buffers [num_slots, slot_stride] in spec.cache; row cache_loc[t];
// cache_loc[t] < 0 is skipped.
struct PoolOutput {
  const void* cache_loc = nullptr;     // [T] spec.slots
  std::span<void* const> k_buffers;    // [L]
  std::span<void* const> v_buffers;    // [L]
  std::int64_t num_slots = 0;
  std::int64_t slot_stride = 0;        // elements; 0 = H*D
  std::span<const float> k_scales;     // [L] for FP8 caches; empty = 1.0
  std::span<const float> v_scales;
};

// Launch geometry for T tokens and L layers on `kernel`'s device.
struct LaunchPlan {
  unsigned grid_x = 0, grid_y = 0, grid_z = 0;
  int layers_per_block = 0;
};
LaunchPlan plan_launch(const LoadedKernel& kernel, std::int64_t num_tokens, int num_layers);

// Throw ArgumentError naming the argument and the fix when shapes, strides, alignment or
// dtypes do not fit `kernel.spec`. No allocation beyond the error path; no sync.
void materialize_stacked(const LoadedKernel& kernel, const FusedKVInputs& in,
                         const StackedOutput& out, CUstream stream);
void materialize_pool(const LoadedKernel& kernel, const FusedKVInputs& in, const PoolOutput& out,
                      CUstream stream);

}  // namespace fkv
