/* fkv.h: the C API of fkv-jit (docs/integration.md). Plain C99, usable from C, from C++ and through
 * FFI (the Python binding `fkv_jit` reads configs, plans and precompiles through it).
 *
 * Conventions
 * - Every function returns an fkv_status (FKV_OK = 0) unless it is a plain accessor. On
 *   failure the text of the error (what is wrong and how to fix it) is kept per thread and read
 *   with fkv_last_error(); it stays valid until the next failing call on the same thread.
 *   Successful calls do not clear it.
 * - No C++ exception ever crosses this boundary.
 * - Handles (fkv_config, fkv_plan, fkv_kernel) are opaque, created by one function and freed by
 *   the matching *_free (NULL is accepted and ignored). A handle may be read from several
 *   threads at once; nothing mutates it after creation.
 * - Strings returned by accessors belong to the handle and live as long as it does.
 * - Pointers documented as "device" are CUDA device pointers in the calling thread's current
 *   context; `stream` is a CUstream / cudaStream_t (NULL = the legacy default stream).
 * - Strides and counts are in elements, not bytes.
 * - Option structs (fkv_precompile_options, fkv_materializer_options, fkv_weight_quant) start
 *   with `struct_size` and grow only at the end. Their init functions are macros that pass
 *   sizeof(*options) to the library, which fills in the fields inside that size (defaults), sets
 *   struct_size and writes nothing past it; readers read only the fields inside struct_size and
 *   use the default for the others, so a program built against an older fkv.h keeps working
 *   with a newer library. A struct_size of 0 (options never initialized) or too small to hold a
 *   required field is FKV_ERR_ARGUMENT; fields past what the library knows (a newer fkv.h)
 *   are ignored. Programs built before struct_size existed call the unversioned symbols
 *   (fkv_precompile_options_init, fkv_precompile_with_options, fkv_materializer_options_init,
 *   fkv_materializer_create); the library keeps them and serves them the first layouts, without
 *   struct_size, decode_gpu and decode_crossover. FFI users (ctypes, cffi) call the *_v2, *_v3
 *   and *_sized symbols and set struct_size themselves.
 * - Structs the library writes (fkv_layer_info, fkv_attention_info, fkv_kernel_desc,
 *   fkv_precompile_result) never change: a new field means a new struct and function.
 * - Thread-local error texts and the library's process-wide state are never destroyed, so these
 *   functions may be called from atexit handlers and static destructors.
 */
#ifndef FKV_FKV_H
#define FKV_FKV_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(_WIN32)
#define FKV_API
#else
#define FKV_API __attribute__((visibility("default")))
#endif

/* ---- status and errors ------------------------------------------------------------------ */

typedef enum fkv_status {
  FKV_OK = 0,
  FKV_ERR_CONFIG_MISMATCH = 1, /* the config was read, but its layers cannot share the fused
                                  path (the seed helper's "... mismatch across layers for fused KV
                                  path: ..." texts), or a TP degree does not split its KV heads */
  FKV_ERR_BAD_INPUT = 2,       /* config file missing or unreadable, malformed JSON, bad values,
                                  a malformed FKV_* environment variable */
  FKV_ERR_COMPILE = 3,         /* NVRTC rejected a kernel, or the arch is not supported */
  FKV_ERR_CUDA = 4,            /* the CUDA driver is missing, or a driver call failed */
  FKV_ERR_CACHE = 5,           /* the kernel cache cannot be used as asked */
  FKV_ERR_ARGUMENT = 6,        /* a bad argument: null handle/pointer, unknown dtype name,
                                  shapes, strides, alignment or dtypes of a launch */
  FKV_ERR_OUT_OF_MEMORY = 7,   /* host allocation failed */
  FKV_ERR_INTERNAL = 8,        /* anything else (a bug: please report it with the text) */
  FKV_ERR_UNSUPPORTED = 9      /* an architecture or layer the fused path cannot serve (MLA,
                                  linear attention, K norm across heads, ...) or an unknown
                                  model_type */
} fkv_status;

/* The text of the last error on this thread ("" when there was none). Never NULL. */
FKV_API const char* fkv_last_error(void);
/* For FKV_ERR_COMPILE: the NVRTC log of the last error on this thread; "" otherwise. */
FKV_API const char* fkv_last_error_log(void);
/* A constant name for a status: "FKV_OK", "FKV_ERR_CONFIG_MISMATCH", ... */
FKV_API const char* fkv_status_name(fkv_status status);

/* "0.1.0" */
FKV_API const char* fkv_version(void);
/* 1 when a CUDA driver with at least one device can be loaded, else 0. Never fails. */
FKV_API int fkv_driver_available(void);

/* ---- model configs ----------------------------------------------------------------------- */

typedef struct fkv_config fkv_config;

typedef enum fkv_k_norm {
  FKV_K_NORM_NONE = 0,
  FKV_K_NORM_RMS = 1,         /* k * rsqrt(mean(k^2) + eps) * w */
  FKV_K_NORM_RMS_ONE_PLUS = 2 /* the same with (1 + w): fold it into w before a launch */
} fkv_k_norm;

/* Reads a HuggingFace config.json or the explicit per-layer schema. FKV_ERR_BAD_INPUT names the
 * file, the key and, for malformed JSON, the byte offset and line. */
FKV_API fkv_status fkv_config_load(const char* path, fkv_config** out);
/* The same from JSON text; `name` (may be NULL) is used in messages instead of a file name. */
FKV_API fkv_status fkv_config_from_json(const char* json_text, const char* name, fkv_config** out);
FKV_API void fkv_config_free(fkv_config* config);

/* Model-level facts; 0 / "" when the config does not say. */
FKV_API int fkv_config_num_layers(const fkv_config* config);
FKV_API int fkv_config_hidden_size(const fkv_config* config);
FKV_API int64_t fkv_config_max_position_embeddings(const fkv_config* config);
FKV_API const char* fkv_config_dtype(const fkv_config* config);        /* "bfloat16", ... */
FKV_API const char* fkv_config_architecture(const fkv_config* config); /* architectures[0] */
/* How the config's quantization_config (or compression_config) says the K/V projection weights
 * are stored (docs/config-rules.md, "quantization_config"): *format = "" when it declares
 * nothing, else the canonical name ("dense" where it leaves them unquantized, "fp8_tensor",
 * "fp8_channel", "fp8_block", "int8_channel"; valid for the life of the process). A declaration
 * fkv-jit does not read returns FKV_ERR_UNSUPPORTED (a packed 4-bit or unknown scheme, ...) or
 * FKV_ERR_BAD_INPUT (a malformed one), the text naming the file and the key, with *format = "".
 * fkv_precompile_with_options takes the declared format when options->weights is NULL or "". */
FKV_API fkv_status fkv_config_weight_format(const fkv_config* config, const char** format);

/* One model layer (model numbering). */
typedef struct fkv_layer_info {
  int index;
  int is_attention; /* 0 for linear attention, mamba/SSM, no-op layers (no KV) */
  int is_sliding;
  int num_kv_heads;
  int head_dim;
  int rotary_dim; /* 0 on NoPE layers */
  int is_neox_style;
  fkv_k_norm k_norm;
  double eps;
  double rope_theta;
  int sliding_window;
  int unsupported; /* 1 when this attention layer cannot use the fused path */
} fkv_layer_info;

/* FKV_ERR_ARGUMENT when `layer` is out of range. */
FKV_API fkv_status fkv_config_layer(const fkv_config* config, int layer, fkv_layer_info* out);

/* ---- validation and plans ---------------------------------------------------------------- */

/* What the layers of one launch share (fkv::AttentionSpec). */
typedef struct fkv_attention_info {
  int num_kv_heads;
  int head_dim;
  int rotary_dim;
  int is_neox_style;
  fkv_k_norm k_norm;
  double rope_theta;
  const char* rope_scaling_type; /* "default", "llama3", "yarn", ...; owned by the handle */
} fkv_attention_info;

/* Strict validation (the seed's semantics). On FKV_ERR_CONFIG_MISMATCH, fkv_last_error() holds
 * exactly the seed helper's text, e.g. "num_kv_heads mismatch across layers for fused KV path:
 * expected 8, got 4 at layer 3." `out` may be NULL; its rope_scaling_type points into `config`.
 * It judges the layout only: fkv_config_weight_format judges the declared K/V weight format. */
FKV_API fkv_status fkv_validate(const fkv_config* config, fkv_attention_info* out);

typedef struct fkv_plan fkv_plan;

/* grouped = 0: strict, one group (fails like fkv_validate). grouped != 0: the attention layers
 * partitioned into uniform groups, one kernel specialization and one cos/sin table each. */
FKV_API fkv_status fkv_plan_create(const fkv_config* config, int grouped, fkv_plan** out);
FKV_API void fkv_plan_free(fkv_plan* plan);
FKV_API int fkv_plan_num_groups(const fkv_plan* plan);
/* Number of layers of group `group` (0 when out of range). */
FKV_API int fkv_plan_group_num_layers(const fkv_plan* plan, int group);
/* Copies the layer numbers (model numbering) of `group` into layers[0 .. capacity). */
FKV_API fkv_status fkv_plan_group_layers(const fkv_plan* plan, int group, int* layers,
                                         size_t capacity);
FKV_API fkv_status fkv_plan_group_spec(const fkv_plan* plan, int group, fkv_attention_info* out);
FKV_API int fkv_plan_num_skipped(const fkv_plan* plan);
FKV_API fkv_status fkv_plan_skipped_layers(const fkv_plan* plan, int* layers, size_t capacity);
/* The whole plan as JSON: {"mode", "groups": [{"layers": [...], "spec": {...}}], "skipped": [...]},
 * where "spec" has the CLI's form (num_kv_heads, head_dim, rotary_dim, is_neox_style, k_norm,
 * rope: {theta, scaling_type, scaling} or null). Owned by the plan. */
FKV_API const char* fkv_plan_json(const fkv_plan* plan);

/* ---- dtypes and kernel descriptions ----------------------------------------------------- */

typedef enum fkv_dtype {
  FKV_DTYPE_BF16 = 0,
  FKV_DTYPE_FP16 = 1,
  FKV_DTYPE_FP32 = 2,
  FKV_DTYPE_FP8_E4M3 = 3,
  FKV_DTYPE_FP8_E5M2 = 4,
  /* Not a dtype: makes the enum int-sized in C and C++ alike, so that a caller's out-of-range
   * value is representable and gets FKV_ERR_ARGUMENT rather than undefined behaviour. */
  FKV_DTYPE_FORCE_INT_ = 0x7fffffff
} fkv_dtype;

/* Accepts "bf16", "bfloat16", "torch.bfloat16", "fp16", "half", "fp32", "float32",
 * "fp8_e4m3", "float8_e4m3fn", "fp8_e5m2", ... */
FKV_API fkv_status fkv_dtype_parse(const char* name, fkv_dtype* out);
FKV_API const char* fkv_dtype_name(fkv_dtype dtype); /* "bf16", ...; "?" when invalid */
FKV_API int fkv_dtype_size(fkv_dtype dtype);         /* bytes; 0 when invalid */

/* One kernel specialization (fkv::KernelSpec). */
typedef struct fkv_kernel_desc {
  int num_kv_heads;
  int head_dim;
  int rotary_dim;    /* 0 = no RoPE */
  int neox;          /* 1 = neox pairs (i, i+R/2), 0 = GPT-J pairs (2i, 2i+1) */
  int k_norm;        /* the fkv_k_norm the kernel computes: NONE or RMS (RMS_ONE_PLUS is taken
                        as RMS over weights with (1 + w) folded; other values FKV_ERR_ARGUMENT) */
  fkv_dtype act;     /* proj dtype: bf16, fp16, fp32 */
  fkv_dtype cache;   /* output dtype: act, fp8_e4m3 or fp8_e5m2 */
  fkv_dtype cos_sin; /* fp32 or act */
  int positions_i64; /* 1 = int64 positions, 0 = int32 */
  int slots_i64;     /* 1 = int64 cache_loc, 0 = int32 */
  int mode_pool;     /* 1 = pool output, 0 = stacked */
  int debug;         /* 1 = require an error_flag (bounds are checked in every build) */
} fkv_kernel_desc;

/* The description of group `group` of `plan` with the given dtypes and output mode; cos/sin
 * fp32, int64 positions and slots, debug off (edit the fields afterwards as needed). */
FKV_API fkv_status fkv_plan_kernel_desc(const fkv_plan* plan, int group, fkv_dtype act,
                                        fkv_dtype cache, int mode_pool, fkv_kernel_desc* out);

/* ---- RoPE tables ------------------------------------------------------------------------ */

/* The cos/sin cache of group `group`, [max_position, R] row-major (cos in columns [0, R/2),
 * sin in [R/2, R)), computed in float64 and rounded once to `dtype` (fp32, bf16, fp16), written
 * to host memory `out` of `out_bytes` bytes (>= max_position * R * size(dtype)).
 * max_position = 0 uses the config's max_position_embeddings; otherwise it must be in [1, 2^31]
 * (FKV_ERR_ARGUMENT for a negative or larger value). `bytes_needed` (may be NULL) receives the
 * size; with out = NULL only the size is computed. FKV_ERR_ARGUMENT for a group without RoPE
 * (rotary_dim 0) or a buffer too small; FKV_ERR_OUT_OF_MEMORY when the table does not fit in
 * host memory. */
FKV_API fkv_status fkv_plan_cos_sin(const fkv_plan* plan, int group, int64_t max_position,
                                    fkv_dtype dtype, void* out, size_t out_bytes,
                                    size_t* bytes_needed);

/* ---- precompilation (no GPU needed) ------------------------------------------------------ */

/* What to precompile. Start from fkv_precompile_options_init(), which sets struct_size and every
 * field to its default; fields may be added at the end in later versions (see "Conventions"). */
typedef struct fkv_precompile_options {
  size_t struct_size; /* sizeof(fkv_precompile_options) of the caller's fkv.h; set by init */
  /* The device arch: "sm_80", "sm_90", "sm_100", "sm_120", "90", "9.0". What is built is what
   * the runtime loads on such a device (an arch NVRTC cannot build maps to the newest one of the
   * same major, or to PTX); "sm_90a"/"sm_100a" map to "sm_90"/"sm_100", which the runtime loads
   * on those devices. Required. */
  const char* arch;
  const char* act_dtype;     /* NULL or "": the config's dtype (bf16 when absent) */
  const char* kv_dtype;      /* NULL or "": act_dtype; "fp8_e4m3", "fp8_e5m2" */
  const char* cos_sin_dtype; /* NULL or "": "fp32"; or the activation dtype */
  const char* index_dtype;   /* NULL or "": "int64"; "int32" (positions and cache_loc) */
  const char* modes;         /* NULL or "": "both"; "stacked", "pool" */
  const char* cache_dir;     /* NULL or "": $FKV_CACHE_DIR, else $XDG_CACHE_HOME/fkv-jit,
                                else ~/.cache/fkv-jit (through fkv's process-wide cache) */
  int strict;                /* 0: the grouped plan (default); 1: strict, one group */
  int jobs;                  /* parallel compilations; 0 = one per core */
  /* NULL or "": none; else a GPU of the measured crossover table ("H200"): also the
   * decode-size kernels a materializer loads on it for calls of a few tokens (when the plan
   * can take them: one group, hidden_size in the config; docs/decode.md). */
  const char* decode_gpu;
  /* NULL or "": what the config's quantization_config declares (fkv_config_weight_format;
   * "dense" when it declares nothing; a declaration fkv-jit does not read fails with its
   * status); else how the draft's K/V weights are stored ("fp8_tensor",
   * "fp8_channel", "fp8_block", "int8_channel", or the engines' spellings: "fp8", "int8", ...):
   * also the kernels a materializer builds for them (dequantize, the FP8 GEMM's activation
   * quantizer; with decode_gpu the decode kernels over the stored bytes; docs/quantized.md).
   * FKV_ERR_UNSUPPORTED names a packed 4-bit scheme; FKV_ERR_ARGUMENT an unknown name, or a
   * quantized format for a config without hidden_size. */
  const char* weights;
} fkv_precompile_options;

/* Sets struct_size = min(struct_size, the library's size) and the defaults of the fields inside
 * it; writes nothing past struct_size bytes (nothing at all when struct_size is smaller than the
 * struct_size field). Call it through the macro. */
FKV_API void fkv_precompile_options_init_v2(fkv_precompile_options* options, size_t struct_size);
#define fkv_precompile_options_init(options) \
  fkv_precompile_options_init_v2((options), sizeof(*(options)))

/* Counts of one precompile run. */
typedef struct fkv_precompile_result {
  size_t n_variants;      /* kernels the config needs for these options */
  size_t n_compiled;      /* of those, compiled now (the rest were cache hits) */
  size_t n_not_persisted; /* of those, only in memory: not on disk */
} fkv_precompile_result;

/* Compiles every kernel the config's plan needs for these options into the cache, as
 * `fkv-jit precompile` does. `result` may be NULL. Returns FKV_ERR_CACHE, with the counts
 * filled in and a text naming the kernels, when any kernel could not be saved on disk (no
 * usable cache directory, disk full): a precompile whose output is lost is a failure; also
 * when the kernels alone take more than FKV_CACHE_MAX_BYTES (all saved, but the next publish
 * into that cache would evict some), as `fkv-jit precompile` exits 8.
 * FKV_ERR_ARGUMENT for a name that is not an arch ("compute_90", "sm_1") or an unknown dtype
 * or mode, or a struct_size that does not reach `arch`; FKV_ERR_COMPILE for an arch NVRTC cannot
 * serve. */
FKV_API fkv_status fkv_precompile_with_options_v2(const fkv_config* config,
                                                  const fkv_precompile_options* options,
                                                  fkv_precompile_result* result);
#define fkv_precompile_with_options(config, options, result) \
  fkv_precompile_with_options_v2((config), (options), (result))

/* The earlier form: fkv_precompile_with_options with the given arch, dtypes and cache_dir and
 * every other option at its default (both output modes, fp32 cos/sin, int64 indices). */
FKV_API fkv_status fkv_precompile(const fkv_config* config, const char* arch, const char* act_dtype,
                                  const char* kv_dtype, const char* cache_dir, size_t* n_variants,
                                  size_t* n_compiled);

/* ---- kernels and launches ---------------------------------------------------------------- */

typedef struct fkv_kernel fkv_kernel;

/* Loads the kernel for `desc` into the calling thread's current context (without one, the
 * primary context of `device` is made current), compiling it or reading the cache as needed.
 * Call it ahead of CUDA graph capture. The kernel stays loaded for the life of the process;
 * fkv_kernel_free only releases the handle. */
FKV_API fkv_status fkv_kernel_prepare(const fkv_kernel_desc* desc, int device, fkv_kernel** out);
FKV_API void fkv_kernel_free(fkv_kernel* kernel);
/* "fkv_h8_d128_r128_neox_kn_bf16_bf16_stacked" */
FKV_API const char* fkv_kernel_name(const fkv_kernel* kernel);
/* How the kernel image was obtained: "memory", "disk", "readonly", "compiled" (the cache's
 * outcome names); and the arch it was built for ("sm_90a"). */
FKV_API const char* fkv_kernel_outcome(const fkv_kernel* kernel);
FKV_API const char* fkv_kernel_arch(const fkv_kernel* kernel);

/* The inputs both output modes share (fkv::FusedKVInputs). Device pointers unless noted. */
typedef struct fkv_inputs {
  const void* proj;           /* [T, L, 2*H*D] in desc.act; last dim contiguous */
  int64_t num_tokens;         /* T; 0 launches nothing */
  int64_t num_layers;         /* L */
  int64_t proj_stride_token;  /* 0 = L*2*H*D */
  int64_t proj_stride_layer;  /* 0 = 2*H*D */
  const void* positions;      /* [T] int32/int64 (desc.positions_i64) */
  const void* cos_sin;        /* [max_position, R] in desc.cos_sin; unused when R = 0 */
  int64_t max_position;       /* rows of cos_sin */
  int64_t cos_sin_stride;     /* 0 = R */
  const float* k_norm_weight; /* [L, D] fp32, (1+w) folded; required iff desc.k_norm */
  const float* eps;           /* HOST [L]; NULL = 1e-6 each */
  unsigned int* error_flag;   /* device word or NULL: tokens with a position outside [0,
                                 max_position) or a slot >= num_slots are skipped in every
                                 build and OR 1 / 2 into it; required when desc.debug */
} fkv_inputs;

/* Stacked output: k_out, v_out [L, T, H, D] contiguous in desc.cache (device). No allocation,
 * no synchronization, no copy: capturable in a CUDA graph. */
FKV_API fkv_status fkv_materialize_stacked(const fkv_kernel* kernel, const fkv_inputs* in,
                                           void* k_out, void* v_out, void* stream);

/* Pool output: row cache_loc[t] of each layer's buffers k_ptrs[l], v_ptrs[l] ([num_slots,
 * slot_stride] in desc.cache, device); cache_loc[t] < 0 is skipped. k_ptrs, v_ptrs, k_scales
 * and v_scales are HOST arrays of in->num_layers entries; scales (fp8 caches only) may be NULL
 * (= 1.0). slot_stride 0 = H*D. Capturable like the stacked variant. */
FKV_API fkv_status fkv_materialize_pool(const fkv_kernel* kernel, const fkv_inputs* in,
                                        const void* cache_loc, void* const* k_ptrs,
                                        void* const* v_ptrs, int64_t num_slots, int64_t slot_stride,
                                        const float* k_scales, const float* v_scales, void* stream);

/* ---- the materializer: projection GEMM + fused kernels for one draft model ------------- */
/* fkv::FusedKVMaterializer (include/fkv/fused_kv_materializer.hpp): built once (weights packed,
 * K-norm weights folded, cos/sin tables uploaded, kernels loaded: allocates, copies, compiles),
 * then called per step: proj = hidden . W_kv^T (cuBLASLt), then one fused launch per layer
 * group. A call allocates nothing and does not synchronize: capturable in a CUDA graph. One
 * materializer serves one stream at a time. Layer arrays below are in attention-layer order
 * (the model's order, non-attention layers left out): fkv_materializer_layers(). */

typedef struct fkv_materializer fkv_materializer;

typedef struct fkv_materializer_options {
  size_t struct_size;   /* sizeof(fkv_materializer_options) of the caller's fkv.h; set by init */
  int grouped;          /* 0 = strict (the seed's semantics, one group), else grouped plan */
  fkv_dtype act;        /* hidden, W_kv and proj: bf16 or fp16 */
  fkv_dtype cache;      /* pool dtype: act, fp8_e4m3 or fp8_e5m2 (stacked output is act) */
  fkv_dtype cos_sin;    /* fp32 or act */
  int index_i64;        /* 1 = int64 positions and slots, 0 = int32 */
  int64_t max_tokens;   /* the largest T per call (rows of the projection buffer) */
  int64_t max_position; /* rows of each cos/sin table; 0 = max_position_embeddings. Must cover
                           the largest position (context length + block size) */
  int device;
  int stacked; /* prepare the stacked-output kernels */
  int pool;    /* prepare the pool kernels */
  int paged;   /* pool kernels for paged layouts (fkv_materializer_pool_output) */
  int tp_size; /* tensor parallelism: this rank's share of the KV heads */
  int tp_rank;
  /* Calls of 1..decode_crossover tokens take the decode-size kernel (projection + epilogue in
   * one launch) where the model allows it; -1 = the value measured for the GPU
   * (FKV_DECODE_CROSSOVER overrides it), 0 = never. fkv_materializer_decode_crossover() says
   * what is used. */
  int64_t decode_crossover;
  /* FP8 weights above the decode crossover: 1 (default) = cuBLASLt's FP8 GEMM over the stored
   * bytes, the activations quantized to e4m3 per call, one scale per token (per token and 128
   * columns for fp8_block, and for fp8_tensor calls of up to 64 tokens): W8A8, as the engines' FP8
   * linear methods compute; 0 = dequantized slices, the activations kept (W8A16). A GPU without
   * that GEMM (before sm_90) takes the slices. fkv_materializer_fp8_gemm() says what is used. */
  int fp8_gemm;
  /* INT8 weights above the decode crossover, calls of up to this many tokens (default 512):
   * cuBLASLt's int8 GEMM over the stored bytes, the activations split into two int8 parts per
   * token (within 2^-16 of the token's largest value); larger calls, 0, or a GPU without that
   * GEMM: dequantized slices. fkv_materializer_int8_gemm_tokens() says what is used. */
  int64_t int8_gemm_tokens;
} fkv_materializer_options;

/* Defaults: strict, bf16, bf16 cache, fp32 cos/sin, int64, max_tokens 8192, device 0, stacked
 * and pool, flat layout, tp_size 1, decode_crossover -1, fp8_gemm 1, int8_gemm_tokens 512. Sets
 * struct_size like fkv_precompile_options_init_v2 and writes nothing past it. Call it through the
 * macro. */
FKV_API void fkv_materializer_options_init_v2(fkv_materializer_options* options,
                                              size_t struct_size);
#define fkv_materializer_options_init(options) \
  fkv_materializer_options_init_v2((options), sizeof(*(options)))

/* The layout of this struct never changes (it has no struct_size): what later versions add
 * about the weights goes into fkv_weight_quant, passed beside it. */
typedef struct fkv_materializer_weights {
  int64_t hidden_size;
  int num_layers; /* attention layers: the length of every array below */
  /* DEVICE [2*H*D, hidden] row-major per layer: the K rows then the V rows (under tensor
   * parallelism: the rank's heads only), in options.act, or one byte per weight for a quantized
   * fkv_weight_quant format. Copied by create. */
  const void* const* w_kv;
  int64_t w_kv_row_stride;     /* elements between rows; 0 = hidden_size */
  const float* const* k_norm;  /* HOST [D] fp32 per layer as in the checkpoint (1 + w folded
                                  by create for the (1 + w) kinds); NULL without a K norm */
  const float* eps;            /* HOST [num_layers]; NULL = the config's */
  const float* const* kv_bias; /* HOST [2*H*D] fp32 per layer (K part, then V); NULL = none */
} fkv_materializer_weights;

/* Validates `config` (strict: FKV_ERR_CONFIG_MISMATCH with the exact mismatch text; a tp_size
 * that does not split the KV heads: FKV_ERR_CONFIG_MISMATCH naming both numbers), checks the
 * weights against it (FKV_ERR_ARGUMENT) and prepares everything on options->device (NULL
 * options = the defaults; a struct_size of 0: FKV_ERR_ARGUMENT). */
FKV_API fkv_status fkv_materializer_create_v2(const fkv_config* config,
                                              const fkv_materializer_weights* weights,
                                              const fkv_materializer_options* options,
                                              fkv_materializer** out);
#define fkv_materializer_create(config, weights, options, out) \
  fkv_materializer_create_v2((config), (weights), (options), (out))

/* How the K/V weights are stored (docs/quantized.md), for fkv_materializer_create_v3 and
 * fkv_materializer_refresh_weights_v2. Start from fkv_weight_quant_init(), which sets
 * struct_size and the defaults (dense: format and scales NULL); see "Conventions". */
typedef struct fkv_weight_quant {
  size_t struct_size; /* sizeof(fkv_weight_quant) of the caller's fkv.h; set by init */
  /* NULL or "": dense (w_kv in options.act). Else a name fkv_weight_format_parse accepts:
   * "fp8_tensor", "fp8_channel", "fp8_block" (FP8 e4m3 with per-tensor, per-output-row or
   * 128x128 block scales), "int8_channel" (INT8, per-output-row scales), or an engine's
   * spelling ("fp8", "fp8_per_channel", "fp8_block128", "int8", "w8a16"). Quantized w_kv hold
   * one byte per weight, rows 16-byte aligned (w_kv_row_stride a multiple of 16); hidden_size
   * a multiple of 16; activations (options.act) bf16 or fp16, unquantized except on the FP8
   * GEMM (options.fp8_gemm). */
  const char* format;
  /* Quantized formats: HOST [num_layers] array of DEVICE fp32 pointers, per attention layer
   * the scales of its K/V rows: 1 value (fp8_tensor); 2*H*D (fp8_channel, int8_channel);
   * [2*H*D / 128, ceil(hidden_size / 128)] row-major (fp8_block, DeepSeek's weight_scale_inv
   * layout; 2*H*D must be whole 128-row blocks). Weight (n, k) is q[n, k] * scale(n, k).
   * Copied by create and by refresh. NULL for dense weights. */
  const float* const* scales;
} fkv_weight_quant;

/* Sets struct_size like fkv_materializer_options_init_v2 and the defaults of the fields inside
 * it. Call it through the macro. */
FKV_API void fkv_weight_quant_init_sized(fkv_weight_quant* quant, size_t struct_size);
#define fkv_weight_quant_init(quant) fkv_weight_quant_init_sized((quant), sizeof(*(quant)))

/* The canonical name of weight format `name` ("fp8_channel" for "fp8_per_channel", "dense",
 * ...; static storage). Needs no GPU. FKV_ERR_UNSUPPORTED for a packed 4-bit scheme ("gptq",
 * "awq", "nvfp4", "mxfp4", "int4", "w4a16", "marlin", "nf4", ...), naming it and the formats
 * that are read; FKV_ERR_ARGUMENT for any other unknown name. */
FKV_API fkv_status fkv_weight_format_parse(const char* name, const char** canonical);

/* fkv_materializer_create for weights stored as `quant` says (NULL = dense). Checked before
 * any GPU work, besides create's own checks: FKV_ERR_UNSUPPORTED for a packed 4-bit format
 * name, or fp8_block where a layer's 2*H*D rows are not whole 128-row blocks;
 * FKV_ERR_ARGUMENT for an unknown format name, a struct_size of 0, scales missing (NULL array
 * or entry) for a quantized format or given for dense weights, activations other than bf16
 * and fp16, hidden_size or w_kv_row_stride not a multiple of 16. */
FKV_API fkv_status fkv_materializer_create_v3(const fkv_config* config,
                                              const fkv_materializer_weights* weights,
                                              const fkv_weight_quant* quant,
                                              const fkv_materializer_options* options,
                                              fkv_materializer** out);
FKV_API void fkv_materializer_free(fkv_materializer* m);
FKV_API int fkv_materializer_num_layers(const fkv_materializer* m);
FKV_API int fkv_materializer_num_groups(const fkv_materializer* m);
/* The largest token count a call sends to the decode-size kernel (0: none). */
FKV_API int64_t fkv_materializer_decode_crossover(const fkv_materializer* m);
/* 1 when calls above the decode crossover take the FP8 GEMM (options.fp8_gemm, FP8 weights, a
 * GPU with that GEMM), else 0. */
FKV_API int fkv_materializer_fp8_gemm(const fkv_materializer* m);
/* The largest call above the decode crossover that takes the INT8 GEMM (options.int8_gemm_tokens,
 * INT8 weights, a GPU with that GEMM); 0: none. */
FKV_API int64_t fkv_materializer_int8_gemm_tokens(const fkv_materializer* m);
/* The model numbers of the attention layers, in the order of the layer arrays. */
FKV_API fkv_status fkv_materializer_layers(const fkv_materializer* m, int* layers, size_t capacity);
/* The plan the materializer serves (this rank's, under tensor parallelism), as fkv_plan_json. */
FKV_API const char* fkv_materializer_plan_json(const fkv_materializer* m);
/* How its weights are stored: "dense", "fp8_tensor", "fp8_channel", "fp8_block" or
 * "int8_channel" ("" for NULL). */
FKV_API const char* fkv_materializer_weight_format(const fkv_materializer* m);

/* Copies new weights (same layout as at create: the same layers and shapes, a bias iff
 * created with one, eps unchanged) into the materializer's buffers in place, ordered on
 * `stream`: the buffers keep their device addresses, so a CUDA graph captured earlier replays
 * with the new values. Nothing is copied when a check fails (FKV_ERR_ARGUMENT). */
FKV_API fkv_status fkv_materializer_refresh_weights(fkv_materializer* m,
                                                    const fkv_materializer_weights* weights,
                                                    void* stream);
/* The same for weights stored as `quant` says (NULL = dense): the format must be the one the
 * materializer was created with (FKV_ERR_ARGUMENT otherwise), and the scales are copied in
 * place as the weights are, so a graph captured earlier replays with both. */
FKV_API fkv_status fkv_materializer_refresh_weights_v2(fkv_materializer* m,
                                                       const fkv_materializer_weights* weights,
                                                       const fkv_weight_quant* quant, void* stream);

typedef struct fkv_materializer_input {
  const void* hidden;    /* DEVICE [T, hidden] in options.act */
  int64_t num_tokens;    /* T <= max_tokens; 0 launches nothing */
  int64_t hidden_stride; /* elements between rows; 0 = hidden_size */
  const void* positions; /* DEVICE [T] int32/int64 */
} fkv_materializer_input;

/* Stacked output: per group g, k_out[g], v_out[g] DEVICE [L_g, T, H_g, D_g] in options.act
 * (HOST arrays of num_groups pointers). */
FKV_API fkv_status fkv_materializer_stacked(fkv_materializer* m, const fkv_materializer_input* in,
                                            void* const* k_out, void* const* v_out,
                                            size_t num_groups, void* stream);

/* Pool output. Flat layout: slot s is row s of [num_slots, slot_stride]. Paged layout
 * (options.paged): element (s, h, d) of a layer's buffer is at (s / block_size) * block_stride
 * + (s % block_size) * slot_stride + h * head_stride + d (see docs/integration.md for vLLM and
 * FlashInfer). Slots < 0 are skipped; slots >= num_slots and positions outside the cos/sin
 * table are skipped and set fkv_materializer_error_flag(). Arrays marked HOST have num_layers
 * entries. */
typedef struct fkv_materializer_pool_output {
  const void* cache_loc;  /* DEVICE [T]; may be NULL when every layer has a slot mapping */
  void* const* k_buffers; /* HOST [num_layers] DEVICE pointers */
  void* const* v_buffers;
  int num_layers;
  int64_t num_slots;     /* slots per layer buffer (paged: num_blocks * block_size) */
  int64_t slot_stride;   /* 0 = H*D */
  const float* k_scales; /* HOST [num_layers], fp8 only; NULL = 1.0 */
  const float* v_scales;
  const float* k_scales_device; /* DEVICE [num_layers] fp32, fp8 only, read at run time */
  const float* v_scales_device;
  int64_t block_size;               /* paged only; 0 = 1 */
  int64_t block_stride;             /* paged only; 0 = one block's extent */
  int64_t head_stride;              /* paged only; 0 = D */
  const void* const* slot_mappings; /* paged only: HOST [num_layers] DEVICE [T] (NULL entry =
                                       cache_loc); NULL = cache_loc for all */
} fkv_materializer_pool_output;

FKV_API fkv_status fkv_materializer_pool(fkv_materializer* m, const fkv_materializer_input* in,
                                         const fkv_materializer_pool_output* out, void* stream);

/* Any output layout (fkv::KVLayout, include/fkv/kv_layout.hpp; docs/integration.md has each
 * kind's strides for sglang, vLLM and FlashInfer pools). Start from fkv_kv_layout_init(), which
 * sets struct_size and the defaults (kind per_layer, every field 0 or NULL); see "Conventions".
 * Kinds:
 * - "per_layer" (also "flat", "paged"): k_buffers[l], v_buffers[l] per attention layer, flat
 *   rows [num_slots, slot_stride] or (options.paged) paged blocks, as fkv_materializer_pool;
 * - "token_major": one DEVICE allocation `base` holding all layers' K and V of a slot in one
 *   row: element (slot, layer, k|v, head, d) at slot * slot_stride + layer * layer_stride +
 *   kv * kv_offset + head * head_stride + d (kv 0 = K, 1 = V; layer in attention-layer order).
 *   0 = head_stride D, kv_offset H*D, layer_stride 2*H*D, slot_stride layers * layer_stride;
 * - "stacked": per group g, k_buffers[g], v_buffers[g] DEVICE [L_g, T, H_g, D_g] in
 *   options.act, as fkv_materializer_stacked (num_buffers = num_groups).
 * HOST arrays: k_buffers / v_buffers have num_buffers entries; slot_mappings, k_scales and
 * v_scales (when not NULL) have fkv_materializer_num_layers() entries. */
typedef struct fkv_kv_layout {
  size_t struct_size;               /* sizeof(fkv_kv_layout) of the caller's fkv.h; set by init */
  const char* kind;                 /* NULL or "": "per_layer" */
  const void* cache_loc;            /* DEVICE [T]; may be NULL when every layer has a mapping */
  const void* const* slot_mappings; /* HOST [num_layers] DEVICE [T] (NULL entry = cache_loc);
                                       NULL = cache_loc for all; needs options.paged */
  void* const* k_buffers;           /* HOST [num_buffers] DEVICE pointers (per_layer, stacked) */
  void* const* v_buffers;
  int num_buffers;
  void* base;            /* token_major: DEVICE, the pool */
  int64_t num_slots;     /* slots of the pool (paged: num_blocks * block_size) */
  int64_t slot_stride;   /* 0 = the kind's default (per_layer H*D) */
  int64_t block_size;    /* per_layer paged; 0 = 1 */
  int64_t block_stride;  /* per_layer paged; 0 = one block's extent */
  int64_t head_stride;   /* 0 = D; another value needs options.paged */
  int64_t layer_stride;  /* token_major; 0 = 2*H*D */
  int64_t kv_offset;     /* token_major: V's offset from K; 0 = H*D */
  const float* k_scales; /* HOST [num_layers], fp8 only; NULL = 1.0 */
  const float* v_scales;
  const float* k_scales_device; /* DEVICE [num_layers] fp32, fp8 only, read at run time */
  const float* v_scales_device;
} fkv_kv_layout;

/* Sets struct_size like fkv_materializer_options_init_v2 and the defaults of the fields inside
 * it. Call it through the macro. */
FKV_API void fkv_kv_layout_init_sized(fkv_kv_layout* layout, size_t struct_size);
#define fkv_kv_layout_init(layout) fkv_kv_layout_init_sized((layout), sizeof(*(layout)))

/* Writes K/V of `in` into `out` (any kind above). FKV_ERR_ARGUMENT naming the field and the fix
 * for an unknown kind, wrong counts, NULL or misaligned pointers, strides too small or making
 * two elements share memory. Small calls of flat layouts (per_layer flat rows, token_major with
 * head_stride D) with host scales take the decode-size kernel, like fkv_materializer_pool. */
FKV_API fkv_status fkv_materializer_write(fkv_materializer* m, const fkv_materializer_input* in,
                                          const fkv_kv_layout* out, void* stream);

/* The DEVICE word the kernels OR FKV_ERROR_BAD_POSITION (1) / FKV_ERROR_BAD_SLOT (2) into. */
FKV_API void* fkv_materializer_error_flag(const fkv_materializer* m);
/* Synchronizes `stream`, stores the word in *flags and clears it. */
FKV_API fkv_status fkv_materializer_take_error_flag(fkv_materializer* m, void* stream,
                                                    unsigned int* flags);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* FKV_FKV_H */
