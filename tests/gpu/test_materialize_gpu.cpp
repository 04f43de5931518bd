// The fused KV kernel on a GPU against the float64 reference: a randomized sweep
// over the specializations, a few large token counts, T = 0, CUDA graph capture and replay,
// launches from several threads, the device-side debug checks and the host-side argument
// checks. Outputs are poisoned (0xff bytes, NaN in every output dtype) before each launch so
// that an element the kernel fails to write, or writes where it must not, shows.
//
// Environment: FKV_TEST_SEED (default: time), FKV_TEST_CASES (random cases, default 120),
// FKV_TEST_ONLY (run only that random case index, to reproduce a failure).
#include <catch2/catch.hpp>
#include <sstream>
#include <thread>

#include "fkv/errors.hpp"
#include "fkv/kernel_params.h"
#include "fkv/materialize.hpp"
#include "fkv/runtime.hpp"
#include "gpu/gpu_test.hpp"
#include "gpu_harness.hpp"

using fkv::DType;
using fkv::IndexType;
using fkv::OutputMode;
using namespace fkv_test;

namespace {

// ---- one test case: the spec plus shapes, strides and data parameters ------------------------

struct Case {
  fkv::KernelSpec spec;
  std::int64_t T = 1, L = 1;
  std::int64_t proj_pad_layer = 0, proj_pad_token = 0;  // elements beyond the packed rows
  std::int64_t max_pos = 1, cs_pad = 0, cs_guard_rows = 0;
  std::int64_t num_slots = 0, slot_pad = 0, guard_slots = 0;  // pool mode
  double sigma = 1.0;
  double skip = 0.0;         // fraction of cache_loc = -1
  bool use_scales = false;   // per-layer k/v scales (pool mode with an FP8 cache)
  bool default_eps = false;  // pass no eps (1e-6 each)

  std::int64_t kv() const { return std::int64_t{spec.num_kv_heads} * spec.head_dim; }
  std::int64_t stride_layer() const { return 2 * kv() + proj_pad_layer; }
  std::int64_t stride_token() const { return L * stride_layer() + proj_pad_token; }
  std::int64_t cs_stride() const { return spec.rotary_dim + cs_pad; }
  std::int64_t slot_stride() const { return kv() + slot_pad; }
  bool pool() const { return spec.mode == OutputMode::Pool; }

  std::string describe() const {
    std::ostringstream os;
    os << "[" << spec.canonical() << "] T=" << T << " L=" << L << " stride_token=" << stride_token()
       << " stride_layer=" << stride_layer() << " max_pos=" << max_pos
       << " cs_stride=" << cs_stride() << " sigma=" << sigma << (default_eps ? " eps=default" : "");
    if (pool())
      os << " num_slots=" << num_slots << " slot_stride=" << slot_stride() << " skip=" << skip
         << (use_scales ? " scales" : "");
    return os.str();
  }
};

// Host copies of everything the kernel reads.
struct HostData {
  std::vector<std::uint8_t> proj, positions, cos_sin, cache_loc;
  std::vector<std::int64_t> pos_values, slot_values;
  std::vector<float> weight, eps, k_scales, v_scales;
};

void encode_indices(HostData& h, const Case& c) {
  h.positions = index_bytes(c.spec.positions, h.pos_values);
  h.cache_loc = index_bytes(c.spec.slots, h.slot_values);
}

// Fresh random contents for `c`'s shapes. keep_layer_params keeps eps and scales, which a
// captured graph holds by value.
void fill_inputs(HostData& h, const Case& c, Rng& rng, bool keep_layer_params = false) {
  const fkv::KernelSpec& s = c.spec;
  h.proj = random_values(s.act, static_cast<std::size_t>(c.T * c.stride_token()), c.sigma, rng);
  h.pos_values.resize(static_cast<std::size_t>(c.T));
  for (auto& p : h.pos_values) p = rng.range(0, c.max_pos - 1);
  h.cos_sin.clear();
  if (s.rotary_dim > 0) {
    const std::int64_t rows = c.max_pos + c.cs_guard_rows, half = s.rotary_dim / 2;
    const int w = elem_size(s.cos_sin);
    h.cos_sin.assign(static_cast<std::size_t>(rows * c.cs_stride() * w), 0);
    for (std::int64_t r = 0; r < rows; ++r) {
      std::uint8_t* row = h.cos_sin.data() + r * c.cs_stride() * w;
      for (std::int64_t i = 0; i < half; ++i) {
        const double angle = 6.283185307179586 * rng.uniform();
        store_value(s.cos_sin, std::cos(angle), row + i * w);
        store_value(s.cos_sin, std::sin(angle), row + (half + i) * w);
      }
      for (std::int64_t i = s.rotary_dim; i < c.cs_stride(); ++i)
        store_value(s.cos_sin, 7.0, row + i * w);
    }
  }
  h.weight.clear();
  if (fkv::k_norm_weighted(s.k_norm)) {
    h.weight.resize(static_cast<std::size_t>(c.L * s.head_dim));
    for (auto& x : h.weight) x = static_cast<float>(1.0 + 0.2 * rng.normal());
  }
  if (!keep_layer_params) {
    h.eps.clear();
    if (!c.default_eps)
      for (std::int64_t l = 0; l < c.L; ++l)
        h.eps.push_back(static_cast<float>(std::pow(10.0, -8 + 7 * rng.uniform())));
    h.k_scales.clear();
    h.v_scales.clear();
    if (c.use_scales)
      for (std::int64_t l = 0; l < c.L; ++l) {
        h.k_scales.push_back(static_cast<float>(std::exp2(-6 + 7 * rng.uniform())));
        h.v_scales.push_back(static_cast<float>(std::exp2(-6 + 7 * rng.uniform())));
      }
  }
  h.slot_values.clear();
  if (c.pool()) {
    // The first T entries of a random permutation of the slots, some replaced by -1.
    std::vector<std::int64_t> perm(static_cast<std::size_t>(c.num_slots));
    for (std::size_t i = 0; i < perm.size(); ++i) perm[i] = static_cast<std::int64_t>(i);
    for (std::int64_t t = 0; t < c.T; ++t) {
      std::swap(perm[static_cast<std::size_t>(t)],
                perm[static_cast<std::size_t>(rng.range(t, c.num_slots - 1))]);
      h.slot_values.push_back(rng.coin(c.skip) ? -1 : perm[static_cast<std::size_t>(t)]);
    }
  }
  encode_indices(h, c);
}

struct DeviceData {
  fkv::DeviceBuffer proj, positions, cos_sin, weight, cache_loc, flag;
  fkv::DeviceBuffer k_out, v_out;  // stacked, with a guard after the last element
  std::vector<fkv::DeviceBuffer> k_pool, v_pool;
  std::vector<void*> k_ptrs, v_ptrs;
};

constexpr std::size_t kGuardBytes = 256;

std::size_t stacked_bytes(const Case& c) {
  return static_cast<std::size_t>(c.L * c.T * c.kv() * elem_size(c.spec.cache));
}
std::size_t pool_bytes(const Case& c) {
  return static_cast<std::size_t>((c.num_slots + c.guard_slots) * c.slot_stride() *
                                  elem_size(c.spec.cache));
}

DeviceData allocate(const Case& c, const HostData& h) {
  DeviceData d;
  d.proj = alloc(h.proj.size());
  d.positions = alloc(h.positions.size());
  d.cos_sin = alloc(h.cos_sin.size());
  d.weight = alloc(h.weight.size() * sizeof(float));
  d.cache_loc = alloc(h.cache_loc.size());
  d.flag = alloc(sizeof(unsigned));
  if (c.pool()) {
    for (std::int64_t l = 0; l < c.L; ++l) {
      d.k_pool.push_back(alloc(pool_bytes(c)));
      d.v_pool.push_back(alloc(pool_bytes(c)));
      d.k_ptrs.push_back(d.k_pool.back().ptr());
      d.v_ptrs.push_back(d.v_pool.back().ptr());
    }
  } else {
    d.k_out = alloc(stacked_bytes(c) + kGuardBytes);
    d.v_out = alloc(stacked_bytes(c) + kGuardBytes);
  }
  return d;
}

void upload_inputs(const DeviceData& d, const HostData& h, CUstream s) {
  upload(d.proj, h.proj.data(), h.proj.size(), s);
  upload(d.positions, h.positions.data(), h.positions.size(), s);
  upload(d.cos_sin, h.cos_sin.data(), h.cos_sin.size(), s);
  upload(d.weight, h.weight.data(), h.weight.size() * sizeof(float), s);
  upload(d.cache_loc, h.cache_loc.data(), h.cache_loc.size(), s);
}

void poison_outputs(const DeviceData& d, CUstream s) {
  for (const auto& b : d.k_pool) poison(b, s);
  for (const auto& b : d.v_pool) poison(b, s);
  if (d.k_out.size()) poison(d.k_out, s);
  if (d.v_out.size()) poison(d.v_out, s);
  FKV_CU(cuMemsetD32Async, d.flag.get(), 0u, 1, s);
}

fkv::FusedKVInputs inputs_of(const Case& c, const HostData& h, const DeviceData& d) {
  fkv::FusedKVInputs in;
  in.proj = d.proj.ptr();
  in.num_tokens = c.T;
  in.num_layers = c.L;
  in.proj_stride_token = c.stride_token();
  in.proj_stride_layer = c.stride_layer();
  in.positions = d.positions.ptr();
  in.cos_sin = c.spec.rotary_dim > 0 ? d.cos_sin.ptr() : nullptr;
  in.max_position = c.max_pos;
  in.cos_sin_stride = c.spec.rotary_dim > 0 ? c.cs_stride() : 0;
  in.k_norm_weight =
      fkv::k_norm_weighted(c.spec.k_norm) ? static_cast<const float*>(d.weight.ptr()) : nullptr;
  in.eps = h.eps;
  in.error_flag = c.spec.debug_checks ? static_cast<unsigned*>(d.flag.ptr()) : nullptr;
  return in;
}

fkv::StackedOutput stacked_of(const DeviceData& d) { return {d.k_out.ptr(), d.v_out.ptr()}; }

fkv::PoolOutput pool_of(const Case& c, const HostData& h, const DeviceData& d) {
  fkv::PoolOutput out;
  out.cache_loc = d.cache_loc.ptr();
  out.k_buffers = d.k_ptrs;
  out.v_buffers = d.v_ptrs;
  out.num_slots = c.num_slots;
  out.slot_stride = c.slot_stride();
  out.k_scales = h.k_scales;
  out.v_scales = h.v_scales;
  return out;
}

void launch(const fkv::LoadedKernel& k, const Case& c, const HostData& h, const DeviceData& d,
            CUstream s) {
  if (c.pool())
    fkv::materialize_pool(k, inputs_of(c, h, d), pool_of(c, h, d), s);
  else
    fkv::materialize_stacked(k, inputs_of(c, h, d), stacked_of(d), s);
}

// Host copies of the output buffers.
struct OutputBytes {
  std::vector<std::uint8_t> k_out, v_out;
  std::vector<std::vector<std::uint8_t>> k_pool, v_pool;
};

OutputBytes download_outputs(const DeviceData& d, CUstream s) {
  OutputBytes o;
  if (d.k_out.size()) o.k_out = download(d.k_out, s);
  if (d.v_out.size()) o.v_out = download(d.v_out, s);
  for (const auto& b : d.k_pool) o.k_pool.push_back(download(b, s));
  for (const auto& b : d.v_pool) o.v_pool.push_back(download(b, s));
  return o;
}

// Tokens whose output is defined: a position inside the cos/sin table (with RoPE) and, in pool
// mode, a slot inside the pool. The others are skipped by the kernel (their slots stay poison).
std::vector<std::uint8_t> token_mask(const Case& c, const HostData& h) {
  std::vector<std::uint8_t> mask(static_cast<std::size_t>(c.T), 1);
  for (std::int64_t t = 0; t < c.T; ++t) {
    const std::int64_t p = h.pos_values[static_cast<std::size_t>(t)];
    if (c.spec.rotary_dim > 0 && (p < 0 || p >= c.max_pos)) mask[static_cast<std::size_t>(t)] = 0;
    if (c.pool()) {
      const std::int64_t slot = h.slot_values[static_cast<std::size_t>(t)];
      if (slot < 0 || slot >= c.num_slots) mask[static_cast<std::size_t>(t)] = 0;
    }
  }
  return mask;
}

// True when an element of w bytes in [begin, end) is all poison: never written (poison is NaN in
// every output format, and the kernel never writes NaN from finite inputs).
bool has_unwritten_element(const std::vector<std::uint8_t>& b, std::size_t begin, std::size_t end,
                           int w) {
  for (std::size_t i = begin; i + static_cast<std::size_t>(w) <= end;
       i += static_cast<std::size_t>(w)) {
    bool poison = true;
    for (int j = 0; j < w && poison; ++j) poison = b[i + static_cast<std::size_t>(j)] == kPoison;
    if (poison) return true;
  }
  return false;
}

// Pool rows, all of them: a row a valid token targets is written in full and its padding is
// still poison; every other row (and the guard rows past num_slots) is still poison.
std::vector<std::string> pool_row_failures(const Case& c, const HostData& h, const OutputBytes& o,
                                           const std::vector<std::uint8_t>& mask) {
  std::vector<std::string> failures;
  const int w = elem_size(c.spec.cache);
  const std::int64_t kv = c.kv();
  const std::int64_t rows = c.num_slots + c.guard_slots, row_bytes = c.slot_stride() * w;
  enum : std::uint8_t { kUntouched, kChecked, kDontCare };
  std::vector<std::uint8_t> row_state(static_cast<std::size_t>(rows), kUntouched);
  for (std::int64_t t = 0; t < c.T; ++t) {
    const std::int64_t slot = h.slot_values[static_cast<std::size_t>(t)];
    if (slot >= 0 && slot < c.num_slots)
      row_state[static_cast<std::size_t>(slot)] =
          mask[static_cast<std::size_t>(t)] ? kChecked : kDontCare;
  }
  for (std::int64_t l = 0; l < c.L; ++l) {
    for (int kind = 0; kind < 2; ++kind) {
      const std::vector<std::uint8_t>& buf =
          (kind ? o.v_pool : o.k_pool)[static_cast<std::size_t>(l)];
      for (std::int64_t r = 0; r < rows; ++r) {
        const auto state = row_state[static_cast<std::size_t>(r)];
        if (state == kDontCare) continue;
        const auto row = static_cast<std::size_t>(r * row_bytes);
        const auto begin = row + static_cast<std::size_t>(state == kChecked ? kv * w : 0);
        const std::int64_t bad =
            first_unpoisoned(buf, begin, static_cast<std::size_t>((r + 1) * row_bytes));
        const bool unwritten = state == kChecked && has_unwritten_element(buf, row, begin, w);
        if ((bad >= 0 || unwritten) && failures.size() < 4) {
          std::ostringstream os;
          os << (kind ? "v" : "k") << "_buffers[" << l << "] slot " << r;
          if (unwritten)
            os << " was not written in full";
          else
            os << (r >= c.num_slots    ? " (beyond num_slots)"
                   : state == kChecked ? " padding"
                                       : " (no token targets it)")
               << " was written at byte " << (bad - r * row_bytes) << " of the row";
          failures.push_back(os.str());
          break;
        }
      }
    }
  }
  return failures;
}

// Compares everything the launch wrote with the reference. Tokens with an out-of-range
// position or slot (debug-mode tests) are not compared; their slots must stay untouched.
std::vector<std::string> check_outputs(const Case& c, const HostData& h, const OutputBytes& o) {
  std::vector<std::string> failures;
  const fkv::KernelSpec& spec = c.spec;
  const std::int64_t T = c.T, kv = c.kv();
  const int w = elem_size(spec.cache);

  // Valid tokens; a sanitized copy of the positions for the reference.
  const std::vector<std::uint8_t> mask = token_mask(c, h);
  std::vector<std::int64_t> positions = h.pos_values;
  for (std::int64_t t = 0; t < T; ++t)
    if (!mask[static_cast<std::size_t>(t)] && spec.rotary_dim > 0)
      positions[static_cast<std::size_t>(t)] = 0;
  const std::vector<std::uint8_t> pos_bytes = index_bytes(spec.positions, positions);

  fkv::ReferenceInputs ri;
  ri.spec = spec;
  ri.num_tokens = T;
  ri.num_layers = c.L;
  ri.proj = h.proj.data();
  ri.proj_stride_token = c.stride_token();
  ri.proj_stride_layer = c.stride_layer();
  ri.positions = pos_bytes.data();
  ri.cos_sin = h.cos_sin.data();
  ri.max_position = c.max_pos;
  ri.cos_sin_stride = c.cs_stride();
  ri.k_norm_weight = h.weight.data();
  ri.eps = h.eps;
  ri.k_scales = h.k_scales;
  ri.v_scales = h.v_scales;
  const fkv::ReferenceOutput ref_k = fkv::reference_k(ri), ref_v = fkv::reference_v(ri);

  fkv::CompareOptions k_opt, v_opt;
  k_opt.exact = spec.cache == spec.act && spec.rotary_dim == 0 &&
                spec.k_norm == fkv::KNormKind::None;  // a plain copy
  v_opt.exact = spec.cache == spec.act;
  k_opt.token_mask = mask;
  v_opt.token_mask = mask;

  std::vector<std::uint8_t> k_bits, v_bits;
  if (!c.pool()) {
    k_bits = o.k_out;
    v_bits = o.v_out;
    const std::size_t n = stacked_bytes(c);
    if (first_unpoisoned(k_bits, n, k_bits.size()) >= 0 ||
        first_unpoisoned(v_bits, n, v_bits.size()) >= 0)
      failures.push_back("written past the end of k_out/v_out");
  } else {
    // Gather each token's row into the stacked layout; every row no token targets, and the
    // padding of every row, must still be poison.
    k_bits.assign(stacked_bytes(c), kPoison);
    v_bits.assign(stacked_bytes(c), kPoison);
    const std::int64_t row_bytes = c.slot_stride() * w;
    for (std::int64_t l = 0; l < c.L; ++l) {
      for (int kind = 0; kind < 2; ++kind) {
        const std::vector<std::uint8_t>& buf =
            (kind ? o.v_pool : o.k_pool)[static_cast<std::size_t>(l)];
        std::vector<std::uint8_t>& out = kind ? v_bits : k_bits;
        for (std::int64_t t = 0; t < T; ++t) {
          const std::int64_t slot = h.slot_values[static_cast<std::size_t>(t)];
          if (!mask[static_cast<std::size_t>(t)]) continue;
          std::memcpy(out.data() + ((l * T + t) * kv) * w, buf.data() + slot * row_bytes,
                      static_cast<std::size_t>(kv * w));
        }
      }
    }
    for (auto& f : pool_row_failures(c, h, o, mask)) failures.push_back(std::move(f));
  }
  const fkv::CompareResult rk = fkv::compare(spec.cache, k_bits.data(), ref_k, k_opt);
  const fkv::CompareResult rv = fkv::compare(spec.cache, v_bits.data(), ref_v, v_opt);
  if (!rk.ok()) failures.push_back(rk.summary("k"));
  if (!rv.ok()) failures.push_back(rv.summary("v"));
  for (auto& f : failures) f = c.describe() + ": " + f;
  return failures;
}

// Large cases: every output row is checked for unwritten elements and every pool row for stray
// writes, as above, but only kSampledTokens tokens (evenly spaced, first and last included) are
// compared with the float64 reference: the full reference of 10^8 elements takes minutes.
constexpr std::int64_t kSampledTokens = 256;
constexpr std::int64_t kSampleAboveElements = std::int64_t{1} << 22;

std::vector<std::string> check_sampled(const Case& c, const HostData& h, const OutputBytes& o) {
  const std::int64_t kv = c.kv(), n = kSampledTokens;
  if (c.T <= 2 * n || c.L * c.T * kv <= kSampleAboveElements) return check_outputs(c, h, o);
  const int w = elem_size(c.spec.cache), a = elem_size(c.spec.act);
  std::vector<std::string> failures;
  const std::vector<std::uint8_t> mask = token_mask(c, h);
  if (c.pool()) {
    failures = pool_row_failures(c, h, o, mask);
  } else {
    const std::size_t bytes = stacked_bytes(c);
    for (const auto* b : {&o.k_out, &o.v_out}) {
      if (first_unpoisoned(*b, bytes, b->size()) >= 0)
        failures.push_back("written past the end of k_out/v_out");
      // Stacked rows of tokens the kernel skips (debug-mode positions) may stay poison.
      for (std::int64_t l = 0; l < c.L && failures.empty(); ++l)
        for (std::int64_t t = 0; t < c.T; ++t)
          if (mask[static_cast<std::size_t>(t)] &&
              has_unwritten_element(*b, static_cast<std::size_t>((l * c.T + t) * kv * w),
                                    static_cast<std::size_t>((l * c.T + t + 1) * kv * w), w)) {
            failures.push_back("layer " + std::to_string(l) + " token " + std::to_string(t) +
                               " was not written in full");
            break;
          }
    }
  }
  for (auto& f : failures) f = c.describe() + ": " + f;

  // The sampled tokens as a case of their own: proj rows, positions, slots and outputs gathered.
  Case cs = c;
  cs.T = n;
  HostData hs = h;
  hs.proj.assign(static_cast<std::size_t>(n * c.stride_token() * a), 0);
  hs.pos_values.resize(static_cast<std::size_t>(n));
  hs.slot_values.clear();
  OutputBytes os;
  const std::size_t row = static_cast<std::size_t>(kv * w);
  if (c.pool()) {
    cs.num_slots = n, cs.guard_slots = 0;
    os.k_pool.assign(
        static_cast<std::size_t>(c.L),
        std::vector<std::uint8_t>(static_cast<std::size_t>(n * c.slot_stride() * w), kPoison));
    os.v_pool = os.k_pool;
  } else {
    os.k_out.assign(stacked_bytes(cs) + kGuardBytes, kPoison);
    os.v_out = os.k_out;
  }
  for (std::int64_t i = 0; i < n; ++i) {
    const std::int64_t t = i * (c.T - 1) / (n - 1);
    std::memcpy(hs.proj.data() + i * c.stride_token() * a, h.proj.data() + t * c.stride_token() * a,
                static_cast<std::size_t>(c.stride_token() * a));
    hs.pos_values[static_cast<std::size_t>(i)] = h.pos_values[static_cast<std::size_t>(t)];
    for (std::int64_t l = 0; l < c.L; ++l) {
      if (c.pool()) {
        const std::int64_t slot = h.slot_values[static_cast<std::size_t>(t)];
        const bool valid = slot >= 0 && slot < c.num_slots;
        if (l == 0) hs.slot_values.push_back(valid ? i : -1);
        if (!valid) continue;
        const std::size_t from = static_cast<std::size_t>(slot * c.slot_stride() * w);
        const std::size_t to = static_cast<std::size_t>(i * c.slot_stride() * w);
        std::memcpy(os.k_pool[static_cast<std::size_t>(l)].data() + to,
                    o.k_pool[static_cast<std::size_t>(l)].data() + from, row);
        std::memcpy(os.v_pool[static_cast<std::size_t>(l)].data() + to,
                    o.v_pool[static_cast<std::size_t>(l)].data() + from, row);
      } else {
        const std::size_t from = static_cast<std::size_t>((l * c.T + t) * kv * w);
        const std::size_t to = static_cast<std::size_t>((l * n + i) * kv * w);
        std::memcpy(os.k_out.data() + to, o.k_out.data() + from, row);
        std::memcpy(os.v_out.data() + to, o.v_out.data() + from, row);
      }
    }
  }
  encode_indices(hs, cs);
  for (auto& f : check_outputs(cs, hs, os))
    failures.push_back("(" + std::to_string(n) + " of " + std::to_string(c.T) +
                       " tokens sampled) " + f);
  return failures;
}

std::vector<std::string> check(const Case& c, const HostData& h, const DeviceData& d, CUstream s) {
  return check_sampled(c, h, download_outputs(d, s));
}

// Fresh random inputs for `c` in `h`, and device buffers holding them with poisoned outputs.
DeviceData make_ready(const Case& c, HostData& h, Rng& rng, CUstream s) {
  fill_inputs(h, c, rng);
  DeviceData d = allocate(c, h);
  upload_inputs(d, h, s);
  poison_outputs(d, s);
  return d;
}

// prepare, fill, upload, poison, launch, check. Never throws: errors become failures.
std::vector<std::string> run_case(const Case& c, Rng& rng, CUstream s) {
  try {
    const fkv::LoadedKernel& k = fkv::Runtime::global().prepare(c.spec);
    HostData h;
    const DeviceData d = make_ready(c, h, rng, s);
    launch(k, c, h, d, s);
    return check(c, h, d, s);
  } catch (const std::exception& e) {
    return {c.describe() + ": " + e.what()};
  }
}

// ---- random cases -----------------------------------------------------------------------------

// Multiples of 16 bytes of `t`, so strides keep rows vector-aligned.
std::int64_t pad(Rng& rng, DType t, int max_units) {
  return (16 / elem_size(t)) * rng.range(1, max_units);
}

Case random_case(Rng& rng, std::int64_t max_elements) {
  Case c;
  fkv::KernelSpec& s = c.spec;
  s.head_dim = static_cast<int>(rng.pick<std::int64_t>({64, 80, 96, 128, 256}));
  s.num_kv_heads = static_cast<int>(rng.pick<std::int64_t>({1, 2, 3, 4, 8}));
  const double r = rng.uniform();
  if (r < 0.5) {
    s.rotary_dim = s.head_dim;
  } else if (r < 0.8) {  // partial rotary as real models use it (multiples of 16)
    switch (s.head_dim) {
      case 64:
        s.rotary_dim = static_cast<int>(rng.pick<std::int64_t>({16, 32}));
        break;
      case 80:
        s.rotary_dim = static_cast<int>(rng.pick<std::int64_t>({32, 64}));
        break;
      case 96:
        s.rotary_dim = static_cast<int>(rng.pick<std::int64_t>({32, 48, 64}));
        break;
      case 128:
        s.rotary_dim = static_cast<int>(rng.pick<std::int64_t>({32, 64}));
        break;
      default:
        s.rotary_dim = static_cast<int>(rng.pick<std::int64_t>({64, 128}));
        break;
    }
  } else {
    s.rotary_dim = 0;
  }
  s.neox = rng.coin();
  s.k_norm = rng.coin() ? fkv::KNormKind::Rms : fkv::KNormKind::None;
  s.act = rng.pick<DType>({DType::BF16, DType::BF16, DType::FP16, DType::FP32});
  s.cache = rng.pick<DType>({s.act, s.act, DType::FP8_E4M3, DType::FP8_E5M2});
  s.cos_sin = rng.coin() ? DType::FP32 : s.act;
  s.positions = rng.coin() ? IndexType::I32 : IndexType::I64;
  s.slots = rng.coin() ? IndexType::I32 : IndexType::I64;
  s.mode = rng.coin() ? OutputMode::Pool : OutputMode::Stacked;

  c.L = rng.coin(0.08) ? rng.range(FKV_MAX_LAYERS + 1, FKV_MAX_LAYERS + 8) : rng.range(1, 6);
  const double tr = rng.uniform();
  c.T = tr < 0.5 ? rng.range(1, 64) : tr < 0.85 ? rng.range(65, 2048) : rng.range(2049, 16384);
  c.T = std::max<std::int64_t>(1, std::min(c.T, max_elements / (c.L * c.kv())));
  if (rng.coin(0.3)) c.proj_pad_layer = pad(rng, s.act, 2);
  if (rng.coin(0.5)) c.proj_pad_token = pad(rng, s.act, 4);
  c.max_pos = rng.range(1, 8192);
  if (rng.coin(0.3)) c.cs_pad = 2 * rng.range(1, 8);
  c.sigma = rng.pick<double>({0.25, 1.0, 3.0});
  c.default_eps = rng.coin(0.15);
  if (c.pool()) {
    c.num_slots = c.T + rng.range(0, c.T);
    c.guard_slots = 2;
    if (rng.coin(0.3))
      c.slot_pad = pad(rng, DType::FP8_E4M3, 2);  // 16 elements: a multiple of any vec
    c.skip = rng.pick<double>({0.0, 0.1, 0.5});
    c.use_scales = fkv::is_fp8(s.cache) && rng.coin(0.8);
  }
  return c;
}

std::uint64_t test_seed() { return run_seed("test_materialize_gpu"); }

void report(const std::vector<std::string>& failures) {
  for (const auto& f : failures) FAIL_CHECK(f);
}

}  // namespace

TEST_CASE("random specializations match the float64 reference", "[gpu][materialize]") {
  require_gpu();
  const std::uint64_t seed = test_seed();
  const std::int64_t cases = env_int("FKV_TEST_CASES", 120);
  const std::int64_t only = env_int("FKV_TEST_ONLY", -1);
  fkv::Stream stream;
  int failed = 0;
  for (std::int64_t i = 0; i < cases; ++i) {
    if (only >= 0 && i != only) continue;
    Rng rng(seed * 1000003ull + static_cast<std::uint64_t>(i));
    const Case c = random_case(rng, 1 << 21);
    const auto failures = run_case(c, rng, stream.get());
    if (!failures.empty()) {
      ++failed;
      INFO("random case " << i << " (FKV_TEST_SEED=" << seed << " FKV_TEST_ONLY=" << i << ")");
      report(failures);
    }
    if (failed >= 10) FAIL("stopping after 10 failing cases");
  }
}

TEST_CASE("large token counts", "[gpu][materialize][large]") {
  require_gpu();
  Rng rng(test_seed() ^ 0x5eedull);
  fkv::Stream stream;
  std::vector<Case> cases;
  {
    Case c;  // DFlash-like: bf16 -> fp8 pool, K norm, full neox RoPE, strided rows
    c.spec.num_kv_heads = 2, c.spec.head_dim = 128, c.spec.rotary_dim = 128, c.spec.neox = true;
    c.spec.k_norm = fkv::KNormKind::Rms, c.spec.act = DType::BF16, c.spec.cache = DType::FP8_E4M3;
    c.spec.mode = OutputMode::Pool, c.spec.positions = IndexType::I64,
    c.spec.slots = IndexType::I64;
    c.T = 70000, c.L = 2, c.proj_pad_token = 8, c.max_pos = 131072, c.num_slots = 100000;
    c.guard_slots = 2, c.skip = 0.05, c.use_scales = true, c.sigma = 2.0;
    cases.push_back(c);
  }
  {
    Case c;  // GPT-J style partial rotary, fp16, act-dtype cos/sin, stacked, int32 positions
    c.spec.num_kv_heads = 1, c.spec.head_dim = 256, c.spec.rotary_dim = 64, c.spec.neox = false;
    c.spec.act = DType::FP16, c.spec.cache = DType::FP16, c.spec.cos_sin = DType::FP16;
    c.spec.positions = IndexType::I32, c.spec.mode = OutputMode::Stacked;
    c.T = 65537, c.L = 1, c.max_pos = 2048;
    cases.push_back(c);
  }
  {
    Case c;  // Phi-like D=80, partial rotary 32, fp32 activations into an e5m2 pool, int32 slots
    c.spec.num_kv_heads = 1, c.spec.head_dim = 80, c.spec.rotary_dim = 32, c.spec.neox = true;
    c.spec.act = DType::FP32, c.spec.cache = DType::FP8_E5M2, c.spec.mode = OutputMode::Pool;
    c.spec.positions = IndexType::I32, c.spec.slots = IndexType::I32;
    c.T = 69999, c.L = 3, c.max_pos = 4096, c.num_slots = 70001, c.guard_slots = 1, c.skip = 0.01;
    c.slot_pad = 16, c.use_scales = true;
    cases.push_back(c);
  }
  {
    Case c;  // more layers than one launch takes, GQA heads, K norm, bf16 stacked
    c.spec.num_kv_heads = 8, c.spec.head_dim = 64, c.spec.rotary_dim = 64,
    c.spec.k_norm = fkv::KNormKind::Rms;
    c.spec.act = DType::BF16, c.spec.cache = DType::BF16, c.spec.mode = OutputMode::Stacked;
    c.T = 600, c.L = 2 * FKV_MAX_LAYERS + 3, c.max_pos = 4096, c.proj_pad_layer = 8;
    cases.push_back(c);
  }
  for (const Case& c : cases) report(run_case(c, rng, stream.get()));
}

TEST_CASE("T = 0 launches nothing", "[gpu][materialize]") {
  require_gpu();
  Rng rng(test_seed() ^ 0x0ull);
  fkv::Stream stream;
  for (OutputMode mode : {OutputMode::Stacked, OutputMode::Pool}) {
    Case c = random_case(rng, 1 << 16);
    c.spec.mode = mode;
    c.T = 0;
    c.num_slots = 8, c.guard_slots = 0, c.skip = 0, c.use_scales = false;
    const fkv::LoadedKernel& k = fkv::Runtime::global().prepare(c.spec);
    HostData h;
    const DeviceData d = make_ready(c, h, rng, stream.get());
    INFO(c.describe());
    REQUIRE_NOTHROW(launch(k, c, h, d, stream.get()));
    if (mode == OutputMode::Stacked) {
      CHECK(first_unpoisoned(download(d.k_out, stream.get()), 0, d.k_out.size()) == -1);
      CHECK(first_unpoisoned(download(d.v_out, stream.get()), 0, d.v_out.size()) == -1);
    } else {
      for (const auto& b : d.k_pool)
        CHECK(first_unpoisoned(download(b, stream.get()), 0, b.size()) == -1);
      for (const auto& b : d.v_pool)
        CHECK(first_unpoisoned(download(b, stream.get()), 0, b.size()) == -1);
    }
  }
}

TEST_CASE("a captured CUDA graph replays with new input contents", "[gpu][materialize][graph]") {
  require_gpu();
  Rng rng(test_seed() ^ 0x9a9full);
  for (OutputMode mode : {OutputMode::Stacked, OutputMode::Pool}) {
    Case c = random_case(rng, 1 << 20);
    c.spec.mode = mode;
    c.T = 333;
    c.use_scales = false;
    if (mode == OutputMode::Pool) {
      c.L = FKV_MAX_LAYERS + 3;  // the pool graph holds two launches
      c.spec.num_kv_heads = 2;
      c.num_slots = 500, c.guard_slots = 2, c.skip = 0.1;
      c.use_scales = fkv::is_fp8(c.spec.cache);
    } else {
      c.L = 3;
    }
    INFO(c.describe());
    const fkv::LoadedKernel& k = fkv::Runtime::global().prepare(c.spec);  // ahead of capture
    fkv::Stream stream;
    const CUstream s = stream.get();
    HostData h;
    fill_inputs(h, c, rng);
    DeviceData d = allocate(c, h);
    upload_inputs(d, h, s);
    FKV_CU(cuStreamSynchronize, s);

    FKV_CU(cuStreamBeginCapture, s, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL);
    CUgraph graph = nullptr;
    try {
      launch(k, c, h, d, s);
    } catch (...) {
      fkv::Driver::get().cuStreamEndCapture(s, &graph);
      if (graph) fkv::Driver::get().cuGraphDestroy(graph);
      throw;
    }
    FKV_CU(cuStreamEndCapture, s, &graph);
    GraphExec exec(graph);

    for (int replay = 0; replay < 3; ++replay) {
      fill_inputs(h, c, rng, /*keep_layer_params=*/true);  // same pointers, new contents
      upload_inputs(d, h, s);
      poison_outputs(d, s);
      exec.launch(s);
      INFO("replay " << replay);
      report(check(c, h, d, s));
    }
  }
}

TEST_CASE("launches from several threads, each on its own stream", "[gpu][materialize][threads]") {
  require_gpu();
  const std::uint64_t seed = test_seed();
  Rng shared_rng(seed ^ 0x7447ull);
  const Case shared = random_case(shared_rng, 1 << 18);  // every thread prepares it at once
  constexpr int kThreads = 4, kCasesPerThread = 6;
  std::vector<std::vector<std::string>> failures(kThreads);
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&, i] {
      try {
        fkv::ensure_context(0);
        fkv::Stream stream;
        Rng rng(seed * 31 + static_cast<std::uint64_t>(i));
        for (int j = 0; j < kCasesPerThread; ++j) {
          const Case c = j == 0 ? shared : random_case(rng, 1 << 18);
          for (auto& f : run_case(c, rng, stream.get()))
            failures[static_cast<std::size_t>(i)].push_back(f);
        }
      } catch (const std::exception& e) {
        failures[static_cast<std::size_t>(i)].push_back(e.what());
      }
    });
  }
  for (auto& t : threads) t.join();
  for (int i = 0; i < kThreads; ++i) {
    INFO("thread " << i);
    report(failures[static_cast<std::size_t>(i)]);
  }
}

TEST_CASE("debug mode flags bad positions and slots and writes nothing out of bounds",
          "[gpu][materialize][debug]") {
  require_gpu();
  Rng rng(test_seed() ^ 0xdebull);
  fkv::Stream stream;
  const CUstream s = stream.get();

  Case c;
  c.spec.num_kv_heads = 2, c.spec.head_dim = 128, c.spec.rotary_dim = 128,
  c.spec.k_norm = fkv::KNormKind::Rms;
  c.spec.act = DType::BF16, c.spec.cache = DType::BF16, c.spec.debug_checks = true;
  c.T = 64, c.L = 2, c.max_pos = 100, c.cs_guard_rows = 16;  // a bad row is still readable memory

  auto run = [&](const Case& cc, const std::vector<std::int64_t>& bad_pos_tokens,
                 const std::vector<std::int64_t>& bad_slot_tokens, unsigned expected_flag) {
    INFO(cc.describe());
    const fkv::LoadedKernel& k = fkv::Runtime::global().prepare(cc.spec);
    HostData h;
    fill_inputs(h, cc, rng);
    std::int64_t n = 0;
    for (std::int64_t t : bad_pos_tokens)
      h.pos_values[static_cast<std::size_t>(t)] = cc.max_pos + 7 * n++;
    n = 0;
    for (std::int64_t t : bad_slot_tokens)
      h.slot_values[static_cast<std::size_t>(t)] = cc.num_slots + n++;
    encode_indices(h, cc);
    DeviceData d = allocate(cc, h);
    upload_inputs(d, h, s);
    poison_outputs(d, s);
    launch(k, cc, h, d, s);
    const std::vector<std::uint8_t> flag = download(d.flag, s);
    unsigned value;
    std::memcpy(&value, flag.data(), sizeof value);
    CHECK(value == expected_flag);
    report(check(cc, h, d, s));  // also: guard rows beyond num_slots and past k_out stay poison
  };

  SECTION("valid inputs leave the flag clear") {
    run(c, {}, {}, 0u);
    c.spec.mode = OutputMode::Pool, c.num_slots = 80, c.guard_slots = 4;
    run(c, {}, {}, 0u);
  }
  SECTION("a position >= max_position sets FKV_ERROR_BAD_POSITION") {
    run(c, {5, 9}, {}, FKV_ERROR_BAD_POSITION);
  }
  SECTION("a slot >= num_slots sets FKV_ERROR_BAD_SLOT and its row is not written") {
    c.spec.mode = OutputMode::Pool, c.num_slots = 80, c.guard_slots = 4, c.skip = 0.1;
    run(c, {}, {7, 11}, FKV_ERROR_BAD_SLOT);
  }
  SECTION("both at once set both bits") {
    c.spec.mode = OutputMode::Pool, c.spec.slots = IndexType::I32, c.num_slots = 80,
    c.guard_slots = 4;
    run(c, {3}, {4, 63}, FKV_ERROR_BAD_POSITION | FKV_ERROR_BAD_SLOT);
  }
}

TEST_CASE("host-side argument checks throw ArgumentError", "[gpu][materialize][args]") {
  require_gpu();
  Rng rng(test_seed() ^ 0xa59ull);
  fkv::Stream stream;
  const CUstream s = stream.get();
  using Catch::Matchers::Contains;

  Case c;
  c.spec.num_kv_heads = 2, c.spec.head_dim = 128, c.spec.rotary_dim = 128,
  c.spec.k_norm = fkv::KNormKind::Rms;
  c.spec.act = DType::BF16, c.spec.cache = DType::BF16, c.spec.mode = OutputMode::Stacked;
  c.T = 16, c.L = 3, c.max_pos = 64;
  const fkv::LoadedKernel& k = fkv::Runtime::global().prepare(c.spec);
  HostData h;
  const DeviceData d = make_ready(c, h, rng, s);
  const fkv::FusedKVInputs good = inputs_of(c, h, d);
  REQUIRE_NOTHROW(fkv::materialize_stacked(k, good, stacked_of(d), s));
  report(check(c, h, d, s));

  fkv::FusedKVInputs bad = good;
  bad.proj = static_cast<const char*>(good.proj) + 2;
  CHECK_THROWS_AS(fkv::materialize_stacked(k, bad, stacked_of(d), s), fkv::ArgumentError);
  CHECK_THROWS_WITH(fkv::materialize_stacked(k, bad, stacked_of(d), s), Contains("proj"));

  bad = good;
  bad.k_norm_weight = nullptr;
  CHECK_THROWS_AS(fkv::materialize_stacked(k, bad, stacked_of(d), s), fkv::ArgumentError);
  CHECK_THROWS_WITH(fkv::materialize_stacked(k, bad, stacked_of(d), s), Contains("k_norm_weight"));

  bad = good;
  bad.eps = std::span<const float>(h.eps).first(2);  // 2 eps for 3 layers
  CHECK_THROWS_AS(fkv::materialize_stacked(k, bad, stacked_of(d), s), fkv::ArgumentError);

  // A stacked kernel refuses pool output.
  Case cp = c;
  cp.spec.mode = OutputMode::Pool;
  cp.spec.cache = DType::FP8_E4M3;
  cp.num_slots = 32, cp.use_scales = true;
  HostData hp;
  const DeviceData dp = make_ready(cp, hp, rng, s);
  CHECK_THROWS_AS(fkv::materialize_pool(k, inputs_of(cp, hp, dp), pool_of(cp, hp, dp), s),
                  fkv::ArgumentError);

  // Too few layers' buffers or scales for num_layers.
  const fkv::LoadedKernel& kp = fkv::Runtime::global().prepare(cp.spec);
  const fkv::FusedKVInputs in = inputs_of(cp, hp, dp);
  fkv::PoolOutput out = pool_of(cp, hp, dp);
  out.k_buffers = std::span<void* const>(dp.k_ptrs).first(2);
  CHECK_THROWS_AS(fkv::materialize_pool(kp, in, out, s), fkv::ArgumentError);
  out = pool_of(cp, hp, dp);
  out.v_buffers = std::span<void* const>(dp.v_ptrs).first(1);
  CHECK_THROWS_AS(fkv::materialize_pool(kp, in, out, s), fkv::ArgumentError);
  out = pool_of(cp, hp, dp);
  out.k_scales = std::span<const float>(hp.k_scales).first(2);
  CHECK_THROWS_AS(fkv::materialize_pool(kp, in, out, s), fkv::ArgumentError);
  out = pool_of(cp, hp, dp);
  fkv::FusedKVInputs in_few = in;
  in_few.num_layers = cp.L + 1;  // more layers than the proj rows and buffers describe
  CHECK_THROWS_AS(fkv::materialize_pool(kp, in_few, out, s), fkv::ArgumentError);

  // None of the rejected calls launched: the pool is untouched, and the good call still works.
  for (const auto& b : dp.k_pool) CHECK(first_unpoisoned(download(b, s), 0, b.size()) == -1);
  poison_outputs(dp, s);
  REQUIRE_NOTHROW(fkv::materialize_pool(kp, in, out, s));
  report(check(cp, hp, dp, s));
}

// ---- pool mode at many layers x many heads x large T ----------------------------------------
// The shape of the pool-mode report (phi-style: 24 layers, 32 KV heads, head_dim 64, rotary 32
// neox, no K norm) in both modes and both dtypes, at 1000 and 4096 tokens; then a random sweep
// over the product of many layers (up to 64), many heads (up to 64) and large T (up to 8192),
// pool mode, with slot permutations and skips. (The report's failures came from the selftest
// harness, not the kernel: tests/gpu/test_selftest_gpu.cpp.)

TEST_CASE("pool regression shape: 24 layers x 32 heads x d64/r32 at 1000 and 4096 tokens",
          "[gpu][materialize][large][pool-regression]") {
  require_gpu();
  Rng rng(test_seed() ^ 0x16ull);
  fkv::Stream stream;
  for (DType act : {DType::FP32, DType::BF16})
    for (OutputMode mode : {OutputMode::Pool, OutputMode::Stacked})
      for (std::int64_t T : {1000, 4096}) {
        Case c;
        c.spec.num_kv_heads = 32, c.spec.head_dim = 64, c.spec.rotary_dim = 32, c.spec.neox = true;
        c.spec.k_norm = fkv::KNormKind::None, c.spec.act = act, c.spec.cache = act,
        c.spec.mode = mode;
        c.T = T, c.L = 24, c.max_pos = 2048;
        if (mode == OutputMode::Pool) c.num_slots = 2 * T + 16, c.guard_slots = 2, c.skip = 1.0 / 7;
        INFO(c.describe());
        report(run_case(c, rng, stream.get()));
      }
}

TEST_CASE("random pool cases over many layers, many heads and large T",
          "[gpu][materialize][sweep]") {
  require_gpu();
  const std::uint64_t seed = test_seed();
  const std::int64_t cases = env_int("FKV_SWEEP_CASES", 40);
  const std::int64_t max_elements = env_int("FKV_SWEEP_MAX_ELEMENTS", std::int64_t{1} << 26);
  // Every case first (each with the generator that then fills its inputs), then every kernel
  // compiled side by side: one NVRTC compile per random spec would otherwise be most of the time.
  std::vector<std::pair<Case, Rng>> all;
  for (std::int64_t i = 0; i < cases; ++i) {
    Rng rng(seed * 7919ull + static_cast<std::uint64_t>(i));
    Case c = random_case(rng, max_elements);
    c.spec.mode = OutputMode::Pool;
    c.spec.num_kv_heads = static_cast<int>(rng.pick<std::int64_t>({1, 4, 8, 16, 24, 32, 40, 64}));
    c.L = rng.range(1, 64);
    c.T = rng.coin(0.3) ? rng.range(1, 999) : rng.range(1000, 8192);
    c.T = std::max<std::int64_t>(1, std::min(c.T, max_elements / (c.L * c.kv())));
    c.num_slots = c.T + rng.range(0, 2 * c.T);
    c.guard_slots = 2;
    c.skip = rng.pick<double>({0.0, 0.05, 0.3});
    c.use_scales = fkv::is_fp8(c.spec.cache) && rng.coin(0.8);
    all.emplace_back(c, rng);
  }
  {
    std::vector<std::thread> compilers;
    for (const auto& [c, rng] : all)
      compilers.emplace_back([spec = c.spec] {
        try {
          fkv::ensure_context(0);
          fkv::Runtime::global().prepare(spec);
        } catch (const std::exception&) {  // run_case prepares again and reports the error
        }
      });
    for (auto& t : compilers) t.join();
  }
  fkv::Stream stream;
  int failed = 0;
  for (std::size_t i = 0; i < all.size(); ++i) {
    auto& [c, rng] = all[i];
    const auto failures = run_case(c, rng, stream.get());
    if (!failures.empty()) {
      ++failed;
      INFO("sweep case " << i << " (FKV_TEST_SEED=" << seed << ")");
      report(failures);
    }
    if (failed >= 5) FAIL("stopping after 5 failing cases");
  }
}
