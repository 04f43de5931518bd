// reference: float64 CPU reference of the fused KV kernel (see reference.hpp).
//
// The number formats are implemented from their definitions (sign, exponent, mantissa, bias)
// and encoded by searching the ordered table of decoded values, not with the bit tricks the
// kernel uses, so that a shared mistake is unlikely.
#include "reference.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <sstream>
#include <thread>

#include "fkv/errors.hpp"

namespace fkv {
namespace {

struct Format {
  int ebits;
  int mbits;
  int bias;
  bool has_inf;            // IEEE specials: exponent all ones = inf (m == 0) or NaN
  bool saturate;           // FP8: overflow saturates to max finite instead of inf
  std::uint32_t max_bits;  // largest finite value, without sign
  std::uint32_t nan_bits;  // canonical NaN, without sign
  int total_bits() const { return 1 + ebits + mbits; }
};

constexpr Format kBf16{8, 7, 127, true, false, 0x7f7f, 0x7fc0};
constexpr Format kFp16{5, 10, 15, true, false, 0x7bff, 0x7e00};
constexpr Format kE4m3{4, 3, 7, false, true, 0x7e, 0x7f};  // "fn": S.1111.111 is NaN
constexpr Format kE5m2{5, 2, 15, true, true, 0x7b, 0x7f};

const Format& format_of(DType dtype) {
  switch (dtype) {
    case DType::BF16:
      return kBf16;
    case DType::FP16:
      return kFp16;
    case DType::FP8_E4M3:
      return kE4m3;
    case DType::FP8_E5M2:
      return kE5m2;
    case DType::FP32:
      break;
  }
  throw ArgumentError("reference: no narrow format table for fp32");
}

double decode_format(const Format& f, std::uint32_t bits) {
  const std::uint32_t emask = (1u << f.ebits) - 1;
  const std::uint32_t mmask = (1u << f.mbits) - 1;
  const bool negative = (bits >> (f.ebits + f.mbits)) & 1u;
  const std::uint32_t e = (bits >> f.mbits) & emask;
  const std::uint32_t m = bits & mmask;
  double value;
  if (f.has_inf && e == emask) {
    value =
        m == 0 ? std::numeric_limits<double>::infinity() : std::numeric_limits<double>::quiet_NaN();
  } else if (!f.has_inf && e == emask && m == mmask) {
    value = std::numeric_limits<double>::quiet_NaN();
  } else if (e == 0) {
    value = std::ldexp(static_cast<double>(m), 1 - f.bias - f.mbits);
  } else {
    value = std::ldexp(static_cast<double>(m + (1u << f.mbits)),
                       static_cast<int>(e) - f.bias - f.mbits);
  }
  return negative ? -value : value;
}

// All values of a narrow format, indexed by bit pattern (built once).
const std::vector<double>& table_of(DType dtype) {
  auto build = [](DType t) {
    const Format& f = format_of(t);
    std::vector<double> values(std::size_t{1} << f.total_bits());
    for (std::uint32_t b = 0; b < values.size(); ++b) values[b] = decode_format(f, b);
    return values;
  };
  static const std::vector<double> bf16 = build(DType::BF16);
  static const std::vector<double> fp16 = build(DType::FP16);
  static const std::vector<double> e4m3 = build(DType::FP8_E4M3);
  static const std::vector<double> e5m2 = build(DType::FP8_E5M2);
  switch (dtype) {
    case DType::BF16:
      return bf16;
    case DType::FP16:
      return fp16;
    case DType::FP8_E4M3:
      return e4m3;
    default:
      return e5m2;
  }
}

std::uint32_t load_bits(const void* base, DType dtype, std::int64_t index) {
  const auto* p = static_cast<const unsigned char*>(base) + index * dtype_size(dtype);
  switch (dtype_size(dtype)) {
    case 1:
      return *p;
    case 2: {
      std::uint16_t v;
      std::memcpy(&v, p, 2);
      return v;
    }
    default: {
      std::uint32_t v;
      std::memcpy(&v, p, 4);
      return v;
    }
  }
}

double load_value(const void* base, DType dtype, std::int64_t index) {
  return to_double(dtype, load_bits(base, dtype, index));
}

std::int64_t load_index(const void* base, IndexType type, std::int64_t t) {
  if (type == IndexType::I32) {
    std::int32_t v;
    std::memcpy(&v, static_cast<const char*>(base) + t * 4, 4);
    return v;
  }
  std::int64_t v;
  std::memcpy(&v, static_cast<const char*>(base) + t * 8, 8);
  return v;
}

void require(bool ok, const std::string& message) {
  if (!ok) throw ArgumentError("reference: " + message);
}

// Runs fn(begin, end) over [0, n) in contiguous chunks on up to hardware_concurrency threads:
// the GPU tests compare hundreds of millions of elements, which single-threaded float64 code
// turns into minutes. fn must not throw; chunks write disjoint outputs.
template <class Fn>
void parallel_chunks(std::int64_t n, const Fn& fn) {
  const std::int64_t threads = std::clamp<std::int64_t>(std::thread::hardware_concurrency(), 1, 32);
  const std::int64_t chunks = std::min(threads, std::max<std::int64_t>(1, n));
  if (chunks <= 1 || n < 64) {
    fn(std::int64_t{0}, n);
    return;
  }
  std::vector<std::thread> pool;
  for (std::int64_t c = 0; c < chunks; ++c)
    pool.emplace_back([&fn, c, chunks, n] { fn(n * c / chunks, n * (c + 1) / chunks); });
  for (auto& t : pool) t.join();
}

void check_inputs(const ReferenceInputs& in) {
  const KernelSpec& s = in.spec;
  require(s.num_kv_heads > 0 && s.head_dim > 0, "num_kv_heads and head_dim must be positive");
  require(s.rotary_dim >= 0 && s.rotary_dim <= s.head_dim && s.rotary_dim % 2 == 0,
          "rotary_dim must be even and in [0, head_dim], got " + std::to_string(s.rotary_dim));
  require(s.act == DType::BF16 || s.act == DType::FP16 || s.act == DType::FP32,
          "the activation dtype must be bf16, fp16 or fp32");
  require(s.cos_sin == DType::FP32 || s.cos_sin == s.act,
          "the cos/sin dtype must be fp32 or the activation dtype");
  require(in.num_tokens >= 0 && in.num_layers >= 0, "num_tokens and num_layers must be >= 0");
  if (in.num_tokens == 0 || in.num_layers == 0) return;
  const std::int64_t row = 2LL * s.num_kv_heads * s.head_dim;
  require(in.proj != nullptr, "proj is null");
  require(in.proj_stride_layer == 0 || in.proj_stride_layer >= row,
          "proj_stride_layer must be >= 2*H*D");
  if (s.rotary_dim > 0) {
    require(in.positions != nullptr, "positions is null");
    require(in.cos_sin != nullptr, "cos_sin is null");
    require(in.max_position > 0, "max_position must be positive");
    require(in.cos_sin_stride == 0 || in.cos_sin_stride >= s.rotary_dim,
            "cos_sin_stride must be >= rotary_dim");
  }
  // The kernel kinds this reference computes; a model's RmsOnePlus is Rms over folded weights.
  require(s.k_norm == KNormKind::None || s.k_norm == KNormKind::Rms,
          "the reference computes K norm none or rms, not " + to_string(s.k_norm));
  if (k_norm_weighted(s.k_norm))
    require(in.k_norm_weight != nullptr,
            "k_norm_weight is null but spec.k_norm is " + to_string(s.k_norm));
  const auto L = static_cast<std::size_t>(in.num_layers);
  require(in.eps.empty() || in.eps.size() >= L, "eps has fewer than num_layers entries");
  require(in.k_scales.empty() || in.k_scales.size() >= L,
          "k_scales has fewer than num_layers entries");
  require(in.v_scales.empty() || in.v_scales.size() >= L,
          "v_scales has fewer than num_layers entries");
  require(!s.kv_bias || in.kv_bias != nullptr, "kv_bias is null but spec.kv_bias is set");
  require(in.kv_bias_stride_layer == 0 || in.kv_bias_stride_layer >= row,
          "kv_bias_stride_layer must be >= 2*H*D");
}

// The bias of (layer l, element e of the [2*H*D] row), or 0 without one.
// The bias of element e of layer l's K/V row (0 without a bias). Callers add it only when the
// spec has a bias: x + 0.0 turns -0 into +0, and V without a bias must be copied bit for bit.
double bias_of(const ReferenceInputs& in, std::int64_t l, std::int64_t e) {
  if (!in.spec.kv_bias) return 0.0;
  const std::int64_t stride = in.kv_bias_stride_layer
                                  ? in.kv_bias_stride_layer
                                  : 2LL * in.spec.num_kv_heads * in.spec.head_dim;
  return static_cast<double>(in.kv_bias[l * stride + e]);
}

struct Strides {
  std::int64_t token, layer;
};

Strides proj_strides(const ReferenceInputs& in) {
  const std::int64_t row = 2LL * in.spec.num_kv_heads * in.spec.head_dim;
  const std::int64_t layer = in.proj_stride_layer ? in.proj_stride_layer : row;
  const std::int64_t token = in.proj_stride_token ? in.proj_stride_token : in.num_layers * row;
  return {token, layer};
}

ReferenceOutput make_output(const ReferenceInputs& in) {
  ReferenceOutput out;
  out.num_layers = in.num_layers;
  out.num_tokens = in.num_tokens;
  out.num_heads = in.spec.num_kv_heads;
  out.head_dim = in.spec.head_dim;
  const auto n =
      static_cast<std::size_t>(in.num_layers * in.num_tokens * out.num_heads * out.head_dim);
  out.value.resize(n);
  out.magnitude.resize(n);
  return out;
}

double scale_of(std::span<const float> scales, std::int64_t l, DType cache) {
  if (!is_fp8(cache) || scales.empty()) return 1.0;
  return scales[static_cast<std::size_t>(l)];
}

}  // namespace

// ---- number formats ---------------------------------------------------------------------

double to_double(DType dtype, std::uint32_t bits) {
  if (dtype == DType::FP32) {
    float f;
    std::memcpy(&f, &bits, 4);
    return f;
  }
  const std::vector<double>& table = table_of(dtype);
  return table[bits & static_cast<std::uint32_t>(table.size() - 1)];
}

std::uint32_t round_to(DType dtype, double x) {
  if (dtype == DType::FP32) {
    const float f = static_cast<float>(x);  // the default FP environment rounds to nearest even
    std::uint32_t bits;
    std::memcpy(&bits, &f, 4);
    return bits;
  }
  const Format& f = format_of(dtype);
  const std::vector<double>& table = table_of(dtype);
  const std::uint32_t sign = std::signbit(x) ? 1u << (f.ebits + f.mbits) : 0u;
  if (std::isnan(x)) return sign | f.nan_bits;
  const double a = std::fabs(x);
  // Positive finite values increase with their bit patterns: find the last one <= a.
  std::uint32_t lo = 0, hi = f.max_bits;
  while (lo < hi) {
    const std::uint32_t mid = (lo + hi + 1) / 2;
    if (table[mid] <= a)
      lo = mid;
    else
      hi = mid - 1;
  }
  const std::uint32_t b = lo;
  if (table[b] == a) return sign | b;
  double next;  // the value after table[b]; past max it is the first power of two out of range
  if (b == f.max_bits) {
    if (f.saturate) return sign | f.max_bits;
    const int emax = static_cast<int>(f.max_bits >> f.mbits) - f.bias;
    next = std::ldexp(1.0, emax + 1);  // encoded as inf (max_bits + 1), an even pattern
  } else {
    next = table[b + 1];
  }
  // 2a and table[b] + next are exact in double (narrow formats, adjacent values).
  const double twice = 2 * a, sum = table[b] + next;
  std::uint32_t r;
  if (twice < sum)
    r = b;
  else if (twice > sum)
    r = b + 1;
  else
    r = (b & 1u) ? b + 1 : b;
  return sign | r;
}

std::vector<double> fp8_activations(DType act, const std::uint8_t* x, std::int64_t rows,
                                    std::int64_t cols, std::int64_t stride, int group) {
  const int es = dtype_size(act);
  std::vector<double> out(static_cast<std::size_t>(rows * stride), 0.0);
  std::vector<float> v(static_cast<std::size_t>(cols));
  const std::int64_t width = group > 0 ? group : cols;
  for (std::int64_t t = 0; t < rows; ++t) {
    for (std::int64_t c = 0; c < cols; ++c) {
      std::uint32_t b = 0;
      std::memcpy(&b, x + (t * stride + c) * es, static_cast<std::size_t>(es));
      v[static_cast<std::size_t>(c)] = static_cast<float>(to_double(act, b));  // exact
    }
    for (std::int64_t c0 = 0; c0 < cols; c0 += width) {
      const std::int64_t c1 = std::min(cols, c0 + width);
      float amax = 0.0f;
      for (std::int64_t c = c0; c < c1; ++c)
        amax = std::max(amax, std::fabs(v[static_cast<std::size_t>(c)]));
      const float s = std::max(amax / 448.0f, std::numeric_limits<float>::min());
      for (std::int64_t c = c0; c < c1; ++c) {
        const float quotient = v[static_cast<std::size_t>(c)] / s;  // fp32, rounded once
        out[static_cast<std::size_t>(t * stride + c)] =
            to_double(DType::FP8_E4M3, round_to(DType::FP8_E4M3, double(quotient))) * double(s);
      }
    }
  }
  return out;
}

double max_finite(DType dtype) {
  if (dtype == DType::FP32) return std::numeric_limits<float>::max();
  return table_of(dtype)[format_of(dtype).max_bits];
}

double ulp(DType dtype, double x) {
  int mbits, emin;
  if (dtype == DType::FP32) {
    mbits = 23;
    emin = -126;
  } else {
    const Format& f = format_of(dtype);
    mbits = f.mbits;
    emin = 1 - f.bias;
  }
  const double a = std::fabs(x);
  int e = (a > 0 && std::isfinite(a)) ? std::ilogb(a) : emin;
  e = std::max(e, emin);
  return std::ldexp(1.0, e - mbits);
}

// ---- the reference ------------------------------------------------------------------------

ReferenceOutput reference_k(const ReferenceInputs& in) {
  check_inputs(in);
  ReferenceOutput out = make_output(in);
  const KernelSpec& s = in.spec;
  const std::int64_t H = s.num_kv_heads, D = s.head_dim, R = s.rotary_dim, half = R / 2;
  const Strides st = proj_strides(in);
  const std::int64_t cs_stride = in.cos_sin_stride ? in.cos_sin_stride : R;
  if (R > 0)  // checked before the parallel part, which must not throw
    for (std::int64_t t = 0; t < in.num_tokens; ++t) {
      const std::int64_t pos = load_index(in.positions, s.positions, t);
      require(pos >= 0 && pos < in.max_position,
              "positions[" + std::to_string(t) + "] = " + std::to_string(pos) +
                  " is outside [0, max_position=" + std::to_string(in.max_position) + ")");
    }
  parallel_chunks(in.num_tokens, [&](std::int64_t t_begin, std::int64_t t_end) {
    std::vector<double> k(static_cast<std::size_t>(D)), mag(static_cast<std::size_t>(D));
    for (std::int64_t t = t_begin; t < t_end; ++t) {
      const std::int64_t pos = R > 0 ? load_index(in.positions, s.positions, t) : 0;
      for (std::int64_t l = 0; l < in.num_layers; ++l) {
        const double eps =
            in.eps.empty() ? 1e-6 : static_cast<double>(in.eps[static_cast<std::size_t>(l)]);
        const double scale = scale_of(in.k_scales, l, s.cache);
        for (std::int64_t h = 0; h < H; ++h) {
          const std::int64_t base = t * st.token + l * st.layer + h * D;
          for (std::int64_t d = 0; d < D; ++d)
            k[d] = s.kv_bias ? load_value(in.proj, s.act, base + d) + bias_of(in, l, h * D + d)
                             : load_value(in.proj, s.act, base + d);
          if (s.k_norm == KNormKind::Rms) {
            double sum_sq = 0;
            for (double x : k) sum_sq += x * x;
            const double inv_rms = 1.0 / std::sqrt(sum_sq / static_cast<double>(D) + eps);
            for (std::int64_t d = 0; d < D; ++d)
              k[d] = k[d] * inv_rms * static_cast<double>(in.k_norm_weight[l * D + d]);
          }
          for (std::int64_t d = 0; d < D; ++d) mag[d] = std::fabs(k[d]);
          for (std::int64_t i = 0; i < half; ++i) {
            const std::int64_t a = s.neox ? i : 2 * i;
            const std::int64_t b = s.neox ? i + half : 2 * i + 1;
            const double c = load_value(in.cos_sin, s.cos_sin, pos * cs_stride + i);
            const double sn = load_value(in.cos_sin, s.cos_sin, pos * cs_stride + half + i);
            const double x1 = k[a], x2 = k[b];
            k[a] = x1 * c - x2 * sn;
            k[b] = x2 * c + x1 * sn;
            mag[a] = std::fabs(x1 * c) + std::fabs(x2 * sn);
            mag[b] = std::fabs(x2 * c) + std::fabs(x1 * sn);
          }
          for (std::int64_t d = 0; d < D; ++d) {
            const std::size_t o = out.index(l, t, h, d);
            out.value[o] = k[d] / scale;
            out.magnitude[o] = mag[d] / scale;
          }
        }
      }
    }
  });
  return out;
}

ReferenceOutput reference_v(const ReferenceInputs& in) {
  check_inputs(in);
  ReferenceOutput out = make_output(in);
  const KernelSpec& s = in.spec;
  const std::int64_t H = s.num_kv_heads, D = s.head_dim, KV = H * D;
  const Strides st = proj_strides(in);
  parallel_chunks(in.num_tokens, [&](std::int64_t t_begin, std::int64_t t_end) {
    for (std::int64_t t = t_begin; t < t_end; ++t) {
      for (std::int64_t l = 0; l < in.num_layers; ++l) {
        const double scale = scale_of(in.v_scales, l, s.cache);
        const std::int64_t base = t * st.token + l * st.layer + KV;
        for (std::int64_t h = 0; h < H; ++h) {
          for (std::int64_t d = 0; d < D; ++d) {
            const double x = load_value(in.proj, s.act, base + h * D + d);
            const double b = bias_of(in, l, KV + h * D + d);
            const std::size_t o = out.index(l, t, h, d);
            out.value[o] = (s.kv_bias ? x + b : x) / scale;
            out.magnitude[o] = (std::fabs(x) + std::fabs(b)) / scale;
          }
        }
      }
    }
  });
  return out;
}

std::int64_t pool_offset(const PoolLayout& layout, std::int64_t num_heads, std::int64_t head_dim,
                         std::int64_t slot, std::int64_t head) {
  const std::int64_t bs = layout.block_size ? layout.block_size : 1;
  const std::int64_t ss = layout.slot_stride ? layout.slot_stride : num_heads * head_dim;
  const std::int64_t hs = layout.head_stride ? layout.head_stride : head_dim;
  const std::int64_t block_stride =
      layout.block_stride ? layout.block_stride : (bs - 1) * ss + (num_heads - 1) * hs + head_dim;
  return (slot / bs) * block_stride + (slot % bs) * ss + head * hs;
}

// ---- comparison ---------------------------------------------------------------------------

CompareResult compare(DType dtype, const void* gpu_bits, const ReferenceOutput& ref,
                      const CompareOptions& options) {
  CompareResult result;
  const bool saturates = is_fp8(dtype);
  const double max = max_finite(dtype);
  const std::int64_t T = ref.num_tokens, H = ref.num_heads, D = ref.head_dim;
  require(options.token_mask.empty() || options.token_mask.size() >= static_cast<std::size_t>(T),
          "token_mask has fewer than num_tokens entries");
  const bool per_layer = !options.layer_token_mask.empty();
  require(
      !per_layer || options.layer_token_mask.size() >= static_cast<std::size_t>(ref.num_layers * T),
      "layer_token_mask has fewer than num_layers * num_tokens entries");
  // One result per layer, computed in parallel and merged in layer order (same listing as serial).
  std::vector<CompareResult> per_layer_result(static_cast<std::size_t>(ref.num_layers));
  parallel_chunks(ref.num_layers, [&](std::int64_t l_begin, std::int64_t l_end) {
    for (std::int64_t l = l_begin; l < l_end; ++l) {
      CompareResult& result = per_layer_result[static_cast<std::size_t>(l)];
      for (std::int64_t t = 0; t < T; ++t) {
        if (per_layer
                ? !options.layer_token_mask[static_cast<std::size_t>(l * T + t)]
                : !options.token_mask.empty() && !options.token_mask[static_cast<std::size_t>(t)])
          continue;
        for (std::int64_t h = 0; h < H; ++h) {
          for (std::int64_t d = 0; d < D; ++d) {
            const std::size_t i = ref.index(l, t, h, d);
            const std::uint32_t bits = load_bits(gpu_bits, dtype, static_cast<std::int64_t>(i));
            const double g = to_double(dtype, bits);
            double r = ref.value[i];
            if (saturates) r = std::clamp(r, -max, max);
            const std::uint32_t expected = round_to(dtype, r);
            const double err = std::fabs(g - r);
            double tolerance = 0;
            bool ok;
            if (options.exact) {
              ok = bits == expected;
            } else {
              tolerance = ulp(dtype, r) + options.fp32_slack * ref.magnitude[i];
              ok = !std::isnan(g) && (bits == expected || (std::isfinite(g) && err <= tolerance));
            }
            ++result.checked;
            if (std::isfinite(err)) {
              result.max_abs_error = std::max(result.max_abs_error, err);
              if (r != 0) result.max_rel_error = std::max(result.max_rel_error, err / std::fabs(r));
              result.max_ulp_error = std::max(result.max_ulp_error, err / ulp(dtype, r));
            }
            if (ok) continue;
            ++result.mismatches;
            if (static_cast<int>(result.first.size()) < options.max_listed)
              result.first.push_back({l, t, h, d, bits, g, ref.value[i], tolerance});
          }
        }
      }
    }
  });
  for (const CompareResult& r : per_layer_result) {
    result.checked += r.checked;
    result.mismatches += r.mismatches;
    result.max_abs_error = std::max(result.max_abs_error, r.max_abs_error);
    result.max_rel_error = std::max(result.max_rel_error, r.max_rel_error);
    result.max_ulp_error = std::max(result.max_ulp_error, r.max_ulp_error);
    for (const Mismatch& m : r.first)
      if (static_cast<int>(result.first.size()) < options.max_listed) result.first.push_back(m);
  }
  return result;
}

std::string CompareResult::summary(const std::string& what) const {
  std::ostringstream os;
  char line[256];
  std::snprintf(line, sizeof line,
                "%s: %lld of %lld elements out of tolerance; max abs err %.6g, max rel err %.6g, "
                "max %.3g ulp",
                what.c_str(), static_cast<long long>(mismatches), static_cast<long long>(checked),
                max_abs_error, max_rel_error, max_ulp_error);
  os << line;
  for (const Mismatch& m : first) {
    std::snprintf(line, sizeof line,
                  "\n  %s[l=%lld,t=%lld,h=%lld,d=%lld] gpu=%.9g (0x%x) ref=%.9g tol=%.3g",
                  what.c_str(), static_cast<long long>(m.l), static_cast<long long>(m.t),
                  static_cast<long long>(m.h), static_cast<long long>(m.d), m.gpu, m.gpu_bits,
                  m.ref, m.tolerance);
    os << line;
  }
  return os.str();
}

}  // namespace fkv
