// weights: the quantized formats of the packed K/V projection (names, refusals, scale layouts),
// and NVRTC compiles of the kernels that read them: the decode kernel's quantized variants are
// compiled in test_decode.cpp, the dequantize kernel of the cuBLASLt path, the FP8 GEMM's
// activation quantizer and the INT8 GEMM's activation split and combine here. No GPU needed.
#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "../src/act_quant.hpp"
#include "../src/dequant.hpp"
#include "../src/fp8_stream_gemm.hpp"
#include "../src/int8_gemm_path.hpp"
#include "fkv/arch.hpp"
#include "fkv/compiler.hpp"
#include "fkv/decode.hpp"
#include "fkv/errors.hpp"
#include "fkv/weights.hpp"

using fkv::WeightFormat;

TEST_CASE("weight formats: names, the engines' spellings, scale layouts") {
  for (WeightFormat f : {WeightFormat::Dense, WeightFormat::Fp8Tensor, WeightFormat::Fp8Channel,
                         WeightFormat::Fp8Block, WeightFormat::Int8Channel})
    CHECK(fkv::parse_weight_format(fkv::to_string(f)) == f);
  CHECK(fkv::parse_weight_format("FP8") == WeightFormat::Fp8Tensor);
  CHECK(fkv::parse_weight_format("fp8-per-channel") == WeightFormat::Fp8Channel);
  CHECK(fkv::parse_weight_format("fp8_block128") == WeightFormat::Fp8Block);
  CHECK(fkv::parse_weight_format("W8A16") == WeightFormat::Int8Channel);
  CHECK(fkv::scale_layout(WeightFormat::Fp8Tensor) == fkv::ScaleLayout::PerLayer);
  CHECK(fkv::scale_layout(WeightFormat::Int8Channel) == fkv::ScaleLayout::PerRow);
  CHECK(fkv::layer_scale_count(WeightFormat::Dense, 2048, 4096) == 0);
  CHECK(fkv::layer_scale_count(WeightFormat::Fp8Tensor, 2048, 4096) == 1);
  CHECK(fkv::layer_scale_count(WeightFormat::Fp8Channel, 2048, 4096) == 2048);
  CHECK(fkv::layer_scale_count(WeightFormat::Fp8Block, 2048, 4096) == 16 * 32);
  CHECK(fkv::layer_scale_count(WeightFormat::Fp8Block, 2048, 4000) == 16 * 32);  // ceil
  CHECK(fkv::weight_element_bytes(WeightFormat::Int8Channel, 2) == 1);
  CHECK(fkv::weight_element_bytes(WeightFormat::Dense, 2) == 2);
}

TEST_CASE("weight formats: packed 4-bit schemes are refused by name, unknown names listed") {
  for (const char* name : {"gptq", "AWQ", "nvfp4", "mxfp4", "int4", "w4a16", "gptq_marlin"}) {
    INFO(name);
    try {
      fkv::parse_weight_format(name);
      FAIL("accepted");
    } catch (const fkv::UnsupportedError& e) {
      const std::string what = e.what();
      CHECK(what.find(std::string("'") + name + "'") != std::string::npos);
      CHECK(what.find("4-bit") != std::string::npos);
      CHECK(fkv::error_kind_of(e) == fkv::ErrorKind::Unsupported);
    }
  }
  try {
    fkv::parse_weight_format("fp9");
    FAIL("accepted");
  } catch (const fkv::ArgumentError& e) {
    CHECK(std::string(e.what()).find("fp8_block") != std::string::npos);
  }
}

TEST_CASE("quantized decode specs: chunks of 64 columns, whole 128-column blocks per split") {
  fkv::KernelSpec e;
  e.num_kv_heads = 8;
  e.head_dim = 128;
  e.rotary_dim = 128;
  e.neox = true;
  e.k_norm = fkv::KNormKind::Rms;
  for (WeightFormat w :
       {WeightFormat::Fp8Tensor, WeightFormat::Fp8Block, WeightFormat::Int8Channel}) {
    for (int tb : {8, 16, 32, 64}) {
      const fkv::DecodeSpec s = fkv::make_decode_spec(e, 4096, 5, tb, 132, {}, w);
      INFO(s.canonical());
      CHECK(s.chunk_columns() == 64);
      CHECK(s.k_slice % 64 == 0);
      // Split i starts at stage i * n / S of the n = 4096 / k_slice (splits need not divide
      // the stages): at least one stage each, and for block scales whole 128-column blocks.
      CHECK(4096 % s.k_slice == 0);
      const int n = 4096 / s.k_slice;
      CHECK(n >= s.splits);
      if (w == WeightFormat::Fp8Block)
        for (int i = 0; i <= s.splits; ++i) CHECK(i * n / s.splits * s.k_slice % 128 == 0);
      CHECK(s.canonical().find(";w=" + fkv::to_string(w)) != std::string::npos);
      CHECK(s.short_name().find(fkv::to_string(w)) != std::string::npos);
    }
  }
  // The dense spec's key is unchanged by the new field.
  CHECK(fkv::make_decode_spec(e, 4096, 5, 8, 132).canonical().find(";w=") == std::string::npos);
  // Block scales need whole 128-row blocks per layer's K and V rows.
  e.num_kv_heads = 1;
  e.head_dim = 48;
  e.rotary_dim = 48;
  CHECK(!fkv::decode_unsupported(e, 4096, 2, WeightFormat::Fp8Block).empty());
  CHECK(fkv::decode_unsupported(e, 4096, 2, WeightFormat::Fp8Channel).empty());
}

// Compile options for sm_90, or false (with a warning) when this NVRTC does not build it.
bool sm90_options(fkv::CompileOptions& o) {
  for (const fkv::Arch& a : fkv::supported_archs())
    if (a.name() == "sm_90") {
      o.arch = a;
      return true;
    }
  WARN("NVRTC here does not build sm_90; skipped");
  return false;
}

TEST_CASE("the dequantize kernel of the cuBLASLt path compiles for every format and dtype") {
  fkv::CompileOptions o;
  if (!sm90_options(o)) return;
  for (WeightFormat w : {WeightFormat::Fp8Tensor, WeightFormat::Fp8Channel, WeightFormat::Fp8Block,
                         WeightFormat::Int8Channel})
    for (fkv::DType act : {fkv::DType::BF16, fkv::DType::FP16}) {
      const fkv::KernelSource src = fkv::generate_dequant(w, act, 4096);
      INFO(src.specialization);
      const fkv::CompiledKernel k = fkv::compile(src, o);
      CHECK(!k.image.empty());
      CHECK(k.lowered_name.find("dequant_weights") != std::string::npos);
    }
  CHECK_THROWS_AS(fkv::generate_dequant(WeightFormat::Dense, fkv::DType::BF16, 4096),
                  fkv::ArgumentError);
  CHECK_THROWS_AS(fkv::generate_dequant(WeightFormat::Fp8Tensor, fkv::DType::FP32, 4096),
                  fkv::ArgumentError);
}

TEST_CASE("the FP8 GEMM's activation quantizer, scale expansion and row scaling compile") {
  fkv::CompileOptions o;
  if (!sm90_options(o)) return;
  // 4000 columns: a partial last 128-column group, and 4000 / 8 vectors not a multiple of the
  // 128 threads.
  for (int hidden : {4096, 4000, 8})
    for (int group : {0, 128})
      for (fkv::DType act : {fkv::DType::BF16, fkv::DType::FP16}) {
        const fkv::KernelSource src = fkv::generate_quantize_act(act, hidden, group);
        INFO(src.specialization);
        const fkv::CompiledKernel k = fkv::compile(src, o);
        CHECK(!k.image.empty());
        CHECK(k.lowered_name.find("quantize_act") != std::string::npos);
      }
  const fkv::CompiledKernel e = fkv::compile(fkv::generate_expand_scales(), o);
  CHECK(e.lowered_name.find("expand_scales") != std::string::npos);
  // fp8_channel's row scaling after its block-scaled GEMM.
  for (fkv::DType act : {fkv::DType::BF16, fkv::DType::FP16}) {
    const fkv::CompiledKernel r = fkv::compile(fkv::generate_scale_rows(act), o);
    CHECK(r.lowered_name.find("scale_rows") != std::string::npos);
  }
  CHECK_THROWS_AS(fkv::generate_scale_rows(fkv::DType::FP32), fkv::ArgumentError);
  CHECK_THROWS_AS(fkv::generate_quantize_act(fkv::DType::FP32, 4096, 0), fkv::ArgumentError);
  CHECK_THROWS_AS(fkv::generate_quantize_act(fkv::DType::BF16, 4092, 0), fkv::ArgumentError);
  CHECK_THROWS_AS(fkv::generate_quantize_act(fkv::DType::BF16, 4096, 64), fkv::ArgumentError);
}

TEST_CASE("the INT8 GEMM's activation split and combine compile") {
  fkv::CompileOptions o;
  if (!sm90_options(o)) return;
  for (int hidden : {4096, 4000, 8})
    for (fkv::DType act : {fkv::DType::BF16, fkv::DType::FP16}) {
      const std::vector<fkv::KernelSource> srcs = fkv::Int8GemmPath::sources(act, hidden);
      REQUIRE(srcs.size() == 2);
      const char* names[] = {"split_act_int8", "combine_int8"};
      for (std::size_t i = 0; i < srcs.size(); ++i) {
        INFO(srcs[i].specialization);
        const fkv::CompiledKernel k = fkv::compile(srcs[i], o);
        CHECK(!k.image.empty());
        CHECK(k.lowered_name.find(names[i]) != std::string::npos);
      }
      // The split's cache key names the hidden size, the combine's does not depend on it.
      CHECK(srcs[0].specialization.find("hidden=" + std::to_string(hidden)) != std::string::npos);
      CHECK(srcs[1].specialization.find("hidden") == std::string::npos);
    }
  CHECK_THROWS_AS(fkv::Int8GemmPath::sources(fkv::DType::FP32, 4096), fkv::ArgumentError);
  CHECK_THROWS_AS(fkv::Int8GemmPath::sources(fkv::DType::BF16, 4092), fkv::ArgumentError);
}

TEST_CASE("the FP8 stream GEMM (TMA and warpgroup MMAs) compiles for sm_90a") {
  fkv::CompileOptions o;
  if (!sm90_options(o)) return;
  for (fkv::DType act : {fkv::DType::BF16, fkv::DType::FP16}) {
    const std::vector<fkv::KernelSource> srcs = fkv::Fp8StreamGemm::sources(act);
    REQUIRE(srcs.size() == 2);  // 32 and 64 tokens
    for (const fkv::KernelSource& src : srcs) {
      INFO(src.specialization);
      CHECK(src.arch_specific);
      fkv::CompileOptions a = o;
      a.arch.arch_specific = true;
      const fkv::CompiledKernel k = fkv::compile(src, a);
      CHECK(!k.image.empty());
      CHECK(k.lowered_name.find("fp8_stream_gemm") != std::string::npos);
    }
  }
  CHECK(fkv::Fp8StreamGemm::padded(1) == 32);
  CHECK(fkv::Fp8StreamGemm::padded(32) == 32);
  CHECK(fkv::Fp8StreamGemm::padded(33) == 64);
  CHECK_THROWS_AS(fkv::Fp8StreamGemm::sources(fkv::DType::FP32), fkv::ArgumentError);
}
