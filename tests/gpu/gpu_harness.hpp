// Shared helpers for the GPU tests: a fast deterministic RNG, random host data in the kernel's
// dtypes, device buffers filled and poisoned in stream order, and copies back.
// No Catch2 here: the helpers are used from worker threads too, where assertions must not run.
#pragma once

#include <cuda.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "fkv/driver.hpp"
#include "fkv/spec.hpp"
#include "reference.hpp"

namespace fkv_test {

// splitmix64: fast, deterministic across platforms, good enough for test data.
struct Rng {
  std::uint64_t state;
  explicit Rng(std::uint64_t seed) : state(seed) {}
  std::uint64_t next() {
    std::uint64_t z = (state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }  // [0, 1)
  std::int64_t range(std::int64_t lo, std::int64_t hi) {                      // inclusive
    return lo + static_cast<std::int64_t>(next() % static_cast<std::uint64_t>(hi - lo + 1));
  }
  bool coin(double p = 0.5) { return uniform() < p; }
  // Mean 0, variance 1, bell-shaped (sum of four uniforms): cheap for tens of millions.
  double normal() {
    return (uniform() + uniform() + uniform() + uniform() - 2.0) * 1.7320508075688772;
  }
  template <class T>
  const T& pick(const std::vector<T>& v) {
    return v[static_cast<std::size_t>(next() % v.size())];
  }
};

inline int elem_size(fkv::DType t) {
  switch (t) {
    case fkv::DType::FP32:
      return 4;
    case fkv::DType::BF16:
    case fkv::DType::FP16:
      return 2;
    default:
      return 1;
  }
}

// A value of `t` near `x` (truncation is fine: inputs only need to be some value of the type),
// written at `dst`. Fast paths for the activation dtypes; exact rounding for the rest.
inline void store_value(fkv::DType t, double x, void* dst) {
  const float f = static_cast<float>(x);
  std::uint32_t u;
  std::memcpy(&u, &f, 4);
  switch (t) {
    case fkv::DType::FP32:
      std::memcpy(dst, &f, 4);
      return;
    case fkv::DType::BF16: {
      const auto b = static_cast<std::uint16_t>(u >> 16);
      std::memcpy(dst, &b, 2);
      return;
    }
    case fkv::DType::FP16: {
      const std::uint32_t sign = (u >> 16) & 0x8000u;
      const int e = static_cast<int>((u >> 23) & 0xff) - 127 + 15;
      std::uint32_t h;
      if (e <= 0)
        h = sign;  // below fp16 normals: signed zero
      else if (e >= 31)
        h = sign | 0x7bffu;  // clamp to max finite
      else
        h = sign | static_cast<std::uint32_t>(e) << 10 | ((u >> 13) & 0x3ffu);
      const auto b = static_cast<std::uint16_t>(h);
      std::memcpy(dst, &b, 2);
      return;
    }
    default: {
      const auto b = static_cast<std::uint8_t>(fkv::round_to(t, x));
      std::memcpy(dst, &b, 1);
      return;
    }
  }
}

// n random values of `t` with standard deviation `sigma`, as raw bytes.
inline std::vector<std::uint8_t> random_values(fkv::DType t, std::size_t n, double sigma,
                                               Rng& rng) {
  std::vector<std::uint8_t> bytes(n * static_cast<std::size_t>(elem_size(t)));
  for (std::size_t i = 0; i < n; ++i)
    store_value(t, sigma * rng.normal(), bytes.data() + i * elem_size(t));
  return bytes;
}

// Index arrays (positions, cache_loc) in the kernel's index dtype, as raw bytes.
inline std::vector<std::uint8_t> index_bytes(fkv::IndexType t, const std::vector<std::int64_t>& v) {
  const std::size_t w = t == fkv::IndexType::I32 ? 4 : 8;
  std::vector<std::uint8_t> bytes(v.size() * w);
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (w == 4) {
      const auto x = static_cast<std::int32_t>(v[i]);
      std::memcpy(bytes.data() + i * 4, &x, 4);
    } else {
      std::memcpy(bytes.data() + i * 8, &v[i], 8);
    }
  }
  return bytes;
}

// Device allocation of at least `bytes` (never 0, so a buffer always has a valid address).
inline fkv::DeviceBuffer alloc(std::size_t bytes) { return fkv::DeviceBuffer(bytes ? bytes : 256); }

// Host -> device in stream order (pageable memory is staged before the call returns).
inline void upload(const fkv::DeviceBuffer& dst, const void* src, std::size_t bytes,
                   CUstream stream) {
  if (bytes == 0) return;
  if (bytes > dst.size())
    throw std::runtime_error("upload: " + std::to_string(bytes) + " bytes into a buffer of " +
                             std::to_string(dst.size()));
  FKV_CU(cuMemcpyHtoDAsync, dst.get(), src, bytes, stream);
}
template <class T>
inline fkv::DeviceBuffer to_device(const std::vector<T>& host, CUstream stream) {
  fkv::DeviceBuffer b = alloc(host.size() * sizeof(T));
  upload(b, host.data(), host.size() * sizeof(T), stream);
  return b;
}

constexpr std::uint8_t kPoison = 0xff;  // NaN in every float format the kernel writes

// Fills the whole buffer with kPoison bytes, in stream order.
inline void poison(const fkv::DeviceBuffer& b, CUstream stream) {
  FKV_CU(cuMemsetD8Async, b.get(), kPoison, b.size(), stream);
}

// The whole buffer back on the host; synchronizes `stream` first.
inline std::vector<std::uint8_t> download(const fkv::DeviceBuffer& b, CUstream stream) {
  FKV_CU(cuStreamSynchronize, stream);
  std::vector<std::uint8_t> host(b.size());
  FKV_CU(cuMemcpyDtoH, host.data(), b.get(), b.size());
  return host;
}

// Index of the first byte in [begin, end) that is not poison, or -1.
inline std::int64_t first_unpoisoned(const std::vector<std::uint8_t>& bytes, std::size_t begin,
                                     std::size_t end) {
  for (std::size_t i = begin; i < end && i < bytes.size(); ++i)
    if (bytes[i] != kPoison) return static_cast<std::int64_t>(i);
  return -1;
}

// RAII: an instantiated CUDA graph.
class GraphExec {
 public:
  explicit GraphExec(CUgraph graph) : graph_(graph) {
    FKV_CU(cuGraphInstantiate, &exec_, graph_, 0);
  }
  ~GraphExec() {
    if (exec_) fkv::Driver::get().cuGraphExecDestroy(exec_);
    if (graph_) fkv::Driver::get().cuGraphDestroy(graph_);
  }
  GraphExec(const GraphExec&) = delete;
  GraphExec& operator=(const GraphExec&) = delete;
  void launch(CUstream stream) const { FKV_CU(cuGraphLaunch, exec_, stream); }

 private:
  CUgraph graph_ = nullptr;
  CUgraphExec exec_ = nullptr;
};

// Integer from the environment, or `fallback`.
inline std::int64_t env_int(const char* name, std::int64_t fallback) {
  const char* v = std::getenv(name);
  if (!v || !*v) return fallback;
  char* end = nullptr;
  const long long x = std::strtoll(v, &end, 0);
  return (end && *end == 0) ? x : fallback;
}

}  // namespace fkv_test
