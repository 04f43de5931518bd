// tensor_map: cuTensorMapEncodeTiled for the 8-bit operands of the sm_90 kernels.
#include "tensor_map.hpp"

#include "fkv/driver.hpp"

namespace fkv {

CUtensorMap encode_byte_map(const void* base, std::int64_t cols, std::int64_t rows,
                            std::int64_t row_bytes, int box_rows) {
  CUtensorMap map;
  const cuuint64_t dims[2] = {static_cast<cuuint64_t>(cols), static_cast<cuuint64_t>(rows)};
  const cuuint64_t strides[1] = {static_cast<cuuint64_t>(row_bytes)};
  const cuuint32_t box[2] = {128, static_cast<cuuint32_t>(box_rows)};
  const cuuint32_t unit[2] = {1, 1};
  FKV_CU(cuTensorMapEncodeTiled, &map, CU_TENSOR_MAP_DATA_TYPE_UINT8, 2, const_cast<void*>(base),
         dims, strides, box, unit, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
         CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  return map;
}

}  // namespace fkv
