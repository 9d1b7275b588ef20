//! GPU tests of `CastPlan`: the `cast` row of the elementwise table.
//!
//! For each input kind the row checks a cast to every kind it converts to,
//! forward and (float pairs) backward, against
//! `reference::elementwise::cast`, exactly: a cast is a function of its
//! input, so the values must be equal (NaN equal to NaN, the sign of zero
//! compared). Outputs live in byte buffers filled with 0xFF and viewed as
//! the output type, so a bool output is never read back as an invalid
//! `bool`. Every pair also runs permuted inputs (a transposing copy: the
//! tiled kernel) with tails, misalignment and a batch dim.

use baracuda_kernels::reference::elementwise as reference;
use baracuda_kernels::*;

use crate::elementwise::{identical, output_layout, unary_samples, Layout};
use crate::harness::*;

/// `(shape, layout)` of the samples every pair runs: the unary rows' of
/// at most 2^16 elements (empty, size 1, tails, transposed, strided out,
/// misaligned, rank 8), several blocks, and a broadcast x.
pub(crate) fn samples() -> Vec<(Vec<usize>, Layout)> {
    let mut v: Vec<_> = unary_samples()
        .into_iter()
        .filter(|(s, _)| s.iter().product::<usize>() <= 1 << 16)
        .collect();
    v.push((vec![37, 129], Layout::Contiguous));
    v.push((vec![19, 37], Layout::Broadcast));
    v
}

/// Values every input kind is tested on (before rounding to it): zeros of
/// both signs, NaN, ±inf, huge and tiny (subnormal in the narrow types),
/// ties of the nearest-even roundings, and the limits of the integers.
pub(crate) fn specials() -> Vec<f64> {
    let p = |e: i32| 2f64.powi(e);
    let mut v = vec![
        0.0,
        -0.0,
        f64::NAN,
        f64::INFINITY,
        f64::NEG_INFINITY,
        1e300,
        -1e300,
        1e-300,
        f64::from(f32::MAX),
        p(-24),
        p(-25),
        1.5 * p(-25),
        p(-133),
        p(-9),
        p(-10),
        3.0 * p(-10),
        p(-16),
        p(-17),
        1.0 + p(-11),
        1.0 + 3.0 * p(-11),
        1.0 + p(-8),
        1.0 + 3.0 * p(-8),
        1.0 + p(-11) + p(-40),
        1.0625,
        1.1875,
        448.0,
        464.0,
        465.0,
        480.0,
        57344.0,
        61439.0,
        61440.0,
        65504.0,
        65519.0,
        65520.0,
        2.5,
        -2.5,
        -1.5,
        0.5,
        127.0,
        128.0,
        -129.0,
        255.0,
        256.5,
        300.0,
        32767.0,
        -32769.0,
        2147483647.0,
        -2147483649.0,
        16777217.0,
        16842753.0,
        p(53),
        -p(53),
        p(62),
        -p(63),
        1e10,
    ];
    let neg: Vec<f64> = v.iter().map(|x| -x).collect();
    v.extend(neg);
    v
}

/// Random values for `from`: floats over many magnitudes, integers over
/// their range (i64 within 2^53, where f64 holds them exactly).
fn randoms(from: ElementKind, rng: &mut Rng, n: usize) -> Vec<f64> {
    use ElementKind as K;
    let range = match from {
        K::I8 => Some((-128.0, 128.0)),
        K::U8 => Some((0.0, 256.0)),
        K::I16 => Some((-32768.0, 32768.0)),
        K::I32 => Some((-2147483648.0, 2147483648.0)),
        K::I64 => Some((-9007199254740992.0, 9007199254740992.0)),
        K::Bool => Some((0.0, 2.0)),
        _ => None,
    };
    (0..n)
        .map(|i| match range {
            Some((lo, hi)) => rng.uniform(lo, hi).floor(),
            None => {
                let scale = 10f64.powi((i % 13) as i32 - 6);
                rng.uniform(-1.0, 1.0) * scale
            }
        })
        .collect()
}

/// `n` input values for `from`: the specials first (cycled), then random.
fn values(from: ElementKind, rng: &mut Rng, n: usize) -> Vec<f64> {
    let s = specials();
    let r = randoms(from, rng, n);
    (0..n)
        .map(|i| {
            if i < 2 * s.len() {
                s[i % s.len()]
            } else {
                r[i]
            }
        })
        .collect()
}

/// An output of `len` elements of `O` in a byte buffer of 0xFF.
pub(crate) struct OutBuf<O: Element> {
    bytes: DeviceBuffer<u8>,
    len: usize,
    _o: std::marker::PhantomData<O>,
}

impl<O: Element> OutBuf<O> {
    pub(crate) fn new(len: usize) -> Self {
        OutBuf {
            bytes: poisoned::<u8>((len * size_of::<O>()).max(1)),
            len,
            _o: std::marker::PhantomData,
        }
    }
    /// The buffer as `len` elements of `O`, from element `offset` on.
    pub(crate) fn slice_mut(&mut self, offset: usize) -> DeviceSliceMut<'_, O> {
        let addr = self.bytes.as_slice().addr() + (offset * size_of::<O>()) as u64;
        // SAFETY: the range lies inside `bytes`, which this borrow holds
        // mutably; every byte pattern the kernels write is a valid `O`, and
        // the host reads the bytes back through `decode`, never as `O`.
        unsafe {
            DeviceSliceMut::from_raw_parts(addr, self.len - offset, self.bytes.as_slice().ctx_id())
        }
    }
    /// Every element: whether all its bytes are still 0xFF, and its value
    /// (`None` for a bool byte other than 0 and 1).
    fn decode(&self) -> Result<Vec<(bool, Option<f64>)>, String> {
        let host: Vec<u8> = self
            .bytes
            .to_host(&gpu().stream)
            .map_err(|e| e.to_string())?;
        let size = size_of::<O>();
        Ok((0..self.len)
            .map(|i| {
                let b = &host[i * size..(i + 1) * size];
                let poison = b.iter().all(|&x| x == 0xFF);
                if O::KIND == ElementKind::Bool {
                    return (poison, (b[0] <= 1).then(|| f64::from(b[0])));
                }
                // SAFETY: `b` holds `size_of::<O>()` bytes and every bit
                // pattern is a valid `O` for the non-bool kinds.
                let v: O = unsafe { std::ptr::read_unaligned(b.as_ptr().cast::<O>()) };
                (poison, Some(v.to_f64()))
            })
            .collect())
    }
    /// True when no element was written.
    pub(crate) fn untouched(&self) -> Result<bool, String> {
        Ok(self.decode()?.iter().all(|(p, _)| *p))
    }
    /// The logical values of the view (`offset`, `strides`) over `shape`;
    /// every element outside it must be untouched, every one inside a
    /// valid value.
    pub(crate) fn result(
        &self,
        what: &str,
        offset: usize,
        shape: &[usize],
        strides: &[usize],
    ) -> Result<Vec<f64>, String> {
        let all = self.decode().map_err(|e| format!("{what}: {e}"))?;
        let mut inside = vec![false; all.len()];
        for o in view_offsets(shape, strides) {
            inside[o + offset] = true;
        }
        let mut flat = Vec::with_capacity(all.len());
        for (i, ((poison, v), &c)) in all.iter().zip(&inside).enumerate() {
            if !c && !poison {
                return Err(format!(
                    "{what}: element {i} outside the output was written"
                ));
            }
            match (c, v) {
                (true, None) => return Err(format!("{what}: element {i} is not a valid bool")),
                (_, v) => flat.push(v.unwrap_or(f64::NAN)),
            }
        }
        Ok(gather(&flat, offset, shape, strides))
    }
}

/// A cast's options: the fp8 mode and the scale.
#[derive(Copy, Clone, Debug)]
struct Opts {
    fp8: Fp8Mode,
    scale: Option<f32>,
}

/// Where a sample's x lives: element offset into its buffer, strides and
/// buffer length.
struct XView {
    offset: usize,
    strides: Vec<usize>,
    len: usize,
}

fn check_sample<I: Element, O: Element, const N: usize>(
    shape: &[usize],
    layout: Layout,
    opts: Opts,
    rng: &mut Rng,
) -> Result<(), String> {
    let n: usize = shape.iter().product();
    let strides = match layout {
        Layout::Broadcast => {
            let mut s = contiguous(shape);
            s[0] = 0;
            s
        }
        Layout::Transposed => vec![1, shape[0]],
        _ => contiguous(shape),
    };
    let offset = usize::from(layout == Layout::Misaligned);
    let len = offset
        + if layout == Layout::Broadcast {
            shape[1..].iter().product()
        } else {
            n
        };
    let x = XView {
        offset,
        strides,
        len,
    };
    check_view::<I, O, N>(shape, &x, layout, opts, rng)
}

/// The permuted samples: x stored with its last two dims exchanged (a
/// transposing copy, the tiled kernel), `misaligned` starting one element
/// into its buffer (x and y, whose vectors then give way to elements),
/// with tails in both tiled dims, whole tiles, the least extent that
/// takes tiles, and a strided y (the strided kernel).
fn permuted_samples() -> Vec<(Vec<usize>, Layout)> {
    vec![
        (vec![3, 70, 130], Layout::Contiguous),
        (vec![2, 64, 128], Layout::Contiguous),
        (vec![3, 70, 130], Layout::Misaligned),
        (vec![1, 16, 17], Layout::Contiguous),
        (vec![2, 40, 24], Layout::StridedOut),
    ]
}

/// A permuted sample of rank 3: [`check_view`] with x's last two dims
/// exchanged in memory.
fn check_permuted<I: Element, O: Element>(
    shape: &[usize],
    layout: Layout,
    opts: Opts,
    rng: &mut Rng,
) -> Result<(), String> {
    let &[b, r, c] = shape else {
        return Err(format!("permuted sample {shape:?} is not of rank 3"));
    };
    let offset = usize::from(layout == Layout::Misaligned);
    let x = XView {
        offset,
        strides: vec![r * c, 1, r],
        len: offset + b * r * c,
    };
    check_view::<I, O, 3>(shape, &x, layout, opts, rng)
}

/// The cast of x (laid out as `xv`) into y (laid out as `layout`) forward,
/// and the backward on contiguous operands: exact, nothing written
/// outside y, a non-float pair's backward refused.
fn check_view<I: Element, O: Element, const N: usize>(
    shape: &[usize],
    xv: &XView,
    layout: Layout,
    opts: Opts,
    rng: &mut Rng,
) -> Result<(), String> {
    let g = gpu();
    let what = format!(
        "{} -> {} {shape:?} x strides {:?} {layout:?} {opts:?}",
        I::KIND,
        O::KIND,
        xv.strides
    );
    let n: usize = shape.iter().product();
    let mut desc = CastDescriptor::new(I::KIND, O::KIND, arr::<N>(shape)).with_fp8(opts.fp8);
    desc.scale = opts.scale;
    let plan = CastPlan::<I, O, N>::select(&g.stream, &desc, &PlanPreference::default())
        .map_err(|e| format!("{what}: {e}"))?;

    let (xb, xh) = upload::<I>(&values(I::KIND, rng, xv.len));
    let xs = gather(&xh, xv.offset, shape, &xv.strides);
    let x_data = xb.as_slice().slice(xv.offset..xb.len()).ok_or("x offset")?;
    let x = TensorRef::new(x_data, arr::<N>(shape), arr::<N>(&xv.strides))
        .map_err(|e| format!("{what}: x view: {e}"))?;

    // y
    let (y_len, y_strides, y_off) = output_layout(shape, layout);
    let mut y = OutBuf::<O>::new(y_len);
    let yv = TensorMut::new(y.slice_mut(y_off), arr::<N>(shape), arr::<N>(&y_strides))
        .map_err(|e| format!("{what}: y view: {e}"))?;
    plan.run(&g.stream, Workspace::None, CastArgs { x, y: yv })
        .map_err(|e| format!("{what}: {e}"))?;
    let want = reference::cast(I::KIND, O::KIND, &xs, opts.fp8, opts.scale);
    identical(
        &format!("{what} fw"),
        &y.result(&what, y_off, shape, &y_strides)?,
        &want,
    )?;

    // backward
    let floats = I::KIND.is_float() && O::KIND.is_float();
    let mut dx = OutBuf::<I>::new(n);
    let (dyb, dyh) = upload::<O>(&values(O::KIND, rng, n));
    let dy = TensorRef::contiguous(dyb.as_slice(), arr::<N>(shape)).map_err(|e| e.to_string())?;
    let dxv = TensorMut::contiguous(dx.slice_mut(0), arr::<N>(shape)).map_err(|e| e.to_string())?;
    let r = plan.run_bw(&g.stream, Workspace::None, CastBwArgs { dy, dx: dxv });
    if floats {
        r.map_err(|e| format!("{what} bw: {e}"))?;
        let want = reference::cast_backward(I::KIND, O::KIND, &dyh, opts.scale);
        identical(
            &format!("{what} bw"),
            &dx.result(&what, 0, shape, &contiguous(shape))?,
            &want,
        )
    } else {
        if !plan.grads().is_empty() {
            return Err(format!("{what}: grads() is not empty"));
        }
        expect_err(&format!("{what} bw"), r, invalid_argument("dx"))?;
        if !dx.untouched()? {
            return Err(format!("{what} bw: dx was written"));
        }
        Ok(())
    }
}

/// The options a pair runs: for an fp8 output both modes, each without
/// and with a scale; otherwise PyTorch's cast alone.
fn options(to: ElementKind) -> Vec<Opts> {
    if matches!(to, ElementKind::Fp8E4M3 | ElementKind::Fp8E5M2) {
        let mut v = Vec::new();
        for fp8 in [Fp8Mode::NoSaturate, Fp8Mode::Saturate] {
            for scale in [None, Some(3.5f32)] {
                v.push(Opts { fp8, scale });
            }
        }
        v
    } else {
        vec![Opts {
            fp8: Fp8Mode::NoSaturate,
            scale: None,
        }]
    }
}

fn check_pair<I: Element, O: Element>(rng: &mut Rng) -> Result<usize, String> {
    let mut n = 0;
    for opts in options(O::KIND) {
        for (shape, layout) in small_samples(samples(), |(s, _)| s.iter().product()) {
            match shape.len() {
                2 => check_sample::<I, O, 2>(&shape, layout, opts, rng)?,
                8 => check_sample::<I, O, 8>(&shape, layout, opts, rng)?,
                r => return Err(format!("no sample runner for rank {r}")),
            }
            n += 1;
        }
        check_sample::<I, O, 1>(&[10007], Layout::Contiguous, opts, rng)?;
        n += 1;
        for (shape, layout) in permuted_samples() {
            check_permuted::<I, O>(&shape, layout, opts, rng)?;
            n += 1;
        }
    }
    // one realistic large shape for the casts of mixed-precision training
    use ElementKind as K;
    let large = matches!(
        (I::KIND, O::KIND),
        (K::F32, K::Bf16)
            | (K::Bf16, K::F32)
            | (K::Bf16, K::Fp8E4M3)
            | (K::F32, K::I32)
            | (K::Bf16, K::Bf16)
    );
    if large && !small_mode() {
        let opts = Opts {
            fp8: Fp8Mode::NoSaturate,
            scale: None,
        };
        check_sample::<I, O, 2>(&[1024, 4099], Layout::Contiguous, opts, rng)?;
        check_permuted::<I, O>(&[4, 1000, 1030], Layout::Contiguous, opts, rng)?;
        n += 2;
    }
    Ok(n)
}

/// Casts from `from` to every kind, forward and backward; samples checked.
pub fn check_cast(from: ElementKind) -> Result<usize, String> {
    let mut rng = Rng::new(0xCA57 ^ from as u64);
    let mut n = 0;
    for to in CAST_KINDS {
        n += crate::with_element!(from, I => crate::with_element!(to, O => check_pair::<I, O>(&mut rng)))?;
    }
    Ok(n)
}

/// Select a cast from or to `kind` (u32), which the plan does not convert.
pub fn cast_unsupported(kind: ElementKind) -> Result<(), String> {
    crate::with_element!(kind, T => {
        expect_unsupported::<CastPlan<T, f32, 1>>("cast from", &CastDescriptor::new(kind, ElementKind::F32, [4]))?;
        expect_unsupported::<CastPlan<f32, T, 1>>("cast to", &CastDescriptor::new(ElementKind::F32, kind, [4]))
    })
}

/// Bad inputs of the cast plan: each returns its error and writes nothing.
pub fn cast_bad_inputs() -> Result<usize, String> {
    let g = gpu();
    let s = &g.stream;
    let pref = PlanPreference::default();
    let mut checked = 0;
    let plan = CastPlan::<f32, half::bf16, 1>::select(
        s,
        &CastDescriptor::new(ElementKind::F32, ElementKind::Bf16, [64]),
        &pref,
    )
    .map_err(|e| e.to_string())?;
    let (x, _) = upload::<f32>(&Rng::new(1).vec(65, -1.0, 1.0));
    let mut y = OutBuf::<half::bf16>::new(65);
    let untouched = |y: &OutBuf<half::bf16>, what: &str| -> Result<(), String> {
        if !y.untouched()? {
            return Err(format!("{what}: y was written"));
        }
        Ok(())
    };
    let mut expect =
        |what: &str, r: Result<()>, pred: &dyn Fn(&Error) -> bool, y: &OutBuf<half::bf16>| {
            checked += 1;
            expect_err(what, r, pred)?;
            untouched(y, what)
        };
    // x shape
    let r = plan.run(
        s,
        Workspace::None,
        CastArgs {
            x: TensorRef::contiguous(x.as_slice(), [65]).unwrap(),
            y: TensorMut::contiguous(y.slice_mut(1), [64]).unwrap(),
        },
    );
    expect("x shape", r, &shape_mismatch("x"), &y)?;
    // y shape
    let r = plan.run(
        s,
        Workspace::None,
        CastArgs {
            x: TensorRef::contiguous(x.as_slice().slice(0..64).unwrap(), [64]).unwrap(),
            y: TensorMut::contiguous(y.slice_mut(0), [65]).unwrap(),
        },
    );
    expect("y shape", r, &shape_mismatch("y"), &y)?;
    // x on another context
    // SAFETY: never dereferenced: run rejects the context first.
    let foreign = unsafe { DeviceSlice::<f32>::from_raw_parts(x.as_slice().addr(), 64, 0xDEAD) };
    let r = plan.run(
        s,
        Workspace::None,
        CastArgs {
            x: TensorRef::contiguous(foreign, [64]).unwrap(),
            y: TensorMut::contiguous(y.slice_mut(1), [64]).unwrap(),
        },
    );
    expect(
        "context",
        r,
        &|e| matches!(e, Error::ContextMismatch { arg: "x", .. }),
        &y,
    )?;
    // y overlapping x: x read from the first 256 bytes of y's buffer
    let base = y.bytes.as_slice().addr();
    // SAFETY: both views lie inside y's 130 bytes (x: 32 f32 = 128 bytes);
    // run rejects the overlap before launching.
    let xa = unsafe { DeviceSlice::<f32>::from_raw_parts(base, 32, g.ctx.id()) };
    let plan32 = CastPlan::<f32, half::bf16, 1>::select(
        s,
        &CastDescriptor::new(ElementKind::F32, ElementKind::Bf16, [32]),
        &pref,
    )
    .map_err(|e| e.to_string())?;
    let r = plan32.run(
        s,
        Workspace::None,
        CastArgs {
            x: TensorRef::contiguous(xa, [32]).unwrap(),
            y: TensorMut::contiguous(y.slice_mut(10), [32]).unwrap(),
        },
    );
    expect("overlap", r, &invalid_argument("y"), &y)?;
    // backward shapes and overlap
    let (dyb, _) = upload::<half::bf16>(&Rng::new(2).vec(65, -1.0, 1.0));
    let mut dx = OutBuf::<f32>::new(65);
    let r = plan.run_bw(
        s,
        Workspace::None,
        CastBwArgs {
            dy: TensorRef::contiguous(dyb.as_slice(), [65]).unwrap(),
            dx: TensorMut::contiguous(dx.slice_mut(1), [64]).unwrap(),
        },
    );
    checked += 1;
    expect_err("dy shape", r, shape_mismatch("dy"))?;
    if !dx.untouched()? {
        return Err("dy shape: dx was written".into());
    }
    // unsupported pair: u32
    checked += 1;
    cast_unsupported(ElementKind::U32)?;
    // descriptor: scale on a non-fp8 output, saturation on a non-fp8 output
    checked += 2;
    let d = CastDescriptor::new(ElementKind::F32, ElementKind::Bf16, [4]).with_scale(2.0);
    expect_err(
        "scale",
        CastPlan::<f32, half::bf16, 1>::select(s, &d, &pref),
        invalid_descriptor("scale"),
    )?;
    let d = CastDescriptor::new(ElementKind::F32, ElementKind::I8, [4]).with_fp8(Fp8Mode::Saturate);
    expect_err(
        "saturate",
        CastPlan::<f32, i8, 1>::select(s, &d, &pref),
        invalid_descriptor("fp8"),
    )?;
    // dtype mismatch
    checked += 1;
    let d = CastDescriptor::new(ElementKind::F16, ElementKind::Bf16, [4]);
    expect_err(
        "dtype",
        CastPlan::<f32, half::bf16, 1>::select(s, &d, &pref),
        dtype_mismatch,
    )?;
    Ok(checked)
}
