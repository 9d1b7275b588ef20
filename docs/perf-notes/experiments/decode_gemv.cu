// decode_gemv.cu: the one-token linear forward y[n] = W[n, k] x[k] (bf16,
// f32 accumulation; decode 4096 -> 14336: 117 MB of W per call), three
// ways, each in the two regimes that rank them differently:
//   cool:  250 ms idle, 10 warm-up launches, then 32 launches captured in
//          a CUDA graph and replayed 10 times between events (the regime
//          baracuda-bench and bench/torch_baseline.py time in);
//   burst: 50 ms of launches of the same candidate, then 5 bursts of 32
//          launches between events, launched from the host (the regime
//          measured autotuning, scratch.rs `fastest`, ranks in).
// W rotates over two sets (234 MB, past the 50 MB L2), as in both.
//
// Candidates:
//   gemv R U KS W P  our kernel shapes: a group of KS warps owns R rows of
//                    W, warp g of the group reads the g-th of KS slices of
//                    k, U 16-byte loads per row in flight per lane before
//                    any FMA; W warps per block; P = 1: a persistent grid
//                    (as many blocks as are resident at once) striding
//                    over row groups, P = 0: one row group per warp group.
//                    R 2, U 4, KS 1, W 8, P 0 was the library's skinny_1;
//                    it is now R 4, U 2, KS 4, W 8, P 0.
//   lt #i            cuBLASLt's heuristic candidates (the problem the
//                    LinearPlan builds: D^T [n, 1] = W^T x, TRANSA = T).
//   gemmex           cublasGemmEx, what torch.nn.functional.linear calls.
// Every gemv output is checked against a naive f32 kernel (max |error|).
//
//   decode_gemv [N K]     (default 14336 4096)
// Build: nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a
//        decode_gemv.cu -lcublasLt -lcublas -o decode_gemv
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "check.cuh"

typedef __nv_bfloat16 bf16;

__device__ __forceinline__ void dot8(float& acc, const uint4& w, const uint4& x) {
  const __nv_bfloat162* wp = reinterpret_cast<const __nv_bfloat162*>(&w);
  const __nv_bfloat162* xp = reinterpret_cast<const __nv_bfloat162*>(&x);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float2 a = __bfloat1622float2(wp[i]), b = __bfloat1622float2(xp[i]);
    acc = fmaf(a.x, b.x, acc);
    acc = fmaf(a.y, b.y, acc);
  }
}

// y[row] = sum_k W[row, k] x[k]; k a multiple of 8, W and x 16-byte aligned.
template <int R, int U, int KS, int WARPS>
__global__ void __launch_bounds__(32 * WARPS) gemv(const bf16* __restrict__ x,
                                                   const bf16* __restrict__ w,
                                                   bf16* __restrict__ y, int n, int k) {
  static_assert(WARPS % KS == 0, "warps per block a multiple of KS");
  constexpr int GROUPS = WARPS / KS;  // row groups per block
  __shared__ float part[WARPS][R];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int group = warp / KS, slice = warp % KS;
  const int kv = k / 8;
  const int per = (kv + KS - 1) / KS;  // vectors of k per slice
  const int j_lo = slice * per, j_hi = min(kv, j_lo + per);
  const uint4* wv = reinterpret_cast<const uint4*>(w);
  const uint4* xv = reinterpret_cast<const uint4*>(x);
  const int n_groups = (n + R - 1) / R;
  // Every warp of a block runs the same iterations (the block-wide
  // barrier of KS > 1 sits inside the loop); P = 0 grids cover every group
  // in one iteration.
  for (int base = blockIdx.x * GROUPS; base < n_groups; base += gridDim.x * GROUPS) {
    const int g = base + group;
    const bool live = g < n_groups;
    const int row0 = min(g, n_groups - 1) * R;
    float acc[R];
#pragma unroll
    for (int r = 0; r < R; ++r) acc[r] = 0.f;
    for (int j0 = j_lo + lane; j0 < j_hi; j0 += 32 * U) {
      uint4 wr[U][R];
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const int j = j0 + 32 * u;
#pragma unroll
        for (int r = 0; r < R; ++r) {
          const int row = min(row0 + r, n - 1);
          wr[u][r] = j < j_hi ? wv[(long long)row * kv + j] : make_uint4(0, 0, 0, 0);
        }
      }
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const int j = j0 + 32 * u;
        if (j < j_hi) {
          const uint4 xr = __ldg(xv + j);
#pragma unroll
          for (int r = 0; r < R; ++r) dot8(acc[r], wr[u][r], xr);
        }
      }
    }
#pragma unroll
    for (int r = 0; r < R; ++r)
#pragma unroll
      for (int s = 16; s > 0; s >>= 1) acc[r] += __shfl_xor_sync(0xffffffffu, acc[r], s);
    if (KS == 1) {
      if (live && lane < R && row0 + lane < n) {
        float v = 0.f;
#pragma unroll
        for (int r = 0; r < R; ++r)
          if (r == lane) v = acc[r];
        y[row0 + lane] = __float2bfloat16(v);
      }
    } else {
      if (lane == 0) {
#pragma unroll
        for (int r = 0; r < R; ++r) part[warp][r] = acc[r];
      }
      __syncthreads();
      if (live && slice == 0 && lane < R && row0 + lane < n) {
        float v = 0.f;
        for (int s = 0; s < KS; ++s) v += part[group * KS + s][lane];
        y[row0 + lane] = __float2bfloat16(v);
      }
      __syncthreads();
    }
  }
}

__global__ void naive(const bf16* x, const bf16* w, float* y, int n, int k) {
  const int row = blockIdx.x * blockDim.x + threadIdx.x;
  if (row >= n) return;
  float acc = 0.f;
  for (int i = 0; i < k; ++i) acc += __bfloat162float(w[(long long)row * k + i]) * __bfloat162float(x[i]);
  y[row] = acc;
}

static float median(std::vector<float> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

struct Cand {
  std::string name;
  std::function<void(int)> launch;  // argument: W set
};

int main(int argc, char** argv) {
  const int n = argc > 2 ? atoi(argv[1]) : 14336, k = argc > 2 ? atoi(argv[2]) : 4096;
  const int sets = 2;
  int sms = 0;
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  std::vector<bf16*> W(sets);
  bf16 *x, *y;
  float* ref;
  {
    std::mt19937 rng(3);
    std::uniform_real_distribution<float> u(-1.f, 1.f);
    std::vector<bf16> h((size_t)n * k);
    for (int s = 0; s < sets; s++) {
      for (auto& v : h) v = __float2bfloat16(0.05f * u(rng));
      CK(cudaMalloc(&W[s], h.size() * 2));
      CK(cudaMemcpy(W[s], h.data(), h.size() * 2, cudaMemcpyHostToDevice));
    }
    std::vector<bf16> hx(k);
    for (auto& v : hx) v = __float2bfloat16(u(rng));
    CK(cudaMalloc(&x, k * 2));
    CK(cudaMemcpy(x, hx.data(), k * 2, cudaMemcpyHostToDevice));
  }
  CK(cudaMalloc(&y, n * 2));
  CK(cudaMalloc(&ref, n * 4));
  cudaStream_t st;
  CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));

  std::vector<Cand> cands;
  auto add_gemv = [&](auto kernel, int R, int U, int KS, int WARPS, int P) {
    const int groups = WARPS / KS;
    const int n_groups = (n + R - 1) / R;
    int grid = (n_groups + groups - 1) / groups;
    if (P) {
      int per_sm = 0;
      CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, 32 * WARPS, 0));
      grid = std::min(grid, per_sm * sms);
    }
    char name[96];
    snprintf(name, sizeof name, "gemv R%d U%d KS%d W%d P%d (grid %d)", R, U, KS, WARPS, P, grid);
    cands.push_back({name, [=](int s) { kernel<<<grid, 32 * WARPS, 0, st>>>(x, W[s], y, n, k); }});
  };
#define G(R, U, KS, WARPS, P) add_gemv(gemv<R, U, KS, WARPS>, R, U, KS, WARPS, P)
  G(2, 4, 1, 8, 0);  // the library's skinny_1 shape
  G(1, 4, 1, 8, 0);
  G(1, 8, 1, 8, 0);
  G(2, 8, 1, 8, 0);
  G(4, 4, 1, 8, 0);
  G(2, 4, 1, 4, 0);
  G(1, 4, 2, 8, 0);
  G(1, 4, 4, 8, 0);
  G(2, 4, 2, 8, 0);
  G(2, 4, 4, 8, 0);
  G(4, 2, 4, 8, 0);
  G(1, 2, 8, 8, 0);
  G(1, 4, 4, 4, 0);  // one row per 128-thread block: many short waves
  G(1, 2, 4, 4, 0);
  G(2, 4, 4, 4, 0);
  G(2, 2, 8, 8, 0);
  G(1, 4, 1, 8, 1);
  G(2, 4, 1, 8, 1);
  G(2, 8, 1, 8, 1);
  G(4, 4, 1, 8, 1);
  G(2, 4, 4, 8, 1);
  G(1, 4, 4, 8, 1);
#undef G

  // cuBLASLt: the LinearPlan's problem, column-major D^T [n, 1] = op(W) x.
  cublasLtHandle_t lt;
  CL(cublasLtCreate(&lt));
  cublasLtMatmulDesc_t op;
  CL(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
  CL(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
  CL(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
  cublasLtMatrixLayout_t la, lb, ld;
  CL(cublasLtMatrixLayoutCreate(&la, CUDA_R_16BF, k, n, k));
  CL(cublasLtMatrixLayoutCreate(&lb, CUDA_R_16BF, k, 1, k));
  CL(cublasLtMatrixLayoutCreate(&ld, CUDA_R_16BF, n, 1, n));
  const size_t ws_bytes = 32u << 20;
  void* ws;
  CK(cudaMalloc(&ws, ws_bytes));
  cublasLtMatmulPreference_t pref;
  CL(cublasLtMatmulPreferenceCreate(&pref));
  CL(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws_bytes,
                                          sizeof ws_bytes));
  cublasLtMatmulHeuristicResult_t res[8];
  int got = 0;
  CL(cublasLtMatmulAlgoGetHeuristic(lt, op, la, lb, ld, ld, pref, 8, res, &got));
  static const float alpha = 1.f, beta = 0.f;
  for (int i = 0; i < got; i++) {
    char name[64];
    snprintf(name, sizeof name, "lt #%d", i);
    const cublasLtMatmulAlgo_t algo = res[i].algo;
    cands.push_back({name, [=](int s) {
                       CL(cublasLtMatmul(lt, op, &alpha, W[s], la, x, lb, &beta, y, ld, y, ld, &algo,
                                         ws, ws_bytes, st));
                     }});
  }
  cublasHandle_t hb;
  CL(cublasCreate(&hb));
  CL(cublasSetStream(hb, st));
  CL(cublasSetWorkspace(hb, ws, ws_bytes));
  cands.push_back({"gemmex", [=](int s) {
                     CL(cublasGemmEx(hb, CUBLAS_OP_T, CUBLAS_OP_N, n, 1, k, &alpha, W[s], CUDA_R_16BF,
                                     k, x, CUDA_R_16BF, k, &beta, y, CUDA_R_16BF, n,
                                     CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
                   }});

  // Correctness against the naive kernel on set 0.
  naive<<<(n + 255) / 256, 256, 0, st>>>(x, W[0], ref, n, k);
  std::vector<float> href(n);
  std::vector<bf16> hy(n);
  CK(cudaMemcpyAsync(href.data(), ref, n * 4, cudaMemcpyDeviceToHost, st));
  CK(cudaStreamSynchronize(st));

  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  const int BURST = 32;
  auto elapsed = [&] {
    float ms;
    CK(cudaEventSynchronize(e1));
    CK(cudaEventElapsedTime(&ms, e0, e1));
    return ms;
  };
  printf("decode gemv n %d k %d bf16, %d W sets, %d SMs; copy-speed floor: W bytes / device copy rate\n",
         n, k, sets, sms);
  printf("%-36s %9s %9s %9s\n", "candidate", "cool ms", "burst ms", "max err");
  for (auto& c : cands) {
    // Correctness (set 0).
    CK(cudaMemsetAsync(y, 0, n * 2, st));
    c.launch(0);
    CK(cudaMemcpyAsync(hy.data(), y, n * 2, cudaMemcpyDeviceToHost, st));
    CK(cudaStreamSynchronize(st));
    float err = 0.f;
    for (int i = 0; i < n; i++) err = std::max(err, std::fabs(__bfloat162float(hy[i]) - href[i]));
    // Cool: idle, warm-up, graph of BURST launches replayed.
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
    for (int r = 0; r < 10; r++) c.launch(r % sets);
    cudaGraph_t g;
    cudaGraphExec_t ge;
    CK(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
    for (int r = 0; r < BURST; r++) c.launch(r % sets);
    CK(cudaStreamEndCapture(st, &g));
    CK(cudaGraphInstantiate(&ge, g, 0));
    std::vector<float> cool;
    for (int r = 0; r < 10; r++) {
      CK(cudaEventRecord(e0, st));
      CK(cudaGraphLaunch(ge, st));
      CK(cudaEventRecord(e1, st));
      cool.push_back(elapsed() / BURST);
    }
    // Burst: 50 ms of heat, then host-launched bursts.
    CK(cudaEventRecord(e0, st));
    c.launch(0);
    CK(cudaEventRecord(e1, st));
    const int heat = std::max(1, (int)(50.f / std::max(elapsed(), 1e-3f)));
    for (int r = 0; r < heat; r++) c.launch(r % sets);
    std::vector<float> burst;
    for (int b = 0; b < 5; b++) {
      CK(cudaEventRecord(e0, st));
      for (int r = 0; r < BURST; r++) c.launch(r % sets);
      CK(cudaEventRecord(e1, st));
      burst.push_back(elapsed() / BURST);
    }
    CK(cudaGraphExecDestroy(ge));
    CK(cudaGraphDestroy(g));
    printf("%-36s %9.4f %9.4f %9.2e\n", c.name.c_str(), median(cool), median(burst), err);
  }
  // The copy rate of the same bytes (read W set, write a W-sized buffer).
  bf16* dst;
  CK(cudaMalloc(&dst, (size_t)n * k * 2));
  std::this_thread::sleep_for(std::chrono::milliseconds(250));
  std::vector<float> cp;
  for (int r = 0; r < 10; r++) {
    CK(cudaEventRecord(e0, st));
    CK(cudaMemcpyAsync(dst, W[r % sets], (size_t)n * k * 2, cudaMemcpyDeviceToDevice, st));
    CK(cudaEventRecord(e1, st));
    cp.push_back(elapsed());
  }
  const double gbps = 2.0 * n * k * 2 / (median(cp) * 1e-3) / 1e9;
  printf("device copy of W: %.4f ms (%.0f GB/s read + write); W read at that rate: %.4f ms\n",
         median(cp), gbps, (double)n * k * 2 / (gbps * 1e9) * 1e3);
  return 0;
}
