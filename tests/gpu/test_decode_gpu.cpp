// The decode-size kernel (projection GEMM + epilogue in one launch) on a GPU against a float64
// reference: proj = x · Wᵀ computed in float64 on the host, then fkv::reference_k / reference_v
// (the epilogue's reference) on that projection. Outputs are poisoned (0xff, NaN in every output
// dtype) before each launch; pool rows that must not be written are checked to stay poisoned.
//
// Tolerance: the epilogue tests' (one unit in the last place of the output dtype, plus 1e-5 of
// the magnitude of the terms the kernel adds in fp32). Here those terms include the GEMM's
// products, so the magnitude of an element is sum_k |x_k W_nk| carried through the norm scale
// and RoPE like the value itself.
//
// Environment: FKV_TEST_SEED (default: time).
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <future>
#include <limits>
#include <memory>
#include <sstream>
#include <thread>

#include "fkv/decode.hpp"
#include "fkv/errors.hpp"
#include "fkv/fused_kv_materializer.hpp"
#include "fkv/kernel_params.h"
#include "fkv/runtime.hpp"
#include "gpu/gpu_test.hpp"
#include "gpu_harness.hpp"
#include "reference.hpp"

using fkv::DType;
using fkv::IndexType;
using fkv::OutputMode;
using namespace fkv_test;

namespace {

std::uint64_t seed() { return run_seed("test_decode_gpu"); }

// A model shape and its dtypes; the mode is chosen per run.
struct Shape {
  std::string name;
  fkv::KernelSpec e;
  int hidden = 0, layers = 0;
  std::int64_t hidden_pad = 0;  // x rows are hidden + hidden_pad elements apart
  std::int64_t max_pos = 4096;
  bool scales = false;                                  // per-layer k/v scales (fp8 pool)
  fkv::WeightFormat weight = fkv::WeightFormat::Dense;  // how W_kv is stored
  std::int64_t kv() const { return std::int64_t{e.num_kv_heads} * e.head_dim; }
  std::int64_t rows() const { return layers * 2 * kv(); }
  std::int64_t stride() const { return hidden + hidden_pad; }
};

// Qwen3's attention (NeoX RoPE, K RMSNorm), by default the 8B draft's heads: `heads` KV heads of
// `head_dim`, the first `rotary_dim` of each rotated.
fkv::KernelSpec qwen3(int heads = 8, int head_dim = 128, int rotary_dim = 128) {
  fkv::KernelSpec e;
  e.num_kv_heads = heads;
  e.head_dim = head_dim;
  e.rotary_dim = rotary_dim;
  e.neox = true;
  e.k_norm = fkv::KNormKind::Rms;
  return e;
}

// The model on the device and its exact values on the host.
struct Model {
  Shape shape;
  std::vector<double> w;  // [rows, hidden], the bf16/fp16 values (quantized: q * scale)
  // Quantized weights: the fp32 scales as the kernels read them (weights.hpp: [L], [rows] or
  // [rows / 128, hidden / 128]), and the dequantized weights rounded to the activation dtype
  // the way the cuBLASLt path's dequantize kernel rounds them (fp32 q * scale, then once).
  std::vector<float> w_scale;
  std::vector<double> w_rounded;
  fkv::DeviceBuffer d_w_scale;
  std::vector<float> k_norm;       // [L, D]
  std::vector<float> eps;          // [L]
  std::vector<float> cos_sin_f32;  // [max_pos, R], the device table's values
  fkv::DeviceBuffer d_w, d_k_norm, d_cos_sin;
};

std::vector<double> decode_all(DType t, const std::vector<std::uint8_t>& bytes) {
  const std::size_t n = bytes.size() / static_cast<std::size_t>(elem_size(t));
  std::vector<double> out(n);
  for (std::size_t i = 0; i < n; ++i) {
    std::uint32_t b = 0;
    std::memcpy(&b, bytes.data() + i * static_cast<std::size_t>(elem_size(t)),
                static_cast<std::size_t>(elem_size(t)));
    out[i] = fkv::to_double(t, b);
  }
  return out;
}

// Random quantized W (FP8 e4m3 bytes over the whole range, subnormals included, or INT8) and
// random scales in the format's layout, with W's exact values m.w = q * scale.
void make_quantized(Model& m, Rng& rng, CUstream stream) {
  const Shape& s = m.shape;
  const std::int64_t rows = s.rows(), H = s.hidden, per_layer = 2 * s.kv();
  const bool fp8 = s.weight != fkv::WeightFormat::Int8Channel;
  std::vector<std::uint8_t> q(static_cast<std::size_t>(rows * H));
  std::vector<double> qv(q.size());
  for (std::size_t i = 0; i < q.size(); ++i) {
    if (fp8) {
      // Mostly normal values (normal() stays within +-3.5, so up to about +-140), one in ten in
      // the subnormal range, and one in ten a uniformly random byte: every exponent field,
      // 256 to 448 included, goes through the conversion.
      if (rng.coin(0.1)) {
        q[i] = static_cast<std::uint8_t>(std::min(255.0, rng.uniform() * 256.0));
      } else {
        const double x = rng.normal() * (rng.coin(0.1) ? 0.004 : 40.0);
        q[i] = static_cast<std::uint8_t>(fkv::round_to(DType::FP8_E4M3, x));
      }
      if ((q[i] & 0x7f) == 0x7f) q[i] &= 0xfe;  // never NaN
      qv[i] = fkv::to_double(DType::FP8_E4M3, q[i]);
    } else {
      const auto v = static_cast<std::int8_t>(
          std::clamp<double>(std::nearbyint(rng.normal() * 40.0), -128.0, 127.0));
      std::memcpy(&q[i], &v, 1);
      qv[i] = v;
    }
  }
  // Scales around 1 / (40 sqrt(hidden)): W ~ N(0, 1/hidden) as for dense weights.
  const double base = 1.0 / (40.0 * std::sqrt(double(H)));
  const std::int64_t cols = (H + 127) / 128;
  auto scale_of = [&](std::int64_t row, std::int64_t col) -> float {
    switch (fkv::scale_layout(s.weight)) {
      case fkv::ScaleLayout::PerLayer:
        return m.w_scale[static_cast<std::size_t>(row / per_layer)];
      case fkv::ScaleLayout::PerRow:
        return m.w_scale[static_cast<std::size_t>(row)];
      default:
        return m.w_scale[static_cast<std::size_t>((row / 128) * cols + col / 128)];
    }
  };
  const std::int64_t n_scales = fkv::layer_scale_count(s.weight, per_layer, H) * s.layers;
  for (std::int64_t i = 0; i < n_scales; ++i)
    m.w_scale.push_back(static_cast<float>(base * (0.5 + rng.uniform())));
  m.w.resize(q.size());
  m.w_rounded.resize(q.size());
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t c = 0; c < H; ++c) {
      const std::size_t i = static_cast<std::size_t>(r * H + c);
      const float sc = scale_of(r, c);
      m.w[i] = qv[i] * double(sc);
      const float product = static_cast<float>(qv[i]) * sc;  // as the dequantize kernel
      m.w_rounded[i] = fkv::to_double(s.e.act, fkv::round_to(s.e.act, double(product)));
    }
  m.d_w = to_device(q, stream);
  m.d_w_scale = to_device(m.w_scale, stream);
}

Model make_model(const Shape& s, Rng& rng, CUstream stream) {
  Model m;
  m.shape = s;
  const std::size_t rows = static_cast<std::size_t>(s.rows()),
                    H = static_cast<std::size_t>(s.hidden);
  // W ~ N(0, 1/hidden): the projections are about unit size.
  if (fkv::is_quantized(s.weight)) {
    make_quantized(m, rng, stream);
  } else {
    const auto w_bytes = random_values(s.e.act, rows * H, 1.0 / std::sqrt(double(s.hidden)), rng);
    m.w = decode_all(s.e.act, w_bytes);
    m.d_w = to_device(w_bytes, stream);
  }
  const std::size_t L = static_cast<std::size_t>(s.layers),
                    D = static_cast<std::size_t>(s.e.head_dim);
  for (std::size_t i = 0; i < L * D; ++i)
    m.k_norm.push_back(static_cast<float>(1.0 + 0.25 * rng.normal()));
  for (std::size_t l = 0; l < L; ++l) m.eps.push_back(static_cast<float>(1e-6 * double(l + 1)));
  m.d_k_norm = to_device(m.k_norm, stream);
  const int R = s.e.rotary_dim;
  if (R > 0) {
    std::vector<std::uint8_t> table(
        static_cast<std::size_t>(s.max_pos * R * elem_size(s.e.cos_sin)));
    for (std::int64_t p = 0; p < s.max_pos; ++p)
      for (int i = 0; i < R / 2; ++i) {
        const double theta = double(p) * std::pow(10000.0, -2.0 * i / R);
        store_value(s.e.cos_sin, std::cos(theta),
                    table.data() + (p * R + i) * elem_size(s.e.cos_sin));
        store_value(s.e.cos_sin, std::sin(theta),
                    table.data() + (p * R + R / 2 + i) * elem_size(s.e.cos_sin));
      }
    for (double v : decode_all(s.e.cos_sin, table)) m.cos_sin_f32.push_back(static_cast<float>(v));
    m.d_cos_sin = to_device(table, stream);
  }
  FKV_CU(cuStreamSynchronize, stream);
  return m;
}

fkv::DecodeModel decode_model(const Model& m) {
  fkv::DecodeModel d;
  d.epilogue = m.shape.e;
  d.hidden = m.shape.hidden;
  d.num_layers = m.shape.layers;
  d.w_kv = m.d_w.ptr();
  d.weight = m.shape.weight;
  d.w_scale =
      fkv::is_quantized(m.shape.weight) ? static_cast<const float*>(m.d_w_scale.ptr()) : nullptr;
  d.k_norm = fkv::k_norm_weighted(m.shape.e.k_norm) ? static_cast<const float*>(m.d_k_norm.ptr())
                                                    : nullptr;
  d.eps = m.eps;
  d.cos_sin = m.shape.e.rotary_dim > 0 ? m.d_cos_sin.ptr() : nullptr;
  d.max_position = m.shape.max_pos;
  return d;
}

// x for up to T tokens, with its float64 projection and the sums of |products|.
struct Tokens {
  std::int64_t T = 0;
  std::vector<std::uint8_t> x;        // [T, stride] (padding columns random too)
  std::vector<double> proj, abs_sum;  // [T, rows]
  fkv::DeviceBuffer d_x;
};

// proj and abs_sum of the activations `x` ([T, stride] values) times `w` ([rows, hidden]).
void project_values(const Shape& s, const std::vector<double>& w, const std::vector<double>& x,
                    Tokens& k) {
  const std::int64_t T = k.T;
  const std::size_t rows = static_cast<std::size_t>(s.rows()),
                    H = static_cast<std::size_t>(s.hidden);
  k.proj.assign(static_cast<std::size_t>(T) * rows, 0.0);
  k.abs_sum.assign(k.proj.size(), 0.0);
  const unsigned threads = std::max(1u, std::min(16u, std::thread::hardware_concurrency()));
  std::vector<std::future<void>> parts;
  for (unsigned part = 0; part < threads; ++part)
    parts.push_back(std::async(std::launch::async, [&, part] {
      for (std::size_t n = part; n < rows; n += threads)
        for (std::int64_t t = 0; t < T; ++t) {
          const double* xr = x.data() + static_cast<std::size_t>(t * s.stride());
          const double* wr = w.data() + n * H;
          double acc = 0, abs = 0;
          for (std::size_t i = 0; i < H; ++i) {
            acc += xr[i] * wr[i];
            abs += std::fabs(xr[i] * wr[i]);
          }
          k.proj[static_cast<std::size_t>(t) * rows + n] = acc;
          k.abs_sum[static_cast<std::size_t>(t) * rows + n] = abs;
        }
    }));
  for (auto& f : parts) f.get();
}

// proj and abs_sum of k.x times `w` ([rows, hidden]).
void project(const Shape& s, const std::vector<double>& w, Tokens& k) {
  project_values(s, w, decode_all(s.e.act, k.x), k);
}

Tokens make_tokens(const Model& m, std::int64_t T, Rng& rng, CUstream stream) {
  const Shape& s = m.shape;
  Tokens k;
  k.T = T;
  k.x = random_values(s.e.act, static_cast<std::size_t>(T * s.stride()), 1.0, rng);
  project(s, m.w, k);
  k.d_x = to_device(k.x, stream);
  return k;
}

// One stream for the whole run, never destroyed (its context outlives static destructors).
fkv::Stream& test_stream() {
  fkv::ensure_context(0);
  static fkv::Stream* s = new fkv::Stream;
  return *s;
}

// What every test case sets up: the stream, a generator seeded with seed() + `seed_offset`, the
// model of `s` on the device (fresh random weights), a DecodeKV for it built with `o`, and
// `tokens` fresh random hidden states with their float64 projections.
struct DecodeCase {
  CUstream stream = test_stream().get();
  Rng rng;
  Model m;
  fkv::DecodeKV dec;
  Tokens tok;

  DecodeCase(const Shape& s, std::uint64_t seed_offset, const fkv::DecodeOptions& o,
             std::int64_t tokens)
      : rng(seed() + seed_offset),
        m(make_model(s, rng, stream)),
        dec(decode_model(m), o),
        tok(make_tokens(m, tokens, rng, stream)) {}
};

// Kernels for T up to `max_tokens`: stacked, pool or both.
fkv::DecodeOptions decode_options(std::int64_t max_tokens, bool stacked = true, bool pool = true) {
  fkv::DecodeOptions o;
  o.max_tokens = max_tokens;
  o.stacked = stacked;
  o.pool = pool;
  return o;
}

// Per-call indices: positions, and for pool mode distinct slots with some skipped.
struct Call {
  std::int64_t T = 0, num_slots = 0;
  std::vector<std::int64_t> pos, slot;
  std::vector<float> k_scales, v_scales;
};

Call make_call(const Shape& s, std::int64_t T, Rng& rng) {
  Call c;
  c.T = T;
  c.num_slots = T + 7;
  std::vector<std::int64_t> slots(static_cast<std::size_t>(c.num_slots));
  for (std::size_t i = 0; i < slots.size(); ++i) slots[i] = static_cast<std::int64_t>(i);
  for (std::size_t i = slots.size(); i > 1; --i)
    std::swap(slots[i - 1], slots[static_cast<std::size_t>(rng.range(0, std::int64_t(i) - 1))]);
  for (std::int64_t t = 0; t < T; ++t) {
    c.pos.push_back(rng.range(0, s.max_pos - 1));
    // Token 0 is always written, so that every call has rows to check (T = 1 too).
    c.slot.push_back(t > 0 && rng.coin(0.2) ? -1 : slots[static_cast<std::size_t>(t)]);
  }
  if (s.scales)
    for (int l = 0; l < s.layers; ++l) {
      c.k_scales.push_back(static_cast<float>(0.5 + 1.5 * rng.uniform()));
      c.v_scales.push_back(static_cast<float>(0.5 + 1.5 * rng.uniform()));
    }
  return c;
}

// The expected K and V, [L, T, H, D], in the stored domain, with magnitudes that include the
// GEMM's products (see the file comment).
struct Expected {
  fkv::ReferenceOutput k, v;
};

Expected expect(const Model& m, const Tokens& tok, const Call& c, DType cache) {
  const Shape& s = m.shape;
  const std::int64_t T = c.T, L = s.layers, H = s.e.num_kv_heads, D = s.e.head_dim,
                     R = s.e.rotary_dim;
  const std::int64_t rows = s.rows(), KV = s.kv();
  std::vector<float> proj32(static_cast<std::size_t>(T * rows));
  for (std::size_t i = 0; i < proj32.size(); ++i) proj32[i] = static_cast<float>(tok.proj[i]);
  fkv::ReferenceInputs in;
  in.spec = s.e;
  in.spec.act = DType::FP32;  // the fused kernel never rounds the projection
  in.spec.cos_sin = DType::FP32;
  in.spec.cache = cache;
  in.spec.positions = IndexType::I64;
  in.num_tokens = T;
  in.num_layers = L;
  in.proj = proj32.data();
  const std::vector<std::uint8_t> pos = index_bytes(IndexType::I64, c.pos);
  in.positions = pos.data();
  in.cos_sin = m.cos_sin_f32.empty() ? nullptr : m.cos_sin_f32.data();
  in.max_position = s.max_pos;
  in.k_norm_weight = m.k_norm.data();
  in.eps = m.eps;
  in.k_scales = c.k_scales;
  in.v_scales = c.v_scales;
  Expected e{fkv::reference_k(in), fkv::reference_v(in)};

  // GEMM magnitudes through the norm scale and RoPE.
  const std::int64_t half = R / 2;
  for (std::int64_t t = 0; t < T; ++t)
    for (std::int64_t l = 0; l < L; ++l) {
      const double ks =
          fkv::is_fp8(cache) && !c.k_scales.empty() ? c.k_scales[static_cast<std::size_t>(l)] : 1.0;
      const double vs =
          fkv::is_fp8(cache) && !c.v_scales.empty() ? c.v_scales[static_cast<std::size_t>(l)] : 1.0;
      for (std::int64_t h = 0; h < H; ++h) {
        const std::size_t kbase = static_cast<std::size_t>(t * rows + l * 2 * KV + h * D);
        const std::size_t vbase = kbase + static_cast<std::size_t>(KV);
        double inv = 1.0;
        if (s.e.k_norm == fkv::KNormKind::Rms) {
          double ss = 0;
          for (std::int64_t d = 0; d < D; ++d) ss += tok.proj[kbase + d] * tok.proj[kbase + d];
          inv = 1.0 / std::sqrt(ss / double(D) + m.eps[static_cast<std::size_t>(l)]);
        }
        auto a = [&](std::int64_t d) {
          const double w = s.e.k_norm == fkv::KNormKind::Rms
                               ? std::fabs(m.k_norm[static_cast<std::size_t>(l * D + d)])
                               : 1.0;
          return tok.abs_sum[kbase + static_cast<std::size_t>(d)] * inv * w;
        };
        const std::int64_t pos_row = R > 0 ? c.pos[static_cast<std::size_t>(t)] : 0;
        for (std::int64_t d = 0; d < D; ++d) {
          double mag = a(d);
          if (d < R) {
            const std::int64_t i = s.e.neox ? (d < half ? d : d - half) : d / 2;
            const std::int64_t partner = s.e.neox ? (d < half ? d + half : d - half) : (d ^ 1);
            const double cs = std::fabs(m.cos_sin_f32[static_cast<std::size_t>(pos_row * R + i)]);
            const double sn =
                std::fabs(m.cos_sin_f32[static_cast<std::size_t>(pos_row * R + half + i)]);
            mag = a(d) * cs + a(partner) * sn;
          }
          e.k.magnitude[e.k.index(l, t, h, d)] += mag / ks;
          e.v.magnitude[e.v.index(l, t, h, d)] +=
              tok.abs_sum[vbase + static_cast<std::size_t>(d)] / vs;
        }
      }
    }
  return e;
}

void require_match(DType dtype, const std::vector<std::uint8_t>& gpu,
                   const fkv::ReferenceOutput& ref, const std::string& what,
                   std::span<const std::uint8_t> mask = {}) {
  fkv::CompareOptions o;
  o.token_mask = mask;
  const fkv::CompareResult r = fkv::compare(dtype, gpu.data(), ref, o);
  INFO(r.summary(what));
  REQUIRE(r.checked > 0);
  REQUIRE(r.ok());
}

// The first T tokens of `tok` at the positions in `d_pos`.
fkv::DecodeInput decode_input(const Shape& s, const Tokens& tok, std::int64_t T,
                              const fkv::DeviceBuffer& d_pos) {
  fkv::DecodeInput in;
  in.hidden = tok.d_x.ptr();
  in.num_tokens = T;
  in.hidden_stride = s.stride();
  in.positions = d_pos.ptr();
  return in;
}

// One stacked call of the case's first `T` tokens against the reference.
void check_stacked(DecodeCase& fx, std::int64_t T) {
  const Shape& s = fx.m.shape;
  const CUstream stream = fx.stream;
  const Call c = make_call(s, T, fx.rng);
  INFO(s.name << " stacked T=" << T << " spec "
              << fx.dec.spec_for(T, OutputMode::Stacked).canonical());
  const auto bytes = static_cast<std::size_t>(s.layers * T * s.kv() * elem_size(s.e.act));
  fkv::DeviceBuffer k_out = alloc(bytes), v_out = alloc(bytes);
  const auto pos = index_bytes(s.e.positions, c.pos);
  fkv::DeviceBuffer d_pos = to_device(pos, stream);
  poison(k_out, stream);
  poison(v_out, stream);
  fx.dec.run_stacked(decode_input(s, fx.tok, T, d_pos), k_out.ptr(), v_out.ptr(), stream);
  const auto k = download(k_out, stream), v = download(v_out, stream);
  const Expected e = expect(fx.m, fx.tok, c, s.e.act);
  require_match(s.e.act, k, e.k, "k");
  require_match(s.e.act, v, e.v, "v");
}

// Pool buffers of one call, poisoned, and a check of what the kernel wrote into them.
struct PoolRun {
  std::vector<fkv::DeviceBuffer> k, v;
  std::vector<void*> kp, vp;
  fkv::DeviceBuffer d_pos, d_slot;
  std::int64_t slot_stride = 0, num_slots = 0;

  PoolRun(const Shape& s, const Call& c, CUstream stream) {
    slot_stride = s.kv() + 16;  // a gap after each slot, which must stay poisoned
    num_slots = c.num_slots;
    const auto bytes = static_cast<std::size_t>(c.num_slots * slot_stride * elem_size(s.e.cache));
    for (int l = 0; l < s.layers; ++l) {
      k.push_back(alloc(bytes));
      v.push_back(alloc(bytes));
      kp.push_back(k.back().ptr());
      vp.push_back(v.back().ptr());
    }
    d_pos = to_device(index_bytes(s.e.positions, c.pos), stream);
    d_slot = to_device(index_bytes(s.e.slots, c.slot), stream);
    poison_all(stream);
  }
  void poison_all(CUstream stream) {
    for (auto& b : k) poison(b, stream);
    for (auto& b : v) poison(b, stream);
  }
  fkv::DecodePool pool(const Call& c) const {
    fkv::DecodePool p;
    p.cache_loc = d_slot.ptr();
    p.k_buffers = kp;
    p.v_buffers = vp;
    p.slot_stride = slot_stride;
    p.num_slots = num_slots;
    p.k_scales = c.k_scales;
    p.v_scales = c.v_scales;
    return p;
  }
  // The same buffers as FusedKVMaterializer takes them (no scales: the materializer's own).
  fkv::FusedKVMaterializer::Pool materializer_pool() const {
    fkv::FusedKVMaterializer::Pool p;
    p.cache_loc = d_slot.ptr();
    p.k_buffers = kp;
    p.v_buffers = vp;
    p.num_slots = num_slots;
    p.slot_stride = slot_stride;
    return p;
  }
  // Gathers the written rows into [L, T, H, D] and checks every other byte is still poison.
  void verify(const Shape& s, const Call& c, const Expected& e, CUstream stream) const {
    const std::int64_t es = elem_size(s.e.cache), KV = s.kv(), T = c.T;
    std::vector<std::uint8_t> mask(static_cast<std::size_t>(T));
    std::vector<bool> written(static_cast<std::size_t>(c.num_slots), false);
    for (std::int64_t t = 0; t < T; ++t) {
      mask[static_cast<std::size_t>(t)] = c.slot[static_cast<std::size_t>(t)] >= 0;
      if (c.slot[static_cast<std::size_t>(t)] >= 0)
        written[static_cast<std::size_t>(c.slot[static_cast<std::size_t>(t)])] = true;
    }
    for (int which = 0; which < 2; ++which) {
      std::vector<std::uint8_t> gathered(static_cast<std::size_t>(s.layers * T * KV * es), kPoison);
      for (int l = 0; l < s.layers; ++l) {
        const auto host = download((which ? v : k)[static_cast<std::size_t>(l)], stream);
        for (std::int64_t slot = 0; slot < c.num_slots; ++slot) {
          const std::size_t row = static_cast<std::size_t>(slot * slot_stride * es);
          const std::size_t data_end = row + static_cast<std::size_t>(KV * es);
          const std::size_t row_end = row + static_cast<std::size_t>(slot_stride * es);
          INFO((which ? "v" : "k") << " pool layer " << l << " slot " << slot);
          CHECK(first_unpoisoned(host, data_end, row_end) == -1);  // the gap
          if (!written[static_cast<std::size_t>(slot)])
            CHECK(first_unpoisoned(host, row, data_end) == -1);
        }
        for (std::int64_t t = 0; t < T; ++t) {
          const std::int64_t slot = c.slot[static_cast<std::size_t>(t)];
          if (slot < 0) continue;
          std::memcpy(gathered.data() + ((l * T + t) * KV) * es,
                      host.data() + slot * slot_stride * es, static_cast<std::size_t>(KV * es));
        }
      }
      require_match(s.e.cache, gathered, which ? e.v : e.k, which ? "v" : "k", mask);
    }
  }
};

// One pool call of the case's first `T` tokens against the reference.
void check_pool(DecodeCase& fx, std::int64_t T) {
  const Shape& s = fx.m.shape;
  const Call c = make_call(s, T, fx.rng);
  INFO(s.name << " pool T=" << T << " spec " << fx.dec.spec_for(T, OutputMode::Pool).canonical());
  PoolRun run(s, c, fx.stream);  // poisoned
  fx.dec.run_pool(decode_input(s, fx.tok, T, run.d_pos), run.pool(c), fx.stream);
  run.verify(s, c, expect(fx.m, fx.tok, c, s.e.cache), fx.stream);
}

}  // namespace

TEST_CASE("decode kernel: Qwen3-8B DFlash draft shape, stacked and pool, T = 1..100") {
  Shape s{"qwen3-8b-dflash", qwen3(), 4096, 5};
  s.e.cache = DType::BF16;
  DecodeCase fx(s, 0, decode_options(64), 100);
  // Buckets 8/16/32/64, sizes between them, and more than one launch (100 = 64 + 36). The same
  // DecodeKV runs them back to back, so the arrival counters must return to zero every time.
  for (std::int64_t T : {1, 3, 8, 13, 16, 31, 33, 64, 100}) {
    check_stacked(fx, T);
    check_pool(fx, T);
  }
}

// A Qwen3-headed case of hidden 2048 and 3 layers over weights `w`, tiled by `t`, with kernels
// and fresh tokens for up to 64 tokens; and how INFO names it.
std::unique_ptr<DecodeCase> tuned_case(const char* name, fkv::WeightFormat w,
                                       const fkv::DecodeTuning& t, std::uint64_t seed_offset) {
  Shape s{name, qwen3(), 2048, 3};
  s.weight = w;
  fkv::DecodeOptions o = decode_options(64);
  o.tuning = t;
  return std::make_unique<DecodeCase>(s, seed_offset, o, 64);
}

std::string tuning_name(fkv::WeightFormat w, const fkv::DecodeTuning& t) {
  std::ostringstream o;
  o << fkv::to_string(w) << ", splits " << t.splits << ", k_slice " << t.k_slice << ", warps "
    << t.warps << ", x_resident " << t.x_resident << ", x_fp16 " << t.x_fp16;
  return o.str();
}

TEST_CASE("decode kernel: splits that do not divide the x stages (runs of whole stages)") {
  // Split s of S takes x stages [s * n / S, (s + 1) * n / S): with 3 or 5 splits some splits
  // hold one stage more. Dense and 8-bit weights (block scales: every split starts on a
  // 128-column block), one-head and 256-row tiles.
  std::uint64_t offset = 200;
  for (fkv::WeightFormat w :
       {fkv::WeightFormat::Dense, fkv::WeightFormat::Fp8Tensor, fkv::WeightFormat::Fp8Block})
    for (const fkv::DecodeTuning& t :
         {fkv::DecodeTuning{3, 0, 0, 0, 0}, fkv::DecodeTuning{5, 2, 1, 0, 0},
          fkv::DecodeTuning{3, 2, 2, 256, 8}}) {
      INFO(tuning_name(w, t));
      const auto c = tuned_case("uneven-splits", w, t, offset++);
      DecodeCase& fx = *c;
      for (std::int64_t T : {1, 8, 33, 64}) {
        check_stacked(fx, T);
        check_pool(fx, T);
      }
    }
}

TEST_CASE("decode kernel: resident x stages (x_resident), every weight format") {
  // Every x stage of a split issued at the start, each behind its own mbarrier: 8 warps x 2 MMA
  // tiles with 3 splits of 16 x stages (5 or 6 resident), 16 warps x 1 with 64-column stages
  // (10 or 11), and 512-row tiles with 6 splits (2 or 3).
  std::uint64_t offset = 500;
  for (fkv::WeightFormat w :
       {fkv::WeightFormat::Dense, fkv::WeightFormat::Fp8Tensor, fkv::WeightFormat::Fp8Channel,
        fkv::WeightFormat::Fp8Block, fkv::WeightFormat::Int8Channel})
    for (const fkv::DecodeTuning& t :
         {fkv::DecodeTuning{3, 2, 2, 128, 8, 1}, fkv::DecodeTuning{3, 1, 1, 64, 16, 1},
          fkv::DecodeTuning{6, 2, 4, 128, 8, 1}}) {
      if (w == fkv::WeightFormat::Fp8Block && t.k_slice < 128) continue;  // blocks per split
      INFO(tuning_name(w, t));
      const auto c = tuned_case("x-resident", w, t, offset++);
      DecodeCase& fx = *c;
      REQUIRE(fx.dec.spec_for(64, fkv::OutputMode::Pool).x_resident == 1);
      for (std::int64_t T : {1, 8, 33, 64}) {
        check_stacked(fx, T);
        check_pool(fx, T);
      }
    }
}

// Hidden states with a different scale per token and a wide spread within each: token t's
// elements are drawn as before, then multiplied by 2^a_t (a_t uniform in [-30, 30]) and each by
// 2^-b (b uniform in [0, 40]), so that some lie below 2^-32 of their token's largest; token 1
// is all zeros, and token 2 has one element 2^24 times its scale, which puts every other one
// below 2^-20 of it. (Larger would overflow K's fp32 sum of squares.) The projections are
// recomputed and x uploaded again.
void spread_tokens(DecodeCase& fx) {
  const Shape& s = fx.m.shape;
  Tokens& k = fx.tok;
  std::vector<double> x = decode_all(s.e.act, k.x);
  const std::size_t es = static_cast<std::size_t>(elem_size(s.e.act));
  for (std::int64_t t = 0; t < k.T; ++t) {
    const double a = std::ldexp(1.0, static_cast<int>(fx.rng.range(-30, 30)));
    for (std::int64_t i = 0; i < s.stride(); ++i) {
      const auto at = static_cast<std::size_t>(t * s.stride() + i);
      double v = x[at] * a * std::ldexp(1.0, -static_cast<int>(fx.rng.range(0, 40)));
      if (t == 1) v = 0;
      if (t == 2 && i == 7) v = a * std::ldexp(1.0, 24);
      store_value(s.e.act, v, k.x.data() + at * es);
    }
  }
  project(s, fx.m.w, k);
  k.d_x = to_device(k.x, fx.stream);
}

TEST_CASE("decode kernel: x re-encoded as scaled fp16 (x_fp16), every 8-bit format") {
  // bf16 hidden states re-encoded per token in shared memory as fp16 times a power of two
  // (templates/fused_proj_kv.cu), x resident (one power per split) or staged (one per stage,
  // folded in at each stage's end): one-head tiles with 256-column stages (the 8-token
  // default's shape), 16 warps x 1 and (resident) 8 warps x 2 with 128-column ones; tokens of
  // very different scales.
  std::uint64_t offset = 700;
  for (fkv::WeightFormat w : {fkv::WeightFormat::Fp8Tensor, fkv::WeightFormat::Fp8Channel,
                              fkv::WeightFormat::Fp8Block, fkv::WeightFormat::Int8Channel})
    for (const fkv::DecodeTuning& t :
         {fkv::DecodeTuning{3, 4, 1, 256, 0, 1, 1}, fkv::DecodeTuning{3, 2, 1, 128, 16, 1, 1},
          fkv::DecodeTuning{3, 2, 2, 128, 8, 1, 1}, fkv::DecodeTuning{3, 4, 1, 256, 0, 0, 1},
          fkv::DecodeTuning{3, 2, 1, 128, 16, 0, 1}}) {
      INFO(tuning_name(w, t));
      const auto c = tuned_case("x-fp16", w, t, offset++);
      DecodeCase& fx = *c;
      REQUIRE(fx.dec.spec_for(64, fkv::OutputMode::Pool).x_fp16 == 1);
      spread_tokens(fx);
      for (std::int64_t T : {1, 3, 8, 33, 64}) {
        check_stacked(fx, T);
        check_pool(fx, T);
      }
    }
}

TEST_CASE(
    "decode kernel: fp16, GPT-J, no K norm, fp8 e4m3 pool with scales, int32 indices, padded "
    "rows") {
  Shape s{"fp16-gptj-fp8", {}, 1024, 2};
  s.e.num_kv_heads = 4;
  s.e.head_dim = 64;
  s.e.rotary_dim = 64;
  s.e.neox = false;
  s.e.act = DType::FP16;
  s.e.cache = DType::FP8_E4M3;
  s.e.cos_sin = DType::FP16;
  s.e.positions = s.e.slots = IndexType::I32;
  s.hidden_pad = 24;
  s.scales = true;
  DecodeCase fx(s, 1, decode_options(16), 16);
  for (std::int64_t T : {2, 9, 16}) {
    check_stacked(fx, T);
    check_pool(fx, T);
  }
}

TEST_CASE("decode kernel: exactly 48 KB of dynamic shared memory plus the static arrays") {
  // 12 warps x 16 rows = 192-row tiles of 64-dim heads at 64 tokens: the tail's fp32 tile is
  // 4 * 64 * 192 = 49152 bytes, the x stages less; with the positions and slots in static shared
  // memory the CTA needs more than the 48 KB a kernel gets without opting in (DecodeKV opts in
  // from static + dynamic; it used to look at the dynamic size alone, and this launch failed).
  Shape s{"d64-48k", qwen3(8, 64, 64), 2048, 3};
  s.e.cache = DType::BF16;
  fkv::DecodeOptions o = decode_options(64);
  o.tuning = fkv::DecodeTuning{2, 2, 1, 128, 12};
  DecodeCase fx(s, 400, o, 64);
  REQUIRE(fx.dec.spec_for(64, fkv::OutputMode::Pool).shared_bytes() == 48 * 1024);
  for (std::int64_t T : {33, 64}) {
    check_stacked(fx, T);
    check_pool(fx, T);
  }
}

TEST_CASE("decode kernel: head_dim 256 with partial rotary, bf16 cos/sin, fp8 e5m2 pool") {
  Shape s{"d256-r64-e5m2", qwen3(2, 256, 64), 2048, 3};
  s.e.cos_sin = DType::BF16;
  s.e.cache = DType::FP8_E5M2;
  s.scales = true;
  DecodeCase fx(s, 2, decode_options(32, /*stacked=*/false), 32);
  for (std::int64_t T : {5, 32}) check_pool(fx, T);
}

TEST_CASE("decode kernel: head_dim 80 (five MMA tiles per CTA), one layer") {
  const Shape s{"d80", qwen3(2, 80, 80), 512, 1};
  DecodeCase fx(s, 3, decode_options(8, true, /*pool=*/false), 8);
  for (std::int64_t T : {1, 7}) check_stacked(fx, T);
}

TEST_CASE("decode kernel: captured in a CUDA graph, replayed twice with new inputs") {
  const Shape s{"qwen3-8b-dflash", qwen3(), 4096, 5};
  const std::int64_t T = 8;
  DecodeCase fx(s, 4, decode_options(T, /*stacked=*/false), T);
  const CUstream stream = fx.stream;
  const Call c = make_call(s, T, fx.rng);
  PoolRun run(s, c, stream);
  const fkv::DecodeInput in = decode_input(s, fx.tok, T, run.d_pos);
  const fkv::DecodePool pool = run.pool(c);

  FKV_CU(cuStreamSynchronize, stream);
  FKV_CU(cuStreamBeginCapture, stream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL);
  try {
    fx.dec.run_pool(in, pool, stream);
  } catch (...) {
    CUgraph broken = nullptr;
    fkv::Driver::get().cuStreamEndCapture(stream, &broken);
    if (broken) fkv::Driver::get().cuGraphDestroy(broken);
    throw;
  }
  CUgraph graph = nullptr;
  FKV_CU(cuStreamEndCapture, stream, &graph);
  GraphExec exec(graph);

  for (int replay = 0; replay < 2; ++replay) {
    INFO("replay " << replay);
    // New hidden states in the same buffer: the graph reads them, the counters start from zero.
    Tokens next = make_tokens(fx.m, T, fx.rng, stream);
    upload(fx.tok.d_x, next.x.data(), next.x.size(), stream);
    run.poison_all(stream);
    exec.launch(stream);
    run.verify(s, c, expect(fx.m, next, c, s.e.cache), stream);
  }
}

TEST_CASE("decode kernel: host-side argument checks") {
  const Shape s{"small", qwen3(1, 64, 64), 256, 1};
  DecodeCase fx(s, 5, decode_options(8, true, /*pool=*/false), 8);
  const CUstream stream = fx.stream;
  fkv::DecodeKV& dec = fx.dec;
  fkv::DeviceBuffer out = alloc(1 << 16), pos = alloc(64);
  fkv::DecodeInput in = decode_input(s, fx.tok, 8, pos);
  in.num_tokens = 0;
  dec.run_stacked(in, out.ptr(), out.ptr(), stream);  // T = 0 launches nothing
  in.num_tokens = 9;                                  // bucket 16 was not prepared
  CHECK_THROWS_AS(dec.run_stacked(in, out.ptr(), out.ptr(), stream), fkv::ArgumentError);
  in.num_tokens = 8;
  in.hidden_stride = 260;  // not a multiple of 8
  CHECK_THROWS_AS(dec.run_stacked(in, out.ptr(), out.ptr(), stream), fkv::ArgumentError);
  in.hidden_stride = 0;
  in.hidden = static_cast<const char*>(fx.tok.d_x.ptr()) + 2;
  CHECK_THROWS_AS(dec.run_stacked(in, out.ptr(), out.ptr(), stream), fkv::ArgumentError);
  in.hidden = fx.tok.d_x.ptr();
  CHECK_THROWS_AS(dec.run_pool(in, {}, stream), fkv::ArgumentError);  // no pool kernels, no buffers
  FKV_CU(cuStreamSynchronize, stream);
}

namespace {

// A call with three bad tokens for the bounds tests: `bad` as the kernel sees it (token 1 at a
// position past the table, token 2 at a negative position, token 3 at a slot past the pool),
// and `ok`, the same call as the reference and the pool check see it: those tokens skipped.
struct BadCall {
  Call bad, ok;
};

BadCall make_bad_call(const Shape& s, std::int64_t T, Rng& rng) {
  BadCall b;
  b.bad = b.ok = make_call(s, T, rng);
  b.bad.pos[1] = s.max_pos + 3;
  b.bad.pos[2] = -5;
  b.bad.slot[3] = b.bad.num_slots + 2;
  for (std::size_t t : {1, 2, 3}) b.ok.slot[t] = -1;
  b.ok.pos[1] = b.ok.pos[2] = 0;  // never written: any row of the table for the reference
  return b;
}

unsigned read_flag(const fkv::DeviceBuffer& flag, CUstream stream) {
  unsigned value = 0;
  FKV_CU(cuStreamSynchronize, stream);
  FKV_CU(cuMemcpyDtoH, &value, flag.get(), sizeof value);
  return value;
}

// The Model's weights as FusedKVMaterializer takes them, with the explicit per-layer config of
// the same shape (the cos/sin table is the Model's, given with set_cos_sin).
struct MaterializerFor {
  fkv::ModelConfig config;
  fkv::MaterializerWeights w;

  explicit MaterializerFor(const Model& m) {
    const Shape& s = m.shape;
    std::string layers;
    for (int l = 0; l < s.layers; ++l)
      layers += std::string(l ? ", " : "") +
                "{\"num_kv_heads\": " + std::to_string(s.e.num_kv_heads) +
                ", \"head_dim\": " + std::to_string(s.e.head_dim) +
                ", \"rotary_dim\": " + std::to_string(s.e.rotary_dim) +
                ", \"is_neox_style\": " + (s.e.neox ? "true" : "false") +
                ", \"rope_theta\": 10000, \"k_norm\": \"rms\", \"eps\": 1e-6}";
    const std::string text = "{\"max_position_embeddings\": " + std::to_string(s.max_pos) +
                             ", \"fkv\": {\"layers\": [" + layers + "]}}";
    config = fkv::ModelConfig::from_json(std::string_view(text), s.name);
    const std::size_t D = static_cast<std::size_t>(s.e.head_dim);
    w.format = s.weight;
    const int es = fkv::is_quantized(s.weight) ? 1 : elem_size(s.e.act);
    const std::int64_t per = fkv::layer_scale_count(s.weight, 2 * s.kv(), s.hidden);
    for (int l = 0; l < s.layers; ++l) {
      w.w_kv.push_back(static_cast<const char*>(m.d_w.ptr()) + l * 2 * s.kv() * s.hidden * es);
      if (fkv::is_quantized(s.weight))
        w.w_scale.push_back(static_cast<const float*>(m.d_w_scale.ptr()) + l * per);
      w.k_norm.emplace_back(m.k_norm.begin() + static_cast<std::ptrdiff_t>(l * D),
                            m.k_norm.begin() + static_cast<std::ptrdiff_t>((l + 1) * D));
    }
    w.eps = m.eps;
  }
};

}  // namespace

TEST_CASE("decode kernel: out-of-range positions and slots are skipped and flagged") {
  const Shape s{"qwen3-small", qwen3(4, 128, 128), 1024, 3};
  const std::int64_t T = 8;
  DecodeCase fx(s, 6, decode_options(T), T);
  const CUstream stream = fx.stream;
  fkv::DeviceBuffer flag = alloc(sizeof(unsigned));
  FKV_CU(cuMemsetD8Async, flag.get(), 0, sizeof(unsigned), stream);
  fkv::DecodeModel dm = decode_model(fx.m);
  dm.error_flag = static_cast<unsigned*>(flag.ptr());
  fkv::DecodeKV dec(dm, decode_options(T));

  const BadCall b = make_bad_call(s, T, fx.rng);
  PoolRun run(s, b.bad, stream);  // poisoned; the kernel reads the bad positions and slots
  dec.run_pool(decode_input(s, fx.tok, T, run.d_pos), run.pool(b.bad), stream);
  CHECK(read_flag(flag, stream) == (FKV_ERROR_BAD_POSITION | FKV_ERROR_BAD_SLOT));
  run.verify(s, b.ok, expect(fx.m, fx.tok, b.ok, s.e.cache), stream);  // the rest as usual

  // Stacked: the bad positions' rows stay poisoned, the others are right.
  FKV_CU(cuMemsetD8Async, flag.get(), 0, sizeof(unsigned), stream);
  const auto bytes = static_cast<std::size_t>(s.layers * T * s.kv() * elem_size(s.e.act));
  fkv::DeviceBuffer k_out = alloc(bytes), v_out = alloc(bytes);
  poison(k_out, stream);
  poison(v_out, stream);
  dec.run_stacked(decode_input(s, fx.tok, T, run.d_pos), k_out.ptr(), v_out.ptr(), stream);
  CHECK(read_flag(flag, stream) == FKV_ERROR_BAD_POSITION);
  const auto k = download(k_out, stream), v = download(v_out, stream);
  const std::size_t row = static_cast<std::size_t>(s.kv() * elem_size(s.e.act));
  for (int l = 0; l < s.layers; ++l)
    for (std::size_t t : {1, 2}) {
      const std::size_t at = (static_cast<std::size_t>(l * T) + t) * row;
      CHECK(first_unpoisoned(k, at, at + row) == -1);
      CHECK(first_unpoisoned(v, at, at + row) == -1);
    }
  std::vector<std::uint8_t> mask(static_cast<std::size_t>(T), 1);
  mask[1] = mask[2] = 0;
  const Expected e = expect(fx.m, fx.tok, b.ok, s.e.act);
  require_match(s.e.act, k, e.k, "k", mask);
  require_match(s.e.act, v, e.v, "v", mask);
}

TEST_CASE("FusedKVMaterializer takes the decode kernel up to its crossover") {
  const Shape s{"qwen3-small", qwen3(4, 128, 128), 1024, 3};
  const std::int64_t crossover = 8;
  DecodeCase fx(s, 7, decode_options(crossover), crossover);
  const CUstream stream = fx.stream;
  const MaterializerFor mf(fx.m);
  fkv::MaterializerOptions o;
  o.max_tokens = 64;
  o.external_cos_sin = true;  // the Model's table, which the reference reads
  o.decode_crossover = crossover;
  fkv::FusedKVMaterializer mat(mf.config, s.hidden, mf.w, o);
  REQUIRE(mat.decode_crossover() == crossover);
  mat.set_cos_sin(0, fx.m.d_cos_sin.ptr(), s.max_pos);

  // Pool and stacked at T = 3 and 8 against the float64 reference of the decode kernel (the
  // projection is never rounded to bf16, which the cuBLASLt path does).
  for (std::int64_t T : {3, 8}) {
    INFO("T=" << T);
    const Call c = make_call(s, T, fx.rng);
    PoolRun run(s, c, stream);
    const fkv::MaterializerInput in{fx.tok.d_x.ptr(), T, s.stride(), run.d_pos.ptr()};
    mat.materialize_pool(in, run.materializer_pool(), stream);
    run.verify(s, c, expect(fx.m, fx.tok, c, s.e.cache), stream);

    const auto bytes = static_cast<std::size_t>(s.layers * T * s.kv() * elem_size(s.e.act));
    fkv::DeviceBuffer k_out = alloc(bytes), v_out = alloc(bytes);
    poison(k_out, stream);
    poison(v_out, stream);
    void* kp = k_out.ptr();
    void* vp = v_out.ptr();
    mat.materialize_stacked(in, std::span<void* const>(&kp, 1), std::span<void* const>(&vp, 1),
                            stream);
    const Expected e = expect(fx.m, fx.tok, c, s.e.act);
    require_match(s.e.act, download(k_out, stream), e.k, "k");
    require_match(s.e.act, download(v_out, stream), e.v, "v");
  }

  // Bounds on this path too: the materializer's error word gets the bits.
  const BadCall b = make_bad_call(s, crossover, fx.rng);
  PoolRun run(s, b.bad, stream);
  const fkv::MaterializerInput in{fx.tok.d_x.ptr(), crossover, s.stride(), run.d_pos.ptr()};
  mat.materialize_pool(in, run.materializer_pool(), stream);
  CHECK(mat.take_error_flag(stream) == (FKV_ERROR_BAD_POSITION | FKV_ERROR_BAD_SLOT));
  run.verify(s, b.ok, expect(fx.m, fx.tok, b.ok, s.e.cache), stream);

  // A model the decode kernel cannot take keeps cuBLASLt: a K/V bias.
  MaterializerFor biased(fx.m);
  for (int l = 0; l < s.layers; ++l)
    biased.w.kv_bias.emplace_back(static_cast<std::size_t>(2 * s.kv()), 0.5f);
  fkv::FusedKVMaterializer with_bias(biased.config, s.hidden, biased.w, o);
  CHECK(with_bias.decode_crossover() == 0);
  // And 0 turns it off.
  o.decode_crossover = 0;
  fkv::FusedKVMaterializer off(mf.config, s.hidden, mf.w, o);
  CHECK(off.decode_crossover() == 0);
}

// ---- quantized weights (include/fkv/weights.hpp) ---------------------------------------------

namespace {

const fkv::WeightFormat kQuantized[] = {fkv::WeightFormat::Fp8Tensor, fkv::WeightFormat::Fp8Channel,
                                        fkv::WeightFormat::Fp8Block,
                                        fkv::WeightFormat::Int8Channel};

// Captures `body`'s launches on `stream` into a graph.
template <class F>
CUgraph capture(CUstream stream, F&& body) {
  FKV_CU(cuStreamSynchronize, stream);
  FKV_CU(cuStreamBeginCapture, stream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL);
  try {
    body();
  } catch (...) {
    CUgraph broken = nullptr;
    fkv::Driver::get().cuStreamEndCapture(stream, &broken);
    if (broken) fkv::Driver::get().cuGraphDestroy(broken);
    throw;
  }
  CUgraph graph = nullptr;
  FKV_CU(cuStreamEndCapture, stream, &graph);
  return graph;
}

// A stacked call of `T` tokens on the cuBLASLt path of `mat` (T above its crossover), run
// directly or (captured) captured into a CUDA graph and launched from it. The projection is
// checked in float64 against
//   - dequantized slices: x times the dequantized weights rounded as the dequantize kernel
//     rounds them, within the activation dtype's rounding plus fp32 slack (1e-5 of sum |x w|);
//   - the FP8 GEMM (mat.fp8_gemm()): x as the activation quantizer leaves it (fp8_activations)
//     times the exact dequantized weights, within the activation dtype's rounding plus 2^-12 of
//     sum |x w| (FP8 tensor cores keep fewer bits than fp32 between cuBLASLt's fp32 promotions;
//     a wrong scale, layout or activation rounding is off by far more);
//   - the INT8 GEMM (T <= mat.int8_gemm_tokens()): x itself times the exact dequantized weights,
//     within the rounding plus 1e-4 of sum |x w| (the two int8 parts keep x within 2^-16 of
//     its token's largest value: about 1e-5 of sum |x w| at most on these inputs; the high part
//     alone, a dropped low part, is off by about 4e-4);
// then K and V against the float64 epilogue of the projection the GPU computed (V bit-exact: a
// copy).
// With `refresh_to`, the graph is captured over the weights `mat` holds, refresh_weights then
// copies in those of *refresh_to, and the replay is checked against them.
void check_gemm_path(const Model& m0, fkv::FusedKVMaterializer& mat, const Tokens& tok,
                     std::int64_t T, Rng& rng, CUstream stream, bool captured = false,
                     const Model* refresh_to = nullptr) {
  const Model& m = refresh_to ? *refresh_to : m0;
  const Shape& s = m.shape;
  Tokens r;
  r.T = T;
  const bool fp8 = mat.fp8_gemm();
  const bool int8 = T <= mat.int8_gemm_tokens();
  if (fp8) {
    // Activations per token, or per token and 128 columns: fp8_block, and fp8_tensor and
    // fp8_channel calls of up to 64 tokens, which the materializer then gives the FP8 stream
    // GEMM (fp8_stream_gemm, sm_90) or cuBLASLt's block-scaled GEMM (fp8_tensor's per-layer scales
    // as blocks; fp8_channel's blocks all 1, its row scales applied to the GEMM's fp32 output).
    const bool blocks = s.weight == fkv::WeightFormat::Fp8Block || T <= 64;
    const int group = blocks ? 128 : 0;
    project_values(s, m.w,
                   fkv::fp8_activations(s.e.act, tok.x.data(), T, s.hidden, s.stride(), group), r);
  } else {
    r.x = tok.x;
    project(s, int8 ? m.w : m.w_rounded, r);
  }
  const double slack = fp8 ? std::ldexp(1.0, -12) : int8 ? 1e-4 : 1e-5;
  const Call c = make_call(s, T, rng);
  const fkv::DeviceBuffer d_pos = to_device(index_bytes(IndexType::I64, c.pos), stream);
  const auto bytes = static_cast<std::size_t>(s.layers * T * s.kv() * elem_size(s.e.act));
  fkv::DeviceBuffer k_out = alloc(bytes), v_out = alloc(bytes);
  poison(k_out, stream);
  poison(v_out, stream);
  void* kp = k_out.ptr();
  void* vp = v_out.ptr();
  const fkv::MaterializerInput in{tok.d_x.ptr(), T, s.stride(), d_pos.ptr()};
  auto call = [&] {
    mat.materialize_stacked(in, std::span<void* const>(&kp, 1), std::span<void* const>(&vp, 1),
                            stream);
  };
  if (captured) {
    GraphExec exec(capture(stream, call));
    if (refresh_to) mat.refresh_weights(MaterializerFor(*refresh_to).w, stream);
    exec.launch(stream);
  } else {
    call();
  }
  const std::int64_t N = mat.projection_width();
  REQUIRE(N == s.rows());
  std::vector<std::uint8_t> proj(static_cast<std::size_t>(T * N * elem_size(s.e.act)));
  FKV_CU(cuStreamSynchronize, stream);
  FKV_CU(cuMemcpyDtoH, proj.data(), mat.projection(), proj.size());
  const std::vector<double> got = decode_all(s.e.act, proj);
  std::int64_t bad = 0;
  double worst = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double tol = fkv::ulp(s.e.act, r.proj[i]) + slack * r.abs_sum[i];
    const double err = std::fabs(got[i] - r.proj[i]);
    worst = std::max(worst, err / tol);
    if (!(err <= tol)) ++bad;
  }
  WARN((fp8    ? "FP8 GEMM"
        : int8 ? "INT8 GEMM"
               : "dequantized slices")
       << " projection of " << fkv::to_string(s.weight) << " at T=" << T << ": worst error "
       << worst << "x the tolerance");
  INFO("projection: " << bad << " of " << got.size() << " outside tolerance, worst " << worst
                      << "x the tolerance");
  REQUIRE(bad == 0);

  fkv::ReferenceInputs ri;
  ri.spec = s.e;
  ri.spec.cos_sin = DType::FP32;
  ri.spec.positions = IndexType::I64;
  ri.num_tokens = T;
  ri.num_layers = s.layers;
  ri.proj = proj.data();
  const auto pos = index_bytes(IndexType::I64, c.pos);
  ri.positions = pos.data();
  ri.cos_sin = m.cos_sin_f32.data();
  ri.max_position = s.max_pos;
  ri.k_norm_weight = m.k_norm.data();
  ri.eps = m.eps;
  const auto k = download(k_out, stream), v = download(v_out, stream);
  require_match(s.e.act, k, fkv::reference_k(ri), "k");
  fkv::CompareOptions exact;
  exact.exact = true;
  const fkv::CompareResult rv = fkv::compare(s.e.act, v.data(), fkv::reference_v(ri), exact);
  INFO(rv.summary("v"));
  REQUIRE(rv.ok());
}

}  // namespace

TEST_CASE("decode kernel: quantized weights read as stored (fp8 tensor/channel/block, int8)") {
  std::uint64_t offset = 100;
  for (fkv::WeightFormat w : kQuantized) {
    for (DType act : {DType::BF16, DType::FP16}) {
      Shape s{"qwen3-quantized", qwen3(), 2048, 3};
      s.weight = w;
      s.e.act = s.e.cache = act;
      if (act == DType::FP16) {  // and an fp8 pool with scales
        s.e.cache = DType::FP8_E4M3;
        s.scales = true;
      }
      INFO(fkv::to_string(w) << ", activations " << fkv::to_string(act));
      DecodeCase fx(s, offset++, decode_options(64), 64);
      for (std::int64_t T : {1, 8, 33, 64}) {
        check_stacked(fx, T);
        check_pool(fx, T);
      }
    }
  }
}

TEST_CASE(
    "FusedKVMaterializer: quantized weights on the decode path, the FP8 and INT8 GEMMs and "
    "dequantized slices, graph replay after refresh_weights") {
  std::uint64_t offset = 200;
  for (fkv::WeightFormat w : kQuantized) {
    INFO(fkv::to_string(w));
    Shape s{"qwen3-quantized", qwen3(4, 128, 128), 1024, 3};
    s.weight = w;
    // 101 tokens: the FP8 GEMM pads them to 104 (a multiple of 4).
    const std::int64_t crossover = 8, T_big = 101;
    DecodeCase fx(s, offset++, decode_options(crossover), T_big);
    const CUstream stream = fx.stream;
    const MaterializerFor mf(fx.m);
    fkv::MaterializerOptions o;
    o.max_tokens = 128;
    o.external_cos_sin = true;
    o.decode_crossover = crossover;
    // Slices of 128 rows (24 of them): the two scratch buffers are each refilled many times.
    o.dequant_slice_bytes = static_cast<std::size_t>(128 * s.hidden * 2);
    fkv::FusedKVMaterializer mat(mf.config, s.hidden, mf.w, o);
    REQUIRE(mat.decode_crossover() == crossover);
    REQUIRE(mat.weight_format() == w);
    mat.set_cos_sin(0, fx.m.d_cos_sin.ptr(), s.max_pos);

    // The decode path, pool mode.
    const Call c = make_call(s, crossover, fx.rng);
    PoolRun run(s, c, stream);
    const fkv::MaterializerInput in{fx.tok.d_x.ptr(), crossover, s.stride(), run.d_pos.ptr()};
    mat.materialize_pool(in, run.materializer_pool(), stream);
    run.verify(s, c, expect(fx.m, fx.tok, c, s.e.cache), stream);

    // Above the crossover: FP8 weights take cuBLASLt's FP8 GEMM over the stored bytes (sm_90),
    // INT8 weights its int8 GEMM (up to max_tokens here); directly and from a captured graph.
    const bool fp8 = w != fkv::WeightFormat::Int8Channel;
    REQUIRE(mat.fp8_gemm() == fp8);
    REQUIRE(mat.int8_gemm_tokens() == (fp8 ? 0 : o.max_tokens));
    check_gemm_path(fx.m, mat, fx.tok, T_big, fx.rng, stream);
    check_gemm_path(fx.m, mat, fx.tok, T_big, fx.rng, stream, true);
    check_gemm_path(fx.m, mat, fx.tok, 40, fx.rng, stream);  // fp8_tensor: scales as blocks
    check_gemm_path(fx.m, mat, fx.tok, 40, fx.rng, stream, true);
    {  // and the weights as dequantized slices (fp8_gemm = false, int8_gemm_tokens = 0): never a
       // dense copy
      fkv::MaterializerOptions so = o;
      so.fp8_gemm = false;
      so.int8_gemm_tokens = 0;
      fkv::FusedKVMaterializer slices(mf.config, s.hidden, mf.w, so);
      REQUIRE(!slices.fp8_gemm());
      REQUIRE(slices.int8_gemm_tokens() == 0);
      slices.set_cos_sin(0, fx.m.d_cos_sin.ptr(), s.max_pos);
      check_gemm_path(fx.m, slices, fx.tok, T_big, fx.rng, stream);
      if (!fp8) {  // INT8 GEMM up to 64 tokens: 101 take the slices, 40 the GEMM
        so.int8_gemm_tokens = 64;
        fkv::FusedKVMaterializer capped(mf.config, s.hidden, mf.w, so);
        REQUIRE(capped.int8_gemm_tokens() == 64);
        capped.set_cos_sin(0, fx.m.d_cos_sin.ptr(), s.max_pos);
        check_gemm_path(fx.m, capped, fx.tok, T_big, fx.rng, stream);
        check_gemm_path(fx.m, capped, fx.tok, 40, fx.rng, stream, true);
      }
      // Built for 16 tokens, then grown by reserve_tokens: the FP8 GEMM's activation buffers
      // and its scale pointer follow, as do the INT8 GEMM's buffers.
      fkv::MaterializerOptions go = o;
      go.max_tokens = 16;
      fkv::FusedKVMaterializer grown(mf.config, s.hidden, mf.w, go);
      grown.set_cos_sin(0, fx.m.d_cos_sin.ptr(), s.max_pos);
      // A graph captured on the FP8 or INT8 GEMM before reserve_tokens (12 tokens, above the
      // crossover of 8) replays after it with the same bytes: it keeps the buffers it captured and
      // the GEMM's workspace (compute-sanitizer runs of this test catch a freed one).
      const std::int64_t T = 12;
      const Call c = make_call(s, T, fx.rng);
      const fkv::DeviceBuffer d_pos = to_device(index_bytes(IndexType::I64, c.pos), stream);
      const auto bytes = static_cast<std::size_t>(s.layers * T * s.kv() * elem_size(s.e.act));
      fkv::DeviceBuffer k_out = alloc(bytes), v_out = alloc(bytes);
      void* kp = k_out.ptr();
      void* vp = v_out.ptr();
      const fkv::MaterializerInput in12{fx.tok.d_x.ptr(), T, s.stride(), d_pos.ptr()};
      GraphExec before(capture(stream, [&] {
        grown.materialize_stacked(in12, std::span<void* const>(&kp, 1),
                                  std::span<void* const>(&vp, 1), stream);
      }));
      poison(k_out, stream);
      poison(v_out, stream);
      before.launch(stream);
      const std::vector<std::uint8_t> k12 = download(k_out, stream), v12 = download(v_out, stream);
      REQUIRE(grown.int8_gemm_tokens() == (fp8 ? 0 : 16));
      grown.reserve_tokens(T_big);
      REQUIRE(grown.fp8_gemm() == fp8);
      REQUIRE(grown.int8_gemm_tokens() == (fp8 ? 0 : T_big));
      check_gemm_path(fx.m, grown, fx.tok, T_big, fx.rng, stream);
      poison(k_out, stream);
      poison(v_out, stream);
      before.launch(stream);
      CHECK(download(k_out, stream) == k12);
      CHECK(download(v_out, stream) == v12);
    }

    // A graph captured on the decode path, replayed after refresh_weights with new weights.
    GraphExec exec(
        capture(stream, [&] { mat.materialize_pool(in, run.materializer_pool(), stream); }));
    run.poison_all(stream);
    exec.launch(stream);
    run.verify(s, c, expect(fx.m, fx.tok, c, s.e.cache), stream);
    const Model next = make_model(s, fx.rng, stream);
    mat.refresh_weights(MaterializerFor(next).w, stream);
    Tokens t2;
    t2.T = crossover;
    t2.x = fx.tok.x;
    project(s, next.w, t2);
    run.poison_all(stream);
    exec.launch(stream);
    run.verify(s, c, expect(next, t2, c, s.e.cache), stream);
    // A graph captured above the crossover, replayed after refresh_weights: the FP8 GEMM's
    // per-row scales (fp8_tensor's expanded, fp8_block's copy) follow the new scales.
    const Model third = make_model(s, fx.rng, stream);
    check_gemm_path(next, mat, fx.tok, T_big, fx.rng, stream, true, &third);
    // ... and at 40 tokens (fp8_tensor: the block scales follow too).
    const Model fourth = make_model(s, fx.rng, stream);
    check_gemm_path(third, mat, fx.tok, 40, fx.rng, stream, true, &fourth);
  }
}

TEST_CASE(
    "FusedKVMaterializer: the FP8 stream GEMM (sm_90) at 1-64 tokens, whole and partial tiles, "
    "direct and captured, the same bits on every call") {
  const bool hopper = fkv::runs_sm90a(fkv::Runtime::device_target(0));
  std::uint64_t offset = 300;
  // The Qwen3-8B draft's K/V rows and hidden size (2 layers: 4096 rows, 32 tiles of 32 k
  // blocks shared over the SMs); and 960 rows (the last 128-row tile half outside the weights)
  // of 512 columns.
  const Shape shapes[] = {{"qwen3-8b-stream", qwen3(), 4096, 2},
                          {"d80-partial-tile", qwen3(2, 80, 80), 512, 3}};
  for (const Shape& base : shapes)
    for (fkv::WeightFormat w : {fkv::WeightFormat::Fp8Tensor, fkv::WeightFormat::Fp8Channel})
      for (DType act : {DType::BF16, DType::FP16}) {
        Shape s = base;
        s.weight = w;
        s.e.act = s.e.cache = act;
        INFO(s.name << ", " << fkv::to_string(w) << ", activations " << fkv::to_string(act));
        DecodeCase fx(s, offset++, decode_options(64), 64);
        const MaterializerFor mf(fx.m);
        fkv::MaterializerOptions o;
        o.max_tokens = 64;
        o.external_cos_sin = true;
        o.decode_crossover = 0;  // every call on the FP8 GEMM path
        o.act = o.cache = act;
        o.fp8_stream_gemm = true;
        fkv::FusedKVMaterializer mat(mf.config, s.hidden, mf.w, o);
        mat.set_cos_sin(0, fx.m.d_cos_sin.ptr(), s.max_pos);
        REQUIRE(mat.fp8_gemm());
        REQUIRE(mat.fp8_stream_gemm() == hopper);
        for (std::int64_t T : {1, 5, 32, 33, 47, 64})
          check_gemm_path(fx.m, mat, fx.tok, T, fx.rng, fx.stream, T % 2 == 1);
        // Partial sums added in CTA order: a second call gives the same projection bytes.
        const std::size_t bytes = static_cast<std::size_t>(64 * s.rows() * elem_size(act));
        std::vector<std::uint8_t> first(bytes), again(bytes);
        FKV_CU(cuMemcpyDtoH, first.data(), mat.projection(), bytes);
        check_gemm_path(fx.m, mat, fx.tok, 64, fx.rng, fx.stream);
        FKV_CU(cuMemcpyDtoH, again.data(), mat.projection(), bytes);
        CHECK(first == again);
        // fp8_stream_gemm = false (the default): cuBLASLt's block-scaled GEMM, the same
        // activations (where
        // the rows are whole 128-row blocks; else its per-token GEMM, which check_gemm_path's
        // reference does not model below 65 tokens).
        if (s.rows() % 128 != 0) continue;
        fkv::MaterializerOptions no = o;
        no.fp8_stream_gemm = false;
        fkv::FusedKVMaterializer lt(mf.config, s.hidden, mf.w, no);
        lt.set_cos_sin(0, fx.m.d_cos_sin.ptr(), s.max_pos);
        REQUIRE(!lt.fp8_stream_gemm());
        check_gemm_path(fx.m, lt, fx.tok, 40, fx.rng, fx.stream);
      }
}

TEST_CASE("quantized weights: packed 4-bit schemes and wrong arguments are refused by name") {
  CHECK_THROWS_AS(fkv::parse_weight_format("gptq"), fkv::UnsupportedError);
  CHECK_THROWS_AS(fkv::parse_weight_format("nvfp4"), fkv::UnsupportedError);
  const Shape s{"qwen3-small", qwen3(4, 128, 128), 1024, 2};
  Rng rng(seed() + 300);
  const CUstream stream = test_stream().get();
  const Model m = make_model(s, rng, stream);
  MaterializerFor mf(m);
  mf.w.format = fkv::WeightFormat::Fp8Channel;  // dense bf16 bytes but no scales
  fkv::MaterializerOptions o;
  o.external_cos_sin = true;
  try {
    fkv::FusedKVMaterializer mat(mf.config, s.hidden, mf.w, o);
    FAIL("fp8 weights without scales were accepted");
  } catch (const fkv::ArgumentError& e) {
    CHECK(std::string(e.what()).find("w_scale has 0 entries") != std::string::npos);
  }
}

// ---- a token-major pool (include/fkv/kv_layout.hpp) --------------------------------------------

namespace {

// One allocation, every layer's K and V of a slot in one row, with gaps that must stay poisoned:
// 8 elements between a layer's K and V, 16 after its V, 32 at the end of each row.
struct TokenMajorRun {
  std::int64_t es = 0, KV = 0, L = 0, kv_offset = 0, layer_stride = 0, row = 0, num_slots = 0;
  fkv::DeviceBuffer pool, d_pos, d_slot;

  TokenMajorRun(const Shape& s, const Call& c, CUstream stream) {
    es = elem_size(s.e.cache);
    KV = s.kv();
    L = s.layers;
    kv_offset = KV + 8;
    layer_stride = kv_offset + KV + 16;
    row = L * layer_stride + 32;
    num_slots = c.num_slots;
    pool = alloc(static_cast<std::size_t>(num_slots * row * es));
    d_pos = to_device(index_bytes(s.e.positions, c.pos), stream);
    d_slot = to_device(index_bytes(s.e.slots, c.slot), stream);
    poison(pool, stream);
  }
  fkv::KVLayout layout() const {
    fkv::KVLayout l;
    l.kind = fkv::KVLayoutKind::TokenMajor;
    l.base = pool.ptr();
    l.cache_loc = d_slot.ptr();
    l.num_slots = num_slots;
    l.slot_stride = row;
    l.layer_stride = layer_stride;
    l.kv_offset = kv_offset;
    return l;
  }
  std::size_t at(std::int64_t slot, std::int64_t layer, int kv) const {
    return static_cast<std::size_t>((slot * row + layer * layer_stride + kv * kv_offset) * es);
  }
  // [L, T, H, D] K (kv 0) or V (kv 1) of the written tokens; checks that every byte outside
  // the written (slot, layer, k|v) rows is still poison.
  std::pair<std::vector<std::uint8_t>, std::vector<std::uint8_t>> gather(const Call& c,
                                                                         CUstream stream) const {
    std::vector<std::uint8_t> host = download(pool, stream);
    std::vector<std::uint8_t> out[2];
    const auto seg = static_cast<std::size_t>(KV * es);
    for (int kv = 0; kv < 2; ++kv) {
      out[kv].assign(static_cast<std::size_t>(L * c.T) * seg, kPoison);
      for (std::int64_t l = 0; l < L; ++l)
        for (std::int64_t t = 0; t < c.T; ++t) {
          const std::int64_t slot = c.slot[static_cast<std::size_t>(t)];
          if (slot < 0) continue;
          std::memcpy(out[kv].data() + static_cast<std::size_t>(l * c.T + t) * seg,
                      host.data() + at(slot, l, kv), seg);
        }
    }
    std::vector<std::uint8_t> rest = host;
    for (std::int64_t t = 0; t < c.T; ++t) {
      const std::int64_t slot = c.slot[static_cast<std::size_t>(t)];
      if (slot < 0) continue;
      for (std::int64_t l = 0; l < L; ++l)
        for (int kv = 0; kv < 2; ++kv) std::memset(rest.data() + at(slot, l, kv), kPoison, seg);
    }
    const std::int64_t stray = first_unpoisoned(rest, 0, rest.size());
    INFO("first byte written outside the token-major rows: "
         << stray << " (row " << (stray < 0 ? -1 : stray / (row * es)) << ")");
    CHECK(stray == -1);
    return {std::move(out[0]), std::move(out[1])};
  }
};

}  // namespace

TEST_CASE("token-major pool: decode path and cuBLASLt path against the float64 reference",
          "[kv_layout]") {
  const Shape s{"qwen3-small", qwen3(4, 128, 128), 1024, 3};
  const std::int64_t crossover = 8, T_big = 40;
  DecodeCase fx(s, 301, decode_options(crossover), T_big);
  const CUstream stream = fx.stream;
  const MaterializerFor mf(fx.m);
  fkv::MaterializerOptions o;
  o.max_tokens = 64;
  o.external_cos_sin = true;  // the Model's table, which the reference reads
  o.decode_crossover = crossover;
  fkv::FusedKVMaterializer mat(mf.config, s.hidden, mf.w, o);
  REQUIRE(mat.decode_crossover() == crossover);
  mat.set_cos_sin(0, fx.m.d_cos_sin.ptr(), s.max_pos);

  SECTION("decode path (T <= crossover): the reference, and the same bytes as per-layer rows") {
    for (std::int64_t T : {1, 5, 8}) {
      INFO("T=" << T);
      const Call c = make_call(s, T, fx.rng);
      TokenMajorRun tm(s, c, stream);  // poisoned
      const fkv::MaterializerInput in{fx.tok.d_x.ptr(), T, s.stride(), tm.d_pos.ptr()};
      mat.materialize(in, tm.layout(), stream);
      const auto [k, v] = tm.gather(c, stream);
      std::vector<std::uint8_t> mask(static_cast<std::size_t>(T));
      for (std::int64_t t = 0; t < T; ++t)
        mask[static_cast<std::size_t>(t)] = c.slot[static_cast<std::size_t>(t)] >= 0;
      const Expected e = expect(fx.m, fx.tok, c, s.e.cache);
      require_match(s.e.cache, k, e.k, "k", mask);
      require_match(s.e.cache, v, e.v, "v", mask);
      // The kernel and its inputs are the per-layer flat pool's: the same bits, K and V.
      PoolRun run(s, c, stream);
      mat.materialize_pool(in, run.materializer_pool(), stream);
      run.verify(s, c, e, stream);
      const std::size_t seg = static_cast<std::size_t>(s.kv() * elem_size(s.e.cache));
      for (int l = 0; l < s.layers; ++l)
        for (int kv = 0; kv < 2; ++kv) {
          const auto host = download((kv ? run.v : run.k)[static_cast<std::size_t>(l)], stream);
          const auto& tmv = kv ? v : k;
          for (std::int64_t t = 0; t < T; ++t) {
            const std::int64_t slot = c.slot[static_cast<std::size_t>(t)];
            if (slot < 0) continue;
            INFO("layer " << l << (kv ? " v" : " k") << " token " << t);
            CHECK(std::memcmp(host.data() + slot * run.slot_stride * elem_size(s.e.cache),
                              tmv.data() + static_cast<std::size_t>(l * T + t) * seg, seg) == 0);
          }
        }
    }
  }

  SECTION("cuBLASLt path (T > crossover): K within tolerance, V bit-exact of the projection") {
    const std::int64_t T = T_big;
    const Call c = make_call(s, T, fx.rng);
    TokenMajorRun tm(s, c, stream);
    const fkv::MaterializerInput in{fx.tok.d_x.ptr(), T, s.stride(), tm.d_pos.ptr()};
    mat.materialize(in, tm.layout(), stream);
    const auto [k, v] = tm.gather(c, stream);
    std::vector<std::uint8_t> proj(
        static_cast<std::size_t>(T * mat.projection_width() * elem_size(s.e.act)));
    FKV_CU(cuStreamSynchronize, stream);
    FKV_CU(cuMemcpyDtoH, proj.data(), mat.projection(), proj.size());
    fkv::ReferenceInputs ri;
    ri.spec = s.e;
    ri.spec.cos_sin = DType::FP32;
    ri.spec.positions = IndexType::I64;
    ri.num_tokens = T;
    ri.num_layers = s.layers;
    ri.proj = proj.data();
    const auto pos = index_bytes(IndexType::I64, c.pos);
    ri.positions = pos.data();
    ri.cos_sin = fx.m.cos_sin_f32.data();
    ri.max_position = s.max_pos;
    ri.k_norm_weight = fx.m.k_norm.data();
    ri.eps = fx.m.eps;
    std::vector<std::uint8_t> mask(static_cast<std::size_t>(T));
    for (std::int64_t t = 0; t < T; ++t)
      mask[static_cast<std::size_t>(t)] = c.slot[static_cast<std::size_t>(t)] >= 0;
    require_match(s.e.cache, k, fkv::reference_k(ri), "k", mask);
    fkv::CompareOptions exact;
    exact.exact = true;
    exact.token_mask = mask;
    const fkv::CompareResult rv = fkv::compare(s.e.cache, v.data(), fkv::reference_v(ri), exact);
    INFO(rv.summary("v"));
    REQUIRE(rv.checked > 0);
    REQUIRE(rv.ok());
  }

  SECTION("a layout that overlaps itself is refused before any launch") {
    const Call c = make_call(s, 4, fx.rng);
    TokenMajorRun tm(s, c, stream);
    fkv::KVLayout bad = tm.layout();
    bad.layer_stride = s.kv();  // K and V of a layer need 2*H*D + the gap
    const fkv::MaterializerInput in{fx.tok.d_x.ptr(), 4, s.stride(), tm.d_pos.ptr()};
    CHECK_THROWS_WITH(mat.materialize(in, bad, stream),
                      Catch::Contains("token_major layout overlaps itself"));
    bad = tm.layout();
    bad.head_stride = 2 * s.e.head_dim;  // paged addressing: this materializer is not paged
    bad.kv_offset = s.kv() * 2;
    bad.layer_stride = s.kv() * 4;
    bad.slot_stride = s.layers * bad.layer_stride;
    CHECK_THROWS_WITH(mat.materialize(in, bad, stream),
                      Catch::Contains("construct with MaterializerOptions::paged = true"));
    (void)tm.gather(c, stream);  // nothing written
  }
}
