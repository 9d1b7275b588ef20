//! Elementwise benchmark cases, from `bench/cases/elementwise.json` (which
//! `bench/torch_cases/elementwise.py` reads too): unary, binary and
//! ternary ops (and `where`) on contiguous tensors, gated activations over
//! the halves of `[len / 8192, 8192]`, their backward passes, casts
//! between dtypes, fills, the binary logic ops (comparisons, logical and
//! bitwise ops; `b` a broadcast row of `cols` elements when given), and
//! the device-to-device copy that sets the bandwidth ceiling.
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
    /// A logic op's `b` as a row `[1, cols]` broadcast over `a` of
    /// `[len / cols, cols]`; 0 (the default): both `[len]`.
    #[serde(default)]
    cols: usize,
    /// The dtype of `add_promoted`'s b (a is the case's `dtype`; the
    /// output is PyTorch's result type of the two).
    #[serde(default, deserialize_with = "de_opt_dtype")]
    b_dtype: Option<ElementKind>,
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
    Ternary(TernaryOp),
    /// `where(cond, a, b)`, cond bool.
    Where,
    /// A gated activation of x `[len / GATED_WIDTH, GATED_WIDTH]` split
    /// along its last dim.
    Gated(GatedOp),
    /// A binary logic op (forward only: no gradient).
    Logic(BinaryLogicOp),
    /// `add` of inputs of two float dtypes (`PromotedBinaryPlan`).
    AddPromoted,
}

/// The last dim of a gated case's x (two halves of 4096, an MLP's width).
const GATED_WIDTH: usize = 8192;

impl Kind {
    fn of(op: &str) -> Option<Kind> {
        match op {
            "copy" => return Some(Kind::Copy),
            "fill" => return Some(Kind::Fill),
            "add_promoted" => return Some(Kind::AddPromoted),
            _ => {}
        }
        let unary = UnaryOp::ALL.into_iter().find(|u| u.name() == op);
        let binary = BinaryOp::ALL.into_iter().find(|b| b.name() == op);
        let ternary = TernaryOp::ALL.into_iter().find(|t| t.name() == op);
        let gated = GatedOp::ALL.into_iter().find(|g| g.name() == op);
        let where_ = (op == "where").then_some(Kind::Where);
        let logic = BinaryLogicOp::ALL.into_iter().find(|l| l.name() == op);
        unary
            .map(Kind::Unary)
            .or(binary.map(Kind::Binary))
            .or(ternary.map(Kind::Ternary))
            .or(gated.map(Kind::Gated))
            .or(where_)
            .or(logic.map(Kind::Logic))
    }

    fn passes(self) -> &'static [&'static str] {
        match self {
            Kind::Copy | Kind::Fill | Kind::Cast(_) | Kind::Logic(_) | Kind::AddPromoted => &["fw"],
            _ => &["fw", "bw"],
        }
    }

    /// Bytes a pass over tensors of `len` elements of `size` bytes reads
    /// or writes (the minimum traffic: every input read once, every output
    /// written once). A gated case's x has `len` elements and y half;
    /// `where`'s condition is one byte per element.
    fn bytes(self, pass: &str, len: usize, size: usize) -> usize {
        let tensors = match (self, pass) {
            (Kind::Fill, _) => 1,
            (Kind::Copy | Kind::Cast(_), _) | (Kind::Unary(_), "fw") => 2,
            (Kind::Unary(_), _) | (Kind::Binary(_), "fw") | (Kind::Where, _) => 3,
            (Kind::Binary(_), _) => 5,
            (Kind::Ternary(_), "fw") => 4,
            (Kind::Ternary(_), _) => 7,
            // x and y; x, dy and dx: in halves of x
            (Kind::Gated(_), "fw") => return 3 * len / 2 * size,
            (Kind::Gated(_), _) => return 5 * len / 2 * size,
            // counted in `job`, which knows b's length and the output's
            // element size
            (Kind::Logic(_) | Kind::AddPromoted, _) => return 0,
        };
        let cond = if matches!(self, Kind::Where) { len } else { 0 };
        tensors * len * size + cond
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
    let Params {
        len,
        to,
        cols,
        b_dtype,
    } = c.params()?;
    if b_dtype.is_some() != (c.op == "add_promoted") {
        return Err(c.error("add_promoted, and only it, takes `b_dtype`"));
    }
    let kind = match (c.op.as_str(), to) {
        ("cast", Some(to)) => Kind::Cast(to),
        ("cast", None) => return Err(c.error("cast needs `to`, the output dtype")),
        (_, Some(_)) => return Err(c.error("only cast takes `to`")),
        _ => Kind::of(&c.op).ok_or_else(|| c.unknown_op())?,
    };
    let dtype = c.dtype()?;
    let passes = c.passes(kind.passes())?;
    let (shape, b_len) = match (kind, cols) {
        (_, 0) => (format!("[{len}]"), len),
        (Kind::Logic(_), c) if len % c == 0 => (format!("[{}, {c}] x [1, {c}]", len / c), c),
        (Kind::Logic(_), _) => {
            return Err(c.error(format!("cols {cols} does not divide len {len}")))
        }
        _ => return Err(c.error("only the logic ops take `cols`")),
    };
    let rows = c.rows(&passes, dtype, &shape, |r| {
        let bytes = match kind {
            Kind::Cast(to) => len * (dtype.size_bytes() + to.size_bytes()),
            Kind::Logic(op) => {
                (len + b_len) * dtype.size_bytes() + len * op.output(dtype).size_bytes()
            }
            Kind::AddPromoted => {
                let b = b_dtype.unwrap_or(dtype);
                let out = promoted_kind(dtype, b).unwrap_or(dtype);
                len * (dtype.size_bytes() + b.size_bytes() + out.size_bytes())
            }
            _ => kind.bytes(r.pass, len, dtype.size_bytes()),
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
    if let Kind::AddPromoted = kind {
        let b = b_dtype.unwrap_or(dtype);
        let run: RunFn = match (dtype, b) {
            (ElementKind::Bf16, ElementKind::F32) => {
                Box::new(move |s: &Stream, rows: &[Row]| add_promoted::<bf16, f32>(s, z, rows))
            }
            _ => return Err(c.error(format!("add_promoted runs bf16 + f32, not {dtype} + {b}"))),
        };
        return Ok(c.job(rows, run));
    }
    if let Kind::Logic(op) = kind {
        let run: RunFn = by_dtype!(c, dtype, [Bf16 => bf16, F16 => f16, F32 => f32, F64 => f64, I32 => i32], T => {
            if op.output(dtype) == ElementKind::Bool {
                Box::new(move |s: &Stream, rows: &[Row]| logic::<T, bool>(s, z, op, cols, rows))
            } else {
                Box::new(move |s: &Stream, rows: &[Row]| logic::<T, T>(s, z, op, cols, rows))
            }
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
            Kind::Ternary(op) => ternary::<T>(s, z, op, rows),
            Kind::Where => where_::<T>(s, z, rows),
            Kind::Gated(op) => gated::<T>(s, z, op, rows),
            Kind::Logic(_) => Err(bad_pass("logic")),
            Kind::AddPromoted => Err(bad_pass("add_promoted")),
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

/// `torch.add(a, b)` with a of `A` and b of `B`, out of their result type.
fn add_promoted<A: Promote<B>, B: Element>(s: &Stream, z: Sizes, rows: &[Row]) -> Result<()> {
    let n = z.n;
    let a = random_sets::<A>(s, z, 3, -2.0, 2.0)?;
    let b = random_sets::<B>(s, z, 4, 0.5, 2.0)?;
    let mut out = output::<A::Out>(s, z)?;
    let desc = PromotedBinaryDescriptor {
        op: BinaryOp::Add,
        a_element: A::KIND,
        b_element: B::KIND,
        a_shape: [n],
        b_shape: [n],
    };
    let plan = PromotedBinaryPlan::<A, B, 1>::select(s, &desc, &PlanPreference::default())?;
    time_passes(rows, |pass| match pass {
        "fw" => time_rotating_ms(s, z.placements, |i| {
            plan.run(
                s,
                Workspace::None,
                PromotedBinaryArgs {
                    a: TensorRef::contiguous(a[i].as_slice(), [n])?,
                    b: TensorRef::contiguous(b[i].as_slice(), [n])?,
                    out: TensorMut::contiguous(out.as_slice_mut(), [n])?,
                },
            )
        }),
        p => Err(bad_pass(p)),
    })
}

fn ternary<T: Element>(s: &Stream, z: Sizes, op: TernaryOp, rows: &[Row]) -> Result<()> {
    let n = z.n;
    let a = random_sets::<T>(s, z, 8, -2.0, 2.0)?;
    let b = random_sets::<T>(s, z, 9, -2.0, 2.0)?;
    let c = random_sets::<T>(s, z, 10, 0.5, 2.0)?;
    let mut out = output::<T>(s, z)?;
    let desc = TernaryDescriptor {
        op,
        element: T::KIND,
        a_shape: [n],
        b_shape: [n],
        c_shape: [n],
    };
    let plan = TernaryPlan::<T, 1>::select(s, &desc, &PlanPreference::default())?;
    time_passes(rows, |pass| match pass {
        "fw" => time_rotating_ms(s, z.placements, |i| {
            plan.run(
                s,
                Workspace::None,
                TernaryArgs {
                    a: TensorRef::contiguous(a[i].as_slice(), [n])?,
                    b: TensorRef::contiguous(b[i].as_slice(), [n])?,
                    c: TensorRef::contiguous(c[i].as_slice(), [n])?,
                    out: TensorMut::contiguous(out.as_slice_mut(), [n])?,
                },
            )
        }),
        "bw" => {
            let dy = random_sets::<T>(s, z, 11, -1.0, 1.0)?;
            let mut db = output::<T>(s, z)?;
            let mut dc = output::<T>(s, z)?;
            time_rotating_ms(s, z.placements, |i| {
                plan.run_bw(
                    s,
                    Workspace::None,
                    TernaryBwArgs {
                        a: TensorRef::contiguous(a[i].as_slice(), [n])?,
                        b: TensorRef::contiguous(b[i].as_slice(), [n])?,
                        c: TensorRef::contiguous(c[i].as_slice(), [n])?,
                        dy: TensorRef::contiguous(dy[i].as_slice(), [n])?,
                        da: Some(TensorMut::contiguous(out.as_slice_mut(), [n])?),
                        db: Some(TensorMut::contiguous(db.as_slice_mut(), [n])?),
                        dc: Some(TensorMut::contiguous(dc.as_slice_mut(), [n])?),
                    },
                )
            })
        }
        p => Err(bad_pass(p)),
    })
}

fn where_<T: Element>(s: &Stream, z: Sizes, rows: &[Row]) -> Result<()> {
    let n = z.n;
    let cond = cond_sets(s, z)?;
    let a = random_sets::<T>(s, z, 13, -2.0, 2.0)?;
    let b = random_sets::<T>(s, z, 14, -2.0, 2.0)?;
    let mut out = output::<T>(s, z)?;
    let desc = WhereDescriptor {
        element: T::KIND,
        cond_shape: [n],
        a_shape: [n],
        b_shape: [n],
    };
    let plan = WherePlan::<T, 1>::select(s, &desc, &PlanPreference::default())?;
    time_passes(rows, |pass| match pass {
        "fw" => time_rotating_ms(s, z.placements, |i| {
            plan.run(
                s,
                Workspace::None,
                WhereArgs {
                    cond: TensorRef::contiguous(cond[i].as_slice(), [n])?,
                    a: TensorRef::contiguous(a[i].as_slice(), [n])?,
                    b: TensorRef::contiguous(b[i].as_slice(), [n])?,
                    out: TensorMut::contiguous(out.as_slice_mut(), [n])?,
                },
            )
        }),
        "bw" => {
            let dy = random_sets::<T>(s, z, 15, -1.0, 1.0)?;
            let mut db = output::<T>(s, z)?;
            time_rotating_ms(s, z.placements, |i| {
                plan.run_bw(
                    s,
                    Workspace::None,
                    WhereBwArgs {
                        cond: TensorRef::contiguous(cond[i].as_slice(), [n])?,
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

/// `placements` bool buffers of `n` elements, about half of them true
/// (bits of a SplitMix64 stream, seeded per set).
fn cond_sets(s: &Stream, z: Sizes) -> Result<Vec<DeviceBuffer<bool>>> {
    (0..z.placements as u64)
        .map(|set| {
            let host: Vec<bool> = (0..z.n as u64)
                .map(|i| {
                    let mut v = (i ^ (set << 40)).wrapping_add(0x9E37_79B9_7F4A_7C15);
                    v = (v ^ (v >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
                    v = (v ^ (v >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
                    (v ^ (v >> 31)) & 1 == 1
                })
                .collect();
            DeviceBuffer::from_host(s, &host)
        })
        .collect()
}

/// A gated op over x `[n / GATED_WIDTH, GATED_WIDTH]` (n elements), y of
/// half as many.
fn gated<T: Element>(s: &Stream, z: Sizes, op: GatedOp, rows: &[Row]) -> Result<()> {
    let n = z.n;
    let x_shape = [n / GATED_WIDTH, GATED_WIDTH];
    let y_shape = [n / GATED_WIDTH, GATED_WIDTH / 2];
    let xs = random_sets::<T>(s, z, 16, -4.0, 4.0)?;
    let mut y = DeviceBuffer::<T>::uninit(s, n / 2)?;
    let desc = GatedDescriptor {
        op,
        element: T::KIND,
        x_shape,
        dim: 1,
    };
    let plan = GatedPlan::<T, 2>::select(s, &desc, &PlanPreference::default())?;
    time_passes(rows, |pass| match pass {
        "fw" => time_rotating_ms(s, z.placements, |i| {
            plan.run(
                s,
                Workspace::None,
                GatedArgs {
                    x: TensorRef::contiguous(xs[i].as_slice(), x_shape)?,
                    y: TensorMut::contiguous(y.as_slice_mut(), y_shape)?,
                },
            )
        }),
        "bw" => {
            let dys = crate::harness::random_sets::<T>(s, n / 2, z.placements, 17, -1.0, 1.0)?;
            let mut dx = output::<T>(s, z)?;
            time_rotating_ms(s, z.placements, |i| {
                plan.run_bw(
                    s,
                    Workspace::None,
                    GatedBwArgs {
                        x: TensorRef::contiguous(xs[i].as_slice(), x_shape)?,
                        dy: TensorRef::contiguous(dys[i].as_slice(), y_shape)?,
                        dx: TensorMut::contiguous(dx.as_slice_mut(), x_shape)?,
                    },
                )
            })
        }
        p => Err(bad_pass(p)),
    })
}

/// `out = op(a, b)`: a `[len]` and b `[len]`, or with `cols` a
/// `[len / cols, cols]` and b the row `[1, cols]`; floats uniform in
/// [-2, 2), integers over their range. The output does not rotate.
fn logic<T: Element, O: Element>(
    s: &Stream,
    z: Sizes,
    op: BinaryLogicOp,
    cols: usize,
    rows: &[Row],
) -> Result<()> {
    let n = z.n;
    let (a_shape, b_shape) = match cols {
        0 => ([1, n], [1, n]),
        c => ([n / c, c], [1, c]),
    };
    let (lo, hi) = if T::KIND.is_float() {
        (-2.0, 2.0)
    } else {
        (-2f64.powi(31), 2f64.powi(31))
    };
    let a = random_sets::<T>(s, z, 18, lo, hi)?;
    let b = crate::harness::random_sets::<T>(s, b_shape[1], z.placements, 19, lo, hi)?;
    let mut out = DeviceBuffer::<O>::uninit(s, n)?;
    let desc = BinaryLogicDescriptor {
        op,
        element: T::KIND,
        a_shape,
        b_shape,
    };
    let plan = BinaryLogicPlan::<T, O, 2>::select(s, &desc, &PlanPreference::default())?;
    time_passes(rows, |pass| match pass {
        "fw" => time_rotating_ms(s, z.placements, |i| {
            plan.run(
                s,
                Workspace::None,
                BinaryLogicArgs {
                    a: TensorRef::contiguous(a[i].as_slice(), a_shape)?,
                    b: TensorRef::contiguous(b[i].as_slice(), b_shape)?,
                    out: TensorMut::contiguous(out.as_slice_mut(), a_shape)?,
                },
            )
        }),
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
