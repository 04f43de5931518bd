// fp8_stream_gemm (internal): the FP8 GEMM path's kernel of its own for calls of up to 64 tokens
// over weights with per-row scales (fp8_tensor expanded per row, fp8_channel) on sm_90 devices:
// templates/fp8_stream.cu, TMA copies into a ring of stages, warpgroup MMAs of e4m3 weights and
// e4m3 activations, the rows shared out evenly over one CTA per SM (docs/quantized.md, "The FP8
// stream GEMM"). It reads the activations as quantize_act.cu
// writes them per token and 128 columns, padded with zero rows to its token count (32 or 64).
#pragma once

#include <cuda.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "fkv/codegen.hpp"
#include "fkv/driver.hpp"
#include "fkv/runtime.hpp"
#include "fkv/spec.hpp"

namespace fkv {

class Fp8StreamGemm {
 public:
  static constexpr std::int64_t kMaxTokens = 64;

  // Its kernels for `act` projections (32 and 64 tokens): built for sm_90a only
  // (KernelSource::arch_specific). What precompile bakes for FP8 weights on sm_90.
  static std::vector<KernelSource> sources(DType act);
  // The kernel over `rows` packed rows of `hidden` columns, for device `device`; null unless
  // its target is sm_90 (a CUBIN: H100, H200), hidden is a multiple of 128 up to 14 848 (the
  // ring and the x scales in 227 KB of shared memory) and the rows are at most 128 per SM
  // (16 896 on an H200).
  static std::unique_ptr<Fp8StreamGemm> make(DType act, std::int64_t hidden, std::int64_t rows,
                                             int device);
  // The activation rows a call of `tokens` tokens reads: its kernel's token count.
  static std::int64_t padded(std::int64_t tokens) { return tokens <= 32 ? 32 : kMaxTokens; }

  // proj[t, r] (proj [T, rows]) for t < T <= kMaxTokens from the packed weights `w` and xq
  // ([padded(T), hidden] e4m3, rows T.. zeros) with its scales ([hidden / 128, padded(T)],
  // token fastest); row_scales [rows].
  // Launch only (graph capturable).
  void run(const void* w, const void* xq, const float* x_scales, const float* row_scales,
           std::int64_t T, void* proj, CUstream stream);

 private:
  Fp8StreamGemm() = default;
  struct Map {
    CUtensorMap map;  // aligned as cuda.h declares it (64 or 128 bytes)
    const void* base = nullptr;
  };
  void encode(Map& m, const void* base, std::int64_t box_rows, std::int64_t rows) const;

  std::int64_t hidden_ = 0, rows_ = 0, grid_ = 0, box_rows_ = 0;
  LoadedFunction k32_, k64_;
  unsigned shared32_ = 0, shared64_ = 0;
  Map w_map_, x32_map_, x64_map_;
};

}  // namespace fkv
