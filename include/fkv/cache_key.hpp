// cache_key: what identifies one compiled kernel in the cache.
//
// A key is a list of labeled fields, hashed with XXH3-128 with every label and value
// length-prefixed, so that no two different field lists hash the same bytes. CacheKey::make
// lists the fields, in order; a new compile input gets a field (and kCacheSchemaVersion is
// bumped) before it may influence an image.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "fkv/codegen.hpp"
#include "fkv/compiler.hpp"

namespace fkv {

struct CacheKey {
  using Fields = std::vector<std::pair<std::string, std::string>>;
  Fields fields;       // labeled, in key order
  std::string digest;  // 32 lowercase hex chars
  // The key of `src` built with `options` and jit's NVRTC options (nvrtc_options(options, jit)).
  static CacheKey make(const KernelSource& src, const CompileOptions& options,
                       const JitOptions& jit);
  static CacheKey make(const KernelSource& src,
                       const CompileOptions& options);  // JitOptions::global()
  // The digest of explicit fields (labels and values are hashed length-prefixed, in order).
  // make() builds its fields and calls this; tests and tools use it directly.
  static CacheKey from_fields(Fields fields);
  // The value of a field, or "" when the key has no such label.
  std::string field(const std::string& label) const;
};

// A file-system-safe short name for a kernel name expression: the unqualified template
// name and its arguments, with every run of characters outside [A-Za-z0-9_-] replaced by
// one '_', at most 64 characters, never empty.
std::string cache_short_name(const std::string& name_expression);

// XXH3-128 of `bytes` as 32 lowercase hex digits (canonical, big-endian byte order).
std::string xxh3_128_hex(std::string_view bytes);

// Whether `s` looks like a digest: exactly 32 lowercase hex digits.
bool is_cache_digest(const std::string& s);

}  // namespace fkv
