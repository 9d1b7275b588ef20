//! One exercise per family: its plans (forward and backward, f32, the
//! deterministic preference) selected once, with their inputs on the
//! device, and an `enqueue` that only enqueues. The reliability tests run
//! an exercise from many threads at once, capture it into a graph, and
//! run it on another context's stream. A new family adds its entry to
//! [`EXERCISES`] (a host test fails until it does).

use baracuda_driver::CudaLib;
use baracuda_kernels::*;

use crate::harness::{gpu, Rng};

/// A family's plans and their inputs on the device.
pub(super) trait Exercise: Send + Sync {
    /// Elements of each output, and the workspace bytes.
    fn outputs(&self) -> (Vec<usize>, usize);
    /// Enqueue every plan on `stream`, writing `out`.
    fn enqueue(&self, stream: &Stream, out: &mut Outs) -> Result<()>;
}

/// One family's entry in [`EXERCISES`].
pub(super) struct FamilyExercise {
    /// The family (as in `baracuda_kernels::FAMILIES`).
    pub family: &'static str,
    /// The CUDA libraries its plans need besides NVRTC.
    pub libraries: &'static [CudaLib],
    /// Select the plans on the shared stream and upload the inputs.
    pub make: fn() -> Result<Box<dyn Exercise>>,
}

/// One exercise per family.
pub(super) static EXERCISES: &[FamilyExercise] = &[
    FamilyExercise {
        family: "elementwise",
        libraries: &[],
        make: || Ok(Box::new(Elementwise::new()?)),
    },
    FamilyExercise {
        family: "conv",
        libraries: &[CudaLib::Cudnn],
        make: || Ok(Box::new(Conv::new()?)),
    },
    FamilyExercise {
        family: "gemm",
        libraries: &[CudaLib::CublasLt],
        make: || Ok(Box::new(Gemm::new()?)),
    },
    FamilyExercise {
        family: "reduce",
        libraries: &[],
        make: || Ok(Box::new(Reduce::new()?)),
    },
    FamilyExercise {
        family: "softmax",
        libraries: &[],
        make: || Ok(Box::new(Softmax::new()?)),
    },
    FamilyExercise {
        family: "norm",
        libraries: &[],
        make: || Ok(Box::new(Norms::new()?)),
    },
];

/// The outputs and workspace of one runner of an [`Exercise`].
pub(super) struct Outs {
    bufs: Vec<DeviceBuffer<f32>>,
    ws: DeviceBuffer<u8>,
}

impl Outs {
    /// Poisoned outputs and a workspace on `stream`.
    pub fn new(stream: &Stream, ex: &dyn Exercise) -> Result<Outs> {
        let (sizes, ws) = ex.outputs();
        let bufs = sizes
            .iter()
            .map(|&n| DeviceBuffer::filled_bytes(stream, n, 0xFF))
            .collect::<Result<_>>()?;
        Ok(Outs {
            bufs,
            ws: DeviceBuffer::zeros(stream, ws.max(1))?,
        })
    }
    /// Poison every output again (NaN), on `stream`.
    pub fn poison(&mut self, stream: &Stream) -> Result<()> {
        self.bufs
            .iter_mut()
            .try_for_each(|b| b.fill_bytes(stream, 0xFF))
    }
    /// The outputs' bits, after everything enqueued on `stream`.
    pub fn bits(&self, stream: &Stream) -> Result<Vec<Vec<u32>>> {
        self.bufs
            .iter()
            .map(|b| Ok(b.to_host(stream)?.iter().map(|v| v.to_bits()).collect()))
            .collect()
    }
    /// The workspace and the outputs, in the order `outputs` listed them.
    fn parts(&mut self) -> (&mut DeviceBuffer<u8>, Parts<'_>) {
        (&mut self.ws, Parts(self.bufs.iter_mut()))
    }
}

/// The outputs of one run, taken in order.
struct Parts<'a>(std::slice::IterMut<'a, DeviceBuffer<f32>>);

impl<'a> Parts<'a> {
    /// The next `N` outputs.
    fn take<const N: usize>(&mut self) -> Result<[&'a mut DeviceBuffer<f32>; N]> {
        let mut bufs = Vec::with_capacity(N);
        for _ in 0..N {
            bufs.push(self.0.next().ok_or_else(|| Error::InvalidArgument {
                op: "exercise",
                arg: "outputs",
                reason: "fewer outputs than the exercise writes".into(),
            })?);
        }
        Ok(bufs
            .try_into()
            .unwrap_or_else(|_| unreachable!("N outputs were taken")))
    }
}

/// `buf` as a workspace.
fn borrowed(buf: &mut DeviceBuffer<u8>) -> Workspace<'_> {
    Workspace::Borrowed(buf.as_slice_mut())
}

/// A plan for each of `ops`, on the shared stream.
fn select_each<P: Plan, O: Copy>(ops: &[O], desc: impl Fn(O) -> P::Descriptor) -> Result<Vec<P>> {
    let st = &gpu().stream;
    ops.iter()
        .map(|&op| P::select(st, &desc(op), &deterministic()))
        .collect()
}

/// `n` seeded values in `[-2, 2)` on the shared stream.
fn input(n: usize, seed: u64) -> Result<DeviceBuffer<f32>> {
    let v: Vec<f32> = Rng::new(seed)
        .vec(n, -2.0, 2.0)
        .iter()
        .map(|&x| x as f32)
        .collect();
    DeviceBuffer::from_host(&gpu().stream, &v)
}

/// The preference every exercise selects with: bitwise-repeatable runs.
fn deterministic() -> PlanPreference {
    PlanPreference::default().with_deterministic(true)
}

fn elems(shape: &[usize]) -> usize {
    shape.iter().product()
}

fn view<const N: usize>(b: &DeviceBuffer<f32>, shape: [usize; N]) -> Result<TensorRef<'_, f32, N>> {
    TensorRef::contiguous(b.as_slice(), shape)
}

fn view_mut<const N: usize>(
    b: &mut DeviceBuffer<f32>,
    shape: [usize; N],
) -> Result<TensorMut<'_, f32, N>> {
    TensorMut::contiguous(b.as_slice_mut(), shape)
}

// ---------------------------------------------------------------------------
// Elementwise
// ---------------------------------------------------------------------------

/// Every unary op forward and backward, and every binary op with a
/// broadcast scalar forward and backward (the scalar's gradient a split
/// reduction through the workspace).
struct Elementwise {
    unary: Vec<UnaryPlan<f32, 2>>,
    binary: Vec<BinaryPlan<f32, 2>>,
    x: DeviceBuffer<f32>,
    s: DeviceBuffer<f32>,
    dy: DeviceBuffer<f32>,
}

const EW: [usize; 2] = [64, 1000];
const SCALAR: [usize; 2] = [1, 1];

impl Elementwise {
    fn new() -> Result<Self> {
        let element = ElementKind::F32;
        let unary = select_each(&UnaryOp::ALL, |op| UnaryDescriptor {
            op,
            element,
            shape: EW,
        })?;
        let binary = select_each(&BinaryOp::ALL, |op| BinaryDescriptor {
            op,
            element,
            a_shape: EW,
            b_shape: SCALAR,
        })?;
        Ok(Elementwise {
            unary,
            binary,
            x: input(elems(&EW), 1)?,
            s: input(1, 2)?,
            dy: input(elems(&EW), 3)?,
        })
    }
}

impl Exercise for Elementwise {
    fn outputs(&self) -> (Vec<usize>, usize) {
        let n = elems(&EW);
        let mut sizes = vec![n; 2 * self.unary.len()];
        for _ in &self.binary {
            sizes.extend([n, n, 1]);
        }
        let ws = self
            .binary
            .iter()
            .map(|p| p.bw_workspace_size(Grad::A | Grad::B))
            .max()
            .unwrap_or(0);
        (sizes, ws)
    }
    fn enqueue(&self, st: &Stream, out: &mut Outs) -> Result<()> {
        let (ws, mut parts) = out.parts();
        let (x, dy) = (view(&self.x, EW)?, view(&self.dy, EW)?);
        for plan in &self.unary {
            let [y, dx] = parts.take()?;
            let y = view_mut(y, EW)?;
            plan.run(st, Workspace::None, UnaryArgs { x, y })?;
            let dx = view_mut(dx, EW)?;
            plan.run_bw(st, Workspace::None, UnaryBwArgs { x, dy, dx })?;
        }
        let b = view(&self.s, SCALAR)?;
        for plan in &self.binary {
            let [y, da, db] = parts.take()?;
            let out = view_mut(y, EW)?;
            plan.run(st, Workspace::None, BinaryArgs { a: x, b, out })?;
            let args = BinaryBwArgs {
                a: x,
                b,
                dy,
                da: Some(view_mut(da, EW)?),
                db: Some(view_mut(db, SCALAR)?),
            };
            plan.run_bw(st, borrowed(ws), args)?;
        }
        Ok(())
    }
}

// ---------------------------------------------------------------------------
// Conv
// ---------------------------------------------------------------------------

/// A 3x3 convolution with a bias (cuDNN) forward and backward; on its
/// output, a 3x3 transposed convolution (cuDNN) and average, adaptive
/// average and Lp pooling, each forward and backward.
struct Conv {
    conv: Conv2dPlan<f32>,
    transposed: ConvTranspose2dPlan<f32>,
    avg: AvgPool2dPlan<f32>,
    adaptive: AdaptiveAvgPool2dPlan<f32>,
    lp: LpPool2dPlan<f32>,
    x: DeviceBuffer<f32>,
    w: DeviceBuffer<f32>,
    bias: DeviceBuffer<f32>,
    dy: DeviceBuffer<f32>,
    wt: DeviceBuffer<f32>,
    dyt: DeviceBuffer<f32>,
    dpool: DeviceBuffer<f32>,
    dadaptive: DeviceBuffer<f32>,
}

/// Input, filter and output of the convolution.
const CONV_X: [usize; 4] = [2, 8, 16, 16];
const CONV_W: [usize; 4] = [16, 8, 3, 3];
const CONV_Y: [usize; 4] = [2, 16, 16, 16];
/// The transposed convolution maps `CONV_Y` back to `CONV_X`'s shape
/// (filter `[c_in, c_out, 3, 3]`).
const CONVT_W: [usize; 4] = [16, 8, 3, 3];
/// Outputs of the 2x2 average and Lp poolings, and of the adaptive one.
const POOL_Y: [usize; 4] = [2, 16, 8, 8];
const ADAPTIVE_Y: [usize; 4] = [2, 16, 5, 5];

impl Conv {
    fn new() -> Result<Self> {
        let st = &gpu().stream;
        let f32_ = ElementKind::F32;
        let pref = deterministic();
        let d = Conv2dDescriptor::new(2, 8, 16, [16, 16], [3, 3], f32_).with_padding([1, 1]);
        let conv = Conv2dPlan::select(st, &d, &pref)?;
        let t =
            ConvTranspose2dDescriptor::new(2, 16, 8, [16, 16], [3, 3], f32_).with_padding([1, 1]);
        let transposed = ConvTranspose2dPlan::select(st, &t, &pref)?;
        let p = PoolDescriptor::new(2, 16, [16, 16], [2, 2], f32_);
        let avg = AvgPool2dPlan::select(st, &p, &pref)?;
        let a = AdaptivePoolDescriptor::new(2, 16, [16, 16], [5, 5], f32_);
        let adaptive = AdaptiveAvgPool2dPlan::select(st, &a, &pref)?;
        let l = LpPoolDescriptor::new(2, 16, [16, 16], [2, 2], 2.0, f32_);
        let lp = LpPool2dPlan::select(st, &l, &pref)?;
        Ok(Conv {
            conv,
            transposed,
            avg,
            adaptive,
            lp,
            x: input(elems(&CONV_X), 11)?,
            w: input(elems(&CONV_W), 12)?,
            bias: input(16, 13)?,
            dy: input(elems(&CONV_Y), 14)?,
            wt: input(elems(&CONVT_W), 15)?,
            dyt: input(elems(&CONV_X), 16)?,
            dpool: input(elems(&POOL_Y), 17)?,
            dadaptive: input(elems(&ADAPTIVE_Y), 18)?,
        })
    }
}

impl Exercise for Conv {
    fn outputs(&self) -> (Vec<usize>, usize) {
        let all = Grad::X | Grad::Weight | Grad::Bias;
        let xw = Grad::X | Grad::Weight;
        let ws = [
            self.conv.workspace_size(),
            self.conv.bw_workspace_size(all),
            self.transposed.workspace_size(),
            self.transposed.bw_workspace_size(xw),
        ]
        .into_iter()
        .max()
        .unwrap_or(0);
        let sizes = [
            &CONV_Y[..],
            &CONV_X,
            &CONV_W,
            &[16],
            &CONV_X,
            &CONV_Y,
            &CONVT_W,
            &POOL_Y,
            &CONV_Y,
            &ADAPTIVE_Y,
            &CONV_Y,
            &POOL_Y,
            &CONV_Y,
        ];
        (sizes.iter().map(|s| elems(s)).collect(), ws)
    }
    fn enqueue(&self, st: &Stream, out: &mut Outs) -> Result<()> {
        let (ws, mut parts) = out.parts();
        let [y, dx, dw, db] = parts.take()?;
        let (x, w) = (view(&self.x, CONV_X)?, view(&self.w, CONV_W)?);
        let args = ConvArgs {
            x,
            w,
            bias: Some(view(&self.bias, [16])?),
            y: view_mut(y, CONV_Y)?,
        };
        self.conv.run(st, borrowed(ws), args)?;
        let args = ConvBwArgs {
            x,
            w,
            y: None,
            dy: view(&self.dy, CONV_Y)?,
            dx: Some(view_mut(dx, CONV_X)?),
            dw: Some(view_mut(dw, CONV_W)?),
            dbias: Some(view_mut(db, [16])?),
        };
        self.conv.run_bw(st, borrowed(ws), args)?;
        let y = view(y, CONV_Y)?;

        let [ty, tdx, tdw] = parts.take()?;
        let wt = view(&self.wt, CONVT_W)?;
        let args = ConvArgs {
            x: y,
            w: wt,
            bias: None,
            y: view_mut(ty, CONV_X)?,
        };
        self.transposed.run(st, borrowed(ws), args)?;
        let args = ConvBwArgs {
            x: y,
            w: wt,
            y: None,
            dy: view(&self.dyt, CONV_X)?,
            dx: Some(view_mut(tdx, CONV_Y)?),
            dw: Some(view_mut(tdw, CONVT_W)?),
            dbias: None,
        };
        self.transposed.run_bw(st, borrowed(ws), args)?;

        /// Forward of a pooling plan over `y`, then its backward from `dy`.
        fn pool<P>(
            plan: &P,
            st: &Stream,
            (x, dy): (TensorRef<'_, f32, 4>, TensorRef<'_, f32, 4>),
            (py, pdx): (&mut DeviceBuffer<f32>, &mut DeviceBuffer<f32>),
            shape: [usize; 4],
        ) -> Result<()>
        where
            P: for<'a> Plan<Args<'a> = PoolArgs<'a, f32, 4>>
                + for<'a> Backward<BwArgs<'a> = PoolBwArgs<'a, f32, 4>>,
        {
            let args = PoolArgs {
                x,
                y: view_mut(py, shape)?,
                indices: None,
            };
            plan.run(st, Workspace::None, args)?;
            let args = PoolBwArgs {
                dy,
                indices: None,
                x: Some(x),
                y: Some(view(py, shape)?),
                dx: view_mut(pdx, CONV_Y)?,
            };
            plan.run_bw(st, Workspace::None, args)
        }
        let dpool = view(&self.dpool, POOL_Y)?;
        let [py, pdx] = parts.take()?;
        pool(&self.avg, st, (y, dpool), (py, pdx), POOL_Y)?;
        let [py, pdx] = parts.take()?;
        let dadaptive = view(&self.dadaptive, ADAPTIVE_Y)?;
        pool(&self.adaptive, st, (y, dadaptive), (py, pdx), ADAPTIVE_Y)?;
        let [py, pdx] = parts.take()?;
        pool(&self.lp, st, (y, dpool), (py, pdx), POOL_Y)
    }
}

// ---------------------------------------------------------------------------
// GEMM
// ---------------------------------------------------------------------------

/// A linear layer with a bias (cuBLASLt) forward and backward, and a GEMM
/// with column-major `B` and `D`.
struct Gemm {
    linear: LinearPlan<f32>,
    gemm: GemmPlan<f32>,
    x: DeviceBuffer<f32>,
    w: DeviceBuffer<f32>,
    bias: DeviceBuffer<f32>,
    dy: DeviceBuffer<f32>,
    a: DeviceBuffer<f32>,
    b: DeviceBuffer<f32>,
}

/// Tokens, in and out features of the linear layer.
const LIN: (usize, usize, usize) = (96, 64, 48);
/// `m`, `n`, `k` of the GEMM.
const MNK: (usize, usize, usize) = (40, 56, 72);

impl Gemm {
    fn new() -> Result<Self> {
        let st = &gpu().stream;
        let (t, i, o) = LIN;
        let mut d = LinearDescriptor::new(t, i, o);
        d.epilogue = EpilogueKind::Bias;
        let linear = LinearPlan::select(st, &d, &deterministic())?;
        let (m, n, k) = MNK;
        let g = GemmDescriptor::new(m, n, k, LayoutSku::Rcc);
        let gemm = GemmPlan::select(st, &g, &deterministic())?;
        Ok(Gemm {
            linear,
            gemm,
            x: input(t * i, 21)?,
            w: input(o * i, 22)?,
            bias: input(o, 23)?,
            dy: input(t * o, 24)?,
            a: input(m * k, 25)?,
            b: input(k * n, 26)?,
        })
    }
}

impl Exercise for Gemm {
    fn outputs(&self) -> (Vec<usize>, usize) {
        let ((t, i, o), (m, n, _)) = (LIN, MNK);
        let all = Grad::X | Grad::Weight | Grad::Bias;
        let ws = [
            self.linear.workspace_size(),
            self.linear.bw_workspace_size(all),
            self.gemm.workspace_size(),
        ]
        .into_iter()
        .max()
        .unwrap_or(0);
        (vec![t * o, t * i, o * i, o, m * n], ws)
    }
    fn enqueue(&self, st: &Stream, out: &mut Outs) -> Result<()> {
        let ((t, i, o), (m, n, k)) = (LIN, MNK);
        let (ws, mut parts) = out.parts();
        let [y, dx, dw, db, d] = parts.take()?;
        let x = MatrixRef::row_major(self.x.as_slice(), t, i)?;
        let w = MatrixRef::row_major(self.w.as_slice(), o, i)?;
        let args = LinearArgs {
            x,
            w,
            bias: Some(TensorRef::contiguous(self.bias.as_slice(), [o])?),
            y: MatrixMut::row_major(y.as_slice_mut(), t, o)?,
            aux: None,
        };
        self.linear.run(st, borrowed(ws), args)?;
        let args = LinearBwArgs {
            x,
            w,
            dy: MatrixRef::row_major(self.dy.as_slice(), t, o)?,
            aux: None,
            dx: Some(MatrixMut::row_major(dx.as_slice_mut(), t, i)?),
            dw: Some(MatrixMut::row_major(dw.as_slice_mut(), o, i)?),
            dbias: Some(TensorMut::contiguous(db.as_slice_mut(), [o])?),
        };
        self.linear.run_bw(st, borrowed(ws), args)?;
        let col = MatrixOrder::ColMajor;
        let args = GemmArgs {
            a: MatrixRef::row_major(self.a.as_slice(), m, k)?,
            b: MatrixRef::new(self.b.as_slice(), k, n, k, col)?,
            c: GemmC::None,
            d: MatrixMut::new(d.as_slice_mut(), m, n, m, col)?,
            bias: None,
            aux: None,
            alpha: 1.0,
            beta: 0.0,
        };
        self.gemm.run(st, borrowed(ws), args)
    }
}

// ---------------------------------------------------------------------------
// Reduce
// ---------------------------------------------------------------------------

/// Every reduction forward and backward over the rows of a matrix (the
/// row kernel) and over its columns (the column kernel, split over the
/// reduced dim through the workspace).
struct Reduce {
    rows: Vec<ReducePlan<f32, 2, 1>>,
    cols: Vec<ReducePlan<f32, 2, 1>>,
    x: DeviceBuffer<f32>,
    dy_rows: DeviceBuffer<f32>,
    dy_cols: DeviceBuffer<f32>,
}

/// The reduced matrix: few columns and many rows, so the column
/// reduction splits.
const RED: [usize; 2] = [4096, 48];

impl Reduce {
    fn new() -> Result<Self> {
        let desc = |op, dim: usize| {
            ReduceDescriptor::new(op, ElementKind::F32, RED)
                .with_dims(&[dim])
                .with_correction(1.0)
        };
        Ok(Reduce {
            rows: select_each(&ReduceOp::ALL, |op| desc(op, 1))?,
            cols: select_each(&ReduceOp::ALL, |op| desc(op, 0))?,
            x: input(elems(&RED), 7)?,
            dy_rows: input(RED[0], 8)?,
            dy_cols: input(RED[1], 9)?,
        })
    }
}

impl Exercise for Reduce {
    fn outputs(&self) -> (Vec<usize>, usize) {
        let n = elems(&RED);
        let mut sizes = Vec::new();
        for _ in &self.rows {
            sizes.extend([RED[0], n]);
        }
        for _ in &self.cols {
            sizes.extend([RED[1], n]);
        }
        let ws = self
            .rows
            .iter()
            .chain(&self.cols)
            .map(|p| p.workspace_size().max(p.bw_workspace_size(Grad::X.into())))
            .max()
            .unwrap_or(0);
        (sizes, ws)
    }
    fn enqueue(&self, st: &Stream, out: &mut Outs) -> Result<()> {
        let (ws, mut parts) = out.parts();
        let x = view(&self.x, RED)?;
        let sets = [
            (&self.rows, &self.dy_rows, RED[0]),
            (&self.cols, &self.dy_cols, RED[1]),
        ];
        for (plans, dy, m) in sets {
            let dy = view(dy, [m])?;
            for plan in plans {
                let [y, dx] = parts.take()?;
                let mut y = view_mut(y, [m])?;
                let args = ReduceArgs { x, y: y.reborrow() };
                plan.run(st, borrowed(ws), args)?;
                let args = ReduceBwArgs {
                    x,
                    y: Some(y.as_const()),
                    dy,
                    dx: view_mut(dx, RED)?,
                };
                plan.run_bw(st, borrowed(ws), args)?;
            }
        }
        Ok(())
    }
}

// ---------------------------------------------------------------------------
// Softmax
// ---------------------------------------------------------------------------

/// Every softmax op forward and backward along the rows of a matrix (the
/// cached row kernel) and along its columns (a thread per row).
struct Softmax {
    plans: Vec<SoftmaxPlan<f32, 2>>,
    x: DeviceBuffer<f32>,
    dy: DeviceBuffer<f32>,
}

/// The matrix: enough columns that the column softmax runs a thread per
/// row.
const SOFT: [usize; 2] = [64, 8192];

impl Softmax {
    fn new() -> Result<Self> {
        let mut plans = Vec::new();
        for dim in [1, 0] {
            plans.extend(select_each(&SoftmaxOp::ALL, |op| {
                SoftmaxDescriptor::new(op, ElementKind::F32, SOFT).with_dim(dim)
            })?);
        }
        Ok(Softmax {
            plans,
            x: input(elems(&SOFT), 10)?,
            dy: input(elems(&SOFT), 11)?,
        })
    }
}

impl Exercise for Softmax {
    fn outputs(&self) -> (Vec<usize>, usize) {
        (vec![elems(&SOFT); 2 * self.plans.len()], 0)
    }
    fn enqueue(&self, st: &Stream, out: &mut Outs) -> Result<()> {
        let (ws, mut parts) = out.parts();
        let (x, dy) = (view(&self.x, SOFT)?, view(&self.dy, SOFT)?);
        for plan in &self.plans {
            let [y, dx] = parts.take()?;
            let mut y = view_mut(y, SOFT)?;
            plan.run(st, borrowed(ws), SoftmaxArgs { x, y: y.reborrow() })?;
            let args = SoftmaxBwArgs {
                y: y.as_const(),
                dy,
                dx: view_mut(dx, SOFT)?,
            };
            plan.run_bw(st, borrowed(ws), args)?;
        }
        Ok(())
    }
}
// Norm
// ---------------------------------------------------------------------------

/// LayerNorm (weight and bias) and RMSNorm (weight) forward and backward
/// with every gradient, over rows of 1024 (the register kernel); the
/// statistics live at the start of the workspace.
struct Norms {
    layer: LayerNormPlan<f32, 2>,
    rms: RmsNormPlan<f32, 2>,
    x: DeviceBuffer<f32>,
    w: DeviceBuffer<f32>,
    b: DeviceBuffer<f32>,
    dy: DeviceBuffer<f32>,
}

/// The normalized matrix.
const NORM: [usize; 2] = [512, 1024];

impl Norms {
    fn new() -> Result<Self> {
        let st = &gpu().stream;
        let pref = deterministic();
        Ok(Norms {
            layer: Plan::select(
                st,
                &NormDescriptor::layer_norm(ElementKind::F32, NORM, 1),
                &pref,
            )?,
            rms: Plan::select(
                st,
                &NormDescriptor::rms_norm(ElementKind::F32, NORM, 1),
                &pref,
            )?,
            x: input(elems(&NORM), 10)?,
            w: input(NORM[1], 11)?,
            b: input(NORM[1], 12)?,
            dy: input(elems(&NORM), 13)?,
        })
    }

    /// Bytes of the statistics region at the start of the workspace.
    fn stats_region(&self) -> usize {
        self.layer
            .stats_bytes()
            .max(self.rms.stats_bytes())
            .next_multiple_of(256)
    }
}

impl Exercise for Norms {
    fn outputs(&self) -> (Vec<usize>, usize) {
        let (n, h) = (elems(&NORM), NORM[1]);
        let ws = self.layer.bw_workspace_size(self.layer.grads());
        let ws = ws.max(self.rms.bw_workspace_size(self.rms.grads()));
        (vec![n, n, h, h, n, n, h], self.stats_region() + ws)
    }
    fn enqueue(&self, st: &Stream, out: &mut Outs) -> Result<()> {
        let (ws, mut parts) = out.parts();
        let (mut stats, mut rest) =
            ws.as_slice_mut()
                .split_at(self.stats_region())
                .ok_or(Error::InvalidArgument {
                    op: "exercise",
                    arg: "workspace",
                    reason: "smaller than the statistics".into(),
                })?;
        let (x, dy) = (view(&self.x, NORM)?, view(&self.dy, NORM)?);
        let (w, b) = (view(&self.w, [NORM[1]])?, view(&self.b, [NORM[1]])?);
        let [y, dx, dw, db] = parts.take()?;
        let bufs = [y, dx, dw];
        norm_pass(
            &self.layer,
            st,
            [x, dy],
            w,
            Some((b, db)),
            bufs,
            &mut stats,
            &mut rest,
        )?;
        let bufs = parts.take()?;
        norm_pass(&self.rms, st, [x, dy], w, None, bufs, &mut stats, &mut rest)
    }
}

/// One norm plan forward (saving the statistics in `stats`) and backward
/// with every gradient: y, dx and dweight into `bufs`, dbias with the bias.
#[allow(clippy::too_many_arguments)]
fn norm_pass<Kind: NormKind>(
    plan: &NormPlan<f32, Kind, 2>,
    st: &Stream,
    [x, dy]: [TensorRef<'_, f32, 2>; 2],
    w: TensorRef<'_, f32, 1>,
    bias: Option<(TensorRef<'_, f32, 1>, &mut DeviceBuffer<f32>)>,
    [y, dx, dw]: [&mut DeviceBuffer<f32>; 3],
    stats: &mut DeviceSliceMut<'_, u8>,
    ws: &mut DeviceSliceMut<'_, u8>,
) -> Result<()> {
    let (b, db) = bias.unzip();
    let args = NormArgs {
        x,
        weight: Some(w),
        bias: b,
        y: view_mut(y, NORM)?,
        stats: Some(stats.reborrow()),
    };
    plan.run(st, Workspace::None, args)?;
    let args = NormBwArgs {
        x,
        weight: Some(w),
        stats: stats.as_const(),
        dy,
        dx: Some(view_mut(dx, NORM)?),
        dweight: Some(view_mut(dw, [NORM[1]])?),
        dbias: db.map(|d| view_mut(d, [NORM[1]])).transpose()?,
    };
    plan.run_bw(st, Workspace::Borrowed(ws.reborrow()), args)
}
