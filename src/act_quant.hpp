// act_quant (internal): the FP8 GEMM's inputs besides the stored weights
// (templates/quantize_act.cu): a call's activations quantized to FP8 e4m3 with one scale per
// token (or per token and 128-column group, for block-scaled weights), and the per-row weight
// scales that GEMM reads for per-tensor (per-layer) scales. Compiled through the kernel cache
// like every other kernel.
#pragma once

#include <cuda.h>

#include <cstdint>

#include "fkv/codegen.hpp"
#include "fkv/driver.hpp"
#include "fkv/runtime.hpp"
#include "fkv/spec.hpp"

namespace fkv {

// The specialized sources: activations `act` (bf16/fp16), `hidden` columns (a multiple of 8),
// group 0 (per token) or 128 (per token and 128 columns); and the scale expansion.
KernelSource generate_quantize_act(DType act, int hidden, int group);
KernelSource generate_expand_scales();
// fp8_channel's row scales after its block-scaled GEMM (fp32 output) into `act`.
KernelSource generate_scale_rows(DType act);

class ActQuantizer {
 public:
  // Compiles (or reads from the cache) and loads the kernels on `device`'s context; the
  // expansion only when `expand` is set, the row scaling only when `scale_rows` is.
  ActQuantizer(DType act, int hidden, int group, bool expand, int device, bool scale_rows = false);
  // xq [n, hidden] e4m3 and scales ([n], or [ceil(hidden / 128), n] token fastest) from
  // x [T, hidden] (rows ld elements apart); rows [T, n) zeros with scale 1. Launch only (graph
  // capturable).
  void run(const void* x, std::int64_t ld, std::int64_t T, std::int64_t n, void* xq, float* scales,
           CUstream stream) const;
  // rows[r] = per_layer[r / rows_per_layer] for r < n. Launch only.
  void expand(const float* per_layer, float* rows, std::int64_t rows_per_layer, std::int64_t n,
              CUstream stream) const;
  // proj[t, c] = act(d[t, c] * row_scales[c]) for t < T (d fp32 and proj [T, N], N a multiple
  // of 4). Launch only.
  void scale_rows(const float* d, const float* row_scales, void* proj, std::int64_t T,
                  std::int64_t N, CUstream stream) const;

 private:
  LoadedFunction quantize_, expand_, scale_rows_;  // the last two: only when asked for
};

}  // namespace fkv
