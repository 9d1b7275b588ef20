//! The op table: what a row is, and the generic runner every row's test
//! calls.
//!
//! A row is one plan (one member of a family). [`run_case`] checks, for
//! every dtype the row claims, every sample forward and backward against
//! the f64 reference; that every other dtype is `Unsupported`; and the
//! row's bad inputs. A row is either an [`OpCase`], which describes the op
//! as data (samples, inputs, the run, the reference, the tolerance) and
//! leaves the checking to the runner, or a [`CheckCase`], which checks its
//! samples in one function of its own (the elementwise rows).
//!
//! Each family lists its rows in a `&[&dyn Row]` and declares one test per
//! row with [`table_tests!`](crate::table_tests).

#![allow(dead_code)] // each family uses part of the table

use std::fmt::Debug;

use baracuda_kernels::{BackendKind, ElementKind, Error, Plan, PlanPreference};

use crate::harness::{
    compare, dtype_selected, expect_err, round_to, small_elems, small_mode, small_scope, Poisoned,
    Rng, Tolerance,
};

/// What the runner needs of a table row.
pub trait Row: Sync {
    /// Test name (also the `#[test]` function's name).
    fn name(&self) -> &'static str;
    /// Dtypes the op claims; every other dtype must be `Unsupported`.
    fn dtypes(&self) -> &'static [ElementKind];
    /// Forward and backward over every sample in `kind`; how many samples
    /// were checked.
    fn check(&self, kind: ElementKind) -> Result<usize, String>;
    /// The bad inputs, each returning its `Error` and writing nothing; how
    /// many were checked.
    fn bad_inputs(&self) -> Result<usize, String>;
    /// Select with `kind`, a dtype outside `dtypes`; must be `Unsupported`.
    fn unsupported(&self, kind: ElementKind) -> Result<(), String>;
    /// Like [`check`](Row::check) over one small sample in `kind` (the
    /// first whose inputs hold at most [`small_elems`] elements, else the
    /// smallest), on the calling thread's [`gpu`](crate::harness::gpu):
    /// what the concurrency test runs from many threads at once, each on
    /// its own stream. The default is [`check`](Row::check) in small-shapes
    /// mode ([`small_scope`]).
    fn check_one(&self, kind: ElementKind) -> Result<usize, String> {
        small_scope(|| self.check(kind))
    }
}

/// Host tensors by name, each in logical (row-major) order unless its row
/// says otherwise (the GEMM family's operands are stored buffers, leading
/// dimensions and all): the inputs of one sample, or the outputs of one
/// run, or their references. An input pushed with
/// [`push_exact`](Self::push_exact) (positions, f32 tables: data whose type
/// is not the row's dtype) is left as drawn when the inputs are rounded to
/// the dtype.
#[derive(Clone, Default)]
pub struct Tensors(Vec<(String, Vec<f64>)>, Vec<String>);

impl Tensors {
    /// Add `values` as `name`.
    pub fn push(&mut self, name: impl Into<String>, values: Vec<f64>) {
        self.0.push((name.into(), values));
    }
    /// Add `values` as `name`, an input the rounding to the row's dtype
    /// leaves as it is.
    pub fn push_exact(&mut self, name: impl Into<String>, values: Vec<f64>) {
        let name = name.into();
        self.1.push(name.clone());
        self.0.push((name, values));
    }
    /// Add integer `values` as `name` (as f64, rounded beyond 2^53) and
    /// their low 32 bits as `{name}_lo32`: compared both, exactly, two
    /// i64 that f64 rounds alike still differ.
    pub fn push_i64(&mut self, name: &str, values: &[i64]) {
        self.push(name, values.iter().map(|&v| v as f64).collect());
        self.push(
            format!("{name}_lo32"),
            values.iter().map(|&v| f64::from(v as u32)).collect(),
        );
    }
    /// The tensor `name`, if there is one.
    pub fn find(&self, name: &str) -> Option<&[f64]> {
        self.0
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_slice())
    }
    /// The tensor `name`, which the row's own functions put there.
    pub fn get(&self, name: &str) -> &[f64] {
        self.find(name)
            .unwrap_or_else(|| panic!("no tensor named {name}"))
    }
    /// The first output of tensor `name`: named `name` alone, or followed
    /// by a space and how it was computed (`"y"`, `"y by <sku>"`). What a
    /// reference reads of the run's outputs.
    pub fn output(&self, name: &str) -> Option<&[f64]> {
        self.iter()
            .find(|(n, _)| n.split(' ').next() == Some(name))
            .map(|(_, v)| v)
    }
    /// Elements of every tensor together.
    pub fn elems(&self) -> usize {
        self.0.iter().map(|(_, v)| v.len()).sum()
    }
    /// Every tensor, in the order they were added.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &[f64])> {
        self.0.iter().map(|(n, v)| (n.as_str(), v.as_slice()))
    }
}

/// Draws a sample's inputs, before rounding, by name.
pub type InputsFn<S> = fn(&S, &mut Rng) -> Tensors;
/// Runs a sample on the device in a dtype, on the rounded inputs: the
/// forward, and the gradients when asked; the outputs by name.
pub type RunFn<S> = fn(ElementKind, &S, &Tensors, bool) -> Result<Tensors, String>;
/// The f64 reference of every output: `(dtype, sample, inputs, the run's
/// outputs)`.
pub type ReferenceFn<S> = fn(ElementKind, &S, &Tensors, &Tensors) -> Tensors;

/// The bound of an output tensor: `(dtype, sample, tensor name, its
/// reference, the inputs)`. The inputs are for bounds that follow the
/// terms of a result rather than its value (a result that is the residue of
/// cancelling terms is off by a rounding of the terms).
pub type ToleranceFn<S> = fn(ElementKind, &S, &str, &[f64], &Tensors) -> Tolerance;

/// A row described as data. For every claimed dtype and every sample of
/// that dtype the runner: draws the inputs (seeded, never zero), rounds
/// them to the dtype, runs the op (which poisons its outputs with NaN
/// before the run and checks the guards around them after), and compares
/// every output the run returns with the reference of the same name.
///
/// Output names are a tensor's name, optionally followed by a space and
/// how it was computed (`"dx"`, `"dx alone"`): the reference is looked up
/// by the tensor's name, and when `backward` is set every reference tensor
/// must be compared at least once.
pub struct OpCase<S: 'static> {
    /// Test name (also the `#[test]` function's name).
    pub name: &'static str,
    /// Dtypes the op claims; every other dtype must be `Unsupported`.
    pub dtypes: &'static [ElementKind],
    /// The gradients are run and compared too.
    pub backward: bool,
    /// The problems a dtype runs. A sample that runs in some dtypes only
    /// (a backend forced where only those take it) is left out of the
    /// others' lists here, so the gap is in the row's data.
    pub samples: fn(ElementKind) -> Vec<S>,
    /// The sample's inputs before rounding, by name.
    pub inputs: InputsFn<S>,
    /// Run the sample on the device in a dtype, on the rounded inputs:
    /// the forward, and the gradients when asked; the outputs by name.
    pub run: RunFn<S>,
    /// The f64 reference of every output: `(dtype, sample, inputs, the
    /// run's outputs)` (the dtype for roundings the op makes on purpose,
    /// the outputs for what a gradient depends on, such as the ReLU mask).
    pub reference: ReferenceFn<S>,
    /// The bound of output tensor `name` of a sample in a dtype, given its
    /// reference.
    pub tolerance: ToleranceFn<S>,
    /// The bad inputs, each checked with [`BadInputs::expect`]; how many.
    pub bad_inputs: fn() -> Result<usize, String>,
    /// Select with a dtype outside `dtypes`; must return `Unsupported`.
    pub unsupported: fn(ElementKind) -> Result<(), String>,
}

impl<S: Debug + 'static> OpCase<S> {
    /// The sample's inputs rounded to `kind` (those pushed exact as they
    /// are).
    fn rounded(kind: ElementKind, raw: Tensors) -> Tensors {
        let mut inputs = Tensors::default();
        for (name, v) in raw.iter() {
            if raw.1.iter().any(|n| n == name) {
                inputs.push_exact(name, v.to_vec());
            } else {
                inputs.push(name, round_to(kind, v));
            }
        }
        inputs
    }

    /// `f(sample, its raw inputs)` for the samples of `kind` to check, in
    /// order, each drawn from the row's seeded generator: every sample, or
    /// with `limit` those whose inputs hold at most `limit` elements (the
    /// smallest sample when none does), and at most `take` of them.
    fn for_samples(
        &self,
        kind: ElementKind,
        limit: Option<usize>,
        take: usize,
        mut f: impl FnMut(&S, Tensors),
    ) {
        let samples = (self.samples)(kind);
        let mut rng = Rng::new(seed(self.name, kind));
        let mut taken = 0;
        let mut smallest: Option<(usize, Tensors)> = None;
        for (i, s) in samples.iter().enumerate() {
            if taken == take {
                return;
            }
            let raw = (self.inputs)(s, &mut rng);
            let n = raw.elems();
            if limit.is_some_and(|l| n > l) {
                if smallest.as_ref().is_none_or(|(_, t)| t.elems() > n) {
                    smallest = Some((i, raw));
                }
                continue;
            }
            taken += 1;
            f(s, raw);
        }
        if taken == 0 {
            if let Some((i, raw)) = smallest {
                f(&samples[i], raw);
            }
        }
    }

    /// Check the samples [`for_samples`](Self::for_samples) picks; how many.
    fn checked(
        &self,
        kind: ElementKind,
        limit: Option<usize>,
        take: usize,
    ) -> Result<usize, String> {
        let (mut checked, mut failures) = (0, Vec::new());
        self.for_samples(kind, limit, take, |s, raw| {
            checked += 1;
            if let Err(e) = self.check_sample(kind, s, raw) {
                failures.push(format!("{s:?}: {e}"));
            }
        });
        if failures.is_empty() {
            Ok(checked)
        } else {
            Err(format!(
                "{} of {checked} samples failed:\n{}",
                failures.len(),
                failures.join("\n")
            ))
        }
    }

    fn check_sample(&self, kind: ElementKind, sample: &S, raw: Tensors) -> Result<(), String> {
        let inputs = Self::rounded(kind, raw);
        let got = (self.run)(kind, sample, &inputs, self.backward)?;
        let want = (self.reference)(kind, sample, &inputs, &got);
        for (name, values) in got.iter() {
            let tensor = name.split(' ').next().unwrap_or(name);
            let w = want
                .find(tensor)
                .ok_or_else(|| format!("{name}: no reference"))?;
            let tol = (self.tolerance)(kind, sample, tensor, w, &inputs);
            compare(name, values, w, tol, None)?;
        }
        if self.backward {
            for (name, _) in want.iter() {
                let compared = got.iter().any(|(g, _)| g.split(' ').next() == Some(name));
                if !compared {
                    return Err(format!("{name}: the run did not return it"));
                }
            }
        }
        Ok(())
    }
}

impl<S: Debug + 'static> Row for OpCase<S> {
    fn name(&self) -> &'static str {
        self.name
    }
    fn dtypes(&self) -> &'static [ElementKind] {
        self.dtypes
    }
    fn check(&self, kind: ElementKind) -> Result<usize, String> {
        self.checked(kind, small_mode().then(small_elems), usize::MAX)
    }
    fn bad_inputs(&self) -> Result<usize, String> {
        (self.bad_inputs)()
    }
    fn unsupported(&self, kind: ElementKind) -> Result<(), String> {
        (self.unsupported)(kind)
    }
    fn check_one(&self, kind: ElementKind) -> Result<usize, String> {
        self.checked(kind, Some(small_elems()), 1)
    }
}

/// A row that checks its samples in one function of its own.
pub struct CheckCase {
    /// Test name (also the `#[test]` function's name).
    pub name: &'static str,
    /// Dtypes the op claims; every other dtype must be `Unsupported`.
    pub dtypes: &'static [ElementKind],
    /// Forward and backward over every sample for one dtype; returns the
    /// number of samples checked.
    pub check: fn(ElementKind) -> Result<usize, String>,
    /// Bad inputs, each asserting its `Error` variant and that nothing was
    /// written; returns how many were checked.
    pub bad_inputs: fn() -> Result<usize, String>,
    /// Select with a dtype outside `dtypes`; must return `Unsupported`.
    pub unsupported: fn(ElementKind) -> Result<(), String>,
}

impl Row for CheckCase {
    fn name(&self) -> &'static str {
        self.name
    }
    fn dtypes(&self) -> &'static [ElementKind] {
        self.dtypes
    }
    fn check(&self, kind: ElementKind) -> Result<usize, String> {
        (self.check)(kind)
    }
    fn bad_inputs(&self) -> Result<usize, String> {
        (self.bad_inputs)()
    }
    fn unsupported(&self, kind: ElementKind) -> Result<(), String> {
        (self.unsupported)(kind)
    }
}

/// A seed per row and dtype (FNV-1a of the name, then the dtype).
fn seed(name: &str, kind: ElementKind) -> u64 {
    let mut h = 0xCBF2_9CE4_8422_2325u64;
    for b in name.bytes().chain(kind.name().bytes()) {
        h = (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01B3);
    }
    h
}

/// The bad inputs of a row, counted as they are checked.
#[derive(Default)]
pub struct BadInputs {
    checked: usize,
}

impl BadInputs {
    /// `r` must be an error that `pred` accepts (the variant the bad input
    /// must return), and every output in `outputs` still only poison.
    pub fn expect<T>(
        &mut self,
        what: &str,
        r: baracuda_kernels::Result<T>,
        pred: impl Fn(&Error) -> bool,
        outputs: &[&dyn Poisoned],
    ) -> Result<(), String> {
        self.checked += 1;
        expect_err(what, r, pred)?;
        outputs.iter().try_for_each(|o| o.untouched(what))
    }
    /// The select checks every plan of this crate's own kernels makes: a
    /// descriptor of another dtype than the plan's (`other_dtype`) is
    /// `DtypeMismatch`, and a cuDNN backend preference
    /// `PreferenceRejected`.
    pub fn own_kernel_select<P: Plan>(
        &mut self,
        desc: &P::Descriptor,
        other_dtype: &P::Descriptor,
    ) -> Result<(), String> {
        let st = &crate::harness::gpu().stream;
        let pref = PlanPreference::default();
        self.expect(
            "descriptor of another dtype",
            P::select(st, other_dtype, &pref),
            crate::harness::dtype_mismatch,
            &[],
        )?;
        self.expect(
            "backend cuDNN",
            P::select(st, desc, &pref.with_backend(BackendKind::Cudnn)),
            crate::harness::preference_rejected("backend"),
            &[],
        )
    }
    /// How many were checked: what a row's `bad_inputs` returns.
    pub fn done(self) -> Result<usize, String> {
        Ok(self.checked)
    }
}

/// Run one table row: every claimed dtype, every other dtype's rejection,
/// and the bad inputs. Panics with every failure.
pub fn run_case(case: &dyn Row) {
    let name = case.name();
    let mut failures = Vec::new();
    let mut checked = 0;
    for kind in ElementKind::ALL {
        if case.dtypes().contains(&kind) {
            if !dtype_selected(kind) {
                continue;
            }
            match case.check(kind) {
                Ok(n) if n > 0 => checked += n,
                Ok(_) => failures.push(format!("{name} {kind}: no sample was checked")),
                Err(e) => failures.push(format!("{name} {kind}: {e}")),
            }
        } else if let Err(e) = case.unsupported(kind) {
            failures.push(format!("{name} {kind}: {e}"));
        }
    }
    match case.bad_inputs() {
        Ok(n) if n > 0 => {}
        Ok(_) => failures.push(format!("{name}: no bad input was checked")),
        Err(e) => failures.push(format!("{name} bad inputs: {e}")),
    }
    assert!(
        failures.is_empty(),
        "{} failure(s):\n{}",
        failures.len(),
        failures.join("\n")
    );
    eprintln!("{name}: {checked} samples checked");
}

/// The row of `table` named `name`.
pub fn row(table: &[&'static dyn Row], name: &str) -> &'static dyn Row {
    *table
        .iter()
        .find(|r| r.name() == name)
        .unwrap_or_else(|| panic!("no table row named {name}"))
}

/// Panics unless every row of `table` has a test in `tests`, and no test
/// lacks a row.
pub fn check_tests(table: &[&dyn Row], tests: &[&str]) {
    for r in table {
        assert!(tests.contains(&r.name()), "row {} has no test", r.name());
    }
    assert_eq!(tests.len(), table.len(), "a test has no row");
}

/// One `#[ignore]`d test per row of `$table` (a `&[&dyn Row]`), named as
/// the row, that runs [`run_case`] on it; and a host test that every row
/// has its test.
#[macro_export]
macro_rules! table_tests {
    ($table:expr; $($name:ident),* $(,)?) => {
        $(
            #[test]
            #[ignore = "needs a CUDA GPU"]
            fn $name() {
                $crate::table::run_case($crate::table::row($table, stringify!($name)));
            }
        )*

        #[test]
        fn every_table_row_has_a_test() {
            $crate::table::check_tests($table, &[$(stringify!($name)),*]);
        }
    };
}
