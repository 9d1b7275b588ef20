//! baracuda GPU benchmarks: one JSON line per case and pass (format in
//! `harness`). `baracuda-bench [family...]` runs the named families
//! (default: all): `elementwise`, `conv`, `gemm`, `reduce`, `softmax`, `norm`, `attention`, `shape`. The cases come from
//! `bench/cases/<family>.json` (built in; see `cases`), which
//! `bench/torch_baseline.py` reads to time the same cases with PyTorch;
//! `scripts/bench-vs-torch.sh` runs both. `baracuda-bench --list
//! [family...]` prints the case rows (name, pass, dtype, shape, work)
//! without touching a GPU.

mod attention;
mod cases;
mod conv;
mod elementwise;
mod gemm;
mod harness;
mod norm;
mod reduce;
mod scan;
mod shape;
mod softmax;

use cases::Family;

/// A [`Family`] named `$name` with its built-in case file
/// `bench/cases/$name.json` and its job builder.
macro_rules! family {
    ($name:literal, $build:expr) => {
        Family {
            name: $name,
            builtin: include_str!(concat!("../../../bench/cases/", $name, ".json")),
            build: $build,
        }
    };
}

/// Every family, in the order `baracuda-bench` runs them, with its case
/// file as built in and the builder of its jobs.
const FAMILIES: &[Family] = &[
    family!("elementwise", elementwise::jobs),
    family!("conv", |f| f.jobs_without_settings(conv::job)),
    family!("gemm", |f| f.jobs_without_settings(gemm::job)),
    family!("reduce", |f| f.jobs_without_settings(reduce::job)),
    family!("softmax", |f| f.jobs_without_settings(softmax::job)),
    family!("norm", |f| f.jobs_without_settings(norm::job)),
    family!("attention", |f| f.jobs_without_settings(attention::job)),
    family!("shape", |f| f.jobs_without_settings(shape::job)),
];

fn main() {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let list = args.first().is_some_and(|a| a == "--list");
    if list {
        args.remove(0);
    }
    // A case list that does not check stops the run before any GPU work.
    let families = match cases::load(FAMILIES, &args) {
        Ok(f) => f,
        Err(e) => {
            eprintln!("baracuda-bench: {e}");
            std::process::exit(2);
        }
    };
    if list {
        for row in families
            .iter()
            .flat_map(|(_, jobs)| jobs)
            .flat_map(|j| &j.rows)
        {
            match serde_json::to_string(row) {
                Ok(line) => println!("{line}"),
                Err(e) => eprintln!("baracuda-bench: {e}"),
            }
        }
        return;
    }
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
    for (family, jobs) in &families {
        for job in jobs {
            harness::case(family, job, &stream);
        }
    }
}
