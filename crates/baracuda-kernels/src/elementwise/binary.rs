//! Pointwise binary ops with NumPy broadcasting: `out = f(a, b)`, and the
//! backward `da`, `db`, each reduced (summed) back to its input's shape
//! when that input was broadcast.
//!
//! The math of each op is in [`BinaryOp`] and at the top of
//! `kernels/elementwise/binary.cu`.

use core::marker::PhantomData;

use baracuda_driver::{Function, LaunchArgs, LaunchConfig, Stream};
use baracuda_kernels_types::{
    BackendKind, Element, ElementKind, Error, Grad, Grads, KernelSku, PlanPreference, Result,
    Shape, TensorMut, TensorRef, Workspace, MAX_RANK,
};

use super::layout::{binary_fw_shape, binary_spec, contig_shape, dtype_id, MapKernels, THREADS};
use super::unary::{pointwise_precision};
use crate::{Backward, Plan};
use crate::checks::{check_ctx, check_no_partial_overlap, check_shape};

/// A pointwise binary function.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum BinaryOp {
    /// `a + b`.
    Add,
    /// `a - b`.
    Sub,
    /// `a * b`.
    Mul,
    /// `a / b` (true division).
    Div,
    /// `max(a, b)`, NaN if either is NaN; gradient split in half on ties.
    Maximum,
    /// `min(a, b)`, NaN if either is NaN; gradient split in half on ties.
    Minimum,
}

impl BinaryOp {
    /// Every op, in declaration order.
    pub const ALL: [BinaryOp; 6] = [
        BinaryOp::Add,
        BinaryOp::Sub,
        BinaryOp::Mul,
        BinaryOp::Div,
        BinaryOp::Maximum,
        BinaryOp::Minimum,
    ];

    /// Position in [`BinaryOp::ALL`] (`BARACUDA_OP` of the kernel source).
    pub fn index(self) -> u32 {
        Self::ALL.iter().position(|&o| o == self).unwrap_or(0) as u32
    }

    /// Kernel-name suffix and op name.
    pub fn name(self) -> &'static str {
        match self {
            BinaryOp::Add => "add",
            BinaryOp::Sub => "sub",
            BinaryOp::Mul => "mul",
            BinaryOp::Div => "div",
            BinaryOp::Maximum => "maximum",
            BinaryOp::Minimum => "minimum",
        }
    }
}

/// A binary op of two rank-`N` inputs broadcast to a common shape.
///
/// Each axis of `a_shape` and `b_shape` must equal the other's or be 1
/// (pad lower-rank inputs with leading 1s). The output shape is their
/// broadcast.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub struct BinaryDescriptor<const N: usize> {
    /// The function.
    pub op: BinaryOp,
    /// Element type of every operand.
    pub element: ElementKind,
    /// Shape of `a`.
    pub a_shape: [usize; N],
    /// Shape of `b`.
    pub b_shape: [usize; N],
}

impl<const N: usize> BinaryDescriptor<N> {
    /// The broadcast output shape.
    ///
    /// # Errors
    /// `BroadcastMismatch` when an axis differs and neither is 1.
    pub fn out_shape(&self) -> Result<[usize; N]> {
        let mut out = [0usize; N];
        for (d, o) in out.iter_mut().enumerate() {
            let (x, y) = (self.a_shape[d], self.b_shape[d]);
            *o = if x == y || y == 1 {
                x
            } else if x == 1 {
                y
            } else {
                return Err(Error::BroadcastMismatch {
                    op: "binary",
                    a: Shape::from(&self.a_shape[..]),
                    b: Shape::from(&self.b_shape[..]),
                });
            };
        }
        Ok(out)
    }
}

/// Arguments of [`BinaryPlan`]'s [`Plan::run`].
pub struct BinaryArgs<'a, T, const N: usize> {
    /// First input, shape `a_shape`.
    pub a: TensorRef<'a, T, N>,
    /// Second input, shape `b_shape`.
    pub b: TensorRef<'a, T, N>,
    /// Output, the broadcast shape; may be `a` or `b` itself when that input
    /// has the output's shape (in place).
    pub out: TensorMut<'a, T, N>,
}

/// Arguments of [`BinaryPlan`]'s [`Backward::run_bw`].
pub struct BinaryBwArgs<'a, T, const N: usize> {
    /// First forward input, shape `a_shape`.
    pub a: TensorRef<'a, T, N>,
    /// Second forward input, shape `b_shape`.
    pub b: TensorRef<'a, T, N>,
    /// Gradient of the output, the broadcast shape.
    pub dy: TensorRef<'a, T, N>,
    /// Gradient of `a`, shape `a_shape`, when wanted.
    pub da: Option<TensorMut<'a, T, N>>,
    /// Gradient of `b`, shape `b_shape`, when wanted.
    pub db: Option<TensorMut<'a, T, N>>,
}

fn check_desc<T: Element, const N: usize>(
    op: &'static str,
    desc: &BinaryDescriptor<N>,
    pref: &PlanPreference,
) -> Result<(u32, [usize; N])> {
    if desc.element != T::KIND {
        return Err(Error::DtypeMismatch {
            op,
            arg: "desc.element",
            expected: T::KIND,
            got: desc.element,
        });
    }
    let dt = dtype_id(op, T::KIND)?;
    if N > MAX_RANK {
        return Err(Error::Unsupported {
            op,
            what: format!("rank {N} > 8"),
        });
    }
    pref.check_backend(op, &[BackendKind::Baracuda])?;
    let out = desc.out_shape().map_err(|e| match e {
        Error::BroadcastMismatch { a, b, .. } => Error::BroadcastMismatch { op, a, b },
        e => e,
    })?;
    Ok((dt, out))
}

/// `out = f(a, b)` elementwise with broadcasting, and its backward
/// `da = reduce(dy * df/da)`, `db = reduce(dy * df/db)`.
///
/// # Shapes
/// `a`: `a_shape`, `b`: `b_shape`, `out`: their broadcast; rank `N <= 8`.
/// # Layout
/// Any strides; contiguous, 16-byte-aligned, same-shape operands take the
/// vectorised kernel, everything else the strided kernel (64-bit offsets).
/// # Dtypes
/// f32, f64, f16, bf16 (f16/bf16 compute in f32). Others: `Unsupported`.
/// # Backward
/// `dy`: the broadcast shape, `da`: `a_shape`, `db`: `b_shape`, each
/// computed when given. A gradient whose input has the output's shape is
/// written by the pointwise kernel; one whose input was broadcast is summed
/// over the broadcast axes by a reduction kernel, split across blocks when
/// there are few outputs, with partial sums in the workspace, then summed
/// in a fixed order: deterministic. Sums accumulate in f32 (f64 for f64).
/// Under a `max_workspace_bytes` cap too small for the partials, a
/// reduction runs unsplit (one block column per output tile, no workspace).
/// # Errors
/// `BroadcastMismatch` from `select`; `ShapeMismatch`, `ContextMismatch`,
/// `InvalidArgument` (partial overlap, `da` and `db` in one buffer) from
/// `run` and `run_bw`; `WorkspaceTooSmall` from `run_bw`.
pub struct BinaryPlan<T: Element, const N: usize> {
    desc: BinaryDescriptor<N>,
    out_shape: [usize; N],
    sku: KernelSku,
    fw: MapKernels,
    bw: MapKernels,
    reduce_a: Option<Reduction>,
    reduce_b: Option<Reduction>,
    finalize: Function,
    _t: PhantomData<T>,
}

const OP: &str = "binary";

impl<T: Element, const N: usize> Plan for BinaryPlan<T, N> {
    type Descriptor = BinaryDescriptor<N>;
    type Args<'a> = BinaryArgs<'a, T, N>;

    fn select(stream: &Stream, desc: &Self::Descriptor, pref: &PlanPreference) -> Result<Self> {
        let (dt, out_shape) = check_desc::<T, N>(OP, desc, pref)?;
        pref.check_workspace(OP, 0)?;
        let arch = stream.context().device().arch;
        let spec = binary_spec(dt, desc.op, arch);
        let name = desc.op.name();
        let fw = MapKernels::load(stream, &spec, "binary_fw", name, binary_fw_shape(dt))?;
        let bw = MapKernels::load(stream, &spec, "binary_bw", name, contig_shape(false, dt))?;
        let module = stream.context().module(&spec)?;
        let finalize = module.function("binary_bw_finalize")?;
        let sm = stream.context().device().sm_count;
        // Workspace the backward may still take under the caller's cap.
        let mut room = pref.max_workspace_bytes.unwrap_or(usize::MAX);
        let mut reduction = |shape: &[usize; N], which: &str| -> Result<Option<Reduction>> {
            if *shape == out_shape {
                return Ok(None);
            }
            let kept: Vec<usize> = (0..N)
                .filter(|&d| shape[d] == out_shape[d] && shape[d] != 1)
                .collect();
            let reduced: Vec<usize> = (0..N).filter(|&d| shape[d] != out_shape[d]).collect();
            let n_out: usize = kept.iter().map(|&d| out_shape[d]).product();
            let n_red: usize = reduced.iter().map(|&d| out_shape[d]).product();
            let (tx, ty, mut splits, mut chunk) = plan_reduction(n_out, n_red, sm);
            if partial_bytes::<T>(splits, n_out) > room {
                (splits, chunk) = (1, n_red);
            }
            room -= partial_bytes::<T>(splits, n_out);
            let reduce = module.function(&format!("binary_bw_reduce_{which}_{name}"))?;
            Ok(Some(Reduction {
                kept,
                reduced,
                n_out,
                n_red,
                tx,
                ty,
                splits,
                chunk,
                reduce,
            }))
        };
        let reduce_a = reduction(&desc.a_shape, "a")?;
        let reduce_b = reduction(&desc.b_shape, "b")?;
        let splits = |r: &Option<Reduction>| r.as_ref().map_or(0, |r| r.splits);
        let variant = format!(
            "vec16 contiguous / rank-8 strided; bw pointwise + reduce (splits a={}, b={})",
            splits(&reduce_a),
            splits(&reduce_b)
        );
        Ok(BinaryPlan {
            desc: *desc,
            out_shape,
            sku: KernelSku {
                op: format!("binary.{name}"),
                element: T::KIND,
                backend: BackendKind::Baracuda,
                arch,
                variant,
                precision: pointwise_precision::<T>(),
            },
            fw,
            bw,
            reduce_a,
            reduce_b,
            finalize,
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
        check_shape(OP, "a", &self.desc.a_shape, args.a.shape())?;
        check_shape(OP, "b", &self.desc.b_shape, args.b.shape())?;
        check_shape(OP, "out", &self.out_shape, args.out.shape())?;
        check_ctx(OP, "a", stream, args.a.data().ctx_id())?;
        check_ctx(OP, "b", stream, args.b.data().ctx_id())?;
        check_ctx(OP, "out", stream, args.out.data().ctx_id())?;
        let a = args.a.broadcast_to(self.out_shape)?;
        let b = args.b.broadcast_to(self.out_shape)?;
        let out = args.out.data().addr();
        check_no_partial_overlap::<T>(
            OP,
            "out",
            (out, args.out.shape(), args.out.strides()),
            &[
                ("a", a.data().addr(), a.shape(), a.strides()),
                ("b", b.data().addr(), b.shape(), b.strides()),
            ],
        )?;
        // SAFETY: views bounds-checked at construction (broadcast views
        // reach no new elements); order strided (out, a, b), contiguous
        // (a, b, out, n).
        unsafe {
            self.fw.launch::<T>(
                stream,
                &self.out_shape,
                &[
                    (out, args.out.strides()),
                    (a.data().addr(), a.strides()),
                    (b.data().addr(), b.strides()),
                ],
                &[1, 2, 0],
            )
        }
    }
}

/// `ReduceArgs` of `kernels/elementwise/binary.cu`, field for field.
#[repr(C)]
#[derive(Copy, Clone, Debug)]
struct ReduceArgs {
    n_out: u64,
    n_red: u64,
    chunk: u64,
    rank_out: u32,
    rank_red: u32,
    splits: u32,
    pad: u32,
    shape_out: [u64; MAX_RANK],
    shape_red: [u64; MAX_RANK],
    out_stride: [[i64; MAX_RANK]; 4],
    red_stride: [[i64; MAX_RANK]; 3],
    a: u64,
    b: u64,
    dy: u64,
    grad: u64,
    partial: u64,
}

/// How the gradient of one broadcast input is reduced: which axes are
/// kept, which summed, and in how many deterministic splits.
#[derive(Clone, Debug)]
struct Reduction {
    kept: Vec<usize>,
    reduced: Vec<usize>,
    n_out: usize,
    n_red: usize,
    /// Block shape: `tx` outputs by `ty` threads striding the reduced range.
    tx: u32,
    ty: u32,
    splits: usize,
    chunk: usize,
    reduce: Function,
}

impl Reduction {
    /// Bytes of this reduction's partials in the workspace, 256-aligned.
    fn ws_bytes<T: Element>(&self) -> usize {
        partial_bytes::<T>(self.splits, self.n_out)
    }
}

/// Workspace of `splits` partial sums of `n_out` outputs (none unsplit),
/// rounded up to 256 bytes.
fn partial_bytes<T: Element>(splits: usize, n_out: usize) -> usize {
    if splits <= 1 {
        return 0;
    }
    let acc = if T::KIND == ElementKind::F64 { 8 } else { 4 };
    (splits * n_out * acc).div_ceil(256) * 256
}

/// Block shape and splits of one reduction. A block is `tx * ty = 256`
/// threads: `tx` (a power of two up to 256) outputs, `ty` threads striding
/// the reduced range of each. Splits along grid.y fill the device when
/// there are few output blocks, keeping at least 16 reduced elements per
/// thread and at most 1024 partials per output (summed in order later).
///
/// Worked example (H200, 132 SMs, 270336 resident threads): the gradient of
/// a scalar `b` under dy `[4096, 513]` has 1 output and 2101248 reduced
/// elements, so tx = 1, ty = 256, one block column; splits = min(ceil(270336
/// / 256) = 1056, ceil(2101248 / (256 * 16)) = 513) = 513, chunk = 4096
/// elements per split, 16 per thread. A bias `[1024]` under `[8192, 1024]`
/// gives tx = 256, ty = 1, 4 block columns, splits = min(264, 512) = 264,
/// chunk = ceil(8192 / 264) = 32 rows, hence 256 splits.
fn plan_reduction(n_out: usize, n_red: usize, sm_count: u32) -> (u32, u32, usize, usize) {
    let tx = n_out.clamp(1, 256).next_power_of_two().min(256) as u32;
    let ty = 256 / tx;
    if n_out == 0 || n_red == 0 {
        return (tx, ty, 1, n_red);
    }
    let target = sm_count as usize * 2048;
    let block_cols = n_out.div_ceil(tx as usize);
    let splits = target
        .div_ceil(256 * block_cols)
        .min(n_red.div_ceil(ty as usize * 16))
        .clamp(1, 1024);
    let chunk = n_red.div_ceil(splits);
    (tx, ty, n_red.div_ceil(chunk), chunk)
}

impl<T: Element, const N: usize> BinaryPlan<T, N> {
    /// The reductions of the gradients in `wants`, each with the byte
    /// offset of its partials in the workspace (laid out in that order).
    fn reductions(&self, wants: Grads) -> impl Iterator<Item = (Grad, &Reduction, usize)> {
        let mut offset = 0;
        [(Grad::A, &self.reduce_a), (Grad::B, &self.reduce_b)]
            .into_iter()
            .filter_map(move |(g, r)| {
                let r = r.as_ref().filter(|_| wants.contains(g))?;
                let at = offset;
                offset += r.ws_bytes::<T>();
                Some((g, r, at))
            })
    }
}

impl<T: Element, const N: usize> Backward for BinaryPlan<T, N> {
    type BwArgs<'a> = BinaryBwArgs<'a, T, N>;

    fn grads(&self) -> Grads {
        Grad::A | Grad::B
    }

    fn bw_workspace_size(&self, wants: Grads) -> usize {
        self.reductions(wants)
            .map(|(_, r, at)| at + r.ws_bytes::<T>())
            .max()
            .unwrap_or(0)
    }

    fn run_bw(
        &self,
        stream: &Stream,
        workspace: Workspace<'_>,
        args: Self::BwArgs<'_>,
    ) -> Result<()> {
        check_shape(OP, "a", &self.desc.a_shape, args.a.shape())?;
        check_shape(OP, "b", &self.desc.b_shape, args.b.shape())?;
        check_shape(OP, "dy", &self.out_shape, args.dy.shape())?;
        let ctx = stream.context().id();
        check_ctx(OP, "a", stream, args.a.data().ctx_id())?;
        check_ctx(OP, "b", stream, args.b.data().ctx_id())?;
        check_ctx(OP, "dy", stream, args.dy.data().ctx_id())?;
        let inputs = [
            (
                "a",
                args.a.data().addr(),
                &args.a.shape()[..],
                &args.a.strides()[..],
            ),
            (
                "b",
                args.b.data().addr(),
                &args.b.shape()[..],
                &args.b.strides()[..],
            ),
            (
                "dy",
                args.dy.data().addr(),
                &args.dy.shape()[..],
                &args.dy.strides()[..],
            ),
        ];
        for (name, g, shape) in [
            ("da", &args.da, &self.desc.a_shape),
            ("db", &args.db, &self.desc.b_shape),
        ] {
            if let Some(g) = g {
                check_shape(OP, name, shape, g.shape())?;
                check_ctx(OP, name, stream, g.data().ctx_id())?;
                check_no_partial_overlap::<T>(
                    OP,
                    name,
                    (g.data().addr(), g.shape(), g.strides()),
                    &inputs,
                )?;
            }
        }
        if let (Some(da), Some(db)) = (&args.da, &args.db) {
            check_no_partial_overlap::<T>(
                OP,
                "db",
                (db.data().addr(), db.shape(), db.strides()),
                &[("da", da.data().addr(), da.shape(), da.strides())],
            )?;
            if da.data().addr() == db.data().addr() && !da.data().is_empty() {
                return Err(Error::InvalidArgument {
                    op: OP,
                    arg: "db",
                    reason: "aliases da".into(),
                });
            }
        }
        let wants = Grads::present(&[(Grad::A, args.da.is_some()), (Grad::B, args.db.is_some())]);
        let ws = workspace.check(OP, self.bw_workspace_size(wants), ctx)?;

        let a = args.a.broadcast_to(self.out_shape)?;
        let b = args.b.broadcast_to(self.out_shape)?;
        // Pointwise pass for the gradients whose input is not broadcast.
        let pointwise = |g: &Option<TensorMut<'_, T, N>>, r: &Option<Reduction>| match (g, r) {
            (Some(g), None) => (g.data().addr(), *g.strides()),
            _ => (0, [0; N]),
        };
        let (da, da_st) = pointwise(&args.da, &self.reduce_a);
        let (db, db_st) = pointwise(&args.db, &self.reduce_b);
        if da != 0 || db != 0 {
            let dy_st = *args.dy.strides();
            let da_st = if da == 0 { dy_st } else { da_st };
            let db_st = if db == 0 { dy_st } else { db_st };
            // SAFETY: all views bounds-checked at construction and shapes
            // checked above; absent gradients have address 0, which the
            // kernels skip. Order strided (da, db, a, b, dy), contiguous
            // (a, b, dy, da, db, n).
            unsafe {
                self.bw.launch::<T>(
                    stream,
                    &self.out_shape,
                    &[
                        (da, &da_st),
                        (db, &db_st),
                        (a.data().addr(), a.strides()),
                        (b.data().addr(), b.strides()),
                        (args.dy.data().addr(), &dy_st),
                    ],
                    &[2, 3, 4, 0, 1],
                )?;
            }
        }
        for (which, r, at) in self.reductions(wants) {
            let g = if which == Grad::A { &args.da } else { &args.db };
            if let Some(g) = g {
                self.launch_reduce(stream, r, &a, &b, &args.dy, g, ws + at as u64)?;
            }
        }
        Ok(())
    }
}

impl<T: Element, const N: usize> BinaryPlan<T, N> {
    #[allow(clippy::too_many_arguments)] // the operands of one reduction
    fn launch_reduce(
        &self,
        stream: &Stream,
        r: &Reduction,
        a: &TensorRef<'_, T, N>,
        b: &TensorRef<'_, T, N>,
        dy: &TensorRef<'_, T, N>,
        grad: &TensorMut<'_, T, N>,
        ws: u64,
    ) -> Result<()> {
        if r.n_out == 0 {
            return Ok(());
        }
        let mut p = ReduceArgs {
            n_out: r.n_out as u64,
            n_red: r.n_red as u64,
            chunk: r.chunk as u64,
            rank_out: r.kept.len() as u32,
            rank_red: r.reduced.len() as u32,
            splits: r.splits as u32,
            pad: 0,
            shape_out: [1; MAX_RANK],
            shape_red: [1; MAX_RANK],
            out_stride: [[0; MAX_RANK]; 4],
            red_stride: [[0; MAX_RANK]; 3],
            a: a.data().addr(),
            b: b.data().addr(),
            dy: dy.data().addr(),
            grad: grad.data().addr(),
            partial: if r.splits > 1 { ws } else { 0 },
        };
        for (i, &d) in r.kept.iter().enumerate() {
            p.shape_out[i] = self.out_shape[d] as u64;
            p.out_stride[0][i] = a.strides()[d] as i64;
            p.out_stride[1][i] = b.strides()[d] as i64;
            p.out_stride[2][i] = dy.strides()[d] as i64;
            p.out_stride[3][i] = grad.strides()[d] as i64;
        }
        for (i, &d) in r.reduced.iter().enumerate() {
            p.shape_red[i] = self.out_shape[d] as u64;
            p.red_stride[0][i] = a.strides()[d] as i64;
            p.red_stride[1][i] = b.strides()[d] as i64;
            p.red_stride[2][i] = dy.strides()[d] as i64;
        }
        let cols = r.n_out.div_ceil(r.tx as usize) as u32;
        let cfg = LaunchConfig {
            grid: (cols, r.splits as u32, 1),
            block: (r.tx, r.ty, 1),
            smem_bytes: 0,
        };
        let mut args = LaunchArgs::new();
        args.push(p)?;
        // SAFETY: every address comes from a bounds-checked view whose shape
        // matches the plan; the kernel reads a, b, dy at offsets inside
        // those views and writes grad at its own offsets, or partials inside
        // the workspace, whose size `run` checked.
        unsafe { r.reduce.launch(stream, cfg, &mut args)? };
        if r.splits > 1 {
            let blocks = r.n_out.div_ceil(THREADS as usize) as u32;
            // SAFETY: as above; finalize reads the partials just written and
            // writes grad.
            unsafe {
                self.finalize
                    .launch(stream, LaunchConfig::linear(blocks, THREADS), &mut args)?
            };
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn out_shape_broadcasts() {
        let d = BinaryDescriptor {
            op: BinaryOp::Add,
            element: ElementKind::F32,
            a_shape: [4, 1],
            b_shape: [1, 3],
        };
        assert_eq!(d.out_shape().unwrap(), [4, 3]);
        let bad = BinaryDescriptor {
            op: BinaryOp::Add,
            element: ElementKind::F32,
            a_shape: [4, 2],
            b_shape: [1, 3],
        };
        assert!(matches!(
            bad.out_shape(),
            Err(Error::BroadcastMismatch { .. })
        ));
    }

    #[test]
    fn reductions_follow_the_worked_example() {
        assert_eq!(plan_reduction(1, 4096 * 513, 132), (1, 256, 513, 4096));
        assert_eq!(plan_reduction(1024, 8192, 132), (256, 1, 256, 32));
        // many outputs, short reduction: no split
        assert_eq!(plan_reduction(1 << 20, 16, 132), (256, 1, 1, 16));
        // 33 outputs: 64 x 4 blocks
        assert_eq!(plan_reduction(33, 64, 132).0, 64);
        // nothing to sum: one split writing zeros
        assert_eq!(plan_reduction(5, 0, 132), (8, 32, 1, 0));
    }

    #[test]
    fn reduce_args_layout_matches_cuda() {
        // 3*8 + 4*4 + 2*64 + 4*64 + 3*64 + 5*8
        assert_eq!(
            std::mem::size_of::<ReduceArgs>(),
            24 + 16 + 128 + 256 + 192 + 40
        );
    }
}
