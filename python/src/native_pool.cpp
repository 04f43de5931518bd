// native_pool: the KV pools of fkv_jit's materializer (State, native_materializer.hpp): each
// set of pool buffers is checked once (device, dtype, layout, alignment) and kept by pointer;
// materialize_pool then takes the binding's id, so a decode step re-checks nothing but the
// per-call tensors. bind_layout binds the kinds of fkv::KVLayout that are one allocation
// (token_major) by their fields' names, so a new kind needs nothing here.
#include <cstdint>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "native_materializer.hpp"

namespace fkv_native {
namespace {

// Every buffer of a binding has the layout of k_buffers[0] (`first` records it).
void same_layout(BoundPool& p, bool first, const std::string& what, std::int64_t slots,
                 std::int64_t slot_stride, std::int64_t block_size, std::int64_t block_stride,
                 std::int64_t head_stride) {
  fkv::KVLayout& l = p.layout;
  if (first) {
    l.num_slots = slots;
    l.slot_stride = slot_stride;
    l.block_size = block_size;
    l.block_stride = block_stride;
    l.head_stride = head_stride;
  } else if (slots != l.num_slots || slot_stride != l.slot_stride || block_size != l.block_size ||
             block_stride != l.block_stride || head_stride != l.head_stride) {
    raise("ValueError",
          what +
              ": every pool buffer must have the same layout (slots, block size and strides) as "
              "k_buffers[0]: " +
              std::to_string(l.num_slots) + " slots, slot stride " + std::to_string(l.slot_stride) +
              "; got " + std::to_string(slots) + ", " + std::to_string(slot_stride));
  }
}

}  // namespace

void State::bind_flat(BoundPool& p, const ffi::TensorView& tv, const std::string& what,
                      std::size_t i, bool first) const {
  std::int64_t inner = 1;
  for (int d = 1; d < tv.ndim(); ++d) inner *= tv.size(d);
  bool rows_contiguous = tv.ndim() >= 2;
  std::int64_t expect = 1;
  for (int d = tv.ndim() - 1; d >= 1 && rows_contiguous; --d) {
    if (tv.size(d) != 1 && tv.stride(d) != expect) rows_contiguous = false;
    expect *= tv.size(d);
  }
  if (!rows_contiguous || inner != layer_width[i])
    raise("ValueError", what + " must be [num_slots, num_kv_heads, head_dim] (or [num_slots, " +
                            std::to_string(layer_width[i]) + "]) with contiguous rows");
  const std::int64_t stride = tv.size(0) > 1 ? tv.stride(0) : layer_width[i];
  same_layout(p, first, what, tv.size(0), stride, 0, 0, 0);
}

void State::bind_paged(BoundPool& p, const ffi::TensorView& tv, const std::string& what,
                       std::size_t i, bool first) const {
  if (tv.ndim() != 4 || tv.size(2) * tv.size(3) != layer_width[i] || tv.stride(3) != 1)
    raise("ValueError",
          what +
              " must be a [num_blocks, block_size, num_kv_heads, head_dim] view with a contiguous "
              "last dim (H*D = " +
              std::to_string(layer_width[i]) +
              "); for an HND cache pass "
              "its .transpose(1, 2)");
  same_layout(p, first, what, tv.size(0) * tv.size(1), tv.stride(1), tv.size(1), tv.stride(0),
              tv.stride(2));
}

std::int64_t State::bind_pool(const ffi::Array<ffi::Tensor>& k, const ffi::Array<ffi::Tensor>& v,
                              const ffi::Array<double>& ks, const ffi::Array<double>& vs,
                              const ffi::Array<ffi::Tensor>& scales_device) {
  const std::size_t L = layer_width.size();
  if (k.size() != L || v.size() != L)
    raise("ValueError", "k_buffers and v_buffers need one buffer per attention layer (" +
                            std::to_string(L) + "), got " + std::to_string(k.size()) + " and " +
                            std::to_string(v.size()));
  BoundPool p;
  const ffi::Array<ffi::Tensor>* sides[2] = {&k, &v};
  const char* names[2] = {"k_buffers", "v_buffers"};
  for (int s = 0; s < 2; ++s) {
    for (std::size_t i = 0; i < L; ++i) {
      const ffi::Tensor& t = (*sides[s])[i];
      const std::string what = std::string(names[s]) + "[" + std::to_string(i) + "]";
      const ffi::TensorView tv(t);
      check_device(tv, what.c_str());
      if (!matches(tv.dtype(), opt.cache))
        raise("TypeError", what + " is " + dl_name(tv.dtype()) + "; the helper writes " +
                               fkv::to_string(opt.cache) + " pools (kv_cache_dtype)");
      if (opt.paged) {
        bind_paged(p, tv, what, i, s == 0 && i == 0);
      } else {
        bind_flat(p, tv, what, i, s == 0 && i == 0);
      }
      if (reinterpret_cast<std::uintptr_t>(data(tv)) % 16 != 0)
        raise("ValueError", what + " is not 16-byte aligned");
      (s == 0 ? p.k : p.v).push_back(data(tv));
    }
  }
  bind_scales(p, ks, vs, scales_device);
  std::lock_guard<std::mutex> lock(mutex);
  pools.push_back(std::move(p));
  return static_cast<std::int64_t>(pools.size() - 1);
}

void State::bind_scales(BoundPool& p, const ffi::Array<double>& ks, const ffi::Array<double>& vs,
                        const ffi::Array<ffi::Tensor>& scales_device) const {
  const std::size_t L = layer_width.size();
  const bool fp8 = opt.cache == fkv::DType::FP8_E4M3 || opt.cache == fkv::DType::FP8_E5M2;
  if ((ks.size() != 0 && ks.size() != L) || (vs.size() != 0 && vs.size() != L))
    raise("ValueError", "k_scales / v_scales take one value per attention layer (" +
                            std::to_string(L) + ") or none");
  if (!fp8 && (ks.size() != 0 || vs.size() != 0))
    raise("ValueError",
          "k_scales / v_scales apply to fp8 pools only; this pool is " + fkv::to_string(opt.cache));
  for (double x : ks) p.k_scales.push_back(static_cast<float>(x));
  for (double x : vs) p.v_scales.push_back(static_cast<float>(x));
  if (scales_device.size() != 0) {
    if (scales_device.size() != 2)
      raise("ValueError", "device scales come as a pair: k_scales, v_scales");
    if (!fp8)
      raise("ValueError", "k_scales / v_scales apply to fp8 pools only; this pool is " +
                              fkv::to_string(opt.cache));
    if (ks.size() != 0 || vs.size() != 0)
      raise("ValueError",
            "give k_scales / v_scales either as floats or as device tensors, not both");
    const float** dst[2] = {&p.layout.k_scales_device, &p.layout.v_scales_device};
    for (int s = 0; s < 2; ++s) {
      const ffi::TensorView t(scales_device[s]);
      const std::string what = s == 0 ? "k_scales" : "v_scales";
      check_device(t, what.c_str());
      if (!is(t.dtype(), kDLFloat, 32) || !contiguous(t) ||
          t.numel() != static_cast<std::int64_t>(L))
        raise("ValueError", what + " as a tensor must be a contiguous float32 tensor of " +
                                std::to_string(L) +
                                " values (one per attention layer) on the helper's device");
      *dst[s] = static_cast<const float*>(data(t));
    }
  }
}

std::int64_t State::bind_layout(const std::string& kind, const ffi::Tensor& pool,
                                const std::string& fields_json, const ffi::Array<double>& ks,
                                const ffi::Array<double>& vs,
                                const ffi::Array<ffi::Tensor>& scales_device) {
  BoundPool p;
  fkv::KVLayout& l = p.layout;
  l.kind = fkv::parse_kv_layout_kind(kind);
  if (l.kind == fkv::KVLayoutKind::PerLayer || l.kind == fkv::KVLayoutKind::Stacked)
    raise("ValueError", "layout '" + kind +
                            "' takes per-layer (or per-group) buffers: call "
                            "materialize_to_pool (or materialize) instead");
  const ffi::TensorView tv(pool);
  check_device(tv, "pool");
  if (!matches(tv.dtype(), opt.cache))
    raise("TypeError", "pool is " + dl_name(tv.dtype()) + "; the helper writes " +
                           fkv::to_string(opt.cache) + " pools (kv_cache_dtype)");
  if (!contiguous(tv) || tv.ndim() < 1)
    raise("ValueError", "pool must be a contiguous tensor whose first dimension is the slots");
  l.base = data(tv);
  l.num_slots = tv.size(0);
  const nlohmann::json fields = nlohmann::json::parse(fields_json);
  for (const auto& [name, value] : fields.items())
    fkv::set_kv_layout_field(l, name, value.get<std::int64_t>());
  // Checked with every group's heads; the tensor must hold the farthest element.
  l.cache_loc = &l;  // stands in for the per-call slots, checked at the call
  fkv::KVGeometry geo;
  geo.num_layers = static_cast<std::int64_t>(layer_width.size());
  geo.cache = opt.cache;
  geo.slots = opt.index;
  for (const fkv::LayerGroup& g : m->plan().groups) {
    geo.num_kv_heads = g.attn.num_kv_heads;
    geo.head_dim = g.attn.head_dim;
    const std::int64_t extent = fkv::kv_layout_extent(l, geo);
    if (extent > tv.numel())
      raise("ValueError", to_string(l.kind) + " layout reaches element " +
                              std::to_string(extent - 1) + " but pool has " +
                              std::to_string(tv.numel()) +
                              " elements: allocate [num_slots, slot_stride] elements or make "
                              "num_slots / the strides smaller");
  }
  l.cache_loc = nullptr;
  bind_scales(p, ks, vs, scales_device);
  std::lock_guard<std::mutex> lock(mutex);
  pools.push_back(std::move(p));
  return static_cast<std::int64_t>(pools.size() - 1);
}

void State::check_slots(const ffi::TensorView& loc, const std::string& what, std::int64_t T) const {
  check_device(loc, what.c_str());
  if (loc.ndim() != 1 || loc.size(0) != T)
    raise("ValueError", what + " has " + std::to_string(loc.numel()) + " entries for " +
                            std::to_string(T) + " tokens");
  if (!is(loc.dtype(), kDLInt, 64) || !contiguous(loc))
    raise("TypeError", what + " must be a contiguous int64 tensor, got " + dl_name(loc.dtype()));
}

void State::materialize_pool(const ffi::TensorView& hidden_t, const ffi::TensorView& pos,
                             const ffi::TensorView& loc, std::int64_t pool_id,
                             const ffi::Array<ffi::Tensor>& slot_maps) {
  const fkv::MaterializerInput in = input(hidden_t, pos);
  check_slots(loc, "cache_loc", in.num_tokens);
  std::vector<const void*> maps;
  if (slot_maps.size() != 0) {
    if (!opt.paged)
      raise("ValueError", "per-layer slot mappings need a helper constructed with paged=True");
    if (slot_maps.size() != layer_width.size())
      raise("ValueError", "slot_mappings takes one [T] tensor per attention layer (" +
                              std::to_string(layer_width.size()) + "), got " +
                              std::to_string(slot_maps.size()));
    for (std::size_t i = 0; i < slot_maps.size(); ++i) {
      const ffi::TensorView t(slot_maps[i]);
      check_slots(t, "slot_mappings[" + std::to_string(i) + "]", in.num_tokens);
      maps.push_back(data(t));
    }
  }
  if (pool_id < 0 || static_cast<std::size_t>(pool_id) >= pools.size())
    raise("ValueError", "unknown pool binding " + std::to_string(pool_id));
  const BoundPool& p = pools[static_cast<std::size_t>(pool_id)];
  fkv::KVLayout out = p.layout;
  out.cache_loc = data(loc);
  out.k_buffers = p.k;
  out.v_buffers = p.v;
  out.k_scales = p.k_scales;
  out.v_scales = p.v_scales;
  out.slot_mappings = maps;
  m->materialize_pool(in, out, stream());
}

}  // namespace fkv_native
