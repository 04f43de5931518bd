// nvrtc_loader: dlopen of NVRTC and other CUDA Toolkit libraries (see the header for the order).
#include "nvrtc_loader.hpp"

#include <cuda.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <mutex>
#include <string>
#include <system_error>
#include <vector>

#include "fkv/errors.hpp"
#include "fkv/options.hpp"

namespace fkv {
namespace {

std::mutex& dirs_mutex() {
  static std::mutex m;
  return m;
}
std::vector<std::string>& extra_dirs() {
  static std::vector<std::string>& dirs = *new std::vector<std::string>;  // never destroyed
  return dirs;
}

// The CUDA major fkv-jit was built with first, then the other one whose C API is the same.
std::vector<std::string> sonames(const std::string& stem) {
  constexpr int kBuilt = CUDA_VERSION / 1000;
  std::vector<std::string> out = {"lib" + stem + ".so." + std::to_string(kBuilt)};
  for (int major : {13, 12})
    if (major != kBuilt) out.push_back("lib" + stem + ".so." + std::to_string(major));
  return out;
}

void* try_open(const std::string& file, std::string* tried) {
  if (tried) *tried += (tried->empty() ? "" : ", ") + file;
  return ::dlopen(file.c_str(), RTLD_NOW | RTLD_LOCAL);
}

constexpr const char* kInstallHint =
    "A kernel that is not in the cache must be compiled with NVRTC: pip install "
    "nvidia-cuda-nvrtc (the wheel torch installs works), or install the CUDA Toolkit "
    "(libnvrtc.so.13 or .12) and add its lib64 to LD_LIBRARY_PATH, or set FKV_NVRTC_LIBRARY to "
    "the library file. Precompiling the kernels into a cache (fkv-jit precompile) avoids the "
    "need on this machine.";

struct Loaded {
  Nvrtc fns;
  std::string error;  // empty when loaded
};

const Loaded& load() {
  static Loaded& loaded = *new Loaded;  // never destroyed: atexit handlers may still compile
  static std::once_flag once;
  // Outside call_once: a malformed FKV_* variable is a ConfigError for this caller, and the
  // next call reads again (JitOptions::global() keeps only a successful read).
  const JitOptions& jit = JitOptions::global();
  std::call_once(once, [&] {
    std::string tried;
    void* h = nullptr;
    if (const std::string explicit_file = jit.nvrtc_library.string();
        !explicit_file.empty()) {  // FKV_NVRTC_LIBRARY
      if (const std::string bad = check_library_file(explicit_file); !bad.empty()) {
        loaded.error = "cannot load NVRTC from FKV_NVRTC_LIBRARY=" + explicit_file + ": " + bad +
                       ". " + kInstallHint;
        return;
      }
      h = try_open(explicit_file, &tried);
      if (h == nullptr) {
        const char* why = ::dlerror();
        loaded.error = "cannot load NVRTC from FKV_NVRTC_LIBRARY=" + explicit_file + ": " +
                       (why ? why : "unknown reason") + ". " + kInstallHint;
        return;
      }
    } else {
      h = open_cuda_library("nvrtc", &tried);
    }
    if (h == nullptr) {
      loaded.error = "NVRTC not found (tried " + tried + "). " + kInstallHint;
      return;
    }
    Dl_info info{};
#define FKV_NVRTC_LOAD(name)                                                                \
  if ((loaded.fns.name = reinterpret_cast<decltype(loaded.fns.name)>(::dlsym(h, #name))) == \
      nullptr)                                                                              \
    loaded.error =                                                                          \
        "the NVRTC library found has no entry point " #name ": " + std::string(kInstallHint);
    FKV_NVRTC_FNS(FKV_NVRTC_LOAD)
#undef FKV_NVRTC_LOAD
    if (loaded.fns.nvrtcVersion &&
        ::dladdr(reinterpret_cast<void*>(loaded.fns.nvrtcVersion), &info) && info.dli_fname)
      loaded.fns.path = info.dli_fname;
  });
  return loaded;
}

}  // namespace

std::string check_library_file(const std::string& file) {
  const int fd = ::open(file.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) return std::error_code(errno, std::generic_category()).message();
  struct stat st {};
  const int rc = ::fstat(fd, &st);
  const int err = errno;
  ::close(fd);
  if (rc != 0) return std::error_code(err, std::generic_category()).message();
  if (!S_ISREG(st.st_mode))
    return "not a regular file (a FIFO, device or directory is never handed to dlopen)";
  if (st.st_size > static_cast<off_t>(kMaxLibraryBytes))
    return "larger than " + std::to_string(kMaxLibraryBytes >> 30) + " GiB";
  return {};
}

void set_cuda_library_dirs(std::vector<std::string> dirs) {
  std::lock_guard<std::mutex> lock(dirs_mutex());
  extra_dirs() = std::move(dirs);
}

void* open_cuda_library(const std::string& stem, std::string* tried) {
  std::vector<std::string> dirs;
  {
    std::lock_guard<std::mutex> lock(dirs_mutex());
    dirs = extra_dirs();
  }
  const std::vector<std::string> names = sonames(stem);
  for (const std::string& dir : dirs)
    for (const std::string& n : names)
      if (void* h = try_open(dir + "/" + n, tried)) return h;
  for (const std::string& n : names)
    if (void* h = try_open(n, tried)) return h;
  for (const std::string& n : names)
    if (void* h = try_open("/usr/local/cuda/lib64/" + n, tried)) return h;
  return nullptr;
}

const Nvrtc& nvrtc() {
  const Loaded& l = load();
  if (!l.error.empty()) throw CompileError(l.error);
  return l.fns;
}

const Nvrtc* nvrtc_if_available() {
  const Loaded& l = load();
  return l.error.empty() ? &l.fns : nullptr;
}

}  // namespace fkv
