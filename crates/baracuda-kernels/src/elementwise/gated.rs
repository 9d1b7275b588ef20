//! Gated activations, fused: `x` splits along `dim` into halves `a`
//! (first) and `b` (second), and `y = act(gate) * other` with the gate
//! `a` (swiglu, geglu, reglu: Liger-Kernel's and the LLaMA MLP's
//! `act(x W_gate) * (x W_up)` when `x` is `[gate | up]`) or `b` (glu,
//! PyTorch's `F.glu(x, dim)`: `a * sigmoid(b)`). The backward writes both
//! halves of `dx` in the same pass.
//!
//! The kernels are in `kernels/elementwise/unary.cu` (the activation's
//! module, built with `BARACUDA_GATED`), so the activation's math is the
//! unary op's, forward and backward.

use core::marker::PhantomData;

use baracuda_driver::{Function, LaunchArgs, LaunchConfig, ModuleSpec, Stream};
use baracuda_kernels_types::{
    BackendKind, DevPtr, DevPtrMut, Element, ElementKind, KernelSku, PlanPreference, Result,
    TensorMut, TensorRef, Workspace,
};

use super::layout::{check_operand, check_select, MapKernels, THREADS};
use super::unary::{pointwise_precision, unary_spec, UnaryParams};
use super::UnaryOp;
use crate::checks::{byte_span, check_dim, check_disjoint, invalid_descriptor};
use crate::{Backward, Plan};

/// A gated activation of the halves `a` (first) and `b` (second) of `x`.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum GatedOp {
    /// `F.glu(x, dim)`: `a * sigmoid(b)`. Gradients `da = dy sigmoid(b)`,
    /// `db = dy a s (1 - s)`, `s = sigmoid(b)`.
    Glu,
    /// `silu(a) * b`. Gradients `da = dy b silu'(a)`, `db = dy silu(a)`.
    Swiglu,
    /// `gelu(a) * b`, erf GELU (approximate='none'). Gradients
    /// `da = dy b gelu'(a)`, `db = dy gelu(a)`.
    GegluErf,
    /// `gelu(a, approximate='tanh') * b`; gradients as `GegluErf`.
    GegluTanh,
    /// `relu(a) * b`. Gradients `da = dy b` where `a > 0` (else 0),
    /// `db = dy relu(a)`.
    Reglu,
}

impl GatedOp {
    /// Every op.
    pub const ALL: [GatedOp; 5] = [
        GatedOp::Glu,
        GatedOp::Swiglu,
        GatedOp::GegluErf,
        GatedOp::GegluTanh,
        GatedOp::Reglu,
    ];

    /// The op's name.
    pub fn name(self) -> &'static str {
        match self {
            GatedOp::Glu => "glu",
            GatedOp::Swiglu => "swiglu",
            GatedOp::GegluErf => "geglu_erf",
            GatedOp::GegluTanh => "geglu_tanh",
            GatedOp::Reglu => "reglu",
        }
    }

    /// The activation, and the half it gates (0: `a`, 1: `b`), as the
    /// kernels take them (`BARACUDA_OP`, `BARACUDA_GATED`).
    pub fn activation(self) -> (UnaryOp, u32) {
        match self {
            GatedOp::Glu => (UnaryOp::Sigmoid, 1),
            GatedOp::Swiglu => (UnaryOp::Silu, 0),
            GatedOp::GegluErf => (UnaryOp::GeluErf, 0),
            GatedOp::GegluTanh => (UnaryOp::GeluTanh, 0),
            GatedOp::Reglu => (UnaryOp::Relu, 0),
        }
    }
}

/// A gated activation of a rank-`N` tensor `x` split in halves along
/// `dim`.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub struct GatedDescriptor<const N: usize> {
    /// The function.
    pub op: GatedOp,
    /// Element type of every operand.
    pub element: ElementKind,
    /// Shape of `x` (and `dx`); `x_shape[dim]` is even.
    pub x_shape: [usize; N],
    /// The axis split in halves (PyTorch's `dim`, non-negative; the last
    /// axis, `N - 1`, is the usual one).
    pub dim: usize,
}

impl<const N: usize> GatedDescriptor<N> {
    /// The shape of `y` (and `dy`): `x_shape` with `dim` halved.
    ///
    /// # Errors
    /// `InvalidDescriptor` when `dim >= N` or `x_shape[dim]` is odd.
    pub fn y_shape(&self) -> Result<[usize; N]> {
        check_dim::<N>(OP, self.dim)?;
        let d = self.x_shape[self.dim];
        if d % 2 != 0 {
            return Err(invalid_descriptor(
                OP,
                "x_shape",
                format!("{:?} (dim {})", self.x_shape, self.dim),
                "the split dim must have an even size",
            ));
        }
        let mut y = self.x_shape;
        y[self.dim] = d / 2;
        Ok(y)
    }
}

/// Arguments of [`GatedPlan`]'s [`Plan::run`].
pub struct GatedArgs<'a, T, const N: usize> {
    /// Input, `x_shape`, any strides.
    pub x: TensorRef<'a, T, N>,
    /// Output, `x_shape` with `dim` halved; shares no memory with `x`.
    pub y: TensorMut<'a, T, N>,
}

/// Arguments of [`GatedPlan`]'s [`Backward::run_bw`].
pub struct GatedBwArgs<'a, T, const N: usize> {
    /// The forward input, `x_shape`.
    pub x: TensorRef<'a, T, N>,
    /// Gradient of `y`, `x_shape` with `dim` halved.
    pub dy: TensorRef<'a, T, N>,
    /// Gradient of `x`, `x_shape` (both halves); shares no memory with `x`
    /// or `dy`.
    pub dx: TensorMut<'a, T, N>,
}

/// `y = act(gate) * other` over the halves of `x` along `dim`, and its
/// backward `dx` (both halves in one pass); each op's math is in
/// [`GatedOp`].
///
/// # Shapes
/// `x`, `dx`: `x_shape`; `y`, `dy`: [`GatedDescriptor::y_shape`]; rank
/// `N <= 8`. No workspace.
/// # Layout
/// Any strides. When `x`, `y` (and `dy`, `dx`) are contiguous and 16-byte
/// aligned and the elements after `dim` in one half (`x_shape[dim] / 2`
/// times the extents after `dim`) are a multiple of 16 bytes, one thread
/// loads a 16-byte vector of each half (the split kernels); otherwise the
/// halves are read as strided views (the map kernels).
/// # Dtypes
/// f32, f64, f16, bf16 (f16/bf16 compute in f32 and round once; the
/// activation is the [`UnaryPlan`](super::UnaryPlan)'s). Others:
/// `Unsupported`.
/// # Aliasing
/// No output shares memory with an input: `InvalidArgument` otherwise.
/// # Errors
/// From `select`: `DtypeMismatch`, `Unsupported` (dtype, rank),
/// `InvalidDescriptor` (`dim` past the rank, an odd split), and
/// `PreferenceRejected` as every elementwise plan. From `run` and
/// `run_bw`: `ShapeMismatch`, `ContextMismatch`, `InvalidArgument`
/// (overlap).
pub struct GatedPlan<T: Element, const N: usize> {
    desc: GatedDescriptor<N>,
    y_shape: [usize; N],
    sku: KernelSku,
    fw: MapKernels,
    bw: MapKernels,
    fw_split: Function,
    bw_split: Function,
    params: UnaryParams,
    _t: PhantomData<T>,
}

const OP: &str = "gated";

/// The module of `op`'s kernels on `dtype`.
fn gated_spec(dtype: u32, op: GatedOp) -> (ModuleSpec, super::layout::ContigShape) {
    let (act, half) = op.activation();
    let (spec, shape) = unary_spec(dtype, act);
    (spec.define("BARACUDA_GATED", half), shape)
}

/// Every module the gated plans can request.
pub(crate) fn gated_specs() -> Vec<ModuleSpec> {
    (0..4)
        .flat_map(|dt| GatedOp::ALL.map(|op| gated_spec(dt, op).0))
        .collect()
}

impl<T: Element, const N: usize> Plan for GatedPlan<T, N> {
    type Descriptor = GatedDescriptor<N>;
    type Args<'a> = GatedArgs<'a, T, N>;

    fn select(stream: &Stream, desc: &Self::Descriptor, pref: &PlanPreference) -> Result<Self> {
        let dt = check_select::<T, N>(OP, desc.element, pref)?;
        pref.check_workspace(OP, 0)?;
        let y_shape = desc.y_shape()?;
        let (spec, shape) = gated_spec(dt, desc.op);
        let act = desc.op.activation().0.name();
        let module = stream.context().module(&spec)?;
        Ok(GatedPlan {
            desc: *desc,
            y_shape,
            sku: KernelSku {
                op: format!("gated.{}", desc.op.name()),
                element: T::KIND,
                backend: BackendKind::Baracuda,
                arch: stream.context().device().arch,
                variant: "vec16 split halves / rank-8 strided".into(),
                precision: pointwise_precision::<T>(),
            },
            fw: MapKernels::load(stream, &spec, "gated_fw", act, shape)?,
            bw: MapKernels::load(stream, &spec, "gated_bw", act, shape)?,
            fw_split: module.function(&format!("gated_fw_split_{act}"))?,
            bw_split: module.function(&format!("gated_bw_split_{act}"))?,
            params: desc.op.activation().0.kernel_params::<T>(),
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
        let (x, y) = (&args.x, &args.y);
        let d = &self.desc;
        check_operand(OP, "x", stream, &d.x_shape, x.shape(), x.data().ctx_id())?;
        check_operand(OP, "y", stream, &self.y_shape, y.shape(), y.data().ctx_id())?;
        check_disjoint(OP, &[byte_span("y", &y.as_const())], &[byte_span("x", x)])?;
        let yp = y.data().ptr();
        let contiguous = [x.is_contiguous(), y.is_contiguous()];
        if let Some(inner) = self.split_inner(&[x.data().addr(), yp.addr()], &contiguous) {
            let xp = x.data().ptr().cast();
            // SAFETY: x and y are contiguous views of x_shape and y_shape
            // (checked above), 16-byte aligned, disjoint; the kernel reads
            // x's two halves and writes y at vector offsets below n.
            return unsafe { self.launch_split(stream, &self.fw_split, &[xp], yp.cast(), inner) };
        }
        let (g, u) = self.halves(x.strides());
        let xp = x.data().ptr();
        let (g, u) = (xp.byte_add(g), xp.byte_add(u));
        // SAFETY: the halves are the two views of y_shape inside x (checked
        // above), y a checked view disjoint from x.
        unsafe {
            self.fw.launch_with(
                OP,
                stream,
                &self.y_shape,
                &[(yp, y.strides())],
                &[(g, x.strides()), (u, x.strides())],
                |a| a.push(self.params).map(|_| ()),
            )
        }
    }
}

impl<T: Element, const N: usize> Backward for GatedPlan<T, N> {
    type BwArgs<'a> = GatedBwArgs<'a, T, N>;

    fn run_bw(
        &self,
        stream: &Stream,
        _workspace: Workspace<'_>,
        args: Self::BwArgs<'_>,
    ) -> Result<()> {
        let (x, dy, dx) = (&args.x, &args.dy, &args.dx);
        let d = &self.desc;
        check_operand(OP, "x", stream, &d.x_shape, x.shape(), x.data().ctx_id())?;
        check_operand(
            OP,
            "dy",
            stream,
            &self.y_shape,
            dy.shape(),
            dy.data().ctx_id(),
        )?;
        check_operand(OP, "dx", stream, &d.x_shape, dx.shape(), dx.data().ctx_id())?;
        check_disjoint(
            OP,
            &[byte_span("dx", &dx.as_const())],
            &[byte_span("x", x), byte_span("dy", dy)],
        )?;
        let dxp = dx.data().ptr();
        let addrs = [x.data().addr(), dy.data().addr(), dxp.addr()];
        let contiguous = [x.is_contiguous(), dy.is_contiguous(), dx.is_contiguous()];
        if let Some(inner) = self.split_inner(&addrs, &contiguous) {
            // SAFETY: x, dy, dx are contiguous views of their shapes
            // (checked above), 16-byte aligned, dx disjoint from both; the
            // kernel writes dx's halves at the vector offsets it reads x at.
            return unsafe {
                self.launch_split(
                    stream,
                    &self.bw_split,
                    &[x.data().ptr().cast(), dy.data().ptr().cast()],
                    dxp.cast(),
                    inner,
                )
            };
        }
        let (g, u) = self.halves(x.strides());
        let xp = x.data().ptr();
        let (g, u) = (xp.byte_add(g), xp.byte_add(u));
        let (dg, du) = self.halves(dx.strides());
        let (dg, du) = (dxp.byte_add(dg), dxp.byte_add(du));
        // SAFETY: the halves of x and dx are views of y_shape inside them
        // (checked above); dx is disjoint from x and dy.
        unsafe {
            self.bw.launch_with(
                OP,
                stream,
                &self.y_shape,
                &[(dg, dx.strides()), (du, dx.strides())],
                &[
                    (g, x.strides()),
                    (u, x.strides()),
                    (dy.data().ptr(), dy.strides()),
                ],
                |a| a.push(self.params).map(|_| ()),
            )
        }
    }
}

impl<T: Element, const N: usize> GatedPlan<T, N> {
    /// Byte offsets of the gate and of the other half in a tensor of
    /// `x_shape` with `strides`: views of `y_shape` with the same strides,
    /// the second `x_shape[dim] / 2` elements further along `dim`.
    fn halves(&self, strides: &[usize; N]) -> (usize, usize) {
        let d = self.desc.dim;
        let second = self.y_shape[d] * strides[d] * core::mem::size_of::<T>();
        match self.desc.op.activation().1 {
            0 => (0, second),
            _ => (second, 0),
        }
    }

    /// The split kernels' `inner` (elements of one half after `dim`: x is
    /// `[outer, 2, inner]`) when they can run: every operand contiguous
    /// and 16-byte aligned, `inner` a whole number of vectors.
    fn split_inner(&self, addrs: &[u64], contiguous: &[bool]) -> Option<usize> {
        let d = self.desc.dim;
        let inner: usize = self.y_shape[d..].iter().product();
        let vec = 16 / core::mem::size_of::<T>();
        let ok = inner > 0
            && inner % vec == 0
            && contiguous.iter().all(|&c| c)
            && addrs.iter().all(|a| a % 16 == 0);
        ok.then_some(inner)
    }

    /// Launch a split kernel: `ins` (x, then dy for the backward), the
    /// output (y or dx), then `n` (y's elements), `inner` and the
    /// activation's parameters; one 16-byte vector of y per thread.
    ///
    /// # Safety
    /// As the callers state: contiguous, aligned, bounds-checked operands.
    unsafe fn launch_split(
        &self,
        stream: &Stream,
        f: &Function,
        ins: &[DevPtr<u8>],
        out: DevPtrMut<u8>,
        inner: usize,
    ) -> Result<()> {
        let n: usize = self.y_shape.iter().product();
        if n == 0 {
            return Ok(());
        }
        let vec = 16 / core::mem::size_of::<T>();
        let blocks = (n / vec).div_ceil(THREADS as usize);
        if blocks > i32::MAX as usize {
            return Err(baracuda_kernels_types::Error::Unsupported {
                op: OP,
                what: format!("{n} elements exceed one launch of 2^31 - 1 blocks"),
            });
        }
        let mut args = LaunchArgs::new();
        for p in ins {
            args.push(*p)?;
        }
        args.push(out)?;
        args.push(n as u64)?;
        args.push(inner as u64)?;
        args.push(self.params)?;
        // SAFETY: forwarded from the caller's contract.
        unsafe {
            f.launch(
                stream,
                LaunchConfig::linear(blocks as u32, THREADS),
                &mut args,
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn y_shape_halves_dim() {
        let d = GatedDescriptor {
            op: GatedOp::Swiglu,
            element: ElementKind::F32,
            x_shape: [3, 8],
            dim: 1,
        };
        assert_eq!(d.y_shape().unwrap(), [3, 4]);
        assert_eq!(
            GatedDescriptor {
                dim: 0,
                x_shape: [4, 3],
                ..d
            }
            .y_shape()
            .unwrap(),
            [2, 3]
        );
        let odd = GatedDescriptor {
            x_shape: [3, 7],
            ..d
        };
        assert!(matches!(
            odd.y_shape(),
            Err(baracuda_kernels_types::Error::InvalidDescriptor {
                field: "x_shape",
                ..
            })
        ));
        let past = GatedDescriptor { dim: 2, ..d };
        assert!(matches!(
            past.y_shape(),
            Err(baracuda_kernels_types::Error::InvalidDescriptor { field: "dim", .. })
        ));
    }

    #[test]
    fn glu_gates_the_second_half() {
        assert_eq!(GatedOp::Glu.activation(), (UnaryOp::Sigmoid, 1));
        for op in GatedOp::ALL.into_iter().filter(|&o| o != GatedOp::Glu) {
            assert_eq!(op.activation().1, 0);
        }
    }
}
