// native_config: the Config and Plan objects fkv_jit holds (tvm-ffi objects, opaque to Python).
// A Config is read once, by load_config or config_from_json; every later call (validate, plan,
// precompile, the materializer) takes the object, not the file again. A Plan is the C++ plan
// of one tensor-parallel rank (fkv::shard_plan), so the head split, the kernel descriptions
// and the cos/sin tables all come from it. Both are immutable.
#pragma once

#include <tvm/ffi/memory.h>
#include <tvm/ffi/object.h>

#include <string>
#include <utility>

#include "fkv/config.hpp"
#include "fkv/validate.hpp"
#include "native.hpp"

namespace fkv_native {

class ConfigObj : public ffi::Object {
 public:
  explicit ConfigObj(fkv::ModelConfig c) : config(std::move(c)) {}
  const fkv::ModelConfig config;
  TVM_FFI_DECLARE_OBJECT_INFO_FINAL("fkv_jit.Config", ConfigObj, ffi::Object);
};

class ConfigRef : public ffi::ObjectRef {
 public:
  explicit ConfigRef(fkv::ModelConfig c) { data_ = ffi::make_object<ConfigObj>(std::move(c)); }
  TVM_FFI_DEFINE_OBJECT_REF_METHODS_NOTNULLABLE(ConfigRef, ffi::ObjectRef, ConfigObj);
};

class PlanObj : public ffi::Object {
 public:
  PlanObj(ConfigRef c, fkv::Plan p, bool g)
      : config(std::move(c)), plan(std::move(p)), grouped(g) {}
  const ConfigRef config;  // kept alive: the cos/sin tables read its max_position_embeddings
  const fkv::Plan plan;    // sharded: each group's attn.num_kv_heads is the rank's share
  const bool grouped;
  TVM_FFI_DECLARE_OBJECT_INFO_FINAL("fkv_jit.Plan", PlanObj, ffi::Object);
};

class PlanRef : public ffi::ObjectRef {
 public:
  PlanRef(ConfigRef c, fkv::Plan p, bool grouped) {
    data_ = ffi::make_object<PlanObj>(std::move(c), std::move(p), grouped);
  }
  TVM_FFI_DEFINE_OBJECT_REF_METHODS_NOTNULLABLE(PlanRef, ffi::ObjectRef, PlanObj);
};

}  // namespace fkv_native
