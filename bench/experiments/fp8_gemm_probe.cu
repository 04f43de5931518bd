// What cuBLASLt's FP8 GEMM does on this GPU for the draft's K/V projection shape, before the
// materializer relies on it (docs/performance.md, "FP8 GEMM above 64 tokens"):
//   - which scale modes find an algorithm (SCALAR, OUTER_VEC per row / per token, BLK128x128
//     weights with VEC128 activation groups), with bf16 output;
//   - whether the scale layouts assumed are the ones cuBLASLt reads: each result is checked on
//     sampled entries against float64 of the FP8 values times their scales (a wrong layout is
//     off by O(1), a right one within bf16's rounding);
//   - how long each takes with cold L2 (a 256 MB write between calls), against the bf16 GEMM of
//     the same shape. Medians of 30 calls timed one by one with events;
//   - with FKV_PROBE_ALGOS=K (default 1), each of the first K algorithms cuBLASLt's heuristic
//     returns, one row each (the materializer takes the first).
// Standalone: nvcc -O2 -arch=sm_90 bench/experiments/fp8_gemm_probe.cu -lcublasLt -o probe
//   ./probe [rows=10240] [hidden=4096] [tokens=64,128,256,512,1024,4096]
#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#define CK(x)                                                                          \
  do {                                                                                 \
    cudaError_t e_ = (x);                                                              \
    if (e_ != cudaSuccess) {                                                           \
      std::printf("CUDA error %s at %s:%d\n", cudaGetErrorString(e_), __FILE__, __LINE__); \
      std::exit(1);                                                                    \
    }                                                                                  \
  } while (0)
#define LT(x)                                                                  \
  do {                                                                         \
    cublasStatus_t s_ = (x);                                                   \
    if (s_ != CUBLAS_STATUS_SUCCESS) {                                         \
      std::printf("cuBLASLt status %d at %s:%d\n", (int)s_, __FILE__, __LINE__); \
      std::exit(1);                                                            \
    }                                                                          \
  } while (0)

enum Mode { kBf16, kScalar, kOuter, kBlock };
const char* name(Mode m) {
  return m == kBf16 ? "bf16" : m == kScalar ? "fp8 scalar" : m == kOuter ? "fp8 outer_vec" : "fp8 blk128/vec128";
}

struct Host {
  int M, K, T, KB, KB4, T4;
  std::vector<unsigned char> w, x;        // e4m3 codes [M, K], [T, K]
  std::vector<__nv_bfloat16> wb, xb;      // bf16 values [M, K], [T, K]
  std::vector<float> ws_row, xs_tok;      // OUTER_VEC: [M], [T]
  std::vector<float> ws_blk, xs_grp;      // BLK: [M/128][KB4], VEC128: [KB][T]
};

float e4m3(unsigned char c) {
  __nv_fp8_e4m3 v;
  v.__x = c;  // the code itself (a constructor from an integer would convert its value)
  return float(v);
}

int main(int argc, char** argv) {
  const int M = argc > 1 ? std::atoi(argv[1]) : 10240;
  const int K = argc > 2 ? std::atoi(argv[2]) : 4096;
  std::vector<int> tokens = {64, 128, 256, 512, 1024, 4096};
  if (argc > 3) {
    tokens.clear();
    std::stringstream ss(argv[3]);
    for (std::string t; std::getline(ss, t, ',');) tokens.push_back(std::atoi(t.c_str()));
  }
  const int Tmax = *std::max_element(tokens.begin(), tokens.end());
  const int KB = (K + 127) / 128, KB4 = (KB + 3) / 4 * 4;
  std::mt19937 rng(20261202);
  std::uniform_int_distribution<int> code(0, 255);
  std::uniform_real_distribution<float> us(0.5f, 2.0f), un(-1.f, 1.f);
  auto fp8 = [&] {
    int c;
    do c = code(rng); while ((c & 0x7f) == 0x7f);  // no NaN
    return (unsigned char)c;
  };
  Host h{M, K, Tmax, KB, KB4, Tmax};
  h.w.resize((size_t)M * K);
  h.x.resize((size_t)Tmax * K);
  h.wb.resize(h.w.size());
  h.xb.resize(h.x.size());
  for (size_t i = 0; i < h.w.size(); ++i) h.w[i] = fp8(), h.wb[i] = __float2bfloat16(un(rng));
  for (size_t i = 0; i < h.x.size(); ++i) h.x[i] = fp8(), h.xb[i] = __float2bfloat16(un(rng));
  h.ws_row.resize(M);
  h.xs_tok.resize(Tmax);
  h.ws_blk.assign((size_t)(M / 128) * KB4, 0.f);
  h.xs_grp.resize((size_t)KB * Tmax);
  for (auto& v : h.ws_row) v = us(rng) / 256;
  for (auto& v : h.xs_tok) v = us(rng) / 256;
  for (auto& v : h.ws_blk) v = us(rng) / 256;
  for (auto& v : h.xs_grp) v = us(rng) / 256;

  unsigned char *dw, *dx;
  __nv_bfloat16 *dwb, *dxb, *dout;
  float *dws_row, *dxs_tok, *dws_blk, *dxs_grp, *done;
  void* flush;
  void* workspace;
  const size_t wsb = 32u << 20;
  CK(cudaMalloc(&dw, h.w.size()));
  CK(cudaMalloc(&dx, h.x.size()));
  CK(cudaMalloc(&dwb, h.wb.size() * 2));
  CK(cudaMalloc(&dxb, h.xb.size() * 2));
  CK(cudaMalloc(&dout, (size_t)M * Tmax * 2));
  CK(cudaMalloc(&dws_row, M * 4));
  CK(cudaMalloc(&dxs_tok, Tmax * 4));
  CK(cudaMalloc(&dws_blk, h.ws_blk.size() * 4));
  CK(cudaMalloc(&dxs_grp, h.xs_grp.size() * 4));
  CK(cudaMalloc(&done, 4));
  CK(cudaMalloc(&flush, 256u << 20));
  CK(cudaMalloc(&workspace, wsb));
  CK(cudaMemcpy(dw, h.w.data(), h.w.size(), cudaMemcpyHostToDevice));
  CK(cudaMemcpy(dx, h.x.data(), h.x.size(), cudaMemcpyHostToDevice));
  CK(cudaMemcpy(dwb, h.wb.data(), h.wb.size() * 2, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(dxb, h.xb.data(), h.xb.size() * 2, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(dws_row, h.ws_row.data(), M * 4, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(dxs_tok, h.xs_tok.data(), Tmax * 4, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(dws_blk, h.ws_blk.data(), h.ws_blk.size() * 4, cudaMemcpyHostToDevice));
  const float one = 1.0f;
  CK(cudaMemcpy(done, &one, 4, cudaMemcpyHostToDevice));

  cublasLtHandle_t lt;
  LT(cublasLtCreate(&lt));
  std::printf("cuBLASLt %zu, M=%d K=%d\n", cublasLtGetVersion(), M, K);
  std::printf("%-20s %6s %8s %10s %10s\n", "mode", "T", "algo", "median_us", "max_rel");
  for (int T : tokens) {
    // VEC128 activation scales for this T: [KB][T], token fastest.
    std::vector<float> grp((size_t)KB * T);
    for (int b = 0; b < KB; ++b)
      for (int t = 0; t < T; ++t) grp[(size_t)b * T + t] = h.xs_grp[(size_t)b * Tmax + t];
    CK(cudaMemcpy(dxs_grp, grp.data(), grp.size() * 4, cudaMemcpyHostToDevice));
    double bf16_us = 0;
    for (Mode mode : {kBf16, kScalar, kOuter, kBlock}) {
      const bool f8 = mode != kBf16;
      cublasLtMatmulDesc_t op;
      LT(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
      const cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
      LT(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
      LT(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
      const void *as = done, *bs = done;
      cublasLtMatmulMatrixScale_t am = CUBLASLT_MATMUL_MATRIX_SCALE_SCALAR_32F, bm = am;
      if (mode == kOuter) am = bm = CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F, as = dws_row, bs = dxs_tok;
      if (mode == kBlock)
        am = CUBLASLT_MATMUL_MATRIX_SCALE_BLK128x128_32F, bm = CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F,
        as = dws_blk, bs = dxs_grp;
      if (f8) {
        LT(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_A_SCALE_MODE, &am, sizeof am));
        LT(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_B_SCALE_MODE, &bm, sizeof bm));
        LT(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &as, sizeof as));
        LT(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &bs, sizeof bs));
      }
      const cudaDataType_t in = f8 ? CUDA_R_8F_E4M3 : CUDA_R_16BF;
      cublasLtMatrixLayout_t la, lb, ld;
      LT(cublasLtMatrixLayoutCreate(&la, in, K, M, K));
      LT(cublasLtMatrixLayoutCreate(&lb, in, K, T, K));
      LT(cublasLtMatrixLayoutCreate(&ld, CUDA_R_16BF, M, T, M));
      cublasLtMatmulPreference_t pref;
      LT(cublasLtMatmulPreferenceCreate(&pref));
      LT(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &wsb, sizeof wsb));
      const int want = std::getenv("FKV_PROBE_ALGOS") ? std::atoi(std::getenv("FKV_PROBE_ALGOS")) : 1;
      std::vector<cublasLtMatmulHeuristicResult_t> rs(std::max(1, want));
      int found = 0;
      const cublasStatus_t hs =
          cublasLtMatmulAlgoGetHeuristic(lt, op, la, lb, ld, ld, pref, (int)rs.size(), rs.data(), &found);
      for (int ai = 0; ai < std::max(1, hs == CUBLAS_STATUS_SUCCESS ? found : 0); ++ai) {
      const cublasLtMatmulHeuristicResult_t& r = rs[ai];
      double med = -1, max_rel = -1;
      if (hs == CUBLAS_STATUS_SUCCESS && found > 0) {
        const float alpha = 1.f, beta = 0.f;
        auto call = [&] {
          LT(cublasLtMatmul(lt, op, &alpha, f8 ? (void*)dw : (void*)dwb, la, f8 ? (void*)dx : (void*)dxb, lb,
                            &beta, dout, ld, dout, ld, &r.algo, workspace, wsb, 0));
        };
        CK(cudaMemset(dout, 0xff, (size_t)M * T * 2));
        call();
        CK(cudaDeviceSynchronize());
        std::vector<__nv_bfloat16> out((size_t)M * T);
        CK(cudaMemcpy(out.data(), dout, out.size() * 2, cudaMemcpyDeviceToHost));
        max_rel = 0;
        std::uniform_int_distribution<int> rm(0, M - 1), rt(0, T - 1);
        for (int s = 0; s < 256; ++s) {
          const int m = rm(rng), t = rt(rng);
          double ref = 0, mag = 0;
          for (int k = 0; k < K; ++k) {
            double a, b;
            if (!f8) {
              a = __bfloat162float(h.wb[(size_t)m * K + k]);
              b = __bfloat162float(h.xb[(size_t)t * K + k]);
            } else {
              a = e4m3(h.w[(size_t)m * K + k]);
              b = e4m3(h.x[(size_t)t * K + k]);
              if (mode == kOuter) a *= h.ws_row[m], b *= h.xs_tok[t];
              if (mode == kBlock)
                a *= h.ws_blk[(size_t)(m / 128) * KB4 + k / 128], b *= h.xs_grp[(size_t)(k / 128) * Tmax + t];
            }
            ref += a * b;
            mag += std::fabs(a * b);
          }
          const double got = __bfloat162float(out[(size_t)t * M + m]);
          max_rel = std::max(max_rel, std::fabs(got - ref) / (std::fabs(ref) + 1e-3 * mag));
        }
        std::vector<float> us;
        cudaEvent_t e0, e1;
        CK(cudaEventCreate(&e0));
        CK(cudaEventCreate(&e1));
        for (int i = 0; i < 35; ++i) {
          CK(cudaMemsetAsync(flush, i, 256u << 20, 0));
          CK(cudaEventRecord(e0, 0));
          call();
          CK(cudaEventRecord(e1, 0));
          CK(cudaEventSynchronize(e1));
          float ms;
          CK(cudaEventElapsedTime(&ms, e0, e1));
          if (i >= 5) us.push_back(ms * 1000);
        }
        std::sort(us.begin(), us.end());
        med = us[us.size() / 2];
        if (mode == kBf16 && ai == 0) bf16_us = med;
      }
      std::printf("%-20s %6d %4d/%-3d %10.2f %10.3g%s\n", name(mode), T, ai, found, med, max_rel,
                  mode != kBf16 && med > 0 ? (" (" + std::to_string(med / bf16_us).substr(0, 4) + "x bf16)").c_str() : "");
      }
      cublasLtMatmulPreferenceDestroy(pref);
      cublasLtMatrixLayoutDestroy(la);
      cublasLtMatrixLayoutDestroy(lb);
      cublasLtMatrixLayoutDestroy(ld);
      cublasLtMatmulDescDestroy(op);
    }
  }
  return 0;
}
