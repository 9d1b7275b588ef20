// lt_space.cu: how far cuBLASLt's heuristic list is from the best
// configuration cuBLASLt can run for one bf16 problem. Row-major
// D[m, n] = A[m, k] B^T (B [n, k], `tn`) or D[m, n] = A[m, k] B (B [k, n],
// `nn`), f32 accumulation, beta 0, the operands rotated over enough sets
// to defeat the 50 MB L2 (as baracuda-bench and bench/torch_baseline.py
// time them).
//
//   lt_space M N K [tn|nn]
//
// Prints the heuristic's top 16 with every config attribute and its time,
// then walks every algorithm id x tile x stages x cluster shape that
// cublasLtMatmulAlgoCheck accepts (split-k 1, inner shape, swizzle and
// custom option 0), times each with 5 launches, re-times the 24 fastest
// with every swizzle / custom option, 40 launches each, and prints the
// ranking. Times: median of per-launch CUDA-event pairs.
// Build: nvcc -O2 -std=c++17 lt_space.cu -lcublasLt -o lt_space
#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

#include "check.cuh"

struct Cfg {
  cublasLtMatmulAlgo_t algo;
  float ms;
};

static unsigned cfg(const cublasLtMatmulAlgo_t& a, cublasLtMatmulAlgoConfigAttributes_t w) {
  // The attribute's size first: a buffer of any other size is refused.
  size_t sz = 0;
  cublasLtMatmulAlgoConfigGetAttribute(&a, w, nullptr, 0, &sz);
  unsigned char buf[8] = {0};
  if (sz == 0 || sz > sizeof buf ||
      cublasLtMatmulAlgoConfigGetAttribute(&a, w, buf, sz, &sz) != CUBLAS_STATUS_SUCCESS)
    return ~0u;
  unsigned long long v = 0;
  memcpy(&v, buf, sz);
  return (unsigned)v;
}

static void describe(const cublasLtMatmulAlgo_t& a, char* out, size_t n) {
  snprintf(out, n, "algo %u tile %u stages %u cluster %u inner %u swizzle %u custom %u splitk %u red %u",
           cfg(a, CUBLASLT_ALGO_CONFIG_ID), cfg(a, CUBLASLT_ALGO_CONFIG_TILE_ID),
           cfg(a, CUBLASLT_ALGO_CONFIG_STAGES_ID), cfg(a, CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID),
           cfg(a, CUBLASLT_ALGO_CONFIG_INNER_SHAPE_ID), cfg(a, CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING),
           cfg(a, CUBLASLT_ALGO_CONFIG_CUSTOM_OPTION), cfg(a, CUBLASLT_ALGO_CONFIG_SPLITK_NUM),
           cfg(a, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME));
}

static std::vector<unsigned> cap_u32(const cublasLtMatmulAlgo_t& a, cublasLtMatmulAlgoCapAttributes_t w) {
  size_t sz = 0;
  cublasLtMatmulAlgoCapGetAttribute(&a, w, nullptr, 0, &sz);
  std::vector<unsigned> v(sz / 4);
  if (sz) cublasLtMatmulAlgoCapGetAttribute(&a, w, v.data(), sz, &sz);
  return v;
}

static unsigned cap_one(const cublasLtMatmulAlgo_t& a, cublasLtMatmulAlgoCapAttributes_t w) {
  unsigned v = 0;
  size_t sz = 0;
  cublasLtMatmulAlgoCapGetAttribute(&a, w, &v, sizeof v, &sz);
  return v;
}

int main(int argc, char** argv) {
  if (argc < 4) {
    printf("usage: lt_space M N K [tn|nn]\n");
    return 2;
  }
  const long long m = atoll(argv[1]), n = atoll(argv[2]), k = atoll(argv[3]);
  const bool tn = argc < 5 || !strcmp(argv[4], "tn");
  const size_t per = (size_t)(m * k + n * k + m * n) * 2;
  int l2 = 0;
  CK(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, 0));
  const int sets = std::max<size_t>(1, std::min<size_t>(16, (3 * (size_t)l2 + per - 1) / per));
  std::vector<void*> A(sets), B(sets), D(sets);
  {
    std::mt19937 rng(7);
    std::uniform_real_distribution<float> u(-1.f, 1.f);
    std::vector<__nv_bfloat16> h(std::max(m * k, std::max(n * k, m * n)));
    for (int s = 0; s < sets; s++) {
      for (auto& x : h) x = __float2bfloat16(u(rng));
      CK(cudaMalloc(&A[s], m * k * 2));
      CK(cudaMalloc(&B[s], n * k * 2));
      CK(cudaMalloc(&D[s], m * n * 2));
      CK(cudaMemcpy(A[s], h.data(), m * k * 2, cudaMemcpyHostToDevice));
      CK(cudaMemcpy(B[s], h.data(), n * k * 2, cudaMemcpyHostToDevice));
      CK(cudaMemset(D[s], 0, m * n * 2));
    }
  }
  const size_t ws_bytes = 32u << 20;
  void* ws;
  CK(cudaMalloc(&ws, ws_bytes));
  cudaStream_t st;
  CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  cublasLtHandle_t lt;
  CL(cublasLtCreate(&lt));

  // Column-major view: D^T[n, m] = op(B) [n, k] x A^T [k, m].
  cublasLtMatmulDesc_t op;
  CL(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const cublasOperation_t ta = tn ? CUBLAS_OP_T : CUBLAS_OP_N, tb = CUBLAS_OP_N;
  CL(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
  CL(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
  cublasLtMatrixLayout_t la, lb, ld;
  // First operand: B. tn: B row-major [n, k] = col-major [k, n], ld k.
  // nn: B row-major [k, n] = col-major [n, k], ld n.
  if (tn)
    CL(cublasLtMatrixLayoutCreate(&la, CUDA_R_16BF, k, n, k));
  else
    CL(cublasLtMatrixLayoutCreate(&la, CUDA_R_16BF, n, k, n));
  CL(cublasLtMatrixLayoutCreate(&lb, CUDA_R_16BF, k, m, k));
  CL(cublasLtMatrixLayoutCreate(&ld, CUDA_R_16BF, n, m, n));
  cublasLtMatmulPreference_t pref;
  CL(cublasLtMatmulPreferenceCreate(&pref));
  CL(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                          &ws_bytes, sizeof ws_bytes));
  const float alpha = 1.f, beta = 0.f;
  int rot = 0;
  auto launch = [&](const cublasLtMatmulAlgo_t& a) {
    const int s = rot++ % sets;
    return cublasLtMatmul(lt, op, &alpha, B[s], la, A[s], lb, &beta, D[s], ld, D[s], ld, &a, ws,
                          ws_bytes, st);
  };
  std::vector<cudaEvent_t> ev(2 * 64);
  for (auto& e : ev) CK(cudaEventCreate(&e));
  auto time = [&](const cublasLtMatmulAlgo_t& a, int reps) -> float {
    for (int r = 0; r < 3; r++)
      if (launch(a) != CUBLAS_STATUS_SUCCESS) return -1.f;
    for (int r = 0; r < reps; r++) {
      CK(cudaEventRecord(ev[2 * r], st));
      launch(a);
      CK(cudaEventRecord(ev[2 * r + 1], st));
    }
    CK(cudaStreamSynchronize(st));
    std::vector<float> t(reps);
    for (int r = 0; r < reps; r++) CK(cudaEventElapsedTime(&t[r], ev[2 * r], ev[2 * r + 1]));
    std::sort(t.begin(), t.end());
    return t[reps / 2];
  };
  char buf[256];
  printf("problem m %lld n %lld k %lld %s bf16, %d operand sets\n", m, n, k, tn ? "tn" : "nn", sets);

  // Warm the GPU, then the heuristic list.
  const int want = 16;
  cublasLtMatmulHeuristicResult_t res[want];
  int got = 0;
  CL(cublasLtMatmulAlgoGetHeuristic(lt, op, la, lb, ld, ld, pref, want, res, &got));
  for (int r = 0; r < 200; r++) launch(res[0].algo);
  CK(cudaStreamSynchronize(st));
  printf("heuristic:\n");
  for (int i = 0; i < got; i++) {
    describe(res[i].algo, buf, sizeof buf);
    printf("  #%-2d %.4f ms  %s\n", i, time(res[i].algo, 40), buf);
  }

  // The space.
  int ids[256], nids = 0;
  CL(cublasLtMatmulAlgoGetIds(lt, CUBLAS_COMPUTE_32F, CUDA_R_32F, CUDA_R_16BF, CUDA_R_16BF,
                              CUDA_R_16BF, CUDA_R_16BF, 256, ids, &nids));
  std::vector<Cfg> all;
  size_t checked = 0;
  for (int i = 0; i < nids; i++) {
    cublasLtMatmulAlgo_t base;
    if (cublasLtMatmulAlgoInit(lt, CUBLAS_COMPUTE_32F, CUDA_R_32F, CUDA_R_16BF, CUDA_R_16BF,
                               CUDA_R_16BF, CUDA_R_16BF, ids[i], &base) != CUBLAS_STATUS_SUCCESS)
      continue;
    auto tiles = cap_u32(base, CUBLASLT_ALGO_CAP_TILE_IDS);
    auto stages = cap_u32(base, CUBLASLT_ALGO_CAP_STAGES_IDS);
    if (tiles.empty()) tiles.push_back(0);
    if (stages.empty()) stages.push_back(0);
    int ok = 0;
    for (unsigned t : tiles)
      for (unsigned sg : stages)
        for (unsigned short cl = 0; cl < 48; cl++) {
          cublasLtMatmulAlgo_t a = base;
          const unsigned one = 1;
          cublasLtMatmulAlgoConfigSetAttribute(&a, CUBLASLT_ALGO_CONFIG_TILE_ID, &t, sizeof t);
          cublasLtMatmulAlgoConfigSetAttribute(&a, CUBLASLT_ALGO_CONFIG_STAGES_ID, &sg, sizeof sg);
          cublasLtMatmulAlgoConfigSetAttribute(&a, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &one, sizeof one);
          if (cublasLtMatmulAlgoConfigSetAttribute(&a, CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID, &cl,
                                                   sizeof cl) != CUBLAS_STATUS_SUCCESS)
            continue;
          cublasLtMatmulHeuristicResult_t r;
          checked++;
          if (cublasLtMatmulAlgoCheck(lt, op, la, lb, ld, ld, &a, &r) != CUBLAS_STATUS_SUCCESS) continue;
          if (r.workspaceSize > ws_bytes) continue;
          const float ms = time(a, 5);
          if (ms > 0) {
            all.push_back({a, ms});
            ok++;
          }
        }
    printf("algo %d: %zu tiles, %zu stages, %d runnable\n", ids[i], tiles.size(), stages.size(), ok);
  }
  printf("%zu configs checked, %zu runnable\n", checked, all.size());
  std::sort(all.begin(), all.end(), [](const Cfg& x, const Cfg& y) { return x.ms < y.ms; });
  if (all.size() > 24) all.resize(24);
  std::vector<Cfg> fine;
  for (auto& c : all) {
    const unsigned sw_max = cap_one(c.algo, CUBLASLT_ALGO_CAP_CTA_SWIZZLING_SUPPORT);
    const unsigned cu_max = cap_one(c.algo, CUBLASLT_ALGO_CAP_CUSTOM_OPTION_MAX);
    for (unsigned sw = 0; sw <= sw_max; sw++)
      for (unsigned cu = 0; cu <= std::min(cu_max, 7u); cu++) {
        cublasLtMatmulAlgo_t a = c.algo;
        cublasLtMatmulAlgoConfigSetAttribute(&a, CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING, &sw, sizeof sw);
        cublasLtMatmulAlgoConfigSetAttribute(&a, CUBLASLT_ALGO_CONFIG_CUSTOM_OPTION, &cu, sizeof cu);
        cublasLtMatmulHeuristicResult_t r;
        if (cublasLtMatmulAlgoCheck(lt, op, la, lb, ld, ld, &a, &r) != CUBLAS_STATUS_SUCCESS) continue;
        const float ms = time(a, 40);
        if (ms > 0) fine.push_back({a, ms});
      }
  }
  std::sort(fine.begin(), fine.end(), [](const Cfg& x, const Cfg& y) { return x.ms < y.ms; });
  printf("fastest of the space (40 launches each):\n");
  for (size_t i = 0; i < fine.size() && i < 16; i++) {
    describe(fine[i].algo, buf, sizeof buf);
    printf("  %.4f ms  %s\n", fine[i].ms, buf);
  }
  printf("heuristic #0 again: %.4f ms\n", time(res[0].algo, 40));
  return 0;
}
