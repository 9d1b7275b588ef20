//! One exercise per family: its plans (forward and backward, f32, the
//! deterministic preference) selected once, with their inputs on the
//! device, and an `enqueue` that only enqueues. The reliability tests run
//! an exercise from many threads at once, capture it into a graph, and
//! run it on another context's stream. A new family adds its entry to
//! [`EXERCISES`] (a host test fails until it does).

use baracuda_driver::CudaLib;
use baracuda_kernels::reference::elementwise as ew_reference;
use baracuda_kernels::*;

use half::bf16;

use crate::harness::{gpu, Rng};

/// A family's plans and their inputs on the device.
pub(super) trait Exercise: Send + Sync {
    /// Elements of each f32 output, and the workspace bytes.
    fn outputs(&self) -> (Vec<usize>, usize);
    /// Elements of each i64 output (the indices of max pooling, index
    /// reductions and cummax / cummin): none unless the exercise says.
    fn index_outputs(&self) -> Vec<usize> {
        Vec::new()
    }
    /// Elements of each output of another type (bool, i16, bf16): none
    /// unless the exercise says. Each holds 1 or 2 bytes per element, as
    /// the first of the pair says.
    fn raw_outputs(&self) -> Vec<Raw> {
        Vec::new()
    }
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
        family: "elementwise",
        libraries: &[],
        make: || Ok(Box::new(Logic::new()?)),
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
        family: "softmax",
        libraries: &[],
        make: || Ok(Box::new(Gumbel::new()?)),
    },
    FamilyExercise {
        family: "softmax",
        libraries: &[],
        make: || Ok(Box::new(Sparsemax::new()?)),
    },
    FamilyExercise {
        family: "norm",
        libraries: &[],
        make: || Ok(Box::new(Norms::new()?)),
    },
    FamilyExercise {
        family: "attention",
        libraries: &[],
        make: || Ok(Box::new(Attention::new()?)),
    },
    FamilyExercise {
        family: "attention",
        libraries: &[CudaLib::Cudnn],
        make: || Ok(Box::new(Sdpa::new()?)),
    },
    FamilyExercise {
        family: "shape",
        libraries: &[],
        make: || Ok(Box::new(Shapes::new()?)),
    },
];

/// An output of 1- or 2-byte elements (bool, i16, bf16), held as bytes:
/// how many bytes each element has, and how many elements.
#[derive(Copy, Clone, Debug)]
pub(super) struct Raw {
    pub bytes: usize,
    pub elems: usize,
}

impl Raw {
    /// An output of `elems` elements of `T` (1 or 2 bytes each).
    fn of<T: Element>(elems: usize) -> Raw {
        let bytes = std::mem::size_of::<T>();
        assert!(bytes <= 2, "raw outputs hold 1- or 2-byte elements");
        Raw { bytes, elems }
    }
}

/// The outputs and workspace of one runner of an [`Exercise`]: the f32
/// outputs, the i64 ones, then the others as bytes.
pub(super) struct Outs {
    bufs: Vec<DeviceBuffer<f32>>,
    idx: Vec<DeviceBuffer<i64>>,
    raw: Vec<(DeviceBuffer<u8>, usize)>,
    ws: DeviceBuffer<u8>,
}

impl Outs {
    /// Poisoned outputs (every byte 0xFF) and a workspace on `stream`.
    pub fn new(stream: &Stream, ex: &dyn Exercise) -> Result<Outs> {
        let (sizes, ws) = ex.outputs();
        let bufs = sizes
            .iter()
            .map(|&n| DeviceBuffer::filled_bytes(stream, n, 0xFF))
            .collect::<Result<_>>()?;
        let idx = ex
            .index_outputs()
            .iter()
            .map(|&n| DeviceBuffer::filled_bytes(stream, n, 0xFF))
            .collect::<Result<_>>()?;
        let raw = ex
            .raw_outputs()
            .iter()
            .map(|r| {
                Ok((
                    DeviceBuffer::filled_bytes(stream, r.elems * r.bytes, 0xFF)?,
                    r.bytes,
                ))
            })
            .collect::<Result<_>>()?;
        Ok(Outs {
            bufs,
            idx,
            raw,
            ws: DeviceBuffer::zeros(stream, ws.max(1))?,
        })
    }
    /// Poison every output again (NaN, -1 in the indices, all ones in
    /// the others), on `stream`.
    pub fn poison(&mut self, stream: &Stream) -> Result<()> {
        self.bufs
            .iter_mut()
            .try_for_each(|b| b.fill_bytes(stream, 0xFF))?;
        self.idx
            .iter_mut()
            .try_for_each(|b| b.fill_bytes(stream, 0xFF))?;
        self.raw
            .iter_mut()
            .try_for_each(|(b, _)| b.fill_bytes(stream, 0xFF))
    }
    /// The outputs' bits, after everything enqueued on `stream`: the f32
    /// outputs, then each i64 output as 32-bit words, low word first (a
    /// poisoned word reads as a NaN, both words of an index in `0..2^30`
    /// as finite numbers), then each element of the others widened to 32
    /// bits (a finite number), a poisoned one (all ones) as a NaN.
    pub fn bits(&self, stream: &Stream) -> Result<Vec<Vec<u32>>> {
        let floats = self
            .bufs
            .iter()
            .map(|b| Ok(b.to_host(stream)?.iter().map(|v| v.to_bits()).collect()));
        let indices = self.idx.iter().map(|b| {
            Ok(b.to_host(stream)?
                .iter()
                .flat_map(|&v| {
                    let v = v as u64;
                    [v as u32, (v >> 32) as u32]
                })
                .collect())
        });
        let raw = self.raw.iter().map(|(b, bytes)| {
            Ok(b.to_host(stream)?
                .chunks(*bytes)
                .map(|e| {
                    if e.iter().all(|&v| v == 0xFF) {
                        u32::MAX
                    } else {
                        e.iter().rev().fold(0, |a, &v| a << 8 | u32::from(v))
                    }
                })
                .collect())
        });
        floats.chain(indices).chain(raw).collect()
    }
    /// The workspace and the outputs, in the order `outputs` and
    /// `index_outputs` listed them.
    fn parts(&mut self) -> (&mut DeviceBuffer<u8>, Parts<'_>) {
        (
            &mut self.ws,
            Parts {
                bufs: self.bufs.iter_mut(),
                idx: self.idx.iter_mut(),
                raw: self.raw.iter_mut(),
            },
        )
    }
}

/// The outputs of one run, taken in order: f32 outputs with
/// [`Parts::take`], i64 ones with [`Parts::take_idx`].
struct Parts<'a> {
    bufs: std::slice::IterMut<'a, DeviceBuffer<f32>>,
    idx: std::slice::IterMut<'a, DeviceBuffer<i64>>,
    raw: std::slice::IterMut<'a, (DeviceBuffer<u8>, usize)>,
}

impl<'a> Parts<'a> {
    /// The next `N` f32 outputs.
    fn take<const N: usize>(&mut self) -> Result<[&'a mut DeviceBuffer<f32>; N]> {
        next_n(&mut self.bufs)
    }
    /// The next `N` i64 outputs.
    fn take_idx<const N: usize>(&mut self) -> Result<[&'a mut DeviceBuffer<i64>; N]> {
        next_n(&mut self.idx)
    }
    /// The next output of the others, viewed as `T` of `shape`.
    fn take_raw<T: Element, const N: usize>(
        &mut self,
        shape: [usize; N],
    ) -> Result<TensorMut<'a, T, N>> {
        let [(buf, bytes)] = next_n(&mut self.raw)?;
        assert_eq!(
            *bytes,
            std::mem::size_of::<T>(),
            "raw output of another type"
        );
        let s = buf.as_slice_mut();
        // SAFETY: the bytes of `buf`, which this borrow holds mutably, as
        // elements of `T` (the allocation is aligned for any type); the
        // kernels write only valid `T` (0 or 1 for bool) and the host reads
        // the bytes back as `u8`, never as `T`.
        let s = unsafe { DeviceSliceMut::from_raw_parts(s.addr(), s.len() / *bytes, s.ctx_id()) };
        TensorMut::contiguous(s, shape)
    }
}

/// The next `N` items of `it`; `InvalidArgument` when it has fewer.
fn next_n<'a, T, const N: usize>(it: &mut std::slice::IterMut<'a, T>) -> Result<[&'a mut T; N]> {
    let mut bufs = Vec::with_capacity(N);
    for _ in 0..N {
        bufs.push(it.next().ok_or_else(|| Error::InvalidArgument {
            op: "exercise",
            arg: "outputs",
            reason: "fewer outputs than the exercise writes".into(),
        })?);
    }
    Ok(bufs
        .try_into()
        .unwrap_or_else(|_| unreachable!("N outputs were taken")))
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

/// `n` seeded values in `[-2 scale, 2 scale)`, rounded to `T`, on the
/// shared stream (the s8 and fp8 operands of the quantized GEMMs).
fn input_as<T: Element>(n: usize, seed: u64, scale: f64) -> Result<DeviceBuffer<T>> {
    let v: Vec<T> = Rng::new(seed)
        .vec(n, -2.0, 2.0)
        .iter()
        .map(|&x| T::from_f64(x * scale))
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

fn view<T: Element, const N: usize>(
    b: &DeviceBuffer<T>,
    shape: [usize; N],
) -> Result<TensorRef<'_, T, N>> {
    TensorRef::contiguous(b.as_slice(), shape)
}

fn view_mut<T: Element, const N: usize>(
    b: &mut DeviceBuffer<T>,
    shape: [usize; N],
) -> Result<TensorMut<'_, T, N>> {
    TensorMut::contiguous(b.as_slice_mut(), shape)
}

// ---------------------------------------------------------------------------
// Elementwise
// ---------------------------------------------------------------------------

/// Every unary op forward and backward, every binary op with a
/// broadcast scalar forward and backward (the scalar's gradient a split
/// reduction through the workspace), every ternary op of x, dy and the
/// broadcast scalar the same way, and every gated op over x's halves.
struct Elementwise {
    unary: Vec<UnaryPlan<f32, 2>>,
    binary: Vec<BinaryPlan<f32, 2>>,
    ternary: Vec<TernaryPlan<f32, 2>>,
    gated: Vec<GatedPlan<f32, 2>>,
    x: DeviceBuffer<f32>,
    s: DeviceBuffer<f32>,
    dy: DeviceBuffer<f32>,
}

const EW: [usize; 2] = [64, 1000];
const SCALAR: [usize; 2] = [1, 1];
/// A gated op's output over `EW` split along its last dim.
const EW_HALF: [usize; 2] = [64, 500];

impl Elementwise {
    fn new() -> Result<Self> {
        let element = ElementKind::F32;
        // the ops defined (no NaN forward or backward) over the inputs
        // (unary over x; binary over x and the scalar s)
        let xs = Rng::new(1).vec(elems(&EW), -2.0, 2.0);
        let xs: Vec<f64> = xs.iter().map(|&v| f64::from(v as f32)).collect();
        let defined: Vec<UnaryOp> = UnaryOp::ALL
            .into_iter()
            .filter(|&op| {
                xs.iter().all(|&x| {
                    let r = ew_reference::unary(op, &[x])[0];
                    let d = ew_reference::unary_backward(op, &[x], &[1.0])[0];
                    !r.is_nan() && !d.is_nan()
                })
            })
            .collect();
        let unary = select_each(&defined, |op| UnaryDescriptor {
            op,
            element,
            shape: EW,
        })?;
        let s = f64::from(Rng::new(2).vec(1, -2.0, 2.0)[0] as f32);
        // (and with a backward, which the exercise runs)
        let defined: Vec<BinaryOp> = BinaryOp::ALL
            .into_iter()
            .filter(|&op| {
                op.has_backward()
                    && xs.iter().all(|&a| {
                        let r = ew_reference::binary_scalar(op, a, s);
                        let (da, db) = ew_reference::binary_grad_scalar(op, a, s, 1.0);
                        !r.is_nan() && !da.is_nan() && !db.is_nan()
                    })
            })
            .collect();
        let binary = select_each(&defined, |op| BinaryDescriptor {
            op,
            element,
            a_shape: EW,
            b_shape: SCALAR,
        })?;
        // ternary ops of (x, dy, s), defined where no result is NaN
        let dys = Rng::new(3).vec(elems(&EW), -2.0, 2.0);
        let defined: Vec<TernaryOp> = ew_reference::ternary_cases()
            .into_iter()
            .map(|(_, op)| op)
            .filter(|&op| {
                xs.iter().zip(&dys).all(|(&a, &b)| {
                    let r = ew_reference::ternary_scalar(op, a, b, s);
                    let (da, db, dc) = ew_reference::ternary_grad_scalar(op, a, b, s, 1.0);
                    ![r, da, db, dc].iter().any(|v| v.is_nan())
                })
            })
            .collect();
        let ternary = select_each(&defined, |op| TernaryDescriptor {
            op,
            element,
            a_shape: EW,
            b_shape: EW,
            c_shape: SCALAR,
        })?;
        let gated = select_each(&GatedOp::ALL, |op| GatedDescriptor {
            op,
            element,
            x_shape: EW,
            dim: 1,
        })?;
        Ok(Elementwise {
            unary,
            binary,
            ternary,
            gated,
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
        for _ in &self.ternary {
            sizes.extend([n, n, n, 1]);
        }
        for _ in &self.gated {
            sizes.extend([n / 2, n]);
        }
        let binary = self
            .binary
            .iter()
            .map(|p| p.bw_workspace_size(Grad::A | Grad::B));
        let ternary = self
            .ternary
            .iter()
            .map(|p| p.bw_workspace_size(Grad::A | Grad::B | Grad::C));
        let ws = binary.chain(ternary).max().unwrap_or(0);
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
        for plan in &self.ternary {
            let [y, da, db, dc] = parts.take()?;
            let out = view_mut(y, EW)?;
            plan.run(
                st,
                Workspace::None,
                TernaryArgs {
                    a: x,
                    b: dy,
                    c: b,
                    out,
                },
            )?;
            let args = TernaryBwArgs {
                a: x,
                b: dy,
                c: b,
                dy,
                da: Some(view_mut(da, EW)?),
                db: Some(view_mut(db, EW)?),
                dc: Some(view_mut(dc, SCALAR)?),
            };
            plan.run_bw(st, borrowed(ws), args)?;
        }
        for plan in &self.gated {
            let [y, dx] = parts.take()?;
            let y = view_mut(y, EW_HALF)?;
            plan.run(st, Workspace::None, GatedArgs { x, y })?;
            let dy = view(&self.dy, EW_HALF)?;
            let dx = view_mut(dx, EW)?;
            plan.run_bw(st, Workspace::None, GatedBwArgs { x, dy, dx })?;
        }
        Ok(())
    }
}

/// Every comparison and logical op of x against the broadcast scalar
/// (bool out), every bitwise, shift, gcd and lcm op of an i16 matrix and
/// an i16 scalar, every predicate of x and bitwise_not of the i16 matrix;
/// `where` forward and backward (x where x > 0, else the scalar); a cast to
/// bf16 and its backward; a mixed-dtype add (bf16 + f32 -> f32) and its
/// backward; fill, arange, linspace, logspace and eye.
struct Logic {
    compare: Vec<BinaryLogicPlan<f32, bool, 2>>,
    bits: Vec<BinaryLogicPlan<i16, i16, 2>>,
    predicates: Vec<UnaryLogicPlan<f32, bool, 2>>,
    not: UnaryLogicPlan<i16, i16, 2>,
    select: WherePlan<f32, 2>,
    cast: CastPlan<f32, bf16, 2>,
    /// bf16 dy_half + the f32 scalar, f32 out (mixed dtypes).
    promoted: PromotedBinaryPlan<bf16, f32, 2>,
    fill: FillPlan<f32, 2>,
    ranges: Vec<RangePlan<f32>>,
    eye: EyePlan<f32>,
    x: DeviceBuffer<f32>,
    s: DeviceBuffer<f32>,
    dy: DeviceBuffer<f32>,
    dy_half: DeviceBuffer<bf16>,
    cond: DeviceBuffer<bool>,
    ints: DeviceBuffer<i16>,
    int_s: DeviceBuffer<i16>,
}

impl Logic {
    fn new() -> Result<Self> {
        let element = ElementKind::F32;
        let st = &gpu().stream;
        let pref = deterministic();
        let (bools, bits): (Vec<_>, Vec<_>) = BinaryLogicOp::ALL
            .into_iter()
            .partition(|op| op.output(element) == ElementKind::Bool);
        let compare = select_each(&bools, |op| BinaryLogicDescriptor {
            op,
            element,
            a_shape: EW,
            b_shape: SCALAR,
        })?;
        let bits = select_each(&bits, |op| BinaryLogicDescriptor {
            op,
            element: ElementKind::I16,
            a_shape: EW,
            b_shape: SCALAR,
        })?;
        let floats: Vec<UnaryLogicOp> = UnaryLogicOp::ALL
            .into_iter()
            .filter(|op| *op != UnaryLogicOp::BitwiseNot)
            .collect();
        let predicates = select_each(&floats, |op| UnaryLogicDescriptor {
            op,
            element,
            shape: EW,
        })?;
        let not = UnaryLogicPlan::select(
            st,
            &UnaryLogicDescriptor {
                op: UnaryLogicOp::BitwiseNot,
                element: ElementKind::I16,
                shape: EW,
            },
            &pref,
        )?;
        let select = WherePlan::select(
            st,
            &WhereDescriptor {
                element,
                cond_shape: EW,
                a_shape: EW,
                b_shape: SCALAR,
            },
            &pref,
        )?;
        let cast = CastPlan::select(
            st,
            &CastDescriptor::new(element, ElementKind::Bf16, EW),
            &pref,
        )?;
        let fill = FillPlan::select(st, &FillDescriptor::new(element, EW, 0.5), &pref)?;
        let promoted = PromotedBinaryPlan::select(
            st,
            &PromotedBinaryDescriptor {
                op: BinaryOp::Add,
                a_element: ElementKind::Bf16,
                b_element: element,
                a_shape: EW,
                b_shape: SCALAR,
            },
            &pref,
        )?;
        let n = elems(&EW);
        let ranges = select_each(
            &[
                RangeOp::Arange {
                    start: -3.0,
                    step: 0.25,
                },
                RangeOp::Linspace {
                    start: -1.0,
                    end: 2.0,
                },
                RangeOp::Logspace {
                    start: -2.0,
                    end: 2.0,
                    base: 10.0,
                },
            ],
            |op| RangeDescriptor {
                op,
                element,
                len: n,
            },
        )?;
        let eye = EyePlan::select(
            st,
            &EyeDescriptor {
                element,
                rows: EW[0],
                cols: EW[1],
            },
            &pref,
        )?;
        let xs = Rng::new(1).vec(n, -2.0, 2.0);
        let cond: Vec<bool> = xs.iter().map(|&v| v as f32 > 0.0).collect();
        // i16 operands in [1, 256) and a scalar of 3: no result of the
        // bitwise ops, shifts, gcd, lcm or bitwise_not is -1 (all ones,
        // the poison)
        let ints: Vec<i16> = Rng::new(5)
            .vec(n, 1.0, 256.0)
            .iter()
            .map(|&v| v as i16)
            .collect();
        Ok(Logic {
            compare,
            bits,
            predicates,
            not,
            select,
            cast,
            promoted,
            fill,
            ranges,
            eye,
            x: input(n, 1)?,
            s: input(1, 2)?,
            dy: input(n, 3)?,
            dy_half: input_as::<bf16>(n, 4, 1.0)?,
            cond: DeviceBuffer::from_host(st, &cond)?,
            ints: DeviceBuffer::from_host(st, &ints)?,
            int_s: DeviceBuffer::from_host(st, &[3i16])?,
        })
    }
}

impl Exercise for Logic {
    fn outputs(&self) -> (Vec<usize>, usize) {
        let n = elems(&EW);
        // where's y, da and db; the cast's dx; fill; the ranges; eye; the
        // promoted add's out and db
        let mut sizes = vec![n, n, 1, n, n];
        sizes.extend(vec![n; self.ranges.len() + 1]);
        sizes.extend([n, 1]);
        let ws = self
            .select
            .bw_workspace_size(Grad::A | Grad::B)
            .max(self.promoted.bw_workspace_size(Grad::A | Grad::B));
        (sizes, ws)
    }
    fn raw_outputs(&self) -> Vec<Raw> {
        let n = elems(&EW);
        let mut v = vec![Raw::of::<bool>(n); self.compare.len() + self.predicates.len()];
        v.extend(vec![Raw::of::<i16>(n); self.bits.len() + 1]);
        v.push(Raw::of::<bf16>(n));
        // the promoted add's da
        v.push(Raw::of::<bf16>(n));
        v
    }
    fn enqueue(&self, st: &Stream, out: &mut Outs) -> Result<()> {
        let (ws, mut parts) = out.parts();
        let (x, s) = (view(&self.x, EW)?, view(&self.s, SCALAR)?);
        for plan in &self.compare {
            let out = parts.take_raw::<bool, 2>(EW)?;
            plan.run(st, Workspace::None, BinaryLogicArgs { a: x, b: s, out })?;
        }
        for plan in &self.predicates {
            let y = parts.take_raw::<bool, 2>(EW)?;
            plan.run(st, Workspace::None, UnaryLogicArgs { x, y })?;
        }
        let (a, b) = (view(&self.ints, EW)?, view(&self.int_s, SCALAR)?);
        for plan in &self.bits {
            let out = parts.take_raw::<i16, 2>(EW)?;
            plan.run(st, Workspace::None, BinaryLogicArgs { a, b, out })?;
        }
        let y = parts.take_raw::<i16, 2>(EW)?;
        self.not
            .run(st, Workspace::None, UnaryLogicArgs { x: a, y })?;

        let cond = view(&self.cond, EW)?;
        let [y, da, db] = parts.take()?;
        let args = WhereArgs {
            cond,
            a: x,
            b: s,
            out: view_mut(y, EW)?,
        };
        self.select.run(st, Workspace::None, args)?;
        let args = WhereBwArgs {
            cond,
            dy: view(&self.dy, EW)?,
            da: Some(view_mut(da, EW)?),
            db: Some(view_mut(db, SCALAR)?),
        };
        self.select.run_bw(st, borrowed(ws), args)?;

        let y = parts.take_raw::<bf16, 2>(EW)?;
        self.cast.run(st, Workspace::None, CastArgs { x, y })?;
        let [dx] = parts.take()?;
        let args = CastBwArgs {
            dy: view(&self.dy_half, EW)?,
            dx: view_mut(dx, EW)?,
        };
        self.cast.run_bw(st, Workspace::None, args)?;

        let [y] = parts.take()?;
        self.fill.run(
            st,
            Workspace::None,
            FillArgs {
                y: view_mut(y, EW)?,
            },
        )?;
        for plan in &self.ranges {
            let [y] = parts.take()?;
            let y = view_mut(y, [elems(&EW)])?;
            plan.run(st, Workspace::None, RangeArgs { y })?;
        }
        let [y] = parts.take()?;
        self.eye.run(
            st,
            Workspace::None,
            EyeArgs {
                y: view_mut(y, EW)?,
            },
        )?;

        let (a, b) = (view(&self.dy_half, EW)?, view(&self.s, SCALAR)?);
        let [y, db] = parts.take()?;
        let out = view_mut(y, EW)?;
        self.promoted
            .run(st, Workspace::None, PromotedBinaryArgs { a, b, out })?;
        let da = parts.take_raw::<bf16, 2>(EW)?;
        let args = PromotedBinaryBwArgs {
            a,
            b,
            dy: view(&self.dy, EW)?,
            da: Some(da),
            db: Some(view_mut(db, SCALAR)?),
        };
        self.promoted.run_bw(st, borrowed(ws), args)
    }
}

// ---------------------------------------------------------------------------
// Conv
// ---------------------------------------------------------------------------

/// A 3x3 convolution with a bias (cuDNN) forward and backward; on its
/// output, a 3x3 transposed convolution (cuDNN) and average, adaptive
/// average and Lp pooling, each forward and backward; a 1-D and a 3-D
/// convolution with a bias (cuDNN) forward and backward; and on the 3x3
/// convolution's output, a 3x3 max pooling with stride 2 writing its
/// indices, and its backward from them.
struct Conv {
    conv: Conv2dPlan<f32>,
    transposed: ConvTranspose2dPlan<f32>,
    avg: AvgPool2dPlan<f32>,
    adaptive: AdaptiveAvgPool2dPlan<f32>,
    lp: LpPool2dPlan<f32>,
    conv1: Conv1dPlan<f32>,
    conv3: Conv3dPlan<f32>,
    max: MaxPool2dPlan<f32>,
    x: DeviceBuffer<f32>,
    w: DeviceBuffer<f32>,
    bias: DeviceBuffer<f32>,
    dy: DeviceBuffer<f32>,
    wt: DeviceBuffer<f32>,
    dyt: DeviceBuffer<f32>,
    dpool: DeviceBuffer<f32>,
    dadaptive: DeviceBuffer<f32>,
    x1: DeviceBuffer<f32>,
    w1: DeviceBuffer<f32>,
    bias1: DeviceBuffer<f32>,
    dy1: DeviceBuffer<f32>,
    x3: DeviceBuffer<f32>,
    w3: DeviceBuffer<f32>,
    bias3: DeviceBuffer<f32>,
    dy3: DeviceBuffer<f32>,
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
/// The 3x3 max pooling with stride 2 and padding 1 maps `CONV_Y` to
/// `POOL_Y` too: `(16 + 2 - 3) / 2 + 1 = 8`.
const MAX_Y: [usize; 4] = POOL_Y;
/// Input, filter and output of the 1-D convolution (kernel 3, padding 1).
const CONV1_X: [usize; 3] = [2, 8, 64];
const CONV1_W: [usize; 3] = [16, 8, 3];
const CONV1_Y: [usize; 3] = [2, 16, 64];
/// Input, filter and output of the 3-D convolution (kernel 3, padding 1).
const CONV3_X: [usize; 5] = [2, 4, 6, 6, 6];
const CONV3_W: [usize; 5] = [8, 4, 3, 3, 3];
const CONV3_Y: [usize; 5] = [2, 8, 6, 6, 6];

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
        let d1 = Conv1dDescriptor::new(2, 8, 16, [64], [3], f32_).with_padding([1]);
        let conv1 = Conv1dPlan::select(st, &d1, &pref)?;
        let d3 = Conv3dDescriptor::new(2, 4, 8, [6, 6, 6], [3, 3, 3], f32_).with_padding([1, 1, 1]);
        let conv3 = Conv3dPlan::select(st, &d3, &pref)?;
        let m = Pool2dDescriptor::new(2, 16, [16, 16], [3, 3], f32_)
            .with_stride([2, 2])
            .with_padding([1, 1]);
        let max = MaxPool2dPlan::select(st, &m, &pref)?;
        Ok(Conv {
            conv,
            transposed,
            avg,
            adaptive,
            lp,
            conv1,
            conv3,
            max,
            x: input(elems(&CONV_X), 11)?,
            w: input(elems(&CONV_W), 12)?,
            bias: input(16, 13)?,
            dy: input(elems(&CONV_Y), 14)?,
            wt: input(elems(&CONVT_W), 15)?,
            dyt: input(elems(&CONV_X), 16)?,
            dpool: input(elems(&POOL_Y), 17)?,
            dadaptive: input(elems(&ADAPTIVE_Y), 18)?,
            x1: input(elems(&CONV1_X), 19)?,
            w1: input(elems(&CONV1_W), 20)?,
            bias1: input(CONV1_W[0], 21)?,
            dy1: input(elems(&CONV1_Y), 22)?,
            x3: input(elems(&CONV3_X), 23)?,
            w3: input(elems(&CONV3_W), 24)?,
            bias3: input(CONV3_W[0], 25)?,
            dy3: input(elems(&CONV3_Y), 26)?,
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
            self.conv1.workspace_size(),
            self.conv1.bw_workspace_size(all),
            self.conv3.workspace_size(),
            self.conv3.bw_workspace_size(all),
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
            &CONV1_Y,
            &CONV1_X,
            &CONV1_W,
            &CONV1_W[..1],
            &CONV3_Y,
            &CONV3_X,
            &CONV3_W,
            &CONV3_W[..1],
            &MAX_Y,
            &CONV_Y,
        ];
        (sizes.iter().map(|s| elems(s)).collect(), ws)
    }
    fn index_outputs(&self) -> Vec<usize> {
        vec![elems(&MAX_Y)]
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
        pool(&self.lp, st, (y, dpool), (py, pdx), POOL_Y)?;

        let bufs = parts.take()?;
        let ins = [&self.x1, &self.w1, &self.bias1, &self.dy1];
        conv_pass(&self.conv1, st, ws, ins, bufs, (CONV1_X, CONV1_W, CONV1_Y))?;
        let bufs = parts.take()?;
        let ins = [&self.x3, &self.w3, &self.bias3, &self.dy3];
        conv_pass(&self.conv3, st, ws, ins, bufs, (CONV3_X, CONV3_W, CONV3_Y))?;

        let [my, mdx] = parts.take()?;
        let [mi] = parts.take_idx()?;
        let mut indices = view_mut(mi, MAX_Y)?;
        let args = PoolArgs {
            x: y,
            y: view_mut(my, MAX_Y)?,
            indices: Some(indices.reborrow()),
        };
        self.max.run(st, Workspace::None, args)?;
        let args = PoolBwArgs {
            dy: dpool,
            indices: Some(indices.as_const()),
            x: None,
            y: None,
            dx: view_mut(mdx, CONV_Y)?,
        };
        self.max.run_bw(st, Workspace::None, args)
    }
}

/// A convolution with a bias forward, then its backward with every
/// gradient: `ins` are x, w, bias and dy; `bufs` y, dx, dw and dbias;
/// `shapes` those of x, w and y.
fn conv_pass<const N: usize, const R: usize>(
    plan: &ConvPlan<f32, N, R>,
    st: &Stream,
    ws: &mut DeviceBuffer<u8>,
    [x, w, bias, dy]: [&DeviceBuffer<f32>; 4],
    [y, dx, dw, db]: [&mut DeviceBuffer<f32>; 4],
    (xs, wsh, ys): ([usize; R], [usize; R], [usize; R]),
) -> Result<()>
where
    Rank<N, R>: SpatialRank,
{
    let (x, w) = (view(x, xs)?, view(w, wsh)?);
    let args = ConvArgs {
        x,
        w,
        bias: Some(view(bias, [wsh[0]])?),
        y: view_mut(y, ys)?,
    };
    plan.run(st, borrowed(ws), args)?;
    let args = ConvBwArgs {
        x,
        w,
        y: None,
        dy: view(dy, ys)?,
        dx: Some(view_mut(dx, xs)?),
        dw: Some(view_mut(dw, wsh)?),
        dbias: Some(view_mut(db, [wsh[0]])?),
    };
    plan.run_bw(st, borrowed(ws), args)
}

// ---------------------------------------------------------------------------
// GEMM
// ---------------------------------------------------------------------------

/// A linear layer with a bias (cuBLASLt) forward and backward; a GEMM
/// with column-major `B` and `D`; a strided batch of GEMMs with a bias per
/// entry; grouped GEMMs of three shapes (`Rcr`); an s8 x s8 GEMM with a
/// scaled f32 output; and, where the GPU has fp8 (compute capability 8.9
/// or newer), an e4m3 x e4m3 GEMM with an f32 output and its amax.
struct Gemm {
    linear: LinearPlan<f32>,
    gemm: GemmPlan<f32>,
    batched: BatchedGemmPlan<f32>,
    grouped: GroupedGemmPlan<f32>,
    int: IntGemmPlan<f32>,
    fp8: Option<Fp8Gemm>,
    x: DeviceBuffer<f32>,
    w: DeviceBuffer<f32>,
    bias: DeviceBuffer<f32>,
    dy: DeviceBuffer<f32>,
    a: DeviceBuffer<f32>,
    b: DeviceBuffer<f32>,
    batch_a: DeviceBuffer<f32>,
    batch_b: DeviceBuffer<f32>,
    batch_bias: DeviceBuffer<f32>,
    /// Each group's `A` and `B`, in allocations of their own.
    group_a: Vec<DeviceBuffer<f32>>,
    group_b: Vec<DeviceBuffer<f32>>,
    int_a: DeviceBuffer<i8>,
    int_b: DeviceBuffer<i8>,
}

/// The fp8 GEMM and its operands; each scale in an allocation of its own,
/// as cuBLASLt's fp8 kernels want.
struct Fp8Gemm {
    plan: Fp8GemmPlan<float8::F8E4M3, float8::F8E4M3, f32>,
    a: DeviceBuffer<float8::F8E4M3>,
    b: DeviceBuffer<float8::F8E4M3>,
    scale_a: DeviceBuffer<f32>,
    scale_b: DeviceBuffer<f32>,
}

/// Tokens, in and out features of the linear layer.
const LIN: (usize, usize, usize) = (96, 64, 48);
/// `m`, `n`, `k` of the GEMM.
const MNK: (usize, usize, usize) = (40, 56, 72);
/// Entries, and `m`, `n`, `k` of each, of the batched GEMM (`Rrr`,
/// packed).
const BATCH: (usize, (usize, usize, usize)) = (3, (24, 40, 32));
/// `(m, n, k)` of each grouped GEMM (`Rcr`, packed).
const GROUPS: [(usize, usize, usize); 3] = [(16, 24, 32), (40, 8, 48), (1, 56, 16)];
/// `m`, `n`, `k` of the s8 GEMM (`Rcr`: `lda = ldb = k`, a multiple of
/// 16), and the scale of its output.
const INT_MNK: (usize, usize, usize) = (32, 24, 64);
const INT_SCALE: f32 = 0.5;
/// `m`, `n`, `k` of the fp8 GEMM (`Rcr`: `k` and `n`, the contiguous
/// extent of `D`, multiples of 16), and the scales of `A` and `B`.
const FP8_MNK: (usize, usize, usize) = (32, 48, 64);
const FP8_SCALES: (f32, f32) = (0.25, 0.5);

impl Gemm {
    fn new() -> Result<Self> {
        let st = &gpu().stream;
        let pref = deterministic();
        let (t, i, o) = LIN;
        let mut d = LinearDescriptor::new(t, i, o);
        d.epilogue = EpilogueKind::Bias;
        let linear = LinearPlan::select(st, &d, &pref)?;
        let (m, n, k) = MNK;
        let g = GemmDescriptor::new(m, n, k, LayoutSku::Rcc);
        let gemm = GemmPlan::select(st, &g, &pref)?;
        let (count, (bm, bn, bk)) = BATCH;
        let g = GemmDescriptor::new(bm, bn, bk, LayoutSku::Rrr).with_epilogue(EpilogueKind::Bias);
        let batched = BatchedGemmPlan::select(st, &BatchedGemmDescriptor::packed(g, count), &pref)?;
        let g = GroupedGemmDescriptor::new(GROUPS.to_vec(), LayoutSku::Rcr);
        let grouped = GroupedGemmPlan::select(st, &g, &pref)?;
        let (im, in_, ik) = INT_MNK;
        let gemm_int = GemmDescriptor::new(im, in_, ik, LayoutSku::Rcr);
        let int = IntGemmPlan::select(st, &IntGemmDescriptor { gemm: gemm_int }, &pref)?;
        Ok(Gemm {
            linear,
            gemm,
            batched,
            grouped,
            int,
            fp8: Fp8Gemm::new(st, &pref)?,
            x: input(t * i, 21)?,
            w: input(o * i, 22)?,
            bias: input(o, 23)?,
            dy: input(t * o, 24)?,
            a: input(m * k, 25)?,
            b: input(k * n, 26)?,
            batch_a: input(count * bm * bk, 27)?,
            batch_b: input(count * bk * bn, 28)?,
            batch_bias: input(count * bn, 29)?,
            group_a: GROUPS
                .iter()
                .enumerate()
                .map(|(j, &(gm, _, gk))| input(gm * gk, 30 + j as u64))
                .collect::<Result<_>>()?,
            group_b: GROUPS
                .iter()
                .enumerate()
                .map(|(j, &(_, gn, gk))| input(gk * gn, 40 + j as u64))
                .collect::<Result<_>>()?,
            // Integers in [-120, 120).
            int_a: input_as(im * ik, 50, 60.0)?,
            int_b: input_as(ik * in_, 51, 60.0)?,
        })
    }
}

impl Fp8Gemm {
    /// The plan and its operands; `None` when the GPU has no fp8 (compute
    /// capability below 8.9) and `select` says `Unsupported`.
    fn new(st: &Stream, pref: &PlanPreference) -> Result<Option<Self>> {
        let (m, n, k) = FP8_MNK;
        let desc = Fp8GemmDescriptor {
            gemm: GemmDescriptor::new(m, n, k, LayoutSku::Rcr),
            amax: true,
        };
        let plan = match Fp8GemmPlan::select(st, &desc, pref) {
            Ok(plan) => plan,
            Err(Error::Unsupported { .. })
                if st.context().device().arch.compute_capability() < 89 =>
            {
                return Ok(None)
            }
            Err(e) => return Err(e),
        };
        let scale = |v: f32| DeviceBuffer::from_host(st, &[v]);
        Ok(Some(Fp8Gemm {
            plan,
            a: input_as(m * k, 52, 1.0)?,
            b: input_as(k * n, 53, 1.0)?,
            scale_a: scale(FP8_SCALES.0)?,
            scale_b: scale(FP8_SCALES.1)?,
        }))
    }
}

impl Exercise for Gemm {
    fn outputs(&self) -> (Vec<usize>, usize) {
        let ((t, i, o), (m, n, _)) = (LIN, MNK);
        let (count, (bm, bn, _)) = BATCH;
        let (im, in_, _) = INT_MNK;
        let all = Grad::X | Grad::Weight | Grad::Bias;
        let ws = [
            self.linear.workspace_size(),
            self.linear.bw_workspace_size(all),
            self.gemm.workspace_size(),
            self.batched.workspace_size(),
            self.grouped.workspace_size(),
            self.int.workspace_size(),
            self.fp8.as_ref().map_or(0, |f| f.plan.workspace_size()),
        ]
        .into_iter()
        .max()
        .unwrap_or(0);
        let mut sizes = vec![t * o, t * i, o * i, o, m * n, count * bm * bn];
        sizes.extend(GROUPS.iter().map(|&(gm, gn, _)| gm * gn));
        sizes.push(im * in_);
        if self.fp8.is_some() {
            let (fm, fn_, _) = FP8_MNK;
            sizes.extend([fm * fn_, 1]);
        }
        (sizes, ws)
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
        self.gemm.run(st, borrowed(ws), args)?;

        let (count, (_, bn, _)) = BATCH;
        let [d] = parts.take()?;
        let args = BatchedGemmArgs {
            a: self.batch_a.as_slice(),
            b: self.batch_b.as_slice(),
            c: GemmC::None,
            d: d.as_slice_mut(),
            bias: Some(view(&self.batch_bias, [count, bn])?),
            aux: None,
            alpha: 1.0,
            beta: 0.0,
        };
        self.batched.run(st, borrowed(ws), args)?;

        let ds: [_; GROUPS.len()] = parts.take()?;
        let mut args = GroupedGemmArgs {
            a: Vec::with_capacity(GROUPS.len()),
            b: Vec::with_capacity(GROUPS.len()),
            c: GemmC::None,
            d: Vec::with_capacity(GROUPS.len()),
            bias: None,
            aux: None,
            alpha: 1.0,
            beta: 0.0,
        };
        for (j, (d, &(gm, gn, gk))) in ds.into_iter().zip(&GROUPS).enumerate() {
            args.a
                .push(MatrixRef::row_major(self.group_a[j].as_slice(), gm, gk)?);
            let b = self.group_b[j].as_slice();
            args.b.push(MatrixRef::new(b, gk, gn, gk, col)?);
            args.d.push(MatrixMut::row_major(d.as_slice_mut(), gm, gn)?);
        }
        self.grouped.run(st, borrowed(ws), args)?;

        let (m, n, k) = INT_MNK;
        let [d] = parts.take()?;
        let args = IntGemmArgs {
            a: MatrixRef::row_major(self.int_a.as_slice(), m, k)?,
            b: MatrixRef::new(self.int_b.as_slice(), k, n, k, col)?,
            d: MatrixMut::row_major(d.as_slice_mut(), m, n)?,
            scale: INT_SCALE,
        };
        self.int.run(st, borrowed(ws), args)?;

        let Some(f) = &self.fp8 else {
            return Ok(());
        };
        let (m, n, k) = FP8_MNK;
        let [d, amax] = parts.take()?;
        let args = Fp8GemmArgs {
            a: MatrixRef::row_major(f.a.as_slice(), m, k)?,
            b: MatrixRef::new(f.b.as_slice(), k, n, k, col)?,
            d: MatrixMut::row_major(d.as_slice_mut(), m, n)?,
            scale_a: view(&f.scale_a, [1])?,
            scale_b: view(&f.scale_b, [1])?,
            amax: Some(view_mut(amax, [1])?),
        };
        f.plan.run(st, borrowed(ws), args)
    }
}

// ---------------------------------------------------------------------------
// Reduce
// ---------------------------------------------------------------------------

/// Every reduction forward and backward over the rows of a matrix (the
/// row kernel) and over its columns (the column kernel, split over the
/// reduced dim through the workspace); max and min with their values and
/// i64 indices, forward and backward, over the rows (16-byte loads) and
/// over the columns (strided, split through the workspace); var_mean over
/// the rows and std_mean over the columns, with both output gradients;
/// the trace and its backward; every scan (cummax and cummin with i64
/// indices) forward and backward along the rows and along the columns;
/// all, any (bool out) and count_nonzero (i64 out) of a matrix a third
/// zeros over the rows and over the columns.
struct Reduce {
    rows: Vec<ReducePlan<f32, 2, 1>>,
    cols: Vec<ReducePlan<f32, 2, 1>>,
    /// var_mean over the rows, std_mean over the columns.
    var_means: [VarMeanPlan<f32, 2, 1>; 2],
    trace: TracePlan<f32>,
    arg_rows: Vec<ArgReducePlan<f32, 2, 1>>,
    arg_cols: Vec<ArgReducePlan<f32, 2, 1>>,
    /// Each scan with its op, along dim 1 then dim 0.
    scans: Vec<(ScanOp, ScanPlan<f32, 2>)>,
    /// all and any over the rows, then over the columns.
    truth: Vec<LogicalReducePlan<f32, bool, 2, 1>>,
    /// count_nonzero over the rows, then over the columns.
    counts: Vec<LogicalReducePlan<f32, i64, 2, 1>>,
    x: DeviceBuffer<f32>,
    /// The matrix of the logical reductions: a third of it zeros.
    sparse: DeviceBuffer<f32>,
    dy_rows: DeviceBuffer<f32>,
    dy_cols: DeviceBuffer<f32>,
    /// The gradient of the scans' outputs.
    dy: DeviceBuffer<f32>,
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
        let arg = |op, dim| ArgReduceDescriptor::new(op, ElementKind::F32, RED).with_dim(dim);
        let mut scans = Vec::new();
        for dim in [1, 0] {
            let plans = select_each(&ScanOp::ALL, |op| {
                ScanDescriptor::new(op, ElementKind::F32, RED, dim)
            })?;
            scans.extend(ScanOp::ALL.into_iter().zip(plans));
        }
        let st = &gpu().stream;
        let pref = PlanPreference::default();
        let var_mean = |op, dim| VarMeanPlan::select(st, &desc(op, dim), &pref);
        let logical = |op, dim: usize| {
            LogicalReduceDescriptor::new(op, ElementKind::F32, RED).with_dims(&[dim])
        };
        let (mut truth, mut counts) = (Vec::new(), Vec::new());
        for dim in [1, 0] {
            truth.extend(select_each(
                &[LogicalReduceOp::All, LogicalReduceOp::Any],
                |op| logical(op, dim),
            )?);
            counts.extend(select_each(&[LogicalReduceOp::CountNonzero], |op| {
                logical(op, dim)
            })?);
        }
        let sparse: Vec<f32> = Rng::new(11)
            .vec(elems(&RED), -2.0, 1.0)
            .iter()
            .map(|&v| v.max(0.0) as f32)
            .collect();
        Ok(Reduce {
            rows: select_each(&ReduceOp::ALL, |op| desc(op, 1))?,
            cols: select_each(&ReduceOp::ALL, |op| desc(op, 0))?,
            var_means: [var_mean(ReduceOp::Var, 1)?, var_mean(ReduceOp::Std, 0)?],
            trace: TracePlan::select(
                st,
                &TraceDescriptor::new(ElementKind::F32, RED[0], RED[1]),
                &pref,
            )?,
            arg_rows: select_each(&ArgReduceOp::ALL, |op| arg(op, 1))?,
            arg_cols: select_each(&ArgReduceOp::ALL, |op| arg(op, 0))?,
            scans,
            truth,
            counts,
            sparse: DeviceBuffer::from_host(st, &sparse)?,
            x: input(elems(&RED), 7)?,
            dy_rows: input(RED[0], 8)?,
            dy_cols: input(RED[1], 9)?,
            dy: input(elems(&RED), 10)?,
        })
    }
}

impl Exercise for Reduce {
    fn outputs(&self) -> (Vec<usize>, usize) {
        let n = elems(&RED);
        // The reductions' y and dx, the index reductions' values and dx,
        // each over the rows then over the columns; the scans' y and dx;
        // var_mean's and std_mean's y, mean and dx; the trace and its dx.
        let per_set = [
            (self.rows.len(), RED[0]),
            (self.cols.len(), RED[1]),
            (self.arg_rows.len(), RED[0]),
            (self.arg_cols.len(), RED[1]),
            (self.scans.len(), n),
        ];
        let mut sizes = Vec::new();
        for (plans, m) in per_set {
            for _ in 0..plans {
                sizes.extend([m, n]);
            }
        }
        sizes.extend([RED[0], RED[0], n, RED[1], RED[1], n, 1, n]);
        let reduce = self
            .rows
            .iter()
            .chain(&self.cols)
            .map(|p| p.workspace_size().max(p.bw_workspace_size(Grad::X.into())));
        let arg = self
            .arg_rows
            .iter()
            .chain(&self.arg_cols)
            .map(|p| p.workspace_size().max(p.bw_workspace_size(Grad::X.into())));
        let scan = self
            .scans
            .iter()
            .map(|(_, p)| p.workspace_size().max(p.bw_workspace_size(Grad::X.into())));
        let more = self
            .var_means
            .iter()
            .map(|p| p.workspace_size())
            .chain([self.trace.workspace_size()]);
        let logical = self.truth.iter().map(|p| p.workspace_size());
        let counts = self.counts.iter().map(|p| p.workspace_size());
        let ws = reduce
            .chain(arg)
            .chain(scan)
            .chain(more)
            .chain(logical)
            .chain(counts)
            .max()
            .unwrap_or(0);
        (sizes, ws)
    }
    fn index_outputs(&self) -> Vec<usize> {
        let mut sizes = vec![RED[0]; self.arg_rows.len()];
        sizes.extend(vec![RED[1]; self.arg_cols.len()]);
        let with_indices = self.scans.iter().filter(|(op, _)| op.has_indices());
        sizes.extend(with_indices.map(|_| elems(&RED)));
        sizes.extend([RED[0], RED[1]]);
        sizes
    }
    fn raw_outputs(&self) -> Vec<Raw> {
        let half = self.truth.len() / 2;
        let mut v = vec![Raw::of::<bool>(RED[0]); half];
        v.extend(vec![Raw::of::<bool>(RED[1]); half]);
        v
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

        let sets = [
            (&self.arg_rows, &self.dy_rows, RED[0]),
            (&self.arg_cols, &self.dy_cols, RED[1]),
        ];
        for (plans, dv, m) in sets {
            let dv = view(dv, [m])?;
            for plan in plans {
                let [values, dx] = parts.take()?;
                let [indices] = parts.take_idx()?;
                let mut indices = view_mut(indices, [m])?;
                let args = ArgReduceArgs {
                    x,
                    values: Some(view_mut(values, [m])?),
                    indices: indices.reborrow(),
                };
                plan.run(st, borrowed(ws), args)?;
                let args = ArgReduceBwArgs {
                    indices: indices.as_const(),
                    dv,
                    dx: view_mut(dx, RED)?,
                };
                plan.run_bw(st, borrowed(ws), args)?;
            }
        }

        let dy = view(&self.dy, RED)?;
        for (op, plan) in &self.scans {
            let [y, dx] = parts.take()?;
            let mut indices = if op.has_indices() {
                let [i] = parts.take_idx()?;
                Some(view_mut(i, RED)?)
            } else {
                None
            };
            let mut y = view_mut(y, RED)?;
            let args = ScanArgs {
                x,
                y: y.reborrow(),
                indices: indices.as_mut().map(|i| i.reborrow()),
            };
            plan.run(st, borrowed(ws), args)?;
            // logcumsumexp's backward reads y; cummax's and cummin's the
            // indices; each refuses what it does not read.
            let args = ScanBwArgs {
                x,
                y: (*op == ScanOp::LogCumSumExp).then(|| y.as_const()),
                indices: indices.as_ref().map(|i| i.as_const()),
                dy,
                dx: view_mut(dx, RED)?,
            };
            plan.run_bw(st, borrowed(ws), args)?;
        }

        let sets = [(&self.dy_rows, RED[0]), (&self.dy_cols, RED[1])];
        for (plan, (dy, m)) in self.var_means.iter().zip(sets) {
            let dy = view(dy, [m])?;
            let [y, mean, dx] = parts.take()?;
            let (mut y, mut mean) = (view_mut(y, [m])?, view_mut(mean, [m])?);
            let args = VarMeanArgs {
                x,
                y: y.reborrow(),
                mean: mean.reborrow(),
            };
            plan.run(st, borrowed(ws), args)?;
            let args = VarMeanBwArgs {
                x,
                y: Some(y.as_const()),
                mean: mean.as_const(),
                dy: Some(dy),
                dmean: Some(dy),
                dx: view_mut(dx, RED)?,
            };
            plan.run_bw(st, Workspace::None, args)?;
        }
        let [y, dx] = parts.take()?;
        let mut y = view_mut(y, [])?;
        let args = TraceArgs { x, y: y.reborrow() };
        self.trace.run(st, borrowed(ws), args)?;
        let args = TraceBwArgs {
            dy: y.as_const(),
            dx: view_mut(dx, RED)?,
        };
        self.trace.run_bw(st, Workspace::None, args)?;

        let sparse = view(&self.sparse, RED)?;
        let half = self.truth.len() / 2;
        for (i, plan) in self.truth.iter().enumerate() {
            let y = parts.take_raw::<bool, 1>([RED[usize::from(i >= half)]])?;
            plan.run(st, borrowed(ws), LogicalReduceArgs { x: sparse, y })?;
        }
        for (plan, m) in self.counts.iter().zip([RED[0], RED[1]]) {
            let [y] = parts.take_idx()?;
            let y = view_mut(y, [m])?;
            plan.run(st, borrowed(ws), LogicalReduceArgs { x: sparse, y })?;
        }
        Ok(())
    }
}

// ---------------------------------------------------------------------------
// Softmax
// ---------------------------------------------------------------------------

/// Every softmax op forward and backward along the rows of a matrix (the
/// cached row kernel) and along its columns (a thread per row); softmax
/// and log-softmax along the rows under a broadcast keep mask and an
/// additive mask.
struct Softmax {
    plans: Vec<SoftmaxPlan<f32, 2>>,
    /// Keep-masked plans, then add-masked ones.
    masked: Vec<SoftmaxPlan<f32, 2>>,
    x: DeviceBuffer<f32>,
    dy: DeviceBuffer<f32>,
    /// A `[1, 8192]` keep mask, broadcast over the rows.
    keep: DeviceBuffer<bool>,
}

/// The matrix: enough columns that the column softmax runs a thread per
/// row.
const SOFT: [usize; 2] = [64, 8192];
/// The masked ops.
const MASKED: [SoftmaxOp; 2] = [SoftmaxOp::Softmax, SoftmaxOp::LogSoftmax];

impl Softmax {
    fn new() -> Result<Self> {
        let mut plans = Vec::new();
        for dim in [1, 0] {
            plans.extend(select_each(&SoftmaxOp::ALL, |op| {
                SoftmaxDescriptor::new(op, ElementKind::F32, SOFT).with_dim(dim)
            })?);
        }
        let mut masked = Vec::new();
        for mask in [SoftmaxMask::Keep, SoftmaxMask::Add] {
            masked.extend(select_each(&MASKED, |op| {
                SoftmaxDescriptor::new(op, ElementKind::F32, SOFT).with_mask(mask)
            })?);
        }
        let keep: Vec<bool> = (0..SOFT[1]).map(|i| i % 3 != 1).collect();
        Ok(Softmax {
            plans,
            masked,
            x: input(elems(&SOFT), 10)?,
            dy: input(elems(&SOFT), 11)?,
            keep: DeviceBuffer::from_host(&gpu().stream, &keep)?,
        })
    }
}

impl Exercise for Softmax {
    fn outputs(&self) -> (Vec<usize>, usize) {
        let plans = self.plans.len() + self.masked.len();
        (vec![elems(&SOFT); 2 * plans], 0)
    }
    fn enqueue(&self, st: &Stream, out: &mut Outs) -> Result<()> {
        let (ws, mut parts) = out.parts();
        let (x, dy) = (view(&self.x, SOFT)?, view(&self.dy, SOFT)?);
        let keep = TensorRef::new(self.keep.as_slice(), SOFT, [0, 1])?;
        let masks = self.plans.iter().map(|p| (p, SoftmaxMaskRef::None));
        let masked = self.masked.iter().enumerate().map(|(i, p)| {
            // the additive mask: dy, any values of the right range
            let m = if i < MASKED.len() {
                SoftmaxMaskRef::Keep(keep)
            } else {
                SoftmaxMaskRef::Add(dy)
            };
            (p, m)
        });
        for (plan, mask) in masks.chain(masked) {
            let [y, dx] = parts.take()?;
            let mut y = view_mut(y, SOFT)?;
            let args = SoftmaxArgs {
                x,
                mask,
                y: y.reborrow(),
            };
            plan.run(st, borrowed(ws), args)?;
            let args = SoftmaxBwArgs {
                y: y.as_const(),
                dy,
                mask,
                dx: view_mut(dx, SOFT)?,
            };
            plan.run_bw(st, borrowed(ws), args)?;
        }
        Ok(())
    }
}
/// Gumbel-softmax along the rows of the softmax matrix: soft with given
/// noise, hard with Philox noise (forward, backward from the soft sample),
/// and the Philox gumbels alone.
struct Gumbel {
    soft: GumbelSoftmaxPlan<f32, 2>,
    hard: GumbelSoftmaxPlan<f32, 2>,
    x: DeviceBuffer<f32>,
    g: DeviceBuffer<f32>,
    dy: DeviceBuffer<f32>,
}

impl Gumbel {
    fn new() -> Result<Self> {
        let st = &gpu().stream;
        let desc = GumbelSoftmaxDescriptor::new(ElementKind::F32, SOFT, 0.5);
        let hard = desc.with_hard(true).with_noise(GumbelNoise::Philox);
        Ok(Gumbel {
            soft: GumbelSoftmaxPlan::select(st, &desc, &deterministic())?,
            hard: GumbelSoftmaxPlan::select(st, &hard, &deterministic())?,
            x: input(elems(&SOFT), 12)?,
            g: input(elems(&SOFT), 13)?,
            dy: input(elems(&SOFT), 14)?,
        })
    }
}

impl Exercise for Gumbel {
    fn outputs(&self) -> (Vec<usize>, usize) {
        (vec![elems(&SOFT); 6], 0)
    }
    fn enqueue(&self, st: &Stream, out: &mut Outs) -> Result<()> {
        let (ws, mut parts) = out.parts();
        let (x, dy) = (view(&self.x, SOFT)?, view(&self.dy, SOFT)?);
        let [y, dx, hy, soft, hdx, noise] = parts.take()?;
        let mut y = view_mut(y, SOFT)?;
        let args = GumbelSoftmaxArgs {
            logits: x,
            noise: GumbelNoiseRef::Given(view(&self.g, SOFT)?),
            y: y.reborrow(),
            soft: None,
        };
        self.soft.run(st, borrowed(ws), args)?;
        let args = GumbelSoftmaxBwArgs {
            soft: y.as_const(),
            dy,
            dx: view_mut(dx, SOFT)?,
        };
        self.soft.run_bw(st, borrowed(ws), args)?;
        let mut soft = view_mut(soft, SOFT)?;
        let args = GumbelSoftmaxArgs {
            logits: x,
            noise: GumbelNoiseRef::Philox { seed: 7, offset: 3 },
            y: view_mut(hy, SOFT)?,
            soft: Some(soft.reborrow()),
        };
        self.hard.run(st, borrowed(ws), args)?;
        let args = GumbelSoftmaxBwArgs {
            soft: soft.as_const(),
            dy,
            dx: view_mut(hdx, SOFT)?,
        };
        self.hard.run_bw(st, borrowed(ws), args)?;
        self.hard.run_noise(st, 7, 3, view_mut(noise, SOFT)?)
    }
}

/// Sparsemax along the rows and along the columns of the softmax matrix,
/// forward and backward.
struct Sparsemax {
    plans: Vec<SparsemaxPlan<f32, 2>>,
    x: DeviceBuffer<f32>,
    dy: DeviceBuffer<f32>,
}

impl Sparsemax {
    fn new() -> Result<Self> {
        Ok(Sparsemax {
            plans: select_each(&[1, 0], |dim| {
                SparsemaxDescriptor::new(ElementKind::F32, SOFT).with_dim(dim)
            })?,
            x: input(elems(&SOFT), 15)?,
            dy: input(elems(&SOFT), 16)?,
        })
    }
}

impl Exercise for Sparsemax {
    fn outputs(&self) -> (Vec<usize>, usize) {
        (vec![elems(&SOFT); 2 * self.plans.len()], 0)
    }
    fn enqueue(&self, st: &Stream, out: &mut Outs) -> Result<()> {
        let (ws, mut parts) = out.parts();
        let (x, dy) = (view(&self.x, SOFT)?, view(&self.dy, SOFT)?);
        for plan in &self.plans {
            let [y, dx] = parts.take()?;
            let mut y = view_mut(y, SOFT)?;
            plan.run(st, borrowed(ws), SparsemaxArgs { x, y: y.reborrow() })?;
            let args = SparsemaxBwArgs {
                y: y.as_const(),
                dy,
                dx: view_mut(dx, SOFT)?,
            };
            plan.run_bw(st, borrowed(ws), args)?;
        }
        Ok(())
    }
}

// ---------------------------------------------------------------------------
// Shape
// ---------------------------------------------------------------------------

/// Flip, roll, tril and the four pads of a batch of two matrices (forward
/// and backward; the pads' outputs larger than x; reflect, replicate and
/// circular pads of 2 dims take a rank-3 input, as PyTorch's),
/// repeat_interleave with per-index counts, repeat and unfold (forward and
/// backward, the backwards summing copies), cat of the batch with itself
/// along the last dim and stack of it with itself along dim 1 (forward and
/// both gradients).
struct Shapes {
    plans: Vec<ShapePlan<f32, 3>>,
    /// repeat_interleave with per-index counts (the plan's device table)
    /// and repeat: same-rank layout ops.
    layouts: Vec<LayoutPlan<f32, 3, 3>>,
    /// unfold: a rank-changing one.
    unfold: LayoutPlan<f32, 3, 4>,
    cat: CatPlan<f32, 3>,
    stack: StackPlan<f32, 3, 4>,
    x: DeviceBuffer<f32>,
    dy: DeviceBuffer<f32>,
}

/// The batch of matrices.
const MAT: [usize; 3] = [2, 64, 256];

impl Shapes {
    fn new() -> Result<Self> {
        let ops = [
            ShapeOp::flip(&[0, 1]),
            ShapeOp::roll(&[3, -5], &[0, 1]),
            ShapeOp::Tril { diagonal: 1 },
            ShapeOp::pad(PadMode::Constant, &[1, 2, 3, 4], 0.5),
            ShapeOp::pad(PadMode::Reflect, &[3, 3, 3, 3], 0.0),
            ShapeOp::pad(PadMode::Replicate, &[5, 1, 0, 2], 0.0),
            ShapeOp::pad(PadMode::Circular, &[4, 4, 2, 2], 0.0),
        ];
        let plans = select_each(&ops, |op| ShapeDescriptor::new(op, ElementKind::F32, MAT))?;
        let counts: Vec<i64> = (0..MAT[1] as i64).map(|i| (i * 7 + 1) % 11 % 4).collect();
        let layout_ops = [
            LayoutOp::repeat_interleave_per_index(&counts, 1, None),
            LayoutOp::repeat(&[1, 2, 1]),
        ];
        let layouts = layout_ops
            .iter()
            .map(|op| {
                Plan::select(
                    &gpu().stream,
                    &LayoutDescriptor::new(op.clone(), ElementKind::F32, MAT),
                    &deterministic(),
                )
            })
            .collect::<Result<Vec<_>>>()?;
        let unfold = Plan::select(
            &gpu().stream,
            &LayoutDescriptor::new(
                LayoutOp::Unfold {
                    dim: 2,
                    size: 8,
                    step: 4,
                },
                ElementKind::F32,
                MAT,
            ),
            &deterministic(),
        )?;
        let cat = Plan::select(
            &gpu().stream,
            &CatDescriptor {
                element: ElementKind::F32,
                dim: 2,
                shapes: vec![MAT, MAT],
            },
            &deterministic(),
        )?;
        let stack = Plan::select(
            &gpu().stream,
            &StackDescriptor {
                element: ElementKind::F32,
                dim: 1,
                shape: MAT,
                count: 2,
            },
            &deterministic(),
        )?;
        // dy large enough for every output (the padded ones, cat, stack)
        Ok(Shapes {
            plans,
            layouts,
            unfold,
            cat,
            stack,
            x: input(elems(&MAT), 30)?,
            dy: input(4 * elems(&MAT), 31)?,
        })
    }
}

impl Exercise for Shapes {
    fn outputs(&self) -> (Vec<usize>, usize) {
        let mut v = Vec::new();
        for p in &self.plans {
            v.push(elems(&p.output_shape()));
            v.push(elems(&MAT));
        }
        for p in &self.layouts {
            v.push(elems(&p.output_shape()));
            v.push(elems(&MAT));
        }
        v.extend([elems(&self.unfold.output_shape()), elems(&MAT)]);
        v.extend([2 * elems(&MAT), elems(&MAT), elems(&MAT)]);
        v.extend([2 * elems(&MAT), elems(&MAT), elems(&MAT)]);
        (v, 0)
    }
    fn enqueue(&self, st: &Stream, out: &mut Outs) -> Result<()> {
        let (ws, mut parts) = out.parts();
        let x = view(&self.x, MAT)?;
        for plan in &self.plans {
            let ys = plan.output_shape();
            let [y, dx] = parts.take()?;
            plan.run(
                st,
                borrowed(ws),
                ShapeArgs {
                    x,
                    y: view_mut(y, ys)?,
                },
            )?;
            let args = ShapeBwArgs {
                dy: TensorRef::contiguous(
                    self.dy.as_slice().slice(0..elems(&ys)).expect("dy"),
                    ys,
                )?,
                dx: view_mut(dx, MAT)?,
            };
            plan.run_bw(st, borrowed(ws), args)?;
        }
        for plan in &self.layouts {
            let ys = plan.output_shape();
            let [y, dx] = parts.take()?;
            plan.run(
                st,
                borrowed(ws),
                LayoutArgs {
                    x,
                    y: view_mut(y, ys)?,
                },
            )?;
            let args = LayoutBwArgs {
                dy: TensorRef::contiguous(
                    self.dy.as_slice().slice(0..elems(&ys)).expect("dy"),
                    ys,
                )?,
                dx: view_mut(dx, MAT)?,
            };
            plan.run_bw(st, borrowed(ws), args)?;
        }
        let us = self.unfold.output_shape();
        let [y, dx] = parts.take()?;
        self.unfold.run(
            st,
            borrowed(ws),
            LayoutArgs {
                x,
                y: view_mut(y, us)?,
            },
        )?;
        let args = LayoutBwArgs {
            dy: TensorRef::contiguous(self.dy.as_slice().slice(0..elems(&us)).expect("dy"), us)?,
            dx: view_mut(dx, MAT)?,
        };
        self.unfold.run_bw(st, borrowed(ws), args)?;
        let [y, dx0, dx1] = parts.take()?;
        let cat_shape = [MAT[0], MAT[1], 2 * MAT[2]];
        self.cat.run(
            st,
            borrowed(ws),
            CatArgs {
                xs: &[x, x],
                y: view_mut(y, cat_shape)?,
            },
        )?;
        let args = CatBwArgs {
            dy: TensorRef::contiguous(
                self.dy.as_slice().slice(0..elems(&cat_shape)).expect("dy"),
                cat_shape,
            )?,
            dxs: vec![Some(view_mut(dx0, MAT)?), Some(view_mut(dx1, MAT)?)],
        };
        self.cat.run_bw(st, borrowed(ws), args)?;

        let [y, dx0, dx1] = parts.take()?;
        let stack_shape = [MAT[0], 2, MAT[1], MAT[2]];
        self.stack.run(
            st,
            borrowed(ws),
            StackArgs {
                xs: &[x, x],
                y: view_mut(y, stack_shape)?,
            },
        )?;
        let args = StackBwArgs {
            dy: TensorRef::contiguous(
                self.dy
                    .as_slice()
                    .slice(0..elems(&stack_shape))
                    .expect("dy"),
                stack_shape,
            )?,
            dxs: vec![Some(view_mut(dx0, MAT)?), Some(view_mut(dx1, MAT)?)],
        };
        self.stack.run_bw(st, borrowed(ws), args)
    }
}

// ---------------------------------------------------------------------------
// Norm
// ---------------------------------------------------------------------------

/// LayerNorm (weight and bias) and RMSNorm (weight, the residual form:
/// `s = x + dy`, its backward adding `x` as ds) forward and backward
/// with every gradient, over rows of 1024 (the register kernel), and
/// GroupNorm (weight and bias, channels-last) likewise, and BatchNorm
/// (training, weight and bias, no running statistics, channels-last) and
/// LocalResponseNorm (size 5, channels-last) on GroupNorm's shape; the
/// statistics live at the start of the workspace.
struct Norms {
    layer: LayerNormPlan<f32, 2>,
    rms: RmsNormPlan<f32, 2>,
    group: GroupNormPlan<f32, 4>,
    batch: BatchNormPlan<f32, 4>,
    lrn: LocalResponseNormPlan<f32, 4>,
    x: DeviceBuffer<f32>,
    w: DeviceBuffer<f32>,
    b: DeviceBuffer<f32>,
    dy: DeviceBuffer<f32>,
}

/// The normalized matrix.
const NORM: [usize; 2] = [512, 1024];
/// GroupNorm's `[N, C, H, W]` (8 groups), on the first elements of the
/// matrix's buffers.
const GROUP: [usize; 4] = [4, 64, 16, 32];

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
                &NormDescriptor::rms_norm(ElementKind::F32, NORM, 1).with_residual(true),
                &pref,
            )?,
            group: Plan::select(
                st,
                &GroupNormDescriptor::group_norm(ElementKind::F32, GROUP, 8)
                    .with_layout(ConvLayout::ChannelsLast),
                &pref,
            )?,
            batch: Plan::select(
                st,
                &BatchNormDescriptor::batch_norm(ElementKind::F32, GROUP)
                    .with_running_stats(false)
                    .with_layout(ConvLayout::ChannelsLast),
                &pref,
            )?,
            lrn: Plan::select(
                st,
                &LocalResponseNormDescriptor::local_response_norm(ElementKind::F32, GROUP, 5)
                    .with_layout(ConvLayout::ChannelsLast),
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
            .max(self.group.stats_bytes())
            .max(self.batch.stats_bytes())
            .next_multiple_of(256)
    }
}

impl Exercise for Norms {
    fn outputs(&self) -> (Vec<usize>, usize) {
        let (n, h) = (elems(&NORM), NORM[1]);
        let ws = self.layer.bw_workspace_size(self.layer.grads());
        let ws = ws.max(self.rms.bw_workspace_size(self.rms.grads()));
        let ws = ws.max(self.group.workspace_size());
        let ws = ws.max(self.group.bw_workspace_size(self.group.grads()));
        let ws = ws.max(self.batch.workspace_size());
        let ws = ws.max(self.batch.bw_workspace_size(self.batch.grads()));
        let (g, c) = (elems(&GROUP), GROUP[1]);
        (
            vec![n, n, h, h, n, n, h, n, g, g, c, c, g, g, c, c, g, g],
            self.stats_region() + ws,
        )
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
            (Some((b, db)), None),
            bufs,
            &mut stats,
            &mut rest,
        )?;
        let [y, dx, dw, sum] = parts.take()?;
        norm_pass(
            &self.rms,
            st,
            [x, dy],
            w,
            (None, Some(sum)),
            [y, dx, dw],
            &mut stats,
            &mut rest,
        )?;
        let [y, dx, dw, db] = parts.take()?;
        let c = GROUP[1];
        let cl = [c * GROUP[2] * GROUP[3], 1, GROUP[3] * c, c];
        let (gx, gdy) = (prefix(&self.x, GROUP, cl)?, prefix(&self.dy, GROUP, cl)?);
        let (gw, gb) = (prefix(&self.w, [c], [1])?, prefix(&self.b, [c], [1])?);
        let args = GroupNormArgs {
            x: gx,
            weight: Some(gw),
            bias: Some(gb),
            y: TensorMut::new(y.as_slice_mut(), GROUP, cl)?,
            stats: Some(stats.reborrow()),
        };
        self.group
            .run(st, Workspace::Borrowed(rest.reborrow()), args)?;
        let args = GroupNormBwArgs {
            x: gx,
            weight: Some(gw),
            stats: stats.as_const(),
            dy: gdy,
            dx: Some(TensorMut::new(dx.as_slice_mut(), GROUP, cl)?),
            dweight: Some(view_mut(dw, [c])?),
            dbias: Some(view_mut(db, [c])?),
        };
        self.group
            .run_bw(st, Workspace::Borrowed(rest.reborrow()), args)?;
        let [y, dx, dw, db] = parts.take()?;
        let args = BatchNormArgs {
            x: gx,
            weight: Some(gw),
            bias: Some(gb),
            running_mean: None,
            running_var: None,
            y: TensorMut::new(y.as_slice_mut(), GROUP, cl)?,
            stats: Some(stats.reborrow()),
        };
        self.batch
            .run(st, Workspace::Borrowed(rest.reborrow()), args)?;
        let args = BatchNormBwArgs {
            x: gx,
            weight: Some(gw),
            stats: stats.as_const(),
            dy: gdy,
            dx: Some(TensorMut::new(dx.as_slice_mut(), GROUP, cl)?),
            dweight: Some(view_mut(dw, [c])?),
            dbias: Some(view_mut(db, [c])?),
        };
        self.batch
            .run_bw(st, Workspace::Borrowed(rest.reborrow()), args)?;
        let [y, dx] = parts.take()?;
        let args = LocalResponseNormArgs {
            x: gx,
            y: TensorMut::new(y.as_slice_mut(), GROUP, cl)?,
        };
        self.lrn.run(st, Workspace::None, args)?;
        let args = LocalResponseNormBwArgs {
            x: gx,
            dy: gdy,
            dx: TensorMut::new(dx.as_slice_mut(), GROUP, cl)?,
        };
        self.lrn.run_bw(st, Workspace::None, args)
    }
}

/// The first elements of `b` as a view of `shape` with `strides`.
fn prefix<const N: usize>(
    b: &DeviceBuffer<f32>,
    shape: [usize; N],
    strides: [usize; N],
) -> Result<TensorRef<'_, f32, N>> {
    let s = b
        .as_slice()
        .slice(0..elems(&shape))
        .ok_or(Error::InvalidArgument {
            op: "exercise",
            arg: "input",
            reason: "smaller than the view".into(),
        })?;
    TensorRef::new(s, shape, strides)
}

/// A norm pass's bias and its gradient's buffer, and the residual form's
/// sum buffer, each when used.
type NormExtra<'v, 'b> = (
    Option<(TensorRef<'v, f32, 1>, &'b mut DeviceBuffer<f32>)>,
    Option<&'b mut DeviceBuffer<f32>>,
);

/// One norm plan forward (saving the statistics in `stats`) and backward
/// with every gradient: y, dx and dweight into `bufs`, dbias with the bias
/// (`extra.0`). With a sum buffer (`extra.1`, the residual form) the
/// residual is `dy`, the sum is written there and the backward reads it,
/// with `x` as ds.
#[allow(clippy::too_many_arguments)]
fn norm_pass<Kind: NormKind>(
    plan: &NormPlan<f32, Kind, 2>,
    st: &Stream,
    [x, dy]: [TensorRef<'_, f32, 2>; 2],
    w: TensorRef<'_, f32, 1>,
    extra: NormExtra<'_, '_>,
    [y, dx, dw]: [&mut DeviceBuffer<f32>; 3],
    stats: &mut DeviceSliceMut<'_, u8>,
    ws: &mut DeviceSliceMut<'_, u8>,
) -> Result<()> {
    let (bias, mut sum) = extra;
    let (b, db) = bias.unzip();
    let args = NormArgs {
        x,
        weight: Some(w),
        bias: b,
        residual: sum.is_some().then_some(dy),
        sum: sum.as_deref_mut().map(|s| view_mut(s, NORM)).transpose()?,
        y: view_mut(y, NORM)?,
        stats: Some(stats.reborrow()),
    };
    plan.run(st, Workspace::None, args)?;
    let args = NormBwArgs {
        x: match sum.as_deref() {
            Some(s) => view(s, NORM)?,
            None => x,
        },
        weight: Some(w),
        stats: stats.as_const(),
        dy,
        ds: sum.is_some().then_some(x),
        dx: Some(view_mut(dx, NORM)?),
        dweight: Some(view_mut(dw, [NORM[1]])?),
        dbias: db.map(|d| view_mut(d, [NORM[1]])).transpose()?,
    };
    plan.run_bw(st, Workspace::Borrowed(ws.reborrow()), args)
}

// ---------------------------------------------------------------------------
// Attention
// ---------------------------------------------------------------------------

/// RoPE forward and backward: NeoX over whole heads with the sequence
/// index, GPT-J over half of each head with given positions.
struct Attention {
    neox: RopePlan<f32>,
    gptj: RopePlan<f32>,
    x: DeviceBuffer<f32>,
    dy: DeviceBuffer<f32>,
    pos: DeviceBuffer<i64>,
}

/// `[batch, seq, heads, head_dim]` of the rotated tensor.
const ROPE: [usize; 4] = [2, 64, 4, 64];

impl Attention {
    fn new() -> Result<Self> {
        let st = &gpu().stream;
        let pref = deterministic();
        let d = RopeDescriptor::new(ElementKind::F32, ROPE, 10000.0);
        let pos: Vec<i64> = (0..ROPE[0] * ROPE[1])
            .map(|i| (i * 37 % 5000) as i64)
            .collect();
        Ok(Attention {
            neox: RopePlan::select(st, &d, &pref)?,
            gptj: RopePlan::select(
                st,
                &d.with_style(RopeStyle::GptJ).with_rotary_dim(ROPE[3] / 2),
                &pref,
            )?,
            x: input(elems(&ROPE), 30)?,
            dy: input(elems(&ROPE), 31)?,
            pos: DeviceBuffer::from_host(st, &pos)?,
        })
    }
}

impl Exercise for Attention {
    fn outputs(&self) -> (Vec<usize>, usize) {
        (vec![elems(&ROPE); 4], 0)
    }
    fn enqueue(&self, st: &Stream, out: &mut Outs) -> Result<()> {
        let (_, mut parts) = out.parts();
        let (x, dy) = (view(&self.x, ROPE)?, view(&self.dy, ROPE)?);
        let pos = TensorRef::contiguous(self.pos.as_slice(), [ROPE[0], ROPE[1]])?;
        for (plan, positions) in [(&self.neox, None), (&self.gptj, Some(pos))] {
            let [y, dx] = parts.take()?;
            let args = RopeArgs {
                x,
                positions,
                table: None,
                y: view_mut(y, ROPE)?,
            };
            plan.run(st, Workspace::None, args)?;
            let args = RopeBwArgs {
                dy,
                positions,
                table: None,
                dx: view_mut(dx, ROPE)?,
            };
            plan.run_bw(st, Workspace::None, args)?;
        }
        Ok(())
    }
}

/// Causal GQA attention in bf16 (cuDNN) forward, with its logsumexp, and
/// backward with every gradient.
struct Sdpa {
    plan: SdpaPlan<bf16>,
    q: DeviceBuffer<bf16>,
    k: DeviceBuffer<bf16>,
    v: DeviceBuffer<bf16>,
    d_o: DeviceBuffer<bf16>,
}

/// `[batch, heads, seq, head_dim]` of Q (and O); K and V have
/// [`SDPA_KV_HEADS`] heads.
const SDPA_Q: [usize; 4] = [2, 4, 96, 64];
/// Heads of K and V.
const SDPA_KV_HEADS: usize = 2;

impl Sdpa {
    fn new() -> Result<Self> {
        let [b, h, s, d] = SDPA_Q;
        let mut desc = SdpaDescriptor::new(ElementKind::Bf16, b, h, SDPA_KV_HEADS, s, s, d);
        desc.causal = Some(CausalAlign::TopLeft);
        let kv = b * SDPA_KV_HEADS * s * d;
        Ok(Sdpa {
            plan: SdpaPlan::select(&gpu().stream, &desc, &deterministic())?,
            q: input_as(elems(&SDPA_Q), 40, 1.0)?,
            k: input_as(kv, 41, 1.0)?,
            v: input_as(kv, 42, 1.0)?,
            d_o: input_as(elems(&SDPA_Q), 43, 1.0)?,
        })
    }
}

impl Exercise for Sdpa {
    fn outputs(&self) -> (Vec<usize>, usize) {
        let ws = self
            .plan
            .workspace_size()
            .max(self.plan.bw_workspace_size(Grad::Q | Grad::K | Grad::V));
        (vec![SDPA_Q[0] * SDPA_Q[1] * SDPA_Q[2]], ws)
    }
    fn raw_outputs(&self) -> Vec<Raw> {
        let kv = elems(&SDPA_Q) / SDPA_Q[1] * SDPA_KV_HEADS;
        [elems(&SDPA_Q), elems(&SDPA_Q), kv, kv]
            .into_iter()
            .map(Raw::of::<bf16>)
            .collect()
    }
    fn enqueue(&self, st: &Stream, out: &mut Outs) -> Result<()> {
        let (ws, mut parts) = out.parts();
        let [b, h, s, d] = SDPA_Q;
        let kv = [b, SDPA_KV_HEADS, s, d];
        let (q, k, v) = (
            view(&self.q, SDPA_Q)?,
            view(&self.k, kv)?,
            view(&self.v, kv)?,
        );
        let mut o = parts.take_raw::<bf16, 4>(SDPA_Q)?;
        let [lse] = parts.take()?;
        let mut lse = view_mut(lse, [b, h, s])?;
        let args = SdpaArgs {
            q,
            k,
            v,
            bias: None,
            o: o.reborrow(),
            lse: Some(lse.reborrow()),
        };
        self.plan.run(st, borrowed(ws), args)?;
        let args = SdpaBwArgs {
            q,
            k,
            v,
            o: o.as_const(),
            lse: lse.as_const(),
            bias: None,
            d_o: view(&self.d_o, SDPA_Q)?,
            dq: Some(parts.take_raw(SDPA_Q)?),
            dk: Some(parts.take_raw(kv)?),
            dv: Some(parts.take_raw(kv)?),
        };
        self.plan.run_bw(st, borrowed(ws), args)
    }
}
