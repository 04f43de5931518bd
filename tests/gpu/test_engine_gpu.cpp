// Serving-engine features on a GPU against the float64 reference: K/V bias, vLLM's and
// FlashInfer's paged cache layouts, per-layer slot mappings, KV scales in device memory, bounds
// checks in a release build (out-of-range positions and slots skipped and flagged, nothing
// read or written out of bounds: run this test under compute-sanitizer memcheck, buffers are
// allocated to their exact size for that), and tensor-parallel materializers whose shards equal
// the TP=1 result bit for bit. Outputs are poisoned (0xff) before each launch; V is compared
// bit-exact wherever there is no bias and no FP8 cache.
//
// Environment: FKV_TEST_SEED (default: time).
#include <catch2/catch.hpp>
#include <sstream>

#include "fkv/errors.hpp"
#include "fkv/kernel_params.h"
#include "fkv/materialize.hpp"
#include "fkv/rope.hpp"
#include "fkv/runtime.hpp"
#include "gpu/gpu_test.hpp"
#include "gpu/tp_case.hpp"
#include "gpu_harness.hpp"

using fkv::DType;
using fkv::IndexType;
using fkv::OutputMode;
using namespace fkv_test;

namespace {

// How each layer's K and V buffers are laid out.
enum class Layout {
  Flat,           // [num_slots, H*D], K and V separate (the fast path)
  VllmSeparate,   // [num_blocks, block_size, H, D], K and V separate tensors
  VllmStacked,    // kv_cache[0] / kv_cache[1] of [2, num_blocks, block_size, H, D]
  FlashInferNHD,  // [num_blocks, 2, block_size, H, D]
  FlashInferHND,  // [num_blocks, 2, H, block_size, D]
};

const char* name_of(Layout l) {
  switch (l) {
    case Layout::Flat:
      return "flat";
    case Layout::VllmSeparate:
      return "vllm";
    case Layout::VllmStacked:
      return "vllm[2,...]";
    case Layout::FlashInferNHD:
      return "flashinfer-nhd";
    case Layout::FlashInferHND:
      return "flashinfer-hnd";
  }
  return "?";
}

struct Case {
  fkv::KernelSpec spec;
  std::int64_t T = 64, L = 3, max_pos = 512;
  Layout layout = Layout::Flat;  // pool mode
  std::int64_t num_blocks = 40, block_size = 16;
  bool per_layer_slots = false;
  bool device_scales = false;
  double skip = 0.1;
  std::vector<std::int64_t> bad_positions, bad_slots;  // tokens given an out-of-range value

  std::int64_t H() const { return spec.num_kv_heads; }
  std::int64_t D() const { return spec.head_dim; }
  std::int64_t kv() const { return H() * D(); }
  bool pool() const { return spec.mode == OutputMode::Pool; }
  std::int64_t slots() const { return num_blocks * block_size; }
  std::string describe() const {
    std::ostringstream os;
    os << "[" << spec.canonical() << "] T=" << T << " L=" << L << " max_pos=" << max_pos;
    if (pool())
      os << " layout=" << name_of(layout) << " blocks=" << num_blocks << "x" << block_size
         << (per_layer_slots ? " per-layer-slots" : "") << (device_scales ? " device-scales" : "");
    os << " bad_pos=" << bad_positions.size() << " bad_slots=" << bad_slots.size();
    return os.str();
  }
  // Layout fields of PoolOutput / reference's PoolLayout for this case.
  fkv::PoolLayout pool_layout() const {
    fkv::PoolLayout p;
    switch (layout) {
      case Layout::Flat:
        break;
      case Layout::VllmSeparate:
      case Layout::VllmStacked:
        p.block_size = block_size;
        break;
      case Layout::FlashInferNHD:
        p.block_size = block_size, p.block_stride = 2 * block_size * kv();
        break;
      case Layout::FlashInferHND:
        p.block_size = block_size, p.slot_stride = D(), p.head_stride = block_size * D();
        p.block_stride = 2 * block_size * kv();
        break;
    }
    return p;
  }
  // Elements of one layer's allocation and where V starts in it (K at 0), or -1 for a
  // separate V allocation.
  std::int64_t alloc_elems() const {
    switch (layout) {
      case Layout::Flat:
      case Layout::VllmSeparate:
        return slots() * kv();
      default:
        return 2 * slots() * kv();
    }
  }
  std::int64_t v_offset() const {
    switch (layout) {
      case Layout::VllmStacked:
        return slots() * kv();
      case Layout::FlashInferNHD:
      case Layout::FlashInferHND:
        return block_size * kv();
      default:
        return -1;
    }
  }
};

struct Run {
  std::vector<std::string> failures;
  unsigned flag = 0;
};

std::uint64_t seed() { return run_seed("test_engine_gpu"); }

// Everything for one launch: random inputs, exact-size device buffers, poison, launch, check.
Run run_case(const Case& c, std::uint64_t case_seed) {
  Run run;
  Rng rng(case_seed);
  const fkv::KernelSpec& s = c.spec;
  const std::int64_t T = c.T, L = c.L, H = c.H(), D = c.D(), kv = c.kv(), R = s.rotary_dim;
  fkv::Stream stream;
  const CUstream st = stream.get();
  const fkv::LoadedKernel& k = fkv::Runtime::global().prepare(s);

  // Inputs.
  const std::vector<std::uint8_t> proj =
      random_values(s.act, static_cast<std::size_t>(T * L * 2 * kv), 1.0, rng);
  std::vector<std::int64_t> pos(static_cast<std::size_t>(T));
  for (auto& p : pos) p = rng.range(0, c.max_pos - 1);
  for (std::size_t i = 0; i < c.bad_positions.size(); ++i)
    pos[static_cast<std::size_t>(c.bad_positions[i])] =
        i % 2 ? -1 - static_cast<std::int64_t>(i) : c.max_pos + static_cast<std::int64_t>(i);
  std::vector<std::uint8_t> cos_sin;
  if (R > 0) {
    const int w = elem_size(s.cos_sin);
    cos_sin.resize(static_cast<std::size_t>(c.max_pos * R * w));
    for (std::int64_t r = 0; r < c.max_pos; ++r)
      for (std::int64_t i = 0; i < R / 2; ++i) {
        const double a = 6.283185307179586 * rng.uniform();
        store_value(s.cos_sin, std::cos(a), cos_sin.data() + (r * R + i) * w);
        store_value(s.cos_sin, std::sin(a), cos_sin.data() + (r * R + R / 2 + i) * w);
      }
  }
  std::vector<float> weight, eps, bias, k_scales, v_scales;
  for (std::int64_t i = 0; fkv::k_norm_weighted(s.k_norm) && i < L * D; ++i)
    weight.push_back(static_cast<float>(1.0 + 0.2 * rng.normal()));
  for (std::int64_t l = 0; l < L; ++l) eps.push_back(1e-6f);
  for (std::int64_t i = 0; s.kv_bias && i < L * 2 * kv; ++i)
    bias.push_back(static_cast<float>(0.5 * rng.normal()));
  for (std::int64_t l = 0; fkv::is_fp8(s.cache) && l < L; ++l) {
    k_scales.push_back(static_cast<float>(std::exp2(-4 + 6 * rng.uniform())));
    v_scales.push_back(static_cast<float>(std::exp2(-4 + 6 * rng.uniform())));
  }
  // Slots per layer: one shared mapping, or a different permutation per layer.
  const std::int64_t num_slots = c.pool() ? c.slots() : 0;
  std::vector<std::vector<std::int64_t>> slots(static_cast<std::size_t>(c.per_layer_slots ? L : 1));
  for (auto& m : slots) {
    std::vector<std::int64_t> perm(static_cast<std::size_t>(num_slots));
    for (std::size_t i = 0; i < perm.size(); ++i) perm[i] = static_cast<std::int64_t>(i);
    for (std::int64_t t = 0; c.pool() && t < T; ++t) {
      std::swap(perm[static_cast<std::size_t>(t)],
                perm[static_cast<std::size_t>(rng.range(t, num_slots - 1))]);
      m.push_back(rng.coin(c.skip) ? -1 : perm[static_cast<std::size_t>(t)]);
    }
    for (std::size_t i = 0; c.pool() && i < c.bad_slots.size(); ++i)
      m[static_cast<std::size_t>(c.bad_slots[i])] = num_slots + static_cast<std::int64_t>(i) * 1000;
  }
  auto slot_of = [&](std::int64_t l, std::int64_t t) {
    return slots[static_cast<std::size_t>(c.per_layer_slots ? l : 0)][static_cast<std::size_t>(t)];
  };

  // Device buffers, each of exactly its size (compute-sanitizer sees any access past them).
  const fkv::DeviceBuffer d_proj = to_device(proj, st);
  const std::vector<std::uint8_t> pos_bytes = index_bytes(s.positions, pos);
  const fkv::DeviceBuffer d_pos = to_device(pos_bytes, st);
  const fkv::DeviceBuffer d_cs = to_device(cos_sin, st);
  const fkv::DeviceBuffer d_w = to_device(weight, st);
  const fkv::DeviceBuffer d_bias = to_device(bias, st);
  const fkv::DeviceBuffer d_ks = to_device(k_scales, st), d_vs = to_device(v_scales, st);
  fkv::DeviceBuffer d_flag = alloc(sizeof(unsigned));
  FKV_CU(cuMemsetD32Async, d_flag.get(), 0u, 1, st);
  std::vector<fkv::DeviceBuffer> d_slots;
  for (const auto& m : slots) d_slots.push_back(to_device(index_bytes(s.slots, m), st));
  const int w = elem_size(s.cache);
  std::vector<fkv::DeviceBuffer> k_bufs, v_bufs;  // v_bufs empty when V shares K's allocation
  std::vector<void*> k_ptrs, v_ptrs;
  fkv::DeviceBuffer k_out, v_out;
  if (c.pool()) {
    for (std::int64_t l = 0; l < L; ++l) {
      k_bufs.push_back(alloc(static_cast<std::size_t>(c.alloc_elems() * w)));
      poison(k_bufs.back(), st);
      k_ptrs.push_back(k_bufs.back().ptr());
      if (c.v_offset() < 0) {
        v_bufs.push_back(alloc(static_cast<std::size_t>(c.alloc_elems() * w)));
        poison(v_bufs.back(), st);
        v_ptrs.push_back(v_bufs.back().ptr());
      } else {
        v_ptrs.push_back(static_cast<char*>(k_bufs.back().ptr()) + c.v_offset() * w);
      }
    }
  } else {
    k_out = alloc(static_cast<std::size_t>(L * T * kv * w));
    v_out = alloc(static_cast<std::size_t>(L * T * kv * w));
    poison(k_out, st);
    poison(v_out, st);
  }

  fkv::FusedKVInputs in;
  in.proj = d_proj.ptr();
  in.num_tokens = T;
  in.num_layers = L;
  in.positions = d_pos.ptr();
  in.cos_sin = R > 0 ? d_cs.ptr() : nullptr;
  in.max_position = c.max_pos;
  in.k_norm_weight =
      fkv::k_norm_weighted(s.k_norm) ? static_cast<const float*>(d_w.ptr()) : nullptr;
  in.eps = eps;
  in.error_flag = static_cast<unsigned*>(d_flag.ptr());
  in.kv_bias = s.kv_bias ? static_cast<const float*>(d_bias.ptr()) : nullptr;
  std::vector<const void*> maps;
  if (c.pool()) {
    fkv::PoolOutput out;
    const fkv::PoolLayout pl = c.pool_layout();
    out.cache_loc = c.per_layer_slots ? nullptr : d_slots[0].ptr();
    out.k_buffers = k_ptrs;
    out.v_buffers = v_ptrs;
    out.num_slots = num_slots;
    out.slot_stride = pl.slot_stride;
    out.block_size = pl.block_size;
    out.block_stride = pl.block_stride;
    out.head_stride = pl.head_stride;
    if (c.per_layer_slots)
      for (const auto& b : d_slots) maps.push_back(b.ptr());
    out.slot_mappings = maps;
    if (c.device_scales) {
      out.k_scales_device = static_cast<const float*>(d_ks.ptr());
      out.v_scales_device = static_cast<const float*>(d_vs.ptr());
    } else {
      out.k_scales = k_scales;
      out.v_scales = v_scales;
    }
    fkv::materialize_pool(k, in, out, st);
  } else {
    fkv::materialize_stacked(k, in, fkv::StackedOutput{k_out.ptr(), v_out.ptr()}, st);
  }

  // What should have been written: token t of layer l, unless its position or slot is bad or
  // its slot is negative.
  std::vector<std::uint8_t> mask(static_cast<std::size_t>(L * T), 1);
  std::vector<std::int64_t> ref_pos = pos;
  unsigned expected_flag = 0;
  for (std::int64_t t = 0; t < T; ++t) {
    const bool bad_pos = R > 0 && (pos[static_cast<std::size_t>(t)] < 0 ||
                                   pos[static_cast<std::size_t>(t)] >= c.max_pos);
    if (bad_pos) {
      expected_flag |= FKV_ERROR_BAD_POSITION;
      ref_pos[static_cast<std::size_t>(t)] = 0;
    }
    for (std::int64_t l = 0; l < L; ++l) {
      bool ok = !bad_pos;
      if (c.pool()) {
        const std::int64_t sl = slot_of(l, t);
        if (sl >= num_slots && !bad_pos) expected_flag |= FKV_ERROR_BAD_SLOT;
        ok = ok && sl >= 0 && sl < num_slots;
      }
      mask[static_cast<std::size_t>(l * T + t)] = ok;
    }
  }
  const std::vector<std::uint8_t> flag_bytes = download(d_flag, st);
  std::memcpy(&run.flag, flag_bytes.data(), sizeof run.flag);
  if (run.flag != expected_flag)
    run.failures.push_back("error_flag " + std::to_string(run.flag) + ", expected " +
                           std::to_string(expected_flag));

  // Gather the outputs into [L, T, H, D]; every byte no valid token owns must still be poison.
  std::vector<std::uint8_t> k_bits(static_cast<std::size_t>(L * T * kv * w), kPoison),
      v_bits = k_bits;
  if (c.pool()) {
    const fkv::PoolLayout pl = c.pool_layout();
    for (std::int64_t l = 0; l < L; ++l) {
      std::vector<std::uint8_t> kb = download(k_bufs[static_cast<std::size_t>(l)], st);
      std::vector<std::uint8_t> vb =
          c.v_offset() < 0 ? download(v_bufs[static_cast<std::size_t>(l)], st) : kb;
      const std::int64_t v_base = c.v_offset() < 0 ? 0 : c.v_offset();
      for (int kind = 0; kind < 2; ++kind) {
        std::vector<std::uint8_t>& buf = kind ? vb : kb;
        std::vector<std::uint8_t>& out = kind ? v_bits : k_bits;
        const std::int64_t base = kind ? v_base : 0;
        for (std::int64_t t = 0; t < T; ++t) {
          if (!mask[static_cast<std::size_t>(l * T + t)]) continue;
          for (std::int64_t h = 0; h < H; ++h) {
            const std::int64_t off = (base + fkv::pool_offset(pl, H, D, slot_of(l, t), h)) * w;
            std::memcpy(out.data() + ((l * T + t) * kv + h * D) * w, buf.data() + off,
                        static_cast<std::size_t>(D * w));
            std::memset(buf.data() + off, kPoison,
                        static_cast<std::size_t>(D * w));  // checked: now expect poison
          }
        }
      }
      // K and V views share one allocation for the stacked/FlashInfer layouts: clear both
      // views' rows in one copy before the poison check.
      if (c.v_offset() >= 0) {
        for (std::int64_t t = 0; t < T; ++t) {
          if (!mask[static_cast<std::size_t>(l * T + t)]) continue;
          for (std::int64_t h = 0; h < H; ++h) {
            const std::int64_t off = fkv::pool_offset(pl, H, D, slot_of(l, t), h) * w;
            std::memset(kb.data() + off, kPoison, static_cast<std::size_t>(D * w));
            std::memset(kb.data() + v_base * w + off, kPoison, static_cast<std::size_t>(D * w));
          }
        }
        vb = kb;
      }
      if (const std::int64_t bad = first_unpoisoned(kb, 0, kb.size()); bad >= 0)
        run.failures.push_back("layer " + std::to_string(l) + ": byte " + std::to_string(bad) +
                               " of the K allocation was written, but no valid token owns it");
      if (c.v_offset() < 0)
        if (const std::int64_t bad = first_unpoisoned(vb, 0, vb.size()); bad >= 0)
          run.failures.push_back("layer " + std::to_string(l) + ": byte " + std::to_string(bad) +
                                 " of the V buffer was written, but no valid token owns it");
    }
  } else {
    k_bits = download(k_out, st);
    v_bits = download(v_out, st);
    for (std::int64_t l = 0; l < L; ++l)
      for (std::int64_t t = 0; t < T; ++t)
        if (!mask[static_cast<std::size_t>(l * T + t)]) {
          const std::size_t b = static_cast<std::size_t>((l * T + t) * kv * w),
                            e = b + static_cast<std::size_t>(kv * w);
          if (first_unpoisoned(k_bits, b, e) >= 0 || first_unpoisoned(v_bits, b, e) >= 0)
            run.failures.push_back("a skipped token's stacked row was written (layer " +
                                   std::to_string(l) + ", token " + std::to_string(t) + ")");
        }
  }

  fkv::ReferenceInputs ri;
  ri.spec = s;
  ri.num_tokens = T;
  ri.num_layers = L;
  ri.proj = proj.data();
  const std::vector<std::uint8_t> ref_pos_bytes = index_bytes(s.positions, ref_pos);
  ri.positions = ref_pos_bytes.data();
  ri.cos_sin = cos_sin.data();
  ri.max_position = c.max_pos;
  ri.k_norm_weight = weight.data();
  ri.eps = eps;
  ri.k_scales = k_scales;
  ri.v_scales = v_scales;
  ri.kv_bias = bias.data();
  fkv::CompareOptions ko, vo;
  ko.exact = s.cache == s.act && R == 0 && s.k_norm == fkv::KNormKind::None && !s.kv_bias;
  vo.exact = s.cache == s.act && !s.kv_bias;  // V bit-exact wherever it is a copy
  ko.layer_token_mask = mask;
  vo.layer_token_mask = mask;
  const fkv::CompareResult rk = fkv::compare(s.cache, k_bits.data(), fkv::reference_k(ri), ko);
  const fkv::CompareResult rv = fkv::compare(s.cache, v_bits.data(), fkv::reference_v(ri), vo);
  if (!rk.ok()) run.failures.push_back(rk.summary("k"));
  if (!rv.ok()) run.failures.push_back(rv.summary("v"));
  for (auto& f : run.failures) f = c.describe() + ": " + f;
  return run;
}

fkv::KernelSpec base_spec(OutputMode mode) {
  fkv::KernelSpec s;
  s.num_kv_heads = 4;
  s.head_dim = 128;
  s.rotary_dim = 128;
  s.k_norm = fkv::KNormKind::Rms;
  s.mode = mode;
  return s;
}

void report(const Run& r) {
  for (const auto& f : r.failures) FAIL_CHECK(f);
}

}  // namespace

TEST_CASE("K/V bias: k += bias before the norm, v = round(v + bias)", "[gpu][engine][bias]") {
  require_gpu();
  std::uint64_t n = 0;
  for (OutputMode mode : {OutputMode::Stacked, OutputMode::Pool})
    for (DType act : {DType::BF16, DType::FP16, DType::FP32})
      for (DType cache : {act, DType::FP8_E4M3}) {
        if (mode == OutputMode::Stacked && cache != act) continue;
        Case c;
        c.spec = base_spec(mode);
        c.spec.act = act;
        c.spec.cache = cache;
        c.spec.kv_bias = true;
        c.spec.head_dim = act == DType::FP32 ? 80 : 128;
        c.spec.rotary_dim = act == DType::FP32 ? 64 : 128;
        INFO(c.describe());
        report(run_case(c, seed() + n++));
      }
}

TEST_CASE("paged layouts of vLLM and FlashInfer, per-layer slot mappings, device scales",
          "[gpu][engine][paged]") {
  require_gpu();
  std::uint64_t n = 100;
  for (Layout layout :
       {Layout::VllmSeparate, Layout::VllmStacked, Layout::FlashInferNHD, Layout::FlashInferHND})
    for (DType cache : {DType::BF16, DType::FP8_E4M3})
      for (bool per_layer : {false, true}) {
        Case c;
        c.spec = base_spec(OutputMode::Pool);
        c.spec.paged = true;
        c.spec.cache = cache;
        c.spec.slots = per_layer ? IndexType::I32 : IndexType::I64;
        c.layout = layout;
        c.per_layer_slots = per_layer;
        c.device_scales = fkv::is_fp8(cache) && per_layer;
        c.T = 300, c.L = 3, c.num_blocks = 25, c.block_size = 16;
        INFO(c.describe());
        report(run_case(c, seed() + n++));
      }
  Case c;  // more layers than one launch takes, bias, FlashInfer HND, GQA of 8 heads of 64
  c.spec = base_spec(OutputMode::Pool);
  c.spec.num_kv_heads = 8, c.spec.head_dim = 64, c.spec.rotary_dim = 32, c.spec.paged = true,
  c.spec.kv_bias = true;
  c.layout = Layout::FlashInferHND, c.per_layer_slots = true, c.L = FKV_MAX_LAYERS + 3, c.T = 40;
  c.num_blocks = 8, c.block_size = 8;
  INFO(c.describe());
  report(run_case(c, seed() + n++));
}

// Run under `compute-sanitizer --tool memcheck`: the cos/sin table and the pools are exactly
// their size, so a read of a row past the table or a write past the pool would be reported.
TEST_CASE("release build: out-of-range positions and slots are skipped and flagged, never accessed",
          "[gpu][engine][bounds]") {
  require_gpu();
  std::uint64_t n = 200;
  Case c;
  c.spec = base_spec(OutputMode::Stacked);
  REQUIRE_FALSE(c.spec.debug_checks);
  c.bad_positions = {0, 5, 9, 63};  // >= max_position and negative, alternately
  SECTION("stacked") { report(run_case(c, seed() + n)); }
  SECTION("flat pool") {
    c.spec.mode = OutputMode::Pool;
    c.bad_slots = {3, 5, 40};  // token 5 has both
    report(run_case(c, seed() + n + 1));
  }
  SECTION("flat pool, fp8, int32 indices, slots only") {
    c.spec.mode = OutputMode::Pool, c.spec.cache = DType::FP8_E5M2;
    c.spec.positions = c.spec.slots = IndexType::I32;
    c.bad_positions.clear();
    c.bad_slots = {1, 2, 62};
    report(run_case(c, seed() + n + 2));
  }
  SECTION("paged, per-layer slot mappings") {
    c.spec.mode = OutputMode::Pool, c.spec.paged = true;
    c.layout = Layout::FlashInferNHD, c.per_layer_slots = true;
    c.bad_slots = {7, 8};
    report(run_case(c, seed() + n + 3));
  }
  SECTION("no RoPE: positions are not read, so none is flagged") {
    c.spec.rotary_dim = 0, c.spec.mode = OutputMode::Pool;
    c.bad_slots = {10};
    report(run_case(c, seed() + n + 4));
  }
}

TEST_CASE("flat pool: the fast path's results are unchanged (no bias, shared slots)",
          "[gpu][engine]") {
  require_gpu();
  Case c;
  c.spec = base_spec(OutputMode::Pool);
  c.T = 1000, c.num_blocks = 100, c.block_size = 16;
  report(run_case(c, seed() + 300));
}

TEST_CASE("tensor parallelism: every rank's shard equals the TP=1 result bit for bit (one GPU)",
          "[gpu][engine][tp]") {
  require_gpu();
  TpCase c;
  c.seed = seed();
  const TpHost h = make_tp_host(c);
  const TpResult full = run_tp_rank(c, h, 1, 0, 0);
  // TP=1 against the float64 reference, from its own projection.
  {
    fkv::ReferenceInputs ri;
    ri.spec.num_kv_heads = c.num_kv_heads, ri.spec.head_dim = c.head_dim,
    ri.spec.rotary_dim = c.head_dim;
    ri.spec.k_norm = fkv::KNormKind::Rms, ri.spec.kv_bias = c.bias;
    ri.num_tokens = c.tokens;
    ri.num_layers = c.layers;
    ri.proj = full.proj.data();
    const std::vector<std::uint8_t> pos = index_bytes(IndexType::I64, h.positions);
    ri.positions = pos.data();
    // The materializer's table is fkv::RopeTable's; recompute it the same way for the reference.
    const fkv::ModelConfig config =
        fkv::ModelConfig::from_json(std::string_view(c.config_json()), "tp-case");
    const fkv::AttentionSpec attn = fkv::validate(config);
    fkv::RopeOptions ro;
    ro.max_position_embeddings = c.max_position;
    const fkv::RopeTable table(attn.rope, c.head_dim, c.max_position, ro);
    const std::vector<std::uint8_t> cs = table.bytes(DType::FP32);
    ri.cos_sin = cs.data();
    ri.max_position = c.max_position;
    std::vector<float> w, bias;
    for (const auto& kn : h.k_norm) w.insert(w.end(), kn.begin(), kn.end());
    for (const auto& b : h.bias) bias.insert(bias.end(), b.begin(), b.end());
    ri.k_norm_weight = w.data();
    ri.kv_bias = bias.data();
    const std::vector<float> eps(static_cast<std::size_t>(c.layers), 1e-6f);
    ri.eps = eps;
    const fkv::CompareResult rk = fkv::compare(DType::BF16, full.k.data(), fkv::reference_k(ri));
    const fkv::CompareResult rv = fkv::compare(DType::BF16, full.v.data(), fkv::reference_v(ri));
    INFO(rk.summary("k") << "\n" << rv.summary("v"));
    CHECK(rk.ok());
    CHECK(rv.ok());
  }
  for (int tp : {2, 4, 8, 16}) {  // 16 > 8 heads: one replicated head per rank
    for (int r = 0; r < tp; ++r) {
      const TpResult shard = run_tp_rank(c, h, tp, r, 0);
      INFO("tp_size=" << tp << " rank=" << r);
      CHECK(shard.num_heads == (tp <= 8 ? 8 / tp : 1));
      CHECK(compare_shard(c, full, shard) == "");
    }
  }
}
