// reference: the fused KV kernel (K norm, RoPE, rounding, FP8 scales) recomputed on the CPU in
// float64, the number formats of its inputs and outputs decoded and encoded independently of the
// kernel's own conversions, and a comparison with a tolerance of one unit in the last place of the
// output. Used by the GPU tests and by `fkv-jit selftest`. Pure host code; thread-safe (no state
// beyond immutable lookup tables built on first use).
//
// A test oracle, not part of the engine-facing API: it is built as the fkv_reference library
// (support/), which the tests, the CLI and examples/embed_cpp link; libfkv, the Python extension
// and `cmake --install`'s headers do not contain it.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "fkv/spec.hpp"

namespace fkv {

// ---- number formats ---------------------------------------------------------------------
// Bit patterns are right-aligned in a uint32_t (bf16/fp16: 16 bits, fp8: 8 bits).

// The value of `bits` in `dtype`. NaN patterns give a quiet NaN, infinities +-inf.
// FP8 E4M3 is the "fn" variant (no infinities; S.1111.111 is NaN; max 448); E5M2 is IEEE-like
// (max 57344).
double to_double(DType dtype, std::uint32_t bits);

// `x` rounded to nearest, ties to even mantissa. BF16/FP16/FP32 overflow to +-inf as IEEE;
// FP8 saturates to +-max finite (inf too). NaN gives the format's NaN (fp8: 0x7f, with sign).
std::uint32_t round_to(DType dtype, double x);

// Largest finite value of `dtype`.
double max_finite(DType dtype);

// The spacing of `dtype`'s values at magnitude |x| (subnormal spacing below the smallest
// normal), i.e. one unit in the last place.
double ulp(DType dtype, double x);

// The FP8 GEMM's activations (templates/quantize_act.cu) as it reads them: `rows` rows of
// `x` (`stride` elements apart, in `act`) quantized to FP8 e4m3 with one scale per row (group
// 0) or per row and 128 columns (group 128), s = max(amax / 448, FLT_MIN) and q = e4m3(x / s)
// in float32, returned as q * s in float64, [rows, stride] (columns past `cols` zero).
std::vector<double> fp8_activations(DType act, const std::uint8_t* x, std::int64_t rows,
                                    std::int64_t cols, std::int64_t stride, int group);

// ---- the reference ------------------------------------------------------------------------

// Host copies of the kernel's inputs; the same meaning, defaults and units as FusedKVInputs /
// PoolOutput in materialize.hpp. Strides in elements, 0 = contiguous.
struct ReferenceInputs {
  KernelSpec spec;
  std::int64_t num_tokens = 0;
  std::int64_t num_layers = 0;
  const void* proj = nullptr;  // [T, L, 2*H*D] in spec.act
  std::int64_t proj_stride_token = 0;
  std::int64_t proj_stride_layer = 0;
  const void* positions = nullptr;  // [T] spec.positions; each in [0, max_position)
  const void* cos_sin = nullptr;    // [max_position, R] spec.cos_sin; unused when R = 0
  std::int64_t max_position = 0;
  std::int64_t cos_sin_stride = 0;
  const float* k_norm_weight = nullptr;  // [L, D]; required iff k_norm_weighted(spec.k_norm)
  std::span<const float> eps;            // [L]; empty = 1e-6 each
  std::span<const float> k_scales;       // [L]; FP8 caches only; empty = 1.0 (host or device
  std::span<const float> v_scales;       // scales alike: the kernel divides by the same values)
  // K/V bias [L, 2*H*D] fp32 (spec.kv_bias): k += bias before the norm, v = v + bias.
  const float* kv_bias = nullptr;
  std::int64_t kv_bias_stride_layer = 0;  // 0 = 2*H*D
};

// Where element (slot, h, 0) of a pool buffer lies, in elements, for the layouts of
// materialize.hpp's PoolOutput: flat (block_size 1) or paged. 0 fields take the same defaults.
struct PoolLayout {
  std::int64_t block_size = 0;    // 0 = 1
  std::int64_t block_stride = 0;  // 0 = one block's extent
  std::int64_t slot_stride = 0;   // 0 = H*D
  std::int64_t head_stride = 0;   // 0 = D
};
std::int64_t pool_offset(const PoolLayout& layout, std::int64_t num_heads, std::int64_t head_dim,
                         std::int64_t slot, std::int64_t head);

// The exact result before output rounding, [L, T, H, D] (the stacked layout), in the stored
// domain: for an FP8 cache already divided by the layer's scale, not yet saturated.
// `magnitude` bounds the terms the kernel adds in fp32 for each element (|x1 cos| + |x2 sin|
// for rotated dims, |x| otherwise; after norm and scale): the fp32 slack of the comparison is
// relative to it, so that cancellation in RoPE does not need a looser tolerance everywhere.
struct ReferenceOutput {
  std::int64_t num_layers = 0, num_tokens = 0, num_heads = 0, head_dim = 0;
  std::vector<double> value;
  std::vector<double> magnitude;
  std::size_t index(std::int64_t l, std::int64_t t, std::int64_t h, std::int64_t d) const {
    return static_cast<std::size_t>(((l * num_tokens + t) * num_heads + h) * head_dim + d);
  }
};

// Throw ArgumentError for inputs the reference cannot evaluate (null pointers, a position
// outside [0, max_position), too short eps/scale spans, odd rotary_dim, ...).
ReferenceOutput reference_k(const ReferenceInputs& in);
ReferenceOutput reference_v(const ReferenceInputs& in);

// ---- comparison ---------------------------------------------------------------------------

struct CompareOptions {
  // Bit-exact: the output must equal round_to(dtype, ref) (V copied in the activation dtype).
  bool exact = false;
  // Relative error allowed for the kernel's fp32 arithmetic, times ReferenceOutput::magnitude,
  // on top of one ulp of the output dtype.
  double fp32_slack = 1e-5;
  // [T]: tokens to check (non-zero) or skip (0), e.g. pool tokens with cache_loc < 0.
  // Empty = all tokens.
  std::span<const std::uint8_t> token_mask;
  // [L, T]: the same per layer (per-layer slot mappings); when given, token_mask is unused.
  std::span<const std::uint8_t> layer_token_mask;
  int max_listed = 8;  // mismatches listed in CompareResult::first
};

struct Mismatch {
  std::int64_t l = 0, t = 0, h = 0, d = 0;
  std::uint32_t gpu_bits = 0;
  double gpu = 0;
  double ref = 0;        // unrounded reference (stored domain)
  double tolerance = 0;  // allowed |gpu - ref|; 0 when bit-exactness was asked
};

struct CompareResult {
  std::int64_t checked = 0;     // elements compared
  std::int64_t mismatches = 0;  // elements out of tolerance (NaN never passes)
  double max_abs_error = 0;
  double max_rel_error = 0;  // |gpu - ref| / |ref| over elements with ref != 0
  double max_ulp_error = 0;  // |gpu - ref| / ulp(dtype, ref)
  std::vector<Mismatch> first;
  bool ok() const { return mismatches == 0; }
  // One line of statistics, then one line per listed mismatch: "k[l=0,t=3,h=1,d=5] gpu=...
  // ref=...".
  std::string summary(const std::string& what = "out") const;
};

// `gpu_bits`: host copy of the kernel's output in `dtype`, laid out [L, T, H, D] like
// `ref` (gather pool rows into this layout first).
CompareResult compare(DType dtype, const void* gpu_bits, const ReferenceOutput& ref,
                      const CompareOptions& options = {});

}  // namespace fkv
