// A tensor-parallel materializer case shared by the one-GPU test (test_engine_gpu.cpp: every
// rank in one process) and the two-GPU test (gpu2/rank_worker.cpp "tp": one process per GPU).
// Every process derives the same inputs from the seed, so ranks agree without exchanging data.
//
// The inputs are exact in the GEMM: hidden values are multiples of 1/8 in [-2, 2], weights
// multiples of 1/64 in [-1, 1], hidden = 256, so every partial sum is a multiple of 1/512 below
// 512 in magnitude: exact in fp32 whatever order cuBLASLt sums in. The projection of a rank is
// then bit-identical to the same columns of the TP=1 projection, and so are its K/V.
// No Catch2 here (used from the worker process).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "fkv/config.hpp"
#include "fkv/fused_kv_materializer.hpp"
#include "gpu/gpu_harness.hpp"

namespace fkv_test {

struct TpCase {
  int num_kv_heads = 8;
  int head_dim = 128;
  int layers = 3;
  std::int64_t hidden = 256;
  std::int64_t tokens = 37;
  std::int64_t max_position = 4096;
  bool bias = true;
  std::uint64_t seed = 1;

  std::string config_json() const {
    std::string layer = "{\"num_kv_heads\": " + std::to_string(num_kv_heads) +
                        ", \"head_dim\": " + std::to_string(head_dim) +
                        ", \"rotary_dim\": " + std::to_string(head_dim) +
                        ", \"is_neox_style\": true, \"k_norm\": \"rms\", \"eps\": 1e-6, "
                        "\"rope_theta\": 1000000}";
    std::string layers_text;
    for (int l = 0; l < layers; ++l) layers_text += (l ? ", " : "") + layer;
    return "{\"max_position_embeddings\": " + std::to_string(max_position) +
           ", \"fkv\": {\"layers\": [" + layers_text + "]}}";
  }
};

// Host inputs of the whole model (every head), bf16 bit patterns.
struct TpHost {
  std::vector<std::vector<std::uint8_t>> w_kv;  // [L] [2*H*D, hidden] bf16
  std::vector<std::vector<float>> k_norm;       // [L] [D]
  std::vector<std::vector<float>> bias;         // [L] [2*H*D] (empty without bias)
  std::vector<std::uint8_t> hidden;             // [T, hidden] bf16
  std::vector<std::int64_t> positions;          // [T]
};

inline void store_bf16_exact(double x, std::uint8_t* dst) { store_value(fkv::DType::BF16, x, dst); }

inline TpHost make_tp_host(const TpCase& c) {
  Rng rng(c.seed);
  TpHost h;
  const std::int64_t rows = 2LL * c.num_kv_heads * c.head_dim;
  for (int l = 0; l < c.layers; ++l) {
    std::vector<std::uint8_t> w(static_cast<std::size_t>(rows * c.hidden * 2));
    for (std::int64_t i = 0; i < rows * c.hidden; ++i)
      store_bf16_exact(static_cast<double>(rng.range(-64, 64)) / 64.0, w.data() + 2 * i);
    h.w_kv.push_back(std::move(w));
    std::vector<float> kn(static_cast<std::size_t>(c.head_dim));
    for (auto& x : kn) x = static_cast<float>(1.0 + 0.2 * rng.normal());
    h.k_norm.push_back(std::move(kn));
    if (c.bias) {
      std::vector<float> b(static_cast<std::size_t>(rows));
      for (auto& x : b) x = static_cast<float>(0.5 * rng.normal());
      h.bias.push_back(std::move(b));
    }
  }
  h.hidden.resize(static_cast<std::size_t>(c.tokens * c.hidden * 2));
  for (std::int64_t i = 0; i < c.tokens * c.hidden; ++i)
    store_bf16_exact(static_cast<double>(rng.range(-16, 16)) / 8.0, h.hidden.data() + 2 * i);
  for (std::int64_t t = 0; t < c.tokens; ++t)
    h.positions.push_back(rng.range(0, c.max_position - 1));
  return h;
}

struct TpResult {
  int first_head = 0, num_heads = 0;
  std::vector<std::uint8_t> k, v;  // stacked [L, T, num_heads, D] bf16
  std::vector<std::uint8_t> proj;  // [T, L * 2 * num_heads * D] bf16
};

// Materializes rank `rank` of `tp_size` on `device` (current context or the primary one):
// the rank's weight rows (K rows of its heads, then V rows of its heads) and bias slices.
inline TpResult run_tp_rank(const TpCase& c, const TpHost& h, int tp_size, int rank, int device) {
  fkv::ensure_context(device);
  const fkv::KVHeadShard shard = fkv::kv_head_shard(c.num_kv_heads, {tp_size, rank});
  const std::int64_t D = c.head_dim, H = c.num_kv_heads, n = shard.num_heads, f = shard.first_head;
  fkv::Stream stream;
  const CUstream s = stream.get();
  std::vector<fkv::DeviceBuffer> w_dev;
  fkv::MaterializerWeights w;
  for (int l = 0; l < c.layers; ++l) {
    std::vector<std::uint8_t> rows;
    const std::size_t row_bytes = static_cast<std::size_t>(c.hidden * 2);
    for (std::int64_t part = 0; part < 2; ++part)  // K rows, then V rows, of heads [f, f + n)
      rows.insert(
          rows.end(),
          h.w_kv[l].begin() + static_cast<std::ptrdiff_t>((part * H * D + f * D) * row_bytes),
          h.w_kv[l].begin() +
              static_cast<std::ptrdiff_t>((part * H * D + (f + n) * D) * row_bytes));
    w_dev.push_back(to_device(rows, s));
    w.w_kv.push_back(w_dev.back().ptr());
    w.k_norm.push_back(h.k_norm[l]);
    if (c.bias) {
      std::vector<float> b;
      for (std::int64_t part = 0; part < 2; ++part)
        b.insert(b.end(), h.bias[l].begin() + part * H * D + f * D,
                 h.bias[l].begin() + part * H * D + (f + n) * D);
      w.kv_bias.push_back(std::move(b));
    }
  }
  FKV_CU(cuStreamSynchronize, s);
  fkv::MaterializerOptions o;
  o.max_tokens = c.tokens;
  o.max_position = c.max_position;
  o.device = device;
  o.pool = false;
  o.tp_size = tp_size;
  o.tp_rank = rank;
  o.decode_crossover = 0;  // the cuBLASLt path: the result below includes projection()
  const fkv::ModelConfig config =
      fkv::ModelConfig::from_json(std::string_view(c.config_json()), "tp-case");
  fkv::FusedKVMaterializer m(config, c.hidden, w, o);

  const fkv::DeviceBuffer hidden = to_device(h.hidden, s);
  const std::vector<std::uint8_t> pos_bytes = index_bytes(fkv::IndexType::I64, h.positions);
  const fkv::DeviceBuffer positions = to_device(pos_bytes, s);
  const std::size_t out_bytes = static_cast<std::size_t>(c.layers * c.tokens * n * D * 2);
  fkv::DeviceBuffer k_out = alloc(out_bytes), v_out = alloc(out_bytes);
  poison(k_out, s);
  poison(v_out, s);
  void* k_ptr = k_out.ptr();
  void* v_ptr = v_out.ptr();
  fkv::MaterializerInput in{hidden.ptr(), c.tokens, 0, positions.ptr()};
  m.materialize_stacked(in, std::span<void* const>(&k_ptr, 1), std::span<void* const>(&v_ptr, 1),
                        s);
  TpResult r;
  r.first_head = static_cast<int>(f);
  r.num_heads = static_cast<int>(n);
  r.k = download(k_out, s);
  r.v = download(v_out, s);
  r.proj.resize(static_cast<std::size_t>(c.tokens * m.projection_width() * 2));
  FKV_CU(cuMemcpyDtoH, r.proj.data(), m.projection(), r.proj.size());
  if (m.take_error_flag(s) != 0)
    throw std::runtime_error("the materializer flagged a bad position or slot");
  return r;
}

// The first byte where rank `r`'s K or V differs from the same heads of the TP=1 result, as a
// message; empty when they are bit-identical.
inline std::string compare_shard(const TpCase& c, const TpResult& full, const TpResult& r) {
  const std::int64_t D = c.head_dim, H = c.num_kv_heads;
  for (int kind = 0; kind < 2; ++kind) {
    const auto& a = kind ? full.v : full.k;
    const auto& b = kind ? r.v : r.k;
    for (std::int64_t l = 0; l < c.layers; ++l)
      for (std::int64_t t = 0; t < c.tokens; ++t)
        for (std::int64_t j = 0; j < r.num_heads; ++j) {
          const std::size_t fa =
              static_cast<std::size_t>(((l * c.tokens + t) * H + r.first_head + j) * D * 2);
          const std::size_t fb =
              static_cast<std::size_t>(((l * c.tokens + t) * r.num_heads + j) * D * 2);
          for (std::size_t i = 0; i < static_cast<std::size_t>(D * 2); ++i)
            if (a[fa + i] != b[fb + i])
              return std::string(kind ? "v" : "k") + " differs at layer " + std::to_string(l) +
                     ", token " + std::to_string(t) + ", global head " +
                     std::to_string(r.first_head + j) + ", byte " + std::to_string(i);
        }
  }
  return {};
}

}  // namespace fkv_test
