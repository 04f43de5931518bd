// FusedKVMaterializer: what is checked before any GPU work (validation, weight counts and
// shapes). The GEMM + kernel path is exercised on a GPU by examples/embed_cpp and
// tests/gpu/test_python_gpu.py.
#include <cublasLt.h>

#include <catch2/catch.hpp>
#include <functional>
#include <string>

#include "fkv/errors.hpp"
#include "fkv/fused_kv_materializer.hpp"
#include "nvrtc_loader.hpp"
#include "temp_dir.hpp"

namespace {

fkv::ModelConfig two_layers(int kv0, int kv1) {
  auto layer = [](int kv) {
    return nlohmann::json{{"num_kv_heads", kv},    {"head_dim", 128},     {"rotary_dim", 128},
                          {"is_neox_style", true}, {"rope_theta", 10000}, {"k_norm", "rms"}};
  };
  return fkv::ModelConfig::from_json(
      nlohmann::json{{"fkv", {{"layers", {layer(kv0), layer(kv1)}}}}});
}

std::string what_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("strict mode refuses mismatched layers with the seed's text") {
  const auto cfg = two_layers(8, 4);
  fkv::MaterializerWeights w;
  CHECK_THROWS_AS(fkv::FusedKVMaterializer(cfg, 1024, w), fkv::ConfigError);
  CHECK(what_of([&] { fkv::FusedKVMaterializer m(cfg, 1024, w); }) ==
        "num_kv_heads mismatch across layers for fused KV path: expected 8, got 4 at layer 1.");
}

TEST_CASE("weights must cover every attention layer") {
  const auto cfg = two_layers(8, 8);
  fkv::MaterializerWeights w;
  w.w_kv = {reinterpret_cast<const void*>(0x1000)};
  CHECK_THROWS_AS(fkv::FusedKVMaterializer(cfg, 1024, w), fkv::ArgumentError);
  CHECK_THAT(what_of([&] { fkv::FusedKVMaterializer m(cfg, 1024, w); }),
             Catch::Contains("w_kv has 1 layers; the config has 2 attention layers"));
  w.w_kv.push_back(reinterpret_cast<const void*>(0x2000));
  w.eps = {1e-6f};
  CHECK_THAT(what_of([&] { fkv::FusedKVMaterializer m(cfg, 1024, w); }),
             Catch::Contains("eps has 1 values for 2 layers"));
}

TEST_CASE("bad sizes and dtypes are argument errors") {
  const auto cfg = two_layers(8, 8);
  fkv::MaterializerWeights w;
  w.w_kv = {reinterpret_cast<const void*>(0x1000), reinterpret_cast<const void*>(0x2000)};
  CHECK_THAT(what_of([&] { fkv::FusedKVMaterializer m(cfg, 0, w); }),
             Catch::Contains("hidden_size must be positive"));
  fkv::MaterializerOptions o;
  o.act = fkv::DType::FP8_E4M3;
  CHECK_THAT(what_of([&] { fkv::FusedKVMaterializer m(cfg, 1024, w, o); }),
             Catch::Contains("bf16, fp16 or fp32 activations"));
  o = {};
  o.max_tokens = 0;
  CHECK_THAT(what_of([&] { fkv::FusedKVMaterializer m(cfg, 1024, w, o); }),
             Catch::Contains("max_tokens must be positive"));
  for (std::int64_t n : {-1, 65536}) {
    o = {};
    o.int8_gemm_tokens = n;
    CHECK_THAT(what_of([&] { fkv::FusedKVMaterializer m(cfg, 1024, w, o); }),
               Catch::Contains("int8_gemm_tokens " + std::to_string(n) + " is outside [0, 65535]"));
  }
  w.w_kv_row_stride = 512;
  CHECK_THAT(what_of([&] { fkv::FusedKVMaterializer m(cfg, 1024, w); }),
             Catch::Contains("w_kv_row_stride is smaller than hidden_size"));
}

TEST_CASE("tensor parallelism and bias are checked before any GPU work") {
  const auto cfg = two_layers(8, 8);
  fkv::MaterializerWeights w;
  w.w_kv = {reinterpret_cast<const void*>(0x1000), reinterpret_cast<const void*>(0x2000)};
  fkv::MaterializerOptions o;
  o.tp_size = 3;  // 8 KV heads do not split over 3 ranks
  CHECK_THROWS_AS(fkv::FusedKVMaterializer(cfg, 1024, w, o), fkv::ConfigError);
  CHECK(what_of([&] {
          fkv::FusedKVMaterializer m(cfg, 1024, w, o);
        }).find("num_kv_heads=8 cannot be split across tp_size=3 ranks") == 0);
  o.tp_size = 2;
  o.tp_rank = 2;
  CHECK_THROWS_AS(fkv::FusedKVMaterializer(cfg, 1024, w, o), fkv::ArgumentError);
  CHECK(what_of([&] {
          fkv::FusedKVMaterializer m(cfg, 1024, w, o);
        }).find("tp_rank 2 is outside [0, tp_size=2)") != std::string::npos);
  o.tp_rank = 0;
  w.kv_bias = {std::vector<float>(2 * 4 * 128)};  // one bias for two layers
  CHECK(what_of([&] {
          fkv::FusedKVMaterializer m(cfg, 1024, w, o);
        }).find("kv_bias has 1 layers; give one bias per attention layer (2) or none") !=
        std::string::npos);
}

// cuBLASLt is found as NVRTC is: a folder given to set_cuda_library_dirs (the Python package
// passes the pip nvidia-* wheels' lib folders) comes before the system's. The folder here holds
// a symlink to the toolkit's library, a stand-in for a pip wheel's copy. This must be the first
// load of cuBLASLt in this process (no other test here loads it: they fail before any GPU work).
TEST_CASE("cuBLASLt is loaded through the CUDA library search, a pip folder first") {
  namespace fs = std::filesystem;
  const fs::path real = "/usr/local/cuda/lib64/libcublasLt.so." + std::to_string(CUBLAS_VER_MAJOR);
  if (!fs::exists(real)) {
    WARN("no " << real << " here; skipped");
    return;
  }
  fkv_test::TempDir pip("fkv-pip-nvidia");
  const fs::path link = pip.path / real.filename();
  fs::create_symlink(real, link);
  fkv::set_cuda_library_dirs({pip.path.string()});
  CHECK(fkv::cublaslt_library() == link.string());
  fkv::set_cuda_library_dirs({});
  CHECK(fkv::cublaslt_library() == link.string());  // loaded once per process
}
