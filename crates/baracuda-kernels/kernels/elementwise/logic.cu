// logic.cu: the elementwise ops with exact results and no gradient:
// comparisons, isclose, logical and bitwise ops, shifts, gcd and lcm of two
// broadcast tensors (BinaryLogicPlan), and the predicates, logical_not and
// bitwise_not of one (UnaryLogicPlan), each PyTorch's CUDA kernel of the
// same name.
//
//   op                  inputs        out   f
//   eq ne lt le gt ge   all           bool  a OP b, IEEE: NaN unordered (only ne
//                                           holds), -0 == 0; f16, bf16 as f32
//   isclose             floats        bool  a == b, or both NaN with equal_nan, or
//                                           (unless rtol = atol = 0) |R(a - b)|
//                                           finite and <= R(atol + |R(rtol b)|)
//   logical_and/or/xor  all           bool  nonzero(a) and/or/xor nonzero(b)
//   bitwise_and/or/xor  ints, bool    T     a & b, a | b, a ^ b (bool: of the truth
//                                           values)
//   bitwise_left_shift  ints          T     0 where b < 0 or b >= W, else a << b
//                                           (wrapping)
//   bitwise_right_shift ints          T     a >> M where b < 0 or b >= M, else
//                                           a >> b (arithmetic when signed);
//                                           M = W - 1 signed, W unsigned
//   gcd                 ints          T     Euclid on |a|, |b|
//   lcm                 ints          T     0 where gcd(a, b) is 0, else
//                                           |a / gcd * b|
//   isnan isinf         all           bool  floats: IEEE; ints and bool: false
//   isfinite            all           bool  floats: IEEE; ints and bool: true
//   isposinf isneginf   all           bool  floats: x = +inf / -inf; ints, bool:
//                                           false
//   signbit             floats, ints  bool  floats: the sign bit (-0, -inf); ints:
//                                           x < 0
//   logical_not         all           bool  !nonzero(x)
//   bitwise_not         ints, bool    T     ~x (bool: !x)
//
// "all" is f32, f64, f16, bf16, i8, u8, i16, i32, i64 and bool; "ints" the
// five integer types. nonzero(x) is x != 0: NaN is true, -0 false. W is the
// width of T in bits, b read as signed for the comparison with 0 (a u8
// count of 128 or more is negative), as PyTorch's shifts read it. isclose
// computes as PyTorch's composite does, one kernel per step: in f32 (f64
// for f64, rtol and atol rounded to it), each product, sum and difference
// rounded to T (R) where PyTorch stores it. gcd and lcm follow PyTorch's
// jitted CUDA functions, in the C++ promoted type P (int for the 8-, 16-
// and 32-bit types, i64 for i64): |v| in P then narrowed to T, so the
// gcd of INT_MIN and 0 is INT_MIN itself in every width (and may be
// negative when a is T's minimum); lcm's a / gcd * b and its |.| in P,
// wrapping where P overflows (32- and 64-bit types; a / gcd of INT_MIN by
// -1 is INT_MIN), then narrowed to T.
//
// Kernels: typed_map.cuh's, per op: contiguous (16 / min(sizeof T,
// sizeof out) elements per thread, the narrower side one 16-byte vector),
// strided with a u32 or u64 linear index (64-bit offsets). Bool outputs
// are one byte, 0 or 1.
// Traffic (n elements, b bytes of T): binary 2nb + n (bool out) or 3nb;
// unary nb + n or 2nb; a few integer or float ops per element (gcd and
// lcm: a loop of remainders), so memory bound: judged by GB/s against the
// copy ceiling.
// Specialised by: LOGIC_IN (kernel_sources::element_code of T), LOGIC_OP
// (the op's index in logic.rs's LogicOp order: BinaryLogicOp::ALL, then
// UnaryLogicOp::ALL), so a plan compiles one op's kernels for one type.
#include "common/convert.cuh"
#include "common/typed_map.cuh"

#if !defined(LOGIC_IN) || !defined(LOGIC_OP)
#error "LOGIC_IN (kernel_sources::element_code) and LOGIC_OP must be defined"
#endif

typedef Ty<LOGIC_IN>::S TI;
typedef unsigned char u8;

#define LOGIC_FLOAT (LOGIC_IN <= 3)
#define LOGIC_BOOL (LOGIC_IN == 11)

enum {
    EQ, NE, LT, LE, GT, GE, ISCLOSE, LOGICAL_AND, LOGICAL_OR, LOGICAL_XOR, BITWISE_AND, BITWISE_OR,
    BITWISE_XOR, LEFT_SHIFT, RIGHT_SHIFT, GCD, LCM,
    ISNAN, ISINF, ISFINITE, ISPOSINF, ISNEGINF, SIGNBIT, LOGICAL_NOT, BITWISE_NOT
};

// The ops' parameters (LogicParams in logic.rs): isclose's tolerances.
struct LogicParams {
    double rtol;
    double atol;
    u32 equal_nan;
    u32 pad;
};

// An element as the value the ops compare: f16 and bf16 widened to f32
// (exactly), every other type as stored.
__device__ __forceinline__ float val(__half v) { return __half2float(v); }
__device__ __forceinline__ float val(__nv_bfloat16 v) { return __bfloat162float(v); }
template <typename X>
__device__ __forceinline__ X val(X v) { return v; }
typedef decltype(val(TI())) V;

__device__ __forceinline__ bool nonzero(TI v) { return val(v) != V(0); }

// Each op: its output type Out, its input count NIN, and f.
template <int OP>
struct Logic;

template <int OP>
struct Compare {
    typedef u8 Out;
    enum { NIN = 2 };
    static __device__ __forceinline__ u8 f(const TI (&x)[2], const LogicParams&) {
        const V a = val(x[0]), b = val(x[1]);
        switch (OP) {
            case EQ: return a == b;
            case NE: return a != b;
            case LT: return a < b;
            case LE: return a <= b;
            case GT: return a > b;
            default: return a >= b;
        }
    }
};
template <> struct Logic<EQ> : Compare<EQ> {};
template <> struct Logic<NE> : Compare<NE> {};
template <> struct Logic<LT> : Compare<LT> {};
template <> struct Logic<LE> : Compare<LE> {};
template <> struct Logic<GT> : Compare<GT> {};
template <> struct Logic<GE> : Compare<GE> {};

template <int OP>
struct Logical {
    typedef u8 Out;
    enum { NIN = 2 };
    static __device__ __forceinline__ u8 f(const TI (&x)[2], const LogicParams&) {
        const bool a = nonzero(x[0]), b = nonzero(x[1]);
        return OP == LOGICAL_AND ? a && b : OP == LOGICAL_OR ? a || b : a != b;
    }
};
template <> struct Logic<LOGICAL_AND> : Logical<LOGICAL_AND> {};
template <> struct Logic<LOGICAL_OR> : Logical<LOGICAL_OR> {};
template <> struct Logic<LOGICAL_XOR> : Logical<LOGICAL_XOR> {};

template <>
struct Logic<LOGICAL_NOT> {
    typedef u8 Out;
    enum { NIN = 1 };
    static __device__ __forceinline__ u8 f(const TI (&x)[1], const LogicParams&) { return !nonzero(x[0]); }
};

#if LOGIC_FLOAT
__device__ __forceinline__ float mul_rn(float a, float b) { return __fmul_rn(a, b); }
__device__ __forceinline__ double mul_rn(double a, double b) { return __dmul_rn(a, b); }
__device__ __forceinline__ float add_rn(float a, float b) { return __fadd_rn(a, b); }
__device__ __forceinline__ double add_rn(double a, double b) { return __dadd_rn(a, b); }
__device__ __forceinline__ float sub_rn(float a, float b) { return __fsub_rn(a, b); }
__device__ __forceinline__ double sub_rn(double a, double b) { return __dsub_rn(a, b); }

// v rounded to T (a tensor PyTorch stores between two kernels), read back.
__device__ __forceinline__ V stored(V v) {
#if LOGIC_IN == 2
    return val(__float2half_rn(v));
#elif LOGIC_IN == 3
    return val(__float2bfloat16_rn(v));
#else
    return v;
#endif
}

template <>
struct Logic<ISCLOSE> {
    typedef u8 Out;
    enum { NIN = 2 };
    static __device__ __forceinline__ u8 f(const TI (&x)[2], const LogicParams& q) {
        const V a = val(x[0]), b = val(x[1]);
        const bool close = a == b || (q.equal_nan != 0 && a != a && b != b);
        if (q.rtol == 0.0 && q.atol == 0.0) return close;
        const V allowed = stored(add_rn(fabs(stored(mul_rn((V)q.rtol, b))), (V)q.atol));
        const V actual = fabs(stored(sub_rn(a, b)));
        return close || (isfinite(actual) && actual <= allowed);
    }
};

template <int OP>
struct FloatTest {
    typedef u8 Out;
    enum { NIN = 1 };
    static __device__ __forceinline__ u8 f(const TI (&x)[1], const LogicParams&) {
        const V v = val(x[0]);
        switch (OP) {
            case ISNAN: return v != v;
            case ISINF: return isinf(v);
            case ISFINITE: return isfinite(v);
            case ISPOSINF: return isinf(v) && v > V(0);
            case ISNEGINF: return isinf(v) && v < V(0);
            default: return signbit(v) != 0;
        }
    }
};
template <> struct Logic<ISNAN> : FloatTest<ISNAN> {};
template <> struct Logic<ISINF> : FloatTest<ISINF> {};
template <> struct Logic<ISFINITE> : FloatTest<ISFINITE> {};
template <> struct Logic<ISPOSINF> : FloatTest<ISPOSINF> {};
template <> struct Logic<ISNEGINF> : FloatTest<ISNEGINF> {};
template <> struct Logic<SIGNBIT> : FloatTest<SIGNBIT> {};

#else  // integers and bool

// The signed and unsigned types of T's width, and whether T is signed.
template <typename X>
struct Int;
template <> struct Int<signed char> { typedef signed char S; typedef unsigned char U; enum { SIGNED = 1 }; };
template <> struct Int<unsigned char> { typedef signed char S; typedef unsigned char U; enum { SIGNED = 0 }; };
template <> struct Int<short> { typedef short S; typedef unsigned short U; enum { SIGNED = 1 }; };
template <> struct Int<int> { typedef int S; typedef unsigned int U; enum { SIGNED = 1 }; };
template <> struct Int<long long> { typedef long long S; typedef unsigned long long U; enum { SIGNED = 1 }; };
typedef Int<TI>::S TS;
typedef Int<TI>::U TU;
enum { W = 8 * (int)sizeof(TI) };

// Never NaN or infinite, always finite; the sign of a signed integer.
template <int OP>
struct IntTest {
    typedef u8 Out;
    enum { NIN = 1 };
    static __device__ __forceinline__ u8 f(const TI (&x)[1], const LogicParams&) {
        if (OP == ISFINITE) return 1;
        if (OP == SIGNBIT) return Int<TI>::SIGNED && (TS)x[0] < 0;
        return 0;
    }
};
template <> struct Logic<ISNAN> : IntTest<ISNAN> {};
template <> struct Logic<ISINF> : IntTest<ISINF> {};
template <> struct Logic<ISFINITE> : IntTest<ISFINITE> {};
template <> struct Logic<ISPOSINF> : IntTest<ISPOSINF> {};
template <> struct Logic<ISNEGINF> : IntTest<ISNEGINF> {};
template <> struct Logic<SIGNBIT> : IntTest<SIGNBIT> {};

template <int OP>
struct Bitwise {
    typedef TI Out;
    enum { NIN = 2 };
    static __device__ __forceinline__ TI f(const TI (&x)[2], const LogicParams&) {
#if LOGIC_BOOL
        const bool a = nonzero(x[0]), b = nonzero(x[1]);
        return OP == BITWISE_AND ? a && b : OP == BITWISE_OR ? a || b : a != b;
#else
        return (TI)(OP == BITWISE_AND ? x[0] & x[1] : OP == BITWISE_OR ? x[0] | x[1] : x[0] ^ x[1]);
#endif
    }
};
template <> struct Logic<BITWISE_AND> : Bitwise<BITWISE_AND> {};
template <> struct Logic<BITWISE_OR> : Bitwise<BITWISE_OR> {};
template <> struct Logic<BITWISE_XOR> : Bitwise<BITWISE_XOR> {};

template <>
struct Logic<BITWISE_NOT> {
    typedef TI Out;
    enum { NIN = 1 };
    static __device__ __forceinline__ TI f(const TI (&x)[1], const LogicParams&) {
#if LOGIC_BOOL
        return !nonzero(x[0]);
#else
        return (TI)~x[0];
#endif
    }
};

template <>
struct Logic<LEFT_SHIFT> {
    typedef TI Out;
    enum { NIN = 2 };
    static __device__ __forceinline__ TI f(const TI (&x)[2], const LogicParams&) {
        const TI a = x[0], b = x[1];
        if ((TS)b < 0 || b >= W) return 0;
        return (TI)((TU)a << b);
    }
};

template <>
struct Logic<RIGHT_SHIFT> {
    typedef TI Out;
    enum { NIN = 2 };
    static __device__ __forceinline__ TI f(const TI (&x)[2], const LogicParams&) {
        const int m = W - Int<TI>::SIGNED;
        const TI a = x[0], b = x[1];
        if ((TS)b < 0 || b >= m) return (TI)(a >> m);
        return (TI)(a >> b);
    }
};

// The C++ promoted type of T (int, or i64 for i64) and its unsigned type.
typedef decltype(+TI()) P;
typedef Int<P>::U PU;

// |v| in P, wrapping (|P's minimum| is itself), narrowed to T.
__device__ __forceinline__ TI abs_narrow(P v) { return (TI)(v < 0 ? (P)(PU(0) - (PU)v) : v); }

__device__ __forceinline__ TI gcd(TI x, TI y) {
    TI a = abs_narrow(x), b = abs_narrow(y);
    while (a != 0) {
        const TI c = a;
        const P pa = a, pb = b;
        // x % -1 is 0; P's minimum % -1 would overflow
        a = (TI)(pa == P(-1) ? P(0) : pb % pa);
        b = c;
    }
    return b;
}

template <>
struct Logic<GCD> {
    typedef TI Out;
    enum { NIN = 2 };
    static __device__ __forceinline__ TI f(const TI (&x)[2], const LogicParams&) { return gcd(x[0], x[1]); }
};

template <>
struct Logic<LCM> {
    typedef TI Out;
    enum { NIN = 2 };
    static __device__ __forceinline__ TI f(const TI (&x)[2], const LogicParams&) {
        const TI g = gcd(x[0], x[1]);
        if (g == 0) return 0;
        const P pg = g, pa = x[0], pb = x[1];
        const P q = pg == P(-1) ? (P)(PU(0) - (PU)pa) : pa / pg;
        return abs_narrow((P)((PU)q * (PU)pb));
    }
};
#endif

// Logic<OP>::f as typed_map.cuh's functor.
template <int OP>
struct LogicFn {
    LogicParams q;
    __device__ __forceinline__ typename Logic<OP>::Out operator()(const TI (&x)[Logic<OP>::NIN]) const {
        return Logic<OP>::f(x, q);
    }
};

// The strided kernels of op OP: logic_strided32_NAME, logic_strided64_NAME.
#define LOGIC_STRIDED(NAME, OP)                                                                         \
    extern "C" __global__ void __launch_bounds__(256) logic_strided32_##NAME(StridedArgs p,             \
                                                                            const LogicParams q) {      \
        typed_strided<TI, Logic<OP>::Out, Logic<OP>::NIN, u32>(p, LogicFn<OP>{q});                      \
    }                                                                                                   \
    extern "C" __global__ void __launch_bounds__(256) logic_strided64_##NAME(StridedArgs p,             \
                                                                            const LogicParams q) {      \
        typed_strided<TI, Logic<OP>::Out, Logic<OP>::NIN, u64>(p, LogicFn<OP>{q});                      \
    }

// The kernels of a binary op: logic_contig_NAME(a, b, out, n, q) and the
// strided ones.
#define BINARY_LOGIC(NAME, OP)                                                                          \
    extern "C" __global__ void __launch_bounds__(256) logic_contig_##NAME(                              \
        const TI* __restrict__ a, const TI* __restrict__ b, Logic<OP>::Out* __restrict__ out, u64 n,    \
        const LogicParams q) {                                                                          \
        const TI* const in[2] = {a, b};                                                                 \
        typed_contig<TI, Logic<OP>::Out, 2>(in, out, n, LogicFn<OP>{q});                                \
    }                                                                                                   \
    LOGIC_STRIDED(NAME, OP)

// The kernels of a unary op: logic_contig_NAME(x, y, n, q) and the strided
// ones.
#define UNARY_LOGIC(NAME, OP)                                                                           \
    extern "C" __global__ void __launch_bounds__(256) logic_contig_##NAME(                              \
        const TI* __restrict__ x, Logic<OP>::Out* __restrict__ y, u64 n, const LogicParams q) {         \
        const TI* const in[1] = {x};                                                                    \
        typed_contig<TI, Logic<OP>::Out, 1>(in, y, n, LogicFn<OP>{q});                                  \
    }                                                                                                   \
    LOGIC_STRIDED(NAME, OP)

#if LOGIC_OP == 0
BINARY_LOGIC(eq, EQ)
#elif LOGIC_OP == 1
BINARY_LOGIC(ne, NE)
#elif LOGIC_OP == 2
BINARY_LOGIC(lt, LT)
#elif LOGIC_OP == 3
BINARY_LOGIC(le, LE)
#elif LOGIC_OP == 4
BINARY_LOGIC(gt, GT)
#elif LOGIC_OP == 5
BINARY_LOGIC(ge, GE)
#elif LOGIC_OP == 6
BINARY_LOGIC(isclose, ISCLOSE)
#elif LOGIC_OP == 7
BINARY_LOGIC(logical_and, LOGICAL_AND)
#elif LOGIC_OP == 8
BINARY_LOGIC(logical_or, LOGICAL_OR)
#elif LOGIC_OP == 9
BINARY_LOGIC(logical_xor, LOGICAL_XOR)
#elif LOGIC_OP == 10
BINARY_LOGIC(bitwise_and, BITWISE_AND)
#elif LOGIC_OP == 11
BINARY_LOGIC(bitwise_or, BITWISE_OR)
#elif LOGIC_OP == 12
BINARY_LOGIC(bitwise_xor, BITWISE_XOR)
#elif LOGIC_OP == 13
BINARY_LOGIC(bitwise_left_shift, LEFT_SHIFT)
#elif LOGIC_OP == 14
BINARY_LOGIC(bitwise_right_shift, RIGHT_SHIFT)
#elif LOGIC_OP == 15
BINARY_LOGIC(gcd, GCD)
#elif LOGIC_OP == 16
BINARY_LOGIC(lcm, LCM)
#elif LOGIC_OP == 17
UNARY_LOGIC(isnan, ISNAN)
#elif LOGIC_OP == 18
UNARY_LOGIC(isinf, ISINF)
#elif LOGIC_OP == 19
UNARY_LOGIC(isfinite, ISFINITE)
#elif LOGIC_OP == 20
UNARY_LOGIC(isposinf, ISPOSINF)
#elif LOGIC_OP == 21
UNARY_LOGIC(isneginf, ISNEGINF)
#elif LOGIC_OP == 22
UNARY_LOGIC(signbit, SIGNBIT)
#elif LOGIC_OP == 23
UNARY_LOGIC(logical_not, LOGICAL_NOT)
#elif LOGIC_OP == 24
UNARY_LOGIC(bitwise_not, BITWISE_NOT)
#else
#error "LOGIC_OP out of range"
#endif
