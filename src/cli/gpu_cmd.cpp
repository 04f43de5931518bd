// fkv-jit selftest / bench: the kernels of a config's plan on the local GPU.
//   selftest: every variant against the float64 reference on fresh random inputs, outputs
//             poisoned first, V bit-exact where the cache has the activation dtype.
//   bench:    median GPU time per call over CUDA-graph replays, and the bandwidth it implies.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <numeric>
#include <random>
#include <sstream>
#include <vector>

#include "commands.hpp"
#include "fkv/driver.hpp"
#include "fkv/materialize.hpp"
#include "fkv/reference.hpp"
#include "fkv/rope.hpp"
#include "fkv/runtime.hpp"
#include "fkv/spec.hpp"
#include "fkv/validate.hpp"

namespace fkv::cli {
namespace {

struct GpuArgs {
  std::string config;
  std::string dtype, kv_dtype;
  std::vector<std::int64_t> tokens;
  int device = 0;
  std::uint64_t seed = 0;
};

// One plan group's kernels with what they need on the device: random proj, positions, a
// cos/sin table from the group's RoPE parameters, K-norm weights; outputs for both modes.
struct Problem {
  KernelSpec spec;
  std::int64_t T = 0, L = 0, max_pos = 4096, slots = 0;
  std::vector<std::uint8_t> proj, cos_sin;
  std::vector<std::int64_t> positions, cache_loc;
  std::vector<float> weight, eps, k_scales, v_scales;
  DeviceBuffer d_proj, d_pos, d_loc, d_cs, d_w, d_k, d_v;
  std::vector<DeviceBuffer> d_kpool, d_vpool;
  std::vector<void*> kptr, vptr;

  std::int64_t kv() const { return std::int64_t{spec.num_kv_heads} * spec.head_dim; }
  std::size_t out_bytes() const { return static_cast<std::size_t>(L * T * kv() * dtype_size(spec.cache)); }

  Problem(const KernelSpec& s, const LayerGroup& g, const ModelConfig& cfg, std::int64_t tokens,
          std::mt19937_64& rng)
      : spec(s), T(tokens), L(static_cast<std::int64_t>(g.layers.size())), slots(2 * tokens + 16) {
    std::normal_distribution<double> normal(0.0, 1.0);
    std::uniform_real_distribution<double> uni(0.5, 2.0);
    const int as = dtype_size(s.act);
    proj.resize(static_cast<std::size_t>(T * L * 2 * kv() * as));
    for (std::size_t i = 0; i < proj.size() / as; ++i) {
      const std::uint32_t b = round_to(s.act, normal(rng));
      std::memcpy(&proj[i * as], &b, as);
    }
    positions.resize(T);
    for (auto& p : positions) p = static_cast<std::int64_t>(rng() % max_pos);
    std::vector<std::int64_t> perm(slots);
    std::iota(perm.begin(), perm.end(), 0);
    std::shuffle(perm.begin(), perm.end(), rng);
    cache_loc.assign(perm.begin(), perm.begin() + T);
    for (std::int64_t t = 5; t < T; t += 7) cache_loc[t] = -1;  // skipped tokens
    weight.resize(L * s.head_dim);
    for (auto& w : weight) w = static_cast<float>(uni(rng));
    eps.assign(L, static_cast<float>(cfg.eps.value > 0 ? cfg.eps.value : 1e-6));
    k_scales.resize(L);
    v_scales.resize(L);
    for (std::int64_t l = 0; l < L; ++l) {
      k_scales[l] = is_fp8(s.cache) ? static_cast<float>(uni(rng)) : 1.f;
      v_scales[l] = is_fp8(s.cache) ? static_cast<float>(uni(rng)) : 1.f;
    }
    if (s.rotary_dim > 0) {
      RopeOptions ro;
      ro.max_position_embeddings = cfg.max_position_embeddings.value;
      cos_sin = RopeTable(g.attn.rope, s.rotary_dim, max_pos, ro).bytes(s.cos_sin);
    }
    d_proj = DeviceBuffer(proj.size());
    FKV_CU(cuMemcpyHtoD, d_proj.get(), proj.data(), proj.size());
    d_pos = DeviceBuffer(T * 8);
    FKV_CU(cuMemcpyHtoD, d_pos.get(), positions.data(), T * 8);
    d_loc = DeviceBuffer(T * 8);
    FKV_CU(cuMemcpyHtoD, d_loc.get(), cache_loc.data(), T * 8);
    d_w = DeviceBuffer(weight.size() * 4);
    FKV_CU(cuMemcpyHtoD, d_w.get(), weight.data(), weight.size() * 4);
    if (!cos_sin.empty()) {
      d_cs = DeviceBuffer(cos_sin.size());
      FKV_CU(cuMemcpyHtoD, d_cs.get(), cos_sin.data(), cos_sin.size());
    }
    d_k = DeviceBuffer(out_bytes());
    d_v = DeviceBuffer(out_bytes());
    const std::size_t pool_bytes = static_cast<std::size_t>(slots * kv() * dtype_size(s.cache));
    for (std::int64_t l = 0; l < L; ++l) {
      d_kpool.emplace_back(pool_bytes);
      d_vpool.emplace_back(pool_bytes);
      kptr.push_back(d_kpool.back().ptr());
      vptr.push_back(d_vpool.back().ptr());
    }
  }

  FusedKVInputs inputs() const {
    FusedKVInputs in;
    in.proj = d_proj.ptr();
    in.num_tokens = T;
    in.num_layers = L;
    in.positions = d_pos.ptr();
    in.cos_sin = cos_sin.empty() ? nullptr : d_cs.ptr();
    in.max_position = max_pos;
    in.k_norm_weight = spec.k_norm ? static_cast<const float*>(d_w.ptr()) : nullptr;
    in.eps = eps;
    return in;
  }
  PoolOutput pool() const {
    PoolOutput o;
    o.cache_loc = d_loc.ptr();
    o.k_buffers = kptr;
    o.v_buffers = vptr;
    o.num_slots = slots;
    if (is_fp8(spec.cache)) {
      o.k_scales = k_scales;
      o.v_scales = v_scales;
    }
    return o;
  }
  void launch(const LoadedKernel& k, CUstream s) const {
    if (spec.mode == OutputMode::Stacked)
      materialize_stacked(k, inputs(), StackedOutput{d_k.ptr(), d_v.ptr()}, s);
    else
      materialize_pool(k, inputs(), pool(), s);
  }
  void poison() const {
    FKV_CU(cuMemsetD8, d_k.get(), 0xFF, out_bytes());
    FKV_CU(cuMemsetD8, d_v.get(), 0xFF, out_bytes());
    for (std::int64_t l = 0; l < L; ++l) {
      FKV_CU(cuMemsetD8, d_kpool[l].get(), 0xFF, d_kpool[l].size());
      FKV_CU(cuMemsetD8, d_vpool[l].get(), 0xFF, d_vpool[l].size());
    }
  }

  // Host copy of the output in [L, T, H, D] (pool rows gathered), plus the count of bytes that
  // should have stayed poisoned but did not (pool rows no token targets).
  std::vector<std::uint8_t> download(bool k_side, std::int64_t& stray) const {
    const std::size_t row = static_cast<std::size_t>(kv() * dtype_size(spec.cache));
    std::vector<std::uint8_t> out(out_bytes());
    stray = 0;
    if (spec.mode == OutputMode::Stacked) {
      FKV_CU(cuMemcpyDtoH, out.data(), (k_side ? d_k : d_v).get(), out.size());
      return out;
    }
    std::vector<std::uint8_t> pool(static_cast<std::size_t>(slots) * row);
    std::vector<bool> used(slots, false);
    for (auto s : cache_loc)
      if (s >= 0) used[s] = true;
    for (std::int64_t l = 0; l < L; ++l) {
      FKV_CU(cuMemcpyDtoH, pool.data(), (k_side ? d_kpool : d_vpool)[l].get(), pool.size());
      for (std::int64_t t = 0; t < T; ++t)
        if (cache_loc[t] >= 0)
          std::memcpy(&out[(l * T + t) * row], &pool[cache_loc[t] * row], row);
      for (std::int64_t s = 0; s < slots; ++s)
        if (!used[s])
          for (std::size_t b = 0; b < row; ++b) stray += pool[s * row + b] != 0xFF;
    }
    return out;
  }
};

KernelSpec with_mode(KernelSpec s, OutputMode m) {
  s.mode = m;
  return s;
}

void add_common(CLI::App* cmd, GpuArgs& a, const char* tokens_help) {
  cmd->add_option("CONFIG", a.config, "model config.json")->required();
  cmd->add_option("--dtype", a.dtype, "activation dtype (default: the config's)");
  cmd->add_option("--kv-dtype", a.kv_dtype, "cache dtype (default: the activation dtype)");
  cmd->add_option("--tokens", a.tokens, tokens_help)->delimiter(',');
  cmd->add_option("--device", a.device, "CUDA device")->capture_default_str();
}

// (group, spec) pairs of the config's grouped plan, both output modes.
std::vector<std::pair<LayerGroup, KernelSpec>> variants(const GpuArgs& a, ModelConfig& cfg) {
  cfg = load_config(a.config);
  const Plan plan = make_plan(cfg, ValidationMode::Grouped);
  const DType act = a.dtype.empty() ? act_dtype_of(cfg.dtype.value) : parse_dtype(a.dtype);
  const DType cache = a.kv_dtype.empty() ? act : parse_dtype(a.kv_dtype);
  std::vector<std::pair<LayerGroup, KernelSpec>> out;
  for (const LayerGroup& g : plan.groups) {
    const KernelSpec s = make_kernel_spec(g.attn, act, cache);
    out.emplace_back(g, with_mode(s, OutputMode::Stacked));
    out.emplace_back(g, with_mode(s, OutputMode::Pool));
  }
  return out;
}

}  // namespace

void add_gpu_commands(CLI::App& app) {
  // selftest ----------------------------------------------------------------------------
  static GpuArgs st;
  CLI::App* s = app.add_subcommand(
      "selftest", "check every kernel of a config's plan against the float64 reference on this GPU");
  add_common(s, st, "token counts to test (default 1,77,1000)");
  s->add_option("--seed", st.seed, "random seed (default: random, printed)");
  s->callback([] {
    ModelConfig cfg;
    const auto vs = variants(st, cfg);
    if (st.tokens.empty()) st.tokens = {1, 77, 1000};
    if (st.seed == 0) st.seed = std::random_device{}() | 1;
    std::printf("selftest of %s on device %d, seed %llu\n", st.config.c_str(), st.device,
                static_cast<unsigned long long>(st.seed));
    ensure_context(st.device);
    std::mt19937_64 rng(st.seed);
    Stream stream;
    int failed = 0, total = 0;
    for (const auto& [group, spec] : vs) {
      const LoadedKernel& k = Runtime::global().prepare(spec, st.device);
      for (std::int64_t T : st.tokens) {
        Problem p(spec, group, cfg, T, rng);
        p.poison();
        p.launch(k, stream.get());
        stream.synchronize();
        ReferenceInputs ri;
        ri.spec = spec;
        ri.num_tokens = T;
        ri.num_layers = p.L;
        ri.proj = p.proj.data();
        ri.positions = p.positions.data();
        ri.cos_sin = p.cos_sin.empty() ? nullptr : p.cos_sin.data();
        ri.max_position = p.max_pos;
        ri.k_norm_weight = spec.k_norm ? p.weight.data() : nullptr;
        ri.eps = p.eps;
        if (is_fp8(spec.cache) && spec.mode == OutputMode::Pool) {
          ri.k_scales = p.k_scales;
          ri.v_scales = p.v_scales;
        }
        std::vector<std::uint8_t> mask;
        CompareOptions ko, vo;
        if (spec.mode == OutputMode::Pool) {
          for (auto l : p.cache_loc) mask.push_back(l >= 0);
          ko.token_mask = vo.token_mask = mask;
        }
        vo.exact = spec.cache == spec.act;
        std::int64_t stray_k = 0, stray_v = 0;
        const auto gk = p.download(true, stray_k);
        const auto gv = p.download(false, stray_v);
        const CompareResult rk = compare(spec.cache, gk.data(), reference_k(ri), ko);
        const CompareResult rv = compare(spec.cache, gv.data(), reference_v(ri), vo);
        const bool ok = rk.ok() && rv.ok() && stray_k == 0 && stray_v == 0;
        ++total;
        failed += !ok;
        std::printf("%s %-44s layers %s T=%-6lld K max %.2f ulp, V %s%s\n", ok ? "PASS" : "FAIL",
                    spec.short_name().c_str(), [&] {
                      std::ostringstream o;
                      for (std::size_t i = 0; i < group.layers.size(); ++i)
                        o << (i ? "," : "") << group.layers[i];
                      return o.str();
                    }().c_str(), static_cast<long long>(T), rk.max_ulp_error,
                    vo.exact ? (rv.ok() ? "bit-exact" : "NOT bit-exact") : (rv.ok() ? "ok" : "wrong"),
                    stray_k + stray_v ? " (untargeted pool rows written)" : "");
        if (!rk.ok()) std::printf("%s\n", rk.summary("k").c_str());
        if (!rv.ok()) std::printf("%s\n", rv.summary("v").c_str());
      }
    }
    std::printf("%d of %d checks passed\n", total - failed, total);
    if (failed) throw CommandFailure(GpuCheckFailed, std::to_string(failed) + " selftest checks failed");
  });

  // bench -------------------------------------------------------------------------------
  static GpuArgs bn;
  static int replays = 200;
  CLI::App* b = app.add_subcommand(
      "bench", "GPU time per call of a config's kernels (CUDA events over graph replays, median)");
  add_common(b, bn, "token counts (default 8,64,512,4096,16384)");
  b->add_option("--replays", replays, "timed graph replays per point")->capture_default_str();
  b->callback([] {
    ModelConfig cfg;
    const auto vs = variants(bn, cfg);
    if (bn.tokens.empty()) bn.tokens = {8, 64, 512, 4096, 16384};
    ensure_context(bn.device);
    std::mt19937_64 rng(1);
    Stream stream;
    Event start, stop;
    auto& drv = Driver::get();
    std::printf("%-44s %8s %12s %10s\n", "variant", "tokens", "median us", "GB/s");
    for (const auto& [group, spec] : vs) {
      const LoadedKernel& k = Runtime::global().prepare(spec, bn.device);
      for (std::int64_t T : bn.tokens) {
        Problem p(spec, group, cfg, T, rng);
        p.launch(k, stream.get());  // warm-up outside the capture
        stream.synchronize();
        CUgraph graph = nullptr;
        CUgraphExec exec = nullptr;
        FKV_CU(cuStreamBeginCapture, stream.get(), CU_STREAM_CAPTURE_MODE_THREAD_LOCAL);
        p.launch(k, stream.get());
        FKV_CU(cuStreamEndCapture, stream.get(), &graph);
        FKV_CU(cuGraphInstantiate, &exec, graph, 0);
        std::vector<float> ms(static_cast<std::size_t>(std::max(replays, 1)));
        for (int i = 0; i < 10; ++i) FKV_CU(cuGraphLaunch, exec, stream.get());
        for (auto& m : ms) {
          FKV_CU(cuEventRecord, start.get(), stream.get());
          FKV_CU(cuGraphLaunch, exec, stream.get());
          FKV_CU(cuEventRecord, stop.get(), stream.get());
          FKV_CU(cuEventSynchronize, stop.get());
          FKV_CU(cuEventElapsedTime, &m, start.get(), stop.get());
        }
        drv.cuGraphExecDestroy(exec);
        drv.cuGraphDestroy(graph);
        std::nth_element(ms.begin(), ms.begin() + ms.size() / 2, ms.end());
        const double us = ms[ms.size() / 2] * 1e3;
        // Bytes that must move: read K/V of proj, write K/V, positions (+ slots), cos/sin rows.
        const double bytes = double(T) * p.L * 2 * p.kv() * (dtype_size(spec.act) + dtype_size(spec.cache)) +
                             T * 8.0 * (spec.mode == OutputMode::Pool ? 2 : 1) +
                             double(T) * spec.rotary_dim * dtype_size(spec.cos_sin);
        std::printf("%-44s %8lld %12.2f %10.0f\n", spec.short_name().c_str(),
                    static_cast<long long>(T), us, bytes / (us * 1e-6) / 1e9);
      }
    }
  });
}

}  // namespace fkv::cli
