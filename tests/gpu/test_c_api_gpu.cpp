// The C API's materializer with quantized K/V weights on a GPU (fkv_materializer_create_v3,
// fkv_materializer_refresh_weights_v2), in every 8-bit format, on fresh random FP8 e4m3 bytes
// over the whole range (subnormals included) or INT8 values, with random scales:
//   - stacked calls on the decode path (T = 1 and 29) against a float64 reference of the
//     dequantized weights: the projection in float64, then fkv::reference_k / reference_v
//     (K within one unit in the last place plus 1e-5 of the magnitude of the terms the kernel
//     adds in fp32, the GEMM's products included; V the same);
//   - a call above the crossover (T = 100) with options.fp8_gemm = 0 and int8_gemm_tokens = 0
//     (dequantized slices + cuBLASLt): V against x times the dequantized weights rounded to bf16
//     as the dequantize kernel rounds them (one ulp of the bf16 result plus 1e-5 of sum |x w|);
//     and with the default options, for FP8 weights (the FP8 GEMM): V against x quantized as the
//     activation quantizer does (fkv::fp8_activations) times the exact dequantized weights (one
//     ulp plus 2^-12 of sum |x w|; K of this path is checked by test_decode_gpu against the
//     epilogue of the GPU's own projection), for INT8 weights (the INT8 GEMM): V against x times
//     the exact dequantized weights (one ulp plus 1e-4 of sum |x w|: x split into two int8 parts
//     keeps it within 2^-16 of each token's largest value; K as for the FP8 GEMM);
//     on the slices K against the reference of that projection rounded
//     to bf16 (one ulp plus 2^-6 of its magnitude: the GPU's fp32 sums may round to the bf16
//     value next to the reference's, one ulp of which is up to 2^-7 of it, in both elements of
//     a rotated pair, and the norm moves with them);
//   - a CUDA graph captured on the decode path, replayed after refresh_weights_v2 with new
//     weights and scales: the output is the new weights' (the buffers were refreshed in place).
// And fkv_kv_layout + fkv_materializer_write with dense weights: token_major pools (the defaults,
// and padded strides) hold the bytes of the per_layer write of the same call, on the decode path
// (T = 5) and above the crossover (T = 100), and nothing outside the written rows; the refusals
// (struct_size 0 or not a size, fields outside struct_size unread, an unknown kind, overlapping
// or per_layer-only fields) write nothing.
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
  fkv::WeightFormat format;
  std::vector<fkv::DeviceBuffer> d_q, d_scale;
  std::vector<const void*> w_kv;
  std::vector<const float*> scales;
  std::vector<double> w, w_rounded;  // [L * kRows, kHidden]
  std::vector<std::vector<float>> k_norm;
  std::vector<const float*> k_norm_ptr;

  QuantWeights(fkv::WeightFormat f, Rng& rng, CUstream stream) : format(f) {
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
// proj and abs_sum of the activations x ([T, kHidden] values) times w ([L * kRows, kHidden]).
void project_values(const std::vector<double>& x, std::int64_t T, const std::vector<double>& w,
                    std::vector<double>& proj, std::vector<double>& abs_sum) {
  const std::size_t N = static_cast<std::size_t>(kLayers * kRows), H = kHidden;
  proj.assign(static_cast<std::size_t>(T) * N, 0.0);
  abs_sum.assign(proj.size(), 0.0);
  for (std::int64_t t = 0; t < T; ++t) {
    const double* xr = x.data() + static_cast<std::size_t>(t) * H;
    for (std::size_t n = 0; n < N; ++n) {
      const double* wr = w.data() + n * H;
      double acc = 0, abs = 0;
      for (std::size_t k = 0; k < H; ++k) {
        acc += xr[k] * wr[k];
        abs += std::fabs(xr[k] * wr[k]);
      }
      proj[static_cast<std::size_t>(t) * N + n] = acc;
      abs_sum[static_cast<std::size_t>(t) * N + n] = abs;
    }
  }
}

// The same for the tokens' bf16 activations.
void project(const Tokens& tok, const std::vector<double>& w, std::vector<double>& proj,
             std::vector<double>& abs_sum) {
  std::vector<double> x(tok.x.size() / 2);
  for (std::size_t i = 0; i < x.size(); ++i) {
    std::uint32_t b = 0;
    std::memcpy(&b, tok.x.data() + 2 * i, 2);
    x[i] = fkv::to_double(DType::BF16, b);
  }
  project_values(x, tok.T, w, proj, abs_sum);
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

// A stacked call of T = 100 tokens above m's crossover, checked in float64 against x times the
// weights as the path reads them: dequantized slices (x times the dequantized weights rounded to
// bf16 as the dequantize kernel rounds them) or the FP8 GEMM (x quantized as its activation
// quantizer does, fkv::fp8_activations, times the exact dequantized weights; 2^-12 of sum |x w|
// for the FP8 tensor cores' accumulation between cuBLASLt's fp32 promotions) or the INT8 GEMM
// (x times the exact dequantized weights; 1e-4 of sum |x w| for the split activations). V
// against that projection unrounded (one ulp plus the slack); K, on the slices, against the
// epilogue of it rounded to bf16. The GEMMs' K is not checked here: their projection may round
// to another bf16 value than the float64 one's, and the norm and RoPE carry that step into K at
// the head's scale, beyond a per-element bound; test_decode_gpu checks it against the epilogue
// of the projection the GPU computed.
enum class Path { Slices, Fp8Gemm, Int8Gemm };

void check_above_crossover(fkv_materializer* m, const QuantWeights& qw, const Tokens& tok,
                           const std::vector<float>& cos_sin, Path path, CUstream stream) {
  const std::int64_t T = tok.T;
  const bool fp8_gemm = path == Path::Fp8Gemm;
  INFO((fp8_gemm                 ? "FP8 GEMM"
        : path == Path::Int8Gemm ? "INT8 GEMM"
                                 : "dequantized slices")
       << ", T=" << T);
  const Out out(T);
  out.poison_all(stream);
  REQUIRE(stacked(m, tok, out, stream) == FKV_OK);
  std::vector<double> proj, abs_sum;
  if (fp8_gemm) {
    const int group = qw.format == fkv::WeightFormat::Fp8Block ? 128 : 0;
    project_values(fkv::fp8_activations(DType::BF16, tok.x.data(), T, kHidden, kHidden, group), T,
                   qw.w, proj, abs_sum);
  } else {
    project(tok, path == Path::Int8Gemm ? qw.w : qw.w_rounded, proj, abs_sum);
  }
  std::vector<std::uint8_t> proj_bf16(proj.size() * 2);
  for (std::size_t i = 0; i < proj.size(); ++i) {
    const auto b = static_cast<std::uint16_t>(fkv::round_to(DType::BF16, proj[i]));
    std::memcpy(proj_bf16.data() + 2 * i, &b, 2);
  }
  Expected e = epilogue(qw, tok, cos_sin, DType::BF16, proj_bf16.data());
  if (path == Path::Slices) require_match(download(out.k, stream), e.k, "k", 0x1p-6);
  // V: the projection unrounded, with the GEMM's magnitudes.
  const std::int64_t KV = kHeads * kHeadDim, N = kLayers * kRows;
  for (std::int64_t t = 0; t < T; ++t)
    for (std::int64_t l = 0; l < kLayers; ++l)
      for (std::int64_t j = 0; j < KV; ++j) {
        const std::size_t src = static_cast<std::size_t>(t * N + l * kRows + KV + j);
        const std::size_t dst = e.v.index(l, t, j / kHeadDim, j % kHeadDim);
        e.v.value[dst] = proj[src];
        e.v.magnitude[dst] = abs_sum[src];
      }
  require_match(download(out.v, stream), e.v, "v",
                fp8_gemm                 ? 0x1p-12
                : path == Path::Int8Gemm ? 1e-4
                                         : 1e-5);
}

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
    o.fp8_gemm = 0;
    o.int8_gemm_tokens = 0;
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

    // Above the crossover: dequantized slices and cuBLASLt (fp8_gemm = 0, int8_gemm_tokens = 0
    // here).
    REQUIRE(fkv_materializer_fp8_gemm(m) == 0);
    REQUIRE(fkv_materializer_int8_gemm_tokens(m) == 0);
    check_above_crossover(m, qw, Tokens(100, rng, stream), cos_sin, Path::Slices, stream);
    // With the default options: cuBLASLt's FP8 GEMM over the stored bytes for FP8 weights, its
    // int8 GEMM for INT8 ones.
    {
      const bool int8 = f == fkv::WeightFormat::Int8Channel;
      fkv_materializer_options d;
      fkv_materializer_options_init(&d);
      d.max_tokens = 128;
      d.decode_crossover = kCrossover;
      d.pool = 0;
      fkv_materializer* g = nullptr;
      REQUIRE(fkv_materializer_create_v3(cfg, &cw, &quant, &d, &g) == FKV_OK);
      REQUIRE(fkv_materializer_fp8_gemm(g) == (int8 ? 0 : 1));
      REQUIRE(fkv_materializer_int8_gemm_tokens(g) == (int8 ? 128 : 0));
      check_above_crossover(g, qw, Tokens(100, rng, stream), cos_sin,
                            int8 ? Path::Int8Gemm : Path::Fp8Gemm, stream);
      fkv_materializer_free(g);
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

// ---- fkv_kv_layout + fkv_materializer_write (include/fkv/kv_layout.hpp) -----------------------

namespace {

constexpr std::int64_t kKV = kHeads * kHeadDim;                  // one (layer, k|v) row of a slot
constexpr std::size_t kSeg = static_cast<std::size_t>(kKV) * 2;  // its bytes (bf16)

// A poisoned token-major pool: row = slot, within it layer l's K at l * layer_stride and V
// kv_offset after it (0 = the defaults: [num_slots, L, 2, H, D] with no gaps).
struct TokenMajorPool {
  std::int64_t kv_offset, layer_stride, row, num_slots;
  fkv::DeviceBuffer buf;
  TokenMajorPool(std::int64_t slots, std::int64_t kv_off, std::int64_t layer, std::int64_t r,
                 CUstream stream)
      : kv_offset(kv_off ? kv_off : kKV),
        layer_stride(layer ? layer : 2 * kKV),
        row(r ? r : kLayers * layer_stride),
        num_slots(slots),
        buf(alloc(static_cast<std::size_t>(slots * row * 2))) {
    poison(buf, stream);
  }
  std::size_t at(std::int64_t slot, std::int64_t layer, int kv) const {
    return static_cast<std::size_t>((slot * row + layer * layer_stride + kv * kv_offset) * 2);
  }
};

// No bf16 element of bytes[begin, begin + n) is the poison (0xffff, a NaN): the row was written.
bool all_written(const std::vector<std::uint8_t>& bytes, std::size_t begin, std::size_t n) {
  for (std::size_t i = begin; i < begin + n; i += 2)
    if (bytes[i] == kPoison && bytes[i + 1] == kPoison) return false;
  return true;
}

}  // namespace

TEST_CASE("C API: fkv_materializer_write, token_major bytes equal the per_layer write's",
          "[kv_layout]") {
  require_gpu();
  Rng rng(run_seed("test_c_api_gpu"));
  fkv::Stream stream_owner;
  const CUstream stream = stream_owner.get();
  fkv_config* cfg = nullptr;
  const std::string json = config_json();
  REQUIRE(fkv_config_from_json(json.c_str(), "c-api-layout", &cfg) == FKV_OK);

  // Dense bf16 weights ~ N(0, 1 / hidden) and K-norm weights.
  std::vector<fkv::DeviceBuffer> d_w;
  std::vector<const void*> w_kv;
  std::vector<std::vector<float>> norm(kLayers, std::vector<float>(kHeadDim));
  std::vector<const float*> norm_ptr;
  for (int l = 0; l < kLayers; ++l) {
    d_w.push_back(to_device(random_values(DType::BF16, static_cast<std::size_t>(kRows * kHidden),
                                          1.0 / std::sqrt(double(kHidden)), rng),
                            stream));
    w_kv.push_back(d_w.back().ptr());
    for (float& x : norm[static_cast<std::size_t>(l)])
      x = static_cast<float>(1.0 + 0.25 * rng.normal());
    norm_ptr.push_back(norm[static_cast<std::size_t>(l)].data());
  }
  fkv_materializer_weights cw{};
  cw.hidden_size = kHidden;
  cw.num_layers = kLayers;
  cw.w_kv = w_kv.data();
  cw.k_norm = norm_ptr.data();
  fkv_materializer_options o;
  fkv_materializer_options_init(&o);
  o.max_tokens = 128;
  o.decode_crossover = kCrossover;
  fkv_materializer* m = nullptr;
  REQUIRE(fkv_materializer_create(cfg, &cw, &o, &m) == FKV_OK);
  REQUIRE(fkv_materializer_decode_crossover(m) == kCrossover);
  const std::int64_t num_slots = 160;

  // T = 5: the decode kernel; T = 100: cuBLASLt and the epilogue. One slot in 7 skipped (-1).
  for (std::int64_t T : {std::int64_t{5}, std::int64_t{100}}) {
    INFO("T=" << T);
    const Tokens tok(T, rng, stream);
    std::vector<std::int64_t> slot(static_cast<std::size_t>(num_slots));
    for (std::int64_t i = 0; i < num_slots; ++i) slot[static_cast<std::size_t>(i)] = i;
    for (std::int64_t i = num_slots - 1; i > 0; --i)
      std::swap(slot[static_cast<std::size_t>(i)], slot[static_cast<std::size_t>(rng.range(0, i))]);
    slot.resize(static_cast<std::size_t>(T));
    for (std::int64_t t = 0; t < T; t += 7) slot[static_cast<std::size_t>(t)] = -1;
    const fkv::DeviceBuffer d_slot = to_device(slot, stream);
    const fkv_materializer_input in{tok.d_x.ptr(), T, 0, tok.d_pos.ptr()};

    // The per-layer write through the same entry point: k[l], v[l] flat [num_slots, H*D].
    std::vector<fkv::DeviceBuffer> pk, pv;
    std::vector<void*> kp, vp;
    for (int l = 0; l < kLayers; ++l) {
      pk.push_back(alloc(static_cast<std::size_t>(num_slots) * kSeg));
      pv.push_back(alloc(static_cast<std::size_t>(num_slots) * kSeg));
      poison(pk.back(), stream);
      poison(pv.back(), stream);
      kp.push_back(pk.back().ptr());
      vp.push_back(pv.back().ptr());
    }
    fkv_kv_layout per;
    fkv_kv_layout_init(&per);
    per.cache_loc = d_slot.ptr();
    per.k_buffers = kp.data();
    per.v_buffers = vp.data();
    per.num_buffers = kLayers;
    per.num_slots = num_slots;
    REQUIRE(fkv_materializer_write(m, &in, &per, stream) == FKV_OK);

    // Token-major: the defaults ([num_slots, L, 2, H, D]), and padded strides (8 elements
    // between a layer's K and V, 16 after its V, 32 at the end of a row) that must stay poison.
    const TokenMajorPool tight(num_slots, 0, 0, 0, stream);
    const TokenMajorPool padded(num_slots, kKV + 8, 2 * kKV + 24, kLayers * (2 * kKV + 24) + 32,
                                stream);
    for (const TokenMajorPool* p : {&tight, &padded}) {
      fkv_kv_layout tm;
      fkv_kv_layout_init(&tm);
      tm.kind = p == &tight ? "token_major" : "token-major";
      tm.base = p->buf.ptr();
      tm.cache_loc = d_slot.ptr();
      tm.num_slots = num_slots;
      if (p == &padded) {
        tm.kv_offset = p->kv_offset;
        tm.layer_stride = p->layer_stride;
        tm.slot_stride = p->row;
      }
      REQUIRE(fkv_materializer_write(m, &in, &tm, stream) == FKV_OK);
    }

    std::vector<std::vector<std::uint8_t>> hk, hv;
    for (int l = 0; l < kLayers; ++l) {
      hk.push_back(download(pk[static_cast<std::size_t>(l)], stream));
      hv.push_back(download(pv[static_cast<std::size_t>(l)], stream));
    }
    for (const TokenMajorPool* p : {&tight, &padded}) {
      INFO((p == &tight ? "default strides" : "padded strides"));
      std::vector<std::uint8_t> host = download(p->buf, stream);
      for (std::int64_t t = 0; t < T; ++t) {
        const std::int64_t s = slot[static_cast<std::size_t>(t)];
        if (s < 0) continue;
        for (int l = 0; l < kLayers; ++l)
          for (int kv = 0; kv < 2; ++kv) {
            INFO("token " << t << " slot " << s << " layer " << l << (kv ? " v" : " k"));
            const auto& ref = (kv ? hv : hk)[static_cast<std::size_t>(l)];
            const std::size_t ro = static_cast<std::size_t>(s) * kSeg;
            REQUIRE(all_written(ref, ro, kSeg));
            CHECK(std::memcmp(host.data() + p->at(s, l, kv), ref.data() + ro, kSeg) == 0);
            std::memset(host.data() + p->at(s, l, kv), kPoison, kSeg);
          }
      }
      // Every byte outside the written (slot, layer, k|v) rows: still poison.
      const std::int64_t stray = first_unpoisoned(host, 0, host.size());
      INFO("first byte written outside the rows: " << stray);
      CHECK(stray == -1);
    }
    // The per-layer buffers: the rows of skipped tokens and unused slots stay poison.
    std::vector<char> used(static_cast<std::size_t>(num_slots), 0);
    for (std::int64_t s : slot)
      if (s >= 0) used[static_cast<std::size_t>(s)] = 1;
    for (int l = 0; l < kLayers; ++l)
      for (std::int64_t s = 0; s < num_slots; ++s)
        if (!used[static_cast<std::size_t>(s)]) {
          const std::size_t ro = static_cast<std::size_t>(s) * kSeg;
          CHECK(first_unpoisoned(hk[static_cast<std::size_t>(l)], ro, ro + kSeg) == -1);
          CHECK(first_unpoisoned(hv[static_cast<std::size_t>(l)], ro, ro + kSeg) == -1);
        }
  }

  // Refusals: FKV_ERR_ARGUMENT naming the problem, nothing launched (the pool stays poison).
  {
    const Tokens tok(8, rng, stream);
    std::vector<std::int64_t> slot{0, 1, 2, 3, 4, 5, 6, 7};
    const fkv::DeviceBuffer d_slot = to_device(slot, stream);
    const fkv_materializer_input in{tok.d_x.ptr(), 8, 0, tok.d_pos.ptr()};
    const TokenMajorPool p(16, 0, 0, 0, stream);
    fkv_kv_layout tm;
    auto reset = [&] {
      fkv_kv_layout_init(&tm);
      tm.kind = "token_major";
      tm.base = p.buf.ptr();
      tm.cache_loc = d_slot.ptr();
      tm.num_slots = p.num_slots;
    };
    auto refused = [&](const char* text) {
      const fkv_status s = fkv_materializer_write(m, &in, &tm, stream);
      INFO(fkv_last_error());
      CHECK(s == FKV_ERR_ARGUMENT);
      CHECK(std::string(fkv_last_error()).find(text) != std::string::npos);
    };
    reset();
    tm.struct_size = 0;  // never initialized
    refused("fkv_kv_layout.struct_size is 0: initialize it with fkv_kv_layout_init()");
    reset();
    tm.struct_size = 5000;  // not a size
    refused("fkv_kv_layout.struct_size is 5000");
    reset();
    tm.struct_size = offsetof(fkv_kv_layout, num_slots);  // an older header: num_slots unread
    refused("token_major layout: num_slots must be > 0, got 0");
    reset();
    tm.kind = "tokens_major";
    refused("unknown KV layout 'tokens_major': use per_layer (or flat, paged), token_major");
    reset();
    tm.kv_offset = kKV - kHeadDim;  // V's first head on K's last
    refused("the token_major layout overlaps itself: kv_offset 384");
    reset();
    tm.block_size = 4;
    refused("block_size and block_stride are for paged per_layer layouts");
    reset();
    tm.num_buffers = -1;
    refused("layout num_buffers must be >= 0");
    reset();
    tm.kind = "per_layer";  // base given to a per_layer layout
    refused("per_layer layout: base is for token_major layouts");
    CHECK(fkv_materializer_write(m, &in, nullptr, stream) == FKV_ERR_ARGUMENT);
    CHECK(std::string(fkv_last_error()).find("layout must not be NULL") != std::string::npos);
    const std::vector<std::uint8_t> before = download(p.buf, stream);
    CHECK(first_unpoisoned(before, 0, before.size()) == -1);  // no refused call wrote
    reset();
    REQUIRE(fkv_materializer_write(m, &in, &tm, stream) == FKV_OK);  // the same call, fixed
    std::vector<std::uint8_t> host = download(p.buf, stream);
    for (std::int64_t s = 0; s < 8; ++s)
      for (int l = 0; l < kLayers; ++l)
        for (int kv = 0; kv < 2; ++kv) {
          CHECK(all_written(host, p.at(s, l, kv), kSeg));
          std::memset(host.data() + p.at(s, l, kv), kPoison, kSeg);
        }
    CHECK(first_unpoisoned(host, 0, host.size()) == -1);
  }
  fkv_materializer_free(m);
  fkv_config_free(cfg);
}
