// cache_entry: the on-disk format of one cache entry, and reading it back with every check.
//
// Layout: <root>/v<schema>/nvrtc-<ver>/<arch>/<short_name>-<digest>.cubin (or .ptx), and
// beside it <short_name>-<digest>.meta.json holding the key fields, the image's size and
// XXH3-128 checksum and the lowered kernel name. The image is written first, then the meta
// file, which commits the entry: an image without a meta file is an uncommitted entry (a
// publish in progress or interrupted), never served.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "fkv/cache_key.hpp"
#include "fkv/compiler.hpp"

namespace fkv {

struct CacheEntryInfo {
  std::filesystem::path path;  // the image file
  std::string kernel;          // short name
  std::string digest;
  std::string arch;
  std::uint64_t bytes = 0;  // image + meta file
  bool ok = true;
  std::string problem;    // why it is not ok
  bool readonly = false;  // found in a read-only root
  bool removed = false;   // verify() removed it
  // An image without its meta file, younger than cache_entry::kStaleAfter: a publish in
  // progress (another process between its two renames). Not ok, but not bad either.
  bool in_progress = false;
  std::filesystem::file_time_type last_used{};  // image mtime: publish time, touched on hits
};

// A directory of a cache root that the cache cannot use (KernelCache::unusable_dirs): entries
// in it are never read and never published (a symlinked v1/nvrtc-13.0, an sm_90 directory of
// another user or writable by others, a file where a directory belongs).
struct CacheDirProblem {
  std::filesystem::path path;
  std::string problem;
  bool readonly = false;  // in a read-only root
};

namespace cache_entry {

inline constexpr const char* kMetaSuffix = ".meta.json";
// Temp files and uncommitted images older than this are leftovers of a crashed publisher.
inline constexpr std::chrono::seconds kStaleAfter = std::chrono::minutes(10);

// <root>/v<kCacheSchemaVersion>: the one place the layout version appears in a path.
std::filesystem::path layout_dir(const std::filesystem::path& root);

struct EntryPaths {
  std::filesystem::path dir, image, meta, lock;
};

// "nvrtc-<ver>/<arch>": the directory below layout_dir() that the key's "nvrtc" and "arch"
// fields name, sanitized. Lookups open only this one; an entry anywhere else is bad.
std::filesystem::path entry_subdir(const CacheKey& key);

// Where the entry for `key` lives below `root`: the directory comes from the key's "nvrtc"
// and "arch" fields, the extension from its "output" field; every part is sanitized.
EntryPaths entry_paths(const std::filesystem::path& root, const CacheKey& key,
                       const std::string& short_name);

// Unreadable: a file could not be opened for a reason that is not the entry's (its path is
// longer than PATH_MAX, the process is out of descriptors): neither served nor removed.
enum class EntryState { Ok, Missing, Bad, Unreadable };

struct LoadedEntry {
  EntryState state = EntryState::Missing;
  std::string problem;
  CompiledKernel kernel;
  std::filesystem::path image;
  std::string digest;
  std::string arch;
  std::uint64_t bytes = 0;  // image + meta
};

// Loads and verifies the entry whose meta file is `meta_path`. With `expect`, the entry must
// hold exactly that key; without, it must be self-consistent (its fields hash to its digest).
// Both files must be owned by this user (or root, when `readonly`) and not writable by group or
// others; the checksum covers the image and every meta field. A missing meta file is Missing
// (not committed), an entry outside the directory its key names (entry_subdir) is Bad, anything
// else wrong with the files is Bad with the reason, and a failure to open that is not the
// files' own (ENAMETOOLONG, EMFILE, ...) is Unreadable. The caller checks the directories first
// (entry_dir_problem).
LoadedEntry load_entry(const std::filesystem::path& meta_path, const CacheKey* expect,
                       bool readonly = false);

// The checks a publish makes on the directories of an entry, made before every read:
// layout_dir(root), the nvrtc directory and `dir` (the arch directory) must be real
// directories (symlinks allowed in read-only roots only) owned by this user (or root, in
// read-only roots) and not writable by group or others. "" when trusted; a directory that does
// not exist sets *missing (when given) and is no problem.
std::string entry_dir_problem(const std::filesystem::path& root, const std::filesystem::path& dir,
                              bool readonly, bool* missing);

// The checksum a meta file records: XXH3-128 over the format, digest, image name, size,
// lowered name, PTX flag and the image's own XXH3-128, labeled and length-prefixed.
std::string entry_checksum(const std::string& digest, const std::string& image_name,
                           std::uint64_t bytes, const std::string& lowered_name, bool ptx,
                           std::string_view image);

// Writes the image, then the meta file (each atomically). Returns "" or what went wrong, in
// which case nothing of the entry is left behind.
std::string publish_entry(const EntryPaths& p, const CacheKey& key, const CompiledKernel& k);

// Meta first: once it is gone the entry is no longer committed, whatever happens next.
// Returns "" when both files are gone (or were already), else what could not be removed and
// why ("cannot remove <path>: <errno text>"); the image is left when the meta file could not be
// removed.
std::string remove_entry(const std::filesystem::path& meta, const std::filesystem::path& image);

bool is_image_name(std::string_view n);
bool is_temp_name(std::string_view n);

// The <root>/v<schema>/nvrtc-*/<arch>/ directories that exist (no symlinks followed unless
// `follow`, which read-only roots allow).
std::vector<std::filesystem::path> entry_dirs(const std::filesystem::path& root, bool follow);

struct Scanned {
  CacheEntryInfo info;
  std::filesystem::path meta;  // empty for an uncommitted image
  bool untrusted_dir = false;  // its directory fails entry_dir_problem: never read, never removed
  bool unreadable = false;     // EntryState::Unreadable: reported, never removed
  std::filesystem::file_time_type mtime;
};

// Every entry of one root, verified (checksums included), plus uncommitted images (regular
// files younger than kStaleAfter are marked in_progress; anything else at an image path, such as
// a directory, is bad: a publish never leaves one). Temp files are never listed.
std::vector<Scanned> scan_root(const std::filesystem::path& root, bool readonly);

// The directories below layout_dir(root) that a lookup or publish would refuse (what
// entry_dir_problem checks: symlinks, where not a read-only root; anything that is not a
// directory; another owner; writable by group or others), each with the reason. entry_dirs()
// and scan_root() skip or refuse them; this names them, so that `cache verify` can report them.
std::vector<CacheDirProblem> unusable_dirs(const std::filesystem::path& root, bool readonly);

// Removes temp files older than kStaleAfter (crashed publishers) from a writable root.
void remove_stale_temps(const std::filesystem::path& root);

}  // namespace cache_entry
}  // namespace fkv
