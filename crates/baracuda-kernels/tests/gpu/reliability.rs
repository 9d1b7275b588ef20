//! Reliability tests over every family: plans shared by many threads, CUDA
//! graph capture, tensors past 2^31 elements, and faults (memory, missing
//! libraries, mixed contexts).
//!
//! Two lists drive them, and a new family adds to both:
//!
//! - the op table (`FAMILY_ROWS` in `main.rs`): every row is checked from
//!   [`STREAMS`] threads at once, each on a stream of its own
//!   ([`rows_checked_from_sixteen_threads`]);
//! - [`EXERCISES`] (`reliability/exercises.rs`): one set of plans per
//!   family, with its inputs on the device, that many threads share and
//!   that a graph captures ([`plans_shared_by_sixteen_threads`],
//!   [`graph_capture_replays_every_family`]); the faults run over it too.
//!
//! [`every_family_has_an_exercise`] and the `const` block of Send + Sync
//! assertions are host checks.

use std::process::Command;

use baracuda_driver::{ensure_loaded, CudaLib};
use baracuda_kernels::*;
use half::bf16;

use crate::harness::*;
use crate::table::Row;

mod exercises;

use exercises::{Exercise, Outs, EXERCISES};

// Every public plan type is `Send + Sync`: one plan serves many threads.
// Each new family adds its plan types here.
const _: () = {
    const fn send_sync<T: Send + Sync>() {}
    send_sync::<UnaryPlan<f32, 4>>();
    send_sync::<BinaryPlan<bf16, 4>>();
    send_sync::<PromotedBinaryPlan<bf16, f32, 4>>();
    send_sync::<PromotedBinaryPlan<f64, half::f16, 2>>();
    send_sync::<BinaryLogicPlan<bf16, bool, 4>>();
    send_sync::<BinaryLogicPlan<i32, i32, 2>>();
    send_sync::<UnaryLogicPlan<f32, bool, 3>>();
    send_sync::<TernaryPlan<f32, 3>>();
    send_sync::<WherePlan<half::f16, 2>>();
    send_sync::<GatedPlan<bf16, 2>>();
    send_sync::<FillPlan<f64, 3>>();
    send_sync::<RangePlan<f32>>();
    send_sync::<EyePlan<bf16>>();
    send_sync::<Conv1dPlan<f32>>();
    send_sync::<Conv2dPlan<half::f16>>();
    send_sync::<Conv3dPlan<f64>>();
    send_sync::<ConvTransposePlan<f32, 2, 4>>();
    send_sync::<MaxPool2dPlan<f32>>();
    send_sync::<AvgPool3dPlan<bf16>>();
    send_sync::<AdaptiveAvgPool2dPlan<f32>>();
    send_sync::<AdaptiveMaxPool1dPlan<f32>>();
    send_sync::<LpPool2dPlan<f32>>();
    send_sync::<GemmPlan<f32>>();
    send_sync::<GemmPlan<bf16, f32>>();
    send_sync::<BatchedGemmPlan<half::f16>>();
    send_sync::<GroupedGemmPlan<bf16>>();
    send_sync::<IntGemmPlan<i32>>();
    send_sync::<Fp8GemmPlan<float8::F8E4M3, float8::F8E4M3, bf16>>();
    send_sync::<LinearPlan<f32>>();
    send_sync::<ReducePlan<f32, 4, 2>>();
    send_sync::<ArgReducePlan<f32, 4, 3>>();
    send_sync::<LogicalReducePlan<half::bf16, bool, 3, 1>>();
    send_sync::<LogicalReducePlan<f32, i64, 2, 0>>();
    send_sync::<ScanPlan<f32, 4>>();
    send_sync::<VarMeanPlan<half::bf16, 3, 1>>();
    send_sync::<TracePlan<f32>>();
    send_sync::<SoftmaxPlan<bf16, 3>>();
    send_sync::<SoftmaxPlan<half::f16, 2, f32>>();
    send_sync::<GumbelSoftmaxPlan<bf16, 2>>();
    send_sync::<SparsemaxPlan<f32, 3>>();
    send_sync::<LayerNormPlan<f32, 3, 2>>();
    send_sync::<RmsNormPlan<half::bf16, 2>>();
    send_sync::<GroupNormPlan<half::bf16, 4>>();
    send_sync::<BatchNormPlan<half::bf16, 4, f32>>();
    send_sync::<BatchNormPlan<f64, 2>>();
    send_sync::<LocalResponseNormPlan<bf16, 4>>();
    send_sync::<RopePlan<bf16>>();
    send_sync::<SdpaPlan<bf16>>();
    send_sync::<CastPlan<f32, bf16, 2>>();
    send_sync::<CastPlan<bf16, float8::F8E4M3, 1>>();
    send_sync::<ShapePlan<f32, 3>>();
    send_sync::<CatPlan<bf16, 2>>();
    send_sync::<StackPlan<f32, 2, 3>>();
    send_sync::<LayoutPlan<f32, 2, 3>>();
    send_sync::<LayoutPlan<bf16, 3, 2>>();
};

/// Iterations each thread runs in the concurrency tests.
const ITERATIONS: usize = 25;
/// Replays of each captured graph.
const REPLAYS: usize = 100;

/// [`REPLAYS`], or 2 in small-shapes mode (under a sanitizer, which checks
/// the accesses of the first replay as closely as of the hundredth).
fn replays() -> usize {
    if small_mode() {
        2
    } else {
        REPLAYS
    }
}

fn msg(e: impl std::fmt::Display) -> String {
    e.to_string()
}

// ---------------------------------------------------------------------------
// Every table row from many threads
// ---------------------------------------------------------------------------

/// The dtype a reliability test runs a row in: f32 when the row claims it.
fn row_kind(row: &dyn Row) -> ElementKind {
    if row.dtypes().contains(&ElementKind::F32) {
        ElementKind::F32
    } else {
        row.dtypes()[0]
    }
}

/// [`Row::check_one`] of `row` from [`STREAMS`] threads at once, each on
/// its own stream, twice each: every run must pass the row's comparison
/// with its reference (selects, JIT and library caches, uploads, runs and
/// downloads all concurrent).
fn check_concurrently(row: &dyn Row) -> Result<(), String> {
    let kind = row_kind(row);
    row.check_one(kind)?;
    let failures: Vec<String> = std::thread::scope(|sc| {
        let threads: Vec<_> = streams()
            .iter()
            .map(|g| {
                sc.spawn(move || {
                    on_stream(g, || (0..2).try_for_each(|_| row.check_one(kind).map(drop)))
                })
            })
            .collect();
        threads
            .into_iter()
            .enumerate()
            .filter_map(|(i, t)| match t.join() {
                Ok(Ok(())) => None,
                Ok(Err(e)) => Some(format!("thread {i}: {e}")),
                Err(_) => Some(format!("thread {i} panicked")),
            })
            .collect()
    });
    if failures.is_empty() {
        Ok(())
    } else {
        Err(failures.join("\n"))
    }
}

/// Every row of the op table, checked from sixteen threads at once.
#[test]
#[ignore = "needs a CUDA GPU"]
fn rows_checked_from_sixteen_threads() {
    let mut failures = Vec::new();
    for (family, rows) in crate::FAMILY_ROWS {
        for row in *rows {
            if let Err(e) = check_concurrently(*row) {
                failures.push(format!("{family} {}: {e}", row.name()));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

// ---------------------------------------------------------------------------
// One exercise per family: shared plans, graph capture
// ---------------------------------------------------------------------------

/// One eager run of `ex` on `stream` into fresh outputs: the bits every
/// other run must reproduce. Fails when an output kept poison.
fn eager(ex: &dyn Exercise, stream: &Stream) -> Result<Vec<Vec<u32>>, String> {
    let mut out = Outs::new(stream, ex).map_err(msg)?;
    ex.enqueue(stream, &mut out).map_err(msg)?;
    let bits = out.bits(stream).map_err(msg)?;
    for (i, b) in bits.iter().enumerate() {
        if let Some(j) = b.iter().position(|v| f32::from_bits(*v).is_nan()) {
            return Err(format!("output {i}: element {j} was not written"));
        }
    }
    Ok(bits)
}

/// `Ok` when `got` is `want` bit for bit; else names the first difference.
fn same_bits(what: &str, got: &[Vec<u32>], want: &[Vec<u32>]) -> Result<(), String> {
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        if let Some(j) = (0..g.len()).find(|&j| g[j] != w[j]) {
            return Err(format!(
                "{what}: output {i} element {j} is {:e}, eagerly {:e}",
                f32::from_bits(g[j]),
                f32::from_bits(w[j])
            ));
        }
    }
    Ok(())
}

/// `f(family, exercise)` for every exercise; panics with every failure.
fn each_exercise(f: impl Fn(&str, &dyn Exercise) -> Result<(), String>) {
    let failures: Vec<String> = EXERCISES
        .iter()
        .filter_map(|e| {
            let r = (e.make)()
                .map_err(|err| format!("select: {err}"))
                .and_then(|ex| f(e.family, ex.as_ref()));
            r.err().map(|err| format!("{}: {err}", e.family))
        })
        .collect();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Sixteen threads share each family's plans, each on its own stream with
/// its own outputs, for [`ITERATIONS`] runs; every run gives the bits of
/// one eager run.
#[test]
#[ignore = "needs a CUDA GPU"]
fn plans_shared_by_sixteen_threads() {
    each_exercise(|_, ex| {
        let want = eager(ex, &gpu().stream)?;
        let want = &want;
        std::thread::scope(|sc| {
            let threads: Vec<_> = streams()
                .iter()
                .map(|g| {
                    sc.spawn(move || -> Result<(), String> {
                        let s = &g.stream;
                        let mut out = Outs::new(s, ex).map_err(msg)?;
                        for i in 0..ITERATIONS {
                            out.poison(s).map_err(msg)?;
                            ex.enqueue(s, &mut out).map_err(msg)?;
                            same_bits(&format!("run {i}"), &out.bits(s).map_err(msg)?, want)?;
                        }
                        Ok(())
                    })
                })
                .collect();
            threads.into_iter().enumerate().try_for_each(|(i, t)| {
                t.join()
                    .map_err(|_| format!("thread {i} panicked"))?
                    .map_err(|e| format!("thread {i}: {e}"))
            })
        })
    });
}

/// Each family's plans captured into one CUDA graph and replayed
/// [`replays`] times, the outputs poisoned before each replay; every replay
/// gives the bits of the eager run. The capture is in thread-local mode: a
/// synchronizing or allocating call inside `run` fails it (global mode
/// would also fail the tests that allocate on other threads meanwhile).
#[test]
#[ignore = "needs a CUDA GPU"]
fn graph_capture_replays_every_family() {
    // A stream of its own: work another test enqueued on a capturing
    // stream would join the capture.
    let s = &Stream::new(&gpu().ctx).unwrap();
    each_exercise(|_, ex| {
        let want = eager(ex, s)?;
        let mut out = Outs::new(s, ex).map_err(msg)?;
        s.synchronize().map_err(msg)?;
        s.begin_capture().map_err(msg)?;
        let enqueued = ex.enqueue(s, &mut out);
        let graph = s.end_capture();
        enqueued.map_err(|e| format!("run under capture: {e}"))?;
        let graph = graph.map_err(|e| format!("capture: {e}"))?;
        for r in 0..replays() {
            out.poison(s).map_err(msg)?;
            graph.launch().map_err(msg)?;
            same_bits(&format!("replay {r}"), &out.bits(s).map_err(msg)?, &want)?;
        }
        Ok(())
    });
}

/// Every registered family has an exercise in [`EXERCISES`].
#[test]
fn every_family_has_an_exercise() {
    for family in baracuda_kernels::FAMILIES {
        assert!(
            EXERCISES.iter().any(|e| e.family == family.name),
            "family {} has no exercise in reliability/exercises.rs",
            family.name
        );
    }
}

// ---------------------------------------------------------------------------
// Tensors past 2^31 elements
// ---------------------------------------------------------------------------

/// Elements of the large tensors: 5 * 2^30 (past 2^31 and 2^32), 10.7 GB
/// each in bf16.
const LARGE: usize = 5 << 30;

/// Positions around every 32-bit boundary of a [`LARGE`] tensor, where
/// the large-tensor test writes distinct values and reads results back.
fn large_marks() -> Vec<usize> {
    let mut v = vec![0, 1, LARGE - 2, LARGE - 1];
    for edge in [1usize << 31, 1 << 32] {
        v.extend([edge - 2, edge - 1, edge, edge + 1]);
    }
    v.extend([(1 << 31) + 12_345, (1 << 32) + 777_777]);
    v
}

/// The marks are distinct positions inside the large tensors, around
/// both 32-bit boundaries.
#[test]
fn large_marks_lie_inside() {
    let marks = large_marks();
    let distinct: std::collections::HashSet<_> = marks.iter().collect();
    assert_eq!(distinct.len(), marks.len());
    assert!(marks.iter().all(|&m| m < LARGE));
    assert!(marks.contains(&(1 << 31)) && marks.contains(&(1 << 32)));
}

/// `buf` filled with the bf16 whose two bytes are 0x3F (0.74609375), and
/// the marks set to `mark(k)` for the k-th mark. Returns the values at the
/// marks.
fn large_input(
    s: &Stream,
    marks: &[usize],
    mark: impl Fn(usize) -> f64,
) -> Result<(DeviceBuffer<bf16>, Vec<f64>)> {
    let mut buf = DeviceBuffer::<bf16>::filled_bytes(s, LARGE, 0x3F)?;
    let mut at = Vec::new();
    for (k, &i) in marks.iter().enumerate() {
        let v = bf16::from_f64(mark(k));
        buf.write_at(s, i, &[v])?;
        at.push(v.to_f64());
    }
    Ok((buf, at))
}

/// The fill value of [`large_input`].
const FILL: f64 = 0.746_093_75;

/// An elementwise sum with a broadcast scalar over 5 * 2^30 bf16 elements
/// (linear indices past 2^31 and 2^32): the forward at every mark and at
/// seeded random positions; the backward's `da` (a copy of `dy`) at the
/// same places, and its `db`, a reduction of all 5 * 2^30 elements of
/// `dy`, against the exact sum.
#[test]
#[ignore = "needs a CUDA GPU"]
fn binary_past_2_31_elements() {
    let s = &gpu().stream;
    let marks = large_marks();
    let mut rng = Rng::new(31);
    let mut probes = marks.clone();
    probes.extend((0..64).map(|_| rng.below(LARGE as u64) as usize));
    let desc = BinaryDescriptor {
        op: BinaryOp::Add,
        element: ElementKind::Bf16,
        a_shape: [LARGE],
        b_shape: [1],
    };
    let plan = BinaryPlan::<bf16, 1>::select(s, &desc, &PlanPreference::default()).unwrap();
    let (a, a_marks) = large_input(s, &marks, |k| 1.0 + k as f64 / 8.0).unwrap();
    let b = DeviceBuffer::from_host(s, &[bf16::from_f64(0.25)]).unwrap();
    let value =
        |vals: &[f64], i: usize| marks.iter().position(|&m| m == i).map_or(FILL, |k| vals[k]);
    let read = |buf: &DeviceBuffer<bf16>, i: usize| buf.read_at(s, i, 1).unwrap()[0].to_f64();

    let mut out = DeviceBuffer::<bf16>::filled_bytes(s, LARGE, 0xFF).unwrap();
    plan.run(
        s,
        Workspace::None,
        BinaryArgs {
            a: TensorRef::contiguous(a.as_slice(), [LARGE]).unwrap(),
            b: TensorRef::contiguous(b.as_slice(), [1]).unwrap(),
            out: TensorMut::contiguous(out.as_slice_mut(), [LARGE]).unwrap(),
        },
    )
    .unwrap();
    for &i in &probes {
        // Every sum is exact in bf16: 0.99609375, or 1.25 + k / 8.
        assert_eq!(read(&out, i), value(&a_marks, i) + 0.25, "out[{i}]");
    }
    drop(out);

    let (dy, dy_marks) = large_input(s, &marks, |k| -(k as f64 + 1.0) / 4.0).unwrap();
    let mut da = DeviceBuffer::<bf16>::filled_bytes(s, LARGE, 0xFF).unwrap();
    let mut db = DeviceBuffer::<bf16>::filled_bytes(s, 1, 0xFF).unwrap();
    let mut ws = workspace(plan.bw_workspace_size(Grad::A | Grad::B));
    plan.run_bw(
        s,
        Workspace::Borrowed(ws.as_slice_mut()),
        BinaryBwArgs {
            a: TensorRef::contiguous(a.as_slice(), [LARGE]).unwrap(),
            b: TensorRef::contiguous(b.as_slice(), [1]).unwrap(),
            dy: TensorRef::contiguous(dy.as_slice(), [LARGE]).unwrap(),
            da: Some(TensorMut::contiguous(da.as_slice_mut(), [LARGE]).unwrap()),
            db: Some(TensorMut::contiguous(db.as_slice_mut(), [1]).unwrap()),
        },
    )
    .unwrap();
    for &i in &probes {
        assert_eq!(read(&da, i), value(&dy_marks, i), "da[{i}]");
    }
    let sum = (LARGE - marks.len()) as f64 * FILL + dy_marks.iter().sum::<f64>();
    compare(
        "db, the sum of 5 * 2^30 elements",
        &[read(&db, 0)],
        &[sum],
        Tolerance {
            rtol: 2.0 * ElementKind::Bf16.unit_roundoff() + 1e-4,
            atol: 0.0,
        },
        None,
    )
    .unwrap();
}

// ---------------------------------------------------------------------------
// Faults
// ---------------------------------------------------------------------------

/// A buffer larger than the device (as a plan's output, or as its
/// workspace) is `OutOfMemory` from the allocating call; the device keeps
/// working after it.
#[test]
#[ignore = "needs a CUDA GPU"]
fn allocation_beyond_memory_is_out_of_memory() {
    let g = gpu();
    let (_, total) = g.ctx.memory_info().unwrap();
    let bytes = total + (1 << 30);
    match DeviceBuffer::<u8>::uninit(&g.stream, bytes) {
        Err(Error::OutOfMemory { bytes: b, .. }) => assert_eq!(b, bytes),
        other => panic!("workspace of {bytes} bytes: {:?}", other.map(|_| ())),
    }
    let elems = bytes / 4;
    match DeviceBuffer::<f32>::filled_bytes(&g.stream, elems, 0xFF) {
        Err(Error::OutOfMemory { bytes: b, .. }) => assert_eq!(b, elems * 4),
        other => panic!("output of {elems} f32: {:?}", other.map(|_| ())),
    }
    each_exercise(|_, ex| eager(ex, &g.stream).map(drop));
}

/// Names of the variable through which [`missing_library_child`] learns
/// which library its parent made unloadable.
const HIDDEN_VAR: &str = "BARACUDA_TEST_HIDDEN_LIBRARY";

/// The libraries a process can lose, with the name `LibraryNotFound`
/// gives each.
const LOSABLE: [(CudaLib, &str); 2] = [(CudaLib::Cudnn, "cudnn"), (CudaLib::CublasLt, "cublasLt")];

/// Rows that need a library their family's exercise does not.
const ROW_LIBRARIES: [(&str, CudaLib); 1] = [("attention_sdpa", CudaLib::Cudnn)];

/// With cuDNN, then cuBLASLt, unloadable (its `BARACUDA_<LIB>_LIBRARY`
/// naming a file that does not exist), a child process of this test binary
/// runs [`missing_library_child`]: the families that need the library get
/// `LibraryNotFound` from `select`, the others keep working.
#[test]
#[ignore = "needs a CUDA GPU"]
fn missing_library_is_an_error() {
    let exe = std::env::current_exe().unwrap();
    for (lib, name) in LOSABLE {
        let out = Command::new(&exe)
            .args(["--ignored", "--exact", "reliability::missing_library_child"])
            .args(["--test-threads", "1", "--nocapture"])
            .env(
                lib.override_var(),
                "/nonexistent/baracuda-hidden-library.so",
            )
            .env(HIDDEN_VAR, name)
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.success() && stdout.contains("1 passed"),
            "{name} hidden: the child failed\n{stdout}\n{stderr}"
        );
    }
}

/// The child of [`missing_library_is_an_error`]. Run alone (its variable
/// unset), it checks that both libraries load, which the parent's test
/// presumes.
#[test]
#[ignore = "needs a CUDA GPU"]
fn missing_library_child() {
    let Ok(hidden) = std::env::var(HIDDEN_VAR) else {
        for (lib, _) in LOSABLE {
            ensure_loaded(lib).unwrap();
        }
        return;
    };
    let (lib, name) = LOSABLE
        .into_iter()
        .find(|(_, n)| *n == hidden)
        .unwrap_or_else(|| panic!("{HIDDEN_VAR}={hidden} names no library"));
    let mut failures = Vec::new();
    for e in EXERCISES {
        let r = (e.make)();
        match (e.libraries.contains(&lib), r) {
            (true, Err(Error::LibraryNotFound { lib: l, .. })) if l == name => {}
            (true, r) => failures.push(format!(
                "{}: select without {name}: {:?}",
                e.family,
                r.map(|_| ())
            )),
            (false, Ok(ex)) => {
                if let Err(err) = eager(ex.as_ref(), &gpu().stream) {
                    failures.push(format!("{} without {name}: {err}", e.family));
                }
            }
            (false, Err(err)) => failures.push(format!("{} without {name}: {err}", e.family)),
        }
    }
    // The rows of families that need no library besides NVRTC still pass;
    // a row of such a family that does need the hidden one (SDPA in the
    // attention family) gets `LibraryNotFound`.
    for (family, rows) in crate::FAMILY_ROWS {
        let needs = EXERCISES
            .iter()
            .find(|e| e.family == *family)
            .is_none_or(|e| !e.libraries.is_empty());
        if needs {
            continue;
        }
        for row in *rows {
            let needs_hidden = ROW_LIBRARIES
                .iter()
                .any(|(r, l)| *r == row.name() && *l == lib);
            match (row.check_one(row_kind(*row)), needs_hidden) {
                (Ok(_), false) => {}
                (Err(err), true)
                    if err.contains(&format!("could not load the CUDA library {name}")) => {}
                (r, _) => failures.push(format!(
                    "{family} {} without {name}: {:?}",
                    row.name(),
                    r.map(|_| ())
                )),
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// A plan selected on the shared (primary) context and run on a stream of
/// a second context is `ContextMismatch`, with its outputs there and with
/// every family's exercise, and writes nothing.
#[test]
#[ignore = "needs a CUDA GPU"]
fn plan_on_another_context_is_rejected() {
    let other = Context::new_non_primary(gpu().ctx.device()).unwrap();
    let s = Stream::new(&other).unwrap();
    let mismatch = |e: &Error| matches!(e, Error::ContextMismatch { .. });

    // Every operand on the stream's context: the plan's own context differs.
    let desc = UnaryDescriptor {
        op: UnaryOp::Exp,
        element: ElementKind::F32,
        shape: [1000],
    };
    let plan =
        UnaryPlan::<f32, 1>::select(&gpu().stream, &desc, &PlanPreference::default()).unwrap();
    let x = DeviceBuffer::<f32>::zeros(&s, 1000).unwrap();
    let mut y = DeviceBuffer::<f32>::filled_bytes(&s, 1000, 0xFF).unwrap();
    let r = plan.run(
        &s,
        Workspace::None,
        UnaryArgs {
            x: TensorRef::contiguous(x.as_slice(), [1000]).unwrap(),
            y: TensorMut::contiguous(y.as_slice_mut(), [1000]).unwrap(),
        },
    );
    expect_err("unary plan on another context's stream", r, mismatch).unwrap();
    assert!(
        y.to_host(&s).unwrap().iter().all(|v| v.is_nan()),
        "the rejected run wrote its output"
    );

    each_exercise(|_, ex| {
        let mut out = Outs::new(&s, ex).map_err(msg)?;
        expect_err(
            "run on another context's stream",
            ex.enqueue(&s, &mut out),
            mismatch,
        )?;
        let bits = out.bits(&s).map_err(msg)?;
        match bits
            .iter()
            .flatten()
            .find(|v| !f32::from_bits(**v).is_nan())
        {
            None => Ok(()),
            Some(v) => Err(format!("the rejected run wrote {}", f32::from_bits(*v))),
        }
    });
}

/// Name of the variable that makes [`operand_context_child`] probe.
const PROBE_VAR: &str = "BARACUDA_TEST_CONTEXT_PROBE";

/// Allocations probed per row: the operands of its first samples.
const PROBES_PER_ROW: usize = 16;

/// Every operand of every row on another context is `ContextMismatch`:
/// [`operand_context_child`] in a child process of this test binary (a
/// plan that took the operand would fault the context, which must not end
/// the rest of the suite).
#[test]
#[ignore = "needs a CUDA GPU"]
fn operands_on_another_context_are_rejected() {
    let exe = std::env::current_exe().unwrap();
    let out = Command::new(&exe)
        .args(["--ignored", "--exact", "reliability::operand_context_child"])
        .args(["--test-threads", "1", "--nocapture"])
        .env(PROBE_VAR, "1")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && stdout.contains("1 passed"),
        "the child failed\n{stdout}\n{}",
        stderr
            .lines()
            .filter(|l| !l.starts_with("thread ") && !l.starts_with("note: "))
            .collect::<Vec<_>>()
            .join("\n")
    );
    eprintln!(
        "{}",
        stderr
            .lines()
            .filter(|l| l.starts_with("context probe"))
            .collect::<Vec<_>>()
            .join("\n")
    );
}

/// The probes of one row: its [`Row::check_one`] run again with each of
/// its first [`PROBES_PER_ROW`] harness allocations on another context
/// ([`with_foreign_allocation`]), each of which must fail with
/// `ContextMismatch`. How many were probed, or the failures.
fn probe_row(row: &dyn Row) -> Result<usize, String> {
    let kind = row_kind(row);
    let mut failures = Vec::new();
    let mut probed = 0;
    for k in 0..PROBES_PER_ROW {
        let (r, moved) = with_foreign_allocation(k, || row.check_one(kind));
        let Some(moved) = moved else {
            if let Ok(Err(e)) | Err(e) = r {
                failures.push(format!("with no operand moved: {e}"));
            }
            break;
        };
        probed += 1;
        let message = match r {
            Ok(Ok(_)) => {
                failures.push(format!("{moved} on another context: the checks passed"));
                continue;
            }
            Ok(Err(e)) | Err(e) => e,
        };
        let mismatch = message.contains("lives on a different CUDA context than the stream")
            || message.contains("ContextMismatch");
        if !mismatch {
            let short: String = message.chars().take(400).collect();
            failures.push(format!("{moved} on another context: {short}"));
        }
    }
    if probed == 0 && failures.is_empty() {
        failures.push("the row allocates nothing through the harness".into());
    }
    if failures.is_empty() {
        Ok(probed)
    } else {
        Err(failures.join("\n  "))
    }
}

/// The child of [`operands_on_another_context_are_rejected`]: every row
/// probed by [`probe_row`], rows spread over eight threads (each on a
/// stream of its own). Run alone (its variable unset), it checks the
/// premise: the second context is another context of the same device.
#[test]
#[ignore = "needs a CUDA GPU"]
fn operand_context_child() {
    assert_ne!(other_gpu().ctx.id(), gpu().ctx.id());
    assert_eq!(other_gpu().ctx.device().ordinal, gpu().ctx.device().ordinal);
    if std::env::var(PROBE_VAR).is_err() {
        return;
    }
    let rows: Vec<(&str, &dyn Row)> = crate::FAMILY_ROWS
        .iter()
        .flat_map(|(family, rows)| rows.iter().map(move |r| (*family, *r)))
        .collect();
    let next = std::sync::atomic::AtomicUsize::new(0);
    let results: Vec<(String, Result<usize, String>)> = std::thread::scope(|sc| {
        let workers: Vec<_> = streams()[..8]
            .iter()
            .map(|g| {
                let (rows, next) = (&rows, &next);
                sc.spawn(move || {
                    let mut done = Vec::new();
                    loop {
                        let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        let Some((family, row)) = rows.get(i) else {
                            return done;
                        };
                        let r = on_stream(g, || probe_row(*row));
                        done.push((format!("{family} {}", row.name()), r));
                    }
                })
            })
            .collect();
        workers
            .into_iter()
            .flat_map(|w| w.join().expect("a probe thread panicked"))
            .collect()
    });
    let probed: usize = results.iter().filter_map(|(_, r)| r.as_ref().ok()).sum();
    let failures: Vec<String> = results
        .iter()
        .filter_map(|(name, r)| r.as_ref().err().map(|e| format!("{name}:\n  {e}")))
        .collect();
    eprintln!(
        "context probe: {} rows, {probed} operands moved to another context, {} rows failed",
        results.len(),
        failures.len()
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
