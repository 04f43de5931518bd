// rope: the cos/sin cache of one layer group (docs/rope.md), computed on the host in float64 from
// the group's RopeFrequencies, following HuggingFace transformers' modeling_rope_utils.py
// (docs/rope.md gives every formula and its source).
//
// Layout: [max_position, R] row-major, row p = position p; columns [0, R/2) hold
// cos(p * inv_freq[i]) * attention_factor and columns [R/2, R) the matching sin.
#pragma once

#include <cuda.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "fkv/config.hpp"
#include "fkv/spec.hpp"

namespace fkv {

// Facts outside RopeFrequencies that some rope types need.
struct RopeOptions {
  // The model's max_position_embeddings. Used by `dynamic`, by yarn/longrope to derive a
  // missing `factor` (max_position_embeddings / original_max_position_embeddings), and as the
  // fallback of a missing original_max_position_embeddings (llama3, yarn, longrope), like
  // transformers' standardize_rope_params. 0 = unknown: an error only where it is needed.
  std::int64_t max_position_embeddings = 0;
  // The sequence length at which the sequence-length-dependent types are evaluated once
  // (static form): dynamic NTK's base and longrope's choice of short/long factors.
  // 0 = the table's max_position.
  std::int64_t seq_len = 0;
};

// The most rows a RoPE table may have: 2^31 positions. Far beyond any context length, and small
// enough that max_position * rotary_dim * 8 (the float64 table) cannot overflow size_t.
inline constexpr std::int64_t kMaxRopePositions = std::int64_t{1} << 31;

// The cos/sin table of one frequency set. Cheap to construct (keeps R/2 frequencies, not the
// table); the entries are computed on demand. Immutable, so safe to share between threads.
class RopeTable {
 public:
  // Throws ConfigError for an unknown rope type (naming it and listing the supported ones), a
  // missing or malformed scaling key (naming it), rotary_dim odd or < 2, max_position < 1 or
  // above kMaxRopePositions, and
  // parameters whose table would not be finite (a frequency that is not finite, negative or
  // above 1e280; an attention factor that is not finite, <= 0 or above 65504). A table that
  // constructs is finite in every dtype for every position; validate() constructs one per group.
  // `freq.scaling` may also hold keys that do not change the table (rope_type, type,
  // rope_theta, partial_rotary_factor, mrope_section, mrope_interleaved); they are ignored.
  // A `max_position_embeddings` key there (the config module records it for longrope) stands
  // in for options.max_position_embeddings when that is 0.
  RopeTable(const RopeFrequencies& freq, int rotary_dim, std::int64_t max_position,
            const RopeOptions& options = {});

  // Rope types accepted by the constructor, in the order docs/rope.md lists them. "mrope" is
  // accepted too, as an alias of "default" (transformers' Qwen2-VL config does the same).
  static const std::vector<std::string>& supported_types();

  int rotary_dim() const { return rotary_dim_; }
  std::int64_t max_position() const { return max_position_; }
  const std::string& type() const { return type_; }  // after aliasing ("mrope" -> "default")
  // inv_freq[i] for i < R/2: radians per position of rotary pair i.
  const std::vector<double>& inv_freq() const { return inv_freq_; }
  // Multiplies every cos and sin entry (yarn and longrope; 1.0 for the other types).
  double attention_factor() const { return attention_factor_; }

  // Table entries in float64; pos < max_position, i < R/2 (unchecked).
  double cos(std::int64_t pos, int i) const;
  double sin(std::int64_t pos, int i) const;
  // The whole table in float64, [max_position, R] row-major (max_position * R doubles).
  // Throws ArgumentError when that size does not fit in size_t (never for a table that
  // constructed), std::bad_alloc when it cannot be allocated.
  std::vector<double> values() const;

  // The whole table converted once, round-to-nearest-even, to `dtype` (FP32, BF16, FP16), as
  // little-endian bytes ready to upload (max_position * R * dtype_size bytes). Throws
  // ArgumentError for any other dtype, or when the size does not fit in size_t.
  std::vector<std::uint8_t> bytes(DType dtype) const;
  std::size_t size_bytes(DType dtype) const;

 private:
  std::size_t checked_size(std::size_t elem) const;

  std::string type_;
  int rotary_dim_ = 0;
  std::int64_t max_position_ = 0;
  std::vector<double> inv_freq_;
  double attention_factor_ = 1.0;
};

// Copies table.bytes(dtype) to `dst` (at least table.size_bytes(dtype) bytes of device memory
// in the current context) with cuMemcpyHtoDAsync on `stream`. The source is pageable host
// memory, so the driver stages it before returning and the call may synchronize the stream:
// a setup-time operation, not for use while the stream is capturing. Throws CudaError.
void upload(const RopeTable& table, DType dtype, CUdeviceptr dst, CUstream stream);

// float64 -> IEEE bit patterns, rounded once to nearest, ties to even (no double rounding
// through float), with subnormals, overflow to infinity and NaN kept.
std::uint32_t fp32_bits(double x);
std::uint16_t bf16_bits(double x);
std::uint16_t fp16_bits(double x);

}  // namespace fkv
