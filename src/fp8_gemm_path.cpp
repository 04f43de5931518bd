// fp8_gemm_path: the FP8 GEMM path of FusedKVMaterializer (see fp8_gemm_path.hpp).
#include "fp8_gemm_path.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "fkv/fused_kv_materializer.hpp"  // cublaslt_library()

namespace fkv {
namespace {

std::int64_t column_blocks(std::int64_t hidden) {
  return (hidden + kWeightBlock - 1) / kWeightBlock;
}
std::int64_t padded4(std::int64_t n) { return (n + 3) / 4 * 4; }

}  // namespace

std::vector<KernelSource> Fp8GemmPath::sources(WeightFormat format, DType act,
                                               std::int64_t hidden) {
  const bool block = format == WeightFormat::Fp8Block;
  if (block && hidden % kWeightBlock != 0) return {};  // as make(): no FP8 GEMM
  const int h = static_cast<int>(hidden);
  std::vector<KernelSource> out = {generate_quantize_act(act, h, block ? kWeightBlock : 0)};
  if (block) return out;
  if (format == WeightFormat::Fp8Tensor) out.push_back(generate_expand_scales());
  if (hidden % kWeightBlock == 0) {
    out.push_back(generate_quantize_act(act, h, kWeightBlock));
    if (format == WeightFormat::Fp8Channel) out.push_back(generate_scale_rows(act));
  }
  return out;
}

std::unique_ptr<Fp8GemmPath> Fp8GemmPath::make(WeightFormat format, DType act, std::int64_t hidden,
                                               std::int64_t width, std::vector<Fp8GemmGroup> groups,
                                               const float* w_scales, std::int64_t max_tokens,
                                               std::shared_ptr<DeviceBuffer> workspace, int device,
                                               CUstream stream, bool stream_gemm) {
  const bool block = format == WeightFormat::Fp8Block;
  if (block && hidden % kWeightBlock != 0) return nullptr;  // partial activation groups: slices
  std::unique_ptr<Fp8GemmPath> p(new Fp8GemmPath());
  p->format_ = format;
  p->act_ = act;
  p->hidden_ = hidden;
  p->width_ = width;
  p->groups_ = std::move(groups);
  p->w_scales_ = w_scales;
  p->workspace_ = std::move(workspace);
  const bool tensor = format == WeightFormat::Fp8Tensor;
  p->quant_ = std::make_unique<ActQuantizer>(act, static_cast<int>(hidden), block ? 128 : 0, tensor,
                                             device);
  // fp8_tensor's scales as blocks: hidden and every group's rows per layer (and so its offset)
  // whole blocks. fp8_channel's unit blocks: hidden and all rows whole blocks.
  const bool channel = format == WeightFormat::Fp8Channel;
  bool as_blocks = (tensor || channel) && hidden % kWeightBlock == 0;
  for (const Fp8GemmGroup& g : p->groups_)
    as_blocks =
        as_blocks && (channel || (g.width % kWeightBlock == 0 && g.offset % kWeightBlock == 0));
  as_blocks = as_blocks && width % kWeightBlock == 0;
  if (as_blocks) {
    p->quant_blocks_ =
        std::make_unique<ActQuantizer>(act, static_cast<int>(hidden), 128, false, device, channel);
    p->block_scales_ = DeviceBuffer(p->block_scale_bytes());
    if (channel)  // every block scale 1 (the float's bits), set once: refresh leaves them
      FKV_CU(cuMemsetD32Async, p->block_scales_.get(), 0x3f800000u,
             p->block_scale_bytes() / sizeof(float), stream);
  }
  if (tensor)
    p->row_scales_ = DeviceBuffer(static_cast<std::size_t>(width) * sizeof(float));
  else if (block && column_blocks(hidden) % 4 != 0)
    p->row_scales_ = DeviceBuffer(p->block_scale_bytes());
  if (stream_gemm && !block) p->stream_ = Fp8StreamGemm::make(act, hidden, width, device);
  p->size(max_tokens);
  if (p->gemm_blocks_ &&
      !p->gemm_blocks_->supports(rows(std::min(max_tokens, kBlockTokens)))) {  // per-row only
    p->gemm_blocks_.reset();
    p->quant_blocks_.reset();
    p->block_scales_ = DeviceBuffer();
    p->d32_ = DeviceBuffer();
  }
  if (p->stream_ && !p->quant_blocks_)  // its activations per token and 128 columns
    p->stream_quant_ =
        std::make_unique<ActQuantizer>(act, static_cast<int>(hidden), 128, false, device);
  if (!p->gemm_->supports(rows(max_tokens))) {  // e.g. before sm_90
    spdlog::info(
        "fkv: cuBLASLt ({}) has no FP8 GEMM with these scales on device {}: {} weights above the "
        "decode crossover take dequantized slices",
        cublaslt_library(), device, to_string(format));
    return nullptr;
  }
  p->fill_scales(stream);
  return p;
}

std::size_t Fp8GemmPath::block_scale_bytes() const {
  return static_cast<std::size_t>(width_ / kWeightBlock * padded4(column_blocks(hidden_))) *
         sizeof(float);
}

const float* Fp8GemmPath::gemm_scales() const {
  return row_scales_.size() ? static_cast<const float*>(row_scales_.ptr()) : w_scales_;
}

void Fp8GemmPath::size(std::int64_t max_tokens) {
  const bool block = format_ == WeightFormat::Fp8Block;
  // The stream GEMM reads its token count's rows (zeros past the call's) whatever max_tokens.
  const std::int64_t n =
      stream_ ? std::max(rows(max_tokens), Fp8StreamGemm::kMaxTokens) : rows(max_tokens);
  const std::int64_t per_token = block || quant_blocks_ || stream_ ? column_blocks(hidden_) : 1;
  xq_ = DeviceBuffer(static_cast<std::size_t>(n * hidden_));
  xq_scales_ = DeviceBuffer(static_cast<std::size_t>(n * per_token) * sizeof(float));
  const auto* x_scales = static_cast<const float*>(xq_scales_.ptr());
  if (gemm_)
    gemm_->set_x_scales(x_scales);
  else
    gemm_ = std::make_unique<ScaledGemm>(act_, hidden_, width_,
                                         block ? GemmScales::BlockGroup : GemmScales::RowToken,
                                         gemm_scales(), x_scales, workspace_);
  if (gemm_blocks_)
    gemm_blocks_->set_x_scales(x_scales);
  else if (quant_blocks_)
    gemm_blocks_ = std::make_unique<ScaledGemm>(
        channel_blocks() ? DType::FP32 : act_, hidden_, width_, GemmScales::BlockGroup,
        static_cast<const float*>(block_scales_.ptr()), x_scales, workspace_);
  if (channel_blocks())
    d32_ =
        DeviceBuffer(static_cast<std::size_t>(rows(std::min(max_tokens, kBlockTokens)) * width_) *
                     sizeof(float));
}

void Fp8GemmPath::reserve(std::int64_t max_tokens, std::vector<DeviceBuffer>& retired) {
  retired.push_back(std::move(xq_));
  retired.push_back(std::move(xq_scales_));
  if (d32_.size()) retired.push_back(std::move(d32_));
  size(max_tokens);
}

bool Fp8GemmPath::run(const void* w, const void* x, std::int64_t ld, std::int64_t T, void* proj,
                      CUstream stream) {
  const std::int64_t n = rows(T);
  auto* scales = static_cast<float*>(xq_scales_.ptr());
  if (stream_ && T <= Fp8StreamGemm::kMaxTokens) {
    (quant_blocks_ ? *quant_blocks_ : *stream_quant_)
        .run(x, ld, T, Fp8StreamGemm::padded(T), xq_.ptr(), scales, stream);
    stream_->run(w, xq_.ptr(), scales, gemm_scales(), T, proj, stream);
    return true;
  }
  if (gemm_blocks_ && n <= kBlockTokens && gemm_blocks_->supports(n)) {
    quant_blocks_->run(x, ld, T, n, xq_.ptr(), scales, stream);
    if (!channel_blocks()) {
      gemm_blocks_->run(w, xq_.ptr(), n, proj, stream);
      return true;
    }
    gemm_blocks_->run(w, xq_.ptr(), n, d32_.ptr(), stream);
    quant_blocks_->scale_rows(static_cast<const float*>(d32_.ptr()), w_scales_, proj, T, width_,
                              stream);
    return true;
  }
  if (!gemm_->supports(n)) return false;
  quant_->run(x, ld, T, n, xq_.ptr(), scales, stream);
  gemm_->run(w, xq_.ptr(), n, proj, stream);
  return true;
}

void Fp8GemmPath::fill_scales(CUstream stream) const {
  if (row_scales_.size() == 0) return;  // the GEMM reads the packed scales themselves
  const std::int64_t kb = column_blocks(hidden_);
  if (format_ == WeightFormat::Fp8Tensor) {
    // Per row, and where the blocks are used per 128 x 128 block (rows of kb4 blocks): both are
    // the layer's scale repeated, so the same expansion makes them.
    const std::int64_t kb4 = padded4(kb);
    for (const Fp8GemmGroup& g : groups_) {
      const float* per_layer = w_scales_ + g.scale_offset;
      const std::int64_t n = g.width * g.layers;
      quant_->expand(per_layer, static_cast<float*>(row_scales_.ptr()) + g.offset, g.width, n,
                     stream);
      if (gemm_blocks_)
        quant_->expand(per_layer,
                       static_cast<float*>(block_scales_.ptr()) + g.offset / kWeightBlock * kb4,
                       g.width / kWeightBlock * kb4, n / kWeightBlock * kb4, stream);
    }
    return;
  }
  // fp8_block: each row of kb blocks padded to a multiple of 4.
  CUDA_MEMCPY2D c{};
  c.srcMemoryType = CU_MEMORYTYPE_DEVICE;
  c.srcDevice = reinterpret_cast<CUdeviceptr>(w_scales_);
  c.srcPitch = static_cast<std::size_t>(kb) * sizeof(float);
  c.dstMemoryType = CU_MEMORYTYPE_DEVICE;
  c.dstDevice = row_scales_.get();
  c.dstPitch = static_cast<std::size_t>(padded4(kb)) * sizeof(float);
  c.WidthInBytes = static_cast<std::size_t>(kb) * sizeof(float);
  c.Height = static_cast<std::size_t>(width_ / kWeightBlock);
  FKV_CU(cuMemcpy2DAsync, &c, stream);
}

}  // namespace fkv
