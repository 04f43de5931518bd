// cache_fs: the POSIX file-system steps the kernel cache is built from (no cache policy here).
//
// Every helper refuses to follow a symlink where an attacker could plant one, and reports
// failures as text ("" = success) so that the cache can decide between warning and refusing.
#pragma once

#include <sys/stat.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

namespace fkv::cache_fs {

std::string errno_text(int e);

// `text` with every control character (ESC, CR, BEL, DEL, ...) written as \xHH, so that a file
// name cannot drive a terminal or forge a log line. With keep_newlines, newline and tab stay
// (multi-line messages); without, they are escaped too (a path on one line of a table or log).
// The library's one escaping function: every log message that holds a path uses it, and the
// CLI's printable() is this function.
std::string printable(std::string_view text, bool keep_newlines = false);

// "a FIFO", "a directory", "a socket", ... for a file that should have been a regular file.
std::string file_kind(mode_t mode);

// Why a symbolic link below a cache root is not followed, and what to do instead: for a file,
// "it is a symbolic link, and fkv-jit does not follow links in its cache ..."; for a directory,
// "is a symbolic link, and ..." (the caller puts the directory's path first).
std::string symlink_problem(bool directory);

// unlink(path): "" when it is gone (ENOENT included: someone else removed it), else
// "cannot remove <path>: <errno text>" (escaped with printable()).
std::string remove_file(const std::filesystem::path& path);

// Every run of characters outside [A-Za-z0-9_-] (and '.' with allow_dot) becomes one '_'; no
// leading '-', '_' or '.' (so never "..", never an option-looking name), at most `max`
// characters, never empty ("kernel").
std::string sanitize(std::string_view in, std::size_t max, bool allow_dot = false);

// Who may own a file that is read back (see file_trust_problem).
enum class FileTrust {
  Any,            // no ownership check (the caller trusts the file for other reasons)
  Private,        // owned by this user, not writable by group or others (a writable root)
  PrivateOrRoot,  // the same, but root may own it too (a read-only root baked into an image)
};

// Reads a whole regular file safely: no symlink in its last component (O_NOFOLLOW: `err` is
// symlink_problem(false), `code` ELOOP), opened with
// O_NONBLOCK so that a FIFO (or a device) planted at the path cannot hang the reader, then
// checked on the open descriptor: a regular file (fstat), at most `max` bytes, its owner and
// mode per `trust` (no race with a rename). Returns std::nullopt and sets `err` (errno in
// `code`) on failure. Every read of a file that someone else may have placed goes through it.
std::optional<std::string> read_file(const std::filesystem::path& path, std::uint64_t max,
                                     std::string& err, int* code = nullptr,
                                     FileTrust trust = FileTrust::Any);

// Whether a regular file may be handed to the driver: owned by this user (or, with
// allow_root_owner, by root) and not writable by group or others. "" when it may.
std::string file_trust_problem(const struct stat& st, bool allow_root_owner);

bool fsync_dir(const std::filesystem::path& dir);

// Publishes `content` as dir/name: unique temp file in the same directory (O_CREAT|O_EXCL|
// O_NOFOLLOW, 0600) -> write -> fsync -> rename. A reader sees the old file, no file, or the
// whole new file, never a torn one. Returns "" or what went wrong (temp file removed).
std::string write_atomic(const std::filesystem::path& dir, const std::string& name,
                         std::string_view content);

// Whether a directory may hold cache entries that this process will hand to the driver:
// owned by this user (or, with allow_root_owner, by root) and not writable by group/others.
std::string trust_problem(const struct stat& st, bool allow_root_owner);

// Checks an existing directory as ensure_private_dir() does (no symlink unless `follow`,
// trust_problem), without creating it. A directory that does not exist sets *missing and is
// no problem: nothing can be read from it.
std::string dir_trust_problem(const std::filesystem::path& dir, bool follow, bool allow_root_owner,
                              bool* missing);

// Creates `dir` (0700) if missing; it must then be a real directory (no symlink) we trust.
std::string ensure_private_dir(const std::filesystem::path& dir);

// The writable root itself may be a symlink (e.g. ~/.cache -> /data/cache); missing
// components are created 0700. The root must then be trusted and writable.
std::string prepare_root(const std::filesystem::path& root);

// Read-only roots may be owned by root (baked into an image) but not writable by others.
std::string readonly_dir_problem(const std::filesystem::path& dir);

// Also true for a time more than `age` in the future: after a clock jump, a crashed
// publisher's leftovers must not look fresh (and count against the size cap) for years.
bool older_than(const std::filesystem::path& p, std::chrono::seconds age);

void touch(const std::filesystem::path& path);  // mtime = now (LRU order)

bool ends_with(std::string_view s, std::string_view suffix);

// An exclusive advisory lock on a per-key lock file, so that processes sharing a cache do not
// all compile the same kernel at once. Never required for correctness (publishing is atomic):
// when flock is unsupported (some NFS setups) or the wait passes `timeout` (busy()), we go on
// without it. A timeout of 0 tries once. A wait that lasts over a second is announced with one
// warning naming the lock file and how long the wait may last.
//
// `stalled` (optional) is shared by the waits on one cache root: a wait that runs its whole
// `timeout` sets it (the holder looks hung), and while it is set a wait lasts at most
// `stalled_wait`, so that a hung holder of many locks costs the timeout once, not once per lock.
class FileLock {
 public:
  explicit FileLock(const std::filesystem::path& path,
                    std::chrono::seconds timeout = std::chrono::seconds(60),
                    std::atomic<bool>* stalled = nullptr,
                    std::chrono::seconds stalled_wait = std::chrono::seconds(1));
  ~FileLock();
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;
  bool held() const { return held_; }
  bool busy() const { return busy_; }  // not held because another holder kept it past `timeout`

 private:
  int fd_ = -1;
  bool held_ = false;
  bool busy_ = false;
};

}  // namespace fkv::cache_fs
