// int8_gemm_path: the INT8 GEMM path of FusedKVMaterializer (see int8_gemm_path.hpp).
#include "int8_gemm_path.hpp"

#include <spdlog/spdlog.h>

#include <sstream>
#include <utility>

#include "fkv/errors.hpp"
#include "fkv/fused_kv_materializer.hpp"  // cublaslt_library()
#include "fkv/options.hpp"

namespace fkv {
namespace {

constexpr const char* kTemplate = "int8_split.cu";
constexpr const char* kHeaders[] = {"fkv_types.cuh", "act_row.cuh"};
constexpr int kSplitThreads = 128;
constexpr int kCombineThreads = 256;

void check_act(DType act) {
  if (act != DType::BF16 && act != DType::FP16)
    throw ArgumentError("the INT8 GEMM splits bf16 or fp16 activations, not " + to_string(act));
}

KernelSource split_source(DType act, std::int64_t hidden) {
  check_act(act);
  if (hidden <= 0 || hidden % 8 != 0)
    throw ArgumentError("the INT8 GEMM needs hidden a multiple of 8, got " +
                        std::to_string(hidden));
  KernelSource out;
  out.short_name = "fkvsplit8_" + to_string(act) + "_x" + std::to_string(hidden);
  out.specialization = "split_act_int8;act=" + to_string(act) +
                       ";hidden=" + std::to_string(hidden) +
                       ";threads=" + std::to_string(kSplitThreads);
  std::ostringstream expr;
  expr << "fkv_kernels::split_act_int8<" << device_type(act) << ", " << hidden << ", "
       << kSplitThreads << ">";
  out.name_expression = expr.str();
  assemble_source(out, kTemplate, kHeaders, JitOptions::global(), "",
                  "template __global__ void " + out.name_expression + "(const " + device_type(act) +
                      "*, long long, long long, long long, signed char*, "
                      "float*);\n");
  return out;
}

KernelSource combine_source(DType act) {
  check_act(act);
  KernelSource out;
  out.short_name = "fkvcombine8_" + to_string(act);
  out.specialization =
      "combine_int8;act=" + to_string(act) + ";threads=" + std::to_string(kCombineThreads);
  std::ostringstream expr;
  expr << "fkv_kernels::combine_int8<" << device_type(act) << ", " << kCombineThreads << ">";
  out.name_expression = expr.str();
  assemble_source(out, kTemplate, kHeaders, JitOptions::global(), "",
                  "template __global__ void " + out.name_expression +
                      "(const int*, long long, long long, const float*, const float*, " +
                      device_type(act) + "*);\n");
  return out;
}

}  // namespace

std::vector<KernelSource> Int8GemmPath::sources(DType act, std::int64_t hidden) {
  return {split_source(act, hidden), combine_source(act)};
}

std::unique_ptr<Int8GemmPath> Int8GemmPath::make(DType act, std::int64_t hidden, std::int64_t width,
                                                 const float* w_scales, std::int64_t max_tokens,
                                                 std::shared_ptr<DeviceBuffer> workspace,
                                                 int device) {
  if (max_tokens <= 0 || width % 4 != 0) return nullptr;
  std::unique_ptr<Int8GemmPath> p(new Int8GemmPath());
  p->hidden_ = hidden;
  p->width_ = width;
  p->w_scales_ = w_scales;
  p->mm_ = std::make_unique<LtMatmul>(CUDA_R_8I, hidden, width, std::move(workspace), true);
  if (!p->shape(2 * rows(1)).found || !p->shape(2 * rows(max_tokens)).found) {
    spdlog::info(
        "fkv: cuBLASLt ({}) has no int8 GEMM for these shapes on device {}: INT8 weights above "
        "the decode crossover take dequantized slices",
        cublaslt_library(), device);
    return nullptr;
  }
  p->split_ = load_function(split_source(act, hidden), device);
  p->combine_ = load_function(combine_source(act), device);
  std::vector<DeviceBuffer> none;
  p->reserve(max_tokens, none);
  return p;
}

const LtShape& Int8GemmPath::shape(std::int64_t n) {
  return mm_->shape(shapes_, n, [&](LtShape& s) {
    FKV_LT(cublasLtMatrixLayoutCreate, &s.b, CUDA_R_8I, hidden_, n, hidden_);
    FKV_LT(cublasLtMatrixLayoutCreate, &s.d, CUDA_R_32I, width_, n, width_);
  });
}

void Int8GemmPath::reserve(std::int64_t max_tokens, std::vector<DeviceBuffer>& retired) {
  if (max_tokens <= max_tokens_) return;
  if (xq_.size()) {
    retired.push_back(std::move(xq_));
    retired.push_back(std::move(x_scales_));
    retired.push_back(std::move(acc_));
  }
  max_tokens_ = max_tokens;
  const auto n = static_cast<std::size_t>(rows(max_tokens));
  xq_ = DeviceBuffer(2 * n * static_cast<std::size_t>(hidden_));
  x_scales_ = DeviceBuffer(n * sizeof(float));
  acc_ = DeviceBuffer(2 * n * static_cast<std::size_t>(width_) * sizeof(std::int32_t));
}

bool Int8GemmPath::run(const void* w, const void* x, std::int64_t ld, std::int64_t T, void* proj,
                       CUstream stream) {
  if (T <= 0 || T > max_tokens_ || T > 65535) return false;  // T: the combine's grid.y
  const std::int64_t n = rows(T);
  const LtShape& sh = shape(2 * n);
  if (!sh.found) return false;
  long long l = ld, t = T, nn = n, N = width_;
  const void* xp = x;
  void* qp = xq_.ptr();
  void* sp = x_scales_.ptr();
  void* split_args[] = {&xp, &l, &t, &nn, &qp, &sp};
  launch_function(split_, static_cast<unsigned>(n), 1, kSplitThreads, split_args, stream);
  mm_->run(w, nullptr, sh, xq_.ptr(), acc_.ptr(), stream);
  const void* ap = acc_.ptr();
  const float* wsp = w_scales_;
  void* pp = proj;
  void* combine_args[] = {&ap, &nn, &N, &sp, &wsp, &pp};
  const std::int64_t per_cta = 4 * kCombineThreads;
  launch_function(combine_, static_cast<unsigned>((width_ + per_cta - 1) / per_cta),
                  static_cast<unsigned>(T), kCombineThreads, combine_args, stream);
  return true;
}

}  // namespace fkv
