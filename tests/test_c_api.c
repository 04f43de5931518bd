/* The C API (include/fkv/fkv.h), compiled as C99: config loading, validation and its exact
 * mismatch texts, plans, cos/sin tables, precompilation into a temporary cache, status codes and
 * the thread-local last-error text. Needs no GPU: kernel preparation is only checked for its
 * argument errors and, without a driver, for FKV_ERR_CUDA. */
#define _XOPEN_SOURCE 700
#include <ftw.h>
#include <math.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "c_check.h"
#include "fkv/fkv.h"

#define CHECK_TEXT(expected)                                                                     \
  do {                                                                                           \
    ++checks;                                                                                    \
    if (strcmp(fkv_last_error(), (expected)) != 0) {                                             \
      ++failures;                                                                                \
      fprintf(stderr, "%s:%d: last error\n  got:      %s\n  expected: %s\n", __FILE__, __LINE__, \
              fkv_last_error(), (expected));                                                     \
    }                                                                                            \
  } while (0)

static void path_join(char* out, size_t n, const char* dir, const char* file) {
  snprintf(out, n, "%s/%s", dir, file);
}

static fkv_config* load(const char* file) {
  char path[1024];
  fkv_config* cfg = NULL;
  path_join(path, sizeof path, FKV_TEST_DATA_DIR, file);
  CHECK_STATUS(fkv_config_load(path, &cfg), FKV_OK);
  return cfg;
}

/* Two explicit-schema layers that differ in one field. */
static fkv_config* two_layers(const char* layer0, const char* layer1) {
  char json[2048];
  fkv_config* cfg = NULL;
  snprintf(json, sizeof json, "{\"fkv\": {\"layers\": [%s, %s]}}", layer0, layer1);
  CHECK_STATUS(fkv_config_from_json(json, "two-layers", &cfg), FKV_OK);
  return cfg;
}

static void test_config_and_validate(void) {
  fkv_config* cfg = load("qwen3-8b.json");
  fkv_attention_info info;
  fkv_layer_info layer;
  if (!cfg) return;
  CHECK(fkv_config_num_layers(cfg) == 36);
  CHECK(fkv_config_hidden_size(cfg) == 4096);
  CHECK(fkv_config_max_position_embeddings(cfg) == 40960);
  CHECK(strcmp(fkv_config_dtype(cfg), "bfloat16") == 0);
  CHECK(strcmp(fkv_config_architecture(cfg), "Qwen3ForCausalLM") == 0);

  memset(&info, 0, sizeof info);
  CHECK_STATUS(fkv_validate(cfg, &info), FKV_OK);
  CHECK(info.num_kv_heads == 8);
  CHECK(info.head_dim == 128);
  CHECK(info.rotary_dim == 128);
  CHECK(info.is_neox_style == 1);
  CHECK(info.k_norm == FKV_K_NORM_RMS);
  CHECK(info.rope_theta == 1000000.0);
  CHECK(info.rope_scaling_type != NULL && strcmp(info.rope_scaling_type, "default") == 0);
  CHECK_STATUS(fkv_validate(cfg, NULL), FKV_OK);

  CHECK_STATUS(fkv_config_layer(cfg, 35, &layer), FKV_OK);
  CHECK(layer.index == 35 && layer.is_attention == 1 && layer.num_kv_heads == 8);
  CHECK(layer.head_dim == 128 && layer.k_norm == FKV_K_NORM_RMS && layer.unsupported == 0);
  CHECK(fabs(layer.eps - 1e-6) < 1e-12);
  CHECK_STATUS(fkv_config_layer(cfg, 36, &layer), FKV_ERR_ARGUMENT);
  CHECK_CONTAINS("layer 36 is out of range");
  fkv_config_free(cfg);

  /* GPT-J: interleaved pairs, partial rotary. */
  cfg = load("gptj-6b-neo-format.json");
  if (cfg) {
    CHECK_STATUS(fkv_validate(cfg, &info), FKV_OK);
    CHECK(info.is_neox_style == 0);
    CHECK(info.rotary_dim == 64 && info.head_dim == 256);
    CHECK(info.k_norm == FKV_K_NORM_NONE);
    fkv_config_free(cfg);
  }
}

/* quantization_config: the K/V weight format a config declares (docs/config-rules.md). */
static void test_declared_weight_format(void) {
  const char* format = "x";
  fkv_config* cfg = load("qwen3-8b.json");
  if (cfg) {
    CHECK_STATUS(fkv_config_weight_format(cfg, &format), FKV_OK);
    CHECK(format != NULL && strcmp(format, "") == 0);
    CHECK_STATUS(fkv_config_weight_format(cfg, NULL), FKV_ERR_ARGUMENT);
    fkv_config_free(cfg);
  }
  /* deepseek-ai/DeepSeek-V3's config.json declares 128x128 FP8 blocks. */
  cfg = load("deepseek-v3.json");
  if (cfg) {
    CHECK_STATUS(fkv_config_weight_format(cfg, &format), FKV_OK);
    CHECK(strcmp(format, "fp8_block") == 0);
    fkv_config_free(cfg);
  }
  cfg = NULL;
  CHECK_STATUS(fkv_config_from_json("{\"model_type\": \"qwen3\", \"num_hidden_layers\": 2, "
                                    "\"hidden_size\": 1024, \"num_attention_heads\": 8, "
                                    "\"quantization_config\": {\"quant_method\": \"awq\", "
                                    "\"bits\": 4}}",
                                    "awq.json", &cfg),
               FKV_OK);
  if (cfg) {
    format = "x";
    CHECK_STATUS(fkv_config_weight_format(cfg, &format), FKV_ERR_UNSUPPORTED);
    CHECK(strcmp(format, "") == 0);
    CHECK_CONTAINS("awq.json: key 'quantization_config.quant_method': \"awq\" (bits 4)");
    fkv_config_free(cfg);
  }
  CHECK_STATUS(fkv_config_weight_format(NULL, &format), FKV_ERR_ARGUMENT);
}

static void test_bad_input(void) {
  fkv_config* cfg = (fkv_config*)0x1;
  CHECK_STATUS(fkv_config_load("/nonexistent/dir/config.json", &cfg), FKV_ERR_BAD_INPUT);
  CHECK(cfg == NULL);
  CHECK_CONTAINS("/nonexistent/dir/config.json");

  CHECK_STATUS(
      fkv_config_from_json("{\"num_hidden_layers\": 2,\n \"hidden_size\": }", "broken.json", &cfg),
      FKV_ERR_BAD_INPUT);
  CHECK_CONTAINS("broken.json");
  CHECK_CONTAINS("line 2");

  CHECK_STATUS(fkv_config_load(NULL, &cfg), FKV_ERR_ARGUMENT);
  CHECK_TEXT("path must not be NULL");
  CHECK_STATUS(fkv_validate(NULL, NULL), FKV_ERR_ARGUMENT);
  CHECK_TEXT("config must not be NULL");

  /* Free functions accept NULL. */
  fkv_config_free(NULL);
  fkv_plan_free(NULL);
  fkv_kernel_free(NULL);
}

static void test_mismatch_texts(void) {
  static const char* base =
      "{\"num_kv_heads\": 8, \"head_dim\": 128, \"rotary_dim\": 128, \"is_neox_style\": true, "
      "\"rope_theta\": 10000}";
  fkv_config* cfg;
  fkv_plan* plan = NULL;

  cfg = two_layers(base,
                   "{\"num_kv_heads\": 4, \"head_dim\": 128, \"rotary_dim\": 128, "
                   "\"is_neox_style\": true, \"rope_theta\": 10000}");
  if (cfg) {
    CHECK_STATUS(fkv_validate(cfg, NULL), FKV_ERR_CONFIG_MISMATCH);
    CHECK_TEXT(
        "num_kv_heads mismatch across layers for fused KV path: expected 8, got 4 at layer 1.");
    /* Strict plans fail the same way; grouped plans split the layers. */
    CHECK_STATUS(fkv_plan_create(cfg, 0, &plan), FKV_ERR_CONFIG_MISMATCH);
    CHECK(plan == NULL);
    CHECK_TEXT(
        "num_kv_heads mismatch across layers for fused KV path: expected 8, got 4 at layer 1.");
    CHECK_STATUS(fkv_plan_create(cfg, 1, &plan), FKV_OK);
    CHECK(fkv_plan_num_groups(plan) == 2);
    CHECK(fkv_plan_group_num_layers(plan, 0) == 1 && fkv_plan_group_num_layers(plan, 1) == 1);
    {
      fkv_attention_info g1;
      int layers[1] = {-1};
      CHECK_STATUS(fkv_plan_group_spec(plan, 1, &g1), FKV_OK);
      CHECK(g1.num_kv_heads == 4);
      CHECK_STATUS(fkv_plan_group_layers(plan, 1, layers, 1), FKV_OK);
      CHECK(layers[0] == 1);
    }
    fkv_plan_free(plan);
    fkv_config_free(cfg);
  }

  cfg = two_layers(base,
                   "{\"num_kv_heads\": 8, \"head_dim\": 64, \"rotary_dim\": 64, "
                   "\"is_neox_style\": true, \"rope_theta\": 10000}");
  if (cfg) {
    CHECK_STATUS(fkv_validate(cfg, NULL), FKV_ERR_CONFIG_MISMATCH);
    CHECK_TEXT(
        "head_dim mismatch across layers for fused KV path: expected 128, got 64 at layer 1.");
    fkv_config_free(cfg);
  }

  cfg = two_layers(base,
                   "{\"num_kv_heads\": 8, \"head_dim\": 128, \"rotary_dim\": 64, "
                   "\"is_neox_style\": false, \"rope_theta\": 10000}");
  if (cfg) {
    CHECK_STATUS(fkv_validate(cfg, NULL), FKV_ERR_CONFIG_MISMATCH);
    CHECK_TEXT(
        "RoPE config mismatch across layers for fused KV path: expected (rotary_dim=128, "
        "neox=True), got (rotary_dim=64, neox=False) at layer 1.");
    fkv_config_free(cfg);
  }

  cfg = two_layers(base,
                   "{\"num_kv_heads\": 8, \"head_dim\": 128, \"rotary_dim\": 128, "
                   "\"is_neox_style\": true, \"rope_theta\": 500000}");
  if (cfg) {
    CHECK_STATUS(fkv_validate(cfg, NULL), FKV_ERR_CONFIG_MISMATCH);
    CHECK_CONTAINS(
        "RoPE frequency mismatch across layers for fused KV path: expected (theta=10000.0");
    CHECK_CONTAINS("got (theta=500000.0");
    CHECK_CONTAINS("at layer 1.");
    fkv_config_free(cfg);
  }
}

static void test_plan(void) {
  fkv_config* cfg = load("qwen3-8b.json");
  fkv_plan* plan = NULL;
  int layers[64];
  fkv_kernel_desc desc;
  fkv_attention_info g;
  if (!cfg) return;
  CHECK_STATUS(fkv_plan_create(cfg, 0, &plan), FKV_OK);
  CHECK(fkv_plan_num_groups(plan) == 1);
  CHECK(fkv_plan_group_num_layers(plan, 0) == 36);
  CHECK(fkv_plan_group_num_layers(plan, 1) == 0);
  CHECK(fkv_plan_num_skipped(plan) == 0);
  CHECK_STATUS(fkv_plan_group_layers(plan, 0, layers, 64), FKV_OK);
  CHECK(layers[0] == 0 && layers[35] == 35);
  CHECK_STATUS(fkv_plan_group_layers(plan, 0, layers, 10), FKV_ERR_ARGUMENT);
  CHECK_CONTAINS("36 are needed");
  CHECK_STATUS(fkv_plan_group_spec(plan, 1, &g), FKV_ERR_ARGUMENT);
  CHECK_TEXT("group 1 is out of range: the plan has 1 group(s)");
  CHECK(strstr(fkv_plan_json(plan), "\"mode\":\"strict\"") != NULL);
  CHECK(strstr(fkv_plan_json(plan), "\"num_kv_heads\":8") != NULL);

  CHECK_STATUS(fkv_plan_kernel_desc(plan, 0, FKV_DTYPE_BF16, FKV_DTYPE_FP8_E4M3, 1, &desc), FKV_OK);
  CHECK(desc.num_kv_heads == 8 && desc.head_dim == 128 && desc.rotary_dim == 128);
  CHECK(desc.neox == 1 && desc.k_norm == 1 && desc.mode_pool == 1 && desc.debug == 0);
  CHECK(desc.act == FKV_DTYPE_BF16 && desc.cache == FKV_DTYPE_FP8_E4M3 &&
        desc.cos_sin == FKV_DTYPE_FP32);
  CHECK(desc.positions_i64 == 1 && desc.slots_i64 == 1);
  /* A cache dtype that is neither the activation dtype nor fp8. */
  CHECK_STATUS(fkv_plan_kernel_desc(plan, 0, FKV_DTYPE_BF16, FKV_DTYPE_FP16, 0, &desc),
               FKV_ERR_ARGUMENT);
  CHECK_CONTAINS("cache dtype fp16");

  /* cos/sin: row p, column i holds cos(p * theta^(-2i/R)), column R/2 + i the sin. */
  {
    enum { P = 16, R = 128 };
    static float table[P * R];
    size_t need = 0;
    int p;
    CHECK_STATUS(fkv_plan_cos_sin(plan, 0, P, FKV_DTYPE_FP32, NULL, 0, &need), FKV_OK);
    CHECK(need == sizeof table);
    CHECK_STATUS(fkv_plan_cos_sin(plan, 0, P, FKV_DTYPE_FP32, table, sizeof table - 4, NULL),
                 FKV_ERR_ARGUMENT);
    CHECK_STATUS(fkv_plan_cos_sin(plan, 0, P, FKV_DTYPE_FP32, table, sizeof table, NULL), FKV_OK);
    for (p = 0; p < P; ++p) {
      const double f1 = pow(1000000.0, -2.0 / R);
      CHECK(fabs(table[p * R + 0] - cos((double)p)) < 1e-6);
      CHECK(fabs(table[p * R + R / 2] - sin((double)p)) < 1e-6);
      CHECK(fabs(table[p * R + 1] - cos(p * f1)) < 1e-6);
      CHECK(fabs(table[p * R + R / 2 + 1] - sin(p * f1)) < 1e-6);
    }
    CHECK_STATUS(fkv_plan_cos_sin(plan, 0, P, FKV_DTYPE_FP8_E4M3, NULL, 0, &need),
                 FKV_ERR_ARGUMENT);

    /* max_position out of range (issue 23 item 1): 2^57 rows used to overflow the size to 0
     * bytes, so the call returned OK and filling the buffer crashed; -5 meant "the config's
     * value". Both are FKV_ERR_ARGUMENT now, before any size is computed. 2^31 is the bound. */
    need = 12345;
    CHECK_STATUS(fkv_plan_cos_sin(plan, 0, (int64_t)1 << 57, FKV_DTYPE_FP32, NULL, 0, &need),
                 FKV_ERR_ARGUMENT);
    CHECK_CONTAINS("max_position is 144115188075855872");
    CHECK_CONTAINS("2^31");
    CHECK(need == 12345);
    CHECK_STATUS(
        fkv_plan_cos_sin(plan, 0, (int64_t)1 << 57, FKV_DTYPE_FP32, table, sizeof table, NULL),
        FKV_ERR_ARGUMENT);
    CHECK_STATUS(fkv_plan_cos_sin(plan, 0, -5, FKV_DTYPE_FP32, NULL, 0, &need), FKV_ERR_ARGUMENT);
    CHECK_CONTAINS("max_position is -5");
    CHECK_STATUS(fkv_plan_cos_sin(plan, 0, ((int64_t)1 << 31) + 1, FKV_DTYPE_FP32, NULL, 0, &need),
                 FKV_ERR_ARGUMENT);
    /* The bound itself is a size, not an error: 2^31 x 128 x 4 bytes. */
    CHECK_STATUS(fkv_plan_cos_sin(plan, 0, (int64_t)1 << 31, FKV_DTYPE_FP32, NULL, 0, &need),
                 FKV_OK);
    CHECK(need == ((size_t)1 << 31) * R * 4);
  }
  fkv_plan_free(plan);
  fkv_config_free(cfg);

  /* Gemma 3: sliding and global layers use different frequencies -> strict fails, grouped
   * gives two groups covering every attention layer. */
  cfg = load("gemma3-4b-it.json");
  if (cfg) {
    int total = 0, i;
    CHECK_STATUS(fkv_plan_create(cfg, 0, &plan), FKV_ERR_CONFIG_MISMATCH);
    CHECK_CONTAINS("RoPE frequency mismatch across layers for fused KV path");
    CHECK_STATUS(fkv_plan_create(cfg, 1, &plan), FKV_OK);
    CHECK(fkv_plan_num_groups(plan) == 2);
    for (i = 0; i < fkv_plan_num_groups(plan); ++i) total += fkv_plan_group_num_layers(plan, i);
    CHECK(total + fkv_plan_num_skipped(plan) == fkv_config_num_layers(cfg));
    CHECK(strstr(fkv_plan_json(plan), "\"mode\":\"grouped\"") != NULL);
    fkv_plan_free(plan);
    fkv_config_free(cfg);
  }
}

static void test_dtypes(void) {
  fkv_dtype d = FKV_DTYPE_FP32;
  CHECK_STATUS(fkv_dtype_parse("torch.bfloat16", &d), FKV_OK);
  CHECK(d == FKV_DTYPE_BF16);
  CHECK_STATUS(fkv_dtype_parse("float8_e4m3fn", &d), FKV_OK);
  CHECK(d == FKV_DTYPE_FP8_E4M3);
  CHECK(fkv_dtype_size(FKV_DTYPE_FP8_E5M2) == 1 && fkv_dtype_size(FKV_DTYPE_FP32) == 4);
  CHECK(strcmp(fkv_dtype_name(FKV_DTYPE_FP16), "fp16") == 0);
  CHECK(fkv_dtype_size((fkv_dtype)42) == 0);
  CHECK_STATUS(fkv_dtype_parse("int4", &d), FKV_ERR_ARGUMENT);
  CHECK_CONTAINS("unknown dtype 'int4'");
  CHECK(strcmp(fkv_status_name(FKV_ERR_COMPILE), "FKV_ERR_COMPILE") == 0);
  CHECK(strcmp(fkv_version(), "0.1.0") == 0);
}

static int n_cubins;
static int count_cubin(const char* path, const struct stat* sb, int type, struct FTW* ftw) {
  size_t n = strlen(path);
  (void)sb;
  (void)ftw;
  if (type == FTW_F && n > 6 && strcmp(path + n - 6, ".cubin") == 0) ++n_cubins;
  return 0;
}
static int remove_one(const char* path, const struct stat* sb, int type, struct FTW* ftw) {
  (void)sb;
  (void)type;
  (void)ftw;
  return remove(path);
}

static void test_precompile(void) {
  char dir[] = "/tmp/fkv-c-api-XXXXXX";
  fkv_config* cfg = load("qwen3-8b.json");
  size_t variants = 0, compiled = 0;
  if (!cfg) return;
  if (mkdtemp(dir) == NULL) {
    CHECK(!"mkdtemp failed");
    fkv_config_free(cfg);
    return;
  }
  CHECK_STATUS(fkv_precompile(cfg, "sm_90", NULL, NULL, dir, &variants, &compiled), FKV_OK);
  CHECK(variants == 2); /* one group x (stacked, pool) */
  CHECK(compiled == 2);
  n_cubins = 0;
  nftw(dir, count_cubin, 16, FTW_PHYS);
  CHECK(n_cubins == 2);
  /* The second run finds both on disk (a fresh cache object, so not from memory). */
  CHECK_STATUS(fkv_precompile(cfg, "sm_90", "bf16", "", dir, &variants, &compiled), FKV_OK);
  CHECK(variants == 2 && compiled == 0);
  /* An fp8 cache is another pair of variants. */
  CHECK_STATUS(fkv_precompile(cfg, "9.0", NULL, "fp8_e4m3", dir, &variants, &compiled), FKV_OK);
  CHECK(variants == 2 && compiled == 2);
  n_cubins = 0;
  nftw(dir, count_cubin, 16, FTW_PHYS);
  CHECK(n_cubins == 4);

  CHECK_STATUS(fkv_precompile(cfg, "sm_10", NULL, NULL, dir, NULL, NULL), FKV_ERR_COMPILE);
  CHECK_CONTAINS("sm_90");
  CHECK_STATUS(fkv_precompile(cfg, "sm_90", "int8", NULL, dir, NULL, NULL), FKV_ERR_ARGUMENT);
  CHECK_STATUS(fkv_precompile(cfg, NULL, NULL, NULL, dir, NULL, NULL), FKV_ERR_ARGUMENT);
  CHECK_TEXT("arch must not be NULL");

  /* The options struct: the CLI's variant options. */
  {
    fkv_precompile_options o;
    fkv_precompile_result r;
    char unsafe[] = "/tmp/fkv-c-api-unsafe-XXXXXX";
    fkv_precompile_options_init(&o);
    CHECK(o.arch == NULL && o.jobs == 0 && o.strict == 0);
    o.arch = "sm_90a"; /* maps to sm_90, what the runtime loads on Hopper: already built above */
    o.cache_dir = dir;
    CHECK_STATUS(fkv_precompile_with_options(cfg, &o, &r), FKV_OK);
    CHECK(r.n_variants == 2 && r.n_compiled == 0 && r.n_not_persisted == 0);
    o.arch = "sm_90";
    o.cos_sin_dtype = "bf16";
    o.index_dtype = "int32";
    o.modes = "pool";
    o.jobs = 1;
    CHECK_STATUS(fkv_precompile_with_options(cfg, &o, &r), FKV_OK);
    CHECK(r.n_variants == 1 && r.n_compiled == 1);
    n_cubins = 0;
    nftw(dir, count_cubin, 16, FTW_PHYS);
    CHECK(n_cubins == 5);

    o.modes = "all";
    CHECK_STATUS(fkv_precompile_with_options(cfg, &o, &r), FKV_ERR_ARGUMENT);
    CHECK_CONTAINS("modes");
    o.modes = NULL;
    o.index_dtype = "int16";
    CHECK_STATUS(fkv_precompile_with_options(cfg, &o, &r), FKV_ERR_ARGUMENT);
    o.index_dtype = NULL;
    o.arch = "compute_90";
    CHECK_STATUS(fkv_precompile_with_options(cfg, &o, &r), FKV_ERR_ARGUMENT);
    CHECK_CONTAINS("sm_90");
    o.arch = "sm_90";
    o.jobs = -1;
    CHECK_STATUS(fkv_precompile_with_options(cfg, &o, &r), FKV_ERR_ARGUMENT);
    o.jobs = 0;
    CHECK_STATUS(fkv_precompile_with_options(cfg, NULL, &r), FKV_ERR_ARGUMENT);

    /* decode_gpu: a GPU with no measured crossover is an argument error naming the measured
     * ones; qwen3-8b (36 layers) takes no decode kernel, so H200 adds nothing here (the draft
     * below gets its two). */
    o.decode_gpu = "A100";
    CHECK_STATUS(fkv_precompile_with_options(cfg, &o, &r), FKV_ERR_ARGUMENT);
    CHECK_CONTAINS("measured: H200");
    o.decode_gpu = "h200";
    CHECK_STATUS(fkv_precompile_with_options(cfg, &o, &r), FKV_OK);
    CHECK(r.n_variants == 2);
    {
      fkv_config* draft = load("dflash-qwen3-4b-draft.json");
      if (draft) {
        CHECK_STATUS(fkv_precompile_with_options(draft, &o, &r), FKV_OK);
        CHECK(r.n_variants == 4); /* stacked, pool, and the decode kernels' 8-token bucket */
        /* FP8 weights: the decode kernels over the stored bytes in every bucket (8 to 64,
         * stacked and pool), the dequantize kernel, the FP8 GEMM's activation quantizers (per
         * token, and per token and 128 columns for calls of up to 64 tokens) and the
         * per-tensor scales' expansion. */
        o.weights = "fp8_tensor";
        CHECK_STATUS(fkv_precompile_with_options(draft, &o, &r), FKV_OK);
        CHECK(r.n_variants == 2 + 8 + 4);
        o.weights = "int4";
        CHECK_STATUS(fkv_precompile_with_options(draft, &o, &r), FKV_ERR_UNSUPPORTED);
        CHECK_CONTAINS("int4");
        o.weights = "fp9";
        CHECK_STATUS(fkv_precompile_with_options(draft, &o, &r), FKV_ERR_ARGUMENT);
        CHECK_CONTAINS("fp8_tensor");
        o.weights = NULL;
        fkv_config_free(draft);
      }
    }
    o.decode_gpu = NULL;

    /* A root the cache refuses (writable by others): compiled, not saved -> FKV_ERR_CACHE. */
    if (mkdtemp(unsafe) != NULL) {
      chmod(unsafe, 0777);
      o.cache_dir = unsafe;
      o.modes = "stacked";
      CHECK_STATUS(fkv_precompile_with_options(cfg, &o, &r), FKV_ERR_CACHE);
      CHECK(r.n_variants == 1 && r.n_not_persisted == 1);
      CHECK_CONTAINS("not saved");
      rmdir(unsafe);
    }
  }

  nftw(dir, remove_one, 16, FTW_DEPTH | FTW_PHYS);
  fkv_config_free(cfg);
}

static void test_kernel_arguments(void) {
  fkv_kernel_desc desc;
  fkv_kernel* kernel = (fkv_kernel*)0x1;
  fkv_inputs in;
  memset(&desc, 0, sizeof desc);
  desc.num_kv_heads = 8;
  desc.head_dim = 128;
  desc.rotary_dim = 127; /* odd: rejected before any GPU work */
  desc.neox = 1;
  desc.act = FKV_DTYPE_BF16;
  desc.cache = FKV_DTYPE_BF16;
  desc.cos_sin = FKV_DTYPE_FP32;
  CHECK_STATUS(fkv_kernel_prepare(&desc, 0, &kernel), FKV_ERR_CONFIG_MISMATCH);
  CHECK(kernel == NULL);
  CHECK_TEXT("Invalid fused KV rotary/head dim pair: rotary_dim=127, head_dim=128.");
  desc.rotary_dim = 128;
  desc.act = (fkv_dtype)17;
  CHECK_STATUS(fkv_kernel_prepare(&desc, 0, &kernel), FKV_ERR_ARGUMENT);
  CHECK_CONTAINS("invalid fkv_dtype value 17");
  desc.act = FKV_DTYPE_BF16;
  CHECK_STATUS(fkv_kernel_prepare(NULL, 0, &kernel), FKV_ERR_ARGUMENT);

  if (!fkv_driver_available()) {
    CHECK_STATUS(fkv_kernel_prepare(&desc, 0, &kernel), FKV_ERR_CUDA);
    CHECK(strlen(fkv_last_error()) > 0);
  }

  memset(&in, 0, sizeof in);
  CHECK_STATUS(fkv_materialize_stacked(NULL, &in, NULL, NULL, NULL), FKV_ERR_ARGUMENT);
  CHECK_TEXT("kernel must not be NULL");
  CHECK_STATUS(fkv_materialize_pool(NULL, &in, NULL, NULL, NULL, 0, 0, NULL, NULL, NULL),
               FKV_ERR_ARGUMENT);
}

/* The last error is per thread: an error on another thread leaves this one's text alone. */
static void* fail_in_thread(void* arg) {
  fkv_dtype d;
  (void)arg;
  fkv_dtype_parse("not-a-dtype", &d);
  return strstr(fkv_last_error(), "not-a-dtype") ? (void*)1 : NULL;
}

static void test_thread_local_error(void) {
  pthread_t t;
  void* ok = NULL;
  fkv_dtype d;
  fkv_dtype_parse("first-thread", &d);
  CHECK(pthread_create(&t, NULL, fail_in_thread, NULL) == 0);
  CHECK(pthread_join(t, &ok) == 0);
  CHECK(ok == (void*)1);
  CHECK_CONTAINS("first-thread");
  /* Success does not clear it. */
  CHECK_STATUS(fkv_dtype_parse("bf16", &d), FKV_OK);
  CHECK_CONTAINS("first-thread");
}

/* The materializer's argument and config checks, all reached before any GPU work. */
static void test_materializer_arguments(void) {
  static const char* base =
      "{\"num_kv_heads\": 8, \"head_dim\": 128, \"rotary_dim\": 128, \"is_neox_style\": true, "
      "\"rope_theta\": 10000}";
  const void* w_kv[2] = {(const void*)0x10000, (const void*)0x20000};
  fkv_materializer_weights w;
  fkv_materializer_options o;
  fkv_materializer* m = (fkv_materializer*)0x1;
  fkv_config* cfg;
  fkv_materializer_pool_output pool;
  fkv_materializer_input in;
  unsigned int flags = 0;

  memset(&w, 0, sizeof w);
  w.hidden_size = 256;
  w.num_layers = 2;
  w.w_kv = w_kv;
  fkv_materializer_options_init(&o);
  CHECK(o.grouped == 0 && o.act == FKV_DTYPE_BF16 && o.cache == FKV_DTYPE_BF16);
  CHECK(o.index_i64 == 1 && o.max_tokens == 8192 && o.stacked == 1 && o.pool == 1);
  CHECK(o.paged == 0 && o.tp_size == 1 && o.tp_rank == 0);
  CHECK(o.decode_crossover == -1);  /* the value measured for the GPU */
  CHECK(o.fp8_gemm == 1);           /* FP8 weights above it: the FP8 GEMM */
  CHECK(o.int8_gemm_tokens == 512); /* INT8 weights above it: the INT8 GEMM up to 512 tokens */

  /* Null arguments. */
  CHECK_STATUS(fkv_materializer_create(NULL, &w, &o, &m), FKV_ERR_ARGUMENT);
  CHECK_CONTAINS("config");
  cfg = two_layers(base, base);
  if (!cfg) return;
  CHECK_STATUS(fkv_materializer_create(cfg, NULL, &o, &m), FKV_ERR_ARGUMENT);
  CHECK_CONTAINS("weights");
  CHECK_STATUS(fkv_materializer_create(cfg, &w, &o, NULL), FKV_ERR_ARGUMENT);

  /* Tensor parallelism: 8 KV heads do not split over 3 ranks; a rank outside [0, tp_size). */
  o.tp_size = 3;
  CHECK_STATUS(fkv_materializer_create(cfg, &w, &o, &m), FKV_ERR_CONFIG_MISMATCH);
  CHECK(m == NULL);
  CHECK_CONTAINS("num_kv_heads=8 cannot be split across tp_size=3 ranks");
  o.tp_size = 2;
  o.tp_rank = 2;
  CHECK_STATUS(fkv_materializer_create(cfg, &w, &o, &m), FKV_ERR_ARGUMENT);
  CHECK_CONTAINS("tp_rank 2 is outside [0, tp_size=2)");
  fkv_materializer_options_init(&o);

  /* Weights that do not fit the config. */
  w.num_layers = 1;
  CHECK_STATUS(fkv_materializer_create(cfg, &w, &o, &m), FKV_ERR_ARGUMENT);
  CHECK_CONTAINS("w_kv has 1 layers; the config has 2 attention layers");
  w.num_layers = 2;
  w.hidden_size = 0;
  CHECK_STATUS(fkv_materializer_create(cfg, &w, &o, &m), FKV_ERR_ARGUMENT);
  CHECK_CONTAINS("hidden_size must be positive");
  w.hidden_size = 256;
  fkv_config_free(cfg);

  /* A strict mismatch gives the seed's exact text. */
  cfg = two_layers(base,
                   "{\"num_kv_heads\": 8, \"head_dim\": 64, \"rotary_dim\": 64, "
                   "\"is_neox_style\": true, \"rope_theta\": 10000}");
  if (cfg) {
    CHECK_STATUS(fkv_materializer_create(cfg, &w, &o, &m), FKV_ERR_CONFIG_MISMATCH);
    CHECK_TEXT(
        "head_dim mismatch across layers for fused KV path: expected 128, got 64 at layer 1.");
    fkv_config_free(cfg);
  }

  /* Calls on no materializer. */
  memset(&pool, 0, sizeof pool);
  memset(&in, 0, sizeof in);
  CHECK_STATUS(fkv_materializer_pool(NULL, &in, &pool, NULL), FKV_ERR_ARGUMENT);
  CHECK_STATUS(fkv_materializer_stacked(NULL, &in, NULL, NULL, 0, NULL), FKV_ERR_ARGUMENT);
  CHECK_STATUS(fkv_materializer_take_error_flag(NULL, NULL, &flags), FKV_ERR_ARGUMENT);
  CHECK_STATUS(fkv_materializer_refresh_weights(NULL, &w, NULL), FKV_ERR_ARGUMENT);
  CHECK_CONTAINS("materializer");
  CHECK(fkv_materializer_error_flag(NULL) == NULL);
  CHECK(fkv_materializer_num_layers(NULL) == 0);
  CHECK(strcmp(fkv_materializer_plan_json(NULL), "") == 0);
  fkv_materializer_free(NULL);
}

/* Quantized K/V weights through the C API (docs/quantized.md): format names, fkv_weight_quant's
 * struct_size rule, and every refusal of create_v3 / refresh_weights_v2 that comes before any
 * GPU work (tests/gpu/test_c_api_gpu.cpp creates and runs one). */
static void test_weight_quant(void) {
  static const char* base =
      "{\"num_kv_heads\": 8, \"head_dim\": 128, \"rotary_dim\": 128, \"is_neox_style\": true, "
      "\"rope_theta\": 10000}";
  const void* w_kv[2] = {(const void*)0x10000, (const void*)0x20000};
  const float* scales[2] = {(const float*)0x30000, (const float*)0x40000};
  const float* one_null[2] = {(const float*)0x30000, NULL};
  const char* canonical = NULL;
  fkv_materializer_weights w;
  fkv_materializer_options o;
  fkv_weight_quant q;
  unsigned char bytes[sizeof(fkv_weight_quant) + 16];
  fkv_materializer* m = (fkv_materializer*)0x1;
  fkv_config* cfg;

  /* Names: the canonical ones, the engines' spellings, 4-bit schemes refused by name. */
  CHECK_STATUS(fkv_weight_format_parse("fp8_per_channel", &canonical), FKV_OK);
  CHECK(canonical != NULL && strcmp(canonical, "fp8_channel") == 0);
  CHECK_STATUS(fkv_weight_format_parse("FP8-Block128", &canonical), FKV_OK);
  CHECK(strcmp(canonical, "fp8_block") == 0);
  CHECK_STATUS(fkv_weight_format_parse("w8a16", &canonical), FKV_OK);
  CHECK(strcmp(canonical, "int8_channel") == 0);
  CHECK_STATUS(fkv_weight_format_parse("fp8", &canonical), FKV_OK);
  CHECK(strcmp(canonical, "fp8_tensor") == 0);
  CHECK_STATUS(fkv_weight_format_parse("dense", &canonical), FKV_OK);
  CHECK(strcmp(canonical, "dense") == 0);
  CHECK_STATUS(fkv_weight_format_parse("gptq", &canonical), FKV_ERR_UNSUPPORTED);
  CHECK_CONTAINS("weight format 'gptq' packs 4-bit weights");
  CHECK_STATUS(fkv_weight_format_parse("nvfp4", &canonical), FKV_ERR_UNSUPPORTED);
  CHECK_STATUS(fkv_weight_format_parse("fp9", &canonical), FKV_ERR_ARGUMENT);
  CHECK_CONTAINS("unknown weight format 'fp9'");
  CHECK_STATUS(fkv_weight_format_parse(NULL, &canonical), FKV_ERR_ARGUMENT);
  CHECK_STATUS(fkv_weight_format_parse("fp8", NULL), FKV_ERR_ARGUMENT);

  /* init: the defaults inside the size given, nothing written past it. */
  memset(&q, 0x5a, sizeof q);
  fkv_weight_quant_init(&q);
  CHECK(q.struct_size == sizeof q && q.format == NULL && q.scales == NULL);
  memset(bytes, 0xa5, sizeof bytes);
  fkv_weight_quant_init_sized((fkv_weight_quant*)(void*)bytes, offsetof(fkv_weight_quant, scales));
  CHECK(((fkv_weight_quant*)(void*)bytes)->struct_size == offsetof(fkv_weight_quant, scales));
  CHECK(bytes[offsetof(fkv_weight_quant, scales)] == 0xa5 && bytes[sizeof bytes - 1] == 0xa5);

  memset(&w, 0, sizeof w);
  w.hidden_size = 256;
  w.num_layers = 2;
  w.w_kv = w_kv;
  fkv_materializer_options_init(&o);
  cfg = two_layers(base, base);
  if (!cfg) return;

  /* Refusals by name: 4-bit is unsupported, an unknown name an argument error. */
  fkv_weight_quant_init(&q);
  q.format = "awq";
  q.scales = scales;
  CHECK_STATUS(fkv_materializer_create_v3(cfg, &w, &q, &o, &m), FKV_ERR_UNSUPPORTED);
  CHECK(m == NULL);
  CHECK_CONTAINS("'awq' packs 4-bit weights");
  q.format = "fp7";
  CHECK_STATUS(fkv_materializer_create_v3(cfg, &w, &q, &o, &m), FKV_ERR_ARGUMENT);
  CHECK_CONTAINS("unknown weight format 'fp7'");

  /* struct_size: 0 is refused; fields outside it are not read (here: scales). */
  q.format = "fp8_channel";
  q.struct_size = 0;
  CHECK_STATUS(fkv_materializer_create_v3(cfg, &w, &q, &o, &m), FKV_ERR_ARGUMENT);
  CHECK_CONTAINS("fkv_weight_quant.struct_size is 0");
  q.struct_size = offsetof(fkv_weight_quant, scales);
  CHECK_STATUS(fkv_materializer_create_v3(cfg, &w, &q, &o, &m), FKV_ERR_ARGUMENT);
  CHECK_CONTAINS("quant.scales is NULL: fp8_channel weights need one DEVICE fp32 scale pointer");
  fkv_weight_quant_init(&q);

  /* Scales missing for quantized weights, given for dense ones, a NULL entry. */
  q.format = "fp8_channel";
  CHECK_STATUS(fkv_materializer_create_v3(cfg, &w, &q, &o, &m), FKV_ERR_ARGUMENT);
  CHECK_CONTAINS("quant.scales is NULL");
  q.format = NULL;
  q.scales = scales;
  CHECK_STATUS(fkv_materializer_create_v3(cfg, &w, &q, &o, &m), FKV_ERR_ARGUMENT);
  CHECK_CONTAINS("quant.scales is given, but quant.format is dense");
  q.format = "";
  CHECK_STATUS(fkv_materializer_create_v3(cfg, &w, &q, &o, &m), FKV_ERR_ARGUMENT);
  q.format = "int8";
  q.scales = one_null;
  CHECK_STATUS(fkv_materializer_create_v3(cfg, &w, &q, &o, &m), FKV_ERR_ARGUMENT);
  CHECK_CONTAINS("w_scale of layer 1 is null");

  /* What the format asks of the model: bf16/fp16 activations, 16-byte rows. */
  q.format = "fp8_block";
  q.scales = scales;
  o.act = FKV_DTYPE_FP32;
  CHECK_STATUS(fkv_materializer_create_v3(cfg, &w, &q, &o, &m), FKV_ERR_ARGUMENT);
  CHECK_CONTAINS("fp8_block weights take bf16 or fp16 activations, not fp32");
  o.act = FKV_DTYPE_BF16;
  w.hidden_size = 200;
  CHECK_STATUS(fkv_materializer_create_v3(cfg, &w, &q, &o, &m), FKV_ERR_ARGUMENT);
  CHECK_CONTAINS("must be a multiple of 16");
  w.hidden_size = 256;
  CHECK(m == NULL);
  fkv_config_free(cfg);

  /* fp8_block: a layer's 2*H*D = 192 rows are not whole 128-row scale blocks. */
  cfg = two_layers(
      "{\"num_kv_heads\": 1, \"head_dim\": 96, \"rotary_dim\": 96, \"is_neox_style\": true, "
      "\"rope_theta\": 10000}",
      "{\"num_kv_heads\": 1, \"head_dim\": 96, \"rotary_dim\": 96, \"is_neox_style\": true, "
      "\"rope_theta\": 10000}");
  if (cfg) {
    CHECK_STATUS(fkv_materializer_create_v3(cfg, &w, &q, &o, &m), FKV_ERR_UNSUPPORTED);
    CHECK_CONTAINS("(2*H*D = 192) must be whole 128-row scale blocks");
    fkv_config_free(cfg);
  }

  /* No materializer. */
  CHECK_STATUS(fkv_materializer_refresh_weights_v2(NULL, &w, &q, NULL), FKV_ERR_ARGUMENT);
  CHECK_CONTAINS("materializer must not be NULL");
  CHECK(strcmp(fkv_materializer_weight_format(NULL), "") == 0);
}

/* fkv_kv_layout (the output-layout descriptor of fkv_materializer_write): init's defaults and
 * struct_size rule, and the refusal that comes before any GPU work. The refusals that need a
 * materializer (struct_size 0, an unknown kind, a token_major write) are in
 * tests/gpu/test_c_api_gpu.cpp. */
static void test_kv_layout_init(void) {
  fkv_kv_layout l;
  fkv_materializer_input in;
  unsigned char bytes[sizeof(fkv_kv_layout) + 16];
  size_t i;
  int zero = 1;

  /* The macro passes sizeof: struct_size set, kind per_layer (NULL), every other field 0. */
  memset(&l, 0x5a, sizeof l);
  fkv_kv_layout_init(&l);
  CHECK(l.struct_size == sizeof l);
  CHECK(l.kind == NULL && l.cache_loc == NULL && l.slot_mappings == NULL && l.base == NULL);
  CHECK(l.k_buffers == NULL && l.v_buffers == NULL && l.num_buffers == 0);
  CHECK(l.num_slots == 0 && l.slot_stride == 0 && l.block_size == 0 && l.block_stride == 0);
  CHECK(l.head_stride == 0 && l.layer_stride == 0 && l.kv_offset == 0);
  CHECK(l.k_scales == NULL && l.v_scales == NULL);
  CHECK(l.k_scales_device == NULL && l.v_scales_device == NULL);

  /* An older header's smaller struct: the fields inside the size, nothing past it. */
  memset(bytes, 0xa5, sizeof bytes);
  fkv_kv_layout_init_sized((fkv_kv_layout*)(void*)bytes, offsetof(fkv_kv_layout, base));
  CHECK(((fkv_kv_layout*)(void*)bytes)->struct_size == offsetof(fkv_kv_layout, base));
  CHECK(((fkv_kv_layout*)(void*)bytes)->kind == NULL);
  CHECK(((fkv_kv_layout*)(void*)bytes)->num_buffers == 0);
  CHECK(bytes[offsetof(fkv_kv_layout, base)] == 0xa5 && bytes[sizeof bytes - 1] == 0xa5);

  /* A size below the struct_size field itself: init writes nothing. */
  memset(bytes, 0xa5, sizeof bytes);
  fkv_kv_layout_init_sized((fkv_kv_layout*)(void*)bytes, sizeof(size_t) - 1);
  for (i = 0; i < sizeof bytes; ++i) zero &= bytes[i] == 0xa5;
  CHECK(zero);
  fkv_kv_layout_init_sized(NULL, sizeof l); /* ignored */

  /* A newer header's larger struct: the unknown tail zeroed, struct_size the caller's. */
  memset(bytes, 0xa5, sizeof bytes);
  fkv_kv_layout_init_sized((fkv_kv_layout*)(void*)bytes, sizeof bytes);
  CHECK(((fkv_kv_layout*)(void*)bytes)->struct_size == sizeof bytes);
  CHECK(((fkv_kv_layout*)(void*)bytes)->v_scales_device == NULL);
  zero = 1;
  for (i = sizeof(fkv_kv_layout); i < sizeof bytes; ++i) zero &= bytes[i] == 0;
  CHECK(zero);

  /* No materializer, no input, no layout: refused before anything is read. */
  memset(&in, 0, sizeof in);
  fkv_kv_layout_init(&l);
  l.kind = "token_major";
  CHECK_STATUS(fkv_materializer_write(NULL, &in, &l, NULL), FKV_ERR_ARGUMENT);
  CHECK_CONTAINS("materializer must not be NULL");
  l.struct_size = 0;
  CHECK_STATUS(fkv_materializer_write(NULL, &in, &l, NULL), FKV_ERR_ARGUMENT);
  CHECK_CONTAINS("materializer must not be NULL");
  CHECK_STATUS(fkv_materializer_write(NULL, NULL, NULL, NULL), FKV_ERR_ARGUMENT);
}

/* Issue 23 item 13: a malformed FKV_* variable is bad input (FKV_ERR_BAD_INPUT naming the
 * variable), not a config mismatch. Variables are read once per process, so in a child. */
static void test_env_error(void) {
  pid_t pid = fork();
  int status = 0;
  if (pid == 0) {
    char dir[] = "/tmp/fkv-c-api-env-XXXXXX";
    fkv_config* cfg = NULL;
    fkv_precompile_options o;
    fkv_status s;
    int ok;
    char path[1024];
    setenv("FKV_BLOCK_WARPS", "abc", 1);
    path_join(path, sizeof path, FKV_TEST_DATA_DIR, "qwen3-8b.json");
    if (fkv_config_load(path, &cfg) != FKV_OK || mkdtemp(dir) == NULL) _exit(2);
    fkv_precompile_options_init(&o);
    o.arch = "sm_90";
    o.cache_dir = dir;
    s = fkv_precompile_with_options(cfg, &o, NULL);
    ok = s == FKV_ERR_BAD_INPUT && strstr(fkv_last_error(), "FKV_BLOCK_WARPS") != NULL &&
         strstr(fkv_last_error(), "abc") != NULL;
    if (!ok) fprintf(stderr, "FKV_BLOCK_WARPS=abc: %s: %s\n", fkv_status_name(s), fkv_last_error());
    rmdir(dir);
    _exit(ok ? 0 : 1);
  }
  CHECK(pid > 0);
  if (pid <= 0) return;
  CHECK(waitpid(pid, &status, 0) == pid);
  CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

/* Issue 23 item 6 through the C API: a size cap below the kernel set saves every kernel but is
 * FKV_ERR_CACHE, as the CLI's exit 8 (the next publish there would evict some). */
static void test_precompile_over_cap(void) {
  pid_t pid = fork();
  int status = 0;
  if (pid == 0) {
    char dir[] = "/tmp/fkv-c-api-cap-XXXXXX";
    fkv_config* cfg = NULL;
    fkv_precompile_options o;
    fkv_precompile_result r;
    fkv_status s;
    int ok;
    char path[1024];
    setenv("FKV_CACHE_MAX_BYTES", "1000", 1);
    path_join(path, sizeof path, FKV_TEST_DATA_DIR, "qwen3-8b.json");
    if (fkv_config_load(path, &cfg) != FKV_OK || mkdtemp(dir) == NULL) _exit(2);
    fkv_precompile_options_init(&o);
    o.arch = "sm_90";
    o.cache_dir = dir;
    s = fkv_precompile_with_options(cfg, &o, &r);
    ok = s == FKV_ERR_CACHE && strstr(fkv_last_error(), "FKV_CACHE_MAX_BYTES=1000") != NULL &&
         r.n_variants > 0 && r.n_not_persisted == 0;
    if (!ok) fprintf(stderr, "over cap: %s: %s\n", fkv_status_name(s), fkv_last_error());
    _exit(ok ? 0 : 1);
  }
  CHECK(pid > 0);
  if (pid <= 0) return;
  CHECK(waitpid(pid, &status, 0) == pid);
  CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

/* Issue 23 item 14: a NUL inside a config string no longer cuts the error text there; the
 * text shows it as \x00 and keeps what follows. */
static void test_nul_in_error(void) {
  fkv_config* cfg = NULL;
  fkv_status s = fkv_config_from_json(
      "{\"model_type\": \"qwen3\\u0000after-the-nul\", \"num_hidden_layers\": 2}", "nul.json",
      &cfg);
  CHECK(s != FKV_OK);
  CHECK_CONTAINS("qwen3\\x00after-the-nul");
  if (cfg) fkv_config_free(cfg);
}

int main(void) {
  test_env_error();
  test_precompile_over_cap();
  test_nul_in_error();
  test_config_and_validate();
  test_declared_weight_format();
  test_bad_input();
  test_mismatch_texts();
  test_plan();
  test_dtypes();
  test_precompile();
  test_kernel_arguments();
  test_thread_local_error();
  test_materializer_arguments();
  test_weight_quant();
  test_kv_layout_init();
  printf("test_c_api: %d checks, %d failed\n", checks, failures);
  return failures == 0 ? 0 : 1;
}
