//! GPU tests of the GEMM family against the f64 reference, on the shared
//! harness (device, seeded inputs, NaN-poisoned outputs, comparison).

use baracuda_kernels::reference::gemm as r;
use baracuda_kernels::*;
use half::{bf16, f16};

use crate::harness::{
    acc_roundoff, check_untouched, compare, download, expect_err, gpu, poisoned, upload,
    view_offsets, Rng, Tolerance,
};

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

/// The relative bound [`check`] applies to a GEMM with `t` inputs, `o`
/// outputs and inner size `k`. The inputs the reference sees are the
/// rounded ones, so only the accumulation and the stores of `D` err.
fn tol(t: ElementKind, o: ElementKind, k: usize, tf32: bool) -> f64 {
    use ElementKind as K;
    let sqrt_k = (k as f64).sqrt();
    let base = match (t, o) {
        // Hopper's fp8 tensor cores keep ~14 mantissa bits while they
        // accumulate (DeepSeek-V3 report, 3.3.2): sqrt(k) 2^-14, x4, plus
        // the one rounding of D to `o`, x2.
        (K::Fp8E4M3 | K::Fp8E5M2, _) => 2.0 * o.unit_roundoff() + 4.0 * sqrt_k * 2f64.powi(-14),
        // f64 accumulation errs ~sqrt(k) u64 < 1e-14 for k <= 8192; the
        // rest is room for cuBLASLt's split-k reduction order.
        (K::F64, _) => 1e-12,
        // TF32 rounds every input to 10 mantissa bits (u = 2^-11): ~2u per
        // product, x5.
        (K::F32, _) if tf32 => 5e-3,
        // Exact products summed in f32: sqrt(k) u32 = 2.7e-6 at k = 2049,
        // x7 for tensor-core truncation and alpha/beta/bias roundings.
        (_, K::F32) => 2e-5,
        // D rounded to f16 (u = 4.9e-4), twice when the epilogue kernel
        // applies the activation to the stored Z: 4u.
        (_, K::F16) => 2e-3,
        // The same two roundings to bf16 (u = 3.9e-3): ~2u.
        _ => 8e-3,
    };
    // Accumulator rounding grows like sqrt(k) u; x4 (binds only past the
    // k the constants above were set for).
    base.max(4.0 * sqrt_k * acc_roundoff(t))
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
    let t = tol(T::KIND, O::KIND, k, pref.allow_tf32);
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
                gemm_case::<f16, f32>(s, m, n, k, layout, EpilogueKind::Identity, with_c, pad, &p);
                gemm_case::<f16, f16>(s, m, n, k, layout, EpilogueKind::Identity, with_c, pad, &p);
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
                gemm_case::<f16, f16>(s, m, n, k, layout, e, true, 0, &p);
                gemm_case::<f16, f32>(s, m, n, k, layout, e, false, 8, &p);
                gemm_case::<f64, f64>(s, m, n, k, layout, e, true, 0, &p);
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
        GemmPlan::<f32, f16>::select(s, &d, &PlanPreference::default()),
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

/// Which operand of a batched GEMM is one matrix broadcast by stride 0.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Broadcast {
    A,
    B,
    C,
}

/// One strided batch with `bc` broadcast, every entry against the
/// reference. `C` is given (with beta != 0) only when it is the broadcast
/// operand; otherwise the run takes the `c: None` path.
fn batched_case<T: Element, O: Element>(s: &Stream, layout: LayoutSku, bc: Broadcast) {
    let mut desc = BatchedGemmDescriptor::packed(GemmDescriptor::new(33, 20, 17, layout), 5);
    match bc {
        Broadcast::A => desc.stride_a = 0,
        Broadcast::B => desc.stride_b = 0,
        Broadcast::C => desc.stride_c = 0,
    }
    batched_check::<T, O>(s, &desc, bc == Broadcast::C);
}

/// Run one strided batch (`C` given, with beta != 0, exactly when
/// `with_c`; bias and aux when the descriptor's epilogue takes them) into
/// NaN-poisoned outputs and compare every entry's `D` and aux with the
/// reference. Returns the plan's SKU variant.
fn batched_check<T: Element, O: Element>(
    s: &Stream,
    desc: &BatchedGemmDescriptor,
    with_c: bool,
) -> String {
    let g = &desc.gemm;
    let (m, n, k, layout, batch) = (g.m, g.n, g.k, g.layout, desc.batch);
    let e = g.epilogue;
    let what = format!(
        "batched {}->{} {m}x{n}x{k} x{batch} {layout} {e} strides a{} b{} c{} d{} bias{} aux{} \
         ldd{}",
        T::KIND,
        O::KIND,
        desc.stride_a,
        desc.stride_b,
        desc.stride_c,
        desc.stride_d,
        desc.stride_bias,
        desc.stride_aux,
        g.ldd,
    );
    let plan = BatchedGemmPlan::<T, O>::select(s, desc, &PlanPreference::default())
        .unwrap_or_else(|err| panic!("{what}: {err}"));
    let what = format!("{what} [{}]", plan.sku().variant);
    let len = |stride: usize, one: usize| (batch - 1) * stride + one;
    let dspan = span(layout.c(), m, n, g.ldd);
    let (a, ah) = upload::<T>(&rand(1, len(desc.stride_a, span(layout.a(), m, k, g.lda))));
    let (b, bh) = upload::<T>(&rand(2, len(desc.stride_b, span(layout.b(), k, n, g.ldb))));
    let (c, ch) = upload::<O>(&rand(3, len(desc.stride_c, span(layout.c(), m, n, g.ldc))));
    let (bias, biash) = upload::<O>(&rand(4, len(desc.stride_bias, n)));
    let mut d = poisoned::<O>(len(desc.stride_d, dspan));
    let mut aux = poisoned::<O>(len(desc.stride_aux, dspan));
    let mut ws = DeviceBuffer::<u8>::zeros(s, plan.workspace_size().max(1)).unwrap();
    let (alpha, beta) = if with_c { (1.25, -0.5) } else { (1.0, 0.0) };
    plan.run(
        s,
        Workspace::Borrowed(ws.as_slice_mut()),
        BatchedGemmArgs {
            a: a.as_slice(),
            b: b.as_slice(),
            c: with_c.then(|| c.as_slice()),
            d: d.as_slice_mut(),
            bias: e.has_bias().then(|| bias.as_slice()),
            aux: g.save_aux.then(|| aux.as_slice_mut()),
            alpha,
            beta,
        },
    )
    .unwrap_or_else(|err| panic!("{what}: {err}"));
    let dh: Vec<f64> = download(&d);
    let zh: Vec<f64> = download(&aux);
    let entry = |x: &[f64], stride: usize, i: usize| -> Vec<f64> {
        (0..m * n)
            .map(|idx| r::at(&x[i * stride..], g.ldd, layout.c(), idx / n, idx % n))
            .collect()
    };
    for i in 0..batch {
        let (want_d, want_z) = r::gemm(
            m,
            n,
            k,
            (&ah[i * desc.stride_a..], g.lda, layout.a()),
            (&bh[i * desc.stride_b..], g.ldb, layout.b()),
            with_c.then_some((&ch[i * desc.stride_c..], g.ldc, layout.c())),
            e.has_bias()
                .then_some(&biash[i * desc.stride_bias..i * desc.stride_bias + n]),
            alpha,
            beta,
            e.activation(),
        );
        let t = tol(T::KIND, O::KIND, k, false);
        let at = format!("{what} entry {i}");
        check(&at, &entry(&dh, desc.stride_d, i), &want_d, t);
        if g.save_aux {
            check(
                &format!("{at} aux"),
                &entry(&zh, desc.stride_aux, i),
                &want_z,
                t,
            );
        }
    }
    if !g.save_aux {
        assert!(zh.iter().all(|x| x.is_nan()), "{what}: aux written");
    }
    plan.sku().variant.clone()
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn batched_every_dtype_with_broadcast() {
    let s = &gpu().stream;
    // Rcr swaps A and B inside matmul.rs (row-major D); Crc does not.
    for layout in [LayoutSku::Rcr, LayoutSku::Crc] {
        for bc in [Broadcast::A, Broadcast::B, Broadcast::C] {
            batched_case::<f32, f32>(s, layout, bc);
            batched_case::<f64, f64>(s, layout, bc);
            batched_case::<f16, f16>(s, layout, bc);
            batched_case::<f16, f32>(s, layout, bc);
            batched_case::<bf16, bf16>(s, layout, bc);
            batched_case::<bf16, f32>(s, layout, bc);
        }
    }
}

/// How a batched test lays out its bias vectors.
#[derive(Clone, Copy, Debug)]
enum BiasStride {
    /// One vector for every entry (stride 0).
    Shared,
    /// `n` apart (`n` = 24: 16-byte multiples in every dtype, so cuBLASLt
    /// can fuse).
    Packed,
    /// `n + 3` apart: entries off 16 bytes, so the epilogue kernel runs.
    Padded,
}

/// A batch of 5 entries of 33 x 24 x 17 in `layout` with epilogue `e`
/// (aux saved when it has an activation), D's leading dimension padded by
/// `pad`, the bias laid out as `bias`; `C` given when `with_c`.
fn batched_epilogue_case<T: Element, O: Element>(
    s: &Stream,
    layout: LayoutSku,
    e: EpilogueKind,
    bias: BiasStride,
    pad: usize,
    with_c: bool,
) -> String {
    let g = GemmDescriptor::new(33, 24, 17, layout);
    let g = g
        .clone()
        .with_ld(g.lda, g.ldb, g.ldc, g.ldd + pad)
        .with_epilogue(e)
        .with_aux(e.activation() != Activation::Identity);
    let mut desc = BatchedGemmDescriptor::packed(g, 5);
    desc.stride_bias = match bias {
        BiasStride::Shared => 0,
        BiasStride::Packed => 24,
        BiasStride::Padded => 27,
    };
    batched_check::<T, O>(s, &desc, with_c)
}

/// Every epilogue on a strided batch, every dtype pair but f16 -> f16 (the
/// same path as bf16 -> bf16), row-major D (cuBLASLt's fused epilogues
/// with its bias and aux batch strides where they apply) and column-major
/// D (the epilogue kernel for a bias), shared, packed and padded bias
/// vectors, aux entries 8-element aligned (pad 0) or not (pad 1), with
/// and without C.
#[test]
#[ignore = "needs a CUDA GPU"]
fn batched_every_epilogue() {
    let s = &gpu().stream;
    for layout in [LayoutSku::Rcr, LayoutSku::Crc] {
        for e in EpilogueKind::ALL {
            let biases: &[BiasStride] = if e.has_bias() {
                &[BiasStride::Shared, BiasStride::Packed, BiasStride::Padded]
            } else {
                &[BiasStride::Packed]
            };
            for &bias in biases {
                for (pad, with_c) in [(0, false), (1, true)] {
                    batched_epilogue_case::<bf16, bf16>(s, layout, e, bias, pad, with_c);
                    batched_epilogue_case::<bf16, f32>(s, layout, e, bias, pad, !with_c);
                    batched_epilogue_case::<f16, f32>(s, layout, e, bias, pad, with_c);
                    batched_epilogue_case::<f32, f32>(s, layout, e, bias, pad, with_c);
                    batched_epilogue_case::<f64, f64>(s, layout, e, bias, pad, !with_c);
                }
            }
        }
    }
    // The claim that the batched bias and aux ride on cuBLASLt's batch
    // strides: a row-major bf16 batch with per-entry biases and GELU-tanh
    // aux, all 16-byte aligned, runs no epilogue kernel.
    for bias in [BiasStride::Shared, BiasStride::Packed] {
        let v = batched_epilogue_case::<bf16, bf16>(
            s,
            LayoutSku::Rcr,
            EpilogueKind::BiasGeluTanh,
            bias,
            0,
            false,
        );
        assert!(!v.contains("epilogue kernel"), "{bias:?}: {v}");
    }
    let v = batched_epilogue_case::<bf16, bf16>(
        s,
        LayoutSku::Rcr,
        EpilogueKind::Bias,
        BiasStride::Padded,
        0,
        false,
    );
    assert!(v.contains("epilogue kernel"), "{v}");
}

/// Bad batched epilogue arguments are refused before anything is written;
/// overlapping aux entries are refused at `select`.
#[test]
#[ignore = "needs a CUDA GPU"]
fn batched_epilogue_bad_inputs() {
    let s = &gpu().stream;
    let g = GemmDescriptor::new(16, 16, 16, LayoutSku::Rcr)
        .with_epilogue(EpilogueKind::BiasRelu)
        .with_aux(true);
    let desc = BatchedGemmDescriptor::packed(g, 3);
    let p = PlanPreference::default();
    let plan = BatchedGemmPlan::<f32>::select(s, &desc, &p).unwrap();
    let (a, _) = upload::<f32>(&rand(9, 3 * 256));
    let (bias, _) = upload::<f32>(&rand(10, 3 * 16 + 4));
    let mut d = poisoned::<f32>(3 * 256);
    let mut aux = poisoned::<f32>(3 * 256);
    let mut ws = DeviceBuffer::<u8>::zeros(s, plan.workspace_size().max(1)).unwrap();
    let mut run = |bias: Option<DeviceSlice<'_, f32>>, with_aux: bool| {
        plan.run(
            s,
            Workspace::Borrowed(ws.as_slice_mut()),
            BatchedGemmArgs {
                a: a.as_slice(),
                b: a.as_slice(),
                c: None,
                d: d.as_slice_mut(),
                bias,
                aux: with_aux.then(|| aux.as_slice_mut()),
                alpha: 1.0,
                beta: 0.0,
            },
        )
    };
    let all = bias.as_slice();
    assert_ok(expect_err(
        "bias one entry short",
        run(all.slice(0..2 * 16 + 15), true),
        |e| matches!(e, Error::ShapeMismatch { arg: "bias", .. }),
    ));
    assert_ok(expect_err(
        "bias off 16 bytes",
        run(all.slice(1..3 * 16 + 1), true),
        |e| matches!(e, Error::InvalidArgument { arg: "bias", .. }),
    ));
    assert_ok(expect_err("no bias", run(None, true), |e| {
        matches!(e, Error::InvalidArgument { arg: "bias", .. })
    }));
    assert_ok(expect_err("no aux", run(Some(all), false), |e| {
        matches!(e, Error::InvalidArgument { arg: "aux", .. })
    }));
    assert!(download(&d).iter().all(|x| x.is_nan()), "nothing written");
    assert!(download(&aux).iter().all(|x| x.is_nan()), "no aux written");
    let mut overlap = desc.clone();
    overlap.stride_aux = 255;
    assert_ok(expect_err(
        "overlapping aux entries",
        BatchedGemmPlan::<f32>::select(s, &overlap, &p),
        |e| {
            matches!(
                e,
                Error::InvalidDescriptor {
                    field: "stride_aux",
                    ..
                }
            )
        },
    ));
}

/// The groups of the grouped tests: MoE-like token counts (one expert with
/// none) and a different width per group.
const GROUPS: [(usize, usize, usize); 5] = [
    (5, 48, 32),
    (0, 16, 32),
    (17, 40, 32),
    (1, 8, 32),
    (64, 24, 32),
];

/// Uploaded operands of one group of [`GROUPS`] (`A` row-major, `B`
/// column-major, `C` row-major, bias), with the values the device holds.
struct GroupData<T: Element> {
    a: (DeviceBuffer<T>, Vec<f64>),
    b: (DeviceBuffer<T>, Vec<f64>),
    c: (DeviceBuffer<T>, Vec<f64>),
    bias: (DeviceBuffer<T>, Vec<f64>),
}

/// `rows x cols` of `b` with leading dimension `ld`, stored in `order`.
fn mat<T: Element>(
    b: &DeviceBuffer<T>,
    rows: usize,
    cols: usize,
    ld: usize,
    order: MatrixOrder,
) -> MatrixRef<'_, T> {
    MatrixRef::new(b.as_slice(), rows, cols, ld, order).unwrap()
}

fn group_data<T: Element>(g: usize, (m, n, k): (usize, usize, usize)) -> GroupData<T> {
    let seed = 10 * g as u64;
    GroupData {
        a: upload::<T>(&rand(seed + 1, (m * k).max(1))),
        b: upload::<T>(&rand(seed + 2, k * n)),
        c: upload::<T>(&rand(seed + 3, (m * n).max(1))),
        bias: upload::<T>(&rand(seed + 4, n)),
    }
}

/// The argument lists of a run over [`GROUPS`]: `A`, `B` and, when asked,
/// `C` and the bias from `ins`; `D` in `outs` and aux in `aux`, each
/// row-major and packed.
fn group_args<'a, T: Element>(
    ins: &'a [GroupData<T>],
    outs: &'a mut [DeviceBuffer<T>],
    aux: Option<&'a mut [DeviceBuffer<T>]>,
    (with_c, with_bias): (bool, bool),
    (alpha, beta): (f64, f64),
) -> GroupedGemmArgs<'a, T> {
    let row = MatrixOrder::RowMajor;
    let outputs = |bufs: &'a mut [DeviceBuffer<T>]| -> Vec<MatrixMut<'a, T>> {
        bufs.iter_mut()
            .zip(GROUPS)
            .map(|(d, (m, n, _))| MatrixMut::new(d.as_slice_mut(), m, n, n, row).unwrap())
            .collect()
    };
    GroupedGemmArgs {
        a: ins
            .iter()
            .zip(GROUPS)
            .map(|(x, (m, _, k))| mat(&x.a.0, m, k, k, row))
            .collect(),
        b: ins
            .iter()
            .zip(GROUPS)
            .map(|(x, (_, n, k))| mat(&x.b.0, k, n, k, MatrixOrder::ColMajor))
            .collect(),
        c: with_c.then(|| {
            ins.iter()
                .zip(GROUPS)
                .map(|(x, (m, n, _))| mat(&x.c.0, m, n, n, row))
                .collect()
        }),
        d: outputs(outs),
        bias: with_bias.then(|| ins.iter().map(|x| x.bias.0.as_slice()).collect()),
        aux: aux.map(outputs),
        alpha,
        beta,
    }
}

/// One grouped run over [`GROUPS`] with epilogue `e` (aux saved when it has
/// an activation) and, when `with_c`, `C` with beta != 0, into
/// NaN-poisoned outputs; every group against the reference, the empty
/// group untouched.
fn grouped_case<T: Element>(s: &Stream, e: EpilogueKind, with_c: bool) {
    let row = MatrixOrder::RowMajor;
    let save_aux = e.activation() != Activation::Identity;
    let desc = GroupedGemmDescriptor::new(GROUPS.to_vec(), LayoutSku::Rcr)
        .with_epilogue(e)
        .with_aux(save_aux);
    let what = format!("grouped {} {e} c={with_c}", T::KIND);
    let plan = GroupedGemmPlan::<T>::select(s, &desc, &PlanPreference::default())
        .unwrap_or_else(|err| panic!("{what}: {err}"));
    let what = format!("{what} [{}]", plan.sku().variant);
    let ins: Vec<GroupData<T>> = GROUPS
        .iter()
        .enumerate()
        .map(|(g, &p)| group_data(g, p))
        .collect();
    let size = |(m, n, _): (usize, usize, usize)| (m * n).max(1);
    let mut outs: Vec<DeviceBuffer<T>> = GROUPS.iter().map(|&p| poisoned(size(p))).collect();
    let mut auxs: Vec<DeviceBuffer<T>> = GROUPS.iter().map(|&p| poisoned(size(p))).collect();
    let mut ws = DeviceBuffer::<u8>::zeros(s, plan.workspace_size().max(1)).unwrap();
    let (alpha, beta) = if with_c { (0.75, 1.5) } else { (1.0, 0.0) };
    let aux = save_aux.then_some(&mut auxs[..]);
    let args = group_args(&ins, &mut outs, aux, (with_c, e.has_bias()), (alpha, beta));
    plan.run(s, Workspace::Borrowed(ws.as_slice_mut()), args)
        .unwrap_or_else(|err| panic!("{what}: {err}"));
    for (g, &(m, n, k)) in GROUPS.iter().enumerate() {
        let got = download(&outs[g]);
        let got_z = download(&auxs[g]);
        if m == 0 || !save_aux {
            assert!(
                got_z.iter().all(|x| x.is_nan()),
                "{what}: aux of group {g} written"
            );
        }
        if m == 0 {
            assert!(
                got.iter().all(|x| x.is_nan()),
                "{what}: empty group {g} written"
            );
            continue;
        }
        let x = &ins[g];
        let (want, want_z) = r::gemm(
            m,
            n,
            k,
            (&x.a.1, k, row),
            (&x.b.1, k, MatrixOrder::ColMajor),
            with_c.then_some((&x.c.1[..], n, row)),
            e.has_bias().then_some(&x.bias.1[..]),
            alpha,
            beta,
            e.activation(),
        );
        let t = tol(T::KIND, T::KIND, k, false);
        check(&format!("{what} group {g}"), &got, &want, t);
        if save_aux {
            check(&format!("{what} group {g} aux"), &got_z, &want_z, t);
        }
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn grouped_moe_shapes() {
    let s = &gpu().stream;
    grouped_case::<bf16>(s, EpilogueKind::Identity, false);
    grouped_case::<f16>(s, EpilogueKind::Identity, false);
    grouped_case::<f32>(s, EpilogueKind::Identity, false);
    grouped_case::<f64>(s, EpilogueKind::Identity, false);
}

/// `D = act(alpha A B + beta C + bias)` per group: every epilogue (a bias
/// per group, aux saved with an activation), with and without C, every
/// dtype.
#[test]
#[ignore = "needs a CUDA GPU"]
fn grouped_every_epilogue_with_c() {
    let s = &gpu().stream;
    for e in EpilogueKind::ALL {
        for with_c in [true, false] {
            grouped_case::<bf16>(s, e, with_c);
            grouped_case::<f16>(s, e, with_c);
            grouped_case::<f32>(s, e, !with_c);
            grouped_case::<f64>(s, e, with_c);
        }
    }
}

/// What [`grouped_bad_inputs`] spoils.
#[derive(Clone, Copy, Debug)]
enum Spoil {
    /// The last group's bias, one element short.
    LastBias,
    /// The last group's C, column-major (the plan takes row-major).
    LastC,
    /// The C list, one group short.
    CList,
}

/// A bad argument in any group (the last one here) is refused before any
/// group is written.
#[test]
#[ignore = "needs a CUDA GPU"]
fn grouped_bad_inputs() {
    let s = &gpu().stream;
    let desc = GroupedGemmDescriptor::new(GROUPS.to_vec(), LayoutSku::Rcr)
        .with_epilogue(EpilogueKind::BiasRelu);
    let plan = GroupedGemmPlan::<f32>::select(s, &desc, &PlanPreference::default()).unwrap();
    let ins: Vec<GroupData<f32>> = GROUPS
        .iter()
        .enumerate()
        .map(|(g, &p)| group_data(g, p))
        .collect();
    let mut outs: Vec<DeviceBuffer<f32>> = GROUPS
        .iter()
        .map(|&(m, n, _)| poisoned((m * n).max(1)))
        .collect();
    let mut ws = DeviceBuffer::<u8>::zeros(s, plan.workspace_size().max(1)).unwrap();
    let last = GROUPS.len() - 1;
    let (m, n, _) = GROUPS[last];
    let mut run = |spoil: Spoil| {
        let mut args = group_args(&ins, &mut outs, None, (true, true), (1.0, 1.0));
        let (c, bias) = (args.c.as_mut().unwrap(), args.bias.as_mut().unwrap());
        match spoil {
            Spoil::LastBias => bias[last] = bias[last].slice(0..n - 1).unwrap(),
            Spoil::LastC => c[last] = mat(&ins[last].c.0, m, n, m, MatrixOrder::ColMajor),
            Spoil::CList => {
                c.pop();
            }
        }
        plan.run(s, Workspace::Borrowed(ws.as_slice_mut()), args)
    };
    let cases = [
        (Spoil::LastBias, "bias", true),
        (Spoil::LastC, "c", false),
        (Spoil::CList, "c", true),
    ];
    for (spoil, arg, shape) in cases {
        assert_ok(expect_err(&format!("{spoil:?}"), run(spoil), |e| match e {
            Error::ShapeMismatch { arg: a, .. } => shape && *a == arg,
            Error::InvalidArgument { arg: a, .. } => !shape && *a == arg,
            _ => false,
        }));
    }
    for (g, d) in outs.iter().enumerate() {
        assert!(download(d).iter().all(|x| x.is_nan()), "group {g} written");
    }
}

fn linear_case<T: Element>(s: &Stream, t: usize, i: usize, o: usize, e: EpilogueKind, tl: f64) {
    let p = PlanPreference::default();
    linear_case_with::<T>(s, (t, i, o), e, tl, false, Pick::Pref(&p));
    if e.has_bias() {
        linear_case_with::<T>(s, (t, i, o), e, tl, true, Pick::Pref(&p));
    }
}

/// How a linear test case selects its plan.
enum Pick<'a> {
    /// `select` with this preference.
    Pref(&'a PlanPreference),
    /// The default preference, then `with_skinny_forward`.
    Skinny,
}

/// One packed linear layer forward and backward against the reference
/// (see [`linear_check`]); aux saved when `e` has an activation.
fn linear_case_with<T: Element>(
    s: &Stream,
    (t, i, o): (usize, usize, usize),
    e: EpilogueKind,
    tl: f64,
    column_sum: bool,
    pick: Pick<'_>,
) -> String {
    let desc = LinearDescriptor::new(t, i, o)
        .with_epilogue(e)
        .with_aux(e.activation() != Activation::Identity);
    linear_check::<T>(s, &desc, tl, column_sum, pick)
}

/// Logical `rows x cols` of a row-major matrix with leading dimension
/// `ld`, and the check that its padding is still NaN.
fn rows_of(what: &str, buf: &[f64], (rows, cols, ld): (usize, usize, usize)) -> Vec<f64> {
    let offsets = view_offsets(&[rows, cols], &[ld, 1]);
    assert_ok(check_untouched(what, buf, &offsets));
    offsets.into_iter().map(|o| buf[o]).collect()
}

/// Elements a row-major `rows x cols` matrix with leading dimension `ld`
/// reaches.
fn row_span(rows: usize, cols: usize, ld: usize) -> usize {
    span(MatrixOrder::RowMajor, rows, cols, ld)
}

/// One linear layer of `desc` (its leading dimensions included) forward and
/// backward against the reference, into NaN-poisoned outputs whose
/// padding must stay NaN; selected as `pick` says; with `column_sum`, db
/// through the column-sum kernel. Returns the plan's SKU variant.
fn linear_check<T: Element>(
    s: &Stream,
    desc: &LinearDescriptor,
    tl: f64,
    column_sum: bool,
    pick: Pick<'_>,
) -> String {
    let default = PlanPreference::default();
    let pref = match pick {
        Pick::Pref(p) => p,
        Pick::Skinny => &default,
    };
    let (t, i, o, e) = (
        desc.tokens,
        desc.in_features,
        desc.out_features,
        desc.epilogue,
    );
    let mut plan = LinearPlan::<T>::select(s, desc, pref)
        .unwrap_or_else(|e| panic!("{desc:?} {}: {e}", T::KIND));
    if matches!(pick, Pick::Skinny) {
        plan = plan
            .with_skinny_forward(s)
            .unwrap_or_else(|e| panic!("{desc:?} {}: {e}", T::KIND));
    }
    if column_sum {
        plan = plan.with_column_sum_db();
        assert!(
            plan.sku().variant.contains("db column-sum"),
            "{}",
            plan.sku().variant
        );
    }
    let (ldx, ldw, ldy) = (desc.ldx, desc.ldw, desc.ldy);
    let (lddx, lddw, lddy) = (desc.lddx, desc.lddw, desc.lddy);
    let (x, xh) = upload::<T>(&rand(5, row_span(t, i, ldx)));
    let (w, wh) = upload::<T>(&rand(6, row_span(o, i, ldw)));
    let (b, bh) = upload::<T>(&rand(7, o));
    let (dy, dyh) = upload::<T>(&rand(8, row_span(t, o, lddy)));
    let mut y = poisoned::<T>(row_span(t, o, ldy));
    let mut z = poisoned::<T>(row_span(t, o, ldy));
    let mut ws = DeviceBuffer::<u8>::zeros(s, plan.workspace_size().max(1)).unwrap();
    let row = MatrixOrder::RowMajor;
    plan.run(
        s,
        Workspace::Borrowed(ws.as_slice_mut()),
        LinearArgs {
            x: MatrixRef::new(x.as_slice(), t, i, ldx, row).unwrap(),
            w: MatrixRef::new(w.as_slice(), o, i, ldw, row).unwrap(),
            bias: e.has_bias().then(|| b.as_slice()),
            y: MatrixMut::new(y.as_slice_mut(), t, o, ldy, row).unwrap(),
            aux: desc
                .save_aux
                .then(|| MatrixMut::new(z.as_slice_mut(), t, o, ldy, row).unwrap()),
        },
    )
    .unwrap();
    let (want_y, want_z) = r::gemm(
        t,
        o,
        i,
        (&xh, ldx, row),
        (&wh, ldw, MatrixOrder::ColMajor),
        None,
        e.has_bias().then_some(&bh[..]),
        1.0,
        0.0,
        e.activation(),
    );
    let lds = if (ldx, ldw, ldy, lddx, lddw, lddy) == (i, i, o, i, i, o) {
        String::new()
    } else {
        format!(" ld x{ldx} w{ldw} y{ldy} dx{lddx} dw{lddw} dy{lddy}")
    };
    let what = format!(
        "linear {} {t}x{i}->{o} {e}{lds} [{}]",
        T::KIND,
        plan.sku().variant
    );
    let y_rows = rows_of(&format!("{what} y"), &download(&y), (t, o, ldy));
    check(&format!("{what} y"), &y_rows, &want_y, tl);
    // Backward, against the reference built on the GPU's saved Z.
    let zh: Vec<f64> = if desc.save_aux {
        rows_of(&format!("{what} aux"), &download(&z), (t, o, ldy))
    } else {
        want_z
    };
    let dz: Vec<f64> = (0..t * o)
        .map(|p| {
            let g = dyh[(p / o) * lddy + p % o] * r::act_grad(e.activation(), zh[p]);
            T::from_f64(g).to_f64()
        })
        .collect();
    let mut dx = poisoned::<T>(row_span(t, i, lddx));
    let mut dw = poisoned::<T>(row_span(o, i, lddw));
    let mut db = poisoned::<T>(o);
    plan.run_bw(
        s,
        Workspace::Borrowed(ws.as_slice_mut()),
        LinearBwArgs {
            x: MatrixRef::new(x.as_slice(), t, i, ldx, row).unwrap(),
            w: MatrixRef::new(w.as_slice(), o, i, ldw, row).unwrap(),
            dy: MatrixRef::new(dy.as_slice(), t, o, lddy, row).unwrap(),
            aux: desc
                .save_aux
                .then(|| MatrixRef::new(z.as_slice(), t, o, ldy, row).unwrap()),
            dx: Some(MatrixMut::new(dx.as_slice_mut(), t, i, lddx, row).unwrap()),
            dw: Some(MatrixMut::new(dw.as_slice_mut(), o, i, lddw, row).unwrap()),
            dbias: e.has_bias().then(|| db.as_slice_mut()),
        },
    )
    .unwrap();
    let (want_dx, _) = r::gemm(
        t,
        i,
        o,
        (&dz, o, row),
        (&wh, ldw, row),
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
        (&xh, ldx, row),
        None,
        None,
        1.0,
        0.0,
        Activation::Identity,
    );
    let h = download::<T>;
    let dx_rows = rows_of(&format!("{what} dx"), &h(&dx), (t, i, lddx));
    check(&format!("{what} dx"), &dx_rows, &want_dx, tl);
    let dw_rows = rows_of(&format!("{what} dw"), &h(&dw), (o, i, lddw));
    check(&format!("{what} dw"), &dw_rows, &want_dw, tl);
    if e.has_bias() {
        let want_db: Vec<f64> = (0..o)
            .map(|j| (0..t).map(|r| dz[r * o + j]).sum())
            .collect();
        check(&format!("{what} db"), &h(&db), &want_db, tl);
    }
    plan.sku().variant.clone()
}

/// The skinny forward (1 to 4 tokens, enough outputs to fill the GPU),
/// forced with `with_skinny_forward`: every dtype and epilogue, K not a
/// multiple of the kernel's 4 slices of 32 lanes x 2 unrolled loads, an
/// odd number of outputs (the last block holds a warp group with one live
/// row and one with none), K of one vector (three of four slices empty),
/// and a 4096-wide layer. Shapes it does not suit are refused with an error;
/// heuristic selection keeps cuBLASLt; measured autotuning picks either
/// kernel and stays correct.
#[test]
#[ignore = "needs a CUDA GPU"]
fn linear_skinny_forward() {
    let s = &gpu().stream;
    let sms = s.context().device().sm_count as usize;
    let o = 8 * sms + 25;
    let skinny = |v: String| assert!(v.contains("skinny kernel (forced"), "{v}");
    let u16 = 4.0 * ElementKind::F16.unit_roundoff();
    for t in 1..=4 {
        for e in [
            EpilogueKind::Identity,
            EpilogueKind::Bias,
            EpilogueKind::BiasRelu,
            EpilogueKind::BiasGeluErf,
            EpilogueKind::BiasGeluTanh,
        ] {
            skinny(linear_case_with::<bf16>(
                s,
                (t, 296, o),
                e,
                1e-2,
                false,
                Pick::Skinny,
            ));
            skinny(linear_case_with::<f16>(
                s,
                (t, 296, o),
                e,
                u16,
                false,
                Pick::Skinny,
            ));
            skinny(linear_case_with::<f32>(
                s,
                (t, 300, o),
                e,
                3e-5,
                false,
                Pick::Skinny,
            ));
            skinny(linear_case_with::<f64>(
                s,
                (t, 302, o),
                e,
                1e-12,
                false,
                Pick::Skinny,
            ));
        }
    }
    for t in [1, 4] {
        skinny(linear_case_with::<bf16>(
            s,
            (t, 8, o),
            EpilogueKind::Bias,
            1e-2,
            false,
            Pick::Skinny,
        ));
    }
    let big = (1, 4096, o);
    skinny(linear_case_with::<bf16>(
        s,
        big,
        EpilogueKind::Bias,
        2e-2,
        false,
        Pick::Skinny,
    ));
    // Heuristic selection keeps cuBLASLt for the forward.
    let heuristic = PlanPreference::default();
    let v = linear_case_with::<bf16>(
        s,
        big,
        EpilogueKind::Bias,
        2e-2,
        false,
        Pick::Pref(&heuristic),
    );
    assert!(!v.contains("skinny"), "{v}");
    // Five tokens, too few outputs, or K not whole vectors: refused.
    for (t, i, o) in [(5, 296, o), (1, 296, 40), (1, 297, o)] {
        let desc = LinearDescriptor::new(t, i, o).with_epilogue(EpilogueKind::Bias);
        let plan = LinearPlan::<bf16>::select(s, &desc, &heuristic).unwrap();
        match plan.with_skinny_forward(s) {
            Err(Error::Unsupported { op: "linear", .. }) => {}
            Err(e) => panic!("{desc:?}: wrong error {e}"),
            Ok(_) => panic!("{desc:?}: the skinny forward was accepted"),
        }
    }
    let measured = PlanPreference::default().with_autotune(Autotune::Measured);
    for t in [1, 3] {
        let e = EpilogueKind::BiasGeluErf;
        linear_case_with::<bf16>(s, (t, 4096, o), e, 2e-2, false, Pick::Pref(&measured));
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
        // Y, dX, dW, db each rounded once to f16 (u = 4.9e-4), dZ once
        // more before the backward GEMMs: 4u.
        linear_case::<f16>(s, 64, 96, 40, e, 4.0 * ElementKind::F16.unit_roundoff());
        // f64 GEMMs err ~sqrt(k) u64.
        linear_case::<f64>(s, 7, 33, 18, e, 1e-12);
    }
    // Enough tokens for the column sum to split rows into several chunks,
    // with out_features that allow 16-byte loads (bf16: 40 % 8 == 0; f64:
    // 18 % 2 == 0) and that do not (f32: 18 % 4 != 0; f16: 36 % 8 != 0).
    linear_case::<bf16>(s, 1000, 64, 40, EpilogueKind::Bias, 2e-2);
    linear_case::<f32>(s, 517, 33, 18, EpilogueKind::BiasRelu, 3e-5);
    linear_case::<f16>(
        s,
        700,
        32,
        36,
        EpilogueKind::Bias,
        4.0 * ElementKind::F16.unit_roundoff(),
    );
    linear_case::<f64>(s, 300, 16, 18, EpilogueKind::Bias, 1e-12);
}

/// Leading-dimension paddings of a linear layer: `X`, `W`, `Y`, `dX`, `dW`,
/// `dY`.
type Pads = [usize; 6];

/// `desc` with each leading dimension padded as `pads` says.
fn padded(desc: LinearDescriptor, p: Pads) -> LinearDescriptor {
    let (i, o) = (desc.in_features, desc.out_features);
    desc.with_forward_ld(i + p[0], i + p[1], o + p[2])
        .with_backward_ld(i + p[3], i + p[4], o + p[5])
}

/// Odd paddings (rows off 16 bytes, aux ld not a multiple of 8: cuBLASLt
/// without its GELU aux epilogue, the column sum without 16-byte loads)
/// and paddings of 8 (everything aligned, the fused paths).
const PADS: [Pads; 2] = [[3, 5, 7, 1, 2, 9], [8, 8, 8, 8, 8, 8]];

/// A linear layer on strided matrices: X, W, Y (and Z), dX, dW and dY
/// each with its own leading dimension, every epilogue, every dtype, db
/// both ways; and enough tokens for the column sum to split rows, over a
/// strided dY read with and without 16-byte loads.
#[test]
#[ignore = "needs a CUDA GPU"]
fn linear_strided() {
    let s = &gpu().stream;
    let p = PlanPreference::default();
    let u16 = 4.0 * ElementKind::F16.unit_roundoff();
    for e in [
        EpilogueKind::Identity,
        EpilogueKind::Bias,
        EpilogueKind::BiasGeluTanh,
        EpilogueKind::BiasRelu,
        EpilogueKind::BiasGeluErf,
    ] {
        let aux = e.activation() != Activation::Identity;
        for pads in PADS {
            let d = |t, i, o| {
                padded(
                    LinearDescriptor::new(t, i, o)
                        .with_epilogue(e)
                        .with_aux(aux),
                    pads,
                )
            };
            for column_sum in [false, e.has_bias()] {
                linear_check::<bf16>(s, &d(64, 96, 40), 1e-2, column_sum, Pick::Pref(&p));
                linear_check::<f32>(s, &d(7, 33, 18), 3e-5, column_sum, Pick::Pref(&p));
                linear_check::<f16>(s, &d(64, 96, 40), u16, column_sum, Pick::Pref(&p));
                linear_check::<f64>(s, &d(7, 33, 18), 1e-12, column_sum, Pick::Pref(&p));
            }
        }
    }
    for pads in PADS {
        let d = |t, i, o| {
            padded(
                LinearDescriptor::new(t, i, o).with_epilogue(EpilogueKind::Bias),
                pads,
            )
        };
        linear_check::<bf16>(s, &d(1000, 64, 40), 2e-2, true, Pick::Pref(&p));
        linear_check::<f32>(s, &d(517, 33, 20), 3e-5, true, Pick::Pref(&p));
        linear_check::<f64>(s, &d(300, 16, 18), 1e-12, true, Pick::Pref(&p));
    }
}

/// The skinny forward kernel reads packed X, W and Y only: a strided one
/// is refused by `with_skinny_forward` and measured autotuning keeps
/// cuBLASLt (and stays correct); strided backward matrices leave it free
/// to serve the forward.
#[test]
#[ignore = "needs a CUDA GPU"]
fn linear_strided_skips_the_skinny_kernel() {
    let s = &gpu().stream;
    let sms = s.context().device().sm_count as usize;
    let o = 8 * sms + 25;
    let measured = PlanPreference::default().with_autotune(Autotune::Measured);
    for t in [1, 4] {
        for e in [EpilogueKind::Bias, EpilogueKind::BiasGeluErf] {
            let aux = e.activation() != Activation::Identity;
            let base = LinearDescriptor::new(t, 296, o)
                .with_epilogue(e)
                .with_aux(aux);
            for pads in [[8, 0, 0, 0, 0, 0], [0, 8, 0, 0, 0, 0], [0, 0, 8, 0, 0, 0]] {
                let desc = padded(base.clone(), pads);
                let v = linear_check::<bf16>(s, &desc, 1e-2, false, Pick::Pref(&measured));
                assert!(!v.contains("skinny"), "{desc:?}: {v}");
                let plan =
                    LinearPlan::<bf16>::select(s, &desc, &PlanPreference::default()).unwrap();
                assert_ok(expect_err(
                    &format!("skinny forward of {desc:?}"),
                    plan.with_skinny_forward(s),
                    |e| matches!(e, Error::Unsupported { op: "linear", .. }),
                ));
            }
            let desc = padded(base, [0, 0, 0, 8, 8, 8]);
            let v = linear_check::<bf16>(s, &desc, 1e-2, false, Pick::Skinny);
            assert!(v.contains("skinny kernel (forced"), "{desc:?}: {v}");
        }
    }
}

/// Strided linear arguments that differ from the descriptor's leading
/// dimensions are refused, under the layer's names, before anything is
/// written; a leading dimension below its row length at `select`.
#[test]
#[ignore = "needs a CUDA GPU"]
fn linear_strided_bad_inputs() {
    let s = &gpu().stream;
    let p = PlanPreference::default();
    let (t, i, o) = (16, 32, 24);
    let desc = LinearDescriptor::new(t, i, o)
        .with_epilogue(EpilogueKind::Bias)
        .with_forward_ld(40, 32, 24)
        .with_backward_ld(32, 32, 32);
    let plan = LinearPlan::<f32>::select(s, &desc, &p).unwrap();
    let row = MatrixOrder::RowMajor;
    let (x, _) = upload::<f32>(&rand(1, t * 40));
    let (w, _) = upload::<f32>(&rand(2, o * i));
    let (b, _) = upload::<f32>(&rand(3, o));
    let mut y = poisoned::<f32>(t * o);
    let mut ws = DeviceBuffer::<u8>::zeros(s, plan.workspace_size().max(1)).unwrap();
    assert_ok(expect_err(
        "x packed, the plan strided",
        plan.run(
            s,
            Workspace::Borrowed(ws.as_slice_mut()),
            LinearArgs {
                x: MatrixRef::new(x.as_slice(), t, i, i, row).unwrap(),
                w: MatrixRef::new(w.as_slice(), o, i, i, row).unwrap(),
                bias: Some(b.as_slice()),
                y: MatrixMut::new(y.as_slice_mut(), t, o, o, row).unwrap(),
                aux: None,
            },
        ),
        |e| matches!(e, Error::InvalidArgument { arg: "x", .. }),
    ));
    assert!(download(&y).iter().all(|v| v.is_nan()), "y written");
    let (dy, _) = upload::<f32>(&rand(4, t * 32));
    let mut dx = poisoned::<f32>(t * i);
    let mut dw = poisoned::<f32>(o * i);
    let mut db = poisoned::<f32>(o);
    assert_ok(expect_err(
        "dy packed, the plan strided",
        plan.run_bw(
            s,
            Workspace::Borrowed(ws.as_slice_mut()),
            LinearBwArgs {
                x: MatrixRef::new(x.as_slice(), t, i, 40, row).unwrap(),
                w: MatrixRef::new(w.as_slice(), o, i, i, row).unwrap(),
                dy: MatrixRef::new(dy.as_slice(), t, o, o, row).unwrap(),
                aux: None,
                dx: Some(MatrixMut::new(dx.as_slice_mut(), t, i, i, row).unwrap()),
                dw: Some(MatrixMut::new(dw.as_slice_mut(), o, i, i, row).unwrap()),
                dbias: Some(db.as_slice_mut()),
            },
        ),
        |e| matches!(e, Error::InvalidArgument { arg: "dy", .. }),
    ));
    for (name, buf) in [("dx", &dx), ("dw", &dw), ("db", &db)] {
        assert!(download(buf).iter().all(|v| v.is_nan()), "{name} written");
    }
    for (d, field) in [
        (desc.clone().with_forward_ld(40, 31, 24), "ldw"),
        (desc.clone().with_backward_ld(32, 32, 23), "lddy"),
    ] {
        assert_ok(expect_err(
            field,
            LinearPlan::<f32>::select(s, &d, &p),
            |e| matches!(e, Error::InvalidDescriptor { field: f, .. } if *f == field),
        ));
    }
}

/// One s8 x s8 GEMM into `O`, scaled by `scale`, against the reference.
fn int_gemm_case<O: Element>(s: &Stream, layout: LayoutSku, scale: f32, tl: f64) {
    let (m, n, k) = (40, 24, 64);
    let desc = IntGemmDescriptor {
        gemm: GemmDescriptor::new(m, n, k, layout),
    };
    let what = format!("int8 -> {} {m}x{n}x{k} {layout} scale {scale}", O::KIND);
    let av: Vec<f64> = rand(1, m * k).iter().map(|v| (v * 127.0).round()).collect();
    let bv: Vec<f64> = rand(2, k * n).iter().map(|v| (v * 127.0).round()).collect();
    let (a, ah) = upload::<i8>(&av);
    let (b, bh) = upload::<i8>(&bv);
    let plan = IntGemmPlan::<O>::select(s, &desc, &PlanPreference::default())
        .unwrap_or_else(|e| panic!("{what}: {e}"));
    let ldd = desc.gemm.ldd;
    let mut d = poisoned::<O>(m * n);
    let mut ws = DeviceBuffer::<u8>::zeros(s, plan.workspace_size().max(1)).unwrap();
    plan.run(
        s,
        Workspace::Borrowed(ws.as_slice_mut()),
        IntGemmArgs {
            a: MatrixRef::new(a.as_slice(), m, k, k, MatrixOrder::RowMajor).unwrap(),
            b: MatrixRef::new(b.as_slice(), k, n, k, MatrixOrder::ColMajor).unwrap(),
            d: MatrixMut::new(d.as_slice_mut(), m, n, ldd, layout.c()).unwrap(),
            scale,
        },
    )
    .unwrap_or_else(|e| panic!("{what} [{}]: {e}", plan.sku().variant));
    let (want, _) = r::gemm(
        m,
        n,
        k,
        (&ah, k, MatrixOrder::RowMajor),
        (&bh, k, MatrixOrder::ColMajor),
        None,
        None,
        f64::from(scale),
        0.0,
        Activation::Identity,
    );
    let dh = download(&d);
    let got: Vec<f64> = (0..m * n)
        .map(|idx| r::at(&dh, ldd, layout.c(), idx / n, idx % n))
        .collect();
    check(&format!("{what} [{}]", plan.sku().variant), &got, &want, tl);
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn int8_gemm() {
    let s = &gpu().stream;
    for layout in [LayoutSku::Rcr, LayoutSku::Rcc] {
        // s32 accumulation of k = 64 products of |s8| <= 127 is exact.
        int_gemm_case::<i32>(s, layout, 1.0, 0.0);
        // The s32 sums are below 2^24 (exact in f32) and 0.5 is a power of
        // two: exact up to the bound's slack.
        int_gemm_case::<f32>(s, layout, 0.5, 1e-7);
        // One rounding of the exact scaled sum to bf16 (u = 3.9e-3): 2u.
        int_gemm_case::<bf16>(s, layout, 0.5, 2.0 * ElementKind::Bf16.unit_roundoff());
    }
    let (m, n, k) = (40, 24, 64);
    let bad = IntGemmDescriptor {
        gemm: GemmDescriptor::new(m, n, k, LayoutSku::Rrr),
    };
    assert!(matches!(
        IntGemmPlan::<i32>::select(s, &bad, &PlanPreference::default()),
        Err(Error::Unsupported { .. })
    ));
    // s32 output with a scale other than 1 is rejected before anything runs.
    let desc = IntGemmDescriptor {
        gemm: GemmDescriptor::new(m, n, k, LayoutSku::Rcr),
    };
    let plan = IntGemmPlan::<i32>::select(s, &desc, &PlanPreference::default()).unwrap();
    let (a, _) = upload::<i8>(&rand(1, m * k));
    let mut d = poisoned::<i32>(m * n);
    let mut ws = DeviceBuffer::<u8>::zeros(s, plan.workspace_size().max(1)).unwrap();
    assert_ok(expect_err(
        "int8 -> s32 with scale 0.5",
        plan.run(
            s,
            Workspace::Borrowed(ws.as_slice_mut()),
            IntGemmArgs {
                a: MatrixRef::new(a.as_slice(), m, k, k, MatrixOrder::RowMajor).unwrap(),
                b: MatrixRef::new(a.as_slice(), k, n, k, MatrixOrder::ColMajor).unwrap(),
                d: MatrixMut::new(d.as_slice_mut(), m, n, n, MatrixOrder::RowMajor).unwrap(),
                scale: 0.5,
            },
        ),
        |e| matches!(e, Error::InvalidArgument { arg: "scale", .. }),
    ));
    // 0xFFFFFFFF poison reads back as -1 in i32.
    assert!(download(&d).iter().all(|&x| x == -1.0), "nothing written");
}

/// One fp8 GEMM (`A` x `B` -> `O`, per-tensor scales 1/4 and 1/8) against
/// the reference, and its amax when asked.
fn fp8_case<A: Element, B: Element, O: Element>(s: &Stream, layout: LayoutSku, amax: bool) {
    // k, the contiguous extent of D (n or m) and ldd in bytes are multiples
    // of 16, as cuBLASLt's fp8 kernels need (see fp8_gemm.rs).
    let (m, n, k) = (64, 48, 96);
    let desc = Fp8GemmDescriptor {
        gemm: GemmDescriptor::new(m, n, k, layout),
        amax,
    };
    let what = format!(
        "fp8 {} x {} -> {} {m}x{n}x{k} {layout} amax={amax}",
        A::KIND,
        B::KIND,
        O::KIND
    );
    let plan = Fp8GemmPlan::<A, B, O>::select(s, &desc, &PlanPreference::default())
        .unwrap_or_else(|e| panic!("{what}: {e}"));
    let (a, ah) = upload::<A>(&rand(3, m * k).iter().map(|v| v * 8.0).collect::<Vec<_>>());
    let (b, bh) = upload::<B>(&rand(4, k * n).iter().map(|v| v * 8.0).collect::<Vec<_>>());
    // Each scale in its own (aligned) allocation, as cuBLASLt wants.
    let scale_a = DeviceBuffer::<f32>::from_host(s, &[0.25]).unwrap();
    let scale_b = DeviceBuffer::<f32>::from_host(s, &[0.125]).unwrap();
    let ldd = desc.gemm.ldd;
    let mut d = poisoned::<O>(m * n);
    let mut amax_buf = poisoned::<f32>(1);
    let mut ws = DeviceBuffer::<u8>::zeros(s, plan.workspace_size().max(1)).unwrap();
    plan.run(
        s,
        Workspace::Borrowed(ws.as_slice_mut()),
        Fp8GemmArgs {
            a: MatrixRef::new(a.as_slice(), m, k, k, MatrixOrder::RowMajor).unwrap(),
            b: MatrixRef::new(b.as_slice(), k, n, k, MatrixOrder::ColMajor).unwrap(),
            d: MatrixMut::new(d.as_slice_mut(), m, n, ldd, layout.c()).unwrap(),
            scale_a: scale_a.as_slice(),
            scale_b: scale_b.as_slice(),
            amax: amax.then(|| amax_buf.as_slice_mut()),
        },
    )
    .unwrap_or_else(|e| panic!("{what} [{}]: {e}", plan.sku().variant));
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
    let dh = download(&d);
    let got: Vec<f64> = (0..m * n)
        .map(|idx| r::at(&dh, ldd, layout.c(), idx / n, idx % n))
        .collect();
    let what = format!("{what} [{}]", plan.sku().variant);
    check(&what, &got, &want, tol(A::KIND, O::KIND, k, false));
    let amax_got = download(&amax_buf)[0];
    if amax {
        let amax_want = got.iter().fold(0.0f64, |a, &v| a.max(v.abs()));
        assert_eq!(amax_got, amax_want, "{what}: amax of the stored D");
    } else {
        assert!(amax_got.is_nan(), "{what}: amax written without amax");
    }
}

/// Every fp8 output for operands `A` x `B`, both layouts cuBLASLt's fp8
/// kernels take.
fn fp8_outputs<A: Element, B: Element>(s: &Stream) {
    for layout in [LayoutSku::Rcr, LayoutSku::Rcc] {
        fp8_case::<A, B, bf16>(s, layout, true);
        fp8_case::<A, B, f16>(s, layout, true);
        fp8_case::<A, B, f32>(s, layout, true);
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn fp8_gemm_every_dtype() {
    use float8::{F8E4M3, F8E5M2};
    let s = &gpu().stream;
    fp8_outputs::<F8E4M3, F8E4M3>(s);
    fp8_outputs::<F8E5M2, F8E4M3>(s);
    fp8_outputs::<F8E4M3, F8E5M2>(s);
    fp8_case::<F8E4M3, F8E4M3, bf16>(s, LayoutSku::Rcr, false);
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn fp8_gemm_bad_inputs() {
    use float8::F8E4M3;
    let s = &gpu().stream;
    let (m, n, k) = (64, 48, 96);
    let desc = Fp8GemmDescriptor {
        gemm: GemmDescriptor::new(m, n, k, LayoutSku::Rcr),
        amax: true,
    };
    let plan =
        Fp8GemmPlan::<F8E4M3, F8E4M3, bf16>::select(s, &desc, &PlanPreference::default()).unwrap();
    let (a, _) = upload::<F8E4M3>(&rand(3, m * k));
    let (b, _) = upload::<F8E4M3>(&rand(4, k * n));
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
    assert!(download(&amax)[0].is_nan(), "amax not written");
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

/// Panic unless `select` returned `Unsupported`.
fn unsupported<P>(what: &str, r: Result<P>) {
    assert_ok(expect_err(what, r, |e| {
        matches!(e, Error::Unsupported { .. })
    }));
}

/// Every dtype combination the GEMM plans do not advertise is
/// `Unsupported` at `select`, on shapes every advertised one accepts.
#[test]
#[ignore = "needs a CUDA GPU"]
fn gemm_family_unadvertised_dtypes() {
    use float8::{F8E4M3, F8E5M2};
    let s = &gpu().stream;
    let p = &PlanPreference::default();
    let g = GemmDescriptor::new(64, 48, 96, LayoutSku::Rcr);
    unsupported("gemm f32 -> f16", GemmPlan::<f32, f16>::select(s, &g, p));
    unsupported("gemm f64 -> f32", GemmPlan::<f64, f32>::select(s, &g, p));
    unsupported("gemm f16 -> bf16", GemmPlan::<f16, bf16>::select(s, &g, p));
    unsupported("gemm bf16 -> f16", GemmPlan::<bf16, f16>::select(s, &g, p));
    unsupported("gemm i8 -> i32", GemmPlan::<i8, i32>::select(s, &g, p));
    let b = BatchedGemmDescriptor::packed(g.clone(), 3);
    unsupported(
        "batched f32 -> f16",
        BatchedGemmPlan::<f32, f16>::select(s, &b, p),
    );
    unsupported(
        "batched f64 -> f32",
        BatchedGemmPlan::<f64, f32>::select(s, &b, p),
    );
    let gr = GroupedGemmDescriptor::new(vec![(64, 48, 96), (0, 48, 96)], LayoutSku::Rcr);
    unsupported("grouped i8", GroupedGemmPlan::<i8>::select(s, &gr, p));
    unsupported("grouped e4m3", GroupedGemmPlan::<F8E4M3>::select(s, &gr, p));
    let l = LinearDescriptor::new(64, 96, 48).with_epilogue(EpilogueKind::Bias);
    unsupported("linear i8", LinearPlan::<i8>::select(s, &l, p));
    let i = IntGemmDescriptor { gemm: g.clone() };
    unsupported("int8 -> f16", IntGemmPlan::<f16>::select(s, &i, p));
    unsupported("int8 -> f64", IntGemmPlan::<f64>::select(s, &i, p));
    unsupported("int8 -> i8", IntGemmPlan::<i8>::select(s, &i, p));
    let f = Fp8GemmDescriptor {
        gemm: g,
        amax: false,
    };
    unsupported(
        "e5m2 x e5m2 -> bf16",
        Fp8GemmPlan::<F8E5M2, F8E5M2, bf16>::select(s, &f, p),
    );
    unsupported(
        "e5m2 x e5m2 -> f16",
        Fp8GemmPlan::<F8E5M2, F8E5M2, f16>::select(s, &f, p),
    );
    unsupported(
        "e5m2 x e5m2 -> f32",
        Fp8GemmPlan::<F8E5M2, F8E5M2, f32>::select(s, &f, p),
    );
    unsupported(
        "e4m3 x e4m3 -> f64",
        Fp8GemmPlan::<F8E4M3, F8E4M3, f64>::select(s, &f, p),
    );
    unsupported(
        "e4m3 x e4m3 -> e4m3",
        Fp8GemmPlan::<F8E4M3, F8E4M3, F8E4M3>::select(s, &f, p),
    );
    unsupported(
        "bf16 x e4m3 -> bf16",
        Fp8GemmPlan::<bf16, F8E4M3, bf16>::select(s, &f, p),
    );
}
