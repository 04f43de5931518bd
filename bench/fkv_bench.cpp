// fkv_bench: the fkv-jit side of the benchmark harness (docs/performance.md).
//
// Sections, in the order they run (each writes into the --out JSON, which is rewritten after
// every step so that a crash leaves the finished parts behind):
//   compile   NVRTC / cache figures per kernel variant and per-config precompile (no GPU
//             needed; `--compile-only` stops here);
//   ceiling   the copy ceiling over 2 GiB, bytes moved = 2 x size: an SM copy kernel (the
//             baseline; cuMemcpyDtoDAsync uses the copy engines and is slower on an H200)
//             and cuMemcpyDtoDAsync, kept as "copy_ceiling_memcpy";
//   cases     per case of bench/cases.json: a copy of half the case's floor bytes (SM kernel
//             = "copy", memcpy = "copy_memcpy"),
//             materialize_stacked and materialize_pool, each output checked on the host;
//   launch    host cost per call of materialize_stacked vs a bare cuLaunchKernel;
//   load      cold compile + load, warm (disk cache) first launch, in-memory hit on the GPU.
//
// Timing method (bench_timing.hpp; the same as bench_gpu.py): `calls` back-to-back calls are
// captured into one CUDA graph (cuStreamBeginCapture / EndCapture); one sample = one replay of
// that graph between two CUDA events, divided by `calls` (20, or 5 when a call moves > 256 MiB);
// the result is the median over 20..200 samples (about --target-ms per measurement).
//
// A quick tuning run: --only NAME[,NAME...] --skip-compile --skip-host --tag TEXT (stored in
// the JSON; report.py takes several --fkv files and tabulates them by tag). Stdout gets one
// line per case: `name fkv_stacked_us copy_us fkv/copy`.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "bench_timing.hpp"
#include "fkv/arch.hpp"
#include "fkv/cache.hpp"
#include "fkv/codegen.hpp"
#include "fkv/compiler.hpp"
#include "fkv/config.hpp"
#include "fkv/driver.hpp"
#include "fkv/kernel_params.h"
#include "fkv/materialize.hpp"
#include "fkv/precompile.hpp"
#include "fkv/runtime.hpp"
#include "fkv/spec.hpp"
#include "fkv/validate.hpp"

namespace fs = std::filesystem;
using json = nlohmann::json;
using fkv_bench::time_graph;  // the timing method (bench_timing.hpp)
using Clock = std::chrono::steady_clock;

namespace {

__attribute__((format(printf, 1, 2))) void say(const char* fmt, ...) {
  char stamp[16];
  std::time_t now = std::time(nullptr);
  std::strftime(stamp, sizeof stamp, "%H:%M:%S", std::localtime(&now));
  std::fprintf(stderr, "[fkv_bench %s] ", stamp);
  va_list args;
  va_start(args, fmt);
  std::vfprintf(stderr, fmt, args);
  va_end(args);
  std::fputc('\n', stderr);
  std::fflush(stderr);
}

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

// ---------------------------------------------------------------------------------------------
// Cases (bench/cases.json, shared with bench_gpu.py)

struct Case {
  std::string name;
  int layers = 0, heads = 0, head_dim = 0, rotary_dim = 0;
  std::int64_t tokens = 0;
};

struct Defaults {
  fkv::DType dtype = fkv::DType::BF16;
  bool k_norm = true;
  bool neox = true;
  float eps = 1e-6f;
  double theta = 1e6;
  std::int64_t max_position = 32768;
};

struct CaseFile {
  Defaults defaults;
  std::vector<Case> cases;
};

CaseFile load_cases(const fs::path& path) {
  std::ifstream f(path);
  if (!f) throw std::runtime_error("cannot open the case list " + path.string() + "; pass --cases");
  json doc = json::parse(f);
  CaseFile out;
  const json& d = doc.at("defaults");
  out.defaults.dtype = fkv::parse_dtype(d.at("dtype").get<std::string>());
  out.defaults.k_norm = d.at("k_norm").get<bool>();
  out.defaults.neox = d.at("neox").get<bool>();
  out.defaults.eps = d.at("eps").get<float>();
  out.defaults.theta = d.at("rope_theta").get<double>();
  out.defaults.max_position = d.at("max_position").get<std::int64_t>();
  for (const json& c : doc.at("cases")) {
    Case x;
    x.name = c.at("name").get<std::string>();
    x.layers = c.at("layers").get<int>();
    x.heads = c.at("kv_heads").get<int>();
    x.head_dim = c.at("head_dim").get<int>();
    x.rotary_dim = c.at("rotary_dim").get<int>();
    x.tokens = c.at("tokens").get<std::int64_t>();
    out.cases.push_back(x);
  }
  return out;
}

fkv::KernelSpec make_spec(const Case& c, const Defaults& d, fkv::OutputMode mode) {
  fkv::KernelSpec s;
  s.num_kv_heads = c.heads;
  s.head_dim = c.head_dim;
  s.rotary_dim = c.rotary_dim;
  s.neox = d.neox;
  s.k_norm = d.k_norm ? fkv::KNormKind::Rms : fkv::KNormKind::None;
  s.act = d.dtype;
  s.cache = d.dtype;
  s.cos_sin = fkv::DType::FP32;
  s.positions = fkv::IndexType::I64;
  s.slots = fkv::IndexType::I64;
  s.mode = mode;
  return s;
}

// Bytes that must move (the floor of docs/performance.md): read proj K and V, write K and V,
// positions, slots (pool mode), cos/sin rows. The same formula is in bench_gpu.py and report.py.
std::int64_t floor_bytes(const Case& c, const Defaults& d, bool pool) {
  const std::int64_t kv = std::int64_t(c.heads) * c.head_dim;
  const std::int64_t elem = fkv::dtype_size(d.dtype);
  std::int64_t total = c.tokens * c.layers * 2 * kv * elem * 2;  // read proj + write K/V
  total += c.tokens * 8;                                         // positions, int64
  total += c.tokens * c.rotary_dim * 4;                          // cos/sin rows, fp32
  if (pool) total += c.tokens * 8;                               // cache_loc, int64
  return total;
}

int calls_per_graph(std::int64_t bytes) { return bytes > (std::int64_t(256) << 20) ? 5 : 20; }

// ---------------------------------------------------------------------------------------------
// Small host helpers

struct Rng {  // splitmix64
  std::uint64_t s;
  explicit Rng(std::uint64_t seed) : s(seed) {}
  std::uint64_t next() {
    std::uint64_t z = (s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  double uniform() { return double(next() >> 11) * (1.0 / 9007199254740992.0); }  // [0, 1)
  std::int64_t below(std::int64_t n) { return std::int64_t(next() % std::uint64_t(n)); }
};

std::uint16_t float_to_bf16(float f) {  // round to nearest even (finite inputs)
  std::uint32_t u;
  std::memcpy(&u, &f, 4);
  u += 0x7fffu + ((u >> 16) & 1u);
  return std::uint16_t(u >> 16);
}
float bf16_to_float(std::uint16_t h) {
  std::uint32_t u = std::uint32_t(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

fs::path make_temp_dir(const std::string& tag) {
  static int counter = 0;
  fs::path dir =
      fs::temp_directory_path() /
      ("fkv-bench-" + tag + "-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
  fs::remove_all(dir);
  fs::create_directories(dir);
  fs::permissions(dir, fs::perms::owner_all, fs::perm_options::replace);
  return dir;
}

fkv::CacheOptions cache_at(const fs::path& root) {
  fkv::CacheOptions o;
  o.root = root;
  return o;
}

// ---------------------------------------------------------------------------------------------
// Compile and cache figures (no GPU)

json compile_variant(const fkv::KernelSpec& spec, const fkv::CompileOptions& copts, int repeats) {
  json r = {{"kernel", spec.short_name()}, {"spec", spec.canonical()}};
  auto t0 = Clock::now();
  const fkv::KernelSource src = fkv::generate(spec);
  r["codegen_ms"] = ms_since(t0);

  std::vector<double> cold;
  std::size_t image_bytes = 0;
  for (int i = 0; i < repeats; ++i) {
    t0 = Clock::now();
    fkv::CompiledKernel k = fkv::compile(src, copts);
    cold.push_back(ms_since(t0));
    image_bytes = k.image.size();
  }
  std::sort(cold.begin(), cold.end());
  r["nvrtc_cold_ms"] = {{"median", cold[cold.size() / 2]},
                        {"min", cold.front()},
                        {"max", cold.back()},
                        {"runs", cold.size()}};
  r["image_bytes"] = image_bytes;

  const fs::path root = make_temp_dir("cache");
  {
    fkv::KernelCache cache(cache_at(root));
    t0 = Clock::now();
    fkv::CacheResult miss = cache.get(src, copts);
    r["cache_miss_ms"] = ms_since(t0);  // compile + publish to disk
    r["cache_miss_outcome"] = fkv::to_string(miss.outcome);
    t0 = Clock::now();
    fkv::CacheResult mem = cache.get(src, copts);
    r["memory_hit_ms"] = ms_since(t0);
    r["memory_hit_outcome"] = fkv::to_string(mem.outcome);
  }
  {
    fkv::KernelCache fresh(cache_at(root));  // a new process would see the same
    t0 = Clock::now();
    fkv::CacheResult disk = fresh.get(src, copts);
    r["disk_hit_ms"] = ms_since(t0);
    r["disk_hit_outcome"] = fkv::to_string(disk.outcome);
  }
  fs::remove_all(root);
  return r;
}

// Every variant a config needs, as `fkv-jit precompile CONFIG` builds them by default: each
// layer group of the grouped plan x {stacked, pool}, in the config's dtype; through
// fkv::precompile, once on one thread and once with a thread per variant.
json precompile_config(const fs::path& file, const fkv::CompileOptions& copts) {
  json r = {{"config", file.filename().string()}};
  try {
    const fkv::ModelConfig cfg = fkv::ModelConfig::from_file(file);
    const fkv::Plan plan = fkv::make_plan(cfg, fkv::ValidationMode::Grouped);
    fkv::VariantOptions vo;
    vo.act = fkv::act_dtype_of(cfg.dtype.value);
    vo.cache = vo.act;
    const std::size_t variants = fkv::kernel_specs_for(plan, vo).size();
    const std::vector<fkv::ArchTarget> targets = {{copts.arch, copts.ptx}};
    r["groups"] = plan.groups.size();
    r["variants"] = variants;

    for (const auto& [jobs, label] :
         {std::pair<unsigned, const char*>{1u, "sequential_ms"},
          std::pair<unsigned, const char*>{static_cast<unsigned>(variants), "parallel_ms"}}) {
      const fs::path root = make_temp_dir("precompile");
      {
        fkv::KernelCache cache(cache_at(root));
        r[label] = fkv::precompile(plan, vo, targets, cache, jobs).seconds * 1e3;
      }
      fs::remove_all(root);
    }
    r["parallel_threads"] = variants;
  } catch (const std::exception& e) {
    r["error"] = e.what();
  }
  return r;
}

// ---------------------------------------------------------------------------------------------
// GPU helpers

class BenchStream {
 public:
  BenchStream() { FKV_CU(cuStreamCreate, &s_, CU_STREAM_NON_BLOCKING); }
  ~BenchStream() {
    if (s_) fkv::Driver::get().cuStreamDestroy(s_);
  }
  BenchStream(const BenchStream&) = delete;
  BenchStream& operator=(const BenchStream&) = delete;
  CUstream get() const { return s_; }
  void sync() const { FKV_CU(cuStreamSynchronize, s_); }

 private:
  CUstream s_ = nullptr;
};

// Copies `bytes` from host `chunk` repeated (tiled) into `dst`.
void upload_tiled(const fkv::DeviceBuffer& dst, const void* chunk, std::size_t chunk_bytes) {
  for (std::size_t off = 0; off < dst.size(); off += chunk_bytes)
    FKV_CU(cuMemcpyHtoD, dst.get() + off, chunk, std::min(chunk_bytes, dst.size() - off));
  FKV_CU(
      cuCtxSynchronize);  // legacy-stream copies may still be in flight; timed streams don't wait
}

template <class T>
fkv::DeviceBuffer upload(const std::vector<T>& host) {
  fkv::DeviceBuffer b(host.size() * sizeof(T));
  FKV_CU(cuMemcpyHtoD, b.get(), host.data(), b.size());
  FKV_CU(cuCtxSynchronize);
  return b;
}

// Device buffers of one case, plus what the host needs to recompute any output row.
struct CaseData {
  Case c;
  Defaults d;
  std::int64_t kv = 0;
  std::vector<std::uint16_t> proj_chunk;  // proj element i = proj_chunk[i % size]
  std::vector<std::int64_t> positions, cache_loc;
  std::vector<float> cos_sin, weight, eps;
  fkv::DeviceBuffer proj, d_positions, d_cos_sin, d_weight, k_out, v_out, d_cache_loc, k_pool,
      v_pool;
  std::vector<void*> k_ptrs, v_ptrs;

  CaseData(const Case& c_, const Defaults& d_) : c(c_), d(d_) {
    if (d.dtype != fkv::DType::BF16) throw std::runtime_error("fkv_bench fills bf16 data only");
    kv = std::int64_t(c.heads) * c.head_dim;
    const std::int64_t T = c.tokens, L = c.layers, R = c.rotary_dim;
    Rng rng(0x5eed0000u + std::uint64_t(T) * 131 + std::uint64_t(L) * 7 + std::uint64_t(kv));

    const std::size_t proj_elems = std::size_t(T * L * 2 * kv);
    proj_chunk.resize(std::min<std::size_t>(proj_elems, (std::size_t(1) << 22) + 17));
    for (auto& x : proj_chunk) x = float_to_bf16(float(rng.uniform() * 2 - 1));
    proj = fkv::DeviceBuffer(proj_elems * 2);
    upload_tiled(proj, proj_chunk.data(), proj_chunk.size() * 2);

    positions.resize(std::size_t(T));
    for (auto& p : positions) p = rng.below(d.max_position);
    d_positions = upload(positions);

    cos_sin.resize(std::size_t(d.max_position * R));
    std::vector<double> inv_freq(std::size_t(R / 2));
    for (std::int64_t i = 0; i < R / 2; ++i)
      inv_freq[std::size_t(i)] = std::pow(d.theta, -2.0 * double(i) / double(R));
    for (std::int64_t p = 0; p < d.max_position; ++p)
      for (std::int64_t i = 0; i < R / 2; ++i) {
        const double angle = double(p) * inv_freq[std::size_t(i)];
        cos_sin[std::size_t(p * R + i)] = float(std::cos(angle));
        cos_sin[std::size_t(p * R + R / 2 + i)] = float(std::sin(angle));
      }
    if (R > 0) d_cos_sin = upload(cos_sin);

    weight.resize(std::size_t(L * c.head_dim));
    for (auto& w : weight) w = float(1.0 + 0.1 * (rng.uniform() * 2 - 1));
    d_weight = upload(weight);
    eps.assign(std::size_t(L), d.eps);

    k_out = fkv::DeviceBuffer(proj_elems);  // [L, T, H, D] x 2 bytes = half of proj each
    v_out = fkv::DeviceBuffer(proj_elems);

    cache_loc.resize(std::size_t(T));  // a random permutation of the T slots
    for (std::int64_t i = 0; i < T; ++i) cache_loc[std::size_t(i)] = i;
    for (std::int64_t i = T - 1; i > 0; --i)
      std::swap(cache_loc[std::size_t(i)], cache_loc[std::size_t(rng.below(i + 1))]);
    d_cache_loc = upload(cache_loc);
    k_pool = fkv::DeviceBuffer(proj_elems);  // L buffers of [T slots, H, D]
    v_pool = fkv::DeviceBuffer(proj_elems);
    FKV_CU(cuMemsetD8, k_pool.get(), 0, k_pool.size());
    FKV_CU(cuMemsetD8, v_pool.get(), 0, v_pool.size());
    const std::size_t layer_bytes = std::size_t(T * kv * 2);
    for (std::int64_t l = 0; l < L; ++l) {
      k_ptrs.push_back(static_cast<char*>(k_pool.ptr()) + l * layer_bytes);
      v_ptrs.push_back(static_cast<char*>(v_pool.ptr()) + l * layer_bytes);
    }
    // Memsets and pageable uploads run on the legacy stream and may still be in flight on
    // return; the benchmark stream is non-blocking, so wait for them here.
    FKV_CU(cuCtxSynchronize);
  }

  fkv::FusedKVInputs inputs() const {
    fkv::FusedKVInputs in;
    in.proj = proj.ptr();
    in.num_tokens = c.tokens;
    in.num_layers = c.layers;
    in.positions = d_positions.ptr();
    in.cos_sin = c.rotary_dim > 0 ? d_cos_sin.ptr() : nullptr;
    in.max_position = d.max_position;
    in.k_norm_weight = d.k_norm ? static_cast<const float*>(d_weight.ptr()) : nullptr;
    in.eps = eps;
    return in;
  }
  fkv::StackedOutput stacked() const { return {k_out.ptr(), v_out.ptr()}; }
  fkv::PoolOutput pool() const {
    fkv::PoolOutput out;
    out.cache_loc = d_cache_loc.ptr();
    out.k_buffers = k_ptrs;
    out.v_buffers = v_ptrs;
    out.num_slots = c.tokens;
    return out;
  }

  float proj_at(std::int64_t t, std::int64_t l, std::int64_t j) const {
    const std::size_t i = std::size_t((t * c.layers + l) * 2 * kv + j);
    return bf16_to_float(proj_chunk[i % proj_chunk.size()]);
  }

  // Recomputes `rows` random (token, layer, head) rows on the host (K norm, RoPE, rounding as
  // fused_kv.cu does) and compares them with the device output of the given mode.
  json check(bool pool_mode, int rows) const {
    Rng rng(99);
    const int D = c.head_dim, R = c.rotary_dim, half = R / 2;
    double max_err = 0;
    int bad = 0;
    bool v_exact = true;
    std::vector<std::uint16_t> got_k(static_cast<std::size_t>(D)),
        got_v(static_cast<std::size_t>(D));
    std::vector<double> k(static_cast<std::size_t>(D));
    for (int n = 0; n < rows; ++n) {
      const std::int64_t t = rng.below(c.tokens), l = rng.below(c.layers), h = rng.below(c.heads);
      std::size_t off;  // bytes
      CUdeviceptr kbase, vbase;
      if (pool_mode) {
        off = std::size_t(((l * c.tokens + cache_loc[std::size_t(t)]) * kv + h * D) * 2);
        kbase = k_pool.get();
        vbase = v_pool.get();
      } else {
        off = std::size_t(((l * c.tokens + t) * kv + h * D) * 2);
        kbase = k_out.get();
        vbase = v_out.get();
      }
      FKV_CU(cuMemcpyDtoH, got_k.data(), kbase + off, std::size_t(D) * 2);
      FKV_CU(cuMemcpyDtoH, got_v.data(), vbase + off, std::size_t(D) * 2);

      double ss = 0;
      for (int j = 0; j < D; ++j) {
        k[std::size_t(j)] = proj_at(t, l, h * D + j);
        ss += k[std::size_t(j)] * k[std::size_t(j)];
      }
      if (d.k_norm) {
        const double inv = 1.0 / std::sqrt(ss / D + double(eps[std::size_t(l)]));
        for (int j = 0; j < D; ++j) k[std::size_t(j)] *= inv * weight[std::size_t(l * D + j)];
      }
      const float* cs = cos_sin.data() + positions[std::size_t(t)] * R;
      std::vector<double> rot = k;
      for (int i = 0; i < half; ++i) {
        const int a = d.neox ? i : 2 * i, b = d.neox ? i + half : 2 * i + 1;
        const double co = cs[i], si = cs[half + i];
        rot[std::size_t(a)] = k[std::size_t(a)] * co - k[std::size_t(b)] * si;
        rot[std::size_t(b)] = k[std::size_t(b)] * co + k[std::size_t(a)] * si;
      }
      bool row_ok = true;
      for (int j = 0; j < D; ++j) {
        const double err =
            std::fabs(double(bf16_to_float(got_k[std::size_t(j)])) - rot[std::size_t(j)]);
        max_err = std::max(max_err, std::isfinite(err) ? err : 1e30);
        if (!(err <= 2e-2 + 1e-2 * std::fabs(rot[std::size_t(j)]))) row_ok = false;
        const std::uint16_t want_v =
            float_to_bf16(proj_at(t, l, kv + h * D + j));  // exact: bf16 in, bf16 out
        if (got_v[std::size_t(j)] != want_v) v_exact = row_ok = false;
      }
      if (!row_ok) ++bad;
    }
    return {{"ok", bad == 0},     {"rows_checked", rows},
            {"bad_rows", bad},    {"k_max_abs_err", max_err},
            {"v_exact", v_exact}, {"tolerance", "atol 2e-2 + rtol 1e-2 vs float64 host reference"}};
  }
};

// ---------------------------------------------------------------------------------------------
// The copy baseline: a plain SM copy kernel (docs/performance.md). cuMemcpyDtoDAsync goes through
// the copy engines on an H200 and tops out well below what a kernel reaches (2.8 vs ~4 TB/s read +
// write), so it is kept only as an extra figure ("copy_memcpy", "copy_ceiling_memcpy").

constexpr const char* kCopyKernel = R"(// fkv_bench's copy baseline: a grid-stride copy of 16-byte
// words with four independent 16-byte loads in flight per thread before the stores.
struct alignas(16) U4 { unsigned x, y, z, w; };

extern "C" __global__ void __launch_bounds__(256)
fkv_bench_copy(const U4* __restrict__ src, U4* __restrict__ dst, unsigned long long n16) {
  const unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
  unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
  for (; i + 3 * stride < n16; i += 4 * stride) {
    const U4 a = src[i];
    const U4 b = src[i + stride];
    const U4 c = src[i + 2 * stride];
    const U4 d = src[i + 3 * stride];
    dst[i] = a;
    dst[i + stride] = b;
    dst[i + 2 * stride] = c;
    dst[i + 3 * stride] = d;
  }
  for (; i < n16; i += stride) dst[i] = src[i];
}
)";

fkv::KernelSource copy_kernel_source() {
  fkv::KernelSource src;
  src.template_name = "bench_copy.cu";
  src.short_name = "bench_copy";
  src.name_expression = "fkv_bench_copy";
  src.source = kCopyKernel;
  return src;
}

// The copy kernel compiled (NVRTC, through fkv::compile) and loaded into the current context.
class SmCopy {
 public:
  static constexpr unsigned kThreads = 256;
  static constexpr unsigned kWordsPerThread = 4;  // 16-byte loads in flight per thread

  SmCopy(CUcontext ctx, const fkv::CompileOptions& copts) {
    const auto t0 = Clock::now();
    const fkv::CompiledKernel k = fkv::compile(copy_kernel_source(), copts);
    compile_ms_ = ms_since(t0);
    module_ = fkv::Module(ctx, k.image);
    fn_ = module_.function(k.lowered_name);
    FKV_CU(cuDeviceGetAttribute, &sms_, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT,
           fkv::device_handle(0));
  }

  unsigned blocks_for(std::size_t bytes) const {
    const std::uint64_t n16 = bytes / 16;
    const std::uint64_t per_block = std::uint64_t(kThreads) * kWordsPerThread;
    const std::uint64_t want = (n16 + per_block - 1) / per_block;
    const std::uint64_t cap = std::uint64_t(sms_) * unsigned(blocks_per_sm_);
    return unsigned(std::max<std::uint64_t>(1, std::min(want, cap)));
  }

  // dst <- src, `bytes` a multiple of 16, both 16-byte aligned (cuMemAlloc gives 256).
  void copy(CUdeviceptr dst, CUdeviceptr src, std::size_t bytes, CUstream s) const {
    if (bytes % 16 != 0)
      throw std::runtime_error("SmCopy: " + std::to_string(bytes) +
                               " bytes is not a multiple of 16; round the size down");
    unsigned long long n16 = bytes / 16;
    void* args[] = {&src, &dst, &n16};
    FKV_CU(cuLaunchKernel, fn_, blocks_for(bytes), 1, 1, kThreads, 1, 1, 0, s, args, nullptr);
  }

  void set_blocks_per_sm(int b) { blocks_per_sm_ = b; }
  int blocks_per_sm() const { return blocks_per_sm_; }
  int sms() const { return sms_; }
  double compile_ms() const { return compile_ms_; }

  json describe(std::size_t bytes) const {
    return {{"kind", "sm_kernel"},
            {"kernel", "fkv_bench_copy: grid-stride, 16-byte words, 4 loads in flight per thread"},
            {"threads", kThreads},
            {"blocks", blocks_for(bytes)},
            {"blocks_per_sm_cap", blocks_per_sm_},
            {"sms", sms_}};
  }

 private:
  fkv::Module module_;
  CUfunction fn_ = nullptr;
  int sms_ = 0;
  int blocks_per_sm_ = 8;  // 8 x 256 threads = a full SM on sm_80..sm_90
  double compile_ms_ = 0;
};

// Fills src with `value`, dst with its complement, runs `copy` once and compares the first,
// middle and last 64 KiB of dst with `value` (the tail loop and the last block included).
json check_copy(CUdeviceptr dst, CUdeviceptr src, std::size_t bytes, std::uint8_t value, CUstream s,
                const std::function<void(CUstream)>& copy) {
  FKV_CU(cuMemsetD8, src, value, bytes);
  FKV_CU(cuMemsetD8, dst, std::uint8_t(~value), bytes);
  FKV_CU(cuCtxSynchronize);
  copy(s);
  FKV_CU(cuStreamSynchronize, s);
  const std::size_t win = std::min<std::size_t>(bytes, 64 << 10);
  std::vector<std::uint8_t> host(win);
  bool ok = true;
  for (std::size_t off : {std::size_t(0), (bytes / 2) / 16 * 16, bytes - win}) {
    off = std::min(off, bytes - win);
    FKV_CU(cuMemcpyDtoH, host.data(), dst + off, win);
    for (std::uint8_t b : host) ok = ok && b == value;
  }
  return {{"ok", ok}, {"bytes_checked", 3 * win}};
}

// The copy ceiling over a 2 GiB buffer, bytes moved = 2 x size: the SM kernel (with a cap of
// 4 and of 8 blocks per SM; the faster cap is kept for the per-case copies) and memcpy.
json copy_ceiling(SmCopy& sm, CUstream s, double target_ms) {
  const std::size_t size = std::size_t(2) << 30;
  fkv::DeviceBuffer src(size), dst(size);
  auto finish = [&](json t) {
    t["bytes_copied"] = size;
    t["bytes_moved"] = 2 * size;
    t["GBps"] = 2.0 * double(size) / (t["median_us"].get<double>() * 1e-6) / 1e9;
    return t;
  };
  json out;
  json tried = json::array();
  double best_us = 0;
  int best_cap = sm.blocks_per_sm();
  for (int cap : {4, 8}) {
    sm.set_blocks_per_sm(cap);
    auto body = [&](CUstream st) { sm.copy(dst.get(), src.get(), size, st); };
    json check = check_copy(dst.get(), src.get(), size, 1, s, body);
    if (!check["ok"].get<bool>())
      throw std::runtime_error("the SM copy kernel wrote wrong bytes (" + std::to_string(cap) +
                               " blocks per SM); the copy baseline is broken");
    json t = finish(time_graph(s, body, 5, target_ms));
    t.update(sm.describe(size));
    t["check"] = check;
    say("  SM copy kernel, %d blocks/SM cap (%u blocks): %.1f GB/s", cap, sm.blocks_for(size),
        t["GBps"].get<double>());
    if (tried.empty() || t["median_us"].get<double>() < best_us) {
      best_us = t["median_us"].get<double>();
      best_cap = cap;
      out["copy_ceiling"] = t;
    }
    tried.push_back(t);
  }
  sm.set_blocks_per_sm(best_cap);
  out["copy_ceiling"]["configs_tried"] = tried;

  auto body = [&](CUstream st) { FKV_CU(cuMemcpyDtoDAsync, dst.get(), src.get(), size, st); };
  json check = check_copy(dst.get(), src.get(), size, 2, s, body);
  json t = finish(time_graph(s, body, 5, target_ms));
  t["kind"] = "memcpy";
  t["check"] = check;
  out["copy_ceiling_memcpy"] = t;
  say("  cuMemcpyDtoDAsync: %.1f GB/s", t["GBps"].get<double>());
  return out;
}

// Every field of the kernel's Tiling that this build's fkv/spec.hpp has (the struct changes
// while the kernel is tuned; the JSON records whichever fields exist).
template <class T>
json tiling_json(const T& t) {
  json j;
#define FKV_BENCH_TILING_FIELD(f) \
  if constexpr (requires { t.f; }) j[#f] = t.f;
  FKV_BENCH_TILING_FIELD(vec)
  FKV_BENCH_TILING_FIELD(loads)
  FKV_BENCH_TILING_FIELD(elems_per_thread)
  FKV_BENCH_TILING_FIELD(vecs_per_head)
  FKV_BENCH_TILING_FIELD(lanes_per_head)
  FKV_BENCH_TILING_FIELD(heads_per_warp)
  FKV_BENCH_TILING_FIELD(warps_per_block)
  FKV_BENCH_TILING_FIELD(block_threads)
  FKV_BENCH_TILING_FIELD(heads_per_block)
  FKV_BENCH_TILING_FIELD(tokens_per_block)
  FKV_BENCH_TILING_FIELD(head_groups)
  FKV_BENCH_TILING_FIELD(idle_lanes)
  FKV_BENCH_TILING_FIELD(warp_local)
  FKV_BENCH_TILING_FIELD(shared_bytes)
#undef FKV_BENCH_TILING_FIELD
  return j;
}

json load_json_info(const fkv::LoadedKernel& k) {
  json j = {{"outcome", fkv::to_string(k.outcome)},
            {"load_ms", k.load_seconds * 1e3},
            {"arch", k.arch.name()}};
  j.update(tiling_json(k.tiling));
  return j;
}

json run_case(const Case& c, const Defaults& d, const SmCopy* sm, CUstream s, double target_ms) {
  json r = {{"name", c.name},
            {"floor_bytes_stacked", floor_bytes(c, d, false)},
            {"floor_bytes_pool", floor_bytes(c, d, true)}};
  auto t0 = Clock::now();
  CaseData data(c, d);
  r["setup_ms"] = ms_since(t0);
  auto& rt = fkv::Runtime::global();
  const fkv::LoadedKernel& ks = rt.prepare(make_spec(c, d, fkv::OutputMode::Stacked));
  const fkv::LoadedKernel& kp = rt.prepare(make_spec(c, d, fkv::OutputMode::Pool));
  r["kernel_stacked"] = load_json_info(ks);
  r["kernel_pool"] = load_json_info(kp);
  const fkv::LaunchGrid grid =
      fkv::launch_grid(ks.spec, ks.tiling, ks.resident_blocks, c.tokens, c.layers);
  r["grid_stacked"] = {grid.x, grid.y, grid.z};

  const fkv::FusedKVInputs in = data.inputs();
  const fkv::StackedOutput so = data.stacked();
  const fkv::PoolOutput po = data.pool();
  const int calls = calls_per_graph(floor_bytes(c, d, false));

  // Correctness first: one call each, then host recomputation of sampled rows.
  fkv::materialize_stacked(ks, in, so, s);
  fkv::materialize_pool(kp, in, po, s);
  FKV_CU(cuStreamSynchronize, s);
  r["check_stacked"] = data.check(false, 256);
  r["check_pool"] = data.check(true, 256);
  say("  check stacked: %s, pool: %s (k max abs err %.3g)",
      r["check_stacked"]["ok"].get<bool>() ? "ok" : "FAILED",
      r["check_pool"]["ok"].get<bool>() ? "ok" : "FAILED",
      r["check_stacked"]["k_max_abs_err"].get<double>());

  const std::size_t copy_n = std::size_t(floor_bytes(c, d, false) / 2) / 16 * 16;
  {
    fkv::DeviceBuffer src(copy_n), dst(copy_n);
    if (sm) {
      auto sm_body = [&](CUstream st) { sm->copy(dst.get(), src.get(), copy_n, st); };
      json check = check_copy(dst.get(), src.get(), copy_n, 3, s, sm_body);
      if (!check["ok"].get<bool>())
        throw std::runtime_error(
            "the SM copy kernel wrote wrong bytes; the copy baseline is broken");
      r["copy"] = time_graph(s, sm_body, calls, target_ms);
      r["copy"].update(sm->describe(copy_n));
      r["copy"]["bytes_copied"] = copy_n;
      r["copy"]["check"] = check;
    } else {
      r["copy"] = {{"kind", "sm_kernel"}, {"error", "no SM copy kernel (see copy_ceiling)"}};
    }
    r["copy_memcpy"] = time_graph(
        s, [&](CUstream st) { FKV_CU(cuMemcpyDtoDAsync, dst.get(), src.get(), copy_n, st); }, calls,
        target_ms);
    r["copy_memcpy"]["kind"] = "memcpy";
    r["copy_memcpy"]["bytes_copied"] = copy_n;
  }
  say("  copy of %zu B: SM kernel %.2f us, memcpy %.2f us", copy_n,
      r["copy"].value("median_us", NAN), r["copy_memcpy"]["median_us"].get<double>());
  r["fkv_stacked"] = time_graph(
      s, [&](CUstream st) { fkv::materialize_stacked(ks, in, so, st); }, calls, target_ms);
  say("  fkv stacked: %.2f us", r["fkv_stacked"]["median_us"].get<double>());
  r["fkv_pool"] = time_graph(
      s, [&](CUstream st) { fkv::materialize_pool(kp, in, po, st); }, calls, target_ms);
  say("  fkv pool: %.2f us", r["fkv_pool"]["median_us"].get<double>());
  return r;
}

// Host cost per call: chunks of `chunk` back-to-back calls timed with std::chrono, the stream
// drained (untimed) between chunks so that the launch queue never fills and the GPU never
// paces the host. Reported: median over chunks and mean over all calls, per call.
json launch_overhead(const Case& c, const Defaults& d, CUstream s, int total_calls) {
  CaseData data(c, d);
  const fkv::LoadedKernel& k =
      fkv::Runtime::global().prepare(make_spec(c, d, fkv::OutputMode::Stacked));
  const fkv::FusedKVInputs in = data.inputs();
  const fkv::StackedOutput so = data.stacked();
  const fkv::LaunchGrid grid =
      fkv::launch_grid(k.spec, k.tiling, k.resident_blocks, c.tokens, c.layers);

  // The parameter block materialize_stacked would build (include/fkv/kernel_params.h).
  FkvKernelParams p{};
  p.proj = data.proj.ptr();
  p.proj_stride_token = std::int64_t(c.layers) * 2 * data.kv;
  p.proj_stride_layer = 2 * data.kv;
  p.num_tokens = c.tokens;
  p.positions = data.d_positions.ptr();
  p.cos_sin = data.d_cos_sin.ptr();
  p.cos_sin_stride = c.rotary_dim;
  p.max_position = d.max_position;
  p.k_norm_weight = d.k_norm ? static_cast<const float*>(data.d_weight.ptr()) : nullptr;
  p.num_layers = c.layers;
  p.layers_per_block = grid.layers_per_block;
  p.k_out = so.k_out;
  p.v_out = so.v_out;
  p.slot_stride = data.kv;
  for (int l = 0; l < FKV_MAX_LAYERS; ++l) {
    p.eps[l] = d.eps;
    p.k_scale[l] = 1.0f;
    p.v_scale[l] = 1.0f;
  }
  void* args[] = {&p};
  auto& drv = fkv::Driver::get();
  const unsigned block = unsigned(k.tiling.block_threads);
  const unsigned shared = 0;  // the kernel uses no dynamic shared memory

  const std::vector<std::pair<std::string, std::function<void()>>> methods = {
      {"materialize_stacked", [&] { fkv::materialize_stacked(k, in, so, s); }},
      {"fkv_launch", [&] { fkv::launch(k, p, grid.x, grid.y, grid.z, s); }},
      {"bare_cuLaunchKernel",
       [&] {
         CUresult rc = drv.cuLaunchKernel(k.function, grid.x, grid.y, grid.z, block, 1, 1, shared,
                                          s, args, nullptr);
         if (rc != CUDA_SUCCESS) drv.check(rc, "cuLaunchKernel");
       }},
  };
  const int chunk = 1000;
  const int rounds = 2;  // methods interleaved, to spread clock and thermal drift
  const int chunks_per_round = std::max(1, total_calls / chunk / rounds);
  std::vector<std::vector<double>> per_call(methods.size());
  std::vector<double> total_ms(methods.size(), 0.0);
  for (auto& m : methods) m.second();  // warm-up
  FKV_CU(cuStreamSynchronize, s);
  for (int round = 0; round < rounds; ++round)
    for (std::size_t m = 0; m < methods.size(); ++m)
      for (int ch = 0; ch < chunks_per_round; ++ch) {
        auto t0 = Clock::now();
        for (int i = 0; i < chunk; ++i) methods[m].second();
        const double ms = ms_since(t0);
        FKV_CU(cuStreamSynchronize, s);
        per_call[m].push_back(ms * 1e3 / chunk);
        total_ms[m] += ms;
      }
  json r = {{"case", c.name},
            {"calls_per_method", chunks_per_round * rounds * chunk},
            {"chunk", chunk},
            {"grid", {grid.x, grid.y, grid.z}},
            {"block", block},
            {"method",
             "host wall time (steady_clock) of chunks of back-to-back calls; stream "
             "drained between chunks, untimed"}};
  for (std::size_t m = 0; m < methods.size(); ++m) {
    std::vector<double> v = per_call[m];
    std::sort(v.begin(), v.end());
    r[methods[m].first] = {{"median_us_per_call", v[v.size() / 2]},
                           {"min_us_per_call", v.front()},
                           {"mean_us_per_call", total_ms[m] * 1e3 / double(v.size() * chunk)}};
  }
  r["materialize_minus_bare_us"] = r["materialize_stacked"]["median_us_per_call"].get<double>() -
                                   r["bare_cuLaunchKernel"]["median_us_per_call"].get<double>();
  // The bare launches wrote the outputs last: they must be the kernel's results too.
  r["bare_launch_output_check"] = data.check(false, 64);
  return r;
}

// Compile + load and first-launch figures through fresh caches and runtimes.
json load_figures(const Case& c, const Defaults& d, CUstream s) {
  CaseData data(c, d);
  const fkv::KernelSpec spec = make_spec(c, d, fkv::OutputMode::Stacked);
  const fkv::FusedKVInputs in = data.inputs();
  const fkv::StackedOutput so = data.stacked();
  json r = {{"kernel", spec.short_name()}};
  const fs::path root = make_temp_dir("load");
  {
    fkv::KernelCache cache(cache_at(root));
    fkv::Runtime rt(cache);
    auto t0 = Clock::now();
    const fkv::LoadedKernel& k = rt.prepare(spec);
    r["cold_compile_load_ms"] = ms_since(t0);
    r["cold_outcome"] = fkv::to_string(k.outcome);
    t0 = Clock::now();
    fkv::materialize_stacked(k, in, so, s);
    FKV_CU(cuStreamSynchronize, s);
    r["cold_then_first_launch_ms"] = ms_since(t0);
    t0 = Clock::now();
    rt.prepare(spec);
    r["memory_hit_prepare_ms"] = ms_since(t0);
  }
  {
    fkv::KernelCache cache(cache_at(root));  // what a second process sees
    fkv::Runtime rt(cache);
    auto t0 = Clock::now();
    const fkv::LoadedKernel& k = rt.prepare(spec);
    r["warm_disk_prepare_ms"] = ms_since(t0);
    fkv::materialize_stacked(k, in, so, s);
    FKV_CU(cuStreamSynchronize, s);
    r["warm_first_launch_ms"] = ms_since(t0);  // prepare (disk hit + load) + launch + sync
    r["warm_outcome"] = fkv::to_string(k.outcome);
  }
  fs::remove_all(root);
  r["output_check"] = data.check(false, 64);
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"fkv-jit benchmark harness (docs/performance.md); writes JSON for bench/report.py"};
  std::string cases_path = std::string(FKV_BENCH_DIR) + "/cases.json";
  std::string out_path;
  std::string arch_text;
  std::string configs_dir = std::string(FKV_SOURCE_DIR) + "/tests/data";
  bool compile_only = false;
  double target_ms = 400;
  int launch_calls = 100000;
  int compile_repeats = 3;
  std::vector<std::string> only;
  bool skip_compile = false;
  bool skip_host = false;
  std::string tag;
  app.add_option("--cases", cases_path, "case list (bench/cases.json)");
  app.add_option("--out", out_path, "JSON result file")->required();
  app.add_flag("--compile-only", compile_only, "only the compile/cache figures; no GPU needed");
  app.add_option("--arch", arch_text,
                 "target arch for the compile figures (default: the GPU's, "
                 "else sm_90)");
  app.add_option("--configs-dir", configs_dir, "model configs to time a full precompile of");
  app.add_option("--target-ms", target_ms, "about how long each GPU measurement samples");
  app.add_option("--launch-calls", launch_calls, "calls per method in the host-cost test");
  app.add_option("--compile-repeats", compile_repeats, "cold NVRTC compiles per variant");
  app.add_option("--only", only, "run only these cases (names, comma-separated or repeated)")
      ->delimiter(',');
  app.add_flag("--skip-compile", skip_compile,
               "skip the compile/cache figures and the config precompiles");
  app.add_flag("--skip-host", skip_host, "skip the host launch cost and load figures");
  app.add_option("--tag", tag, "free text stored in the JSON (e.g. a tuning setting)");
  CLI11_PARSE(app, argc, argv);

  json out = {{"tool", "fkv_bench"}, {"nvrtc", fkv::nvrtc_version()}};
  std::string command;
  for (int i = 0; i < argc; ++i) command += (i ? " " : "") + std::string(argv[i]);
  out["command"] = command;
  if (!tag.empty()) out["tag"] = tag;
  out["method"] =
      "median over CUDA-graph replays; each replay = calls_per_sample back-to-back calls "
      "between two CUDA events; reported per call";
  auto save = [&] {
    const std::string tmp = out_path + ".tmp";
    {
      std::ofstream f(tmp);
      f << out.dump(2) << "\n";
    }
    fs::rename(tmp, out_path);
  };
  int failures = 0;

  try {
    const CaseFile cf = load_cases(cases_path);
    fkv::Arch arch;
    if (!arch_text.empty())
      arch = fkv::resolve_arch(arch_text).target.arch;
    else if (!compile_only && fkv::Driver::available())
      arch = fkv::Runtime::device_arch(0);
    else
      arch =
          fkv::arch_for_compute_capability(9, 0).arch;  // what the runtime builds on an H100/H200
    out["arch"] = arch.name();
    fkv::CompileOptions copts;
    copts.arch = arch;
    auto selected = [&](const Case& c) {
      return only.empty() || std::find(only.begin(), only.end(), c.name) != only.end();
    };
    for (const std::string& n : only)
      if (std::none_of(cf.cases.begin(), cf.cases.end(),
                       [&](const Case& c) { return c.name == n; })) {
        say("error: --only %s: no such case in %s", n.c_str(), cases_path.c_str());
        ++failures;
      }

    // 1. compile / cache figures per unique variant (no GPU)
    std::vector<fkv::KernelSpec> variants;
    for (const Case& c : cf.cases)
      if (!skip_compile && selected(c))
        for (fkv::OutputMode mode : {fkv::OutputMode::Stacked, fkv::OutputMode::Pool}) {
          fkv::KernelSpec s = make_spec(c, cf.defaults, mode);
          if (std::find(variants.begin(), variants.end(), s) == variants.end())
            variants.push_back(s);
        }
    json& comp = out["compile"];
    comp["variants"] = json::array();
    for (const auto& spec : variants) {
      say("compile %s for %s", spec.short_name().c_str(), arch.name().c_str());
      try {
        json v = compile_variant(spec, copts, compile_repeats);
        say("  nvrtc cold %.1f ms, cache miss %.1f ms, disk hit %.2f ms, memory hit %.3f ms",
            v["nvrtc_cold_ms"]["median"].get<double>(), v["cache_miss_ms"].get<double>(),
            v["disk_hit_ms"].get<double>(), v["memory_hit_ms"].get<double>());
        comp["variants"].push_back(v);
      } catch (const std::exception& e) {
        say("  FAILED: %s", e.what());
        comp["variants"].push_back({{"kernel", spec.short_name()}, {"error", e.what()}});
        ++failures;
      }
      save();
    }
    comp["configs"] = json::array();
    std::vector<fs::path> configs;
    if (!skip_compile && fs::is_directory(configs_dir))
      for (const auto& e : fs::directory_iterator(configs_dir))
        if (e.path().extension() == ".json") configs.push_back(e.path());
    std::sort(configs.begin(), configs.end());
    for (const auto& file : configs) {
      json r = precompile_config(file, copts);
      if (r.contains("error"))
        say("precompile %s: not fused-KV capable: %s", file.filename().c_str(),
            r["error"].get<std::string>().c_str());
      else
        say("precompile %s: %d variants, %.1f ms sequential, %.1f ms parallel",
            file.filename().c_str(), r["variants"].get<int>(), r["sequential_ms"].get<double>(),
            r["parallel_ms"].get<double>());
      comp["configs"].push_back(r);
      save();
    }
    {
      auto t0 = Clock::now();
      fkv::compile(copy_kernel_source(), copts);  // the copy baseline; a failure stops here
      comp["bench_copy_nvrtc_ms"] = ms_since(t0);
      save();
    }
    if (compile_only) {
      say("done (--compile-only), results in %s", out_path.c_str());
      return failures ? 1 : 0;
    }

    // 2. GPU
    const CUcontext ctx = fkv::ensure_context(0);
    char name[256] = {};
    CUdevice dev = 0;
    FKV_CU(cuDeviceGet, &dev, 0);
    FKV_CU(cuDeviceGetName, name, int(sizeof name), dev);
    out["device"] = name;
    out["driver_version"] = fkv::Driver::get().version;
    say("device %s (%s)", name, arch.name().c_str());
    BenchStream stream;

    std::unique_ptr<SmCopy> sm;
    try {
      sm = std::make_unique<SmCopy>(ctx, copts);
    } catch (const std::exception& e) {
      say("SM copy kernel FAILED: %s", e.what());
      out["copy_ceiling"] = {{"kind", "sm_kernel"}, {"error", e.what()}};
      ++failures;
    }
    say("copy ceiling (2 GiB device-to-device copy: SM kernel and cuMemcpyDtoDAsync)");
    if (sm) {
      try {
        out.update(copy_ceiling(*sm, stream.get(), target_ms));
        say("  ceiling: SM kernel %.1f GB/s (%d blocks/SM cap kept for the cases), memcpy %.1f "
            "GB/s",
            out["copy_ceiling"]["GBps"].get<double>(), sm->blocks_per_sm(),
            out["copy_ceiling_memcpy"]["GBps"].get<double>());
      } catch (const std::exception& e) {
        say("  FAILED: %s", e.what());
        out["copy_ceiling"] = {{"kind", "sm_kernel"}, {"error", e.what()}};
        ++failures;
      }
    }
    save();
    std::printf("# %s%s\n# case fkv_us copy_us ratio\n", tag.empty() ? "untagged" : "tag ",
                tag.c_str());
    std::fflush(stdout);

    out["cases"] = json::array();
    const Case* decode_case = nullptr;
    std::size_t index = 0;
    for (const Case& c : cf.cases) {
      ++index;
      if (c.tokens == 8 && !decode_case) decode_case = &c;
      if (!selected(c)) continue;
      say("case %zu/%zu: %s", index, cf.cases.size(), c.name.c_str());
      auto t0 = Clock::now();
      json r;
      try {
        r = run_case(c, cf.defaults, sm.get(), stream.get(), target_ms);
        if (!r["check_stacked"]["ok"].get<bool>() || !r["check_pool"]["ok"].get<bool>()) ++failures;
      } catch (const std::exception& e) {
        say("  FAILED: %s", e.what());
        r = {{"name", c.name}, {"error", e.what()}};
        ++failures;
      }
      r["wall_s"] = ms_since(t0) / 1e3;
      {
        const double fkv_us =
            r.contains("fkv_stacked") ? r["fkv_stacked"].value("median_us", NAN) : NAN;
        const double copy_us = r.contains("copy") ? r["copy"].value("median_us", NAN) : NAN;
        std::printf("%s %.2f %.2f %.3f\n", c.name.c_str(), fkv_us, copy_us, fkv_us / copy_us);
        std::fflush(stdout);
      }
      out["cases"].push_back(r);
      save();
    }

    if (decode_case && !skip_host) {
      say("host launch cost: %d calls per method, case %s", launch_calls,
          decode_case->name.c_str());
      try {
        out["launch"] = launch_overhead(*decode_case, cf.defaults, stream.get(), launch_calls);
        say("  materialize_stacked %.3f us/call, fkv::launch %.3f, bare cuLaunchKernel %.3f",
            out["launch"]["materialize_stacked"]["median_us_per_call"].get<double>(),
            out["launch"]["fkv_launch"]["median_us_per_call"].get<double>(),
            out["launch"]["bare_cuLaunchKernel"]["median_us_per_call"].get<double>());
      } catch (const std::exception& e) {
        say("  FAILED: %s", e.what());
        out["launch"] = {{"error", e.what()}};
        ++failures;
      }
      save();
      say("load figures (fresh cache dir, fresh runtime)");
      try {
        out["load"] = load_figures(*decode_case, cf.defaults, stream.get());
        say("  cold compile+load %.1f ms, warm first launch %.2f ms",
            out["load"]["cold_compile_load_ms"].get<double>(),
            out["load"]["warm_first_launch_ms"].get<double>());
      } catch (const std::exception& e) {
        say("  FAILED: %s", e.what());
        out["load"] = {{"error", e.what()}};
        ++failures;
      }
      save();
    }
  } catch (const std::exception& e) {
    say("error: %s", e.what());
    out["error"] = e.what();
    save();
    return 2;
  }
  say("done, %d problem(s); results in %s", failures, out_path.c_str());
  return failures ? 1 : 0;
}
