//! Conversion between element types: `y = O(x)`, PyTorch's `x.to(dtype)`,
//! with the saturating fp8 conversion and the scaled cast of fp8
//! quantization; the backward converts the gradient back.
//!
//! The rules are in [`CastPlan`] and at the top of
//! `kernels/elementwise/cast.cu`; [`reference::cast`](super::reference::cast)
//! is the same function on the host.

use core::marker::PhantomData;

use baracuda_driver::{LaunchArgs, ModuleSpec, Stream};
use baracuda_kernels_types::{
    BackendKind, DevPtr, Element, ElementKind, Error, Grad, Grads, KernelSku, PlanPreference,
    PrecisionGuarantee, Result, TensorMut, TensorRef, Workspace, MAX_RANK,
};

use super::layout::{check_operand, ContigShape, In, MapKernels, Out, THREADS};
use crate::checks::{check_grads, invalid_descriptor, span_bytes};
use crate::kernel_sources;
use crate::{Backward, Plan};

/// What a conversion to fp8 does with values past the largest finite one.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, Default)]
pub enum Fp8Mode {
    /// As PyTorch's `x.to(float8_*)`: e4m3 (no inf) gives NaN for
    /// `|v| > 464` (the midpoint above 448) and for ±inf; e5m2 gives ±inf
    /// for `|v| >= 61440` (the midpoint above 57344, which rounds up).
    #[default]
    NoSaturate,
    /// Clamp to the largest finite value (±448 e4m3, ±57344 e5m2), ±inf
    /// included, as `__NV_SATFINITE` and fp8 training recipes do; NaN stays
    /// NaN.
    Saturate,
}

/// A conversion of a rank-`N` tensor from one element type to another.
#[derive(Copy, Clone, Debug, PartialEq)]
pub struct CastDescriptor<const N: usize> {
    /// Element type of `x`.
    pub from: ElementKind,
    /// Element type of `y`.
    pub to: ElementKind,
    /// Shape of `x` and `y`.
    pub shape: [usize; N],
    /// Overflow rule of an fp8 `to`; `NoSaturate` (PyTorch's) for any other.
    pub fp8: Fp8Mode,
    /// Multiply by this before converting to fp8 (`to` fp8 only): the
    /// product is taken in f32 (f64 for f64 `x`) and rounded once.
    pub scale: Option<f32>,
}

impl<const N: usize> CastDescriptor<N> {
    /// PyTorch's `x.to(to)`: no saturation, no scale.
    pub fn new(from: ElementKind, to: ElementKind, shape: [usize; N]) -> Self {
        CastDescriptor {
            from,
            to,
            shape,
            fp8: Fp8Mode::NoSaturate,
            scale: None,
        }
    }
    /// With the fp8 overflow rule `fp8`.
    pub fn with_fp8(mut self, fp8: Fp8Mode) -> Self {
        self.fp8 = fp8;
        self
    }
    /// With `scale` multiplied in before an fp8 conversion.
    pub fn with_scale(mut self, scale: f32) -> Self {
        self.scale = Some(scale);
        self
    }
}

/// Arguments of [`CastPlan`]'s [`Plan::run`].
pub struct CastArgs<'a, I, O, const N: usize> {
    /// Input, any strides (0 = broadcast).
    pub x: TensorRef<'a, I, N>,
    /// Output, any non-overlapping strides, disjoint from `x`.
    pub y: TensorMut<'a, O, N>,
}

/// Arguments of [`CastPlan`]'s [`Backward::run_bw`].
pub struct CastBwArgs<'a, I, O, const N: usize> {
    /// Gradient of the output, any strides (0 = broadcast).
    pub dy: TensorRef<'a, O, N>,
    /// Gradient of the input, disjoint from `dy`.
    pub dx: TensorMut<'a, I, N>,
}

/// `y = O(x * scale)` elementwise, and its backward `dx = I(dy * scale)`.
///
/// # Rules (PyTorch's `x.to(dtype)` on CUDA)
/// - float to float: round to nearest even; NaN, ±inf and -0 kept;
///   overflow gives ±inf (f16, bf16). f64 to f16, bf16 or fp8 rounds
///   through f32 first, as c10's `Half`/`BFloat16`/`Float8` constructors
///   take a float (two roundings).
/// - to fp8: [`Fp8Mode`]; with a scale, `x * scale` in f32 (f64 for f64
///   `x`, then through f32), rounded once.
/// - float to integer: PyTorch's `static_cast` as the GPU runs it. To i8,
///   i16 and i32: truncate toward zero saturating to the int32 range (NaN
///   gives 0 from a 32-bit or narrower float, `i32::MIN` from f64), then
///   two's complement truncation, so `inf` to i8 gives -1 and 448 gives
///   -64. To i64: saturating, NaN gives `i64::MIN`. To u8: the low byte of
///   the i64 conversion (c10 routes float to uint8 through int64), so -1.5
///   gives 255.
/// - integer to float: round to nearest even (to f16, bf16, fp8 through
///   f32, as c10 does); integer to integer: two's complement truncation.
/// - to bool: `x != 0` (NaN is true); from bool: 0 or 1.
///
/// # Gradient
/// For float `I` and `O`: `dx = I(dy * scale)` (the cast is the identity
/// almost everywhere; saturation is straight-through), rounded as the
/// forward rules say, fp8 `dx` without saturation. A cast from or to an
/// integer or bool type has none: [`Backward::grads`] is empty and
/// `run_bw` is `InvalidArgument`.
/// # Shapes
/// `x`, `y`, `dy`, `dx`: `desc.shape`, rank `N <= 8`. No workspace.
/// # Layout
/// Any strides; `x` and `dy` may broadcast (stride 0). Contiguous, 16-byte
/// aligned operands take the vectorised kernel; others the strided kernel
/// (64-bit offsets).
/// # Aliasing
/// None: an output sharing memory with its input is `InvalidArgument`.
/// # Dtypes
/// Every pair of f32, f64, f16, bf16, fp8 e4m3, fp8 e5m2, i8, u8, i16,
/// i32, i64, bool (the same type twice is a copy). u32: `Unsupported`.
/// # Errors
/// From `select`: `DtypeMismatch` if `desc.from != I::KIND` or
/// `desc.to != O::KIND`; `Unsupported` for u32 or a rank `N > 8`;
/// `InvalidDescriptor` for a scale or `Saturate` with a `to` other than
/// fp8, or a scale that is not finite; `PreferenceRejected` when `pref`
/// forces a backend other than `Baracuda`. From `run` and `run_bw`:
/// `ShapeMismatch`, `ContextMismatch`, `InvalidArgument` (overlap; a
/// backward the plan does not have).
pub struct CastPlan<I: Element, O: Element, const N: usize> {
    desc: CastDescriptor<N>,
    sku: KernelSku,
    fw: MapKernels,
    /// The O -> I kernels of the backward, for float pairs.
    bw: Option<MapKernels>,
    _t: PhantomData<(I, O)>,
}

const OP: &str = "cast";

/// The module converting `from` to `to`, or None for a kind `cast.cu` has
/// no code for.
pub(crate) fn cast_spec(from: ElementKind, to: ElementKind) -> Option<ModuleSpec> {
    let (f, t) = (
        kernel_sources::element_code(from)?,
        kernel_sources::element_code(to)?,
    );
    Some(
        ModuleSpec::new(&kernel_sources::CAST)
            .define("CAST_FROM", f)
            .define("CAST_TO", t),
    )
}

/// The kinds [`CastPlan`] converts between: every kind but u32.
pub const CAST_KINDS: [ElementKind; 12] = kernel_sources::kinds_except(&[ElementKind::U32]);

fn is_fp8(k: ElementKind) -> bool {
    matches!(k, ElementKind::Fp8E4M3 | ElementKind::Fp8E5M2)
}

/// The descriptor checks of `select`.
fn check_desc<I: Element, O: Element, const N: usize>(
    desc: &CastDescriptor<N>,
    pref: &PlanPreference,
) -> Result<ModuleSpec> {
    for (arg, want, got) in [("desc.from", I::KIND, desc.from), ("desc.to", O::KIND, desc.to)] {
        if want != got {
            return Err(Error::DtypeMismatch {
                op: OP,
                arg,
                expected: want,
                got,
            });
        }
    }
    let spec = cast_spec(I::KIND, O::KIND).ok_or_else(|| Error::Unsupported {
        op: OP,
        what: format!(
            "{} -> {}; cast converts f32, f64, f16, bf16, fp8, i8, u8, i16, i32, i64 and bool",
            I::KIND,
            O::KIND
        ),
    })?;
    if N > MAX_RANK {
        return Err(Error::Unsupported {
            op: OP,
            what: format!("rank {N} > {MAX_RANK}"),
        });
    }
    if desc.fp8 == Fp8Mode::Saturate && !is_fp8(O::KIND) {
        return Err(invalid_descriptor(
            OP,
            "fp8",
            "Saturate".into(),
            &format!("saturation applies to fp8 outputs, not {}", O::KIND),
        ));
    }
    if let Some(s) = desc.scale {
        if !is_fp8(O::KIND) {
            return Err(invalid_descriptor(
                OP,
                "scale",
                format!("{s}"),
                &format!("a scale applies to fp8 outputs, not {}", O::KIND),
            ));
        }
        if !s.is_finite() {
            return Err(invalid_descriptor(
                OP,
                "scale",
                format!("{s}"),
                "must be finite",
            ));
        }
    }
    pref.check_backend(OP, &[BackendKind::Baracuda])?;
    pref.check_workspace(OP, 0)?;
    Ok(spec)
}

impl<I: Element, O: Element, const N: usize> Plan for CastPlan<I, O, N> {
    type Descriptor = CastDescriptor<N>;
    type Args<'a> = CastArgs<'a, I, O, N>;

    fn select(stream: &Stream, desc: &Self::Descriptor, pref: &PlanPreference) -> Result<Self> {
        let spec = check_desc::<I, O, N>(desc, pref)?;
        let fw = load(stream, &spec)?;
        let bw = if I::KIND.is_float() && O::KIND.is_float() {
            let bw_spec = cast_spec(O::KIND, I::KIND).ok_or_else(|| Error::Unsupported {
                op: OP,
                what: format!("{} -> {}", O::KIND, I::KIND),
            })?;
            Some(load(stream, &bw_spec)?)
        } else {
            None
        };
        Ok(CastPlan {
            desc: *desc,
            sku: KernelSku {
                op: format!("cast.{}_to_{}", I::KIND, O::KIND),
                element: O::KIND,
                backend: BackendKind::Baracuda,
                arch: stream.context().device().arch,
                variant: "vec16 contiguous / smem tiles (permuted) / rank-8 strided".into(),
                precision: PrecisionGuarantee::float(O::KIND, true),
            },
            fw,
            bw,
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
        check_operand(OP, "x", stream, shape, args.x.shape(), args.x.data().ctx_id())?;
        check_operand(OP, "y", stream, shape, args.y.shape(), args.y.data().ctx_id())?;
        let x = (args.x.data().ptr(), args.x.strides().as_slice());
        let y = (args.y.data().ptr(), args.y.strides().as_slice());
        check_disjoint("y", y.0.as_const(), y.1, "x", x.0, x.1, shape)?;
        let sat = self.desc.fp8 == Fp8Mode::Saturate;
        let scale = self.desc.scale.unwrap_or(1.0);
        // SAFETY: both views were bounds-checked at construction and match
        // the plan's shape; y is disjoint from x (checked above).
        unsafe { launch(&self.fw, stream, shape, y, x, scale, sat) }
    }
}

impl<I: Element, O: Element, const N: usize> Backward for CastPlan<I, O, N> {
    type BwArgs<'a> = CastBwArgs<'a, I, O, N>;

    fn grads(&self) -> Grads {
        if self.bw.is_some() {
            Grad::X.into()
        } else {
            Grads::NONE
        }
    }

    fn run_bw(
        &self,
        stream: &Stream,
        _workspace: Workspace<'_>,
        args: Self::BwArgs<'_>,
    ) -> Result<()> {
        check_grads(OP, Grad::X.into(), self.grads())?;
        let Some(bw) = &self.bw else {
            return Err(Error::InvalidArgument {
                op: OP,
                arg: "dx",
                reason: format!("{} -> {} has no gradient", I::KIND, O::KIND),
            });
        };
        let shape = &self.desc.shape;
        check_operand(OP, "dy", stream, shape, args.dy.shape(), args.dy.data().ctx_id())?;
        check_operand(OP, "dx", stream, shape, args.dx.shape(), args.dx.data().ctx_id())?;
        let dy = (args.dy.data().ptr(), args.dy.strides().as_slice());
        let dx = (args.dx.data().ptr(), args.dx.strides().as_slice());
        check_disjoint("dx", dx.0.as_const(), dx.1, "dy", dy.0, dy.1, shape)?;
        let scale = self.desc.scale.unwrap_or(1.0);
        // SAFETY: views bounds-checked at construction, shapes checked
        // above; dx is disjoint from dy.
        unsafe { launch(bw, stream, shape, dx, dy, scale, false) }
    }
}

/// `InvalidArgument` naming `out` when its bytes meet those of `input`
/// (operands of different types cannot be one view, so any overlap is
/// rejected).
fn check_disjoint<A, B>(
    out: &'static str,
    out_ptr: DevPtr<A>,
    out_strides: &[usize],
    input: &'static str,
    in_ptr: DevPtr<B>,
    in_strides: &[usize],
    shape: &[usize],
) -> Result<()> {
    let o = out_ptr.addr()..out_ptr.addr() + span_bytes::<A>(shape, out_strides) as u64;
    let i = in_ptr.addr()..in_ptr.addr() + span_bytes::<B>(shape, in_strides) as u64;
    if o.is_empty() || i.is_empty() || o.end <= i.start || i.end <= o.start {
        return Ok(());
    }
    Err(Error::InvalidArgument {
        op: OP,
        arg: out,
        reason: format!("overlaps {input}; a cast writes a separate buffer"),
    })
}

/// The kernels of one conversion: contiguous (a 16-byte vector of the
/// narrower type per thread), strided with a u32 and with a u64 linear
/// index, and tiled (a permuted input).
fn load(stream: &Stream, spec: &ModuleSpec) -> Result<MapKernels> {
    let names = ["cast_contig", "cast_strided32", "cast_strided64"];
    let shape = ContigShape {
        threads: THREADS,
        tile: 1,
    };
    MapKernels::load_named(stream, spec, names, shape)?.with_tiled(stream, spec, "cast_tiled")
}

/// `y = B(x * scale)` over `shape`, fp8 outputs saturating when
/// `saturate`.
///
/// # Safety
/// `y` and `x` must hold every element their strides reach over `shape`
/// and be disjoint.
unsafe fn launch<A: Element, B: Element>(
    k: &MapKernels,
    stream: &Stream,
    shape: &[usize],
    y: Out<'_, B>,
    x: In<'_, A>,
    scale: f32,
    saturate: bool,
) -> Result<()> {
    let tail = |a: &mut LaunchArgs| {
        a.push(scale)?.push(i32::from(saturate))?;
        Ok(())
    };
    // SAFETY: forwarded from the caller's contract; the kernels read A at
    // the input and write B at the output.
    unsafe { k.launch_with(OP, stream, shape, &[y], &[x], tail) }
}

/// Every conversion module: each pair of [`CAST_KINDS`] (the backward of
/// a float pair is the reversed pair, also listed).
pub(crate) fn cast_specs() -> Vec<ModuleSpec> {
    CAST_KINDS
        .into_iter()
        .flat_map(|a| CAST_KINDS.into_iter().filter_map(move |b| cast_spec(a, b)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn desc(from: ElementKind, to: ElementKind) -> CastDescriptor<2> {
        CastDescriptor::new(from, to, [3, 4])
    }

    #[test]
    fn descriptor_checks_return_their_variants() {
        use ElementKind as K;
        let pref = PlanPreference::default();
        assert!(check_desc::<f32, half::bf16, 2>(&desc(K::F32, K::Bf16), &pref).is_ok());
        assert!(matches!(
            check_desc::<f32, half::bf16, 2>(&desc(K::F16, K::Bf16), &pref),
            Err(Error::DtypeMismatch { arg: "desc.from", .. })
        ));
        assert!(matches!(
            check_desc::<f32, half::bf16, 2>(&desc(K::F32, K::F16), &pref),
            Err(Error::DtypeMismatch { arg: "desc.to", .. })
        ));
        assert!(matches!(
            check_desc::<u32, f32, 2>(&desc(K::U32, K::F32), &pref),
            Err(Error::Unsupported { .. })
        ));
        assert!(matches!(
            check_desc::<f32, u32, 2>(&desc(K::F32, K::U32), &pref),
            Err(Error::Unsupported { .. })
        ));
        let d9 = CastDescriptor::new(K::F32, K::I32, [1; 9]);
        assert!(matches!(
            check_desc::<f32, i32, 9>(&d9, &pref),
            Err(Error::Unsupported { .. })
        ));
        let sat = desc(K::F32, K::F16).with_fp8(Fp8Mode::Saturate);
        assert!(matches!(
            check_desc::<f32, half::f16, 2>(&sat, &pref),
            Err(Error::InvalidDescriptor { field: "fp8", .. })
        ));
        let scaled = desc(K::F32, K::I8).with_scale(2.0);
        assert!(matches!(
            check_desc::<f32, i8, 2>(&scaled, &pref),
            Err(Error::InvalidDescriptor { field: "scale", .. })
        ));
        let inf = desc(K::F32, K::Fp8E4M3).with_scale(f32::INFINITY);
        assert!(matches!(
            check_desc::<f32, float8::F8E4M3, 2>(&inf, &pref),
            Err(Error::InvalidDescriptor { field: "scale", .. })
        ));
        let ok = desc(K::Bf16, K::Fp8E5M2)
            .with_scale(0.5)
            .with_fp8(Fp8Mode::Saturate);
        assert!(check_desc::<half::bf16, float8::F8E5M2, 2>(&ok, &pref).is_ok());
        let cudnn = pref.with_backend(BackendKind::Cudnn);
        assert!(matches!(
            check_desc::<f32, half::bf16, 2>(&desc(K::F32, K::Bf16), &cudnn),
            Err(Error::PreferenceRejected { field: "backend", .. })
        ));
    }

    #[test]
    fn every_pair_has_a_module() {
        assert!(CAST_KINDS.iter().all(|&k| kernel_sources::element_code(k).is_some()));
        assert_eq!(cast_specs().len(), 144);
    }
}
