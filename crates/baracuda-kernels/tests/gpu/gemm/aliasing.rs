//! The GEMM family's aliasing rules on the GPU.
//!
//! - The in-place form `D = alpha op(A) op(B) + beta D` (`GemmC::Output`,
//!   or a `C` view of exactly `D`'s elements) of `gemm`, `batched_gemm`
//!   and `grouped_gemm` gives what the same plan gives with a separate `C`
//!   holding the same values.
//! - Every other overlap of an output with an input or another output is
//!   `InvalidArgument` naming the output, and the buffer all the views
//!   share is unchanged afterwards.
//!
//! Overlapping views of one buffer need `unsafe` raw constructors; the
//! plans must refuse them before anything is enqueued.

use baracuda_kernels::*;
use float8::F8E4M3;
use half::bf16;

use super::{borrowed, vector};
use crate::harness::*;
use crate::table::BadInputs;

/// Run `check`, panicking with its message.
fn run(check: fn() -> Result<(), String>) {
    if let Err(e) = check() {
        panic!("{e}");
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn gemm_accumulates_in_place() {
    run(gemm_in_place);
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn batched_gemm_accumulates_in_place() {
    run(batched_in_place);
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn grouped_gemm_accumulates_in_place() {
    run(grouped_in_place);
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn gemm_family_refuses_overlapping_outputs() {
    run(refused_overlaps);
}

// ---------------------------------------------------------------------------
// Permitted: C = D
// ---------------------------------------------------------------------------

const ALPHA: f64 = 1.25;
const BETA: f64 = -0.5;

/// `n` seeded values in `[-1, 1)` on the device, and their f64 values.
fn seeded(n: usize, seed: u64) -> (DeviceBuffer<f32>, Vec<f64>) {
    upload::<f32>(&Rng::new(seed).vec(n.max(1), -1.0, 1.0))
}

/// The in-place result must be the separate-`C` result (same plan, same
/// inputs; the bound only allows for a split-k reduction order).
fn same_result(what: &str, in_place: &[f64], separate: &[f64]) -> Result<(), String> {
    compare(
        what,
        in_place,
        separate,
        Tolerance::of_max(1e-5, 1e-5, separate),
        None,
    )
}

/// A read-only view of all of `d`'s elements, made while `d` is lent as
/// the output: the `C` of the in-place form given as its own tensor.
///
/// # Safety
/// The view must be used only as the `C` of a run whose `D` is `d`'s
/// buffer (cuBLASLt reads each `C` element before it writes that `D`
/// element), and must not outlive `d`.
unsafe fn alias_of<'a>(d: &DeviceBuffer<f32>) -> DeviceSlice<'a, f32> {
    let s = d.as_slice();
    // SAFETY: forwarded from the caller; the address and length are
    // `d`'s own.
    unsafe { DeviceSlice::from_raw_parts(s.addr(), s.len(), s.ctx_id()) }
}

/// `gemm` f32, 40 x 24 x 32, with and without a bias and activation (fused
/// into cuBLASLt for a row-major `D`, in the epilogue kernel for GELU-erf
/// and a column-major `D`): `C = D` as `GemmC::Output` and as a `C` view
/// of `D`'s own elements both match a separate `C`.
fn gemm_in_place() -> Result<(), String> {
    let st = &gpu().stream;
    let (m, n, k) = (40, 24, 32);
    let (a, _) = seeded(m * k, 1);
    let (b, _) = seeded(k * n, 2);
    let (c0, c_values) = seeded(m * n, 3);
    let (bias, _) = seeded(n, 4);
    for layout in [LayoutSku::Rcr, LayoutSku::Rcc] {
        for epilogue in [
            EpilogueKind::Identity,
            EpilogueKind::BiasRelu,
            EpilogueKind::BiasGeluErf,
        ] {
            let g = GemmDescriptor::new(m, n, k, layout).with_epilogue(epilogue);
            let plan = select::<GemmPlan<f32>>(&g, &PlanPreference::default())?;
            let mut ws = workspace(plan.workspace_size());
            let mat = |rows, cols, ld, order, s| MatrixRef::new(s, rows, cols, ld, order);
            let (oa, ob, oc) = (layout.a(), layout.b(), layout.c());
            let views = || -> Result<_> {
                Ok((
                    mat(m, k, g.lda, oa, a.as_slice())?,
                    mat(k, n, g.ldb, ob, b.as_slice())?,
                    epilogue.has_bias().then(|| vector(bias.as_slice())),
                ))
            };
            let what = format!("gemm {layout} {epilogue}");
            let err = |e: Error| format!("{what}: {e}");
            // A separate C.
            let mut d_sep = poisoned::<f32>(m * n);
            let (av, bv, biasv) = views().map_err(err)?;
            let args = GemmArgs {
                a: av,
                b: bv,
                c: GemmC::Tensor(mat(m, n, g.ldc, oc, c0.as_slice()).map_err(err)?),
                d: MatrixMut::new(d_sep.as_slice_mut(), m, n, g.ldd, oc).map_err(err)?,
                bias: biasv,
                aux: None,
                alpha: ALPHA,
                beta: BETA,
            };
            plan.run(st, borrowed(&mut ws), args).map_err(err)?;
            let want = download(&d_sep);
            // C = D, as GemmC::Output.
            let (mut d, _) = upload::<f32>(&c_values);
            let args = GemmArgs {
                a: av,
                b: bv,
                c: GemmC::Output,
                d: MatrixMut::new(d.as_slice_mut(), m, n, g.ldd, oc).map_err(err)?,
                bias: biasv,
                aux: None,
                alpha: ALPHA,
                beta: BETA,
            };
            plan.run(st, borrowed(&mut ws), args).map_err(err)?;
            same_result(&format!("{what}, C = D (Output)"), &download(&d), &want)?;
            // C = D, as a view of D's own elements.
            let (mut d, _) = upload::<f32>(&c_values);
            // SAFETY: the view is this run's C, and the run's D is `d`.
            let c_alias = unsafe { alias_of(&d) };
            let args = GemmArgs {
                a: av,
                b: bv,
                c: GemmC::Tensor(mat(m, n, g.ldc, oc, c_alias).map_err(err)?),
                d: MatrixMut::new(d.as_slice_mut(), m, n, g.ldd, oc).map_err(err)?,
                bias: biasv,
                aux: None,
                alpha: ALPHA,
                beta: BETA,
            };
            plan.run(st, borrowed(&mut ws), args).map_err(err)?;
            same_result(&format!("{what}, C = D (view)"), &download(&d), &want)?;
        }
    }
    Ok(())
}

/// `batched_gemm` f32, 3 packed entries of 40 x 24 x 32 with a bias per
/// entry: `GemmC::Output` matches a separate `C`.
fn batched_in_place() -> Result<(), String> {
    let st = &gpu().stream;
    let (m, n, k, count) = (40, 24, 32, 3);
    let g = GemmDescriptor::new(m, n, k, LayoutSku::Rcr).with_epilogue(EpilogueKind::Bias);
    let desc = BatchedGemmDescriptor::packed(g, count);
    let plan = select::<BatchedGemmPlan<f32>>(&desc, &PlanPreference::default())?;
    let mut ws = workspace(plan.workspace_size());
    let (a, _) = seeded(count * m * k, 5);
    let (b, _) = seeded(count * k * n, 6);
    let (c0, c_values) = seeded(count * m * n, 7);
    let (bias, _) = seeded(count * n, 8);
    let err = |e: Error| format!("batched_gemm in place: {e}");
    let bias_view = || TensorRef::new(bias.as_slice(), [count, n], [n, 1]);
    let mut d_sep = poisoned::<f32>(count * m * n);
    let args = BatchedGemmArgs {
        a: a.as_slice(),
        b: b.as_slice(),
        c: GemmC::Tensor(c0.as_slice()),
        d: d_sep.as_slice_mut(),
        bias: Some(bias_view().map_err(err)?),
        aux: None,
        alpha: ALPHA,
        beta: BETA,
    };
    plan.run(st, borrowed(&mut ws), args).map_err(err)?;
    let want = download(&d_sep);
    let (mut d, _) = upload::<f32>(&c_values);
    let args = BatchedGemmArgs {
        a: a.as_slice(),
        b: b.as_slice(),
        c: GemmC::Output,
        d: d.as_slice_mut(),
        bias: Some(bias_view().map_err(err)?),
        aux: None,
        alpha: ALPHA,
        beta: BETA,
    };
    plan.run(st, borrowed(&mut ws), args).map_err(err)?;
    same_result("batched_gemm, C = D", &download(&d), &want)
}

/// `grouped_gemm` f32 over three groups (one empty) with a bias and ReLU:
/// `GemmC::Output` matches separate `C`s.
fn grouped_in_place() -> Result<(), String> {
    let st = &gpu().stream;
    let groups = vec![(40, 24, 32), (0, 24, 32), (17, 16, 32)];
    let desc = GroupedGemmDescriptor::new(groups.clone(), LayoutSku::Rcr)
        .with_epilogue(EpilogueKind::BiasRelu);
    let plan = select::<GroupedGemmPlan<f32>>(&desc, &PlanPreference::default())?;
    let mut ws = workspace(plan.workspace_size());
    let err = |e: Error| format!("grouped_gemm in place: {e}");
    let (row, col) = (MatrixOrder::RowMajor, MatrixOrder::ColMajor);
    let ins: Vec<_> = groups
        .iter()
        .enumerate()
        .map(|(i, &(m, n, k))| {
            let s = 10 * i as u64;
            (
                seeded(m * k, s + 1).0,
                seeded(k * n, s + 2).0,
                seeded(m * n, s + 3),
                seeded(n, s + 4).0,
            )
        })
        .collect();
    let operands = || -> Result<_> {
        let mut a = Vec::new();
        let mut b = Vec::new();
        let mut bias = Vec::new();
        for (&(m, n, k), (ab, bb, _, biasb)) in groups.iter().zip(&ins) {
            a.push(MatrixRef::new(ab.as_slice(), m, k, k.max(1), row)?);
            b.push(MatrixRef::new(bb.as_slice(), k, n, k, col)?);
            bias.push(vector(biasb.as_slice()));
        }
        Ok((a, b, bias))
    };
    let mut sep: Vec<DeviceBuffer<f32>> = groups
        .iter()
        .map(|&(m, n, _)| poisoned::<f32>((m * n).max(1)))
        .collect();
    let (a, b, bias) = operands().map_err(err)?;
    let c: Vec<_> = groups
        .iter()
        .zip(&ins)
        .map(|(&(m, n, _), i)| MatrixRef::new(i.2 .0.as_slice(), m, n, n, row))
        .collect::<Result<_>>()
        .map_err(err)?;
    let d: Vec<_> = groups
        .iter()
        .zip(sep.iter_mut())
        .map(|(&(m, n, _), buf)| MatrixMut::new(buf.as_slice_mut(), m, n, n, row))
        .collect::<Result<_>>()
        .map_err(err)?;
    let args = GroupedGemmArgs {
        a,
        b,
        c: GemmC::Tensor(c),
        d,
        bias: Some(bias),
        aux: None,
        alpha: ALPHA,
        beta: BETA,
    };
    plan.run(st, borrowed(&mut ws), args).map_err(err)?;
    let mut inplace: Vec<DeviceBuffer<f32>> =
        ins.iter().map(|i| upload::<f32>(&i.2 .1).0).collect();
    let (a, b, bias) = operands().map_err(err)?;
    let d: Vec<_> = groups
        .iter()
        .zip(inplace.iter_mut())
        .map(|(&(m, n, _), buf)| MatrixMut::new(buf.as_slice_mut(), m, n, n, row))
        .collect::<Result<_>>()
        .map_err(err)?;
    let args = GroupedGemmArgs {
        a,
        b,
        c: GemmC::Output,
        d,
        bias: Some(bias),
        aux: None,
        alpha: ALPHA,
        beta: BETA,
    };
    plan.run(st, borrowed(&mut ws), args).map_err(err)?;
    for (g, &(m, n, _)) in groups.iter().enumerate() {
        if m == 0 {
            continue;
        }
        let got = &download(&inplace[g])[..m * n];
        let want = &download(&sep[g])[..m * n];
        same_result(&format!("grouped_gemm group {g}, C = D"), got, want)?;
    }
    Ok(())
}

// ---------------------------------------------------------------------------
// Refused: every other overlap
// ---------------------------------------------------------------------------

/// One buffer of seeded f32 that every view of a case lies in, and its
/// contents before the case: a refused run must leave them as they were.
struct Shared {
    buf: DeviceBuffer<f32>,
    before: Vec<f64>,
}

impl Shared {
    fn new(len: usize) -> Self {
        let (buf, before) = seeded(len, 99);
        Shared { buf, before }
    }

    /// `len` elements of `T` starting `at` f32 elements into the buffer.
    fn view<T>(&self, at: usize, len: usize) -> DeviceSlice<'_, T> {
        let s = self.buf.as_slice();
        assert!(at * 4 + len * std::mem::size_of::<T>() <= s.len() * 4);
        // SAFETY: the range lies in the buffer (asserted); the views of a
        // case overlap on purpose, and the plans must refuse them before
        // any work is enqueued (the case checks nothing was written).
        unsafe { DeviceSlice::from_raw_parts(s.addr() + 4 * at as u64, len, s.ctx_id()) }
    }

    /// A writable view, as [`Shared::view`].
    fn view_mut<T>(&self, at: usize, len: usize) -> DeviceSliceMut<'_, T> {
        let s = self.buf.as_slice();
        assert!(at * 4 + len * std::mem::size_of::<T>() <= s.len() * 4);
        // SAFETY: as in `view`.
        unsafe { DeviceSliceMut::from_raw_parts(s.addr() + 4 * at as u64, len, s.ctx_id()) }
    }

    /// A row-major `rows x cols` matrix (`ld = cols`) at `at`.
    fn mat<T: Element>(&self, at: usize, rows: usize, cols: usize) -> MatrixRef<'_, T> {
        MatrixRef::row_major(self.view(at, rows * cols), rows, cols).expect("fits")
    }

    /// A column-major `rows x cols` matrix (`ld = rows`) at `at`.
    fn col<T: Element>(&self, at: usize, rows: usize, cols: usize) -> MatrixRef<'_, T> {
        let s = self.view(at, rows * cols);
        MatrixRef::new(s, rows, cols, rows, MatrixOrder::ColMajor).expect("fits")
    }

    /// A writable row-major matrix at `at`.
    fn mat_mut<T: Element>(&self, at: usize, rows: usize, cols: usize) -> MatrixMut<'_, T> {
        MatrixMut::row_major(self.view_mut(at, rows * cols), rows, cols).expect("fits")
    }

    /// A vector of `n` at `at`.
    fn vec<T: Element>(&self, at: usize, n: usize) -> TensorRef<'_, T, 1> {
        vector(self.view(at, n))
    }

    /// A writable vector of `n` at `at`.
    fn vec_mut<T: Element>(&self, at: usize, n: usize) -> TensorMut<'_, T, 1> {
        TensorMut::contiguous(self.view_mut(at, n), [n]).expect("fits")
    }
}

impl Poisoned for Shared {
    fn untouched(&self, what: &str) -> Result<(), String> {
        let now = download(&self.buf);
        match (0..now.len()).find(|&i| now[i].to_bits() != self.before[i].to_bits()) {
            None => Ok(()),
            Some(i) => Err(format!(
                "{what}: element {i} of the shared buffer changed from {} to {}",
                self.before[i], now[i]
            )),
        }
    }
}

/// `plan.run(args)` must return `InvalidArgument` naming `arg` and leave
/// `sh` as it was.
fn refused<P: Plan>(
    bad: &mut BadInputs,
    sh: &Shared,
    what: &str,
    (plan, args): (&P, P::Args<'_>),
    arg: &'static str,
) -> Result<(), String> {
    let mut ws = workspace(plan.workspace_size());
    let r = plan.run(&gpu().stream, borrowed(&mut ws), args);
    bad.expect(what, r, invalid_argument(arg), &[sh])
}

/// Every plan of the family, fed outputs that overlap an input or another
/// output: `InvalidArgument` naming the output, nothing written.
fn refused_overlaps() -> Result<(), String> {
    let mut bad = BadInputs::default();
    gemm_overlaps(&mut bad)?;
    batched_overlaps(&mut bad)?;
    grouped_overlaps(&mut bad)?;
    quantized_overlaps(&mut bad)?;
    linear_overlaps(&mut bad)?;
    bad.done().map(|_| ())
}

/// `gemm` 16 x 16 x 16 with bias, ReLU and aux. Offsets (f32 elements):
/// A 0, B 256, C 512 (1536 where D covers the bias), bias 768, D 1024,
/// aux 1280; each case moves one output onto an input or the other output.
fn gemm_overlaps(bad: &mut BadInputs) -> Result<(), String> {
    let pref = PlanPreference::default();
    let g = GemmDescriptor::new(16, 16, 16, LayoutSku::Rrr)
        .with_epilogue(EpilogueKind::BiasRelu)
        .with_aux(true);
    let plan = select::<GemmPlan<f32>>(&g, &pref)?;
    let sh = Shared::new(2048);
    // (case, D at, aux at, C at, the output named)
    let cases: [(&str, usize, usize, usize, &'static str); 7] = [
        ("D on A", 0, 1280, 512, "d"),
        ("D over half of B", 256 + 128, 1280, 512, "d"),
        ("D one row past C", 512 + 16, 1280, 512, "d"),
        ("D over the bias", 640, 1280, 1536, "d"),
        ("aux on D", 1024, 1024, 512, "aux"),
        ("aux over A", 1024, 64, 512, "aux"),
        ("aux over C", 1024, 512 + 32, 512, "aux"),
    ];
    for (what, d_at, aux_at, c_at, arg) in cases {
        let args = GemmArgs {
            a: sh.mat(0, 16, 16),
            b: sh.mat(256, 16, 16),
            c: GemmC::Tensor(sh.mat(c_at, 16, 16)),
            d: sh.mat_mut(d_at, 16, 16),
            bias: Some(sh.vec(768, 16)),
            aux: Some(sh.mat_mut(aux_at, 16, 16)),
            alpha: 1.0,
            beta: 1.0,
        };
        let what = format!("gemm: {what}");
        refused(bad, &sh, &what, (&plan, args), arg)?;
    }
    // C = D needs ldc == ldd.
    let wide_c = GemmDescriptor::new(16, 16, 16, LayoutSku::Rrr).with_ld(16, 16, 20, 16);
    let plan = select::<GemmPlan<f32>>(&wide_c, &pref)?;
    let args = GemmArgs {
        a: sh.mat(0, 16, 16),
        b: sh.mat(256, 16, 16),
        c: GemmC::Output,
        d: sh.mat_mut(1024, 16, 16),
        bias: None,
        aux: None,
        alpha: 1.0,
        beta: 1.0,
    };
    let what = "gemm: C = D with ldc 20, ldd 16";
    refused(bad, &sh, what, (&plan, args), "c")
}

/// `batched_gemm`, 2 packed entries of 16 x 16 x 16 with bias, ReLU and
/// aux. Offsets: A 0, B 512, bias 1024 (2 x 16), D 1536, aux 2048.
fn batched_overlaps(bad: &mut BadInputs) -> Result<(), String> {
    let g = GemmDescriptor::new(16, 16, 16, LayoutSku::Rrr)
        .with_epilogue(EpilogueKind::BiasRelu)
        .with_aux(true);
    let desc = BatchedGemmDescriptor::packed(g, 2);
    let plan = select::<BatchedGemmPlan<f32>>(&desc, &PlanPreference::default())?;
    let sh = Shared::new(4096);
    let bias = |at| TensorRef::new(sh.view(at, 32), [2, 16], [16, 1]).expect("fits");
    // (case, D at, bias at, aux at, the output named)
    let cases: [(&str, usize, usize, usize, &'static str); 4] = [
        ("D over A's second entry", 256, 1024, 2048, "d"),
        ("D over the bias", 1040, 1024, 2048, "d"),
        ("aux over D's second entry", 1536, 1024, 1536 + 256, "aux"),
        ("aux over B", 1536, 1024, 512 + 8, "aux"),
    ];
    for (what, d_at, bias_at, aux_at, arg) in cases {
        let args = BatchedGemmArgs {
            a: sh.view(0, 512),
            b: sh.view(512, 512),
            c: GemmC::None,
            d: sh.view_mut(d_at, 512),
            bias: Some(bias(bias_at)),
            aux: Some(sh.view_mut(aux_at, 512)),
            alpha: 1.0,
            beta: 0.0,
        };
        let what = format!("batched_gemm: {what}");
        refused(bad, &sh, &what, (&plan, args), arg)?;
    }
    // C = D needs stride_c == stride_d.
    let mut strided_c =
        BatchedGemmDescriptor::packed(GemmDescriptor::new(16, 16, 16, LayoutSku::Rrr), 2);
    strided_c.stride_c = 512;
    let plan = select::<BatchedGemmPlan<f32>>(&strided_c, &PlanPreference::default())?;
    let args = BatchedGemmArgs {
        a: sh.view(0, 512),
        b: sh.view(512, 512),
        c: GemmC::Output,
        d: sh.view_mut(1536, 512),
        bias: None,
        aux: None,
        alpha: 1.0,
        beta: 1.0,
    };
    let what = "batched_gemm: C = D with stride_c 512, stride_d 256";
    refused(bad, &sh, what, (&plan, args), "c")
}

/// `grouped_gemm`, two 16 x 16 x 16 groups: group 1's D over group 0's A
/// (each group alone is fine: the plans check across groups), and group
/// 1's D over group 0's D.
fn grouped_overlaps(bad: &mut BadInputs) -> Result<(), String> {
    let desc = GroupedGemmDescriptor::new(vec![(16, 16, 16); 2], LayoutSku::Rcr);
    let plan = select::<GroupedGemmPlan<f32>>(&desc, &PlanPreference::default())?;
    let sh = Shared::new(4096);
    // Group g: A at 512 g, B at 1024 + 512 g, D at 2048 + 512 g.
    for (what, d1_at) in [
        ("group 1's D on group 0's A", 0),
        ("group 1's D over group 0's D", 2048 + 128),
    ] {
        let args = GroupedGemmArgs {
            a: vec![sh.mat(0, 16, 16), sh.mat(512, 16, 16)],
            b: vec![sh.col(1024, 16, 16), sh.col(1536, 16, 16)],
            c: GemmC::None,
            d: vec![sh.mat_mut(2048, 16, 16), sh.mat_mut(d1_at, 16, 16)],
            bias: None,
            aux: None,
            alpha: 1.0,
            beta: 0.0,
        };
        let what = format!("grouped_gemm: {what}");
        refused(bad, &sh, &what, (&plan, args), "d")?;
    }
    Ok(())
}

/// `int_gemm` (s8 -> s32) with D over A, and `fp8_gemm` (e4m3 -> bf16,
/// amax) with D over B and amax on a scale.
fn quantized_overlaps(bad: &mut BadInputs) -> Result<(), String> {
    let pref = PlanPreference::default();
    let sh = Shared::new(8192);
    let (m, n, k) = (64, 48, 96);
    let g = GemmDescriptor::new(m, n, k, LayoutSku::Rcr);
    // s8 A at 0 (m k bytes = 1536 f32), B at 2048, s32 D at 4096.
    let plan = select::<IntGemmPlan<i32>>(&IntGemmDescriptor { gemm: g.clone() }, &pref)?;
    let args = IntGemmArgs {
        a: sh.mat::<i8>(0, m, k),
        b: sh.col::<i8>(2048, k, n),
        d: sh.mat_mut::<i32>(512, m, n),
        scale: 1.0,
    };
    refused(bad, &sh, "int_gemm: D over A", (&plan, args), "d")?;

    let desc = Fp8GemmDescriptor {
        gemm: g,
        amax: true,
    };
    let plan = select::<Fp8GemmPlan<F8E4M3, F8E4M3, bf16>>(&desc, &pref)?;
    // e4m3 A at 0, B at 2048, scales at 6144 and 6148, bf16 D at 4096,
    // amax at 6152.
    let cases: [(&str, usize, usize, &'static str); 2] = [
        ("D over B", 2048 + 256, 6152, "d"),
        ("amax on scale_b", 4096, 6148, "amax"),
    ];
    for (what, d_at, amax_at, arg) in cases {
        let args = Fp8GemmArgs {
            a: sh.mat::<F8E4M3>(0, m, k),
            b: sh.col::<F8E4M3>(2048, k, n),
            d: sh.mat_mut::<bf16>(d_at, m, n),
            scale_a: sh.vec(6144, 1),
            scale_b: sh.vec(6148, 1),
            amax: Some(sh.vec_mut(amax_at, 1)),
        };
        let what = format!("fp8_gemm: {what}");
        refused(bad, &sh, &what, (&plan, args), arg)?;
    }
    Ok(())
}

/// `linear` 16 tokens, 32 -> 24, bias, GELU-erf, aux. Offsets: x 0 (512),
/// w 512 (768), bias 1280 (24), dy 1536 (384), aux 2048 (384), y 2560,
/// dx 3072 (512), dw 4096 (768), dbias 5120.
fn linear_overlaps(bad: &mut BadInputs) -> Result<(), String> {
    let st = &gpu().stream;
    let (t, i, o) = (16, 32, 24);
    let desc = LinearDescriptor::new(t, i, o)
        .with_epilogue(EpilogueKind::BiasGeluErf)
        .with_aux(true);
    let plan = select::<LinearPlan<f32>>(&desc, &PlanPreference::default())?;
    let mut ws = workspace(plan.workspace_size());
    let sh = Shared::new(6144);
    let forward: [(&str, usize, usize, &'static str); 4] = [
        ("y over x", 128, 2048, "y"),
        ("y over the bias", 1284, 2048, "y"),
        ("aux over y", 2560, 2560 + 24, "aux"),
        ("aux over w", 2560, 512 + 64, "aux"),
    ];
    for (what, y_at, z_at, arg) in forward {
        let args = LinearArgs {
            x: sh.mat(0, t, i),
            w: sh.mat(512, o, i),
            bias: Some(sh.vec(1280, o)),
            y: sh.mat_mut(y_at, t, o),
            aux: Some(sh.mat_mut(z_at, t, o)),
        };
        let what = format!("linear forward: {what}");
        refused(bad, &sh, &what, (&plan, args), arg)?;
    }
    let backward: [(&str, [usize; 3], &'static str); 6] = [
        ("dx on dy", [1536, 4096, 5120], "dx"),
        ("dx over x", [256, 4096, 5120], "dx"),
        ("dw over x", [3072, 0, 5120], "dw"),
        ("dw over dx", [3072, 3072 + 256, 5120], "dw"),
        ("dbias over dy", [3072, 4096, 1536 + 8], "dbias"),
        ("dbias over dw", [3072, 4096, 4096 + 64], "dbias"),
    ];
    for (what, [dx_at, dw_at, db_at], arg) in backward {
        let args = LinearBwArgs {
            x: sh.mat(0, t, i),
            w: sh.mat(512, o, i),
            dy: sh.mat(1536, t, o),
            aux: Some(sh.mat(2048, t, o)),
            dx: Some(sh.mat_mut(dx_at, t, i)),
            dw: Some(sh.mat_mut(dw_at, o, i)),
            dbias: Some(sh.vec_mut(db_at, o)),
        };
        let r = plan.run_bw(st, borrowed(&mut ws), args);
        let what = format!("linear backward: {what}");
        bad.expect(&what, r, invalid_argument(arg), &[&sh])?;
    }
    Ok(())
}
