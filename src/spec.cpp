// spec: the specialization key and the launch policy (block and grid) derived from it.
#include "fkv/spec.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <sstream>
#include <unordered_set>
#include <vector>

#include "fkv/errors.hpp"
#include "fkv/options.hpp"
#include "fkv/seed_texts.hpp"

namespace fkv {

namespace {

// Every dtype once: its name, size in bytes and the other spellings parse_dtype takes (torch's
// included).
struct DTypeRow {
  DType dtype;
  const char* name;
  int size;
  std::vector<std::string> spellings;
};

const std::vector<DTypeRow>& dtype_rows() {
  // Immortal, like the library's other tables (engines call it from atexit handlers).
  static const auto& rows = *new std::vector<DTypeRow>{
      {DType::BF16, "bf16", 2, {"bfloat16", "torch.bfloat16"}},
      {DType::FP16, "fp16", 2, {"float16", "half", "torch.float16"}},
      {DType::FP32, "fp32", 4, {"float32", "float", "torch.float32"}},
      {DType::FP8_E4M3, "fp8_e4m3", 1, {"fp8", "e4m3", "float8_e4m3fn", "torch.float8_e4m3fn"}},
      {DType::FP8_E5M2, "fp8_e5m2", 1, {"e5m2", "float8_e5m2", "torch.float8_e5m2"}},
  };
  return rows;
}

const DTypeRow* dtype_row(DType d) {
  for (const DTypeRow& r : dtype_rows())
    if (r.dtype == d) return &r;
  return nullptr;
}

}  // namespace

const char* dtype_name(DType d) {
  const DTypeRow* r = dtype_row(d);
  return r ? r->name : "?";
}

std::string to_string(DType d) { return dtype_name(d); }
std::string to_string(IndexType t) { return t == IndexType::I32 ? "int32" : "int64"; }
std::string to_string(OutputMode m) { return m == OutputMode::Stacked ? "stacked" : "pool"; }

DType parse_dtype(const std::string& s) {
  for (const DTypeRow& r : dtype_rows()) {
    if (s == r.name) return r.dtype;
    for (const std::string& alias : r.spellings)
      if (s == alias) return r.dtype;
  }
  throw ArgumentError("unknown dtype '" + s +
                      "': use one of bf16, fp16, fp32 (activations) or fp8_e4m3, fp8_e5m2 (cache)");
}

int dtype_size(DType d) {
  const DTypeRow* r = dtype_row(d);
  return r ? r->size : 0;
}

bool is_fp8(DType d) { return d == DType::FP8_E4M3 || d == DType::FP8_E5M2; }

std::string KernelSpec::canonical() const {
  std::ostringstream o;
  o << "H=" << num_kv_heads << ";D=" << head_dim << ";R=" << rotary_dim
    << ";neox=" << (neox ? 1 : 0) << ";knorm=" << k_norm_key(k_norm) << ";act=" << to_string(act)
    << ";cache=" << to_string(cache) << ";cs=" << to_string(cos_sin)
    << ";pos=" << to_string(positions) << ";slot=" << to_string(slots)
    << ";mode=" << to_string(mode) << ";debug=" << (debug_checks ? 1 : 0);
  if (paged) o << ";paged=1";
  if (kv_bias) o << ";bias=1";
  return o.str();
}

std::string KernelSpec::short_name() const {
  std::ostringstream o;
  o << "fkv_h" << num_kv_heads << "_d" << head_dim << "_r" << rotary_dim
    << (neox ? "_neox" : "_gptj") << k_norm_suffix(k_norm) << "_" << to_string(act) << "_"
    << to_string(cache) << "_" << to_string(mode) << (paged ? "_paged" : "")
    << (kv_bias ? "_bias" : "");
  return o.str();
}

std::string head_elements_error(int num_kv_heads, int head_dim) {
  return "num_kv_heads * head_dim = " + std::to_string(num_kv_heads) + " * " +
         std::to_string(head_dim) + " = " +
         std::to_string(static_cast<std::int64_t>(num_kv_heads) * head_dim) +
         " is more than the kernels can index: at most " + std::to_string(kMaxHeadElements) +
         " K (and as many V) elements per token and layer, so that 2 * layers * num_kv_heads * "
         "head_dim fits the 32-bit int the kernels index with for up to " +
         std::to_string(kMaxLayers) + " layers (no real model comes near; check the config)";
}

void KernelSpec::check() const {
  if (num_kv_heads <= 0)
    throw ArgumentError("num_kv_heads must be positive, got " + std::to_string(num_kv_heads));
  if (head_dim <= 0)
    throw ArgumentError("head_dim must be positive, got " + std::to_string(head_dim));
  if (static_cast<std::int64_t>(num_kv_heads) * head_dim > kMaxHeadElements)
    throw ArgumentError(head_elements_error(num_kv_heads, head_dim));
  if (rotary_dim < 0 || rotary_dim % 2 != 0 || rotary_dim > head_dim)
    throw MismatchError(seed::rotary_head_pair(rotary_dim, head_dim));
  if (const KNormInfo& kn = k_norm_info(k_norm); kn.kernel != k_norm)
    throw ArgumentError(
        std::string("K norm \"") + kn.name +
        "\" is not computed by a kernel: the host folds it into the weight of K norm \"" +
        to_string(kn.kernel) + "\" (kernel_k_norm), which the kernel spec takes");
  if (is_fp8(act))
    throw ArgumentError("activation dtype " + to_string(act) +
                        " is not supported: proj must be bf16, fp16 or fp32");
  if (cache != act && !is_fp8(cache))
    throw ArgumentError("cache dtype " + to_string(cache) + " with activations in " +
                        to_string(act) +
                        ": the cache must have the activation dtype or be fp8_e4m3 / fp8_e5m2");
  if (cos_sin != DType::FP32 && cos_sin != act)
    throw ArgumentError("cos/sin dtype " + to_string(cos_sin) +
                        ": use fp32 or the activation dtype (" + to_string(act) + ")");
  if (paged && mode != OutputMode::Pool)
    throw ArgumentError(
        "a paged layout is a pool layout: set mode=pool, or paged=false for stacked output");
  if (head_dim % 2 != 0)
    throw ArgumentError("head_dim " + std::to_string(head_dim) +
                        " is odd: the fused kernel needs an even head_dim");
  if (tiling().vec == 0) {
    // The rule tiling() searches: a head is split over at most 32 lanes of one warp, each lane
    // holding e = v * l elements (v a power of two up to 16 bytes, l up to 8 loads), e | head_dim.
    const int max_vec = 16 / dtype_size(act);
    throw ArgumentError(
        "head_dim " + std::to_string(head_dim) + " cannot be tiled for " + to_string(act) +
        " activations: the kernel splits a head over at most 32 lanes of one warp, each lane "
        "holding e elements with e dividing head_dim, e = v * l for v a power of two up to " +
        std::to_string(max_vec) + " and l up to 8" +
        (rotary_dim > 0 && !neox ? " (GPT-J style: e even)" : "") +
        "; no such e exists (a multiple of 8 up to 256, of 16 up to 512 or of 32 up to 1024 "
        "always works)");
  }
}

Tiling KernelSpec::tiling() const { return tiling(JitOptions::global()); }

Tiling KernelSpec::tiling(const JitOptions& options) const {
  // Choose the load width and loads per lane so that a head fits in one warp with the fewest
  // idle lanes; among equals, the fewest loads per lane (more lanes in flight).
  const int D = head_dim;
  const int size = dtype_size(act);
  Tiling best;
  int best_idle = 33;
  auto idle_lanes = [&](int vec, int loads) {  // 33 when (vec, loads) cannot tile a head
    const int ept = vec * loads;
    if (D % ept != 0 || D / ept > 32) return 33;
    if (rotary_dim > 0 && !neox && ept % 2 != 0) return 33;  // GPT-J pairs stay in a lane
    const int lanes = D / ept;
    return 32 - (32 / lanes) * lanes;
  };
  // FKV_LOADS_PER_LANE=<n> (JitOptions::loads_per_lane) pins the loads (tuning): the widest load
  // that tiles the head with them; the name expression carries the loads, like the block size.
  for (int vec = 16 / size; vec >= 1 && options.loads_per_lane > 0; vec /= 2) {
    if (const int idle = idle_lanes(vec, options.loads_per_lane); idle < 33) {
      best_idle = idle;
      best.vec = vec;
      best.loads = options.loads_per_lane;
      break;
    }
  }
  // The rule: one or two loads per lane keep the registers a lane needs small; more only when a
  // head would not fit in a warp otherwise, or would leave over a quarter of it idle.
  const bool pinned = best.loads != 0;
  for (int max_loads : {2, 4, 8}) {
    if (pinned) break;
    for (int vec = 16 / size; vec >= 1 && best_idle > 0; vec /= 2) {
      for (int loads = 1; loads <= max_loads; ++loads) {
        if (const int idle = idle_lanes(vec, loads); idle < best_idle) {
          best_idle = idle;
          best.vec = vec;
          best.loads = loads;
        }
      }
    }
    if (best_idle <= 8) break;
  }
  if (best_idle == 33) return best;  // check() reports it
  best.elems_per_thread = best.vec * best.loads;
  best.lanes_per_head = D / best.elems_per_thread;
  best.heads_per_warp = 32 / best.lanes_per_head;
  best.idle_lanes = best_idle;
  // FKV_BLOCK_WARPS=<n> (JitOptions::block_warps) overrides the block size (tuning); the name
  // expression carries it, so cache entries of different block sizes never mix.
  best.warps_per_block =
      options.block_warps ? options.block_warps : 2;  // 64 threads: fastest in the H200 sweep
  best.block_threads = 32 * best.warps_per_block;
  best.heads_per_block = best.heads_per_warp * best.warps_per_block;
  best.fixed_layers_per_block = options.layers_per_block;
  return best;
}

LaunchGrid launch_grid(const KernelSpec& spec, const Tiling& t, std::int64_t resident_blocks,
                       std::int64_t num_tokens, int num_layers) {
  LaunchGrid g;
  if (num_tokens <= 0 || num_layers <= 0) return g;  // nothing to launch
  const std::int64_t pairs = num_tokens * spec.num_kv_heads;
  const std::int64_t blocks = (pairs + t.heads_per_block - 1) / t.heads_per_block;
  g.x = static_cast<unsigned>(blocks);
  g.z = 1;
  // All layers in one block reads cos/sin once per token and keeps the most loads in flight
  // per lane, but a block then works through its layers one after another. Below a full wave,
  // splitting the layers puts more of the device to work: the smallest chunk whose grid still
  // fits in one wave. Measured on an H200 (5 layers, 8 heads x 128, 16 blocks per SM): 512
  // tokens take 7.6 us with one layer per block (2.4 waves), 6.1 us with 3 (one wave) and
  // 6.6 us with 5; at 4096 tokens any split costs 5-25%. With the shared-memory ring of the
  // current kernel the rule still picks the fastest at 512 tokens: 5.8 us (3) against 6.3 (2)
  // and 6.1 (5).
  int lpb = num_layers;
  if (t.fixed_layers_per_block > 0) {
    lpb = std::min(t.fixed_layers_per_block, num_layers);
  } else {
    const std::int64_t wave = std::max<std::int64_t>(resident_blocks, 1);
    for (int chunk = 1; chunk < num_layers; ++chunk) {
      if (blocks * ((num_layers + chunk - 1) / chunk) <= wave) {
        lpb = chunk;
        break;
      }
    }
  }
  g.layers_per_block = lpb;
  g.y = static_cast<unsigned>((num_layers + lpb - 1) / lpb);
  return g;
}

KernelSpec make_kernel_spec(const AttentionSpec& attn, DType act, DType cache, OutputMode mode,
                            DType cos_sin, IndexType positions, IndexType slots) {
  KernelSpec s;
  s.num_kv_heads = attn.num_kv_heads;
  s.head_dim = attn.head_dim;
  s.rotary_dim = attn.rotary_dim;
  s.neox = attn.is_neox_style;
  s.k_norm = kernel_k_norm(attn.k_norm);
  s.act = act;
  s.cache = cache;
  s.cos_sin = cos_sin;
  s.positions = positions;
  s.slots = slots;
  s.mode = mode;
  s.check();
  return s;
}

DType act_dtype_of(const std::string& config_dtype, const std::string& key) {
  if (config_dtype.empty()) return DType::BF16;
  DType d;
  try {
    d = parse_dtype(config_dtype);
  } catch (const ArgumentError&) {
    throw ConfigError("key '" + key + "': \"" + config_dtype +
                      "\" is not a dtype fkv-jit knows (bfloat16, float16, float32, "
                      "float8_e4m3fn, float8_e5m2, or bf16, fp16, fp32), and the activation "
                      "dtype defaults to it. Pass the activation dtype explicitly: --dtype "
                      "bf16|fp16|fp32 (act_dtype in C, dtype= in Python), or correct the key");
  }
  if (is_fp8(d)) {
    // How the checkpoint stores its weights; engines run such models with bf16 activations.
    spdlog::info(
        "fkv: {} is \"{}\", an 8-bit storage dtype: activations default to bf16 "
        "(--dtype, act_dtype in C, dtype= in Python, overrides)",
        key, config_dtype);
    return DType::BF16;
  }
  return d;
}

DType act_dtype_of(const ModelConfig& config) {
  if (config.dtype.value.empty()) return DType::BF16;
  try {
    return act_dtype_of(config.dtype.value, config.dtype.source);
  } catch (const ConfigError& e) {
    throw ConfigError((config.path.empty() ? std::string("<config>") : config.path) + ": " +
                      e.what());
  }
}

std::vector<KernelSpec> kernel_specs_for(const Plan& plan, const VariantOptions& o) {
  std::vector<KernelSpec> out;
  std::unordered_set<std::string> seen;  // canonical texts: a linear search made 4096 groups slow
  auto add = [&](const KernelSpec& s) {
    if (seen.insert(s.canonical()).second) out.push_back(s);
  };
  for (const LayerGroup& g : plan.groups) {
    if (o.stacked)
      add(make_kernel_spec(g.attn, o.act, o.cache, OutputMode::Stacked, o.cos_sin, o.index,
                           o.index));
    if (o.pool)
      add(make_kernel_spec(g.attn, o.act, o.cache, OutputMode::Pool, o.cos_sin, o.index, o.index));
  }
  return out;
}

}  // namespace fkv
