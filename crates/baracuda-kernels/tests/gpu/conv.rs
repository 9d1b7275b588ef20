//! GPU tests of the conv family against the f64 oracles in
//! `reference::conv`: seeded random inputs (never zeros), outputs poisoned
//! with NaN (0xFF bytes) before every run, relative-L2 and max-abs checks
//! with dtype tolerances; a 200+ case conv sweep over rank, stride,
//! padding, dilation, groups (depthwise included), layout and dtype in all
//! three directions; transposed convs with output_padding; pooling sweeps
//! per mode; realistic large shapes; determinism; bad inputs.

use baracuda_kernels::reference::conv::{self as r, ConvGeometry, PoolGeometry, PoolKind};
use baracuda_kernels::*;
use half::{bf16, f16};

type Res = std::result::Result<(), String>;

fn stream() -> Stream {
    let dev = Device::get(0).expect("device 0");
    let ctx = Context::new(&dev).expect("context");
    Stream::new(&ctx).expect("stream")
}

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        self.0 >> 33
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    /// Uniform in [-1, 1) away from 0 (never zeros).
    fn vals(&mut self, n: usize) -> Vec<f64> {
        (0..n)
            .map(|_| {
                let u = (self.next() as f64 / (1u64 << 31) as f64) * 2.0 - 1.0;
                if u.abs() < 1e-3 {
                    0.5
                } else {
                    u
                }
            })
            .collect()
    }
}

/// Round to T and back, so the oracle sees exactly the device's inputs.
fn round<T: Element>(v: &[f64]) -> Vec<f64> {
    v.iter().map(|&x| T::from_f64(x).to_f64()).collect()
}

/// Logical channels-first data -> physical order of `layout`.
fn to_phys(v: &[f64], shape: &[usize], layout: ConvLayout) -> Vec<f64> {
    if layout == ConvLayout::ChannelsFirst {
        return v.to_vec();
    }
    let (n, c, sp) = (shape[0], shape[1], shape[2..].iter().product::<usize>());
    let mut o = vec![0.0; v.len()];
    for i in 0..n {
        for j in 0..c {
            for s in 0..sp {
                o[(i * sp + s) * c + j] = v[(i * c + j) * sp + s];
            }
        }
    }
    o
}

fn from_phys(v: &[f64], shape: &[usize], layout: ConvLayout) -> Vec<f64> {
    if layout == ConvLayout::ChannelsFirst {
        return v.to_vec();
    }
    let (n, c, sp) = (shape[0], shape[1], shape[2..].iter().product::<usize>());
    let mut o = vec![0.0; v.len()];
    for i in 0..n {
        for j in 0..c {
            for s in 0..sp {
                o[(i * c + j) * sp + s] = v[(i * sp + s) * c + j];
            }
        }
    }
    o
}

fn upload<T: Element>(
    s: &Stream,
    logical: &[f64],
    shape: &[usize],
    l: ConvLayout,
) -> DeviceBuffer<T> {
    let p: Vec<T> = to_phys(logical, shape, l)
        .iter()
        .map(|&x| T::from_f64(x))
        .collect();
    DeviceBuffer::from_host(s, &p).expect("upload")
}

fn poisoned<T: Element>(s: &Stream, n: usize) -> DeviceBuffer<T> {
    DeviceBuffer::filled_bytes(s, n, 0xFF).expect("alloc")
}

fn download<T: Element>(
    s: &Stream,
    b: &DeviceBuffer<T>,
    shape: &[usize],
    l: ConvLayout,
) -> Vec<f64> {
    let h: Vec<f64> = b
        .to_host(s)
        .expect("download")
        .iter()
        .map(|v| v.to_f64())
        .collect();
    from_phys(&h, shape, l)
}

fn perm<const R: usize>(l: ConvLayout) -> ([usize; R], [usize; R]) {
    // (axis permutation from physical to logical, physical shape order)
    let mut p = [0usize; R];
    for (i, v) in p.iter_mut().enumerate() {
        *v = i;
    }
    if l == ConvLayout::ChannelsLast {
        p[1] = R - 1;
        for (i, v) in p.iter_mut().enumerate().skip(2) {
            *v = i - 1;
        }
    }
    let mut inv = [0usize; R];
    for (i, &v) in p.iter().enumerate() {
        inv[v] = i;
    }
    (p, inv)
}

fn view<'a, T: Element, const R: usize>(
    b: &'a DeviceBuffer<T>,
    shape: &[usize],
    l: ConvLayout,
) -> TensorRef<'a, T, R> {
    let (p, inv) = perm::<R>(l);
    let phys: [usize; R] = std::array::from_fn(|j| shape[inv[j]]);
    TensorRef::contiguous(b.as_slice(), phys)
        .and_then(|t| t.permute(p))
        .expect("view")
}

fn view_mut<'a, T: Element, const R: usize>(
    b: &'a mut DeviceBuffer<T>,
    shape: &[usize],
    l: ConvLayout,
) -> TensorMut<'a, T, R> {
    let (p, inv) = perm::<R>(l);
    let phys: [usize; R] = std::array::from_fn(|j| shape[inv[j]]);
    TensorMut::contiguous(b.as_slice_mut(), phys)
        .and_then(|t| t.permute(p))
        .expect("view")
}

/// (relative L2 tolerance, max-abs tolerance relative to max |want|).
fn tol(kind: ElementKind) -> (f64, f64) {
    match kind {
        ElementKind::F64 => (1e-11, 1e-10),
        // f32: Winograd/FFT algorithms (IEEE, FMA math) over reductions of
        // thousands of terms reach ~4e-6 relative L2 (measured on H200).
        ElementKind::F32 => (1e-5, 5e-5),
        ElementKind::F16 => (3e-3, 1.5e-2),
        _ => (2e-2, 6e-2),
    }
}

fn compare(what: &str, kind: ElementKind, got: &[f64], want: &[f64]) -> Res {
    if got.len() != want.len() {
        return Err(format!(
            "{what}: {} values, expected {}",
            got.len(),
            want.len()
        ));
    }
    let (rt, at) = tol(kind);
    let scale = want.iter().fold(0f64, |m, v| m.max(v.abs())).max(1e-30);
    let (mut num, mut den, mut worst, mut wi) = (0.0, 0.0, 0.0, 0usize);
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        if !g.is_finite() && w.is_finite() {
            return Err(format!("{what} {kind}: element {i} is {g}, expected {w}"));
        }
        let e = (g - w).abs();
        num += e * e;
        den += w * w;
        if e > worst {
            worst = e;
            wi = i;
        }
    }
    let rel = (num / den.max(1e-300)).sqrt();
    if rel > rt || worst > at * scale {
        return Err(format!(
            "{what} {kind}: rel L2 {rel:.3e} (tol {rt:.0e}), worst |err| {worst:.3e} at {wi}: got {} want {} (tol {:.3e})",
            got[wi],
            want[wi],
            at * scale
        ));
    }
    Ok(())
}

// ---------------------------------------------------------------------------
// Convolution
// ---------------------------------------------------------------------------

#[derive(Clone, Debug)]
struct ConvCase {
    g: ConvGeometry,
    layout: ConvLayout,
    kind: ElementKind,
    bias: bool,
}

fn shape(n: usize, c: usize, sp: &[usize]) -> Vec<usize> {
    let mut v = vec![n, c];
    v.extend_from_slice(sp);
    v
}

fn arr<const N: usize>(v: &[usize]) -> [usize; N] {
    std::array::from_fn(|i| v[i])
}

fn conv_desc<const N: usize>(c: &ConvCase) -> ConvDescriptor<N> {
    let g = &c.g;
    ConvDescriptor::new(
        g.batch,
        g.c_in,
        g.c_out,
        arr(&g.input),
        arr(&g.filter),
        c.kind,
    )
    .with_padding_ends(arr(&g.padding), arr(&g.padding_end))
    .with_stride(arr(&g.stride))
    .with_dilation(arr(&g.dilation))
    .with_groups(g.groups)
    .with_layout(c.layout)
}

fn run_conv_case<T: Element, const N: usize, const R: usize>(
    s: &Stream,
    c: &ConvCase,
    rng: &mut Rng,
    pref: &PlanPreference,
) -> Res
where
    Rank<N, R>: SpatialRank,
{
    let g = &c.g;
    let l = c.layout;
    let out = g.output();
    let (xs, ws, ys) = (
        shape(g.batch, g.c_in, &g.input),
        shape(g.c_out, g.c_in / g.groups, &g.filter),
        shape(g.batch, g.c_out, &out),
    );
    let n = |v: &[usize]| v.iter().product::<usize>();
    let x = round::<T>(&rng.vals(n(&xs)));
    let w = round::<T>(&rng.vals(n(&ws)));
    let dy = round::<T>(&rng.vals(n(&ys)));
    // Biased cases run the fused bias + ReLU epilogue and its backward.
    let relu = c.bias;
    let act = if relu {
        Activation::Relu
    } else {
        Activation::Identity
    };
    let desc = conv_desc::<N>(c).with_activation(act);
    let plan = ConvPlan::<T, N, R>::select(s, &desc, pref).map_err(|e| format!("select: {e}"))?;
    if pref.backend == Some(BackendKind::CublasLt) {
        let sku = plan.sku();
        if sku.backend != BackendKind::CublasLt || !sku.variant.contains("fw=cublasLt") {
            return Err(format!("cuBLASLt forced, SKU: {sku}"));
        }
    }
    if pref.backend == Some(BackendKind::Baracuda) {
        let sku = plan.sku();
        let v = &sku.variant;
        if sku.backend != BackendKind::Baracuda
            || !v.contains("fw=narrow")
            || !v.contains("bw_data=narrow")
        {
            return Err(format!("narrow kernel forced, SKU: {sku}"));
        }
    }
    let sku = plan.sku().variant.clone();
    let refs = ConvRefs {
        y: &|| r::conv_fw(g, &x, &w),
        dx: &|dz| r::conv_bw_data(g, &w, dz),
        dw: &|dz| r::conv_bw_filter(g, &x, dz),
    };
    check_conv_plan::<T, R, _>(
        s,
        &plan,
        rng,
        &sku,
        (&xs, &ws, &ys, l),
        (&x, &w, &dy),
        c.bias.then_some((g.c_out, n(&out))),
        relu,
        refs,
    )
}

/// The reference of one conv-family plan: its forward output without bias
/// or activation, and its two gradients as functions of `dz` (the output
/// gradient after the activation's backward).
struct ConvRefs<'a> {
    y: &'a dyn Fn() -> Vec<f64>,
    dx: &'a dyn Fn(&[f64]) -> Vec<f64>,
    dw: &'a dyn Fn(&[f64]) -> Vec<f64>,
}

/// Forward and backward of a convolution or transposed-convolution plan
/// against the reference: `y = act(op(x, w) + bias)` with a random bias of
/// `channels` when `bias` is `(channels, positions per channel)`, then all
/// gradients in one `run_bw` and each of `dx` and `dw` alone in a workspace
/// sized for it (a gradient not asked for stays poisoned).
#[allow(clippy::too_many_arguments)] // the operands of one case
fn check_conv_plan<T: Element, const R: usize, P>(
    s: &Stream,
    plan: &P,
    rng: &mut Rng,
    what: &str,
    (xs, ws, ys, l): (&[usize], &[usize], &[usize], ConvLayout),
    (x, w, dy): (&[f64], &[f64], &[f64]),
    bias: Option<(usize, usize)>,
    relu: bool,
    refs: ConvRefs<'_>,
) -> Res
where
    P: for<'a> Plan<Args<'a> = ConvArgs<'a, T, R>>
        + for<'a> Backward<BwArgs<'a> = ConvBwArgs<'a, T, R>>,
{
    let e = |e: Error| format!("{what}: {e}");
    let n = |v: &[usize]| v.iter().product::<usize>();
    let (xb, wb, dyb) = (
        upload::<T>(s, x, xs, l),
        upload::<T>(s, w, ws, l),
        upload::<T>(s, dy, ys, l),
    );
    let b = bias.map(|(channels, _)| round::<T>(&rng.vals(channels)));
    let bb = b
        .as_ref()
        .map(|b| {
            DeviceBuffer::<T>::from_host(s, &b.iter().map(|&v| T::from_f64(v)).collect::<Vec<_>>())
        })
        .transpose()
        .map_err(e)?;
    let all = Grad::X | Grad::Weight | Grad::Bias;
    let ws_bytes = plan.workspace_size().max(plan.bw_workspace_size(all));
    let mut wsb = DeviceBuffer::<u8>::uninit(s, ws_bytes.max(1)).map_err(e)?;
    let mut yb = poisoned::<T>(s, n(ys));
    plan.run(
        s,
        Workspace::Borrowed(wsb.as_slice_mut()),
        ConvArgs {
            x: view(&xb, xs, l),
            w: view(&wb, ws, l),
            bias: bb
                .as_ref()
                .map(|bb| TensorRef::contiguous(bb.as_slice(), [bb.len()]).expect("bias view")),
            y: view_mut(&mut yb, ys, l),
        },
    )
    .map_err(e)?;
    let y = download(s, &yb, ys, l);
    let want = match (&b, bias) {
        // The epilogue rounds the conv output to T before adding the bias.
        (Some(b), Some((_, spatial))) => {
            let mut want = round::<T>(&(refs.y)());
            r::bias_act(&mut want, b, spatial, relu);
            want
        }
        _ if relu => {
            let mut want = round::<T>(&(refs.y)());
            r::bias_act(&mut want, &vec![0.0; ys[1]], n(&ys[2..]), true);
            want
        }
        _ => (refs.y)(),
    };
    compare(&format!("fw [{what}]"), T::KIND, &y, &want)?;
    // The ReLU backward passes dy where the output (as written) is > 0.
    let dz: Vec<f64> = if relu {
        dy.iter()
            .zip(&y)
            .map(|(&g, &v)| if v > 0.0 { g } else { 0.0 })
            .collect()
    } else {
        dy.to_vec()
    };
    let (want_dx, want_dw) = ((refs.dx)(&dz), (refs.dw)(&dz));
    let mut dxb = poisoned::<T>(s, n(xs));
    let mut dwb = poisoned::<T>(s, n(ws));
    let mut dbb = poisoned::<T>(s, bias.map_or(0, |(c, _)| c));
    // run_bw writing the gradients whose buffers are given.
    let bw = |dx: Option<&mut DeviceBuffer<T>>,
              dw: Option<&mut DeviceBuffer<T>>,
              dbias: Option<&mut DeviceBuffer<T>>,
              wsb: &mut DeviceBuffer<u8>| {
        plan.run_bw(
            s,
            Workspace::Borrowed(wsb.as_slice_mut()),
            ConvBwArgs {
                x: view(&xb, xs, l),
                w: view(&wb, ws, l),
                y: relu.then(|| view(&yb, ys, l)),
                dy: view(&dyb, ys, l),
                dx: dx.map(|b| view_mut(b, xs, l)),
                dw: dw.map(|b| view_mut(b, ws, l)),
                dbias: dbias.map(|b| {
                    let c = b.len();
                    TensorMut::contiguous(b.as_slice_mut(), [c]).expect("dbias view")
                }),
            },
        )
        .map_err(e)
    };
    bw(
        Some(&mut dxb),
        Some(&mut dwb),
        bias.is_some().then_some(&mut dbb),
        &mut wsb,
    )?;
    compare(
        &format!("bw_data [{what}]"),
        T::KIND,
        &download(s, &dxb, xs, l),
        &want_dx,
    )?;
    compare(
        &format!("dw [{what}]"),
        T::KIND,
        &download(s, &dwb, ws, l),
        &want_dw,
    )?;
    if let Some((channels, spatial)) = bias {
        let got: Vec<f64> = dbb
            .to_host(s)
            .map_err(e)?
            .iter()
            .map(|v| v.to_f64())
            .collect();
        compare(
            "bw_bias",
            T::KIND,
            &got,
            &r::bias_bw(&dz, channels, spatial),
        )?;
    }
    // Each gradient alone, in a workspace of exactly what it needs.
    for g in [Grad::X, Grad::Weight] {
        let mut only =
            DeviceBuffer::<u8>::uninit(s, plan.bw_workspace_size(g.into()).max(1)).map_err(e)?;
        let (mut gx, mut gw) = (poisoned::<T>(s, n(xs)), poisoned::<T>(s, n(ws)));
        let (dx, dw) = if g == Grad::X {
            (Some(&mut gx), None)
        } else {
            (None, Some(&mut gw))
        };
        bw(dx, dw, None, &mut only)?;
        let (got, untouched, want, shape) = if g == Grad::X {
            (&gx, &gw, &want_dx, xs)
        } else {
            (&gw, &gx, &want_dw, ws)
        };
        compare(
            &format!("{g:?} alone [{what}]"),
            T::KIND,
            &download(s, got, shape, l),
            want,
        )?;
        if untouched
            .to_host(s)
            .map_err(e)?
            .iter()
            .any(|v| !v.to_f64().is_nan())
        {
            return Err(format!("{what}: a gradient not asked for was written"));
        }
    }
    Ok(())
}

fn dispatch_conv(s: &Stream, c: &ConvCase, rng: &mut Rng) -> Res {
    dispatch_conv_with(s, c, rng, &PlanPreference::default())
}

fn dispatch_conv_with(s: &Stream, c: &ConvCase, rng: &mut Rng, pref: &PlanPreference) -> Res {
    macro_rules! by_rank {
        ($t:ty) => {
            match c.g.input.len() {
                1 => run_conv_case::<$t, 1, 3>(s, c, rng, pref),
                2 => run_conv_case::<$t, 2, 4>(s, c, rng, pref),
                _ => run_conv_case::<$t, 3, 5>(s, c, rng, pref),
            }
        };
    }
    match c.kind {
        ElementKind::F32 => by_rank!(f32),
        ElementKind::F64 => by_rank!(f64),
        ElementKind::F16 => by_rank!(f16),
        _ => by_rank!(bf16),
    }
}

const KINDS: [ElementKind; 4] = [
    ElementKind::F32,
    ElementKind::F64,
    ElementKind::F16,
    ElementKind::Bf16,
];
const LAYOUTS: [ConvLayout; 2] = [ConvLayout::ChannelsFirst, ConvLayout::ChannelsLast];

fn random_conv(rng: &mut Rng, i: usize) -> ConvCase {
    let rank = 1 + i % 3;
    let layout = LAYOUTS[(i / 3) % 2];
    let kind = KINDS[(i / 6) % 4];
    loop {
        let groups_pick = rng.below(4);
        let base = 1 + rng.below(3) as usize;
        let (c_in, c_out, groups) = match groups_pick {
            0 => (base * 2, 1 + rng.below(6) as usize, 1), // dense
            1 => (base * 2, base * 4, 2),                  // grouped
            2 => (base * 3, base * 3, base * 3),           // depthwise
            _ => (1 + rng.below(5) as usize, 1 + rng.below(9) as usize, 1),
        };
        let max_sp = [0, 23, 9, 6][rank];
        let input: Vec<usize> = (0..rank)
            .map(|_| 2 + rng.below(max_sp - 1) as usize)
            .collect();
        let filter: Vec<usize> = (0..rank).map(|_| 1 + rng.below(3) as usize).collect();
        let padding: Vec<usize> = (0..rank).map(|_| rng.below(3) as usize).collect();
        let stride: Vec<usize> = (0..rank).map(|_| 1 + rng.below(3) as usize).collect();
        let dilation: Vec<usize> = (0..rank).map(|_| 1 + rng.below(2) as usize).collect();
        let padding_end = padding.clone();
        let fits = (0..rank)
            .all(|a| input[a] + padding[a] + padding_end[a] > dilation[a] * (filter[a] - 1));
        if !fits {
            continue;
        }
        let g = ConvGeometry {
            batch: 1 + rng.below(3) as usize,
            c_in,
            c_out,
            input,
            filter,
            padding,
            padding_end,
            stride,
            dilation,
            groups,
        };
        return ConvCase {
            g,
            layout,
            kind,
            bias: i % 5 == 0,
        };
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn conv_sweep_all_directions() {
    let s = stream();
    let mut rng = Rng(0xC0FFEE);
    let cases: Vec<ConvCase> = (0..216).map(|i| random_conv(&mut rng, i)).collect();
    let mut fails = Vec::new();
    for (i, c) in cases.iter().enumerate() {
        if let Err(e) = dispatch_conv(&s, c, &mut rng) {
            fails.push(format!(
                "case {i} {:?} {:?} {:?}: {e}",
                c.kind, c.layout, c.g
            ));
        }
    }
    eprintln!(
        "conv sweep: {} of {} cases passed (3 directions each)",
        cases.len() - fails.len(),
        cases.len()
    );
    assert!(
        fails.is_empty(),
        "{} failures:\n{}",
        fails.len(),
        fails.join("\n")
    );
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn conv_realistic_shapes() {
    let s = stream();
    let mut rng = Rng(7);
    let mk =
        |batch, c_in, c_out, input: Vec<usize>, k: usize, stride: usize, pad: usize| ConvGeometry {
            batch,
            c_in,
            c_out,
            filter: vec![k; input.len()],
            padding: vec![pad; input.len()],
            padding_end: vec![pad; input.len()],
            stride: vec![stride; input.len()],
            dilation: vec![1; input.len()],
            input,
            groups: 1,
        };
    let cases = [
        // ResNet-50 3x3 64->64 at 56x56, batch 2; NHWC bf16 and NCHW f32
        ConvCase {
            g: mk(2, 64, 64, vec![56, 56], 3, 1, 1),
            layout: ConvLayout::ChannelsLast,
            kind: ElementKind::Bf16,
            bias: false,
        },
        ConvCase {
            g: mk(2, 64, 64, vec![56, 56], 3, 1, 1),
            layout: ConvLayout::ChannelsFirst,
            kind: ElementKind::F32,
            bias: true,
        },
        // ResNet stem 7x7/2 on 112x112 crop, f16 NHWC
        ConvCase {
            g: mk(1, 3, 64, vec![112, 112], 7, 2, 3),
            layout: ConvLayout::ChannelsLast,
            kind: ElementKind::F16,
            bias: false,
        },
        // wav2vec2 first conv: k10 s5, 1 -> 512 over 4000 samples
        ConvCase {
            g: mk(1, 1, 512, vec![4000], 10, 5, 0),
            layout: ConvLayout::ChannelsLast,
            kind: ElementKind::Bf16,
            bias: false,
        },
        // UNet 3x3x3 32->32 on 16^3
        ConvCase {
            g: mk(1, 32, 32, vec![16, 16, 16], 3, 1, 1),
            layout: ConvLayout::ChannelsLast,
            kind: ElementKind::Bf16,
            bias: false,
        },
    ];
    let mut fails = Vec::new();
    for c in &cases {
        if let Err(e) = dispatch_conv(&s, c, &mut rng) {
            fails.push(format!("{:?} {:?} {:?}: {e}", c.kind, c.layout, c.g));
        }
    }
    assert!(fails.is_empty(), "{}", fails.join("\n"));
}

fn transpose_case<T: Element, const N: usize, const R: usize>(
    s: &Stream,
    rng: &mut Rng,
    l: ConvLayout,
    p: [usize; 7],
) -> Res
where
    Rank<N, R>: SpatialRank,
{
    // p = [batch, c_in, c_out, groups, in, k, stride]; padding 1 where it
    // fits, output_padding = stride - 1, dilation 1.
    let [batch, c_in, c_out, groups, inp, k, stride] = p;
    let pad = if k > 1 { 1 } else { 0 };
    let opad = stride - 1;
    let input = vec![inp; N];
    let g = ConvGeometry::for_transpose(
        batch,
        c_in,
        c_out,
        &input,
        &[k; N],
        &[pad; N],
        &[stride; N],
        &[1; N],
        &[opad; N],
        groups,
    );
    let d = ConvTransposeDescriptor::new(batch, c_in, c_out, [inp; N], [k; N], T::KIND)
        .with_padding([pad; N])
        .with_stride([stride; N])
        .with_output_padding([opad; N])
        .with_groups(groups)
        .with_layout(l);
    let xs = shape(batch, c_in, &input);
    let ws = shape(c_in, c_out / groups, &[k; N]);
    let ys = shape(batch, c_out, &g.input);
    let n = |v: &[usize]| v.iter().product::<usize>();
    let x = round::<T>(&rng.vals(n(&xs)));
    let w = round::<T>(&rng.vals(n(&ws)));
    let dy = round::<T>(&rng.vals(n(&ys)));
    let e = |e: Error| e.to_string();
    // ReLU on every other case, a bias on two in three.
    let relu = rng.below(2) == 0;
    let act = if relu {
        Activation::Relu
    } else {
        Activation::Identity
    };
    let d = d.with_activation(act);
    let plan =
        ConvTransposePlan::<T, N, R>::select(s, &d, &PlanPreference::default()).map_err(e)?;
    if plan
        .output_dims()
        .iter()
        .zip(&g.input)
        .any(|(&a, &b)| a != b)
    {
        return Err(format!(
            "output dims {:?}, expected {:?}",
            plan.output_dims(),
            g.input
        ));
    }
    let refs = ConvRefs {
        y: &|| r::conv_bw_data(&g, &w, &x),
        dx: &|dz| r::conv_fw(&g, dz, &w),
        dw: &|dz| r::conv_bw_filter(&g, dz, &x),
    };
    let bias = (rng.below(3) != 0).then_some((c_out, n(&g.input)));
    check_conv_plan::<T, R, _>(
        s,
        &plan,
        rng,
        "transpose",
        (&xs, &ws, &ys, l),
        (&x, &w, &dy),
        bias,
        relu,
        refs,
    )
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn conv_transpose_sweep_with_output_padding() {
    let s = stream();
    let mut rng = Rng(99);
    let mut fails = Vec::new();
    let mut total = 0;
    for i in 0..48 {
        let rank = 1 + i % 3;
        let l = LAYOUTS[(i / 3) % 2];
        let kind = KINDS[(i / 6) % 4];
        let groups = [1, 2][i % 2];
        let p = [
            1 + rng.below(2) as usize,
            2 * groups,
            2 * (1 + rng.below(2) as usize),
            groups,
            3 + rng.below(4) as usize,
            1 + rng.below(3) as usize,
            1 + rng.below(3) as usize,
        ];
        macro_rules! go {
            ($t:ty) => {
                match rank {
                    1 => transpose_case::<$t, 1, 3>(&s, &mut rng, l, p),
                    2 => transpose_case::<$t, 2, 4>(&s, &mut rng, l, p),
                    _ => transpose_case::<$t, 3, 5>(&s, &mut rng, l, p),
                }
            };
        }
        let res = match kind {
            ElementKind::F32 => go!(f32),
            ElementKind::F64 => go!(f64),
            ElementKind::F16 => go!(f16),
            _ => go!(bf16),
        };
        total += 1;
        if let Err(e) = res {
            fails.push(format!("case {i} {kind:?} {l:?} rank {rank} {p:?}: {e}"));
        }
    }
    eprintln!(
        "conv_transpose sweep: {} of {total} passed",
        total - fails.len()
    );
    assert!(fails.is_empty(), "{}", fails.join("\n"));
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn conv_deterministic_is_bit_exact() {
    let s = stream();
    let d = Conv2dDescriptor::new(4, 32, 48, [20, 20], [3, 3], ElementKind::Bf16)
        .with_padding([1, 1])
        .with_layout(ConvLayout::ChannelsLast);
    let plan =
        Conv2dPlan::<bf16>::select(&s, &d, &PlanPreference::default().with_deterministic(true))
            .expect("select");
    assert!(plan.precision_guarantee().deterministic, "{}", plan.sku());
    let mut rng = Rng(3);
    let (xs, ws, ys) = (vec![4, 32, 20, 20], vec![48, 32, 3, 3], vec![4, 48, 20, 20]);
    let l = ConvLayout::ChannelsLast;
    let x = rng.vals(4 * 32 * 400);
    let w = rng.vals(48 * 32 * 9);
    let dy = rng.vals(4 * 48 * 400);
    let (xb, wb, dyb) = (
        upload::<bf16>(&s, &x, &xs, l),
        upload::<bf16>(&s, &w, &ws, l),
        upload::<bf16>(&s, &dy, &ys, l),
    );
    let ws_bytes = plan.bw_workspace_size(Grad::X | Grad::Weight);
    let mut wsb = DeviceBuffer::<u8>::uninit(&s, ws_bytes.max(1)).unwrap();
    let mut outs = Vec::new();
    for _ in 0..3 {
        let mut dwb = poisoned::<bf16>(&s, 48 * 32 * 9);
        let mut dxb = poisoned::<bf16>(&s, 4 * 32 * 400);
        plan.run_bw(
            &s,
            Workspace::Borrowed(wsb.as_slice_mut()),
            ConvBwArgs {
                x: view(&xb, &xs, l),
                w: view(&wb, &ws, l),
                y: None,
                dy: view(&dyb, &ys, l),
                dx: Some(view_mut(&mut dxb, &xs, l)),
                dw: Some(view_mut(&mut dwb, &ws, l)),
                dbias: None,
            },
        )
        .unwrap();
        let bits = |b: &DeviceBuffer<bf16>| {
            b.to_host(&s)
                .unwrap()
                .iter()
                .map(|v| v.to_bits())
                .collect::<Vec<_>>()
        };
        outs.push((bits(&dwb), bits(&dxb)));
    }
    assert!(
        outs.windows(2).all(|p| p[0] == p[1]),
        "deterministic plan gave different bits: {}",
        plan.sku()
    );
}

/// A channels-last 1x1 convolution (unit stride, no padding, one group)
/// with a bias.
fn pointwise_case(
    batch: usize,
    c_in: usize,
    c_out: usize,
    input: &[usize],
    kind: ElementKind,
) -> ConvCase {
    let rank = input.len();
    ConvCase {
        g: ConvGeometry {
            batch,
            c_in,
            c_out,
            input: input.to_vec(),
            filter: vec![1; rank],
            padding: vec![0; rank],
            padding_end: vec![0; rank],
            stride: vec![1; rank],
            dilation: vec![1; rank],
            groups: 1,
        },
        layout: ConvLayout::ChannelsLast,
        kind,
        bias: true,
    }
}

/// Every pass of `c` against the reference with `forced` and with measured
/// autotuning; a line per failure.
fn forced_and_measured(
    s: &Stream,
    c: &ConvCase,
    rng: &mut Rng,
    forced: &PlanPreference,
) -> Vec<String> {
    let measured = PlanPreference::default().with_autotune(Autotune::Measured);
    [("forced", forced), ("measured", &measured)]
        .into_iter()
        .filter_map(|(name, pref)| {
            dispatch_conv_with(s, c, rng, pref).err().map(|e| {
                format!(
                    "{name} {:?} {}->{} {:?}: {e}",
                    c.kind, c.g.c_in, c.g.c_out, c.g.input
                )
            })
        })
        .collect()
}

/// Pointwise convolutions (1x1, unit stride, no padding, one group,
/// channels-last) through cuBLASLt: forced with `backend: CublasLt` (every
/// rank and float dtype, with bias, the SKU naming cuBLASLt), and under
/// measured autotuning, where the matmul competes with cuDNN's engines;
/// both against the reference. Forcing cuBLASLt on a convolution that is
/// not pointwise is refused.
#[test]
#[ignore = "needs a CUDA GPU"]
fn conv_pointwise_through_cublaslt() {
    let s = stream();
    let mut rng = Rng(0x1A1);
    let forced = PlanPreference::default().with_backend(BackendKind::CublasLt);
    let mut fails = Vec::new();
    for (i, input) in [vec![37], vec![9, 11], vec![3, 5, 7]]
        .into_iter()
        .enumerate()
    {
        for kind in KINDS {
            let c = pointwise_case(3, 24 + 8 * i, 40, &input, kind);
            fails.extend(forced_and_measured(&s, &c, &mut rng, &forced));
        }
    }
    assert!(fails.is_empty(), "{}", fails.join("\n"));
    // Not pointwise (3x3; or 1x1 channels-first): cuBLASLt is refused.
    for d in [
        Conv2dDescriptor::new(2, 16, 16, [12, 12], [3, 3], ElementKind::Bf16)
            .with_padding([1, 1])
            .with_layout(ConvLayout::ChannelsLast),
        Conv2dDescriptor::new(2, 16, 16, [12, 12], [1, 1], ElementKind::Bf16),
    ] {
        assert!(backend_refused::<bf16>(&s, &d, &forced), "{d:?}");
    }
}

/// Whether `Conv2dPlan::<T>::select` refuses the backend `pref` asks for
/// on `d` (`PreferenceRejected` naming `backend`).
fn backend_refused<T: Element>(s: &Stream, d: &Conv2dDescriptor, pref: &PlanPreference) -> bool {
    matches!(
        Conv2dPlan::<T>::select(s, d, pref),
        Err(Error::PreferenceRejected {
            field: "backend",
            ..
        })
    )
}

/// The narrow kernel: `backend: Baracuda` forces it for the forward and
/// the data gradient of pointwise f16/bf16 convolutions with 32-128
/// channels (ranks 1-3, row counts that are not whole tiles, and one
/// problem large enough that every warp takes two chunks); measured
/// autotuning times it with cuDNN and cuBLASLt. All three passes and the
/// bias against the reference. Forcing it where it does not fit (48
/// channels, f32, a 3x3 filter) is refused.
#[test]
#[ignore = "needs a CUDA GPU"]
fn conv_pointwise_narrow_kernel() {
    let s = stream();
    let mut rng = Rng(0x7A3);
    let forced = PlanPreference::default().with_backend(BackendKind::Baracuda);
    let mut fails = Vec::new();
    let shapes: [(usize, usize, usize, Vec<usize>); 5] = [
        (3, 64, 64, vec![37]),
        (3, 32, 96, vec![9, 11]),
        (3, 128, 128, vec![3, 5, 7]),
        (2, 96, 32, vec![5, 9]),
        (4, 64, 64, vec![160, 160]),
    ];
    for (batch, c_in, c_out, input) in shapes {
        for kind in [ElementKind::F16, ElementKind::Bf16] {
            let c = pointwise_case(batch, c_in, c_out, &input, kind);
            fails.extend(forced_and_measured(&s, &c, &mut rng, &forced));
        }
    }
    assert!(fails.is_empty(), "{}", fails.join("\n"));
    // The SKU names the kernel for the two directions it runs.
    let d = Conv2dDescriptor::new(2, 64, 64, [14, 14], [1, 1], ElementKind::Bf16)
        .with_layout(ConvLayout::ChannelsLast);
    let p = Conv2dPlan::<bf16>::select(&s, &d, &forced).unwrap();
    let v = &p.sku().variant;
    assert!(
        v.contains("fw=narrow") && v.contains("bw_data=narrow"),
        "{}",
        p.sku()
    );
    assert!(!v.contains("dw=narrow"), "{}", p.sku());
    assert_eq!(p.sku().backend, BackendKind::Baracuda);
    // Refused: 48 input channels, f32, a 3x3 filter.
    let refused = [
        Conv2dDescriptor::new(2, 48, 64, [14, 14], [1, 1], ElementKind::Bf16)
            .with_layout(ConvLayout::ChannelsLast),
        Conv2dDescriptor::new(2, 64, 64, [14, 14], [3, 3], ElementKind::Bf16)
            .with_padding([1, 1])
            .with_layout(ConvLayout::ChannelsLast),
    ];
    for d in refused {
        assert!(backend_refused::<bf16>(&s, &d, &forced), "{d:?}");
    }
    let d = Conv2dDescriptor::new(2, 64, 64, [14, 14], [1, 1], ElementKind::F32)
        .with_layout(ConvLayout::ChannelsLast);
    assert!(backend_refused::<f32>(&s, &d, &forced), "{d:?}");
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn conv_preferences() {
    let s = stream();
    let d =
        Conv2dDescriptor::new(2, 16, 16, [12, 12], [3, 3], ElementKind::F32).with_padding([1, 1]);
    // IEEE by default: no TF32 anywhere.
    let p = Conv2dPlan::<f32>::select(&s, &d, &PlanPreference::default()).unwrap();
    assert_eq!(
        p.precision_guarantee().math,
        MathPrecision::F32,
        "{}",
        p.sku()
    );
    assert!(p.sku().variant.contains("fma_math"), "{}", p.sku());
    // TF32 allowed: selects and runs (math reported by the SKU).
    assert!(
        Conv2dPlan::<f32>::select(&s, &d, &PlanPreference::default().with_allow_tf32(true)).is_ok()
    );
    // Workspace cap 0 honoured.
    let p0 = Conv2dPlan::<f32>::select(
        &s,
        &d,
        &PlanPreference::default().with_max_workspace_bytes(0),
    )
    .unwrap();
    assert_eq!(p0.workspace_size(), 0);
    // A backend the op lacks is rejected.
    let lt = PlanPreference::default().with_backend(BackendKind::CublasLt);
    assert!(backend_refused::<f32>(&s, &d, &lt), "{d:?}");
    // Measured autotune: works, and a second select reuses the cache.
    let m = PlanPreference::default().with_autotune(Autotune::Measured);
    let a = Conv2dPlan::<f32>::select(&s, &d, &m).unwrap();
    let b = Conv2dPlan::<f32>::select(&s, &d, &m).unwrap();
    assert_eq!(a.sku().variant, b.sku().variant);
    let mut rng = Rng(11);
    let c = ConvCase {
        g: ConvGeometry {
            batch: 2,
            c_in: 16,
            c_out: 16,
            input: vec![12, 12],
            filter: vec![3, 3],
            padding: vec![1, 1],
            padding_end: vec![1, 1],
            stride: vec![1, 1],
            dilation: vec![1, 1],
            groups: 1,
        },
        layout: ConvLayout::ChannelsFirst,
        kind: ElementKind::F32,
        bias: false,
    };
    dispatch_conv(&s, &c, &mut rng).unwrap();
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn conv_bad_inputs() {
    let s = stream();
    let pref = PlanPreference::default();
    let d = Conv2dDescriptor::new(2, 4, 6, [8, 8], [3, 3], ElementKind::F32);
    assert!(matches!(
        Conv2dPlan::<f32>::select(&s, &d.with_groups(3), &pref),
        Err(Error::InvalidDescriptor {
            field: "groups",
            ..
        })
    ));
    assert!(matches!(
        Conv2dPlan::<f64>::select(&s, &d, &pref),
        Err(Error::DtypeMismatch { .. })
    ));
    let di = Conv2dDescriptor::new(2, 4, 6, [8, 8], [3, 3], ElementKind::I32);
    assert!(matches!(
        Conv2dPlan::<i32>::select(&s, &di, &pref),
        Err(Error::Unsupported { .. })
    ));
    assert!(matches!(
        Conv2dPlan::<f32>::select(
            &s,
            &Conv2dDescriptor::new(2, 4, 6, [2, 8], [3, 3], ElementKind::F32),
            &pref
        ),
        Err(Error::InvalidDescriptor {
            field: "output",
            ..
        })
    ));
    let plan = Conv2dPlan::<f32>::select(&s, &d, &pref).unwrap();
    let x = DeviceBuffer::<f32>::filled_bytes(&s, 2 * 4 * 64, 0x3F).unwrap();
    let w = DeviceBuffer::<f32>::filled_bytes(&s, 6 * 4 * 9, 0x3F).unwrap();
    let mut y = poisoned::<f32>(&s, 2 * 6 * 36);
    let l = ConvLayout::ChannelsFirst;
    // wrong x shape
    let xv =
        TensorRef::contiguous(x.as_slice().slice(0..2 * 4 * 63).unwrap(), [2, 4, 7, 9]).unwrap();
    let r = plan.run(
        &s,
        Workspace::None,
        ConvArgs {
            x: xv,
            w: view(&w, &[6, 4, 3, 3], l),
            bias: None,
            y: view_mut(&mut y, &[2, 6, 6, 6], l),
        },
    );
    assert!(
        matches!(r, Err(Error::ShapeMismatch { arg: "x", .. })),
        "{r:?}"
    );
    // channels-last strides for a channels-first plan
    let r = plan.run(
        &s,
        Workspace::None,
        ConvArgs {
            x: view(&x, &[2, 4, 8, 8], ConvLayout::ChannelsLast),
            w: view(&w, &[6, 4, 3, 3], l),
            bias: None,
            y: view_mut(&mut y, &[2, 6, 6, 6], l),
        },
    );
    assert!(
        matches!(r, Err(Error::InvalidArgument { arg: "x", .. })),
        "{r:?}"
    );
    // nothing was written
    assert!(y.to_host(&s).unwrap().iter().all(|v| v.is_nan()));
    // workspace too small, when the plan needs one
    if plan.workspace_size() > 0 {
        let r = plan.run(
            &s,
            Workspace::None,
            ConvArgs {
                x: view(&x, &[2, 4, 8, 8], l),
                w: view(&w, &[6, 4, 3, 3], l),
                bias: None,
                y: view_mut(&mut y, &[2, 6, 6, 6], l),
            },
        );
        assert!(matches!(r, Err(Error::WorkspaceTooSmall { .. })), "{r:?}");
    }
    // bias of the wrong length
    let b = DeviceBuffer::<f32>::filled_bytes(&s, 5, 0x3F).unwrap();
    let all = Grad::X | Grad::Weight | Grad::Bias;
    let ws_bytes = plan.workspace_size().max(plan.bw_workspace_size(all));
    let mut wsb = DeviceBuffer::<u8>::uninit(&s, ws_bytes.max(1)).unwrap();
    let r = plan.run(
        &s,
        Workspace::Borrowed(wsb.as_slice_mut()),
        ConvArgs {
            x: view(&x, &[2, 4, 8, 8], l),
            w: view(&w, &[6, 4, 3, 3], l),
            bias: Some(TensorRef::contiguous(b.as_slice(), [5]).unwrap()),
            y: view_mut(&mut y, &[2, 6, 6, 6], l),
        },
    );
    assert!(
        matches!(r, Err(Error::ShapeMismatch { arg: "bias", .. })),
        "{r:?}"
    );
    assert!(y.to_host(&s).unwrap().iter().all(|v| v.is_nan()));
    // backward: dbias of the wrong length, and a workspace too small for
    // the gradients asked; nothing written
    let dyb = DeviceBuffer::<f32>::filled_bytes(&s, 2 * 6 * 36, 0x3F).unwrap();
    let mut dx = poisoned::<f32>(&s, 2 * 4 * 64);
    let mut db = poisoned::<f32>(&s, 5);
    let bw = |dx: &mut DeviceBuffer<f32>, db: Option<&mut DeviceBuffer<f32>>, ws: Workspace<'_>| {
        plan.run_bw(
            &s,
            ws,
            ConvBwArgs {
                x: view(&x, &[2, 4, 8, 8], l),
                w: view(&w, &[6, 4, 3, 3], l),
                y: None,
                dy: view(&dyb, &[2, 6, 6, 6], l),
                dx: Some(view_mut(dx, &[2, 4, 8, 8], l)),
                dw: None,
                dbias: db.map(|b| TensorMut::contiguous(b.as_slice_mut(), [5]).unwrap()),
            },
        )
    };
    let r = bw(
        &mut dx,
        Some(&mut db),
        Workspace::Borrowed(wsb.as_slice_mut()),
    );
    assert!(
        matches!(r, Err(Error::ShapeMismatch { arg: "dbias", .. })),
        "{r:?}"
    );
    if plan.bw_workspace_size(Grad::X.into()) > 0 {
        let r = bw(&mut dx, None, Workspace::None);
        assert!(matches!(r, Err(Error::WorkspaceTooSmall { .. })), "{r:?}");
    }
    assert!(dx.to_host(&s).unwrap().iter().all(|v| v.is_nan()));
    assert!(db.to_host(&s).unwrap().iter().all(|v| v.is_nan()));
    // a ReLU plan's backward needs the forward output
    let relu = Conv2dPlan::<f32>::select(&s, &d.with_activation(Activation::Relu), &pref).unwrap();
    let r = relu.run_bw(
        &s,
        Workspace::Borrowed(wsb.as_slice_mut()),
        ConvBwArgs {
            x: view(&x, &[2, 4, 8, 8], l),
            w: view(&w, &[6, 4, 3, 3], l),
            y: None,
            dy: view(&dyb, &[2, 6, 6, 6], l),
            dx: Some(view_mut(&mut dx, &[2, 4, 8, 8], l)),
            dw: None,
            dbias: None,
        },
    );
    assert!(
        matches!(r, Err(Error::InvalidArgument { arg: "y", .. })),
        "{r:?}"
    );
    assert!(dx.to_host(&s).unwrap().iter().all(|v| v.is_nan()));
    // activations other than identity and ReLU
    assert!(matches!(
        Conv2dPlan::<f32>::select(&s, &d.with_activation(Activation::GeluErf), &pref),
        Err(Error::Unsupported { .. })
    ));
    // transposed conv: output_padding >= stride and dilation
    let t = ConvTranspose2dDescriptor::new(1, 2, 2, [4, 4], [3, 3], ElementKind::F32)
        .with_stride([2, 2])
        .with_output_padding([2, 0]);
    assert!(matches!(
        ConvTranspose2dPlan::<f32>::select(&s, &t, &pref),
        Err(Error::InvalidDescriptor {
            field: "output_padding",
            ..
        })
    ));
    // transposed conv: errors name the transposed conv's own arguments
    // (it runs the equivalent conv's directions with the roles swapped).
    // x [1, 2, 4, 4], w [2, 2, 3, 3], y [1, 2, 9, 9] (stride 2, output
    // padding 0).
    let t = t.with_output_padding([0, 0]);
    let plan = ConvTranspose2dPlan::<f32>::select(&s, &t, &pref).unwrap();
    assert_eq!(plan.output_dims(), [9, 9]);
    let x = DeviceBuffer::<f32>::filled_bytes(&s, 2 * 16, 0x3F).unwrap();
    let w = DeviceBuffer::<f32>::filled_bytes(&s, 2 * 2 * 9, 0x3F).unwrap();
    let mut y = poisoned::<f32>(&s, 2 * 81);
    let mut dx = poisoned::<f32>(&s, 2 * 16);
    let mut dw = poisoned::<f32>(&s, 2 * 2 * 9);
    let ws_bytes = plan
        .workspace_size()
        .max(plan.bw_workspace_size(Grad::X | Grad::Weight));
    let mut ws = DeviceBuffer::<u8>::uninit(&s, ws_bytes.max(1)).unwrap();
    let names_arg = |r: Result<(), Error>, want: &str| match r {
        Err(Error::ShapeMismatch {
            op: "conv_transpose",
            arg,
            ..
        }) if arg == want => {}
        other => panic!("expected a shape mismatch of conv_transpose's {want}, got {other:?}"),
    };
    let bad_x =
        TensorRef::contiguous(x.as_slice().slice(0..2 * 12).unwrap(), [1, 2, 4, 3]).unwrap();
    let wv = || view(&w, &[2, 2, 3, 3], l);
    let r = plan.run(
        &s,
        Workspace::Borrowed(ws.as_slice_mut()),
        ConvArgs {
            x: bad_x,
            w: wv(),
            bias: None,
            y: view_mut(&mut y, &[1, 2, 9, 9], l),
        },
    );
    names_arg(r, "x");
    let r = plan.run_bw(
        &s,
        Workspace::Borrowed(ws.as_slice_mut()),
        ConvBwArgs {
            x: view(&x, &[1, 2, 4, 4], l),
            w: wv(),
            y: None,
            dy: view(&x, &[1, 2, 4, 4], l),
            dx: Some(view_mut(&mut dx, &[1, 2, 4, 4], l)),
            dw: None,
            dbias: None,
        },
    );
    names_arg(r, "dy");
    let dyv = DeviceBuffer::<f32>::filled_bytes(&s, 2 * 81, 0x3F).unwrap();
    let r = plan.run_bw(
        &s,
        Workspace::Borrowed(ws.as_slice_mut()),
        ConvBwArgs {
            x: view(&x, &[1, 2, 4, 4], l),
            w: wv(),
            y: None,
            dy: view(&dyv, &[1, 2, 9, 9], l),
            dx: None,
            dw: Some(view_mut(&mut dw, &[2, 2, 3, 2], l)),
            dbias: None,
        },
    );
    names_arg(r, "dw");
    // nothing was written
    assert!(y.to_host(&s).unwrap().iter().all(|v| v.is_nan()));
    assert!(dx.to_host(&s).unwrap().iter().all(|v| v.is_nan()));
    assert!(dw.to_host(&s).unwrap().iter().all(|v| v.is_nan()));
}

// ---------------------------------------------------------------------------
// Pooling
// ---------------------------------------------------------------------------

#[derive(Copy, Clone, Debug)]
enum PoolSpec {
    Window {
        max: bool,
        ceil: bool,
        include_pad: bool,
        divisor: Option<usize>,
    },
    /// Random output extents, or all 1 (global pooling) when `global`.
    Adaptive {
        max: bool,
        global: bool,
    },
    Lp {
        p: f64,
        ceil: bool,
    },
}

fn pool_case<T: Element, const N: usize, const R: usize>(
    s: &Stream,
    rng: &mut Rng,
    l: ConvLayout,
    spec: PoolSpec,
    (batch, ch): (usize, usize),
    input: [usize; N],
    w: Window<N>,
) -> Res
where
    Rank<N, R>: SpatialRank,
{
    let e = |e: Error| e.to_string();
    let pref = PlanPreference::default();
    let (kind, out, plan_run): (PoolKind, Vec<usize>, _) = match spec {
        PoolSpec::Window {
            max,
            ceil,
            include_pad,
            divisor,
        } => {
            let mut d = PoolDescriptor::new(batch, ch, input, w.kernel, T::KIND)
                .with_ceil_mode(ceil)
                .with_count_include_pad(include_pad)
                .with_divisor_override(divisor)
                .with_layout(l);
            d.window = w;
            if max {
                let plan = PoolPlan::<T, PoolMax, N, R>::select(s, &d, &pref).map_err(e)?;
                let out = plan.output_dims().to_vec();
                (PoolKind::Max, out, AnyPool::Max(plan))
            } else {
                let plan = PoolPlan::<T, PoolAvg, N, R>::select(s, &d, &pref).map_err(e)?;
                let out = plan.output_dims().to_vec();
                (PoolKind::Avg, out, AnyPool::Avg(plan))
            }
        }
        PoolSpec::Adaptive { max, global } => {
            let outv: [usize; N] = std::array::from_fn(|a| {
                if global {
                    1
                } else {
                    1 + (rng.below(input[a] as u64 + 2) as usize)
                }
            });
            let d = AdaptivePoolDescriptor::new(batch, ch, input, outv, T::KIND).with_layout(l);
            let out = outv.to_vec();
            if max {
                (
                    PoolKind::AdaptiveMax,
                    out,
                    AnyPool::AMax(
                        AdaptivePoolPlan::<T, PoolMax, N, R>::select(s, &d, &pref).map_err(e)?,
                    ),
                )
            } else {
                (
                    PoolKind::AdaptiveAvg,
                    out,
                    AnyPool::AAvg(
                        AdaptivePoolPlan::<T, PoolAvg, N, R>::select(s, &d, &pref).map_err(e)?,
                    ),
                )
            }
        }
        PoolSpec::Lp { p, ceil } => {
            let mut d = LpPoolDescriptor::new(batch, ch, input, w.kernel, p, T::KIND)
                .with_ceil_mode(ceil)
                .with_layout(l);
            d.window = w;
            let plan = LpPoolPlan::<T, N, R>::select(s, &d, &pref).map_err(e)?;
            let out = plan.output_dims().to_vec();
            (PoolKind::Lp(p), out, AnyPool::Lp(plan))
        }
    };
    let g = PoolGeometry {
        batch,
        channels: ch,
        input: input.to_vec(),
        output: out.clone(),
        window: w.kernel.to_vec(),
        stride: w.stride.to_vec(),
        padding: w.padding.to_vec(),
        padding_end: w.padding_end.to_vec(),
        dilation: w.dilation.to_vec(),
        kind,
        count_include_pad: matches!(
            spec,
            PoolSpec::Window {
                include_pad: true,
                ..
            }
        ),
        divisor_override: match spec {
            PoolSpec::Window { divisor, .. } => divisor,
            _ => None,
        },
    };
    let xs = shape(batch, ch, &input);
    let ys = shape(batch, ch, &out);
    let n = |v: &[usize]| v.iter().product::<usize>();
    let mut x = round::<T>(&rng.vals(n(&xs)));
    if matches!(kind, PoolKind::Lp(_)) {
        x = round::<T>(&x.iter().map(|v| v.abs() + 0.25).collect::<Vec<_>>());
    }
    let dy = round::<T>(&rng.vals(n(&ys)));
    let (want_y, want_idx) = r::pool_fw(&g, &x);
    let xb = upload::<T>(s, &x, &xs, l);
    let dyb = upload::<T>(s, &dy, &ys, l);
    let mut yb = poisoned::<T>(s, n(&ys));
    let mut ib = poisoned::<i64>(s, n(&ys));
    let mut dxb = poisoned::<T>(s, n(&xs));
    let is_max = matches!(kind, PoolKind::Max | PoolKind::AdaptiveMax);
    let fw = PoolArgs {
        x: view(&xb, &xs, l),
        y: view_mut(&mut yb, &ys, l),
        indices: if is_max {
            Some(view_mut(&mut ib, &ys, l))
        } else {
            None
        },
    };
    plan_run.run(s, fw).map_err(e)?;
    let got_y = download(s, &yb, &ys, l);
    compare("pool fw", T::KIND, &got_y, &want_y)?;
    if is_max {
        let gi: Vec<f64> = ib
            .to_host(s)
            .map_err(e)?
            .iter()
            .map(|&v| v as f64)
            .collect();
        let gi = from_phys(&gi, &ys, l);
        if let Some(i) = gi.iter().zip(&want_idx).position(|(a, &b)| *a != b as f64) {
            return Err(format!(
                "indices differ at {i}: {} vs {}",
                gi[i], want_idx[i]
            ));
        }
    }
    let (p, inv) = perm::<R>(l);
    let yphys: [usize; R] = std::array::from_fn(|j| ys[inv[j]]);
    let yref = TensorRef::contiguous(yb.as_slice(), yphys)
        .and_then(|t| t.permute(p))
        .map_err(e)?;
    let iref = TensorRef::contiguous(ib.as_slice(), yphys)
        .and_then(|t| t.permute(p))
        .map_err(e)?;
    let bw = PoolBwArgs {
        dy: view(&dyb, &ys, l),
        indices: if is_max { Some(iref) } else { None },
        x: Some(view(&xb, &xs, l)),
        y: Some(yref),
        dx: view_mut(&mut dxb, &xs, l),
    };
    plan_run.run_bw(s, bw).map_err(e)?;
    let want_dx = r::pool_bw(&g, &dy, &want_idx, &x, &round::<T>(&want_y));
    compare("pool bw", T::KIND, &download(s, &dxb, &xs, l), &want_dx)
}

enum AnyPool<T: Element, const N: usize, const R: usize>
where
    Rank<N, R>: SpatialRank,
{
    Max(PoolPlan<T, PoolMax, N, R>),
    Avg(PoolPlan<T, PoolAvg, N, R>),
    AAvg(AdaptivePoolPlan<T, PoolAvg, N, R>),
    AMax(AdaptivePoolPlan<T, PoolMax, N, R>),
    Lp(LpPoolPlan<T, N, R>),
}

/// `$body` with `p` bound to the plan inside any [`AnyPool`].
macro_rules! each_pool {
    ($pool:expr, $p:ident => $body:expr) => {
        match $pool {
            AnyPool::Max($p) => $body,
            AnyPool::Avg($p) => $body,
            AnyPool::AAvg($p) => $body,
            AnyPool::AMax($p) => $body,
            AnyPool::Lp($p) => $body,
        }
    };
}

impl<T: Element, const N: usize, const R: usize> AnyPool<T, N, R>
where
    Rank<N, R>: SpatialRank,
{
    fn run(&self, s: &Stream, a: PoolArgs<'_, T, R>) -> Result<()> {
        each_pool!(self, p => p.run(s, Workspace::None, a))
    }
    fn run_bw(&self, s: &Stream, a: PoolBwArgs<'_, T, R>) -> Result<()> {
        each_pool!(self, p => p.run_bw(s, Workspace::None, a))
    }
}

/// The first `N` axes of a rank-3 window.
fn axes<const N: usize>(w: &Window<3>, n: usize) -> Window<N> {
    assert_eq!(n, N);
    let pick = |v: &[usize; 3]| -> [usize; N] { std::array::from_fn(|a| v[a]) };
    Window {
        kernel: pick(&w.kernel),
        stride: pick(&w.stride),
        padding: pick(&w.padding),
        padding_end: pick(&w.padding_end),
        dilation: pick(&w.dilation),
    }
}

fn pool_sweep(name: &str, specs: &[PoolSpec], seed: u64) {
    let s = stream();
    let mut rng = Rng(seed);
    let mut fails = Vec::new();
    let mut total = 0;
    for (si, spec) in specs.iter().enumerate() {
        for i in 0..24 {
            let rank = 1 + i % 3;
            let l = LAYOUTS[(i / 3) % 2];
            let kind = KINDS[(i / 6) % 4];
            let batch = 1 + rng.below(2) as usize;
            let ch = 1 + rng.below(5) as usize;
            // Windows: random kernel and stride; on max and avg, padding
            // up to half the kernel on each side (unequal on a third of the
            // cases) and dilation 2 on a third.
            let window_spec = matches!(spec, PoolSpec::Window { .. });
            let dilate = window_spec && rng.below(3) == 0;
            let asymmetric = window_spec && rng.below(3) == 0;
            let mut w = Window::new([1usize; 3]);
            let mut inp = [1usize; 3];
            for (a, extent) in inp.iter_mut().enumerate().take(rank) {
                w.kernel[a] = 1 + rng.below(3) as usize;
                w.stride[a] = 1 + rng.below(3) as usize;
                w.dilation[a] = if dilate { 2 } else { 1 };
                let half = w.kernel[a] / 2 + 1;
                if window_spec {
                    w.padding[a] = rng.below(half as u64) as usize;
                    w.padding_end[a] = if asymmetric {
                        rng.below(half as u64) as usize
                    } else {
                        w.padding[a]
                    };
                }
                let span = w.dilation[a] * (w.kernel[a] - 1) + 1;
                *extent = span + rng.below([0, 14, 7, 5][rank]) as usize;
            }
            macro_rules! go {
                ($t:ty) => {
                    match rank {
                        1 => pool_case::<$t, 1, 3>(
                            &s,
                            &mut rng,
                            l,
                            *spec,
                            (batch, ch),
                            [inp[0]],
                            axes(&w, 1),
                        ),
                        2 => pool_case::<$t, 2, 4>(
                            &s,
                            &mut rng,
                            l,
                            *spec,
                            (batch, ch),
                            [inp[0], inp[1]],
                            axes(&w, 2),
                        ),
                        _ => pool_case::<$t, 3, 5>(&s, &mut rng, l, *spec, (batch, ch), inp, w),
                    }
                };
            }
            let res = match kind {
                ElementKind::F32 => go!(f32),
                ElementKind::F64 => go!(f64),
                ElementKind::F16 => go!(f16),
                _ => go!(bf16),
            };
            total += 1;
            if let Err(e) = res {
                fails.push(format!("{name} spec {si} {spec:?} case {i} {kind:?} {l:?} rank {rank} in {inp:?} {w:?}: {e}"));
            }
        }
    }
    eprintln!("{name} sweep: {} of {total} passed", total - fails.len());
    assert!(fails.is_empty(), "{}", fails.join("\n"));
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn conv_pool_max_sweep() {
    pool_sweep(
        "max_pool",
        &[
            PoolSpec::Window {
                max: true,
                ceil: false,
                include_pad: true,
                divisor: None,
            },
            PoolSpec::Window {
                max: true,
                ceil: true,
                include_pad: true,
                divisor: None,
            },
        ],
        21,
    );
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn conv_pool_avg_sweep() {
    pool_sweep(
        "avg_pool",
        &[
            PoolSpec::Window {
                max: false,
                ceil: false,
                include_pad: true,
                divisor: None,
            },
            PoolSpec::Window {
                max: false,
                ceil: true,
                include_pad: false,
                divisor: None,
            },
            PoolSpec::Window {
                max: false,
                ceil: true,
                include_pad: true,
                divisor: Some(3),
            },
        ],
        22,
    );
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn conv_pool_adaptive_sweep() {
    pool_sweep(
        "adaptive_pool",
        &[
            PoolSpec::Adaptive {
                max: false,
                global: false,
            },
            PoolSpec::Adaptive {
                max: true,
                global: false,
            },
        ],
        23,
    );
}

/// Global average pooling (adaptive avg to 1s, and an avg window equal to
/// the input) takes pool.cu's global-average kernels: both layouts, every
/// dtype, channels a multiple of 8 (vN) and odd (v1), and channel / plane
/// counts that span several CTAs per sample (channels-last: 320 / 8 = 40
/// bf16 vectors > 32 per CTA; 67 channels on v1) and several warps' planes.
#[test]
#[ignore = "needs a CUDA GPU"]
fn conv_pool_global_avg() {
    let s = stream();
    let mut rng = Rng(25);
    let mut fails = Vec::new();
    let mut total = 0;
    let adaptive = PoolSpec::Adaptive {
        max: false,
        global: true,
    };
    let window = PoolSpec::Window {
        max: false,
        ceil: false,
        include_pad: true,
        divisor: None,
    };
    for spec in [adaptive, window] {
        for kind in KINDS {
            for l in LAYOUTS {
                for (batch, ch) in [(3, 16), (2, 13), (3, 320), (2, 67)] {
                    for rank in 1..=3 {
                        // 7x7 is ResNet's head; 512 = 64 bf16 vectors per
                        // channels-first plane (vN, two passes per lane).
                        let inp: &[usize] = match rank {
                            1 => &[512],
                            2 => &[7, 7],
                            _ => &[3, 5, 7],
                        };
                        macro_rules! go {
                            ($t:ty) => {
                                match rank {
                                    1 => pool_case::<$t, 1, 3>(
                                        &s,
                                        &mut rng,
                                        l,
                                        spec,
                                        (batch, ch),
                                        [512],
                                        Window::new([512]),
                                    ),
                                    2 => pool_case::<$t, 2, 4>(
                                        &s,
                                        &mut rng,
                                        l,
                                        spec,
                                        (batch, ch),
                                        [7, 7],
                                        Window::new([7, 7]).with_stride([2, 1]),
                                    ),
                                    _ => pool_case::<$t, 3, 5>(
                                        &s,
                                        &mut rng,
                                        l,
                                        spec,
                                        (batch, ch),
                                        [3, 5, 7],
                                        Window::new([3, 5, 7]),
                                    ),
                                }
                            };
                        }
                        let res = match kind {
                            ElementKind::F32 => go!(f32),
                            ElementKind::F64 => go!(f64),
                            ElementKind::F16 => go!(f16),
                            _ => go!(bf16),
                        };
                        total += 1;
                        if let Err(e) = res {
                            fails.push(format!(
                                "global avg {spec:?} {kind:?} {l:?} n {batch} c {ch} in {inp:?}: {e}"
                            ));
                        }
                    }
                }
            }
        }
    }
    eprintln!("global avg: {} of {total} passed", total - fails.len());
    assert!(fails.is_empty(), "{}", fails.join("\n"));
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn conv_pool_lp_sweep() {
    pool_sweep(
        "lp_pool",
        &[
            PoolSpec::Lp {
                p: 2.0,
                ceil: false,
            },
            PoolSpec::Lp { p: 1.5, ceil: true },
        ],
        24,
    );
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn conv_pool_bad_inputs() {
    let s = stream();
    let pref = PlanPreference::default();
    let d = Pool2dDescriptor::new(1, 2, [8, 8], [3, 3], ElementKind::F32);
    assert!(matches!(
        MaxPool2dPlan::<f32>::select(&s, &d.with_padding([2, 2]), &pref),
        Err(Error::InvalidDescriptor {
            field: "padding",
            ..
        })
    ));
    assert!(matches!(
        MaxPool2dPlan::<f16>::select(&s, &d, &pref),
        Err(Error::DtypeMismatch { .. })
    ));
    assert!(matches!(
        MaxPool2dPlan::<f32>::select(&s, &d, &pref.with_backend(BackendKind::Cudnn)),
        Err(Error::PreferenceRejected { .. })
    ));
    let plan = MaxPool2dPlan::<f32>::select(&s, &d, &pref).unwrap();
    let x = DeviceBuffer::<f32>::filled_bytes(&s, 128, 0x3F).unwrap();
    let mut y = poisoned::<f32>(&s, 8);
    let mut dx = poisoned::<f32>(&s, 128);
    let dy = DeviceBuffer::<f32>::filled_bytes(&s, 8, 0x3F).unwrap();
    let l = ConvLayout::ChannelsFirst;
    // max backward without indices
    let r = plan.run_bw(
        &s,
        Workspace::None,
        PoolBwArgs {
            dy: view(&dy, &[1, 2, 2, 2], l),
            indices: None,
            x: None,
            y: None,
            dx: view_mut(&mut dx, &[1, 2, 8, 8], l),
        },
    );
    assert!(
        matches!(r, Err(Error::InvalidArgument { arg: "indices", .. })),
        "{r:?}"
    );
    // wrong y shape
    let r = plan.run(
        &s,
        Workspace::None,
        PoolArgs {
            x: view(&x, &[1, 2, 8, 8], l),
            y: TensorMut::contiguous(y.as_slice_mut(), [1, 2, 4, 1]).unwrap(),
            indices: None,
        },
    );
    assert!(
        matches!(r, Err(Error::ShapeMismatch { arg: "y", .. })),
        "{r:?}"
    );
    assert!(dx.to_host(&s).unwrap().iter().all(|v| v.is_nan()));
    let a = AdaptivePool2dDescriptor::new(1, 2, [8, 8], [0, 2], ElementKind::F32);
    assert!(matches!(
        AdaptiveAvgPool2dPlan::<f32>::select(&s, &a, &pref),
        Err(Error::InvalidDescriptor {
            field: "output",
            ..
        })
    ));
    let lp = LpPool2dDescriptor::new(1, 2, [8, 8], [2, 2], -1.0, ElementKind::F32);
    assert!(matches!(
        LpPool2dPlan::<f32>::select(&s, &lp, &pref),
        Err(Error::InvalidDescriptor { field: "p", .. })
    ));
}
