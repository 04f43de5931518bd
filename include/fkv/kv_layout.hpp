// kv_layout: one description of where a materialize call writes K and V (the output layout),
// taken by every path and front-end: fkv::materialize_pool (materialize.hpp), the decode-size
// kernel (DecodeKV::run_pool), FusedKVMaterializer::materialize / materialize_pool, the C API
// (fkv_kv_layout, fkv_materializer_write) and Python (FusedKVMaterializeHelper.
// materialize_to_layout). PoolOutput, DecodePool and FusedKVMaterializer::Pool are this type.
//
// Every kind reduces to what the kernels address: per layer l one K and one V base pointer
// (kv_layer_buffer), and element (slot, head, d) of a layer at
//     (slot / block_size) * block_stride + (slot % block_size) * slot_stride + head * head_stride +
//     d
// (KVAddressing, from resolve_kv_layout). A new layout is a new KVLayoutKind with its fields
// here and its case in src/kv_layout.cpp (the name, the checks, the per-layer pointers); the
// kernels, the materializer and the front-ends take it unchanged: Python passes integer fields
// by name, the C API copies them by FKV_KV_LAYOUT_INT_FIELDS, and a new integer field is
// declared once more, in fkv.h's fkv_kv_layout.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "fkv/spec.hpp"

namespace fkv {

enum class KVLayoutKind {
  // Each layer has its own K and V buffer (k_buffers[l], v_buffers[l]). Flat rows: slot s is row
  // s of [num_slots, slot_stride] (sglang's per-layer pools). Paged (block_size, block_stride,
  // head_stride or slot_mappings given; needs a paged kernel): vLLM's [num_blocks, block_size,
  // H, D], FlashInfer's NHD [num_blocks, 2, block_size, H, D] and HND [num_blocks, 2, H,
  // block_size, D] (docs/integration.md has the strides of each).
  PerLayer,
  // One allocation `base` holding all layers' K and V of one slot in one row: element
  // (slot, layer, k|v, head, d) at
  //     slot * slot_stride + layer * layer_stride + kv * kv_offset + head * head_stride + d
  // (kv 0 = K, 1 = V; layer = the attention layer's position in the call's layer order).
  // Defaults: head_stride D, kv_offset H*D (V after K), layer_stride 2*H*D, slot_stride
  // num_layers * layer_stride. head_stride D takes the flat kernels (and the decode path);
  // another head_stride, or slot_mappings, needs a paged kernel.
  TokenMajor,
  // No slots: per group g, k_buffers[g], v_buffers[g] are [L_g, T, H_g, D_g] contiguous in the
  // activation dtype (FusedKVMaterializer::materialize only; materialize_stacked elsewhere).
  Stacked,
};

std::string to_string(KVLayoutKind);  // "per_layer", "token_major", "stacked"
// Also accepts "flat" and "paged" (both PerLayer) and "-" for "_"; ArgumentError listing the
// names otherwise.
KVLayoutKind parse_kv_layout_kind(const std::string& name);

struct KVLayout {
  KVLayoutKind kind = KVLayoutKind::PerLayer;
  // Slots: token t goes to slot cache_loc[t] ([T] of the kernel's slot index type, device);
  // < 0 is skipped, >= num_slots skipped and flagged (FKV_ERROR_BAD_SLOT). May be null when
  // every layer has a slot mapping.
  const void* cache_loc = nullptr;
  // Per-layer slot mappings, [L] device pointers to [T] slots; a null entry uses cache_loc.
  // Empty = cache_loc for every layer. Needs a paged kernel.
  std::span<const void* const> slot_mappings;
  // PerLayer: [L] device buffers in the cache dtype. Stacked: one per group.
  std::span<void* const> k_buffers;
  std::span<void* const> v_buffers;
  // TokenMajor: the one allocation (device, in the cache dtype).
  void* base = nullptr;
  std::int64_t num_slots = 0;  // slots of the pool (paged: num_blocks * block_size); required
  // Strides in elements; 0 = the default of the kind (see above). PerLayer flat: slot_stride
  // >= H*D; TokenMajor: slot_stride is the row stride.
  std::int64_t slot_stride = 0;
  std::int64_t block_size = 0;    // PerLayer paged: slots per block; 0 = 1
  std::int64_t block_stride = 0;  // PerLayer paged: 0 = one block's extent
  std::int64_t head_stride = 0;   // 0 = D
  std::int64_t layer_stride = 0;  // TokenMajor: 0 = 2*H*D
  std::int64_t kv_offset = 0;     // TokenMajor: V's offset from K; 0 = H*D
  // FP8 caches (stored = x / scale, saturated): [L] host values (empty = 1.0), or [L] fp32 in
  // device memory read at run time (graph-safe), not both.
  std::span<const float> k_scales;
  std::span<const float> v_scales;
  const float* k_scales_device = nullptr;
  const float* v_scales_device = nullptr;
};

// KVLayout's integer fields, in one list: set_kv_layout_field and kv_layout_field_names are
// built from it, and the C API copies the members of the same names from fkv_kv_layout with it
// (src/c_api_materializer.cpp). So a new integer field is its member above, its entry here and
// the same member appended to fkv_kv_layout in fkv.h; the front-ends take it unchanged.
// clang-format off
#define FKV_KV_LAYOUT_INT_FIELDS(X) \
  X(num_slots) X(slot_stride) X(block_size) X(block_stride) X(head_stride) X(layer_stride) \
  X(kv_offset)
// clang-format on

// What a layout is checked against: the layers it covers and their heads.
struct KVGeometry {
  std::int64_t num_layers = 0;
  std::int64_t num_kv_heads = 0;
  std::int64_t head_dim = 0;
  DType cache = DType::BF16;
  IndexType slots = IndexType::I64;  // cache_loc and slot_mappings
  // Elements the kernel writes at once: buffers, strides and offsets must keep that alignment
  // (the epilogue kernel's Tiling::vec; 1 for the decode kernel, which writes elements).
  int vec = 1;
};

// The addressing the pool kernels take (kernel_params.h, decode_params.h), defaults filled in.
struct KVAddressing {
  std::int64_t num_slots = 0;
  std::int64_t slot_stride = 0;
  std::int64_t block_size = 1;
  std::int64_t block_stride = 0;
  std::int64_t head_stride = 0;
  bool paged = false;  // needs a paged kernel (paged fields, head_stride != D, slot mappings)
};

// Checks `layout` against `geometry` and returns its addressing. Throws ArgumentError naming
// the field, what is wrong and how to fix it: counts of buffers, scales and slot mappings,
// null or misaligned pointers, strides that are too small, not multiples of vec, or that make
// two elements of the layout share memory (rows of one paged block, or the (slot, layer, k|v,
// head) rows of a token-major pool). Stacked layouts are not pools: ArgumentError. No
// allocation on success.
KVAddressing resolve_kv_layout(const KVLayout& layout, const KVGeometry& geometry);

// Layer `layer`'s K (v = false) or V buffer: the pointer the kernels take as k_pool[l] /
// v_pool[l]. For a layout resolve_kv_layout accepted.
void* kv_layer_buffer(const KVLayout& layout, const KVGeometry& geometry, std::int64_t layer,
                      bool v);

// The same pool as `layout` (resolved as `addressing`) seen as a PerLayer layout over the
// given per-layer buffers (k[l], v[l] = kv_layer_buffer of the layers it covers), with the
// addressing spelled out: how the materializer hands any layout to one group's kernel.
KVLayout per_layer_view(const KVLayout& layout, const KVAddressing& addressing,
                        std::span<void* const> k, std::span<void* const> v);

// Elements from `base` (TokenMajor) or from each layer buffer (PerLayer) up to one past the
// last element the layout may write, for front-ends that can check a buffer's size (Python).
std::int64_t kv_layout_extent(const KVLayout& layout, const KVGeometry& geometry);

// Sets the integer field `name` (one of FKV_KV_LAYOUT_INT_FIELDS) of `layout`: how front-ends
// that pass fields by name (Python) fill one. ArgumentError naming the fields otherwise.
void set_kv_layout_field(KVLayout& layout, const std::string& name, std::int64_t value);
const std::vector<std::string>& kv_layout_field_names();

}  // namespace fkv
