//! GPU tests of LocalResponseNorm: the `local_response_norm` row of the
//! norm family's op table, against `reference::norm::LocalResponseNorm`.
//!
//! Samples: window sizes 1, 2 (even: one channel before, none after), 3,
//! 5 and wider than the channels, both layouts, ranks 3 to 5, odd extents,
//! several alpha, beta and k, an empty batch, NaN and infinities
//! (forward), and (bf16) AlexNet's [32, 96, 55, 55] with size 5. Each
//! sample checks y and dx and that nothing outside the views was written.

use baracuda_kernels::reference::norm::LocalResponseNorm;
use baracuda_kernels::*;

use crate::harness::*;
use crate::norm::affine_tolerance;
use crate::reduce::{nan_marked, view_result};
use crate::table::{BadInputs, OpCase, Tensors};

/// One LocalResponseNorm problem.
#[derive(Clone, Debug)]
pub struct LrnSample {
    shape: Vec<usize>,
    size: usize,
    alpha: f64,
    beta: f64,
    k: f64,
    layout: ConvLayout,
    /// NaN and infinities in x (forward only).
    special: bool,
}

impl LrnSample {
    fn reference(&self) -> LocalResponseNorm {
        LocalResponseNorm {
            batch: self.shape[0],
            channels: self.shape[1],
            spatial: self.shape[2..].iter().product(),
            size: self.size,
            alpha: self.alpha,
            beta: self.beta,
            k: self.k,
        }
    }
    fn descriptor<const R: usize>(&self, kind: ElementKind) -> LocalResponseNormDescriptor<R> {
        let shape: [usize; R] = std::array::from_fn(|i| self.shape[i]);
        LocalResponseNormDescriptor::local_response_norm(kind, shape, self.size)
            .with_constants(self.alpha, self.beta, self.k)
            .with_layout(self.layout)
    }
    fn strides(&self) -> Vec<usize> {
        strides_of(&self.shape, self.layout)
    }
}

/// Dense strides of a logical `[n, c, spatial...]` shape in `layout`.
fn strides_of(shape: &[usize], layout: ConvLayout) -> Vec<usize> {
    match layout {
        ConvLayout::ChannelsFirst => contiguous(shape),
        ConvLayout::ChannelsLast => {
            let mut st = vec![1; shape.len()];
            let mut acc = shape[1];
            for a in (2..shape.len()).rev() {
                st[a] = acc;
                acc *= shape[a];
            }
            st[0] = acc;
            st
        }
    }
}

/// The row.
pub const ROW: OpCase<LrnSample> = OpCase {
    name: "local_response_norm",
    dtypes: FLOATS,
    backward: true,
    samples,
    inputs,
    run,
    reference,
    tolerance,
    bad_inputs,
    unsupported: unsupported_dtype,
};

fn samples(kind: ElementKind) -> Vec<LrnSample> {
    use ConvLayout::{ChannelsFirst as Cf, ChannelsLast as Cl};
    let s = |shape: &[usize], size, layout| LrnSample {
        shape: shape.to_vec(),
        size,
        alpha: 1e-4,
        beta: 0.75,
        k: 1.0,
        layout,
        special: false,
    };
    // constants that make the window matter
    let strong = |mut x: LrnSample| {
        x.alpha = 0.5;
        x.beta = 0.6;
        x.k = 2.0;
        x
    };
    let mut special = strong(s(&[3, 6, 4], 3, Cf));
    special.special = true;
    let mut v = vec![
        strong(s(&[2, 7, 5], 3, Cf)),
        strong(s(&[2, 7, 5], 3, Cl)),
        strong(s(&[2, 6, 3, 3], 2, Cf)),
        strong(s(&[2, 6, 3, 3], 2, Cl)),
        strong(s(&[1, 4, 2, 3, 2], 5, Cf)),
        strong(s(&[1, 4, 2, 3, 2], 4, Cl)),
        strong(s(&[3, 3, 7], 1, Cf)),
        strong(s(&[2, 3, 5], 9, Cl)),
        s(&[2, 16, 9, 11], 5, Cf),
        s(&[0, 4, 3], 3, Cf),
        special,
    ];
    if kind == ElementKind::Bf16 {
        v.push(s(&[32, 96, 55, 55], 5, Cf));
    }
    v
}

/// x (logical channels-first order) and dy.
fn inputs(s: &LrnSample, rng: &mut Rng) -> Tensors {
    let n: usize = s.shape.iter().product();
    let mut x = rng.vec(n, -2.0, 2.0);
    if s.special {
        let sp: usize = s.shape[2..].iter().product();
        x[1] = f64::NAN;
        x[sp + 2] = f64::INFINITY;
        x[3 * sp] = f64::NEG_INFINITY;
    }
    let mut t = Tensors::default();
    t.push("x", x);
    t.push("dy", rng.vec(n, -1.0, 1.0));
    t
}

fn reference(_: ElementKind, s: &LrnSample, inputs: &Tensors, got: &Tensors) -> Tensors {
    let r = s.reference();
    let x = inputs.get("x");
    let mut t = Tensors::default();
    t.push("y", nan_marked(r.forward(x)));
    if got.find("dx").is_some() {
        t.push("dx", r.backward(x, inputs.get("dy")));
    }
    t
}

fn tolerance(kind: ElementKind, s: &LrnSample, name: &str, want: &[f64], _: &Tensors) -> Tolerance {
    let terms = (s.size * s.size) as f64;
    affine_tolerance(kind, name, (terms + 2.0).log2(), terms, want)
}

// ---------------------------------------------------------------------------
// Device runs
// ---------------------------------------------------------------------------

fn run(
    kind: ElementKind,
    s: &LrnSample,
    inputs: &Tensors,
    backward: bool,
) -> Result<Tensors, String> {
    crate::with_float!(kind, T => match s.shape.len() {
        3 => run_ranked::<T, 3>(s, inputs, backward),
        4 => run_ranked::<T, 4>(s, inputs, backward),
        5 => run_ranked::<T, 5>(s, inputs, backward),
        other => Err(format!("no test instance for rank {other}")),
    })
}

fn run_ranked<T: Element, const R: usize>(
    s: &LrnSample,
    inputs: &Tensors,
    backward: bool,
) -> Result<Tensors, String> {
    let g = gpu();
    let what = format!(
        "local_response_norm {} {:?} size {} {:?}",
        T::KIND,
        s.shape,
        s.size,
        s.layout
    );
    let e = |e: Error| format!("{what}: {e}");
    let v = |e: Error| e.to_string();
    let plan =
        select::<LocalResponseNormPlan<T, R>>(&s.descriptor::<R>(T::KIND), &Default::default())?;
    let shape: [usize; R] = std::array::from_fn(|i| s.shape[i]);
    let st = s.strides();
    let strides: [usize; R] = std::array::from_fn(|i| st[i]);
    let n: usize = s.shape.iter().product();
    let (xbuf, _) = upload::<T>(&scatter(inputs.get("x"), &s.shape, &st, n));
    let x = TensorRef::new(xbuf.as_slice(), shape, strides).map_err(v)?;
    let mut y = Guarded::<T>::new(n);
    plan.run(
        &g.stream,
        Workspace::None,
        LocalResponseNormArgs {
            x,
            y: TensorMut::new(y.slice_mut(), shape, strides).map_err(v)?,
        },
    )
    .map_err(e)?;
    let mut t = Tensors::default();
    t.push("y", nan_marked(view_result(&what, &y, &s.shape, &st)?));
    if !backward || s.special {
        return Ok(t);
    }
    let (dybuf, _) = upload::<T>(&scatter(inputs.get("dy"), &s.shape, &st, n));
    let dy = TensorRef::new(dybuf.as_slice(), shape, strides).map_err(v)?;
    let mut dx = Guarded::<T>::new(n);
    plan.run_bw(
        &g.stream,
        Workspace::None,
        LocalResponseNormBwArgs {
            x,
            dy,
            dx: TensorMut::new(dx.slice_mut(), shape, strides).map_err(v)?,
        },
    )
    .map_err(|e| format!("{what} backward: {e}"))?;
    t.push(
        "dx",
        view_result(&format!("{what} dx"), &dx, &s.shape, &st)?,
    );
    Ok(t)
}

// ---------------------------------------------------------------------------
// Bad inputs and other dtypes
// ---------------------------------------------------------------------------

const BAD_SHAPE: [usize; 3] = [2, 8, 12];

/// Every select and run check, each returning its error and writing
/// nothing.
fn bad_inputs() -> Result<usize, String> {
    let g = gpu();
    let mut b = BadInputs::default();
    let pref = PlanPreference::default();
    let desc = LocalResponseNormDescriptor::local_response_norm(ElementKind::F32, BAD_SHAPE, 3);
    let sel = |d: &LocalResponseNormDescriptor<3>| {
        LocalResponseNormPlan::<f32, 3>::select(&g.stream, d, &pref)
    };
    let f64_desc = LocalResponseNormDescriptor {
        element: ElementKind::F64,
        ..desc
    };
    b.own_kernel_select::<LocalResponseNormPlan<f32, 3>>(&desc, &f64_desc)?;
    let zero = LocalResponseNormDescriptor { size: 0, ..desc };
    b.expect("size 0", sel(&zero), invalid_descriptor("size"), &[])?;
    b.expect(
        "alpha NaN",
        sel(&desc.with_constants(f64::NAN, 0.75, 1.0)),
        invalid_descriptor("alpha"),
        &[],
    )?;
    b.expect(
        "beta infinite",
        sel(&desc.with_constants(1e-4, f64::INFINITY, 1.0)),
        invalid_descriptor("beta"),
        &[],
    )?;
    let rank2 = LocalResponseNormDescriptor::local_response_norm(ElementKind::F32, [2, 8], 3);
    b.expect(
        "rank 2",
        LocalResponseNormPlan::<f32, 2>::select(&g.stream, &rank2, &pref),
        unsupported,
        &[],
    )?;

    let plan = sel(&desc).map_err(|e| e.to_string())?;
    let n: usize = BAD_SHAPE.iter().product();
    let mut rng = Rng::new(0x1A4E);
    let (xb, _) = upload::<f32>(&rng.vec(n, -1.0, 1.0));
    let (dyb, _) = upload::<f32>(&rng.vec(n, -1.0, 1.0));
    let x = TensorRef::contiguous(xb.as_slice(), BAD_SHAPE).map_err(|e| e.to_string())?;
    let dy = TensorRef::contiguous(dyb.as_slice(), BAD_SHAPE).map_err(|e| e.to_string())?;
    let mut y = Guarded::<f32>::new(n);
    let fw = |x: TensorRef<'_, f32, 3>, y: TensorMut<'_, f32, 3>| {
        plan.run(&g.stream, Workspace::None, LocalResponseNormArgs { x, y })
    };
    let x5 = TensorRef::contiguous(xb.as_slice(), [2, 8, 5]).map_err(|e| e.to_string())?;
    let r = fw(x5, yv(&mut y));
    b.expect("x [2, 8, 5]", r, shape_mismatch("x"), &[&y])?;
    let xl = TensorRef::new(xb.as_slice(), BAD_SHAPE, [96, 1, 8]).map_err(|e| e.to_string())?;
    let r = fw(xl, yv(&mut y));
    b.expect("x channels-last", r, invalid_argument("x"), &[&y])?;
    // SAFETY: never dereferenced: run rejects the context first.
    let foreign = unsafe { DeviceSlice::<f32>::from_raw_parts(xb.as_slice().addr(), n, 0xDEAD) };
    let xf = TensorRef::contiguous(foreign, BAD_SHAPE).map_err(|e| e.to_string())?;
    let r = fw(xf, yv(&mut y));
    b.expect(
        "x on another context",
        r,
        |e| matches!(e, Error::ContextMismatch { arg: "x", .. }),
        &[&y],
    )?;
    let xs = xb.as_slice();
    // SAFETY: a bad-input test: the run must reject the aliasing view
    // before anything is enqueued.
    let alias = unsafe { DeviceSliceMut::<f32>::from_raw_parts(xs.addr(), n, xs.ctx_id()) };
    let r = fw(x, TensorMut::contiguous(alias, BAD_SHAPE).expect("alias"));
    b.expect("y over x", r, invalid_argument("y"), &[])?;
    let bw = |dx| {
        plan.run_bw(
            &g.stream,
            Workspace::None,
            LocalResponseNormBwArgs { x, dy, dx },
        )
    };
    let dys = dyb.as_slice();
    // SAFETY: as above.
    let alias = unsafe { DeviceSliceMut::<f32>::from_raw_parts(dys.addr(), n, dys.ctx_id()) };
    let r = bw(TensorMut::contiguous(alias, BAD_SHAPE).expect("alias"));
    b.expect("dx over dy", r, invalid_argument("dx"), &[])?;
    let mut dx13 = Guarded::<f32>::new(2 * 8 * 13);
    let r = bw(TensorMut::contiguous(dx13.slice_mut(), [2, 8, 13]).expect("dx"));
    b.expect("dx [2, 8, 13]", r, shape_mismatch("dx"), &[&dx13])?;
    b.done()
}

/// `y` as a `BAD_SHAPE` view.
fn yv(y: &mut Guarded<f32>) -> TensorMut<'_, f32, 3> {
    TensorMut::contiguous(y.slice_mut(), BAD_SHAPE).expect("y")
}

/// Selecting on `kind`, which the row does not claim, is `Unsupported`.
fn unsupported_dtype(kind: ElementKind) -> Result<(), String> {
    crate::with_element!(kind, T => {
        let desc = LocalResponseNormDescriptor::local_response_norm(kind, [2, 4, 3], 2);
        expect_unsupported::<LocalResponseNormPlan<T, 3>>(
            &format!("local_response_norm on {kind}"),
            &desc,
        )
    })
}
