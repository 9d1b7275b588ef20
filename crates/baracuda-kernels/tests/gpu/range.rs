//! GPU tests of `RangePlan` (arange, linspace, logspace) and `EyePlan`:
//! rows of the elementwise table.
//!
//! Each case writes a contiguous, a strided (every other element) and a
//! misaligned view of a 0xFF byte buffer and compares with
//! `reference::elementwise::range` / `eye`: exactly for arange, linspace
//! and eye, within a few units in the last place for logspace (the GPU's
//! `powf` against the correctly rounded power). Elements outside the view
//! must keep their bytes.

use baracuda_kernels::reference::elementwise as reference;
use baracuda_kernels::*;

use crate::cast::OutBuf;
use crate::elementwise::identical;
use crate::harness::*;

/// Kinds arange and linspace take; logspace takes the first four.
pub static RANGE_KINDS: [ElementKind; 9] = [
    ElementKind::F32,
    ElementKind::F64,
    ElementKind::F16,
    ElementKind::Bf16,
    ElementKind::I8,
    ElementKind::U8,
    ElementKind::I16,
    ElementKind::I32,
    ElementKind::I64,
];

/// The cases of each op: (op, len). arange's lengths are PyTorch's.
fn cases(which: &str, kind: ElementKind) -> Vec<(RangeOp, usize)> {
    let ar = |s: f64, e: f64, st: f64| {
        let n = arange_len(s, e, st).unwrap();
        (RangeOp::Arange { start: s, step: st }, n)
    };
    let lin = |s: f64, e: f64, n: usize| (RangeOp::Linspace { start: s, end: e }, n);
    let log = |s: f64, e: f64, n: usize, b: f64| {
        (
            RangeOp::Logspace {
                start: s,
                end: e,
                base: b,
            },
            n,
        )
    };
    let int = !kind.is_float();
    match which {
        "arange" if int => vec![
            ar(0.0, 10.0, 1.0),
            ar(-100.0, 100.0, 3.0),
            ar(50.0, -50.0, -7.0),
            // wraps in the narrow kinds, as PyTorch's cast of the i64 value
            ar(0.0, 70000.0, 1.0),
            ar(5.0, 5.0, 1.0),
        ],
        "arange" => vec![
            ar(0.0, 10.0, 1.0),
            ar(-3.5, 7.25, 0.75),
            ar(1.0, 0.0, -0.1),
            ar(0.0, 100003.0, 1.0),
            ar(1e6, 1e6 + 3000.0, 0.37),
            ar(5.0, 5.0, 1.0),
        ],
        // u8 takes no negative bound (PyTorch rejects it)
        "linspace" if kind == ElementKind::U8 => vec![
            lin(2.7, 9.9, 5),
            lin(0.0, 100.0, 300),
            lin(100.0, 0.0, 7),
            lin(3.0, 9.0, 1),
            lin(0.0, 1.0, 0),
            lin(5.0, 250.0, 100003),
        ],
        "linspace" if int => vec![
            lin(-2.7, 9.9, 5),
            lin(0.0, 100.0, 300),
            lin(100.0, -100.0, 7),
            lin(3.0, 9.0, 1),
            lin(0.0, 1.0, 0),
            lin(-50.0, 120.0, 100003),
        ],
        "linspace" => vec![
            lin(0.0, 1.0, 4),
            lin(-5.0, 5.0, 11),
            lin(3.0, 9.0, 1),
            lin(0.0, 1.0, 0),
            lin(-3.3, 1000.7, 10007),
            lin(0.0, 1.0, 2049),
            lin(100.0, -100.0, 256),
            lin(-1e4, 1e4, 100003),
        ],
        _ => vec![
            log(0.0, 3.0, 4, 10.0),
            log(-2.0, 2.0, 101, 2.0),
            log(0.0, 1.0, 1000, std::f64::consts::E),
            log(-10.0, 10.0, 10007, 10.0),
            log(2.0, 5.0, 1, 3.0),
        ],
    }
}

fn check_case<T: Element>(op: RangeOp, n: usize, layout: usize) -> Result<(), String> {
    let g = gpu();
    let what = format!("{} {} {op:?} len {n} layout {layout}", op.name(), T::KIND);
    let desc = RangeDescriptor {
        op,
        element: T::KIND,
        len: n,
    };
    let plan = RangePlan::<T>::select(&g.stream, &desc, &PlanPreference::default())
        .map_err(|e| format!("{what}: {e}"))?;
    // layout 0 contiguous, 1 every other element, 2 one element in
    let (len, stride, off) = match layout {
        0 => (n, 1, 0),
        1 => (2 * n, 2, 0),
        _ => (n + 1, 1, 1),
    };
    let mut y = OutBuf::<T>::new(len);
    let yv = TensorMut::new(y.slice_mut(off), [n], [stride]).map_err(|e| format!("{what}: {e}"))?;
    plan.run(&g.stream, Workspace::None, RangeArgs { y: yv })
        .map_err(|e| format!("{what}: {e}"))?;
    let got = y.result(&what, off, &[n], &[stride])?;
    let want = reference::range(T::KIND, op, n).map_err(|e| format!("{what}: reference: {e}"))?;
    if matches!(op, RangeOp::Logspace { .. }) {
        // powf: a few ulp of f32 (f64: of f64), then rounded to T
        let rtol = match T::KIND {
            ElementKind::F64 => 8.0 * ElementKind::F64.unit_roundoff(),
            k => 16.0 * ElementKind::F32.unit_roundoff() + 2.0 * k.unit_roundoff(),
        };
        compare(&what, &got, &want, Tolerance { rtol, atol: 0.0 }, None)
    } else {
        identical(&what, &got, &want)
    }
}

fn check_op(which: &'static str, kind: ElementKind) -> Result<usize, String> {
    let mut n = 0;
    for (op, len) in cases(which, kind) {
        if small_mode() && len > small_elems() {
            continue;
        }
        for layout in 0..3 {
            crate::with_element!(kind, T => check_case::<T>(op, len, layout))?;
            n += 1;
        }
    }
    Ok(n)
}

pub fn check_arange(kind: ElementKind) -> Result<usize, String> {
    check_op("arange", kind)
}
pub fn check_linspace(kind: ElementKind) -> Result<usize, String> {
    check_op("linspace", kind)
}
pub fn check_logspace(kind: ElementKind) -> Result<usize, String> {
    check_op("logspace", kind)
}

fn range_unsupported(op: RangeOp, kind: ElementKind) -> Result<(), String> {
    let desc = RangeDescriptor {
        op,
        element: kind,
        len: 4,
    };
    crate::with_element!(kind, T => expect_unsupported::<RangePlan<T>>(op.name(), &desc))
}

pub fn arange_unsupported(kind: ElementKind) -> Result<(), String> {
    range_unsupported(
        RangeOp::Arange {
            start: 0.0,
            step: 1.0,
        },
        kind,
    )
}
pub fn linspace_unsupported(kind: ElementKind) -> Result<(), String> {
    range_unsupported(
        RangeOp::Linspace {
            start: 0.0,
            end: 1.0,
        },
        kind,
    )
}
pub fn logspace_unsupported(kind: ElementKind) -> Result<(), String> {
    range_unsupported(
        RangeOp::Logspace {
            start: 0.0,
            end: 1.0,
            base: 10.0,
        },
        kind,
    )
}

/// Bad inputs of the range plans: each returns its error and writes
/// nothing.
pub fn range_bad_inputs() -> Result<usize, String> {
    let g = gpu();
    let s = &g.stream;
    let pref = PlanPreference::default();
    let mut checked = 0;
    let lin = RangeOp::Linspace {
        start: 0.0,
        end: 1.0,
    };
    let r = RangePlan::<f32>::select(
        s,
        &RangeDescriptor {
            op: lin,
            element: ElementKind::F16,
            len: 4,
        },
        &pref,
    );
    expect_err("desc.element f16 for f32", r, dtype_mismatch)?;
    checked += 1;
    for (what, op, field) in [
        (
            "i8 linspace end 300",
            RangeOp::Linspace {
                start: 0.0,
                end: 300.0,
            },
            "end",
        ),
        (
            "i32 arange step 0.5",
            RangeOp::Arange {
                start: 0.0,
                step: 0.5,
            },
            "step",
        ),
        (
            "i32 linspace start NaN",
            RangeOp::Linspace {
                start: f64::NAN,
                end: 1.0,
            },
            "start",
        ),
    ] {
        let kind = if what.starts_with("i8") {
            ElementKind::I8
        } else {
            ElementKind::I32
        };
        let desc = RangeDescriptor {
            op,
            element: kind,
            len: 4,
        };
        let r =
            crate::with_element!(kind, T => RangePlan::<T>::select(s, &desc, &pref).map(|_| ()));
        expect_err(what, r, invalid_descriptor(field))?;
        checked += 1;
    }
    for (what, r) in [
        (
            "arange step 0",
            RangeDescriptor::arange(ElementKind::F32, 0.0, 1.0, 0.0),
        ),
        (
            "arange step sign",
            RangeDescriptor::arange(ElementKind::F32, 0.0, 1.0, -1.0),
        ),
    ] {
        expect_err(what, r.map(|_| ()), invalid_descriptor("step"))?;
        checked += 1;
    }
    let plan = RangePlan::<f32>::select(
        s,
        &RangeDescriptor {
            op: lin,
            element: ElementKind::F32,
            len: 64,
        },
        &pref,
    )
    .map_err(|e| e.to_string())?;
    let mut y = OutBuf::<f32>::new(65);
    let yv = TensorMut::contiguous(y.slice_mut(0), [65]).map_err(|e| e.to_string())?;
    let r = plan.run(s, Workspace::None, RangeArgs { y: yv });
    expect_err("y shape", r, shape_mismatch("y"))?;
    if !y.untouched()? {
        return Err("y shape: y was written".into());
    }
    checked += 1;
    Ok(checked)
}

/// eye over square, wide, tall, empty, transposed and strided views.
pub fn check_eye(kind: ElementKind) -> Result<usize, String> {
    crate::with_element!(kind, T => check_eye_kind::<T>())
}

fn check_eye_kind<T: Element>() -> Result<usize, String> {
    let g = gpu();
    let mut n = 0;
    for (rows, cols) in [(1, 1), (7, 7), (5, 9), (9, 5), (0, 3), (3, 0), (257, 1031)] {
        // row-major, column-major, every other element
        for layout in 0..3 {
            let what = format!("eye {} [{rows}, {cols}] layout {layout}", T::KIND);
            let (len, strides) = match layout {
                0 => (rows * cols, [cols, 1]),
                1 => (rows * cols, [1, rows]),
                _ => (2 * rows * cols, [2 * cols, 2]),
            };
            let plan = EyePlan::<T>::select(
                &g.stream,
                &EyeDescriptor {
                    element: T::KIND,
                    rows,
                    cols,
                },
                &PlanPreference::default(),
            )
            .map_err(|e| format!("{what}: {e}"))?;
            let mut y = OutBuf::<T>::new(len);
            let yv = TensorMut::new(y.slice_mut(0), [rows, cols], strides)
                .map_err(|e| format!("{what}: {e}"))?;
            plan.run(&g.stream, Workspace::None, EyeArgs { y: yv })
                .map_err(|e| format!("{what}: {e}"))?;
            let got = y.result(&what, 0, &[rows, cols], &strides)?;
            identical(&what, &got, &reference::eye(rows, cols))?;
            n += 1;
        }
    }
    Ok(n)
}

/// Every kind is claimed by eye; nothing is unsupported.
pub fn eye_unsupported(kind: ElementKind) -> Result<(), String> {
    Err(format!(
        "eye claims every kind; {kind} cannot be unsupported"
    ))
}

/// Bad inputs of eye.
pub fn eye_bad_inputs() -> Result<usize, String> {
    let g = gpu();
    let s = &g.stream;
    let pref = PlanPreference::default();
    let r = EyePlan::<f32>::select(
        s,
        &EyeDescriptor {
            element: ElementKind::Bf16,
            rows: 2,
            cols: 2,
        },
        &pref,
    );
    expect_err("desc.element bf16 for f32", r, dtype_mismatch)?;
    let plan = EyePlan::<f32>::select(
        s,
        &EyeDescriptor {
            element: ElementKind::F32,
            rows: 4,
            cols: 4,
        },
        &pref,
    )
    .map_err(|e| e.to_string())?;
    let mut y = OutBuf::<f32>::new(20);
    let yv = TensorMut::contiguous(y.slice_mut(0), [4, 5]).map_err(|e| e.to_string())?;
    let r = plan.run(s, Workspace::None, EyeArgs { y: yv });
    expect_err("y shape", r, shape_mismatch("y"))?;
    if !y.untouched()? {
        return Err("y shape: y was written".into());
    }
    Ok(2)
}
