//! GPU tests of [`ArgReducePlan`]: argmax and argmin (indices only), max
//! and min with indices (values, indices and the values' backward),
//! against `reference::reduce::arg_reduce`. Indices, values and gradients
//! are exact, so every comparison is.
//!
//! Samples: long rows that split over blocks (the 16-byte path, aligned
//! and misaligned), rows with tails, columns (dim 0), middle dims, all
//! dims of contiguous and transposed tensors, broadcast (stride 0, where
//! every element ties with its copies), strided outputs, keepdim, size-1
//! and empty outputs, rank 8, ties (values on a grid) and NaN, and the
//! vocabulary-argmax shape. Every row also claims i32 and i64: the same
//! samples on integer values (over the dtype's range, ties in [-3, 3],
//! the dtype's limits where the floats hold NaN); the values keep the
//! dtype, and the integer backward must be `Unsupported`.

use baracuda_kernels::reference::reduce as r;
use baracuda_kernels::*;

use crate::harness::*;
use crate::reduce::{
    by_ranks, nan_marked, out_layout, reduced_shape, split_workspace_checks, view_result, x_layout,
    Layout,
};
use crate::table::{BadInputs, OpCase, Tensors};

/// Special values a sample's input holds.
#[derive(Copy, Clone, Debug, PartialEq)]
pub enum Values {
    /// Random in [-2, 2).
    Random,
    /// On a grid of 0.5 (many ties).
    Ties,
    /// NaN at every 13th element (several per output), the rest random.
    Nan,
}

/// One problem of a row.
#[derive(Clone, Debug)]
pub struct ArgSample {
    op: ArgReduceOp,
    with_values: bool,
    shape: Vec<usize>,
    dim: Option<usize>,
    keepdim: bool,
    layout: Layout,
    values: Values,
    /// The integer dtype the values are drawn for (i32, i64), or None.
    int: Option<ElementKind>,
}

impl ArgSample {
    fn reduced(&self) -> Vec<bool> {
        (0..self.shape.len())
            .map(|d| self.dim.is_none_or(|r| r == d))
            .collect()
    }
    fn out_shape(&self) -> Vec<usize> {
        reduced_shape(
            &self.shape,
            |d| self.dim.is_none_or(|r| r == d),
            self.keepdim,
        )
    }
    fn descriptor<const N: usize>(&self, element: ElementKind) -> ArgReduceDescriptor<N> {
        let d =
            ArgReduceDescriptor::new(self.op, element, arr(&self.shape)).with_keepdim(self.keepdim);
        match self.dim {
            Some(dim) => d.with_dim(dim),
            None => d,
        }
    }
}

/// The row of `ArgReduceOp::ALL[OP]`, with the values (and backward) or
/// the indices only.
pub const fn row<const OP: usize, const VALUES: bool>(name: &'static str) -> OpCase<ArgSample> {
    OpCase {
        name,
        dtypes: NUMERIC,
        backward: VALUES,
        samples: |kind| samples(ArgReduceOp::ALL[OP], VALUES, kind),
        inputs,
        run,
        reference,
        tolerance: |_, _, _, _, _| Tolerance::EXACT,
        bad_inputs,
        unsupported: |kind| unsupported(ArgReduceOp::ALL[OP], kind),
    }
}

/// The index reductions' rows of the op table.
pub(crate) static ROWS: &[&dyn crate::table::Row] = &[
    &row::<0, false>("reduce_argmax"),
    &row::<1, false>("reduce_argmin"),
    &row::<0, true>("reduce_max_indices"),
    &row::<1, true>("reduce_min_indices"),
];

crate::table_tests!(
    ROWS;
    reduce_argmax,
    reduce_argmin,
    reduce_max_indices,
    reduce_min_indices,
);

fn samples(op: ArgReduceOp, with_values: bool, kind: ElementKind) -> Vec<ArgSample> {
    use Layout::*;
    let s = |shape: &[usize], dim: Option<usize>, layout| ArgSample {
        op,
        with_values,
        shape: shape.to_vec(),
        dim,
        keepdim: false,
        layout,
        values: Values::Random,
        int: (!kind.is_float()).then_some(kind),
    };
    let keep = |mut x: ArgSample| {
        x.keepdim = true;
        x
    };
    let with = |mut x: ArgSample, v| {
        x.values = v;
        x
    };
    vec![
        // one long vector, all dims: split over many blocks, then combined
        s(&[1_000_003], None, Contiguous),
        // long rows with tails: split, 16-byte loads, and misaligned
        s(&[3, 70_001], Some(1), Contiguous),
        s(&[5, 33_333], Some(1), Misaligned),
        keep(s(&[37, 1029], Some(1), Contiguous)),
        s(&[300, 7], Some(1), StridedOut),
        // columns and middle dims
        s(&[4097, 67], Some(0), StridedOut),
        s(&[20_000, 8], Some(0), Contiguous),
        s(&[3, 50, 9], Some(1), Contiguous),
        keep(s(&[6, 50, 70], Some(1), Transposed)),
        // all dims of a contiguous and of a transposed tensor (the index
        // counts row-major whatever the strides)
        s(&[5, 6, 7], None, Contiguous),
        keep(s(&[6, 50, 70], None, Transposed)),
        s(&[64, 4099], None, Misaligned),
        // broadcast: along the stride-0 dim (all copies tie) and across it
        s(&[8, 300], Some(0), Broadcast),
        s(&[8, 300], Some(1), Broadcast),
        s(&[8, 300], None, Broadcast),
        // size 1, rank 8, an empty output
        s(&[1, 1], None, Contiguous),
        s(&[4, 1, 3], Some(1), Contiguous),
        keep(s(&[4, 1, 3], Some(2), Contiguous)),
        keep(s(&[2, 3, 1, 2, 3, 2, 1, 5], Some(4), Contiguous)),
        s(&[0, 7], Some(1), Contiguous),
        // ties and NaN
        with(s(&[16, 40], Some(1), Contiguous), Values::Ties),
        with(s(&[40, 16], Some(0), Contiguous), Values::Ties),
        with(s(&[2, 20_000], Some(1), Contiguous), Values::Ties),
        with(s(&[6, 33], Some(1), Contiguous), Values::Nan),
        with(s(&[33, 6], Some(0), Contiguous), Values::Nan),
        with(s(&[4, 9000], None, Contiguous), Values::Nan),
        // realistic: next-token argmax over a vocabulary; rows of a hidden
        // state
        s(&[16, 128_256], Some(1), Contiguous),
        s(&[1024, 4096], Some(1), Contiguous),
    ]
}

/// x (logical, row-major) and dv.
fn inputs(s: &ArgSample, rng: &mut Rng) -> Tensors {
    let n: usize = s.shape.iter().product();
    let n_out: usize = s.out_shape().iter().product();
    let mut x = match s.int {
        Some(kind) if s.values == Values::Ties => int_values(kind, IntDraw::Small, n, rng),
        Some(kind) => int_values(kind, IntDraw::Wide, n, rng),
        None => rng.vec(n, -2.0, 2.0),
    };
    if s.layout == Layout::Broadcast {
        let inner = n / s.shape[0].max(1);
        for i in inner..n {
            x[i] = x[i % inner];
        }
    }
    match (s.values, s.int) {
        (Values::Random, _) => {}
        (Values::Ties, _) => x.iter_mut().for_each(|v| *v = (*v * 2.0).round() / 2.0),
        (Values::Nan, None) => x.iter_mut().step_by(13).for_each(|v| *v = f64::NAN),
        // integers: the dtype's limits in turn (each several times per output)
        (Values::Nan, Some(kind)) => {
            let (min, max) = int_limits(kind);
            for (k, v) in x.iter_mut().step_by(13).enumerate() {
                *v = if k % 2 == 0 { max } else { min };
            }
        }
    }
    let mut t = Tensors::default();
    t.push("x", x);
    t.push("dv", rng.vec(n_out, -1.0, 1.0));
    t
}

fn reference(_: ElementKind, s: &ArgSample, inputs: &Tensors, got: &Tensors) -> Tensors {
    let red = s.reduced();
    let (v, i) = r::arg_reduce(s.op, &s.shape, &red, inputs.get("x"));
    let mut t = Tensors::default();
    if s.with_values {
        t.push("values", nan_marked(v));
    }
    if got.find("dx").is_some() {
        // the gradient routed to the indices the device returned
        t.push(
            "dx",
            r::arg_reduce_backward(&s.shape, &red, got.get("indices"), inputs.get("dv")),
        );
    }
    t.push("indices", i);
    t
}

fn run(
    kind: ElementKind,
    s: &ArgSample,
    inputs: &Tensors,
    backward: bool,
) -> Result<Tensors, String> {
    let m = s.out_shape().len();
    crate::with_numeric!(kind, T => by_ranks!(s.shape.len(), m, N, M => run_ranked::<T, N, M>(s, inputs, backward)))
}

fn run_ranked<T: Element, const N: usize, const M: usize>(
    s: &ArgSample,
    inputs: &Tensors,
    backward: bool,
) -> Result<Tensors, String> {
    let g = gpu();
    let what = format!("{} {} {:?} dim {:?}", s.op.name(), T::KIND, s.shape, s.dim);
    let plan =
        select::<ArgReducePlan<T, N, M>>(&s.descriptor::<N>(T::KIND), &PlanPreference::default())?;
    let (xs, x_len, x_off) = x_layout(s.layout, &s.shape);
    let xbuf = upload_strided::<T>(inputs.get("x"), &s.shape, &xs, x_len, x_off);
    let x = xbuf.view::<N>(&s.shape)?;
    let out_shape = s.out_shape();
    let (os, o_len) = out_layout(s.layout, &out_shape);
    let mut ws = workspace(plan.workspace_size());
    let mut values = operand_if(s.with_values, || Guarded::<T>::new(o_len));
    let mut indices = Guarded::<i64>::new(o_len);
    let values_view = if s.with_values {
        Some(
            TensorMut::new(values.slice_mut(), arr::<M>(&out_shape), arr::<M>(&os))
                .map_err(|e| e.to_string())?,
        )
    } else {
        None
    };
    plan.run(
        &g.stream,
        Workspace::Borrowed(ws.as_slice_mut()),
        ArgReduceArgs {
            x,
            values: values_view,
            indices: TensorMut::new(indices.slice_mut(), arr::<M>(&out_shape), arr::<M>(&os))
                .map_err(|e| e.to_string())?,
        },
    )
    .map_err(|e| format!("{what}: {e}"))?;
    let mut t = Tensors::default();
    t.push("indices", view_result(&what, &indices, &out_shape, &os)?);
    if !s.with_values {
        values.untouched(&format!("{what}: values not asked"))?;
        return Ok(t);
    }
    t.push(
        "values",
        nan_marked(view_result(&what, &values, &out_shape, &os)?),
    );
    if !backward {
        return Ok(t);
    }
    if s.int.is_some() {
        // no gradient of integer values
        let dv = TensorRef::new(values.slice(), arr::<M>(&out_shape), arr::<M>(&os))
            .map_err(|e| e.to_string())?;
        let idx = TensorRef::new(indices.slice(), arr::<M>(&out_shape), arr::<M>(&os))
            .map_err(|e| e.to_string())?;
        let mut dx = Guarded::<T>::new(s.shape.iter().product());
        let r = plan.run_bw(
            &g.stream,
            Workspace::None,
            ArgReduceBwArgs {
                indices: idx,
                dv,
                dx: TensorMut::contiguous(dx.slice_mut(), arr::<N>(&s.shape))
                    .map_err(|e| e.to_string())?,
            },
        );
        expect_err(&format!("{what} backward"), r, crate::harness::unsupported)?;
        dx.untouched(&format!("{what} backward"))?;
        return Ok(t);
    }
    let (dv, _) = upload::<T>(inputs.get("dv"));
    let dv = TensorRef::new(
        dv.as_slice(),
        arr::<M>(&out_shape),
        arr::<M>(&contiguous(&out_shape)),
    )
    .map_err(|e| e.to_string())?;
    let (dxs, dx_len) = out_layout(s.layout, &s.shape);
    let mut dx = Guarded::<T>::new(dx_len);
    let idx = TensorRef::new(indices.slice(), arr::<M>(&out_shape), arr::<M>(&os))
        .map_err(|e| e.to_string())?;
    plan.run_bw(
        &g.stream,
        Workspace::None,
        ArgReduceBwArgs {
            indices: idx,
            dv,
            dx: TensorMut::new(dx.slice_mut(), arr::<N>(&s.shape), arr::<N>(&dxs))
                .map_err(|e| e.to_string())?,
        },
    )
    .map_err(|e| format!("{what} backward: {e}"))?;
    t.push(
        "dx",
        view_result(&format!("{what} dx"), &dx, &s.shape, &dxs)?,
    );
    Ok(t)
}

/// Every select and run check, each returning its error and writing
/// nothing.
fn bad_inputs() -> Result<usize, String> {
    let g = gpu();
    let mut b = BadInputs::default();
    let pref = PlanPreference::default();
    let desc = ArgReduceDescriptor::new(ArgReduceOp::Max, ElementKind::F32, [4, 96]).with_dim(1);
    let sel = |d: &ArgReduceDescriptor<2>, p: &PlanPreference| {
        ArgReducePlan::<f32, 2, 1>::select(&g.stream, d, p)
    };
    let f64_desc = ArgReduceDescriptor {
        element: ElementKind::F64,
        ..desc
    };
    b.own_kernel_select::<ArgReducePlan<f32, 2, 1>>(&desc, &f64_desc)?;
    b.expect(
        "dim 2 of rank 2",
        sel(&desc.with_dim(2), &pref),
        invalid_descriptor("dim"),
        &[],
    )?;
    b.expect(
        "keepdim, rank-1 outputs",
        sel(&desc.with_keepdim(true), &pref),
        invalid_descriptor("keepdim"),
        &[],
    )?;
    b.expect(
        "all dims, rank-1 outputs",
        sel(&ArgReduceDescriptor { dim: None, ..desc }, &pref),
        invalid_descriptor("keepdim"),
        &[],
    )?;
    let empty = ArgReduceDescriptor::new(ArgReduceOp::Max, ElementKind::F32, [4, 0]).with_dim(1);
    b.expect(
        "over an empty dim",
        sel(&empty, &pref),
        invalid_argument("desc.shape"),
        &[],
    )?;

    // A split reduction needs a workspace.
    let long = ArgReduceDescriptor::new(ArgReduceOp::Max, ElementKind::F32, [4, 65536]).with_dim(1);
    let mut rng = Rng::new(0xA16);
    split_workspace_checks(
        &mut b,
        "argmax",
        &mut rng,
        |p| sel(&long, p),
        |b, plan, x| {
            let mut idx = Guarded::<i64>::new(4);
            let indices = TensorMut::contiguous(idx.slice_mut(), [4]).map_err(|e| e.to_string())?;
            let args = ArgReduceArgs {
                x,
                values: None,
                indices,
            };
            let r = plan.run(&g.stream, Workspace::None, args);
            b.expect("no workspace", r, workspace_too_small, &[&idx])
        },
    )?;

    let plan = sel(&desc, &pref).map_err(|e| e.to_string())?;
    let (xb, _) = upload::<f32>(&rng.vec(4 * 96, -1.0, 1.0));
    let x = TensorRef::contiguous(xb.as_slice(), [4, 96]).map_err(|e| e.to_string())?;
    let x3 = TensorRef::contiguous(xb.as_slice(), [3, 96]).map_err(|e| e.to_string())?;
    let mut vals = Guarded::<f32>::new(5);
    let mut idx = Guarded::<i64>::new(4);

    let r = run_plan(
        &plan,
        x3,
        None,
        TensorMut::contiguous(idx.slice_mut(), [4]).map_err(|e| e.to_string())?,
    );
    b.expect("x [3, 96]", r, shape_mismatch("x"), &[&idx])?;
    let mut idx5 = Guarded::<i64>::new(5);
    let r = run_plan(
        &plan,
        x,
        None,
        TensorMut::contiguous(idx5.slice_mut(), [5]).map_err(|e| e.to_string())?,
    );
    b.expect("indices [5]", r, shape_mismatch("indices"), &[&idx5])?;
    let r = run_plan(
        &plan,
        x,
        Some(TensorMut::contiguous(vals.slice_mut(), [5]).map_err(|e| e.to_string())?),
        TensorMut::contiguous(idx.slice_mut(), [4]).map_err(|e| e.to_string())?,
    );
    b.expect("values [5]", r, shape_mismatch("values"), &[&idx, &vals])?;
    // values inside x's memory
    let shared = Guarded::<f32>::new(4 * 96);
    let xs = TensorRef::contiguous(shared.slice(), [4, 96]).map_err(|e| e.to_string())?;
    let sh = shared.slice();
    // SAFETY: a bad-input test: the run must reject the aliasing view
    // before anything is enqueued, so nothing reads or writes through it.
    let alias = unsafe { DeviceSliceMut::<f32>::from_raw_parts(sh.addr() + 16, 4, sh.ctx_id()) };
    let r = run_plan(
        &plan,
        xs,
        Some(TensorMut::contiguous(alias, [4]).map_err(|e| e.to_string())?),
        TensorMut::contiguous(idx.slice_mut(), [4]).map_err(|e| e.to_string())?,
    );
    b.expect(
        "values overlapping x",
        r,
        invalid_argument("values"),
        &[&shared, &idx],
    )?;

    // Backward.
    let (dvb, _) = upload::<f32>(&rng.vec(4, -1.0, 1.0));
    let dv = TensorRef::contiguous(dvb.as_slice(), [4]).map_err(|e| e.to_string())?;
    let (ib, _) = upload::<i64>(&[0.0, 1.0, 2.0, 3.0]);
    let iv = TensorRef::contiguous(ib.as_slice(), [4]).map_err(|e| e.to_string())?;
    let mut dx5 = Guarded::<f32>::new(5 * 96);
    let r = plan.run_bw(
        &g.stream,
        Workspace::None,
        ArgReduceBwArgs {
            indices: iv,
            dv,
            dx: TensorMut::contiguous(dx5.slice_mut(), [5, 96]).map_err(|e| e.to_string())?,
        },
    );
    b.expect("dx [5, 96]", r, shape_mismatch("dx"), &[&dx5])?;
    let dv3 = TensorRef::contiguous(dvb.as_slice(), [3]).map_err(|e| e.to_string())?;
    let mut dx = Guarded::<f32>::new(4 * 96);
    let r = plan.run_bw(
        &g.stream,
        Workspace::None,
        ArgReduceBwArgs {
            indices: iv,
            dv: dv3,
            dx: TensorMut::contiguous(dx.slice_mut(), [4, 96]).map_err(|e| e.to_string())?,
        },
    );
    b.expect("dv [3]", r, shape_mismatch("dv"), &[&dx])?;
    b.done()
}

/// `plan.run` without a workspace.
fn run_plan<'a>(
    plan: &ArgReducePlan<f32, 2, 1>,
    x: TensorRef<'a, f32, 2>,
    values: Option<TensorMut<'a, f32, 1>>,
    indices: TensorMut<'a, i64, 1>,
) -> baracuda_kernels::Result<()> {
    plan.run(
        &gpu().stream,
        Workspace::None,
        ArgReduceArgs { x, values, indices },
    )
}

/// Selecting `op` on `kind`, which no row claims, is `Unsupported`.
fn unsupported(op: ArgReduceOp, kind: ElementKind) -> Result<(), String> {
    crate::with_element!(kind, T => {
        let desc = ArgReduceDescriptor::new(op, kind, [8, 3]).with_dim(1);
        expect_unsupported::<ArgReducePlan<T, 2, 1>>(&format!("{} on {kind}", op.name()), &desc)
    })
}
