/* The argument block of the decode-size kernel (templates/fused_proj_kv.cu), shared verbatim by
 * the host and the NVRTC-compiled template. Passed by value as the kernel's only parameter, so a
 * launch needs no device-side table, no allocation and no copy (graph capturable).
 * Plain C, fixed-width types, no includes: NVRTC compiles it without toolkit headers. */
#ifndef FKV_DECODE_PARAMS_H
#define FKV_DECODE_PARAMS_H

#define FKV_DECODE_MAX_LAYERS 32 /* layers the decode kernel covers in one launch */

/* The error bits, as in kernel_params.h (the same definitions, so both headers may meet). */
#define FKV_ERROR_BAD_POSITION 1u
#define FKV_ERROR_BAD_SLOT 2u

typedef struct FkvDecodeParams {
  /* hidden [num_tokens, hidden] in the activation dtype; rows x_stride elements apart,
   * 16-byte aligned (x_stride a multiple of 8). */
  const void* x;
  long long x_stride;
  long long num_tokens; /* tokens of this launch: 1 .. the kernel's token bucket */
  /* Packed W_kv [L * 2 * H * D, hidden], row-major, contiguous: per layer the K rows, then the
   * V rows (the layout FusedKVMaterializer packs), in the activation dtype or, quantized, one
   * byte per element (FP8 e4m3 or INT8; see w_scale). */
  const void* w;
  /* Split-K partials [splits, bucket, L*2*H*D] fp32, and one arrival counter per row tile,
   * zero between launches (the last CTA of a tile resets its counter). Owned by the host. */
  float* workspace;
  unsigned int* counters;
  const void* positions; /* [num_tokens] int32 or int64 (specialized) */
  /* cos/sin cache [max_position, R]: cos in columns [0, R/2), sin in [R/2, R). */
  const void* cos_sin;
  long long cos_sin_stride;   /* elements between rows */
  long long max_position;     /* rows; a position outside [0, max_position) skips its token */
  unsigned int* error_flag;   /* FKV_ERROR_* bits of skipped tokens are or-ed in; may be null */
  const float* k_norm_weight; /* [L, D] fp32, (1 + w) already folded; null without K norm */
  /* stacked mode: element (l, t, h, d) of K at k_out[l * out_layer_stride + (t * H + h) * D + d] */
  void* k_out;
  void* v_out;
  long long out_layer_stride;
  /* pool mode: row cache_loc[t] of each layer's buffer [num_slots, slot_stride]; < 0 skipped,
   * >= num_slots skipped and flagged */
  const void* cache_loc; /* [num_tokens] int32 or int64 (specialized) */
  long long slot_stride; /* elements between slots, >= H*D */
  long long num_slots;
  void* k_pool[FKV_DECODE_MAX_LAYERS];
  void* v_pool[FKV_DECODE_MAX_LAYERS];
  float eps[FKV_DECODE_MAX_LAYERS];
  /* FP8 caches store x / scale, saturated; 1.0 otherwise. */
  float k_scale[FKV_DECODE_MAX_LAYERS];
  float v_scale[FKV_DECODE_MAX_LAYERS];
  /* Quantized W (one byte per element): its fp32 scales, [L] (per-tensor scale of each layer),
   * [L * 2 * H * D] (per row) or [rows / 128, w_scale_cols] (128 x 128 blocks); null for dense W. */
  const float* w_scale;
  long long w_scale_cols;
} FkvDecodeParams;

#endif
