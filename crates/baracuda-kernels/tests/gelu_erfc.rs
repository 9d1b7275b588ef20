//! The GELU-erf evaluation of `kernels/common/fast_math.cuh` (used by
//! `kernels/elementwise/unary.cu`), checked on the
//! host: its constants are read from the kernel source itself, the formula
//! is evaluated in f32 the way the kernel does (fused multiply-adds; IEEE
//! reciprocal and exp2 where the kernel's approximate hardware forms are
//! within an ulp), and compared with the f64 reference. Editing the
//! polynomial without refitting it fails here, without a GPU.

use baracuda_kernels::reference::elementwise::{erf, erfc};

const SOURCE: &str = include_str!("../kernels/common/fast_math.cuh");

/// The f32 literals of `half_erfc_abs` in source order: the scale of |x|,
/// 1, the ten polynomial coefficients (highest degree first), the scale of
/// x^2.
fn constants() -> (f32, [f32; 10], f32) {
    let start = SOURCE
        .find("half_erfc_abs(float x) {")
        .expect("half_erfc_abs in fast_math.cuh");
    let body = &SOURCE[start..];
    let body = &body[..body.find("\n}").expect("end of half_erfc_abs")];
    let lits: Vec<f32> = body
        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '.' || c == '-' || c == '+'))
        .filter_map(|tok| tok.strip_suffix('f'))
        .filter_map(|num| num.parse::<f32>().ok())
        .collect();
    assert_eq!(lits.len(), 13, "literals of half_erfc_abs: {lits:?}");
    assert_eq!(lits[1], 1.0);
    let mut p = [0f32; 10];
    p.copy_from_slice(&lits[2..12]);
    (lits[0], p, lits[12])
}

/// erfc(|x|/sqrt2)/2 as the kernel computes it.
fn half_erfc_abs(x: f32, k: (f32, [f32; 10], f32)) -> f32 {
    let (scale, p, sq) = k;
    let t = 1.0 / x.abs().mul_add(scale, 1.0);
    let mut q = p[0];
    for &c in &p[1..] {
        q = q.mul_add(t, c);
    }
    let e2 = ((x * x).mul_add(sq, q) as f64).exp2() as f32;
    t * e2
}

fn gelu_f32(x: f32, k: (f32, [f32; 10], f32)) -> f32 {
    let xe = x * half_erfc_abs(x, k);
    if x < 0.0 {
        xe
    } else {
        x - xe
    }
}

/// GELU-erf in f64 without cancellation in the negative tail.
fn gelu_f64(x: f64) -> f64 {
    0.5 * x * erfc(-x / std::f64::consts::SQRT_2)
}

#[test]
fn reference_erfc_matches_erf() {
    for i in 0..=800 {
        let x = -4.0 + i as f64 * 0.01;
        assert!((erfc(x) - (1.0 - erf(x))).abs() < 4e-16, "x = {x}");
    }
}

#[test]
fn erfc_evaluation_is_accurate_in_f32() {
    let k = constants();
    let mut worst = 0.0f64;
    // x in [0, 12]: erfc(x/sqrt2)/2 from 0.5 down to 1.8e-33. Besides the
    // fit (1.3e-7), f32 Horner rounding near t = 1 costs ~5e-7, and the f32
    // roundings of x*x and of the exponent up to 2 x^2 2^-24 log2(e)/2 ln2
    // = 6e-8 x^2 relative.
    for i in 0..=120_000 {
        let x = i as f32 * 1e-4;
        let got = half_erfc_abs(x, k) as f64;
        let want = 0.5 * erfc(x as f64 / std::f64::consts::SQRT_2);
        let rel = (got / want - 1.0).abs();
        let bound = 7e-7 + (x as f64).powi(2) * 6.5e-8;
        assert!(
            rel <= bound,
            "x = {x}: {got:e} vs {want:e} (rel {rel:e} > {bound:e})"
        );
        worst = worst.max(rel / bound);
    }
    assert!(worst > 0.0);
}

/// Results that differ from the correctly rounded one, over every finite
/// input of a 16-bit type whose correctly rounded result is a normal
/// number (the kernel's exp2 flushes subnormal results to zero).
fn mismatches<T: Copy>(
    from_bits: impl Fn(u16) -> T,
    to_f64: impl Fn(T) -> f64,
    round_f32: impl Fn(f32) -> T,
    round_f64: impl Fn(f64) -> T,
    bits_of: impl Fn(T) -> u16,
) -> (usize, usize) {
    let k = constants();
    let (mut differ, mut far) = (0, 0);
    for b in 0..=u16::MAX {
        let x = to_f64(from_bits(b));
        if !x.is_finite() {
            continue;
        }
        let want = round_f64(gelu_f64(x));
        if to_f64(want) != 0.0 && to_f64(want).abs() < f32::MIN_POSITIVE as f64 {
            continue;
        }
        let got = round_f32(gelu_f32(x as f32, k));
        if to_f64(got) == to_f64(want) {
            continue;
        }
        differ += 1;
        let ord = |v: T| {
            let b = bits_of(v) as i32;
            if b & 0x8000 != 0 {
                -(b & 0x7fff)
            } else {
                b
            }
        };
        if (ord(got) - ord(want)).abs() > 1 {
            far += 1;
        }
    }
    (differ, far)
}

#[test]
fn gelu_rounds_like_the_exact_result_in_bf16_and_f16() {
    use half::{bf16, f16};
    let (differ, far) = mismatches(
        bf16::from_bits,
        |v: bf16| v.to_f64(),
        bf16::from_f32,
        bf16::from_f64,
        |v: bf16| v.to_bits(),
    );
    // On an H200 (approximate reciprocal and exp2): 7 of 65280 differ;
    // through erff, 201.
    assert!(
        differ <= 16 && far == 0,
        "bf16: {differ} differ, {far} by more than one ulp"
    );
    let (differ, far) = mismatches(
        f16::from_bits,
        |v: f16| v.to_f64(),
        f16::from_f32,
        f16::from_f64,
        |v: f16| v.to_bits(),
    );
    // On an H200: 10 of 63488; through erff, 370.
    assert!(
        differ <= 24 && far == 0,
        "f16: {differ} differ, {far} by more than one ulp"
    );
}

/// f32 GELU-erf keeps its relative accuracy over the whole range, the
/// negative tail included (where `x/2 (1 + erff(x/sqrt2))` cancels to
/// 0 below x = -5.5): within 1e-6 for |x| <= 4, 6.5e-8 x^2 + 7e-7 beyond.
#[test]
fn gelu_f32_relative_error() {
    let k = constants();
    for i in -120_000..=120_000 {
        let x = i as f32 * 1e-4;
        if x == 0.0 {
            continue;
        }
        let rel = (gelu_f32(x, k) as f64 / gelu_f64(x as f64) - 1.0).abs();
        let bound = if x.abs() <= 4.0 {
            1e-6
        } else {
            7e-7 + (x as f64).powi(2) * 6.5e-8
        };
        assert!(rel <= bound, "x = {x}: relative error {rel:e} > {bound:e}");
    }
}
