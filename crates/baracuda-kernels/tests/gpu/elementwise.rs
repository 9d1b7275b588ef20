//! GPU tests of the elementwise family: the table rows and their samples.

use baracuda_kernels::reference::elementwise as reference;
use baracuda_kernels::*;

use crate::harness::*;

/// How a sample lays out its operands in memory.
#[derive(Copy, Clone, Debug, PartialEq)]
pub(crate) enum Layout {
    /// Row-major, 16-byte aligned: the vectorised kernel.
    Contiguous,
    /// First input is a transposed view (rank 2 only).
    Transposed,
    /// Output (and gradients) every other element: strided writes; the
    /// elements in between must stay untouched.
    StridedOut,
    /// Every operand starts one element into its buffer: not 16-byte
    /// aligned, so the strided kernel runs.
    Misaligned,
    /// The input is one row read through stride 0 (rank 2; the cast row).
    Broadcast,
}

/// Length, strides and offset of the buffer of an output of logical
/// `shape` laid out as `layout`.
pub(crate) fn output_layout(shape: &[usize], layout: Layout) -> (usize, Vec<usize>, usize) {
    let n: usize = shape.iter().product();
    match layout {
        Layout::StridedOut => (2 * n, contiguous(shape).iter().map(|s| 2 * s).collect(), 0),
        Layout::Misaligned => (n + 1, contiguous(shape), 1),
        _ => (n, contiguous(shape), 0),
    }
}

/// A device operand: buffer, offset of the view's first element, strides,
/// and the host copy of the whole buffer.
pub(crate) struct Operand<T: Element> {
    pub(crate) buf: DeviceBuffer<T>,
    pub(crate) offset: usize,
    pub(crate) strides: Vec<usize>,
    pub(crate) host: Vec<f64>,
}

impl<T: Element> Operand<T> {
    /// An input of logical `shape` filled from `rng` in `[lo, hi)`;
    /// `transposed` stores it column-major (rank 2).
    pub(crate) fn input(
        rng: &mut Rng,
        shape: &[usize],
        layout: Layout,
        transposed: bool,
        lo: f64,
        hi: f64,
    ) -> Self {
        let n: usize = shape.iter().product();
        let offset = usize::from(layout == Layout::Misaligned);
        let (buf, host) = upload::<T>(&rng.vec(n + offset, lo, hi));
        let strides = if transposed && shape.len() == 2 {
            vec![1, shape[0]]
        } else {
            contiguous(shape)
        };
        Operand {
            buf,
            offset,
            strides,
            host,
        }
    }
    /// A NaN-poisoned output of logical `shape`.
    pub(crate) fn output(shape: &[usize], layout: Layout) -> Self {
        let (len, strides, offset) = output_layout(shape, layout);
        Operand {
            buf: poisoned::<T>(len),
            offset,
            strides,
            host: Vec::new(),
        }
    }
    pub(crate) fn view<const N: usize>(&self, shape: &[usize]) -> TensorRef<'_, T, N> {
        let data = self
            .buf
            .as_slice()
            .slice(self.offset..self.buf.len())
            .expect("offset in buffer");
        TensorRef::new(data, arr(shape), arr(&self.strides)).expect("input view")
    }
    pub(crate) fn view_mut<const N: usize>(&mut self, shape: &[usize]) -> TensorMut<'_, T, N> {
        let (_, data) = self
            .buf
            .as_slice_mut()
            .split_at(self.offset)
            .expect("offset in buffer");
        TensorMut::new(data, arr(shape), arr(&self.strides)).expect("output view")
    }
    pub(crate) fn logical(&self, shape: &[usize]) -> Vec<f64> {
        gather(&self.host, self.offset, shape, &self.strides)
    }
    /// Download, check nothing outside the view was written, and return the
    /// view's logical values.
    pub(crate) fn result(&self, what: &str, shape: &[usize]) -> Result<Vec<f64>, String> {
        let all = download(&self.buf);
        let covered: Vec<usize> = view_offsets(shape, &self.strides)
            .iter()
            .map(|o| o + self.offset)
            .collect();
        check_untouched::<T>(what, &all, &covered)?;
        Ok(gather(&all, self.offset, shape, &self.strides))
    }
}

// ---------------------------------------------------------------------------
// Unary
// ---------------------------------------------------------------------------

/// `(shape, layout)` of every unary sample: empty, size 1, tails, several
/// blocks, one realistic large shape, transposed, strided output,
/// misaligned, and rank 8.
pub(crate) fn unary_samples() -> Vec<(Vec<usize>, Layout)> {
    vec![
        (vec![1, 0], Layout::Contiguous),
        (vec![1, 1], Layout::Contiguous),
        (vec![1, 7], Layout::Contiguous),
        // long rows with a tail, then the realistic large shape (4.2M
        // elements; the f64 references of 67 ops in 4 dtypes bound the
        // row's time)
        (vec![3, 100003], Layout::Contiguous),
        (vec![1024, 4099], Layout::Contiguous),
        (vec![64, 33], Layout::Transposed),
        (vec![19, 37], Layout::StridedOut),
        (vec![5, 1029], Layout::Misaligned),
        (vec![2, 3, 1, 2, 3, 2, 1, 5], Layout::Contiguous),
        (vec![2, 3, 1, 2, 3, 2, 1, 5], Layout::StridedOut),
    ]
}

fn check_unary_sample<T: Element, const N: usize>(
    op: UnaryOp,
    shape: &[usize],
    layout: Layout,
    rng: &mut Rng,
) -> Result<(), String> {
    let g = gpu();
    let what = format!("{} {} {shape:?} {layout:?}", op.name(), T::KIND);
    let desc = UnaryDescriptor {
        op,
        element: T::KIND,
        shape: arr::<N>(shape),
    };
    let tol = unary_tol(op, T::KIND);
    let (lo, hi) = reference::unary_domain(op);
    let x = Operand::<T>::input(rng, shape, layout, layout == Layout::Transposed, lo, hi);
    let xs = x.logical(shape);

    let fw = UnaryPlan::<T, N>::select(&g.stream, &desc, &PlanPreference::default())
        .map_err(|e| e.to_string())?;
    let mut y = Operand::<T>::output(shape, layout);
    fw.run(
        &g.stream,
        Workspace::None,
        UnaryArgs {
            x: x.view(shape),
            y: y.view_mut(shape),
        },
    )
    .map_err(|e| format!("{what}: {e}"))?;
    compare(
        &format!("{what} fw"),
        &y.result(&what, shape)?,
        &overflowed(T::KIND, reference::unary(resolved::<T>(op), &xs)),
        tol,
        None,
    )?;

    let dy = Operand::<T>::input(rng, shape, layout, false, -1.0, 1.0);
    let mut dx = Operand::<T>::output(shape, layout);
    fw.run_bw(
        &g.stream,
        Workspace::None,
        UnaryBwArgs {
            x: x.view(shape),
            dy: dy.view(shape),
            dx: dx.view_mut(shape),
        },
    )
    .map_err(|e| format!("{what}: {e}"))?;
    let want = overflowed(
        T::KIND,
        reference::unary_backward(resolved::<T>(op), &xs, &dy.logical(shape)),
    );
    compare(
        &format!("{what} bw"),
        &dx.result(&what, shape)?,
        &want,
        tol,
        None,
    )
}

/// Forward and backward of `op` over every sample, plus a rank-1 and a
/// broadcast-input case.
pub fn check_unary<T: Element>(op: UnaryOp) -> Result<usize, String> {
    let mut rng = Rng::new(0x0A11 ^ u64::from(op.index()));
    let mut n = 0;
    for (shape, layout) in small_samples(unary_samples(), |(s, _)| s.iter().product()) {
        match shape.len() {
            2 => check_unary_sample::<T, 2>(op, &shape, layout, &mut rng)?,
            8 => check_unary_sample::<T, 8>(op, &shape, layout, &mut rng)?,
            r => return Err(format!("no sample runner for rank {r}")),
        }
        n += 1;
    }
    // rank 1
    check_unary_sample::<T, 1>(op, &[10007], Layout::Contiguous, &mut rng)?;
    // special values, through the vectorised and the strided kernels, for
    // GELU-erf and the ops from abs on (PyTorch's table; the other first
    // eight keep their kernels' own handling of signed zeros)
    if op.index() >= UnaryOp::Abs.index() || op == UnaryOp::GeluErf {
        check_unary_specials::<T>(op, &mut rng)?;
        n += 2;
    }
    // broadcast input: x [1, 37] read through stride 0 into y [19, 37]
    let g = gpu();
    let (lo, hi) = reference::unary_domain(op);
    let (xb, xs) = upload::<T>(&rng.vec(37, lo, hi));
    let mut y = poisoned::<T>(19 * 37);
    let desc = UnaryDescriptor {
        op,
        element: T::KIND,
        shape: [19, 37],
    };
    let plan = UnaryPlan::<T, 2>::select(&g.stream, &desc, &PlanPreference::default())
        .map_err(|e| e.to_string())?;
    let x = TensorRef::contiguous(xb.as_slice(), [1, 37])
        .and_then(|v| v.broadcast_to([19, 37]))
        .map_err(|e| e.to_string())?;
    plan.run(
        &g.stream,
        Workspace::None,
        UnaryArgs {
            x,
            y: TensorMut::contiguous(y.as_slice_mut(), [19, 37]).unwrap(),
        },
    )
    .map_err(|e| e.to_string())?;
    let want = reference::unary(
        resolved::<T>(op),
        &reference::broadcast(&xs, &[1, 37], &[19, 37]),
    );
    compare(
        &format!("{} {} broadcast x", op.name(), T::KIND),
        &download(&y),
        &want,
        unary_tol(op, T::KIND),
        None,
    )?;
    Ok(n + 2)
}

/// `op` as the kernels of `T` run it: `nan_to_num`'s absent replacements
/// are `T`'s largest and lowest finite values.
fn resolved<T: Element>(op: UnaryOp) -> UnaryOp {
    match op {
        UnaryOp::NanToNum {
            nan,
            posinf,
            neginf,
        } => {
            let max = match T::KIND {
                ElementKind::F64 => f64::MAX,
                ElementKind::F32 => f64::from(f32::MAX),
                ElementKind::F16 => 65504.0,
                _ => (2.0 - 2f64.powi(-7)) * 2f64.powi(127),
            };
            UnaryOp::NanToNum {
                nan,
                posinf: Some(posinf.unwrap_or(max)),
                neginf: Some(neginf.unwrap_or(-max)),
            }
        }
        op => op,
    }
}

/// The bound of `op` in `kind`: [`pointwise_tol`] (f32 math rounded once;
/// on f32 33 ulp, past the CUDA Math API's bounds of every function used:
/// 1 ulp for exp2/expm1/log/log2/log1p, 2 for sin/cos/atan/erf/erfinv/
/// rsqrt/sinh/cosh/exp, 3-4 for tan/asin/acos/asinh/acosh/atanh/erfc, 6
/// for lgamma, 0 for sqrt and division), widened on f32 where an op's
/// evaluation loses more:
/// - `digamma` (and `lgamma`'s gradient): up to ten recurrence terms of
///   magnitude ~2.5 cancel to 0 at the root 1.4616: ~1e-6 absolute.
/// - `erfinv`'s gradient: `exp(e^2)` of an `e` 2 ulp off is off by
///   `2 e^2 * 2 ulp`, 7e-6 relative at `e` = 3.85 (the f32 inputs below
///   1).
fn unary_tol(op: UnaryOp, kind: ElementKind) -> Tolerance {
    let t = pointwise_tol(kind);
    if kind != ElementKind::F32 {
        return t;
    }
    match op {
        UnaryOp::Digamma | UnaryOp::Lgamma | UnaryOp::Polygamma { n: 0 } => {
            Tolerance { atol: 1e-5, ..t }
        }
        UnaryOp::Erfinv => Tolerance { rtol: 2e-5, ..t },
        _ => t,
    }
}

/// The special values every op meets (before rounding to the dtype): ±0,
/// NaN, ±inf, huge (inf in f16, or in every type but f64), tiny, the
/// integers and halves around 0, and the op's own edges. Not f32::MAX:
/// PyTorch's f32 `x * 6 / 6` (hardswish) overflows there where the f64
/// reference does not.
fn unary_specials(op: UnaryOp) -> Vec<f64> {
    let mut v = vec![
        0.0,
        -0.0,
        f64::NAN,
        f64::INFINITY,
        f64::NEG_INFINITY,
        1e300,
        -1e300,
        1e30,
        -1e30,
        1e5,
        -1e5,
        100.0,
        -100.0,
        1e-30,
        -1e-30,
        1e-5,
        -1e-5,
        1.0,
        -1.0,
        0.5,
        -0.5,
        1.5,
        -1.5,
        2.0,
        -2.0,
        2.5,
        -2.5,
        3.0,
        -3.0,
        6.0,
        -6.0,
        0.25,
        -0.75,
    ];
    v.extend(reference::unary_edges(op));
    v
}

/// Forward and backward over the special values, as a contiguous tensor
/// (the vectorised kernel and its scalar tail) and one element into its
/// buffer (the strided kernel): NaN where the reference has NaN, the same
/// infinities, the sign of a zero forward result, and the op's bound
/// elsewhere. The references are rounded to `T` (an f32 result past
/// f32::MAX is inf, as the kernel's).
fn check_unary_specials<T: Element>(op: UnaryOp, rng: &mut Rng) -> Result<(), String> {
    let g = gpu();
    let sp = unary_specials(op);
    // three copies: every value meets every lane of a 16-byte vector
    let vals: Vec<f64> = sp.iter().chain(&sp).chain(&sp).copied().collect();
    let n = vals.len();
    let desc = UnaryDescriptor {
        op,
        element: T::KIND,
        shape: [n],
    };
    let plan = UnaryPlan::<T, 1>::select(&g.stream, &desc, &PlanPreference::default())
        .map_err(|e| e.to_string())?;
    let tol = unary_tol(op, T::KIND);
    for offset in [0usize, 1] {
        let mut padded = vec![0.5; offset];
        padded.extend(&vals);
        let (xb, xh) = upload::<T>(&padded);
        let xs = &xh[offset..];
        let (dyb, dyh) = upload::<T>(&rng.vec(n + offset, -1.0, 1.0));
        let what = format!("{} {} specials offset {offset}", op.name(), T::KIND);
        fn at<T: Element>(
            b: &DeviceBuffer<T>,
            offset: usize,
        ) -> Result<DeviceSlice<'_, T>, String> {
            let n = b.len() - offset;
            b.as_slice()
                .slice(offset..offset + n)
                .ok_or_else(|| "slice".to_string())
        }
        let mut y = poisoned::<T>(n + offset);
        let mut dx = poisoned::<T>(n + offset);
        let y_view = y.as_slice_mut().split_at(offset).ok_or("split")?.1;
        plan.run(
            &g.stream,
            Workspace::None,
            UnaryArgs {
                x: TensorRef::contiguous(at(&xb, offset)?, [n]).map_err(|e| e.to_string())?,
                y: TensorMut::contiguous(y_view, [n]).map_err(|e| e.to_string())?,
            },
        )
        .map_err(|e| format!("{what}: {e}"))?;
        let dx_view = dx.as_slice_mut().split_at(offset).ok_or("split")?.1;
        plan.run_bw(
            &g.stream,
            Workspace::None,
            UnaryBwArgs {
                x: TensorRef::contiguous(at(&xb, offset)?, [n]).map_err(|e| e.to_string())?,
                dy: TensorRef::contiguous(at(&dyb, offset)?, [n]).map_err(|e| e.to_string())?,
                dx: TensorMut::contiguous(dx_view, [n]).map_err(|e| e.to_string())?,
            },
        )
        .map_err(|e| format!("{what}: {e}"))?;
        let op_t = resolved::<T>(op);
        let exact_y = reference::unary(op_t, xs);
        let want_y = round_to(T::KIND, &exact_y);
        let want_dx = round_to(
            T::KIND,
            &reference::unary_backward(op_t, xs, &dyh[offset..]),
        );
        let got_y = download(&y)[offset..].to_vec();
        let got_dx = download(&dx)[offset..].to_vec();
        compare_specials(
            &format!("{what} fw"),
            xs,
            &got_y,
            &want_y,
            tol,
            Some(&exact_y),
        )?;
        compare_specials(&format!("{what} bw"), xs, &got_dx, &want_dx, tol, None)?;
    }
    Ok(())
}

/// Element by element: NaN where `want` is NaN (and only there), equal
/// infinities, and `|got - want| <= rtol |want| + atol` elsewhere; with
/// the unrounded reference `exact`, a zero result has the sign of an exact
/// zero (a nonzero that rounds to zero in `T`, such as tanhshrink's
/// x - tanh(x) at x = -1e-5, has the sign of however the op's f32
/// arithmetic cancels, as PyTorch's).
/// dy of the binary special-value samples: magnitudes 0.5 to 1, either
/// sign. A gradient factor that overflows the accumulator (pow's a^b ln a
/// at a = 2.5, b = 100 in f32) is inf in the kernel, as in PyTorch, which
/// forms it before multiplying by dy; a dy this large keeps the rounded
/// f64 reference past the type's range there too.
pub(crate) fn specials_dy(rng: &mut Rng, n: usize) -> Vec<f64> {
    rng.vec(n, -1.0, 1.0)
        .into_iter()
        .map(|v| {
            if v < 0.0 {
                v * 0.5 - 0.5
            } else {
                v * 0.5 + 0.5
            }
        })
        .collect()
}

pub(crate) fn compare_specials(
    what: &str,
    x: &[f64],
    got: &[f64],
    want: &[f64],
    tol: Tolerance,
    exact: Option<&[f64]>,
) -> Result<(), String> {
    for (i, ((&g, &w), &xi)) in got.iter().zip(want).zip(x).enumerate() {
        let zero_sign = exact.is_some_and(|e| e[i] == 0.0);
        let ok = if w.is_nan() {
            g.is_nan()
        } else if w.is_infinite() {
            g == w
        } else {
            !g.is_nan()
                && (g - w).abs() <= tol.rtol * w.abs() + tol.atol
                && !(zero_sign
                    && w == 0.0
                    && g == 0.0
                    && g.is_sign_negative() != w.is_sign_negative())
        };
        if !ok {
            return Err(format!(
                "{what}: at x = {xi:e} (element {i}) got {g:e}, expected {w:e}"
            ));
        }
    }
    Ok(())
}

/// Select a unary op with `kind`, which it does not claim: `Unsupported`.
pub fn unary_unsupported(kind: ElementKind) -> Result<(), String> {
    let desc = UnaryDescriptor {
        op: UnaryOp::Relu,
        element: kind,
        shape: [4],
    };
    crate::with_element!(kind, T => expect_unsupported::<UnaryPlan<T, 1>>("unary", &desc))
}

/// Bad inputs of the unary plans: each returns its error and writes nothing.
pub fn unary_bad_inputs() -> Result<usize, String> {
    let g = gpu();
    let s = &g.stream;
    let pref = PlanPreference::default();
    let desc = UnaryDescriptor {
        op: UnaryOp::Silu,
        element: ElementKind::F32,
        shape: [64],
    };
    let plan = UnaryPlan::<f32, 1>::select(s, &desc, &pref).map_err(|e| e.to_string())?;
    let (x, _) = upload::<f32>(&Rng::new(1).vec(65, -1.0, 1.0));
    let mut y = poisoned::<f32>(65);
    let untouched =
        |y: &DeviceBuffer<f32>| check_untouched::<f32>("unary bad input", &download(y), &[]);
    // wrong x shape
    let xv = TensorRef::contiguous(x.as_slice(), [65]).unwrap();
    let r = plan.run(
        s,
        Workspace::None,
        UnaryArgs {
            x: xv,
            y: TensorMut::contiguous(y.as_slice_mut().split_at(64).unwrap().0, [64]).unwrap(),
        },
    );
    expect_err("x shape", r, |e| {
        matches!(e, Error::ShapeMismatch { arg: "x", .. })
    })?;
    // wrong y shape
    let xv = TensorRef::contiguous(x.as_slice(), [64]).unwrap();
    let r = plan.run(
        s,
        Workspace::None,
        UnaryArgs {
            x: xv,
            y: TensorMut::contiguous(y.as_slice_mut(), [65]).unwrap(),
        },
    );
    expect_err("y shape", r, |e| {
        matches!(e, Error::ShapeMismatch { arg: "y", .. })
    })?;
    // x on another context
    // SAFETY: the address is never dereferenced: run rejects the context first.
    let foreign = unsafe { DeviceSlice::<f32>::from_raw_parts(x.as_slice().addr(), 64, 0xDEAD) };
    let r = plan.run(
        s,
        Workspace::None,
        UnaryArgs {
            x: TensorRef::contiguous(foreign, [64]).unwrap(),
            y: TensorMut::contiguous(y.as_slice_mut().split_at(64).unwrap().0, [64]).unwrap(),
        },
    );
    expect_err("context", r, |e| {
        matches!(e, Error::ContextMismatch { arg: "x", .. })
    })?;
    // y partly overlapping x (shifted by one element)
    let base = y.as_slice().addr();
    // SAFETY: both views lie inside `y`'s 65 elements; run rejects the
    // overlap before launching, so nothing is read or written.
    let (xa, ya) = unsafe {
        (
            DeviceSlice::<f32>::from_raw_parts(base, 64, g.ctx.id()),
            DeviceSliceMut::<f32>::from_raw_parts(base + 4, 64, g.ctx.id()),
        )
    };
    let r = plan.run(
        s,
        Workspace::None,
        UnaryArgs {
            x: TensorRef::contiguous(xa, [64]).unwrap(),
            y: TensorMut::contiguous(ya, [64]).unwrap(),
        },
    );
    expect_err("overlap", r, |e| {
        matches!(e, Error::InvalidArgument { arg: "y", .. })
    })?;
    untouched(&y)?;
    // descriptor dtype differs from T
    let bad = UnaryDescriptor {
        element: ElementKind::F16,
        ..desc
    };
    expect_err("dtype", UnaryPlan::<f32, 1>::select(s, &bad, &pref), |e| {
        matches!(e, Error::DtypeMismatch { .. })
    })?;
    // a backend the op does not have
    let p = PlanPreference::default().with_backend(BackendKind::Cudnn);
    expect_err("backend", UnaryPlan::<f32, 1>::select(s, &desc, &p), |e| {
        matches!(
            e,
            Error::PreferenceRejected {
                field: "backend",
                ..
            }
        )
    })?;
    // rank 9
    let d9 = UnaryDescriptor {
        op: UnaryOp::Neg,
        element: ElementKind::F32,
        shape: [1; 9],
    };
    expect_err("rank 9", UnaryPlan::<f32, 9>::select(s, &d9, &pref), |e| {
        matches!(e, Error::Unsupported { .. })
    })?;
    // backward: dx shape
    let bw = UnaryPlan::<f32, 1>::select(s, &desc, &pref).map_err(|e| e.to_string())?;
    let mut dx = poisoned::<f32>(65);
    let r = bw.run_bw(
        s,
        Workspace::None,
        UnaryBwArgs {
            x: TensorRef::contiguous(x.as_slice(), [64]).unwrap(),
            dy: TensorRef::contiguous(x.as_slice(), [64]).unwrap(),
            dx: TensorMut::contiguous(dx.as_slice_mut(), [65]).unwrap(),
        },
    );
    expect_err("dx shape", r, |e| {
        matches!(e, Error::ShapeMismatch { arg: "dx", .. })
    })?;
    check_untouched::<f32>("unary_backward bad input", &download(&dx), &[])?;
    // y on another context
    let y_addr = y.as_slice().addr();
    // SAFETY: the address is never dereferenced: run rejects the context first.
    let foreign_y = unsafe { DeviceSliceMut::<f32>::from_raw_parts(y_addr, 64, 0xDEAD) };
    let r = plan.run(
        s,
        Workspace::None,
        UnaryArgs {
            x: TensorRef::contiguous(x.as_slice(), [64]).unwrap(),
            y: TensorMut::contiguous(foreign_y, [64]).unwrap(),
        },
    );
    expect_err("y context", r, |e| {
        matches!(e, Error::ContextMismatch { arg: "y", .. })
    })?;
    // in place: xy of the wrong shape, then on another context
    let r = plan.run_in_place(
        s,
        Workspace::None,
        TensorMut::contiguous(y.as_slice_mut(), [65]).unwrap(),
    );
    expect_err("xy shape", r, |e| {
        matches!(e, Error::ShapeMismatch { arg: "xy", .. })
    })?;
    // SAFETY: the address is never dereferenced: run rejects the context first.
    let foreign_y = unsafe { DeviceSliceMut::<f32>::from_raw_parts(y_addr, 64, 0xDEAD) };
    let r = plan.run_in_place(
        s,
        Workspace::None,
        TensorMut::contiguous(foreign_y, [64]).unwrap(),
    );
    expect_err("xy context", r, |e| {
        matches!(e, Error::ContextMismatch { arg: "xy", .. })
    })?;
    untouched(&y)?;
    // backward: x and dy of the wrong shape, dx on another context
    let r = bw.run_bw(
        s,
        Workspace::None,
        UnaryBwArgs {
            x: TensorRef::contiguous(x.as_slice(), [65]).unwrap(),
            dy: TensorRef::contiguous(x.as_slice(), [64]).unwrap(),
            dx: TensorMut::contiguous(dx.as_slice_mut(), [64]).unwrap(),
        },
    );
    expect_err("backward x shape", r, |e| {
        matches!(e, Error::ShapeMismatch { arg: "x", .. })
    })?;
    let r = bw.run_bw(
        s,
        Workspace::None,
        UnaryBwArgs {
            x: TensorRef::contiguous(x.as_slice(), [64]).unwrap(),
            dy: TensorRef::contiguous(x.as_slice(), [65]).unwrap(),
            dx: TensorMut::contiguous(dx.as_slice_mut(), [64]).unwrap(),
        },
    );
    expect_err("dy shape", r, |e| {
        matches!(e, Error::ShapeMismatch { arg: "dy", .. })
    })?;
    let dx_addr = dx.as_slice().addr();
    // SAFETY: the address is never dereferenced: run rejects the context first.
    let foreign_dx = unsafe { DeviceSliceMut::<f32>::from_raw_parts(dx_addr, 64, 0xDEAD) };
    let r = bw.run_bw(
        s,
        Workspace::None,
        UnaryBwArgs {
            x: TensorRef::contiguous(x.as_slice(), [64]).unwrap(),
            dy: TensorRef::contiguous(x.as_slice(), [64]).unwrap(),
            dx: TensorMut::contiguous(foreign_dx, [64]).unwrap(),
        },
    );
    expect_err("dx context", r, |e| {
        matches!(e, Error::ContextMismatch { arg: "dx", .. })
    })?;
    // backward in place: x and dy_dx of the wrong shape
    let r = bw.run_bw_in_place(
        s,
        Workspace::None,
        TensorRef::contiguous(x.as_slice(), [65]).unwrap(),
        TensorMut::contiguous(dx.as_slice_mut(), [64]).unwrap(),
    );
    expect_err("in-place backward x shape", r, |e| {
        matches!(e, Error::ShapeMismatch { arg: "x", .. })
    })?;
    let r = bw.run_bw_in_place(
        s,
        Workspace::None,
        TensorRef::contiguous(x.as_slice(), [64]).unwrap(),
        TensorMut::contiguous(dx.as_slice_mut(), [65]).unwrap(),
    );
    expect_err("dy_dx shape", r, |e| {
        matches!(e, Error::ShapeMismatch { arg: "dy_dx", .. })
    })?;
    check_untouched::<f32>("unary_backward bad input", &download(&dx), &[])?;
    Ok(16)
}

// ---------------------------------------------------------------------------
// Binary
// ---------------------------------------------------------------------------

/// `(a_shape, b_shape, layout)` of every binary sample: same shapes (tails,
/// blocks, large), bias-like and column broadcasts, both broadcast, a
/// scalar-like b (one output summing 2M terms: the split reduction), empty
/// output with a broadcast input (its gradient must be zeros), transposed,
/// strided and misaligned operands, rank 8.
fn binary_samples() -> Vec<(Vec<usize>, Vec<usize>, Layout)> {
    vec![
        (vec![1, 0], vec![1, 0], Layout::Contiguous),
        (vec![1, 1], vec![1, 1], Layout::Contiguous),
        (vec![1, 7], vec![1, 7], Layout::Contiguous),
        (vec![3, 1000003], vec![3, 1000003], Layout::Contiguous),
        (vec![1024, 4099], vec![1024, 4099], Layout::Contiguous),
        (vec![257, 131], vec![1, 131], Layout::Contiguous),
        (vec![257, 1], vec![257, 131], Layout::Contiguous),
        (vec![4096, 513], vec![1, 1], Layout::Contiguous),
        (vec![4096, 1024], vec![1, 1024], Layout::Contiguous),
        (vec![0, 3], vec![1, 3], Layout::Contiguous),
        (vec![64, 33], vec![64, 33], Layout::Transposed),
        (vec![19, 37], vec![1, 37], Layout::StridedOut),
        (vec![5, 1029], vec![5, 1029], Layout::Misaligned),
        (vec![64, 1, 33], vec![1, 17, 33], Layout::Contiguous),
        (
            vec![2, 3, 1, 2, 3, 2, 1, 5],
            vec![2, 1, 4, 2, 1, 2, 3, 5],
            Layout::Contiguous,
        ),
    ]
}

pub(crate) fn values(op: BinaryOp, rng: &mut Rng, n: usize, second: bool) -> Vec<f64> {
    match op {
        // a coarse grid makes ties, which split the gradient
        BinaryOp::Maximum | BinaryOp::Minimum => (0..n)
            .map(|_| (rng.uniform(-8.0, 8.0).floor() + 0.5) / 4.0)
            .collect(),
        // ties, and ties broken toward a
        BinaryOp::Fmax | BinaryOp::Fmin => (0..n)
            .map(|_| (rng.uniform(-8.0, 8.0).floor() + 0.5) / 4.0)
            .collect(),
        // ties (a == b), zeros, infinities and NaN among grid values
        BinaryOp::Nextafter => (0..n)
            .map(|_| match rng.next_u64() % 16 {
                0 => 0.0,
                1 => -0.0,
                2 => f64::INFINITY,
                3 => f64::NEG_INFINITY,
                4 => f64::NAN,
                _ => (rng.uniform(-8.0, 8.0).floor() + 0.5) / 4.0,
            })
            .collect(),
        // positive bases, exponents in [-2, 2)
        BinaryOp::Pow if !second => rng.vec(n, 0.5, 2.0),
        // positive y, and x == 0 in one element of eight
        BinaryOp::Xlogy if second => rng.vec(n, 0.25, 2.0),
        // y > -1 (log1p's domain)
        BinaryOp::Xlog1py if second => rng.vec(n, -0.75, 2.0),
        // a == 0 in one element of eight (heaviside takes b there, prelu
        // the weight's side)
        BinaryOp::Xlogy | BinaryOp::Xlog1py | BinaryOp::Heaviside | BinaryOp::Prelu => (0..n)
            .map(|_| {
                let v = rng.uniform(-2.0, 2.0);
                if rng.next_u64() % 8 == 0 {
                    0.0
                } else {
                    v
                }
            })
            .collect(),
        // keep divisors away from zero
        BinaryOp::Div
        | BinaryOp::Fmod
        | BinaryOp::Remainder
        | BinaryOp::DivFloor
        | BinaryOp::DivTrunc
            if second =>
        {
            rng.vec(n, 0.5, 2.0)
                .into_iter()
                .map(|v| if rng.next_u64() & 1 == 0 { v } else { -v })
                .collect()
        }
        _ => rng.vec(n, -2.0, 2.0),
    }
}

#[allow(clippy::too_many_lines)] // one sample end to end: fw, bw, checks
fn check_binary_sample<T: Element, const N: usize>(
    op: BinaryOp,
    a_shape: &[usize],
    b_shape: &[usize],
    layout: Layout,
    rng: &mut Rng,
) -> Result<(), String> {
    let g = gpu();
    let what = format!(
        "{} {} {a_shape:?}x{b_shape:?} {layout:?}",
        op.name(),
        T::KIND
    );
    let desc = BinaryDescriptor {
        op,
        element: T::KIND,
        a_shape: arr::<N>(a_shape),
        b_shape: arr::<N>(b_shape),
    };
    let out_shape = desc.out_shape().map_err(|e| e.to_string())?.to_vec();
    let tol = pointwise_tol(T::KIND);
    let na: usize = a_shape.iter().product();
    let nb: usize = b_shape.iter().product();
    let off = usize::from(layout == Layout::Misaligned);
    let (abuf, ahost) = upload::<T>(&values(op, rng, na + off, false));
    let (bbuf, bhost) = upload::<T>(&values(op, rng, nb + off, true));
    let a = Operand {
        buf: abuf,
        offset: off,
        strides: if layout == Layout::Transposed {
            vec![1, a_shape[0]]
        } else {
            contiguous(a_shape)
        },
        host: ahost,
    };
    let b = Operand {
        buf: bbuf,
        offset: off,
        strides: contiguous(b_shape),
        host: bhost,
    };
    let (av, bv) = (a.logical(a_shape), b.logical(b_shape));

    let fw = BinaryPlan::<T, N>::select(&g.stream, &desc, &PlanPreference::default())
        .map_err(|e| e.to_string())?;
    let mut out = Operand::<T>::output(&out_shape, layout);
    fw.run(
        &g.stream,
        Workspace::None,
        BinaryArgs {
            a: a.view(a_shape),
            b: b.view(b_shape),
            out: out.view_mut(&out_shape),
        },
    )
    .map_err(|e| format!("{what}: {e}"))?;
    let got = out.result(&what, &out_shape)?;
    if op == BinaryOp::Nextafter {
        // one step on T's grid: exact
        let ab = reference::broadcast(&av, a_shape, &out_shape);
        let bb = reference::broadcast(&bv, b_shape, &out_shape);
        let want: Vec<f64> = ab
            .iter()
            .zip(&bb)
            .map(|(&x, &y)| reference::nextafter_in(T::KIND, x, y))
            .collect();
        identical(&format!("{what} fw"), &got, &want)?;
    } else {
        let want = reference::binary(op, &av, a_shape, &bv, b_shape);
        compare(&format!("{what} fw"), &got, &want, tol, None)?;
    }

    let bw = fw;
    // without a backward, run_bw is Unsupported before it looks at its
    // buffers: they are no plan's operands
    let dy = operand_if(op.has_backward(), || {
        Operand::<T>::input(rng, &out_shape, layout, false, -1.0, 1.0)
    });
    if !op.has_backward() {
        // no backward: run_bw is Unsupported and writes nothing
        let mut da = not_an_operand(|| Operand::<T>::output(a_shape, Layout::Contiguous));
        let r = bw.run_bw(
            &g.stream,
            Workspace::None,
            BinaryBwArgs {
                a: a.view(a_shape),
                b: b.view(b_shape),
                dy: dy.view(&out_shape),
                da: Some(da.view_mut(a_shape)),
                db: None,
            },
        );
        return match r {
            Err(Error::Unsupported { .. }) => Ok(()),
            other => Err(format!("{what} bw: expected Unsupported, got {other:?}")),
        };
    }
    let grad_layout = if layout == Layout::StridedOut {
        Layout::StridedOut
    } else {
        Layout::Contiguous
    };
    let mut da = Operand::<T>::output(a_shape, grad_layout);
    let mut db = Operand::<T>::output(b_shape, grad_layout);
    let ws_bytes = bw.bw_workspace_size(Grad::A | Grad::B);
    let mut ws = workspace(ws_bytes);
    let workspace = Workspace::Borrowed(ws.as_slice_mut());
    bw.run_bw(
        &g.stream,
        workspace,
        BinaryBwArgs {
            a: a.view(a_shape),
            b: b.view(b_shape),
            dy: dy.view(&out_shape),
            da: Some(da.view_mut(a_shape)),
            db: Some(db.view_mut(b_shape)),
        },
    )
    .map_err(|e| format!("{what} bw: {e}"))?;
    let grads = reference::binary_backward(op, &av, a_shape, &bv, b_shape, &dy.logical(&out_shape));
    // Sums of n terms in the accumulator: allow 2 u sqrt(n) * sum|terms|.
    let n_out: usize = out_shape.iter().product();
    let slack = |abs: &[f64], n_in: usize| -> Vec<f64> {
        let n_red = (n_out / n_in.max(1)).max(1) as f64;
        abs.iter()
            .map(|s| 2.0 * acc_roundoff(T::KIND) * n_red.sqrt() * s)
            .collect()
    };
    let ea = slack(&grads.da_abs, na);
    let eb = slack(&grads.db_abs, nb);
    compare(
        &format!("{what} da"),
        &da.result(&what, a_shape)?,
        &grads.da,
        tol,
        Some(&ea),
    )?;
    compare(
        &format!("{what} db"),
        &db.result(&what, b_shape)?,
        &grads.db,
        tol,
        Some(&eb),
    )?;
    Ok(())
}

pub fn check_binary<T: Element>(op: BinaryOp) -> Result<usize, String> {
    let mut rng = Rng::new(0xB1 ^ (u64::from(op.index()) << 8));
    let mut n = 0;
    let out_elems = |(a, b, _): &(Vec<usize>, Vec<usize>, Layout)| {
        a.iter().zip(b).map(|(x, y)| *x.max(y)).product()
    };
    let mut samples = binary_samples();
    if op == BinaryOp::Prelu {
        // PyTorch's weight of C elements as [1, C, 1, 1] over [N, C, H, W],
        // and a single weight
        samples.extend([
            (vec![8, 16, 9, 7], vec![1, 16, 1, 1], Layout::Contiguous),
            (vec![4, 3, 65, 33], vec![1, 3, 1, 1], Layout::Misaligned),
            (vec![5, 6, 7, 8], vec![1, 1, 1, 1], Layout::Contiguous),
        ]);
    }
    for (a, b, layout) in small_samples(samples, out_elems) {
        match a.len() {
            2 => check_binary_sample::<T, 2>(op, &a, &b, layout, &mut rng)?,
            3 => check_binary_sample::<T, 3>(op, &a, &b, layout, &mut rng)?,
            4 => check_binary_sample::<T, 4>(op, &a, &b, layout, &mut rng)?,
            8 => check_binary_sample::<T, 8>(op, &a, &b, layout, &mut rng)?,
            r => return Err(format!("no sample runner for rank {r}")),
        }
        n += 1;
    }
    // special values, for the ops with a parameter and prelu
    if matches!(
        op,
        BinaryOp::AddAlpha { .. } | BinaryOp::SubAlpha { .. } | BinaryOp::Prelu
    ) {
        check_binary_specials::<T>(op, &mut rng)?;
        n += 2;
    }
    if !op.has_backward() {
        return Ok(n);
    }
    // Only db asked for (da None), with a broadcast b.
    let g = gpu();
    let desc = BinaryDescriptor {
        op,
        element: T::KIND,
        a_shape: [33, 64],
        b_shape: [33, 1],
    };
    let bw = BinaryPlan::<T, 2>::select(&g.stream, &desc, &PlanPreference::default())
        .map_err(|e| e.to_string())?;
    let (a, av) = upload::<T>(&values(op, &mut rng, 33 * 64, false));
    let (b, bv) = upload::<T>(&values(op, &mut rng, 33, true));
    let (dy, dyv) = upload::<T>(&rng.vec(33 * 64, -1.0, 1.0));
    let mut db = poisoned::<T>(33);
    // Sized for db alone: the partials of db start at the workspace's head.
    let ws_bytes = bw.bw_workspace_size(Grad::B.into());
    let mut ws = workspace(ws_bytes);
    let workspace = Workspace::Borrowed(ws.as_slice_mut());
    bw.run_bw(
        &g.stream,
        workspace,
        BinaryBwArgs {
            a: TensorRef::contiguous(a.as_slice(), [33, 64]).unwrap(),
            b: TensorRef::contiguous(b.as_slice(), [33, 1]).unwrap(),
            dy: TensorRef::contiguous(dy.as_slice(), [33, 64]).unwrap(),
            da: None,
            db: Some(TensorMut::contiguous(db.as_slice_mut(), [33, 1]).unwrap()),
        },
    )
    .map_err(|e| e.to_string())?;
    let grads = reference::binary_backward(op, &av, &[33, 64], &bv, &[33, 1], &dyv);
    let eb: Vec<f64> = grads
        .db_abs
        .iter()
        .map(|s| 2.0 * acc_roundoff(T::KIND) * 8.0 * s)
        .collect();
    compare(
        &format!("{} {} db only", op.name(), T::KIND),
        &download(&db),
        &grads.db,
        pointwise_tol(T::KIND),
        Some(&eb),
    )?;
    Ok(n + 1)
}

/// Forward and backward of `op` over every pair of special values (±0,
/// NaN, ±inf, 1, -1, tiny, large, 2.5, -0.5) as same-shape tensors, at
/// offset 0 (the vectorised kernel and its tail) and 1 (the strided
/// kernel): NaN where the reference has NaN, the same infinities, the sign
/// of an exact zero forward result, and the pointwise bound elsewhere.
fn check_binary_specials<T: Element>(op: BinaryOp, rng: &mut Rng) -> Result<(), String> {
    let g = gpu();
    let sp = [
        0.0,
        -0.0,
        f64::NAN,
        f64::INFINITY,
        f64::NEG_INFINITY,
        1.0,
        -1.0,
        1e-5,
        100.0,
        2.5,
        -0.5,
    ];
    let (av, bv): (Vec<f64>, Vec<f64>) = sp
        .iter()
        .flat_map(|&x| sp.iter().map(move |&y| (x, y)))
        .unzip();
    let n = av.len();
    let desc = BinaryDescriptor {
        op,
        element: T::KIND,
        a_shape: [n],
        b_shape: [n],
    };
    let plan = BinaryPlan::<T, 1>::select(&g.stream, &desc, &PlanPreference::default())
        .map_err(|e| e.to_string())?;
    let tol = pointwise_tol(T::KIND);
    for offset in [0usize, 1] {
        let pad = |v: &[f64]| {
            let mut p = vec![0.5; offset];
            p.extend(v);
            p
        };
        let (ab, ah) = upload::<T>(&pad(&av));
        let (bb, bh) = upload::<T>(&pad(&bv));
        let (dyb, dyh) = upload::<T>(&specials_dy(rng, n + offset));
        let (a_s, b_s, dy_s) = (&ah[offset..], &bh[offset..], &dyh[offset..]);
        let what = format!("{} {} specials offset {offset}", op.name(), T::KIND);
        fn at<T: Element>(
            b: &DeviceBuffer<T>,
            offset: usize,
            n: usize,
        ) -> Result<TensorRef<'_, T, 1>, String> {
            let s = b.as_slice().slice(offset..offset + n).ok_or("slice")?;
            TensorRef::contiguous(s, [n]).map_err(|e| e.to_string())
        }
        let view = |b| at(b, offset, n);
        let mut out = poisoned::<T>(n + offset);
        let mut da = poisoned::<T>(n + offset);
        let mut db = poisoned::<T>(n + offset);
        let out_view = out.as_slice_mut().split_at(offset).ok_or("split")?.1;
        plan.run(
            &g.stream,
            Workspace::None,
            BinaryArgs {
                a: view(&ab)?,
                b: view(&bb)?,
                out: TensorMut::contiguous(out_view, [n]).map_err(|e| e.to_string())?,
            },
        )
        .map_err(|e| format!("{what}: {e}"))?;
        let da_view = da.as_slice_mut().split_at(offset).ok_or("split")?.1;
        let db_view = db.as_slice_mut().split_at(offset).ok_or("split")?.1;
        plan.run_bw(
            &g.stream,
            Workspace::None,
            BinaryBwArgs {
                a: view(&ab)?,
                b: view(&bb)?,
                dy: view(&dyb)?,
                da: Some(TensorMut::contiguous(da_view, [n]).map_err(|e| e.to_string())?),
                db: Some(TensorMut::contiguous(db_view, [n]).map_err(|e| e.to_string())?),
            },
        )
        .map_err(|e| format!("{what}: {e}"))?;
        let exact = reference::binary(op, a_s, &[n], b_s, &[n]);
        let grads = reference::binary_backward(op, a_s, &[n], b_s, &[n], dy_s);
        let r = |v: &[f64]| round_to(T::KIND, v);
        let got = |b: &DeviceBuffer<T>| download(b)[offset..].to_vec();
        compare_specials(
            &format!("{what} fw"),
            a_s,
            &got(&out),
            &r(&exact),
            tol,
            Some(&exact),
        )?;
        compare_specials(
            &format!("{what} da"),
            a_s,
            &got(&da),
            &r(&grads.da),
            tol,
            None,
        )?;
        compare_specials(
            &format!("{what} db"),
            a_s,
            &got(&db),
            &r(&grads.db),
            tol,
            None,
        )?;
    }
    Ok(())
}

/// Select a binary op with `kind`, which it does not claim: `Unsupported`.
pub fn binary_unsupported(kind: ElementKind) -> Result<(), String> {
    let desc = BinaryDescriptor {
        op: BinaryOp::Add,
        element: kind,
        a_shape: [4],
        b_shape: [4],
    };
    crate::with_element!(kind, T => expect_unsupported::<BinaryPlan<T, 1>>("binary", &desc))
}

pub fn binary_bad_inputs() -> Result<usize, String> {
    let g = gpu();
    let s = &g.stream;
    let pref = PlanPreference::default();
    // shapes that do not broadcast
    let bad = BinaryDescriptor {
        op: BinaryOp::Add,
        element: ElementKind::F32,
        a_shape: [3],
        b_shape: [4],
    };
    expect_err(
        "broadcast",
        BinaryPlan::<f32, 1>::select(s, &bad, &pref),
        |e| matches!(e, Error::BroadcastMismatch { .. }),
    )?;
    // output of the wrong shape
    let desc = BinaryDescriptor {
        op: BinaryOp::Mul,
        element: ElementKind::F32,
        a_shape: [4096, 513],
        b_shape: [1, 1],
    };
    let fw = BinaryPlan::<f32, 2>::select(s, &desc, &pref).map_err(|e| e.to_string())?;
    let (a, av) = upload::<f32>(&Rng::new(2).vec(4096 * 513, -1.0, 1.0));
    let (b, _) = upload::<f32>(&[0.5]);
    let mut out = poisoned::<f32>(4096 * 513);
    let r = fw.run(
        s,
        Workspace::None,
        BinaryArgs {
            a: TensorRef::contiguous(a.as_slice(), [4096, 513]).unwrap(),
            b: TensorRef::contiguous(b.as_slice(), [1, 1]).unwrap(),
            out: TensorMut::contiguous(out.as_slice_mut(), [513, 4096]).unwrap(),
        },
    );
    expect_err("out shape", r, |e| {
        matches!(e, Error::ShapeMismatch { arg: "out", .. })
    })?;
    check_untouched::<f32>("binary bad out", &download(&out), &[])?;
    // backward: workspace too small, and a cap the plan cannot meet
    let bw = fw;
    let ws_bytes = bw.bw_workspace_size(Grad::B.into());
    if ws_bytes == 0 {
        return Err("a 2M-term reduction should use split partials".into());
    }
    let mut db = poisoned::<f32>(1);
    let r = bw.run_bw(
        s,
        Workspace::None,
        BinaryBwArgs {
            a: TensorRef::contiguous(a.as_slice(), [4096, 513]).unwrap(),
            b: TensorRef::contiguous(b.as_slice(), [1, 1]).unwrap(),
            dy: TensorRef::contiguous(a.as_slice(), [4096, 513]).unwrap(),
            da: None,
            db: Some(TensorMut::contiguous(db.as_slice_mut(), [1, 1]).unwrap()),
        },
    );
    expect_err("workspace", r, |e| {
        matches!(e, Error::WorkspaceTooSmall { .. })
    })?;
    check_untouched::<f32>("binary bw bad workspace", &download(&db), &[])?;
    // A cap below the partials: the reduction runs unsplit, with no
    // workspace, and gives the same sum.
    let capped = PlanPreference::default().with_max_workspace_bytes(16);
    let unsplit = BinaryPlan::<f32, 2>::select(s, &desc, &capped).map_err(|e| e.to_string())?;
    if unsplit.bw_workspace_size(Grad::A | Grad::B) != 0 {
        return Err(format!("capped plan wants workspace: {}", unsplit.sku()));
    }
    let (dy, dyv) = upload::<f32>(&Rng::new(3).vec(4096 * 513, -1.0, 1.0));
    unsplit
        .run_bw(
            s,
            Workspace::None,
            BinaryBwArgs {
                a: TensorRef::contiguous(a.as_slice(), [4096, 513]).unwrap(),
                b: TensorRef::contiguous(b.as_slice(), [1, 1]).unwrap(),
                dy: TensorRef::contiguous(dy.as_slice(), [4096, 513]).unwrap(),
                da: None,
                db: Some(TensorMut::contiguous(db.as_slice_mut(), [1, 1]).unwrap()),
            },
        )
        .map_err(|e| format!("unsplit db: {e}"))?;
    let grads = reference::binary_backward(BinaryOp::Mul, &av, &[4096, 513], &[0.5], &[1, 1], &dyv);
    let eb: Vec<f64> = grads
        .db_abs
        .iter()
        .map(|s| 2.0 * acc_roundoff(ElementKind::F32) * 8.0 * s)
        .collect();
    compare(
        "unsplit db",
        &download(&db),
        &grads.db,
        pointwise_tol(ElementKind::F32),
        Some(&eb),
    )?;
    // gradient of the wrong shape
    let mut ws = poisoned::<u8>(bw.bw_workspace_size(Grad::A | Grad::B).max(1));
    let mut da = poisoned::<f32>(4096 * 513);
    let r = bw.run_bw(
        s,
        Workspace::Borrowed(ws.as_slice_mut()),
        BinaryBwArgs {
            a: TensorRef::contiguous(a.as_slice(), [4096, 513]).unwrap(),
            b: TensorRef::contiguous(b.as_slice(), [1, 1]).unwrap(),
            dy: TensorRef::contiguous(a.as_slice(), [4096, 513]).unwrap(),
            da: Some(TensorMut::contiguous(da.as_slice_mut(), [513, 4096]).unwrap()),
            db: None,
        },
    );
    expect_err("da shape", r, |e| {
        matches!(e, Error::ShapeMismatch { arg: "da", .. })
    })?;
    check_untouched::<f32>("binary bw bad da", &download(&da), &[])?;
    // descriptor dtype differs from T
    let f16 = BinaryDescriptor {
        element: ElementKind::F16,
        ..desc
    };
    expect_err("dtype", BinaryPlan::<f32, 2>::select(s, &f16, &pref), |e| {
        matches!(e, Error::DtypeMismatch { .. })
    })?;
    // a and b of the wrong shape
    let a_t = || TensorRef::contiguous(a.as_slice(), [4096, 513]).unwrap();
    let b_t = || TensorRef::contiguous(b.as_slice(), [1, 1]).unwrap();
    let r = bw.run(
        s,
        Workspace::None,
        BinaryArgs {
            a: TensorRef::contiguous(a.as_slice(), [513, 4096]).unwrap(),
            b: b_t(),
            out: TensorMut::contiguous(out.as_slice_mut(), [4096, 513]).unwrap(),
        },
    );
    expect_err("a shape", r, |e| {
        matches!(e, Error::ShapeMismatch { arg: "a", .. })
    })?;
    let r = bw.run(
        s,
        Workspace::None,
        BinaryArgs {
            a: a_t(),
            b: TensorRef::contiguous(a.as_slice(), [1, 2]).unwrap(),
            out: TensorMut::contiguous(out.as_slice_mut(), [4096, 513]).unwrap(),
        },
    );
    expect_err("b shape", r, |e| {
        matches!(e, Error::ShapeMismatch { arg: "b", .. })
    })?;
    // out on another context
    let out_addr = out.as_slice().addr();
    // SAFETY: the address is never dereferenced: run rejects the context first.
    let foreign = unsafe { DeviceSliceMut::<f32>::from_raw_parts(out_addr, 4096 * 513, 0xDEAD) };
    let r = bw.run(
        s,
        Workspace::None,
        BinaryArgs {
            a: a_t(),
            b: b_t(),
            out: TensorMut::contiguous(foreign, [4096, 513]).unwrap(),
        },
    );
    expect_err("out context", r, |e| {
        matches!(e, Error::ContextMismatch { arg: "out", .. })
    })?;
    // in place into a of the wrong shape
    let r = bw.run_in_place_a(
        s,
        Workspace::None,
        TensorMut::contiguous(out.as_slice_mut(), [513, 4096]).unwrap(),
        b_t(),
    );
    expect_err("in-place a shape", r, |e| {
        matches!(e, Error::ShapeMismatch { arg: "a", .. })
    })?;
    check_untouched::<f32>("binary bad forward", &download(&out), &[])?;
    // backward: dy and db of the wrong shape
    let r = bw.run_bw(
        s,
        Workspace::Borrowed(ws.as_slice_mut()),
        BinaryBwArgs {
            a: a_t(),
            b: b_t(),
            dy: TensorRef::contiguous(a.as_slice(), [513, 4096]).unwrap(),
            da: Some(TensorMut::contiguous(da.as_slice_mut(), [4096, 513]).unwrap()),
            db: None,
        },
    );
    expect_err("dy shape", r, |e| {
        matches!(e, Error::ShapeMismatch { arg: "dy", .. })
    })?;
    let r = bw.run_bw(
        s,
        Workspace::Borrowed(ws.as_slice_mut()),
        BinaryBwArgs {
            a: a_t(),
            b: b_t(),
            dy: a_t(),
            da: None,
            db: Some(TensorMut::contiguous(da.as_slice_mut(), [1, 2]).unwrap()),
        },
    );
    expect_err("db shape", r, |e| {
        matches!(e, Error::ShapeMismatch { arg: "db", .. })
    })?;
    check_untouched::<f32>("binary bw bad dy, db", &download(&da), &[])?;
    Ok(14)
}

/// 64-bit offsets: a strided view whose elements lie past 2^32 in a bf16
/// buffer of 2^32 + 2^20 elements (8.6 GB).
pub fn check_64bit_offsets() -> Result<(), String> {
    use half::bf16;
    let g = gpu();
    let s = &g.stream;
    let len = (1usize << 32) + (1 << 20);
    let row = (1usize << 31) + 3; // row stride: rows start at 0, 2^31+3, 2^32+6
    let mut x = DeviceBuffer::<bf16>::filled_bytes(s, len, 0x3F).map_err(|e| e.to_string())?;
    let mut y = poisoned::<bf16>(len);
    let mut rng = Rng::new(64);
    let mut want = Vec::new();
    for r in 0..3 {
        let (vals, exact) = round::<bf16>(&rng.vec(4, -2.0, 2.0));
        x.write_at(s, r * row, &vals).map_err(|e| e.to_string())?;
        want.extend(exact.iter().map(|v| -v));
    }
    let desc = UnaryDescriptor {
        op: UnaryOp::Neg,
        element: ElementKind::Bf16,
        shape: [3, 4],
    };
    let plan = UnaryPlan::<bf16, 2>::select(s, &desc, &PlanPreference::default())
        .map_err(|e| e.to_string())?;
    plan.run(
        s,
        Workspace::None,
        UnaryArgs {
            x: TensorRef::new(x.as_slice(), [3, 4], [row, 1]).map_err(|e| e.to_string())?,
            y: TensorMut::new(y.as_slice_mut(), [3, 4], [row, 1]).map_err(|e| e.to_string())?,
        },
    )
    .map_err(|e| e.to_string())?;
    let mut got = Vec::new();
    for r in 0..3 {
        let v = y.read_at(s, r * row, 5).map_err(|e| e.to_string())?;
        got.extend(v[..4].iter().map(|e| e.to_f64()));
        if !v[4].to_f64().is_nan() {
            return Err(format!("element after row {r} was written"));
        }
    }
    compare(
        "neg bf16 at offsets past 2^32",
        &got,
        &want,
        pointwise_tol(ElementKind::Bf16),
        None,
    )
}

// ---------------------------------------------------------------------------
// In place and aliasing
// ---------------------------------------------------------------------------

/// Shape of the in-place and aliasing tests: 4847 elements, a tail for
/// every vector width, several blocks.
const IP_SHAPE: [usize; 2] = [37, 131];
/// `IP_SHAPE` with its second axis 1: the broadcast operand.
const IP_ROW: [usize; 2] = [1, 131];

/// Equal values, NaN equal to NaN, the sign of zero compared: an in-place
/// run executes the same kernel on the same values as the out-of-place
/// one, so the results (and the untouched NaNs around a strided view)
/// agree bit for bit; a cast is a function of its input.
pub(crate) fn identical(what: &str, got: &[f64], want: &[f64]) -> Result<(), String> {
    if got.len() != want.len() {
        return Err(format!(
            "{what}: {} elements, expected {}",
            got.len(),
            want.len()
        ));
    }
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        if g.to_bits() != w.to_bits() && !(g.is_nan() && w.is_nan()) {
            return Err(format!("{what}: element {i} is {g:e}, expected {w:e}"));
        }
    }
    Ok(())
}

/// `logical` of `shape` stored at `strides` in a new device buffer, NaN
/// between the view's elements.
fn placed<T: Element>(logical: &[f64], shape: &[usize], strides: &[usize]) -> DeviceBuffer<T> {
    let offsets = view_offsets(shape, strides);
    let len = offsets.iter().max().map_or(0, |m| m + 1);
    let mut host = vec![f64::NAN; len];
    for (&o, &v) in offsets.iter().zip(logical) {
        host[o] = v;
    }
    upload::<T>(&host).0
}

/// Lend a workspace buffer to `run_bw`.
fn lend(ws: &mut DeviceBuffer<u8>) -> Workspace<'_> {
    Workspace::Borrowed(ws.as_slice_mut())
}

/// A view of `buf` with `shape` and `strides` (test data: always fits).
fn tref<'a, T: Element, const N: usize>(
    buf: &'a DeviceBuffer<T>,
    shape: [usize; N],
    strides: &[usize],
) -> TensorRef<'a, T, N> {
    TensorRef::new(buf.as_slice(), shape, arr(strides)).expect("input view")
}

/// A writable view of `buf` with `shape` and `strides`.
fn tmut<'a, T: Element, const N: usize>(
    buf: &'a mut DeviceBuffer<T>,
    shape: [usize; N],
    strides: &[usize],
) -> TensorMut<'a, T, N> {
    TensorMut::new(buf.as_slice_mut(), shape, arr(strides)).expect("output view")
}

type Shape2 = [usize; 2];

/// A binary plan of `op` whose `IP_SHAPE` operand is `a` (`full_a`) or `b`,
/// the other of shape `other`, with `(a_shape, b_shape)`.
fn in_place_plan<T: Element>(
    op: BinaryOp,
    full_a: bool,
    other: [usize; 2],
) -> Result<(BinaryPlan<T, 2>, Shape2, Shape2), String> {
    let (a_shape, b_shape) = if full_a {
        (IP_SHAPE, other)
    } else {
        (other, IP_SHAPE)
    };
    let desc = BinaryDescriptor {
        op,
        element: T::KIND,
        a_shape,
        b_shape,
    };
    let plan = select::<BinaryPlan<T, 2>>(&desc, &PlanPreference::default())?;
    Ok((plan, a_shape, b_shape))
}

/// Every in-place form the elementwise plans offer gives the out-of-place
/// result: unary `y = x` and `dx = dy`, binary `out = a` and `out = b`,
/// binary backward `da = dy` (with `db` reduced from the `dy` it
/// overwrites, and with `db` pointwise) and `db = dy` (with `da` reduced),
/// and `da = dy` reached through `run_bw` with two unsafe views of one
/// buffer. Each runs contiguous (vectorised kernel) and with every other
/// element (strided kernel).
pub fn check_in_place<T: Element>() -> Result<usize, String> {
    let g = gpu();
    let s = &g.stream;
    let pref = PlanPreference::default();
    let err = |what: &'static str| move |e: Error| format!("{what} {}: {e}", T::KIND);
    let mut rng = Rng::new(0x1A1A);
    let mut n = 0;
    let dense = contiguous(&IP_SHAPE);
    let sparse: Vec<usize> = dense.iter().map(|st| 2 * st).collect();
    let row = contiguous(&IP_ROW);
    for st in [dense, sparse] {
        let what = |f: &str| format!("{f} {} strides {st:?}", T::KIND);
        let full = IP_SHAPE.iter().product();
        let (xs, dys) = (rng.vec(full, -3.0, 3.0), rng.vec(full, -1.0, 1.0));
        let len = view_offsets(&IP_SHAPE, &st)
            .iter()
            .max()
            .map_or(0, |m| m + 1);

        // unary forward and backward
        let desc = UnaryDescriptor {
            op: UnaryOp::Silu,
            element: T::KIND,
            shape: IP_SHAPE,
        };
        let plan = UnaryPlan::<T, 2>::select(s, &desc, &pref).map_err(err("select"))?;
        let x = placed::<T>(&xs, &IP_SHAPE, &st);
        let mut y = poisoned::<T>(len);
        let args = UnaryArgs {
            x: tref(&x, IP_SHAPE, &st),
            y: tmut(&mut y, IP_SHAPE, &st),
        };
        plan.run(s, Workspace::None, args)
            .map_err(err("unary run"))?;
        let mut xy = placed::<T>(&xs, &IP_SHAPE, &st);
        plan.run_in_place(s, Workspace::None, tmut(&mut xy, IP_SHAPE, &st))
            .map_err(err("unary run_in_place"))?;
        identical(&what("unary y = x"), &download(&xy), &download(&y))?;
        let dy = placed::<T>(&dys, &IP_SHAPE, &st);
        let mut dx = poisoned::<T>(len);
        let args = UnaryBwArgs {
            x: tref(&x, IP_SHAPE, &st),
            dy: tref(&dy, IP_SHAPE, &st),
            dx: tmut(&mut dx, IP_SHAPE, &st),
        };
        plan.run_bw(s, Workspace::None, args)
            .map_err(err("unary run_bw"))?;
        let mut dy_dx = placed::<T>(&dys, &IP_SHAPE, &st);
        let r = plan.run_bw_in_place(
            s,
            Workspace::None,
            tref(&x, IP_SHAPE, &st),
            tmut(&mut dy_dx, IP_SHAPE, &st),
        );
        r.map_err(err("unary run_bw_in_place"))?;
        identical(&what("unary dx = dy"), &download(&dy_dx), &download(&dx))?;
        n += 2;

        // binary forward: out = a (b broadcast), out = b (a broadcast)
        let bs = rng.vec(131, 0.5, 2.0);
        let b_row = upload::<T>(&bs).0;
        for (into_a, op) in [(true, BinaryOp::Mul), (false, BinaryOp::Sub)] {
            let (plan, a_shape, b_shape) = in_place_plan::<T>(op, into_a, IP_ROW)?;
            let full_in = placed::<T>(&xs, &IP_SHAPE, &st);
            let (a, b) = if into_a {
                (tref(&full_in, a_shape, &st), tref(&b_row, b_shape, &row))
            } else {
                (tref(&b_row, a_shape, &row), tref(&full_in, b_shape, &st))
            };
            let mut out = poisoned::<T>(len);
            let args = BinaryArgs {
                a,
                b,
                out: tmut(&mut out, IP_SHAPE, &st),
            };
            plan.run(s, Workspace::None, args)
                .map_err(err("binary run"))?;
            let mut inout = placed::<T>(&xs, &IP_SHAPE, &st);
            let r = if into_a {
                let b = tref(&b_row, IP_ROW, &row);
                plan.run_in_place_a(s, Workspace::None, tmut(&mut inout, IP_SHAPE, &st), b)
            } else {
                let a = tref(&b_row, IP_ROW, &row);
                plan.run_in_place_b(s, Workspace::None, a, tmut(&mut inout, IP_SHAPE, &st))
            };
            r.map_err(err("binary run_in_place"))?;
            let form = if into_a { "out = a" } else { "out = b" };
            identical(&what(form), &download(&inout), &download(&out))?;
            n += 1;
        }

        // binary backward, one gradient written over dy: into a with b
        // broadcast (db reduced from the dy being overwritten), into b with
        // a broadcast, into a with db pointwise.
        let cases = [
            (Grad::A, BinaryOp::Mul, IP_ROW),
            (Grad::B, BinaryOp::Div, IP_ROW),
            (Grad::A, BinaryOp::Maximum, IP_SHAPE),
        ];
        for (into, op, other_shape) in cases {
            let (plan, a_shape, b_shape) = in_place_plan::<T>(op, into == Grad::A, other_shape)?;
            let other_st = if other_shape == IP_ROW {
                row.clone()
            } else {
                st.clone()
            };
            let other_vals = values(op, &mut rng, other_shape.iter().product(), into == Grad::A);
            let full_vals = values(op, &mut rng, full, into == Grad::B);
            let full_in = placed::<T>(&full_vals, &IP_SHAPE, &st);
            let other_in = placed::<T>(&other_vals, &other_shape, &other_st);
            let (a, b) = if into == Grad::A {
                (
                    tref(&full_in, a_shape, &st),
                    tref(&other_in, b_shape, &other_st),
                )
            } else {
                (
                    tref(&other_in, a_shape, &other_st),
                    tref(&full_in, b_shape, &st),
                )
            };
            let dy = placed::<T>(&dys, &IP_SHAPE, &st);
            let other_len = other_in.len();
            let mut ws = workspace(plan.bw_workspace_size(Grad::A | Grad::B));
            let (mut g_into, mut g_other) = (poisoned::<T>(len), poisoned::<T>(other_len));
            let (da, db) = if into == Grad::A {
                (
                    tmut(&mut g_into, a_shape, &st),
                    tmut(&mut g_other, b_shape, &other_st),
                )
            } else {
                (
                    tmut(&mut g_other, a_shape, &other_st),
                    tmut(&mut g_into, b_shape, &st),
                )
            };
            let args = BinaryBwArgs {
                a,
                b,
                dy: tref(&dy, IP_SHAPE, &st),
                da: Some(da),
                db: Some(db),
            };
            plan.run_bw(s, lend(&mut ws), args)
                .map_err(err("binary run_bw"))?;
            let (want_into, want_other) = (download(&g_into), download(&g_other));
            let expect = |form: &str, got: &DeviceBuffer<T>, got_other: &DeviceBuffer<T>| {
                identical(&what(form), &download(got), &want_into)?;
                let form = format!("{form}, other");
                identical(&what(&form), &download(got_other), &want_other)
            };

            let mut dy_in_place = placed::<T>(&dys, &IP_SHAPE, &st);
            let mut other = poisoned::<T>(other_len);
            let args = BinaryBwInPlaceArgs {
                a,
                b,
                dy: tmut(&mut dy_in_place, IP_SHAPE, &st),
                into,
                other: Some(tmut(&mut other, other_shape, &other_st)),
            };
            plan.run_bw_in_place(s, lend(&mut ws), args)
                .map_err(err("binary run_bw_in_place"))?;
            let form = format!("{} {:?} = dy", op.name(), into);
            expect(&form, &dy_in_place, &other)?;
            n += 1;

            // The same through run_bw, with the gradient and dy two views of
            // one buffer.
            let mut other = poisoned::<T>(other_len);
            let shared = placed::<T>(&dys, &IP_SHAPE, &st);
            let (addr, ctx) = (shared.as_slice().addr(), g.ctx.id());
            // SAFETY: both views cover exactly `shared`, which outlives the
            // call; the plan writes the pointwise gradient over dy in place,
            // element by element, after the reductions that read dy.
            let (dy_view, g_view) = unsafe {
                (
                    DeviceSlice::<T>::from_raw_parts(addr, shared.len(), ctx),
                    DeviceSliceMut::<T>::from_raw_parts(addr, shared.len(), ctx),
                )
            };
            let g_view = TensorMut::new(g_view, IP_SHAPE, arr(&st)).map_err(err("view"))?;
            let other_view = tmut(&mut other, other_shape, &other_st);
            let (da, db) = if into == Grad::A {
                (g_view, other_view)
            } else {
                (other_view, g_view)
            };
            let args = BinaryBwArgs {
                a,
                b,
                dy: TensorRef::new(dy_view, IP_SHAPE, arr(&st)).map_err(err("view"))?,
                da: Some(da),
                db: Some(db),
            };
            plan.run_bw(s, lend(&mut ws), args)
                .map_err(err("binary run_bw aliased"))?;
            expect(&format!("{form} through run_bw"), &shared, &other)?;
            n += 1;
        }
    }
    Ok(n)
}

/// Two views over one f32 buffer `buf`: a read-only one at element `at_ref`
/// and a writable one at element `at_mut`, each of `len` elements.
///
/// # Safety
/// The views alias: only for calls that must reject them before touching
/// memory.
unsafe fn aliased(
    buf: &DeviceBuffer<f32>,
    at_ref: usize,
    at_mut: usize,
    len: usize,
) -> (DeviceSlice<'_, f32>, DeviceSliceMut<'_, f32>) {
    let (addr, ctx) = (buf.as_slice().addr(), buf.as_slice().ctx_id());
    assert!(at_ref + len <= buf.len() && at_mut + len <= buf.len());
    // SAFETY: both ranges lie inside `buf` (asserted above); the caller
    // uses them only where the plan rejects the overlap.
    unsafe {
        (
            DeviceSlice::from_raw_parts(addr + 4 * at_ref as u64, len, ctx),
            DeviceSliceMut::from_raw_parts(addr + 4 * at_mut as u64, len, ctx),
        )
    }
}

/// Every overlap the aliasing rules forbid is `InvalidArgument` naming the
/// output (or `into`), and leaves every buffer as it was.
pub fn check_rejected_aliases() -> Result<usize, String> {
    let g = gpu();
    let s = &g.stream;
    let pref = PlanPreference::default();
    let mut rng = Rng::new(0xA11A5);
    let full: usize = IP_SHAPE.iter().product();
    let dense = contiguous(&IP_SHAPE);
    let row = contiguous(&IP_ROW);
    let (buf, host) = upload::<f32>(&rng.vec(2 * full + 1, -1.0, 1.0));
    let (other, other_host) = upload::<f32>(&rng.vec(full + 1, -1.0, 1.0));
    let mut n = 0;
    let mut rejected = |what: &str, r: Result<()>, arg: &'static str| -> Result<(), String> {
        expect_err(what, r, invalid_argument(arg))?;
        identical(&format!("{what}: buffer"), &download(&buf), &host)?;
        identical(
            &format!("{what}: other buffer"),
            &download(&other),
            &other_host,
        )?;
        n += 1;
        Ok(())
    };
    let select_unary = |shape| {
        let desc = UnaryDescriptor {
            op: UnaryOp::Tanh,
            element: ElementKind::F32,
            shape,
        };
        UnaryPlan::<f32, 2>::select(s, &desc, &pref).map_err(|e| e.to_string())
    };
    let select_binary = |a_shape, b_shape| {
        let desc = BinaryDescriptor {
            op: BinaryOp::Mul,
            element: ElementKind::F32,
            a_shape,
            b_shape,
        };
        BinaryPlan::<f32, 2>::select(s, &desc, &pref).map_err(|e| e.to_string())
    };

    // unary: y a transposed view of x's bytes
    let t = [64usize, 33];
    let plan = select_unary(t)?;
    // SAFETY: rejected before launch.
    let (xs, ys) = unsafe { aliased(&buf, 0, 0, 64 * 33) };
    let args = UnaryArgs {
        x: TensorRef::new(xs, t, [33, 1]).map_err(|e| e.to_string())?,
        y: TensorMut::new(ys, t, [1, 64]).map_err(|e| e.to_string())?,
    };
    rejected(
        "unary y transposed over x",
        plan.run(s, Workspace::None, args),
        "y",
    )?;

    let plan = select_unary(IP_SHAPE)?;
    // unary backward: dx one element past dy
    // SAFETY: rejected before launch.
    let (dys, dxs) = unsafe { aliased(&buf, 0, 1, full) };
    let args = UnaryBwArgs {
        x: tref(&other, IP_SHAPE, &dense),
        dy: TensorRef::contiguous(dys, IP_SHAPE).map_err(|e| e.to_string())?,
        dx: TensorMut::contiguous(dxs, IP_SHAPE).map_err(|e| e.to_string())?,
    };
    rejected(
        "unary dx shifted over dy",
        plan.run_bw(s, Workspace::None, args),
        "dx",
    )?;
    // unary backward in place: x one element past dy_dx
    // SAFETY: rejected before launch.
    let (xs, dy_dx) = unsafe { aliased(&buf, 1, 0, full) };
    let r = plan.run_bw_in_place(
        s,
        Workspace::None,
        TensorRef::contiguous(xs, IP_SHAPE).map_err(|e| e.to_string())?,
        TensorMut::contiguous(dy_dx, IP_SHAPE).map_err(|e| e.to_string())?,
    );
    rejected("unary x shifted over dy_dx", r, "dy_dx")?;

    // binary: out over a broadcast a (a [1, 131] read for every row)
    let plan = select_binary(IP_ROW, IP_SHAPE)?;
    // SAFETY: rejected before launch.
    let (a_s, out_s) = unsafe { aliased(&buf, 0, 0, full) };
    let args = BinaryArgs {
        a: TensorRef::new(a_s, IP_ROW, arr(&row)).map_err(|e| e.to_string())?,
        b: tref(&other, IP_SHAPE, &dense),
        out: TensorMut::contiguous(out_s, IP_SHAPE).map_err(|e| e.to_string())?,
    };
    rejected(
        "binary out over broadcast a",
        plan.run(s, Workspace::None, args),
        "out",
    )?;
    // binary in place into a broadcast a
    // SAFETY: rejected before launch.
    let (_, a_s) = unsafe { aliased(&buf, 0, 0, 131) };
    let r = plan.run_in_place_a(
        s,
        Workspace::None,
        TensorMut::contiguous(a_s, IP_ROW).map_err(|e| e.to_string())?,
        tref(&other, IP_SHAPE, &dense),
    );
    rejected("binary run_in_place_a with a broadcast", r, "a")?;

    // binary backward, b broadcast: db reduced, da pointwise
    let plan = select_binary(IP_SHAPE, IP_ROW)?;
    let mut ws = workspace(plan.bw_workspace_size(Grad::A | Grad::B));
    // db the same view as b: a reduced gradient may not be an input
    // SAFETY: rejected before launch.
    let (b_s, db_s) = unsafe { aliased(&buf, 0, 0, 131) };
    let args = BinaryBwArgs {
        a: tref(&other, IP_SHAPE, &dense),
        b: TensorRef::contiguous(b_s, IP_ROW).map_err(|e| e.to_string())?,
        dy: tref(&other, IP_SHAPE, &dense),
        da: None,
        db: Some(TensorMut::contiguous(db_s, IP_ROW).map_err(|e| e.to_string())?),
    };
    rejected(
        "binary db = b (reduced)",
        plan.run_bw(s, lend(&mut ws), args),
        "db",
    )?;
    // a gradient overlapping dy: db (reduced) inside it, da (pointwise)
    // one element past its start
    for (what, at, grad) in [
        ("binary db inside dy", 5, Grad::B),
        ("binary da shifted over dy", 1, Grad::A),
    ] {
        let shape = if grad == Grad::A { IP_SHAPE } else { IP_ROW };
        // SAFETY: rejected before launch.
        let (dy_s, g_s) = unsafe { aliased(&buf, 0, at, full) };
        let g_s = g_s.split_at(shape.iter().product()).ok_or("split")?.0;
        let g = TensorMut::contiguous(g_s, shape).map_err(|e| e.to_string())?;
        let (da, db) = if grad == Grad::A {
            (Some(g), None)
        } else {
            (None, Some(g))
        };
        let args = BinaryBwArgs {
            a: tref(&other, IP_SHAPE, &dense),
            b: tref(&other, IP_ROW, &row),
            dy: TensorRef::contiguous(dy_s, IP_SHAPE).map_err(|e| e.to_string())?,
            da,
            db,
        };
        rejected(what, plan.run_bw(s, lend(&mut ws), args), grad.arg())?;
    }

    // binary backward, same shapes: da and db one buffer
    let plan = select_binary(IP_SHAPE, IP_SHAPE)?;
    // SAFETY: rejected before launch; the second mutable view is built
    // from the same address.
    let (_, da_s) = unsafe { aliased(&buf, 0, 0, full) };
    // SAFETY: as above.
    let (_, db_s) = unsafe { aliased(&buf, 0, 0, full) };
    let args = BinaryBwArgs {
        a: tref(&other, IP_SHAPE, &dense),
        b: tref(&other, IP_SHAPE, &dense),
        dy: tref(&other, IP_SHAPE, &dense),
        da: Some(TensorMut::contiguous(da_s, IP_SHAPE).map_err(|e| e.to_string())?),
        db: Some(TensorMut::contiguous(db_s, IP_SHAPE).map_err(|e| e.to_string())?),
    };
    rejected(
        "binary da and db one buffer",
        plan.run_bw(s, lend(&mut ws), args),
        "db",
    )?;
    // backward in place: the other gradient overlapping dy, a gradient the
    // op does not have, and into a broadcast a (its gradient is a reduction)
    for (what, a_shape, into, other_at, arg) in [
        (
            "binary in place, db overlapping dy",
            IP_SHAPE,
            Grad::A,
            Some(1),
            "db",
        ),
        ("binary in place into X", IP_SHAPE, Grad::X, None, "into"),
        (
            "binary in place into a broadcast a",
            IP_ROW,
            Grad::A,
            None,
            "into",
        ),
    ] {
        let plan = select_binary(a_shape, IP_SHAPE)?;
        let mut ws = workspace(plan.bw_workspace_size(Grad::A | Grad::B));
        // SAFETY: rejected before launch.
        let (_, dy_m) = unsafe { aliased(&buf, 0, 0, full) };
        let other_grad = match other_at {
            Some(at) => {
                // SAFETY: as above.
                let (_, g) = unsafe { aliased(&buf, 0, at, full) };
                Some(TensorMut::contiguous(g, IP_SHAPE).map_err(|e| e.to_string())?)
            }
            None => None,
        };
        let args = BinaryBwInPlaceArgs {
            a: tref(&other, a_shape, &contiguous(&a_shape)),
            b: tref(&other, IP_SHAPE, &dense),
            dy: TensorMut::contiguous(dy_m, IP_SHAPE).map_err(|e| e.to_string())?,
            into,
            other: other_grad,
        };
        rejected(what, plan.run_bw_in_place(s, lend(&mut ws), args), arg)?;
    }
    Ok(n)
}

// ---------------------------------------------------------------------------
// Summation accuracy
// ---------------------------------------------------------------------------

/// The gradient of a scalar `b` in `a + b` sums `n` terms of dy. The plan
/// documents `|error| <= (2 log2(n) + 20) u sum|terms|` (pairwise sums; `u`
/// the f32 unit roundoff); this checks it for n = 793,000 and 16,777,216,
/// with split partials and unsplit (a workspace cap). A sequential f32 sum
/// of such terms (uniform in [0.5, 1.5)) exceeds that bound: by 2.2x at
/// 793k terms and 7.6x at 16.8M in a host simulation, while the
/// `2 u sqrt(n) sum|terms|` allowance of the table rows is 30x and 120x
/// looser.
pub fn check_pairwise_sums() -> Result<usize, String> {
    let g = gpu();
    let s = &g.stream;
    let mut n_checked = 0;
    for (rows, cols) in [(793usize, 1000usize), (4096, 4096)] {
        let n = rows * cols;
        let mut rng = Rng::new(n as u64);
        let (dy, dyv) = upload::<f32>(&rng.vec(n, 0.5, 1.5));
        let a = DeviceBuffer::<f32>::filled_bytes(s, n, 0x3F).map_err(|e| e.to_string())?;
        let (b, _) = upload::<f32>(&[0.25]);
        let exact: f64 = dyv.iter().sum();
        let abs: f64 = dyv.iter().map(|v| v.abs()).sum();
        let bound = (2.0 * (n as f64).log2() + 20.0) * ElementKind::F32.unit_roundoff() * abs;
        let desc = BinaryDescriptor {
            op: BinaryOp::Add,
            element: ElementKind::F32,
            a_shape: [rows, cols],
            b_shape: [1, 1],
        };
        let capped = PlanPreference::default().with_max_workspace_bytes(16);
        for (how, pref) in [("split", PlanPreference::default()), ("unsplit", capped)] {
            let plan = BinaryPlan::<f32, 2>::select(s, &desc, &pref).map_err(|e| e.to_string())?;
            let mut ws = workspace(plan.bw_workspace_size(Grad::B.into()));
            let mut db = poisoned::<f32>(1);
            let args = BinaryBwArgs {
                a: TensorRef::contiguous(a.as_slice(), [rows, cols]).map_err(|e| e.to_string())?,
                b: TensorRef::contiguous(b.as_slice(), [1, 1]).map_err(|e| e.to_string())?,
                dy: TensorRef::contiguous(dy.as_slice(), [rows, cols])
                    .map_err(|e| e.to_string())?,
                da: None,
                db: Some(
                    TensorMut::contiguous(db.as_slice_mut(), [1, 1]).map_err(|e| e.to_string())?,
                ),
            };
            plan.run_bw(s, lend(&mut ws), args)
                .map_err(|e| format!("{how} db over {n}: {e}"))?;
            let got = download(&db)[0];
            let err = (got - exact).abs();
            if err.is_nan() || err > bound {
                return Err(format!(
                    "{how} db over {n} terms ({}): {got:e}, exact {exact:e}, error {err:e} > bound \
                     {bound:e}",
                    plan.sku()
                ));
            }
            n_checked += 1;
        }
    }
    Ok(n_checked)
}
