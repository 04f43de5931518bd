// The C API's materializer with quantized K/V weights on a GPU (fkv_materializer_create_v3,
// fkv_materializer_refresh_weights_v2), in every 8-bit format, on fresh random FP8 e4m3 bytes
// over the whole range (subnormals included) or INT8 values, with random scales:
//   - stacked calls on the decode path (T = 1 and 29) against a float64 reference of the
//     dequantized weights: the projection in float64, then fkv::reference_k / reference_v
//     (K within one unit in the last place plus 1e-5 of the magnitude of the terms the kernel
//     adds in fp32, the GEMM's products included; V the same);
//   - a call above the crossover (T = 100: dequantized slices + cuBLASLt): V against x times the
//     dequantized weights rounded to bf16 as the dequantize kernel rounds them (one ulp of the
//     bf16 result plus 1e-5 of sum |x w|); K against the reference of that projection rounded
//     to bf16 (one ulp plus 2^-6 of its magnitude: the GPU's fp32 sums may round to the bf16
//     value next to the reference's, one ulp of which is up to 2^-7 of it, in both elements of
//     a rotated pair, and the norm moves with them);
//   - a CUDA graph captured on the decode path, replayed after refresh_weights_v2 with new
//     weights and scales: the output is the new weights' (the buffers were refreshed in place).
// Outputs are poisoned (0xff: NaN in bf16) before every call. Environment: FKV_TEST_SEED.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "fkv/fkv.h"
#include "fkv/weights.hpp"
#include "gpu/gpu_harness.hpp"
#include "gpu/gpu_test.hpp"
#include "reference.hpp"

using fkv::DType;
using namespace fkv_test;

namespace {

constexpr int kLayers = 2, kHeads = 4, kHeadDim = 128, kHidden = 1024, kMaxPos = 4096;
constexpr std::int64_t kRows = 2 * kHeads * kHeadDim;  // K/V rows per layer
constexpr std::int64_t kCrossover = 64;

std::string config_json() {
  std::string layers;
  for (int l = 0; l < kLayers; ++l)
    layers += std::string(l ? ", " : "") + "{\"num_kv_heads\": " + std::to_string(kHeads) +
              ", \"head_dim\": " + std::to_string(kHeadDim) +
              ", \"rotary_dim\": " + std::to_string(kHeadDim) +
              ", \"is_neox_style\": true, \"rope_theta\": 1000000, \"k_norm\": \"rms\", "
              "\"eps\": 1e-6}";
  return "{\"hidden_size\": " + std::to_string(kHidden) +
         ", \"max_position_embeddings\": " + std::to_string(kMaxPos) + ", \"fkv\": {\"layers\": [" +
         layers + "]}}";
}

// One set of quantized weights: the bytes and scales on the device, the exact values
// w = q * scale and the values the dequantize kernel makes (bf16 of fp32 q * scale) on the host.
struct QuantWeights {
  std::vector<fkv::DeviceBuffer> d_q, d_scale;
  std::vector<const void*> w_kv;
  std::vector<const float*> scales;
  std::vector<double> w, w_rounded;  // [L * kRows, kHidden]
  std::vector<std::vector<float>> k_norm;
  std::vector<const float*> k_norm_ptr;

  QuantWeights(fkv::WeightFormat f, Rng& rng, CUstream stream) {
    const bool fp8 = f != fkv::WeightFormat::Int8Channel;
    const std::int64_t per = fkv::layer_scale_count(f, kRows, kHidden);
    const std::int64_t col_blocks = (kHidden + fkv::kWeightBlock - 1) / fkv::kWeightBlock;
    const double base = 1.0 / (40.0 * std::sqrt(double(kHidden)));  // W ~ N(0, 1 / hidden)
    for (int l = 0; l < kLayers; ++l) {
      std::vector<std::uint8_t> q(static_cast<std::size_t>(kRows * kHidden));
      std::vector<float> s(static_cast<std::size_t>(per));
      for (float& x : s) x = static_cast<float>(base * (0.5 + rng.uniform()));
      for (std::int64_t r = 0; r < kRows; ++r)
        for (std::int64_t c = 0; c < kHidden; ++c) {
          const std::size_t i = static_cast<std::size_t>(r * kHidden + c);
          double qv = 0;
          if (fp8) {  // mostly normal values up to +-448, one in ten subnormal
            q[i] = static_cast<std::uint8_t>(
                fkv::round_to(DType::FP8_E4M3, rng.normal() * (rng.coin(0.1) ? 0.004 : 40.0)));
            if ((q[i] & 0x7f) == 0x7f) q[i] &= 0xfe;  // never NaN
            qv = fkv::to_double(DType::FP8_E4M3, q[i]);
          } else {
            const auto v = static_cast<std::int8_t>(
                std::clamp<double>(std::nearbyint(rng.normal() * 40.0), -128.0, 127.0));
            std::memcpy(&q[i], &v, 1);
            qv = v;
          }
          std::size_t si = 0;  // fp8_tensor: the layer's one scale
          if (fkv::scale_layout(f) == fkv::ScaleLayout::PerRow) si = static_cast<std::size_t>(r);
          if (fkv::scale_layout(f) == fkv::ScaleLayout::Block128)
            si = static_cast<std::size_t>((r / 128) * col_blocks + c / 128);
          w.push_back(qv * double(s[si]));
          const float product = static_cast<float>(qv) * s[si];  // as the dequantize kernel
          w_rounded.push_back(fkv::to_double(DType::BF16, fkv::round_to(DType::BF16, product)));
        }
      d_q.push_back(to_device(q, stream));
      d_scale.push_back(to_device(s, stream));
      std::vector<float> norm(kHeadDim);
      for (float& x : norm) x = static_cast<float>(1.0 + 0.25 * rng.normal());
      k_norm.push_back(norm);
    }
    for (int l = 0; l < kLayers; ++l) {
      w_kv.push_back(d_q[static_cast<std::size_t>(l)].ptr());
      scales.push_back(static_cast<const float*>(d_scale[static_cast<std::size_t>(l)].ptr()));
      k_norm_ptr.push_back(k_norm[static_cast<std::size_t>(l)].data());
    }
    FKV_CU(cuStreamSynchronize, stream);
  }

  fkv_materializer_weights c_weights() const {
    fkv_materializer_weights cw{};
    cw.hidden_size = kHidden;
    cw.num_layers = kLayers;
    cw.w_kv = w_kv.data();
    cw.k_norm = k_norm_ptr.data();
    return cw;
  }
  fkv_weight_quant c_quant(const char* format) const {
    fkv_weight_quant q;
    fkv_weight_quant_init(&q);
    q.format = format;
    q.scales = scales.data();
    return q;
  }
};

// T tokens: hidden states [T, hidden] bf16 and positions, on the host and the device.
struct Tokens {
  std::int64_t T;
  std::vector<std::uint8_t> x;
  std::vector<std::int64_t> pos;
  fkv::DeviceBuffer d_x, d_pos;
  Tokens(std::int64_t t, Rng& rng, CUstream stream) : T(t) {
    x = random_values(DType::BF16, static_cast<std::size_t>(T * kHidden), 1.0, rng);
    for (std::int64_t i = 0; i < T; ++i) pos.push_back(rng.range(0, kMaxPos - 1));
    d_x = to_device(x, stream);
    d_pos = to_device(pos, stream);
  }
};

// x times w ([L * kRows, hidden]) in float64: proj [T, L * kRows] and the sums of |products|.
void project(const Tokens& tok, const std::vector<double>& w, std::vector<double>& proj,
             std::vector<double>& abs_sum) {
  const std::size_t N = static_cast<std::size_t>(kLayers * kRows);
  proj.assign(static_cast<std::size_t>(tok.T) * N, 0.0);
  abs_sum.assign(proj.size(), 0.0);
  std::vector<double> x(static_cast<std::size_t>(kHidden));
  for (std::int64_t t = 0; t < tok.T; ++t) {
    for (std::size_t k = 0; k < x.size(); ++k) {
      std::uint32_t b = 0;
      std::memcpy(&b, tok.x.data() + (static_cast<std::size_t>(t * kHidden) + k) * 2, 2);
      x[k] = fkv::to_double(DType::BF16, b);
    }
    for (std::size_t n = 0; n < N; ++n) {
      const double* wr = w.data() + n * static_cast<std::size_t>(kHidden);
      double acc = 0, abs = 0;
      for (std::size_t k = 0; k < x.size(); ++k) {
        acc += x[k] * wr[k];
        abs += std::fabs(x[k] * wr[k]);
      }
      proj[static_cast<std::size_t>(t) * N + n] = acc;
      abs_sum[static_cast<std::size_t>(t) * N + n] = abs;
    }
  }
}

// The materializer's cos/sin table (fp32, built from the config as fkv_plan_cos_sin builds it).
std::vector<float> cos_sin_table(const fkv_config* cfg) {
  fkv_plan* plan = nullptr;
  REQUIRE(fkv_plan_create(cfg, 0, &plan) == FKV_OK);
  std::vector<float> table(static_cast<std::size_t>(kMaxPos * kHeadDim));
  const fkv_status s = fkv_plan_cos_sin(plan, 0, kMaxPos, FKV_DTYPE_FP32, table.data(),
                                        table.size() * sizeof(float), nullptr);
  fkv_plan_free(plan);
  REQUIRE(s == FKV_OK);
  return table;
}

struct Expected {
  fkv::ReferenceOutput k, v;
};

// The reference epilogue of `proj` ([T, L * kRows] in `act`: FP32 for the decode path, which
// never rounds the projection; BF16 for the cuBLASLt path).
Expected epilogue(const QuantWeights& qw, const Tokens& tok, const std::vector<float>& cos_sin,
                  DType act, const void* proj) {
  fkv::ReferenceInputs in;
  in.spec.num_kv_heads = kHeads;
  in.spec.head_dim = kHeadDim;
  in.spec.rotary_dim = kHeadDim;
  in.spec.neox = true;
  in.spec.k_norm = fkv::KNormKind::Rms;
  in.spec.act = act;
  in.spec.cache = act;
  in.spec.cos_sin = DType::FP32;
  in.spec.positions = fkv::IndexType::I64;
  in.num_tokens = tok.T;
  in.num_layers = kLayers;
  in.proj = proj;
  in.positions = tok.pos.data();
  in.cos_sin = cos_sin.data();
  in.max_position = kMaxPos;
  std::vector<float> norms;
  for (const auto& n : qw.k_norm) norms.insert(norms.end(), n.begin(), n.end());
  in.k_norm_weight = norms.data();
  return {fkv::reference_k(in), fkv::reference_v(in)};
}

// The decode path's expected K and V: the epilogue of the unrounded float64 projection, with
// magnitudes that include the GEMM's products (|x w| summed, through the norm scale and RoPE).
Expected expect_decode(const QuantWeights& qw, const Tokens& tok,
                       const std::vector<float>& cos_sin) {
  std::vector<double> proj, abs_sum;
  project(tok, qw.w, proj, abs_sum);
  std::vector<float> proj32(proj.begin(), proj.end());
  Expected e = epilogue(qw, tok, cos_sin, DType::FP32, proj32.data());
  const std::int64_t KV = kHeads * kHeadDim, half = kHeadDim / 2, N = kLayers * kRows;
  for (std::int64_t t = 0; t < tok.T; ++t)
    for (std::int64_t l = 0; l < kLayers; ++l)
      for (std::int64_t h = 0; h < kHeads; ++h) {
        const std::size_t kb = static_cast<std::size_t>(t * N + l * kRows + h * kHeadDim);
        double ss = 0;
        for (std::int64_t d = 0; d < kHeadDim; ++d) ss += proj[kb + d] * proj[kb + d];
        const double inv = 1.0 / std::sqrt(ss / kHeadDim + 1e-6);
        const auto& wn = qw.k_norm[static_cast<std::size_t>(l)];
        auto a = [&](std::int64_t d) {
          return abs_sum[kb + static_cast<std::size_t>(d)] * inv *
                 std::fabs(wn[static_cast<std::size_t>(d)]);
        };
        const std::int64_t p = tok.pos[static_cast<std::size_t>(t)];
        for (std::int64_t d = 0; d < kHeadDim; ++d) {
          const std::int64_t i = d < half ? d : d - half, partner = d < half ? d + half : d - half;
          const double c = std::fabs(cos_sin[static_cast<std::size_t>(p * kHeadDim + i)]);
          const double s = std::fabs(cos_sin[static_cast<std::size_t>(p * kHeadDim + half + i)]);
          e.k.magnitude[e.k.index(l, t, h, d)] += a(d) * c + a(partner) * s;
          e.v.magnitude[e.v.index(l, t, h, d)] += abs_sum[kb + static_cast<std::size_t>(KV + d)];
        }
      }
  return e;
}

void require_match(const std::vector<std::uint8_t>& gpu, const fkv::ReferenceOutput& ref,
                   const std::string& what, double fp32_slack = 1e-5) {
  fkv::CompareOptions o;
  o.fp32_slack = fp32_slack;
  const fkv::CompareResult r = fkv::compare(DType::BF16, gpu.data(), ref, o);
  INFO(r.summary(what));
  REQUIRE(r.checked == kLayers * ref.num_tokens * kHeads * kHeadDim);
  REQUIRE(r.ok());
}

// Stacked K and V buffers [L, T, H, D] bf16 of one call.
struct Out {
  fkv::DeviceBuffer k, v;
  void* kp;
  void* vp;
  explicit Out(std::int64_t T)
      : k(alloc(static_cast<std::size_t>(kLayers * T * kHeads * kHeadDim * 2))),
        v(alloc(k.size())),
        kp(k.ptr()),
        vp(v.ptr()) {}
  void poison_all(CUstream s) const {
    poison(k, s);
    poison(v, s);
  }
};

fkv_status stacked(fkv_materializer* m, const Tokens& tok, const Out& out, CUstream stream) {
  fkv_materializer_input in{tok.d_x.ptr(), tok.T, 0, tok.d_pos.ptr()};
  return fkv_materializer_stacked(m, &in, &out.kp, &out.vp, 1, stream);
}

}  // namespace

TEST_CASE("C API: quantized weights, create_v3 + stacked vs float64, refresh_weights_v2 + replay") {
  require_gpu();
  Rng rng(run_seed("test_c_api_gpu"));
  fkv::Stream stream_owner;
  const CUstream stream = stream_owner.get();
  fkv_config* cfg = nullptr;
  const std::string json = config_json();
  REQUIRE(fkv_config_from_json(json.c_str(), "c-api-quant", &cfg) == FKV_OK);
  const std::vector<float> cos_sin = cos_sin_table(cfg);

  for (const char* name : {"fp8_tensor", "fp8_channel", "fp8_block", "int8_channel"}) {
    INFO(name);
    const fkv::WeightFormat f = fkv::parse_weight_format(name);
    QuantWeights qw(f, rng, stream);
    const fkv_materializer_weights cw = qw.c_weights();
    const fkv_weight_quant quant = qw.c_quant(name);
    fkv_materializer_options o;
    fkv_materializer_options_init(&o);
    o.max_tokens = 128;
    o.decode_crossover = kCrossover;
    o.pool = 0;
    fkv_materializer* m = nullptr;
    REQUIRE(fkv_materializer_create_v3(cfg, &cw, &quant, &o, &m) == FKV_OK);
    REQUIRE(std::string(fkv_materializer_weight_format(m)) == name);
    REQUIRE(fkv_materializer_decode_crossover(m) == kCrossover);
    // Refreshing with another format, or as dense, is refused and copies nothing.
    const fkv_weight_quant other =
        qw.c_quant(f == fkv::WeightFormat::Fp8Block ? "fp8" : "fp8_block");
    CHECK(fkv_materializer_refresh_weights_v2(m, &cw, &other, stream) == FKV_ERR_ARGUMENT);
    CHECK(fkv_materializer_refresh_weights(m, &cw, stream) == FKV_ERR_ARGUMENT);

    // The decode path.
    for (std::int64_t T : {1, 29}) {
      INFO("decode path, T=" << T);
      const Tokens tok(T, rng, stream);
      const Out out(T);
      out.poison_all(stream);
      REQUIRE(stacked(m, tok, out, stream) == FKV_OK);
      const Expected e = expect_decode(qw, tok, cos_sin);
      require_match(download(out.k, stream), e.k, "k");
      require_match(download(out.v, stream), e.v, "v");
    }

    // Above the crossover: dequantized slices and cuBLASLt, the projection rounded to bf16.
    {
      const std::int64_t T = 100;
      INFO("cuBLASLt path, T=" << T);
      const Tokens tok(T, rng, stream);
      const Out out(T);
      out.poison_all(stream);
      REQUIRE(stacked(m, tok, out, stream) == FKV_OK);
      std::vector<double> proj, abs_sum;
      project(tok, qw.w_rounded, proj, abs_sum);
      std::vector<std::uint8_t> proj_bf16(proj.size() * 2);
      for (std::size_t i = 0; i < proj.size(); ++i) {
        const auto b = static_cast<std::uint16_t>(fkv::round_to(DType::BF16, proj[i]));
        std::memcpy(proj_bf16.data() + 2 * i, &b, 2);
      }
      Expected e = epilogue(qw, tok, cos_sin, DType::BF16, proj_bf16.data());
      require_match(download(out.k, stream), e.k, "k", 0x1p-6);
      // V: x times the rounded dequantized weights, unrounded, with the GEMM's magnitudes.
      const std::int64_t KV = kHeads * kHeadDim, N = kLayers * kRows;
      for (std::int64_t t = 0; t < T; ++t)
        for (std::int64_t l = 0; l < kLayers; ++l)
          for (std::int64_t j = 0; j < KV; ++j) {
            const std::size_t src = static_cast<std::size_t>(t * N + l * kRows + KV + j);
            const std::size_t dst = e.v.index(l, t, j / kHeadDim, j % kHeadDim);
            e.v.value[dst] = proj[src];
            e.v.magnitude[dst] = abs_sum[src];
          }
      require_match(download(out.v, stream), e.v, "v");
    }

    // A graph captured on the decode path, replayed after refresh_weights_v2.
    const std::int64_t T = 17;
    const Tokens tok(T, rng, stream);
    const Out out(T);
    FKV_CU(cuStreamSynchronize, stream);
    FKV_CU(cuStreamBeginCapture, stream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL);
    const fkv_status captured = stacked(m, tok, out, stream);
    CUgraph graph = nullptr;
    FKV_CU(cuStreamEndCapture, stream, &graph);
    REQUIRE(captured == FKV_OK);
    GraphExec exec(graph);
    out.poison_all(stream);
    exec.launch(stream);
    Expected e = expect_decode(qw, tok, cos_sin);
    require_match(download(out.k, stream), e.k, "k before refresh");
    require_match(download(out.v, stream), e.v, "v before refresh");
    const QuantWeights next(f, rng, stream);
    const fkv_materializer_weights ncw = next.c_weights();
    const fkv_weight_quant nquant = next.c_quant(name);
    REQUIRE(fkv_materializer_refresh_weights_v2(m, &ncw, &nquant, stream) == FKV_OK);
    out.poison_all(stream);
    exec.launch(stream);
    e = expect_decode(next, tok, cos_sin);
    require_match(download(out.k, stream), e.k, "k after refresh");
    require_match(download(out.v, stream), e.v, "v after refresh");
    FKV_CU(cuStreamSynchronize, stream);
    fkv_materializer_free(m);
  }
  fkv_config_free(cfg);
}
