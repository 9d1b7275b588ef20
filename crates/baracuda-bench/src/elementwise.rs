//! Elementwise benchmark cases, from `bench/cases/elementwise.json` (which
//! `bench/torch_cases/elementwise.py` reads too): unary and binary ops on
//! contiguous tensors, their backward passes, casts between dtypes, fills,
//! and the device-to-device copy that sets the bandwidth ceiling.
//!
//! Every case, the copy included, rotates its inputs over the file's
//! `placements` buffer sets, each a separate allocation with its own random
//! values (successive calls use set 0, 1, 2, 0, ...; see
//! [`time_rotating_ms`]), and reports the time averaged over them; the
//! PyTorch side does the same. Where the allocator places a memory-bound
//! kernel's buffers moves its time by more than the 0.1% the elementwise
//! table is asked to resolve: on an H200 the bf16 `add` of 2^28 elements
//! on three separate allocations of `a`, `b`, `y` took 0.3698 / 0.3693 /
//! 0.3691 ms (ours) and 0.3798 / 0.3800 / 0.3779 ms (`torch.add`), a
//! 0.2-0.5% spread from placement alone
//! (`docs/perf-notes/experiments/binary_hints.cu` measures it).

use baracuda_kernels::*;
use half::{bf16, f16};
use serde::Deserialize;

use crate::cases::{bad_pass, by_dtype, CaseFile, Checked, Job, RawCase, Row, RunFn};
use crate::harness::{time_eager_rotating_ms, time_passes, time_rotating_ms};

/// The family's settings.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Settings {
    /// Buffer sets (separate allocations) every case rotates over, so that
    /// a case's time is an average over DRAM placements rather than one
    /// draw of them (see the module doc for the measured spread). With 3,
    /// the largest case, f32 `mul` backward of 2^28 elements, holds 5
    /// tensors of 1 GiB per set: 15 GiB in all.
    placements: usize,
}

/// An elementwise case's parameters.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Params {
    /// Elements per tensor.
    len: usize,
    /// The output dtype of a `cast` (its input is the case's `dtype`).
    #[serde(default, deserialize_with = "de_opt_dtype")]
    to: Option<ElementKind>,
}

fn de_opt_dtype<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<ElementKind>, D::Error> {
    crate::cases::de_dtype(d).map(Some)
}

/// What a case computes.
#[derive(Clone, Copy)]
enum Kind {
    Copy,
    /// `y.fill_(1.5)`: writes only.
    Fill,
    /// `x.to(ElementKind)`.
    Cast(ElementKind),
    Unary(UnaryOp),
    Binary(BinaryOp),
}

impl Kind {
    fn of(op: &str) -> Option<Kind> {
        match op {
            "copy" => return Some(Kind::Copy),
            "fill" => return Some(Kind::Fill),
            _ => {}
        }
        let unary = UnaryOp::ALL.into_iter().find(|u| u.name() == op);
        let binary = BinaryOp::ALL.into_iter().find(|b| b.name() == op);
        unary.map(Kind::Unary).or(binary.map(Kind::Binary))
    }

    fn passes(self) -> &'static [&'static str] {
        match self {
            Kind::Copy | Kind::Fill | Kind::Cast(_) => &["fw"],
            _ => &["fw", "bw"],
        }
    }

    /// Tensors of `len` elements a pass reads or writes (the minimum
    /// traffic: every input read once, every output written once).
    fn tensors(self, pass: &str) -> usize {
        match (self, pass) {
            (Kind::Fill, _) => 1,
            (Kind::Copy | Kind::Cast(_), _) | (Kind::Unary(_), "fw") => 2,
            (Kind::Unary(_), _) | (Kind::Binary(_), "fw") => 3,
            (Kind::Binary(_), _) => 5,
        }
    }
}

/// The sizes every buffer of a case has.
#[derive(Clone, Copy)]
struct Sizes {
    /// Elements per tensor.
    n: usize,
    /// Buffer sets inputs rotate over.
    placements: usize,
}

/// The jobs of the elementwise case file.
pub fn jobs(file: &CaseFile) -> Checked<Vec<Job>> {
    let Settings { placements } = file.settings()?;
    if placements == 0 {
        return Err("elementwise: placements must be at least 1".into());
    }
    file.cases.iter().map(|c| job(c, placements)).collect()
}

fn job(c: &RawCase, placements: usize) -> Checked<Job> {
    let Params { len, to } = c.params()?;
    let kind = match (c.op.as_str(), to) {
        ("cast", Some(to)) => Kind::Cast(to),
        ("cast", None) => return Err(c.error("cast needs `to`, the output dtype")),
        (_, Some(_)) => return Err(c.error("only cast takes `to`")),
        _ => Kind::of(&c.op).ok_or_else(|| c.unknown_op())?,
    };
    let dtype = c.dtype()?;
    let passes = c.passes(kind.passes())?;
    let rows = c.rows(&passes, dtype, &format!("[{len}]"), |r| {
        let bytes = match kind {
            Kind::Cast(to) => len * (dtype.size_bytes() + to.size_bytes()),
            _ => kind.tensors(r.pass) * len * dtype.size_bytes(),
        };
        r.bytes(bytes)
    });
    let z = Sizes { n: len, placements };
    if let Kind::Cast(to) = kind {
        let run: RunFn = by_dtype!(c, dtype, [Bf16 => bf16, F32 => f32], I => {
            by_dtype!(c, to, [Bf16 => bf16, Fp8E4M3 => float8::F8E4M3], O => {
                Box::new(move |s: &Stream, rows: &[Row]| cast::<I, O>(s, z, rows))
            })
        });
        return Ok(c.job(rows, run));
    }
    let run: RunFn = by_dtype!(c, dtype, [Bf16 => bf16, F16 => f16, F32 => f32, F64 => f64], T => {
        Box::new(move |s: &Stream, rows: &[Row]| match kind {
            Kind::Copy => copy::<T>(s, z, rows),
            Kind::Fill => fill::<T>(s, z, rows),
            Kind::Cast(_) => Err(bad_pass("cast")),
            Kind::Unary(op) => unary::<T>(s, z, op, rows),
            Kind::Binary(op) => binary::<T>(s, z, op, rows),
        })
    });
    Ok(c.job(rows, run))
}

/// `placements` buffers of `n` seeded random values in `[lo, hi)`, each
/// its own allocation; set `i` uses seed `seed + 16 * i`.
fn random_sets<T: Element>(
    s: &Stream,
    z: Sizes,
    seed: u64,
    lo: f64,
    hi: f64,
) -> Result<Vec<DeviceBuffer<T>>> {
    crate::harness::random_sets::<T>(s, z.n, z.placements, seed, lo, hi)
}

/// One output buffer of `n` elements: an op's outputs do not rotate, as
/// PyTorch's do not (its caching allocator hands every call the block the
/// call before freed), so both sides write every call to one placement.
fn output<T: Element>(s: &Stream, z: Sizes) -> Result<DeviceBuffer<T>> {
    DeviceBuffer::<T>::uninit(s, z.n)
}

/// `placements` output buffers of `n` elements, each its own allocation
/// (the copy ceiling, whose PyTorch side rotates its destinations too).
fn output_sets<T: Element>(s: &Stream, z: Sizes) -> Result<Vec<DeviceBuffer<T>>> {
    (0..z.placements)
        .map(|_| DeviceBuffer::<T>::uninit(s, z.n))
        .collect()
}

fn unary<T: Element>(s: &Stream, z: Sizes, op: UnaryOp, rows: &[Row]) -> Result<()> {
    let n = z.n;
    // [-4, 4), or the op's domain where it is narrower (the PyTorch side's
    // DOMAIN)
    let (lo, hi) = match reference::elementwise::unary_domain(op) {
        (lo, hi) if lo > -4.0 || hi < 4.0 => (lo, hi),
        _ => (-4.0, 4.0),
    };
    let xs = random_sets::<T>(s, z, 1, lo, hi)?;
    let mut y = output::<T>(s, z)?;
    let plan = UnaryPlan::<T, 1>::select(
        s,
        &UnaryDescriptor {
            op,
            element: T::KIND,
            shape: [n],
        },
        &PlanPreference::default(),
    )?;
    time_passes(rows, |pass| match pass {
        "fw" => time_rotating_ms(s, z.placements, |i| {
            plan.run(
                s,
                Workspace::None,
                UnaryArgs {
                    x: TensorRef::contiguous(xs[i].as_slice(), [n])?,
                    y: TensorMut::contiguous(y.as_slice_mut(), [n])?,
                },
            )
        }),
        "bw" => {
            let dys = random_sets::<T>(s, z, 2, -1.0, 1.0)?;
            time_rotating_ms(s, z.placements, |i| {
                plan.run_bw(
                    s,
                    Workspace::None,
                    UnaryBwArgs {
                        x: TensorRef::contiguous(xs[i].as_slice(), [n])?,
                        dy: TensorRef::contiguous(dys[i].as_slice(), [n])?,
                        dx: TensorMut::contiguous(y.as_slice_mut(), [n])?,
                    },
                )
            })
        }
        p => Err(bad_pass(p)),
    })
}

fn binary<T: Element>(s: &Stream, z: Sizes, op: BinaryOp, rows: &[Row]) -> Result<()> {
    let n = z.n;
    let a = random_sets::<T>(s, z, 3, -2.0, 2.0)?;
    let b = random_sets::<T>(s, z, 4, 0.5, 2.0)?;
    let mut out = output::<T>(s, z)?;
    let desc = BinaryDescriptor {
        op,
        element: T::KIND,
        a_shape: [n],
        b_shape: [n],
    };
    let plan = BinaryPlan::<T, 1>::select(s, &desc, &PlanPreference::default())?;
    time_passes(rows, |pass| match pass {
        "fw" => time_rotating_ms(s, z.placements, |i| {
            plan.run(
                s,
                Workspace::None,
                BinaryArgs {
                    a: TensorRef::contiguous(a[i].as_slice(), [n])?,
                    b: TensorRef::contiguous(b[i].as_slice(), [n])?,
                    out: TensorMut::contiguous(out.as_slice_mut(), [n])?,
                },
            )
        }),
        "bw" => {
            let dy = random_sets::<T>(s, z, 5, -1.0, 1.0)?;
            let mut db = output::<T>(s, z)?;
            time_rotating_ms(s, z.placements, |i| {
                plan.run_bw(
                    s,
                    Workspace::None,
                    BinaryBwArgs {
                        a: TensorRef::contiguous(a[i].as_slice(), [n])?,
                        b: TensorRef::contiguous(b[i].as_slice(), [n])?,
                        dy: TensorRef::contiguous(dy[i].as_slice(), [n])?,
                        da: Some(TensorMut::contiguous(out.as_slice_mut(), [n])?),
                        db: Some(TensorMut::contiguous(db.as_slice_mut(), [n])?),
                    },
                )
            })
        }
        p => Err(bad_pass(p)),
    })
}

/// `y = O(x)`, PyTorch's `x.to(to)`: no saturation, no scale.
fn cast<I: Element, O: Element>(s: &Stream, z: Sizes, rows: &[Row]) -> Result<()> {
    let n = z.n;
    let xs = random_sets::<I>(s, z, 7, -4.0, 4.0)?;
    let mut y = output::<O>(s, z)?;
    let desc = CastDescriptor::new(I::KIND, O::KIND, [n]);
    let plan = CastPlan::<I, O, 1>::select(s, &desc, &PlanPreference::default())?;
    time_passes(rows, |pass| match pass {
        "fw" => time_rotating_ms(s, z.placements, |i| {
            plan.run(
                s,
                Workspace::None,
                CastArgs {
                    x: TensorRef::contiguous(xs[i].as_slice(), [n])?,
                    y: TensorMut::contiguous(y.as_slice_mut(), [n])?,
                },
            )
        }),
        p => Err(bad_pass(p)),
    })
}

/// `y = 1.5` over `n` elements, rotating over the output sets.
fn fill<T: Element>(s: &Stream, z: Sizes, rows: &[Row]) -> Result<()> {
    let n = z.n;
    let mut ys = output_sets::<T>(s, z)?;
    let desc = FillDescriptor::new(T::KIND, [n], 1.5);
    let plan = FillPlan::<T, 1>::select(s, &desc, &PlanPreference::default())?;
    time_passes(rows, |pass| match pass {
        "fw" => time_rotating_ms(s, z.placements, |i| {
            let y = TensorMut::contiguous(ys[i].as_slice_mut(), [n])?;
            plan.run(s, Workspace::None, FillArgs { y })
        }),
        p => Err(bad_pass(p)),
    })
}

/// Device-to-device copy: the bandwidth ceiling (bytes read + bytes
/// written), over the `placements` sets like every other case. Timed
/// eagerly (see [`time_eager_rotating_ms`]): captured in a graph the copy
/// becomes a slower memcpy node.
fn copy<T: Element>(s: &Stream, z: Sizes, rows: &[Row]) -> Result<()> {
    let xs = random_sets::<T>(s, z, 6, -1.0, 1.0)?;
    let mut ys = output_sets::<T>(s, z)?;
    time_passes(rows, |pass| match pass {
        "fw" => time_eager_rotating_ms(s, z.placements, |i| ys[i].copy_from(s, &xs[i])),
        p => Err(bad_pass(p)),
    })
}
