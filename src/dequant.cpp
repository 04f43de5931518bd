// dequant: source, compile, load and launch of templates/dequant_weights.cu (src/dequant.hpp).
#include "dequant.hpp"

#include <sstream>

#include "fkv/errors.hpp"
#include "fkv/options.hpp"
#include "fkv/runtime.hpp"

namespace fkv {
namespace {

constexpr const char* kTemplate = "dequant_weights.cu";
constexpr const char* kHeaders[] = {"fkv_types.cuh"};
constexpr int kThreads = 256;

}  // namespace

KernelSource generate_dequant(WeightFormat weight, DType act, int hidden) {
  if (!is_quantized(weight)) throw ArgumentError("generate_dequant: dense weights need no kernel");
  if (act != DType::BF16 && act != DType::FP16)
    throw ArgumentError("quantized weights take bf16 or fp16 activations, not " + to_string(act));
  if (hidden <= 0 || hidden % 16 != 0)
    throw ArgumentError("quantized weights need hidden a multiple of 16, got " +
                        std::to_string(hidden));
  const int wq = weight == WeightFormat::Int8Channel ? 2 : 1;
  int ws = 2;
  if (scale_layout(weight) == ScaleLayout::PerLayer) ws = 1;
  if (scale_layout(weight) == ScaleLayout::Block128) ws = 3;
  KernelSource out;
  out.short_name =
      "fkvdeq_" + to_string(weight) + "_" + to_string(act) + "_x" + std::to_string(hidden);
  out.specialization = "dequant;w=" + to_string(weight) + ";act=" + to_string(act) +
                       ";hidden=" + std::to_string(hidden);
  std::ostringstream expr;
  expr << "fkv_kernels::dequant_weights<" << device_type(act) << ", " << wq << ", " << ws << ", "
       << hidden << ">";
  out.name_expression = expr.str();
  assemble_source(out, kTemplate, kHeaders, JitOptions::global(), "",
                  "template __global__ void " + out.name_expression +
                      "(const unsigned char*, const float*, " + device_type(act) +
                      "*, long long, long long, long long, long long);\n");
  return out;
}

Dequantizer::Dequantizer(WeightFormat weight, DType act, int hidden, int device)
    : hidden_(hidden), kernel_(load_function(generate_dequant(weight, act, hidden), device)) {}

void Dequantizer::run(const void* w, const float* scales, void* out, std::int64_t row0,
                      std::int64_t rows, std::int64_t rows_per_layer, CUstream stream) const {
  if (rows <= 0) return;
  const std::int64_t vectors = rows * (hidden_ / 16);
  const unsigned blocks = static_cast<unsigned>((vectors + kThreads - 1) / kThreads);
  long long r0 = row0, n = rows, per_layer = rows_per_layer,
            cols = (hidden_ + kWeightBlock - 1) / kWeightBlock;
  const void* wp = w;
  const float* sp = scales;
  void* op = out;
  void* args[] = {&wp, &sp, &op, &r0, &n, &per_layer, &cols};
  launch_function(kernel_, blocks, 1, kThreads, args, stream);
}

}  // namespace fkv
