// Fuzz target: the cache-entry reader on arbitrary bytes (docs/reliability.md).
//
// Each input becomes one entry on disk, at the path KernelCache::get looks for a fixed key:
//   byte 0      flags (see kFlag*)
//   bytes 1-2   length of the meta text (little endian), clamped to what is left
//   then        the meta text, then the image bytes
// In the meta text "@LEN@" is replaced by the image's size and then "@SUM@" by the checksum of
// the image and the meta text's own fields, so that mutations of a well-formed entry reach the
// checks after the checksum too.
//
// Oracle (a broken one traps):
//   - a disk hit returns exactly the image on disk, whose size and checksum the meta text
//     records, under the requested key and digest, never through a symlink;
//   - anything else is a compile: the builder runs once and its image is returned;
//   - afterwards a fresh KernelCache finds the good entry on disk (the bad one was replaced).
// Only CacheError may escape KernelCache (and get() throws it only for a malformed digest,
// which this target never passes), so any exception is a failure.
#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "fkv/cache.hpp"

namespace fs = std::filesystem;

namespace {

constexpr unsigned kFlagPtx = 1;           // key asks for PTX (".ptx" image)
constexpr unsigned kFlagImageSymlink = 2;  // the image path is a symlink to the bytes
constexpr unsigned kFlagMetaSymlink = 4;   // the meta path is a symlink to the text
constexpr unsigned kFlagNoImage = 8;       // no image file at all
constexpr unsigned kFlagVerifyFirst = 16;  // KernelCache::verify() before get()
constexpr unsigned kFlagSkipSubst = 32;    // leave @SUM@ / @LEN@ alone

void check(bool ok) {
  if (!ok) __builtin_trap();
}

// The checksum a meta file must record for `image`, from the meta text's own fields (missing
// ones default), or "" when the text is not a JSON object.
std::string checksum_for(const std::string& meta_text, std::string_view image) {
  nlohmann::json m = nlohmann::json::parse(meta_text, nullptr, false);
  if (m.is_discarded() || !m.is_object()) return {};
  try {
    return fkv::cache_entry::entry_checksum(
        m.value("digest", std::string()), m.value("image", std::string()),
        m.value("bytes", std::uint64_t{0}), m.value("lowered_name", std::string()),
        m.value("ptx", false), image);
  } catch (const nlohmann::json::exception&) {
    return {};  // a field of the wrong type: the reader refuses it anyway
  }
}

void replace_all(std::string& s, std::string_view from, const std::string& to) {
  for (std::size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size()))
    s.replace(at, from.size(), to);
}

void write_file(const fs::path& p, std::string_view bytes) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

fs::path g_root;   // the writable root, reused by every input
fs::path g_aside;  // symlink targets live outside the root

fkv::CacheKey key_for(bool ptx) {
  return fkv::CacheKey::from_fields({{"schema", "1"},
                                     {"fkv", "fuzz"},
                                     {"nvrtc", "12.8"},
                                     {"arch", "sm_90"},
                                     {"output", ptx ? "ptx" : "cubin"},
                                     {"kernel", "fkv::fused_kv<128>"}});
}

const std::string kShortName = "fused_kv";

// What KernelCache::publish writes for `key`, with placeholders for size and checksum.
std::string meta_template(const fkv::CacheKey& key, bool ptx) {
  nlohmann::json fields = nlohmann::json::array();
  for (const auto& [l, v] : key.fields) fields.push_back({l, v});
  std::string base = kShortName + "-" + key.digest;
  nlohmann::json meta = {{"format", "fkv-jit cache entry 2"},
                         {"digest", key.digest},
                         {"key", fields},
                         {"image", base + (ptx ? ".ptx" : ".cubin")},
                         {"bytes", 0},
                         {"checksum", "@SUM@"},
                         {"lowered_name", "_Z8fused_kvILi128EEvv"},
                         {"ptx", ptx}};
  std::string text = meta.dump(2);
  replace_all(text, "\"bytes\": 0", "\"bytes\": @LEN@");
  return text;
}

std::string built_image(const fkv::CacheKey& key) { return "built image for " + key.digest; }

void write_seeds(const fs::path& dir) {
  fs::create_directories(dir);
  int n = 0;
  for (bool ptx : {false, true})
    for (unsigned extra : {0u, kFlagVerifyFirst, kFlagImageSymlink}) {
      fkv::CacheKey key = key_for(ptx);
      std::string meta = meta_template(key, ptx);
      std::string image = ptx ? std::string(".version 8.0\n.target sm_90\n")
                              : std::string(
                                    "\x7f"
                                    "ELF\x02\x01\x01",
                                    7);
      std::string input;
      input += static_cast<char>((ptx ? kFlagPtx : 0) | extra);
      input += static_cast<char>(meta.size() & 0xff);
      input += static_cast<char>((meta.size() >> 8) & 0xff);
      input += meta + image;
      write_file(dir / ("seed-" + std::to_string(n++)), input);
    }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  spdlog::set_level(spdlog::level::off);
  if (const char* seeds = std::getenv("FKV_FUZZ_WRITE_SEEDS")) {
    write_seeds(seeds);
    std::exit(0);
  }
  // tmpfs when there is one: publishing fsyncs, which is what limits executions per second.
  char shm[] = "/dev/shm/fkv-fuzz-cache-XXXXXX";
  char tmp[] = "/tmp/fkv-fuzz-cache-XXXXXX";
  char* dir = ::mkdtemp(shm);
  if (!dir) dir = ::mkdtemp(tmp);
  if (!dir) std::abort();
  g_root = fs::path(dir) / "root";
  g_aside = fs::path(dir) / "aside";
  fs::create_directories(g_aside);
  std::atexit([] {
    std::error_code ec;
    fs::remove_all(g_root.parent_path(), ec);
  });
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 3) return 0;
  const unsigned flags = data[0];
  std::size_t meta_len = std::min<std::size_t>(data[1] | (std::size_t{data[2]} << 8), size - 3);
  std::string meta(reinterpret_cast<const char*>(data) + 3, meta_len);
  std::string image(reinterpret_cast<const char*>(data) + 3 + meta_len, size - 3 - meta_len);
  const bool ptx = flags & kFlagPtx;
  if (!(flags & kFlagSkipSubst)) {
    replace_all(meta, "@LEN@", std::to_string(image.size()));
    replace_all(meta, "@SUM@", checksum_for(meta, image));
  }

  const fkv::CacheKey key = key_for(ptx);
  std::error_code ec;
  fs::remove_all(g_root, ec);
  fs::path dir = g_root / "v1" / "nvrtc-12.8" / "sm_90";
  fs::create_directories(dir);
  fs::permissions(g_root, fs::perms::owner_all, ec);
  for (const auto& d : {g_root / "v1", g_root / "v1" / "nvrtc-12.8", dir})
    fs::permissions(d, fs::perms::owner_all, ec);
  const std::string base = kShortName + "-" + key.digest;
  const fs::path image_path = dir / (base + (ptx ? ".ptx" : ".cubin"));
  const fs::path meta_path = dir / (base + ".meta.json");
  if (!(flags & kFlagNoImage)) {
    if (flags & kFlagImageSymlink) {
      write_file(g_aside / "image", image);
      fs::create_symlink(g_aside / "image", image_path);
    } else {
      write_file(image_path, image);
    }
  }
  if (flags & kFlagMetaSymlink) {
    write_file(g_aside / "meta", meta);
    fs::create_symlink(g_aside / "meta", meta_path);
  } else {
    write_file(meta_path, meta);
  }

  int builds = 0;
  auto build = [&] {
    ++builds;
    fkv::CompiledKernel k;
    k.image = built_image(key);
    k.lowered_name = "_Z8fused_kvILi128EEvv";
    k.is_ptx = ptx;
    return k;
  };
  fkv::CacheOptions options;
  options.root = g_root;
  bool verified_ok = false;
  {
    fkv::KernelCache cache(options);
    check(!cache.memory_only());
    if (flags & kFlagVerifyFirst) {
      for (const auto& e : cache.verify())
        if (e.ok && e.digest == key.digest) verified_ok = true;
    } else {
      (void)cache.list();
    }
    fkv::CacheResult r = cache.get(key, kShortName, build);
    check(r.kernel != nullptr);
    if (r.outcome == fkv::CacheOutcome::DiskHit) {
      check(builds == 0);
      check(!(flags & (kFlagImageSymlink | kFlagMetaSymlink | kFlagNoImage)));
      check(r.kernel->image == image);
      check(r.kernel->is_ptx == ptx);
      check(!r.kernel->lowered_name.empty());
      nlohmann::json m = nlohmann::json::parse(meta, nullptr, false);
      check(m.is_object());
      check(m.value("digest", std::string()) == key.digest);
      check(m.value("checksum", std::string()) == checksum_for(meta, image));
      check(r.kernel->lowered_name == m.value("lowered_name", std::string()));
      check(m.value("bytes", std::uint64_t{0}) == image.size());
    } else {
      check(r.outcome == fkv::CacheOutcome::Compiled);
      check(builds == 1);
      check(r.kernel->image == built_image(key));
      check(!verified_ok);  // verify() said ok, so get() must have hit
    }
    check(cache.get(key, kShortName, build).outcome == fkv::CacheOutcome::MemoryHit);
  }
  {
    // A new process (fresh memory) must find a good entry: the fuzzed one if it was good,
    // else the rebuilt one that replaced it.
    fkv::KernelCache again(options);
    const int before = builds;
    fkv::CacheResult r = again.get(key, kShortName, build);
    check(r.outcome == fkv::CacheOutcome::DiskHit);
    check(builds == before);
    check(r.kernel->image == image || r.kernel->image == built_image(key));
    for (const auto& e : again.list()) check(e.ok);
  }
  return 0;
}
