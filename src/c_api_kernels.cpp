// c_api_kernels: the C API's precompilation, kernels and launches (include/fkv/fkv.h; shared
// helpers in c_api_internal.hpp), and the precompile entry points of programs built against the
// first fkv.h.
#include <algorithm>
#include <cstddef>
#include <span>
#include <string>

#include "c_api_internal.hpp"
#include "fkv/errors.hpp"
#include "fkv/fkv.h"
#include "fkv/materialize.hpp"
#include "fkv/precompile.hpp"
#include "fkv/runtime.hpp"
#include "fkv/spec.hpp"

struct fkv_kernel {
  const fkv::LoadedKernel* kernel = nullptr;
  std::string name;
  std::string outcome;
  std::string arch;
};

using namespace fkv::c_api;

namespace {

fkv_precompile_options precompile_defaults() {
  fkv_precompile_options o{};
  o.struct_size = sizeof(o);
  return o;
}

fkv_precompile_options read_precompile_options(const fkv_precompile_options& from) {
  check_struct_size(from, "fkv_precompile_options", "fkv_precompile_options_init");
  if (from.struct_size < offsetof(fkv_precompile_options, arch) + sizeof(from.arch))
    throw fkv::ArgumentError("fkv_precompile_options.struct_size is " +
                             std::to_string(from.struct_size) +
                             ": too small to hold arch, which is required");
  fkv_precompile_options o = precompile_defaults();
  FKV_TAKE(o, from, arch);
  FKV_TAKE(o, from, act_dtype);
  FKV_TAKE(o, from, kv_dtype);
  FKV_TAKE(o, from, cos_sin_dtype);
  FKV_TAKE(o, from, index_dtype);
  FKV_TAKE(o, from, modes);
  FKV_TAKE(o, from, cache_dir);
  FKV_TAKE(o, from, strict);
  FKV_TAKE(o, from, jobs);
  FKV_TAKE(o, from, decode_gpu);
  FKV_TAKE(o, from, weights);
  return o;
}

fkv::KernelSpec to_spec(const fkv_kernel_desc& d) {
  fkv::KernelSpec s;
  s.num_kv_heads = d.num_kv_heads;
  s.head_dim = d.head_dim;
  s.rotary_dim = d.rotary_dim;
  s.neox = d.neox != 0;
  s.k_norm = fkv::kernel_k_norm(fkv::k_norm_from_int(d.k_norm));  // RMS_ONE_PLUS: RMS, folded
  s.act = to_cpp(d.act);
  s.cache = to_cpp(d.cache);
  s.cos_sin = to_cpp(d.cos_sin);
  s.positions = d.positions_i64 ? fkv::IndexType::I64 : fkv::IndexType::I32;
  s.slots = d.slots_i64 ? fkv::IndexType::I64 : fkv::IndexType::I32;
  s.mode = d.mode_pool ? fkv::OutputMode::Pool : fkv::OutputMode::Stacked;
  s.debug_checks = d.debug != 0;
  s.check();
  return s;
}

fkv::FusedKVInputs to_inputs(const fkv_inputs& in) {
  fkv::FusedKVInputs r;
  r.proj = in.proj;
  r.num_tokens = in.num_tokens;
  r.num_layers = in.num_layers;
  r.proj_stride_token = in.proj_stride_token;
  r.proj_stride_layer = in.proj_stride_layer;
  r.positions = in.positions;
  r.cos_sin = in.cos_sin;
  r.max_position = in.max_position;
  r.cos_sin_stride = in.cos_sin_stride;
  r.k_norm_weight = in.k_norm_weight;
  if (in.eps != nullptr && in.num_layers > 0)
    r.eps = std::span<const float>(in.eps, static_cast<std::size_t>(in.num_layers));
  r.error_flag = in.error_flag;
  return r;
}

}  // namespace

extern "C" {

// ---- precompilation --------------------------------------------------------------------------

void fkv_precompile_options_init_v2(fkv_precompile_options* options, size_t struct_size) {
  init_sized(options, struct_size, precompile_defaults());
}

fkv_status fkv_precompile_with_options_v2(const fkv_config* config,
                                          const fkv_precompile_options* given,
                                          fkv_precompile_result* result) {
  return guard([&] {
    require(config, "config");
    require(given, "options");
    const fkv_precompile_options read = read_precompile_options(*given);
    require(read.arch, "arch");
    auto name = [](const char* s) { return std::string(s ? s : ""); };  // NULL: the default
    fkv::ConfigPrecompile request;
    request.arch = read.arch;
    request.act_dtype = name(read.act_dtype);
    request.kv_dtype = name(read.kv_dtype);
    request.cos_sin_dtype = name(read.cos_sin_dtype);
    request.index_dtype = name(read.index_dtype);
    request.modes = name(read.modes);
    request.cache_dir = name(read.cache_dir);
    request.strict = read.strict != 0;
    request.jobs = read.jobs;
    request.decode_gpu = name(read.decode_gpu);
    request.weights = name(read.weights);
    auto counts = [&](const fkv::PrecompileResult& r) {
      if (result) *result = {r.kernels.size(), r.compiled(), r.not_persisted()};
    };
    try {
      counts(fkv::precompile_config(config->config, request));
    } catch (const fkv::PrecompileCacheError& e) {
      counts(e.result);  // fkv.h: FKV_ERR_CACHE comes with the counts
      throw;
    }
    return FKV_OK;
  });
}

fkv_status fkv_precompile(const fkv_config* config, const char* arch, const char* act_dtype,
                          const char* kv_dtype, const char* cache_dir, size_t* n_variants,
                          size_t* n_compiled) {
  fkv_precompile_options o;
  fkv_precompile_options_init(&o);
  o.arch = arch;
  o.act_dtype = act_dtype;
  o.kv_dtype = kv_dtype;
  o.cache_dir = cache_dir;
  fkv_precompile_result r{};
  const fkv_status status = fkv_precompile_with_options(config, &o, &r);
  if (n_variants) *n_variants = r.n_variants;
  if (n_compiled) *n_compiled = r.n_compiled;
  return status;
}

// ---- kernels and launches --------------------------------------------------------------------

fkv_status fkv_kernel_prepare(const fkv_kernel_desc* desc, int device, fkv_kernel** out) {
  return guard([&] {
    require(desc, "desc");
    require(out, "out");
    *out = nullptr;
    const fkv::KernelSpec spec = to_spec(*desc);
    const fkv::LoadedKernel& k = fkv::Runtime::global().prepare(spec, device);
    *out = new fkv_kernel{&k, spec.short_name(), fkv::to_string(k.outcome), k.arch.name()};
    return FKV_OK;
  });
}

void fkv_kernel_free(fkv_kernel* kernel) { delete kernel; }

const char* fkv_kernel_name(const fkv_kernel* kernel) { return kernel ? kernel->name.c_str() : ""; }
const char* fkv_kernel_outcome(const fkv_kernel* kernel) {
  return kernel ? kernel->outcome.c_str() : "";
}
const char* fkv_kernel_arch(const fkv_kernel* kernel) { return kernel ? kernel->arch.c_str() : ""; }

fkv_status fkv_materialize_stacked(const fkv_kernel* kernel, const fkv_inputs* in, void* k_out,
                                   void* v_out, void* stream) {
  return guard([&] {
    require(kernel, "kernel");
    require(in, "inputs");
    fkv::materialize_stacked(*kernel->kernel, to_inputs(*in), fkv::StackedOutput{k_out, v_out},
                             static_cast<CUstream>(stream));
    return FKV_OK;
  });
}

fkv_status fkv_materialize_pool(const fkv_kernel* kernel, const fkv_inputs* in,
                                const void* cache_loc, void* const* k_ptrs, void* const* v_ptrs,
                                int64_t num_slots, int64_t slot_stride, const float* k_scales,
                                const float* v_scales, void* stream) {
  return guard([&] {
    require(kernel, "kernel");
    require(in, "inputs");
    require(k_ptrs, "k_ptrs");
    require(v_ptrs, "v_ptrs");
    const auto L = static_cast<std::size_t>(std::max<int64_t>(in->num_layers, 0));
    fkv::PoolOutput out;
    out.cache_loc = cache_loc;
    out.k_buffers = std::span<void* const>(k_ptrs, L);
    out.v_buffers = std::span<void* const>(v_ptrs, L);
    out.num_slots = num_slots;
    out.slot_stride = slot_stride;
    if (k_scales) out.k_scales = std::span<const float>(k_scales, L);
    if (v_scales) out.v_scales = std::span<const float>(v_scales, L);
    fkv::materialize_pool(*kernel->kernel, to_inputs(*in), out, static_cast<CUstream>(stream));
    return FKV_OK;
  });
}

// ---- entry points of programs built before struct_size -------------------------------------
// fkv.h maps these names to the *_v2 functions with macros; programs compiled against the
// first fkv.h call the symbols themselves, with the first layout (no struct_size, no
// decode_gpu). They read and write exactly that layout. (The materializer's: in
// c_api_materializer.cpp.)

#undef fkv_precompile_options_init
#undef fkv_precompile_with_options

struct fkv_precompile_options_v1 {
  const char* arch;
  const char* act_dtype;
  const char* kv_dtype;
  const char* cos_sin_dtype;
  const char* index_dtype;
  const char* modes;
  const char* cache_dir;
  int strict;
  int jobs;
};

FKV_API void fkv_precompile_options_init(fkv_precompile_options_v1* options);
FKV_API fkv_status fkv_precompile_with_options(const fkv_config* config,
                                               const fkv_precompile_options_v1* options,
                                               fkv_precompile_result* result);

void fkv_precompile_options_init(fkv_precompile_options_v1* options) {
  if (options) *options = fkv_precompile_options_v1{};
}

fkv_status fkv_precompile_with_options(const fkv_config* config,
                                       const fkv_precompile_options_v1* v1,
                                       fkv_precompile_result* result) {
  if (v1 == nullptr) return fkv_precompile_with_options_v2(config, nullptr, result);
  fkv_precompile_options o = precompile_defaults();
  o.arch = v1->arch;
  o.act_dtype = v1->act_dtype;
  o.kv_dtype = v1->kv_dtype;
  o.cos_sin_dtype = v1->cos_sin_dtype;
  o.index_dtype = v1->index_dtype;
  o.modes = v1->modes;
  o.cache_dir = v1->cache_dir;
  o.strict = v1->strict;
  o.jobs = v1->jobs;
  return fkv_precompile_with_options_v2(config, &o, result);
}

}  // extern "C"
