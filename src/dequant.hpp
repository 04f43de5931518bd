// dequant (internal): the kernel that turns a slice of quantized packed K/V weights into the
// activation dtype (templates/dequant_weights.cu), for the materializer's cuBLASLt path above
// the decode crossover. Compiled through the kernel cache like every other kernel.
#pragma once

#include <cuda.h>

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>

#include "fkv/codegen.hpp"
#include "fkv/driver.hpp"
#include "fkv/spec.hpp"
#include "fkv/weights.hpp"

namespace fkv {

// The specialized source for `weight` (quantized), activations `act` (bf16/fp16) and `hidden`
// columns (a multiple of 16).
KernelSource generate_dequant(WeightFormat weight, DType act, int hidden);

class Dequantizer {
 public:
  // Compiles (or reads from the cache) and loads the kernel on `device`'s context.
  Dequantizer(WeightFormat weight, DType act, int hidden, int device);
  // out[0:rows, :] = dequantized rows [row0, row0 + rows) of `w` (packed [N, hidden], one byte
  // per element) with `scales` as weights.hpp lays them out; rows_per_layer (2 * H * D) maps a
  // row to its layer's per-tensor scale. Launch only (graph capturable).
  void run(const void* w, const float* scales, void* out, std::int64_t row0, std::int64_t rows,
           std::int64_t rows_per_layer, CUstream stream) const;

 private:
  int hidden_;
  Module module_;
  CUfunction function_ = nullptr;
};

// The projection through dequantized slices, pipelined: each slice of rows is dequantized into
// one of two scratch buffers on a stream of its own while the previous slice's GEMM runs on the
// caller's stream, so that the dequantization (memory bound) hides under the GEMMs (compute
// bound at large T) except for the first slice. Events order it both ways: a slice's GEMM waits
// for its dequantization, a buffer is refilled only after the GEMM that read it. The second
// stream is forked from and joined into the caller's stream, so a call can be captured into a
// CUDA graph like any other. At most two slices are dense at a time.
class SlicedProjection {
 public:
  struct Slice {
    const void* w = nullptr;         // the group's packed quantized rows
    const float* scales = nullptr;   // the group's scales (weights.hpp)
    std::int64_t row0 = 0, rows = 0;  // rows [row0, row0 + rows) of the group
    std::int64_t rows_per_layer = 0;  // 2 * H * D of the group
    std::int64_t out_row = 0;         // first projection column the slice fills
  };
  // gemm(scratch, slice, stream): proj's columns for the slice from the dequantized rows.
  using Gemm = std::function<void(const void*, const Slice&, CUstream)>;

  // Slices of up to slice_rows rows, two scratch buffers of that many rows in `act`.
  SlicedProjection(WeightFormat weight, DType act, int hidden, std::int64_t slice_rows,
                   int device);
  ~SlicedProjection();
  SlicedProjection(const SlicedProjection&) = delete;
  SlicedProjection& operator=(const SlicedProjection&) = delete;

  std::int64_t slice_rows() const { return slice_rows_; }
  // Enqueues every slice (each at most slice_rows rows) on `stream`; launch only.
  void run(std::span<const Slice> slices, const Gemm& gemm, CUstream stream);

 private:
  Dequantizer dequant_;
  std::int64_t slice_rows_;
  std::array<DeviceBuffer, 2> scratch_;
  CUstream side_ = nullptr;  // the dequantization stream (non-blocking)
  CUevent fork_ = nullptr;
  std::array<CUevent, 2> ready_{}, free_{};  // per buffer: dequantized; its GEMM enqueued
};

}  // namespace fkv
