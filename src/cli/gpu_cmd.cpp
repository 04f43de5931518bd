// fkv-jit selftest / bench: the kernels of a config's plan on the local GPU.
//   selftest: every variant against the float64 reference on fresh random inputs, outputs
//             poisoned first, V bit-exact where the cache has the activation dtype. Every
//             written row is checked for poison; a sample of tokens (all of them up to
//             kExactTokens) is compared element by element with the reference.
//
// Every upload and poison fill is issued on the launch stream. The legacy-stream forms
// (cuMemcpyHtoD, cuMemsetD8) may still be running when they return, and a non-blocking stream
// does not wait for them: an earlier version poisoned the pool that way, and the fill of the
// last layers' buffers overwrote the kernel's rows at large sizes (issue: pool mode "loses"
// writes at 24 layers x 32 heads x 1000 tokens).
//   bench:    median GPU time per call over CUDA-graph replays, and the bandwidth it implies.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <numeric>
#include <random>
#include <sstream>
#include <thread>
#include <vector>

#include "commands.hpp"
#include "fkv/driver.hpp"
#include "fkv/materialize.hpp"
#include "fkv/rope.hpp"
#include "fkv/runtime.hpp"
#include "fkv/spec.hpp"
#include "fkv/validate.hpp"
#include "reference.hpp"

namespace fkv::cli {
namespace {

struct GpuArgs {
  std::string config;
  std::string dtype, kv_dtype;
  std::vector<std::int64_t> tokens;
  int device = 0;
  std::uint64_t seed = 0;
};

// splitmix64: fast and deterministic; the selftest fills hundreds of millions of elements.
std::uint64_t splitmix(std::uint64_t& state) {
  std::uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// n random values of `dtype` (mean 0, variance 1, bell-shaped: a sum of four uniforms), filled
// by all hardware threads, each chunk from its own seed derived from `seed`.
std::vector<std::uint8_t> random_values(DType dtype, std::size_t n, std::uint64_t seed) {
  const int size = dtype_size(dtype);
  std::vector<std::uint8_t> bytes(n * static_cast<std::size_t>(size));
  const unsigned workers = std::max(1u, std::min(16u, std::thread::hardware_concurrency()));
  const std::size_t chunk = (n + workers - 1) / workers;
  std::vector<std::thread> pool;
  for (unsigned w = 0; w < workers; ++w)
    pool.emplace_back([&, w] {
      std::uint64_t state = seed * 0x100000001b3ull + w;
      for (std::size_t i = w * chunk; i < std::min(n, (w + 1) * chunk); ++i) {
        double u = 0;
        for (int j = 0; j < 4; ++j) u += static_cast<double>(splitmix(state) >> 11) * 0x1.0p-53;
        const std::uint32_t b = round_to(dtype, (u - 2.0) * 1.7320508075688772);
        std::memcpy(&bytes[i * size], &b, size);
      }
    });
  for (auto& t : pool) t.join();
  return bytes;
}

// Tokens compared element by element with the float64 reference: all of them up to this many,
// else the first and last quarter of this many and a random half in between.
constexpr std::int64_t kExactTokens = 256;

std::vector<std::int64_t> sample_tokens(std::int64_t T, std::mt19937_64& rng) {
  std::vector<std::int64_t> out;
  if (T <= kExactTokens) {
    out.resize(T);
    std::iota(out.begin(), out.end(), 0);
    return out;
  }
  const std::int64_t edge = kExactTokens / 4;
  std::vector<std::int64_t> middle(T - 2 * edge);
  std::iota(middle.begin(), middle.end(), edge);
  std::shuffle(middle.begin(), middle.end(), rng);
  middle.resize(kExactTokens - 2 * edge);
  for (std::int64_t t = 0; t < edge; ++t) out.push_back(t);
  out.insert(out.end(), middle.begin(), middle.end());
  for (std::int64_t t = T - edge; t < T; ++t) out.push_back(t);
  std::sort(out.begin(), out.end());
  return out;
}

// One plan group's kernel with what it needs on the device: random proj, positions, a cos/sin
// table from the group's RoPE parameters, K-norm weights, and the output of its mode. Uploads
// and poison fills are issued on `stream`, in order with the launch.
struct Problem {
  KernelSpec spec;
  CUstream stream;
  std::int64_t T = 0, L = 0, max_pos = 4096, slots = 0;
  std::vector<std::uint8_t> proj, cos_sin;
  std::vector<std::int64_t> positions, cache_loc;
  std::vector<float> weight, eps, k_scales, v_scales;
  DeviceBuffer d_proj, d_pos, d_loc, d_cs, d_w, d_k, d_v;
  std::vector<DeviceBuffer> d_kpool, d_vpool;
  std::vector<void*> kptr, vptr;

  std::int64_t kv() const { return std::int64_t{spec.num_kv_heads} * spec.head_dim; }
  std::size_t row_bytes() const { return static_cast<std::size_t>(kv() * dtype_size(spec.cache)); }
  std::size_t out_bytes() const { return static_cast<std::size_t>(L * T) * row_bytes(); }
  bool pool_mode() const { return spec.mode == OutputMode::Pool; }

  Problem(const KernelSpec& s, const LayerGroup& g, const ModelConfig& cfg, std::int64_t tokens,
          std::mt19937_64& rng, CUstream launch_stream)
      : spec(s),
        stream(launch_stream),
        T(tokens),
        L(static_cast<std::int64_t>(g.layers.size())),
        slots(2 * tokens + 16) {
    std::uniform_real_distribution<double> uni(0.5, 2.0);
    proj = random_values(s.act, static_cast<std::size_t>(T * L * 2 * kv()), rng());
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
    d_proj = upload(proj.data(), proj.size());
    d_pos = upload(positions.data(), T * 8);
    d_loc = upload(cache_loc.data(), T * 8);
    d_w = upload(weight.data(), weight.size() * 4);
    if (!cos_sin.empty()) d_cs = upload(cos_sin.data(), cos_sin.size());
    if (pool_mode()) {
      for (std::int64_t l = 0; l < L; ++l) {
        d_kpool.emplace_back(static_cast<std::size_t>(slots) * row_bytes());
        d_vpool.emplace_back(static_cast<std::size_t>(slots) * row_bytes());
        kptr.push_back(d_kpool.back().ptr());
        vptr.push_back(d_vpool.back().ptr());
      }
    } else {
      d_k = DeviceBuffer(out_bytes());
      d_v = DeviceBuffer(out_bytes());
    }
  }

  DeviceBuffer upload(const void* host, std::size_t bytes) const {
    DeviceBuffer b(bytes);
    if (bytes) FKV_CU(cuMemcpyHtoDAsync, b.get(), host, bytes, stream);
    return b;
  }

  FusedKVInputs inputs() const {
    FusedKVInputs in;
    in.proj = d_proj.ptr();
    in.num_tokens = T;
    in.num_layers = L;
    in.positions = d_pos.ptr();
    in.cos_sin = cos_sin.empty() ? nullptr : d_cs.ptr();
    in.max_position = max_pos;
    in.k_norm_weight =
        k_norm_weighted(spec.k_norm) ? static_cast<const float*>(d_w.ptr()) : nullptr;
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
  void launch(const LoadedKernel& k) const {
    if (pool_mode())
      materialize_pool(k, inputs(), pool(), stream);
    else
      materialize_stacked(k, inputs(), StackedOutput{d_k.ptr(), d_v.ptr()}, stream);
  }
  void poison() const {
    auto fill = [&](const DeviceBuffer& b) {
      if (b.size()) FKV_CU(cuMemsetD8Async, b.get(), 0xFF, b.size(), stream);
    };
    fill(d_k);
    fill(d_v);
    for (const auto& b : d_kpool) fill(b);
    for (const auto& b : d_vpool) fill(b);
  }

  // Host copy of the output in [L, T, H, D] (pool rows gathered; skipped tokens stay poison),
  // plus the count of bytes that should have stayed poisoned but did not (pool rows no token
  // targets). Synchronizes the stream first.
  std::vector<std::uint8_t> download(bool k_side, std::int64_t& stray) const {
    FKV_CU(cuStreamSynchronize, stream);
    const std::size_t row = row_bytes();
    std::vector<std::uint8_t> out(out_bytes(), 0xFF);
    stray = 0;
    if (!pool_mode()) {
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
        if (cache_loc[t] >= 0) std::memcpy(&out[(l * T + t) * row], &pool[cache_loc[t] * row], row);
      for (std::int64_t s = 0; s < slots; ++s)
        if (!used[s])
          for (std::size_t b = 0; b < row; ++b) stray += pool[s * row + b] != 0xFF;
    }
    return out;
  }
};

// Elements of the rows of written tokens that still hold the poison pattern (all bits set: NaN
// in every output dtype, which the kernel never produces from finite inputs).
std::int64_t count_poison(const Problem& p, const std::vector<std::uint8_t>& out) {
  const int w = dtype_size(p.spec.cache);
  const std::int64_t kv = p.kv();
  std::int64_t n = 0;
  for (std::int64_t l = 0; l < p.L; ++l)
    for (std::int64_t t = 0; t < p.T; ++t) {
      if (p.pool_mode() && p.cache_loc[t] < 0) continue;
      const std::uint8_t* row = &out[static_cast<std::size_t>((l * p.T + t) * kv * w)];
      for (std::int64_t e = 0; e < kv; ++e) {
        bool all = true;
        for (int b = 0; b < w; ++b) all = all && row[e * w + b] == 0xFF;
        n += all;
      }
    }
  return n;
}

// The rows of `tokens` from an [L, T, H, D] output, as [L, tokens, H, D].
std::vector<std::uint8_t> gather_tokens(const Problem& p, const std::vector<std::uint8_t>& out,
                                        const std::vector<std::int64_t>& tokens) {
  const std::size_t row = p.row_bytes(), n = tokens.size();
  std::vector<std::uint8_t> g(static_cast<std::size_t>(p.L) * n * row);
  for (std::int64_t l = 0; l < p.L; ++l)
    for (std::size_t i = 0; i < n; ++i)
      std::memcpy(&g[(l * n + i) * row], &out[(l * p.T + tokens[i]) * row], row);
  return g;
}

struct CheckResult {
  CompareResult k, v;
  std::int64_t poison_k = 0, poison_v = 0, stray = 0, rows_exact = 0, rows_written = 0;
  bool v_exact = false;
  bool ok() const { return k.ok() && v.ok() && poison_k == 0 && poison_v == 0 && stray == 0; }
};

// Downloads p's output and checks it: no poison left in any written row, nothing written to
// untargeted pool rows, and the sampled tokens' rows against the float64 reference.
CheckResult check_problem(const Problem& p, std::mt19937_64& rng) {
  CheckResult r;
  std::int64_t stray_k = 0, stray_v = 0;
  const auto gk = p.download(true, stray_k);
  const auto gv = p.download(false, stray_v);
  r.stray = stray_k + stray_v;
  r.poison_k = count_poison(p, gk);
  r.poison_v = count_poison(p, gv);

  const std::vector<std::int64_t> tokens = sample_tokens(p.T, rng);
  const auto n = static_cast<std::int64_t>(tokens.size());
  const std::size_t proj_row = static_cast<std::size_t>(p.L * 2 * p.kv() * dtype_size(p.spec.act));
  std::vector<std::uint8_t> proj(static_cast<std::size_t>(n) * proj_row);
  std::vector<std::int64_t> positions(n);
  std::vector<std::uint8_t> mask(n, 1);
  for (std::int64_t i = 0; i < n; ++i) {
    std::memcpy(&proj[i * proj_row], &p.proj[tokens[i] * proj_row], proj_row);
    positions[i] = p.positions[tokens[i]];
    if (p.pool_mode()) mask[i] = p.cache_loc[tokens[i]] >= 0;
  }
  ReferenceInputs ri;
  ri.spec = p.spec;
  ri.spec.positions = IndexType::I64;
  ri.num_tokens = n;
  ri.num_layers = p.L;
  ri.proj = proj.data();
  ri.positions = positions.data();
  ri.cos_sin = p.cos_sin.empty() ? nullptr : p.cos_sin.data();
  ri.max_position = p.max_pos;
  ri.k_norm_weight = k_norm_weighted(p.spec.k_norm) ? p.weight.data() : nullptr;
  ri.eps = p.eps;
  if (is_fp8(p.spec.cache) && p.pool_mode()) {
    ri.k_scales = p.k_scales;
    ri.v_scales = p.v_scales;
  }
  CompareOptions ko, vo;
  ko.token_mask = vo.token_mask = mask;
  vo.exact = r.v_exact = p.spec.cache == p.spec.act;
  std::thread v_side([&] {
    r.v = compare(p.spec.cache, gather_tokens(p, gv, tokens).data(), reference_v(ri), vo);
  });
  r.k = compare(p.spec.cache, gather_tokens(p, gk, tokens).data(), reference_k(ri), ko);
  v_side.join();
  for (auto m : mask) r.rows_exact += m;
  r.rows_exact *= p.L;
  for (std::int64_t t = 0; t < p.T; ++t) r.rows_written += !p.pool_mode() || p.cache_loc[t] >= 0;
  r.rows_written *= p.L;
  return r;
}

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
  const DType act = a.dtype.empty() ? act_dtype_of(cfg) : parse_dtype(a.dtype);
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
      "selftest",
      "check every kernel of a config's plan against the float64 reference on this GPU");
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
    std::int64_t rows_exact = 0, rows_written = 0;
    for (const auto& [group, spec] : vs) {
      const LoadedKernel& k = Runtime::global().prepare(spec, st.device);
      for (std::int64_t T : st.tokens) {
        const auto t0 = std::chrono::steady_clock::now();
        Problem p(spec, group, cfg, T, rng, stream.get());
        p.poison();
        p.launch(k);
        const CheckResult r = check_problem(p, rng);
        const double secs =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        ++total;
        failed += !r.ok();
        rows_exact += r.rows_exact;
        rows_written += r.rows_written;
        std::printf(
            "%s %-44s layers %s T=%-6lld K max %.2f ulp, V %s; %lld of %lld rows vs reference "
            "(%.1f s)%s\n",
            r.ok() ? "PASS" : "FAIL", spec.short_name().c_str(),
            [&] {
              std::ostringstream o;
              for (std::size_t i = 0; i < group.layers.size(); ++i)
                o << (i ? "," : "") << group.layers[i];
              return o.str();
            }()
                .c_str(),
            static_cast<long long>(T), r.k.max_ulp_error,
            r.v_exact ? (r.v.ok() ? "bit-exact" : "NOT bit-exact") : (r.v.ok() ? "ok" : "wrong"),
            static_cast<long long>(r.rows_exact), static_cast<long long>(r.rows_written), secs,
            r.stray ? " (untargeted pool rows written)" : "");
        if (r.poison_k || r.poison_v)
          std::printf("  rows not written: %lld K and %lld V elements still hold the poison\n",
                      static_cast<long long>(r.poison_k), static_cast<long long>(r.poison_v));
        if (!r.k.ok()) std::printf("%s\n", r.k.summary("k").c_str());
        if (!r.v.ok()) std::printf("%s\n", r.v.summary("v").c_str());
      }
    }
    std::printf(
        "%d of %d checks passed; %lld of %lld written rows compared element by element, all "
        "checked for unwritten elements\n",
        total - failed, total, static_cast<long long>(rows_exact),
        static_cast<long long>(rows_written));
    if (failed)
      throw CommandFailure(GpuCheckFailed, std::to_string(failed) + " selftest checks failed");
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
        Problem p(spec, group, cfg, T, rng, stream.get());
        p.launch(k);  // warm-up outside the capture
        stream.synchronize();
        CUgraph graph = nullptr;
        CUgraphExec exec = nullptr;
        FKV_CU(cuStreamBeginCapture, stream.get(), CU_STREAM_CAPTURE_MODE_THREAD_LOCAL);
        p.launch(k);
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
        const double bytes =
            double(T) * p.L * 2 * p.kv() * (dtype_size(spec.act) + dtype_size(spec.cache)) +
            T * 8.0 * (spec.mode == OutputMode::Pool ? 2 : 1) +
            double(T) * spec.rotary_dim * dtype_size(spec.cos_sin);
        std::printf("%-44s %8lld %12.2f %10.0f\n", spec.short_name().c_str(),
                    static_cast<long long>(T), us, bytes / (us * 1e-6) / 1e9);
      }
    }
  });
}

}  // namespace fkv::cli
