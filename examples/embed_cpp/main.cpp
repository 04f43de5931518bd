// Embedding fkv-jit in a C++ engine: load a draft model's config, validate it, precompile its
// kernels into a cache directory (no GPU needed), and, when a GPU is present, run the whole
// operation (projection GEMM + fused norm/RoPE/KV write) with fkv::FusedKVMaterializer and
// check it against fkv's CPU reference.
//
//   embed_cpp CONFIG [--arch sm_90] [--cache-dir DIR] [--tokens 16] [--grouped]
//
// Exit status: 0 ok, 1 config mismatch, 2 bad input, 3 GPU results wrong.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "fkv/arch.hpp"
#include "fkv/cache.hpp"
#include "fkv/config.hpp"
#include "fkv/driver.hpp"
#include "fkv/errors.hpp"
#include "fkv/fused_kv_materializer.hpp"
#include "fkv/precompile.hpp"
#include "fkv/rope.hpp"
#include "fkv/validate.hpp"
#include "reference.hpp"

namespace {

struct Args {
  std::string config;
  std::string arch = "sm_90";
  std::string cache_dir;
  std::int64_t tokens = 16;
  bool grouped = false;
};

// Precompiles every kernel the plan needs for the device `a.arch` names, with the library's
// precompile (what `fkv-jit precompile` runs). resolve_arch gives what the runtime loads on that
// device (sm_90a -> sm_90), so the entries are the ones the runtime looks up.
void precompile(const fkv::Plan& plan, const Args& a) {
  fkv::CacheOptions opts = fkv::CacheOptions::from_env();
  if (!a.cache_dir.empty()) opts.root = a.cache_dir;
  fkv::KernelCache cache(opts);
  const fkv::VariantOptions variants;  // bf16 activations and cache, fp32 cos/sin, int64 indices
  const fkv::ArchRequest request = fkv::resolve_arch(a.arch);
  if (!request.note.empty()) std::printf("  note: %s\n", request.note.c_str());
  const fkv::PrecompileResult r = fkv::precompile(plan, variants, {request.target}, cache);
  for (const fkv::PrecompiledKernel& k : r.kernels)
    std::printf("  %-48s %-9s %7.1f ms  %s\n", k.spec.short_name().c_str(),
                fkv::to_string(k.outcome).c_str(), k.seconds * 1e3,
                k.persisted() ? k.path.c_str() : "(memory)");
}

std::vector<std::uint16_t> random_bf16(std::size_t n, double scale, std::mt19937& rng) {
  std::normal_distribution<double> dist(0.0, scale);
  std::vector<std::uint16_t> out(n);
  for (auto& x : out) x = static_cast<std::uint16_t>(fkv::round_to(fkv::DType::BF16, dist(rng)));
  return out;
}

double bf16_value(std::uint16_t bits) { return fkv::to_double(fkv::DType::BF16, bits); }

template <class T>
fkv::DeviceBuffer to_device(const std::vector<T>& host) {
  fkv::DeviceBuffer buf(host.size() * sizeof(T));
  FKV_CU(cuMemcpyHtoD, buf.get(), host.data(), host.size() * sizeof(T));
  return buf;
}

template <class T>
std::vector<T> to_host(CUdeviceptr src, std::size_t n) {
  std::vector<T> out(n);
  FKV_CU(cuMemcpyDtoH, out.data(), src, n * sizeof(T));
  return out;
}

// Runs the materializer on random weights and inputs; returns true when every check passes.
bool run_on_gpu(const fkv::ModelConfig& config, const Args& a) {
  const std::int64_t hidden = config.hidden_size.value;
  const std::int64_t T = a.tokens;
  std::mt19937 rng(42);
  const auto attn_layers = config.attention_layers();
  fkv::ensure_context(0);

  // Weights the engine already has on the device: per layer the K/V rows of its QKV weight.
  std::vector<std::vector<std::uint16_t>> w_host;
  std::vector<fkv::DeviceBuffer> w_dev;
  fkv::MaterializerWeights weights;
  for (const fkv::LayerAttention* l : attn_layers) {
    const std::size_t rows =
        2 * static_cast<std::size_t>(l->num_kv_heads.value * l->head_dim.value);
    w_host.push_back(random_bf16(rows * hidden, 1.0 / std::sqrt(double(hidden)), rng));
    w_dev.push_back(to_device(w_host.back()));
    weights.w_kv.push_back(w_dev.back().ptr());
    std::vector<float> norm(static_cast<std::size_t>(l->head_dim.value));
    for (auto& x : norm) x = 1.0f + 0.25f * std::normal_distribution<float>()(rng);
    if (l->k_norm.value != fkv::KNormKind::None) weights.k_norm.push_back(norm);
  }
  fkv::MaterializerOptions options;
  options.mode = a.grouped ? fkv::ValidationMode::Grouped : fkv::ValidationMode::Strict;
  options.max_tokens = T;
  // This example checks the kernel against projection(), which only the cuBLASLt path fills:
  // keep small calls off the decode-size kernel (include/fkv/decode.hpp).
  options.decode_crossover = 0;
  fkv::FusedKVMaterializer mat(config, hidden, weights, options);

  // One step: hidden states and positions of T context tokens.
  const auto hidden_host = random_bf16(static_cast<std::size_t>(T * hidden), 1.0, rng);
  std::vector<std::int64_t> positions(static_cast<std::size_t>(T));
  std::uniform_int_distribution<std::int64_t> pos_dist(0, config.max_position_embeddings.value - 1);
  for (auto& p : positions) p = pos_dist(rng);
  const auto hidden_dev = to_device(hidden_host);
  const auto positions_dev = to_device(positions);

  const fkv::Plan& plan = mat.plan();
  std::vector<fkv::DeviceBuffer> k_out, v_out;
  std::vector<void*> k_ptrs, v_ptrs;
  for (const fkv::LayerGroup& g : plan.groups) {
    const std::size_t bytes = g.layers.size() * T * g.attn.num_kv_heads * g.attn.head_dim * 2;
    k_out.emplace_back(bytes);
    v_out.emplace_back(bytes);
    k_ptrs.push_back(k_out.back().ptr());
    v_ptrs.push_back(v_out.back().ptr());
  }
  fkv::Stream stream;
  fkv::MaterializerInput in;
  in.hidden = hidden_dev.ptr();
  in.num_tokens = T;
  in.positions = positions_dev.ptr();
  mat.materialize_stacked(in, k_ptrs, v_ptrs, stream.get());
  stream.synchronize();

  // 1. The projection against a float64 GEMM of the same bf16 inputs: within one bf16 ulp plus
  //    the fp32 accumulation's slack (relative to the sum of |terms|).
  const std::int64_t N = mat.projection_width();
  const auto proj = to_host<std::uint16_t>(mat.projection(), static_cast<std::size_t>(T * N));
  auto decoded = [](const std::vector<std::uint16_t>& bits) {
    std::vector<double> out(bits.size());
    for (std::size_t i = 0; i < bits.size(); ++i) out[i] = bf16_value(bits[i]);
    return out;
  };
  const std::vector<double> x = decoded(hidden_host);
  bool ok = true;
  std::int64_t bad = 0;
  std::int64_t col = 0;
  for (const fkv::LayerGroup& g : plan.groups) {
    for (int layer : g.layers) {
      std::size_t i = 0;
      while (attn_layers[i]->index != layer) ++i;
      const std::vector<double> w = decoded(w_host[i]);
      const std::int64_t rows = 2 * std::int64_t{g.attn.num_kv_heads} * g.attn.head_dim;
      for (std::int64_t t = 0; t < T; ++t)
        for (std::int64_t r = 0; r < rows; ++r) {
          double acc = 0, mag = 0;
          for (std::int64_t h = 0; h < hidden; ++h) {
            const double term = x[t * hidden + h] * w[r * hidden + h];
            acc += term;
            mag += std::fabs(term);
          }
          const double got = bf16_value(proj[t * N + col + r]);
          if (std::fabs(got - acc) > fkv::ulp(fkv::DType::BF16, acc) + 1e-5 * mag) ++bad;
        }
      col += rows;
    }
  }
  std::printf("projection: %lld of %lld elements outside one bf16 ulp\n",
              static_cast<long long>(bad), static_cast<long long>(T * N));
  ok &= bad == 0;

  // 2. Each group's K/V against the CPU reference on the GPU's own projection.
  col = 0;
  for (std::size_t gi = 0; gi < plan.groups.size(); ++gi) {
    const fkv::LayerGroup& g = plan.groups[gi];
    fkv::ReferenceInputs ref;
    ref.spec = fkv::make_kernel_spec(g.attn, fkv::DType::BF16, fkv::DType::BF16);
    ref.num_tokens = T;
    ref.num_layers = static_cast<std::int64_t>(g.layers.size());
    ref.proj = proj.data() + col;
    ref.proj_stride_token = N;
    ref.proj_stride_layer = 2 * std::int64_t{g.attn.num_kv_heads} * g.attn.head_dim;
    ref.positions = positions.data();
    std::vector<std::uint8_t> table;
    if (g.attn.rotary_dim > 0) {
      fkv::RopeOptions ro;
      ro.max_position_embeddings = config.max_position_embeddings.value;
      const fkv::RopeTable rope(g.attn.rope, g.attn.rotary_dim,
                                config.max_position_embeddings.value, ro);
      table = rope.bytes(fkv::DType::FP32);
      ref.cos_sin = table.data();
      ref.max_position = rope.max_position();
    }
    std::vector<float> norm, eps;
    for (int layer : g.layers) {
      std::size_t i = 0;
      while (attn_layers[i]->index != layer) ++i;
      eps.push_back(static_cast<float>(attn_layers[i]->eps.value));
      if (!weights.k_norm.empty())
        for (float w : weights.k_norm[i]) norm.push_back(fkv::fold_k_norm_weight(g.attn.k_norm, w));
    }
    ref.k_norm_weight = norm.empty() ? nullptr : norm.data();
    ref.eps = eps;
    const std::size_t n = g.layers.size() * T * g.attn.num_kv_heads * g.attn.head_dim;
    const auto k = to_host<std::uint16_t>(k_out[gi].get(), n);
    const auto v = to_host<std::uint16_t>(v_out[gi].get(), n);
    const fkv::CompareResult ck = fkv::compare(fkv::DType::BF16, k.data(), fkv::reference_k(ref));
    const fkv::CompareResult cv = fkv::compare(fkv::DType::BF16, v.data(), fkv::reference_v(ref));
    std::printf("group %zu (%zu layers): %s\n%s\n", gi, g.layers.size(), ck.summary("k").c_str(),
                cv.summary("v").c_str());
    ok &= ck.ok() && cv.ok();
    col += ref.proj_stride_layer * ref.num_layers;
  }
  return ok;
}

}  // namespace

int main(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string s = argv[i];
    auto next = [&]() -> std::string { return i + 1 < argc ? argv[++i] : ""; };
    if (s == "--arch")
      a.arch = next();
    else if (s == "--cache-dir")
      a.cache_dir = next();
    else if (s == "--tokens")
      a.tokens = std::stoll(next());
    else if (s == "--grouped")
      a.grouped = true;
    else
      a.config = s;
  }
  if (a.config.empty()) {
    std::fprintf(
        stderr,
        "usage: embed_cpp CONFIG [--arch sm_90] [--cache-dir DIR] [--tokens N] [--grouped]\n");
    return 2;
  }
  try {
    const fkv::ModelConfig config = fkv::ModelConfig::from_file(a.config);
    const fkv::Plan plan = fkv::make_plan(
        config, a.grouped ? fkv::ValidationMode::Grouped : fkv::ValidationMode::Strict);
    for (const fkv::LayerGroup& g : plan.groups)
      std::printf("group: %zu layers, %s\n", g.layers.size(), fkv::to_json(g.attn).dump().c_str());
    std::printf("precompiling for %s:\n", a.arch.c_str());
    precompile(plan, a);
    if (!fkv::Driver::available()) {
      std::printf("no CUDA driver/GPU: stopping after precompilation\n");
      return 0;
    }
    const bool ok = run_on_gpu(config, a);
    std::printf("%s\n", ok ? "GPU results match the CPU reference" : "GPU results are WRONG");
    return ok ? 0 : 3;
  } catch (const fkv::ConfigError& e) {
    std::fprintf(stderr, "config: %s\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 2;
  }
}
