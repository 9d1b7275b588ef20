//! GPU tests of [`LogicalReducePlan`]: all, any and count_nonzero over
//! every input dtype the plan takes, against
//! `reference::reduce::logical_reduce`, exactly (the outputs are booleans
//! and counts).
//!
//! Samples: long rows that split over blocks (16-byte loads, aligned and
//! misaligned), rows with tails, columns (dim 0, split), middle dims, all
//! dims of contiguous and transposed tensors, broadcast (stride 0),
//! strided outputs, keepdim, no reduced dim, size-1 dims, empty outputs
//! and empty reductions, rank 8, NaN, ±inf, -0.0 and subnormals, inputs
//! with no zero at all (all true), and two realistic mask shapes.
//!
//! The bool outputs live in `Guarded<u8>` buffers viewed as bool, so the
//! poison (0xFF, not a valid bool) is only ever read back as u8.

use baracuda_kernels::reference::reduce as r;
use baracuda_kernels::*;

use crate::harness::*;
use crate::reduce::{
    by_ranks, out_layout, reduced_shape, split_workspace_checks, view_result, x_layout,
    xy_run_checks, Layout,
};
use crate::table::{BadInputs, OpCase, Tensors};

/// Which elements of a sample's input are zero.
#[derive(Copy, Clone, Debug, PartialEq)]
pub enum Values {
    /// Half of them; the others in ±[1, 3).
    Half,
    /// One in 64 (long sets are rarely all nonzero, short ones often).
    Rare,
    /// None: every all is true.
    NoZero,
    /// 0, -0.0, NaN, ±inf and 1e-40 (subnormal in f32 and bf16, 0 in f16)
    /// among ordinary values.
    Special,
}

/// One problem of a row.
#[derive(Clone, Debug)]
pub struct LogicalSample {
    op: LogicalReduceOp,
    shape: Vec<usize>,
    dims: Vec<usize>,
    keepdim: bool,
    layout: Layout,
    values: Values,
}

impl LogicalSample {
    fn reduced(&self) -> Vec<bool> {
        (0..self.shape.len())
            .map(|d| self.dims.contains(&d))
            .collect()
    }
    fn out_shape(&self) -> Vec<usize> {
        reduced_shape(&self.shape, |d| self.dims.contains(&d), self.keepdim)
    }
    fn descriptor<const N: usize>(&self, element: ElementKind) -> LogicalReduceDescriptor<N> {
        LogicalReduceDescriptor::new(self.op, element, arr(&self.shape))
            .with_dims(&self.dims)
            .with_keepdim(self.keepdim)
    }
}

/// The row of `LogicalReduceOp::ALL[OP]`.
pub const fn row<const OP: usize>(name: &'static str) -> OpCase<LogicalSample> {
    OpCase {
        name,
        dtypes: &LOGICAL_REDUCE_KINDS,
        backward: false,
        samples: |_| samples(LogicalReduceOp::ALL[OP]),
        inputs,
        run,
        reference,
        tolerance: |_, _, _, _, _| Tolerance::EXACT,
        bad_inputs,
        unsupported: |kind| unsupported(LogicalReduceOp::ALL[OP], kind),
    }
}

/// The logical reductions' rows of the op table.
pub(crate) static ROWS: &[&dyn crate::table::Row] = &[
    &row::<0>("reduce_all"),
    &row::<1>("reduce_any"),
    &row::<2>("reduce_count_nonzero"),
];

crate::table_tests!(ROWS; reduce_all, reduce_any, reduce_count_nonzero);

fn samples(op: LogicalReduceOp) -> Vec<LogicalSample> {
    use Layout::*;
    use Values::*;
    let s = |shape: &[usize], dims: &[usize], layout, values| LogicalSample {
        op,
        shape: shape.to_vec(),
        dims: dims.to_vec(),
        keepdim: false,
        layout,
        values,
    };
    let keep = |mut x: LogicalSample| {
        x.keepdim = true;
        x
    };
    let all3 = [0, 1, 2];
    vec![
        // one long vector: split over many blocks, then combined
        s(&[1_000_003], &[0], Contiguous, Rare),
        s(&[1_000_003], &[0], Contiguous, NoZero),
        // long rows with tails: split, 16-byte loads, and misaligned
        s(&[3, 70_001], &[1], Contiguous, Rare),
        s(&[5, 33_333], &[1], Misaligned, Half),
        keep(s(&[37, 1029], &[1], Contiguous, Rare)),
        s(&[300, 7], &[1], StridedOut, Half),
        s(&[300, 7], &[1], Contiguous, NoZero),
        // columns (split over the reduced rows) and middle dims
        s(&[4097, 67], &[0], StridedOut, Rare),
        s(&[20_000, 8], &[0], Contiguous, Half),
        s(&[20_000, 64], &[0], Contiguous, Rare),
        s(&[3, 50, 9], &[1], Contiguous, Half),
        keep(s(&[6, 50, 70], &[1], Transposed, Rare)),
        s(&[6, 50, 70], &[0, 2], Contiguous, Rare),
        // all dims of contiguous and transposed tensors
        s(&[5, 6, 7], &all3, Contiguous, Rare),
        keep(s(&[6, 50, 70], &all3, Transposed, Half)),
        s(&[64, 4099], &[0, 1], Misaligned, Rare),
        // broadcast: along the stride-0 dim and across it
        s(&[8, 300], &[0], Broadcast, Rare),
        s(&[8, 300], &[1], Broadcast, Half),
        s(&[8, 300], &[0, 1], Broadcast, Rare),
        // size 1, no reduced dim, rank 8
        s(&[1, 1], &[0, 1], Contiguous, Half),
        s(&[4, 1, 3], &[1], Contiguous, Half),
        keep(s(&[4, 1, 3], &[2], Contiguous, Half)),
        s(&[4, 5], &[], Contiguous, Half),
        keep(s(&[2, 3, 1, 2, 3, 2, 1, 5], &[4], Contiguous, Rare)),
        // empty: no output; no element per output (all true, any false,
        // count 0); a scalar over nothing
        s(&[0, 7], &[1], Contiguous, Half),
        s(&[4, 0], &[1], Contiguous, Half),
        keep(s(&[4, 0, 3], &[1], Contiguous, Half)),
        s(&[0], &[0], Contiguous, Half),
        // NaN (nonzero), -0.0 (zero), ±inf, subnormals
        s(&[6, 33], &[1], Contiguous, Special),
        s(&[33, 6], &[0], Contiguous, Special),
        s(&[4, 9000], &[0, 1], Contiguous, Special),
        // realistic: a [batch * heads, seq] mask per row; a column check
        s(&[1024, 4096], &[1], Contiguous, Rare),
        s(&[4096, 1024], &[0], Contiguous, Half),
    ]
}

fn inputs(s: &LogicalSample, rng: &mut Rng) -> Tensors {
    let n: usize = s.shape.iter().product();
    let mut x: Vec<f64> = (0..n)
        .map(|_| {
            let zero = match s.values {
                Values::Half => rng.below(2) == 0,
                Values::Rare => rng.below(64) == 0,
                Values::NoZero => false,
                Values::Special => rng.below(3) == 0,
            };
            if zero {
                return 0.0;
            }
            let v = rng.uniform(1.0, 3.0);
            if rng.below(2) == 0 {
                -v
            } else {
                v
            }
        })
        .collect();
    if s.values == Values::Special {
        let special = [
            -0.0,
            f64::NAN,
            f64::INFINITY,
            f64::NEG_INFINITY,
            1e-40,
            -1e-40,
        ];
        for (i, v) in x.iter_mut().enumerate().filter(|(i, _)| i % 5 == 0) {
            *v = special[(i / 5) % special.len()];
        }
    }
    if s.layout == Layout::Broadcast {
        let inner = n / s.shape[0].max(1);
        for i in inner..n {
            x[i] = x[i % inner];
        }
    }
    let mut t = Tensors::default();
    t.push("x", x);
    t
}

fn reference(_: ElementKind, s: &LogicalSample, inputs: &Tensors, _: &Tensors) -> Tensors {
    let mut t = Tensors::default();
    t.push(
        "y",
        r::logical_reduce(s.op, &s.shape, &s.reduced(), inputs.get("x")),
    );
    t
}

fn run(
    kind: ElementKind,
    s: &LogicalSample,
    inputs: &Tensors,
    _backward: bool,
) -> Result<Tensors, String> {
    let m = s.out_shape().len();
    crate::with_kinds!(kind, I => {
        // the (x, y) ranks the samples use
        by_ranks!(@ s.shape.len(), m, N, M, match (s.op, kind) {
            (LogicalReduceOp::CountNonzero, _) => run_ranked::<I, i64, i64, N, M>(s, inputs),
            (_, ElementKind::U8) => run_ranked::<I, u8, u8, N, M>(s, inputs),
            _ => run_ranked::<I, bool, u8, N, M>(s, inputs),
        }; (1, 0) (2, 0) (2, 1) (2, 2) (3, 0) (3, 1) (3, 2) (3, 3) (8, 8))
    };
        F32 => f32, F64 => f64, F16 => half::f16, Bf16 => half::bf16,
        I8 => i8, U8 => u8, I16 => i16, I32 => i32, I64 => i64, Bool => bool;
        other => Err(format!("{other} is not a logical reduction input"))
    )
}

fn run_ranked<I: Element, O: Element, B: Element, const N: usize, const M: usize>(
    s: &LogicalSample,
    inputs: &Tensors,
) -> Result<Tensors, String> {
    let g = gpu();
    let what = format!(
        "{} {} {:?} dims {:?}",
        s.op.name(),
        I::KIND,
        s.shape,
        s.dims
    );
    let plan = select::<LogicalReducePlan<I, O, N, M>>(
        &s.descriptor::<N>(I::KIND),
        &PlanPreference::default(),
    )?;
    let (xs, x_len, x_off) = x_layout(s.layout, &s.shape);
    let xbuf = upload_strided::<I>(inputs.get("x"), &s.shape, &xs, x_len, x_off);
    let x = xbuf.view::<N>(&s.shape)?;
    let out_shape = s.out_shape();
    let (os, o_len) = out_layout(s.layout, &out_shape);
    let mut ws = workspace(plan.workspace_size());
    let mut y = Guarded::<B>::new(o_len);
    plan.run(
        &g.stream,
        Workspace::Borrowed(ws.as_slice_mut()),
        LogicalReduceArgs {
            x,
            y: TensorMut::new(y.slice_mut_as::<O>(), arr::<M>(&out_shape), arr::<M>(&os))
                .map_err(|e| e.to_string())?,
        },
    )
    .map_err(|e| format!("{what}: {e}"))?;
    let mut t = Tensors::default();
    t.push("y", view_result(&what, &y, &out_shape, &os)?);
    Ok(t)
}

/// Every select and run check, each returning its error and writing
/// nothing.
fn bad_inputs() -> Result<usize, String> {
    let g = gpu();
    let mut b = BadInputs::default();
    let pref = PlanPreference::default();
    let desc = LogicalReduceDescriptor::new(LogicalReduceOp::Any, ElementKind::F32, [4, 96])
        .with_dims(&[1]);
    let sel = |d: &LogicalReduceDescriptor<2>, p: &PlanPreference| {
        LogicalReducePlan::<f32, bool, 2, 1>::select(&g.stream, d, p)
    };
    let f64_desc = LogicalReduceDescriptor {
        element: ElementKind::F64,
        ..desc
    };
    b.own_kernel_select::<LogicalReducePlan<f32, bool, 2, 1>>(&desc, &f64_desc)?;
    let r = LogicalReducePlan::<f32, i64, 2, 1>::select(&g.stream, &desc, &pref);
    b.expect("any with an i64 output", r, dtype_mismatch, &[])?;
    let count = LogicalReduceDescriptor {
        op: LogicalReduceOp::CountNonzero,
        ..desc
    };
    b.expect(
        "count_nonzero with a bool output",
        sel(&count, &pref),
        dtype_mismatch,
        &[],
    )?;
    let u8_desc = LogicalReduceDescriptor {
        element: ElementKind::U8,
        ..desc
    };
    let r = LogicalReducePlan::<u8, bool, 2, 1>::select(&g.stream, &u8_desc, &pref);
    b.expect(
        "any of u8 with a bool output (PyTorch's is u8)",
        r,
        dtype_mismatch,
        &[],
    )?;
    b.expect(
        "dim 2 of rank 2",
        sel(&desc.with_dims(&[2]), &pref),
        invalid_descriptor("dims"),
        &[],
    )?;
    b.expect(
        "keepdim, rank-1 output",
        sel(&desc.with_keepdim(true), &pref),
        invalid_descriptor("keepdim"),
        &[],
    )?;

    // A split reduction needs a workspace.
    let long = LogicalReduceDescriptor::new(LogicalReduceOp::Any, ElementKind::F32, [4, 65536])
        .with_dims(&[1]);
    let mut rng = Rng::new(0x10C);
    split_workspace_checks(
        &mut b,
        "any",
        &mut rng,
        |p| sel(&long, p),
        |b, plan, x| {
            let mut y = Guarded::<u8>::new(4);
            let y_view =
                TensorMut::contiguous(y.slice_mut_as::<bool>(), [4]).map_err(|e| e.to_string())?;
            let r = plan.run(
                &g.stream,
                Workspace::None,
                LogicalReduceArgs { x, y: y_view },
            );
            b.expect("no workspace", r, workspace_too_small, &[&y])
        },
    )?;

    let plan = sel(&desc, &pref).map_err(|e| e.to_string())?;
    let (xb, _) = upload::<f32>(&rng.vec(4 * 96, -1.0, 1.0));
    xy_run_checks::<bool, u8>(&mut b, &xb, |x, y| {
        plan.run(&g.stream, Workspace::None, LogicalReduceArgs { x, y })
    })?;
    b.done()
}

/// Selecting `op` on `kind`, which no row claims, is `Unsupported`.
fn unsupported(op: LogicalReduceOp, kind: ElementKind) -> Result<(), String> {
    crate::with_element!(kind, T => {
        let what = format!("{} on {kind}", op.name());
        let desc = LogicalReduceDescriptor::new(op, kind, [8, 3]).with_dims(&[1]);
        if op == LogicalReduceOp::CountNonzero {
            expect_unsupported::<LogicalReducePlan<T, i64, 2, 1>>(&what, &desc)
        } else {
            expect_unsupported::<LogicalReducePlan<T, bool, 2, 1>>(&what, &desc)
        }
    })
}
