// c_api_internal: what the C API's sources share. By subject: src/c_api.cpp (status and errors,
// version, dtypes, and the definitions of the helpers below), src/c_api_config.cpp (configs,
// validation, plans, kernel descriptions, cos/sin tables), src/c_api_kernels.cpp (precompilation,
// kernels and launches), src/c_api_materializer.cpp (the materializer and its weights). Not
// installed.
//
// Every entry point runs its body inside guard(), which turns each C++ exception into a status
// and the thread-local last-error text, so that no exception crosses the C boundary.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <exception>
#include <new>
#include <string>
#include <type_traits>
#include <vector>

#include "fkv/config.hpp"
#include "fkv/errors.hpp"
#include "fkv/fkv.h"
#include "fkv/spec.hpp"

struct fkv_config {
  fkv::ModelConfig config;
};

namespace fkv::c_api {

// Stores `text` (and an NVRTC log) as this thread's last error and returns `status`.
fkv_status fail(fkv_status status, std::string text, std::string log = {});

// Runs `body` (which returns fkv_status), mapping every exception to the status of its kind
// (fkv/errors.hpp's table).
template <class F>
fkv_status guard(F&& body) noexcept {
  try {
    return body();
  } catch (const fkv::CompileError& e) {
    return fail(FKV_ERR_COMPILE, e.what(), e.log);
  } catch (const std::bad_alloc&) {
    return fail(FKV_ERR_OUT_OF_MEMORY, "out of host memory");
  } catch (const std::exception& e) {
    const fkv::ErrorKindInfo& info = fkv::error_kind_info(fkv::error_kind_of(e));
    std::string text = e.what();
    if (info.kind == fkv::ErrorKind::Internal) text = "internal error: " + text;
    return fail(static_cast<fkv_status>(info.c_status), std::move(text));
  } catch (...) {
    return fail(FKV_ERR_INTERNAL, "internal error: unknown exception");
  }
}

inline void require(const void* p, const char* what) {
  if (p == nullptr) throw fkv::ArgumentError(std::string(what) + " must not be NULL");
}

// Strings that accessors hand out beyond the life of a temporary (a small closed set: rope
// scaling types, weight format names): kept for the life of the process and never destroyed,
// so that atexit handlers and static destructors can still call the API.
const char* intern(const std::string& s);

fkv::DType to_cpp(fkv_dtype d);  // ArgumentError for a value outside the enum
fkv_dtype to_c(fkv::DType d);

// Copies `from` into to[0 .. capacity); ArgumentError naming `what` when it does not fit.
fkv_status copy_ints(const std::vector<int>& from, int* to, size_t capacity, const char* what);

// ---- structs with struct_size and the layouts from before it ------------------------------
// fkv.h's rule: readers read only the fields inside struct_size, init functions write only
// inside it. A struct_size above this is not a size but an uninitialized struct.
constexpr std::size_t kMaxStructSize = 4096;

template <class T>
void check_struct_size(const T& o, const char* what, const char* init) {
  if (o.struct_size == 0 || o.struct_size > kMaxStructSize)
    throw fkv::ArgumentError(std::string(what) + ".struct_size is " +
                             std::to_string(o.struct_size) + ": initialize it with " + init +
                             "() (which sets it) before changing fields");
}

// Copies field `f` of the caller's struct `from` into `to` when the whole field lies inside
// from.struct_size; `to` keeps its default otherwise.
#define FKV_TAKE(to, from, f)                                                                      \
  do {                                                                                             \
    if ((from).struct_size >= offsetof(std::remove_cvref_t<decltype(from)>, f) + sizeof((from).f)) \
      (to).f = (from).f;                                                                           \
  } while (0)

// Writes the defaults of the fields inside `size` bytes of *o, zeroes any bytes past the
// library's struct (fields of a newer fkv.h it does not know) and sets struct_size.
template <class T>
void init_sized(T* o, std::size_t size, const T& defaults) {
  if (o == nullptr || size < sizeof(o->struct_size)) return;
  auto* bytes = reinterpret_cast<unsigned char*>(o);
  std::memcpy(bytes, &defaults, std::min(size, sizeof(T)));
  if (size > sizeof(T))
    std::memset(bytes + sizeof(T), 0, std::min(size, kMaxStructSize) - sizeof(T));
  o->struct_size = size;
}

}  // namespace fkv::c_api
