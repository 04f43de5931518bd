// native_materializer: the state behind one fkv_jit.FusedKVMaterializeHelper: a
// fkv::FusedKVMaterializer built from a Config object (native_config.hpp), what the binding's
// checks need of its plan, and the KV pools bound to it. materializer_create
// (native_materializer.cpp) hands fkv_jit a map of closures over one State; the pool half of
// it is native_pool.cpp.
#pragma once

#include <cuda.h>
#include <tvm/ffi/container/array.h>
#include <tvm/ffi/container/tensor.h>
#include <tvm/ffi/extra/c_env_api.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "fkv/fused_kv_materializer.hpp"
#include "fkv/kv_layout.hpp"
#include "fkv/weights.hpp"
#include "native.hpp"

namespace fkv_native {

// The pool buffers of one bind_pool() call, checked once, by pointer.
struct BoundPool {
  // The bound layout, every field but the per-call ones (cache_loc, slot_mappings); its spans
  // are set from the vectors below at each call (pools moves when it grows).
  fkv::KVLayout layout;
  std::vector<void*> k, v;  // per-layer kinds: the layers' K and V buffers
  std::vector<float> k_scales, v_scales;
};

struct State {
  std::unique_ptr<fkv::FusedKVMaterializer> m;
  fkv::MaterializerOptions opt;
  std::int64_t hidden = 0;
  std::vector<std::int64_t> layer_width;  // H*D per attention layer (layers() order)
  std::vector<std::int64_t> group_elems;  // per group: L_g * H_g * D_g (per token, K or V)
  std::int64_t stacked_elems = 0;         // per token, K and V of every group
  std::vector<int> group_rotary;          // rotary_dim per group
  std::vector<std::vector<std::int64_t>> group_norm;  // [L_g, D_g] per group; empty: no K norm
  std::vector<BoundPool> pools;
  std::mutex mutex;  // bind_pool only; calls are one stream at a time by contract

  fkv::WeightFormat format = fkv::WeightFormat::Dense;  // how W_kv is stored
  std::int64_t scale_count = 0;                         // packed W_kv scales (quantized)

  void check_device(const ffi::TensorView& t, const char* what) const {
    fkv_native::check_device(t, opt.device, what);
  }
  WeightTarget weight_target() const { return {opt.device, opt.act, hidden, format}; }
  // torch's current stream on the helper's device, which tvm-ffi publishes for the call.
  CUstream stream() const { return static_cast<CUstream>(TVMFFIEnvGetStream(kDLCUDA, opt.device)); }

  // native_materializer.cpp
  // hidden [T, hidden] act with contiguous rows; positions [T] int64, contiguous.
  fkv::MaterializerInput input(const ffi::TensorView& hidden_t, const ffi::TensorView& pos) const;
  // out: contiguous, act dtype, T * stacked_elems elements: per group g, K [L_g, T, H_g, D_g]
  // then V of the same shape.
  void materialize_stacked(const ffi::TensorView& hidden_t, const ffi::TensorView& pos,
                           const ffi::TensorView& out);
  // The caller's cos/sin table for `group` ([rows, R] in the cos/sin dtype, contiguous last
  // dim), not copied: fkv_jit keeps the tensor alive.
  void set_cos_sin(std::int64_t group, const ffi::TensorView& t);
  // The device error bits so far; reset: cleared.
  std::int64_t read_errors(bool reset);

  // native_pool.cpp
  // Flat pools: [num_slots, H, D] or [num_slots, H*D] with contiguous rows. Paged pools
  // (opt.paged): [num_blocks, block_size, H, D] views with a contiguous last dim, any other
  // strides (vLLM's kv_cache[0], FlashInfer's kv[:, 0], HND layouts through .transpose(1, 2)):
  // block, slot and head strides are read from the tensor. ks / vs: per-layer fp8 scales, or
  // empty; scales_device: empty or [k, v] fp32 [L] device tensors, read at run time. Returns
  // the binding's id for materialize_pool.
  std::int64_t bind_pool(const ffi::Array<ffi::Tensor>& k, const ffi::Array<ffi::Tensor>& v,
                         const ffi::Array<double>& ks, const ffi::Array<double>& vs,
                         const ffi::Array<ffi::Tensor>& scales_device);
  // A pool of another fkv::KVLayout kind ("token_major": `pool` is one contiguous tensor of the
  // cache dtype holding every layer's K and V of a slot per row), its integer fields by name
  // (a JSON object of integers, fkv::set_kv_layout_field; num_slots defaults to pool.size(0));
  // checked once against the tensor's size (fkv::kv_layout_extent). Scales as bind_pool. Returns
  // the binding's id.
  std::int64_t bind_layout(const std::string& kind, const ffi::Tensor& pool,
                           const std::string& fields_json, const ffi::Array<double>& ks,
                           const ffi::Array<double>& vs,
                           const ffi::Array<ffi::Tensor>& scales_device);
  // slot_maps: empty, or one [T] int64 tensor per attention layer (paged pools only).
  void materialize_pool(const ffi::TensorView& hidden_t, const ffi::TensorView& pos,
                        const ffi::TensorView& loc, std::int64_t pool_id,
                        const ffi::Array<ffi::Tensor>& slot_maps);

 private:
  void bind_scales(BoundPool& p, const ffi::Array<double>& ks, const ffi::Array<double>& vs,
                   const ffi::Array<ffi::Tensor>& scales_device) const;
  void check_slots(const ffi::TensorView& loc, const std::string& what, std::int64_t T) const;
  void bind_flat(BoundPool& p, const ffi::TensorView& tv, const std::string& what, std::size_t i,
                 bool first) const;
  void bind_paged(BoundPool& p, const ffi::TensorView& tv, const std::string& what, std::size_t i,
                  bool first) const;
};

}  // namespace fkv_native
