// fp8_stream_gemm: the FP8 stream GEMM's source, load, tensor maps and launch (see
// fp8_stream_gemm.hpp).
#include "fp8_stream_gemm.hpp"

#include <algorithm>
#include <sstream>

#include "fkv/errors.hpp"
#include "fkv/options.hpp"
#include "tensor_map.hpp"

namespace fkv {
namespace {

constexpr const char* kTemplate = "fp8_stream.cu";
constexpr const char* kHeaders[] = {"fkv_types.cuh"};
constexpr int kThreads = 384;  // templates/fp8_stream.cu, kThreads
constexpr int kMaxRows = 128;  // kMaxRows: a CTA's rows at most
constexpr int kBlock = 128;    // kBlock
constexpr int kStages = 8;     // the ring: 8 stages of 24 KB (64 tokens) or 20 KB (32)

KernelSource stream_source(DType act, int tokens) {
  if (act != DType::BF16 && act != DType::FP16)
    throw ArgumentError("the FP8 stream GEMM writes bf16 or fp16 projections, not " +
                        to_string(act));
  KernelSource out;
  out.short_name = "fkvfp8stream_" + to_string(act) + "_n" + std::to_string(tokens);
  out.specialization = "fp8_stream_gemm;act=" + to_string(act) + ";n=" + std::to_string(tokens) +
                       ";stages=" + std::to_string(kStages);
  out.arch_specific = true;
  std::ostringstream expr;
  expr << "fkv_kernels::fp8_stream_gemm<" << device_type(act) << ", " << tokens << ", " << kStages
       << ">";
  out.name_expression = expr.str();
  assemble_source(
      out, kTemplate, kHeaders, JitOptions::global(), "",
      "template __global__ void " + out.name_expression +
          "(const __grid_constant__ fkv_kernels::fp8_stream::TensorMap, const __grid_constant__ "
          "fkv_kernels::fp8_stream::TensorMap, const float*, const float*, " +
          device_type(act) + "*, int, int, int, int);\n");
  return out;
}

// The ring's alignment and stages, then the x scales of every k block.
std::int64_t shared_bytes(int tokens, std::int64_t hidden) {
  return 1024 + std::int64_t{kStages} * (kMaxRows + tokens) * kBlock +
         hidden / kBlock * tokens * std::int64_t{sizeof(float)};
}
constexpr std::int64_t kMaxShared = 227 * 1024;  // sm_90's opt-in limit per block

}  // namespace

std::vector<KernelSource> Fp8StreamGemm::sources(DType act) {
  return {stream_source(act, 32), stream_source(act, 64)};
}

std::unique_ptr<Fp8StreamGemm> Fp8StreamGemm::make(DType act, std::int64_t hidden,
                                                   std::int64_t rows, int device) {
  if (!runs_sm90a(Runtime::device_target(device))) return nullptr;
  int sms = 0;
  CUdevice dev = 0;
  FKV_CU(cuDeviceGet, &dev, device);
  FKV_CU(cuDeviceGetAttribute, &sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev);
  // One CTA per SM (fewer for fewer than 8 rows each), each with at most 128 rows.
  if (hidden % kBlock != 0 || rows <= 0 || rows > std::int64_t{kMaxRows} * sms ||
      shared_bytes(kMaxTokens, hidden) > kMaxShared)  // hidden up to 14 848
    return nullptr;
  std::unique_ptr<Fp8StreamGemm> g(new Fp8StreamGemm());
  g->hidden_ = hidden;
  g->rows_ = rows;
  g->grid_ = std::min<std::int64_t>(sms, (rows + 7) / 8);
  g->box_rows_ = ((rows + g->grid_ - 1) / g->grid_ + 7) / 8 * 8;
  g->k32_ = load_function(stream_source(act, 32), device);
  g->k64_ = load_function(stream_source(act, 64), device);
  g->shared32_ = static_cast<unsigned>(shared_bytes(32, hidden));
  g->shared64_ = static_cast<unsigned>(shared_bytes(64, hidden));
  FKV_CU(cuFuncSetAttribute, g->k32_.function, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
         static_cast<int>(g->shared32_));
  FKV_CU(cuFuncSetAttribute, g->k64_.function, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
         static_cast<int>(g->shared64_));
  return g;
}

void Fp8StreamGemm::encode(Map& m, const void* base, std::int64_t box_rows,
                           std::int64_t rows) const {
  if (m.base == base) return;
  m.map = encode_byte_map(base, hidden_, rows, hidden_, static_cast<int>(box_rows));
  m.base = base;
}

void Fp8StreamGemm::run(const void* w, const void* xq, const float* x_scales,
                        const float* row_scales, std::int64_t T, void* proj, CUstream stream) {
  if (T <= 0) return;
  if (T > kMaxTokens)
    throw ArgumentError("the FP8 stream GEMM takes up to 64 tokens, not " + std::to_string(T));
  const std::int64_t n = padded(T);
  encode(w_map_, w, box_rows_, rows_);
  Map& xm = n == 32 ? x32_map_ : x64_map_;
  encode(xm, xq, n, n);
  const LoadedFunction& f = n == 32 ? k32_ : k64_;
  int t = static_cast<int>(T), rows = static_cast<int>(rows_),
      kb = static_cast<int>(hidden_ / kBlock), box = static_cast<int>(box_rows_);
  void* args[] = {&w_map_.map, &xm.map, &row_scales, &x_scales, &proj, &t, &rows, &kb, &box};
  launch_function(f, static_cast<unsigned>(grid_), 1, kThreads, args, stream,
                  n == 32 ? shared32_ : shared64_);
}

}  // namespace fkv
