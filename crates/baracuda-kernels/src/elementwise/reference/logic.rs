//! f64 oracles of the logic ops ([`BinaryLogicOp`], [`UnaryLogicOp`]):
//! comparisons, `isclose`, logical and bitwise ops, shifts, `gcd`, `lcm`
//! and the predicates, as PyTorch's CUDA kernels compute them.
//!
//! Values are f64: every element of every kind the ops take is exact in
//! f64 (i64 within 2^53 and at its power-of-two minimum); a bool is 0 or 1,
//! and results are f64 too (bool outputs 0 or 1, integer outputs their
//! value). The element kind says how the integer ops wrap and how
//! `isclose` rounds.

use baracuda_kernels_types::ElementKind;

use super::broadcast;
use crate::elementwise::{BinaryLogicOp, UnaryLogicOp};

/// The binary cases the tests and goldens check, by name (`logic_<name>`
/// rows, `logic.<name>` goldens): every op, `isclose` with PyTorch's
/// defaults and with three more sets of tolerances.
pub fn binary_logic_cases() -> Vec<(&'static str, BinaryLogicOp)> {
    let close = |rtol, atol, equal_nan| BinaryLogicOp::IsClose {
        rtol,
        atol,
        equal_nan,
    };
    let mut v: Vec<_> = BinaryLogicOp::ALL.iter().map(|&op| (op.name(), op)).collect();
    v.extend([
        // tolerances wide enough for ties with the bound in every dtype
        ("isclose_loose", close(0.05, 0.01, true)),
        // rtol 0: allowed error atol, NaN against an infinite b
        ("isclose_atol", close(0.0, 0.125, false)),
        // equality alone, NaN equal to NaN
        ("isclose_exact", close(0.0, 0.0, true)),
    ]);
    v
}

/// Bits and signedness of an integer kind (None for floats and bool).
fn int_kind(kind: ElementKind) -> Option<(u32, bool)> {
    match kind {
        ElementKind::I8 => Some((8, true)),
        ElementKind::U8 => Some((8, false)),
        ElementKind::I16 => Some((16, true)),
        ElementKind::I32 => Some((32, true)),
        ElementKind::I64 => Some((64, true)),
        _ => None,
    }
}

/// `v` in two's complement of `bits` bits, signed or not: the value an
/// integer of that width holds after C's narrowing conversion.
fn wrap(v: i128, bits: u32, signed: bool) -> i128 {
    let m = 1i128 << bits;
    let r = v.rem_euclid(m);
    if signed && r >= m / 2 {
        r - m
    } else {
        r
    }
}

/// Bits of C++'s promoted type of an integer of `bits` bits: int, or i64.
fn promoted(bits: u32) -> u32 {
    bits.max(32)
}

/// `|v|` in the promoted type (wrapping at its minimum), narrowed to the
/// element's width.
fn abs_narrow(v: i128, (bits, signed): (u32, bool)) -> i128 {
    wrap(wrap(v.abs(), promoted(bits), true), bits, signed)
}

/// PyTorch's CUDA gcd: Euclid's algorithm on `|a|`, `|b|` (see
/// [`BinaryLogicOp::Gcd`]), each remainder in the promoted type.
fn gcd(a: i128, b: i128, int: (u32, bool)) -> i128 {
    let (mut a, mut b) = (abs_narrow(a, int), abs_narrow(b, int));
    while a != 0 {
        let c = a;
        // x % -1 is 0 (the kernel skips the remainder, which overflows at
        // the promoted type's minimum)
        a = if a == -1 { 0 } else { wrap(b % a, int.0, int.1) };
        b = c;
    }
    b
}

/// PyTorch's CUDA lcm: `|a / gcd * b|` in the promoted type, wrapping,
/// narrowed; 0 where the gcd is 0.
fn lcm(a: i128, b: i128, int: (u32, bool)) -> i128 {
    let g = gcd(a, b, int);
    if g == 0 {
        return 0;
    }
    let p = promoted(int.0);
    let q = wrap(a / g, p, true);
    abs_narrow(wrap(q * b, p, true), int)
}

/// A float `v` stored as `kind` (f32, f16 or bf16) and read back: the
/// rounding of a tensor PyTorch writes between two kernels.
fn stored(kind: ElementKind, v: f32) -> f32 {
    match kind {
        ElementKind::F16 => half::f16::from_f32(v).to_f32(),
        ElementKind::Bf16 => half::bf16::from_f32(v).to_f32(),
        _ => v,
    }
}

/// PyTorch's `isclose` composite on one pair of elements of float `kind`:
/// in f32 (f64 for f64), each intermediate tensor rounded to `kind`.
fn isclose(kind: ElementKind, a: f64, b: f64, (rtol, atol, equal_nan): (f64, f64, bool)) -> bool {
    let close = a == b || (equal_nan && a.is_nan() && b.is_nan());
    if rtol == 0.0 && atol == 0.0 {
        return close;
    }
    let (allowed, actual) = if kind == ElementKind::F64 {
        (atol + (rtol * b).abs(), (a - b).abs())
    } else {
        let (a, b) = (a as f32, b as f32);
        let allowed = stored(kind, atol as f32 + stored(kind, rtol as f32 * b).abs());
        let actual = stored(kind, a - b).abs();
        (f64::from(allowed), f64::from(actual))
    };
    close || (actual.is_finite() && actual <= allowed)
}

fn truth(p: bool) -> f64 {
    if p {
        1.0
    } else {
        0.0
    }
}

/// `f(a, b)` of one pair of elements of `kind` (see [`BinaryLogicOp`]).
/// The integer ops take integer kinds (bool for the bitwise ones).
pub fn binary_logic_scalar(op: BinaryLogicOp, kind: ElementKind, a: f64, b: f64) -> f64 {
    use BinaryLogicOp as B;
    let (ta, tb) = (a != 0.0, b != 0.0);
    match op {
        B::Eq => truth(a == b),
        B::Ne => truth(a != b),
        B::Lt => truth(a < b),
        B::Le => truth(a <= b),
        B::Gt => truth(a > b),
        B::Ge => truth(a >= b),
        B::IsClose {
            rtol,
            atol,
            equal_nan,
        } => truth(isclose(kind, a, b, (rtol, atol, equal_nan))),
        B::LogicalAnd => truth(ta && tb),
        B::LogicalOr => truth(ta || tb),
        B::LogicalXor => truth(ta != tb),
        _ if kind == ElementKind::Bool => match op {
            B::BitwiseAnd => truth(ta && tb),
            B::BitwiseOr => truth(ta || tb),
            B::BitwiseXor => truth(ta != tb),
            _ => panic!("{} takes no bool", op.name()),
        },
        _ => {
            let int = int_kind(kind).unwrap_or_else(|| panic!("{} on {kind}", op.name()));
            let (bits, signed) = int;
            // i64's largest value is no f64: 2^63 stands for it, as an
            // i64 buffer rounded from it holds it
            let value = |v: f64| if bits == 64 { i128::from(v as i64) } else { v as i128 };
            let (a, b) = (value(a), value(b));
            // the count read as signed, as PyTorch's shifts compare it with 0
            let negative = wrap(b, bits, true) < 0;
            let r = match op {
                B::BitwiseAnd => a & b,
                B::BitwiseOr => a | b,
                B::BitwiseXor => a ^ b,
                B::BitwiseLeftShift if negative || b >= i128::from(bits) => 0,
                B::BitwiseLeftShift => a << b,
                B::BitwiseRightShift => {
                    let m = i128::from(bits - u32::from(signed));
                    a >> if negative || b >= m { m } else { b }
                }
                B::Gcd => gcd(a, b, int),
                _ => lcm(a, b, int),
            };
            wrap(r, bits, signed) as f64
        }
    }
}

/// `out = f(a, b)` with broadcasting, in the broadcast shape (row-major,
/// same rank).
pub fn binary_logic(
    op: BinaryLogicOp,
    kind: ElementKind,
    a: &[f64],
    a_shape: &[usize],
    b: &[f64],
    b_shape: &[usize],
) -> Vec<f64> {
    let out_shape: Vec<usize> = a_shape
        .iter()
        .zip(b_shape)
        .map(|(&x, &y)| if x == 1 { y } else { x })
        .collect();
    let ab = broadcast(a, a_shape, &out_shape);
    let bb = broadcast(b, b_shape, &out_shape);
    ab.iter()
        .zip(&bb)
        .map(|(&x, &y)| binary_logic_scalar(op, kind, x, y))
        .collect()
}

/// `f(x)` of one element of `kind` (see [`UnaryLogicOp`]).
pub fn unary_logic_scalar(op: UnaryLogicOp, kind: ElementKind, x: f64) -> f64 {
    use UnaryLogicOp as U;
    match op {
        // integer values are finite: never NaN or infinite
        U::IsNan => truth(x.is_nan()),
        U::IsInf => truth(x.is_infinite()),
        U::IsFinite => truth(x.is_finite()),
        U::IsPosInf => truth(x == f64::INFINITY),
        U::IsNegInf => truth(x == f64::NEG_INFINITY),
        U::Signbit if kind.is_float() => truth(x.is_sign_negative()),
        U::Signbit => truth(x < 0.0),
        U::LogicalNot => truth(x == 0.0),
        U::BitwiseNot => match int_kind(kind) {
            Some((bits, signed)) => wrap(!i128::from(x as i64), bits, signed) as f64,
            None => truth(x == 0.0),
        },
    }
}

/// [`unary_logic_scalar`] over a slice.
pub fn unary_logic(op: UnaryLogicOp, kind: ElementKind, x: &[f64]) -> Vec<f64> {
    x.iter().map(|&v| unary_logic_scalar(op, kind, v)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use BinaryLogicOp as B;
    use ElementKind as K;

    fn f(op: BinaryLogicOp, kind: ElementKind, a: f64, b: f64) -> f64 {
        binary_logic_scalar(op, kind, a, b)
    }

    #[test]
    fn comparisons_are_ieee() {
        let nan = f64::NAN;
        for kind in [K::F32, K::Bf16] {
            assert_eq!(f(B::Eq, kind, nan, nan), 0.0);
            assert_eq!(f(B::Ne, kind, nan, 1.0), 1.0);
            assert_eq!(f(B::Lt, kind, nan, 1.0), 0.0);
            assert_eq!(f(B::Ge, kind, 1.0, nan), 0.0);
            assert_eq!(f(B::Eq, kind, -0.0, 0.0), 1.0);
            assert_eq!(f(B::Le, kind, f64::NEG_INFINITY, -1e30), 1.0);
        }
        assert_eq!(f(B::Lt, K::Bool, 0.0, 1.0), 1.0);
        assert_eq!(f(B::Gt, K::I8, -128.0, 127.0), 0.0);
        assert_eq!(f(B::LogicalAnd, K::F32, nan, -0.0), 0.0);
        assert_eq!(f(B::LogicalOr, K::F32, nan, 0.0), 1.0);
        assert_eq!(f(B::LogicalXor, K::I32, 3.0, -1.0), 0.0);
    }

    #[test]
    fn shifts_follow_pytorchs_cuda_kernels() {
        // left: 0 at or past the width and for negative counts, wrapping
        assert_eq!(f(B::BitwiseLeftShift, K::I8, 1.0, 7.0), -128.0);
        assert_eq!(f(B::BitwiseLeftShift, K::I8, 3.0, 8.0), 0.0);
        assert_eq!(f(B::BitwiseLeftShift, K::I8, 3.0, -1.0), 0.0);
        assert_eq!(f(B::BitwiseLeftShift, K::U8, 255.0, 1.0), 254.0);
        assert_eq!(f(B::BitwiseLeftShift, K::U8, 1.0, 200.0), 0.0);
        assert_eq!(f(B::BitwiseLeftShift, K::I32, -1.0, 31.0), f64::from(i32::MIN));
        assert_eq!(f(B::BitwiseLeftShift, K::I64, 1.0, 63.0), i64::MIN as f64);
        assert_eq!(f(B::BitwiseLeftShift, K::I64, 1.0, 64.0), 0.0);
        // right: arithmetic, sign fill at or past width - 1 and for
        // negative counts; u8 zero past 7
        assert_eq!(f(B::BitwiseRightShift, K::I8, -128.0, 7.0), -1.0);
        assert_eq!(f(B::BitwiseRightShift, K::I8, -5.0, 1.0), -3.0);
        assert_eq!(f(B::BitwiseRightShift, K::I8, -5.0, 100.0), -1.0);
        assert_eq!(f(B::BitwiseRightShift, K::I8, 5.0, -3.0), 0.0);
        assert_eq!(f(B::BitwiseRightShift, K::I16, -7.0, -3.0), -1.0);
        assert_eq!(f(B::BitwiseRightShift, K::U8, 255.0, 7.0), 1.0);
        assert_eq!(f(B::BitwiseRightShift, K::U8, 255.0, 8.0), 0.0);
        assert_eq!(f(B::BitwiseRightShift, K::U8, 255.0, 130.0), 0.0);
        assert_eq!(f(B::BitwiseRightShift, K::I64, i64::MIN as f64, 64.0), -1.0);
        // 2^63 is i64's largest value
        assert_eq!(f(B::BitwiseRightShift, K::I64, 2f64.powi(63), 62.0), 1.0);
    }

    #[test]
    fn bitwise_ops_wrap_and_bools_use_truth_values() {
        assert_eq!(f(B::BitwiseAnd, K::I8, -1.0, 85.0), 85.0);
        assert_eq!(f(B::BitwiseOr, K::U8, 240.0, 15.0), 255.0);
        assert_eq!(f(B::BitwiseXor, K::I32, -1.0, 0.0), -1.0);
        assert_eq!(f(B::BitwiseXor, K::Bool, 1.0, 1.0), 0.0);
        assert_eq!(f(B::BitwiseOr, K::Bool, 0.0, 1.0), 1.0);
        let not = |k, x| unary_logic_scalar(UnaryLogicOp::BitwiseNot, k, x);
        assert_eq!(not(K::U8, 5.0), 250.0);
        assert_eq!(not(K::I8, -128.0), 127.0);
        assert_eq!(not(K::I64, 0.0), -1.0);
        assert_eq!(not(K::Bool, 1.0), 0.0);
    }

    #[test]
    fn gcd_and_lcm_follow_pytorchs_cuda_functions() {
        assert_eq!(f(B::Gcd, K::I32, 12.0, -18.0), 6.0);
        assert_eq!(f(B::Gcd, K::I32, 0.0, 0.0), 0.0);
        assert_eq!(f(B::Gcd, K::I32, 0.0, -7.0), 7.0);
        // |MIN| wraps to MIN: the gcd with 0 is MIN, with 6 negative
        assert_eq!(f(B::Gcd, K::I8, -128.0, 0.0), -128.0);
        assert_eq!(f(B::Gcd, K::I8, -128.0, 6.0), -2.0);
        assert_eq!(f(B::Gcd, K::I32, f64::from(i32::MIN), 0.0), f64::from(i32::MIN));
        assert_eq!(f(B::Gcd, K::I64, i64::MIN as f64, 0.0), i64::MIN as f64);
        assert_eq!(f(B::Gcd, K::U8, 255.0, 85.0), 85.0);
        assert_eq!(f(B::Lcm, K::I32, 4.0, -6.0), 12.0);
        assert_eq!(f(B::Lcm, K::I32, 0.0, 5.0), 0.0);
        assert_eq!(f(B::Lcm, K::I16, 0.0, 0.0), 0.0);
        // in int, then narrowed: 100 * 3 = 300 is 44 in u8, 120 * 7 = 840
        // is 72 in i8
        assert_eq!(f(B::Lcm, K::U8, 100.0, 3.0), 44.0);
        assert_eq!(f(B::Lcm, K::I8, 120.0, 7.0), 72.0);
        // i8: gcd(-128, 127) is -1, |-128 / -1 * 127| = 16256 in int: -128
        assert_eq!(f(B::Gcd, K::I8, -128.0, 127.0), -1.0);
        assert_eq!(f(B::Lcm, K::I8, -128.0, 127.0), -128.0);
        // i32 wraps: 65536 * 65537 / 1
        assert_eq!(f(B::Lcm, K::I32, 65536.0, 65537.0), 65536.0);
    }

    #[test]
    fn isclose_rounds_as_the_composite() {
        let close = |rtol, atol, equal_nan| B::IsClose {
            rtol,
            atol,
            equal_nan,
        };
        let d = close(1e-5, 1e-8, false);
        assert_eq!(f(d, K::F64, 1.0, 1.0 + 1e-6), 1.0);
        assert_eq!(f(d, K::F64, 1.0, 1.0 + 1e-4), 0.0);
        assert_eq!(f(d, K::F32, f64::INFINITY, f64::INFINITY), 1.0);
        assert_eq!(f(d, K::F32, f64::INFINITY, 1e30), 0.0);
        assert_eq!(f(d, K::F32, f64::NAN, f64::NAN), 0.0);
        assert_eq!(f(close(1e-5, 1e-8, true), K::F16, f64::NAN, f64::NAN), 1.0);
        // equality alone at zero tolerances
        assert_eq!(f(close(0.0, 0.0, false), K::F64, 1.0, 1.0 + 1e-15), 0.0);
        // bf16: 1 + 2^-7 against 1 with rtol 2^-7: allowed 1 * 2^-7 + 0
        // rounded in bf16, the difference 2^-7 exactly: close
        let b = close(0.0078125, 0.0, false);
        assert_eq!(f(b, K::Bf16, 1.0078125, 1.0), 1.0);
        // f16 overflow of a - b: 60000 - (-60000) is inf in f16, never close
        assert_eq!(f(close(10.0, 0.0, false), K::F16, 60000.0, -60000.0), 0.0);
        assert_eq!(f(close(10.0, 0.0, false), K::F32, 60000.0, -60000.0), 1.0);
        // rtol 0 with an infinite b: 0 * inf is NaN, the bound fails
        assert_eq!(f(close(0.0, 1.0, false), K::F32, 1e30, f64::INFINITY), 0.0);
    }

    #[test]
    fn predicates_of_integers_are_constant() {
        use UnaryLogicOp as U;
        let p = |op, k, x| unary_logic_scalar(op, k, x);
        assert_eq!(p(U::IsNan, K::I32, 5.0), 0.0);
        assert_eq!(p(U::IsFinite, K::Bool, 1.0), 1.0);
        assert_eq!(p(U::IsPosInf, K::F16, f64::INFINITY), 1.0);
        assert_eq!(p(U::IsNegInf, K::F64, f64::INFINITY), 0.0);
        assert_eq!(p(U::IsInf, K::Bf16, f64::NEG_INFINITY), 1.0);
        assert_eq!(p(U::Signbit, K::F32, -0.0), 1.0);
        assert_eq!(p(U::Signbit, K::I8, -0.0), 0.0);
        assert_eq!(p(U::Signbit, K::I64, -3.0), 1.0);
        assert_eq!(p(U::LogicalNot, K::F32, f64::NAN), 0.0);
        assert_eq!(p(U::LogicalNot, K::F32, -0.0), 1.0);
    }

    #[test]
    fn broadcasting_pairs_rows_and_columns() {
        let out = binary_logic(B::Lt, K::I32, &[1.0, 2.0], &[2, 1], &[0.0, 1.5, 3.0], &[1, 3]);
        assert_eq!(out, vec![0.0, 1.0, 1.0, 0.0, 0.0, 1.0]);
        assert_eq!(binary_logic_cases().len(), BinaryLogicOp::ALL.len() + 3);
    }
}
