//! GPU tests of the GEMM family against the f64 reference.

use baracuda_kernels::reference::gemm as r;
use baracuda_kernels::*;
use half::bf16;

fn stream() -> Stream {
    let dev = Device::get(0).expect("a CUDA device");
    Stream::new(&Context::new(&dev).expect("context")).expect("stream")
}

/// Seeded uniform values in [-1, -0.05] U [0.05, 1] (never zero).
fn rand(seed: u64, n: usize) -> Vec<f64> {
    let mut s = seed.wrapping_mul(0x9E3779B97F4A7C15) | 1;
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            let u = (s >> 11) as f64 / (1u64 << 53) as f64;
            let v = 0.05 + 0.95 * u;
            if s & 1 == 0 {
                v
            } else {
                -v
            }
        })
        .collect()
}

/// Round to T; returns the device buffer and the rounded values.
fn upload<T: Element>(s: &Stream, v: &[f64]) -> (DeviceBuffer<T>, Vec<f64>) {
    let t: Vec<T> = v.iter().map(|&x| T::from_f64(x)).collect();
    let back = t.iter().map(|x| x.to_f64()).collect();
    (DeviceBuffer::from_host(s, &t).unwrap(), back)
}

fn span(order: MatrixOrder, r: usize, c: usize, ld: usize) -> usize {
    match order {
        MatrixOrder::RowMajor => (r - 1) * ld + c,
        MatrixOrder::ColMajor => (c - 1) * ld + r,
    }
}

/// Relative L2 and max-abs (scaled by max |ref|) comparison.
fn check(what: &str, got: &[f64], want: &[f64], tol: f64) {
    assert_eq!(got.len(), want.len());
    let (mut num, mut den, mut maxerr, mut maxref) = (0.0f64, 0.0f64, 0.0f64, 0.0f64);
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        assert!(g.is_finite(), "{what}: element {i} is {g} (want {w})");
        num += (g - w) * (g - w);
        den += w * w;
        maxerr = maxerr.max((g - w).abs());
        maxref = maxref.max(w.abs());
    }
    let rel = (num / den.max(1e-300)).sqrt();
    assert!(rel <= tol, "{what}: relative L2 error {rel:e} > {tol:e}");
    assert!(
        maxerr <= 20.0 * tol * maxref.max(1e-30),
        "{what}: max abs error {maxerr:e} (max |ref| {maxref:e})"
    );
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
    let (a, ah) = upload::<T>(s, &rand(seed, span(layout.a(), m, k, desc.lda)));
    let (b, bh) = upload::<T>(s, &rand(seed + 1, span(layout.b(), k, n, desc.ldb)));
    let (c, ch) = upload::<O>(s, &rand(seed + 2, span(layout.c(), m, n, desc.ldc)));
    let (bias, biash) = upload::<O>(s, &rand(seed + 3, n));
    let dlen = span(layout.c(), m, n, desc.ldd);
    let mut d = DeviceBuffer::<O>::filled_bytes(s, dlen, 0xFF).unwrap();
    let mut aux = DeviceBuffer::<O>::filled_bytes(s, dlen, 0xFF).unwrap();
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
    let dh: Vec<f64> = d.to_host(s).unwrap().iter().map(|x| x.to_f64()).collect();
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
        let zh: Vec<f64> = aux.to_host(s).unwrap().iter().map(|x| x.to_f64()).collect();
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
    let s = stream();
    let p = PlanPreference::default();
    for layout in LayoutSku::ALL {
        for &(m, n, k) in &SIZES {
            for (with_c, pad) in [(false, 0), (true, 3)] {
                gemm_case::<f32, f32>(&s, m, n, k, layout, EpilogueKind::Identity, with_c, pad, &p);
                gemm_case::<bf16, bf16>(
                    &s,
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
                    &s,
                    m,
                    n,
                    k,
                    layout,
                    EpilogueKind::Identity,
                    with_c,
                    pad,
                    &p,
                );
                gemm_case::<f64, f64>(&s, m, n, k, layout, EpilogueKind::Identity, with_c, pad, &p);
            }
        }
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn gemm_tf32_only_when_allowed() {
    let s = stream();
    let tf = PlanPreference::default().with_allow_tf32(true);
    gemm_case::<f32, f32>(
        &s,
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
    let ieee = GemmPlan::<f32>::select(&s, &d, &PlanPreference::default()).unwrap();
    assert_eq!(ieee.precision_guarantee().math, MathPrecision::F32);
    let t = GemmPlan::<f32>::select(&s, &d, &tf).unwrap();
    assert_eq!(t.precision_guarantee().math, MathPrecision::Tf32);
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn gemm_every_epilogue() {
    let s = stream();
    let p = PlanPreference::default();
    for layout in [LayoutSku::Rcr, LayoutSku::Rrc, LayoutSku::Ccr] {
        for e in EpilogueKind::ALL {
            for &(m, n, k) in &[(33usize, 40usize, 24usize), (128, 256, 64)] {
                gemm_case::<bf16, bf16>(&s, m, n, k, layout, e, true, 0, &p);
                gemm_case::<f32, f32>(&s, m, n, k, layout, e, false, 0, &p);
                gemm_case::<bf16, f32>(&s, m, n, k, layout, e, false, 8, &p);
            }
        }
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn gemm_deterministic_and_measured() {
    let s = stream();
    let p = PlanPreference::default()
        .with_deterministic(true)
        .with_autotune(Autotune::Measured);
    gemm_case::<bf16, bf16>(
        &s,
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
    let plan = GemmPlan::<bf16>::select(&s, &d, &p).unwrap();
    assert!(plan.precision_guarantee().deterministic, "{}", plan.sku());
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn gemm_bad_inputs() {
    let s = stream();
    let d = GemmDescriptor::new(16, 16, 16, LayoutSku::Rrr);
    let plan = GemmPlan::<f32>::select(&s, &d, &PlanPreference::default()).unwrap();
    let a = DeviceBuffer::<f32>::zeros(&s, 300).unwrap();
    let mut out = DeviceBuffer::<f32>::filled_bytes(&s, 256, 0xFF).unwrap();
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
    assert!(matches!(
        plan.run(&s, Workspace::None, mk(mis, ok, &mut out, 0.0)),
        Err(Error::InvalidArgument { arg: "a", .. })
    ));
    assert!(matches!(
        plan.run(&s, Workspace::None, mk(wrong, ok, &mut out, 0.0)),
        Err(Error::ShapeMismatch { arg: "a", .. })
    ));
    assert!(matches!(
        plan.run(&s, Workspace::None, mk(ok, ok, &mut out, 1.0)),
        Err(Error::InvalidArgument { arg: "c", .. })
    ));
    assert!(
        out.to_host(&s).unwrap().iter().all(|x| x.is_nan()),
        "nothing written"
    );
    let e = GemmPlan::<f32, half::f16>::select(&s, &d, &PlanPreference::default())
        .err()
        .unwrap();
    assert!(matches!(e, Error::Unsupported { .. }));
    let e = GemmPlan::<f32>::select(
        &s,
        &d,
        &PlanPreference::default().with_backend(BackendKind::Cudnn),
    )
    .err()
    .unwrap();
    assert!(matches!(
        e,
        Error::PreferenceRejected {
            field: "backend",
            ..
        }
    ));
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn batched_with_broadcast() {
    let s = stream();
    let (m, n, k, batch) = (33, 20, 17, 5);
    let mut desc =
        BatchedGemmDescriptor::packed(GemmDescriptor::new(m, n, k, LayoutSku::Rcr), batch);
    desc.stride_b = 0;
    let plan = BatchedGemmPlan::<bf16, f32>::select(&s, &desc, &PlanPreference::default()).unwrap();
    let (a, ah) = upload::<bf16>(&s, &rand(1, batch * m * k));
    let (b, bh) = upload::<bf16>(&s, &rand(2, k * n));
    let mut d = DeviceBuffer::<f32>::filled_bytes(&s, batch * m * n, 0xFF).unwrap();
    let mut ws = DeviceBuffer::<u8>::zeros(&s, plan.workspace_size().max(1)).unwrap();
    plan.run(
        &s,
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
    let dh: Vec<f64> = d.to_host(&s).unwrap().iter().map(|&x| x as f64).collect();
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
    let s = stream();
    let (n, k) = (48, 32);
    let ms = [5usize, 0, 17, 1, 64];
    let desc = GroupedGemmDescriptor {
        problems: ms.iter().map(|&m| (m, n, k)).collect(),
        layout: LayoutSku::Rcr,
    };
    let plan = GroupedGemmPlan::<bf16>::select(&s, &desc, &PlanPreference::default()).unwrap();
    let ins: Vec<_> = ms
        .iter()
        .enumerate()
        .map(|(g, &m)| {
            (
                upload::<bf16>(&s, &rand(10 + g as u64, (m * k).max(1))),
                upload::<bf16>(&s, &rand(20 + g as u64, k * n)),
            )
        })
        .collect();
    let mut outs: Vec<DeviceBuffer<bf16>> = ms
        .iter()
        .map(|&m| DeviceBuffer::filled_bytes(&s, (m * n).max(1), 0xFF).unwrap())
        .collect();
    let mut ws = DeviceBuffer::<u8>::zeros(&s, plan.workspace_size().max(1)).unwrap();
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
    plan.run(&s, Workspace::Borrowed(ws.as_slice_mut()), args)
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
        let got: Vec<f64> = outs[g]
            .to_host(&s)
            .unwrap()
            .iter()
            .map(|x| x.to_f64())
            .collect();
        check(&format!("group {g}"), &got, &want, 8e-3);
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
    let (x, xh) = upload::<T>(s, &rand(5, t * i));
    let (w, wh) = upload::<T>(s, &rand(6, o * i));
    let (b, bh) = upload::<T>(s, &rand(7, o));
    let (dy, dyh) = upload::<T>(s, &rand(8, t * o));
    let mut y = DeviceBuffer::<T>::filled_bytes(s, t * o, 0xFF).unwrap();
    let mut z = DeviceBuffer::<T>::filled_bytes(s, t * o, 0xFF).unwrap();
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
    check(
        &format!("{what} y"),
        &y.to_host(s)
            .unwrap()
            .iter()
            .map(|v| v.to_f64())
            .collect::<Vec<_>>(),
        &want_y,
        tl,
    );
    // Backward, against the reference built on the GPU's saved Z.
    let zh: Vec<f64> = if desc.save_aux {
        z.to_host(s).unwrap().iter().map(|v| v.to_f64()).collect()
    } else {
        want_z
    };
    let dz: Vec<f64> = (0..t * o)
        .map(|p| T::from_f64(dyh[p] * r::act_grad(e.activation(), zh[p])).to_f64())
        .collect();
    let mut dx = DeviceBuffer::<T>::filled_bytes(s, t * i, 0xFF).unwrap();
    let mut dw = DeviceBuffer::<T>::filled_bytes(s, o * i, 0xFF).unwrap();
    let mut db = DeviceBuffer::<T>::filled_bytes(s, o, 0xFF).unwrap();
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
    let h = |b: &DeviceBuffer<T>| {
        b.to_host(s)
            .unwrap()
            .iter()
            .map(|v| v.to_f64())
            .collect::<Vec<_>>()
    };
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
    let s = stream();
    for e in [
        EpilogueKind::Identity,
        EpilogueKind::Bias,
        EpilogueKind::BiasGeluTanh,
        EpilogueKind::BiasRelu,
        EpilogueKind::BiasGeluErf,
    ] {
        linear_case::<bf16>(&s, 64, 96, 40, e, 1e-2);
        linear_case::<f32>(&s, 7, 33, 18, e, 3e-5);
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn int8_gemm() {
    let s = stream();
    let (m, n, k) = (40, 24, 64);
    let desc = IntGemmDescriptor {
        gemm: GemmDescriptor::new(m, n, k, LayoutSku::Rcr),
    };
    let av: Vec<f64> = rand(1, m * k).iter().map(|v| (v * 127.0).round()).collect();
    let bv: Vec<f64> = rand(2, k * n).iter().map(|v| (v * 127.0).round()).collect();
    let (a, ah) = upload::<i8>(&s, &av);
    let (b, bh) = upload::<i8>(&s, &bv);
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
    let p32 = IntGemmPlan::<i32>::select(&s, &desc, &PlanPreference::default()).unwrap();
    let mut d = DeviceBuffer::<i32>::filled_bytes(&s, m * n, 0xFF).unwrap();
    let mut ws = DeviceBuffer::<u8>::zeros(&s, p32.workspace_size().max(1)).unwrap();
    p32.run(
        &s,
        Workspace::Borrowed(ws.as_slice_mut()),
        IntGemmArgs {
            a: MatrixRef::new(a.as_slice(), m, k, k, MatrixOrder::RowMajor).unwrap(),
            b: MatrixRef::new(b.as_slice(), k, n, k, MatrixOrder::ColMajor).unwrap(),
            d: MatrixMut::new(d.as_slice_mut(), m, n, n, MatrixOrder::RowMajor).unwrap(),
            scale: 1.0,
        },
    )
    .unwrap();
    let got: Vec<f64> = d.to_host(&s).unwrap().iter().map(|&x| x as f64).collect();
    assert_eq!(got, want, "int8 -> s32 is exact");
    let pf = IntGemmPlan::<f32>::select(&s, &desc, &PlanPreference::default()).unwrap();
    let mut df = DeviceBuffer::<f32>::filled_bytes(&s, m * n, 0xFF).unwrap();
    let mut ws = DeviceBuffer::<u8>::zeros(&s, pf.workspace_size().max(1)).unwrap();
    let args = IntGemmArgs {
        a: MatrixRef::new(a.as_slice(), m, k, k, MatrixOrder::RowMajor).unwrap(),
        b: MatrixRef::new(b.as_slice(), k, n, k, MatrixOrder::ColMajor).unwrap(),
        d: MatrixMut::new(df.as_slice_mut(), m, n, n, MatrixOrder::RowMajor).unwrap(),
        scale: 0.5,
    };
    pf.run(&s, Workspace::Borrowed(ws.as_slice_mut()), args)
        .unwrap();
    let got: Vec<f64> = df.to_host(&s).unwrap().iter().map(|&x| x as f64).collect();
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
        IntGemmPlan::<i32>::select(&s, &bad, &PlanPreference::default()),
        Err(Error::Unsupported { .. })
    ));
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn fp8_gemm_with_amax() {
    use float8::F8E4M3;
    let s = stream();
    let (m, n, k) = (64, 48, 96);
    let desc = Fp8GemmDescriptor {
        gemm: GemmDescriptor::new(m, n, k, LayoutSku::Rcr),
        amax: true,
    };
    let plan =
        Fp8GemmPlan::<F8E4M3, F8E4M3, bf16>::select(&s, &desc, &PlanPreference::default()).unwrap();
    let (a, ah) = upload::<F8E4M3>(
        &s,
        &rand(3, m * k).iter().map(|v| v * 8.0).collect::<Vec<_>>(),
    );
    let (b, bh) = upload::<F8E4M3>(
        &s,
        &rand(4, k * n).iter().map(|v| v * 8.0).collect::<Vec<_>>(),
    );
    let scales = DeviceBuffer::<f32>::from_host(&s, &[0.25, 0.125]).unwrap();
    let mut d = DeviceBuffer::<bf16>::filled_bytes(&s, m * n, 0xFF).unwrap();
    let mut amax = DeviceBuffer::<f32>::filled_bytes(&s, 1, 0xFF).unwrap();
    let mut ws = DeviceBuffer::<u8>::zeros(&s, plan.workspace_size().max(1)).unwrap();
    plan.run(
        &s,
        Workspace::Borrowed(ws.as_slice_mut()),
        Fp8GemmArgs {
            a: MatrixRef::new(a.as_slice(), m, k, k, MatrixOrder::RowMajor).unwrap(),
            b: MatrixRef::new(b.as_slice(), k, n, k, MatrixOrder::ColMajor).unwrap(),
            d: MatrixMut::new(d.as_slice_mut(), m, n, n, MatrixOrder::RowMajor).unwrap(),
            scale_a: scales.as_slice().slice(0..1).unwrap(),
            scale_b: scales.as_slice().slice(1..2).unwrap(),
            amax: Some(amax.as_slice_mut()),
        },
    )
    .unwrap();
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
    let got: Vec<f64> = d.to_host(&s).unwrap().iter().map(|x| x.to_f64()).collect();
    check("fp8 e4m3 -> bf16", &got, &want, 8e-3);
    let amax_got = amax.to_host(&s).unwrap()[0] as f64;
    let amax_want = got.iter().fold(0.0f64, |a, &v| a.max(v.abs()));
    assert_eq!(amax_got, amax_want, "amax of the stored D");
}
