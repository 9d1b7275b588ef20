//! The case list: `bench/cases/<family>.json`, the one list both
//! `baracuda-bench` and `bench/torch_baseline.py` read, so that the two
//! sides of a comparison cannot drift. Schema and formulas:
//! `bench/cases/README.md`.
//!
//! The files are built into the binary ([`Family::builtin`]), which therefore
//! needs nothing beside it on the GPU machine; `BARACUDA_BENCH_CASES=DIR`
//! reads `DIR/<family>.json` instead (the Python side honours the same
//! variable). Each family module turns its file into [`Job`]s: the
//! result [`Row`]s the case will print (name, pass, dtype, shape and the
//! work its rate is computed from) and the closure that times it. An
//! unknown family, op, parameter, pass or dtype is an error before anything
//! runs, not a skipped case; the tests below check every built-in case
//! that way and compare the rows with the ones the Python side derives.

use baracuda_kernels::{ConvLayout, ElementKind, Error, LayoutSku, Stream};
use serde::de::{DeserializeOwned, Error as _};
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::{Map, Value};

/// One family of cases: its name, its built-in case file, and how a
/// parsed file becomes jobs. The binary's table of them is `FAMILIES` in
/// `main.rs`.
pub struct Family {
    /// The name (`bench/cases/<name>.json`).
    pub name: &'static str,
    /// The built-in case file.
    pub builtin: &'static str,
    /// The parsed file's jobs.
    pub build: fn(&CaseFile) -> Checked<Vec<Job>>,
}

/// Names a directory whose `<family>.json` files replace the built-in ones.
pub const CASES_ENV: &str = "BARACUDA_BENCH_CASES";

/// A case-list problem: what is wrong, naming the family and case.
pub type Checked<T> = std::result::Result<T, String>;

/// What a case's closure gets: the stream and the case's rows, one per
/// pass, in the order the passes are timed.
pub type RunFn = Box<dyn Fn(&Stream, &[Row]) -> baracuda_kernels::Result<()>>;

/// One result line's identity and work, derived from the case's
/// parameters by the formulas in `bench/cases/README.md`;
/// `bench/torch_baseline.py --list` prints the same rows.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Row {
    /// Case name: the join key of the comparison, matched by
    /// `BARACUDA_BENCH_ONLY`.
    pub name: String,
    /// Pass (`fw`, `bw`, `bw_data`, `dw`).
    pub pass: &'static str,
    /// Input element type.
    pub dtype: &'static str,
    /// Shape string.
    pub shape: String,
    /// Minimum bytes moved (GB/s cases).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bytes: Option<u64>,
    /// Floating-point (or integer multiply-add) operations (TFLOP/s cases).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub flops: Option<u64>,
    /// Bytes one call touches, from which `harness::rotation` picks the
    /// number of buffer sets (cases that rotate by L2 size).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rotation_bytes: Option<u64>,
}

impl Row {
    /// With the minimum bytes moved.
    pub fn bytes(mut self, bytes: usize) -> Row {
        self.bytes = Some(bytes as u64);
        self
    }
    /// With the operation count.
    pub fn flops(mut self, flops: usize) -> Row {
        self.flops = Some(flops as u64);
        self
    }
    /// With the bytes per call that buffer rotation covers.
    pub fn rotation(mut self, bytes: usize) -> Row {
        self.rotation_bytes = Some(bytes as u64);
        self
    }
}

/// One case ready to run.
pub struct Job {
    /// Case name.
    pub name: String,
    /// A ceiling the comparison is judged against: measured whatever
    /// `BARACUDA_BENCH_ONLY` says.
    pub ceiling: bool,
    /// One row per pass, in the order they are timed.
    pub rows: Vec<Row>,
    /// Times every pass and prints its row.
    pub run: RunFn,
}

/// A family's case file.
#[derive(Deserialize)]
pub struct CaseFile {
    /// Must be the family the file is read for.
    pub family: String,
    /// The cases, in the order they run.
    pub cases: Vec<RawCase>,
    /// The family's own settings (parsed by [`CaseFile::settings`]).
    #[serde(flatten)]
    settings: Map<String, Value>,
}

impl CaseFile {
    fn parse(family: &str, text: &str) -> Checked<CaseFile> {
        let file: CaseFile =
            serde_json::from_str(text).map_err(|e| format!("{family} case file: {e}"))?;
        if file.family != family {
            return Err(format!("{family} case file says family {:?}", file.family));
        }
        if file.cases.is_empty() {
            return Err(format!("{family} case file has no cases"));
        }
        Ok(file)
    }

    /// The family-level settings as `S` (which denies unknown fields).
    pub fn settings<S: DeserializeOwned>(&self) -> Checked<S> {
        serde_json::from_value(Value::Object(self.settings.clone()))
            .map_err(|e| format!("{} case file settings: {e}", self.family))
    }

    /// The jobs of a family without settings ([`NoSettings`]): `job` of
    /// every case.
    pub fn jobs_without_settings(
        &self,
        job: impl Fn(&RawCase) -> Checked<Job>,
    ) -> Checked<Vec<Job>> {
        let NoSettings {} = self.settings()?;
        self.cases.iter().map(job).collect()
    }
}

/// The settings of a family that has none: its file holds only `family`
/// and `cases`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NoSettings {}

/// One case as the file spells it: the fields every case has, and the
/// op's own parameters, which the family parses with [`RawCase::params`].
#[derive(Deserialize)]
pub struct RawCase {
    /// Case name (reported as `op` in the result line).
    pub name: String,
    /// What to compute; each family has its own ops.
    pub op: String,
    dtype: String,
    passes: Vec<String>,
    /// See [`Job::ceiling`].
    #[serde(default)]
    pub ceiling: bool,
    #[serde(flatten)]
    params: Map<String, Value>,
}

impl RawCase {
    /// An error about this case.
    pub fn error(&self, what: impl std::fmt::Display) -> String {
        format!("case {} ({}, {}): {what}", self.name, self.op, self.dtype)
    }

    /// The op's parameters as `P` (which denies unknown fields).
    pub fn params<P: DeserializeOwned>(&self) -> Checked<P> {
        serde_json::from_value(Value::Object(self.params.clone())).map_err(|e| self.error(e))
    }

    /// The input element type.
    pub fn dtype(&self) -> Checked<ElementKind> {
        dtype(&self.dtype).map_err(|e| self.error(e))
    }

    /// The passes to time: a non-empty selection of `allowed`, in
    /// `allowed`'s order, without repeats.
    pub fn passes(&self, allowed: &[&'static str]) -> Checked<Vec<&'static str>> {
        let mut out: Vec<&'static str> = Vec::new();
        for p in &self.passes {
            let Some(i) = allowed.iter().position(|a| a == p) else {
                return Err(self.error(format!("unknown pass {p:?} (takes {allowed:?})")));
            };
            if out
                .last()
                .is_some_and(|l| allowed.iter().position(|a| a == l) >= Some(i))
            {
                return Err(self.error(format!(
                    "passes {:?} not in the order {allowed:?}",
                    self.passes
                )));
            }
            out.push(allowed[i]);
        }
        if out.is_empty() {
            return Err(self.error("no passes"));
        }
        Ok(out)
    }

    /// One row per pass of `passes`: this case's name, the pass, `dtype`
    /// and `shape`, with the work `row` adds.
    pub fn rows(
        &self,
        passes: &[&'static str],
        dtype: ElementKind,
        shape: &str,
        row: impl Fn(Row) -> Row,
    ) -> Vec<Row> {
        passes
            .iter()
            .map(|&pass| {
                row(Row {
                    name: self.name.clone(),
                    pass,
                    dtype: dtype.name(),
                    shape: shape.to_string(),
                    bytes: None,
                    flops: None,
                    rotation_bytes: None,
                })
            })
            .collect()
    }

    /// The job of this case.
    pub fn job(&self, rows: Vec<Row>, run: RunFn) -> Job {
        Job {
            name: self.name.clone(),
            ceiling: self.ceiling,
            rows,
            run,
        }
    }

    /// The error for an op the family does not have.
    pub fn unknown_op(&self) -> String {
        self.error("unknown op")
    }
}

/// The element type named `name` (`ElementKind::name`).
pub fn dtype(name: &str) -> Checked<ElementKind> {
    ElementKind::ALL
        .into_iter()
        .find(|k| k.name() == name)
        .ok_or_else(|| format!("unknown dtype {name:?}"))
}

/// Deserializes a dtype name.
pub fn de_dtype<'de, D: Deserializer<'de>>(d: D) -> Result<ElementKind, D::Error> {
    dtype(&String::deserialize(d)?).map_err(D::Error::custom)
}

/// Deserializes a GEMM layout name (`LayoutSku::name`: `rrr`, `rcr`, ...).
pub fn de_layout<'de, D: Deserializer<'de>>(d: D) -> Result<LayoutSku, D::Error> {
    let name = String::deserialize(d)?;
    LayoutSku::ALL
        .into_iter()
        .find(|l| l.name() == name)
        .ok_or_else(|| D::Error::custom(format!("unknown layout {name:?}")))
}

/// Deserializes a convolution memory order (`channels_first`,
/// `channels_last`).
pub fn de_conv_layout<'de, D: Deserializer<'de>>(d: D) -> Result<ConvLayout, D::Error> {
    match String::deserialize(d)?.as_str() {
        "channels_first" => Ok(ConvLayout::ChannelsFirst),
        "channels_last" => Ok(ConvLayout::ChannelsLast),
        other => Err(D::Error::custom(format!(
            "unknown layout {other:?} (takes channels_first, channels_last)"
        ))),
    }
}

/// `$body` with the type alias `$t` set to the Rust type of element kind
/// `$dtype`, for each listed kind; any other kind returns the error that
/// `$case` (a [`RawCase`]) does not support it.
macro_rules! by_dtype {
    ($case:expr, $dtype:expr, [$($kind:ident => $ty:ty),+ $(,)?], $t:ident => $body:expr) => {
        match $dtype {
            $(baracuda_kernels::ElementKind::$kind => {
                type $t = $ty;
                $body
            })+
            other => return Err($case.error(format!("dtype {other} is not implemented"))),
        }
    };
}
pub(crate) use by_dtype;

/// The error a case closure returns for a pass its family does not time
/// (the case list was checked, so this is a bench bug).
pub fn bad_pass(pass: &str) -> Error {
    Error::InvalidArgument {
        op: "bench",
        arg: "pass",
        reason: format!("no timing code for pass {pass:?}"),
    }
}

/// The case file text of `family`: from `BARACUDA_BENCH_CASES` when set,
/// else built in.
fn source(family: &str, builtin: &str) -> Checked<String> {
    match std::env::var_os(CASES_ENV) {
        Some(dir) => {
            let path = std::path::Path::new(&dir).join(format!("{family}.json"));
            std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))
        }
        None => Ok(builtin.to_string()),
    }
}

/// The jobs of `family` (one of `families`) from case file text `text`.
pub fn jobs(families: &[Family], family: &str, text: &str) -> Checked<Vec<Job>> {
    let file = CaseFile::parse(family, text)?;
    let f = families
        .iter()
        .find(|f| f.name == family)
        .ok_or_else(|| format!("unknown family {family:?}"))?;
    let jobs = (f.build)(&file)?;
    let mut keys = std::collections::HashSet::new();
    for r in jobs.iter().flat_map(|j| &j.rows) {
        if !keys.insert((&r.name, r.pass, r.dtype)) {
            return Err(format!(
                "{family}: two cases time {} {} {}",
                r.name, r.pass, r.dtype
            ));
        }
    }
    Ok(jobs)
}

/// The families named in `wanted` (all when empty) in run order, each
/// with its jobs.
///
/// # Errors
/// A name that is not a family, or a case file that does not check.
pub fn load(
    families: &'static [Family],
    wanted: &[String],
) -> Checked<Vec<(&'static str, Vec<Job>)>> {
    if let Some(w) = wanted
        .iter()
        .find(|w| !families.iter().any(|f| f.name == w.as_str()))
    {
        let names: Vec<&str> = families.iter().map(|f| f.name).collect();
        return Err(format!("unknown family {w:?} (takes {names:?})"));
    }
    families
        .iter()
        .filter(|f| wanted.is_empty() || wanted.iter().any(|w| w == f.name))
        .map(|f| Ok((f.name, jobs(families, f.name, &source(f.name, f.builtin)?)?)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn bench_dir() -> PathBuf {
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../bench")
    }

    fn rows_of(family: &str, text: &str) -> Vec<Row> {
        jobs(crate::FAMILIES, family, text)
            .unwrap_or_else(|e| panic!("{e}"))
            .into_iter()
            .flat_map(|j| j.rows)
            .collect()
    }

    /// Every built-in case is one the dispatcher knows, and every file in
    /// `bench/cases` is a built-in family.
    #[test]
    fn every_case_file_is_built_in_and_every_case_resolves() {
        let mut on_disk: Vec<String> = std::fs::read_dir(bench_dir().join("cases"))
            .expect("bench/cases")
            .filter_map(|e| {
                let name = e.ok()?.file_name().into_string().ok()?;
                Some(name.strip_suffix(".json")?.to_string())
            })
            .collect();
        on_disk.sort();
        let mut built_in: Vec<String> =
            crate::FAMILIES.iter().map(|f| f.name.to_string()).collect();
        built_in.sort();
        assert_eq!(on_disk, built_in, "bench/cases/*.json against FAMILIES");
        let mut registered: Vec<String> = baracuda_kernels::FAMILIES
            .iter()
            .map(|f| f.name.to_string())
            .collect();
        registered.sort();
        assert_eq!(
            built_in, registered,
            "every family registered in baracuda_kernels has a case file, and no other"
        );
        for &Family {
            name: family,
            builtin: text,
            ..
        } in crate::FAMILIES
        {
            let on_disk = std::fs::read_to_string(bench_dir().join(format!("cases/{family}.json")))
                .expect("case file");
            assert_eq!(text, on_disk, "{family}: built-in text is the file's");
            assert!(!rows_of(family, text).is_empty());
        }
    }

    /// What the tests below feed `jobs`: `case` in a gemm file.
    fn gemm_with(case: &str) -> String {
        format!(r#"{{"family": "gemm", "cases": [{case}]}}"#)
    }

    const OK: &str = r#"{"name": "g", "op": "matmul", "dtype": "bf16", "m": 8, "n": 8, "k": 8, "layout": "rrr", "passes": ["fw"]}"#;

    /// Cases each side must reject, with what Rust's error says.
    fn bad_cases() -> Vec<(String, &'static str)> {
        vec![
            (OK.replace("matmul", "matmull"), "unknown op"),
            (OK.replace("\"bf16\"", "\"bf17\""), "unknown dtype"),
            (OK.replace("\"rrr\"", "\"rrx\""), "unknown layout"),
            (OK.replace("\"fw\"", "\"bw\""), "unknown pass"),
            (
                OK.replace("\"m\": 8", "\"m\": 8, \"batch\": 2"),
                "unknown field",
            ),
            (OK.replace("\"m\": 8, ", ""), "missing field"),
            (OK.replace("\"bf16\"", "\"i8\""), "not implemented"),
            (format!("{OK}, {OK}"), "two cases"),
        ]
    }

    #[test]
    fn unknown_names_are_errors_not_skips() {
        assert_eq!(rows_of("gemm", &gemm_with(OK)).len(), 1);
        for (bad, why) in bad_cases() {
            let err = jobs(crate::FAMILIES, "gemm", &gemm_with(&bad))
                .err()
                .unwrap_or_else(|| panic!("accepted {bad}"));
            assert!(err.contains(why), "{err:?} should say {why:?}");
        }
        assert!(jobs(
            crate::FAMILIES,
            "gemm",
            r#"{"family": "conv", "cases": []}"#
        )
        .is_err());
        assert!(jobs(
            crate::FAMILIES,
            "gemmm",
            &gemm_with(OK).replace("gemm", "gemmm")
        )
        .is_err());
        assert!(load(crate::FAMILIES, &["gemmm".to_string()]).is_err());
    }

    /// `bench/torch_baseline.py --list [family]` over the case files in
    /// `dir` (the built-in ones when None); None without python3, except
    /// under `CI=true`, where that fails the test.
    fn python_list(family: &str, dir: Option<&std::path::Path>) -> Option<std::process::Output> {
        let mut cmd = std::process::Command::new("python3");
        cmd.arg(bench_dir().join("torch_baseline.py"))
            .arg("--list")
            .arg(family)
            .env_remove(CASES_ENV);
        if let Some(dir) = dir {
            cmd.env(CASES_ENV, dir);
        }
        match cmd.output() {
            Ok(out) => Some(out),
            Err(e) if std::env::var("CI").as_deref() != Ok("true") => {
                eprintln!("skipped: no python3 ({e})");
                None
            }
            Err(e) => panic!("python3: {e}"),
        }
    }

    /// The Python side rejects what the Rust side rejects (and accepts the
    /// good case), without importing torch.
    #[test]
    fn python_rejects_the_same_cases() {
        let dir = std::env::temp_dir().join(format!("baracuda-bench-cases-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let mut cases = vec![(OK.to_string(), "")];
        cases.extend(bad_cases());
        for (case, why) in cases {
            std::fs::write(dir.join("gemm.json"), gemm_with(&case)).expect("write");
            let Some(out) = python_list("gemm", Some(&dir)) else {
                break;
            };
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.success(), why.is_empty(), "{case}: {stderr}");
        }
        std::fs::remove_dir_all(&dir).ok();
    }

    /// The Python side reads the same files into the same rows: every
    /// name, pass, dtype, shape string, byte and FLOP count and rotation
    /// size, in the same order (`bench/torch_baseline.py --list`, which
    /// must not import torch). Without python3 the check is skipped,
    /// except under `CI=true`, where it fails.
    #[test]
    fn rows_match_the_python_side() {
        for &Family {
            name: family,
            builtin: text,
            ..
        } in crate::FAMILIES
        {
            let Some(out) = python_list(family, None) else {
                return;
            };
            assert!(
                out.status.success(),
                "torch_baseline.py --list {family}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            let python: Vec<Value> = String::from_utf8_lossy(&out.stdout)
                .lines()
                .map(|l| serde_json::from_str(l).expect("a JSON line"))
                .collect();
            let rust: Vec<Value> = rows_of(family, text)
                .iter()
                .map(|r| serde_json::to_value(r).expect("row"))
                .collect();
            assert_eq!(rust.len(), python.len(), "{family}: row count");
            for (r, p) in rust.iter().zip(&python) {
                assert_eq!(r, p, "{family}: Rust row, then Python row");
            }
        }
    }
}
