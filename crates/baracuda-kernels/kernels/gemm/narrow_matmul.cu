// narrow_matmul.cu: D[m, N] = A[m, K] Bm^T for many rows and few channels,
// every matrix row-major and packed, 16-bit inputs and output, f32
// accumulation. It is the forward (A = x, Bm = w[Cout, Cin]) and the
// backward-data pass (A = dy, Bm = w^T) of a pointwise convolution over
// channels-last tensors with narrow layers (ResNet's 1x1 64->64 at 56x56:
// m = 200704 positions, K = N = 64).
//
// Math:    D[r, n] = sum_k A[r, k] * Bm[n, k]
//          Bm[n, k] = w[n * K + k]        (TRANS = 0, forward)
//          Bm[n, k] = w[k * N + n]        (TRANS = 1, backward data)
// Traffic: m (K + N) * 2 bytes (each row of A read once, each row of D
//          written once) + K N * 2 per block for w (L2-resident). At
//          K = N = 64 that is 32 flop per byte, far below the tensor
//          cores' ridge: the kernel is a copy with a little math in it,
//          judged by GB/s against the device-to-device copy.
//
// Shape: each warp computes 16-row tiles with mma.sync m16n8k16 (every
// thread of a 4-thread group loads 16 contiguous bytes of a row per
// 32 channels, so A comes straight from global memory into the mma
// fragments, one 16-byte load per vector). The reduction order of k is
// permuted so that those vectors are the fragments: logical k slot j of
// thread q in k-step s is channel k_phys(s, q, j). The output channels are
// permuted the same way (n_phys) so that each thread's accumulators are 8
// contiguous channels of a row, stored as one 16-byte vector. Bm's
// fragments, in the same permutations, are built once per block in shared
// memory (K N * 2 bytes) while the first chunk's loads are in flight.
// Warps stride over chunks of TILES 16-row tiles: all loads of a chunk
// are issued before its first mma.
//
// Specialised by BARACUDA_DTYPE (2 f16, 3 bf16), NARROW_K and NARROW_N (multiples
// of 32, at most 128), TRANS (0 or 1). 128 threads per block.
#include "common/dtype.cuh"

#if BARACUDA_DTYPE == 2
#define MMA_AB "f16.f16"
#elif BARACUDA_DTYPE == 3
#define MMA_AB "bf16.bf16"
#else
#error "narrow_matmul takes f16 (2) or bf16 (3)"
#endif

// Two elements as the 32-bit register an mma fragment holds, `lo` in the
// low half.
__device__ __forceinline__ u32 pack_t(T lo, T hi) {
    const T v[2] = {lo, hi};
    u32 r;
    memcpy(&r, v, 4);
    return r;
}
__device__ __forceinline__ u32 pack2(float lo, float hi) {
    return pack_t(from_acc(lo), from_acc(hi));
}

constexpr int K = NARROW_K;
constexpr int N = NARROW_N;
constexpr int KS = K / 16;  // k-steps of 16
constexpr int NT = N / 8;   // n-tiles of 8
constexpr int KV = K / 32;  // 16-byte vectors of a row of A per thread
constexpr int NV = N / 32;  // 16-byte vectors of a row of D per thread
// 16-row tiles per chunk: two while their loads and accumulators fit the
// registers without spilling (K + N <= 128), else one (narrow.rs
// `chunk_rows` follows the same rule). Warps per block: 4 (narrow.rs
// `THREADS`). docs/perf-notes/experiments/narrow_sweep.sh overrides both.
#ifndef NARROW_TILES
#define NARROW_TILES (K + N <= 128 ? 2 : 1)
#endif
#ifndef NARROW_WARPS
#define NARROW_WARPS 4
#endif
// NARROW_PREFETCH 1: a warp issues the next chunk's loads before computing
// the current one (twice the registers for A); 0: after storing it.
#ifndef NARROW_PREFETCH
#define NARROW_PREFETCH 0
#endif
constexpr int TILES = NARROW_TILES;
constexpr int WARPS = NARROW_WARPS;
static_assert(K % 32 == 0 && N % 32 == 0 && K <= 128 && N <= 128, "narrow K, N");

// Channel of logical k slot j (0..3) of thread q (0..3) in k-step s: the
// thread's vector s / 2 covers channels [32 (s/2) + 8q, +8); the even step
// takes its first four, the odd step its last four.
__device__ __forceinline__ int k_phys(int s, int q, int j) {
    return 32 * (s >> 1) + 8 * q + 4 * (s & 1) + j;
}

// Output channel of column c (0..7) of n-tile nt: thread q holds columns
// 2q and 2q + 1 of every n-tile, so n-tiles 4u..4u+3 give it channels
// [32u + 8q, +8), in order.
__device__ __forceinline__ int n_phys(int nt, int c) {
    return 32 * (nt >> 2) + 8 * (c >> 1) + 2 * (nt & 3) + (c & 1);
}

__device__ __forceinline__ void mma(float (&c)[4], u32 a0, u32 a1, u32 a2, u32 a3, u32 b0,
                                    u32 b1) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32." MMA_AB ".f32 "
                 "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

__device__ __forceinline__ u32 word(const uint4& v, int i) {
    return i == 0 ? v.x : i == 1 ? v.y : i == 2 ? v.z : v.w;
}

__device__ __forceinline__ T bm(const T* __restrict__ w, int n, int k) {
    return TRANS ? w[k * N + n] : w[n * K + k];
}

// Rows g and g + 8 of every 16-row tile of chunk c (zeros past row m).
__device__ __forceinline__ void load_chunk(const T* __restrict__ a, i64 m, i64 c, int g, int q,
                                           uint4 (&v)[TILES][2][KV]) {
#pragma unroll
    for (int t = 0; t < TILES; ++t)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const i64 r = c * (16 * TILES) + 16 * t + 8 * h + g;
#pragma unroll
            for (int u = 0; u < KV; ++u)
                v[t][h][u] = r < m ? *reinterpret_cast<const uint4*>(a + r * K + 32 * u + 8 * q)
                                   : make_uint4(0, 0, 0, 0);
        }
}

extern "C" __global__ void __launch_bounds__(32 * WARPS)
narrow_matmul(const T* __restrict__ a, const T* __restrict__ w, T* __restrict__ d, i64 m) {
    const int lane = threadIdx.x & 31, g = lane >> 2, q = lane & 3;
    const i64 rows = 16 * TILES;
    const i64 chunks = (m + rows - 1) / rows;
    const i64 step = (i64)gridDim.x * WARPS;
    i64 c = (i64)blockIdx.x * WARPS + (threadIdx.x >> 5);
    // The first chunk's loads are in flight while the block stages Bm.
    uint4 v[TILES][2][KV];
    load_chunk(a, m, c, g, q, v);

    // Bm's B fragments: [k-step][n-tile][lane] -> (b0b1, b2b3).
    __shared__ uint2 frag[KS * NT * 32];
    for (int i = threadIdx.x; i < KS * NT * 32; i += blockDim.x) {
        const int l = i & 31, nt = (i >> 5) % NT, s = (i >> 5) / NT;
        const int n = n_phys(nt, l >> 2), p = l & 3;
        frag[i] = make_uint2(pack_t(bm(w, n, k_phys(s, p, 0)), bm(w, n, k_phys(s, p, 1))),
                             pack_t(bm(w, n, k_phys(s, p, 2)), bm(w, n, k_phys(s, p, 3))));
    }
    __syncthreads();

    for (; c < chunks; c += step) {
        const bool more = c + step < chunks;
#if NARROW_PREFETCH
        uint4 next[TILES][2][KV];
        if (more) load_chunk(a, m, c + step, g, q, next);
#endif
#pragma unroll
        for (int t = 0; t < TILES; ++t) {
            float acc[NT][4];
#pragma unroll
            for (int nt = 0; nt < NT; ++nt) acc[nt][0] = acc[nt][1] = acc[nt][2] = acc[nt][3] = 0.f;
#pragma unroll
            for (int s = 0; s < KS; ++s) {
                const int lo = 2 * (s & 1);
                const u32 a0 = word(v[t][0][s >> 1], lo), a2 = word(v[t][0][s >> 1], lo + 1);
                const u32 a1 = word(v[t][1][s >> 1], lo), a3 = word(v[t][1][s >> 1], lo + 1);
#pragma unroll
                for (int nt = 0; nt < NT; ++nt) {
                    const uint2 b = frag[(s * NT + nt) * 32 + lane];
                    mma(acc[nt], a0, a1, a2, a3, b.x, b.y);
                }
            }
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                const i64 r = c * rows + 16 * t + 8 * h + g;
                if (r < m) {
#pragma unroll
                    for (int u = 0; u < NV; ++u) {
                        uint4 o;
                        o.x = pack2(acc[4 * u + 0][2 * h], acc[4 * u + 0][2 * h + 1]);
                        o.y = pack2(acc[4 * u + 1][2 * h], acc[4 * u + 1][2 * h + 1]);
                        o.z = pack2(acc[4 * u + 2][2 * h], acc[4 * u + 2][2 * h + 1]);
                        o.w = pack2(acc[4 * u + 3][2 * h], acc[4 * u + 3][2 * h + 1]);
                        *reinterpret_cast<uint4*>(d + r * N + 32 * u + 8 * q) = o;
                    }
                }
            }
        }
#if NARROW_PREFETCH
        if (more) {
#pragma unroll
            for (int t = 0; t < TILES; ++t)
#pragma unroll
                for (int h = 0; h < 2; ++h)
#pragma unroll
                    for (int u = 0; u < KV; ++u) v[t][h][u] = next[t][h][u];
        }
#else
        if (more) load_chunk(a, m, c + step, g, q, v);
#endif
    }
}
