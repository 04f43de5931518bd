// native_materializer: fkv_jit.FusedKVMaterializeHelper's native half. materializer_create
// builds one fkv::FusedKVMaterializer from a Plan object (native_config.hpp: the config parsed
// once, the rank's plan) and returns a map of closures over its State (native_materializer.hpp),
// which fkv_jit/materializer.py calls; the stacked output, cos/sin tables and the device error
// flag are here, the KV pools in native_pool.cpp, the weights in native_weights.cpp.
#include "native_materializer.hpp"

#include <cuda.h>
#include <dlpack/dlpack.h>
#include <tvm/ffi/container/map.h>
#include <tvm/ffi/function.h>

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "fkv/driver.hpp"
#include "native_config.hpp"

namespace fkv_native {

fkv::MaterializerInput State::input(const ffi::TensorView& hidden_t,
                                    const ffi::TensorView& pos) const {
  check_device(hidden_t, "ctx_hidden");
  check_device(pos, "positions");
  if (hidden_t.ndim() != 2 || hidden_t.size(1) != hidden || hidden_t.stride(1) != 1)
    raise("ValueError",
          "ctx_hidden must be [num_tokens, " + std::to_string(hidden) + "] with contiguous rows");
  if (!matches(hidden_t.dtype(), opt.act))
    raise("TypeError", "ctx_hidden dtype " + dl_name(hidden_t.dtype()) +
                           " differs from the helper's activation dtype " +
                           fkv::to_string(opt.act));
  const std::int64_t T = hidden_t.size(0);
  if (pos.ndim() != 1 || pos.size(0) != T)
    raise("ValueError",
          "positions must match ctx_hidden token count for fused KV materialization: positions=" +
              std::to_string(pos.numel()) + ", total_ctx=" + std::to_string(T) + ".");
  if (!is(pos.dtype(), kDLInt, 64) || !contiguous(pos))
    raise("TypeError", "positions must be a contiguous int64 tensor, got " + dl_name(pos.dtype()));
  fkv::MaterializerInput in;
  in.hidden = data(hidden_t);
  in.num_tokens = T;
  in.hidden_stride = T > 1 ? hidden_t.stride(0) : hidden;
  in.positions = data(pos);
  return in;
}

void State::materialize_stacked(const ffi::TensorView& hidden_t, const ffi::TensorView& pos,
                                const ffi::TensorView& out) {
  const fkv::MaterializerInput in = input(hidden_t, pos);
  check_device(out, "out");
  if (!matches(out.dtype(), opt.act) || !contiguous(out) ||
      out.numel() != in.num_tokens * stacked_elems)
    raise("ValueError", "out must be a contiguous " + fkv::to_string(opt.act) + " tensor of " +
                            std::to_string(in.num_tokens * stacked_elems) + " elements");
  std::vector<void*> k, v;
  char* base = static_cast<char*>(data(out));
  const std::int64_t es = fkv::dtype_size(opt.act);
  for (std::int64_t g : group_elems) {
    k.push_back(base);
    v.push_back(base + g * in.num_tokens * es);
    base += 2 * g * in.num_tokens * es;
  }
  m->materialize_stacked(in, k, v, stream());
}

void State::set_cos_sin(std::int64_t group, const ffi::TensorView& t) {
  check_device(t, "cos_sin_cache");
  if (group < 0 || static_cast<std::size_t>(group) >= group_rotary.size())
    raise("ValueError", "group " + std::to_string(group) + " is out of range");
  const int R = group_rotary[static_cast<std::size_t>(group)];
  if (!matches(t.dtype(), opt.cos_sin))
    raise("TypeError", "cos_sin_cache is " + dl_name(t.dtype()) + "; the helper reads " +
                           fkv::to_string(opt.cos_sin));
  if (t.ndim() != 2 || t.size(1) != R || t.stride(1) != 1)
    raise("ValueError", "cos_sin_cache must be [max_position, rotary_dim=" + std::to_string(R) +
                            "] with a contiguous last dim, got " + std::to_string(t.ndim()) +
                            " dims");
  fkv::ensure_context(opt.device);
  m->set_cos_sin(static_cast<std::size_t>(group), data(t), t.size(0),
                 t.size(0) > 1 ? t.stride(0) : R);
}

std::int64_t State::read_errors(bool reset) {
  unsigned int word = 0;
  fkv::Driver& d = fkv::Driver::get();
  fkv::ensure_context(opt.device);
  if (d.cuMemcpyDtoH(&word, m->error_flag(), sizeof word) != CUDA_SUCCESS)
    raise("CudaError", "reading the device error flag failed");
  if (reset) {
    const unsigned int zero = 0;
    if (d.cuMemcpyHtoD(m->error_flag(), &zero, sizeof zero) != CUDA_SUCCESS)
      raise("CudaError", "resetting the device error flag failed");
  }
  return word;
}

namespace {

using json = nlohmann::json;

// A tensor viewing device memory the materializer owns; it keeps the materializer alive.
struct BorrowedAlloc {
  std::shared_ptr<State> owner;
  void* ptr = nullptr;
  void AllocData(DLTensor* t) { t->data = ptr; }
  void FreeData(DLTensor*) {}
};

ffi::Tensor borrowed(const std::shared_ptr<State>& st, CUdeviceptr ptr,
                     std::vector<std::int64_t> shape, DLDataType dtype) {
  return ffi::Tensor::FromNDAlloc(
      BorrowedAlloc{st, reinterpret_cast<void*>(static_cast<std::uintptr_t>(ptr))},
      ffi::ShapeView(shape.data(), shape.size()), dtype, DLDevice{kDLCUDA, st->opt.device});
}

// Returns a map of closures over one fkv::FusedKVMaterializer (see fkv_jit/materializer.py),
// built for `rank_plan`: its config, strict or grouped, its tensor-parallel rank. w_scale: per
// attention layer, the fp32 device scales of quantized W_kv (options' "weight_format"); empty
// for dense weights.
ffi::Map<ffi::String, ffi::Any> materializer_create(PlanRef rank_plan, ffi::String options_json,
                                                    ffi::Array<ffi::Tensor> w_kv,
                                                    ffi::Array<ffi::Tensor> k_norm,
                                                    ffi::Array<ffi::Tensor> kv_bias,
                                                    ffi::Array<double> eps,
                                                    ffi::Array<ffi::Tensor> w_scale) {
  return guarded([&] {
    const json o = json::parse(std::string(options_json));
    auto st = std::make_shared<State>();
    const fkv::ModelConfig& config = rank_plan->config->config;
    st->opt.mode = rank_plan->grouped ? fkv::ValidationMode::Grouped : fkv::ValidationMode::Strict;
    st->opt.tp_size = rank_plan->plan.tp_size;
    st->opt.tp_rank = rank_plan->plan.tp_rank;
    st->opt.act = fkv::parse_dtype(o.at("act"));
    st->opt.cache = fkv::parse_dtype(o.at("cache"));
    st->opt.index = fkv::IndexType::I64;
    st->opt.max_tokens = json_int<std::int64_t>(o, "max_tokens", 0, true);
    st->opt.max_position = json_int<std::int64_t>(o, "max_position", 0, true);
    st->opt.device = json_int<int>(o, "device", 0, true);
    st->opt.debug_checks = o.at("debug").get<bool>();
    st->opt.stacked = o.at("stacked").get<bool>();
    st->opt.pool = o.at("pool").get<bool>();
    st->opt.paged = o.value("paged", false);
    st->opt.decode_crossover = json_int<std::int64_t>(o, "decode_crossover", -1);
    st->opt.fp8_gemm = o.value("fp8_gemm", true);
    st->opt.int8_gemm_tokens = json_int<std::int64_t>(o, "int8_gemm_tokens", 512);
    st->opt.external_cos_sin = o.value("external_cos_sin", false);
    st->opt.cos_sin = fkv::parse_dtype(o.value("cos_sin", std::string("fp32")));
    st->hidden = json_int<std::int64_t>(o, "hidden", 0, true);
    st->format = fkv::parse_weight_format(o.value("weight_format", std::string("dense")));
    fkv::ensure_context(st->opt.device);
    const fkv::MaterializerWeights w =
        materializer_weights(st->weight_target(), w_kv, k_norm, kv_bias, eps, w_scale);
    // The materializer makes the same plan from the same config and options (no file read).
    st->m = std::make_unique<fkv::FusedKVMaterializer>(config, st->hidden, w, st->opt);
    const fkv::Plan& plan = st->m->plan();
    std::vector<std::int64_t> width_of_layer(config.layers.size(), 0);
    for (const fkv::LayerGroup& g : plan.groups) {
      const std::int64_t hd = std::int64_t{g.attn.num_kv_heads} * g.attn.head_dim;
      st->scale_count += fkv::layer_scale_count(st->format, 2 * hd, st->hidden) *
                         static_cast<std::int64_t>(g.layers.size());
      for (int l : g.layers) width_of_layer[static_cast<std::size_t>(l)] = hd;
      st->group_elems.push_back(hd * static_cast<std::int64_t>(g.layers.size()));
      st->stacked_elems += 2 * st->group_elems.back();
    }
    for (int l : st->m->layers())
      st->layer_width.push_back(width_of_layer[static_cast<std::size_t>(l)]);
    for (const fkv::LayerGroup& g : plan.groups) {
      st->group_rotary.push_back(g.attn.rotary_dim);
      st->group_norm.push_back(
          fkv::k_norm_weighted(g.attn.k_norm)
              ? std::vector<std::int64_t>{static_cast<std::int64_t>(g.layers.size()),
                                          g.attn.head_dim}
              : std::vector<std::int64_t>{});
    }

    ffi::Map<ffi::String, ffi::Any> fns;
    fns.Set("bind_pool",
            ffi::Function::FromTyped([st](ffi::Array<ffi::Tensor> k, ffi::Array<ffi::Tensor> v,
                                          ffi::Array<double> ks, ffi::Array<double> vs,
                                          ffi::Array<ffi::Tensor> scales_device) {
              return guarded([&] { return st->bind_pool(k, v, ks, vs, scales_device); });
            }));
    fns.Set("bind_layout",
            ffi::Function::FromTyped([st](ffi::String kind, ffi::Tensor pool, ffi::String fields,
                                          ffi::Array<double> ks, ffi::Array<double> vs,
                                          ffi::Array<ffi::Tensor> scales_device) {
              return guarded([&] {
                return st->bind_layout(std::string(kind), pool, std::string(fields), ks, vs,
                                       scales_device);
              });
            }));
    fns.Set("materialize_pool",
            ffi::Function::FromTyped([st](ffi::TensorView h, ffi::TensorView p, ffi::TensorView loc,
                                          int64_t id, ffi::Array<ffi::Tensor> maps) {
              guarded([&] { st->materialize_pool(h, p, loc, id, maps); });
            }));
    // In place: the packed weights and scales, K-norm weights and biases keep their addresses.
    fns.Set(
        "refresh_weights",
        ffi::Function::FromTyped([st](ffi::Array<ffi::Tensor> w_kv, ffi::Array<ffi::Tensor> k_norm,
                                      ffi::Array<ffi::Tensor> kv_bias, ffi::Array<double> eps,
                                      ffi::Array<ffi::Tensor> w_scale) {
          guarded([&] {
            fkv::ensure_context(st->opt.device);
            st->m->refresh_weights(
                materializer_weights(st->weight_target(), w_kv, k_norm, kv_bias, eps, w_scale),
                st->stream());
          });
        }));
    fns.Set("reserve_tokens", ffi::Function::FromTyped([st](int64_t n) {
              guarded([&] { st->m->reserve_tokens(n); });
              return st->m->max_tokens();
            }));
    fns.Set("set_cos_sin", ffi::Function::FromTyped([st](int64_t group, ffi::TensorView t) {
              guarded([&] { st->set_cos_sin(group, t); });
            }));
    fns.Set("packed_weights", ffi::Function::FromTyped([st]() {
              return guarded([&] {
                return borrowed(st, st->m->packed_weights(),
                                {st->m->projection_width(), st->hidden},
                                stored_dtype(st->weight_target()));
              });
            }));
    // Quantized weights: every layer's scales, groups in plan order ([0] for dense weights).
    fns.Set("packed_weight_scales", ffi::Function::FromTyped([st]() {
              return guarded([&] {
                return borrowed(st, st->m->packed_weight_scales(), {st->scale_count},
                                DLDataType{kDLFloat, 32, 1});
              });
            }));
    fns.Set("k_norm_weights", ffi::Function::FromTyped([st](int64_t group) {
              return guarded([&] {
                if (group < 0 || static_cast<std::size_t>(group) >= st->group_norm.size() ||
                    st->group_norm[static_cast<std::size_t>(group)].empty())
                  raise("ValueError", "group " + std::to_string(group) + " has no K-norm weights");
                return borrowed(st, st->m->k_norm_weights(static_cast<std::size_t>(group)),
                                st->group_norm[static_cast<std::size_t>(group)],
                                DLDataType{kDLFloat, 32, 1});
              });
            }));
    fns.Set(
        "materialize_stacked",
        ffi::Function::FromTyped([st](ffi::TensorView h, ffi::TensorView p, ffi::TensorView out) {
          guarded([&] { st->materialize_stacked(h, p, out); });
        }));
    fns.Set("read_errors", ffi::Function::FromTyped([st](bool reset) {
              return guarded([&] { return st->read_errors(reset); });
            }));
    fns.Set("projection_width", st->m->projection_width());
    fns.Set("decode_crossover", st->m->decode_crossover());
    fns.Set("fp8_gemm", st->m->fp8_gemm());
    fns.Set("int8_gemm_tokens", st->m->int8_gemm_tokens());
    fns.Set("weight_format", ffi::String(fkv::to_string(st->format)));
    return fns;
  });
}

}  // namespace
}  // namespace fkv_native

TVM_FFI_DLL_EXPORT_TYPED_FUNC(materializer_create, fkv_native::materializer_create)
