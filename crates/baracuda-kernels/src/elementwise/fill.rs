//! Filling a view with one value: PyTorch's `Tensor.fill_`, and through it
//! `torch.full`, `zeros`, `ones` and their `_like` forms, into any strided
//! view of any element type.
//!
//! The value is converted to the element type on the host when the plan
//! is selected (PyTorch's `Scalar.to<scalar_t>()` rules, [`FillPlan`]);
//! the kernel (`kernels/elementwise/fill.cu`) stores its bits.

use core::marker::PhantomData;

use baracuda_driver::{LaunchArgs, ModuleSpec, Stream};
use baracuda_kernels_types::{
    BackendKind, Element, ElementKind, Error, KernelSku, PlanPreference, Result, TensorMut,
    Workspace, MAX_RANK,
};

use super::layout::{check_operand, ContigShape, MapKernels, THREADS};
use super::reference::cast_scalar;
use super::Fp8Mode;
use crate::checks::{check_element, invalid_descriptor};
use crate::kernel_sources;
use crate::plan::own_float_sku;
use crate::Plan;

/// A fill of a rank-`N` view with `value`.
#[derive(Copy, Clone, Debug, PartialEq)]
pub struct FillDescriptor<const N: usize> {
    /// Element type of `y`.
    pub element: ElementKind,
    /// Shape of `y`.
    pub shape: [usize; N],
    /// The value, converted to `element` as [`FillPlan`] says.
    pub value: f64,
}

impl<const N: usize> FillDescriptor<N> {
    /// `torch.full(shape, value, dtype=element)`.
    pub fn new(element: ElementKind, shape: [usize; N], value: f64) -> Self {
        FillDescriptor {
            element,
            shape,
            value,
        }
    }
    /// `torch.zeros(shape, dtype=element)`.
    pub fn zeros(element: ElementKind, shape: [usize; N]) -> Self {
        Self::new(element, shape, 0.0)
    }
    /// `torch.ones(shape, dtype=element)`.
    pub fn ones(element: ElementKind, shape: [usize; N]) -> Self {
        Self::new(element, shape, 1.0)
    }
}

/// Arguments of [`FillPlan`]'s [`Plan::run`].
pub struct FillArgs<'a, T, const N: usize> {
    /// Output, any non-overlapping strides.
    pub y: TensorMut<'a, T, N>,
}

/// `y[i] = value` for every element of `y`.
///
/// # Value conversion (PyTorch's `Scalar.to<scalar_t>()`)
/// - float kinds: rounded to nearest even, f16, bf16 and fp8 through f32
///   (c10's constructors take a float); NaN and ±inf kept. A finite value
///   beyond the kind's largest finite one is `InvalidDescriptor`, as
///   PyTorch's "cannot be converted without overflow" (so is ±inf into fp8
///   e4m3, which has no infinity).
/// - integer kinds: truncated toward zero; a value outside the kind's
///   range (negative for u8 and u32), NaN or ±inf is `InvalidDescriptor`,
///   as PyTorch's conversion of a float.
/// - bool: `value != 0` (NaN is true).
///
/// # Gradient
/// None: a fill has no input.
/// # Shapes
/// `y`: `desc.shape`, rank `N <= 8`. No workspace.
/// # Layout
/// Any strides. Contiguous, 16-byte aligned views take the vectorised
/// kernel (16-byte stores); others the strided kernel (64-bit offsets).
/// # Dtypes
/// Every [`ElementKind`].
/// # Errors
/// From `select`: `DtypeMismatch` if `desc.element != T::KIND`;
/// `Unsupported` for a rank `N > 8`; `InvalidDescriptor` for a value the
/// kind cannot hold (above); `PreferenceRejected` when `pref` forces a
/// backend other than `Baracuda` or caps the workspace below 0 bytes
/// (never). From `run`: `ShapeMismatch`, `ContextMismatch`.
pub struct FillPlan<T: Element, const N: usize> {
    desc: FillDescriptor<N>,
    sku: KernelSku,
    k: MapKernels,
    /// The value's bits in `T`, zero-extended.
    bits: u64,
    _t: PhantomData<T>,
}

const OP: &str = "fill";

/// The module storing elements of `bytes` bytes.
pub(crate) fn fill_spec(bytes: usize) -> ModuleSpec {
    ModuleSpec::new(&kernel_sources::FILL).define("FILL_BYTES", bytes as u32)
}

/// Every fill module: one per element size.
pub(crate) fn fill_specs() -> Vec<ModuleSpec> {
    [1, 2, 4, 8].into_iter().map(fill_spec).collect()
}

/// `value` as a `kind` element's value (exactly representable in `kind`),
/// or why it cannot be one.
pub fn fill_value(kind: ElementKind, value: f64) -> core::result::Result<f64, String> {
    use ElementKind as K;
    match kind {
        K::Bool => Ok(f64::from(value != 0.0)),
        k if k.is_float() => {
            let max = match k {
                K::F64 => f64::MAX,
                K::F32 => f64::from(f32::MAX),
                K::F16 => 65504.0,
                K::Bf16 => f64::from(half::bf16::MAX),
                K::Fp8E4M3 => 448.0,
                _ => 57344.0,
            };
            let overflows = if value.is_infinite() {
                k == K::Fp8E4M3
            } else {
                value.abs() > max
            };
            if overflows {
                return Err(format!("overflows {k} (largest finite {max})"));
            }
            Ok(cast_scalar(K::F64, k, value, Fp8Mode::NoSaturate, None))
        }
        k => {
            let (lo, end) = int_range(k);
            let t = value.trunc();
            if !value.is_finite() || t < lo || t >= end {
                return Err(format!("is not a {k} value (truncated, in [{lo}, {end}))"));
            }
            // + 0.0: an integer has no -0
            Ok(t + 0.0)
        }
    }
}

/// `[lo, end)`: the truncated values an integer kind takes from a float
/// (PyTorch rejects a negative float for the unsigned kinds).
pub(crate) fn int_range(kind: ElementKind) -> (f64, f64) {
    let p = |e: i32| 2f64.powi(e);
    match kind {
        ElementKind::I8 => (-p(7), p(7)),
        ElementKind::U8 => (0.0, p(8)),
        ElementKind::I16 => (-p(15), p(15)),
        ElementKind::I32 => (-p(31), p(31)),
        ElementKind::U32 => (0.0, p(32)),
        _ => (-p(63), p(63)),
    }
}

/// The bits of `v` (exactly representable in `T`) as a `T`, zero-extended.
pub(crate) fn bits_of<T: Element>(v: f64) -> u64 {
    // float8's conversion saturates infinities; e5m2 has them
    if T::KIND == ElementKind::Fp8E5M2 && v.is_infinite() {
        return if v > 0.0 { 0x7C } else { 0xFC };
    }
    let x = T::from_f64(v);
    let mut b = [0u8; 8];
    let n = core::mem::size_of::<T>();
    // SAFETY: T is a plain value type of `n <= 8` bytes (every Element:
    // floats, integers, bool, fp8), so its bytes can be read.
    let src = unsafe { core::slice::from_raw_parts(&x as *const T as *const u8, n) };
    b[..n].copy_from_slice(src);
    u64::from_le_bytes(b)
}

impl<T: Element, const N: usize> Plan for FillPlan<T, N> {
    type Descriptor = FillDescriptor<N>;
    type Args<'a> = FillArgs<'a, T, N>;

    fn select(stream: &Stream, desc: &Self::Descriptor, pref: &PlanPreference) -> Result<Self> {
        check_element::<T>(OP, "desc.element", desc.element)?;
        if N > MAX_RANK {
            return Err(Error::Unsupported {
                op: OP,
                what: format!("rank {N} > {MAX_RANK}"),
            });
        }
        let v = fill_value(T::KIND, desc.value)
            .map_err(|why| invalid_descriptor(OP, "value", format!("{}", desc.value), &why))?;
        pref.check_backend(OP, &[BackendKind::Baracuda])?;
        pref.check_workspace(OP, 0)?;
        let shape = ContigShape {
            threads: THREADS,
            tile: 1,
        };
        let names = ["fill_contig", "fill_strided32", "fill_strided64"];
        let k = MapKernels::load_named(stream, &fill_spec(T::KIND.size_bytes()), names, shape)?;
        Ok(FillPlan {
            desc: *desc,
            sku: own_float_sku::<T>(
                stream,
                format!("fill.{}", T::KIND),
                "vec16 contiguous / rank-8 strided",
            ),
            k,
            bits: bits_of::<T>(v),
            _t: PhantomData,
        })
    }

    fn sku(&self) -> &KernelSku {
        &self.sku
    }

    fn workspace_size(&self) -> usize {
        0
    }

    fn run(&self, stream: &Stream, _workspace: Workspace<'_>, args: Self::Args<'_>) -> Result<()> {
        let shape = &self.desc.shape;
        check_operand(
            OP,
            "y",
            stream,
            shape,
            args.y.shape(),
            args.y.data().ctx_id(),
        )?;
        let y = (args.y.data().ptr(), args.y.strides().as_slice());
        let bits = self.bits;
        let tail = |a: &mut LaunchArgs| {
            a.push(bits)?;
            Ok(())
        };
        // SAFETY: the view was bounds-checked at construction and matches
        // the plan's shape; the kernels store `T`-sized elements at it.
        unsafe {
            self.k
                .launch_with::<T, T>(OP, stream, shape, &[y], &[], tail)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ElementKind as K;

    #[test]
    fn values_convert_as_pytorch() {
        // floats: rounding through f32, specials kept
        assert_eq!(fill_value(K::F32, 0.1), Ok(f64::from(0.1f32)));
        assert_eq!(fill_value(K::F16, 65504.0), Ok(65504.0));
        assert_eq!(fill_value(K::Bf16, 1.0 + 1.0 / 256.0), Ok(1.0));
        assert!(fill_value(K::F64, f64::NAN).unwrap().is_nan());
        assert_eq!(fill_value(K::F16, f64::NEG_INFINITY), Ok(f64::NEG_INFINITY));
        assert_eq!(fill_value(K::Fp8E5M2, f64::INFINITY), Ok(f64::INFINITY));
        assert!(fill_value(K::Fp8E4M3, f64::NAN).unwrap().is_nan());
        // overflow of a finite value, and inf into e4m3
        assert!(fill_value(K::F16, 65505.0).is_err());
        assert!(fill_value(K::F32, 1e39).is_err());
        assert!(fill_value(K::Fp8E4M3, 449.0).is_err());
        assert!(fill_value(K::Fp8E4M3, f64::INFINITY).is_err());
        // integers: truncation toward zero, range checked
        assert_eq!(fill_value(K::I8, -1.7), Ok(-1.0));
        assert_eq!(fill_value(K::I8, 127.9), Ok(127.0));
        assert!(fill_value(K::I8, 128.0).is_err());
        assert!(fill_value(K::I32, f64::NAN).is_err());
        assert!(fill_value(K::I64, 2f64.powi(63)).is_err());
        assert_eq!(fill_value(K::I64, -(2f64.powi(63))), Ok(-(2f64.powi(63))));
        assert!(fill_value(K::U8, -1.0).is_err());
        assert!(fill_value(K::U8, 256.0).is_err());
        assert_eq!(fill_value(K::U8, 255.9), Ok(255.0));
        assert_eq!(fill_value(K::U32, 4294967295.0), Ok(4294967295.0));
        // an integer zero has no sign
        assert!(fill_value(K::I32, -0.0).unwrap().is_sign_positive());
        assert!(fill_value(K::I8, -0.7).unwrap().is_sign_positive());
        // bool
        assert_eq!(fill_value(K::Bool, -0.5), Ok(1.0));
        assert_eq!(fill_value(K::Bool, f64::NAN), Ok(1.0));
        assert_eq!(fill_value(K::Bool, -0.0), Ok(0.0));
    }

    #[test]
    fn bits_are_the_element_bits() {
        assert_eq!(bits_of::<f32>(1.0), u64::from(1.0f32.to_bits()));
        assert_eq!(bits_of::<f64>(-2.5), (-2.5f64).to_bits());
        assert_eq!(bits_of::<half::bf16>(1.0), 0x3f80);
        assert_eq!(bits_of::<i8>(-1.0), 0xff);
        assert_eq!(bits_of::<i64>(-1.0), u64::MAX);
        assert_eq!(bits_of::<bool>(1.0), 1);
        assert_eq!(bits_of::<float8::F8E5M2>(f64::NEG_INFINITY), 0xFC);
        assert_eq!(bits_of::<float8::F8E5M2>(f64::INFINITY), 0x7C);
    }
}
