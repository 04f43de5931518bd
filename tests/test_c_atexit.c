/* Calls during process exit (issue 23 item 3). An atexit handler registered before the first
 * fkv call runs after the destructors of every function-local static the library constructed
 * later (and, with glibc, after the main thread's thread_local destructors). It used to crash
 * in the config registry (family_of) and could reach the destroyed intern set, rope type list,
 * kernel cache and last-error strings. Here main() registers the handler first, then makes the
 * calls once (constructing those statics), and the handler makes them again: loading configs
 * (HF and explicit schema), validating, grouped plans, cos/sin tables, errors and their texts.
 * CTest checks the exit status: 0, and "atexit: ok" on stdout. Compiled as C99; no GPU. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fkv/fkv.h"

static int failed = 0;

#define EXPECT(cond)                                                                    \
  do {                                                                                  \
    if (!(cond)) {                                                                      \
      fprintf(stderr, "%s:%d: %s failed (last error: %s)\n", __FILE__, __LINE__, #cond, \
              fkv_last_error());                                                        \
      failed = 1;                                                                       \
    }                                                                                   \
  } while (0)

static fkv_config* load(const char* file) {
  char path[1024];
  fkv_config* cfg = NULL;
  snprintf(path, sizeof path, "%s/%s", FKV_TEST_DATA_DIR, file);
  EXPECT(fkv_config_load(path, &cfg) == FKV_OK);
  return cfg;
}

static void calls(void) {
  fkv_config* cfg = load("qwen3-8b.json");
  fkv_attention_info info;
  fkv_plan* plan = NULL;
  fkv_dtype d;
  float row[4 * 128];
  size_t need = 0;

  if (cfg) {
    memset(&info, 0, sizeof info);
    EXPECT(fkv_validate(cfg, &info) == FKV_OK);
    EXPECT(info.num_kv_heads == 8 && info.head_dim == 128);
    EXPECT(info.rope_scaling_type != NULL && strcmp(info.rope_scaling_type, "default") == 0);
    EXPECT(fkv_plan_create(cfg, 0, &plan) == FKV_OK);
    if (plan) {
      EXPECT(fkv_plan_num_groups(plan) == 1);
      EXPECT(strstr(fkv_plan_json(plan), "\"groups\"") != NULL);
      EXPECT(fkv_plan_cos_sin(plan, 0, 4, FKV_DTYPE_FP32, row, sizeof row, &need) == FKV_OK);
      EXPECT(need == sizeof row && row[0] == 1.0f);
      fkv_plan_free(plan);
      plan = NULL;
    }
    fkv_config_free(cfg);
  }

  /* Two groups (sliding and global layers), a llama3-scaled table. */
  cfg = load("gemma3-4b-it.json");
  if (cfg) {
    EXPECT(fkv_validate(cfg, NULL) == FKV_ERR_CONFIG_MISMATCH);
    EXPECT(strstr(fkv_last_error(), "mismatch across layers") != NULL);
    EXPECT(fkv_plan_create(cfg, 1, &plan) == FKV_OK);
    EXPECT(fkv_plan_num_groups(plan) == 2);
    fkv_plan_free(plan);
    plan = NULL;
    fkv_config_free(cfg);
  }
  cfg = load("llama3.1-8b-instruct.json");
  if (cfg) {
    EXPECT(fkv_validate(cfg, &info) == FKV_OK);
    EXPECT(info.rope_scaling_type != NULL && strcmp(info.rope_scaling_type, "llama3") == 0);
    fkv_config_free(cfg);
  }

  /* Errors and their thread-local texts. */
  cfg = NULL;
  EXPECT(fkv_config_load("/nonexistent/config.json", &cfg) == FKV_ERR_BAD_INPUT);
  EXPECT(strstr(fkv_last_error(), "/nonexistent/config.json") != NULL);
  EXPECT(fkv_config_from_json("{\"model_type\": ", "truncated", &cfg) == FKV_ERR_BAD_INPUT);
  EXPECT(strstr(fkv_last_error(), "truncated") != NULL);
  EXPECT(fkv_dtype_parse("bf16", &d) == FKV_OK && d == FKV_DTYPE_BF16);
  EXPECT(fkv_dtype_parse("int8", &d) == FKV_ERR_ARGUMENT);
  EXPECT(strcmp(fkv_status_name(FKV_ERR_UNSUPPORTED), "FKV_ERR_UNSUPPORTED") == 0);
}

static void at_exit(void) {
  calls();
  if (failed) _exit(1);
  printf("atexit: ok\n");
  fflush(stdout);
}

int main(void) {
  if (atexit(at_exit) != 0) return 2; /* before any fkv call */
  calls();
  if (failed) return 1;
  printf("main: ok\n");
  return 0;
}
