// cache_fs: POSIX file-system helpers of the kernel cache. See src/cache_fs.hpp.
#include "cache_fs.hpp"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <random>
#include <sstream>
#include <system_error>
#include <thread>
#include <vector>

namespace fkv::cache_fs {
namespace fs = std::filesystem;

namespace {

bool safe_char(char c, bool allow_dot) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '-' || (allow_dot && c == '.');
}

std::string mode_text(mode_t m) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "%04o", static_cast<unsigned>(m & 07777));
  return buf;
}

}  // namespace

std::string errno_text(int e) { return std::error_code(e, std::generic_category()).message(); }

std::string printable(std::string_view text, bool keep_newlines) {
  std::string out;
  out.reserve(text.size());
  for (const char c : text) {
    const auto u = static_cast<unsigned char>(c);
    const bool kept = keep_newlines && (c == '\n' || c == '\t');
    if ((u < 0x20 && !kept) || u == 0x7f) {
      char buf[5];
      std::snprintf(buf, sizeof buf, "\\x%02x", u);
      out += buf;
    } else {
      out += c;
    }
  }
  return out;
}

std::string file_kind(mode_t mode) {
  if (S_ISREG(mode)) return "a regular file";
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISCHR(mode) || S_ISBLK(mode)) return "a device";
  if (S_ISLNK(mode)) return "a symbolic link";
  return "not a regular file";
}

std::string symlink_problem(bool directory) {
  if (directory)
    return "is a symbolic link, and fkv-jit does not follow links below a cache root (only the "
           "root itself may be one): replace it with a real directory (mode 0700), or remove it "
           "and fkv-jit creates one";
  return "it is a symbolic link, and fkv-jit does not follow links in its cache (a link could "
         "hand the driver any file): copy the file there instead of linking it, or remove the "
         "link (fkv-jit cache verify removes it in the writable root)";
}

std::string remove_file(const fs::path& path) {
  if (::unlink(path.c_str()) == 0 || errno == ENOENT) return {};
  return "cannot remove " + printable(path.string()) + ": " + errno_text(errno);
}

std::string sanitize(std::string_view in, std::size_t max, bool allow_dot) {
  std::string out;
  for (char c : in) {
    if (safe_char(c, allow_dot)) {
      if (out.empty() && (c == '-' || c == '_' || c == '.')) continue;
      out += c;
    } else if (!out.empty() && out.back() != '_') {
      out += '_';
    }
  }
  if (out.size() > max) out.resize(max);
  while (!out.empty() && (out.back() == '_' || out.back() == '-' || out.back() == '.'))
    out.pop_back();
  return out.empty() ? "kernel" : out;
}

std::optional<std::string> read_file(const fs::path& path, std::uint64_t max, std::string& err,
                                     int* code, FileTrust trust) {
  // O_NONBLOCK: opening a FIFO without a writer would otherwise wait forever. It changes
  // nothing for a regular file, the only kind read past the fstat below.
  int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    const int e = errno;
    if (code) *code = e;
    struct stat st {};
    // O_NOFOLLOW reports a symlink as ELOOP ("Too many levels of symbolic links"): say what it is.
    if (e == ELOOP && ::lstat(path.c_str(), &st) == 0 && S_ISLNK(st.st_mode))
      err = symlink_problem(false);
    else
      err = errno_text(e);
    return std::nullopt;
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    if (code) *code = errno;
    err = errno_text(errno);
    ::close(fd);
    return std::nullopt;
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    if (code) *code = EINVAL;
    err = "it is " + file_kind(st.st_mode) + ", not a regular file";
    return std::nullopt;
  }
  if (trust != FileTrust::Any) {
    if (std::string p = file_trust_problem(st, trust == FileTrust::PrivateOrRoot); !p.empty()) {
      ::close(fd);
      err = p;
      return std::nullopt;
    }
  }
  if (static_cast<std::uint64_t>(st.st_size) > max) {
    ::close(fd);
    err = "file is " + std::to_string(st.st_size) + " bytes, more than the " + std::to_string(max) +
          " allowed";
    return std::nullopt;
  }
  std::string out(static_cast<std::size_t>(st.st_size), '\0');
  std::size_t done = 0;
  while (true) {
    if (done == out.size()) out.resize(out.size() + 4096);  // the file grew (or st_size was 0)
    ssize_t n = ::read(fd, out.data() + done, out.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      if (code) *code = errno;
      err = errno_text(errno);
      ::close(fd);
      return std::nullopt;
    }
    if (n == 0) break;
    done += static_cast<std::size_t>(n);
    if (done > max) {
      ::close(fd);
      err = "file grew past the " + std::to_string(max) + " bytes allowed";
      return std::nullopt;
    }
  }
  ::close(fd);
  out.resize(done);
  return out;
}

bool fsync_dir(const fs::path& dir) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return false;
  bool ok = ::fsync(fd) == 0;
  ::close(fd);
  return ok;
}

// Publishes `content` as dir/name: unique temp file in the same directory (O_CREAT|O_EXCL|
// O_NOFOLLOW, 0600) -> write -> fsync -> rename. A reader sees the old file, no file, or the
// whole new file, never a torn one. Returns "" or what went wrong (temp file removed).
std::string write_atomic(const fs::path& dir, const std::string& name, std::string_view content) {
  static std::atomic<std::uint64_t> counter{0};
  thread_local std::mt19937_64 rng{std::random_device{}() ^ static_cast<std::uint64_t>(::getpid())};
  for (int attempt = 0; attempt < 64; ++attempt) {
    std::ostringstream tmp_name;
    tmp_name << name << ".tmp." << ::getpid() << '.' << counter.fetch_add(1) << '.' << std::hex
             << rng();
    fs::path tmp = dir / tmp_name.str();
    int fd = ::open(tmp.c_str(), O_CREAT | O_EXCL | O_NOFOLLOW | O_WRONLY | O_CLOEXEC, 0600);
    if (fd < 0 && errno == EEXIST) continue;
    if (fd < 0) return "cannot create " + tmp.string() + ": " + errno_text(errno);
    std::string err;
    std::size_t done = 0;
    while (done < content.size() && err.empty()) {
      ssize_t n = ::write(fd, content.data() + done, content.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0)
        err = "cannot write " + tmp.string() + ": " + errno_text(errno);
      else
        done += static_cast<std::size_t>(n);
    }
    if (err.empty() && ::fsync(fd) != 0)
      err = "cannot fsync " + tmp.string() + ": " + errno_text(errno);
    if (::close(fd) != 0 && err.empty())
      err = "cannot close " + tmp.string() + ": " + errno_text(errno);
    if (err.empty() && ::rename(tmp.c_str(), (dir / name).c_str()) != 0)
      err = "cannot rename " + tmp.string() + ": " + errno_text(errno);
    if (!err.empty()) ::unlink(tmp.c_str());
    return err;
  }
  return "cannot create a unique temp file in " + dir.string();
}

std::string file_trust_problem(const struct stat& st, bool allow_root_owner) {
  uid_t me = ::geteuid();
  if (st.st_uid != me && !(allow_root_owner && st.st_uid == 0))
    return "it is owned by uid " + std::to_string(st.st_uid) + ", not by this user (uid " +
           std::to_string(me) + ")";
  if (st.st_mode & (S_IWGRP | S_IWOTH))
    return "it is writable by group or others (mode " + mode_text(st.st_mode) + ")";
  return {};
}

std::string trust_problem(const struct stat& st, bool allow_root_owner) {
  if (!S_ISDIR(st.st_mode)) return "it is not a directory";
  return file_trust_problem(st, allow_root_owner);
}

std::string dir_trust_problem(const fs::path& dir, bool follow, bool allow_root_owner,
                              bool* missing) {
  struct stat st {};
  if ((follow ? ::stat(dir.c_str(), &st) : ::lstat(dir.c_str(), &st)) != 0) {
    if (errno == ENOENT || errno == ENOTDIR) {
      if (missing) *missing = true;
      return {};
    }
    return "cannot access " + dir.string() + ": " + errno_text(errno);
  }
  if (S_ISLNK(st.st_mode)) return dir.string() + " " + symlink_problem(true);
  std::string p = trust_problem(st, allow_root_owner);
  return p.empty() ? p : dir.string() + ": " + p;
}

// Creates `dir` (0700) if missing; it must then be a real directory (no symlink) we trust.
std::string ensure_private_dir(const fs::path& dir) {
  struct stat st {};
  if (::lstat(dir.c_str(), &st) != 0) {
    if (errno != ENOENT) return "cannot access " + dir.string() + ": " + errno_text(errno);
    if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST)
      return "cannot create " + dir.string() + ": " + errno_text(errno);
    if (::lstat(dir.c_str(), &st) != 0)
      return "cannot access " + dir.string() + ": " + errno_text(errno);
  }
  if (S_ISLNK(st.st_mode)) return dir.string() + " " + symlink_problem(true);
  std::string p = trust_problem(st, false);
  return p.empty() ? p : dir.string() + ": " + p;
}

// The writable root itself may be a symlink (e.g. ~/.cache -> /data/cache); missing
// components are created 0700.
std::string prepare_root(const fs::path& root) {
  std::vector<fs::path> missing;
  for (fs::path p = root; !p.empty(); p = p.parent_path()) {
    struct stat st {};
    if (::stat(p.c_str(), &st) == 0) break;
    if (errno != ENOENT) return "cannot access " + p.string() + ": " + errno_text(errno);
    missing.push_back(p);
    if (p == p.parent_path()) break;
  }
  for (auto it = missing.rbegin(); it != missing.rend(); ++it)
    if (::mkdir(it->c_str(), 0700) != 0 && errno != EEXIST)
      return "cannot create " + it->string() + ": " + errno_text(errno);
  struct stat st {};
  if (::stat(root.c_str(), &st) != 0)
    return "cannot access " + root.string() + ": " + errno_text(errno);
  if (std::string p = trust_problem(st, false); !p.empty()) return p;
  if (::access(root.c_str(), W_OK | X_OK) != 0)
    return root.string() + " is not writable: " + errno_text(errno);
  return {};
}

// Read-only roots may be owned by root (baked into an image) but not writable by others.
std::string readonly_dir_problem(const fs::path& dir) {
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0)
    return "cannot access " + dir.string() + ": " + errno_text(errno);
  std::string p = trust_problem(st, true);
  return p.empty() ? p : dir.string() + ": " + p;
}

bool older_than(const fs::path& p, std::chrono::seconds age) {
  std::error_code ec;
  auto t = fs::last_write_time(p, ec);
  if (ec) return false;
  auto d = fs::file_time_type::clock::now() - t;
  return d > age || d < -age;
}

void touch(const fs::path& path) { ::utimensat(AT_FDCWD, path.c_str(), nullptr, 0); }

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

namespace {

// A wait for a lock longer than this is announced (one warning): another process holds it for
// longer than a compile takes, or is hung.
constexpr std::chrono::seconds kLockQuietWait{1};

// The lock file, opened (created when missing) without following a symlink and without
// blocking on a FIFO planted at its path; only a regular file is used. -1 when there is none.
int open_lock_file(const fs::path& path) {
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0600);
  if (fd < 0) {
    const int e = errno;
    struct stat st {};
    spdlog::debug("fkv-jit cache: no lock file {}: {}", printable(path.string()),
                  e == ELOOP && ::lstat(path.c_str(), &st) == 0 && S_ISLNK(st.st_mode)
                      ? symlink_problem(false)
                      : errno_text(e));
    return -1;
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    spdlog::debug("fkv-jit cache: no lock file {}: it is {}", printable(path.string()),
                  file_kind(st.st_mode));
    ::close(fd);
    return -1;
  }
  return fd;
}

}  // namespace

FileLock::FileLock(const fs::path& path, std::chrono::seconds timeout, std::atomic<bool>* stalled,
                   std::chrono::seconds stalled_wait) {
  using Clock = std::chrono::steady_clock;
  fd_ = open_lock_file(path);
  if (fd_ < 0) return;
  auto t0 = Clock::now();
  auto pause = std::chrono::milliseconds(1);
  bool announced = false;
  while (true) {
    if (::flock(fd_, LOCK_EX | LOCK_NB) == 0) {
      // A lock file is unlinked while locked (prune, clear); whoever waited on the old inode
      // must not count as holding the lock that the path now names: open it again.
      struct stat held {
      }, named{};
      if (::fstat(fd_, &held) == 0 && ::stat(path.c_str(), &named) == 0 &&
          held.st_ino == named.st_ino && held.st_dev == named.st_dev) {
        held_ = true;
        return;
      }
      ::close(fd_);
      fd_ = open_lock_file(path);
      if (fd_ < 0) return;
      continue;
    }
    int e = errno;
    if (e == EINTR) continue;
    if (e != EWOULDBLOCK) {
      spdlog::debug("fkv-jit cache: cannot lock {}: {}; compiling without it",
                    printable(path.string()), errno_text(e));
      break;
    }
    // Another wait on this root ran out (now or earlier): this one is cut short too.
    const bool cut = stalled && stalled->load() && stalled_wait < timeout;
    const std::chrono::seconds limit = cut ? stalled_wait : timeout;
    if (!announced && limit > kLockQuietWait && Clock::now() - t0 >= kLockQuietWait) {
      // Waiting this long is no longer a compile of a few hundred milliseconds: say who waits.
      announced = true;
      const std::string stem = path.stem().string();
      spdlog::warn(
          "fkv-jit cache: another process holds the lock {} (compiling kernel {}); waiting up to "
          "{} s for it, then compiling without the lock",
          printable(path.string()), printable(stem.substr(0, stem.rfind('-'))), limit.count());
    }
    if (Clock::now() - t0 >= limit) {
      busy_ = true;
      if (timeout.count() == 0) break;  // a try-lock: the caller decides
      if (cut) {
        spdlog::debug(
            "fkv-jit cache: {} still held after {} s (a lock wait in this cache timed out "
            "before); compiling without the lock",
            printable(path.string()), limit.count());
      } else if (stalled && !stalled->exchange(true) && stalled_wait < timeout) {
        spdlog::warn(
            "fkv-jit cache: waited {} s for {}; compiling without the lock. Its holder looks "
            "hung: this process's later lock waits in this cache last at most {} s",
            timeout.count(), printable(path.string()), stalled_wait.count());
      } else {
        spdlog::warn("fkv-jit cache: waited {} s for {}; compiling without the lock",
                     timeout.count(), printable(path.string()));
      }
      break;
    }
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::milliseconds(50));
  }
  ::close(fd_);
  fd_ = -1;
}

FileLock::~FileLock() {
  if (fd_ >= 0) {
    ::flock(fd_, LOCK_UN);
    ::close(fd_);
  }
}

}  // namespace fkv::cache_fs
