/* The argument block of the fused KV kernel, shared verbatim by the host (C/C++) and the
 * NVRTC-compiled templates, so both sides agree on its layout. Passed by value as the
 * kernel's single parameter: per-layer pointers, eps and scales travel inside it, so a launch
 * needs no device-side table, no allocation and no host-device copy (graph capturable).
 * Plain C, fixed-width types, no includes: NVRTC compiles it without toolkit headers. */
#ifndef FKV_KERNEL_PARAMS_H
#define FKV_KERNEL_PARAMS_H

#define FKV_MAX_LAYERS 32 /* layers per launch; more layers take more launches */

typedef struct FkvKernelParams {
  /* Input: proj[t, l, :] = [K heads | V heads], K at [h*D, (h+1)*D), V at KV + h*D.
   * Strides in elements; the last dimension is contiguous. */
  const void* proj;
  long long proj_stride_token;
  long long proj_stride_layer;
  long long num_tokens;
  const void* positions; /* [T] int32 or int64 (specialized) */
  /* cos/sin cache [max_position, R]: cos in columns [0, R/2), sin in [R/2, R). */
  const void* cos_sin;
  long long cos_sin_stride; /* elements between rows */
  long long max_position;   /* rows; a position outside [0, max_position) skips its token */
  const float* k_norm_weight; /* [num_layers, D] fp32 (1+w already folded), null without K norm */
  int num_layers;             /* layers in this launch, <= FKV_MAX_LAYERS */
  int layers_per_block;       /* grid.y = ceil(num_layers / layers_per_block) */
  /* stacked mode: k_out, v_out [num_layers, T, H, D], contiguous */
  void* k_out;
  void* v_out;
  /* pool mode: row cache_loc[t] of each layer's buffer [num_slots, slot_stride]; < 0 skipped */
  const void* cache_loc; /* [T] int32 or int64 (specialized) */
  long long num_slots;   /* a slot >= num_slots skips its token (and sets FKV_ERROR_BAD_SLOT) */
  long long slot_stride; /* elements between slots (flat: >= H*D) */
  /* Set (atomicOr) when a token was skipped for a bad position or slot; may be null. */
  unsigned int* error_flag;
  /* Kernels with BIAS: fp32 [num_layers, 2*H*D] (K part, then V part), layer stride below. */
  const float* kv_bias;
  long long kv_bias_stride;
  /* PAGED pool kernels: element (slot, h, d) of a layer's buffer is at
   * (slot / block_size) * block_stride + (slot % block_size) * slot_stride + h * head_stride + d */
  long long block_size;
  long long block_stride;
  long long head_stride;
  int per_layer_slots; /* PAGED: 1 = slot_mapping[l] replaces cache_loc for layer l */
  int reserved0;
  /* FP8 caches: per-layer scales in device memory ([num_layers] fp32, read at run time, so a
   * captured graph sees updates); null = the host values k_scale[] / v_scale[] below. */
  const float* k_scale_ptr;
  const float* v_scale_ptr;
  void* k_pool[FKV_MAX_LAYERS];
  void* v_pool[FKV_MAX_LAYERS];
  const void* slot_mapping[FKV_MAX_LAYERS]; /* PAGED with per_layer_slots: [T] per layer */
  float eps[FKV_MAX_LAYERS];
  /* FP8 caches store x / scale, saturated; 1.0 otherwise. */
  float k_scale[FKV_MAX_LAYERS];
  float v_scale[FKV_MAX_LAYERS];
} FkvKernelParams;

#define FKV_ERROR_BAD_POSITION 1u
#define FKV_ERROR_BAD_SLOT 2u

#endif
