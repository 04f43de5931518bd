// tensor_map (internal): the TMA descriptors of fkv-jit's sm_90 kernels (the FP8 stream GEMM's
// operands, the decode kernel's weight ring).
#pragma once

#include <cuda.h>

#include <cstdint>

namespace fkv {

// A 2-D map over `rows` rows of `cols` bytes, `row_bytes` apart, from `base` (16-byte aligned):
// boxes of `box_rows` rows (at most 256) x 128 bytes, written into shared memory with the
// 128-byte swizzle (16-byte unit u of row r at unit u ^ (r % 8); the box's shared address
// 1024-byte aligned). Throws CudaError when the driver refuses it.
CUtensorMap encode_byte_map(const void* base, std::int64_t cols, std::int64_t rows,
                            std::int64_t row_bytes, int box_rows);

}  // namespace fkv
