//! The one cache of measured autotuning choices, for every family.
//!
//! When `PlanPreference::autotune` is `Measured`, `select` times candidate
//! implementations and keeps the fastest. The choice is kept here, keyed by
//! the family, the device model (name, architecture, SM count: a choice
//! measured on one H200 holds on another), the versions of the library
//! whose algorithm it names and of this crate, and the family's own
//! description of the problem. A later `select` of the same problem, on
//! any stream of any context, reuses it without timing.
//!
//! With `BARACUDA_AUTOTUNE_FILE` set, the choices a family can write as
//! text ([`Choice::encode`]) persist: the file is read at the first lookup
//! of the process and every new choice is appended as one line, so a later
//! process skips the timing too. Lines are tab-separated: family, device,
//! libraries, problem, choice. A line that does not parse, or whose choice
//! the family no longer decodes, is ignored (the problem is timed again);
//! a failed write only costs a later re-tune.

use std::any::Any;
use std::collections::HashMap;
use std::io::Write;
use std::sync::{Arc, Mutex, OnceLock};

use baracuda_driver::{loaded_library, CudaLib, Stream};
use baracuda_kernels_types::Result;

/// The environment variable naming the autotune file.
pub(crate) const FILE_ENV: &str = "BARACUDA_AUTOTUNE_FILE";

/// A measured choice a family keeps in the cache.
pub(crate) trait Choice: Clone + Send + Sync + 'static {
    /// The text written to the autotune file (no tab or newline), or None
    /// to keep the choice for this process only.
    fn encode(&self) -> Option<String> {
        None
    }
    /// The choice of a line `encode` wrote, or None when it does not parse.
    fn decode(_text: &str) -> Option<Self> {
        None
    }
}

impl Choice for bool {
    fn encode(&self) -> Option<String> {
        Some(self.to_string())
    }
    fn decode(text: &str) -> Option<bool> {
        text.parse().ok()
    }
}

/// What a choice is keyed by, beside the device.
#[derive(Copy, Clone, Debug)]
pub(crate) struct Key<'a> {
    /// The family (and, where a family keeps several kinds of choice, the
    /// kind): `conv`, `gemm`, `linear.db`.
    pub family: &'static str,
    /// The library whose algorithm the choice names (its version is part
    /// of the key), or None for a choice among this crate's kernels.
    pub library: Option<CudaLib>,
    /// The problem, in the family's own words: everything the choice
    /// depends on (shapes, dtypes, layout, the preference's fields).
    pub problem: &'a str,
}

/// The process's choices: decoded values by full key, and the lines of the
/// autotune file not decoded yet.
#[derive(Default)]
struct Store {
    values: HashMap<String, Arc<dyn Any + Send + Sync>>,
    file: HashMap<String, String>,
}

fn store() -> &'static Mutex<Store> {
    static STORE: OnceLock<Mutex<Store>> = OnceLock::new();
    STORE.get_or_init(|| {
        let mut s = Store::default();
        if let Ok(text) = std::env::var(FILE_ENV)
            .and_then(|p| std::fs::read_to_string(p).map_err(|_| std::env::VarError::NotPresent))
        {
            s.file = parse_file(&text);
        }
        Mutex::new(s)
    })
}

/// Tabs and newlines would break a file line; the keys' fields never need
/// them.
fn field(text: &str) -> String {
    text.replace(['\t', '\n'], " ")
}

/// The full key of `key` on `stream`'s device:
/// `family \t device \t libraries \t problem`.
fn full_key(stream: &Stream, key: &Key<'_>) -> String {
    let dev = stream.context().device();
    let library = key
        .library
        .map(|lib| match loaded_library(lib) {
            Ok((version, _)) => version,
            Err(_) => format!("{lib:?} (version unknown)"),
        })
        .unwrap_or_default();
    format!(
        "{}\t{} {} {} SMs\t{library} baracuda {}\t{}",
        field(key.family),
        field(&dev.name),
        dev.arch,
        dev.sm_count,
        env!("CARGO_PKG_VERSION"),
        field(key.problem)
    )
}

/// `full key -> choice text` of every well-formed line of an autotune file
/// (five tab-separated fields); later lines win.
fn parse_file(text: &str) -> HashMap<String, String> {
    text.lines()
        .filter_map(|line| {
            let (key, choice) = line.rsplit_once('\t')?;
            (key.split('\t').count() == 4 && !choice.is_empty())
                .then(|| (key.to_string(), choice.to_string()))
        })
        .collect()
}

fn lock() -> std::sync::MutexGuard<'static, Store> {
    store().lock().unwrap_or_else(|e| e.into_inner())
}

/// The cached choice of `key`, if this process or the autotune file has
/// one.
pub(crate) fn lookup<V: Choice>(stream: &Stream, key: Key<'_>) -> Option<V> {
    let full = full_key(stream, &key);
    let mut s = lock();
    if let Some(v) = s.values.get(&full) {
        return v.downcast_ref::<V>().cloned();
    }
    let v = V::decode(s.file.get(&full)?)?;
    s.values.insert(full, Arc::new(v.clone()));
    Some(v)
}

/// Keep `choice` for `key`, and append it to the autotune file when one is
/// set and the choice has a text form.
pub(crate) fn insert<V: Choice>(stream: &Stream, key: Key<'_>, choice: V) {
    let full = full_key(stream, &key);
    let line = choice
        .encode()
        .map(|text| format!("{full}\t{}\n", field(&text)));
    lock().values.insert(full, Arc::new(choice));
    if let (Some(line), Ok(path)) = (line, std::env::var(FILE_ENV)) {
        if let Ok(mut f) = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
        {
            let _ = f.write_all(line.as_bytes());
        }
    }
}

/// The cached choice of `key`, or the one `measure` returns (then cached).
///
/// # Errors
/// What `measure` returns.
pub(crate) fn get_or_measure<V: Choice>(
    stream: &Stream,
    key: Key<'_>,
    measure: impl FnOnce() -> Result<V>,
) -> Result<V> {
    if let Some(v) = lookup(stream, key) {
        log::debug!("autotune: cached choice for {}", full_key(stream, &key));
        return Ok(v);
    }
    log::info!("autotune: timing candidates for {}", full_key(stream, &key));
    let started = std::time::Instant::now();
    let v = measure()?;
    log::info!(
        "autotune: chose in {:.0} ms",
        started.elapsed().as_secs_f64() * 1e3
    );
    insert(stream, key, v.clone());
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_lines_parse_by_field_count() {
        let text = "conv\tNVIDIA H200 sm_90a 132 SMs\tcuDNN 91400 baracuda 0.1.0\tproblem a\t12:1=2|3:|4:\n\
                    garbage line\n\
                    gemm\tdev\tlibs\tproblem b\t\n\
                    linear.db\tdev\tlibs\tproblem c\ttrue\n\
                    linear.db\tdev\tlibs\tproblem c\tfalse\n";
        let m = parse_file(text);
        assert_eq!(m.len(), 2);
        assert_eq!(
            m["conv\tNVIDIA H200 sm_90a 132 SMs\tcuDNN 91400 baracuda 0.1.0\tproblem a"],
            "12:1=2|3:|4:"
        );
        // the later line wins
        assert_eq!(m["linear.db\tdev\tlibs\tproblem c"], "false");
    }

    #[test]
    fn fields_hold_no_separators() {
        assert_eq!(field("a\tb\nc"), "a b c");
        assert_eq!(bool::decode(&true.encode().unwrap()), Some(true));
        assert_eq!(bool::decode("maybe"), None);
    }
}
