// rope: cos/sin caches in float64 from RopeFrequencies. Every formula follows
// transformers/src/transformers/modeling_rope_utils.py (_compute_*_parameters); docs/rope.md
// lists them with the differences (float64 throughout, static dynamic/longrope).
#include "fkv/rope.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numbers>
#include <optional>
#include <sstream>

#include "fkv/driver.hpp"
#include "fkv/errors.hpp"

namespace fkv {
namespace {

using nlohmann::json;

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : ", ") + x;
  return s;
}

// Typed access to the scaling parameters of one rope type; errors name the key and the type.
class Params {
 public:
  Params(const json& j, std::string type) : j_(j), type_(std::move(type)) {}

  // Absent or null -> nullopt; anything but a number -> ConfigError.
  std::optional<double> number(const char* key) const {
    if (!j_.is_object() || !j_.contains(key) || j_.at(key).is_null()) return std::nullopt;
    const json& v = j_.at(key);
    if (!v.is_number() || !std::isfinite(v.get<double>())) fail(key, "must be a finite number", v);
    return v.get<double>();
  }
  double required(const char* key) const {
    auto v = number(key);
    if (!v)
      throw ConfigError("RoPE scaling key '" + std::string(key) + "' is required for rope type '" +
                        type_ + "' but missing; add it to rope_scaling / rope_parameters.");
    return *v;
  }
  double positive(const char* key, double v) const {
    if (!(v > 0.0)) fail(key, "must be > 0", json(v));
    return v;
  }
  bool boolean(const char* key, bool fallback) const {
    if (!j_.is_object() || !j_.contains(key) || j_.at(key).is_null()) return fallback;
    if (!j_.at(key).is_boolean()) fail(key, "must be true or false", j_.at(key));
    return j_.at(key).get<bool>();
  }
  std::vector<double> list(const char* key, std::size_t expected_size) const {
    if (!j_.is_object() || !j_.contains(key) || !j_.at(key).is_array())
      throw ConfigError("RoPE scaling key '" + std::string(key) + "' (a list of " +
                        std::to_string(expected_size) + " numbers) is required for rope type '" +
                        type_ + "' but missing or not a list.");
    const json& a = j_.at(key);
    if (a.size() != expected_size)
      fail(key,
           "must have rotary_dim / 2 = " + std::to_string(expected_size) + " entries, has " +
               std::to_string(a.size()),
           json());
    std::vector<double> out;
    for (const json& x : a) {
      if (!x.is_number() || !(x.get<double>() > 0.0)) fail(key, "entries must be numbers > 0", x);
      out.push_back(x.get<double>());
    }
    return out;
  }
  [[noreturn]] void fail(const char* key, const std::string& what, const json& got) const {
    std::string msg =
        "RoPE scaling key '" + std::string(key) + "' of rope type '" + type_ + "' " + what;
    if (!got.is_null()) msg += ", got " + got.dump();
    throw ConfigError(msg + ".");
  }

 private:
  const json& j_;
  std::string type_;
};

// 1 / theta^(2i/R): transformers' `1.0 / (base ** (torch.arange(0, dim, 2) / dim))`.
std::vector<double> default_inv_freq(double theta, int R) {
  std::vector<double> f(R / 2);
  for (int i = 0; i < R / 2; ++i) f[i] = 1.0 / std::pow(theta, (2.0 * i) / R);
  return f;
}

// original_max_position_embeddings from the scaling dict, else the model's
// max_position_embeddings (transformers' standardize_rope_params does the same setdefault).
double original_max(const Params& p, const RopeOptions& o, const std::string& type) {
  if (auto v = p.number("original_max_position_embeddings"))
    return p.positive("original_max_position_embeddings", *v);
  if (o.max_position_embeddings > 0) return static_cast<double>(o.max_position_embeddings);
  throw ConfigError("rope type '" + type +
                    "' needs original_max_position_embeddings (in rope_scaling) or the model's "
                    "max_position_embeddings; neither is set.");
}

double model_max(const RopeOptions& o, const std::string& type) {
  if (o.max_position_embeddings > 0) return static_cast<double>(o.max_position_embeddings);
  throw ConfigError("rope type '" + type +
                    "' needs the model's max_position_embeddings; it is not set.");
}

// Shortest round-trip text of a number for messages ("1e-300", "inf").
std::string show_number(double x) {
  return std::isfinite(x) ? json(x).dump() : std::isnan(x) ? "nan" : x > 0 ? "inf" : "-inf";
}

// yarn's get_mscale: 0.1 * m * ln(s) + 1 for s > 1.
double yarn_mscale(double scale, double m) {
  return scale <= 1.0 ? 1.0 : 0.1 * m * std::log(scale) + 1.0;
}

// yarn's find_correction_dim: the dim index whose wavelength makes `rotations` turns over
// `max_pos` positions.
double yarn_correction_dim(double rotations, int R, double base, double max_pos) {
  return (R * std::log(max_pos / (rotations * 2 * std::numbers::pi))) / (2 * std::log(base));
}

// Rounds x once, to nearest with ties to even, onto a binary format with `mant` explicit
// mantissa bits and minimum normal exponent `emin` (subnormals below it). No overflow check.
double round_to_format(double x, int mant, int emin) {
  if (!std::isfinite(x) || x == 0.0) return x;
  int e = 0;
  std::frexp(std::fabs(x), &e);  // |x| = m * 2^e, m in [0.5, 1): unbiased exponent e - 1
  const double quantum = std::ldexp(1.0, std::max(e - 1, emin) - mant);
  const double r = std::fabs(x) / quantum;  // exact: power-of-two scaling
  double n = std::floor(r);
  const double frac = r - n;  // exact, r < 2^(mant+2)
  if (frac > 0.5 || (frac == 0.5 && std::fmod(n, 2.0) != 0.0)) n += 1.0;
  return std::copysign(n * quantum, x);
}

}  // namespace

const std::vector<std::string>& RopeTable::supported_types() {
  // Never destroyed: a call from an atexit handler or a static destructor still finds it.
  static const auto& types = *new const std::vector<std::string>{"default", "linear", "dynamic",
                                                                 "llama3",  "yarn",   "longrope"};
  return types;
}

RopeTable::RopeTable(const RopeFrequencies& freq, int rotary_dim, std::int64_t max_position,
                     const RopeOptions& options)
    : type_(freq.scaling_type.empty() ? "default" : freq.scaling_type),
      rotary_dim_(rotary_dim),
      max_position_(max_position) {
  if (type_ == "mrope") type_ = "default";  // text-only positions: plain RoPE (docs/rope.md)
  const auto& types = supported_types();
  if (std::find(types.begin(), types.end(), type_) == types.end())
    throw ConfigError("RoPE type '" + freq.scaling_type + "' is not supported; supported types: " +
                      join(types) + " ('mrope' is read as 'default'). See docs/rope.md.");
  if (rotary_dim < 2 || rotary_dim % 2 != 0)
    throw ConfigError("rotary_dim must be even and >= 2 to build a RoPE table, got " +
                      std::to_string(rotary_dim) + ".");
  if (max_position < 1 || max_position > kMaxRopePositions)
    throw ConfigError("max_position of a RoPE table must be in [1, 2^31], got " +
                      std::to_string(max_position) + ".");
  if (!(freq.theta > 0.0) || !std::isfinite(freq.theta))
    throw ConfigError("rope_theta must be a finite number > 0, got " + std::to_string(freq.theta) +
                      ".");

  const int R = rotary_dim;
  const double theta = freq.theta;
  const Params p(freq.scaling, type_);
  // The config module records the model's max_position_embeddings in the scaling dict where a
  // type needs it (longrope); an explicit option wins.
  RopeOptions opts = options;
  if (opts.max_position_embeddings <= 0)
    if (auto m = p.number("max_position_embeddings"))
      opts.max_position_embeddings =
          static_cast<std::int64_t>(p.positive("max_position_embeddings", *m));
  const double seq_len = static_cast<double>(opts.seq_len > 0 ? opts.seq_len : max_position);

  if (type_ == "default") {
    inv_freq_ = default_inv_freq(theta, R);
  } else if (type_ == "linear") {
    // _compute_linear_scaling_rope_parameters: positions / factor == inv_freq / factor.
    const double factor = p.positive("factor", p.required("factor"));
    inv_freq_ = default_inv_freq(theta, R);
    for (double& f : inv_freq_) f /= factor;
  } else if (type_ == "dynamic") {
    // _compute_dynamic_ntk_parameters evaluated once at seq_len (static form):
    // base' = base * (factor * s / mpe - (factor - 1)) ^ (R / (R - 2)), s = max(seq_len, mpe).
    const double factor = p.positive("factor", p.required("factor"));
    const double mpe = model_max(opts, type_);
    if (R == 2)
      throw ConfigError("rope type 'dynamic' needs rotary_dim > 2 (its exponent is R / (R - 2)).");
    const double s = std::max(seq_len, mpe);
    const double base =
        theta * std::pow((factor * s / mpe) - (factor - 1), static_cast<double>(R) / (R - 2));
    inv_freq_ = default_inv_freq(base, R);
  } else if (type_ == "llama3") {
    // _compute_llama3_parameters: long wavelengths / factor, short ones kept, smooth between.
    const double factor = p.positive("factor", p.required("factor"));
    const double low = p.positive("low_freq_factor", p.required("low_freq_factor"));
    const double high = p.positive("high_freq_factor", p.required("high_freq_factor"));
    if (high == low) p.fail("high_freq_factor", "must differ from low_freq_factor", json(high));
    const double old_ctx = original_max(p, opts, type_);
    const double low_wavelen = old_ctx / low;
    const double high_wavelen = old_ctx / high;
    inv_freq_ = default_inv_freq(theta, R);
    for (double& f : inv_freq_) {
      const double wavelen = 2 * std::numbers::pi / f;
      if (wavelen > low_wavelen) {
        f = f / factor;
      } else if (!(wavelen < high_wavelen)) {
        const double smooth = (old_ctx / wavelen - low) / (high - low);
        f = (1 - smooth) * f / factor + smooth * f;
      }
    }
  } else if (type_ == "yarn") {
    // _compute_yarn_parameters (transformers v5: an explicit factor wins over the ratio).
    const double orig = original_max(p, opts, type_);
    const auto explicit_factor = p.number("factor");
    const double factor =
        p.positive("factor", explicit_factor ? *explicit_factor : model_max(opts, type_) / orig);
    if (auto af = p.number("attention_factor")) {
      attention_factor_ = p.positive("attention_factor", *af);
    } else {
      const double mscale = p.number("mscale").value_or(0.0);
      const double mscale_all_dim = p.number("mscale_all_dim").value_or(0.0);
      attention_factor_ = (mscale != 0.0 && mscale_all_dim != 0.0)
                              ? yarn_mscale(factor, mscale) / yarn_mscale(factor, mscale_all_dim)
                              : yarn_mscale(factor, 1.0);
    }
    // `x or default` in Python: absent, null and 0 all take the default.
    const double beta_fast =
        p.number("beta_fast").value_or(0.0) != 0.0 ? *p.number("beta_fast") : 32.0;
    const double beta_slow =
        p.number("beta_slow").value_or(0.0) != 0.0 ? *p.number("beta_slow") : 1.0;
    const bool truncate = p.boolean("truncate", true);
    if (theta == 1.0)
      throw ConfigError("rope type 'yarn' needs rope_theta != 1 (it divides by ln(theta)).");

    double lo = yarn_correction_dim(beta_fast, R, theta, orig);
    double hi = yarn_correction_dim(beta_slow, R, theta, orig);
    if (truncate) {
      lo = std::floor(lo);
      hi = std::ceil(hi);
    }
    lo = std::max(lo, 0.0);
    hi = std::min(hi, static_cast<double>(R - 1));
    if (lo == hi) hi += 0.001;  // transformers' "prevent singularity"

    inv_freq_.resize(R / 2);
    for (int i = 0; i < R / 2; ++i) {
      const double pos_freq = std::pow(theta, (2.0 * i) / R);
      const double extrapolation = 1.0 / pos_freq;
      const double interpolation = 1.0 / (factor * pos_freq);
      const double ramp = std::clamp((i - lo) / (hi - lo), 0.0, 1.0);
      const double extrapolation_factor = 1 - ramp;
      inv_freq_[i] =
          interpolation * (1 - extrapolation_factor) + extrapolation * extrapolation_factor;
    }
  } else if (type_ == "longrope") {
    // _compute_longrope_parameters, factors chosen once for seq_len (static form).
    const double orig = original_max(p, opts, type_);
    const auto explicit_factor = p.number("factor");
    // Without `factor` and without a model max_position_embeddings the ratio is unknown; only
    // the attention factor needs it, so an explicit attention_factor makes it unnecessary.
    const auto af = p.number("attention_factor");
    double factor = 1.0;
    if (explicit_factor)
      factor = p.positive("factor", *explicit_factor);
    else if (!af)
      factor = model_max(opts, type_) / orig;
    if (af)
      attention_factor_ = p.positive("attention_factor", *af);
    else
      attention_factor_ = factor <= 1.0 ? 1.0 : std::sqrt(1 + std::log(factor) / std::log(orig));
    const bool use_long = seq_len > orig;
    const std::vector<double> ext = p.list(use_long ? "long_factor" : "short_factor", R / 2);
    p.list(use_long ? "short_factor" : "long_factor", R / 2);  // both must be well formed
    inv_freq_.resize(R / 2);
    for (int i = 0; i < R / 2; ++i) inv_freq_[i] = 1.0 / (ext[i] * std::pow(theta, (2.0 * i) / R));
  }

  // Whatever the parameters, a table that validates is finite: every entry is
  // cos/sin(pos * inv_freq) * attention_factor, finite for every int64 position when inv_freq
  // stays below 1e280, and representable in fp16 (the narrowest table dtype) when
  // |attention_factor| <= 65504. Parameters the formulas accept can still break these (a tiny
  // theta, a huge or cancelling mscale), so they are checked here, once, on the result.
  for (int i = 0; i < R / 2; ++i) {
    if (!std::isfinite(inv_freq_[i]) || inv_freq_[i] < 0.0 || inv_freq_[i] > 1e280)
      throw ConfigError("RoPE parameters of rope type '" + type_ +
                        "' (theta=" + show_number(theta) +
                        ") give a non-finite or out-of-range frequency for rotary pair " +
                        std::to_string(i) + " (inv_freq=" + show_number(inv_freq_[i]) +
                        "); check rope_theta and the scaling factors.");
  }
  if (!std::isfinite(attention_factor_) || !(attention_factor_ > 0.0) ||
      attention_factor_ > 65504.0)
    throw ConfigError(
        "RoPE parameters of rope type '" + type_ + "' give attention factor " +
        show_number(attention_factor_) +
        ", which must be finite, > 0 and at most 65504 (the cos/sin table must be finite in fp16); "
        "check factor, mscale, mscale_all_dim and attention_factor.");
}

double RopeTable::cos(std::int64_t pos, int i) const {
  return std::cos(static_cast<double>(pos) * inv_freq_[i]) * attention_factor_;
}

double RopeTable::sin(std::int64_t pos, int i) const {
  return std::sin(static_cast<double>(pos) * inv_freq_[i]) * attention_factor_;
}

// rows * cols * elem, or ArgumentError when it does not fit in size_t (the constructor's bound
// keeps every table far below that; this guards the arithmetic, not the inputs).
std::size_t RopeTable::checked_size(std::size_t elem) const {
  std::size_t n = 0;
  if (max_position_ < 0 ||
      __builtin_mul_overflow(static_cast<std::size_t>(max_position_),
                             static_cast<std::size_t>(rotary_dim_), &n) ||
      __builtin_mul_overflow(n, elem, &n))
    throw ArgumentError("a RoPE table of " + std::to_string(max_position_) + " x " +
                        std::to_string(rotary_dim_) + " entries of " + std::to_string(elem) +
                        " bytes does not fit in memory");
  return n;
}

std::vector<double> RopeTable::values() const {
  const int half = rotary_dim_ / 2;
  std::vector<double> out(checked_size(sizeof(double)) / sizeof(double));
  for (std::int64_t p = 0; p < max_position_; ++p) {
    double* row = out.data() + p * rotary_dim_;
    for (int i = 0; i < half; ++i) {
      row[i] = cos(p, i);
      row[half + i] = sin(p, i);
    }
  }
  return out;
}

std::size_t RopeTable::size_bytes(DType dtype) const {
  std::size_t elem = 0;
  switch (dtype) {
    case DType::FP32:
      elem = 4;
      break;
    case DType::BF16:
    case DType::FP16:
      elem = 2;
      break;
    default:
      throw ArgumentError(
          "a RoPE cos/sin table can be fp32, bf16 or fp16; fp8 is not supported "
          "(choose cos_sin = fp32 or the activation dtype).");
  }
  return checked_size(elem);
}

std::vector<std::uint8_t> RopeTable::bytes(DType dtype) const {
  std::vector<std::uint8_t> out(size_bytes(dtype));
  const std::vector<double> v = values();
  // memcpy of native integers: little-endian on every platform CUDA runs on (x86-64, aarch64).
  if (dtype == DType::FP32) {
    for (std::size_t k = 0; k < v.size(); ++k) {
      const std::uint32_t b = fp32_bits(v[k]);
      std::memcpy(out.data() + 4 * k, &b, 4);
    }
  } else {
    for (std::size_t k = 0; k < v.size(); ++k) {
      const std::uint16_t b = dtype == DType::BF16 ? bf16_bits(v[k]) : fp16_bits(v[k]);
      std::memcpy(out.data() + 2 * k, &b, 2);
    }
  }
  return out;
}

void upload(const RopeTable& table, DType dtype, CUdeviceptr dst, CUstream stream) {
  const std::vector<std::uint8_t> host = table.bytes(dtype);
  FKV_CU(cuMemcpyHtoDAsync, dst, host.data(), host.size(), stream);
}

std::uint32_t fp32_bits(double x) {
  float f = 0.0f;
  if (std::isnan(x)) {
    f = std::numeric_limits<float>::quiet_NaN();
  } else {
    const double r = round_to_format(x, 23, -126);
    f = std::fabs(r) >= 0x1p128
            ? std::copysign(std::numeric_limits<float>::infinity(), static_cast<float>(r))
            : static_cast<float>(r);  // exact: r is a float value
  }
  std::uint32_t b = 0;
  std::memcpy(&b, &f, 4);
  return b;
}

std::uint16_t bf16_bits(double x) {
  const std::uint16_t sign = std::signbit(x) ? 0x8000 : 0;
  if (std::isnan(x)) return static_cast<std::uint16_t>(sign | 0x7fc0);
  const double r = round_to_format(x, 7, -126);
  if (std::fabs(r) >= 0x1p128) return static_cast<std::uint16_t>(sign | 0x7f80);
  // bf16 is the top half of fp32, and r is exactly representable in both.
  return static_cast<std::uint16_t>(fp32_bits(r) >> 16);
}

std::uint16_t fp16_bits(double x) {
  const std::uint16_t sign = std::signbit(x) ? 0x8000 : 0;
  if (std::isnan(x)) return static_cast<std::uint16_t>(sign | 0x7e00);
  const double a = std::fabs(round_to_format(x, 10, -14));
  if (a >= 65536.0) return static_cast<std::uint16_t>(sign | 0x7c00);  // inf (incl. overflow)
  if (a == 0.0) return sign;
  if (a < 0x1p-14)  // subnormal: a = m * 2^-24
    return static_cast<std::uint16_t>(sign | static_cast<std::uint16_t>(a * 0x1p24));
  const int e = std::ilogb(a);  // 2^e <= a < 2^(e+1)
  const auto mant = static_cast<std::uint16_t>((std::ldexp(a, -e) - 1.0) * 1024.0);
  return static_cast<std::uint16_t>(sign | ((e + 15) << 10) | mant);
}

}  // namespace fkv
