// cache_entry: one entry's files on disk. See include/fkv/cache_entry.hpp.
#include "fkv/cache_entry.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <nlohmann/json.hpp>
#include <system_error>

#include "cache_fs.hpp"
#include "fkv/version.hpp"

namespace fkv::cache_entry {
namespace fs = std::filesystem;
using json = nlohmann::json;
using namespace cache_fs;

namespace {

constexpr std::uint64_t kMaxImageBytes = 512ull << 20;  // a kernel image is tens of KiB
constexpr std::uint64_t kMaxMetaBytes = 1ull << 20;
// Format 2: the checksum covers every meta field and the image (format 1 checksummed the
// image only, leaving lowered_name outside). A format-1 entry is a bad entry: removed and rebuilt.
constexpr const char* kMetaFormat = "fkv-jit cache entry 2";

std::string describe_field_difference(const CacheKey::Fields& cached,
                                      const CacheKey::Fields& wanted) {
  for (std::size_t i = 0; i < std::max(cached.size(), wanted.size()); ++i) {
    if (i >= cached.size()) return "cached key lacks field '" + wanted[i].first + "'";
    if (i >= wanted.size()) return "cached key has extra field '" + cached[i].first + "'";
    if (cached[i] != wanted[i])
      return "key field '" + wanted[i].first + "' is '" + cached[i].second + "' in the entry, '" +
             wanted[i].second + "' requested";
  }
  return "key fields differ";
}

// Errors that say nothing about the entry's files: the path is too long to open, or the
// process is out of descriptors or memory. Such an entry is not bad, and is not removed.
bool is_lookup_error(int code) {
  return code == ENAMETOOLONG || code == EMFILE || code == ENFILE || code == ENOMEM;
}

}  // namespace

fs::path layout_dir(const fs::path& root) {
  return root / ("v" + std::to_string(kCacheSchemaVersion));
}

fs::path entry_subdir(const CacheKey& key) {
  std::string nvrtc = key.field("nvrtc");
  std::string arch = key.field("arch");
  return fs::path("nvrtc-" + sanitize(nvrtc.empty() ? "unknown" : nvrtc, 32, true)) /
         sanitize(arch.empty() ? "unknown" : arch, 32, true);
}

EntryPaths entry_paths(const fs::path& root, const CacheKey& key, const std::string& short_name) {
  EntryPaths p;
  p.dir = layout_dir(root) / entry_subdir(key);
  std::string base = sanitize(short_name, 64) + "-" + key.digest;
  p.image = p.dir / (base + (key.field("output") == "ptx" ? ".ptx" : ".cubin"));
  p.meta = p.dir / (base + kMetaSuffix);
  p.lock = p.dir / (base + ".lock");
  return p;
}

std::string entry_checksum(const std::string& digest, const std::string& image_name,
                           std::uint64_t bytes, const std::string& lowered_name, bool ptx,
                           std::string_view image) {
  // Labeled and length-prefixed like a key; the key fields are covered through the digest,
  // which they must hash to.
  return CacheKey::from_fields({{"format", kMetaFormat},
                                {"digest", digest},
                                {"image", image_name},
                                {"bytes", std::to_string(bytes)},
                                {"lowered_name", lowered_name},
                                {"ptx", ptx ? "1" : "0"},
                                {"image_xxh3_128", xxh3_128_hex(image)}})
      .digest;
}

LoadedEntry load_entry(const fs::path& meta_path, const CacheKey* expect, bool readonly) {
  const FileTrust trust = readonly ? FileTrust::PrivateOrRoot : FileTrust::Private;
  LoadedEntry e;
  auto bad = [&](std::string why) {
    e.state = EntryState::Bad;
    e.problem = std::move(why);
    return e;
  };
  auto unreadable = [&](std::string why) {
    e.state = EntryState::Unreadable;
    e.problem = std::move(why);
    return e;
  };
  std::string err;
  int code = 0;
  auto meta_text = read_file(meta_path, kMaxMetaBytes, err, &code, trust);
  if (!meta_text) {
    if (code == ENOENT || code == ENOTDIR) return e;  // not committed: a miss, not an error
    if (is_lookup_error(code)) return unreadable("cannot read meta file: " + err);
    return bad("cannot read meta file: " + err);
  }
  json meta = json::parse(*meta_text, nullptr, false);
  if (meta.is_discarded() || !meta.is_object()) return bad("meta file is not valid JSON");
  CacheKey key;
  std::string image_name, checksum;
  std::uint64_t size = 0;
  try {
    if (meta.at("format").get<std::string>() != kMetaFormat)
      return bad("meta file has an unknown format");
    for (const auto& f : meta.at("key"))
      key.fields.emplace_back(f.at(0).get<std::string>(), f.at(1).get<std::string>());
    e.digest = meta.at("digest").get<std::string>();
    image_name = meta.at("image").get<std::string>();
    size = meta.at("bytes").get<std::uint64_t>();
    checksum = meta.at("checksum").get<std::string>();
    e.kernel.lowered_name = meta.at("lowered_name").get<std::string>();
    e.kernel.is_ptx = meta.at("ptx").get<bool>();
  } catch (const json::exception& ex) {
    return bad(std::string("meta file is malformed: ") + ex.what());
  }
  e.arch = key.field("arch");
  std::string base = meta_path.filename().string();
  base.resize(base.size() - std::string_view(kMetaSuffix).size());
  if (CacheKey::from_fields(key.fields).digest != e.digest)
    return bad("key fields do not hash to the recorded digest");
  if (base.size() < 33 || base.substr(base.size() - 32) != e.digest)
    return bad("file name does not match the digest");
  if (expect && key.fields != expect->fields)
    return bad(describe_field_difference(key.fields, expect->fields));
  // A lookup only ever opens the directory its key names: an entry elsewhere (moved or copied
  // into another arch's or NVRTC version's directory) is never found, so it is not a good one.
  const fs::path subdir = entry_subdir(key);
  const fs::path here = meta_path.parent_path();
  if (here.filename() != subdir.filename() ||
      here.parent_path().filename() != subdir.parent_path().filename())
    return bad("entry is in " + (here.parent_path().filename() / here.filename()).string() +
               ", but its key belongs in " + subdir.string() + " (moved or copied there?)");
  std::string want_image = base + (e.kernel.is_ptx ? ".ptx" : ".cubin");
  if (image_name != want_image)
    return bad("meta file names image '" + image_name + "', expected '" + want_image + "'");
  if (e.kernel.lowered_name.empty()) return bad("meta file has an empty lowered name");
  e.image = meta_path.parent_path() / image_name;
  auto image = read_file(e.image, kMaxImageBytes, err, &code, trust);
  if (!image && is_lookup_error(code)) return unreadable("cannot read image: " + err);
  if (!image) return bad(code == ENOENT ? "image file is missing" : "cannot read image: " + err);
  e.bytes = image->size() + meta_text->size();
  if (image->size() != size)
    return bad("image is " + std::to_string(image->size()) + " bytes, meta file says " +
               std::to_string(size) + " (truncated?)");
  if (entry_checksum(e.digest, image_name, size, e.kernel.lowered_name, e.kernel.is_ptx, *image) !=
      checksum)
    return bad("checksum does not match the image and meta fields (corrupted or edited)");
  e.kernel.image = std::move(*image);
  e.state = EntryState::Ok;
  return e;
}

std::string entry_dir_problem(const fs::path& root, const fs::path& dir, bool readonly,
                              bool* missing) {
  for (const auto& d : {layout_dir(root), dir.parent_path(), dir})
    if (std::string p = dir_trust_problem(d, readonly, readonly, missing);
        !p.empty() || (missing && *missing))
      return p;
  return {};
}

std::string publish_entry(const EntryPaths& p, const CacheKey& key, const CompiledKernel& k) {
  json fields = json::array();
  for (const auto& [l, v] : key.fields) fields.push_back({l, v});
  json meta = {
      {"format", kMetaFormat},
      {"digest", key.digest},
      {"key", fields},
      {"image", p.image.filename().string()},
      {"bytes", k.image.size()},
      {"checksum", entry_checksum(key.digest, p.image.filename().string(), k.image.size(),
                                  k.lowered_name, k.is_ptx, k.image)},
      {"lowered_name", k.lowered_name},
      {"ptx", k.is_ptx},
  };
  std::string err = write_atomic(p.dir, p.image.filename().string(), k.image);
  if (err.empty()) err = write_atomic(p.dir, p.meta.filename().string(), meta.dump(2) + "\n");
  if (!err.empty()) remove_entry(p.meta, p.image);
  return err;
}

std::string remove_entry(const fs::path& meta, const fs::path& image) {
  // When the meta file stays, so does the image: a committed entry without its image would be
  // worse than the bad entry it was.
  if (!meta.empty())
    if (std::string err = remove_file(meta); !err.empty()) return err;
  return image.empty() ? std::string() : remove_file(image);
}

bool is_image_name(std::string_view n) { return ends_with(n, ".cubin") || ends_with(n, ".ptx"); }
bool is_temp_name(std::string_view n) { return n.find(".tmp.") != std::string_view::npos; }

std::vector<fs::path> entry_dirs(const fs::path& root, bool follow) {
  std::vector<fs::path> out;
  std::error_code ec;
  auto is_dir = [&](const fs::directory_entry& d) {
    return follow ? d.is_directory(ec) : d.is_directory(ec) && !d.is_symlink(ec);
  };
  for (const auto& nv : fs::directory_iterator(layout_dir(root), ec)) {
    if (!is_dir(nv)) continue;
    std::error_code ec2;
    for (const auto& arch : fs::directory_iterator(nv.path(), ec2))
      if (is_dir(arch)) out.push_back(arch.path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<Scanned> scan_root(const fs::path& root, bool readonly) {
  std::vector<Scanned> out;
  for (const auto& dir : entry_dirs(root, readonly)) {
    // Entries in a directory that a read would refuse are listed as bad, and left alone.
    const std::string dir_problem = entry_dir_problem(root, dir, readonly, nullptr);
    std::vector<fs::path> files;
    std::error_code ec;
    for (const auto& f : fs::directory_iterator(dir, ec)) files.push_back(f.path());
    std::sort(files.begin(), files.end());
    for (const auto& f : files) {
      std::string name = f.filename().string();
      if (is_temp_name(name)) continue;
      Scanned s;
      s.untrusted_dir = !dir_problem.empty();
      s.info.readonly = readonly;
      s.info.arch = dir.filename().string();
      std::string base;
      if (ends_with(name, kMetaSuffix)) {
        base = name.substr(0, name.size() - std::string_view(kMetaSuffix).size());
        s.meta = f;
        LoadedEntry e;
        if (s.untrusted_dir) {
          e.state = EntryState::Bad;
          e.problem = "not read: " + dir_problem;
        } else {
          e = load_entry(f, nullptr, readonly);
        }
        s.info.ok = e.state == EntryState::Ok;
        s.info.problem = e.problem;
        s.unreadable = e.state == EntryState::Unreadable;
        if (e.image.empty())  // the meta file could not be read: its image by the file name
          for (const char* ext : {".cubin", ".ptx"})
            if (std::error_code ec2; fs::exists(dir / (base + ext), ec2))
              e.image = dir / (base + ext);
        s.info.path = e.image.empty() ? f : e.image;
        if (!e.arch.empty()) s.info.arch = e.arch;
        s.info.bytes = e.bytes;
        if (e.state != EntryState::Ok) {  // count what is there, for prune
          std::error_code ec2;
          for (const auto& part : {f, e.image}) {
            auto sz = part.empty() ? 0 : fs::file_size(part, ec2);
            if (!ec2) s.info.bytes += sz;
          }
        }
      } else if (is_image_name(name)) {
        base = name.substr(0, name.rfind('.'));
        if (fs::exists(dir / (base + kMetaSuffix))) continue;  // listed with its meta file
        s.info.path = f;
        s.info.ok = false;
        // A publish renames a regular file into place: anything else there (a directory, a
        // symlink) is no publish in progress, however new.
        std::error_code ec2;
        const fs::file_status st = fs::symlink_status(f, ec2);
        if (!ec2 && fs::is_symlink(st)) {
          s.info.problem = symlink_problem(false);
        } else if (!ec2 && !fs::is_regular_file(st)) {
          s.info.problem = "not a regular file (" +
                           std::string(fs::is_directory(st) ? "a directory" : "a special file") +
                           "), which no publish leaves";
        } else {
          s.info.in_progress = !older_than(f, kStaleAfter);
          s.info.problem = s.info.in_progress
                               ? "no meta file yet (uncommitted: a publish in progress)"
                               : "no meta file (uncommitted: a publish was interrupted)";
          const auto size = fs::file_size(f, ec2);
          s.info.bytes = ec2 ? 0 : size;
        }
      } else {
        continue;  // lock files
      }
      auto dash = base.rfind('-');
      s.info.kernel = dash == std::string::npos ? base : base.substr(0, dash);
      s.info.digest = dash == std::string::npos ? "" : base.substr(dash + 1);
      // The image's mtime is the last use; when the image is gone, the meta file's.
      std::error_code ec3;
      s.mtime = fs::last_write_time(s.info.path, ec3);
      if (ec3 && !s.meta.empty()) s.mtime = fs::last_write_time(s.meta, ec3);
      if (ec3) s.mtime = {};
      s.info.last_used = s.mtime;
      out.push_back(std::move(s));
    }
  }
  return out;
}

std::vector<CacheDirProblem> unusable_dirs(const fs::path& root, bool readonly) {
  std::vector<CacheDirProblem> out;
  // Each child of `parent` (v1/ holds nvrtc-* directories, those hold arch directories) that a
  // lookup would refuse; `descend` collects the usable ones for the next level.
  auto check = [&](const fs::path& parent, std::vector<fs::path>* descend) {
    std::vector<fs::path> children;
    std::error_code ec;
    for (const auto& c : fs::directory_iterator(parent, ec)) children.push_back(c.path());
    std::sort(children.begin(), children.end());
    for (const auto& c : children) {
      if (is_temp_name(c.filename().string())) continue;
      bool missing = false;
      std::string p = dir_trust_problem(c, readonly, readonly, &missing);
      if (missing) continue;  // removed meanwhile
      if (p.empty()) {
        if (descend) descend->push_back(c);
        continue;
      }
      out.push_back({c, printable(p), readonly});
    }
  };
  std::vector<fs::path> nvrtc_dirs;
  check(layout_dir(root), &nvrtc_dirs);
  for (const auto& nv : nvrtc_dirs) check(nv, nullptr);
  std::sort(out.begin(), out.end(),
            [](const CacheDirProblem& a, const CacheDirProblem& b) { return a.path < b.path; });
  return out;
}

void remove_stale_temps(const fs::path& root) {
  for (const auto& dir : entry_dirs(root, false)) {
    std::error_code ec;
    for (const auto& f : fs::directory_iterator(dir, ec))
      if (is_temp_name(f.path().filename().string()) && older_than(f.path(), kStaleAfter))
        ::unlink(f.path().c_str());
  }
}

}  // namespace fkv::cache_entry
