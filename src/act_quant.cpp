// act_quant: source, compile, load and launch of templates/quantize_act.cu (src/act_quant.hpp).
#include "act_quant.hpp"

#include <sstream>

#include "fkv/errors.hpp"
#include "fkv/options.hpp"
#include "fkv/runtime.hpp"

namespace fkv {
namespace {

constexpr const char* kTemplate = "quantize_act.cu";
constexpr const char* kHeaders[] = {"fkv_types.cuh", "act_row.cuh"};
constexpr int kThreads = 128;
constexpr int kExpandThreads = 256;

}  // namespace

KernelSource generate_quantize_act(DType act, int hidden, int group) {
  if (act != DType::BF16 && act != DType::FP16)
    throw ArgumentError("the FP8 GEMM quantizes bf16 or fp16 activations, not " + to_string(act));
  if (hidden <= 0 || hidden % 8 != 0)
    throw ArgumentError("the FP8 GEMM needs hidden a multiple of 8, got " + std::to_string(hidden));
  if (group != 0 && group != 128)
    throw ArgumentError("activation scales are per token (0) or per 128 columns, not " +
                        std::to_string(group));
  KernelSource out;
  out.short_name =
      "fkvqact_" + to_string(act) + "_x" + std::to_string(hidden) + "_g" + std::to_string(group);
  out.specialization = "quantize_act;act=" + to_string(act) + ";hidden=" + std::to_string(hidden) +
                       ";group=" + std::to_string(group) + ";threads=" + std::to_string(kThreads);
  std::ostringstream expr;
  expr << "fkv_kernels::quantize_act<" << device_type(act) << ", " << hidden << ", " << group
       << ", " << kThreads << ">";
  out.name_expression = expr.str();
  assemble_source(out, kTemplate, kHeaders, JitOptions::global(), "",
                  "template __global__ void " + out.name_expression + "(const " + device_type(act) +
                      "*, long long, long long, long long, unsigned char*, float*);\n");
  return out;
}

KernelSource generate_expand_scales() {
  KernelSource out;
  out.short_name = "fkvexpand_scales";
  out.specialization = "expand_scales";
  out.name_expression = "fkv_kernels::expand_scales";
  assemble_source(out, kTemplate, kHeaders, JitOptions::global(), "", "");
  return out;
}

KernelSource generate_scale_rows(DType act) {
  if (act != DType::BF16 && act != DType::FP16)
    throw ArgumentError("the FP8 GEMM writes bf16 or fp16 projections, not " + to_string(act));
  KernelSource out;
  out.short_name = "fkvscale_rows_" + to_string(act);
  out.specialization = "scale_rows;act=" + to_string(act);
  out.name_expression = "fkv_kernels::scale_rows<" + device_type(act) + ">";
  assemble_source(out, kTemplate, kHeaders, JitOptions::global(), "",
                  "template __global__ void " + out.name_expression +
                      "(const float*, const float*, " + device_type(act) +
                      "*, long long, long long);\n");
  return out;
}

ActQuantizer::ActQuantizer(DType act, int hidden, int group, bool expand, int device,
                           bool scale_rows)
    : quantize_(load_function(generate_quantize_act(act, hidden, group), device)) {
  if (expand) expand_ = load_function(generate_expand_scales(), device);
  if (scale_rows) scale_rows_ = load_function(generate_scale_rows(act), device);
}

void ActQuantizer::run(const void* x, std::int64_t ld, std::int64_t T, std::int64_t n, void* xq,
                       float* scales, CUstream stream) const {
  if (n <= 0) return;
  long long l = ld, t = T, nn = n;
  const void* xp = x;
  void* qp = xq;
  float* sp = scales;
  void* args[] = {&xp, &l, &t, &nn, &qp, &sp};
  launch_function(quantize_, static_cast<unsigned>(n), 1, kThreads, args, stream);
}

void ActQuantizer::scale_rows(const float* d, const float* row_scales, void* proj, std::int64_t T,
                              std::int64_t N, CUstream stream) const {
  if (scale_rows_.function == nullptr)
    throw ArgumentError("ActQuantizer: built without the row scaling");
  if (T <= 0) return;
  long long t = T, n = N;
  const float* dp = d;
  const float* sp = row_scales;
  void* pp = proj;
  void* args[] = {&dp, &sp, &pp, &t, &n};
  const std::int64_t vectors = T * N / 4;
  launch_function(scale_rows_,
                  static_cast<unsigned>((vectors + kExpandThreads - 1) / kExpandThreads), 1,
                  kExpandThreads, args, stream);
}

void ActQuantizer::expand(const float* per_layer, float* rows, std::int64_t rows_per_layer,
                          std::int64_t n, CUstream stream) const {
  if (expand_.function == nullptr)
    throw ArgumentError("ActQuantizer: built without the scale expansion");
  if (n <= 0) return;
  long long per = rows_per_layer, nn = n;
  const float* pp = per_layer;
  float* rp = rows;
  void* args[] = {&pp, &rp, &per, &nn};
  launch_function(expand_, static_cast<unsigned>((n + kExpandThreads - 1) / kExpandThreads), 1,
                  kExpandThreads, args, stream);
}

}  // namespace fkv
