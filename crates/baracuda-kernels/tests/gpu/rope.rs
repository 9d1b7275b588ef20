//! GPU tests of [`RopePlan`] against `reference::attention::Rope`: both
//! pairings, whole and partial rotary dims (the tail copied), the sequence
//! index or given positions (up to 10^5, where the angle reduction
//! matters), angles from theta (with position scaling) or from cos/sin
//! tables, a position outside the tables (NaN out), strided outputs, a
//! misaligned input, a head-major (BHSD) input viewed as BSHD, many heads
//! of few tokens and many tokens of one head, empty and size-1 tensors,
//! and a realistic [4, 512, 8, 128]. Each sample names the kernel it is
//! for (16-byte vectors or strided) and the run checks that one ran.

use baracuda_kernels::reference::attention::Rope;
use baracuda_kernels::*;

use crate::harness::*;
use crate::reduce::{nan_marked, out_layout, view_result, Layout};
use crate::table::{BadInputs, OpCase, Tensors};

/// One problem of the row.
#[derive(Clone, Debug)]
pub struct RopeSample {
    style: RopeStyle,
    /// `[batch, seq, heads, head_dim]`.
    shape: [usize; 4],
    rotary_dim: usize,
    /// Positions given (random up to `max_pos`), else the sequence index.
    max_pos: Option<usize>,
    /// Angles from tables of `table_rows` rows (the last position past
    /// them when `out_of_range`).
    table: Option<usize>,
    out_of_range: bool,
    pos_scale: f64,
    layout: Layout,
    /// The kernel the plan must take on every dtype (`RopePlan::vectorized`):
    /// the 16-byte vector one, or the strided one; `None` for empty samples.
    vectorized: Option<bool>,
}

const THETA: f64 = 10000.0;

/// The row.
pub const ROW: OpCase<RopeSample> = OpCase {
    name: "attention_rope",
    dtypes: FLOATS,
    backward: true,
    samples: |_| samples(),
    inputs,
    run,
    reference,
    tolerance,
    bad_inputs,
    unsupported,
};

/// The family's rows of the op table.
pub(crate) static ROWS: &[&dyn crate::table::Row] = &[&ROW];

crate::table_tests!(ROWS; attention_rope,);

fn samples() -> Vec<RopeSample> {
    use Layout::*;
    let s = |style, shape: [usize; 4], rotary_dim, layout| RopeSample {
        style,
        shape,
        rotary_dim,
        max_pos: None,
        table: None,
        out_of_range: false,
        pos_scale: 1.0,
        layout,
        vectorized: None,
    };
    let pos = |mut x: RopeSample, max| {
        x.max_pos = Some(max);
        x
    };
    let table = |mut x: RopeSample, rows| {
        x.table = Some(rows);
        x
    };
    let outside = |mut x: RopeSample| {
        x.out_of_range = true;
        x
    };
    // the kernel each dtype's run must take
    let vector = |mut x: RopeSample| {
        x.vectorized = Some(true);
        x
    };
    let strided = |mut x: RopeSample| {
        x.vectorized = Some(false);
        x
    };
    let (neox, gptj) = (RopeStyle::NeoX, RopeStyle::GptJ);
    let mut scaled = pos(s(neox, [2, 6, 3, 32], 32, Contiguous), 4000);
    scaled.pos_scale = 4.0;
    vec![
        // size 1 (a head of one pair: strided), whole and partial heads,
        // both pairings
        strided(s(neox, [1, 1, 1, 2], 2, Contiguous)),
        vector(s(neox, [2, 7, 3, 64], 64, Contiguous)),
        vector(s(gptj, [2, 7, 3, 64], 64, Contiguous)),
        strided(s(neox, [2, 7, 3, 64], 32, StridedOut)),
        strided(s(gptj, [3, 5, 2, 96], 24, StridedOut)),
        // x one element into its buffer
        strided(s(neox, [2, 7, 3, 64], 64, Misaligned)),
        strided(s(gptj, [2, 7, 3, 64], 32, Misaligned)),
        // given positions, far ones (the f64 angle reduction), scaled
        vector(pos(s(neox, [2, 5, 4, 128], 128, Contiguous), 100_000)),
        vector(pos(s(gptj, [2, 5, 4, 128], 64, Contiguous), 100_000)),
        vector(pos(s(neox, [2, 5, 4, 128], 64, Contiguous), 100_000)),
        vector(scaled),
        // a BHSD tensor viewed as BSHD
        vector(s(neox, [2, 33, 4, 64], 64, Transposed)),
        // tables, and a position past them (both kernels)
        vector(table(pos(s(neox, [2, 9, 2, 16], 16, Contiguous), 32), 33)),
        vector(table(s(neox, [3, 4, 5, 48], 32, Contiguous), 4)),
        strided(table(s(gptj, [1, 12, 3, 40], 20, StridedOut), 12)),
        vector(outside(table(
            pos(s(gptj, [1, 9, 2, 16], 16, Contiguous), 40),
            33,
        ))),
        vector(outside(table(
            pos(s(neox, [2, 5, 3, 32], 16, Contiguous), 40),
            33,
        ))),
        strided(outside(table(
            pos(s(gptj, [1, 9, 2, 16], 16, StridedOut), 40),
            33,
        ))),
        // many heads of few tokens (a block per head), many tokens of one
        // head (blocks of several tokens, across batch rows)
        vector(pos(s(neox, [1, 2, 64, 256], 256, Contiguous), 1000)),
        vector(pos(s(gptj, [64, 33, 1, 32], 32, Contiguous), 5000)),
        // empty
        s(neox, [3, 0, 2, 8], 8, Contiguous),
        s(neox, [2, 3, 0, 8], 4, Contiguous),
        // realistic
        vector(s(neox, [4, 512, 8, 128], 128, Contiguous)),
    ]
}

impl RopeSample {
    fn n(&self) -> usize {
        self.shape.iter().product()
    }
    fn tokens(&self) -> usize {
        self.shape[0] * self.shape[1]
    }
    fn half(&self) -> usize {
        self.rotary_dim / 2
    }
    fn rope(&self) -> Rope {
        Rope {
            style: self.style,
            heads: self.shape[2],
            dim: self.shape[3],
            rotary_dim: self.rotary_dim,
            theta: THETA,
        }
    }
    fn descriptor(&self, element: ElementKind) -> RopeDescriptor {
        let freqs = match self.table {
            Some(_) => RopeFreqs::Table,
            None => RopeFreqs::Theta {
                theta: THETA,
                pos_scale: self.pos_scale,
            },
        };
        RopeDescriptor::new(element, self.shape, THETA)
            .with_style(self.style)
            .with_rotary_dim(self.rotary_dim)
            .with_freqs(freqs)
    }
    /// Elements before the input view in its buffer (one for
    /// `Misaligned`).
    fn x_offset(&self) -> usize {
        usize::from(self.layout == Layout::Misaligned)
    }
    /// Strides of the input view: BSHD, or BHSD memory for `Transposed`.
    fn x_strides(&self) -> [usize; 4] {
        let [_, s, h, d] = self.shape;
        match self.layout {
            Layout::Transposed => [h * s * d, d, s * d, 1],
            _ => [s * h * d, h * d, d, 1],
        }
    }
}

/// x and dy (logical BSHD order), the positions, and the tables.
fn inputs(s: &RopeSample, rng: &mut Rng) -> Tensors {
    let mut t = Tensors::default();
    t.push("x", rng.vec(s.n(), -2.0, 2.0));
    t.push("dy", rng.vec(s.n(), -1.0, 1.0));
    let mut pos: Vec<f64> = match s.max_pos {
        Some(max) => (0..s.tokens())
            .map(|_| rng.vec(1, 0.0, max as f64)[0].floor())
            .collect(),
        None => (0..s.tokens()).map(|i| (i % s.shape[1]) as f64).collect(),
    };
    if let Some(rows) = s.table {
        pos.iter_mut().for_each(|p| *p = p.min(rows as f64 - 1.0));
        if s.out_of_range {
            *pos.last_mut().expect("a token") = rows as f64;
        }
        // the tables hold the f32 cos and sin of the theta angles
        let half = s.half();
        let angle =
            |p: usize, e: usize| p as f64 * THETA.powf(-2.0 * e as f64 / s.rotary_dim as f64);
        let f32_of = |v: f64| v as f32 as f64;
        t.push_exact(
            "cos",
            (0..rows * half)
                .map(|i| f32_of(angle(i / half, i % half).cos()))
                .collect(),
        );
        t.push_exact(
            "sin",
            (0..rows * half)
                .map(|i| f32_of(angle(i / half, i % half).sin()))
                .collect(),
        );
    }
    t.push_exact("positions", pos);
    t
}

fn reference(_: ElementKind, s: &RopeSample, inputs: &Tensors, got: &Tensors) -> Tensors {
    let rope = s.rope();
    let pos: Vec<f64> = inputs
        .get("positions")
        .iter()
        .map(|p| p / s.pos_scale)
        .collect();
    let mark_outside = |mut y: Vec<f64>| {
        if s.out_of_range {
            // the last token's rotated elements are NaN
            let [_, _, h, d] = s.shape;
            let base = (s.tokens() - 1) * h * d;
            for head in 0..h {
                for e in 0..s.rotary_dim {
                    y[base + head * d + e] = f64::NAN;
                }
            }
        }
        nan_marked(y)
    };
    let mut t = Tensors::default();
    t.push("y", mark_outside(rope.apply(inputs.get("x"), &pos, false)));
    if got.find("dx").is_some() {
        t.push("dx", mark_outside(rope.apply(inputs.get("dy"), &pos, true)));
    }
    t
}

fn tolerance(
    kind: ElementKind,
    s: &RopeSample,
    _: &str,
    _: &[f64],
    _inputs: &Tensors,
) -> Tolerance {
    // two products and a sum in the accumulator, the angle's sine and
    // cosine (f32 tables: one f32 rounding each), one rounding to T
    let u = acc_roundoff(kind).max(if s.table.is_some() {
        ElementKind::F32.unit_roundoff()
    } else {
        0.0
    });
    // the angle pos * inv_freq and its reduction mod 2 pi, in f64: a few
    // f64 roundings of a number as large as the position
    let max_pos = s.max_pos.unwrap_or(s.shape[1]) as f64 / s.pos_scale;
    let angle = 8.0 * (max_pos + 1.0) * ElementKind::F64.unit_roundoff();
    // |x0| + |x1| <= 4
    Tolerance {
        rtol: 2.0 * kind.unit_roundoff() + 8.0 * u,
        atol: 32.0 * u + 4.0 * angle,
    }
}

fn run(
    kind: ElementKind,
    s: &RopeSample,
    inputs: &Tensors,
    backward: bool,
) -> Result<Tensors, String> {
    crate::with_float!(kind, T => run_typed::<T>(s, inputs, backward))
}

/// The positions and tables of `s` on the device.
struct Extras {
    pos: DeviceBuffer<i64>,
    cos: Option<DeviceBuffer<f32>>,
    sin: Option<DeviceBuffer<f32>>,
}

impl Extras {
    fn new(inputs: &Tensors) -> Result<Extras, String> {
        let st = &gpu().stream;
        let pos: Vec<i64> = inputs.get("positions").iter().map(|&p| p as i64).collect();
        let table = |name| -> Result<Option<DeviceBuffer<f32>>, String> {
            match inputs.find(name) {
                Some(v) => {
                    let v: Vec<f32> = v.iter().map(|&x| x as f32).collect();
                    Ok(Some(
                        DeviceBuffer::from_host(st, &v).map_err(|e| e.to_string())?,
                    ))
                }
                None => Ok(None),
            }
        };
        Ok(Extras {
            pos: DeviceBuffer::from_host(st, &pos).map_err(|e| e.to_string())?,
            cos: table("cos")?,
            sin: table("sin")?,
        })
    }
    fn positions(&self, s: &RopeSample) -> Result<Option<TensorRef<'_, i64, 2>>, String> {
        if s.max_pos.is_none() && s.table.is_none() {
            return Ok(None);
        }
        TensorRef::contiguous(self.pos.as_slice(), [s.shape[0], s.shape[1]])
            .map(Some)
            .map_err(|e| e.to_string())
    }
    #[allow(clippy::type_complexity)]
    fn table(
        &self,
        s: &RopeSample,
    ) -> Result<Option<(TensorRef<'_, f32, 2>, TensorRef<'_, f32, 2>)>, String> {
        match (s.table, &self.cos, &self.sin) {
            (Some(rows), Some(c), Some(sn)) => {
                let shape = [rows, s.half()];
                Ok(Some((
                    TensorRef::contiguous(c.as_slice(), shape).map_err(|e| e.to_string())?,
                    TensorRef::contiguous(sn.as_slice(), shape).map_err(|e| e.to_string())?,
                )))
            }
            _ => Ok(None),
        }
    }
}

fn run_typed<T: Element>(
    s: &RopeSample,
    inputs: &Tensors,
    backward: bool,
) -> Result<Tensors, String> {
    let g = gpu();
    let what = format!(
        "rope {} {:?} {:?} rot {}",
        T::KIND,
        s.style,
        s.shape,
        s.rotary_dim
    );
    let plan = select::<RopePlan<T>>(&s.descriptor(T::KIND), &PlanPreference::default())?;
    let extras = Extras::new(inputs)?;
    let xs = s.x_strides();
    let (os, o_len) = out_layout(s.layout, &s.shape);
    let os: [usize; 4] = os.try_into().map_err(|_| "rank 4".to_string())?;
    let mut t = Tensors::default();
    let passes: &[(&str, &str)] = if backward {
        &[("x", "y"), ("dy", "dx")]
    } else {
        &[("x", "y")]
    };
    for &(input, output) in passes {
        let at = s.x_offset();
        let mut vals = vec![0.0; at];
        vals.extend(scatter(inputs.get(input), &s.shape, &xs, s.n()));
        let (buf, _) = upload::<T>(&vals);
        let x_slice = buf.as_slice().slice(at..vals.len()).ok_or("x view")?;
        let view = TensorRef::new(x_slice, s.shape, xs).map_err(|e| e.to_string())?;
        let mut out = Guarded::<T>::new(o_len);
        let out_view = TensorMut::new(out.slice_mut(), s.shape, os).map_err(|e| e.to_string())?;
        if let Some(want) = s.vectorized {
            let got = plan.vectorized(&view, &out_view);
            if got != want {
                return Err(format!(
                    "{what} {output}: the {} kernel ran, the sample is for the {} one",
                    if got { "vector" } else { "strided" },
                    if want { "vector" } else { "strided" },
                ));
            }
        }
        let (positions, table) = (extras.positions(s)?, extras.table(s)?);
        let r = if output == "y" {
            plan.run(
                &g.stream,
                Workspace::None,
                RopeArgs {
                    x: view,
                    positions,
                    table,
                    y: out_view,
                },
            )
        } else {
            plan.run_bw(
                &g.stream,
                Workspace::None,
                RopeBwArgs {
                    dy: view,
                    positions,
                    table,
                    dx: out_view,
                },
            )
        };
        r.map_err(|e| format!("{what} {output}: {e}"))?;
        let vals = view_result(&format!("{what} {output}"), &out, &s.shape, &os)?;
        t.push(output, nan_marked(vals));
    }
    Ok(t)
}

/// Every select and run check, each returning its error and writing
/// nothing.
fn bad_inputs() -> Result<usize, String> {
    let g = gpu();
    let mut b = BadInputs::default();
    let pref = PlanPreference::default();
    let shape = [2, 4, 2, 8];
    let desc = RopeDescriptor::new(ElementKind::F32, shape, THETA);
    let sel = |d: &RopeDescriptor| RopePlan::<f32>::select(&g.stream, d, &pref);
    let f64_desc = RopeDescriptor {
        element: ElementKind::F64,
        ..desc
    };
    b.own_kernel_select::<RopePlan<f32>>(&desc, &f64_desc)?;
    b.expect(
        "odd rotary_dim",
        sel(&desc.with_rotary_dim(3)),
        invalid_descriptor("rotary_dim"),
        &[],
    )?;
    b.expect(
        "rotary_dim past the head",
        sel(&desc.with_rotary_dim(10)),
        invalid_descriptor("rotary_dim"),
        &[],
    )?;
    let zero_theta = desc.with_freqs(RopeFreqs::Theta {
        theta: 0.0,
        pos_scale: 1.0,
    });
    b.expect(
        "theta 0",
        sel(&zero_theta),
        invalid_descriptor("freqs.theta"),
        &[],
    )?;
    let plan = sel(&desc).map_err(|e| e.to_string())?;
    let n: usize = shape.iter().product();
    let mut rng = Rng::new(0x20FE);
    fn out(y: &mut Guarded<f32>) -> Result<TensorMut<'_, f32, 4>, String> {
        TensorMut::contiguous(y.slice_mut(), [2, 4, 2, 8]).map_err(|e| e.to_string())
    }
    let (xb, _) = upload::<f32>(&rng.vec(2 * n, -1.0, 1.0));
    let x = TensorRef::contiguous(xb.as_slice(), shape).map_err(|e| e.to_string())?;
    let x_short = TensorRef::contiguous(xb.as_slice(), [2, 3, 2, 8]).map_err(|e| e.to_string())?;
    let mut y = Guarded::<f32>::new(n);
    let r = run_fw(&plan, x_short, out(&mut y)?, None, None);
    b.expect("x [2, 3, 2, 8]", r, shape_mismatch("x"), &[&y])?;
    let pos = DeviceBuffer::<i64>::zeros(&g.stream, 16).map_err(|e| e.to_string())?;
    let p_bad = TensorRef::contiguous(pos.as_slice(), [2, 3]).map_err(|e| e.to_string())?;
    let mut y = Guarded::<f32>::new(n);
    let r = run_fw(&plan, x, out(&mut y)?, Some(p_bad), None);
    b.expect("positions [2, 3]", r, shape_mismatch("positions"), &[&y])?;
    let tb = DeviceBuffer::<f32>::zeros(&g.stream, 64).map_err(|e| e.to_string())?;
    let tv = TensorRef::contiguous(tb.as_slice(), [8, 4]).map_err(|e| e.to_string())?;
    let mut y = Guarded::<f32>::new(n);
    let r = run_fw(&plan, x, out(&mut y)?, None, Some((tv, tv)));
    b.expect(
        "tables with theta angles",
        r,
        invalid_argument("table"),
        &[&y],
    )?;
    // y inside x's memory
    let s = xb.as_slice();
    // SAFETY: a bad-input test: run must reject the aliasing view before
    // anything is enqueued, so nothing reads or writes through it.
    let alias = unsafe { DeviceSliceMut::<f32>::from_raw_parts(s.addr() + 16, n, s.ctx_id()) };
    let av = TensorMut::contiguous(alias, shape).map_err(|e| e.to_string())?;
    b.expect(
        "y overlapping x",
        run_fw(&plan, x, av, None, None),
        invalid_argument("y"),
        &[],
    )?;
    // tables missing for a table descriptor
    let tplan = sel(&desc.with_freqs(RopeFreqs::Table)).map_err(|e| e.to_string())?;
    let mut y = Guarded::<f32>::new(n);
    let yv = out(&mut y)?;
    let r = tplan.run(
        &g.stream,
        Workspace::None,
        RopeArgs {
            x,
            positions: None,
            table: None,
            y: yv,
        },
    );
    b.expect(
        "table descriptor, no tables",
        r,
        invalid_argument("table"),
        &[&y],
    )?;
    // the backward checks its own views
    let mut dx = Guarded::<f32>::new(n);
    let dxv = TensorMut::contiguous(dx.slice_mut(), [2, 3, 2, 8]).map_err(|e| e.to_string())?;
    let r = plan.run_bw(
        &g.stream,
        Workspace::None,
        RopeBwArgs {
            dy: x,
            positions: None,
            table: None,
            dx: dxv,
        },
    );
    b.expect("dx [2, 3, 2, 8]", r, shape_mismatch("dx"), &[&dx])?;
    b.done()
}

fn unsupported(kind: ElementKind) -> Result<(), String> {
    crate::with_element!(kind, T => {
        let desc = RopeDescriptor::new(kind, [1, 2, 1, 4], THETA);
        expect_unsupported::<RopePlan<T>>(&format!("rope on {kind}"), &desc)
    })
}

/// The forward of `plan` on the shared stream.
fn run_fw(
    plan: &RopePlan<f32>,
    x: TensorRef<'_, f32, 4>,
    y: TensorMut<'_, f32, 4>,
    positions: Option<TensorRef<'_, i64, 2>>,
    table: Option<(TensorRef<'_, f32, 2>, TensorRef<'_, f32, 2>)>,
) -> baracuda_kernels::Result<()> {
    plan.run(
        &gpu().stream,
        Workspace::None,
        RopeArgs {
            x,
            positions,
            table,
            y,
        },
    )
}
