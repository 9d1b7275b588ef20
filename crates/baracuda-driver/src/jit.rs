//! Run-time compilation of CUDA C++ kernels with NVRTC, cached in memory per
//! context and on disk.
//!
//! A [`ModuleSpec`] is one NVRTC program: an embedded [`KernelSource`] (with
//! its in-memory headers) plus `-D` defines. It compiles to a cubin for the
//! device's exact architecture (`sm_90a` on Hopper, so `wgmma` and TMA are
//! available). The disk cache key hashes the source, its headers, the
//! options, the arch and the NVRTC version; entries carry a checksum and are
//! written atomically (temp file + rename), and an entry that fails its
//! checksum or fails to load is compiled again. A spec may also put a floor
//! under a kernel's register allocation ([`ModuleSpec::register_floor`]),
//! applied to the cubin before it is cached.

use std::collections::HashMap;
use std::ffi::{c_char, c_int, c_void, CString};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

use baracuda_kernels_types::{ArchSku, Error, Result};
use cudarc::driver::{result, sys, CudaContext, CudaFunction, CudaModule};
use cudarc::nvrtc::sys as nvrtc;

use crate::context::{Context, Stream};
use crate::libs::{ensure_loaded, search_dirs, toolkit_dirs, CudaLib};
use crate::status::CudaResultExt;

/// A CUDA C++ source embedded in the binary, with the headers it includes
/// by name (`#include "common/vec.cuh"`).
#[derive(Debug)]
pub struct KernelSource {
    /// Name used in errors and as the NVRTC program name (`unary.cu`).
    pub name: &'static str,
    /// The source text.
    pub source: &'static str,
    /// `(include name, text)` of every project header it includes.
    pub headers: &'static [(&'static str, &'static str)],
}

/// One NVRTC program: a source and the `-D` defines that specialise it.
#[derive(Clone, Debug)]
pub struct ModuleSpec {
    /// The source.
    pub source: &'static KernelSource,
    /// `(name, value)` pairs passed as `-Dname=value`.
    pub defines: Vec<(String, String)>,
    /// `(kernel, registers)`: allocate at least this many registers per
    /// thread to the kernel (see [`ModuleSpec::register_floor`]).
    pub register_floors: Vec<(String, u32)>,
}

impl ModuleSpec {
    /// A spec with no defines.
    pub fn new(source: &'static KernelSource) -> Self {
        ModuleSpec {
            source,
            defines: Vec::new(),
            register_floors: Vec::new(),
        }
    }
    /// Add `-Dname=value`.
    pub fn define(mut self, name: &str, value: impl ToString) -> Self {
        self.defines.push((name.to_string(), value.to_string()));
        self
    }
    /// Allocate `kernel` at least `regs` registers per thread, whatever
    /// ptxas needed: the code is unchanged, but fewer blocks fit on an SM
    /// (65536 registers per SM on sm_80 to sm_90, allocated per warp in
    /// units of 256, so `regs` rounds up to a multiple of 8). This caps a
    /// streaming kernel's residency without taking L1 from the loads in
    /// flight, as shared memory would. A floor below what the kernel needs
    /// changes nothing.
    pub fn register_floor(mut self, kernel: &str, regs: u32) -> Self {
        self.register_floors.push((kernel.to_string(), regs));
        self
    }
    fn options(&self, arch: ArchSku, include: &Path) -> Vec<String> {
        let mut o = vec![
            format!("--gpu-architecture={}", arch.nvrtc_arch()),
            "--std=c++17".to_string(),
            "--device-as-default-execution-space".to_string(),
            format!("-I{}", include.display()),
        ];
        for (k, v) in &self.defines {
            o.push(format!("-D{k}={v}"));
        }
        o
    }
}

/// 128-bit FNV-1a, stable across runs and platforms (the disk-cache key).
fn fnv128(parts: &[&[u8]]) -> u128 {
    let mut h: u128 = 0x6c62272e07bb014262b821756295c58d;
    for p in parts {
        for &b in p.iter() {
            h ^= b as u128;
            h = h.wrapping_mul(0x0000000001000000000000000000013B);
        }
        // separate parts so ("ab","c") and ("a","bc") differ
        h ^= 0xff;
        h = h.wrapping_mul(0x0000000001000000000000000000013B);
    }
    h
}

/// NVRTC's version `(major, minor)`.
///
/// # Errors
/// `LibraryNotFound` when NVRTC cannot be loaded.
pub fn nvrtc_version() -> Result<(i32, i32)> {
    ensure_loaded(CudaLib::Nvrtc)?;
    let (mut major, mut minor): (c_int, c_int) = (0, 0);
    // SAFETY: NVRTC is loaded; both out-pointers are valid.
    let r = unsafe { nvrtc::nvrtcVersion(&mut major, &mut minor) };
    nvrtc_status("nvrtcVersion", r, "", &[])?;
    Ok((major, minor))
}

fn nvrtc_status(call: &str, r: nvrtc::nvrtcResult, kernel: &str, options: &[String]) -> Result<()> {
    if r == nvrtc::nvrtcResult::NVRTC_SUCCESS {
        return Ok(());
    }
    Err(Error::Nvrtc {
        kernel: kernel.to_string(),
        options: options.to_vec(),
        log: format!("{call} returned {r:?}"),
    })
}

/// The directory holding `cuda_fp16.h`, searched in this order:
/// `BARACUDA_CUDA_INCLUDE`, `$CUDA_PATH/include`, `$CUDA_HOME/include`,
/// `/usr/local/cuda/include`, `/usr/include` (a distribution's CUDA
/// package), then the `nvidia-cuda-runtime` Python wheel
/// (`nvidia/cu13/include`) in every Python environment the library search
/// covers (virtual, conda and pyenv environments, the user site, and
/// wherever `python3` imports `nvidia` from).
///
/// # Errors
/// `CudaHeadersNotFound` listing every directory tried.
pub fn cuda_include_dir() -> Result<PathBuf> {
    static DIR: OnceLock<Result<PathBuf>> = OnceLock::new();
    DIR.get_or_init(|| {
        let mut dirs: Vec<PathBuf> = Vec::new();
        if let Ok(p) = std::env::var("BARACUDA_CUDA_INCLUDE") {
            dirs.push(PathBuf::from(p));
        }
        dirs.extend(toolkit_dirs("include"));
        dirs.push(PathBuf::from("/usr/include"));
        search_dirs(
            dirs,
            &["nvidia/cu13/include", "nvidia/cuda_runtime/include"],
            |d| d.join("cuda_fp16.h").is_file().then(|| d.to_path_buf()),
        )
        .map_err(|searched| Error::CudaHeadersNotFound { searched })
    })
    .clone()
}

/// Compile `spec` to a cubin for `arch`, with its register floors applied.
/// Needs NVRTC and the CUDA headers, but no GPU.
///
/// # Errors
/// `LibraryNotFound`, `CudaHeadersNotFound`, `Nvrtc` with the log, or
/// `Cubin` when a register floor names a kernel the module lacks.
pub fn compile_cubin(spec: &ModuleSpec, arch: ArchSku) -> Result<Vec<u8>> {
    ensure_loaded(CudaLib::Nvrtc)?;
    let include = cuda_include_dir()?;
    let options = spec.options(arch, &include);
    let kernel = spec.source.name;
    let cstr = |s: &str| {
        CString::new(s).map_err(|_| Error::Nvrtc {
            kernel: kernel.to_string(),
            options: options.clone(),
            log: "source, header or option contains a NUL byte".into(),
        })
    };
    let src = cstr(spec.source.source)?;
    let name = cstr(kernel)?;
    let hdr_src: Vec<CString> = spec
        .source
        .headers
        .iter()
        .map(|(_, s)| cstr(s))
        .collect::<Result<_>>()?;
    let hdr_names: Vec<CString> = spec
        .source
        .headers
        .iter()
        .map(|(n, _)| cstr(n))
        .collect::<Result<_>>()?;
    let hdr_src_p: Vec<*const c_char> = hdr_src.iter().map(|s| s.as_ptr()).collect();
    let hdr_names_p: Vec<*const c_char> = hdr_names.iter().map(|s| s.as_ptr()).collect();
    let opts: Vec<CString> = options.iter().map(|o| cstr(o)).collect::<Result<_>>()?;
    let opts_p: Vec<*const c_char> = opts.iter().map(|s| s.as_ptr()).collect();

    let mut prog: nvrtc::nvrtcProgram = std::ptr::null_mut();
    // SAFETY: every pointer refers to a NUL-terminated string alive for the
    // call; the header arrays have `headers.len()` entries each.
    let r = unsafe {
        nvrtc::nvrtcCreateProgram(
            &mut prog,
            src.as_ptr(),
            name.as_ptr(),
            hdr_src_p.len() as c_int,
            hdr_src_p.as_ptr(),
            hdr_names_p.as_ptr(),
        )
    };
    nvrtc_status("nvrtcCreateProgram", r, kernel, &options)?;
    let out = compile_program(prog, kernel, &options, &opts_p);
    // SAFETY: `prog` was created above and is destroyed once.
    unsafe { nvrtc::nvrtcDestroyProgram(&mut prog) };
    let mut cubin = out?;
    for (name, regs) in &spec.register_floors {
        crate::cubin::raise_register_count(&mut cubin, kernel, name, *regs)?;
    }
    Ok(cubin)
}

fn compile_program(
    prog: nvrtc::nvrtcProgram,
    kernel: &str,
    options: &[String],
    opts_p: &[*const c_char],
) -> Result<Vec<u8>> {
    // SAFETY: `prog` is a live program; `opts_p` holds valid C strings.
    let r = unsafe { nvrtc::nvrtcCompileProgram(prog, opts_p.len() as c_int, opts_p.as_ptr()) };
    if r != nvrtc::nvrtcResult::NVRTC_SUCCESS {
        let log = program_log(prog);
        return Err(Error::Nvrtc {
            kernel: kernel.to_string(),
            options: options.to_vec(),
            log: format!("{r:?}\n{log}"),
        });
    }
    let mut size: usize = 0;
    // SAFETY: `prog` compiled successfully; `size` is a valid out-pointer.
    let r = unsafe { nvrtc::nvrtcGetCUBINSize(prog, &mut size) };
    nvrtc_status("nvrtcGetCUBINSize", r, kernel, options)?;
    let mut cubin = vec![0u8; size];
    // SAFETY: `cubin` has the `size` bytes NVRTC asked for.
    let r = unsafe { nvrtc::nvrtcGetCUBIN(prog, cubin.as_mut_ptr() as *mut c_char) };
    nvrtc_status("nvrtcGetCUBIN", r, kernel, options)?;
    Ok(cubin)
}

fn program_log(prog: nvrtc::nvrtcProgram) -> String {
    let mut size: usize = 0;
    // SAFETY: `prog` is live; `size` is a valid out-pointer.
    if unsafe { nvrtc::nvrtcGetProgramLogSize(prog, &mut size) }
        != nvrtc::nvrtcResult::NVRTC_SUCCESS
    {
        return String::new();
    }
    let mut buf = vec![0u8; size.max(1)];
    // SAFETY: `buf` has the size NVRTC reported.
    unsafe { nvrtc::nvrtcGetProgramLog(prog, buf.as_mut_ptr() as *mut c_char) };
    String::from_utf8_lossy(&buf)
        .trim_end_matches('\0')
        .to_string()
}

// ---------------------------------------------------------------------------
// Disk cache
// ---------------------------------------------------------------------------

const MAGIC: &[u8; 8] = b"BRCDCUB1";

static COMPILES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
static DISK_HITS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// Process-wide JIT counters, for diagnostics and tests.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct JitStats {
    /// Modules compiled by NVRTC for a context (cache misses).
    pub compiles: u64,
    /// Modules loaded from the disk cache.
    pub disk_hits: u64,
}

/// The JIT counters so far.
pub fn jit_stats() -> JitStats {
    use std::sync::atomic::Ordering::Relaxed;
    JitStats {
        compiles: COMPILES.load(Relaxed),
        disk_hits: DISK_HITS.load(Relaxed),
    }
}

/// The on-disk kernel cache: `BARACUDA_CACHE_DIR`, else
/// `~/.cache/baracuda`; None without either variable.
pub fn kernel_cache_dir() -> Option<PathBuf> {
    if let Ok(d) = std::env::var("BARACUDA_CACHE_DIR") {
        return Some(PathBuf::from(d));
    }
    std::env::var("HOME")
        .ok()
        .map(|h| PathBuf::from(h).join(".cache/baracuda"))
}

fn cache_key(spec: &ModuleSpec, arch: ArchSku, nvrtc: (i32, i32)) -> Result<u128> {
    let include = cuda_include_dir()?;
    let options = spec.options(arch, &include).join(" ");
    let version = format!("nvrtc {}.{}", nvrtc.0, nvrtc.1);
    let floors = format!("register floors {:?}", spec.register_floors);
    let mut parts: Vec<&[u8]> = vec![
        spec.source.source.as_bytes(),
        options.as_bytes(),
        version.as_bytes(),
        floors.as_bytes(),
    ];
    for (n, s) in spec.source.headers {
        parts.push(n.as_bytes());
        parts.push(s.as_bytes());
    }
    Ok(fnv128(&parts))
}

fn read_cached(path: &Path) -> Option<Vec<u8>> {
    let data = std::fs::read(path).ok()?;
    if data.len() < 32 || &data[..8] != MAGIC {
        return None;
    }
    let len = u64::from_le_bytes(data[8..16].try_into().ok()?) as usize;
    let sum = u128::from_le_bytes(data[16..32].try_into().ok()?);
    let payload = &data[32..];
    if payload.len() != len || fnv128(&[payload]) != sum {
        return None;
    }
    Some(payload.to_vec())
}

/// Write atomically: a unique temp file in the same directory, then rename.
/// Failure to cache is not an error; the module is simply compiled again
/// next time.
fn write_cached(path: &Path, cubin: &[u8]) {
    let Some(dir) = path.parent() else { return };
    if std::fs::create_dir_all(dir).is_err() {
        return;
    }
    let mut data = Vec::with_capacity(cubin.len() + 32);
    data.extend_from_slice(MAGIC);
    data.extend_from_slice(&(cubin.len() as u64).to_le_bytes());
    data.extend_from_slice(&fnv128(&[cubin]).to_le_bytes());
    data.extend_from_slice(cubin);
    static SEQ: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let seq = SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let tmp = dir.join(format!(".tmp-{}-{seq}", std::process::id()));
    if std::fs::write(&tmp, &data).is_ok() && std::fs::rename(&tmp, path).is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
}

// ---------------------------------------------------------------------------
// Modules and functions
// ---------------------------------------------------------------------------

/// A loaded module of one context.
pub struct Module {
    cu: Arc<CudaModule>,
    ctx: Arc<CudaContext>,
    ctx_id: usize,
    name: &'static str,
}

impl std::fmt::Debug for Module {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Module({})", self.name)
    }
}

impl Module {
    /// Look up a `extern "C" __global__` function by name.
    ///
    /// # Errors
    /// `Cuda` (`CUDA_ERROR_NOT_FOUND`) when the module has no such kernel.
    pub fn function(&self, name: &str) -> Result<Function> {
        let f = self.cu.load_function(name).call("cuModuleGetFunction")?;
        Ok(Function {
            f,
            ctx: self.ctx.clone(),
            ctx_id: self.ctx_id,
            name: name.to_string(),
        })
    }
}

type Slot = Arc<Mutex<Option<Arc<Module>>>>;

/// Per-context cache of loaded modules, keyed by the disk-cache key (kept
/// in the context's registry).
#[derive(Default)]
struct ModuleCache {
    slots: Mutex<HashMap<u128, Slot>>,
}

impl Context {
    /// The module for `spec` on this context: from memory, else from the
    /// disk cache, else compiled. Concurrent first calls for one spec compile
    /// it once; the others wait for that compile.
    ///
    /// # Errors
    /// `LibraryNotFound`, `CudaHeadersNotFound`, `Nvrtc`, `Cuda`.
    pub fn module(&self, spec: &ModuleSpec) -> Result<Arc<Module>> {
        let arch = self.device().arch;
        let key = cache_key(spec, arch, nvrtc_version()?)?;
        let cache = self
            .inner
            .registry
            .get_or_create(None, || Ok(ModuleCache::default()))?;
        let slot = {
            let mut slots = cache.slots.lock().unwrap_or_else(|p| p.into_inner());
            slots.entry(key).or_default().clone()
        };
        let mut guard = slot.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(m) = guard.as_ref() {
            return Ok(m.clone());
        }
        let path = kernel_cache_dir().map(|d| d.join(format!("{key:032x}.cubin")));
        if let Some(cubin) = path.as_deref().and_then(read_cached) {
            if let Ok(m) = self.load(spec, cubin) {
                DISK_HITS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                log::debug!("{}: loaded from the kernel cache", spec_label(spec));
                *guard = Some(m.clone());
                return Ok(m);
            }
        }
        let label = spec_label(spec);
        log::info!("{label}: compiling for {arch} with NVRTC (not in the kernel cache)");
        let started = std::time::Instant::now();
        let cubin = compile_cubin(spec, arch)?;
        COMPILES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        log::info!(
            "{label}: compiled in {:.0} ms",
            started.elapsed().as_secs_f64() * 1e3
        );
        if let Some(p) = &path {
            write_cached(p, &cubin);
        }
        let m = self.load(spec, cubin)?;
        *guard = Some(m.clone());
        Ok(m)
    }

    /// Load many modules, compiling the missing ones in parallel.
    ///
    /// # Errors
    /// The first error of any module.
    pub fn modules(&self, specs: &[ModuleSpec]) -> Result<Vec<Arc<Module>>> {
        std::thread::scope(|s| {
            let handles: Vec<_> = specs
                .iter()
                .map(|sp| s.spawn(move || self.module(sp)))
                .collect();
            handles
                .into_iter()
                .map(|h| {
                    h.join().unwrap_or_else(|_| {
                        Err(Error::Unsupported {
                            op: "Context::modules",
                            what: "a compile thread panicked".into(),
                        })
                    })
                })
                .collect()
        })
    }

    fn load(&self, spec: &ModuleSpec, cubin: Vec<u8>) -> Result<Arc<Module>> {
        let cu = self
            .inner
            .cu
            .load_module(cudarc::nvrtc::Ptx::from_binary(cubin))
            .call("cuModuleLoadData")?;
        Ok(Arc::new(Module {
            cu,
            ctx: self.inner.cu.clone(),
            ctx_id: self.id(),
            name: spec.source.name,
        }))
    }
}

/// `source.cu [NAME=VALUE ...]`, how progress messages name a module.
fn spec_label(spec: &ModuleSpec) -> String {
    let mut s = spec.source.name.to_string();
    if !spec.defines.is_empty() {
        let defs: Vec<String> = spec
            .defines
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        s.push_str(&format!(" [{}]", defs.join(" ")));
    }
    s
}

/// Grid, block and dynamic shared memory of one launch.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct LaunchConfig {
    /// Blocks in x, y, z.
    pub grid: (u32, u32, u32),
    /// Threads per block in x, y, z.
    pub block: (u32, u32, u32),
    /// Dynamic shared memory in bytes.
    pub smem_bytes: u32,
}

impl LaunchConfig {
    /// A 1-D launch.
    pub fn linear(blocks: u32, threads: u32) -> Self {
        LaunchConfig {
            grid: (blocks, 1, 1),
            block: (threads, 1, 1),
            smem_bytes: 0,
        }
    }
}

/// A kernel of a loaded module. Cheap to clone; `Send + Sync`.
#[derive(Clone, Debug)]
pub struct Function {
    f: CudaFunction,
    /// The context the kernel was loaded in: the function attribute and
    /// occupancy queries need it current on the calling thread.
    ctx: Arc<CudaContext>,
    ctx_id: usize,
    name: String,
}

impl Function {
    /// Resident blocks per multiprocessor for `threads` per block and
    /// `smem_bytes` of dynamic shared memory.
    ///
    /// # Errors
    /// `Cuda` on failure.
    pub fn max_active_blocks_per_sm(&self, threads: u32, smem_bytes: usize) -> Result<u32> {
        self.ctx.bind_to_thread().call("cuCtxSetCurrent")?;
        self.f
            .occupancy_max_active_blocks_per_multiprocessor(threads, smem_bytes, None)
            .call("cuOccupancyMaxActiveBlocksPerMultiprocessor")
    }

    /// Allow up to `bytes` of dynamic shared memory (needed above 48 KiB).
    ///
    /// # Errors
    /// `Cuda` when the device cannot give that much.
    pub fn set_max_dynamic_smem(&self, bytes: usize) -> Result<()> {
        self.ctx.bind_to_thread().call("cuCtxSetCurrent")?;
        self.f
            .set_attribute(
                sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                bytes as i32,
            )
            .call("cuFuncSetAttribute")
    }

    /// Registers allocated per thread (what ptxas needed, or the spec's
    /// register floor when higher).
    ///
    /// # Errors
    /// `Cuda` on failure.
    pub fn num_regs(&self) -> Result<u32> {
        self.ctx.bind_to_thread().call("cuCtxSetCurrent")?;
        let n = self
            .f
            .get_attribute(sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_NUM_REGS)
            .call("cuFuncGetAttribute")?;
        Ok(n.max(0) as u32)
    }

    /// The kernel's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Enqueue the kernel on `stream`.
    ///
    /// # Errors
    /// `ContextMismatch` when the stream is on another context; `Cuda` when
    /// the launch is rejected.
    ///
    /// # Safety
    /// `args` must match the kernel's parameter list in number, order and
    /// type, and every device address in it must be valid for every access
    /// the kernel makes with this configuration until the work completes.
    pub unsafe fn launch(
        &self,
        stream: &Stream,
        cfg: LaunchConfig,
        args: &mut LaunchArgs,
    ) -> Result<()> {
        if stream.context().id() != self.ctx_id {
            return Err(Error::ContextMismatch {
                op: "launch",
                arg: "stream",
            });
        }
        let mut ptrs: [*mut c_void; MAX_PARAMS] = [std::ptr::null_mut(); MAX_PARAMS];
        let base = args.storage.as_mut_ptr() as *mut u8;
        for (i, &off) in args.offsets[..args.n].iter().enumerate() {
            // SAFETY: `off` is within `storage` (checked in `push`).
            ptrs[i] = unsafe { base.add(off) } as *mut c_void;
        }
        // SAFETY: the caller guarantees the parameters; `ptrs` points into
        // `args.storage`, alive for the call (cuLaunchKernel copies them).
        unsafe {
            result::launch_kernel(
                self.f.cu_function(),
                cfg.grid,
                cfg.block,
                cfg.smem_bytes,
                stream.raw(),
                &mut ptrs[..args.n],
            )
        }
        .call("cuLaunchKernel")
    }
}

const MAX_PARAMS: usize = 32;
const STORAGE_WORDS: usize = 256;

/// Kernel parameters packed by value, without heap allocation.
pub struct LaunchArgs {
    storage: [u64; STORAGE_WORDS],
    offsets: [usize; MAX_PARAMS],
    n: usize,
    used: usize,
}

impl Default for LaunchArgs {
    fn default() -> Self {
        LaunchArgs {
            storage: [0; STORAGE_WORDS],
            offsets: [0; MAX_PARAMS],
            n: 0,
            used: 0,
        }
    }
}

impl LaunchArgs {
    /// No parameters yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Append a parameter passed by value. `P` must be plain old data laid
    /// out as the kernel expects (`#[repr(C)]` for structs).
    ///
    /// # Errors
    /// `InvalidArgument` past 32 parameters or 2 KiB.
    pub fn push<P: Copy + 'static>(&mut self, v: P) -> Result<&mut Self> {
        let align = std::mem::align_of::<P>();
        let size = std::mem::size_of::<P>();
        let off = self.used.div_ceil(align) * align;
        if self.n == MAX_PARAMS || align > 8 || off + size > STORAGE_WORDS * 8 {
            return Err(Error::InvalidArgument {
                op: "launch",
                arg: "params",
                reason: "more than 32 kernel parameters or 2 KiB of them".into(),
            });
        }
        // SAFETY: `off + size` is within `storage`, `off` is aligned for `P`
        // (storage is 8-aligned and align <= 8).
        unsafe {
            let dst = (self.storage.as_mut_ptr() as *mut u8).add(off) as *mut P;
            dst.write(v);
        }
        self.offsets[self.n] = off;
        self.n += 1;
        self.used = off + size;
        Ok(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fnv_separates_parts() {
        assert_ne!(fnv128(&[b"ab", b"c"]), fnv128(&[b"a", b"bc"]));
        assert_eq!(fnv128(&[b"x"]), fnv128(&[b"x"]));
    }

    #[test]
    fn cache_entries_are_checked() {
        let dir = std::env::temp_dir().join(format!("baracuda-jit-test-{}", std::process::id()));
        let path = dir.join("k.cubin");
        write_cached(&path, b"hello cubin");
        assert_eq!(read_cached(&path).as_deref(), Some(&b"hello cubin"[..]));
        // flip a payload byte: the entry must be rejected
        let mut data = std::fs::read(&path).unwrap();
        let last = data.len() - 1;
        data[last] ^= 1;
        std::fs::write(&path, &data).unwrap();
        assert_eq!(read_cached(&path), None);
        // truncated
        std::fs::write(&path, &data[..20]).unwrap();
        assert_eq!(read_cached(&path), None);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn launch_args_pack_with_alignment() {
        let mut a = LaunchArgs::new();
        a.push(1u32)
            .unwrap()
            .push(2u64)
            .unwrap()
            .push(3.0f32)
            .unwrap();
        assert_eq!(&a.offsets[..3], &[0, 8, 16]);
        let mut b = LaunchArgs::new();
        for i in 0..MAX_PARAMS {
            b.push(i as u32).unwrap();
        }
        assert!(b.push(0u32).is_err());
    }

    #[test]
    fn missing_status_maps_to_nvrtc_error() {
        let e = nvrtc_status(
            "x",
            nvrtc::nvrtcResult::NVRTC_ERROR_COMPILATION,
            "k.cu",
            &[],
        );
        assert!(matches!(e, Err(Error::Nvrtc { .. })));
    }
}
