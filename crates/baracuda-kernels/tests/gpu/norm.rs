//! GPU tests of the norm family: the `layer_norm` and `rms_norm` rows of
//! the op table and their residual forms (`layer_norm_residual`,
//! `rms_norm_residual`: `s = x + r`, `y = norm(s)`), against
//! `reference::norm` (the `group_norm` row is in `group_norm.rs`, the
//! `batch_norm` row in `batch_norm.rs`, the `local_response_norm` row in
//! `local_response_norm.rs`).
//!
//! Samples: hidden sizes 1, small odd tails, 4096 (the register kernel) and
//! 40000 (the element-wise kernel), a single row, no rows, two normalized
//! dims, rows with a gap between them (aligned: register kernel; odd:
//! element-wise kernel), a misaligned x, weight and bias absent, NaN and
//! infinities (forward), and a realistic [256, 8192]. Each sample checks
//! y, the saved mean and rstd, dx, dweight and dbias (those the sample
//! has), and that nothing outside the views (guards, row gaps) was written.
//! The residual rows add r (laid out as x, without the misalignment), the
//! sum s (its own buffer, or written over r in place), and a ds added to
//! dx (its own buffer, or dx written over it in place) on most samples.

use baracuda_kernels::reference::norm::{Norm, NormGrads};
use baracuda_kernels::*;

use crate::harness::*;
use crate::reduce::{nan_marked, view_result};
use crate::table::{BadInputs, OpCase, Tensors};

/// How a sample lays out its row-shaped operands (x, y, dy, dx).
#[derive(Copy, Clone, Debug, PartialEq)]
pub enum Layout {
    /// Row-major.
    Contiguous,
    /// Each row followed by `pad` unused elements.
    Gapped(usize),
    /// x starts one element into its buffer.
    Misaligned,
}

/// One normalization problem of a row.
#[derive(Clone, Debug)]
pub struct NormSample {
    layer: bool,
    shape: Vec<usize>,
    k: usize,
    weight: bool,
    bias: bool,
    layout: Layout,
    special: bool,
    eps: f64,
    /// The residual form: r added to x, s written.
    residual: bool,
    /// The backward takes a ds (residual form).
    ds: bool,
    /// s written over r, dx over ds (residual form).
    in_place: bool,
}

impl NormSample {
    fn rows(&self) -> usize {
        self.shape[..self.shape.len() - self.k].iter().product()
    }
    fn h(&self) -> usize {
        self.shape[self.shape.len() - self.k..].iter().product()
    }
    fn reference(&self) -> Norm {
        Norm {
            layer: self.layer,
            rows: self.rows(),
            h: self.h(),
            eps: self.eps,
        }
    }
    fn descriptor<const N: usize>(&self, kind: ElementKind) -> NormDescriptor<N> {
        let shape = arr::<N>(&self.shape);
        let d = if self.layer {
            NormDescriptor::layer_norm(kind, shape, self.k)
        } else {
            NormDescriptor::rms_norm(kind, shape, self.k)
        };
        d.with_eps(self.eps)
            .with_weight(self.weight)
            .with_bias(self.bias)
            .with_residual(self.residual)
    }
    /// Strides and buffer length of a row-shaped operand.
    fn row_layout(&self, gapped: bool) -> (Vec<usize>, usize) {
        let mut st = contiguous(&self.shape);
        let (rows, h) = (self.rows(), self.h());
        match self.layout {
            Layout::Gapped(pad) if gapped => {
                let outer = self.shape.len() - self.k;
                let mut s = h + pad;
                for d in (0..outer).rev() {
                    st[d] = s;
                    s *= self.shape[d];
                }
                (st, rows * (h + pad))
            }
            _ => (st, rows * h),
        }
    }
}

const EPS: f64 = 1e-5;

/// The row of LayerNorm (`LAYER`) or RMSNorm, the residual form when
/// `RES`.
pub const fn row<const LAYER: bool, const RES: bool>(name: &'static str) -> OpCase<NormSample> {
    OpCase {
        name,
        dtypes: FLOATS,
        backward: true,
        samples: |_| {
            if RES {
                residual_samples(LAYER)
            } else {
                samples(LAYER)
            }
        },
        inputs,
        run,
        reference,
        tolerance,
        bad_inputs: || {
            if RES {
                bad_residual_inputs(LAYER)
            } else {
                bad_inputs(LAYER)
            }
        },
        unsupported: |kind| unsupported(LAYER, kind),
    }
}

/// The family's rows of the op table.
pub(crate) static ROWS: &[&dyn crate::table::Row] = &[
    &row::<true, false>("layer_norm"),
    &row::<false, false>("rms_norm"),
    &row::<true, true>("layer_norm_residual"),
    &row::<false, true>("rms_norm_residual"),
    &crate::group_norm::ROW,
    &crate::batch_norm::ROW,
    &crate::local_response_norm::ROW,
];

crate::table_tests!(ROWS; layer_norm, rms_norm, layer_norm_residual, rms_norm_residual, group_norm, batch_norm, local_response_norm);

// ---------------------------------------------------------------------------
// Samples
// ---------------------------------------------------------------------------

fn samples(layer: bool) -> Vec<NormSample> {
    use Layout::*;
    let s = |shape: &[usize], k: usize, layout| NormSample {
        layer,
        shape: shape.to_vec(),
        k,
        weight: true,
        bias: layer,
        layout,
        special: false,
        eps: EPS,
        residual: false,
        ds: false,
        in_place: false,
    };
    let bare = |mut x: NormSample| {
        x.weight = false;
        x.bias = false;
        x
    };
    let special = |mut x: NormSample| {
        x.special = true;
        x
    };
    // Rows of one element: RMSNorm's dx = rstd dy (1 - xhat^2) cancels to
    // eps / x^2 (ill-conditioned for a small eps), so a large eps there.
    let mut one = s(&[5, 1], 1, Contiguous);
    one.eps = 0.5;
    let mut v = vec![
        one,
        s(&[7, 13], 1, Contiguous),
        s(&[3, 37], 1, Misaligned),
        bare(s(&[9, 100], 1, Contiguous)),
        s(&[4096], 1, Contiguous),
        s(&[16, 4096], 1, Contiguous),
        bare(s(&[16, 4096], 1, Contiguous)),
        s(&[0, 64], 1, Contiguous),
        s(&[3, 5, 40], 2, Contiguous),
        s(&[2, 3, 8, 16], 2, Gapped(16)),
        s(&[6, 256], 1, Gapped(128)),
        s(&[6, 250], 1, Gapped(3)),
        s(&[4, 40000], 1, Contiguous),
        special(s(&[6, 64], 1, Contiguous)),
        special(s(&[6, 61], 1, Contiguous)),
        s(&[256, 8192], 1, Contiguous),
    ];
    if layer {
        // LayerNorm with a weight but no bias
        let mut x = s(&[10, 96], 1, Contiguous);
        x.bias = false;
        v.push(x);
    }
    v
}

/// The residual rows' samples: the register and element-wise kernels,
/// odd tails, two normalized dims, row gaps, a misaligned x, no rows,
/// weight and bias absent, with and without ds, s and dx out of place and
/// in place, and a realistic [256, 8192].
fn residual_samples(layer: bool) -> Vec<NormSample> {
    use Layout::*;
    let s = |shape: &[usize], k: usize, layout, ds: bool, in_place: bool| NormSample {
        layer,
        shape: shape.to_vec(),
        k,
        weight: true,
        bias: layer,
        layout,
        special: false,
        eps: EPS,
        residual: true,
        ds,
        in_place,
    };
    let bare = |mut x: NormSample| {
        x.weight = false;
        x.bias = false;
        x
    };
    let mut v = vec![
        s(&[7, 13], 1, Contiguous, true, false),
        s(&[3, 37], 1, Misaligned, false, false),
        s(&[3, 37], 1, Misaligned, true, true),
        bare(s(&[9, 100], 1, Contiguous, true, false)),
        s(&[16, 4096], 1, Contiguous, false, false),
        s(&[16, 4096], 1, Contiguous, true, true),
        bare(s(&[16, 4096], 1, Contiguous, false, true)),
        s(&[0, 64], 1, Contiguous, true, false),
        s(&[3, 5, 40], 2, Contiguous, true, false),
        s(&[2, 3, 8, 16], 2, Gapped(16), true, true),
        s(&[6, 256], 1, Gapped(128), true, false),
        s(&[6, 250], 1, Gapped(3), true, true),
        s(&[4, 40000], 1, Contiguous, true, false),
        s(&[4, 40000], 1, Contiguous, false, true),
        s(&[256, 8192], 1, Contiguous, true, false),
    ];
    if layer {
        // LayerNorm with a weight but no bias
        let mut x = s(&[10, 96], 1, Contiguous, true, false);
        x.bias = false;
        v.push(x);
    }
    v
}

/// x (logical, row-major; LayerNorm's rows off-centre), weight, bias, dy,
/// and for the residual form r and (when the sample has it) ds.
fn inputs(s: &NormSample, rng: &mut Rng) -> Tensors {
    let (rows, h) = (s.rows(), s.h());
    let mut x = rng.vec(rows * h, -2.0, 2.0);
    if s.layer {
        x.iter_mut().for_each(|v| *v += 1.5);
    }
    if s.special && rows >= 3 {
        x[1] = f64::NAN;
        x[h + 2] = f64::INFINITY;
        x[2 * h] = f64::NEG_INFINITY;
    }
    let mut t = Tensors::default();
    t.push("x", x);
    if s.weight {
        t.push("weight", rng.vec(h, 0.5, 1.5));
    }
    if s.bias {
        t.push("bias", rng.vec(h, -1.0, 1.0));
    }
    t.push("dy", rng.vec(rows * h, -1.0, 1.0));
    if s.residual {
        t.push("r", rng.vec(rows * h, -1.0, 1.0));
        if s.ds {
            t.push("ds", rng.vec(rows * h, -1.0, 1.0));
        }
    }
    t
}

fn reference(kind: ElementKind, s: &NormSample, inputs: &Tensors, got: &Tensors) -> Tensors {
    let r = s.reference();
    let mut t = Tensors::default();
    // the residual form normalizes s = x + r rounded to the dtype
    let sum = s.residual.then(|| {
        let (x, res) = (inputs.get("x"), inputs.get("r"));
        round_to(
            kind,
            &x.iter().zip(res).map(|(a, b)| a + b).collect::<Vec<_>>(),
        )
    });
    let x = sum.as_deref().unwrap_or(inputs.get("x"));
    let (w, b) = (inputs.find("weight"), inputs.find("bias"));
    let out = r.forward(x, w, b);
    if s.residual {
        t.push("sum", x.to_vec());
    }
    t.push("y", nan_marked(out.y));
    if s.layer {
        t.push("mean", nan_marked(out.mean));
    }
    t.push("rstd", nan_marked(out.rstd));
    if got.find("dx").is_some() {
        let g = r.backward_residual(x, w, inputs.get("dy"), inputs.find("ds"));
        push_grads(&mut t, g, (s.weight, s.bias));
    }
    t
}

/// A reference backward's dx, and dweight and dbias when the sample has
/// a weight and a bias.
pub(crate) fn push_grads(t: &mut Tensors, g: NormGrads, (weight, bias): (bool, bool)) {
    t.push("dx", g.dx);
    if weight {
        t.push("dweight", g.dweight);
    }
    if bias {
        t.push("dbias", g.dbias);
    }
}

fn tolerance(
    kind: ElementKind,
    s: &NormSample,
    name: &str,
    want: &[f64],
    _inputs: &Tensors,
) -> Tolerance {
    affine_tolerance(
        kind,
        name,
        (s.h() as f64 + 2.0).log2(),
        s.rows() as f64,
        want,
    )
}

/// The tolerance of output `name` of a normalization over groups of
/// `depth = log2(elements + 2)`, whose dweight and dbias sum `terms`
/// products; NaN, infinities and marked NaN in `want` left out.
pub(crate) fn affine_tolerance(
    kind: ElementKind,
    name: &str,
    depth: f64,
    terms: f64,
    want: &[f64],
) -> Tolerance {
    let (u_t, u_acc) = (kind.unit_roundoff(), acc_roundoff(kind));
    let finite: Vec<f64> = want
        .iter()
        .copied()
        .filter(|v| v.is_finite() && *v != f64::MAX)
        .collect();
    match name {
        // statistics in the accumulator type, never rounded to T
        "mean" | "rstd" => Tolerance::of_max(64.0 * u_acc * depth, 64.0 * u_acc * depth, &finite),
        // column sums over the rows (the batch and the spatial positions)
        "dweight" | "dbias" => {
            let fold = 64.0 * u_acc * (terms + 2.0).log2() * (terms + 1.0).sqrt() * depth;
            Tolerance::of_max(2.0 * u_t + fold, fold, &finite)
        }
        // y and dx: one rounding to T, and the statistics' error, which
        // follows the row's largest terms
        _ => {
            let fold = 64.0 * u_acc * depth;
            Tolerance::of_max(2.0 * u_t + fold, 2.0 * u_t + fold, &finite)
        }
    }
}

// ---------------------------------------------------------------------------
// Device runs
// ---------------------------------------------------------------------------

fn run(
    kind: ElementKind,
    s: &NormSample,
    inputs: &Tensors,
    backward: bool,
) -> Result<Tensors, String> {
    if s.residual {
        return crate::with_float!(kind, T => match (s.shape.len(), s.k) {
            (2, 1) => if s.layer { run_residual::<T, LayerNorm, 2, 1>(s, inputs, backward) }
                      else { run_residual::<T, RmsNorm, 2, 1>(s, inputs, backward) },
            (3, 2) => if s.layer { run_residual::<T, LayerNorm, 3, 2>(s, inputs, backward) }
                      else { run_residual::<T, RmsNorm, 3, 2>(s, inputs, backward) },
            (4, 2) => if s.layer { run_residual::<T, LayerNorm, 4, 2>(s, inputs, backward) }
                      else { run_residual::<T, RmsNorm, 4, 2>(s, inputs, backward) },
            other => Err(format!("no test instance for ranks {other:?}")),
        });
    }
    crate::with_float!(kind, T => match (s.shape.len(), s.k) {
        (1, 1) => if s.layer { run_ranked::<T, LayerNorm, 1, 1>(s, inputs, backward) }
                  else { run_ranked::<T, RmsNorm, 1, 1>(s, inputs, backward) },
        (2, 1) => if s.layer { run_ranked::<T, LayerNorm, 2, 1>(s, inputs, backward) }
                  else { run_ranked::<T, RmsNorm, 2, 1>(s, inputs, backward) },
        (3, 2) => if s.layer { run_ranked::<T, LayerNorm, 3, 2>(s, inputs, backward) }
                  else { run_ranked::<T, RmsNorm, 3, 2>(s, inputs, backward) },
        (4, 2) => if s.layer { run_ranked::<T, LayerNorm, 4, 2>(s, inputs, backward) }
                  else { run_ranked::<T, RmsNorm, 4, 2>(s, inputs, backward) },
        other => Err(format!("no test instance for ranks {other:?}")),
    })
}

/// Saved statistics as f64: the accumulator type's values from their
/// bytes (read back as u8 values).
pub(crate) fn stats_values(kind: ElementKind, bytes: &[f64]) -> Vec<f64> {
    let b: Vec<u8> = bytes.iter().map(|&v| v as u8).collect();
    if kind == ElementKind::F64 {
        b.chunks_exact(8)
            .map(|c| f64::from_le_bytes(c.try_into().expect("8 bytes")))
            .collect()
    } else {
        b.chunks_exact(4)
            .map(|c| f64::from(f32::from_le_bytes(c.try_into().expect("4 bytes"))))
            .collect()
    }
}

/// A dense view of a parameter, when the sample has it.
pub(crate) fn param_view<T: Element, const K: usize>(
    b: &Option<DeviceBuffer<T>>,
    shape: [usize; K],
) -> Result<Option<TensorRef<'_, T, K>>, String> {
    b.as_ref()
        .map(|b| TensorRef::contiguous(b.as_slice(), shape).map_err(|e| e.to_string()))
        .transpose()
}

/// A dense view of a parameter's gradient, when asked.
pub(crate) fn grad_view<T: Element, const K: usize>(
    b: &mut Guarded<T>,
    on: bool,
    shape: [usize; K],
) -> Result<Option<TensorMut<'_, T, K>>, String> {
    on.then(|| TensorMut::contiguous(b.slice_mut(), shape).map_err(|e| e.to_string()))
        .transpose()
}

fn run_ranked<T: Element, Kind: NormKind, const N: usize, const K: usize>(
    s: &NormSample,
    inputs: &Tensors,
    backward: bool,
) -> Result<Tensors, String> {
    let g = gpu();
    let what = format!("{} {} {:?} {:?}", Kind::NAME, T::KIND, s.shape, s.layout);
    let e = |e: Error| format!("{what}: {e}");
    let plan = select::<NormPlan<T, Kind, N, K>>(&s.descriptor::<N>(T::KIND), &Default::default())?;
    let norm_shape: [usize; K] = std::array::from_fn(|i| s.shape[N - K + i]);
    let (xs, x_len) = s.row_layout(true);
    let x_off = usize::from(s.layout == Layout::Misaligned);
    let xbuf = upload_strided::<T>(inputs.get("x"), &s.shape, &xs, x_len, x_off);
    let x = xbuf.view::<N>(&s.shape)?;
    let param = |name: &str| inputs.find(name).map(upload::<T>).map(|(b, _)| b);
    let (wbuf, bbuf) = (param("weight"), param("bias"));
    let (weight, bias) = (
        param_view(&wbuf, norm_shape)?,
        param_view(&bbuf, norm_shape)?,
    );
    let (ys, y_len) = s.row_layout(true);
    let mut y = Guarded::<T>::new(y_len);
    let mut stats = Guarded::<u8>::new(plan.stats_bytes());
    plan.run(
        &g.stream,
        Workspace::None,
        NormArgs {
            x,
            weight,
            bias,
            residual: None,
            sum: None,
            y: TensorMut::new(y.slice_mut(), arr::<N>(&s.shape), arr::<N>(&ys))
                .map_err(|e| e.to_string())?,
            stats: Some(stats.slice_mut()),
        },
    )
    .map_err(e)?;
    let mut t = Tensors::default();
    t.push("y", nan_marked(view_result(&what, &y, &s.shape, &ys)?));
    let st = stats_values(T::KIND, &stats.result(&format!("{what} stats"))?);
    let rows = s.rows();
    if Kind::SAVES_MEAN {
        t.push("mean", nan_marked(st[..rows].to_vec()));
        t.push("rstd", nan_marked(st[rows..].to_vec()));
    } else {
        t.push("rstd", nan_marked(st));
    }
    if !backward || s.special {
        return Ok(t);
    }
    let (dys, dy_len) = s.row_layout(true);
    let (dybuf, _) = upload::<T>(&scatter(inputs.get("dy"), &s.shape, &dys, dy_len));
    let dy = TensorRef::new(dybuf.as_slice(), arr::<N>(&s.shape), arr::<N>(&dys))
        .map_err(|e| e.to_string())?;
    let (dxs, dx_len) = s.row_layout(true);
    let mut dx = Guarded::<T>::new(dx_len);
    let h = s.h();
    let mut dw = operand_if(s.weight, || Guarded::<T>::new(h));
    let mut db = operand_if(s.bias, || Guarded::<T>::new(h));
    let wants = plan.grads();
    let mut ws = workspace(plan.bw_workspace_size(wants));
    plan.run_bw(
        &g.stream,
        Workspace::Borrowed(ws.as_slice_mut()),
        NormBwArgs {
            x,
            weight,
            stats: stats.slice(),
            dy,
            ds: None,
            dx: Some(
                TensorMut::new(dx.slice_mut(), arr::<N>(&s.shape), arr::<N>(&dxs))
                    .map_err(|e| e.to_string())?,
            ),
            dweight: grad_view(&mut dw, s.weight, norm_shape)?,
            dbias: grad_view(&mut db, s.bias, norm_shape)?,
        },
    )
    .map_err(|e| format!("{what} backward: {e}"))?;
    t.push(
        "dx",
        view_result(&format!("{what} dx"), &dx, &s.shape, &dxs)?,
    );
    push_param_grads(&mut t, &what, [(&dw, s.weight), (&db, s.bias)])?;
    Ok(t)
}

/// A row-shaped input uploaded with the sample's (gapped) layout, as a
/// buffer the in-place forms can also write.
fn upload_rows<T: Element>(s: &NormSample, v: &[f64]) -> (DeviceBuffer<T>, Vec<usize>) {
    let (st, len) = s.row_layout(true);
    (upload::<T>(&scatter(v, &s.shape, &st, len)).0, st)
}

/// A mutable view of `buf` with `strides`, aliasing any read-only view of
/// it (the in-place forms).
///
/// # Safety
/// The caller runs only a plan that allows this view to be the same view
/// as the read-only ones it aliases.
unsafe fn alias_mut<T: Element, const N: usize>(
    buf: &DeviceBuffer<T>,
    shape: &[usize],
    strides: &[usize],
) -> Result<TensorMut<'static, T, N>, String> {
    let sl = buf.as_slice();
    // SAFETY: as the caller promises; the buffer outlives the run.
    let m = unsafe { DeviceSliceMut::<T>::from_raw_parts(sl.addr(), sl.len(), sl.ctx_id()) };
    TensorMut::new(m, arr::<N>(shape), arr::<N>(strides)).map_err(|e| e.to_string())
}

/// The residual form: s = x + r written to its own buffer or over r, y,
/// the statistics; the backward on s with a ds when the sample has one,
/// dx in its own buffer or over ds.
fn run_residual<T: Element, Kind: NormKind, const N: usize, const K: usize>(
    s: &NormSample,
    inputs: &Tensors,
    backward: bool,
) -> Result<Tensors, String> {
    let g = gpu();
    let what = format!(
        "{}_residual {} {:?} {:?} ds {} in place {}",
        Kind::NAME,
        T::KIND,
        s.shape,
        s.layout,
        s.ds,
        s.in_place
    );
    let e = |e: Error| format!("{what}: {e}");
    let plan = select::<NormPlan<T, Kind, N, K>>(&s.descriptor::<N>(T::KIND), &Default::default())?;
    let norm_shape: [usize; K] = std::array::from_fn(|i| s.shape[N - K + i]);
    let (xs, x_len) = s.row_layout(true);
    let x_off = usize::from(s.layout == Layout::Misaligned);
    let xbuf = upload_strided::<T>(inputs.get("x"), &s.shape, &xs, x_len, x_off);
    let x = xbuf.view::<N>(&s.shape)?;
    let (rbuf, rs) = upload_rows::<T>(s, inputs.get("r"));
    let r = TensorRef::new(rbuf.as_slice(), arr::<N>(&s.shape), arr::<N>(&rs))
        .map_err(|e| e.to_string())?;
    let param = |name: &str| inputs.find(name).map(upload::<T>).map(|(b, _)| b);
    let (wbuf, bbuf) = (param("weight"), param("bias"));
    let (weight, bias) = (
        param_view(&wbuf, norm_shape)?,
        param_view(&bbuf, norm_shape)?,
    );
    let (ys, y_len) = s.row_layout(true);
    let mut y = Guarded::<T>::new(y_len);
    // s in its own buffer, or (None) over r
    let mut sum = (!s.in_place).then(|| Guarded::<T>::new(y_len));
    let mut stats = Guarded::<u8>::new(plan.stats_bytes());
    let sum_view = match &mut sum {
        Some(b) => TensorMut::new(b.slice_mut(), arr::<N>(&s.shape), arr::<N>(&ys))
            .map_err(|e| e.to_string())?,
        // SAFETY: s over r, the same view: an in-place form the plan allows.
        None => unsafe { alias_mut::<T, N>(&rbuf, &s.shape, &rs)? },
    };
    plan.run(
        &g.stream,
        Workspace::None,
        NormArgs {
            x,
            weight,
            bias,
            residual: Some(r),
            sum: Some(sum_view),
            y: TensorMut::new(y.slice_mut(), arr::<N>(&s.shape), arr::<N>(&ys))
                .map_err(|e| e.to_string())?,
            stats: Some(stats.slice_mut()),
        },
    )
    .map_err(e)?;
    let mut t = Tensors::default();
    let sum_values = match &sum {
        Some(b) => view_result(&format!("{what} sum"), b, &s.shape, &ys)?,
        None => gather(&download(&rbuf), 0, &s.shape, &rs),
    };
    t.push("sum", sum_values);
    t.push("y", nan_marked(view_result(&what, &y, &s.shape, &ys)?));
    let st = stats_values(T::KIND, &stats.result(&format!("{what} stats"))?);
    let rows = s.rows();
    if Kind::SAVES_MEAN {
        t.push("mean", nan_marked(st[..rows].to_vec()));
        t.push("rstd", nan_marked(st[rows..].to_vec()));
    } else {
        t.push("rstd", nan_marked(st));
    }
    if !backward {
        return Ok(t);
    }
    // the backward normalizes s: the buffer the forward wrote it to
    let sv = match &sum {
        Some(b) => TensorRef::new(b.slice(), arr::<N>(&s.shape), arr::<N>(&ys)),
        None => TensorRef::new(rbuf.as_slice(), arr::<N>(&s.shape), arr::<N>(&rs)),
    }
    .map_err(|e| e.to_string())?;
    let (dybuf, dys) = upload_rows::<T>(s, inputs.get("dy"));
    let dy = TensorRef::new(dybuf.as_slice(), arr::<N>(&s.shape), arr::<N>(&dys))
        .map_err(|e| e.to_string())?;
    let dsbuf = inputs.find("ds").map(|v| upload_rows::<T>(s, v));
    let ds = dsbuf
        .as_ref()
        .map(|(b, st)| TensorRef::new(b.as_slice(), arr::<N>(&s.shape), arr::<N>(st)))
        .transpose()
        .map_err(|e| e.to_string())?;
    let (dxs, dx_len) = s.row_layout(true);
    // dx in its own buffer, or (None) over ds
    let dx_over_ds = s.in_place && dsbuf.is_some();
    let mut dx = (!dx_over_ds).then(|| Guarded::<T>::new(dx_len));
    let dx_view = match (&mut dx, &dsbuf) {
        (Some(b), _) => TensorMut::new(b.slice_mut(), arr::<N>(&s.shape), arr::<N>(&dxs))
            .map_err(|e| e.to_string())?,
        // SAFETY: dx over ds, the same view: an in-place form the plan
        // allows.
        (None, Some((b, st))) => unsafe { alias_mut::<T, N>(b, &s.shape, st)? },
        (None, None) => unreachable!("dx over ds without a ds"),
    };
    let h = s.h();
    let mut dw = operand_if(s.weight, || Guarded::<T>::new(h));
    let mut db = operand_if(s.bias, || Guarded::<T>::new(h));
    let wants = plan.grads();
    let mut ws = workspace(plan.bw_workspace_size(wants));
    plan.run_bw(
        &g.stream,
        Workspace::Borrowed(ws.as_slice_mut()),
        NormBwArgs {
            x: sv,
            weight,
            stats: stats.slice(),
            dy,
            ds,
            dx: Some(dx_view),
            dweight: grad_view(&mut dw, s.weight, norm_shape)?,
            dbias: grad_view(&mut db, s.bias, norm_shape)?,
        },
    )
    .map_err(|e| format!("{what} backward: {e}"))?;
    let dx_values = match (&dx, &dsbuf) {
        (Some(b), _) => view_result(&format!("{what} dx"), b, &s.shape, &dxs)?,
        (None, Some((b, st))) => gather(&download(b), 0, &s.shape, st),
        (None, None) => unreachable!("dx over ds without a ds"),
    };
    t.push("dx", dx_values);
    push_param_grads(&mut t, &what, [(&dw, s.weight), (&db, s.bias)])?;
    Ok(t)
}

/// dweight and dbias (in that order) when asked, else checked untouched.
pub(crate) fn push_param_grads<T: Element>(
    t: &mut Tensors,
    what: &str,
    grads: [(&Guarded<T>, bool); 2],
) -> Result<(), String> {
    for (name, (buf, on)) in ["dweight", "dbias"].into_iter().zip(grads) {
        if on {
            t.push(name, buf.result(&format!("{what} {name}"))?);
        } else {
            buf.untouched(&format!("{what} {name} (not asked)"))?;
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------
// Bad inputs and other dtypes
// ---------------------------------------------------------------------------

fn bad_inputs(layer: bool) -> Result<usize, String> {
    if layer {
        bad_inputs_of::<LayerNorm>()
    } else {
        bad_inputs_of::<RmsNorm>()
    }
}

/// Every select and run check, each returning its error and writing
/// nothing.
fn bad_inputs_of<Kind: NormKind>() -> Result<usize, String> {
    let g = gpu();
    let mut b = BadInputs::default();
    let pref = PlanPreference::default();
    let layer = Kind::SAVES_MEAN;
    let desc = if layer {
        NormDescriptor::layer_norm(ElementKind::F32, [4, 96], 1)
    } else {
        NormDescriptor::rms_norm(ElementKind::F32, [4, 96], 1)
    };
    let sel = |d: &NormDescriptor<2>, p: &PlanPreference| {
        NormPlan::<f32, Kind, 2, 1>::select(&g.stream, d, p)
    };
    let f64_desc = NormDescriptor {
        element: ElementKind::F64,
        ..desc
    };
    b.own_kernel_select::<NormPlan<f32, Kind, 2, 1>>(&desc, &f64_desc)?;
    let two = NormDescriptor {
        normalized_dims: 2,
        ..desc
    };
    b.expect(
        "normalized_dims 2, K 1",
        sel(&two, &pref),
        invalid_descriptor("normalized_dims"),
        &[],
    )?;
    b.expect(
        "eps NaN",
        sel(&desc.with_eps(f64::NAN), &pref),
        invalid_descriptor("eps"),
        &[],
    )?;
    b.expect(
        "eps -1",
        sel(&desc.with_eps(-1.0), &pref),
        invalid_descriptor("eps"),
        &[],
    )?;
    let empty = NormDescriptor {
        shape: [4, 0],
        ..desc
    };
    b.expect(
        "no normalized elements",
        sel(&empty, &pref),
        invalid_descriptor("shape"),
        &[],
    )?;
    if !layer {
        b.expect(
            "RMSNorm with a bias",
            sel(&desc.with_bias(true), &pref),
            invalid_descriptor("bias"),
            &[],
        )?;
    }

    let plan = sel(&desc, &pref).map_err(|e| e.to_string())?;
    let mut rng = Rng::new(0x0A0B);
    let (xb, _) = upload::<f32>(&rng.vec(4 * 96, -1.0, 1.0));
    let (wb, _) = upload::<f32>(&rng.vec(96, 0.5, 1.5));
    let x = TensorRef::contiguous(xb.as_slice(), [4, 96]).map_err(|e| e.to_string())?;
    let w = TensorRef::contiguous(wb.as_slice(), [96]).map_err(|e| e.to_string())?;
    let bias = || layer.then_some(w);
    let mut y = Guarded::<f32>::new(4 * 96);
    let mut st = Guarded::<u8>::new(plan.stats_bytes());
    let fw = |x: TensorRef<'_, f32, 2>,
              weight,
              y: &mut Guarded<f32>,
              stats: Option<DeviceSliceMut<'_, u8>>| {
        let y = TensorMut::contiguous(y.slice_mut(), [4, 96]).expect("y view");
        plan.run(
            &g.stream,
            Workspace::None,
            NormArgs {
                x,
                weight,
                bias: bias(),
                residual: None,
                sum: None,
                y,
                stats,
            },
        )
    };
    let x3 = TensorRef::contiguous(xb.as_slice(), [3, 96]).map_err(|e| e.to_string())?;
    let xv = TensorRef::new(xb.as_slice(), [4, 96], [1, 4]).map_err(|e| e.to_string())?;
    let r = plan.run(
        &g.stream,
        Workspace::None,
        NormArgs {
            x: x3,
            weight: Some(w),
            bias: bias(),
            residual: None,
            sum: None,
            y: TensorMut::contiguous(y.slice_mut(), [4, 96]).expect("y view"),
            stats: None,
        },
    );
    b.expect("x [3, 96]", r, shape_mismatch("x"), &[&y])?;
    let r = fw(xv, Some(w), &mut y, None);
    b.expect(
        "x with strided normalized dim",
        r,
        invalid_argument("x"),
        &[&y],
    )?;
    let r = fw(x, None, &mut y, None);
    b.expect("weight missing", r, invalid_argument("weight"), &[&y])?;
    let mut short = Guarded::<u8>::new(8);
    let r = fw(x, Some(w), &mut y, Some(short.slice_mut()));
    b.expect(
        "statistics of 8 bytes",
        r,
        invalid_argument("stats"),
        &[&y, &short],
    )?;
    // y inside x's memory
    let shared = Guarded::<f32>::new(4 * 96 + 8);
    let xs = TensorRef::contiguous(
        shared.slice().slice(0..4 * 96).expect("x in buffer"),
        [4, 96],
    )
    .map_err(|e| e.to_string())?;
    let sp = shared.slice();
    // SAFETY: a bad-input test: the run must reject the aliasing view
    // before anything is enqueued, so nothing reads or writes through it.
    let alias =
        unsafe { DeviceSliceMut::<f32>::from_raw_parts(sp.addr() + 32, 4 * 96, sp.ctx_id()) };
    let r = plan.run(
        &g.stream,
        Workspace::None,
        NormArgs {
            x: xs,
            weight: Some(w),
            bias: bias(),
            residual: None,
            sum: None,
            y: TensorMut::contiguous(alias, [4, 96]).expect("alias view"),
            stats: None,
        },
    );
    b.expect("y overlapping x", r, invalid_argument("y"), &[&shared])?;
    if layer {
        let nobias = sel(&desc.with_bias(false), &pref).map_err(|e| e.to_string())?;
        let r = nobias.run(
            &g.stream,
            Workspace::None,
            NormArgs {
                x,
                weight: Some(w),
                bias: Some(w),
                residual: None,
                sum: None,
                y: TensorMut::contiguous(y.slice_mut(), [4, 96]).expect("y view"),
                stats: None,
            },
        );
        b.expect(
            "bias without one in the descriptor",
            r,
            invalid_argument("bias"),
            &[&y],
        )?;
    }

    // Backward: statistics from a good forward first.
    fw(x, Some(w), &mut y, Some(st.slice_mut())).map_err(|e| e.to_string())?;
    let (dyb, _) = upload::<f32>(&rng.vec(4 * 96, -1.0, 1.0));
    let dy = TensorRef::contiguous(dyb.as_slice(), [4, 96]).map_err(|e| e.to_string())?;
    let bare = sel(&desc.with_weight(false).with_bias(false), &pref).map_err(|e| e.to_string())?;
    let mut ws = workspace(plan.bw_workspace_size(plan.grads()));
    let stats = (st.slice(), short.slice());
    affine_bw_checks(
        &mut b,
        (&plan, &bare),
        ([4, 96], [5, 96]),
        &mut ws,
        w,
        stats,
        &dyb,
        |plan, ws, weight, stats, dx, dweight| {
            let ws = ws.map_or(Workspace::None, |w| Workspace::Borrowed(w.as_slice_mut()));
            let args = NormBwArgs {
                x,
                weight,
                stats,
                dy,
                ds: None,
                dx,
                dweight,
                dbias: None,
            };
            plan.run_bw(&g.stream, ws, args)
        },
    )?;
    b.done()
}

fn bad_residual_inputs(layer: bool) -> Result<usize, String> {
    if layer {
        bad_residual_inputs_of::<LayerNorm>()
    } else {
        bad_residual_inputs_of::<RmsNorm>()
    }
}

/// The residual form's run checks: residual and sum missing or against a
/// plain descriptor, of another shape, overlapping; ds of another shape,
/// against a plain plan, overlapping dx or dweight; each returning its
/// error and writing nothing.
fn bad_residual_inputs_of<Kind: NormKind>() -> Result<usize, String> {
    let g = gpu();
    let mut b = BadInputs::default();
    let pref = PlanPreference::default();
    let layer = Kind::SAVES_MEAN;
    let plain = if layer {
        NormDescriptor::layer_norm(ElementKind::F32, [4, 96], 1)
    } else {
        NormDescriptor::rms_norm(ElementKind::F32, [4, 96], 1)
    };
    let desc = plain.with_residual(true);
    let sel = |d: &NormDescriptor<2>| NormPlan::<f32, Kind, 2, 1>::select(&g.stream, d, &pref);
    let plan = sel(&desc).map_err(|e| e.to_string())?;
    let plain_plan = sel(&plain).map_err(|e| e.to_string())?;
    let mut rng = Rng::new(0x0A0C);
    let n = 4 * 96;
    let (xb, _) = upload::<f32>(&rng.vec(n + 8, -1.0, 1.0));
    let (rb, _) = upload::<f32>(&rng.vec(n + 8, -1.0, 1.0));
    // the weight at the start of a row-sized buffer, for a sum over it
    let (wb, _) = upload::<f32>(&rng.vec(n, 0.5, 1.5));
    // inputs with 8 spare elements, for the overlapping views
    fn view(b: &DeviceBuffer<f32>) -> TensorRef<'_, f32, 2> {
        let data = b.as_slice().slice(0..4 * 96).expect("view in buffer");
        TensorRef::contiguous(data, [4, 96]).expect("view")
    }
    fn out(g: &mut Guarded<f32>) -> Option<TensorMut<'_, f32, 2>> {
        Some(TensorMut::contiguous(g.slice_mut(), [4, 96]).expect("output view"))
    }
    let (x, r) = (view(&xb), view(&rb));
    let w = TensorRef::contiguous(wb.as_slice().slice(0..96).expect("weight"), [96])
        .map_err(|e| e.to_string())?;
    let bias = || layer.then_some(w);
    let mut y = Guarded::<f32>::new(n);
    let mut sum = Guarded::<f32>::new(n);
    let fw = |plan: &NormPlan<f32, Kind, 2, 1>,
              residual: Option<TensorRef<'_, f32, 2>>,
              sum: Option<TensorMut<'_, f32, 2>>,
              y: &mut Guarded<f32>| {
        let y = TensorMut::contiguous(y.slice_mut(), [4, 96]).expect("y view");
        plan.run(
            &g.stream,
            Workspace::None,
            NormArgs {
                x,
                weight: Some(w),
                bias: bias(),
                residual,
                sum,
                y,
                stats: None,
            },
        )
    };
    let sv = out;
    let r_ = fw(&plan, None, sv(&mut sum), &mut y);
    b.expect(
        "residual missing",
        r_,
        invalid_argument("residual"),
        &[&y, &sum],
    )?;
    let r_ = fw(&plan, Some(r), None, &mut y);
    b.expect("sum missing", r_, invalid_argument("sum"), &[&y])?;
    let r_ = fw(&plain_plan, Some(r), sv(&mut sum), &mut y);
    b.expect(
        "residual without the residual form",
        r_,
        invalid_argument("residual"),
        &[&y, &sum],
    )?;
    let r3 = TensorRef::contiguous(rb.as_slice(), [3, 96]).map_err(|e| e.to_string())?;
    let r_ = fw(&plan, Some(r3), sv(&mut sum), &mut y);
    b.expect(
        "residual [3, 96]",
        r_,
        shape_mismatch("residual"),
        &[&y, &sum],
    )?;
    let mut sum3 = Guarded::<f32>::new(3 * 96);
    let s3 = Some(TensorMut::contiguous(sum3.slice_mut(), [3, 96]).expect("s"));
    let r_ = fw(&plan, Some(r), s3, &mut y);
    b.expect("sum [3, 96]", r_, shape_mismatch("sum"), &[&y, &sum3])?;
    let rp = rb.as_slice();
    // SAFETY: bad-input tests: each run must reject its aliasing view
    // before anything is enqueued, so nothing writes through it.
    let raw = |off: usize, len: usize| unsafe {
        DeviceSliceMut::<f32>::from_raw_parts(rp.addr() + 4 * off as u64, len, rp.ctx_id())
    };
    let shifted = Some(TensorMut::contiguous(raw(8, n), [4, 96]).expect("s"));
    let r_ = fw(&plan, Some(r), shifted, &mut y);
    b.expect(
        "sum overlapping residual, not the same view",
        r_,
        invalid_argument("sum"),
        &[&y],
    )?;
    let xp = xb.as_slice();
    // SAFETY: as above.
    let over_x = unsafe { DeviceSliceMut::<f32>::from_raw_parts(xp.addr() + 4, n, xp.ctx_id()) };
    let over_x = Some(TensorMut::contiguous(over_x, [4, 96]).expect("s"));
    let r_ = fw(&plan, Some(r), over_x, &mut y);
    b.expect(
        "sum overlapping x, not the same view",
        r_,
        invalid_argument("sum"),
        &[&y],
    )?;
    let r_ = plan.run(
        &g.stream,
        Workspace::None,
        NormArgs {
            x,
            weight: Some(w),
            bias: bias(),
            residual: Some(r),
            sum: sv(&mut sum),
            y: TensorMut::contiguous(raw(0, n), [4, 96]).expect("y"),
            stats: None,
        },
    );
    b.expect("y over residual", r_, invalid_argument("y"), &[&sum])?;
    let wp = wb.as_slice();
    // SAFETY: as above.
    let over_w = unsafe { DeviceSliceMut::<f32>::from_raw_parts(wp.addr(), n, wp.ctx_id()) };
    let over_w = Some(TensorMut::contiguous(over_w, [4, 96]).expect("s"));
    let r_ = fw(&plan, Some(r), over_w, &mut y);
    b.expect("sum over the weight", r_, invalid_argument("sum"), &[&y])?;

    // Backward: statistics from a good forward first.
    let mut st = Guarded::<u8>::new(plan.stats_bytes());
    plan.run(
        &g.stream,
        Workspace::None,
        NormArgs {
            x,
            weight: Some(w),
            bias: bias(),
            residual: Some(r),
            sum: sv(&mut sum),
            y: TensorMut::contiguous(y.slice_mut(), [4, 96]).expect("y"),
            stats: Some(st.slice_mut()),
        },
    )
    .map_err(|e| e.to_string())?;
    let (dyb, _) = upload::<f32>(&rng.vec(n, -1.0, 1.0));
    let (dsb, _) = upload::<f32>(&rng.vec(n + 8, -1.0, 1.0));
    let (dy, ds) = (view(&dyb), view(&dsb));
    let mut ws = workspace(plan.bw_workspace_size(plan.grads()));
    let mut dx = Guarded::<f32>::new(n);
    let mut dw = Guarded::<f32>::new(96);
    let bw = |plan: &NormPlan<f32, Kind, 2, 1>,
              ws: &mut DeviceBuffer<u8>,
              ds: Option<TensorRef<'_, f32, 2>>,
              dx: Option<TensorMut<'_, f32, 2>>,
              dweight: Option<TensorMut<'_, f32, 1>>| {
        plan.run_bw(
            &g.stream,
            Workspace::Borrowed(ws.as_slice_mut()),
            NormBwArgs {
                x,
                weight: Some(w),
                stats: st.slice(),
                dy,
                ds,
                dx,
                dweight,
                dbias: None,
            },
        )
    };
    let dxv = out;
    let ds3 = TensorRef::contiguous(dsb.as_slice(), [3, 96]).map_err(|e| e.to_string())?;
    let r_ = bw(&plan, &mut ws, Some(ds3), dxv(&mut dx), None);
    b.expect("ds [3, 96]", r_, shape_mismatch("ds"), &[&dx])?;
    let r_ = bw(&plain_plan, &mut ws, Some(ds), dxv(&mut dx), None);
    b.expect(
        "ds without the residual form",
        r_,
        invalid_argument("ds"),
        &[&dx],
    )?;
    let dp = dsb.as_slice();
    // SAFETY: as above.
    let ds_raw = |off: usize, len: usize| unsafe {
        DeviceSliceMut::<f32>::from_raw_parts(dp.addr() + 4 * off as u64, len, dp.ctx_id())
    };
    let dx_shift = Some(TensorMut::contiguous(ds_raw(4, n), [4, 96]).expect("dx"));
    let r_ = bw(&plan, &mut ws, Some(ds), dx_shift, None);
    b.expect(
        "dx overlapping ds, not the same view",
        r_,
        invalid_argument("dx"),
        &[],
    )?;
    let dw_over = Some(TensorMut::contiguous(ds_raw(0, 96), [96]).expect("dw"));
    let r_ = bw(&plan, &mut ws, Some(ds), dxv(&mut dx), dw_over);
    b.expect("dweight over ds", r_, invalid_argument("dweight"), &[&dx])?;
    let dwv = Some(TensorMut::contiguous(dw.slice_mut(), [96]).expect("dw"));
    let r_ = bw(&plan, &mut ws, Some(ds), dxv(&mut dx), dwv);
    r_.map_err(|e| format!("a good residual backward: {e}"))?;
    b.done()
}

/// The backward checks of a normalization plan with a weight (`plan`)
/// and one without (`bare`), f32 operands of `shape` and a weight `w`:
/// dx of the `other` shape, dx and dweight without a workspace, 8-byte
/// statistics (`stats.1`; `stats.0` a good forward's), a dweight without
/// a weight, dx over dy (in `dyb`). `bw(plan, workspace, weight, stats,
/// dx, dweight)` runs a backward.
#[allow(clippy::too_many_arguments)]
pub(crate) fn affine_bw_checks<'a, P, const R: usize>(
    b: &mut BadInputs,
    (plan, bare): (&P, &P),
    (shape, other): ([usize; R], [usize; R]),
    ws: &mut DeviceBuffer<u8>,
    w: TensorRef<'a, f32, 1>,
    stats: (DeviceSlice<'a, u8>, DeviceSlice<'a, u8>),
    dyb: &DeviceBuffer<f32>,
    bw: impl Fn(
        &P,
        Option<&mut DeviceBuffer<u8>>,
        Option<TensorRef<'a, f32, 1>>,
        DeviceSlice<'a, u8>,
        Option<TensorMut<'_, f32, R>>,
        Option<TensorMut<'_, f32, 1>>,
    ) -> baracuda_kernels::Result<()>,
) -> Result<(), String> {
    let n: usize = shape.iter().product();
    fn view<const R: usize>(
        g: &mut Guarded<f32>,
        shape: [usize; R],
    ) -> Option<TensorMut<'_, f32, R>> {
        Some(TensorMut::contiguous(g.slice_mut(), shape).expect("dx view"))
    }
    let c = w.shape()[0];
    let mut dx_other = Guarded::<f32>::new(other.iter().product());
    let r = bw(
        plan,
        Some(ws),
        Some(w),
        stats.0,
        view(&mut dx_other, other),
        None,
    );
    b.expect(
        &format!("dx {other:?}"),
        r,
        shape_mismatch("dx"),
        &[&dx_other],
    )?;
    let mut dx = Guarded::<f32>::new(n);
    let mut dw = Guarded::<f32>::new(c);
    let dwv = Some(TensorMut::contiguous(dw.slice_mut(), [c]).expect("dw view"));
    let r = bw(plan, None, Some(w), stats.0, view(&mut dx, shape), dwv);
    b.expect(
        "dx and dweight without a workspace",
        r,
        workspace_too_small,
        &[&dx, &dw],
    )?;
    let r = bw(plan, Some(ws), Some(w), stats.1, view(&mut dx, shape), None);
    b.expect(
        "statistics of 8 bytes",
        r,
        invalid_argument("stats"),
        &[&dx],
    )?;
    let dwv = Some(TensorMut::contiguous(dw.slice_mut(), [c]).expect("dw view"));
    let r = bw(bare, Some(ws), None, stats.0, None, dwv);
    b.expect(
        "dweight without a weight",
        r,
        invalid_argument("dw"),
        &[&dw],
    )?;
    // dx written over dy
    let dys = dyb.as_slice();
    // SAFETY: a bad-input test: the run must reject the aliasing view
    // before anything is enqueued.
    let dxa = unsafe { DeviceSliceMut::<f32>::from_raw_parts(dys.addr(), n, dys.ctx_id()) };
    let dxa = Some(TensorMut::contiguous(dxa, shape).expect("dx view"));
    let r = bw(plan, Some(ws), Some(w), stats.0, dxa, None);
    b.expect("dx over dy", r, invalid_argument("dx"), &[])
}

/// Selecting on `kind`, which the rows do not claim, is `Unsupported`.
fn unsupported(layer: bool, kind: ElementKind) -> Result<(), String> {
    crate::with_element!(kind, T => {
        let what = format!("norm on {kind}");
        if layer {
            let desc = NormDescriptor::layer_norm(kind, [8, 3], 1);
            expect_unsupported::<LayerNormPlan<T, 2>>(&what, &desc)
        } else {
            let desc = NormDescriptor::rms_norm(kind, [8, 3], 1);
            expect_unsupported::<RmsNormPlan<T, 2>>(&what, &desc)
        }
    })
}
