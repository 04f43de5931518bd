// nvrtc_loader: NVRTC (and other CUDA Toolkit libraries) loaded with dlopen at first use, so
// that libfkv itself needs no toolkit library at load time. A machine whose kernels are all in
// the cache never loads NVRTC; a compile on a machine without it is a CompileError that says
// what to install.
//
// Where a library is looked for, first hit wins:
//   1. $FKV_NVRTC_LIBRARY (NVRTC only; JitOptions::nvrtc_library): an explicit file, which must
//      be a regular file (check_library_file);
//   2. the directories given to set_cuda_library_dirs() (the Python package passes the lib
//      folders of the nvidia-* wheels, e.g. site-packages/nvidia/cu13/lib);
//   3. the dynamic linker's search (LD_LIBRARY_PATH, ld.so.cache, a library already loaded by
//      the process, e.g. torch's);
//   4. /usr/local/cuda/lib64.
// For each place, the soname of the CUDA major version fkv-jit was built with is tried first,
// then the other supported major (12 or 13): the NVRTC C API fkv-jit uses is the same in both.
#pragma once

#include <nvrtc.h>

#include <cstddef>
#include <string>
#include <vector>

namespace fkv {

// Directories to search before the system ones (step 2 above). Call before the first compile;
// later calls only affect libraries not yet loaded.
void set_cuda_library_dirs(std::vector<std::string> dirs);

// dlopen of "lib<stem>.so.<major>" along the search above (e.g. stem "cublasLt"). Returns the
// handle, or nullptr with `tried` listing every file name attempted.
void* open_cuda_library(const std::string& stem, std::string* tried = nullptr);

// The most bytes a library file named by FKV_NVRTC_LIBRARY may have (libnvrtc is about 100 MB).
inline constexpr std::size_t kMaxLibraryBytes = std::size_t{1} << 30;

// Why `file` (FKV_NVRTC_LIBRARY) must not be handed to dlopen, or "" when it may: it must be a
// regular file of at most kMaxLibraryBytes. Checked without blocking (O_NONBLOCK) and without
// reading it, since dlopen of a FIFO hangs and of /dev/zero reads until memory runs out.
std::string check_library_file(const std::string& file);

// The NVRTC entry points fkv-jit calls.
struct Nvrtc {
// clang-format off
#define FKV_NVRTC_FNS(X)       \
  X(nvrtcGetErrorString)       \
  X(nvrtcVersion)              \
  X(nvrtcGetNumSupportedArchs) \
  X(nvrtcGetSupportedArchs)    \
  X(nvrtcCreateProgram)        \
  X(nvrtcDestroyProgram)       \
  X(nvrtcAddNameExpression)    \
  X(nvrtcCompileProgram)       \
  X(nvrtcGetProgramLogSize)    \
  X(nvrtcGetProgramLog)        \
  X(nvrtcGetLoweredName)       \
  X(nvrtcGetPTXSize)           \
  X(nvrtcGetPTX)               \
  X(nvrtcGetCUBINSize)         \
  X(nvrtcGetCUBIN)
// clang-format on
#define FKV_NVRTC_MEMBER(name) decltype(&::name) name = nullptr;
  FKV_NVRTC_FNS(FKV_NVRTC_MEMBER)
#undef FKV_NVRTC_MEMBER
  std::string path;  // the file that was loaded
};

// Loaded once, on first call; a failure is remembered. Throws CompileError naming the places
// searched and what to install (pip install nvidia-cuda-nvrtc, or the CUDA Toolkit).
const Nvrtc& nvrtc();
// nullptr instead of throwing (for callers with a fallback, e.g. a cache lookup).
const Nvrtc* nvrtc_if_available();

}  // namespace fkv
