// The CPU reference: number formats against known bit patterns and independent conversions,
// K norm and RoPE against hand-computed cases, and the comparison's tolerance rules.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "fkv/errors.hpp"
#include "reference.hpp"

using fkv::DType;
using fkv::round_to;
using fkv::to_double;

namespace {

std::uint32_t float_bits(float f) {
  std::uint32_t b;
  std::memcpy(&b, &f, 4);
  return b;
}

// bf16 RNE by the usual integer trick, an implementation independent of round_to's search.
std::uint32_t bf16_by_bit_trick(float f) {
  const std::uint32_t u = float_bits(f);
  return (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
}

fkv::KernelSpec small_spec(int heads, int dim, int rotary, bool neox, bool k_norm) {
  fkv::KernelSpec s;
  s.num_kv_heads = heads;
  s.head_dim = dim;
  s.rotary_dim = rotary;
  s.neox = neox;
  s.k_norm = k_norm ? fkv::KNormKind::Rms : fkv::KNormKind::None;
  s.act = DType::FP32;
  s.cache = DType::FP32;
  s.cos_sin = DType::FP32;
  s.positions = fkv::IndexType::I64;
  return s;
}

// Reference K of a single token, layer and head.
std::vector<double> k_of(const fkv::ReferenceInputs& in) { return fkv::reference_k(in).value; }

fkv::CompareOptions options(bool exact, std::span<const std::uint8_t> mask = {}) {
  fkv::CompareOptions o;
  o.exact = exact;
  o.token_mask = mask;
  return o;
}

}  // namespace

TEST_CASE("bf16 encodes and decodes known bit patterns", "[reference][format]") {
  CHECK(round_to(DType::BF16, 1.0) == 0x3f80);
  CHECK(round_to(DType::BF16, -2.0) == 0xc000);
  CHECK(round_to(DType::BF16, 0.0) == 0x0000);
  CHECK(round_to(DType::BF16, -0.0) == 0x8000);
  CHECK(to_double(DType::BF16, 0x3f80) == 1.0);
  CHECK(to_double(DType::BF16, 0x4049) == 3.140625);
  CHECK(std::isinf(to_double(DType::BF16, 0x7f80)));
  CHECK(std::isnan(to_double(DType::BF16, 0x7fc0)));
  CHECK(fkv::max_finite(DType::BF16) == Approx(3.3895313892515355e38).epsilon(1e-15));
  // Ties go to the even mantissa; anything above the tie rounds up.
  CHECK(round_to(DType::BF16, 1.0 + std::ldexp(1.0, -8)) == 0x3f80);
  CHECK(round_to(DType::BF16, 1.0 + 3 * std::ldexp(1.0, -8)) == 0x3f82);
  CHECK(round_to(DType::BF16, 1.0 + std::ldexp(1.0, -8) + std::ldexp(1.0, -30)) == 0x3f81);
  // IEEE overflow: past max + half an ulp is infinity.
  CHECK(round_to(DType::BF16, 1e39) == 0x7f80);
  CHECK(round_to(DType::BF16, -1e39) == 0xff80);
  CHECK((round_to(DType::BF16, std::numeric_limits<double>::quiet_NaN()) & 0x7fffu) == 0x7fc0);
}

TEST_CASE("bf16 rounding agrees with the integer RNE trick on random floats",
          "[reference][format]") {
  std::mt19937 rng(1234);
  std::uniform_int_distribution<std::uint32_t> bits;
  int checked = 0;
  for (int i = 0; i < 200000; ++i) {
    std::uint32_t u = bits(rng);
    float f;
    std::memcpy(&f, &u, 4);
    if (!std::isfinite(f) || std::fabs(f) > 3.38e38f) continue;
    REQUIRE(round_to(DType::BF16, f) == bf16_by_bit_trick(f));
    ++checked;
  }
  CHECK(checked > 150000);
}

TEST_CASE("fp16 encodes and decodes known bit patterns", "[reference][format]") {
  CHECK(round_to(DType::FP16, 1.0) == 0x3c00);
  CHECK(round_to(DType::FP16, -1.5) == 0xbe00);
  CHECK(round_to(DType::FP16, 1.0 / 3.0) == 0x3555);
  CHECK(round_to(DType::FP16, 65504.0) == 0x7bff);
  CHECK(round_to(DType::FP16, 65519.0) == 0x7bff);
  CHECK(round_to(DType::FP16, 65520.0) == 0x7c00);  // the tie with 2^16 goes to inf (even)
  CHECK(round_to(DType::FP16, std::ldexp(1.0, -24)) == 0x0001);      // smallest subnormal
  CHECK(round_to(DType::FP16, std::ldexp(1.0, -25)) == 0x0000);      // tie -> even (zero)
  CHECK(round_to(DType::FP16, 3 * std::ldexp(1.0, -26)) == 0x0001);  // above the tie
  CHECK(round_to(DType::FP16, 3 * std::ldexp(1.0, -25)) == 0x0002);  // tie 1|2 -> 2
  CHECK(round_to(DType::FP16, -0.0) == 0x8000);
  CHECK(to_double(DType::FP16, 0x3c00) == 1.0);
  CHECK(to_double(DType::FP16, 0x0400) == std::ldexp(1.0, -14));
  CHECK(to_double(DType::FP16, 0x03ff) == 1023 * std::ldexp(1.0, -24));
  CHECK(std::isinf(to_double(DType::FP16, 0xfc00)));
  CHECK(to_double(DType::FP16, 0xfc00) < 0);
  CHECK(std::isnan(to_double(DType::FP16, 0x7e00)));
  CHECK(fkv::max_finite(DType::FP16) == 65504.0);
}

#ifdef __FLT16_MAX__
TEST_CASE("fp16 rounding agrees with the compiler's _Float16 conversion", "[reference][format]") {
  std::mt19937_64 rng(99);
  std::uniform_real_distribution<double> mant(-1.0, 1.0);
  std::uniform_int_distribution<int> exp(-28, 17);
  for (int i = 0; i < 100000; ++i) {
    const double x = std::ldexp(mant(rng), exp(rng));
    const _Float16 h = static_cast<_Float16>(x);
    std::uint16_t hb;
    std::memcpy(&hb, &h, 2);
    REQUIRE(round_to(DType::FP16, x) == hb);
  }
}
#endif

TEST_CASE("fp8_activations: per-token and per-128-column scales, e4m3 of the fp32 quotient",
          "[reference][format]") {
  // Two bf16 rows of 256 columns (stride 260): row 0 holds 448 (scale 1: every value exact),
  // row 1 has amax 1 in its first 128 columns and 2 in the rest.
  const std::int64_t cols = 256, stride = 260;
  std::vector<std::uint8_t> x(2 * stride * 2, 0);
  auto put = [&](std::int64_t t, std::int64_t c, double v) {
    const auto b = static_cast<std::uint16_t>(fkv::round_to(fkv::DType::BF16, v));
    std::memcpy(x.data() + (t * stride + c) * 2, &b, 2);
  };
  put(0, 0, 448.0);
  put(0, 1, -3.0);
  put(0, 200, 0.5);
  put(1, 0, 1.0);
  put(1, 1, 0.3);  // bf16 0.30078125; times 448 is 134.75, which rounds to the e4m3 128
  put(1, 130, -2.0);
  put(1, 131, 0.3);
  const std::vector<double> per_token =
      fkv::fp8_activations(fkv::DType::BF16, x.data(), 2, cols, stride, 0);
  REQUIRE(per_token.size() == 2 * stride);
  CHECK(per_token[0] == 448.0);
  CHECK(per_token[1] == -3.0);
  CHECK(per_token[200] == 0.5);
  const double s2 = static_cast<float>(2.0f / 448.0f);  // row 1: amax 2
  CHECK(per_token[stride + 0] == 224.0 * s2);           // 1 / s2 = 224, exact in e4m3
  CHECK(per_token[stride + 130] == -448.0 * s2);
  CHECK(per_token[stride + 256] == 0.0);  // padding columns stay zero
  const std::vector<double> grouped =
      fkv::fp8_activations(fkv::DType::BF16, x.data(), 2, cols, stride, 128);
  const double s1 = static_cast<float>(1.0f / 448.0f);  // row 1, first group: amax 1
  CHECK(grouped[stride + 0] == 448.0 * s1);
  CHECK(grouped[stride + 1] == 128.0 * s1);
  CHECK(grouped[stride + 131] == 64.0 * s2);  // 0.30078125 * 224 = 67.375 -> 64 (spacing 8)
}

TEST_CASE("fp8 e4m3fn encodes, saturates and decodes", "[reference][format]") {
  CHECK(round_to(DType::FP8_E4M3, 1.0) == 0x38);
  CHECK(round_to(DType::FP8_E4M3, 0.5) == 0x30);
  CHECK(round_to(DType::FP8_E4M3, 448.0) == 0x7e);
  CHECK(round_to(DType::FP8_E4M3, -448.0) == 0xfe);
  CHECK(round_to(DType::FP8_E4M3, 480.0) == 0x7e);  // saturates, no inf in e4m3fn
  CHECK(round_to(DType::FP8_E4M3, 1e6) == 0x7e);
  CHECK(round_to(DType::FP8_E4M3, -1e6) == 0xfe);
  CHECK(round_to(DType::FP8_E4M3, std::numeric_limits<double>::infinity()) == 0x7e);
  CHECK(round_to(DType::FP8_E4M3, std::numeric_limits<double>::quiet_NaN()) == 0x7f);
  CHECK(round_to(DType::FP8_E4M3, 1.0625) == 0x38);               // tie 1.0|1.125 -> even
  CHECK(round_to(DType::FP8_E4M3, 1.1875) == 0x3a);               // tie 1.125|1.25 -> even
  CHECK(round_to(DType::FP8_E4M3, std::ldexp(1.0, -9)) == 0x01);  // smallest subnormal
  CHECK(round_to(DType::FP8_E4M3, std::ldexp(1.0, -11)) == 0x00);
  CHECK(to_double(DType::FP8_E4M3, 0x7e) == 448.0);
  CHECK(to_double(DType::FP8_E4M3, 0x08) == std::ldexp(1.0, -6));  // smallest normal
  CHECK(to_double(DType::FP8_E4M3, 0x78) == 256.0);                // exponent all ones is finite
  CHECK(std::isnan(to_double(DType::FP8_E4M3, 0x7f)));
  CHECK(std::isnan(to_double(DType::FP8_E4M3, 0xff)));
  CHECK(fkv::max_finite(DType::FP8_E4M3) == 448.0);
}

TEST_CASE("fp8 e5m2 encodes, saturates and decodes", "[reference][format]") {
  CHECK(round_to(DType::FP8_E5M2, 1.0) == 0x3c);
  CHECK(round_to(DType::FP8_E5M2, 57344.0) == 0x7b);
  CHECK(round_to(DType::FP8_E5M2, 61440.0) == 0x7b);  // past max saturates
  CHECK(round_to(DType::FP8_E5M2, -1e9) == 0xfb);
  CHECK(round_to(DType::FP8_E5M2, 1.125) == 0x3c);  // tie 1.0|1.25 -> even
  CHECK(round_to(DType::FP8_E5M2, 1.375) == 0x3e);  // tie 1.25|1.5 -> even
  CHECK(round_to(DType::FP8_E5M2, std::ldexp(1.0, -16)) == 0x01);
  CHECK((round_to(DType::FP8_E5M2, std::numeric_limits<double>::quiet_NaN()) & 0x7f) == 0x7f);
  CHECK(to_double(DType::FP8_E5M2, 0x7b) == 57344.0);
  CHECK(std::isinf(to_double(DType::FP8_E5M2, 0x7c)));
  CHECK(std::isnan(to_double(DType::FP8_E5M2, 0x7d)));
  CHECK(fkv::max_finite(DType::FP8_E5M2) == 57344.0);
}

TEST_CASE("every finite pattern round-trips", "[reference][format]") {
  for (DType t : {DType::BF16, DType::FP16, DType::FP8_E4M3, DType::FP8_E5M2}) {
    const std::uint32_t n = (t == DType::BF16 || t == DType::FP16) ? 0x10000u : 0x100u;
    for (std::uint32_t b = 0; b < n; ++b) {
      const double x = to_double(t, b);
      if (!std::isfinite(x)) continue;
      INFO("dtype " << static_cast<int>(t) << " bits 0x" << std::hex << b);
      REQUIRE(round_to(t, x) == b);
    }
  }
  CHECK(round_to(DType::FP32, 0.1) == float_bits(0.1f));
  CHECK(to_double(DType::FP32, float_bits(-2.5f)) == -2.5);
}

TEST_CASE("ulp is the spacing at a magnitude", "[reference][format]") {
  CHECK(fkv::ulp(DType::BF16, 1.0) == std::ldexp(1.0, -7));
  CHECK(fkv::ulp(DType::BF16, -1.99) == std::ldexp(1.0, -7));
  CHECK(fkv::ulp(DType::FP16, 1.0) == std::ldexp(1.0, -10));
  CHECK(fkv::ulp(DType::FP16, 0.0) == std::ldexp(1.0, -24));
  CHECK(fkv::ulp(DType::FP32, 4.0) == std::ldexp(1.0, -21));
  CHECK(fkv::ulp(DType::FP8_E4M3, 1.0) == 0.125);
  CHECK(fkv::ulp(DType::FP8_E4M3, 300.0) == 32.0);
  CHECK(fkv::ulp(DType::FP8_E5M2, 1.0) == 0.25);
  CHECK(fkv::ulp(DType::FP8_E5M2, 0.0) == std::ldexp(1.0, -16));
}

TEST_CASE("RoPE: neox and GPT-J pairs give different hand-computed results", "[reference][rope]") {
  // D = R = 4, one token at position 1. Row 0 holds values that would show a wrong row.
  const std::vector<float> proj = {1, 2, 3, 4, /*v*/ 5, 6, 7, 8};
  const std::vector<float> cos_sin = {9,    9, 9,     9,   // row 0
                                      0.5f, 0, 0.75f, 1};  // row 1: cos = [0.5, 0], sin = [0.75, 1]
  const std::int64_t position = 1;
  fkv::ReferenceInputs in;
  in.num_tokens = 1;
  in.num_layers = 1;
  in.proj = proj.data();
  in.positions = &position;
  in.cos_sin = cos_sin.data();
  in.max_position = 2;

  in.spec = small_spec(1, 4, 4, /*neox=*/true, false);
  // pairs (0,2): x1=1, x2=3, c=.5, s=.75; (1,3): x1=2, x2=4, c=0, s=1
  CHECK(k_of(in) == std::vector<double>{-1.75, -4, 2.25, 2});

  in.spec = small_spec(1, 4, 4, /*neox=*/false, false);
  // pairs (0,1): x1=1, x2=2, c=.5, s=.75; (2,3): x1=3, x2=4, c=0, s=1
  CHECK(k_of(in) == std::vector<double>{-1, 1.75, -4, 3});

  // V is the untouched second half of the row, for either style.
  CHECK(fkv::reference_v(in).value == std::vector<double>{5, 6, 7, 8});

  // Magnitudes bound the terms of each rotated sum.
  const fkv::ReferenceOutput out = fkv::reference_k(in);
  CHECK(out.magnitude == std::vector<double>{0.5 + 1.5, 1.0 + 0.75, 0 + 4, 0 + 3});
}

TEST_CASE("partial rotary passes the remaining dims through", "[reference][rope]") {
  // D = 8, R = 4: dims 4..7 unchanged; cos = [0, 0.5], sin = [1, 0.5] at position 0.
  const std::vector<float> proj = {1, 2, 3, 4, 10, 20, 30, 40, /*v*/ 0, 0, 0, 0, 0, 0, 0, 0};
  const std::vector<float> cos_sin = {0, 0.5f, 1, 0.5f};
  const std::int32_t position = 0;
  fkv::ReferenceInputs in;
  in.num_tokens = 1;
  in.num_layers = 1;
  in.proj = proj.data();
  in.positions = &position;
  in.cos_sin = cos_sin.data();
  in.max_position = 1;

  in.spec = small_spec(1, 8, 4, true, false);
  in.spec.positions = fkv::IndexType::I32;
  // neox pairs (0,2): 1*0 - 3*1 = -3, 3*0 + 1*1 = 1; (1,3): 2*.5 - 4*.5 = -1, 4*.5 + 2*.5 = 3
  CHECK(k_of(in) == std::vector<double>{-3, -1, 1, 3, 10, 20, 30, 40});

  in.spec.neox = false;
  // GPT-J pairs (0,1): 1*0 - 2*1 = -2, 2*0 + 1*1 = 1; (2,3): 3*.5 - 4*.5 = -.5, 4*.5 + 3*.5 = 3.5
  CHECK(k_of(in) == std::vector<double>{-2, 1, -0.5, 3.5, 10, 20, 30, 40});

  in.spec.rotary_dim = 0;  // NoPE: no cos/sin needed at all
  in.cos_sin = nullptr;
  CHECK(k_of(in) == std::vector<double>{1, 2, 3, 4, 10, 20, 30, 40});
}

TEST_CASE("K RMSNorm scales by rsqrt(mean(k^2) + eps) and the weight", "[reference][norm]") {
  const std::vector<float> proj = {1, -1, 1, -1, /*v*/ 1, 1, 1, 1};
  const std::vector<float> weight = {1, 2, 3, 4};
  std::vector<float> eps = {0.0f};
  fkv::ReferenceInputs in;
  in.spec = small_spec(1, 4, 0, true, true);
  in.num_tokens = 1;
  in.num_layers = 1;
  in.proj = proj.data();
  in.k_norm_weight = weight.data();
  in.eps = eps;
  CHECK(k_of(in) == std::vector<double>{1, -2, 3, -4});  // mean(k^2) = 1
  eps[0] = 3.0f;                                         // rsqrt(1 + 3) = 1/2
  CHECK(k_of(in) == std::vector<double>{0.5, -1, 1.5, -2});
  CHECK(fkv::reference_v(in).value == std::vector<double>{1, 1, 1, 1});  // V is never normed

  // Norm, then RoPE on the normed values (full rotary, neox, position 0).
  const std::vector<float> cos_sin = {0, 1, 1, 0};  // cos = [0, 1], sin = [1, 0]
  const std::int64_t position = 0;
  eps[0] = 0.0f;
  in.spec.rotary_dim = 4;
  in.positions = &position;
  in.cos_sin = cos_sin.data();
  in.max_position = 1;
  // normed [1,-2,3,-4]; (0,2): 1*0 - 3*1 = -3, 3*0 + 1*1 = 1; (1,3): -2*1 - 0 = -2, -4*1 + 0 = -4
  CHECK(k_of(in) == std::vector<double>{-3, -2, 1, -4});

  in.k_norm_weight = nullptr;
  CHECK_THROWS_AS(fkv::reference_k(in), fkv::ArgumentError);
}

TEST_CASE("layout: strides, heads, layers, index types, act dtypes", "[reference][layout]") {
  // T = 2, L = 2, H = 2, D = 4, padded strides; element value encodes its coordinates.
  const int T = 2, L = 2, H = 2, D = 4, KV = H * D;
  const std::int64_t stride_layer = 2 * KV + 3, stride_token = L * stride_layer + 5;
  std::vector<std::uint16_t> proj(static_cast<std::size_t>(T * stride_token),
                                  0xffff);  // NaN padding
  auto value = [](int t, int l, int kv, int h, int d) {
    return t * 16 + l * 8 + kv * 4 + h * 2 + d * 0.25;
  };
  for (int t = 0; t < T; ++t)
    for (int l = 0; l < L; ++l)
      for (int kv = 0; kv < 2; ++kv)
        for (int h = 0; h < H; ++h)
          for (int d = 0; d < D; ++d)
            proj[static_cast<std::size_t>(t * stride_token + l * stride_layer + kv * KV + h * D +
                                          d)] =
                static_cast<std::uint16_t>(round_to(DType::BF16, value(t, l, kv, h, d)));
  fkv::ReferenceInputs in;
  in.spec = small_spec(H, D, 0, true, false);
  in.spec.act = DType::BF16;
  in.spec.cache = DType::BF16;
  in.num_tokens = T;
  in.num_layers = L;
  in.proj = proj.data();
  in.proj_stride_token = stride_token;
  in.proj_stride_layer = stride_layer;
  const fkv::ReferenceOutput k = fkv::reference_k(in), v = fkv::reference_v(in);
  REQUIRE(k.value.size() == static_cast<std::size_t>(L * T * H * D));
  for (int l = 0; l < L; ++l)
    for (int t = 0; t < T; ++t)
      for (int h = 0; h < H; ++h)
        for (int d = 0; d < D; ++d) {
          CHECK(k.value[k.index(l, t, h, d)] ==
                to_double(DType::BF16, round_to(DType::BF16, value(t, l, 0, h, d))));
          CHECK(v.value[v.index(l, t, h, d)] ==
                to_double(DType::BF16, round_to(DType::BF16, value(t, l, 1, h, d))));
        }

  // int32 and int64 positions, fp32 and bf16 cos/sin give the same result for exact values.
  in.spec.rotary_dim = 4;
  const std::vector<float> cs32 = {1, 1, 0, 0, /*row 1*/ 0, 0.5f, 1, 0.5f};
  std::vector<std::uint16_t> cs16;
  for (float x : cs32) cs16.push_back(static_cast<std::uint16_t>(round_to(DType::BF16, x)));
  const std::int32_t pos32[2] = {1, 0};
  const std::int64_t pos64[2] = {1, 0};
  in.max_position = 2;
  in.spec.positions = fkv::IndexType::I32;
  in.positions = pos32;
  in.spec.cos_sin = DType::FP32;
  in.cos_sin = cs32.data();
  const auto a = fkv::reference_k(in).value;
  in.spec.positions = fkv::IndexType::I64;
  in.positions = pos64;
  in.spec.cos_sin = DType::BF16;
  in.cos_sin = cs16.data();
  const auto b = fkv::reference_k(in).value;
  CHECK(a == b);
  // Token 1 sits at position 0 (cos 1, sin 0): unchanged.
  const fkv::ReferenceOutput k2 = fkv::reference_k(in);
  CHECK(k2.value[k2.index(1, 1, 1, 3)] == k.value[k.index(1, 1, 1, 3)]);
  // Token 0 at position 1 is rotated.
  CHECK(k2.value[k2.index(0, 0, 0, 0)] != k.value[k.index(0, 0, 0, 0)]);

  const std::int64_t bad[2] = {1, 2};
  in.positions = bad;
  CHECK_THROWS_AS(fkv::reference_k(in), fkv::ArgumentError);
}

TEST_CASE("FP8 caches divide by the layer's scale", "[reference][fp8]") {
  const std::vector<float> proj = {1, 2, /*v*/ 3, 4, /*layer 1*/ 8, 16, 24, 32};
  const std::vector<float> k_scales = {2.0f, 4.0f}, v_scales = {0.5f, 8.0f};
  fkv::ReferenceInputs in;
  in.spec = small_spec(1, 2, 0, true, false);
  in.spec.cache = DType::FP8_E4M3;
  in.num_tokens = 1;
  in.num_layers = 2;
  in.proj = proj.data();
  in.k_scales = k_scales;
  in.v_scales = v_scales;
  CHECK(fkv::reference_k(in).value == std::vector<double>{0.5, 1, 2, 4});
  CHECK(fkv::reference_v(in).value == std::vector<double>{6, 8, 3, 4});
  in.spec.cache = DType::FP32;  // scales apply to FP8 caches only
  CHECK(fkv::reference_k(in).value == std::vector<double>{1, 2, 8, 16});
  const std::vector<float> short_scales = {1.0f};
  in.spec.cache = DType::FP8_E5M2;
  in.k_scales = short_scales;
  CHECK_THROWS_AS(fkv::reference_k(in), fkv::ArgumentError);
}

TEST_CASE("compare: one ulp passes, two fail, NaN never passes", "[reference][compare]") {
  fkv::ReferenceOutput ref;
  ref.num_layers = 1;
  ref.num_tokens = 2;
  ref.num_heads = 1;
  ref.head_dim = 4;
  ref.value = {1.0, -0.3, 2.5, 100.0, 0.001, 7.0, -7.0, 3.0};
  ref.magnitude = ref.value;
  for (double& m : ref.magnitude) m = std::fabs(m);
  std::vector<std::uint16_t> gpu;
  for (double x : ref.value) gpu.push_back(static_cast<std::uint16_t>(round_to(DType::BF16, x)));

  fkv::CompareResult r = fkv::compare(DType::BF16, gpu.data(), ref);
  CHECK(r.ok());
  CHECK(r.checked == 8);
  CHECK(r.max_ulp_error <= 0.5);

  gpu[2] += 1;  // one ulp off: fp32 compute may round the other way near a tie
  r = fkv::compare(DType::BF16, gpu.data(), ref);
  CHECK(r.ok());
  CHECK_FALSE(fkv::compare(DType::BF16, gpu.data(), ref, options(true)).ok());

  gpu[5] += 2;      // two ulps off
  gpu[7] = 0x7fc0;  // NaN
  r = fkv::compare(DType::BF16, gpu.data(), ref);
  CHECK(r.mismatches == 2);
  REQUIRE(r.first.size() == 2);
  CHECK(r.first[0].t == 1);
  CHECK(r.first[0].d == 1);
  CHECK(r.first[1].d == 3);
  CHECK(std::isnan(r.first[1].gpu));
  CHECK(r.summary("k").find("k[l=0,t=1,h=0,d=1]") != std::string::npos);

  // Token 1 masked out: only token 0 is checked.
  const std::uint8_t mask[2] = {1, 0};
  r = fkv::compare(DType::BF16, gpu.data(), ref, options(false, mask));
  CHECK(r.ok());
  CHECK(r.checked == 4);
  CHECK_FALSE(fkv::compare(DType::BF16, gpu.data(), ref, options(true, mask)).ok());

  // 0xffff poison is NaN in bf16, so an unwritten element is always caught.
  std::vector<std::uint16_t> poison(8, 0xffff);
  CHECK(fkv::compare(DType::BF16, poison.data(), ref).mismatches == 8);
}

TEST_CASE("compare: fp8 saturation and cancellation slack", "[reference][compare]") {
  fkv::ReferenceOutput ref;
  ref.num_layers = ref.num_tokens = ref.num_heads = 1;
  ref.head_dim = 3;
  ref.value = {500.0, -1e5, 1e-6};
  ref.magnitude = {500.0, 1e5, 4.0};  // the last came from a cancellation of terms of size ~4
  std::vector<std::uint8_t> gpu = {0x7e, 0xfe, 0x00};
  CHECK(fkv::compare(DType::FP8_E4M3, gpu.data(), ref).ok());
  gpu[0] = 0x7d;  // 416: one ulp below the saturated 448 still passes
  CHECK(fkv::compare(DType::FP8_E4M3, gpu.data(), ref).ok());
  gpu[0] = 0x7c;  // 384: two ulps
  CHECK_FALSE(fkv::compare(DType::FP8_E4M3, gpu.data(), ref).ok());
  gpu[0] = 0x7f;  // NaN
  CHECK_FALSE(fkv::compare(DType::FP8_E4M3, gpu.data(), ref).ok());

  // fp32: the slack for fp32 arithmetic is relative to the terms, not to the tiny result.
  fkv::ReferenceOutput r32 = ref;
  r32.value = {1.0, 1e-7, 0};
  r32.magnitude = {1.0, 2.0, 0};
  std::vector<float> g32 = {1.0f + 5e-6f, 1e-7f + 1e-5f, 0.0f};
  CHECK(fkv::compare(DType::FP32, g32.data(), r32).ok());
  g32[0] = 1.0f + 3e-5f;
  CHECK_FALSE(fkv::compare(DType::FP32, g32.data(), r32).ok());
}

TEST_CASE("K/V bias: added to k before the norm and to v", "[reference][bias]") {
  const std::vector<float> proj = {1, -1, 1, -1, /*v*/ 1, 2, 3, 4};
  const std::vector<float> bias = {1, 1, 1, 1, /*v*/ 0.5f, -0.5f, 0.25f, 0};
  const std::vector<float> weight = {1, 1, 1, 1};
  const std::vector<float> eps = {0.0f};
  fkv::ReferenceInputs in;
  in.spec = small_spec(1, 4, 0, true, true);
  in.spec.kv_bias = true;
  in.num_tokens = 1;
  in.num_layers = 1;
  in.proj = proj.data();
  in.k_norm_weight = weight.data();
  in.eps = eps;
  in.kv_bias = bias.data();
  // k + bias = [2, 0, 2, 0]: mean(k^2) = 2, so k / sqrt(2).
  const std::vector<double> k = k_of(in);
  REQUIRE(k.size() == 4);
  CHECK(k[0] == Approx(std::sqrt(2.0)).epsilon(1e-15));
  CHECK(k[1] == 0);
  CHECK(k[2] == Approx(std::sqrt(2.0)).epsilon(1e-15));
  CHECK(k[3] == 0);
  CHECK(fkv::reference_v(in).value == std::vector<double>{1.5, 1.5, 3.25, 4});
  in.kv_bias = nullptr;
  CHECK_THROWS_AS(fkv::reference_k(in), fkv::ArgumentError);
}

TEST_CASE("pool_offset follows the flat and paged layouts", "[reference][layout]") {
  const std::int64_t H = 2, D = 4;
  fkv::PoolLayout flat;
  CHECK(fkv::pool_offset(flat, H, D, 5, 1) == 5 * 8 + 4);
  fkv::PoolLayout vllm;  // [blocks, 16, H, D]
  vllm.block_size = 16;
  CHECK(fkv::pool_offset(vllm, H, D, 17, 1) == 1 * 16 * 8 + 1 * 8 + 4);
  fkv::PoolLayout nhd = vllm;  // FlashInfer [blocks, 2, 16, H, D]
  nhd.block_stride = 2 * 16 * 8;
  CHECK(fkv::pool_offset(nhd, H, D, 17, 1) == 256 + 8 + 4);
  fkv::PoolLayout hnd;  // FlashInfer [blocks, 2, H, 16, D]
  hnd.block_size = 16, hnd.slot_stride = D, hnd.head_stride = 16 * D,
  hnd.block_stride = 2 * H * 16 * D;
  CHECK(fkv::pool_offset(hnd, H, D, 17, 1) == 256 + 1 * 4 + 64);
  hnd.block_stride = 0;  // default: one block's extent, 15*4 + 1*64 + 4 = 128
  CHECK(fkv::pool_offset(hnd, H, D, 16, 0) == 128);
}

TEST_CASE("compare: a per-layer token mask", "[reference][compare]") {
  const std::vector<float> proj = {1, 2, /*v*/ 3, 4, /*t1*/ 5, 6, 7, 8};
  fkv::ReferenceInputs in;
  in.spec = small_spec(1, 2, 0, true, false);
  in.spec.act = in.spec.cache = fkv::DType::FP32;
  in.num_tokens = 2;
  in.num_layers = 1;
  in.proj = proj.data();
  const fkv::ReferenceOutput k = fkv::reference_k(in);
  std::vector<float> gpu = {1, 2, 99, 99};  // token 1 not written
  const std::vector<std::uint8_t> mask = {1, 0};
  fkv::CompareOptions o;
  o.exact = true;
  CHECK_FALSE(fkv::compare(fkv::DType::FP32, gpu.data(), k, o).ok());
  o.layer_token_mask = mask;
  CHECK(fkv::compare(fkv::DType::FP32, gpu.data(), k, o).ok());
  const std::vector<std::uint8_t> short_mask = {1};
  o.layer_token_mask = short_mask;
  CHECK_THROWS_AS(fkv::compare(fkv::DType::FP32, gpu.data(), k, o), fkv::ArgumentError);
}
