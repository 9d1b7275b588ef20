//! Host test: every kernel specialisation any plan can request compiles with
//! NVRTC for sm_80 and sm_90a, and NVRTC's report names the library file the
//! process loaded. Needs NVRTC and the CUDA headers, not a GPU.
//!
//! Without NVRTC or the headers the tests are reported as ignored, with
//! the reason printed before the summary (this target uses its own test
//! harness so the skip is decided at run time and shows up as `ignored`,
//! not as a silent `ok`); under CI (`CI=true`) they run and fail with the
//! error instead.

use baracuda_driver::{
    compile_cubin, cuda_include_dir, ensure_loaded, loaded_library, CudaLib, ModuleSpec,
};
use baracuda_kernels::{all_module_specs, ArchSku};
use libtest_mimic::{Arguments, Failed, Trial};

/// NVRTC and the CUDA headers, or why not.
fn compiler() -> Result<(), Failed> {
    ensure_loaded(CudaLib::Nvrtc).map_err(|e| Failed::from(e.to_string()))?;
    cuda_include_dir().map_err(|e| Failed::from(e.to_string()))?;
    Ok(())
}

fn main() {
    let args = Arguments::from_args();
    let ci = std::env::var("CI").is_ok_and(|v| v == "true");
    let skip = match compiler() {
        Err(e) if !ci => {
            let why = e
                .message()
                .unwrap_or("NVRTC or the CUDA headers are missing");
            println!("note: the NVRTC tests are ignored: {why}");
            true
        }
        _ => false,
    };
    type Check = fn() -> Result<(), Failed>;
    let tests: [(&str, Check); 3] = [
        (
            "every_kernel_compiles_for_sm80_and_sm90a",
            every_kernel_compiles_for_sm80_and_sm90a,
        ),
        (
            "register_floors_change_only_the_register_count",
            register_floors_change_only_the_register_count,
        ),
        (
            "nvrtc_report_names_the_mapped_file",
            nvrtc_report_names_the_mapped_file,
        ),
    ];
    let trials = tests
        .into_iter()
        .map(|(name, f)| {
            let t = Trial::test(name, f).with_ignored_flag(skip);
            if skip {
                t.with_kind("needs NVRTC")
            } else {
                t
            }
        })
        .collect();
    libtest_mimic::run(&args, trials).exit();
}

/// `loaded_library` gives NVRTC's version and the file the process mapped
/// (what `baracuda doctor` and the benchmarks print).
fn nvrtc_report_names_the_mapped_file() -> Result<(), Failed> {
    compiler()?;
    let (version, path) =
        loaded_library(CudaLib::Nvrtc).map_err(|e| Failed::from(e.to_string()))?;
    assert!(version.starts_with("NVRTC 13."), "{version}");
    let path = path.expect("libnvrtc in /proc/self/maps");
    let name = path.file_name().unwrap().to_string_lossy().into_owned();
    assert!(name.starts_with("libnvrtc.so"), "{path:?}");
    Ok(())
}

fn every_kernel_compiles_for_sm80_and_sm90a() -> Result<(), Failed> {
    compiler()?;
    let mut specs = all_module_specs();
    assert!(!specs.is_empty());
    // BARACUDA_COMPILE_ONLY=NAME: only the sources whose name contains NAME
    // (while editing one kernel)
    if let Ok(only) = std::env::var("BARACUDA_COMPILE_ONLY") {
        specs.retain(|s| s.source.name.contains(only.as_str()));
        assert!(!specs.is_empty(), "no kernel source matches {only}");
    }
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
    Ok(())
}

/// A register floor changes only the floored kernel's register count: the
/// module compiled with and without it differs in the one byte of that
/// count, on both architectures (so the cubin layout the editor relies on
/// still holds for this NVRTC).
fn register_floors_change_only_the_register_count() -> Result<(), Failed> {
    compiler()?;
    // The first op of each floored family and dtype (the other ops'
    // floors are applied, and so checked for a count to raise, by
    // every_kernel_compiles_for_sm80_and_sm90a).
    let op0 = ("BARACUDA_OP".to_string(), "0".to_string());
    let floored: Vec<_> = all_module_specs()
        .into_iter()
        .filter(|s| !s.register_floors.is_empty() && s.defines.contains(&op0))
        .collect();
    assert!(!floored.is_empty(), "some module has a register floor");
    let check = |s: &ModuleSpec, arch: ArchSku| {
        let mut plain = s.clone();
        plain.register_floors.clear();
        let a = compile_cubin(&plain, arch).unwrap();
        let b = compile_cubin(s, arch).unwrap();
        assert_eq!(a.len(), b.len());
        let diff: Vec<usize> = (0..a.len()).filter(|&i| a[i] != b[i]).collect();
        let what = format!("{} {:?} {arch}", s.source.name, s.defines);
        // Counts are at most 255: only the low byte of the u32 changes.
        assert_eq!(diff.len(), 1, "{what}: changed bytes {diff:?}");
        let at = diff[0];
        let count = |c: &[u8]| u32::from_le_bytes(c[at..at + 4].try_into().unwrap());
        assert!(count(&a) < s.register_floors[0].1, "{what}");
        assert_eq!(count(&b), s.register_floors[0].1, "{what}");
    };
    std::thread::scope(|scope| {
        for s in &floored {
            for arch in [ArchSku::Sm80, ArchSku::Sm90a] {
                scope.spawn(move || check(s, arch));
            }
        }
    });
    Ok(())
}
