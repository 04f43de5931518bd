// kv_layout: the output-layout descriptor's names, checks and per-layer pointers.
//
// Hot path: resolve_kv_layout and kv_layer_buffer compare and multiply integers only; the
// error paths build strings.
#include "fkv/kv_layout.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <string>

#include "fkv/errors.hpp"

namespace fkv {
namespace {

[[noreturn]] void fail(const KVLayout& l, const std::string& what) {
  throw ArgumentError(to_string(l.kind) + " layout: " + what);
}

std::string str(std::int64_t v) { return std::to_string(v); }

void check_aligned(const KVLayout& l, const void* p, std::size_t align, const std::string& name) {
  if (reinterpret_cast<std::uintptr_t>(p) % align != 0)
    fail(l, name + " must be " + std::to_string(align) + "-byte aligned (got address " +
                std::to_string(reinterpret_cast<std::uintptr_t>(p)) +
                "); pass a tensor whose storage offset keeps that alignment");
}

std::size_t out_align(const KVGeometry& g) {
  return static_cast<std::size_t>(g.vec) * static_cast<std::size_t>(dtype_size(g.cache));
}

// TokenMajor's strides with the defaults filled in.
struct TokenMajorStrides {
  std::int64_t head, kv, layer, row;
};
TokenMajorStrides token_major_strides(const KVLayout& l, const KVGeometry& g) {
  TokenMajorStrides s;
  s.head = l.head_stride ? l.head_stride : g.head_dim;
  s.kv = l.kv_offset ? l.kv_offset : g.num_kv_heads * g.head_dim;
  s.layer = l.layer_stride ? l.layer_stride : 2 * g.num_kv_heads * g.head_dim;
  s.row = l.slot_stride ? l.slot_stride : g.num_layers * s.layer;
  return s;
}

// Slots, slot mappings and scales: the same for every pool kind.
void check_slots_and_scales(const KVLayout& l, const KVGeometry& g) {
  const auto L = static_cast<std::size_t>(g.num_layers);
  if (!l.slot_mappings.empty() && l.slot_mappings.size() != L)
    fail(l, "slot_mappings has " + std::to_string(l.slot_mappings.size()) + " entries for " +
                std::to_string(L) + " layers (one per layer, or none)");
  const std::size_t index_align = g.slots == IndexType::I32 ? 4 : 8;
  bool needs_cache_loc = l.slot_mappings.empty();
  for (const void* m : l.slot_mappings) {
    if (m == nullptr)
      needs_cache_loc = true;
    else
      check_aligned(l, m, index_align, "slot_mappings[l]");
  }
  if (needs_cache_loc && l.cache_loc == nullptr)
    fail(l, "cache_loc is null (give the [T] slots, or a slot mapping for every layer)");
  if (l.cache_loc) check_aligned(l, l.cache_loc, index_align, "cache_loc");
  if (l.num_slots <= 0) fail(l, "num_slots must be > 0, got " + str(l.num_slots));
  auto scales = [&](std::span<const float> host, const float* device, const char* name) {
    if (!host.empty() && host.size() != L)
      fail(l, std::string(name) + " has " + std::to_string(host.size()) + " values for " +
                  std::to_string(L) + " layers (one per layer, or none)");
    if ((!host.empty() || device) && !is_fp8(g.cache))
      fail(l, "k/v scales apply to fp8 caches only; the cache dtype is " + to_string(g.cache) +
                  ": leave k_scales / v_scales empty");
    if (!host.empty() && device)
      fail(l, std::string("give ") + name + " as host values or as a device array, not both");
    if (device) check_aligned(l, device, 4, name);
    for (float v : host)
      if (!(v > 0) || !std::isfinite(v))
        fail(l, std::string(name) + " must be positive and finite");
  };
  scales(l.k_scales, l.k_scales_device, "k_scales");
  scales(l.v_scales, l.v_scales_device, "v_scales");
}

KVAddressing resolve_per_layer(const KVLayout& l, const KVGeometry& g) {
  const std::int64_t H = g.num_kv_heads, D = g.head_dim, hd = H * D;
  const auto L = static_cast<std::size_t>(g.num_layers);
  if (l.base != nullptr)
    fail(l, "base is for token_major layouts; a per_layer layout takes k_buffers / v_buffers");
  if (l.layer_stride != 0 || l.kv_offset != 0)
    fail(l, "layer_stride and kv_offset are token_major fields; set kind = token_major");
  if (l.k_buffers.size() != L || l.v_buffers.size() != L)
    fail(l, "pool mode needs one K and one V buffer per layer: got " +
                std::to_string(l.k_buffers.size()) + " and " + std::to_string(l.v_buffers.size()) +
                " for " + std::to_string(L) + " layers");
  KVAddressing a;
  a.num_slots = l.num_slots;
  a.paged =
      l.block_size != 0 || l.block_stride != 0 || l.head_stride != 0 || !l.slot_mappings.empty();
  a.slot_stride = l.slot_stride ? l.slot_stride : hd;
  const std::int64_t vec = g.vec;
  // The flat layout needs a whole slot per row; the paged one checks its own rows below.
  if ((!a.paged && a.slot_stride < hd) || a.slot_stride < 0 || a.slot_stride % vec != 0)
    fail(l, "slot_stride " + str(a.slot_stride) +
                " must be >= " + (a.paged ? std::string("0") : "H*D = " + str(hd)) +
                " and a multiple of " + str(vec));
  const std::int64_t bs = l.block_size ? l.block_size : 1;
  const std::int64_t hs = l.head_stride ? l.head_stride : D;
  if (bs < 1) fail(l, "block_size must be >= 1, got " + str(bs));
  if (hs < 0) fail(l, "head_stride must be >= 0, got " + str(hs));
  // Rows (s, h) of one block are disjoint when the heads of a slot, or the slots of a head, are
  // laid side by side: NHD-like or HND-like, each possibly padded.
  const bool nhd = (H == 1 || hs >= D) && (bs == 1 || a.slot_stride >= (H - 1) * hs + D);
  const bool hnd =
      (bs == 1 || a.slot_stride >= D) && (H == 1 || hs >= (bs - 1) * a.slot_stride + D);
  if (!nhd && !hnd)
    fail(l, "the paged layout overlaps itself: slot_stride " + str(a.slot_stride) +
                ", head_stride " + str(hs) + " with block_size " + str(bs) + ", H=" + str(H) +
                ", D=" + str(D) +
                "; use slot_stride >= (H-1)*head_stride + D with head_stride >= D (NHD) or "
                "head_stride >= (block_size-1)*slot_stride + D with slot_stride >= D (HND)");
  const std::int64_t extent = (bs - 1) * a.slot_stride + (H - 1) * hs + D;
  a.block_stride = l.block_stride ? l.block_stride : extent;
  if (a.block_stride < extent)
    fail(l, "block_stride " + str(a.block_stride) + " is smaller than one block's extent " +
                str(extent) + " elements");
  if (hs % vec != 0 || a.block_stride % vec != 0)
    fail(l, "head_stride " + str(hs) + " and block_stride " + str(a.block_stride) +
                " must be multiples of " + str(vec) + " elements (16-byte vectors)");
  a.block_size = bs;
  a.head_stride = hs;
  const std::size_t align = out_align(g);
  for (std::size_t i = 0; i < L; ++i) {
    if (l.k_buffers[i] == nullptr) fail(l, "k_buffers[l] is null (layer " + str(i) + ")");
    if (l.v_buffers[i] == nullptr) fail(l, "v_buffers[l] is null (layer " + str(i) + ")");
    check_aligned(l, l.k_buffers[i], align, "k_buffers[l]");
    check_aligned(l, l.v_buffers[i], align, "v_buffers[l]");
  }
  return a;
}

KVAddressing resolve_token_major(const KVLayout& l, const KVGeometry& g) {
  const std::int64_t H = g.num_kv_heads, D = g.head_dim, L = g.num_layers;
  if (!l.k_buffers.empty() || !l.v_buffers.empty())
    fail(l,
         "k_buffers / v_buffers are for per_layer layouts; a token_major pool is one "
         "allocation: pass it as base");
  if (l.block_size != 0 || l.block_stride != 0)
    fail(l,
         "block_size and block_stride are for paged per_layer layouts; a token_major row is "
         "one slot (slot_stride apart)");
  if (l.base == nullptr) fail(l, "base is null (the pool: [num_slots, slot_stride] elements)");
  check_aligned(l, l.base, out_align(g), "base");
  const TokenMajorStrides s = token_major_strides(l, g);
  struct Dim {
    const char* name;
    std::int64_t n, stride;
  };
  std::array<Dim, 4> dims = {{{"head_stride", H, s.head},
                              {"kv_offset", 2, s.kv},
                              {"layer_stride", L, s.layer},
                              {"slot_stride", l.num_slots, s.row}}};
  for (const Dim& d : dims) {
    if (d.stride <= 0) fail(l, std::string(d.name) + " must be > 0, got " + str(d.stride));
    if (d.stride % g.vec != 0)
      fail(l, std::string(d.name) + " " + str(d.stride) + " must be a multiple of " + str(g.vec) +
                  " elements (the kernel writes 16-byte vectors)");
  }
  // The (slot, layer, k|v, head) rows of D elements are disjoint when the dimensions nest: in
  // order of stride, each steps over everything the smaller ones span (any nesting is fine,
  // e.g. V rows of all layers after the K rows: kv_offset >= L * layer_stride).
  std::sort(dims.begin(), dims.end(),
            [](const Dim& a, const Dim& b) { return a.stride < b.stride; });
  std::int64_t extent = D;
  std::string inner = "D";
  for (const Dim& d : dims) {
    if (d.n <= 1) continue;
    if (d.stride < extent)
      fail(l, "the token_major layout overlaps itself: " + std::string(d.name) + " " +
                  str(d.stride) + " is smaller than the " + str(extent) + " elements spanned by " +
                  inner + " (H=" + str(H) + ", D=" + str(D) + ", " + str(L) +
                  " layers); use head_stride >= D, kv_offset >= (H-1)*head_stride + D, "
                  "layer_stride >= kv_offset + (H-1)*head_stride + D and slot_stride >= "
                  "(layers-1)*layer_stride + kv_offset + (H-1)*head_stride + D (the defaults), "
                  "or another order of the same nesting");
    extent += (d.n - 1) * d.stride;
    inner += std::string(", ") + d.name;
  }
  KVAddressing a;
  a.num_slots = l.num_slots;
  a.slot_stride = s.row;
  a.block_size = 1;
  a.block_stride = s.row;
  a.head_stride = s.head;
  a.paged = s.head != D || !l.slot_mappings.empty();
  return a;
}

}  // namespace

std::string to_string(KVLayoutKind k) {
  switch (k) {
    case KVLayoutKind::PerLayer:
      return "per_layer";
    case KVLayoutKind::TokenMajor:
      return "token_major";
    case KVLayoutKind::Stacked:
      return "stacked";
  }
  return "?";
}

KVLayoutKind parse_kv_layout_kind(const std::string& name) {
  std::string n = name;
  std::replace(n.begin(), n.end(), '-', '_');
  if (n == "per_layer" || n == "flat" || n == "paged") return KVLayoutKind::PerLayer;
  if (n == "token_major") return KVLayoutKind::TokenMajor;
  if (n == "stacked") return KVLayoutKind::Stacked;
  throw ArgumentError("unknown KV layout '" + name +
                      "': use per_layer (or flat, paged), token_major or stacked");
}

KVAddressing resolve_kv_layout(const KVLayout& l, const KVGeometry& g) {
  if (g.num_layers < 1 || g.num_kv_heads < 1 || g.head_dim < 1 || g.vec < 1)
    throw ArgumentError("KV layout geometry: layers, heads, head_dim and vec must be >= 1");
  KVAddressing a;
  switch (l.kind) {
    case KVLayoutKind::PerLayer:
      a = resolve_per_layer(l, g);
      break;
    case KVLayoutKind::TokenMajor:
      a = resolve_token_major(l, g);
      break;
    case KVLayoutKind::Stacked:
      fail(l,
           "a stacked output has no slots; write it with materialize_stacked (or "
           "FusedKVMaterializer::materialize), or pick a pool kind");
  }
  check_slots_and_scales(l, g);
  return a;
}

void* kv_layer_buffer(const KVLayout& l, const KVGeometry& g, std::int64_t layer, bool v) {
  if (l.kind == KVLayoutKind::TokenMajor) {
    const TokenMajorStrides s = token_major_strides(l, g);
    const std::int64_t off = layer * s.layer + (v ? s.kv : 0);
    return static_cast<char*>(l.base) + off * dtype_size(g.cache);
  }
  return (v ? l.v_buffers : l.k_buffers)[static_cast<std::size_t>(layer)];
}

KVLayout per_layer_view(const KVLayout& l, const KVAddressing& a, std::span<void* const> k,
                        std::span<void* const> v) {
  KVLayout r = l;
  r.kind = KVLayoutKind::PerLayer;
  r.base = nullptr;
  r.k_buffers = k;
  r.v_buffers = v;
  r.layer_stride = 0;
  r.kv_offset = 0;
  r.slot_stride = a.slot_stride;
  r.block_size = a.paged ? a.block_size : 0;
  r.block_stride = a.paged ? a.block_stride : 0;
  r.head_stride = a.paged ? a.head_stride : 0;
  return r;
}

std::int64_t kv_layout_extent(const KVLayout& l, const KVGeometry& g) {
  const KVAddressing a = resolve_kv_layout(l, g);
  const std::int64_t heads = (g.num_kv_heads - 1) * a.head_stride + g.head_dim;
  if (l.kind == KVLayoutKind::TokenMajor) {
    const TokenMajorStrides s = token_major_strides(l, g);
    return (a.num_slots - 1) * s.row + (g.num_layers - 1) * s.layer + s.kv + heads;
  }
  const std::int64_t blocks = (a.num_slots + a.block_size - 1) / a.block_size;
  const std::int64_t last = std::min(a.block_size, a.num_slots - (blocks - 1) * a.block_size);
  return (blocks - 1) * a.block_stride + (last - 1) * a.slot_stride + heads;
}

const std::vector<std::string>& kv_layout_field_names() {
#define FKV_NAME(f) #f,
  static const std::vector<std::string> names = {FKV_KV_LAYOUT_INT_FIELDS(FKV_NAME)};
#undef FKV_NAME
  return names;
}

void set_kv_layout_field(KVLayout& l, const std::string& name, std::int64_t value) {
#define FKV_SET(f)  \
  if (name == #f) { \
    l.f = value;    \
    return;         \
  }
  FKV_KV_LAYOUT_INT_FIELDS(FKV_SET)
#undef FKV_SET
  std::string known;
  for (const std::string& n : kv_layout_field_names()) known += (known.empty() ? "" : ", ") + n;
  throw ArgumentError("unknown KV layout field '" + name + "': the fields are " + known);
}

}  // namespace fkv
