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
    /// loaded first from the same directory are named in `companions`.
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
    /// File-name prefixes of libraries loaded first from the same
    /// directory (NVRTC's builtins carry the minor version: `.so.13.0`).
    fn companions(self) -> &'static [&'static str] {
        match self {
            CudaLib::Nvrtc => &["libnvrtc-builtins.so.13"],
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
    /// The one command that makes the library loadable.
    fn hint(self) -> &'static str {
        match self {
            CudaLib::Driver => {
                "Install the NVIDIA GPU driver (`nvidia-smi` lists the GPUs when it \
                 works); on a machine without an NVIDIA GPU there is no driver to load."
            }
            CudaLib::Nvrtc => {
                "Fix: `pip install nvidia-cuda-nvrtc==13.0.88` (or set \
                 BARACUDA_CUDA_LIB_DIR to the directory holding libnvrtc.so.13)."
            }
            CudaLib::CublasLt => {
                "Fix: `pip install nvidia-cublas==13.*` (or set \
                 BARACUDA_CUDA_LIB_DIR to the directory holding libcublasLt.so.13)."
            }
            CudaLib::Cudnn => {
                "Fix: `pip install nvidia-cudnn-cu13==9.*` (or set \
                 BARACUDA_CUDA_LIB_DIR to the directory holding libcudnn.so.9)."
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

/// Directories that may hold NVIDIA's Python wheels (the parent of an
/// `nvidia/` package), in search order, without duplicates:
///
/// - `PYTHONPATH` entries;
/// - the `lib/python3*/site-packages` of the active virtual environment
///   (`VIRTUAL_ENV`), the active conda environment (`CONDA_PREFIX`), every
///   pyenv version (`$PYENV_ROOT/versions/*`, default `~/.pyenv`), every
///   environment of a conda install in the usual places (`~/miniconda3`,
///   `~/miniforge3`, `~/anaconda3`, `/opt/conda`, and their `envs/*`), the
///   user site (`~/.local`) and the system (`/usr/local`, `/usr`);
/// - wherever `python3` (or `BARACUDA_PYTHON`) imports `nvidia` from, asked
///   once per process.
///
/// Only directories that exist are listed.
pub(crate) fn python_site_dirs() -> Vec<PathBuf> {
    static DIRS: OnceLock<Vec<PathBuf>> = OnceLock::new();
    DIRS.get_or_init(|| {
        let mut dirs = site_dirs_from_env(&|k| std::env::var_os(k));
        for d in python_nvidia_parents() {
            if !dirs.contains(&d) {
                dirs.push(d);
            }
        }
        dirs
    })
    .clone()
}

/// The environment-derived part of [`python_site_dirs`], reading variables
/// through `var`.
fn site_dirs_from_env(var: &dyn Fn(&str) -> Option<std::ffi::OsString>) -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = Vec::new();
    if let Some(pp) = var("PYTHONPATH") {
        dirs.extend(std::env::split_paths(&pp));
    }
    let home = var("HOME").map(PathBuf::from);
    // Prefixes whose `lib/python3*/site-packages` may hold wheels.
    let mut prefixes: Vec<PathBuf> = Vec::new();
    prefixes.extend(var("VIRTUAL_ENV").map(PathBuf::from));
    prefixes.extend(var("CONDA_PREFIX").map(PathBuf::from));
    let pyenv = var("PYENV_ROOT")
        .map(PathBuf::from)
        .or_else(|| home.as_ref().map(|h| h.join(".pyenv")));
    if let Some(pyenv) = pyenv {
        prefixes.extend(subdirs(&pyenv.join("versions")));
    }
    let mut conda_roots: Vec<PathBuf> = ["miniconda3", "miniforge3", "anaconda3"]
        .iter()
        .filter_map(|d| home.as_ref().map(|h| h.join(d)))
        .collect();
    conda_roots.push(PathBuf::from("/opt/conda"));
    for root in conda_roots {
        prefixes.extend(subdirs(&root.join("envs")));
        prefixes.push(root);
    }
    prefixes.extend(home.as_ref().map(|h| h.join(".local")));
    prefixes.push(PathBuf::from("/usr/local"));
    prefixes.push(PathBuf::from("/usr"));
    for prefix in prefixes {
        for lib in subdirs(&prefix.join("lib")) {
            if lib
                .file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("python3"))
            {
                dirs.push(lib.join("site-packages"));
                dirs.push(lib.join("dist-packages"));
            }
        }
    }
    let mut out: Vec<PathBuf> = Vec::new();
    for d in dirs {
        if d.is_dir() && !out.contains(&d) {
            out.push(d);
        }
    }
    out
}

/// The sub-directories of `dir` (none when it does not exist), sorted.
fn subdirs(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut v: Vec<PathBuf> = entries
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.is_dir())
        .collect();
    v.sort();
    v
}

/// The directories a Python interpreter imports the `nvidia` namespace
/// package from (the parents of each `nvidia/`), asking `BARACUDA_PYTHON`
/// or `python3`. Empty when there is no interpreter or no `nvidia`
/// package.
fn python_nvidia_parents() -> Vec<PathBuf> {
    let python = std::env::var_os("BARACUDA_PYTHON").unwrap_or_else(|| "python3".into());
    nvidia_parents_of(&python)
}

/// Where the interpreter `python` imports `nvidia` from.
fn nvidia_parents_of(python: &std::ffi::OsStr) -> Vec<PathBuf> {
    let out = std::process::Command::new(python)
        .args([
            "-c",
            "import nvidia, os\nfor p in nvidia.__path__: print(os.path.dirname(p))",
        ])
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .output();
    match out {
        Ok(o) if o.status.success() => String::from_utf8_lossy(&o.stdout)
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .map(PathBuf::from)
            .filter(|p| p.is_dir())
            .collect(),
        _ => Vec::new(),
    }
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

/// The directories `subs` (wheel layouts such as `nvidia/cu13/lib`) that
/// exist under any Python environment of [`python_site_dirs`], and a line
/// for error messages naming what was looked through (None when no Python
/// environment was found).
pub(crate) fn wheel_dirs(subs: &[&str]) -> (Vec<PathBuf>, Option<String>) {
    let sites = python_site_dirs();
    let found = sites
        .iter()
        .flat_map(|site| subs.iter().map(move |sub| site.join(sub)))
        .filter(|d| d.is_dir())
        .collect();
    let summary = (!sites.is_empty() && !subs.is_empty()).then(|| {
        let sites: Vec<String> = sites.iter().map(|d| d.display().to_string()).collect();
        format!(
            "{} in the Python environments {}",
            subs.join(" and "),
            sites.join(", ")
        )
    });
    (found, summary)
}

/// The first of `fixed`, then of the Python wheel directories `subs`
/// ([`wheel_dirs`], consulted only when no fixed directory matched), for
/// which `found` gives a value; on a miss, what was searched.
pub(crate) fn search_dirs<T>(
    fixed: Vec<PathBuf>,
    subs: &[&str],
    mut found: impl FnMut(&Path) -> Option<T>,
) -> std::result::Result<T, Vec<String>> {
    let mut searched = Vec::new();
    for d in &fixed {
        searched.push(d.display().to_string());
        if let Some(t) = found(d) {
            return Ok(t);
        }
    }
    let (wheels, summary) = wheel_dirs(subs);
    for d in &wheels {
        searched.push(d.display().to_string());
        if let Some(t) = found(d) {
            return Ok(t);
        }
    }
    searched.extend(summary);
    Err(searched)
}

/// Toolkit and system directories that may hold a CUDA library, in search
/// order.
fn candidate_dirs() -> Vec<PathBuf> {
    let mut dirs = Vec::new();
    if let Ok(p) = std::env::var("BARACUDA_CUDA_LIB_DIR") {
        dirs.extend(std::env::split_paths(&p));
    }
    dirs.extend(toolkit_dirs("lib64"));
    dirs.extend(toolkit_dirs("targets/x86_64-linux/lib"));
    dirs.extend(toolkit_dirs("targets/sbsa-linux/lib"));
    dirs.push(PathBuf::from("/usr/lib/x86_64-linux-gnu"));
    dirs.push(PathBuf::from("/usr/lib/aarch64-linux-gnu"));
    dirs.push(PathBuf::from("/usr/lib64"));
    dirs.push(PathBuf::from("/usr/lib/wsl/lib"));
    dirs
}

/// The files of `dir` whose names start with one of `prefixes`.
fn companion_files(dir: &Path, prefixes: &[&str]) -> Vec<PathBuf> {
    if prefixes.is_empty() {
        return Vec::new();
    }
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter(|e| {
            let name = e.file_name();
            let name = name.to_string_lossy();
            prefixes.iter().any(|p| name.starts_with(p))
        })
        .map(|e| e.path())
        .collect()
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
        for cp in companion_files(dir, lib.companions()) {
            // SAFETY: loading a CUDA library runs only its initialisers.
            if let Ok(l) = unsafe { libloading::Library::new(&cp) } {
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

/// Load `lib` from `dir` if a file of it is there (with its companions),
/// keeping what was loaded.
fn load_from(lib: CudaLib, dir: &Path) -> Option<()> {
    for file in lib.files() {
        let path = dir.join(file);
        if !path.exists() {
            continue;
        }
        let mut loaded = Vec::new();
        for cp in companion_files(dir, lib.companions()) {
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
                return Some(());
            }
        }
    }
    None
}

fn try_load(lib: CudaLib) -> Result<()> {
    if let Some(path) = std::env::var_os(lib.override_var()) {
        return load_override(lib, Path::new(&path));
    }
    if lib.present_by_name() {
        return Ok(());
    }
    search_dirs(candidate_dirs(), lib.wheel_dirs(), |dir| {
        load_from(lib, dir)
    })
    .map_err(|mut searched| {
        searched.insert(
            0,
            format!(
                "{} by name (LD_LIBRARY_PATH and the loader cache)",
                lib.files().join(" or ")
            ),
        );
        Error::LibraryNotFound {
            lib: lib.name(),
            searched,
            hint: lib.hint(),
        }
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

    /// A scratch directory for one test, removed on drop.
    struct Scratch(PathBuf);
    impl Scratch {
        fn new(name: &str) -> Self {
            let d =
                std::env::temp_dir().join(format!("baracuda-libs-{name}-{}", std::process::id()));
            let _ = std::fs::remove_dir_all(&d);
            std::fs::create_dir_all(&d).unwrap();
            Scratch(d)
        }
        fn mkdir(&self, rel: &str) -> PathBuf {
            let p = self.0.join(rel);
            std::fs::create_dir_all(&p).unwrap();
            p
        }
    }
    impl Drop for Scratch {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    /// pyenv versions, a conda install's environments, the active conda
    /// environment, a virtual environment and the user site are all
    /// searched; directories that do not exist are not listed.
    #[test]
    fn python_environments_are_searched() {
        let s = Scratch::new("envs");
        let pyenv = s.mkdir("pyenv/versions/3.12.4/lib/python3.12/site-packages");
        let conda_env = s.mkdir("home/miniforge3/envs/torch/lib/python3.11/site-packages");
        let conda_base = s.mkdir("home/miniforge3/lib/python3.11/site-packages");
        let user = s.mkdir("home/.local/lib/python3.10/site-packages");
        let active = s.mkdir("active/lib/python3.13/site-packages");
        let venv = s.mkdir("venv/lib/python3.12/dist-packages");
        let extra = s.mkdir("pp");
        let root = s.0.clone();
        let var = move |k: &str| -> Option<std::ffi::OsString> {
            let v = match k {
                "PYENV_ROOT" => root.join("pyenv"),
                "HOME" => root.join("home"),
                "CONDA_PREFIX" => root.join("active"),
                "VIRTUAL_ENV" => root.join("venv"),
                "PYTHONPATH" => root.join("pp"),
                _ => return None,
            };
            Some(v.into_os_string())
        };
        let dirs = site_dirs_from_env(&var);
        for d in [
            &pyenv,
            &conda_env,
            &conda_base,
            &user,
            &active,
            &venv,
            &extra,
        ] {
            assert!(dirs.contains(d), "{d:?} not in {dirs:?}");
        }
        // PYTHONPATH first, then the virtual and active conda environment.
        assert_eq!(&dirs[..3], &[extra, venv, active]);
        assert!(dirs.iter().all(|d| d.is_dir()));
        let mut dedup = dirs.clone();
        dedup.dedup();
        assert_eq!(dedup.len(), dirs.len());
    }

    /// A missing interpreter is no `nvidia` package, not an error.
    #[test]
    fn missing_python_finds_nothing() {
        let none = nvidia_parents_of(std::ffi::OsStr::new("/nonexistent/python3"));
        assert!(none.is_empty());
    }

    /// NVRTC's builtins are matched by prefix, whatever their minor version.
    #[test]
    fn companions_match_any_minor_version() {
        let s = Scratch::new("companions");
        for f in [
            "libnvrtc-builtins.so.13.2",
            "libnvrtc-builtins.alt.so.13.2",
            "libnvrtc.so.13",
        ] {
            std::fs::write(s.0.join(f), b"").unwrap();
        }
        let found = companion_files(&s.0, CudaLib::Nvrtc.companions());
        assert_eq!(found, vec![s.0.join("libnvrtc-builtins.so.13.2")]);
        assert!(companion_files(&s.0, CudaLib::Cudnn.companions()).is_empty());
    }

    /// Every miss ends with one command that fixes it, and the libraries
    /// installable from PyPI name their wheel.
    #[test]
    fn hints_name_the_fix() {
        for lib in [CudaLib::Nvrtc, CudaLib::CublasLt, CudaLib::Cudnn] {
            let h = lib.hint();
            assert!(h.starts_with("Fix: `pip install nvidia-"), "{h}");
            assert!(h.contains(lib.files()[0]), "{h}");
        }
        assert!(CudaLib::Driver.hint().contains("driver"));
    }
}
