// k_norm: the kinds of K normalization, each defined once (src/k_norm.cpp holds the table).
//
// A model's config names a kind (LayerAttention::k_norm, AttentionSpec::k_norm); a kernel
// computes a kind (KernelSpec::k_norm). They differ where the host folds part of the norm into
// the weight it passes: RmsOnePlus is Rms over (1 + w), so its kernel is Rms. Every front-end
// takes the names, the C values and the kernel's template argument from here.
//
// A new kind is a new enumerator, a row of the table, its maths in the kernel templates
// (templates/fused_kv.cu, templates/fused_proj_kv.cu) and the float64 reference
// (support/reference.cpp), a config rule that yields it (src/config/infer.cpp), and a value in
// fkv.h's fkv_k_norm.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace fkv {

// The numbers are fkv.h's fkv_k_norm values and the kernel templates' K_NORM argument.
enum class KNormKind {
  None = 0,
  Rms = 1,         // k * rsqrt(mean(k^2) + eps) * w, per head, weight of head_dim
  RmsOnePlus = 2,  // same with (1 + w): Gemma, Qwen3-Next/Qwen3.5; the host folds it into w
};

// Everything fkv-jit knows about one kind.
struct KNormInfo {
  KNormKind kind;
  const char* name;     // in configs, the CLI, C/Python descriptions: "none", "rms", ...
  KNormKind kernel;     // what the kernel computes once the host has folded the weight
  float weight_offset;  // the folded weight is weight_offset + the checkpoint's weight
  bool weighted;        // the kernel reads a [L, D] fp32 weight (k_norm_weight)
  // Kernel kinds only (kernel == kind): KernelSpec::canonical()'s "knorm=" value and
  // short_name()'s part. "0" and "1" are the values of the bool this enum replaced, so the
  // canonical strings and cache keys of existing kernels did not change.
  const char* key;
  const char* suffix;
};

// Every kind, in enum order.
std::span<const KNormInfo> k_norm_kinds();
// The row of `k`; ArgumentError for a value outside the enum (a C or JSON caller's number).
const KNormInfo& k_norm_info(KNormKind k);
std::string to_string(KNormKind k);  // its name
// The kind named `name`, or nullopt; parse_k_norm throws ArgumentError naming the kinds.
std::optional<KNormKind> find_k_norm(std::string_view name);
KNormKind parse_k_norm(std::string_view name);
// The kind of the C value `v` (fkv_k_norm); ArgumentError for any other number.
KNormKind k_norm_from_int(long long v);
// The names for a message: "\"none\", \"rms\" or \"rms_one_plus\"".
std::string k_norm_names();

// A kernel kind's KNormInfo::key and ::suffix, as KernelSpec::canonical() / short_name() and
// DecodeSpec's write them. KernelSpec::check() refuses the other kinds; for them these return
// "?name" / "_?name" rather than a kernel kind's text.
std::string k_norm_key(KNormKind k);
std::string k_norm_suffix(KNormKind k);

// What the kernel computes for a model's kind (k_norm_info(k).kernel).
inline KNormKind kernel_k_norm(KNormKind k) { return k_norm_info(k).kernel; }
// Whether a launch of a kernel of kind `k` needs k_norm_weight.
inline bool k_norm_weighted(KNormKind k) { return k_norm_info(k).weighted; }
// A checkpoint's K-norm weight as the kernel of a model's kind `k` reads it.
inline float fold_k_norm_weight(KNormKind k, float w) { return k_norm_info(k).weight_offset + w; }

}  // namespace fkv
