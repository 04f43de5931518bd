// One materialize call, end to end, on whichever device's context is current: random inputs,
// device buffers (poisoned outputs), the launch, and the check against the float64 reference.
// Shared by test_multi_device (threads over two devices) and rank_worker (one process per
// device). No Catch2 here: it runs in worker threads and in the worker executable, so it
// reports failures as strings and never asserts.
#pragma once

#include <cuda.h>

#include <cmath>
#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

#include "fkv/driver.hpp"
#include "fkv/materialize.hpp"
#include "fkv/spec.hpp"
#include "gpu/gpu_harness.hpp"
#include "reference.hpp"

namespace fkv_test {

// Contiguous layouts only: the stride and padding cases are test_materialize_gpu's job; here
// the point is which device a call lands on.
struct Problem {
  fkv::KernelSpec spec;
  std::int64_t T = 1, L = 1, max_pos = 1, num_slots = 0;

  std::int64_t kv() const { return std::int64_t{spec.num_kv_heads} * spec.head_dim; }
  bool pool() const { return spec.mode == fkv::OutputMode::Pool; }
  std::string describe() const {
    std::ostringstream os;
    os << "[" << spec.canonical() << "] T=" << T << " L=" << L << " max_pos=" << max_pos;
    if (pool()) os << " num_slots=" << num_slots;
    return os.str();
  }
};

struct HostProblem {
  std::vector<std::uint8_t> proj, positions, cos_sin, cache_loc;
  std::vector<std::int64_t> slots;
  std::vector<float> weight, eps, k_scales, v_scales;
};

inline HostProblem make_host(const Problem& p, Rng& rng) {
  const fkv::KernelSpec& s = p.spec;
  HostProblem h;
  h.proj = random_values(s.act, static_cast<std::size_t>(p.T * p.L * 2 * p.kv()), 1.0, rng);
  std::vector<std::int64_t> pos(static_cast<std::size_t>(p.T));
  for (auto& x : pos) x = rng.range(0, p.max_pos - 1);
  h.positions = index_bytes(s.positions, pos);
  if (s.rotary_dim > 0) {
    const int w = elem_size(s.cos_sin), half = s.rotary_dim / 2;
    h.cos_sin.assign(static_cast<std::size_t>(p.max_pos * s.rotary_dim * w), 0);
    for (std::int64_t r = 0; r < p.max_pos; ++r) {
      std::uint8_t* row = h.cos_sin.data() + r * s.rotary_dim * w;
      for (int i = 0; i < half; ++i) {
        const double angle = 6.283185307179586 * rng.uniform();
        store_value(s.cos_sin, std::cos(angle), row + i * w);
        store_value(s.cos_sin, std::sin(angle), row + (half + i) * w);
      }
    }
  }
  if (fkv::k_norm_weighted(s.k_norm)) {
    h.weight.resize(static_cast<std::size_t>(p.L * s.head_dim));
    for (auto& x : h.weight) x = static_cast<float>(1.0 + 0.2 * rng.normal());
  }
  for (std::int64_t l = 0; l < p.L; ++l) h.eps.push_back(1e-6f);
  if (p.pool()) {
    // Distinct slots (a random permutation's first T entries), every 7th token skipped.
    std::vector<std::int64_t> perm(static_cast<std::size_t>(p.num_slots));
    for (std::size_t i = 0; i < perm.size(); ++i) perm[i] = static_cast<std::int64_t>(i);
    for (std::int64_t t = 0; t < p.T; ++t) {
      std::swap(perm[static_cast<std::size_t>(t)],
                perm[static_cast<std::size_t>(rng.range(t, p.num_slots - 1))]);
      h.slots.push_back(t % 7 == 3 ? -1 : perm[static_cast<std::size_t>(t)]);
    }
    h.cache_loc = index_bytes(s.slots, h.slots);
    if (fkv::is_fp8(s.cache))
      for (std::int64_t l = 0; l < p.L; ++l) {
        h.k_scales.push_back(static_cast<float>(std::exp2(-3 + 4 * rng.uniform())));
        h.v_scales.push_back(static_cast<float>(std::exp2(-3 + 4 * rng.uniform())));
      }
  }
  return h;
}

// Buffers in the calling thread's current context (so on that context's device).
struct DeviceProblem {
  fkv::DeviceBuffer proj, positions, cos_sin, weight, cache_loc, k_out, v_out;
  std::vector<fkv::DeviceBuffer> k_pool, v_pool;
  std::vector<void*> k_ptrs, v_ptrs;
};

inline std::size_t out_bytes(const Problem& p) {
  return static_cast<std::size_t>((p.pool() ? p.num_slots : p.L * p.T) * p.kv() *
                                  elem_size(p.spec.cache));
}

// Allocates, uploads and poisons the outputs, in `s`'s order.
inline DeviceProblem make_device(const Problem& p, const HostProblem& h, CUstream s) {
  DeviceProblem d;
  d.proj = to_device(h.proj, s);
  d.positions = to_device(h.positions, s);
  d.cos_sin = to_device(h.cos_sin, s);
  d.weight = to_device(h.weight, s);
  d.cache_loc = to_device(h.cache_loc, s);
  if (p.pool()) {
    for (std::int64_t l = 0; l < p.L; ++l) {
      d.k_pool.push_back(alloc(out_bytes(p)));
      d.v_pool.push_back(alloc(out_bytes(p)));
      poison(d.k_pool.back(), s);
      poison(d.v_pool.back(), s);
      d.k_ptrs.push_back(d.k_pool.back().ptr());
      d.v_ptrs.push_back(d.v_pool.back().ptr());
    }
  } else {
    d.k_out = alloc(out_bytes(p));
    d.v_out = alloc(out_bytes(p));
    poison(d.k_out, s);
    poison(d.v_out, s);
  }
  return d;
}

// The device ordinal `ptr` was allocated on (UVA: asks the driver, not the current context).
inline int device_of(CUdeviceptr ptr) {
  int ordinal = -1;
  FKV_CU(cuPointerGetAttribute, &ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, ptr);
  return ordinal;
}

// materialize_stacked / materialize_pool with `kernel` on `s`. Throws what they throw.
inline void launch(const fkv::LoadedKernel& kernel, const Problem& p, const HostProblem& h,
                   const DeviceProblem& d, CUstream s) {
  fkv::FusedKVInputs in;
  in.proj = d.proj.ptr();
  in.num_tokens = p.T;
  in.num_layers = p.L;
  in.positions = d.positions.ptr();
  in.cos_sin = p.spec.rotary_dim > 0 ? d.cos_sin.ptr() : nullptr;
  in.max_position = p.max_pos;
  in.k_norm_weight =
      fkv::k_norm_weighted(p.spec.k_norm) ? static_cast<const float*>(d.weight.ptr()) : nullptr;
  in.eps = h.eps;
  if (p.pool()) {
    fkv::PoolOutput out;
    out.cache_loc = d.cache_loc.ptr();
    out.k_buffers = d.k_ptrs;
    out.v_buffers = d.v_ptrs;
    out.num_slots = p.num_slots;
    out.k_scales = h.k_scales;
    out.v_scales = h.v_scales;
    fkv::materialize_pool(kernel, in, out, s);
  } else {
    fkv::materialize_stacked(kernel, in, {d.k_out.ptr(), d.v_out.ptr()}, s);
  }
}

// Synchronizes `s` (the current context must be the buffers' context), downloads the outputs
// and compares them with the reference. Pool rows no token targets must still be poison.
// Returns one string per problem found, each starting with the problem's description.
inline std::vector<std::string> check(const Problem& p, const HostProblem& h,
                                      const DeviceProblem& d, CUstream s) {
  std::vector<std::string> failures;
  const fkv::KernelSpec& spec = p.spec;
  const std::int64_t kv = p.kv();
  const int w = elem_size(spec.cache);
  std::vector<std::uint8_t> mask(static_cast<std::size_t>(p.T), 1);
  std::vector<std::uint8_t> k_bits, v_bits;
  if (!p.pool()) {
    k_bits = download(d.k_out, s);
    v_bits = download(d.v_out, s);
  } else {
    const std::size_t row = static_cast<std::size_t>(kv * w);
    k_bits.assign(static_cast<std::size_t>(p.L * p.T) * row, kPoison);
    v_bits.assign(k_bits.size(), kPoison);
    std::vector<std::uint8_t> targeted(static_cast<std::size_t>(p.num_slots), 0);
    for (std::int64_t t = 0; t < p.T; ++t) {
      const std::int64_t slot = h.slots[static_cast<std::size_t>(t)];
      if (slot < 0)
        mask[static_cast<std::size_t>(t)] = 0;
      else
        targeted[static_cast<std::size_t>(slot)] = 1;
    }
    for (std::int64_t l = 0; l < p.L; ++l) {
      for (int kind = 0; kind < 2; ++kind) {
        const std::vector<std::uint8_t> buf =
            download((kind ? d.v_pool : d.k_pool)[static_cast<std::size_t>(l)], s);
        std::vector<std::uint8_t>& out = kind ? v_bits : k_bits;
        for (std::int64_t t = 0; t < p.T; ++t) {
          const std::int64_t slot = h.slots[static_cast<std::size_t>(t)];
          if (slot >= 0)
            std::memcpy(out.data() + static_cast<std::size_t>(l * p.T + t) * row,
                        buf.data() + static_cast<std::size_t>(slot) * row, row);
        }
        for (std::int64_t r = 0; r < p.num_slots; ++r) {
          if (targeted[static_cast<std::size_t>(r)]) continue;
          const std::int64_t bad = first_unpoisoned(buf, static_cast<std::size_t>(r) * row,
                                                    static_cast<std::size_t>(r + 1) * row);
          if (bad >= 0) {
            failures.push_back(std::string(kind ? "v" : "k") + "_buffers[" + std::to_string(l) +
                               "] slot " + std::to_string(r) +
                               " was written although no token targets it");
            break;
          }
        }
      }
    }
  }

  fkv::ReferenceInputs ri;
  ri.spec = spec;
  ri.num_tokens = p.T;
  ri.num_layers = p.L;
  ri.proj = h.proj.data();
  ri.positions = h.positions.data();
  ri.cos_sin = h.cos_sin.data();
  ri.max_position = p.max_pos;
  ri.k_norm_weight = h.weight.data();
  ri.eps = h.eps;
  ri.k_scales = h.k_scales;
  ri.v_scales = h.v_scales;
  fkv::CompareOptions k_opt, v_opt;
  k_opt.exact = spec.cache == spec.act && spec.rotary_dim == 0 &&
                spec.k_norm == fkv::KNormKind::None;  // a plain copy
  v_opt.exact = spec.cache == spec.act;
  k_opt.token_mask = mask;
  v_opt.token_mask = mask;
  const fkv::CompareResult rk =
      fkv::compare(spec.cache, k_bits.data(), fkv::reference_k(ri), k_opt);
  const fkv::CompareResult rv =
      fkv::compare(spec.cache, v_bits.data(), fkv::reference_v(ri), v_opt);
  if (!rk.ok()) failures.push_back(rk.summary("k"));
  if (!rv.ok()) failures.push_back(rv.summary("v"));
  for (auto& f : failures) f = p.describe() + ": " + f;
  return failures;
}

}  // namespace fkv_test
