/* Programs built against an older fkv.h (issue 23 item 2). fkv_precompile_options gained
 * decode_gpu and fkv_materializer_options gained decode_crossover; a caller compiled with the
 * header before those had its struct overrun by 8 bytes in *_init, then crashed. This file
 * declares those layouts itself, as `git log -p include/fkv/fkv.h` shows them, and calls the
 * library the way such a program does: through the unversioned symbols, with guard bytes after
 * each struct that must stay untouched. It also checks the struct_size rule of today's fkv.h:
 * init writes nothing past the size it is given, readers ignore fields outside struct_size, and
 * a struct_size of 0 or one too small for a required field is FKV_ERR_ARGUMENT. Compiled as
 * C99; needs NVRTC (one kernel is compiled into a temporary cache), no GPU. */
#define _XOPEN_SOURCE 700
#include <ftw.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "c_check.h"
#include "fkv/fkv.h"

/* ---- the layouts of earlier fkv.h versions ------------------------------------------------ */

/* fkv_precompile_options as 892cdb8 introduced it. */
typedef struct precompile_options_v1 {
  const char* arch;
  const char* act_dtype;
  const char* kv_dtype;
  const char* cos_sin_dtype;
  const char* index_dtype;
  const char* modes;
  const char* cache_dir;
  int strict;
  int jobs;
} precompile_options_v1;

/* ... and after fd0bf87 added decode_gpu, still without struct_size. */
typedef struct precompile_options_decode {
  precompile_options_v1 v1;
  const char* decode_gpu;
} precompile_options_decode;

/* fkv_materializer_options as 126f2a7 introduced it. */
typedef struct materializer_options_v1 {
  int grouped;
  fkv_dtype act;
  fkv_dtype cache;
  fkv_dtype cos_sin;
  int index_i64;
  int64_t max_tokens;
  int64_t max_position;
  int device;
  int stacked;
  int pool;
  int paged;
  int tp_size;
  int tp_rank;
} materializer_options_v1;

/* ... and after 6157034 added decode_crossover. */
typedef struct materializer_options_decode {
  materializer_options_v1 v1;
  int64_t decode_crossover;
} materializer_options_decode;

/* The symbols such a program calls. fkv.h now defines these names as macros over the *_v2
 * functions; the parentheses reach the symbols themselves, as an old binary does. */
void(fkv_precompile_options_init)(void* options);
fkv_status(fkv_precompile_with_options)(const fkv_config* config, const void* options,
                                        fkv_precompile_result* result);
void(fkv_materializer_options_init)(void* options);
fkv_status(fkv_materializer_create)(const fkv_config* config,
                                    const fkv_materializer_weights* weights, const void* options,
                                    fkv_materializer** out);

enum { kGuard = 64, kFill = 0xA5 };

static int untouched(const unsigned char* p, size_t n) {
  size_t i;
  for (i = 0; i < n; ++i)
    if (p[i] != kFill) return 0;
  return 1;
}

static int remove_one(const char* path, const struct stat* st, int flag, struct FTW* ftw) {
  (void)st;
  (void)flag;
  (void)ftw;
  return remove(path);
}

static fkv_config* load(const char* file) {
  char path[1024];
  fkv_config* cfg = NULL;
  snprintf(path, sizeof path, "%s/%s", FKV_TEST_DATA_DIR, file);
  CHECK_STATUS(fkv_config_load(path, &cfg), FKV_OK);
  return cfg;
}

static void test_old_precompile_layouts(const char* dir) {
  struct {
    precompile_options_v1 o;
    unsigned char guard[kGuard];
  } a;
  struct {
    precompile_options_decode o;
    unsigned char guard[kGuard];
  } b;
  fkv_precompile_result r;
  fkv_config* cfg = load("qwen3-8b.json");
  if (!cfg) return;

  /* init writes the first layout's fields and nothing after them. */
  memset(&a, kFill, sizeof a);
  (fkv_precompile_options_init)(&a.o);
  CHECK(untouched(a.guard, sizeof a.guard));
  CHECK(a.o.arch == NULL && a.o.cache_dir == NULL && a.o.strict == 0 && a.o.jobs == 0);

  /* Its fields are read from their own offsets: one stacked kernel of the strict plan. */
  a.o.arch = "sm_90";
  a.o.cache_dir = dir;
  a.o.modes = "stacked";
  a.o.strict = 1;
  a.o.jobs = 1;
  memset(&r, 0, sizeof r);
  CHECK_STATUS((fkv_precompile_with_options)(cfg, &a.o, &r), FKV_OK);
  CHECK(r.n_variants == 1 && r.n_compiled == 1 && r.n_not_persisted == 0);
  CHECK(untouched(a.guard, sizeof a.guard));
  a.o.modes = "all";
  CHECK_STATUS((fkv_precompile_with_options)(cfg, &a.o, &r), FKV_ERR_ARGUMENT);
  CHECK_CONTAINS("modes 'all'");
  a.o.modes = "stacked";
  a.o.arch = "compute_90";
  CHECK_STATUS((fkv_precompile_with_options)(cfg, &a.o, &r), FKV_ERR_ARGUMENT);
  CHECK_CONTAINS("compute_90");

  /* The layout with decode_gpu but no struct_size: init leaves decode_gpu alone (8 bytes that a
   * caller with the first layout does not have), and the call never reads it. */
  memset(&b, kFill, sizeof b);
  (fkv_precompile_options_init)(&b.o);
  CHECK(untouched((const unsigned char*)&b.o.decode_gpu, sizeof b.o.decode_gpu));
  CHECK(untouched(b.guard, sizeof b.guard));
  b.o.v1.arch = "sm_90";
  b.o.v1.cache_dir = dir;
  b.o.v1.modes = "stacked";
  b.o.v1.strict = 1;
  CHECK_STATUS((fkv_precompile_with_options)(cfg, &b.o, &r), FKV_OK);
  CHECK(r.n_variants == 1 && r.n_compiled == 0); /* the kernel compiled above */

  fkv_config_free(cfg);
}

static void test_old_materializer_layouts(void) {
  static const char* json =
      "{\"fkv\": {\"layers\": [{\"num_kv_heads\": 8, \"head_dim\": 128, \"rotary_dim\": 128, "
      "\"is_neox_style\": true, \"rope_theta\": 10000}]}}";
  const void* w_kv[1] = {(const void*)0x10000};
  fkv_materializer_weights w;
  fkv_materializer* m = NULL;
  fkv_config* cfg = NULL;
  struct {
    materializer_options_v1 o;
    unsigned char guard[kGuard];
  } a;
  struct {
    materializer_options_decode o;
    unsigned char guard[kGuard];
  } b;

  CHECK_STATUS(fkv_config_from_json(json, "one-layer", &cfg), FKV_OK);
  if (!cfg) return;
  memset(&w, 0, sizeof w);
  w.hidden_size = 256;
  w.num_layers = 1;
  w.w_kv = w_kv;

  memset(&a, kFill, sizeof a);
  (fkv_materializer_options_init)(&a.o);
  CHECK(untouched(a.guard, sizeof a.guard));
  CHECK(a.o.grouped == 0 && a.o.act == FKV_DTYPE_BF16 && a.o.index_i64 == 1);
  CHECK(a.o.max_tokens == 8192 && a.o.stacked == 1 && a.o.pool == 1 && a.o.paged == 0);
  CHECK(a.o.tp_size == 1 && a.o.tp_rank == 0);
  /* tp_size and tp_rank are the last fields of the first layout: read from their offsets,
   * before any GPU work. */
  a.o.tp_size = 3;
  CHECK_STATUS((fkv_materializer_create)(cfg, &w, &a.o, &m), FKV_ERR_CONFIG_MISMATCH);
  CHECK_CONTAINS("num_kv_heads=8 cannot be split across tp_size=3 ranks");
  a.o.tp_size = 2;
  a.o.tp_rank = 2;
  CHECK_STATUS((fkv_materializer_create)(cfg, &w, &a.o, &m), FKV_ERR_ARGUMENT);
  CHECK_CONTAINS("tp_rank 2 is outside [0, tp_size=2)");
  CHECK(untouched(a.guard, sizeof a.guard));
  CHECK(m == NULL);

  memset(&b, kFill, sizeof b);
  (fkv_materializer_options_init)(&b.o);
  CHECK(untouched((const unsigned char*)&b.o.decode_crossover, sizeof b.o.decode_crossover));
  CHECK(untouched(b.guard, sizeof b.guard));
  b.o.v1.tp_size = 3;
  CHECK_STATUS((fkv_materializer_create)(cfg, &w, &b.o, &m), FKV_ERR_CONFIG_MISMATCH);
  CHECK_CONTAINS("tp_size=3");

  fkv_config_free(cfg);
}

/* Today's structs with a struct_size from an older or newer header. */
static void test_struct_size(const char* dir) {
  struct {
    fkv_precompile_options o;
    unsigned char guard[kGuard];
  } p;
  struct {
    fkv_materializer_options o;
    unsigned char guard[kGuard];
  } m;
  const size_t before_decode = offsetof(fkv_precompile_options, decode_gpu);
  fkv_precompile_result r;
  fkv_materializer* mat = NULL;
  fkv_materializer_weights w;
  const void* w_kv[1] = {(const void*)0x10000};
  fkv_config* cfg = load("qwen3-8b.json");
  if (!cfg) return;

  /* The macro passes sizeof: every field is set, struct_size included. */
  memset(&p, kFill, sizeof p);
  fkv_precompile_options_init(&p.o);
  CHECK(p.o.struct_size == sizeof(fkv_precompile_options));
  CHECK(p.o.arch == NULL && p.o.decode_gpu == NULL && p.o.jobs == 0);
  CHECK(untouched(p.guard, sizeof p.guard));

  /* A caller whose header ends before decode_gpu: nothing at or past that offset is written,
   * and decode_gpu is not read (here it holds garbage). */
  memset(&p, kFill, sizeof p);
  fkv_precompile_options_init_v2(&p.o, before_decode);
  CHECK(p.o.struct_size == before_decode);
  CHECK(untouched((const unsigned char*)&p.o + before_decode, sizeof p - before_decode));
  p.o.arch = "sm_90";
  p.o.cache_dir = dir;
  p.o.modes = "stacked";
  p.o.strict = 1;
  CHECK_STATUS(fkv_precompile_with_options(cfg, &p.o, &r), FKV_OK);
  CHECK(r.n_variants == 1 && r.n_compiled == 0);
  /* Inside struct_size, decode_gpu is read: an unmeasured GPU is an argument error. */
  p.o.struct_size = offsetof(fkv_precompile_options, weights);
  p.o.weights = "gptq"; /* outside struct_size: not read */
  p.o.decode_gpu = "A100";
  CHECK_STATUS(fkv_precompile_with_options(cfg, &p.o, &r), FKV_ERR_ARGUMENT);
  CHECK_CONTAINS("A100");
  /* ... and weights, added after it, inside the full size: a 4-bit scheme is refused by name. */
  p.o.struct_size = sizeof(fkv_precompile_options);
  p.o.decode_gpu = NULL;
  CHECK_STATUS(fkv_precompile_with_options(cfg, &p.o, &r), FKV_ERR_UNSUPPORTED);
  CHECK_CONTAINS("gptq");
  /* Never initialized, or too small to hold arch. */
  p.o.struct_size = 0;
  CHECK_STATUS(fkv_precompile_with_options(cfg, &p.o, &r), FKV_ERR_ARGUMENT);
  CHECK_CONTAINS("fkv_precompile_options_init");
  p.o.struct_size = sizeof(size_t);
  CHECK_STATUS(fkv_precompile_with_options(cfg, &p.o, &r), FKV_ERR_ARGUMENT);
  CHECK_CONTAINS("arch");
  /* A size below the struct_size field itself: init writes nothing. */
  memset(&p, kFill, sizeof p);
  fkv_precompile_options_init_v2(&p.o, 4);
  CHECK(untouched((const unsigned char*)&p, sizeof p));
  /* A newer header's larger struct: the unknown tail is zeroed, struct_size is the caller's. */
  memset(&p, kFill, sizeof p);
  fkv_precompile_options_init_v2(&p.o, sizeof p.o + 16);
  CHECK(p.o.struct_size == sizeof p.o + 16);
  CHECK(p.guard[0] == 0 && p.guard[15] == 0 && untouched(p.guard + 16, sizeof p.guard - 16));

  /* The materializer options: decode_crossover outside struct_size keeps its default. */
  memset(&m, kFill, sizeof m);
  fkv_materializer_options_init_v2(&m.o, offsetof(fkv_materializer_options, decode_crossover));
  CHECK(untouched((const unsigned char*)&m.o.decode_crossover, sizeof m.o.decode_crossover));
  CHECK(m.o.tp_size == 1 && m.o.max_tokens == 8192);
  /* ... and fp8_gemm, added after it, outside struct_size keeps its default too. */
  memset(&m, kFill, sizeof m);
  fkv_materializer_options_init_v2(&m.o, offsetof(fkv_materializer_options, fp8_gemm));
  CHECK(untouched((const unsigned char*)&m.o.fp8_gemm, sizeof m.o.fp8_gemm));
  CHECK(m.o.decode_crossover == -1 && m.o.tp_size == 1);
  /* ... and int8_gemm_tokens, added after fp8_gemm. */
  memset(&m, kFill, sizeof m);
  fkv_materializer_options_init_v2(&m.o, offsetof(fkv_materializer_options, int8_gemm_tokens));
  CHECK(untouched((const unsigned char*)&m.o.int8_gemm_tokens, sizeof m.o.int8_gemm_tokens));
  CHECK(m.o.fp8_gemm == 1 && m.o.decode_crossover == -1);
  memset(&w, 0, sizeof w);
  w.hidden_size = 4096;
  w.num_layers = 1; /* not the model's 36, but tp_size is checked first */
  w.w_kv = w_kv;
  m.o.tp_size = 3;
  CHECK_STATUS(fkv_materializer_create(cfg, &w, &m.o, &mat), FKV_ERR_CONFIG_MISMATCH);
  CHECK_CONTAINS("tp_size=3");
  m.o.struct_size = 0;
  CHECK_STATUS(fkv_materializer_create(cfg, &w, &m.o, &mat), FKV_ERR_ARGUMENT);
  CHECK_CONTAINS("fkv_materializer_options_init");
  CHECK(mat == NULL);

  fkv_config_free(cfg);
}

int main(void) {
  char dir[] = "/tmp/fkv-c-abi-XXXXXX";
  if (mkdtemp(dir) == NULL) {
    perror("mkdtemp");
    return 1;
  }
  test_old_precompile_layouts(dir);
  test_old_materializer_layouts();
  test_struct_size(dir);
  nftw(dir, remove_one, 16, FTW_DEPTH | FTW_PHYS);
  printf("test_c_abi_compat: %d checks, %d failed\n", checks, failures);
  return failures == 0 ? 0 : 1;
}
