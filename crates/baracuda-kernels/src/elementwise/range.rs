//! Ranges and the identity matrix: PyTorch's `arange`, `linspace`,
//! `logspace` into a 1-D view and `eye` into a 2-D view, with the
//! arithmetic PyTorch's CUDA kernels do, so the values match bit for bit
//! (`kernels/elementwise/range.cu`, `fill.cu`).

use core::marker::PhantomData;

use baracuda_driver::{Function, LaunchArgs, LaunchConfig, ModuleSpec, Stream};
use baracuda_kernels_types::{
    BackendKind, Element, ElementKind, Error, KernelSku, PlanPreference, Result, TensorMut,
    Workspace,
};

use super::fill::{bits_of, fill_spec};
use super::layout::{check_operand, THREADS};
use crate::checks::{check_element, invalid_descriptor};
use crate::kernel_sources;
use crate::launch::resident_blocks;
use crate::plan::own_float_sku;
use crate::Plan;

/// Which sequence a [`RangePlan`] writes.
#[derive(Copy, Clone, Debug, PartialEq)]
pub enum RangeOp {
    /// `torch.arange(start, end, step)`: `y[i] = start + step * i`
    /// ([`arange_len`] gives the length PyTorch takes).
    Arange {
        /// First value.
        start: f64,
        /// Increment.
        step: f64,
    },
    /// `torch.linspace(start, end, steps)`, `steps` the view's length.
    Linspace {
        /// First value.
        start: f64,
        /// Last value.
        end: f64,
    },
    /// `torch.logspace(start, end, steps, base)`.
    Logspace {
        /// First exponent.
        start: f64,
        /// Last exponent.
        end: f64,
        /// The base raised to each exponent.
        base: f64,
    },
}

impl RangeOp {
    /// The op's name (`arange`, `linspace`, `logspace`).
    pub fn name(self) -> &'static str {
        match self {
            RangeOp::Arange { .. } => "arange",
            RangeOp::Linspace { .. } => "linspace",
            RangeOp::Logspace { .. } => "logspace",
        }
    }
    fn code(self) -> u32 {
        match self {
            RangeOp::Arange { .. } => 0,
            RangeOp::Linspace { .. } => 1,
            RangeOp::Logspace { .. } => 2,
        }
    }
}

/// A range of `len` elements of `element`.
#[derive(Copy, Clone, Debug, PartialEq)]
pub struct RangeDescriptor {
    /// The sequence.
    pub op: RangeOp,
    /// Element type of `y`.
    pub element: ElementKind,
    /// Elements written (`steps` of linspace and logspace).
    pub len: usize,
}

impl RangeDescriptor {
    /// `torch.arange(start, end, step, dtype=element)`, its length from
    /// [`arange_len`].
    ///
    /// # Errors
    /// `InvalidDescriptor` as [`arange_len`].
    pub fn arange(element: ElementKind, start: f64, end: f64, step: f64) -> Result<Self> {
        let len = arange_len(start, end, step)?;
        Ok(RangeDescriptor {
            op: RangeOp::Arange { start, step },
            element,
            len,
        })
    }
    /// `torch.linspace(start, end, steps, dtype=element)`.
    pub fn linspace(element: ElementKind, start: f64, end: f64, steps: usize) -> Self {
        RangeDescriptor {
            op: RangeOp::Linspace { start, end },
            element,
            len: steps,
        }
    }
    /// `torch.logspace(start, end, steps, base, dtype=element)`.
    pub fn logspace(element: ElementKind, start: f64, end: f64, steps: usize, base: f64) -> Self {
        RangeDescriptor {
            op: RangeOp::Logspace { start, end, base },
            element,
            len: steps,
        }
    }
}

/// The length of `torch.arange(start, end, step)`: `ceil((end - start) /
/// step)` in f64.
///
/// # Errors
/// `InvalidDescriptor` for a zero or non-finite step, a non-finite bound,
/// a step whose sign does not lead from `start` to `end`, or a length past
/// `isize::MAX`.
pub fn arange_len(start: f64, end: f64, step: f64) -> Result<usize> {
    let bad =
        |field, v: f64, why: &str| Err(invalid_descriptor("arange", field, format!("{v}"), why));
    if step == 0.0 || !step.is_finite() {
        return bad("step", step, "must be finite and nonzero");
    }
    if !start.is_finite() || !end.is_finite() {
        return bad("end", end, "the bounds must be finite");
    }
    if (step > 0.0 && end < start) || (step < 0.0 && end > start) {
        return bad("step", step, "its sign does not lead from start to end");
    }
    let n = ((end - start) / step).ceil();
    if n >= isize::MAX as f64 {
        return bad("end", end, "the range is too long");
    }
    Ok(n as usize)
}

/// The kernel's parameters (`RangeParams` of range.cu, field for field):
/// floats already in the kernel's arithmetic type, integers truncated.
#[repr(C)]
#[derive(Copy, Clone, Debug, Default, PartialEq)]
pub(crate) struct RangeParams {
    pub fstart: f64,
    pub fend: f64,
    pub fstep: f64,
    pub base: f64,
    pub istart: i64,
    pub iend: i64,
    pub istep: i64,
    pub n: u64,
    pub stride: i64,
}

/// `v` rounded to `kind`'s float arithmetic (f32 through f32, f16 and
/// bf16 through f32 then the type, f64 as is).
fn round_float(kind: ElementKind, v: f64) -> f64 {
    match kind {
        ElementKind::F64 => v,
        ElementKind::F16 => half::f16::from_f32(v as f32).to_f64(),
        ElementKind::Bf16 => half::bf16::from_f32(v as f32).to_f64(),
        _ => f64::from(v as f32),
    }
}

/// `v` as PyTorch's `Scalar.to<kind>()` of an integer kind: truncated,
/// checked against the kind's range.
fn to_int(kind: ElementKind, field: &'static str, op: &'static str, v: f64) -> Result<i64> {
    let t = v.trunc();
    let (lo, end) = super::fill::int_range(kind);
    if !v.is_finite() || t < lo || t >= end {
        return Err(invalid_descriptor(
            op,
            field,
            format!("{v}"),
            &format!("not a {kind} value"),
        ));
    }
    Ok(t as i64)
}

/// The kinds each op takes (PyTorch's CUDA dispatch of each).
fn takes(op: RangeOp, kind: ElementKind) -> bool {
    use ElementKind as K;
    let float = matches!(kind, K::F32 | K::F64 | K::F16 | K::Bf16);
    let int = matches!(kind, K::I8 | K::U8 | K::I16 | K::I32 | K::I64);
    match op {
        RangeOp::Logspace { .. } => float,
        _ => float || int,
    }
}

/// The kernel parameters of `op` into `n` elements of `kind`.
pub(crate) fn range_params(kind: ElementKind, op: RangeOp, n: usize) -> Result<RangeParams> {
    let name = op.name();
    let mut p = RangeParams {
        n: n as u64,
        stride: 1,
        ..Default::default()
    };
    let float = kind.is_float();
    let f = |v: f64| round_float(kind, v);
    // the float step of linspace: (end - start) / (n - 1) in T's arithmetic
    let lin_step = |s: f64, e: f64| -> f64 {
        let d = (n.max(2) - 1) as f64;
        match kind {
            ElementKind::F64 => (e - s) / d,
            ElementKind::F32 => f64::from((e - s) as f32 / d as f32),
            _ => f(f(e - s) / f(d)),
        }
    };
    match op {
        RangeOp::Arange { start, step } if float => {
            if kind != ElementKind::F64
                && (start.abs() > f64::from(f32::MAX) || step.abs() > f64::from(f32::MAX))
            {
                return Err(invalid_descriptor(
                    name,
                    "start",
                    format!("{start}"),
                    "overflows f32",
                ));
            }
            p.fstart = if kind == ElementKind::F64 {
                start
            } else {
                f64::from(start as f32)
            };
            p.fstep = if kind == ElementKind::F64 {
                step
            } else {
                f64::from(step as f32)
            };
        }
        RangeOp::Arange { start, step } => {
            p.istart = to_int(ElementKind::I64, "start", name, start)?;
            p.istep = to_int(ElementKind::I64, "step", name, step)?;
            if p.istep == 0 {
                return Err(invalid_descriptor(
                    name,
                    "step",
                    format!("{step}"),
                    "is 0 as an integer",
                ));
            }
        }
        RangeOp::Linspace { start, end } | RangeOp::Logspace { start, end, .. } if float => {
            p.fstart = f(start);
            // one step: PyTorch fills with start
            p.fend = if n == 1 { p.fstart } else { f(end) };
            p.fstep = if n == 1 {
                0.0
            } else {
                lin_step(p.fstart, p.fend)
            };
            if let RangeOp::Logspace { base, .. } = op {
                p.base = f(base);
            }
        }
        RangeOp::Linspace { start, end } | RangeOp::Logspace { start, end, .. } => {
            p.istart = to_int(kind, "start", name, start)?;
            p.iend = if n == 1 {
                p.istart
            } else {
                to_int(kind, "end", name, end)?
            };
            let d = (n.max(2) - 1) as f32;
            p.fstep = if n == 1 {
                0.0
            } else {
                f64::from((p.iend as f32 - p.istart as f32) / d)
            };
        }
    }
    Ok(p)
}

/// Writes a range into a 1-D view: `y[i]` for `i < len`.
///
/// # Values (PyTorch's CUDA kernels)
/// - arange: `start + step * i` in f32 for f32, f16 and bf16 (start and
///   step rounded to f32, one fused multiply-add, then rounded to `T`),
///   f64 in f64; integer kinds in i64 from the truncated start and step,
///   wrapped to `T`.
/// - linspace: `start + step * i` for `i < len / 2`, else `end - step *
///   (len - 1 - i)`, `step = (end - start) / (len - 1)`: in `T`'s own
///   arithmetic for floats (f16 and bf16 round the index, each product and
///   each sum to `T`, as c10's `Half` and `BFloat16` operators; f32 and f64
///   fuse the multiply-add); integer kinds in f32 from the truncated
///   bounds, then truncated toward zero as `static_cast`. One step gives
///   `start`.
/// - logspace: `pow(base, v)` of linspace's value `v`, in f32 (f16, bf16,
///   f32, with the base rounded to `T`) or f64.
///
/// # Shapes
/// `y`: `[len]`, any stride. No workspace, no gradient.
/// # Dtypes
/// arange and linspace: f32, f64, f16, bf16, i8, u8, i16, i32, i64;
/// logspace: f32, f64, f16, bf16. Others: `Unsupported`.
/// # Errors
/// From `select`: `DtypeMismatch` if `desc.element != T::KIND`;
/// `Unsupported` for a kind the op does not take; `InvalidDescriptor` for
/// a bound or step the kind cannot hold (past f32 for the f32 arithmetic,
/// outside an integer kind, or an integer step of 0); `PreferenceRejected`.
/// From `run`: `ShapeMismatch`, `ContextMismatch`.
pub struct RangePlan<T: Element> {
    desc: RangeDescriptor,
    sku: KernelSku,
    kernel: Function,
    params: RangeParams,
    grid_cap: u32,
    _t: PhantomData<T>,
}

/// The module of `op` into `kind`.
pub(crate) fn range_spec(kind: ElementKind, op: u32) -> Option<ModuleSpec> {
    Some(
        ModuleSpec::new(&kernel_sources::RANGE)
            .define("RANGE_TO", kernel_sources::element_code(kind)?)
            .define("RANGE_OP", op),
    )
}

/// Every range module: each op on each kind it takes.
pub(crate) fn range_specs() -> Vec<ModuleSpec> {
    let ops = [
        RangeOp::Arange {
            start: 0.0,
            step: 1.0,
        },
        RangeOp::Linspace {
            start: 0.0,
            end: 1.0,
        },
        RangeOp::Logspace {
            start: 0.0,
            end: 1.0,
            base: 10.0,
        },
    ];
    ops.into_iter()
        .flat_map(|op| {
            ElementKind::ALL
                .into_iter()
                .filter(move |&k| takes(op, k))
                .filter_map(move |k| range_spec(k, op.code()))
        })
        .collect()
}

/// Blocks of a grid-stride loop over `n` elements, capped at what fits on
/// the device at once.
fn grid(n: usize, cap: u32) -> u32 {
    n.div_ceil(THREADS as usize).clamp(1, cap as usize) as u32
}

impl<T: Element> Plan for RangePlan<T> {
    type Descriptor = RangeDescriptor;
    type Args<'a> = RangeArgs<'a, T>;

    fn select(stream: &Stream, desc: &Self::Descriptor, pref: &PlanPreference) -> Result<Self> {
        let name = desc.op.name();
        check_element::<T>(name, "desc.element", desc.element)?;
        if !takes(desc.op, T::KIND) {
            return Err(Error::Unsupported {
                op: name,
                what: format!("{} (PyTorch's CUDA {name} does not take it)", T::KIND),
            });
        }
        let params = range_params(T::KIND, desc.op, desc.len)?;
        pref.check_backend(name, &[BackendKind::Baracuda])?;
        pref.check_workspace(name, 0)?;
        let spec = range_spec(T::KIND, desc.op.code()).ok_or_else(|| Error::Unsupported {
            op: name,
            what: format!("{}", T::KIND),
        })?;
        let kernel = stream.context().module(&spec)?.function("range_kernel")?;
        let grid_cap = resident_blocks(stream, &kernel, THREADS)?;
        Ok(RangePlan {
            desc: *desc,
            sku: own_float_sku::<T>(stream, format!("{name}.{}", T::KIND), "grid-stride"),
            kernel,
            params,
            grid_cap,
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
        let name = self.desc.op.name();
        let y = &args.y;
        check_operand(
            name,
            "y",
            stream,
            &[self.desc.len],
            y.shape(),
            y.data().ctx_id(),
        )?;
        if self.desc.len == 0 {
            return Ok(());
        }
        let p = RangeParams {
            stride: y.strides()[0] as i64,
            ..self.params
        };
        let mut a = LaunchArgs::new();
        a.push(y.data().ptr())?.push(p)?;
        let cfg = LaunchConfig::linear(grid(self.desc.len, self.grid_cap), THREADS);
        // SAFETY: the view was bounds-checked at construction and holds
        // `len` elements at its stride; the kernel writes exactly those.
        unsafe { self.kernel.launch(stream, cfg, &mut a) }
    }
}

/// Arguments of [`RangePlan`]'s [`Plan::run`].
pub struct RangeArgs<'a, T> {
    /// Output `[len]`, any stride.
    pub y: TensorMut<'a, T, 1>,
}

/// `torch.eye(rows, cols)`: one on the diagonal, zero elsewhere.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct EyeDescriptor {
    /// Element type of `y`.
    pub element: ElementKind,
    /// Rows of `y`.
    pub rows: usize,
    /// Columns of `y`.
    pub cols: usize,
}

/// Arguments of [`EyePlan`]'s [`Plan::run`].
pub struct EyeArgs<'a, T> {
    /// Output `[rows, cols]`, any strides.
    pub y: TensorMut<'a, T, 2>,
}

/// Writes the identity matrix (`torch.eye`) into a `[rows, cols]` view:
/// `y[r, c] = 1` where `r == c`, else 0, in `T` (bool: true and false).
///
/// # Dtypes
/// Every [`ElementKind`]. No workspace, no gradient.
/// # Errors
/// From `select`: `DtypeMismatch` if `desc.element != T::KIND`;
/// `PreferenceRejected`. From `run`: `ShapeMismatch`, `ContextMismatch`.
pub struct EyePlan<T: Element> {
    desc: EyeDescriptor,
    sku: KernelSku,
    kernel: Function,
    grid_cap: u32,
    _t: PhantomData<T>,
}

impl<T: Element> Plan for EyePlan<T> {
    type Descriptor = EyeDescriptor;
    type Args<'a> = EyeArgs<'a, T>;

    fn select(stream: &Stream, desc: &Self::Descriptor, pref: &PlanPreference) -> Result<Self> {
        check_element::<T>("eye", "desc.element", desc.element)?;
        pref.check_backend("eye", &[BackendKind::Baracuda])?;
        pref.check_workspace("eye", 0)?;
        let spec = fill_spec(T::KIND.size_bytes());
        let kernel = stream.context().module(&spec)?.function("eye_kernel")?;
        let grid_cap = resident_blocks(stream, &kernel, THREADS)?;
        Ok(EyePlan {
            desc: *desc,
            sku: own_float_sku::<T>(stream, format!("eye.{}", T::KIND), "grid-stride"),
            kernel,
            grid_cap,
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
        let d = &self.desc;
        let y = &args.y;
        check_operand(
            "eye",
            "y",
            stream,
            &[d.rows, d.cols],
            y.shape(),
            y.data().ctx_id(),
        )?;
        let n = d.rows * d.cols;
        if n == 0 {
            return Ok(());
        }
        let [s0, s1] = *y.strides();
        let mut a = LaunchArgs::new();
        a.push(y.data().ptr())?
            .push(d.rows as u64)?
            .push(d.cols as u64)?
            .push(s0 as i64)?
            .push(s1 as i64)?
            .push(bits_of::<T>(1.0))?;
        let cfg = LaunchConfig::linear(grid(n, self.grid_cap), THREADS);
        // SAFETY: the view was bounds-checked at construction and holds
        // rows x cols elements at its strides; the kernel writes exactly
        // those, T-sized.
        unsafe { self.kernel.launch(stream, cfg, &mut a) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arange_lengths_are_pytorchs() {
        assert_eq!(arange_len(0.0, 10.0, 1.0).unwrap(), 10);
        assert_eq!(arange_len(0.0, 10.0, 3.0).unwrap(), 4);
        assert_eq!(arange_len(1.0, 2.5, 0.5).unwrap(), 3);
        assert_eq!(arange_len(10.0, 0.0, -2.5).unwrap(), 4);
        assert_eq!(arange_len(3.0, 3.0, 1.0).unwrap(), 0);
        assert!(arange_len(0.0, 1.0, 0.0).is_err());
        assert!(arange_len(0.0, 1.0, -1.0).is_err());
        assert!(arange_len(0.0, f64::INFINITY, 1.0).is_err());
    }

    #[test]
    fn linspace_steps_round_in_the_type() {
        let p = range_params(
            ElementKind::F16,
            RangeOp::Linspace {
                start: 0.0,
                end: 1.0,
            },
            4,
        )
        .unwrap();
        // (1 - 0) / 3 rounded to f16
        assert_eq!(p.fstep, half::f16::from_f32(1.0 / 3.0).to_f64());
        let p = range_params(
            ElementKind::I32,
            RangeOp::Linspace {
                start: -2.7,
                end: 9.9,
            },
            5,
        )
        .unwrap();
        assert_eq!((p.istart, p.iend), (-2, 9));
        assert_eq!(p.fstep, f64::from(11.0f32 / 4.0));
        assert!(range_params(
            ElementKind::I8,
            RangeOp::Linspace {
                start: 0.0,
                end: 300.0
            },
            5
        )
        .is_err());
        let p = range_params(
            ElementKind::F32,
            RangeOp::Linspace {
                start: 2.0,
                end: 9.0,
            },
            1,
        )
        .unwrap();
        assert_eq!((p.fstart, p.fend, p.fstep), (2.0, 2.0, 0.0));
    }

    #[test]
    fn kinds_follow_pytorchs_dispatch() {
        let log = RangeOp::Logspace {
            start: 0.0,
            end: 1.0,
            base: 10.0,
        };
        let lin = RangeOp::Linspace {
            start: 0.0,
            end: 1.0,
        };
        assert!(takes(lin, ElementKind::I16) && !takes(log, ElementKind::I16));
        assert!(!takes(lin, ElementKind::Bool) && !takes(lin, ElementKind::Fp8E4M3));
        assert!(!takes(lin, ElementKind::U32));
    }
}
