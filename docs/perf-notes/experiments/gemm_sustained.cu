// gemm_sustained.cu: how cuBLASLt's candidates for an 8192^3 GEMM time
// under different loads (column-major N/N, f32 accumulation, 32 MiB
// workspace, random inputs in [-1, 1)).
//
//   gemm_sustained N [MODE] [tf32]
//
// MODE `table` (default) times each of the top 8 heuristic candidates
//   burst:     after 40 launches of heat, 5 interleaved rounds of one launch
//              per candidate, median;
//   sustained: alone for 120 launches back to back, median of the last 60
//              (the GPU at the power state the candidate itself sets);
//   graph:     as sustained, each launch replayed from a one-launch graph
//              (what baracuda-bench and bench/torch_baseline.py measure);
//   sustain2:  sustained again, candidates in reverse order (drift);
//   cool:      each candidate after 250 ms idle, 10 warm-up launches, then
//              the median of 20 (the regime baracuda-bench and
//              bench/torch_baseline.py time in: idle, then ~30 ms);
// and cublasGemmEx (what torch.matmul calls) sustained, from a graph and
// cool. Measured autotuning ranks in the burst regime.
// MODE `names` launches each candidate and cublasGemmEx once, for ncu's
//   kernel names.
// MODE `recover` times the first 10 and all 40 of 40 launches of heuristic
//   #1 on a GPU idle for 2 s, and after 300 ms of load followed by 0 to
//   2000 ms idle: how long the GPU takes to leave its power limit (H200
//   bf16: 1.39 ms cold, 1.64 right after the load, 1.40 after 100-200 ms).
// `tf32` runs f32 operands with CUBLAS_COMPUTE_32F_FAST_TF32 instead of
// bf16.
// Build: nvcc -O2 -std=c++17 gemm_sustained.cu -lcublasLt -lcublas -o gemm_sustained
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <functional>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>
#include <chrono>
#include <thread>
#include <cstring>

#include "check.cuh"

static float median(std::vector<float> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

int main(int argc, char** argv) {
  const int n = argc > 1 ? atoi(argv[1]) : 8192;
  // argv[3] "tf32": f32 operands with TF32 math instead of bf16.
  const bool tf32 = argc > 3 && !strcmp(argv[3], "tf32");
  const cudaDataType dt = tf32 ? CUDA_R_32F : CUDA_R_16BF;
  const cublasComputeType_t math = tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  const size_t size = tf32 ? 4 : 2;
  const size_t elems = (size_t)n * n;
  std::vector<unsigned char> h(elems * size);
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  auto fill = [&] {
    for (size_t i = 0; i < elems; i++) {
      float v = u(rng);
      if (tf32) {
        memcpy(&h[i * 4], &v, 4);
      } else {
        __nv_bfloat16 w = __float2bfloat16(v);
        memcpy(&h[i * 2], &w, 2);
      }
    }
  };
  void *a, *b, *d;
  CK(cudaMalloc(&a, elems * size));
  CK(cudaMalloc(&b, elems * size));
  CK(cudaMalloc(&d, elems * size));
  fill();
  CK(cudaMemcpy(a, h.data(), elems * size, cudaMemcpyHostToDevice));
  fill();
  CK(cudaMemcpy(b, h.data(), elems * size, cudaMemcpyHostToDevice));
  const size_t ws_bytes = 32u << 20;
  void* ws;
  CK(cudaMalloc(&ws, ws_bytes));
  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));

  cublasLtHandle_t lt;
  CL(cublasLtCreate(&lt));
  printf("cuBLASLt version %zu\n", cublasLtGetVersion());
  cublasLtMatmulDesc_t op;
  CL(cublasLtMatmulDescCreate(&op, math, CUDA_R_32F));
  cublasLtMatrixLayout_t la, lb, ld;
  CL(cublasLtMatrixLayoutCreate(&la, dt, n, n, n));
  CL(cublasLtMatrixLayoutCreate(&lb, dt, n, n, n));
  CL(cublasLtMatrixLayoutCreate(&ld, dt, n, n, n));
  cublasLtMatmulPreference_t pref;
  CL(cublasLtMatmulPreferenceCreate(&pref));
  CL(cublasLtMatmulPreferenceSetAttribute(
      pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws_bytes, sizeof ws_bytes));
  const int want = 8;
  cublasLtMatmulHeuristicResult_t res[want];
  int got = 0;
  CL(cublasLtMatmulAlgoGetHeuristic(lt, op, la, lb, ld, ld, pref, want, res, &got));
  const float alpha = 1.f, beta = 0.f;
  auto launch = [&](int i) {
    CL(cublasLtMatmul(lt, op, &alpha, a, la, b, lb, &beta, d, ld, d, ld,
                      &res[i].algo, ws, ws_bytes, s));
  };
  auto attr = [&](int i, cublasLtMatmulAlgoConfigAttributes_t w) {
    int v = 0;
    size_t sz;
    cublasLtMatmulAlgoConfigGetAttribute(&res[i].algo, w, &v, sizeof v, &sz);
    return v;
  };
  const bool names_only = argc > 2 && !strcmp(argv[2], "names");  // one launch each, for a profiler
  cublasHandle_t hb;
  CL(cublasCreate(&hb));
  CL(cublasSetStream(hb, s));
  CL(cublasSetWorkspace(hb, ws, ws_bytes));
  auto gemm_ex = [&]() {
    CL(cublasGemmEx(hb, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &alpha, a, dt, n, b, dt, n, &beta,
                    d, dt, n, math, CUBLAS_GEMM_DEFAULT));
  };
  if (names_only) {
    for (int i = 0; i < got; i++) {
      printf("candidate %d: algo %d tile %d stages %d\n", i, attr(i, CUBLASLT_ALGO_CONFIG_ID),
             attr(i, CUBLASLT_ALGO_CONFIG_TILE_ID), attr(i, CUBLASLT_ALGO_CONFIG_STAGES_ID));
      launch(i);
    }
    gemm_ex();
    CK(cudaStreamSynchronize(s));
    return 0;
  }
  std::vector<cudaEvent_t> ev(4096);
  for (auto& e : ev) CK(cudaEventCreate(&e));
  // Milliseconds of each of n calls of fn, one event pair around each.
  auto times = [&](int n, const std::function<void()>& fn) {
    for (int r = 0; r < n; r++) {
      CK(cudaEventRecord(ev[2 * r], s));
      fn();
      CK(cudaEventRecord(ev[2 * r + 1], s));
    }
    CK(cudaStreamSynchronize(s));
    std::vector<float> t(n);
    for (int r = 0; r < n; r++) CK(cudaEventElapsedTime(&t[r], ev[2 * r], ev[2 * r + 1]));
    return t;
  };
  // Sustained: median of the last `keep` of `reps` back-to-back calls,
  // launched directly or replayed from a one-call graph.
  const int reps = 120, keep = 60;
  auto sustained = [&](const std::function<void()>& fn, bool graph) {
    cudaGraphExec_t ge = nullptr;
    if (graph) {
      cudaGraph_t g;
      CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
      fn();
      CK(cudaStreamEndCapture(s, &g));
      CK(cudaGraphInstantiate(&ge, g, 0));
      CK(cudaGraphDestroy(g));
    }
    auto t = times(reps, [&] {
      if (graph)
        CK(cudaGraphLaunch(ge, s));
      else
        fn();
    });
    if (ge) CK(cudaGraphExecDestroy(ge));
    return median(std::vector<float>(t.end() - keep, t.end()));
  };
  if (argc > 2 && !strcmp(argv[2], "recover")) {
    // How long an idle gap after 300 ms of load brings the time back to
    // that of a cold GPU: median of the first 10 and of 40 launches.
    auto timed = [&](const char* what) {
      auto t = times(40, [&] { launch(0); });
      printf("%-28s first10 %.4f  all40 %.4f  last %.4f\n", what,
             median(std::vector<float>(t.begin(), t.begin() + 10)), median(t), t.back());
    };
    std::this_thread::sleep_for(std::chrono::milliseconds(2000));
    timed("cold (2 s idle)");
    for (int gap : {0, 50, 100, 200, 500, 1000, 2000}) {
      for (int r = 0; r < 200; r++) launch(0);
      CK(cudaStreamSynchronize(s));
      std::this_thread::sleep_for(std::chrono::milliseconds(gap));
      char buf[64];
      snprintf(buf, sizeof buf, "after 300 ms load + %d ms", gap);
      timed(buf);
    }
    return 0;
  }
  for (int i = 0; i < got; i++) launch(i);
  CK(cudaStreamSynchronize(s));

  // burst: heat with candidate 0, then interleaved rounds of one launch
  // per candidate.
  const int rounds = 5;
  for (int r = 0; r < 40; r++) launch(0);
  auto t = times(rounds * got, [&, c = 0]() mutable { launch(c++ % got); });
  std::vector<std::vector<float>> burst(got);
  for (int r = 0; r < rounds * got; r++) burst[r % got].push_back(t[r]);

  // sustained (eager) and graph, each candidate alone; eager once more in
  // reverse order, to see drift.
  std::vector<float> sus(got), gra(got), sus2(got);
  for (int i = 0; i < got; i++) sus[i] = sustained([&] { launch(i); }, false);
  for (int i = 0; i < got; i++) gra[i] = sustained([&] { launch(i); }, true);
  for (int i = got - 1; i >= 0; i--) sus2[i] = sustained([&] { launch(i); }, false);
  auto cool = [&](const std::function<void()>& fn) {
    CK(cudaStreamSynchronize(s));
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
    for (int r = 0; r < 10; r++) fn();
    return median(times(20, fn));
  };
  std::vector<float> coo(got);
  for (int i = 0; i < got; i++) coo[i] = cool([&] { launch(i); });
  printf("%-3s %-4s %-5s %-6s %-7s %-5s %9s %9s %9s %9s %9s\n", "#", "algo", "tile",
         "stages", "cluster", "ws", "burst", "sustain", "graph", "sustain2", "cool");
  for (int i = 0; i < got; i++)
    printf("%-3d %-4d %-5d %-6d %-7d %-5zu %9.4f %9.4f %9.4f %9.4f %9.4f\n", i,
           attr(i, CUBLASLT_ALGO_CONFIG_ID), attr(i, CUBLASLT_ALGO_CONFIG_TILE_ID),
           attr(i, CUBLASLT_ALGO_CONFIG_STAGES_ID),
           attr(i, CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID),
           res[i].workspaceSize >> 10, median(burst[i]), sus[i], gra[i], sus2[i], coo[i]);
  printf("cublasGemmEx                            %9s %9.4f %9.4f %29.4f\n", "",
         sustained(gemm_ex, false), sustained(gemm_ex, true), cool(gemm_ex));
  return 0;
}
