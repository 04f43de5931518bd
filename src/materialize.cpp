// materialize: host-side checks, parameter block, launch.
//
// Hot path: no allocation, no sync, no copy, no hashing. The error paths build strings; the
// success path only compares integers and fills the parameter block on the stack. The launch
// geometry is the spec module's (KernelSpec::tiling for the block, launch_grid for the grid).
#include "fkv/materialize.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "fkv/errors.hpp"

namespace fkv {
namespace {

[[noreturn]] void fail(const KernelSpec& spec, const std::string& what) {
  throw ArgumentError("fused KV materialize (" + spec.short_name() + "): " + what);
}

void check_aligned(const KernelSpec& spec, const void* p, std::size_t align, const char* name) {
  if (reinterpret_cast<std::uintptr_t>(p) % align != 0)
    fail(spec, std::string(name) + " must be " + std::to_string(align) +
                   "-byte aligned (got address " +
                   std::to_string(reinterpret_cast<std::uintptr_t>(p)) +
                   "); pass a tensor whose storage offset keeps that alignment");
}

void check_not_null(const KernelSpec& spec, const void* p, const char* name) {
  if (p == nullptr) fail(spec, std::string(name) + " is null");
}

// Checks and fills everything both modes share.
void fill_common(const LoadedKernel& k, const FusedKVInputs& in, FkvKernelParams& p) {
  const KernelSpec& s = k.spec;
  const Tiling& t = k.tiling;
  const std::int64_t kv = std::int64_t{s.num_kv_heads} * s.head_dim;
  if (in.num_tokens < 0) fail(s, "num_tokens must be >= 0, got " + std::to_string(in.num_tokens));
  if (in.num_layers <= 0) fail(s, "num_layers must be >= 1, got " + std::to_string(in.num_layers));
  const int vec_bytes = t.vec * dtype_size(s.act);
  check_not_null(s, in.proj, "proj");
  check_aligned(s, in.proj, vec_bytes, "proj");
  const std::int64_t stride_l = in.proj_stride_layer ? in.proj_stride_layer : 2 * kv;
  const std::int64_t stride_t =
      in.proj_stride_token ? in.proj_stride_token : in.num_layers * stride_l;
  if (stride_l < 2 * kv)
    fail(s, "proj_stride_layer " + std::to_string(stride_l) +
                " is smaller than 2*H*D = " + std::to_string(2 * kv) + " elements");
  if (stride_t < (in.num_layers - 1) * stride_l + 2 * kv)
    fail(s, "proj_stride_token " + std::to_string(stride_t) + " overlaps the layers of one token");
  if (stride_l % t.vec != 0 || stride_t % t.vec != 0)
    fail(s, "proj strides (" + std::to_string(stride_t) + ", " + std::to_string(stride_l) +
                ") must be multiples of " + std::to_string(t.vec) + " elements (16-byte rows)");
  check_not_null(s, in.positions, "positions");
  check_aligned(s, in.positions, s.positions == IndexType::I32 ? 4 : 8, "positions");
  if (s.rotary_dim > 0) {
    check_not_null(s, in.cos_sin, "cos_sin");
    check_aligned(s, in.cos_sin, dtype_size(s.cos_sin), "cos_sin");
    if (in.max_position <= 0)
      fail(s, "max_position (rows of the cos/sin cache) must be > 0, got " +
                  std::to_string(in.max_position));
    if (in.cos_sin_stride != 0 && in.cos_sin_stride < s.rotary_dim)
      fail(s, "cos_sin_stride " + std::to_string(in.cos_sin_stride) +
                  " is smaller than rotary_dim " + std::to_string(s.rotary_dim));
  }
  if (k_norm_weighted(s.k_norm)) {
    check_not_null(s, in.k_norm_weight, "k_norm_weight");
    check_aligned(s, in.k_norm_weight, 4, "k_norm_weight");
  }
  if (!in.eps.empty() && static_cast<std::int64_t>(in.eps.size()) != in.num_layers)
    fail(s, "eps has " + std::to_string(in.eps.size()) + " values for " +
                std::to_string(in.num_layers) + " layers");
  if (s.debug_checks) check_not_null(s, in.error_flag, "error_flag (debug mode)");
  if (in.error_flag) check_aligned(s, in.error_flag, 4, "error_flag");
  const std::int64_t bias_stride = in.kv_bias_stride_layer ? in.kv_bias_stride_layer : 2 * kv;
  if (s.kv_bias) {
    if (in.kv_bias == nullptr)
      fail(s,
           "kv_bias is null, but this kernel adds a K/V bias; prepare a spec with kv_bias=false "
           "for a projection without bias");
    check_aligned(s, in.kv_bias, 16, "kv_bias");
    if (bias_stride < 2 * kv || bias_stride % 4 != 0)
      fail(s, "kv_bias_stride_layer " + std::to_string(bias_stride) + " must be >= 2*H*D = " +
                  std::to_string(2 * kv) + " and a multiple of 4 (16-byte rows)");
  } else if (in.kv_bias != nullptr) {
    fail(s,
         "kv_bias is given, but this kernel was prepared without a bias; prepare a spec with "
         "kv_bias=true");
  }

  p.proj = in.proj;
  p.proj_stride_token = stride_t;
  p.proj_stride_layer = stride_l;
  p.num_tokens = in.num_tokens;
  p.positions = in.positions;
  p.cos_sin = in.cos_sin;
  p.cos_sin_stride = in.cos_sin_stride ? in.cos_sin_stride : s.rotary_dim;
  p.max_position = in.max_position;
  p.k_norm_weight = in.k_norm_weight;
  p.error_flag = in.error_flag;
  p.kv_bias = in.kv_bias;
  p.kv_bias_stride = bias_stride;
}

// What both modes do first: the mode, the shared arguments, the parameter block. Returns false
// for T = 0 (nothing to launch), after the checks.
bool begin(const LoadedKernel& k, const FusedKVInputs& in, OutputMode mode, FkvKernelParams& p) {
  if (k.spec.mode != mode)
    fail(k.spec, "this kernel was prepared for " + to_string(k.spec.mode) +
                     " output; prepare a spec with mode=" + to_string(mode));
  std::memset(&p, 0, sizeof p);
  fill_common(k, in, p);
  return in.num_tokens > 0;
}

// Launches layers [0, L) in chunks of FKV_MAX_LAYERS; `per_chunk(first, count)` fills the
// per-layer fields of `p` for that chunk.
template <class F>
void launch_chunks(const LoadedKernel& k, const FusedKVInputs& in, FkvKernelParams& p,
                   CUstream stream, F&& per_chunk) {
  const FkvKernelParams base = p;
  for (std::int64_t first = 0; first < in.num_layers; first += FKV_MAX_LAYERS) {
    const int count =
        static_cast<int>(std::min<std::int64_t>(FKV_MAX_LAYERS, in.num_layers - first));
    p = base;
    p.proj = static_cast<const char*>(base.proj) +
             first * base.proj_stride_layer * dtype_size(k.spec.act);
    if (base.k_norm_weight) p.k_norm_weight = base.k_norm_weight + first * k.spec.head_dim;
    if (base.kv_bias) p.kv_bias = base.kv_bias + first * base.kv_bias_stride;
    if (base.k_scale_ptr) p.k_scale_ptr = base.k_scale_ptr + first;
    if (base.v_scale_ptr) p.v_scale_ptr = base.v_scale_ptr + first;
    p.num_layers = count;
    for (int l = 0; l < count; ++l) {
      p.eps[l] = in.eps.empty() ? 1e-6f : in.eps[first + l];
      p.k_scale[l] = 1.0f;
      p.v_scale[l] = 1.0f;
    }
    per_chunk(first, count);
    const LaunchGrid grid = launch_grid(k.spec, k.tiling, k.resident_blocks, in.num_tokens, count);
    p.layers_per_block = grid.layers_per_block;
    launch(k, p, grid.x, grid.y, grid.z, stream);
  }
}

}  // namespace

void materialize_stacked(const LoadedKernel& k, const FusedKVInputs& in, const StackedOutput& out,
                         CUstream stream) {
  const KernelSpec& s = k.spec;
  FkvKernelParams p;
  if (!begin(k, in, OutputMode::Stacked, p)) return;
  check_not_null(s, out.k_out, "k_out");
  check_not_null(s, out.v_out, "v_out");
  const std::size_t out_align = static_cast<std::size_t>(k.tiling.vec) * dtype_size(s.cache);
  check_aligned(s, out.k_out, out_align, "k_out");
  check_aligned(s, out.v_out, out_align, "v_out");
  const std::int64_t layer_elems = in.num_tokens * s.num_kv_heads * s.head_dim;
  launch_chunks(k, in, p, stream, [&](std::int64_t first, int) {
    p.k_out = static_cast<char*>(out.k_out) + first * layer_elems * dtype_size(s.cache);
    p.v_out = static_cast<char*>(out.v_out) + first * layer_elems * dtype_size(s.cache);
  });
}

void materialize_pool(const LoadedKernel& k, const FusedKVInputs& in, const PoolOutput& out,
                      CUstream stream) {
  const KernelSpec& s = k.spec;
  FkvKernelParams p;
  if (!begin(k, in, OutputMode::Pool, p)) return;
  KVGeometry geo;
  geo.num_layers = in.num_layers;
  geo.num_kv_heads = s.num_kv_heads;
  geo.head_dim = s.head_dim;
  geo.cache = s.cache;
  geo.slots = s.slots;
  geo.vec = k.tiling.vec;
  KVAddressing a;
  try {
    a = resolve_kv_layout(out, geo);
  } catch (const ArgumentError& e) {
    fail(s, e.what());
  }
  if (a.paged && !s.paged)
    fail(s,
         "block_size, block_stride, head_stride and slot_mappings need a paged kernel: prepare a "
         "spec with paged=true");
  p.cache_loc = out.cache_loc;
  p.num_slots = a.num_slots;
  p.slot_stride = a.slot_stride;
  p.block_size = a.block_size;
  p.block_stride = a.block_stride;
  p.head_stride = a.head_stride;
  p.per_layer_slots = out.slot_mappings.empty() ? 0 : 1;
  p.k_scale_ptr = out.k_scales_device;
  p.v_scale_ptr = out.v_scales_device;
  launch_chunks(k, in, p, stream, [&](std::int64_t first, int count) {
    for (int l = 0; l < count; ++l) {
      p.k_pool[l] = kv_layer_buffer(out, geo, first + l, false);
      p.v_pool[l] = kv_layer_buffer(out, geo, first + l, true);
      if (!out.k_scales.empty()) p.k_scale[l] = out.k_scales[first + l];
      if (!out.v_scales.empty()) p.v_scale[l] = out.v_scales[first + l];
      if (p.per_layer_slots) {
        const void* m = out.slot_mappings[first + l];
        p.slot_mapping[l] = m ? m : out.cache_loc;
      }
    }
  });
}

}  // namespace fkv
