// pointwise.cuh: the contiguous fast path shared by every pointwise kernel,
// and POINTWISE_KERNELS, which declares a map's contiguous and strided
// kernels.
//
// Each block owns a tile of blockDim.x * TILE_UNROLL 16-byte vectors; thread
// t loads vectors base + u * blockDim.x + t for u < TILE_UNROLL (coalesced
// across the warp), all of them before computing. The grid covers the
// tensor once (no grid-stride loop). The last block also does the scalar
// tail (n % VEC elements).
//
// Launch shape measured on H200 (docs/perf-notes/experiments/elementwise_tiles.cu,
// 2^28 elements, relu bf16 / relu f32 / add bf16, GB/s): one vector per
// thread, one pass, 256 threads: 4180 / 4239 / 4343; 4 vectors per thread:
// 4045 / 4071 / 4323; a persistent grid-stride grid with 4 per thread:
// 3785 / 3830 / 4072; device-to-device memcpy: 4200. Streaming (.cs) cache
// hints make no difference. Hence TILE_UNROLL 1 by default. Ops whose math
// costs about as much as their traffic run smaller blocks, and on 16-bit
// types two vectors per thread (layout.rs `contig_shape`, measured with
// docs/perf-notes/experiments/elementwise_math.cu). The plan passes -DTILE_UNROLL
// and sizes the grid from the same shape; the block size is blockDim.x.
//
// F is a functor `void operator()(const ACC (&in)[NIN], ACC (&out)[NOUT])`.
// An output pointer may be null: that output is not stored. Input 0 may
// have its own element type C0 (the bool condition of `where`, VEC bytes
// per vector); every other operand is T.
#pragma once

#ifndef TILE_UNROLL
#define TILE_UNROLL 1
#endif

// VEC elements of C0 with the alignment of their size: one vector of input 0.
template <typename C>
struct alignas(sizeof(C) * VEC) VecOf {
    C v[VEC];
};

// Vector i of input 0: a 16-byte vector of T, or VEC elements of C0.
template <typename C0>
__device__ __forceinline__ void load_in0(const void* p, u64 i, C0 (&v)[VEC]) {
    if constexpr (sizeof(C0) == sizeof(T)) {
        load_vec((const T*)p, i, reinterpret_cast<T(&)[VEC]>(v));
    } else {
        const VecOf<C0> r = reinterpret_cast<const VecOf<C0>*>(p)[i];
#pragma unroll
        for (int e = 0; e < VEC; ++e) v[e] = r.v[e];
    }
}

template <int NIN, int NOUT, typename F, typename C0 = T>
__device__ __forceinline__ void pointwise_contig(const void* const (&in)[NIN], T* const (&out)[NOUT],
                                                 u64 n, F f) {
    const u64 nvec = n / VEC;
    const u64 base = (u64)blockIdx.x * blockDim.x * TILE_UNROLL;
    const bool full = base + (u64)blockDim.x * TILE_UNROLL <= nvec;
    C0 v0[TILE_UNROLL][VEC];
    T v[TILE_UNROLL][NIN][VEC];
#pragma unroll
    for (int u = 0; u < TILE_UNROLL; ++u) {
        const u64 i = base + (u64)u * blockDim.x + threadIdx.x;
        if (full || i < nvec) {
            load_in0<C0>(in[0], i, v0[u]);
#pragma unroll
            for (int k = 1; k < NIN; ++k) load_vec((const T*)in[k], i, v[u][k]);
        }
    }
#pragma unroll
    for (int u = 0; u < TILE_UNROLL; ++u) {
        const u64 i = base + (u64)u * blockDim.x + threadIdx.x;
        if (full || i < nvec) {
            T o[NOUT][VEC];
#pragma unroll
            for (int e = 0; e < VEC; ++e) {
                ACC a[NIN], r[NOUT];
                a[0] = to_acc(v0[u][e]);
#pragma unroll
                for (int k = 1; k < NIN; ++k) a[k] = to_acc(v[u][k][e]);
                f(a, r);
#pragma unroll
                for (int k = 0; k < NOUT; ++k) o[k][e] = from_acc(r[k]);
            }
#pragma unroll
            for (int k = 0; k < NOUT; ++k)
                if (out[k]) store_vec(out[k], i, o[k]);
        }
    }
    if (blockIdx.x == gridDim.x - 1) {
        for (u64 t = nvec * VEC + threadIdx.x; t < n; t += blockDim.x) {
            ACC a[NIN], r[NOUT];
            a[0] = to_acc(((const C0*)in[0])[t]);
#pragma unroll
            for (int k = 1; k < NIN; ++k) a[k] = to_acc(((const T*)in[k])[t]);
            f(a, r);
#pragma unroll
            for (int k = 0; k < NOUT; ++k)
                if (out[k]) out[k][t] = from_acc(r[k]);
        }
    }
}

#define PW_UNPAREN(...) __VA_ARGS__

// The three kernels of one pointwise map, functor F with NIN inputs (input
// 0 of type C0) and NOUT outputs: PREFIX_contig_NAME PARAMS (PARAMS lists
// the inputs INS, then the outputs OUTS, then `u64 n`) and
// PREFIX_strided32_NAME / PREFIX_strided64_NAME (StridedArgs, u32 / u64
// linear index; strided.cuh).
#define POINTWISE_KERNELS_C0(PREFIX, NAME, F, NIN, NOUT, PARAMS, INS, OUTS, C0)              \
    extern "C" __global__ void __launch_bounds__(256) PREFIX##_contig_##NAME PARAMS {        \
        const void* const pw_in[NIN] = {PW_UNPAREN INS};                                    \
        T* const pw_out[NOUT] = {PW_UNPAREN OUTS};                                          \
        pointwise_contig<NIN, NOUT, F, C0>(pw_in, pw_out, n, F());                          \
    }                                                                                       \
    extern "C" __global__ void __launch_bounds__(256) PREFIX##_strided32_##NAME(StridedArgs p) { \
        pointwise_strided<NIN, NOUT, u32, F, C0>(p, F());                                   \
    }                                                                                       \
    extern "C" __global__ void __launch_bounds__(256) PREFIX##_strided64_##NAME(StridedArgs p) { \
        pointwise_strided<NIN, NOUT, u64, F, C0>(p, F());                                   \
    }

// POINTWISE_KERNELS_C0 with every input of type T.
#define POINTWISE_KERNELS(PREFIX, NAME, F, NIN, NOUT, PARAMS, INS, OUTS) \
    POINTWISE_KERNELS_C0(PREFIX, NAME, F, NIN, NOUT, PARAMS, INS, OUTS, T)

// As POINTWISE_KERNELS_C0, with one more kernel parameter `const P q` that
// builds the functor (F{q}): after `n` in the contiguous kernel (PARAMS
// lists the operands and `u64 n` only), after the StridedArgs in the
// strided ones. The unary and ternary ops take their parameters this way.
#define POINTWISE_KERNELS_P_C0(PREFIX, NAME, F, NIN, NOUT, PARAMS, INS, OUTS, P, C0)            \
    extern "C" __global__ void __launch_bounds__(256) PREFIX##_contig_##NAME(PW_UNPAREN PARAMS,   \
                                                                            const P q) {         \
        const void* const pw_in[NIN] = {PW_UNPAREN INS};                                        \
        T* const pw_out[NOUT] = {PW_UNPAREN OUTS};                                              \
        pointwise_contig<NIN, NOUT, F, C0>(pw_in, pw_out, n, F{q});                             \
    }                                                                                           \
    extern "C" __global__ void __launch_bounds__(256) PREFIX##_strided32_##NAME(StridedArgs p,    \
                                                                               const P q) {      \
        pointwise_strided<NIN, NOUT, u32, F, C0>(p, F{q});                                      \
    }                                                                                           \
    extern "C" __global__ void __launch_bounds__(256) PREFIX##_strided64_##NAME(StridedArgs p,    \
                                                                               const P q) {      \
        pointwise_strided<NIN, NOUT, u64, F, C0>(p, F{q});                                      \
    }

// POINTWISE_KERNELS_P_C0 with every input of type T.
#define POINTWISE_KERNELS_P(PREFIX, NAME, F, NIN, NOUT, PARAMS, INS, OUTS, P) \
    POINTWISE_KERNELS_P_C0(PREFIX, NAME, F, NIN, NOUT, PARAMS, INS, OUTS, P, T)

// ---- Maps whose operands each have an element type of their own ----
//
// Types<C...> lists the element types of a map's inputs or outputs; the
// kernels below load and store each operand as its own type, converting
// to and from ACC (dtype.cuh's acc_of / acc_to), while T (the widest
// operand: a promoted result type) sets VEC. A contiguous thread maps one
// vector of VEC elements: a 16-byte vector of T, and VEC elements of a
// narrower operand (VecOf, 4 or 8 bytes), so every operand's vector i
// covers the same elements and one pass of the grid sized for T's VEC
// covers the tensor. The mixed-dtype binary ops (binary.cu, BARACUDA_DTYPE_A
// and _B) use them; same-type maps keep pointwise_contig, which holds raw
// T vectors until it computes.
template <typename... Cs>
struct Types {
    enum { N = (int)sizeof...(Cs) };
};
// The K-th type of a Types list.
template <int K, typename L>
struct TypeAt;
template <typename C, typename... Cs>
struct TypeAt<0, Types<C, Cs...>> {
    typedef C t;
};
template <int K, typename C, typename... Cs>
struct TypeAt<K, Types<C, Cs...>> {
    typedef typename TypeAt<K - 1, Types<Cs...>>::t t;
};
// f(IntC<K>()) for K = B, ..., E - 1, in order, so a loop body can name
// the K-th operand's type (`decltype(kc)::value`).
template <int K>
struct IntC {
    static constexpr int value = K;
};
template <int B, int E>
struct Unroll {
    template <typename F>
    static __device__ __forceinline__ void run(F&& f) {
        f(IntC<B>());
        Unroll<B + 1, E>::run(f);
    }
};
template <int E>
struct Unroll<E, E> {
    template <typename F>
    static __device__ __forceinline__ void run(F&&) {}
};

// The contiguous map with input k of type TypeAt<k, INS> and output k of
// TypeAt<k, OUTS> (pointwise_contig's tiling, grid and tail).
template <typename INS, typename OUTS, typename F>
__device__ __forceinline__ void pointwise_contig_typed(const void* const (&in)[INS::N],
                                                       void* const (&out)[OUTS::N], u64 n, F f) {
    constexpr int NIN = INS::N, NOUT = OUTS::N;
    const u64 nvec = n / VEC;
    const u64 base = (u64)blockIdx.x * blockDim.x * TILE_UNROLL;
    const bool full = base + (u64)blockDim.x * TILE_UNROLL <= nvec;
    ACC v[TILE_UNROLL][NIN][VEC];
#pragma unroll
    for (int u = 0; u < TILE_UNROLL; ++u) {
        const u64 i = base + (u64)u * blockDim.x + threadIdx.x;
        if (full || i < nvec) {
            Unroll<0, NIN>::run([&](auto kc) {
                constexpr int k = decltype(kc)::value;
                typedef typename TypeAt<k, INS>::t C;
                const VecOf<C> r = reinterpret_cast<const VecOf<C>*>(in[k])[i];
#pragma unroll
                for (int e = 0; e < VEC; ++e) v[u][k][e] = acc_of(r.v[e]);
            });
        }
    }
#pragma unroll
    for (int u = 0; u < TILE_UNROLL; ++u) {
        const u64 i = base + (u64)u * blockDim.x + threadIdx.x;
        if (full || i < nvec) {
            ACC o[NOUT][VEC];
#pragma unroll
            for (int e = 0; e < VEC; ++e) {
                ACC a[NIN], r[NOUT];
#pragma unroll
                for (int k = 0; k < NIN; ++k) a[k] = v[u][k][e];
                f(a, r);
#pragma unroll
                for (int k = 0; k < NOUT; ++k) o[k][e] = r[k];
            }
            Unroll<0, NOUT>::run([&](auto kc) {
                constexpr int k = decltype(kc)::value;
                typedef typename TypeAt<k, OUTS>::t C;
                if (out[k]) {
                    VecOf<C> w;
#pragma unroll
                    for (int e = 0; e < VEC; ++e) w.v[e] = acc_to<C>(o[k][e]);
                    reinterpret_cast<VecOf<C>*>(out[k])[i] = w;
                }
            });
        }
    }
    if (blockIdx.x == gridDim.x - 1) {
        for (u64 t = nvec * VEC + threadIdx.x; t < n; t += blockDim.x) {
            ACC a[NIN], r[NOUT];
            Unroll<0, NIN>::run([&](auto kc) {
                constexpr int k = decltype(kc)::value;
                a[k] = acc_of(((const typename TypeAt<k, INS>::t*)in[k])[t]);
            });
            f(a, r);
            Unroll<0, NOUT>::run([&](auto kc) {
                constexpr int k = decltype(kc)::value;
                typedef typename TypeAt<k, OUTS>::t C;
                if (out[k]) ((C*)out[k])[t] = acc_to<C>(r[k]);
            });
        }
    }
}

// The strided map with per-operand element types (pointwise_strided's
// grid-stride loop).
template <typename INS, typename OUTS, typename I, typename F>
__device__ __forceinline__ void pointwise_strided_typed(const StridedArgs& p, F f) {
    constexpr int NIN = INS::N, NOUT = OUTS::N;
    const I n = (I)p.n;
    for (I i = (I)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (I)gridDim.x * blockDim.x) {
        i64 oo[NOUT], io[NIN];
        strided_offsets<NOUT, NIN, I>(p, i, oo, io);
        ACC a[NIN], r[NOUT];
        Unroll<0, NIN>::run([&](auto kc) {
            constexpr int k = decltype(kc)::value;
            a[k] = acc_of(((const typename TypeAt<k, INS>::t*)p.in[k])[io[k]]);
        });
        f(a, r);
        Unroll<0, NOUT>::run([&](auto kc) {
            constexpr int k = decltype(kc)::value;
            typedef typename TypeAt<k, OUTS>::t C;
            if (p.out[k]) ((C*)p.out[k])[oo[k]] = acc_to<C>(r[k]);
        });
    }
}

// The three kernels of one map with per-operand element types INS and
// OUTS (Types lists) and a parameter `const P q` building the functor
// (F{q}), as POINTWISE_KERNELS_P_C0: PREFIX_contig_NAME (PARAMS: the
// inputs INS_PTRS, the outputs OUTS_PTRS, then `u64 n`; then q),
// PREFIX_strided32_NAME and PREFIX_strided64_NAME (StridedArgs, then q).
#define POINTWISE_KERNELS_TYPED(PREFIX, NAME, F, INS, OUTS, PARAMS, INS_PTRS, OUTS_PTRS, P)      \
    extern "C" __global__ void __launch_bounds__(256) PREFIX##_contig_##NAME(PW_UNPAREN PARAMS,   \
                                                                            const P q) {         \
        const void* const pw_in[INS::N] = {PW_UNPAREN INS_PTRS};                                \
        void* const pw_out[OUTS::N] = {PW_UNPAREN OUTS_PTRS};                                   \
        pointwise_contig_typed<INS, OUTS>(pw_in, pw_out, n, F{q});                              \
    }                                                                                           \
    extern "C" __global__ void __launch_bounds__(256) PREFIX##_strided32_##NAME(StridedArgs p,    \
                                                                               const P q) {      \
        pointwise_strided_typed<INS, OUTS, u32>(p, F{q});                                       \
    }                                                                                           \
    extern "C" __global__ void __launch_bounds__(256) PREFIX##_strided64_##NAME(StridedArgs p,    \
                                                                               const P q) {      \
        pointwise_strided_typed<INS, OUTS, u64>(p, F{q});                                       \
    }
