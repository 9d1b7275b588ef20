//! Host test: every kernel specialisation any plan can request compiles with
//! NVRTC for sm_80 and sm_90a. Needs NVRTC and the CUDA headers, not a GPU.
//! Without NVRTC the test is skipped, except under CI (`CI=true`), where it
//! fails.

use baracuda_driver::{compile_cubin, ensure_loaded, CudaLib};
use baracuda_kernels::{all_module_specs, ArchSku};

#[test]
fn every_kernel_compiles_for_sm80_and_sm90a() {
    if let Err(e) = ensure_loaded(CudaLib::Nvrtc) {
        if std::env::var("CI").is_ok_and(|v| v == "true") {
            panic!("NVRTC is required under CI: {e}");
        }
        eprintln!("skipping: {e}");
        return;
    }
    let specs = all_module_specs();
    assert!(!specs.is_empty());
    let jobs: Vec<_> = [ArchSku::Sm80, ArchSku::Sm90a]
        .into_iter()
        .flat_map(|arch| specs.iter().map(move |s| (arch, s)))
        .collect();
    let failures: Vec<String> = std::thread::scope(|scope| {
        let handles: Vec<_> = jobs
            .iter()
            .map(|(arch, spec)| {
                scope.spawn(move || match compile_cubin(spec, *arch) {
                    Ok(cubin) if cubin.len() > 64 => None,
                    Ok(_) => Some(format!("{} {arch}: empty cubin", spec.source.name)),
                    Err(e) => Some(format!(
                        "{} {:?} {arch}: {e}",
                        spec.source.name, spec.defines
                    )),
                })
            })
            .collect();
        handles
            .into_iter()
            .filter_map(|h| h.join().expect("compile thread"))
            .collect()
    });
    assert!(
        failures.is_empty(),
        "{} of {} compiles failed:\n{}",
        failures.len(),
        jobs.len(),
        failures.join("\n")
    );
}
