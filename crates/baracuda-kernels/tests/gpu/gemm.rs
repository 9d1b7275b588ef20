//! GPU tests of the GEMM family against the f64 reference, on the shared
//! harness (device, seeded inputs, NaN-poisoned outputs, comparison).

use baracuda_kernels::reference::gemm as r;
use baracuda_kernels::*;
use half::bf16;

use crate::harness::{compare, download, expect_err, gpu, poisoned, upload, Rng, Tolerance};

/// `n` seeded values, uniform in [-1, 1), none zero.
fn rand(seed: u64, n: usize) -> Vec<f64> {
    Rng::new(seed).vec(n, -1.0, 1.0)
}

fn span(order: MatrixOrder, r: usize, c: usize, ld: usize) -> usize {
    match order {
        MatrixOrder::RowMajor => (r - 1) * ld + c,
        MatrixOrder::ColMajor => (c - 1) * ld + r,
    }
}

/// The GEMM criterion on the shared comparison: relative L2 error <= `tol`
/// and every |error| <= 20 `tol` max|ref| (the per-element bound `tol`
/// |ref| + 19 `tol` max|ref| never exceeds it). Panics with the first bad
/// element.
fn check(what: &str, got: &[f64], want: &[f64], tol: f64) {
    let maxref = want.iter().fold(0.0f64, |a, &w| a.max(w.abs()));
    let t = Tolerance {
        rtol: tol,
        atol: 19.0 * tol * maxref,
    };
    assert_ok(compare(what, got, want, t, None));
}

/// Panic with the harness's message.
fn assert_ok(r: Result<(), String>) {
    if let Err(e) = r {
        panic!("{e}");
    }
}

fn tol(t: ElementKind, o: ElementKind, tf32: bool) -> f64 {
    match (t, o) {
        (ElementKind::F64, _) => 1e-12,
        (ElementKind::F32, _) if tf32 => 5e-3,
        (_, ElementKind::F32) => 2e-5,
        (_, ElementKind::F16) => 2e-3,
        _ => 8e-3,
    }
}

/// Run one GEMM with packed-plus-padding leading dimensions and compare.
#[allow(clippy::too_many_arguments)]
fn gemm_case<T: Element, O: Element>(
    s: &Stream,
    m: usize,
    n: usize,
    k: usize,
    layout: LayoutSku,
    epilogue: EpilogueKind,
    with_c: bool,
    pad: usize,
    pref: &PlanPreference,
) {
    let base = GemmDescriptor::new(m, n, k, layout);
    let desc = base
        .clone()
        .with_ld(
            base.lda + pad,
            base.ldb + pad,
            base.ldc + pad,
            base.ldd + pad,
        )
        .with_epilogue(epilogue)
        .with_aux(epilogue.activation() != Activation::Identity);
    let plan = GemmPlan::<T, O>::select(s, &desc, pref).unwrap_or_else(|e| panic!("{desc:?}: {e}"));
    let seed = (m * 131 + n * 17 + k) as u64;
    let (a, ah) = upload::<T>(&rand(seed, span(layout.a(), m, k, desc.lda)));
    let (b, bh) = upload::<T>(&rand(seed + 1, span(layout.b(), k, n, desc.ldb)));
    let (c, ch) = upload::<O>(&rand(seed + 2, span(layout.c(), m, n, desc.ldc)));
    let (bias, biash) = upload::<O>(&rand(seed + 3, n));
    let dlen = span(layout.c(), m, n, desc.ldd);
    let mut d = poisoned::<O>(dlen);
    let mut aux = poisoned::<O>(dlen);
    let mut ws = DeviceBuffer::<u8>::zeros(s, plan.workspace_size().max(1)).unwrap();
    let (alpha, beta) = if with_c { (1.25, -0.5) } else { (0.75, 0.0) };
    let args = GemmArgs {
        a: MatrixRef::new(a.as_slice(), m, k, desc.lda, layout.a()).unwrap(),
        b: MatrixRef::new(b.as_slice(), k, n, desc.ldb, layout.b()).unwrap(),
        c: with_c.then(|| MatrixRef::new(c.as_slice(), m, n, desc.ldc, layout.c()).unwrap()),
        d: MatrixMut::new(d.as_slice_mut(), m, n, desc.ldd, layout.c()).unwrap(),
        bias: epilogue.has_bias().then(|| bias.as_slice()),
        aux: desc
            .save_aux
            .then(|| MatrixMut::new(aux.as_slice_mut(), m, n, desc.ldd, layout.c()).unwrap()),
        alpha,
        beta,
    };
    plan.run(s, Workspace::Borrowed(ws.as_slice_mut()), args)
        .unwrap_or_else(|e| panic!("{desc:?}: {e}"));
    let (want_d, want_z) = r::gemm(
        m,
        n,
        k,
        (&ah, desc.lda, layout.a()),
        (&bh, desc.ldb, layout.b()),
        with_c.then_some((&ch[..], desc.ldc, layout.c())),
        epilogue.has_bias().then_some(&biash[..]),
        alpha,
        beta,
        epilogue.activation(),
    );
    let dh: Vec<f64> = download(&d);
    let pick = |x: &[f64]| -> Vec<f64> {
        (0..m * n)
            .map(|idx| r::at(x, desc.ldd, layout.c(), idx / n, idx % n))
            .collect()
    };
    let what = format!(
        "gemm {}->{} {m}x{n}x{k} {layout} {epilogue} c={with_c} [{}]",
        T::KIND,
        O::KIND,
        plan.sku().variant
    );
    let t = tol(T::KIND, O::KIND, pref.allow_tf32);
    check(&what, &pick(&dh), &want_d, t);
    if desc.save_aux {
        let zh: Vec<f64> = download(&aux);
        check(&format!("{what} aux"), &pick(&zh), &want_z, t);
    }
}

const SIZES: [(usize, usize, usize); 6] = [
    (1, 1, 1),
    (17, 33, 9),
    (64, 1, 300),
    (1, 96, 64),
    (3, 5, 2049),
    (130, 72, 40),
];

#[test]
#[ignore = "needs a CUDA GPU"]
fn gemm_every_layout_and_dtype() {
    let s = &gpu().stream;
    let p = PlanPreference::default();
    for layout in LayoutSku::ALL {
        for &(m, n, k) in &SIZES {
            for (with_c, pad) in [(false, 0), (true, 3)] {
                gemm_case::<f32, f32>(s, m, n, k, layout, EpilogueKind::Identity, with_c, pad, &p);
                gemm_case::<bf16, bf16>(
                    s,
                    m,
                    n,
                    k,
                    layout,
                    EpilogueKind::Identity,
                    with_c,
                    pad,
                    &p,
                );
                gemm_case::<half::f16, f32>(
                    s,
                    m,
                    n,
                    k,
                    layout,
                    EpilogueKind::Identity,
                    with_c,
                    pad,
                    &p,
                );
                gemm_case::<f64, f64>(s, m, n, k, layout, EpilogueKind::Identity, with_c, pad, &p);
            }
        }
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn gemm_tf32_only_when_allowed() {
    let s = &gpu().stream;
    let tf = PlanPreference::default().with_allow_tf32(true);
    gemm_case::<f32, f32>(
        s,
        256,
        256,
        512,
        LayoutSku::Rcr,
        EpilogueKind::Identity,
        false,
        0,
        &tf,
    );
    let d = GemmDescriptor::new(64, 64, 64, LayoutSku::Rrr);
    let ieee = GemmPlan::<f32>::select(s, &d, &PlanPreference::default()).unwrap();
    assert_eq!(ieee.precision_guarantee().math, MathPrecision::F32);
    let t = GemmPlan::<f32>::select(s, &d, &tf).unwrap();
    assert_eq!(t.precision_guarantee().math, MathPrecision::Tf32);
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn gemm_every_epilogue() {
    let s = &gpu().stream;
    let p = PlanPreference::default();
    for layout in [LayoutSku::Rcr, LayoutSku::Rrc, LayoutSku::Ccr] {
        for e in EpilogueKind::ALL {
            for &(m, n, k) in &[(33usize, 40usize, 24usize), (128, 256, 64)] {
                gemm_case::<bf16, bf16>(s, m, n, k, layout, e, true, 0, &p);
                gemm_case::<f32, f32>(s, m, n, k, layout, e, false, 0, &p);
                gemm_case::<bf16, f32>(s, m, n, k, layout, e, false, 8, &p);
            }
        }
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn gemm_deterministic_and_measured() {
    let s = &gpu().stream;
    let p = PlanPreference::default()
        .with_deterministic(true)
        .with_autotune(Autotune::Measured);
    gemm_case::<bf16, bf16>(
        s,
        64,
        4096,
        8192,
        LayoutSku::Rcr,
        EpilogueKind::Identity,
        false,
        0,
        &p,
    );
    let d = GemmDescriptor::new(64, 4096, 8192, LayoutSku::Rcr);
    let plan = GemmPlan::<bf16>::select(s, &d, &p).unwrap();
    assert!(plan.precision_guarantee().deterministic, "{}", plan.sku());
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn gemm_bad_inputs() {
    let s = &gpu().stream;
    let d = GemmDescriptor::new(16, 16, 16, LayoutSku::Rrr);
    let plan = GemmPlan::<f32>::select(s, &d, &PlanPreference::default()).unwrap();
    let (a, _) = upload::<f32>(&rand(9, 300));
    let mut out = poisoned::<f32>(256);
    let mis = MatrixRef::new(
        a.as_slice().slice(1..300).unwrap(),
        16,
        16,
        16,
        MatrixOrder::RowMajor,
    )
    .unwrap();
    let ok = MatrixRef::new(a.as_slice(), 16, 16, 16, MatrixOrder::RowMajor).unwrap();
    let wrong = MatrixRef::new(a.as_slice(), 16, 8, 16, MatrixOrder::RowMajor).unwrap();
    fn mk<'a>(
        a: MatrixRef<'a, f32>,
        b: MatrixRef<'a, f32>,
        out: &'a mut DeviceBuffer<f32>,
        beta: f64,
    ) -> GemmArgs<'a, f32> {
        GemmArgs {
            a,
            b,
            c: None,
            d: MatrixMut::new(out.as_slice_mut(), 16, 16, 16, MatrixOrder::RowMajor).unwrap(),
            bias: None,
            aux: None,
            alpha: 1.0,
            beta,
        }
    }
    assert_ok(expect_err(
        "misaligned a",
        plan.run(s, Workspace::None, mk(mis, ok, &mut out, 0.0)),
        |e| matches!(e, Error::InvalidArgument { arg: "a", .. }),
    ));
    assert_ok(expect_err(
        "a of the wrong shape",
        plan.run(s, Workspace::None, mk(wrong, ok, &mut out, 0.0)),
        |e| matches!(e, Error::ShapeMismatch { arg: "a", .. }),
    ));
    assert_ok(expect_err(
        "beta without c",
        plan.run(s, Workspace::None, mk(ok, ok, &mut out, 1.0)),
        |e| matches!(e, Error::InvalidArgument { arg: "c", .. }),
    ));
    assert!(download(&out).iter().all(|x| x.is_nan()), "nothing written");
    assert_ok(expect_err(
        "f32 -> f16",
        GemmPlan::<f32, half::f16>::select(s, &d, &PlanPreference::default()),
        |e| matches!(e, Error::Unsupported { .. }),
    ));
    assert_ok(expect_err(
        "cuDNN backend",
        GemmPlan::<f32>::select(
            s,
            &d,
            &PlanPreference::default().with_backend(BackendKind::Cudnn),
        ),
        |e| {
            matches!(
                e,
                Error::PreferenceRejected {
                    field: "backend",
                    ..
                }
            )
        },
    ));
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn batched_with_broadcast() {
    let s = &gpu().stream;
    let (m, n, k, batch) = (33, 20, 17, 5);
    let mut desc =
        BatchedGemmDescriptor::packed(GemmDescriptor::new(m, n, k, LayoutSku::Rcr), batch);
    desc.stride_b = 0;
    let plan = BatchedGemmPlan::<bf16, f32>::select(s, &desc, &PlanPreference::default()).unwrap();
    let (a, ah) = upload::<bf16>(&rand(1, batch * m * k));
    let (b, bh) = upload::<bf16>(&rand(2, k * n));
    let mut d = poisoned::<f32>(batch * m * n);
    let mut ws = DeviceBuffer::<u8>::zeros(s, plan.workspace_size().max(1)).unwrap();
    plan.run(
        s,
        Workspace::Borrowed(ws.as_slice_mut()),
        BatchedGemmArgs {
            a: a.as_slice(),
            b: b.as_slice(),
            c: None,
            d: d.as_slice_mut(),
            alpha: 1.0,
            beta: 0.0,
        },
    )
    .unwrap();
    let dh: Vec<f64> = download(&d);
    for i in 0..batch {
        let (want, _) = r::gemm(
            m,
            n,
            k,
            (&ah[i * m * k..], k, MatrixOrder::RowMajor),
            (&bh, k, MatrixOrder::ColMajor),
            None,
            None,
            1.0,
            0.0,
            Activation::Identity,
        );
        check(
            &format!("batched entry {i}"),
            &dh[i * m * n..(i + 1) * m * n],
            &want,
            2e-5,
        );
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn grouped_moe_shapes() {
    let s = &gpu().stream;
    let (n, k) = (48, 32);
    let ms = [5usize, 0, 17, 1, 64];
    let desc = GroupedGemmDescriptor {
        problems: ms.iter().map(|&m| (m, n, k)).collect(),
        layout: LayoutSku::Rcr,
    };
    let plan = GroupedGemmPlan::<bf16>::select(s, &desc, &PlanPreference::default()).unwrap();
    let ins: Vec<_> = ms
        .iter()
        .enumerate()
        .map(|(g, &m)| {
            (
                upload::<bf16>(&rand(10 + g as u64, (m * k).max(1))),
                upload::<bf16>(&rand(20 + g as u64, k * n)),
            )
        })
        .collect();
    let mut outs: Vec<DeviceBuffer<bf16>> = ms.iter().map(|&m| poisoned((m * n).max(1))).collect();
    let mut ws = DeviceBuffer::<u8>::zeros(s, plan.workspace_size().max(1)).unwrap();
    let args = GroupedGemmArgs {
        a: ins
            .iter()
            .zip(&ms)
            .map(|(((a, _), _), &m)| {
                MatrixRef::new(a.as_slice(), m, k, k, MatrixOrder::RowMajor).unwrap()
            })
            .collect(),
        b: ins
            .iter()
            .map(|(_, (b, _))| {
                MatrixRef::new(b.as_slice(), k, n, k, MatrixOrder::ColMajor).unwrap()
            })
            .collect(),
        d: outs
            .iter_mut()
            .zip(&ms)
            .map(|(d, &m)| {
                MatrixMut::new(d.as_slice_mut(), m, n, n, MatrixOrder::RowMajor).unwrap()
            })
            .collect(),
        alpha: 1.0,
    };
    plan.run(s, Workspace::Borrowed(ws.as_slice_mut()), args)
        .unwrap();
    for (g, &m) in ms.iter().enumerate() {
        if m == 0 {
            continue;
        }
        let ((_, ah), (_, bh)) = &ins[g];
        let (want, _) = r::gemm(
            m,
            n,
            k,
            (ah, k, MatrixOrder::RowMajor),
            (bh, k, MatrixOrder::ColMajor),
            None,
            None,
            1.0,
            0.0,
            Activation::Identity,
        );
        check(&format!("group {g}"), &download(&outs[g]), &want, 8e-3);
    }
}

fn linear_case<T: Element>(s: &Stream, t: usize, i: usize, o: usize, e: EpilogueKind, tl: f64) {
    let desc = LinearDescriptor {
        tokens: t,
        in_features: i,
        out_features: o,
        epilogue: e,
        save_aux: e.activation() != Activation::Identity,
    };
    let plan = LinearPlan::<T>::select(s, &desc, &PlanPreference::default()).unwrap();
    let (x, xh) = upload::<T>(&rand(5, t * i));
    let (w, wh) = upload::<T>(&rand(6, o * i));
    let (b, bh) = upload::<T>(&rand(7, o));
    let (dy, dyh) = upload::<T>(&rand(8, t * o));
    let mut y = poisoned::<T>(t * o);
    let mut z = poisoned::<T>(t * o);
    let mut ws = DeviceBuffer::<u8>::zeros(s, plan.workspace_size().max(1)).unwrap();
    let row = MatrixOrder::RowMajor;
    plan.run(
        s,
        Workspace::Borrowed(ws.as_slice_mut()),
        LinearArgs {
            x: MatrixRef::new(x.as_slice(), t, i, i, row).unwrap(),
            w: MatrixRef::new(w.as_slice(), o, i, i, row).unwrap(),
            bias: e.has_bias().then(|| b.as_slice()),
            y: MatrixMut::new(y.as_slice_mut(), t, o, o, row).unwrap(),
            aux: desc
                .save_aux
                .then(|| MatrixMut::new(z.as_slice_mut(), t, o, o, row).unwrap()),
        },
    )
    .unwrap();
    let (want_y, want_z) = r::gemm(
        t,
        o,
        i,
        (&xh, i, row),
        (&wh, i, MatrixOrder::ColMajor),
        None,
        e.has_bias().then_some(&bh[..]),
        1.0,
        0.0,
        e.activation(),
    );
    let what = format!(
        "linear {} {t}x{i}->{o} {e} [{}]",
        T::KIND,
        plan.sku().variant
    );
    check(&format!("{what} y"), &download(&y), &want_y, tl);
    // Backward, against the reference built on the GPU's saved Z.
    let zh: Vec<f64> = if desc.save_aux { download(&z) } else { want_z };
    let dz: Vec<f64> = (0..t * o)
        .map(|p| T::from_f64(dyh[p] * r::act_grad(e.activation(), zh[p])).to_f64())
        .collect();
    let mut dx = poisoned::<T>(t * i);
    let mut dw = poisoned::<T>(o * i);
    let mut db = poisoned::<T>(o);
    plan.run_bw(
        s,
        Workspace::Borrowed(ws.as_slice_mut()),
        LinearBwArgs {
            x: MatrixRef::new(x.as_slice(), t, i, i, row).unwrap(),
            w: MatrixRef::new(w.as_slice(), o, i, i, row).unwrap(),
            dy: MatrixRef::new(dy.as_slice(), t, o, o, row).unwrap(),
            aux: desc
                .save_aux
                .then(|| MatrixRef::new(z.as_slice(), t, o, o, row).unwrap()),
            dx: Some(MatrixMut::new(dx.as_slice_mut(), t, i, i, row).unwrap()),
            dw: Some(MatrixMut::new(dw.as_slice_mut(), o, i, i, row).unwrap()),
            db: e.has_bias().then(|| db.as_slice_mut()),
        },
    )
    .unwrap();
    let (want_dx, _) = r::gemm(
        t,
        i,
        o,
        (&dz, o, row),
        (&wh, i, row),
        None,
        None,
        1.0,
        0.0,
        Activation::Identity,
    );
    let (want_dw, _) = r::gemm(
        o,
        i,
        t,
        (&dz, o, MatrixOrder::ColMajor),
        (&xh, i, row),
        None,
        None,
        1.0,
        0.0,
        Activation::Identity,
    );
    let h = download::<T>;
    check(&format!("{what} dx"), &h(&dx), &want_dx, tl);
    check(&format!("{what} dw"), &h(&dw), &want_dw, tl);
    if e.has_bias() {
        let want_db: Vec<f64> = (0..o)
            .map(|j| (0..t).map(|r| dz[r * o + j]).sum())
            .collect();
        check(&format!("{what} db"), &h(&db), &want_db, tl);
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn linear_forward_backward() {
    let s = &gpu().stream;
    for e in [
        EpilogueKind::Identity,
        EpilogueKind::Bias,
        EpilogueKind::BiasGeluTanh,
        EpilogueKind::BiasRelu,
        EpilogueKind::BiasGeluErf,
    ] {
        linear_case::<bf16>(s, 64, 96, 40, e, 1e-2);
        linear_case::<f32>(s, 7, 33, 18, e, 3e-5);
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn int8_gemm() {
    let s = &gpu().stream;
    let (m, n, k) = (40, 24, 64);
    let desc = IntGemmDescriptor {
        gemm: GemmDescriptor::new(m, n, k, LayoutSku::Rcr),
    };
    let av: Vec<f64> = rand(1, m * k).iter().map(|v| (v * 127.0).round()).collect();
    let bv: Vec<f64> = rand(2, k * n).iter().map(|v| (v * 127.0).round()).collect();
    let (a, ah) = upload::<i8>(&av);
    let (b, bh) = upload::<i8>(&bv);
    let (want, _) = r::gemm(
        m,
        n,
        k,
        (&ah, k, MatrixOrder::RowMajor),
        (&bh, k, MatrixOrder::ColMajor),
        None,
        None,
        1.0,
        0.0,
        Activation::Identity,
    );
    let p32 = IntGemmPlan::<i32>::select(s, &desc, &PlanPreference::default()).unwrap();
    let mut d = poisoned::<i32>(m * n);
    let mut ws = DeviceBuffer::<u8>::zeros(s, p32.workspace_size().max(1)).unwrap();
    p32.run(
        s,
        Workspace::Borrowed(ws.as_slice_mut()),
        IntGemmArgs {
            a: MatrixRef::new(a.as_slice(), m, k, k, MatrixOrder::RowMajor).unwrap(),
            b: MatrixRef::new(b.as_slice(), k, n, k, MatrixOrder::ColMajor).unwrap(),
            d: MatrixMut::new(d.as_slice_mut(), m, n, n, MatrixOrder::RowMajor).unwrap(),
            scale: 1.0,
        },
    )
    .unwrap();
    let got: Vec<f64> = download(&d);
    assert_eq!(got, want, "int8 -> s32 is exact");
    let pf = IntGemmPlan::<f32>::select(s, &desc, &PlanPreference::default()).unwrap();
    let mut df = poisoned::<f32>(m * n);
    let mut ws = DeviceBuffer::<u8>::zeros(s, pf.workspace_size().max(1)).unwrap();
    let args = IntGemmArgs {
        a: MatrixRef::new(a.as_slice(), m, k, k, MatrixOrder::RowMajor).unwrap(),
        b: MatrixRef::new(b.as_slice(), k, n, k, MatrixOrder::ColMajor).unwrap(),
        d: MatrixMut::new(df.as_slice_mut(), m, n, n, MatrixOrder::RowMajor).unwrap(),
        scale: 0.5,
    };
    pf.run(s, Workspace::Borrowed(ws.as_slice_mut()), args)
        .unwrap();
    let got: Vec<f64> = download(&df);
    check(
        "int8 -> f32 scaled",
        &got,
        &want.iter().map(|v| v * 0.5).collect::<Vec<_>>(),
        1e-7,
    );
    let bad = IntGemmDescriptor {
        gemm: GemmDescriptor::new(m, n, k, LayoutSku::Rrr),
    };
    assert!(matches!(
        IntGemmPlan::<i32>::select(s, &bad, &PlanPreference::default()),
        Err(Error::Unsupported { .. })
    ));
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn fp8_gemm_with_amax() {
    use float8::F8E4M3;
    let s = &gpu().stream;
    // TN (row-major A, column-major B), k and n multiples of 16: the
    // shapes cuBLASLt's fp8 kernels take (see fp8_gemm.rs).
    let (m, n, k) = (64, 48, 96);
    let desc = Fp8GemmDescriptor {
        gemm: GemmDescriptor::new(m, n, k, LayoutSku::Rcr),
        amax: true,
    };
    let plan =
        Fp8GemmPlan::<F8E4M3, F8E4M3, bf16>::select(s, &desc, &PlanPreference::default()).unwrap();
    let (a, ah) = upload::<F8E4M3>(&rand(3, m * k).iter().map(|v| v * 8.0).collect::<Vec<_>>());
    let (b, bh) = upload::<F8E4M3>(&rand(4, k * n).iter().map(|v| v * 8.0).collect::<Vec<_>>());
    // Each scale in its own (aligned) allocation, as cuBLASLt wants.
    let scale_a = DeviceBuffer::<f32>::from_host(s, &[0.25]).unwrap();
    let scale_b = DeviceBuffer::<f32>::from_host(s, &[0.125]).unwrap();
    let mut d = poisoned::<bf16>(m * n);
    let mut amax = poisoned::<f32>(1);
    let mut ws = DeviceBuffer::<u8>::zeros(s, plan.workspace_size().max(1)).unwrap();
    // A scale 4 bytes into a buffer is rejected before anything runs.
    let shared = DeviceBuffer::<f32>::from_host(s, &[0.25, 0.125]).unwrap();
    assert_ok(expect_err(
        "scale_b not 16-byte aligned",
        plan.run(
            s,
            Workspace::Borrowed(ws.as_slice_mut()),
            Fp8GemmArgs {
                a: MatrixRef::new(a.as_slice(), m, k, k, MatrixOrder::RowMajor).unwrap(),
                b: MatrixRef::new(b.as_slice(), k, n, k, MatrixOrder::ColMajor).unwrap(),
                d: MatrixMut::new(d.as_slice_mut(), m, n, n, MatrixOrder::RowMajor).unwrap(),
                scale_a: shared.as_slice().slice(0..1).unwrap(),
                scale_b: shared.as_slice().slice(1..2).unwrap(),
                amax: Some(amax.as_slice_mut()),
            },
        ),
        |e| matches!(e, Error::InvalidArgument { arg: "scale_b", .. }),
    ));
    assert!(download(&d).iter().all(|x| x.is_nan()), "nothing written");
    plan.run(
        s,
        Workspace::Borrowed(ws.as_slice_mut()),
        Fp8GemmArgs {
            a: MatrixRef::new(a.as_slice(), m, k, k, MatrixOrder::RowMajor).unwrap(),
            b: MatrixRef::new(b.as_slice(), k, n, k, MatrixOrder::ColMajor).unwrap(),
            d: MatrixMut::new(d.as_slice_mut(), m, n, n, MatrixOrder::RowMajor).unwrap(),
            scale_a: scale_a.as_slice(),
            scale_b: scale_b.as_slice(),
            amax: Some(amax.as_slice_mut()),
        },
    )
    .unwrap_or_else(|e| panic!("fp8 run [{}]: {e}", plan.sku().variant));
    let (want, _) = r::gemm(
        m,
        n,
        k,
        (&ah, k, MatrixOrder::RowMajor),
        (&bh, k, MatrixOrder::ColMajor),
        None,
        None,
        0.25 * 0.125,
        0.0,
        Activation::Identity,
    );
    let got = download(&d);
    check("fp8 e4m3 -> bf16", &got, &want, 8e-3);
    let amax_got = download(&amax)[0];
    let amax_want = got.iter().fold(0.0f64, |a, &v| a.max(v.abs()));
    assert_eq!(amax_got, amax_want, "amax of the stored D");
    // Shapes outside cuBLASLt's fp8 rules are Unsupported at select. The
    // k = 72 case pads lda/ldb to 80 so it reaches the k rule (a packed
    // lda = 72 is already an InvalidDescriptor, as for int8).
    let padded_k = GemmDescriptor::new(64, 48, 72, LayoutSku::Rcr).with_ld(80, 80, 48, 48);
    for gemm in [
        GemmDescriptor::new(64, 40, 96, LayoutSku::Rcr),
        padded_k,
        GemmDescriptor::new(40, 48, 96, LayoutSku::Rcc),
        GemmDescriptor::new(64, 48, 96, LayoutSku::Rrr),
    ] {
        let what = format!("fp8 {}x{}x{} {}", gemm.m, gemm.n, gemm.k, gemm.layout);
        let bad = Fp8GemmDescriptor { gemm, amax: false };
        assert_ok(expect_err(
            &what,
            Fp8GemmPlan::<F8E4M3, F8E4M3, bf16>::select(s, &bad, &PlanPreference::default()),
            |e| matches!(e, Error::Unsupported { .. }),
        ));
    }
}
