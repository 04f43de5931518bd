// decode: spec, tiling and codegen of the decode-size kernel, and NVRTC compiles of a covering set
// of specializations for sm_80 and sm_90 with ptxas' own report (no spills). No GPU needed.
#include <catch2/catch.hpp>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "fkv/cache.hpp"
#include "fkv/compiler.hpp"
#include "fkv/decode.hpp"
#include "fkv/errors.hpp"
#include "fkv/options.hpp"
#include "fkv/precompile.hpp"

namespace {

// The Qwen3-8B DFlash draft: 8 KV heads x 128, rotary 128 neox, K RMSNorm, 5 layers, hidden 4096.
fkv::KernelSpec qwen3_epilogue(fkv::OutputMode mode = fkv::OutputMode::Stacked) {
  fkv::KernelSpec e;
  e.num_kv_heads = 8;
  e.head_dim = 128;
  e.rotary_dim = 128;
  e.neox = true;
  e.k_norm = fkv::KNormKind::Rms;
  e.act = fkv::DType::BF16;
  e.cache = fkv::DType::BF16;
  e.mode = mode;
  return e;
}

bool arch_supported(const std::string& name) {
  for (const fkv::Arch& a : fkv::supported_archs())
    if (a.name() == name) return true;
  return false;
}

}  // namespace

TEST_CASE("decode_bucket rounds up to 8, 16, 32, 64 and caps at 64") {
  CHECK(fkv::decode_bucket(1) == 8);
  CHECK(fkv::decode_bucket(8) == 8);
  CHECK(fkv::decode_bucket(9) == 16);
  CHECK(fkv::decode_bucket(17) == 32);
  CHECK(fkv::decode_bucket(33) == 64);
  CHECK(fkv::decode_bucket(64) == 64);
  CHECK(fkv::decode_bucket(1000) == 64);
  CHECK_THROWS_AS(fkv::decode_bucket(0), fkv::ArgumentError);
}

TEST_CASE("decode tiling for the Qwen3-8B DFlash draft on 132 SMs") {
  for (int tb : {8, 16, 32, 64}) {
    const fkv::DecodeSpec s = fkv::make_decode_spec(qwen3_epilogue(), 4096, 5, tb, 132);
    INFO(s.canonical());
    CHECK(s.rows() == 10240);
    CHECK(s.tile_rows() == 128);  // one head of K or V per tile
    CHECK(s.tiles() == 80);
    CHECK(s.grid() >= 2 * 132);  // at least two CTAs per SM
    CHECK(4096 % (s.splits * s.k_slice) == 0);
    CHECK((4096 / s.splits / 32) % s.pipeline == 0);
    CHECK(s.shared_bytes() <= 80 * 1024);
    CHECK(s.workspace_bytes() == std::size_t(s.splits) * tb * 10240 * 4);
  }
  // The partials stay small where the bucket is large.
  CHECK(fkv::make_decode_spec(qwen3_epilogue(), 4096, 5, 64, 132).workspace_bytes() <= 12u << 20);
}

TEST_CASE("decode tiling at 8 tokens is the H200 sweep's best: 4 splits, 4 chunks in flight") {
  // docs/decode.md: at T = 8 on 132 SMs, 4 splits x pipeline 4 beat 8 x 8 (25.50 vs 26.15 us).
  const fkv::DecodeSpec s8 = fkv::make_decode_spec(qwen3_epilogue(), 4096, 5, 8, 132);
  CHECK(s8.splits == 4);
  CHECK(s8.pipeline == 4);
  CHECK(s8.grid() == 320);
  const fkv::DecodeSpec s16 = fkv::make_decode_spec(qwen3_epilogue(), 4096, 5, 16, 132);
  CHECK(s16.pipeline == 8);
  CHECK(s16.grid() >= 4 * 132);
}

TEST_CASE("decode tiling over 8-bit weights: the H200 cold FP8 sweep's choice at each bucket") {
  // docs/performance.md (quant_bench --sweep, weights read from HBM): 3 splits with 256-column
  // stages at 8 tokens; from 16 tokens row tiles of 256 rows with 3 splits (120 CTAs on 132
  // SMs), 2 chunks in flight and 128-column stages: 16 warps x 1 MMA tile at 16 and 32 tokens,
  // every x stage of a split resident at 32; 8 warps x 2, x staged, at 64 (16 warps would
  // spill).
  struct Want {
    int tb, splits, pipeline, mw, warps, k_slice, x_resident = 0, x_fp16 = 0;
  };
  auto check = [](fkv::WeightFormat w, const Want& want) {
    const fkv::DecodeSpec s =
        fkv::make_decode_spec(qwen3_epilogue(fkv::OutputMode::Pool), 4096, 5, want.tb, 132, {}, w);
    INFO(s.canonical());
    CHECK(s.splits == want.splits);
    CHECK(s.pipeline == want.pipeline);
    CHECK(s.mma_tiles_per_warp == want.mw);
    CHECK(s.warps == want.warps);
    CHECK(s.k_slice == want.k_slice);
    CHECK(s.x_resident == want.x_resident);
    CHECK(s.x_fp16 == want.x_fp16);
  };
  for (fkv::WeightFormat w : {fkv::WeightFormat::Fp8Tensor, fkv::WeightFormat::Int8Channel,
                              fkv::WeightFormat::Fp8Channel}) {
    // INT8 up to 8 tokens: x re-encoded as scaled fp16, stage by stage (eleventh session).
    const int xh = w == fkv::WeightFormat::Int8Channel ? 1 : 0;
    for (const Want& want : {Want{8, 3, 4, 1, 8, 256, 0, xh}, Want{16, 3, 2, 1, 16, 128},
                             Want{32, 3, 2, 1, 16, 128, 1}, Want{64, 3, 2, 2, 8, 128}})
      check(w, want);
  }
  // Block-scaled weights: as the others (since the ninth session also at 16 tokens).
  for (const Want& want : {Want{8, 3, 4, 1, 8, 256}, Want{16, 3, 2, 1, 16, 128},
                           Want{32, 3, 2, 1, 16, 128, 1}, Want{64, 3, 2, 2, 8, 128}})
    check(fkv::WeightFormat::Fp8Block, want);
  // fp16 activations: the same tilings, x staged below 32 tokens and never re-encoded (INT8's
  // x_fp16 tiling at 8 tokens falls back to the same one without it).
  fkv::KernelSpec half = qwen3_epilogue(fkv::OutputMode::Pool);
  half.act = half.cache = half.cos_sin = fkv::DType::FP16;
  for (fkv::WeightFormat w : {fkv::WeightFormat::Fp8Tensor, fkv::WeightFormat::Int8Channel})
    for (int tb : {8, 16, 32}) {
      const fkv::DecodeSpec h = fkv::make_decode_spec(half, 4096, 5, tb, 132, {}, w);
      INFO(h.canonical());
      CHECK(h.x_fp16 == 0);
      CHECK(h.x_resident == (tb == 32 ? 1 : 0));
      CHECK(h.k_slice == (tb == 8 ? 256 : 128));
    }
  // A head_dim whose heads do not fill 256 rows (96) takes the general rules.
  fkv::KernelSpec d96 = qwen3_epilogue(fkv::OutputMode::Pool);
  d96.head_dim = 96;
  d96.rotary_dim = 96;
  const fkv::DecodeSpec odd =
      fkv::make_decode_spec(d96, 4096, 5, 64, 132, {}, fkv::WeightFormat::Fp8Tensor);
  CHECK(odd.tile_rows() == 96);
  // A wider hidden size (8192) at 64 tokens: the same 8-warp tiling, x staged.
  const fkv::DecodeSpec wide = fkv::make_decode_spec(qwen3_epilogue(fkv::OutputMode::Pool), 8192, 5,
                                                     64, 132, {}, fkv::WeightFormat::Fp8Tensor);
  CHECK(wide.warps == 8);
  CHECK(wide.x_resident == 0);
  CHECK(fkv::make_decode_spec(qwen3_epilogue(fkv::OutputMode::Pool), 8192, 5, 32, 132, {},
                              fkv::WeightFormat::Fp8Tensor)
            .x_resident == 1);  // 22 stages of 8.7 KB fit
  // hidden 16384 at 32 tokens: 43 stages would not, so x is staged, and stays bf16.
  const fkv::DecodeSpec big = fkv::make_decode_spec(qwen3_epilogue(fkv::OutputMode::Pool), 16384, 5,
                                                    32, 132, {}, fkv::WeightFormat::Fp8Tensor);
  CHECK(big.x_resident == 0);
  CHECK(big.x_fp16 == 0);
  CHECK(big.warps == 16);
  // Splits follow the SM count: 200 SMs take 5 splits of the 40 tiles of 256 rows.
  CHECK(fkv::make_decode_spec(qwen3_epilogue(fkv::OutputMode::Pool), 4096, 5, 64, 200, {},
                              fkv::WeightFormat::Fp8Tensor)
            .splits == 5);
  // The warps override needs mma_tiles_per_warp.
  fkv::DecodeTuning t;
  t.warps = 8;
  CHECK_THROWS_AS(fkv::make_decode_spec(qwen3_epilogue(), 4096, 5, 64, 132, t), fkv::ArgumentError);
}

TEST_CASE("decode resident x stages: the spec, its shared memory, its cache key and its refusals") {
  fkv::DecodeTuning t{3, 2, 2, 128, 8, 1};
  const fkv::KernelSpec pool = qwen3_epilogue(fkv::OutputMode::Pool);
  const fkv::DecodeSpec s =
      fkv::make_decode_spec(pool, 4096, 5, 64, 132, t, fkv::WeightFormat::Fp8Tensor);
  CHECK(s.x_resident == 1);
  // 3 splits of the 32 stages of 128 columns: the longest holds 11, all resident, each 64 tokens
  // x (2 * 128 + 16) bytes (8-bit weights pad by 16). The tail's fp32 tile (64 x 256 x 4) is
  // smaller.
  CHECK(s.shared_bytes() == 11 * 64 * (2 * 128 + 16));
  CHECK(s.canonical().find(";ksl=128;xr=1;w=fp8_tensor") != std::string::npos);
  const fkv::KernelSource src = fkv::generate_decode(s);
  CHECK(src.name_expression.substr(src.name_expression.size() - 13) == ", 1, 1, 1, 0>");
  // Staged x: two buffers, no key field, XM 0 (XH 0); dense weights pad by 64.
  t.x_resident = 0;
  const fkv::DecodeSpec r =
      fkv::make_decode_spec(pool, 4096, 5, 64, 132, t, fkv::WeightFormat::Fp8Tensor);
  CHECK(r.canonical().find(";xr=") == std::string::npos);
  CHECK(r.shared_bytes() == 4 * 64 * 256);  // the tail's tile exceeds two x stages
  CHECK(fkv::generate_decode(r).name_expression.find(", 1, 1, 0, 0>") != std::string::npos);
  t = {3, 2, 2, 128, 8, 1};
  CHECK(fkv::make_decode_spec(pool, 4096, 5, 32, 132, t).shared_bytes() ==
        11 * 32 * (2 * 128 + 64));  // dense: 11 stages of the longest split, 64-byte pad
  // An x_resident other than 0 or 1, or resident stages over 200 KB of shared memory, is refused.
  t.x_resident = 2;
  CHECK_THROWS_AS(fkv::make_decode_spec(pool, 4096, 5, 64, 132, t, fkv::WeightFormat::Fp8Tensor),
                  fkv::ArgumentError);
  t = {2, 2, 2, 128, 8, 1};  // 16 resident stages of 17 KB
  CHECK_THROWS_WITH(fkv::make_decode_spec(pool, 4096, 5, 64, 132, t, fkv::WeightFormat::Fp8Tensor),
                    Catch::Contains("bytes of shared memory"));
}

TEST_CASE("decode x as scaled fp16 (x_fp16): the spec, its cache key and its refusals") {
  const fkv::KernelSpec pool = qwen3_epilogue(fkv::OutputMode::Pool);
  fkv::DecodeTuning t{3, 4, 1, 256, 0, 1, 1};
  const fkv::DecodeSpec s =
      fkv::make_decode_spec(pool, 4096, 5, 8, 132, t, fkv::WeightFormat::Int8Channel);
  CHECK(s.x_fp16 == 1);
  // The same shared memory as resident x (re-encoded in place: fp16 is as wide as bf16).
  t.x_fp16 = 0;
  CHECK(s.shared_bytes() ==
        fkv::make_decode_spec(pool, 4096, 5, 8, 132, t, fkv::WeightFormat::Int8Channel)
            .shared_bytes());
  CHECK(s.canonical().find(";xr=1;xh=1;w=int8_channel") != std::string::npos);
  CHECK(fkv::make_decode_spec(pool, 4096, 5, 8, 132, t, fkv::WeightFormat::Int8Channel)
            .canonical()
            .find(";xh=") == std::string::npos);
  const fkv::KernelSource src = fkv::generate_decode(s);
  CHECK(src.name_expression.substr(src.name_expression.size() - 13) == ", 2, 2, 1, 1>");
  // Staged x (re-encoded per stage): the key has no ";xr=1", the template XM 0 and XH 1.
  fkv::DecodeTuning st = t;
  st.x_resident = 0;
  st.x_fp16 = 1;
  const fkv::DecodeSpec sx =
      fkv::make_decode_spec(pool, 4096, 5, 8, 132, st, fkv::WeightFormat::Fp8Block);
  CHECK(sx.canonical().find(";ksl=256;xh=1;w=fp8_block") != std::string::npos);
  CHECK(fkv::generate_decode(sx).name_expression.find(", 1, 3, 0, 1>") != std::string::npos);
  // Refused: block scales with stages that split a 128-column block, dense weights, fp16
  // activations (already fp16), a value other than 0/1.
  auto refused = [&](const fkv::KernelSpec& e, fkv::DecodeTuning bad, fkv::WeightFormat w) {
    CHECK_THROWS_WITH(fkv::make_decode_spec(e, 4096, 5, 8, 132, bad, w),
                      Catch::Contains("x_fp16") || Catch::Contains("out of range"));
  };
  t.x_fp16 = 1;
  // (4 splits of 16 stages of 64 columns, one chunk in flight: only the blocks are wrong)
  CHECK_THROWS_WITH(fkv::make_decode_spec(pool, 4096, 5, 8, 132, {4, 1, 1, 64, 0, 0, 1},
                                          fkv::WeightFormat::Fp8Block),
                    Catch::Contains("k_slice a multiple of 128"));
  CHECK_NOTHROW(fkv::make_decode_spec(pool, 4096, 5, 8, 132, {4, 1, 1, 64, 0, 0, 1},
                                      fkv::WeightFormat::Fp8Tensor));
  refused(pool, t, fkv::WeightFormat::Dense);
  fkv::KernelSpec half = pool;
  half.act = fkv::DType::FP16;
  half.cos_sin = fkv::DType::FP16;
  half.cache = fkv::DType::FP16;
  refused(half, t, fkv::WeightFormat::Fp8Tensor);
  fkv::DecodeTuning two = t;
  two.x_fp16 = 2;
  refused(pool, two, fkv::WeightFormat::Fp8Tensor);
}

TEST_CASE("decode splits need not divide hidden: runs of whole x stages") {
  // 3 splits of 4096 columns: k_slice divides hidden, each split holds at least one stage and
  // whole pipelines of chunks.
  fkv::DecodeTuning t;
  t.splits = 3;
  for (int tb : {8, 16, 32, 64}) {
    const fkv::DecodeSpec s = fkv::make_decode_spec(qwen3_epilogue(), 4096, 5, tb, 132, t);
    INFO(s.canonical());
    CHECK(s.splits == 3);
    CHECK(s.grid() == 80 * 3);
    CHECK(4096 % s.k_slice == 0);
    const int n = 4096 / s.k_slice, per = s.k_slice / s.chunk_columns();
    CHECK(n >= 3);
    CHECK((n / 3 * per) % s.pipeline == 0);
    CHECK(((n + 2) / 3 * per) % s.pipeline == 0);
  }
  // More splits than stages, or a pipeline that does not divide a split's chunks: refused.
  t.k_slice = 2048;
  CHECK_THROWS_AS(fkv::make_decode_spec(qwen3_epilogue(), 4096, 5, 8, 132, t), fkv::ArgumentError);
  t.k_slice = 512;
  t.pipeline = 3;
  CHECK_THROWS_AS(fkv::make_decode_spec(qwen3_epilogue(), 4096, 5, 8, 132, t), fkv::ArgumentError);
  // Block scales: a split boundary inside a 128-column block is refused (4096 / 64 = 64 stages
  // of 64 columns into 3: the first boundary at 21 * 64 = 1344 columns).
  fkv::DecodeTuning b;
  b.splits = 3;
  b.k_slice = 64;
  b.pipeline = 1;
  CHECK_THROWS_AS(fkv::make_decode_spec(qwen3_epilogue(fkv::OutputMode::Pool), 4096, 5, 8, 132, b,
                                        fkv::WeightFormat::Fp8Block),
                  fkv::ArgumentError);
}

TEST_CASE("the decode kernels a DecodeKV prepares, and the ones precompile adds for a GPU") {
  fkv::DecodeOptions o;
  o.max_tokens = 8;
  const auto two = fkv::decode_specs(qwen3_epilogue(), 4096, 5, o, 132);
  REQUIRE(two.size() == 2);  // bucket 8, stacked then pool
  CHECK(two[0].epilogue.mode == fkv::OutputMode::Stacked);
  CHECK(two[1].epilogue.mode == fkv::OutputMode::Pool);
  CHECK(two[0].token_bucket == 8);
  o.max_tokens = 33;
  o.stacked = false;
  fkv::KernelSpec fp8 = qwen3_epilogue();
  fp8.cache = fkv::DType::FP8_E4M3;
  const auto pool = fkv::decode_specs(fp8, 4096, 5, o, 132);
  REQUIRE(pool.size() == 4);  // buckets 8, 16, 32, 64, pool only
  CHECK(pool[3].token_bucket == 64);
  CHECK(pool[0].epilogue.cache == fkv::DType::FP8_E4M3);
  o.stacked = true;
  o.pool = false;
  // Stacked output is in the activation dtype whatever the pool's.
  CHECK(fkv::decode_specs(fp8, 4096, 5, o, 132)[0].epilogue.cache == fkv::DType::BF16);

  // The measured table has the H200, and precompile's selection follows the plan.
  bool h200 = false;
  for (const auto& g : fkv::measured_decode_gpus())
    h200 = h200 || (g.name == "H200" && g.sm_count == 132 && g.crossover == 8);
  CHECK(h200);
  const fkv::ModelConfig cfg = fkv::ModelConfig::from_json(std::string_view(
      R"({"hidden_size": 4096, "max_position_embeddings": 4096, "fkv": {"layers": [)"
      R"({"num_kv_heads": 8, "head_dim": 128, "rotary_dim": 128, "is_neox_style": true,)"
      R"( "rope_theta": 1e6, "k_norm": "rms"},)"
      R"({"num_kv_heads": 8, "head_dim": 128, "rotary_dim": 128, "is_neox_style": true,)"
      R"( "rope_theta": 1e6, "k_norm": "rms"}]}})"));
  const fkv::Plan plan = fkv::make_plan(cfg, fkv::ValidationMode::Strict);
  const fkv::VariantOptions vo;
  const auto specs = fkv::decode_specs_for(plan, vo, {132, 8, 4096});
  REQUIRE(specs.size() == 2);
  CHECK(specs[1].canonical() ==
        fkv::make_decode_spec(specs[1].epilogue, 4096, 2, 8, 132).canonical());
  CHECK(fkv::decode_specs_for(plan, vo, {132, 0, 4096}).empty());  // crossover 0: none
  CHECK(fkv::decode_specs_for(plan, vo, {0, 8, 4096}).empty());    // no SM count: none
  CHECK(fkv::decode_specs_for(plan, vo, {132, 8, 100}).empty());   // hidden not a multiple of 256
}

TEST_CASE("decode tiling covers whole heads for head_dim 64, 80, 256") {
  fkv::KernelSpec e = qwen3_epilogue();
  for (int d : {64, 80, 256}) {
    e.head_dim = d;
    e.rotary_dim = d;
    for (int tb : {8, 64}) {
      const fkv::DecodeSpec s = fkv::make_decode_spec(e, 2048, 3, tb, 108);
      INFO(s.canonical());
      CHECK(s.tile_rows() % d == 0);
      CHECK(s.rows() % s.tile_rows() == 0);
      CHECK(s.warps <= 8);
    }
  }
}

TEST_CASE("decode tuning overrides are honoured or refused with the reason") {
  fkv::DecodeTuning t;
  t.splits = 16;
  t.pipeline = 2;
  const fkv::DecodeSpec s = fkv::make_decode_spec(qwen3_epilogue(), 4096, 5, 8, 132, t);
  CHECK(s.splits == 16);
  CHECK(s.pipeline == 2);
  t.pipeline = 3;  // 8 chunks per split are not a multiple of 3
  CHECK_THROWS_AS(fkv::make_decode_spec(qwen3_epilogue(), 4096, 5, 8, 132, t), fkv::ArgumentError);
  t = {};
  t.mma_tiles_per_warp = 3;  // 8 MMA tiles per CTA
  CHECK_THROWS_AS(fkv::make_decode_spec(qwen3_epilogue(), 4096, 5, 8, 132, t), fkv::ArgumentError);
}

TEST_CASE("decode_unsupported names what keeps a model on the cuBLASLt path") {
  fkv::KernelSpec e = qwen3_epilogue();
  CHECK(fkv::decode_unsupported(e, 4096, 5).empty());
  CHECK(fkv::decode_unsupported(e, 4000, 5).find("multiple of 256") != std::string::npos);
  CHECK(fkv::decode_unsupported(e, 4096, 33).find("layers") != std::string::npos);
  fkv::KernelSpec f = e;
  f.act = fkv::DType::FP32;
  f.cache = fkv::DType::FP32;
  CHECK(fkv::decode_unsupported(f, 4096, 5).find("bf16 or fp16") != std::string::npos);
  f = e;
  f.head_dim = 72;
  f.rotary_dim = 72;
  CHECK(fkv::decode_unsupported(f, 4096, 5).find("multiple of 16") != std::string::npos);
  f = e;
  f.debug_checks = true;
  CHECK_FALSE(fkv::decode_unsupported(f, 4096, 5).empty());
  CHECK_THROWS_AS(fkv::make_decode_spec(f, 4096, 5, 8, 132), fkv::ConfigError);
}

TEST_CASE(
    "generate_decode: one explicit instantiation, the spec on the first line, distinct keys") {
  const fkv::DecodeSpec s = fkv::make_decode_spec(qwen3_epilogue(), 4096, 5, 8, 132);
  const fkv::KernelSource src = fkv::generate_decode(s);
  CHECK(src.template_name == "fused_proj_kv.cu");
  CHECK(src.source.rfind("// fkv spec: " + s.canonical() + "\n", 0) == 0);
  CHECK(src.name_expression.rfind(
            "fkv_kernels::fused_proj_kv<4096, 5, 8, 128, 128, true, 1, fkv_kernels::bf16, "
            "fkv_kernels::bf16, float, long long, long long, false, 8, ",
            0) == 0);
  CHECK(src.source.find("template __global__ void " + src.name_expression +
                        "(const FkvDecodeParams);") != std::string::npos);
  REQUIRE(src.headers.size() == 2);
  CHECK(src.template_hash.size() == 32);

  // Every (bucket, mode) is its own cache entry.
  fkv::CompileOptions o;
  o.arch = fkv::Arch{9, 0, false};
  std::set<std::string> digests, names;
  for (auto mode : {fkv::OutputMode::Stacked, fkv::OutputMode::Pool})
    for (int tb : {8, 16, 32, 64}) {
      const fkv::DecodeSpec d = fkv::make_decode_spec(qwen3_epilogue(mode), 4096, 5, tb, 132);
      digests.insert(fkv::CacheKey::make(fkv::generate_decode(d), o).digest);
      names.insert(d.canonical());
    }
  CHECK(digests.size() == 8);
  CHECK(names.size() == 8);
}

// Each specialization is compiled by NVRTC here, with ptxas' verbose report in the log
// (--ptxas-options=-v as an extra NVRTC option), which must show no spills and no stack frame.
TEST_CASE("decode kernels compile for sm_80 and sm_90 without spills") {
  struct Case {
    const char* what;
    fkv::KernelSpec e;
    int hidden, layers, tb;
    const char* arch;
    fkv::WeightFormat weight = fkv::WeightFormat::Dense;
    fkv::DecodeTuning tuning = {};
  };
  std::vector<Case> cases;
  // Resident x stages with 8 warps: 8-bit weights, block scales, INT8 on sm_80, dense weights;
  // x as scaled fp16.
  struct Tiled {
    const char* what;
    int tb;
    const char* arch;
    fkv::WeightFormat weight;
    fkv::DecodeTuning tuning;
  };
  using W = fkv::WeightFormat;
  for (const Tiled& t :
       {Tiled{"resident x", 64, "sm_90", W::Fp8Tensor, {3, 2, 2, 128, 8, 1}},
        Tiled{"resident x blocks", 32, "sm_90", W::Fp8Block, {3, 2, 2, 128, 8, 1}},
        Tiled{"resident x int8", 16, "sm_80", W::Int8Channel, {3, 2, 2, 128, 8, 1}},
        Tiled{"resident x dense", 32, "sm_90", W::Dense, {3, 2, 2, 128, 8, 1}},
        // x re-encoded as scaled fp16, staged and resident, one-head and 16-warp tiles
        Tiled{"fp16 x staged", 8, "sm_90", W::Fp8Tensor, {3, 4, 1, 256, 0, 0, 1}},
        Tiled{"fp16 x staged blocks", 8, "sm_90", W::Fp8Block, {3, 4, 1, 256, 0, 0, 1}},
        Tiled{"fp16 x staged int8", 8, "sm_80", W::Int8Channel, {3, 4, 1, 256, 0, 0, 1}},
        Tiled{"fp16 x resident", 8, "sm_90", W::Fp8Channel, {3, 4, 1, 256, 0, 1, 1}},
        Tiled{"fp16 x 16 warps", 16, "sm_90", W::Fp8Block, {3, 2, 1, 128, 16, 0, 1}}})
    cases.push_back(
        {t.what, qwen3_epilogue(fkv::OutputMode::Pool), 4096, 5, t.tb, t.arch, t.weight, t.tuning});
  // Quantized weights (one byte per element, converted in registers), every format and bucket
  // size the Qwen3-8B draft uses, bf16 and fp16.
  for (fkv::WeightFormat w : {fkv::WeightFormat::Fp8Tensor, fkv::WeightFormat::Fp8Channel,
                              fkv::WeightFormat::Fp8Block, fkv::WeightFormat::Int8Channel}) {
    for (int tb : {8, 16, 32, 64})
      cases.push_back(
          {"qwen3 quantized", qwen3_epilogue(fkv::OutputMode::Pool), 4096, 5, tb, "sm_90", w});
    fkv::KernelSpec e = qwen3_epilogue();
    e.act = e.cache = fkv::DType::FP16;
    cases.push_back({"qwen3 quantized fp16", e, 4096, 5, 16, "sm_80", w});
  }
  for (const char* arch : {"sm_90", "sm_80"}) {
    cases.push_back({"qwen3 stacked", qwen3_epilogue(fkv::OutputMode::Stacked), 4096, 5, 8, arch});
    cases.push_back({"qwen3 pool", qwen3_epilogue(fkv::OutputMode::Pool), 4096, 5, 64, arch});
  }
  cases.push_back({"qwen3 stacked", qwen3_epilogue(), 4096, 5, 16, "sm_90"});
  cases.push_back({"qwen3 pool", qwen3_epilogue(fkv::OutputMode::Pool), 4096, 5, 32, "sm_90"});
  {
    fkv::KernelSpec e;  // fp16, GPT-J, no norm, fp8 e4m3 pool, int32 indices, fp16 cos/sin
    e.num_kv_heads = 4;
    e.head_dim = 64;
    e.rotary_dim = 64;
    e.neox = false;
    e.act = fkv::DType::FP16;
    e.cache = fkv::DType::FP8_E4M3;
    e.cos_sin = fkv::DType::FP16;
    e.positions = e.slots = fkv::IndexType::I32;
    e.mode = fkv::OutputMode::Pool;
    cases.push_back({"fp16 gptj fp8", e, 1024, 2, 16, "sm_90"});
    cases.push_back({"fp16 gptj fp8", e, 1024, 2, 16, "sm_80"});
  }
  {
    fkv::KernelSpec e =
        qwen3_epilogue(fkv::OutputMode::Pool);  // partial rotary, head_dim 256, e5m2
    e.num_kv_heads = 2;
    e.head_dim = 256;
    e.rotary_dim = 64;
    e.cache = fkv::DType::FP8_E5M2;
    e.cos_sin = fkv::DType::BF16;
    cases.push_back({"d256 partial rotary e5m2", e, 2048, 3, 32, "sm_80"});
  }
  {
    fkv::KernelSpec e = qwen3_epilogue();  // head_dim 80: five MMA tiles per CTA, a partly idle
                                           // second pair per lane
    e.num_kv_heads = 2;
    e.head_dim = 80;
    e.rotary_dim = 80;
    cases.push_back({"d80", e, 512, 1, 8, "sm_90"});
  }

  fkv::JitOptions verbose = fkv::JitOptions::global();
  verbose.nvrtc_options.push_back("--ptxas-options=-v");
  const std::regex spills(
      R"((\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads)");
  const std::regex regs(R"(Used (\d+) registers)");
  for (const Case& c : cases) {
    if (!arch_supported(c.arch)) {
      WARN("NVRTC here does not build " << c.arch << "; skipped " << c.what);
      continue;
    }
    const fkv::DecodeSpec s =
        fkv::make_decode_spec(c.e, c.hidden, c.layers, c.tb, 132, c.tuning, c.weight);
    if (!(c.tuning == fkv::DecodeTuning{}))  // an explicit tiling is taken as given
      CHECK(s.x_resident == c.tuning.x_resident);
    INFO(c.what << " " << c.arch << ": " << s.canonical());
    fkv::CompileOptions o;
    o.arch = fkv::Arch::parse(c.arch);
    fkv::CompiledKernel k;
    try {
      k = fkv::compile(fkv::generate_decode(s), o, verbose);
    } catch (const fkv::CompileError& e) {
      FAIL(e.what());
    }
    CHECK(!k.image.empty());
    CHECK(!k.lowered_name.empty());
    std::smatch m;
    REQUIRE(std::regex_search(k.log, m, spills));  // ptxas' report is there
    CHECK(m[1] == "0");
    CHECK(m[2] == "0");
    CHECK(m[3] == "0");
    std::smatch r;
    REQUIRE(std::regex_search(k.log, r, regs));
    const int used = std::stoi(r[1]);
    // Registers per thread must leave room for the CTA (65536 per SM).
    CHECK(used * s.threads() <= 65536);
    WARN(c.what << " " << c.arch << " tb=" << c.tb << " " << fkv::to_string(c.weight) << ": "
                << used << " registers, " << s.threads() << " threads, " << s.shared_bytes()
                << " B shared, grid " << s.grid());
  }
}
