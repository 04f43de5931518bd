// The Qwen3-8B DFlash draft that decode_bench and quant_bench measure (hidden 4096, 5 layers,
// 8 KV heads, head_dim 128, rotary 128 neox theta 1e6, K RMSNorm eps 1e-6; packed W_kv
// 10240 x 4096), and what both need to build it: its config, its decode epilogue, a splitmix64
// for the data, bf16 bits and uploads.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <nlohmann/json.hpp>
#include <vector>

#include "fkv/config.hpp"
#include "fkv/driver.hpp"
#include "fkv/spec.hpp"

namespace fkv_bench {

inline constexpr int kHidden = 4096, kLayers = 5, kHeads = 8, kHeadDim = 128, kRotary = 128;
inline constexpr std::int64_t kMaxPos = 4096;
inline constexpr double kTheta = 1e6, kEps = 1e-6;
inline constexpr std::int64_t kKV = std::int64_t{kHeads} * kHeadDim;
inline constexpr std::int64_t kRows = std::int64_t{kLayers} * 2 * kKV;  // 10240

// The draft's config, as fkv::ModelConfig reads an explicit per-layer description.
inline fkv::ModelConfig draft_config() {
  const nlohmann::json layer = {{"num_kv_heads", kHeads},
                                {"head_dim", kHeadDim},
                                {"rotary_dim", kRotary},
                                {"is_neox_style", true},
                                {"rope_theta", kTheta},
                                {"k_norm", "rms"},
                                {"eps", kEps}};
  nlohmann::json doc = {{"hidden_size", kHidden},
                        {"max_position_embeddings", kMaxPos},
                        {"fkv", {{"layers", nlohmann::json::array()}}}};
  for (int l = 0; l < kLayers; ++l) doc["fkv"]["layers"].push_back(layer);
  return fkv::ModelConfig::from_json(doc, "qwen3-8b-dflash-draft");
}

// The epilogue the materializer gives its decode kernels for the draft (bf16, fp32 cos/sin,
// int64 indices) in `mode`.
inline fkv::KernelSpec draft_epilogue(fkv::OutputMode mode = fkv::OutputMode::Stacked) {
  fkv::KernelSpec e;
  e.num_kv_heads = kHeads;
  e.head_dim = kHeadDim;
  e.rotary_dim = kRotary;
  e.neox = true;
  e.k_norm = fkv::KNormKind::Rms;
  e.act = fkv::DType::BF16;
  e.cache = fkv::DType::BF16;
  e.cos_sin = fkv::DType::FP32;
  e.positions = e.slots = fkv::IndexType::I64;
  e.mode = mode;
  return e;
}

// splitmix64 for the bench data.
struct Rng {
  std::uint64_t s;
  std::uint64_t next() {
    std::uint64_t z = (s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  double normal() {  // sum of four uniforms, unit variance
    double u = 0;
    for (int i = 0; i < 4; ++i) u += double(next() >> 11) * 0x1.0p-53;
    return (u - 2.0) * 1.7320508075688772;
  }
};

inline std::uint16_t to_bf16(double x) {  // round to nearest even (finite inputs)
  const float f = static_cast<float>(x);
  std::uint32_t u;
  std::memcpy(&u, &f, 4);
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<std::uint16_t>(u >> 16);
}
inline double from_bf16(std::uint16_t h) {
  const std::uint32_t u = std::uint32_t(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// Max |a - b| over rows of head_dim elements, in bf16 ulps of the row's largest |b|; infinity
// when either holds a non-finite value (a row the call did not write stays NaN).
inline double ulp_disagreement(const std::vector<std::uint16_t>& a,
                               const std::vector<std::uint16_t>& b) {
  double worst = 0;
  for (std::size_t r = 0; r + kHeadDim <= a.size(); r += kHeadDim) {
    double top = 0, diff = 0;
    for (std::size_t e = r; e < r + kHeadDim; ++e) {
      const double x = from_bf16(a[e]), y = from_bf16(b[e]);
      if (!std::isfinite(x) || !std::isfinite(y)) return INFINITY;
      top = std::max(top, std::fabs(y));
      diff = std::max(diff, std::fabs(x - y));
    }
    const double ulp = top > 0 ? std::ldexp(1.0, std::ilogb(top) - 7) : 1.0;
    worst = std::max(worst, diff / ulp);
  }
  return worst;
}

// `host` in a new device buffer (at least 256 bytes), synchronized: the legacy-stream copy may
// still be in flight otherwise, and the timed streams do not wait for it.
template <class T>
fkv::DeviceBuffer upload(const std::vector<T>& host) {
  fkv::DeviceBuffer b(std::max<std::size_t>(host.size() * sizeof(T), 256));
  if (!host.empty()) FKV_CU(cuMemcpyHtoD, b.get(), host.data(), host.size() * sizeof(T));
  FKV_CU(cuCtxSynchronize);
  return b;
}

}  // namespace fkv_bench
