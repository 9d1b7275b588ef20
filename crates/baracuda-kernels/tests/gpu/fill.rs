//! GPU tests of `FillPlan`: the `fill` row of the elementwise table.
//!
//! For each kind the row fills the cast row's output samples (empty, size
//! 1, tails, a transposed and a strided output, a misaligned one, rank 8,
//! one large shape) with values the kind holds (the cast row's special
//! values and randoms), and compares every element with `fill_value`
//! exactly; elements outside the view must keep their 0xFF bytes.

use baracuda_kernels::*;

use crate::cast::{samples, specials, OutBuf};
use crate::elementwise::{identical, output_layout, Layout};
use crate::harness::*;

fn check_sample<T: Element, const N: usize>(
    shape: &[usize],
    layout: Layout,
    value: f64,
) -> Result<(), String> {
    let g = gpu();
    let what = format!("fill {} {shape:?} {layout:?} with {value:e}", T::KIND);
    let desc = FillDescriptor::new(T::KIND, arr::<N>(shape), value);
    let plan = FillPlan::<T, N>::select(&g.stream, &desc, &PlanPreference::default())
        .map_err(|e| format!("{what}: {e}"))?;
    let (y_len, y_strides, y_off) = match layout {
        Layout::Transposed => (shape.iter().product(), vec![1, shape[0]], 0),
        _ => output_layout(shape, layout),
    };
    let mut y = OutBuf::<T>::new(y_len);
    let yv = TensorMut::new(y.slice_mut(y_off), arr::<N>(shape), arr::<N>(&y_strides))
        .map_err(|e| format!("{what}: y view: {e}"))?;
    plan.run(&g.stream, Workspace::None, FillArgs { y: yv })
        .map_err(|e| format!("{what}: {e}"))?;
    let v = fill_value(T::KIND, value)?;
    let n: usize = shape.iter().product();
    identical(
        &what,
        &y.result(&what, y_off, shape, &y_strides)?,
        &vec![v; n],
    )
}

/// The values a kind is filled with: every cast special and a few randoms,
/// those the kind holds.
fn values(kind: ElementKind, rng: &mut Rng) -> Vec<f64> {
    let scale = if kind.is_float() { 100.0 } else { 120.0 };
    let randoms: Vec<f64> = (0..4).map(|_| rng.uniform(-scale, scale)).collect();
    specials()
        .into_iter()
        .chain(randoms)
        .filter(|&x| fill_value(kind, x).is_ok())
        .collect()
}

/// Fills of `kind` over every sample; the number of samples checked.
pub fn check_fill(kind: ElementKind) -> Result<usize, String> {
    crate::with_element!(kind, T => check_kind::<T>(kind))
}

fn check_kind<T: Element>(kind: ElementKind) -> Result<usize, String> {
    let mut rng = Rng::new(0xF111 ^ kind as u64);
    let vals = values(kind, &mut rng);
    let mut n = 0;
    // every value over the small samples would repeat the same stores;
    // each sample takes every fourth value, offset by its index
    let smp: Vec<_> = small_samples(samples(), |(s, _)| s.iter().product())
        .into_iter()
        .filter(|(_, l)| *l != Layout::Broadcast)
        .collect();
    for (i, (shape, layout)) in smp.iter().enumerate() {
        for &v in vals.iter().skip(i % 4).step_by(4) {
            match shape.len() {
                2 => check_sample::<T, 2>(shape, *layout, v)?,
                8 => check_sample::<T, 8>(shape, *layout, v)?,
                r => return Err(format!("no sample runner for rank {r}")),
            }
            n += 1;
        }
    }
    check_sample::<T, 1>(&[10007], Layout::Contiguous, 1.0)?;
    check_sample::<T, 1>(&[10007], Layout::Misaligned, 0.0)?;
    n += 2;
    if !small_mode() {
        check_sample::<T, 2>(&[1024, 4099], Layout::Contiguous, vals[vals.len() - 1])?;
        n += 1;
    }
    Ok(n)
}

/// Every kind is claimed by fill; nothing is unsupported.
pub fn fill_unsupported(kind: ElementKind) -> Result<(), String> {
    Err(format!(
        "fill claims every kind; {kind} cannot be unsupported"
    ))
}

/// Bad inputs of the fill plan: each returns its error and writes nothing.
pub fn fill_bad_inputs() -> Result<usize, String> {
    let g = gpu();
    let s = &g.stream;
    let pref = PlanPreference::default();
    let mut checked = 0;
    // select: element type, values the kind cannot hold, rank 9
    let r = FillPlan::<f32, 1>::select(s, &FillDescriptor::new(ElementKind::F16, [4], 0.0), &pref);
    expect_err("desc.element f16 for f32", r, dtype_mismatch)?;
    checked += 1;
    expect_unsupported::<FillPlan<f32, 9>>(
        "fill rank 9",
        &FillDescriptor::new(ElementKind::F32, [1; 9], 0.0),
    )?;
    checked += 1;
    for (what, r) in [
        (
            "f16 65536",
            FillPlan::<half::f16, 1>::select(
                s,
                &FillDescriptor::new(ElementKind::F16, [4], 65536.0),
                &pref,
            )
            .map(|_| ()),
        ),
        (
            "i8 128",
            FillPlan::<i8, 1>::select(s, &FillDescriptor::new(ElementKind::I8, [4], 128.0), &pref)
                .map(|_| ()),
        ),
        (
            "i32 NaN",
            FillPlan::<i32, 1>::select(
                s,
                &FillDescriptor::new(ElementKind::I32, [4], f64::NAN),
                &pref,
            )
            .map(|_| ()),
        ),
        (
            "e4m3 inf",
            FillPlan::<float8::F8E4M3, 1>::select(
                s,
                &FillDescriptor::new(ElementKind::Fp8E4M3, [4], f64::INFINITY),
                &pref,
            )
            .map(|_| ()),
        ),
    ] {
        expect_err(what, r, invalid_descriptor("value"))?;
        checked += 1;
    }
    let cudnn = PlanPreference::default().with_backend(BackendKind::Cudnn);
    let r = FillPlan::<f32, 1>::select(s, &FillDescriptor::new(ElementKind::F32, [4], 0.0), &cudnn);
    expect_err("backend", r, preference_rejected("backend"))?;
    checked += 1;
    // run: y shape
    let plan =
        FillPlan::<f32, 1>::select(s, &FillDescriptor::new(ElementKind::F32, [64], 1.0), &pref)
            .map_err(|e| e.to_string())?;
    let mut y = OutBuf::<f32>::new(65);
    let yv = TensorMut::contiguous(y.slice_mut(0), [65]).map_err(|e| e.to_string())?;
    let r = plan.run(s, Workspace::None, FillArgs { y: yv });
    expect_err("y shape", r, shape_mismatch("y"))?;
    if !y.untouched()? {
        return Err("y shape: y was written".into());
    }
    checked += 1;
    Ok(checked)
}
