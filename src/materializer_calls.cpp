// materializer_calls: FusedKVMaterializer's calls (materialize_stacked, materialize_pool, any
// KVLayout, the error word): the decode-size kernel for small calls where the layout allows it,
// else the projection GEMM then the epilogue kernel of each group (materializer_impl.hpp).
#include "fkv/fused_kv_materializer.hpp"
#include "fkv/kv_layout.hpp"
#include "materializer_impl.hpp"

namespace fkv {

unsigned int FusedKVMaterializer::take_error_flag(CUstream stream) {
  FKV_CU(cuStreamSynchronize, stream);
  unsigned int value = 0;
  FKV_CU(cuMemcpyDtoH, &value, impl_->error_word.get(), sizeof value);
  if (value != 0)
    FKV_CU(cuMemsetD8Async, impl_->error_word.get(), 0, sizeof value, stream);  // in stream order
  return value;
}

void FusedKVMaterializer::materialize_stacked(const MaterializerInput& in,
                                              std::span<void* const> k_out,
                                              std::span<void* const> v_out, CUstream stream) {
  Impl& m = *impl_;
  if (!m.opt.stacked) fail("constructed with stacked = false: no stacked kernels were prepared");
  if (k_out.size() != m.groups.size() || v_out.size() != m.groups.size())
    fail("stacked output takes one k_out and one v_out per group: the plan has " +
         std::to_string(m.groups.size()) + ", got " + std::to_string(k_out.size()) + " and " +
         std::to_string(v_out.size()));
  if (!m.check_call(in)) return;
  if (m.decode_call(in)) {
    m.decode->run_stacked(m.decode_input(in), k_out[0], v_out[0], stream);
    return;
  }
  m.project(in, stream);
  for (std::size_t g = 0; g < m.groups.size(); ++g)
    fkv::materialize_stacked(*m.groups[g].stacked, m.inputs(m.groups[g], in),
                             StackedOutput{k_out[g], v_out[g]}, stream);
}

void FusedKVMaterializer::materialize_pool(const MaterializerInput& in, const Pool& pool,
                                           CUstream stream) {
  Impl& m = *impl_;
  if (!m.opt.pool) fail("constructed with pool = false: no pool kernels were prepared");
  // The layout is checked over every attention layer with each group's heads (per-call checks
  // of counts, pointers, strides and overlap; no allocation).
  KVGeometry geo;
  geo.num_layers = static_cast<std::int64_t>(m.layers.size());
  geo.cache = m.opt.cache;
  geo.slots = m.opt.index;
  KVAddressing a;
  for (const Impl::Group& g : m.groups) {
    geo.num_kv_heads = g.plan_group->attn.num_kv_heads;
    geo.head_dim = g.plan_group->attn.head_dim;
    if (pool.kind == KVLayoutKind::TokenMajor && g.width != m.groups.front().width &&
        (pool.layer_stride == 0 || pool.kv_offset == 0 || pool.slot_stride == 0))
      fail(
          "token_major layout: the plan's groups differ in 2*H*D, so give layer_stride, "
          "kv_offset and slot_stride explicitly");
    try {
      a = resolve_kv_layout(pool, geo);
    } catch (const ArgumentError& e) {
      fail(e.what());
    }
    if (a.paged && !m.opt.paged)
      fail(to_string(pool.kind) +
           " layout: block_size, block_stride, a head_stride other than D and slot_mappings need "
           "the paged kernels: construct with MaterializerOptions::paged = true");
  }
  if (pool.k_scales_device || pool.v_scales_device)
    for (const Impl::Group& g : m.groups)
      if (!g.adjacent)
        fail(
            "device k/v scales index the attention layers in order, but a group of this grouped "
            "plan has non-adjacent layers; pass host scales, or use a strict plan");
  if (!m.check_call(in)) return;
  if (m.decode_call(in) && !a.paged && pool.k_scales_device == nullptr &&
      pool.v_scales_device == nullptr) {
    m.decode->run_pool(m.decode_input(in), pool, stream);
    return;
  }
  // The epilogue kernels write `vec` elements at once: the layout must keep that alignment
  // for every group, checked before anything is launched (a refusal after the projection, or
  // after an earlier group's writes, would leave the pool half written).
  for (Impl::Group& g : m.groups) {
    geo.num_kv_heads = g.plan_group->attn.num_kv_heads;
    geo.head_dim = g.plan_group->attn.head_dim;
    geo.vec = g.pool->tiling.vec;
    try {
      g.addressing = resolve_kv_layout(pool, geo);
    } catch (const ArgumentError& e) {
      fail(e.what());
    }
  }
  m.project(in, stream);
  for (Impl::Group& g : m.groups) {
    geo.num_kv_heads = g.plan_group->attn.num_kv_heads;
    geo.head_dim = g.plan_group->attn.head_dim;
    geo.vec = g.pool->tiling.vec;
    for (std::size_t j = 0; j < g.members.size(); ++j) {
      const std::size_t i = g.members[j];
      g.k_ptrs[j] = kv_layer_buffer(pool, geo, static_cast<std::int64_t>(i), false);
      g.v_ptrs[j] = kv_layer_buffer(pool, geo, static_cast<std::int64_t>(i), true);
      if (!pool.k_scales.empty()) g.k_scales[j] = pool.k_scales[i];
      if (!pool.v_scales.empty()) g.v_scales[j] = pool.v_scales[i];
      if (!pool.slot_mappings.empty()) g.slot_maps[j] = pool.slot_mappings[i];
    }
    PoolOutput out = per_layer_view(pool, g.addressing, g.k_ptrs, g.v_ptrs);
    out.k_scales = pool.k_scales.empty() ? std::span<const float>{} : g.k_scales;
    out.v_scales = pool.v_scales.empty() ? std::span<const float>{} : g.v_scales;
    const std::size_t first = g.members.empty() ? 0 : g.members[0];
    if (pool.k_scales_device) out.k_scales_device = pool.k_scales_device + first;
    if (pool.v_scales_device) out.v_scales_device = pool.v_scales_device + first;
    out.slot_mappings = pool.slot_mappings.empty() ? std::span<const void* const>{} : g.slot_maps;
    fkv::materialize_pool(*g.pool, m.inputs(g, in), out, stream);
  }
}

void FusedKVMaterializer::materialize(const MaterializerInput& in, const KVLayout& out,
                                      CUstream stream) {
  if (out.kind == KVLayoutKind::Stacked)
    materialize_stacked(in, out.k_buffers, out.v_buffers, stream);
  else
    materialize_pool(in, out, stream);
}

}  // namespace fkv
