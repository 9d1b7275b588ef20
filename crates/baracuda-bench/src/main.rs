//! baracuda GPU benchmarks: one JSON line per case (format in `harness`).
//! `baracuda-bench [family...]` runs the named families (default: all):
//! `elementwise`, `conv`. The same cases, timed the same way with PyTorch,
//! are in `bench/torch_cases/`; `scripts/bench-vs-torch.sh` runs both.

mod conv;
mod elementwise;
mod gemm;
mod harness;

fn main() {
    let families: Vec<String> = std::env::args().skip(1).collect();
    let wants = |f: &str| families.is_empty() || families.iter().any(|a| a == f);
    let stream = baracuda_kernels::Device::get(0)
        .and_then(|d| baracuda_kernels::Context::new(&d))
        .and_then(|c| baracuda_kernels::Stream::new(&c));
    let stream = match stream {
        Ok(s) => s,
        Err(e) => {
            eprintln!("baracuda-bench: no GPU: {e}");
            std::process::exit(1);
        }
    };
    // Which cuBLASLt and cuDNN builds this run uses (bench/torch_baseline.py
    // prints PyTorch's): one engine configuration runs different kernels
    // in different builds.
    for lib in [
        baracuda_driver::CudaLib::CublasLt,
        baracuda_driver::CudaLib::Cudnn,
    ] {
        match baracuda_driver::loaded_library(lib) {
            Ok((version, path)) => eprintln!("baracuda-bench: {version} from {path:?}"),
            Err(e) => eprintln!("baracuda-bench: {e}"),
        }
    }
    if wants("elementwise") {
        elementwise::run(&stream);
    }
    if wants("conv") {
        conv::run(&stream);
    }
    if wants("gemm") {
        gemm::run(&stream);
    }
}
