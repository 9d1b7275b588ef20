//! Element types a kernel can read or write.

use core::fmt;

/// The runtime tag of an element type.
///
/// Exhaustive on purpose: kernel dispatchers match on it in hot paths, and a
/// new dtype is a deliberate, breaking change.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum ElementKind {
    /// IEEE-754 binary32.
    F32,
    /// IEEE-754 binary64.
    F64,
    /// IEEE-754 binary16.
    F16,
    /// bfloat16 (8-bit exponent, 7-bit mantissa).
    Bf16,
    /// Signed 8-bit integer.
    I8,
    /// Unsigned 8-bit integer.
    U8,
    /// Signed 16-bit integer.
    I16,
    /// Signed 32-bit integer.
    I32,
    /// Signed 64-bit integer.
    I64,
    /// Unsigned 32-bit integer.
    U32,
    /// Boolean stored as one byte (0 or 1).
    Bool,
    /// OCP fp8 E4M3 (finite-only, max 448).
    Fp8E4M3,
    /// OCP fp8 E5M2.
    Fp8E5M2,
}

impl ElementKind {
    /// The type float math on this kind accumulates in: f64 for f64, f32
    /// for every narrower float (f32, f16, bf16, fp8).
    pub fn float_accumulator(self) -> ElementKind {
        if self == ElementKind::F64 {
            ElementKind::F64
        } else {
            ElementKind::F32
        }
    }

    /// Every element kind, in declaration order.
    pub const ALL: [ElementKind; 13] = [
        ElementKind::F32,
        ElementKind::F64,
        ElementKind::F16,
        ElementKind::Bf16,
        ElementKind::I8,
        ElementKind::U8,
        ElementKind::I16,
        ElementKind::I32,
        ElementKind::I64,
        ElementKind::U32,
        ElementKind::Bool,
        ElementKind::Fp8E4M3,
        ElementKind::Fp8E5M2,
    ];

    /// Size of one element in bytes.
    pub const fn size_bytes(self) -> usize {
        match self {
            ElementKind::F64 | ElementKind::I64 => 8,
            ElementKind::F32 | ElementKind::I32 | ElementKind::U32 => 4,
            ElementKind::F16 | ElementKind::Bf16 | ElementKind::I16 => 2,
            ElementKind::I8
            | ElementKind::U8
            | ElementKind::Bool
            | ElementKind::Fp8E4M3
            | ElementKind::Fp8E5M2 => 1,
        }
    }

    /// Short lowercase name, as PyTorch spells it where it has one.
    pub const fn name(self) -> &'static str {
        match self {
            ElementKind::F32 => "f32",
            ElementKind::F64 => "f64",
            ElementKind::F16 => "f16",
            ElementKind::Bf16 => "bf16",
            ElementKind::I8 => "i8",
            ElementKind::U8 => "u8",
            ElementKind::I16 => "i16",
            ElementKind::I32 => "i32",
            ElementKind::I64 => "i64",
            ElementKind::U32 => "u32",
            ElementKind::Bool => "bool",
            ElementKind::Fp8E4M3 => "fp8_e4m3",
            ElementKind::Fp8E5M2 => "fp8_e5m2",
        }
    }

    /// True for the floating-point kinds (fp8 included).
    pub const fn is_float(self) -> bool {
        matches!(
            self,
            ElementKind::F32
                | ElementKind::F64
                | ElementKind::F16
                | ElementKind::Bf16
                | ElementKind::Fp8E4M3
                | ElementKind::Fp8E5M2
        )
    }

    /// Unit roundoff (half the distance from 1.0 to the next value) of a
    /// float kind; `0.0` for integer kinds, which round nothing.
    pub const fn unit_roundoff(self) -> f64 {
        match self {
            ElementKind::F64 => 1.1102230246251565e-16,
            ElementKind::F32 => 5.960464477539063e-8,
            ElementKind::F16 => 4.8828125e-4,
            ElementKind::Bf16 => 3.90625e-3,
            ElementKind::Fp8E4M3 => 6.25e-2,
            ElementKind::Fp8E5M2 => 0.125,
            _ => 0.0,
        }
    }
}

impl fmt::Display for ElementKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

mod sealed {
    pub trait Sealed {}
}

/// A Rust type that is the host representation of one [`ElementKind`].
///
/// Sealed: the set of element types is closed, so a plan can match on
/// [`Element::KIND`] exhaustively. `to_f64` / `from_f64` exist for reference
/// oracles and tests; `from_f64` rounds to nearest (integers saturate).
pub trait Element:
    sealed::Sealed + Copy + Send + Sync + PartialEq + fmt::Debug + Default + 'static
{
    /// The runtime tag of this type.
    const KIND: ElementKind;
    /// Widen to f64 (exact for every kind but i64 beyond 2^53).
    fn to_f64(self) -> f64;
    /// Narrow from f64, rounding to nearest.
    fn from_f64(v: f64) -> Self;
}

macro_rules! float_element {
    ($t:ty, $kind:ident, |$v:ident| $from:expr, |$s:ident| $to:expr) => {
        impl sealed::Sealed for $t {}
        impl Element for $t {
            const KIND: ElementKind = ElementKind::$kind;
            #[inline]
            fn to_f64(self) -> f64 {
                let $s = self;
                $to
            }
            #[inline]
            fn from_f64($v: f64) -> Self {
                $from
            }
        }
    };
}

/// `v` rounded to f32 toward the odd neighbour when inexact (round to
/// odd): rounding that to a type of at most 22 significand bits once more,
/// to nearest even, gives `v` correctly rounded to that type. (`half`'s own
/// `from_f64` looks at too few bits: 1001472.25 becomes bf16 999424, and
/// 1 + 2^-11 + 2^-40 becomes f16 1.)
fn f32_round_to_odd(v: f64) -> f32 {
    let a = v.abs();
    let f = a as f32;
    if f.is_infinite() || a.is_nan() || f64::from(f) == a {
        return v as f32;
    }
    let bits = f.to_bits();
    let odd = if bits & 1 == 1 {
        bits
    } else if f64::from(f) < a {
        bits + 1
    } else {
        bits - 1
    };
    f32::from_bits(odd).copysign(v as f32)
}

float_element!(f32, F32, |v| v as f32, |s| s as f64);
float_element!(f64, F64, |v| v, |s| s);
float_element!(
    half::f16,
    F16,
    |v| half::f16::from_f32(f32_round_to_odd(v)),
    |s| half::f16::to_f64(s)
);
float_element!(
    half::bf16,
    Bf16,
    |v| half::bf16::from_f32(f32_round_to_odd(v)),
    |s| half::bf16::to_f64(s)
);
float_element!(
    float8::F8E4M3,
    Fp8E4M3,
    |v| float8::F8E4M3::from_f64(v),
    |s| float8::F8E4M3::to_f64(&s)
);
float_element!(
    float8::F8E5M2,
    Fp8E5M2,
    |v| float8::F8E5M2::from_f64(v),
    |s| float8::F8E5M2::to_f64(&s)
);
// `as` from f64 to an integer saturates and maps NaN to 0, which is the
// documented behaviour of `from_f64` for integer kinds.
float_element!(i8, I8, |v| v.round() as i8, |s| s as f64);
float_element!(u8, U8, |v| v.round() as u8, |s| s as f64);
float_element!(i16, I16, |v| v.round() as i16, |s| s as f64);
float_element!(i32, I32, |v| v.round() as i32, |s| s as f64);
float_element!(i64, I64, |v| v.round() as i64, |s| s as f64);
float_element!(u32, U32, |v| v.round() as u32, |s| s as f64);
float_element!(bool, Bool, |v| v != 0.0, |s| if s { 1.0 } else { 0.0 });

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_match_rust_types() {
        assert_eq!(ElementKind::F32.size_bytes(), core::mem::size_of::<f32>());
        assert_eq!(
            ElementKind::Bf16.size_bytes(),
            core::mem::size_of::<half::bf16>()
        );
        assert_eq!(
            ElementKind::Fp8E4M3.size_bytes(),
            core::mem::size_of::<float8::F8E4M3>()
        );
        assert_eq!(ElementKind::I64.size_bytes(), core::mem::size_of::<i64>());
        assert_eq!(ElementKind::Bool.size_bytes(), core::mem::size_of::<bool>());
    }

    #[test]
    fn round_trips() {
        assert_eq!(half::bf16::from_f64(1.5).to_f64(), 1.5);
        assert_eq!(i8::from_f64(300.0), 127);
        assert_eq!(u8::from_f64(-3.0), 0);
        assert!(bool::from_f64(2.0));
        assert_eq!(float8::F8E4M3::from_f64(2.0).to_f64(), 2.0);
    }

    #[test]
    fn sixteen_bit_floats_round_to_nearest_even() {
        let p = |e: i32| 2f64.powi(e);
        // Element's conversions (the half crate's inherent from_f64 is the
        // one they replace)
        let h = <half::f16 as Element>::from_f64;
        let bf = <half::bf16 as Element>::from_f64;
        // just above a midpoint: up, whatever the distance
        assert_eq!(bf(1001472.25).to_f64(), 1003520.0);
        assert_eq!(bf(1.0 + p(-8) + p(-40)).to_f64(), 1.0 + p(-7));
        assert_eq!(h(1.0 + p(-11) + p(-40)).to_f64(), 1.0 + p(-10));
        assert_eq!(h(-(1.0 + p(-11) + p(-40))).to_f64(), -(1.0 + p(-10)));
        // exact midpoints: to even
        assert_eq!(bf(1.0 + p(-8)).to_f64(), 1.0);
        assert_eq!(h(1.0 + 3.0 * p(-11)).to_f64(), 1.0 + p(-9));
        // just below a midpoint: down
        assert_eq!(h(1.0 + p(-11) - p(-40)).to_f64(), 1.0);
        // specials, overflow, zeros and subnormals
        assert!(h(f64::NAN).to_f64().is_nan());
        assert_eq!(h(1e300).to_f64(), f64::INFINITY);
        assert_eq!(bf(-1e300).to_f64(), f64::NEG_INFINITY);
        assert_eq!(h(65520.0).to_f64(), f64::INFINITY);
        assert_eq!(h(65519.99).to_f64(), 65504.0);
        assert!(h(-0.0).to_f64().is_sign_negative());
        assert_eq!(h(p(-25) + p(-60)).to_f64(), p(-24));
        assert_eq!(h(p(-25)).to_f64(), 0.0);
        assert_eq!(bf(1e-300).to_f64(), 0.0);
    }
}
