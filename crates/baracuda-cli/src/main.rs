//! The `baracuda` command.
//!
//! `baracuda doctor` reports what baracuda finds on this machine: the GPU
//! driver and its CUDA version, each GPU, NVRTC, the CUDA headers,
//! cuBLASLt and cuDNN (path and version), and the kernel cache; then it
//! compiles and runs one kernel (an elementwise plan) and one library call
//! (a small cuBLASLt GEMM), checks both against the f64 reference, and ends
//! with one line: `ready`, or `not ready: ` and what is missing. It exits
//! with status 0 only when ready, and never panics on a machine without a
//! GPU.

use std::path::Path;
use std::process::ExitCode;
use std::time::Instant;

use baracuda_driver::{
    cuda_include_dir, jit_stats, kernel_cache_dir, loaded_library, CudaLib, Device,
};
use baracuda_kernels::reference::elementwise as reference;
use baracuda_kernels::{
    Context, DeviceBuffer, ElementKind, GemmArgs, GemmC, GemmDescriptor, GemmPlan, LayoutSku,
    MatrixMut, MatrixRef, Plan, PlanPreference, Stream, TensorMut, TensorRef, UnaryArgs,
    UnaryDescriptor, UnaryOp, UnaryPlan, Workspace,
};

const USAGE: &str = "usage: baracuda doctor\n\n  doctor  report the driver, GPUs, CUDA libraries and kernel cache, run one kernel and one library call, and say whether baracuda is ready";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args
        .iter()
        .map(String::as_str)
        .collect::<Vec<_>>()
        .as_slice()
    {
        ["doctor"] => doctor(),
        ["help" | "-h" | "--help"] => {
            println!("{USAGE}");
            ExitCode::SUCCESS
        }
        _ => {
            eprintln!("{USAGE}");
            ExitCode::from(2)
        }
    }
}

/// What the checks found missing or broken, in the order found.
#[derive(Default)]
struct Report {
    missing: Vec<String>,
}

impl Report {
    /// Print `label: value`, or record `what` as missing with the error.
    fn line<T>(
        &mut self,
        label: &str,
        what: &str,
        r: baracuda_driver::Result<T>,
        show: impl FnOnce(&T) -> String,
    ) -> Option<T> {
        match r {
            Ok(v) => {
                println!("{label:<12} {}", show(&v));
                Some(v)
            }
            Err(e) => {
                println!("{label:<12} MISSING: {e}");
                self.missing.push(what.to_string());
                None
            }
        }
    }
}

fn library(report: &mut Report, label: &str, lib: CudaLib) -> bool {
    let r = loaded_library(lib);
    report
        .line(label, label, r, |(version, path)| {
            let mut line = version.clone();
            if lib == CudaLib::Driver {
                if let Some(v) = kernel_module_version() {
                    line.push_str(&format!(", kernel module {v}"));
                }
            }
            if let Some(p) = path {
                line.push_str(&format!(" ({})", p.display()));
            }
            line
        })
        .is_some()
}

/// The NVIDIA kernel module's version (`570.86.15`), from
/// `/proc/driver/nvidia/version` where Linux has it.
fn kernel_module_version() -> Option<String> {
    let text = std::fs::read_to_string("/proc/driver/nvidia/version").ok()?;
    module_version(&text)
}

/// The version in the first line of `/proc/driver/nvidia/version`: the
/// first word that is dotted digits.
fn module_version(text: &str) -> Option<String> {
    text.lines()
        .next()?
        .split_whitespace()
        .find(|w| w.contains('.') && w.chars().all(|c| c.is_ascii_digit() || c == '.'))
        .map(str::to_string)
}

fn doctor() -> ExitCode {
    let mut report = Report::default();
    println!("baracuda {}", env!("CARGO_PKG_VERSION"));
    let driver = library(&mut report, "driver", CudaLib::Driver);
    let mut devices = Vec::new();
    if driver {
        match Device::count() {
            Ok(0) => {
                let why = Device::get(0).err().map(|e| e.to_string());
                println!(
                    "{:<12} MISSING: the driver sees no CUDA GPU{}",
                    "gpus",
                    why.map(|w| format!(" ({w})")).unwrap_or_default()
                );
                report.missing.push("a CUDA GPU".into());
            }
            Ok(n) => {
                for i in 0..n {
                    let label = format!("gpu {i}");
                    let what = format!("GPU {i}");
                    let r = Device::get(i);
                    if let Some(d) = report.line(&label, &what, r, describe_device) {
                        devices.push(d);
                    }
                }
            }
            Err(e) => {
                println!("{:<12} MISSING: {e}", "gpus");
                report.missing.push("a working CUDA driver".into());
            }
        }
    }
    let nvrtc = library(&mut report, "NVRTC", CudaLib::Nvrtc);
    let headers = report
        .line(
            "headers",
            "CUDA headers",
            cuda_include_dir(),
            |d| match header_version(d) {
                Some(v) => format!("CUDA {v} ({})", d.display()),
                None => d.display().to_string(),
            },
        )
        .is_some();
    let cublaslt = library(&mut report, "cuBLASLt", CudaLib::CublasLt);
    library(&mut report, "cuDNN", CudaLib::Cudnn);
    match kernel_cache_dir() {
        Some(dir) => {
            let (files, bytes) = dir_size(&dir);
            println!(
                "{:<12} {} ({files} kernels, {:.1} MiB)",
                "cache",
                dir.display(),
                bytes as f64 / (1 << 20) as f64
            );
        }
        None => println!(
            "{:<12} none (set BARACUDA_CACHE_DIR or HOME to keep compiled kernels)",
            "cache"
        ),
    }

    if let Some(device) = devices.first() {
        match Context::new(device).and_then(|ctx| Stream::new(&ctx)) {
            Ok(stream) => {
                if nvrtc && headers {
                    let r = run_kernel(&stream);
                    report.line("kernel", "a working NVRTC kernel", r, String::clone);
                }
                if cublaslt {
                    let r = run_gemm(&stream);
                    report.line("cuBLASLt", "a working cuBLASLt GEMM", r, String::clone);
                }
            }
            Err(e) => {
                println!("{:<12} FAILED: {e}", "context");
                report
                    .missing
                    .push(format!("a CUDA context on GPU 0 ({e})"));
            }
        }
    }

    if report.missing.is_empty() {
        println!("ready");
        ExitCode::SUCCESS
    } else {
        println!("not ready: missing {}", report.missing.join(", "));
        ExitCode::FAILURE
    }
}

fn describe_device(d: &Device) -> String {
    let (major, minor) = d.compute_capability;
    format!(
        "{}, {} (compute {major}.{minor}), {} SMs, {:.1} GiB",
        d.name,
        d.arch,
        d.sm_count,
        d.total_mem_bytes as f64 / (1u64 << 30) as f64
    )
}

/// `CUDA_VERSION` from `cuda.h` in `dir`, as `major.minor`.
fn header_version(dir: &Path) -> Option<String> {
    let text = std::fs::read_to_string(dir.join("cuda.h")).ok()?;
    let v: u32 = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("#define CUDA_VERSION "))?
        .trim()
        .parse()
        .ok()?;
    Some(format!("{}.{}", v / 1000, v % 1000 / 10))
}

/// Files and bytes under `dir` (not following links).
fn dir_size(dir: &Path) -> (u64, u64) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return (0, 0);
    };
    entries
        .flatten()
        .fold((0, 0), |(n, b), e| match e.metadata() {
            Ok(m) if m.is_dir() => {
                let (n2, b2) = dir_size(&e.path());
                (n + n2, b + b2)
            }
            Ok(m) => (n + 1, b + m.len()),
            Err(_) => (n, b),
        })
}

/// Relative L2 error of `got` against `want`.
fn rel_l2(got: &[f64], want: &[f64]) -> f64 {
    let num: f64 = got.iter().zip(want).map(|(a, b)| (a - b) * (a - b)).sum();
    let den: f64 = want.iter().map(|b| b * b).sum();
    (num / den.max(1e-300)).sqrt()
}

fn check(what: &str, err: f64, tol: f64) -> baracuda_driver::Result<()> {
    if err <= tol {
        Ok(())
    } else {
        Err(baracuda_driver::Error::Unsupported {
            op: "doctor",
            what: format!("{what} differs from the f64 reference (relative L2 error {err:.2e})"),
        })
    }
}

/// Select (compiling on a cold cache) and run gelu_tanh on 4096 f32s.
fn run_kernel(stream: &Stream) -> baracuda_driver::Result<String> {
    let n = 4096;
    let host: Vec<f32> = (0..n).map(|i| (i as f32 - 2048.0) / 512.0).collect();
    let desc = UnaryDescriptor {
        op: UnaryOp::GeluTanh,
        element: ElementKind::F32,
        shape: [n],
    };
    let before = jit_stats();
    let started = Instant::now();
    let plan = UnaryPlan::<f32, 1>::select(stream, &desc, &PlanPreference::default())?;
    let select_ms = started.elapsed().as_secs_f64() * 1e3;
    let after = jit_stats();
    let how = if after.compiles > before.compiles {
        "compiled by NVRTC"
    } else if after.disk_hits > before.disk_hits {
        "loaded from the kernel cache"
    } else {
        "already loaded"
    };
    let x = DeviceBuffer::from_host(stream, &host)?;
    let mut y = DeviceBuffer::<f32>::zeros(stream, n)?;
    plan.run(
        stream,
        Workspace::None,
        UnaryArgs {
            x: TensorRef::contiguous(x.as_slice(), [n])?,
            y: TensorMut::contiguous(y.as_slice_mut(), [n])?,
        },
    )?;
    let got: Vec<f64> = y.to_host(stream)?.into_iter().map(f64::from).collect();
    let xs: Vec<f64> = host.into_iter().map(f64::from).collect();
    let err = rel_l2(&got, &reference::unary(UnaryOp::GeluTanh, &xs));
    check("gelu_tanh", err, 1e-5)?;
    Ok(format!(
        "gelu_tanh f32 ok ({}; {how} in {select_ms:.0} ms; error {err:.1e})",
        plan.sku()
    ))
}

/// Select and run a 64x48x32 f32 GEMM through cuBLASLt.
fn run_gemm(stream: &Stream) -> baracuda_driver::Result<String> {
    let (m, n, k) = (64usize, 48usize, 32usize);
    let a: Vec<f32> = (0..m * k)
        .map(|i| ((i * 37 % 101) as f32 - 50.0) / 50.0)
        .collect();
    let b: Vec<f32> = (0..k * n)
        .map(|i| ((i * 53 % 97) as f32 - 48.0) / 48.0)
        .collect();
    let desc = GemmDescriptor::new(m, n, k, LayoutSku::Rrr);
    let pref = PlanPreference {
        allow_tf32: false,
        ..PlanPreference::default()
    };
    let plan = GemmPlan::<f32>::select(stream, &desc, &pref)?;
    let (da, db) = (
        DeviceBuffer::from_host(stream, &a)?,
        DeviceBuffer::from_host(stream, &b)?,
    );
    let mut dd = DeviceBuffer::<f32>::zeros(stream, m * n)?;
    let mut ws = DeviceBuffer::<u8>::zeros(stream, plan.workspace_size())?;
    let workspace = match plan.workspace_size() {
        0 => Workspace::None,
        _ => Workspace::Borrowed(ws.as_slice_mut()),
    };
    plan.run(
        stream,
        workspace,
        GemmArgs {
            a: MatrixRef::row_major(da.as_slice(), m, k)?,
            b: MatrixRef::row_major(db.as_slice(), k, n)?,
            c: GemmC::None,
            d: MatrixMut::row_major(dd.as_slice_mut(), m, n)?,
            bias: None,
            aux: None,
            alpha: 1.0,
            beta: 0.0,
        },
    )?;
    let got: Vec<f64> = dd.to_host(stream)?.into_iter().map(f64::from).collect();
    let want: Vec<f64> = (0..m * n)
        .map(|ij| {
            let (i, j) = (ij / n, ij % n);
            (0..k)
                .map(|p| f64::from(a[i * k + p]) * f64::from(b[p * n + j]))
                .sum()
        })
        .collect();
    let err = rel_l2(&got, &want);
    check("the GEMM", err, 1e-5)?;
    Ok(format!(
        "{m}x{n}x{k} f32 GEMM ok ({}; error {err:.1e})",
        plan.sku()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_version_reads_cuda_h() {
        let dir = std::env::temp_dir().join(format!("baracuda-doctor-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join("cuda.h"),
            "#pragma once\n#define CUDA_VERSION 13000\n",
        )
        .unwrap();
        assert_eq!(header_version(&dir).as_deref(), Some("13.0"));
        std::fs::write(dir.join("x.cubin"), [0u8; 10]).unwrap();
        std::fs::create_dir_all(dir.join("sub")).unwrap();
        std::fs::write(dir.join("sub/y.cubin"), [0u8; 5]).unwrap();
        let (files, bytes) = dir_size(&dir);
        assert_eq!(files, 3);
        assert!(bytes >= 15);
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(header_version(&dir), None);
    }

    #[test]
    fn kernel_module_version_is_read_from_the_first_line() {
        let text = "NVRM version: NVIDIA UNIX x86_64 Kernel Module  570.86.15  Thu Jan  9 2025\n\
                    GCC version:  gcc version 12.2.0 (Debian 12.2.0-14)\n";
        assert_eq!(module_version(text).as_deref(), Some("570.86.15"));
        assert_eq!(module_version("no version here\n"), None);
    }

    #[test]
    fn reference_checks_reject_a_wrong_result() {
        assert!(rel_l2(&[1.0, 2.0], &[1.0, 2.0]) == 0.0);
        assert!(check("x", rel_l2(&[1.0, 2.5], &[1.0, 2.0]), 1e-5).is_err());
    }
}
