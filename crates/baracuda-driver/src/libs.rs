//! Finding and loading the CUDA shared libraries.
//!
//! cudarc loads each library by name on first use and panics when it is
//! missing. Before the first call into a library we therefore look for it
//! ourselves: by name (the loader's `LD_LIBRARY_PATH` and cache), then by
//! full path in the usual install places and in NVIDIA's Python wheels. A
//! library loaded by full path is kept loaded; when cudarc later asks for it
//! by name the dynamic loader matches its SONAME and returns the same one.
//! When nothing is found the error lists every place tried.
//!
//! `BARACUDA_<LIB>_LIBRARY` (`BARACUDA_CUDA_LIBRARY`,
//! `BARACUDA_NVRTC_LIBRARY`, `BARACUDA_CUBLASLT_LIBRARY`,
//! `BARACUDA_CUDNN_LIBRARY`) names the one file to load for that library
//! instead: nothing else is searched, and a file that does not load is
//! `LibraryNotFound`. It picks one build among several installed, and it is
//! how the GPU tests make one library unavailable to a process.

use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

use baracuda_kernels_types::{Error, Result};

/// A CUDA library baracuda loads at run time.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum CudaLib {
    /// The driver API, `libcuda.so.1` (ships with the GPU driver).
    Driver,
    /// The run-time compiler, `libnvrtc.so.13`.
    Nvrtc,
    /// cuBLASLt, `libcublasLt.so.13`.
    CublasLt,
    /// cuDNN 9, `libcudnn.so.9`.
    Cudnn,
}

impl CudaLib {
    fn name(self) -> &'static str {
        match self {
            CudaLib::Driver => "cuda",
            CudaLib::Nvrtc => "nvrtc",
            CudaLib::CublasLt => "cublasLt",
            CudaLib::Cudnn => "cudnn",
        }
    }
    /// File names to try, most specific first. Extra files that must be
    /// loaded first from the same directory come in `companions`.
    fn files(self) -> &'static [&'static str] {
        match self {
            CudaLib::Driver => &["libcuda.so.1", "libcuda.so"],
            CudaLib::Nvrtc => &["libnvrtc.so.13", "libnvrtc.so"],
            CudaLib::CublasLt => &["libcublasLt.so.13", "libcublasLt.so"],
            CudaLib::Cudnn => &["libcudnn.so.9", "libcudnn.so"],
        }
    }
    /// The environment variable naming the one file to load instead of
    /// searching.
    pub fn override_var(self) -> &'static str {
        match self {
            CudaLib::Driver => "BARACUDA_CUDA_LIBRARY",
            CudaLib::Nvrtc => "BARACUDA_NVRTC_LIBRARY",
            CudaLib::CublasLt => "BARACUDA_CUBLASLT_LIBRARY",
            CudaLib::Cudnn => "BARACUDA_CUDNN_LIBRARY",
        }
    }
    fn companions(self) -> &'static [&'static str] {
        match self {
            CudaLib::Nvrtc => &["libnvrtc-builtins.so.13.0"],
            _ => &[],
        }
    }
    /// Sub-directories of a Python `site-packages` where NVIDIA's wheels put it.
    fn wheel_dirs(self) -> &'static [&'static str] {
        match self {
            CudaLib::Driver => &[],
            CudaLib::Nvrtc => &["nvidia/cu13/lib", "nvidia/cuda_nvrtc/lib"],
            CudaLib::CublasLt => &["nvidia/cu13/lib", "nvidia/cublas/lib"],
            CudaLib::Cudnn => &["nvidia/cudnn/lib", "nvidia/cu13/lib"],
        }
    }
    fn hint(self) -> &'static str {
        match self {
            CudaLib::Driver => {
                "Install the NVIDIA GPU driver, or add the directory holding \
                                libcuda.so.1 to LD_LIBRARY_PATH."
            }
            CudaLib::Nvrtc => {
                "Install the CUDA toolkit or `pip install nvidia-cuda-nvrtc`, or \
                               add the directory holding libnvrtc.so.13 to LD_LIBRARY_PATH."
            }
            CudaLib::CublasLt => {
                "Install the CUDA toolkit or `pip install nvidia-cublas`, or \
                                  add the directory holding libcublasLt.so.13 to LD_LIBRARY_PATH."
            }
            CudaLib::Cudnn => {
                "Install cuDNN 9 or `pip install nvidia-cudnn-cu13`, or add the \
                               directory holding libcudnn.so.9 to LD_LIBRARY_PATH."
            }
        }
    }
    fn present_by_name(self) -> bool {
        // SAFETY: each probe only dlopens the library by name (running its
        // initialisers, as any use would) and closes it again.
        unsafe {
            match self {
                CudaLib::Driver => cudarc::driver::sys::is_culib_present(),
                CudaLib::Nvrtc => cudarc::nvrtc::sys::is_culib_present(),
                CudaLib::CublasLt => cudarc::cublaslt::sys::is_culib_present(),
                CudaLib::Cudnn => cudarc::cudnn::sys::is_culib_present(),
            }
        }
    }
}

/// Python `site-packages` directories worth searching for NVIDIA wheels:
/// `PYTHONPATH` entries, the active virtual environment, and the usual
/// system and user locations.
pub(crate) fn python_site_dirs() -> Vec<PathBuf> {
    let mut dirs = Vec::new();
    if let Ok(pp) = std::env::var("PYTHONPATH") {
        dirs.extend(std::env::split_paths(&pp));
    }
    let mut roots: Vec<PathBuf> = Vec::new();
    if let Ok(venv) = std::env::var("VIRTUAL_ENV") {
        roots.push(PathBuf::from(venv).join("lib"));
    }
    if let Ok(home) = std::env::var("HOME") {
        roots.push(PathBuf::from(home).join(".local/lib"));
    }
    roots.push(PathBuf::from("/usr/local/lib"));
    roots.push(PathBuf::from("/usr/lib"));
    for root in roots {
        let Ok(entries) = std::fs::read_dir(&root) else {
            continue;
        };
        for e in entries.flatten() {
            let name = e.file_name();
            if name.to_string_lossy().starts_with("python3") {
                dirs.push(e.path().join("site-packages"));
                dirs.push(e.path().join("dist-packages"));
            }
        }
    }
    dirs
}

/// Directories from CUDA_PATH / CUDA_HOME / the default toolkit location,
/// with `sub` appended.
pub(crate) fn toolkit_dirs(sub: &str) -> Vec<PathBuf> {
    let mut dirs = Vec::new();
    for var in ["CUDA_PATH", "CUDA_HOME"] {
        if let Ok(p) = std::env::var(var) {
            dirs.push(PathBuf::from(p).join(sub));
        }
    }
    dirs.push(Path::new("/usr/local/cuda").join(sub));
    dirs
}

fn candidate_dirs(lib: CudaLib) -> Vec<PathBuf> {
    let mut dirs = Vec::new();
    if let Ok(p) = std::env::var("BARACUDA_CUDA_LIB_DIR") {
        dirs.extend(std::env::split_paths(&p));
    }
    dirs.extend(toolkit_dirs("lib64"));
    dirs.extend(toolkit_dirs("targets/x86_64-linux/lib"));
    dirs.push(PathBuf::from("/usr/lib/x86_64-linux-gnu"));
    dirs.push(PathBuf::from("/usr/lib64"));
    for site in python_site_dirs() {
        for sub in lib.wheel_dirs() {
            dirs.push(site.join(sub));
        }
    }
    dirs
}

/// Libraries loaded by full path, kept loaded for the life of the process.
fn kept() -> &'static Mutex<Vec<libloading::Library>> {
    static KEPT: OnceLock<Mutex<Vec<libloading::Library>>> = OnceLock::new();
    KEPT.get_or_init(|| Mutex::new(Vec::new()))
}

/// Load `path`, the file `lib.override_var()` names, and nothing else.
fn load_override(lib: CudaLib, path: &Path) -> Result<()> {
    let mut loaded = Vec::new();
    if let Some(dir) = path.parent() {
        for comp in lib.companions() {
            // SAFETY: loading a CUDA library runs only its initialisers.
            if let Ok(l) = unsafe { libloading::Library::new(dir.join(comp)) } {
                loaded.push(l);
            }
        }
    }
    // SAFETY: as above.
    if let Ok(l) = unsafe { libloading::Library::new(path) } {
        loaded.push(l);
        if lib.present_by_name() {
            kept()
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .extend(loaded);
            return Ok(());
        }
    }
    Err(Error::LibraryNotFound {
        lib: lib.name(),
        searched: vec![format!("{} (from {})", path.display(), lib.override_var())],
        hint: lib.hint(),
    })
}

fn try_load(lib: CudaLib) -> Result<()> {
    if let Some(path) = std::env::var_os(lib.override_var()) {
        return load_override(lib, Path::new(&path));
    }
    if lib.present_by_name() {
        return Ok(());
    }
    let mut searched: Vec<String> = lib
        .files()
        .iter()
        .map(|f| format!("{f} (by name)"))
        .collect();
    for dir in candidate_dirs(lib) {
        for file in lib.files() {
            let path = dir.join(file);
            searched.push(path.display().to_string());
            if !path.exists() {
                continue;
            }
            let mut loaded = Vec::new();
            for comp in lib.companions() {
                let cp = dir.join(comp);
                // SAFETY: loading a CUDA library runs only its initialisers.
                if let Ok(l) = unsafe { libloading::Library::new(&cp) } {
                    loaded.push(l);
                }
            }
            // SAFETY: as above.
            if let Ok(l) = unsafe { libloading::Library::new(&path) } {
                loaded.push(l);
                if lib.present_by_name() {
                    let mut k = kept().lock().unwrap_or_else(|p| p.into_inner());
                    k.extend(loaded);
                    return Ok(());
                }
            }
        }
    }
    Err(Error::LibraryNotFound {
        lib: lib.name(),
        searched,
        hint: lib.hint(),
    })
}

/// Make sure `lib` can be loaded, loading it by full path if needed (or
/// only the file its `BARACUDA_<LIB>_LIBRARY` variable names). Cheap after
/// the first call for each library.
///
/// # Errors
/// `LibraryNotFound` listing every name and path tried, with a hint.
pub fn ensure_loaded(lib: CudaLib) -> Result<()> {
    /// The outcome of the first load attempt of each library.
    type Outcomes = Mutex<Vec<(CudaLib, Result<()>)>>;
    static STATE: OnceLock<Outcomes> = OnceLock::new();
    let state = STATE.get_or_init(|| Mutex::new(Vec::new()));
    let mut s = state.lock().unwrap_or_else(|p| p.into_inner());
    if let Some((_, r)) = s.iter().find(|(l, _)| *l == lib) {
        return r.clone();
    }
    let r = try_load(lib);
    s.push((lib, r.clone()));
    r
}

/// Which build of `lib` this process runs: its version as the library
/// reports it and the file it was loaded from (Linux: from
/// `/proc/self/maps`). Loads the library if needed. Two processes that
/// load different builds of cuBLASLt or cuDNN run different kernels for
/// the same algorithm or engine configuration, so benchmarks print this.
///
/// # Errors
/// `LibraryNotFound` as [`ensure_loaded`].
pub fn loaded_library(lib: CudaLib) -> Result<(String, Option<PathBuf>)> {
    ensure_loaded(lib)?;
    let version = match lib {
        // SAFETY: version queries take no arguments and touch no state.
        CudaLib::CublasLt => format!("cuBLASLt {}", unsafe {
            cudarc::cublaslt::sys::cublasLtGetVersion()
        }),
        // SAFETY: as above.
        CudaLib::Cudnn => format!("cuDNN {}", unsafe { cudarc::cudnn::sys::cudnnGetVersion() }),
        CudaLib::Nvrtc => {
            let (mut major, mut minor) = (0, 0);
            // SAFETY: both pointers are valid for one write each.
            unsafe { cudarc::nvrtc::sys::nvrtcVersion(&mut major, &mut minor) };
            format!("NVRTC {major}.{minor}")
        }
        CudaLib::Driver => {
            let mut v = 0;
            // SAFETY: the pointer is valid for one write.
            unsafe { cudarc::driver::sys::cuDriverGetVersion(&mut v) };
            format!("CUDA driver {}.{}", v / 1000, v % 1000 / 10)
        }
    };
    let path = std::fs::read_to_string("/proc/self/maps")
        .ok()
        .and_then(|maps| {
            maps.lines()
                .filter_map(|l| l.split_whitespace().nth(5))
                .find(|p| {
                    lib.files().iter().any(|f| {
                        Path::new(p)
                            .file_name()
                            .is_some_and(|n| n.to_string_lossy().starts_with(*f))
                    })
                })
                .map(PathBuf::from)
        });
    Ok((version, path))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A `BARACUDA_<LIB>_LIBRARY` file that does not load is
    /// `LibraryNotFound` naming it and the variable, and nothing else is
    /// tried.
    #[test]
    fn override_that_does_not_load_is_not_found() {
        let path = Path::new("/nonexistent/baracuda/libcudnn.so.9");
        match load_override(CudaLib::Cudnn, path) {
            Err(Error::LibraryNotFound { lib, searched, .. }) => {
                assert_eq!(lib, "cudnn");
                assert_eq!(
                    searched,
                    vec![format!("{} (from BARACUDA_CUDNN_LIBRARY)", path.display())]
                );
            }
            other => panic!("{other:?}"),
        }
    }

    /// NVRTC is installed wherever the kernels are compiled (under CI
    /// always): the report names the file the process mapped.
    #[test]
    fn loaded_library_names_the_mapped_file() {
        if let Err(e) = ensure_loaded(CudaLib::Nvrtc) {
            assert!(
                !std::env::var("CI").is_ok_and(|v| v == "true"),
                "NVRTC is required under CI: {e}"
            );
            return;
        }
        let (version, path) = loaded_library(CudaLib::Nvrtc).unwrap();
        assert!(version.starts_with("NVRTC 13."), "{version}");
        let path = path.expect("libnvrtc in /proc/self/maps");
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        assert!(name.starts_with("libnvrtc.so"), "{path:?}");
    }
}
