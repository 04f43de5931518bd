// fkv_jit._native: the Python binding of fkv-jit, built on apache-tvm-ffi's C ABI.
//
// Functions are exported with TVM_FFI_DLL_EXPORT_TYPED_FUNC and loaded by fkv_jit with
// tvm_ffi.load_module(). Tensors arrive as DLPack views (torch tensors through tvm-ffi's DLPack
// exchange, so no torch version is compiled in); the CUDA stream is torch's current stream, which
// tvm-ffi publishes for the call (TVMFFIEnvGetStream). No Python header is used, so one build
// serves every CPython version.
//
// Configs, plans and precompilation go through the C API (include/fkv/fkv.h), the materializer
// through the C++ fkv::FusedKVMaterializer: one implementation of each. Structured values cross
// as JSON text; each error crosses as a tvm-ffi error whose kind names the fkv error class,
// which fkv_jit maps to its Python exception types.
#include <cuda.h>
#include <dlpack/dlpack.h>
#include <tvm/ffi/container/array.h>
#include <tvm/ffi/container/map.h>
#include <tvm/ffi/container/tensor.h>
#include <tvm/ffi/error.h>
#include <tvm/ffi/extra/c_env_api.h>
#include <tvm/ffi/function.h>
#include <tvm/ffi/string.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "fkv/config.hpp"
#include "fkv/driver.hpp"
#include "fkv/errors.hpp"
#include "fkv/fkv.h"
#include "fkv/fused_kv_materializer.hpp"
#include "fkv/seed_texts.hpp"
#include "fkv/spec.hpp"
#include "fkv/validate.hpp"
#include "fkv/version.hpp"
#include "native.hpp"
#include "nvrtc_loader.hpp"

namespace {

using namespace fkv_native;
using json = nlohmann::json;

// ---- arguments ---------------------------------------------------------------------------------
// Python ints arrive as int64 (tvm-ffi would cut them to 32 bits for an `int` parameter, so that
// 2**32 + 8 read as 8) and Python strs as counted strings (a NUL inside would end the C string
// the library reads, so that "a.json\0junk" read "a.json"). Both are refused here, by name.

int to_int(std::int64_t v, const char* what) {
  if (v < std::numeric_limits<int>::min() || v > std::numeric_limits<int>::max())
    raise("ArgumentError", std::string(what) + " is " + std::to_string(v) +
                               ", outside the 32-bit range the library takes");
  return static_cast<int>(v);
}

// A string the library reads as a C string: no NUL inside.
const char* c_str(const ffi::String& s, const char* what) {
  if (std::memchr(s.data(), '\0', s.size()) != nullptr)
    raise("ArgumentError",
          std::string(what) + " contains a NUL character (at offset " +
              std::to_string(static_cast<const char*>(std::memchr(s.data(), '\0', s.size())) -
                             s.data()) +
              "), which a path, name or JSON text cannot hold");
  return s.c_str();
}

// An integer option of the materializer's JSON options: range-checked, not truncated.
template <class T>
T json_int(const json& o, const char* key, T fallback, bool required = false) {
  if (!o.contains(key)) {
    if (required) raise("ArgumentError", std::string("option '") + key + "' is missing");
    return fallback;
  }
  const json& v = o.at(key);
  if (!v.is_number_integer())
    raise("ArgumentError", std::string("option '") + key + "' must be an integer, got " + v.dump());
  if (v.is_number_unsigned()
          ? v.get<std::uint64_t>() > static_cast<std::uint64_t>(std::numeric_limits<T>::max())
          : (v.get<std::int64_t>() < std::numeric_limits<T>::min() ||
             v.get<std::int64_t>() > std::numeric_limits<T>::max()))
    raise("ArgumentError", std::string(key) + " is " + v.dump() + ", outside the range [" +
                               std::to_string(std::numeric_limits<T>::min()) + ", " +
                               std::to_string(std::numeric_limits<T>::max()) + "]");
  return v.get<T>();
}

// ---- configs through the C API ---------------------------------------------------------------

struct ConfigHandle {
  fkv_config* c = nullptr;
  ConfigHandle(const ffi::String& source, bool is_path, const ffi::String& name) {
    check(is_path ? fkv_config_load(c_str(source, "the config path"), &c)
                  : fkv_config_from_json(c_str(source, "the config JSON text"),
                                         c_str(name, "the config name"), &c));
  }
  ~ConfigHandle() { fkv_config_free(c); }
  ConfigHandle(const ConfigHandle&) = delete;
  ConfigHandle& operator=(const ConfigHandle&) = delete;
};

struct PlanHandle {
  fkv_plan* p = nullptr;
  PlanHandle(const ConfigHandle& c, bool grouped) {
    check(fkv_plan_create(c.c, grouped ? 1 : 0, &p));
  }
  ~PlanHandle() { fkv_plan_free(p); }
  PlanHandle(const PlanHandle&) = delete;
  PlanHandle& operator=(const PlanHandle&) = delete;
};

const char* k_norm_name(fkv_k_norm k) {
  switch (k) {
    case FKV_K_NORM_RMS:
      return "rms";
    case FKV_K_NORM_RMS_ONE_PLUS:
      return "rms_one_plus";
    default:
      return "none";
  }
}

json attention_json(const fkv_attention_info& a) {
  return {{"num_kv_heads", a.num_kv_heads},
          {"head_dim", a.head_dim},
          {"rotary_dim", a.rotary_dim},
          {"is_neox_style", a.is_neox_style != 0},
          {"k_norm", k_norm_name(a.k_norm)},
          {"rope_theta", a.rope_theta},
          {"rope_scaling_type", a.rope_scaling_type ? a.rope_scaling_type : ""}};
}

ffi::String config_info(ffi::String source, bool is_path, ffi::String name) {
  ConfigHandle c(source, is_path, name);
  json layers = json::array();
  for (int i = 0; i < fkv_config_num_layers(c.c); ++i) {
    fkv_layer_info l{};
    check(fkv_config_layer(c.c, i, &l));
    layers.push_back({{"index", l.index},
                      {"is_attention", l.is_attention != 0},
                      {"is_sliding", l.is_sliding != 0},
                      {"num_kv_heads", l.num_kv_heads},
                      {"head_dim", l.head_dim},
                      {"rotary_dim", l.rotary_dim},
                      {"is_neox_style", l.is_neox_style != 0},
                      {"k_norm", k_norm_name(l.k_norm)},
                      {"eps", l.eps},
                      {"rope_theta", l.rope_theta},
                      {"sliding_window", l.sliding_window},
                      {"unsupported", l.unsupported != 0}});
  }
  return json{{"num_layers", fkv_config_num_layers(c.c)},
              {"hidden_size", fkv_config_hidden_size(c.c)},
              {"max_position_embeddings", fkv_config_max_position_embeddings(c.c)},
              {"dtype", fkv_config_dtype(c.c)},
              {"architecture", fkv_config_architecture(c.c)},
              {"layers", layers}}
      .dump();
}

// The error taxonomy (fkv/errors.hpp) as JSON: [{"name", "c_status", "exit_code",
// "python_class", "python_base", "summary"}, ...]; fkv_jit/_errors.py defines its classes from it.
ffi::String error_kinds() {
  json out = json::array();
  for (const fkv::ErrorKindInfo& k : fkv::error_kinds())
    out.push_back({{"name", k.name},
                   {"c_status", k.c_status},
                   {"c_status_name", k.c_status_name},
                   {"exit_code", k.exit_code},
                   {"python_class", k.python_class},
                   {"python_base", k.python_base},
                   {"summary", k.summary}});
  return out.dump();
}

ffi::String validate(ffi::String source, bool is_path, ffi::String name) {
  ConfigHandle c(source, is_path, name);
  fkv_attention_info a{};
  check(fkv_validate(c.c, &a));
  return attention_json(a).dump();
}

// The KV heads rank tp_rank of tp_size holds of a group with num_kv_heads heads: the rule
// fkv::shard_plan applies to every group (fkv::kv_head_shard: an even split, or one replicated
// head per rank when num_kv_heads < tp_size; anything else a ConfigError naming both numbers,
// raised as ConfigMismatchError like the C API's FKV_ERR_CONFIG_MISMATCH; a bad tp_size or
// tp_rank an ArgumentError). The C API's plans are unsharded, so the binding applies it to them.
fkv::KVHeadShard rank_heads(int num_kv_heads, std::int64_t tp_size, std::int64_t tp_rank) {
  return guarded([&] {
    return fkv::kv_head_shard(
        num_kv_heads, fkv::TensorParallel{to_int(tp_size, "tp_size"), to_int(tp_rank, "tp_rank")});
  });
}

// The plan of rank tp_rank of tp_size (tp_size 1: the whole model): each group's num_kv_heads
// is the rank's share and "heads" says which heads those are, as `fkv-jit plan --tp` prints them.
ffi::String plan(ffi::String source, bool is_path, ffi::String name, bool grouped,
                 std::int64_t tp_size, std::int64_t tp_rank) {
  to_int(tp_size, "tp_size");
  to_int(tp_rank, "tp_rank");
  ConfigHandle c(source, is_path, name);
  PlanHandle p(c, grouped);
  json out = json::parse(fkv_plan_json(p.p));
  for (int g = 0; g < fkv_plan_num_groups(p.p); ++g) {
    fkv_attention_info a{};
    check(fkv_plan_group_spec(p.p, g, &a));
    const fkv::KVHeadShard heads = rank_heads(a.num_kv_heads, tp_size, tp_rank);
    a.num_kv_heads = heads.num_heads;
    json& group = out["groups"][static_cast<std::size_t>(g)];
    group["spec"]["num_kv_heads"] = heads.num_heads;
    group["info"] = attention_json(a);
    group["heads"] = {{"first_head", heads.first_head},
                      {"num_heads", heads.num_heads},
                      {"total_heads", heads.total_heads},
                      {"replicated", heads.replicated}};
  }
  out["tp_size"] = tp_size;
  out["tp_rank"] = tp_rank;
  return out.dump();
}

const char* dtype_name(fkv_dtype d) { return fkv_dtype_name(d); }

fkv_dtype parse(const ffi::String& name) {
  fkv_dtype d{};
  check(fkv_dtype_parse(c_str(name, "the dtype name"), &d));
  return d;
}

ffi::String kernel_desc(ffi::String source, bool is_path, ffi::String name, bool grouped,
                        std::int64_t group, ffi::String act, ffi::String cache, bool pool,
                        std::int64_t tp_size, std::int64_t tp_rank) {
  ConfigHandle c(source, is_path, name);
  PlanHandle p(c, grouped);
  fkv_kernel_desc d{};
  check(fkv_plan_kernel_desc(p.p, to_int(group, "group"), parse(act), parse(cache), pool ? 1 : 0,
                             &d));
  d.num_kv_heads = rank_heads(d.num_kv_heads, tp_size, tp_rank).num_heads;
  return json{{"num_kv_heads", d.num_kv_heads},
              {"head_dim", d.head_dim},
              {"rotary_dim", d.rotary_dim},
              {"neox", d.neox != 0},
              {"k_norm", d.k_norm != 0},
              {"act", dtype_name(d.act)},
              {"cache", dtype_name(d.cache)},
              {"cos_sin", dtype_name(d.cos_sin)},
              {"positions_i64", d.positions_i64 != 0},
              {"slots_i64", d.slots_i64 != 0},
              {"pool", d.mode_pool != 0},
              {"debug", d.debug != 0}}
      .dump();
}

ffi::Bytes cos_sin(ffi::String source, bool is_path, ffi::String name, bool grouped,
                   std::int64_t group64, int64_t max_position, ffi::String dtype) {
  const int group = to_int(group64, "group");
  ConfigHandle c(source, is_path, name);
  PlanHandle p(c, grouped);
  const fkv_dtype dt = parse(dtype);
  std::size_t need = 0;
  check(fkv_plan_cos_sin(p.p, group, max_position, dt, nullptr, 0, &need));
  std::string buf;
  guarded([&] { buf.assign(need, '\0'); });  // MemoryError, not a crash, for a huge table
  check(fkv_plan_cos_sin(p.p, group, max_position, dt, buf.data(), buf.size(), nullptr));
  return ffi::Bytes(buf);
}

ffi::Array<int64_t> precompile(ffi::String source, bool is_path, ffi::String name, ffi::String arch,
                               ffi::String dtype, ffi::String kv_dtype, ffi::String cache_dir,
                               ffi::String decode_gpu) {
  ConfigHandle c(source, is_path, name);
  auto opt = [](const ffi::String& s, const char* what) {
    return s.size() ? c_str(s, what) : nullptr;
  };
  fkv_precompile_options o;
  fkv_precompile_options_init(&o);
  o.arch = c_str(arch, "arch");
  o.act_dtype = opt(dtype, "dtype");
  o.kv_dtype = opt(kv_dtype, "kv_dtype");
  o.cache_dir = opt(cache_dir, "cache_dir");
  o.decode_gpu = opt(decode_gpu, "decode_gpu");
  fkv_precompile_result r{};
  check(fkv_precompile_with_options(c.c, &o, &r));
  return ffi::Array<int64_t>{static_cast<int64_t>(r.n_variants),
                             static_cast<int64_t>(r.n_compiled)};
}

// desc: the JSON of kernel_desc(). Returns [name, outcome, arch].
ffi::Array<ffi::String> kernel_prepare_impl(const ffi::String& desc_json, std::int64_t device) {
  const json j = json::parse(std::string(desc_json));
  auto dtype = [&](const char* key) { return parse(ffi::String(j.at(key).get<std::string>())); };
  fkv_kernel_desc d{};
  d.num_kv_heads = json_int<int>(j, "num_kv_heads", 0, true);
  d.head_dim = json_int<int>(j, "head_dim", 0, true);
  d.rotary_dim = json_int<int>(j, "rotary_dim", 0, true);
  d.neox = j.at("neox").get<bool>();
  d.k_norm = j.at("k_norm").get<bool>();
  d.act = dtype("act");
  d.cache = dtype("cache");
  d.cos_sin = dtype("cos_sin");
  d.positions_i64 = j.at("positions_i64").get<bool>();
  d.slots_i64 = j.at("slots_i64").get<bool>();
  d.mode_pool = j.at("pool").get<bool>();
  d.debug = j.at("debug").get<bool>();
  fkv_kernel* k = nullptr;
  check(fkv_kernel_prepare(&d, to_int(device, "device"), &k));
  ffi::Array<ffi::String> out{fkv_kernel_name(k), fkv_kernel_outcome(k), fkv_kernel_arch(k)};
  fkv_kernel_free(k);
  return out;
}

ffi::Array<ffi::String> kernel_prepare(ffi::String desc_json, std::int64_t device) {
  return guarded([&] { return kernel_prepare_impl(desc_json, device); });
}

// ---- environment -----------------------------------------------------------------------------

ffi::String version() { return fkv_version(); }

// The seed helper's error texts by name, as {field} templates (include/fkv/seed_texts.hpp): the
// sglang drop-in formats these, so the texts are defined once, in C++.
ffi::String seed_texts() { return nlohmann::json(fkv::seed::templates()).dump(); }
bool driver_available() { return fkv_driver_available() != 0; }

void set_cuda_library_dirs(ffi::Array<ffi::String> dirs) {
  std::vector<std::string> v;
  for (const ffi::String& d : dirs) v.emplace_back(d);
  fkv::set_cuda_library_dirs(std::move(v));
}

// [loaded, path or the error text]
ffi::Array<ffi::String> nvrtc_status() {
  try {
    return {"1", fkv::nvrtc().path};
  } catch (const fkv::CompileError& e) {
    return {"0", e.what()};
  }
}

// ---- the materializer ------------------------------------------------------------------------

struct BoundPool {
  std::vector<void*> k, v;
  std::vector<float> k_scales, v_scales;
  const float* k_scales_device = nullptr;  // fp32 [L] device tensors kept alive by the caller
  const float* v_scales_device = nullptr;
  std::int64_t num_slots = 0, slot_stride = 0;
  std::int64_t block_size = 0, block_stride = 0, head_stride = 0;  // paged only
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

  // hidden [T, hidden] act with contiguous rows; positions [T] index dtype, contiguous.
  fkv::MaterializerInput input(const ffi::TensorView& hidden_t, const ffi::TensorView& pos) const {
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
      raise("TypeError",
            "positions must be a contiguous int64 tensor, got " + dl_name(pos.dtype()));
    fkv::MaterializerInput in;
    in.hidden = data(hidden_t);
    in.num_tokens = T;
    in.hidden_stride = T > 1 ? hidden_t.stride(0) : hidden;
    in.positions = data(pos);
    return in;
  }

  static void same_layout(BoundPool& p, bool first, const std::string& what, std::int64_t slots,
                          std::int64_t slot_stride, std::int64_t block_size,
                          std::int64_t block_stride, std::int64_t head_stride) {
    if (first) {
      p.num_slots = slots;
      p.slot_stride = slot_stride;
      p.block_size = block_size;
      p.block_stride = block_stride;
      p.head_stride = head_stride;
    } else if (slots != p.num_slots || slot_stride != p.slot_stride || block_size != p.block_size ||
               block_stride != p.block_stride || head_stride != p.head_stride) {
      raise("ValueError",
            what +
                ": every pool buffer must have the same layout (slots, block size and strides) as "
                "k_buffers[0]: " +
                std::to_string(p.num_slots) + " slots, slot stride " +
                std::to_string(p.slot_stride) + "; got " + std::to_string(slots) + ", " +
                std::to_string(slot_stride));
    }
  }

  void bind_flat(BoundPool& p, const ffi::TensorView& tv, const std::string& what, std::size_t i,
                 bool first) const {
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

  void bind_paged(BoundPool& p, const ffi::TensorView& tv, const std::string& what, std::size_t i,
                  bool first) const {
    if (tv.ndim() != 4 || tv.size(2) * tv.size(3) != layer_width[i] || tv.stride(3) != 1)
      raise(
          "ValueError",
          what +
              " must be a [num_blocks, block_size, num_kv_heads, head_dim] view with a contiguous "
              "last dim (H*D = " +
              std::to_string(layer_width[i]) +
              "); for an HND cache pass "
              "its .transpose(1, 2)");
    same_layout(p, first, what, tv.size(0) * tv.size(1), tv.stride(1), tv.size(1), tv.stride(0),
                tv.stride(2));
  }

  // Flat pools: [num_slots, H, D] or [num_slots, H*D] with contiguous rows. Paged pools
  // (opt.paged): [num_blocks, block_size, H, D] views with a contiguous last dim, any other
  // strides (vLLM's kv_cache[0], FlashInfer's kv[:, 0], HND layouts through .transpose(1, 2)):
  // block, slot and head strides are read from the tensor. scales_device: empty or [k, v]
  // fp32 [L] device tensors, read at run time.
  std::int64_t bind_pool(const ffi::Array<ffi::Tensor>& k, const ffi::Array<ffi::Tensor>& v,
                         const ffi::Array<double>& ks, const ffi::Array<double>& vs,
                         const ffi::Array<ffi::Tensor>& scales_device) {
    const std::size_t L = layer_width.size();
    if (k.size() != L || v.size() != L)
      raise("ValueError", "k_buffers and v_buffers need one buffer per attention layer (" +
                              std::to_string(L) + "), got " + std::to_string(k.size()) + " and " +
                              std::to_string(v.size()));
    if ((ks.size() != 0 && ks.size() != L) || (vs.size() != 0 && vs.size() != L))
      raise("ValueError", "k_scales / v_scales take one value per attention layer (" +
                              std::to_string(L) + ") or none");
    const bool fp8 = opt.cache == fkv::DType::FP8_E4M3 || opt.cache == fkv::DType::FP8_E5M2;
    if (!fp8 && (ks.size() != 0 || vs.size() != 0))
      raise("ValueError", "k_scales / v_scales apply to fp8 pools only; this pool is " +
                              fkv::to_string(opt.cache));
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
      const float** dst[2] = {&p.k_scales_device, &p.v_scales_device};
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
    std::lock_guard<std::mutex> lock(mutex);
    pools.push_back(std::move(p));
    return static_cast<std::int64_t>(pools.size() - 1);
  }

  void check_slots(const ffi::TensorView& loc, const std::string& what, std::int64_t T) const {
    check_device(loc, what.c_str());
    if (loc.ndim() != 1 || loc.size(0) != T)
      raise("ValueError", what + " has " + std::to_string(loc.numel()) + " entries for " +
                              std::to_string(T) + " tokens");
    if (!is(loc.dtype(), kDLInt, 64) || !contiguous(loc))
      raise("TypeError", what + " must be a contiguous int64 tensor, got " + dl_name(loc.dtype()));
  }

  // slot_maps: empty, or one [T] int64 tensor per attention layer (paged pools only).
  void materialize_pool(const ffi::TensorView& hidden_t, const ffi::TensorView& pos,
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
    fkv::FusedKVMaterializer::Pool out;
    out.cache_loc = data(loc);
    out.k_buffers = p.k;
    out.v_buffers = p.v;
    out.num_slots = p.num_slots;
    out.slot_stride = p.slot_stride;
    out.k_scales = p.k_scales;
    out.v_scales = p.v_scales;
    out.k_scales_device = p.k_scales_device;
    out.v_scales_device = p.v_scales_device;
    out.block_size = p.block_size;
    out.block_stride = p.block_stride;
    out.head_stride = p.head_stride;
    out.slot_mappings = maps;
    m->materialize_pool(in, out, stream());
  }

  // out: contiguous, act dtype, T * stacked_elems elements: per group g, K [L_g, T, H_g, D_g]
  // then V of the same shape.
  void materialize_stacked(const ffi::TensorView& hidden_t, const ffi::TensorView& pos,
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

  // The caller's cos/sin table for `group` ([rows, >= R] in the cos/sin dtype, contiguous
  // last dim), not copied: fkv_jit keeps the tensor alive.
  void set_cos_sin(std::int64_t group, const ffi::TensorView& t) {
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

  CUstream stream() const { return static_cast<CUstream>(TVMFFIEnvGetStream(kDLCUDA, opt.device)); }

  std::int64_t read_errors(bool reset) {
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
};

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

// Returns a map of closures over one fkv::FusedKVMaterializer (see fkv_jit/materializer.py).
// w_scale: per attention layer, the fp32 device scales of quantized W_kv (options'
// "weight_format"); empty for dense weights.
ffi::Map<ffi::String, ffi::Any> materializer_create(
    ffi::String source, bool is_path, ffi::String name, ffi::String options_json,
    ffi::Array<ffi::Tensor> w_kv, ffi::Array<ffi::Tensor> k_norm, ffi::Array<ffi::Tensor> kv_bias,
    ffi::Array<double> eps, ffi::Array<ffi::Tensor> w_scale) {
  return guarded([&] {
    const json o = json::parse(std::string(options_json));
    auto st = std::make_shared<State>();
    st->opt.mode =
        o.at("grouped").get<bool>() ? fkv::ValidationMode::Grouped : fkv::ValidationMode::Strict;
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
    st->opt.tp_size = json_int<int>(o, "tp_size", 1);
    st->opt.tp_rank = json_int<int>(o, "tp_rank", 0);
    st->opt.decode_crossover = json_int<std::int64_t>(o, "decode_crossover", -1);
    st->opt.external_cos_sin = o.value("external_cos_sin", false);
    st->opt.cos_sin = fkv::parse_dtype(o.value("cos_sin", std::string("fp32")));
    st->hidden = json_int<std::int64_t>(o, "hidden", 0, true);
    st->format = fkv::parse_weight_format(o.value("weight_format", std::string("dense")));
    const fkv::ModelConfig config =
        is_path ? fkv::ModelConfig::from_file(c_str(source, "the config path"))
                : fkv::ModelConfig::from_json(std::string_view(source.data(), source.size()),
                                              c_str(name, "the config name"));
    fkv::ensure_context(st->opt.device);
    const fkv::MaterializerWeights w =
        materializer_weights(st->weight_target(), w_kv, k_norm, kv_bias, eps, w_scale);
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
          g.attn.k_norm != fkv::KNormKind::None
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
    fns.Set("weight_format", ffi::String(fkv::to_string(st->format)));
    return fns;
  });
}

}  // namespace

TVM_FFI_DLL_EXPORT_TYPED_FUNC(error_kinds, error_kinds)
TVM_FFI_DLL_EXPORT_TYPED_FUNC(version, version)
TVM_FFI_DLL_EXPORT_TYPED_FUNC(seed_texts, seed_texts)
TVM_FFI_DLL_EXPORT_TYPED_FUNC(driver_available, driver_available)
TVM_FFI_DLL_EXPORT_TYPED_FUNC(set_cuda_library_dirs, set_cuda_library_dirs)
TVM_FFI_DLL_EXPORT_TYPED_FUNC(nvrtc_status, nvrtc_status)
TVM_FFI_DLL_EXPORT_TYPED_FUNC(config_info, config_info)
TVM_FFI_DLL_EXPORT_TYPED_FUNC(validate, validate)
TVM_FFI_DLL_EXPORT_TYPED_FUNC(plan, plan)
TVM_FFI_DLL_EXPORT_TYPED_FUNC(kernel_desc, kernel_desc)
TVM_FFI_DLL_EXPORT_TYPED_FUNC(cos_sin, cos_sin)
TVM_FFI_DLL_EXPORT_TYPED_FUNC(precompile, precompile)
TVM_FFI_DLL_EXPORT_TYPED_FUNC(kernel_prepare, kernel_prepare)
TVM_FFI_DLL_EXPORT_TYPED_FUNC(materializer_create, materializer_create)
