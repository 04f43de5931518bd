// cache_key: labeled, length-prefixed cache keys. See include/fkv/cache_key.hpp.
#include "fkv/cache_key.hpp"

#include <xxhash.h>

#include <algorithm>

#include "cache_fs.hpp"
#include "fkv/version.hpp"

namespace fkv {
namespace {

// Appends `value` with an 8-byte little-endian length in front, so that no two different
// field lists serialize to the same bytes.
void append_prefixed(std::string& out, std::string_view value) {
  std::uint64_t n = value.size();
  for (int i = 0; i < 8; ++i) out += static_cast<char>((n >> (8 * i)) & 0xff);
  out.append(value);
}

}  // namespace

std::string xxh3_128_hex(std::string_view bytes) {
  XXH128_canonical_t c;
  XXH128_canonicalFromHash(&c, XXH3_128bits(bytes.data(), bytes.size()));
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  out.reserve(32);
  for (unsigned char b : c.digest) {
    out += kDigits[b >> 4];
    out += kDigits[b & 15];
  }
  return out;
}

bool is_cache_digest(const std::string& s) {
  return s.size() == 32 && std::all_of(s.begin(), s.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
         });
}

CacheKey CacheKey::from_fields(Fields fields) {
  std::string buf;
  for (const auto& [label, value] : fields) {
    append_prefixed(buf, label);
    append_prefixed(buf, value);
  }
  CacheKey k;
  k.digest = xxh3_128_hex(buf);
  k.fields = std::move(fields);
  return k;
}

std::string CacheKey::field(const std::string& label) const {
  for (const auto& [l, v] : fields)
    if (l == label) return v;
  return {};
}

CacheKey CacheKey::make(const KernelSource& src, const CompileOptions& options) {
  return make(src, options, JitOptions::global());
}

CacheKey CacheKey::make(const KernelSource& src, const CompileOptions& options,
                        const JitOptions& jit) {
  // Everything NVRTC sees, in this order (a new input gets a field, and kCacheSchemaVersion
  // is bumped, before it may influence an image):
  //   1. schema          kCacheSchemaVersion: meaning of these fields and the entry layout
  //   2. fkv             library version
  //   3. nvrtc           NVRTC version
  //   4. arch            target arch name ("sm_90a")
  //   5. options         the exact NVRTC options, one per line
  //   6. output          "cubin" or "ptx"
  //   7. template        template file name
  //   8. template_hash   XXH3-128 of the template and every header it includes
  //   9. specialization  KernelSpec::canonical(), as codegen recorded it in KernelSource
  //  10. source_hash     XXH3-128 of the specialized source and its in-memory headers
  //  11. kernel          NVRTC name expression
  std::string opts;
  for (const auto& o : nvrtc_options(options, jit)) opts += o + "\n";
  std::string seen;
  append_prefixed(seen, src.source);
  for (const auto& [name, text] : src.headers) {
    append_prefixed(seen, name);
    append_prefixed(seen, text);
  }
  return from_fields({
      {"schema", std::to_string(kCacheSchemaVersion)},
      {"fkv", kVersion},
      {"nvrtc", nvrtc_version()},
      {"arch", options.arch.name()},
      {"options", opts},
      {"output", options.ptx ? "ptx" : "cubin"},
      {"template", src.template_name},
      {"template_hash", src.template_hash},
      {"specialization", src.specialization},
      {"source_hash", xxh3_128_hex(seen)},
      {"kernel", src.name_expression},
  });
}

std::string cache_short_name(const std::string& name_expression) {
  std::string_view e = name_expression;
  std::size_t lt = e.find('<');
  std::string_view head = e.substr(0, lt);
  std::size_t colons = head.rfind("::");
  std::size_t start = colons == std::string_view::npos ? 0 : colons + 2;
  return cache_fs::sanitize(e.substr(start), 64);
}

}  // namespace fkv
