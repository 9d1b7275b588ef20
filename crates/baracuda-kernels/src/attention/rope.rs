//! Rotary position embedding ([`RopePlan`]).

use core::marker::PhantomData;

use baracuda_driver::{Function, LaunchConfig, ModuleSpec, Stream};
use baracuda_kernels_types::{
    DevPtr, DevPtrMut, Element, ElementKind, Error, Grad, Grads, KernelSku, PlanPreference,
    Result, TensorMut, TensorRef, Workspace,
};

use super::reference::RopeStyle;
use crate::checks::{byte_span, check_ctx, check_disjoint, check_shape, float_dtype_code};
use crate::launch::{grid_x, launch_params};
use crate::plan::own_float_sku;
use crate::{kernel_sources, Backward, BackendKind, Plan};

const OP: &str = "rope";

/// Where the rotation angles come from.
#[derive(Copy, Clone, Debug, PartialEq)]
pub enum RopeFreqs {
    /// `angle = position / pos_scale * theta^(-2e / rotary_dim)` for pair
    /// `e` (`pos_scale` 1 is plain RoPE; above 1, linear position
    /// interpolation).
    Theta {
        /// The base (10000 in most models).
        theta: f64,
        /// Positions are divided by it.
        pos_scale: f64,
    },
    /// `cos` and `sin` tables `[positions, rotary_dim / 2]` (f32) in the
    /// arguments: any frequency scheme (NTK, YaRN, Llama 3 scaling)
    /// precomputed by the caller.
    Table,
}

/// A rotary embedding of `x` `[batch, seq, heads, head_dim]`.
#[derive(Copy, Clone, Debug, PartialEq)]
pub struct RopeDescriptor {
    /// How elements pair.
    pub style: RopeStyle,
    /// Element type of `x` and `y`.
    pub element: ElementKind,
    /// `[batch, seq, heads, head_dim]`.
    pub shape: [usize; 4],
    /// Leading elements of each head that rotate (even, at most
    /// `head_dim`); the rest are copied.
    pub rotary_dim: usize,
    /// The angles.
    pub freqs: RopeFreqs,
}

impl RopeDescriptor {
    /// NeoX-style RoPE over whole heads with base `theta`.
    pub fn new(element: ElementKind, shape: [usize; 4], theta: f64) -> Self {
        RopeDescriptor {
            style: RopeStyle::NeoX,
            element,
            shape,
            rotary_dim: shape[3],
            freqs: RopeFreqs::Theta {
                theta,
                pos_scale: 1.0,
            },
        }
    }
    /// Pair elements as `style` does.
    pub fn with_style(mut self, style: RopeStyle) -> Self {
        self.style = style;
        self
    }
    /// Rotate only the leading `rotary_dim` elements of each head.
    pub fn with_rotary_dim(mut self, rotary_dim: usize) -> Self {
        self.rotary_dim = rotary_dim;
        self
    }
    /// Take the angles from `freqs`.
    pub fn with_freqs(mut self, freqs: RopeFreqs) -> Self {
        self.freqs = freqs;
        self
    }
}

/// The tensors of the forward.
#[derive(Debug)]
pub struct RopeArgs<'a, T> {
    /// Input `[batch, seq, heads, head_dim]`, any strides.
    pub x: TensorRef<'a, T, 4>,
    /// Position of each token `[batch, seq]`; `None`: token `s` is at `s`.
    pub positions: Option<TensorRef<'a, i64, 2>>,
    /// `(cos, sin)` tables `[positions, rotary_dim / 2]` for
    /// [`RopeFreqs::Table`]; `None` otherwise.
    pub table: Option<(TensorRef<'a, f32, 2>, TensorRef<'a, f32, 2>)>,
    /// Output, `x`'s shape; must not overlap any input.
    pub y: TensorMut<'a, T, 4>,
}

/// The tensors of the backward (`dx` is `dy` rotated back).
#[derive(Debug)]
pub struct RopeBwArgs<'a, T> {
    /// Gradient of the output.
    pub dy: TensorRef<'a, T, 4>,
    /// As in [`RopeArgs`].
    pub positions: Option<TensorRef<'a, i64, 2>>,
    /// As in [`RopeArgs`].
    pub table: Option<(TensorRef<'a, f32, 2>, TensorRef<'a, f32, 2>)>,
    /// Gradient of the input, written; must not overlap any input.
    pub dx: TensorMut<'a, T, 4>,
}

/// Rotary position embedding, forward and backward.
///
/// # Math
/// Pair `e < rotary_dim / 2` of each head holds elements `(e, e +
/// rotary_dim / 2)` (NeoX) or `(2e, 2e + 1)` (GPT-J) and rotates by
/// `a = pos * inv_freq(e)`: `y0 = x0 cos a - x1 sin a`, `y1 = x1 cos a +
/// x0 sin a`. Elements past `rotary_dim` are copied. The backward rotates
/// `dy` by `-a`.
///
/// # Dtypes
/// f32, f64, f16, bf16 (arithmetic in f32, f64 in f64); others
/// `Unsupported`.
///
/// # Errors
/// `select`: `DtypeMismatch`, `Unsupported` (dtype), `InvalidDescriptor`
/// (an odd or too large `rotary_dim`, a non-positive or non-finite theta or
/// scale), `PreferenceRejected`. `run`, `run_bw`: `ShapeMismatch` (any
/// view; positions `[batch, seq]`; tables `[rows, rotary_dim / 2]`),
/// `InvalidArgument` (tables given or missing against the descriptor, an
/// output overlapping an input), `ContextMismatch`. A position outside the
/// tables is reported in-band: its rotated elements are NaN.
pub struct RopePlan<T: Element> {
    desc: RopeDescriptor,
    sku: KernelSku,
    f: Function,
    sm_count: u32,
    _t: PhantomData<T>,
}

/// The module on dtype code `dtype`.
pub(crate) fn spec(dtype: u32) -> ModuleSpec {
    ModuleSpec::new(&kernel_sources::ROPE).define("BARACUDA_DTYPE", dtype)
}

/// `InvalidDescriptor` of this op.
fn invalid(field: &'static str, value: String, reason: &str) -> Error {
    crate::checks::invalid_descriptor(OP, field, value, reason)
}

/// The checks `select` runs before it touches the GPU.
pub(crate) fn validate<T: Element>(desc: &RopeDescriptor) -> Result<u32> {
    let dtype = float_dtype_code::<T, 4>(OP, desc.element, "rope takes")?;
    let d = desc.shape[3];
    if desc.rotary_dim % 2 != 0 || desc.rotary_dim > d {
        return Err(invalid(
            "rotary_dim",
            desc.rotary_dim.to_string(),
            &format!("must be even and at most head_dim {d}"),
        ));
    }
    if let RopeFreqs::Theta { theta, pos_scale } = desc.freqs {
        if !(theta.is_finite() && theta > 0.0) {
            return Err(invalid("freqs.theta", theta.to_string(), "must be finite and > 0"));
        }
        if !(pos_scale.is_finite() && pos_scale > 0.0) {
            return Err(invalid(
                "freqs.pos_scale",
                pos_scale.to_string(),
                "must be finite and > 0",
            ));
        }
    }
    Ok(dtype)
}

/// `RopeParams` of `rope.cu`, field for field.
#[repr(C)]
#[derive(Copy, Clone)]
struct RopeParams<T> {
    x: DevPtr<T>,
    y: DevPtrMut<T>,
    pos: DevPtr<i64>,
    cos: DevPtr<f32>,
    sin: DevPtr<f32>,
    shape: [u64; 4],
    sx: [i64; 4],
    sy: [i64; 4],
    sp: [i64; 2],
    sc: [i64; 2],
    table_rows: u64,
    n_pairs: u64,
    n_tail: u64,
    log2_theta: f64,
    pos_scale: f64,
    rotary_dim: u32,
    gptj: u32,
    inverse: u32,
    pad: u32,
}

type Table<'a> = Option<(TensorRef<'a, f32, 2>, TensorRef<'a, f32, 2>)>;

impl<T: Element> RopePlan<T> {
    /// Check and enqueue one rotation of `x` into `y` (`inverse`: by -a).
    fn rotate(
        &self,
        stream: &Stream,
        (x_name, x): (&'static str, &TensorRef<'_, T, 4>),
        positions: &Option<TensorRef<'_, i64, 2>>,
        table: &Table<'_>,
        (y_name, y): (&'static str, &TensorMut<'_, T, 4>),
        inverse: bool,
    ) -> Result<()> {
        let shape = self.desc.shape;
        check_shape(OP, x_name, &shape, x.shape())?;
        check_shape(OP, y_name, &shape, y.shape())?;
        check_ctx(OP, x_name, stream, x.data().ctx_id())?;
        check_ctx(OP, y_name, stream, y.data().ctx_id())?;
        let mut inputs = vec![byte_span(x_name, x)];
        let (pos, sp) = match positions {
            Some(p) => {
                check_shape(OP, "positions", &[shape[0], shape[1]], p.shape())?;
                check_ctx(OP, "positions", stream, p.data().ctx_id())?;
                inputs.push(byte_span("positions", p));
                (p.data().ptr(), [p.strides()[0] as i64, p.strides()[1] as i64])
            }
            None => (DevPtr::NULL, [0; 2]),
        };
        let half = self.desc.rotary_dim / 2;
        let (cos, sin, sc, rows, log2_theta, pos_scale) = match (self.desc.freqs, table) {
            (RopeFreqs::Theta { theta, pos_scale }, None) => {
                (DevPtr::NULL, DevPtr::NULL, [0; 2], 0, theta.log2(), pos_scale)
            }
            (RopeFreqs::Table, Some((c, s))) => {
                let rows = c.shape()[0];
                check_shape(OP, "cos", &[rows, half], c.shape())?;
                check_shape(OP, "sin", &[rows, half], s.shape())?;
                check_ctx(OP, "cos", stream, c.data().ctx_id())?;
                check_ctx(OP, "sin", stream, s.data().ctx_id())?;
                if c.strides() != s.strides() {
                    return Err(Error::InvalidArgument {
                        op: OP,
                        arg: "sin",
                        reason: format!(
                            "strides {:?}; the tables share cos's strides {:?}",
                            s.strides(),
                            c.strides()
                        ),
                    });
                }
                inputs.push(byte_span("cos", c));
                inputs.push(byte_span("sin", s));
                let sc = [c.strides()[0] as i64, c.strides()[1] as i64];
                (c.data().ptr(), s.data().ptr(), sc, rows as u64, 0.0, 1.0)
            }
            (RopeFreqs::Table, None) => {
                return Err(Error::InvalidArgument {
                    op: OP,
                    arg: "table",
                    reason: "the descriptor takes its angles from cos and sin tables".into(),
                })
            }
            (RopeFreqs::Theta { .. }, Some(_)) => {
                return Err(Error::InvalidArgument {
                    op: OP,
                    arg: "table",
                    reason: "the descriptor computes its angles from theta; pass no tables".into(),
                })
            }
        };
        check_disjoint(OP, &[byte_span(y_name, &y.as_const())], &inputs)?;
        let heads: usize = shape[..3].iter().product();
        let n_pairs = heads * half;
        let n_tail = heads * (shape[3] - self.desc.rotary_dim);
        if n_pairs + n_tail == 0 {
            return Ok(());
        }
        let strides = |s: &[usize; 4]| s.map(|v| v as i64);
        let p = RopeParams {
            x: x.data().ptr(),
            y: y.data().ptr(),
            pos,
            cos,
            sin,
            shape: shape.map(|v| v as u64),
            sx: strides(x.strides()),
            sy: strides(y.strides()),
            sp,
            sc,
            table_rows: rows,
            n_pairs: n_pairs as u64,
            n_tail: n_tail as u64,
            log2_theta,
            pos_scale,
            rotary_dim: self.desc.rotary_dim as u32,
            gptj: u32::from(self.desc.style == RopeStyle::GptJ),
            inverse: u32::from(inverse),
            pad: 0,
        };
        let blocks = n_pairs.max(n_tail).div_ceil(256);
        let cfg = LaunchConfig::linear(
            grid_x(blocks.min(self.sm_count.max(1) as usize * 32)),
            256,
        );
        // SAFETY: every view was bounds-checked at construction and against
        // the plan's shapes above; the kernel reaches exactly the offsets
        // their strides give, and positions index the tables only after the
        // kernel's range check; y overlaps no input.
        unsafe { launch_params(stream, &self.f, cfg, p) }
    }
}

impl<T: Element> Plan for RopePlan<T> {
    type Descriptor = RopeDescriptor;
    type Args<'a> = RopeArgs<'a, T>;

    fn select(stream: &Stream, desc: &Self::Descriptor, pref: &PlanPreference) -> Result<Self> {
        let dtype = validate::<T>(desc)?;
        pref.check_backend(OP, &[BackendKind::Baracuda])?;
        pref.check_workspace(OP, 0)?;
        let module = stream.context().module(&spec(dtype))?;
        Ok(RopePlan {
            desc: *desc,
            sku: own_float_sku::<T>(stream, format!("rope.{:?}", desc.style), "pair per thread"),
            f: module.function("rope")?,
            sm_count: stream.context().device().sm_count,
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
        self.rotate(
            stream,
            ("x", &args.x),
            &args.positions,
            &args.table,
            ("y", &args.y),
            false,
        )
    }
}

impl<T: Element> Backward for RopePlan<T> {
    type BwArgs<'a> = RopeBwArgs<'a, T>;

    fn grads(&self) -> Grads {
        Grad::X.into()
    }

    fn bw_workspace_size(&self, _wants: Grads) -> usize {
        0
    }

    fn run_bw(
        &self,
        stream: &Stream,
        _workspace: Workspace<'_>,
        args: Self::BwArgs<'_>,
    ) -> Result<()> {
        self.rotate(
            stream,
            ("dy", &args.dy),
            &args.positions,
            &args.table,
            ("dx", &args.dx),
            true,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn params_layout_matches_cuda() {
        // 5 pointers, 3 x [u64; 4], 2 x [i64; 2], 3 u64, 2 f64, 4 u32
        assert_eq!(
            core::mem::size_of::<RopeParams<f32>>(),
            40 + 96 + 32 + 24 + 16 + 16
        );
    }

    #[test]
    fn descriptors_are_checked() {
        let d = RopeDescriptor::new(ElementKind::F32, [2, 8, 4, 64], 10000.0);
        assert!(validate::<f32>(&d).is_ok());
        assert!(validate::<f32>(&d.with_rotary_dim(32)).is_ok());
        let field = |r: Result<u32>| match r {
            Err(Error::InvalidDescriptor { field, .. }) => field,
            other => panic!("expected InvalidDescriptor, got {other:?}"),
        };
        assert_eq!(field(validate::<f32>(&d.with_rotary_dim(33))), "rotary_dim");
        assert_eq!(field(validate::<f32>(&d.with_rotary_dim(66))), "rotary_dim");
        let bad = d.with_freqs(RopeFreqs::Theta {
            theta: 0.0,
            pos_scale: 1.0,
        });
        assert_eq!(field(validate::<f32>(&bad)), "freqs.theta");
        let bad = d.with_freqs(RopeFreqs::Theta {
            theta: 10000.0,
            pos_scale: f64::NAN,
        });
        assert_eq!(field(validate::<f32>(&bad)), "freqs.pos_scale");
        assert!(matches!(
            validate::<f64>(&d),
            Err(Error::DtypeMismatch { .. })
        ));
        let i8_desc = RopeDescriptor {
            element: ElementKind::I8,
            ..d
        };
        assert!(matches!(
            validate::<i8>(&i8_desc),
            Err(Error::Unsupported { .. })
        ));
    }
}
