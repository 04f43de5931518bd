// dequant (internal): the kernel that turns a slice of quantized packed K/V weights into the
// activation dtype (templates/dequant_weights.cu), for the materializer's cuBLASLt path above
// the decode crossover. Compiled through the kernel cache like every other kernel.
#pragma once

#include <cuda.h>

#include <cstdint>

#include "fkv/codegen.hpp"
#include "fkv/driver.hpp"
#include "fkv/runtime.hpp"
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
  LoadedFunction kernel_;
};

}  // namespace fkv
