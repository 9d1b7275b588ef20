//! Quickstart: allocate tensors, run a few plans forward and backward,
//! check them against the f64 reference, and show where the time goes on a
//! cold and on a warm kernel cache.
//!
//! `cargo run --release --example quickstart` on a machine with an NVIDIA
//! GPU (driver, NVRTC and CUDA headers found as the README says; `baracuda
//! doctor` checks them). Options:
//!
//! - `--cold`: use a fresh, empty kernel cache directory, so the first
//!   selection compiles every kernel with NVRTC;
//! - `--verbose`: print baracuda's progress messages (each compile, each
//!   autotuning run), which go through the `log` crate.

use std::process::ExitCode;
use std::time::Instant;

use baracuda_kernels::reference::elementwise as reference;
use baracuda_kernels::*;

/// Prints `log` records at info level and above to stderr.
struct StderrLogger;

impl log::Log for StderrLogger {
    fn enabled(&self, metadata: &log::Metadata<'_>) -> bool {
        metadata.level() <= log::Level::Info
    }
    fn log(&self, record: &log::Record<'_>) {
        if self.enabled(record.metadata()) {
            eprintln!("[{}] {}", record.level(), record.args());
        }
    }
    fn flush(&self) {}
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.iter().any(|a| a == "--verbose") {
        static LOGGER: StderrLogger = StderrLogger;
        if log::set_logger(&LOGGER).is_ok() {
            log::set_max_level(log::LevelFilter::Info);
        }
    }
    if args.iter().any(|a| a == "--cold") {
        let dir = std::env::temp_dir().join(format!("baracuda-cold-{}", std::process::id()));
        // Set before any thread starts; the JIT reads it on each lookup.
        std::env::set_var("BARACUDA_CACHE_DIR", &dir);
        println!("kernel cache: {} (empty)", dir.display());
    }
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Select the two plans on `stream` and say how long it took and where
/// the kernels came from.
fn select(
    stream: &Stream,
    udesc: &UnaryDescriptor<2>,
    bdesc: &BinaryDescriptor<2>,
    label: &str,
) -> Result<(UnaryPlan<f32, 2>, BinaryPlan<f32, 2>)> {
    let pref = PlanPreference::default();
    let before = baracuda_kernels::jit_stats();
    let t = Instant::now();
    let plans = (
        UnaryPlan::<f32, 2>::select(stream, udesc, &pref)?,
        BinaryPlan::<f32, 2>::select(stream, bdesc, &pref)?,
    );
    let ms = t.elapsed().as_secs_f64() * 1e3;
    let after = baracuda_kernels::jit_stats();
    println!(
        "{label}: {ms:8.2} ms ({} modules compiled by NVRTC, {} loaded from the disk cache)",
        after.compiles - before.compiles,
        after.disk_hits - before.disk_hits
    );
    Ok(plans)
}

/// GPU time of the work `enqueue` puts on `stream`, between two events.
fn timed(stream: &Stream, enqueue: impl FnOnce() -> Result<()>) -> Result<f32> {
    let (e0, e1) = (Event::new(stream.context())?, Event::new(stream.context())?);
    e0.record(stream)?;
    enqueue()?;
    e1.record(stream)?;
    stream.synchronize()?;
    e0.elapsed_ms(&e1)
}

fn run() -> std::result::Result<(), Box<dyn std::error::Error>> {
    let t_start = Instant::now();
    let device = Device::get(0)?;
    let ctx = Context::new(&device)?;
    let stream = Stream::new(&ctx)?;
    println!(
        "device: {} ({}, {} SMs); driver and context ready in {:.0} ms",
        device.name,
        device.arch,
        device.sm_count,
        t_start.elapsed().as_secs_f64() * 1e3
    );

    // h = gelu_tanh(x); y = h * w (w broadcast over rows)
    let (rows, cols) = (1024usize, 4096usize);
    let x_host: Vec<f32> = (0..rows * cols)
        .map(|i| ((i * 7919 % 1000) as f32 / 250.0) - 2.0)
        .collect();
    let w_host: Vec<f32> = (0..cols).map(|j| 0.5 + (j % 13) as f32 / 13.0).collect();
    let x = DeviceBuffer::from_host(&stream, &x_host)?;
    let w = DeviceBuffer::from_host(&stream, &w_host)?;
    let mut h = DeviceBuffer::<f32>::zeros(&stream, rows * cols)?;
    let mut y = DeviceBuffer::<f32>::zeros(&stream, rows * cols)?;

    let udesc = UnaryDescriptor {
        op: UnaryOp::GeluTanh,
        element: ElementKind::F32,
        shape: [rows, cols],
    };
    let bdesc = BinaryDescriptor {
        op: BinaryOp::Mul,
        element: ElementKind::F32,
        a_shape: [rows, cols],
        b_shape: [1, cols],
    };
    // Where selection time goes: the first select in a process compiles
    // each kernel (cold disk cache) or loads its cubin (warm); a new
    // context loads from the disk cache; the same context again finds the
    // loaded module in memory.
    println!("plan selection (gelu_tanh + broadcast mul):");
    let (gelu, mul) = select(&stream, &udesc, &bdesc, "  first select     ")?;
    {
        let ctx2 = Context::new(&device)?;
        let stream2 = Stream::new(&ctx2)?;
        select(&stream2, &udesc, &bdesc, "  new context      ")?;
    }
    select(&stream, &udesc, &bdesc, "  same context     ")?;
    println!("  {}\n  {}", gelu.sku(), mul.sku());

    let forward_ms = timed(&stream, || {
        gelu.run(
            &stream,
            Workspace::None,
            UnaryArgs {
                x: TensorRef::contiguous(x.as_slice(), [rows, cols])?,
                y: TensorMut::contiguous(h.as_slice_mut(), [rows, cols])?,
            },
        )?;
        mul.run(
            &stream,
            Workspace::None,
            BinaryArgs {
                a: TensorRef::contiguous(h.as_slice(), [rows, cols])?,
                b: TensorRef::contiguous(w.as_slice(), [1, cols])?,
                out: TensorMut::contiguous(y.as_slice_mut(), [rows, cols])?,
            },
        )
    })?;
    println!(
        "forward (gelu_tanh + broadcast mul, {} elements): {forward_ms:.3} ms",
        rows * cols
    );

    // backward with dy = 1: dw = sum over rows of h, dh = w, dx = dh * gelu'(x)
    let dy = DeviceBuffer::from_host(&stream, &vec![1.0f32; rows * cols])?;
    let mut dh = DeviceBuffer::<f32>::zeros(&stream, rows * cols)?;
    let mut dw = DeviceBuffer::<f32>::zeros(&stream, cols)?;
    let mut dx = DeviceBuffer::<f32>::zeros(&stream, rows * cols)?;
    let ws_bytes = mul.bw_workspace_size(Grad::A | Grad::B);
    let mut ws = DeviceBuffer::<u8>::zeros(&stream, ws_bytes)?;
    let backward_ms = timed(&stream, || {
        let workspace = if ws_bytes > 0 {
            Workspace::Borrowed(ws.as_slice_mut())
        } else {
            Workspace::None
        };
        mul.run_bw(
            &stream,
            workspace,
            BinaryBwArgs {
                a: TensorRef::contiguous(h.as_slice(), [rows, cols])?,
                b: TensorRef::contiguous(w.as_slice(), [1, cols])?,
                dy: TensorRef::contiguous(dy.as_slice(), [rows, cols])?,
                da: Some(TensorMut::contiguous(dh.as_slice_mut(), [rows, cols])?),
                db: Some(TensorMut::contiguous(dw.as_slice_mut(), [1, cols])?),
            },
        )?;
        gelu.run_bw(
            &stream,
            Workspace::None,
            UnaryBwArgs {
                x: TensorRef::contiguous(x.as_slice(), [rows, cols])?,
                dy: TensorRef::contiguous(dh.as_slice(), [rows, cols])?,
                dx: TensorMut::contiguous(dx.as_slice_mut(), [rows, cols])?,
            },
        )
    })?;
    println!("backward (mul bw with row reduction + gelu_tanh bw): {backward_ms:.3} ms");

    // Check against the f64 reference.
    let f = |v: Vec<f32>| v.into_iter().map(f64::from).collect::<Vec<_>>();
    let xs = f(x_host);
    let ws_ = f(w_host);
    let hs = reference::unary(UnaryOp::GeluTanh, &xs);
    let ys = reference::binary(BinaryOp::Mul, &hs, &[rows, cols], &ws_, &[1, cols]);
    let g = reference::binary_backward(
        BinaryOp::Mul,
        &hs,
        &[rows, cols],
        &ws_,
        &[1, cols],
        &vec![1.0; rows * cols],
    );
    let dxs = reference::unary_backward(UnaryOp::GeluTanh, &xs, &g.da);
    let rel = |got: &[f64], want: &[f64]| {
        let num: f64 = got.iter().zip(want).map(|(a, b)| (a - b) * (a - b)).sum();
        let den: f64 = want.iter().map(|b| b * b).sum();
        (num / den.max(1e-300)).sqrt()
    };
    let errs = [
        ("y", rel(&f(y.to_host(&stream)?), &ys)),
        ("dw", rel(&f(dw.to_host(&stream)?), &g.db)),
        ("dx", rel(&f(dx.to_host(&stream)?), &dxs)),
    ];
    let mut ok = true;
    for (name, e) in errs {
        let pass = e < 1e-5;
        ok &= pass;
        println!(
            "{name}: relative L2 error vs f64 reference {e:.2e} {}",
            if pass { "ok" } else { "MISMATCH" }
        );
    }
    println!(
        "total wall time {:.0} ms",
        t_start.elapsed().as_secs_f64() * 1e3
    );
    if !ok {
        return Err("results do not match the reference".into());
    }
    println!("all results match the reference");
    Ok(())
}
