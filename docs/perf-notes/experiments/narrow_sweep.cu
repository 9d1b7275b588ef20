// narrow_sweep.cu: times kernels/gemm/narrow_matmul.cu on one shape
// (default: ResNet-50's 1x1 64->64 at 56x56, batch 64, so m = 200704 rows)
// over rotated buffer sets, against a device-to-device copy of the same
// traffic, and checks it against a naive f32 kernel. narrow_sweep.sh
// builds one binary per (TRANS, NARROW_TILES, NARROW_WARPS,
// NARROW_PREFETCH) and runs each.
//
// Build: nvcc -O3 -gencode=arch=compute_90a,code=sm_90a -DBARACUDA_DTYPE=3
//        -I../../../crates/baracuda-kernels/kernels
//        -DNARROW_K=64 -DNARROW_N=64 -DTRANS=0 [-DNARROW_TILES=t]
//        [-DNARROW_WARPS=w] [-DNARROW_PREFETCH=p] narrow_sweep.cu -o narrow_sweep
// Run:   narrow_sweep [m]
//
// Output: one line per binary: the variant, registers, grid, the median
// ms per call over 7 rounds (each ~1 ms of calls cycling through the sets),
// GB/s of m (K + N) 2 bytes, the copy's ms for the same bytes, and the max
// error relative to the largest |reference| value.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "../../../crates/baracuda-kernels/kernels/gemm/narrow_matmul.cu"

#include "check.cuh"

__global__ void fill(T* p, i64 n, unsigned seed, float scale) {
    for (i64 i = blockIdx.x * (i64)blockDim.x + threadIdx.x; i < n; i += (i64)gridDim.x * blockDim.x) {
        unsigned x = (unsigned)i * 2654435761u ^ seed;
        x ^= x >> 13;
        x *= 0x5bd1e995u;
        x ^= x >> 15;
        // Uniform in [-scale, scale), never exactly zero.
        p[i] = T(((float)(x & 0xffff) + 0.5f) / 32768.0f * scale - scale);
    }
}

__global__ void reference(const T* a, const T* w, float* d, i64 m) {
    const i64 i = blockIdx.x * (i64)blockDim.x + threadIdx.x;
    if (i >= m * N) return;
    const i64 r = i / N;
    const int n = (int)(i % N);
    float acc = 0.f;
    for (int k = 0; k < K; ++k) acc += float(a[r * K + k]) * float(TRANS ? w[k * N + n] : w[n * K + k]);
    d[i] = acc;
}

__global__ void max_err(const T* got, const float* ref, i64 n, float* out) {
    float e = 0.f, big = 0.f;
    for (i64 i = blockIdx.x * (i64)blockDim.x + threadIdx.x; i < n; i += (i64)gridDim.x * blockDim.x) {
        e = fmaxf(e, fabsf(float(got[i]) - ref[i]));
        big = fmaxf(big, fabsf(ref[i]));
    }
    atomicMax((unsigned*)&out[0], __float_as_uint(e));
    atomicMax((unsigned*)&out[1], __float_as_uint(big));
}

int main(int argc, char** argv) {
    const i64 m = argc > 1 ? atoll(argv[1]) : 200704;
    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, 0));
    const size_t set_bytes = (size_t)m * (K + N) * sizeof(T) + (size_t)K * N * sizeof(T);
    const int sets = (int)std::min<size_t>(32, std::max<size_t>(1, (3 * (size_t)prop.l2CacheSize + set_bytes - 1) / set_bytes));
    std::vector<T*> a(sets), w(sets), d(sets);
    for (int s = 0; s < sets; ++s) {
        CK(cudaMalloc(&a[s], (size_t)m * K * sizeof(T)));
        CK(cudaMalloc(&w[s], (size_t)K * N * sizeof(T)));
        CK(cudaMalloc(&d[s], (size_t)m * N * sizeof(T)));
        fill<<<1024, 256>>>(a[s], m * K, 11u + s, 1.0f);
        fill<<<64, 256>>>(w[s], (i64)K * N, 101u + s, 0.125f);
    }
    // Grid as narrow.rs sizes it: every warp the same number of chunks,
    // the whole grid resident at once.
    int per_sm = 0;
    CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, narrow_matmul, 32 * WARPS, 0));
    const i64 slots = (i64)prop.multiProcessorCount * std::max(per_sm, 1) * WARPS;
    const i64 chunks = (m + 16 * TILES - 1) / (16 * TILES);
    const i64 cpw = std::max<i64>(1, (chunks + slots - 1) / slots);
    const int blocks = (int)((chunks + cpw * WARPS - 1) / (cpw * WARPS));
    cudaFuncAttributes attr;
    CK(cudaFuncGetAttributes(&attr, narrow_matmul));

    // Correctness on set 0.
    float* ref;
    float* err;
    CK(cudaMalloc(&ref, (size_t)m * N * sizeof(float)));
    CK(cudaMalloc(&err, 2 * sizeof(float)));
    CK(cudaMemset(err, 0, 2 * sizeof(float)));
    narrow_matmul<<<blocks, 32 * WARPS>>>(a[0], w[0], d[0], m);
    reference<<<(unsigned)((m * N + 255) / 256), 256>>>(a[0], w[0], ref, m);
    max_err<<<1024, 256>>>(d[0], ref, m * N, err);
    float e[2];
    CK(cudaMemcpy(e, err, sizeof(e), cudaMemcpyDeviceToHost));
    CK(cudaGetLastError());

    // Copy of the same traffic: m (K + N) elements read and written once
    // each = a copy of m (K + N) / 2 elements. Sources are the A buffers
    // (K >= that / m when K >= N; else they wrap into D's, same size).
    const size_t copy_bytes = (size_t)m * (K + N) * sizeof(T) / 2;
    std::vector<char*> src(sets), dst(sets);
    for (int s = 0; s < sets; ++s) {
        CK(cudaMalloc(&src[s], copy_bytes));
        CK(cudaMalloc(&dst[s], copy_bytes));
        CK(cudaMemset(src[s], 1, copy_bytes));
    }
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    auto time = [&](auto&& call) {
        for (int i = 0; i < 3 * sets; ++i) call(i % sets);
        CK(cudaEventRecord(e0));
        call(0);
        CK(cudaEventRecord(e1));
        CK(cudaEventSynchronize(e1));
        float one;
        CK(cudaEventElapsedTime(&one, e0, e1));
        int calls = std::max(sets, (int)(1.0f / std::max(one, 1e-3f)));
        calls = (calls + sets - 1) / sets * sets;
        std::vector<float> ms;
        for (int r = 0; r < 7; ++r) {
            CK(cudaEventRecord(e0));
            for (int i = 0; i < calls; ++i) call(i % sets);
            CK(cudaEventRecord(e1));
            CK(cudaEventSynchronize(e1));
            float t;
            CK(cudaEventElapsedTime(&t, e0, e1));
            ms.push_back(t / calls);
        }
        std::sort(ms.begin(), ms.end());
        return ms[ms.size() / 2];
    };
    const float kern = time([&](int s) { narrow_matmul<<<blocks, 32 * WARPS>>>(a[s], w[s], d[s], m); });
    const float copy = time([&](int s) { CK(cudaMemcpyAsync(dst[s], src[s], copy_bytes, cudaMemcpyDeviceToDevice)); });
    CK(cudaGetLastError());
    const double gbs = (double)m * (K + N) * sizeof(T) / (kern * 1e-3) / 1e9;
    printf("K %d N %d trans %d tiles %d warps %d prefetch %d: %3d regs, %d blocks (%d per SM), "
           "%lld chunks per warp, %d sets: %.4f ms %.0f GB/s; copy %.4f ms (x%.3f); max err %.2e of %.2e\n",
           K, N, TRANS, TILES, WARPS, NARROW_PREFETCH, attr.numRegs, blocks, per_sm, (long long)cpw, sets, kern, gbs, copy,
           copy / kern, e[0], e[1]);
    return 0;
}
