// typed_map.cuh: pointwise maps whose operands have element types of their
// own rather than dtype.cuh's T: NIN inputs of TI, one output of TO (cast.cu
// converts between them; logic.cu compares, tests and combines bits).
//
// F is a functor `TO operator()(const TI (&x)[NIN]) const`.
//
// Contiguous, 16-byte aligned operands (typed_contig): each thread maps
// LANES = 16 / min(sizeof TI, sizeof TO) elements, so the narrower side
// moves one 16-byte vector and the wider side several; one pass of the
// grid, which the host sizes from the same LANES (layout.rs
// `MapKernels::launch_with`), and the last block also does the tail.
// Otherwise (typed_strided) offsets.cuh's offsets, one element per
// iteration of a grid-stride loop.
#pragma once
#include "common/offsets.cuh"

// Elements per thread of the contiguous kernel, and the 16-byte vectors
// they fill on the input and the output side.
template <typename TI, typename TO>
struct Lanes {
    enum {
        N = (int)(16 / (sizeof(TI) < sizeof(TO) ? sizeof(TI) : sizeof(TO))),
        IN_VECS = (int)(N * sizeof(TI) / 16),
        OUT_VECS = (int)(N * sizeof(TO) / 16),
    };
};

// out = f(in) over n contiguous elements, every pointer 16-byte aligned.
template <typename TI, typename TO, int NIN, typename F>
__device__ __forceinline__ void typed_contig(const TI* const (&in)[NIN], TO* __restrict__ out, u64 n,
                                             F f) {
    typedef Lanes<TI, TO> L;
    const u64 groups = n / L::N;
    const u64 g = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    if (g < groups) {
        TI a[NIN][L::N];
        TO r[L::N];
#pragma unroll
        for (int k = 0; k < NIN; ++k) {
#pragma unroll
            for (int v = 0; v < L::IN_VECS; ++v) {
                const uint4 w = reinterpret_cast<const uint4*>(in[k])[g * L::IN_VECS + v];
                memcpy(reinterpret_cast<char*>(a[k]) + 16 * v, &w, 16);
            }
        }
#pragma unroll
        for (int e = 0; e < L::N; ++e) {
            TI x[NIN];
#pragma unroll
            for (int k = 0; k < NIN; ++k) x[k] = a[k][e];
            r[e] = f(x);
        }
#pragma unroll
        for (int v = 0; v < L::OUT_VECS; ++v) {
            uint4 w;
            memcpy(&w, reinterpret_cast<const char*>(r) + 16 * v, 16);
            reinterpret_cast<uint4*>(out)[g * L::OUT_VECS + v] = w;
        }
    }
    if (blockIdx.x == gridDim.x - 1) {
        for (u64 t = groups * L::N + threadIdx.x; t < n; t += blockDim.x) {
            TI x[NIN];
#pragma unroll
            for (int k = 0; k < NIN; ++k) x[k] = in[k][t];
            out[t] = f(x);
        }
    }
}

// out = f(in) at the offsets of StridedArgs p (output 0, inputs 0..NIN-1),
// linear index type I.
template <typename TI, typename TO, int NIN, typename I, typename F>
__device__ __forceinline__ void typed_strided(const StridedArgs& p, F f) {
    const I n = (I)p.n;
    for (I i = (I)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (I)gridDim.x * blockDim.x) {
        i64 oo[1], io[NIN];
        strided_offsets<1, NIN, I>(p, i, oo, io);
        TI x[NIN];
#pragma unroll
        for (int k = 0; k < NIN; ++k) x[k] = ((const TI*)p.in[k])[io[k]];
        ((TO*)p.out[0])[oo[0]] = f(x);
    }
}

// ---- tiled map of one input whose unit-stride dim is not the output's ----
//
// A transposing copy (or cast) read element by element from a permuted
// view touches one element per 32-byte sector; here each block moves
// TILE_T x TILE_T tiles through shared memory instead: it reads a tile
// along x's unit-stride dim b in 16-byte vectors of TI and writes it along
// y's unit-stride dim a in 16-byte vectors of TO, consecutive lanes on
// consecutive vectors on both sides. Every other dim is a batch dim of the
// tile grid. Each thread holds 16 elements of a tile in registers: it
// issues the loads of its next tile before it stores the current one from
// shared memory, so reads and writes overlap.
//
// Shared memory holds the tile as [a][b] in TO, each row padded by 4 bytes
// (one element of 4 bytes or more), which spreads a warp's column reads
// over the banks. Edge tiles and unaligned operands take the element path;
// the host (layout.rs `TiledArgs`) checks the rest (a and b exist, differ,
// and span at least 16 elements each).
#define TILE_T 64
#define TILE_THREADS 256

struct TiledArgs {
    u64 in, out;       // addresses of x and y
    u64 na, nb;        // extents of a (y's unit-stride dim) and b (x's)
    i64 in_sa, out_sb; // x's stride along a, y's along b
    u64 tiles_a, tiles_b, tiles;  // tiles along a, along b, and in all
    u32 rest;          // batch dims in use
    u32 vec;           // bit 0: x's rows take 16-byte vectors; bit 1: y's
    u64 shape[MAX_RANK - 2];      // batch extents, innermost last
    i64 in_s[MAX_RANK - 2];       // x's batch strides
    i64 out_s[MAX_RANK - 2];      // y's batch strides
};

// Elements per vector on each side, vectors per tile row (loads) and
// column (stores), and each thread's share of them.
template <typename TI, typename TO>
struct TileShape {
    enum {
        LV = (int)(16 / sizeof(TI)),
        SV = (int)(16 / sizeof(TO)),
        LCH = TILE_T / LV,
        SCH = TILE_T / SV,
        LOADS = TILE_T * LCH / TILE_THREADS,
        STORES = TILE_T * SCH / TILE_THREADS,
        PITCH = TILE_T + (sizeof(TO) >= 4 ? 1 : (int)(4 / sizeof(TO))),
    };
};

// Where tile t lies: its first a and b, and the batch's offsets in x, y.
struct TileAt {
    u64 a0, b0;
    i64 xo, yo;
};

__device__ __forceinline__ TileAt tile_at(const TiledArgs& p, u64 t) {
    const u64 r = t / p.tiles_a;
    u64 bi = r / p.tiles_b;
    TileAt at;
    at.a0 = (t - r * p.tiles_a) * TILE_T;
    at.b0 = (r - bi * p.tiles_b) * TILE_T;
    at.xo = 0;
    at.yo = 0;
    for (int d = (int)p.rest - 1; d >= 0; --d) {
        const u64 q = bi / p.shape[d];
        const u64 c = bi - q * p.shape[d];
        bi = q;
        at.xo += (i64)c * p.in_s[d];
        at.yo += (i64)c * p.out_s[d];
    }
    return at;
}

// This thread's vectors of tile `at`, converted: v[i] is row c / LCH,
// columns (c % LCH) LV + 0..LV-1 of the tile, c = threadIdx.x + i 256.
// Elements outside x are left as they are (never stored).
template <typename TI, typename TO, typename F>
__device__ __forceinline__ void tile_load(const TiledArgs& p, const TileAt& at, F f,
                                          TO (&v)[TileShape<TI, TO>::LOADS][TileShape<TI, TO>::LV]) {
    typedef TileShape<TI, TO> S;
    const TI* __restrict__ x = reinterpret_cast<const TI*>(p.in);
#pragma unroll
    for (int i = 0; i < S::LOADS; ++i) {
        const int c = threadIdx.x + i * TILE_THREADS;
        const u64 a = at.a0 + c / S::LCH, b = at.b0 + (c % S::LCH) * S::LV;
        if (a < p.na) {
            const TI* src = x + at.xo + (i64)a * p.in_sa + (i64)b;
            if ((p.vec & 1) && b + S::LV <= p.nb) {
                const uint4 w = *reinterpret_cast<const uint4*>(src);
                TI e[S::LV];
                memcpy(e, &w, 16);
#pragma unroll
                for (int k = 0; k < S::LV; ++k) {
                    const TI one[1] = {e[k]};
                    v[i][k] = f(one);
                }
            } else {
#pragma unroll
                for (int k = 0; k < S::LV; ++k) {
                    if (b + k < p.nb) {
                        const TI one[1] = {src[k]};
                        v[i][k] = f(one);
                    }
                }
            }
        }
    }
}

// y = f(x) tile by tile; TILE_THREADS threads, a grid-stride loop over
// the tiles.
template <typename TI, typename TO, typename F>
__device__ __forceinline__ void typed_tiled(const TiledArgs& p, F f) {
    typedef TileShape<TI, TO> S;
    __shared__ TO tile[TILE_T * S::PITCH];
    TO* __restrict__ y = reinterpret_cast<TO*>(p.out);
    TO v[S::LOADS][S::LV];
    u64 t = blockIdx.x;
    if (t >= p.tiles) return;
    TileAt at = tile_at(p, t);
    tile_load<TI, TO>(p, at, f, v);
    for (;;) {
#pragma unroll
        for (int i = 0; i < S::LOADS; ++i) {
            const int c = threadIdx.x + i * TILE_THREADS;
#pragma unroll
            for (int k = 0; k < S::LV; ++k) tile[(c / S::LCH) * S::PITCH + (c % S::LCH) * S::LV + k] = v[i][k];
        }
        __syncthreads();
        const TileAt cur = at;
        t += gridDim.x;
        if (t < p.tiles) {
            at = tile_at(p, t);
            tile_load<TI, TO>(p, at, f, v);
        }
        // write: w[i] is column c / SCH, rows (c % SCH) SV + 0..SV-1
#pragma unroll
        for (int i = 0; i < S::STORES; ++i) {
            const int c = threadIdx.x + i * TILE_THREADS;
            const int bcol = c / S::SCH, ac = (c % S::SCH) * S::SV;
            const u64 a = cur.a0 + ac, b = cur.b0 + bcol;
            if (b < p.nb) {
                TO w[S::SV];
#pragma unroll
                for (int k = 0; k < S::SV; ++k) w[k] = tile[(ac + k) * S::PITCH + bcol];
                TO* dst = y + cur.yo + (i64)b * p.out_sb + (i64)a;
                if ((p.vec & 2) && a + S::SV <= p.na) {
                    uint4 q;
                    memcpy(&q, w, 16);
                    *reinterpret_cast<uint4*>(dst) = q;
                } else {
#pragma unroll
                    for (int k = 0; k < S::SV; ++k)
                        if (a + k < p.na) dst[k] = w[k];
                }
            }
        }
        if (t >= p.tiles) break;
        __syncthreads();
    }
}
