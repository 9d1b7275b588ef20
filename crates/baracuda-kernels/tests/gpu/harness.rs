//! Shared machinery of the GPU tests: the device, seeded random inputs,
//! NaN-poisoned outputs, strided host views, dtype tolerances, the
//! comparison that names the first bad element, and the op table runner.

#![allow(dead_code)] // each family uses part of the harness

use std::sync::OnceLock;

use baracuda_kernels::*;

/// The device, one context and one stream shared by every test.
pub struct Gpu {
    /// Context on device 0.
    pub ctx: Context,
    /// Stream the tests run on.
    pub stream: Stream,
}

/// The shared GPU (panics when there is none: these tests are `#[ignore]`d
/// and run only on a GPU machine).
pub fn gpu() -> &'static Gpu {
    static GPU: OnceLock<Gpu> = OnceLock::new();
    GPU.get_or_init(|| {
        let dev = Device::get(0).expect("a CUDA device");
        let ctx = Context::new(&dev).expect("a context");
        let stream = Stream::new(&ctx).expect("a stream");
        Gpu { ctx, stream }
    })
}

/// SplitMix64: small, seedable, good enough for test data.
pub struct Rng(u64);

impl Rng {
    /// A generator from a seed.
    pub fn new(seed: u64) -> Self {
        Rng(seed ^ 0x5DEE_CE66_D1CE_4E5B)
    }
    /// Next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// Uniform in `[lo, hi)`.
    pub fn uniform(&mut self, lo: f64, hi: f64) -> f64 {
        lo + (hi - lo) * ((self.next_u64() >> 11) as f64 / (1u64 << 53) as f64)
    }
    /// `n` uniform values in `[lo, hi)`, none exactly zero.
    pub fn vec(&mut self, n: usize, lo: f64, hi: f64) -> Vec<f64> {
        (0..n)
            .map(|_| loop {
                let v = self.uniform(lo, hi);
                if v != 0.0 {
                    break v;
                }
            })
            .collect()
    }
}

/// Round host values to `T`: the device gets exactly these and the
/// reference sees the rounded values as f64.
pub fn round<T: Element>(v: &[f64]) -> (Vec<T>, Vec<f64>) {
    let t: Vec<T> = v.iter().map(|&x| T::from_f64(x)).collect();
    let back = t.iter().map(|x| x.to_f64()).collect();
    (t, back)
}

/// Upload rounded values; returns the buffer and the values the device holds.
pub fn upload<T: Element>(v: &[f64]) -> (DeviceBuffer<T>, Vec<f64>) {
    let (t, back) = round::<T>(v);
    (
        DeviceBuffer::from_host(&gpu().stream, &t).expect("upload"),
        back,
    )
}

/// A buffer whose every byte is 0xFF: NaN in every float dtype.
pub fn poisoned<T: Element>(n: usize) -> DeviceBuffer<T> {
    DeviceBuffer::filled_bytes(&gpu().stream, n, 0xFF).expect("poisoned buffer")
}

/// Download as f64.
pub fn download<T: Element>(b: &DeviceBuffer<T>) -> Vec<f64> {
    b.to_host(&gpu().stream)
        .expect("download")
        .iter()
        .map(|x| x.to_f64())
        .collect()
}

/// Row-major strides of a shape.
pub fn contiguous(shape: &[usize]) -> Vec<usize> {
    let mut s = vec![1usize; shape.len()];
    for d in (0..shape.len().saturating_sub(1)).rev() {
        s[d] = s[d + 1] * shape[d + 1].max(1);
    }
    s
}

/// Buffer offsets of a strided view's elements, in row-major logical order.
pub fn view_offsets(shape: &[usize], strides: &[usize]) -> Vec<usize> {
    let n: usize = shape.iter().product();
    (0..n)
        .map(|lin| {
            let mut rem = lin;
            let mut off = 0;
            for d in (0..shape.len()).rev() {
                off += (rem % shape[d]) * strides[d];
                rem /= shape[d];
            }
            off
        })
        .collect()
}

/// Logical values of a strided view of `buf` (host copy).
pub fn gather(buf: &[f64], offset: usize, shape: &[usize], strides: &[usize]) -> Vec<f64> {
    view_offsets(shape, strides)
        .into_iter()
        .map(|o| buf[offset + o])
        .collect()
}

/// Error bound of a comparison: `|got - want| <= rtol * |want| + atol +
/// sum_scale * extra[i]`, plus a relative-L2 bound of `rtol`.
#[derive(Copy, Clone, Debug)]
pub struct Tolerance {
    /// Relative part.
    pub rtol: f64,
    /// Absolute part.
    pub atol: f64,
}

/// Tolerance of a pointwise op whose f32 (f64) math rounds once to `kind`.
pub fn pointwise_tol(kind: ElementKind) -> Tolerance {
    match kind {
        ElementKind::F64 => Tolerance {
            rtol: 1e-13,
            atol: 1e-13,
        },
        ElementKind::F32 => Tolerance {
            rtol: 4e-6,
            atol: 2e-6,
        },
        ElementKind::F16 => Tolerance {
            rtol: 2e-3,
            atol: 1e-3,
        },
        ElementKind::Bf16 => Tolerance {
            rtol: 1e-2,
            atol: 2e-3,
        },
        other => panic!("no float tolerance for {other}"),
    }
}

/// Unit roundoff of the accumulator used for `kind` (f64 for f64, else f32).
pub fn acc_roundoff(kind: ElementKind) -> f64 {
    if kind == ElementKind::F64 {
        ElementKind::F64.unit_roundoff()
    } else {
        ElementKind::F32.unit_roundoff()
    }
}

/// Compare `got` with the f64 reference. `extra` adds a per-element
/// allowance (for sums: accumulated rounding). The message names `what`,
/// the first bad index and both values.
pub fn compare(
    what: &str,
    got: &[f64],
    want: &[f64],
    tol: Tolerance,
    extra: Option<&[f64]>,
) -> Result<(), String> {
    if got.len() != want.len() {
        return Err(format!(
            "{what}: {} elements, expected {}",
            got.len(),
            want.len()
        ));
    }
    let (mut num, mut den, mut slack) = (0.0f64, 0.0f64, 0.0f64);
    for i in 0..got.len() {
        let (g, w) = (got[i], want[i]);
        let bound = tol.rtol * w.abs() + tol.atol + extra.map_or(0.0, |e| e[i]);
        if g.is_nan() || (g - w).abs() > bound || (w.is_infinite() && g != w) {
            return Err(format!(
                "{what}: element {i} is {g:e}, expected {w:e} (|diff| {:e} > bound {bound:e})",
                (g - w).abs()
            ));
        }
        num += (g - w) * (g - w);
        den += w * w;
        slack += extra.map_or(0.0, |e| e[i] * e[i]);
    }
    let rel = (num / den.max(1e-300)).sqrt();
    // Sums may round more than once per element: their allowance joins in.
    let allowed = tol.rtol + (slack / den.max(1e-300)).sqrt();
    if den > 0.0 && rel > allowed.max(1e-15) {
        return Err(format!("{what}: relative L2 error {rel:e} > {allowed:e}"));
    }
    Ok(())
}

/// Every byte of the buffer outside `covered` offsets must still be poison.
pub fn check_untouched(what: &str, buf: &[f64], covered: &[usize]) -> Result<(), String> {
    let mut inside = vec![false; buf.len()];
    for &o in covered {
        inside[o] = true;
    }
    for (i, (&v, &c)) in buf.iter().zip(&inside).enumerate() {
        if !c && !v.is_nan() {
            return Err(format!(
                "{what}: element {i} outside the output view was written ({v})"
            ));
        }
    }
    Ok(())
}

/// Run `f` with `T` bound to the Rust type of `$kind`.
#[macro_export]
macro_rules! with_element {
    ($kind:expr, $t:ident => $body:expr) => {{
        use baracuda_kernels::ElementKind as K;
        match $kind {
            K::F32 => {
                type $t = f32;
                $body
            }
            K::F64 => {
                type $t = f64;
                $body
            }
            K::F16 => {
                type $t = half::f16;
                $body
            }
            K::Bf16 => {
                type $t = half::bf16;
                $body
            }
            K::I8 => {
                type $t = i8;
                $body
            }
            K::U8 => {
                type $t = u8;
                $body
            }
            K::I16 => {
                type $t = i16;
                $body
            }
            K::I32 => {
                type $t = i32;
                $body
            }
            K::I64 => {
                type $t = i64;
                $body
            }
            K::U32 => {
                type $t = u32;
                $body
            }
            K::Bool => {
                type $t = bool;
                $body
            }
            K::Fp8E4M3 => {
                type $t = float8::F8E4M3;
                $body
            }
            K::Fp8E5M2 => {
                type $t = float8::F8E5M2;
                $body
            }
        }
    }};
}

/// One row of the op table: the op, the dtypes it claims, and the checks
/// the generic runner applies.
pub struct OpCase {
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

/// Run one table row: every listed dtype, every other dtype's rejection,
/// and the bad inputs. Panics with every failure.
pub fn run_case(case: &OpCase) {
    let mut failures = Vec::new();
    let mut checked = 0;
    for kind in ElementKind::ALL {
        if case.dtypes.contains(&kind) {
            match (case.check)(kind) {
                Ok(n) if n > 0 => checked += n,
                Ok(_) => failures.push(format!("{} {kind}: no sample was checked", case.name)),
                Err(e) => failures.push(format!("{} {kind}: {e}", case.name)),
            }
        } else if let Err(e) = (case.unsupported)(kind) {
            failures.push(format!("{} {kind}: {e}", case.name));
        }
    }
    match (case.bad_inputs)() {
        Ok(n) if n > 0 => {}
        Ok(_) => failures.push(format!("{}: no bad input was checked", case.name)),
        Err(e) => failures.push(format!("{} bad inputs: {e}", case.name)),
    }
    assert!(
        failures.is_empty(),
        "{} failure(s):\n{}",
        failures.len(),
        failures.join("\n")
    );
    eprintln!("{}: {checked} samples checked", case.name);
}

/// `Ok` when `r` is an error matching `pred`, else a message.
pub fn expect_err<T>(
    what: &str,
    r: Result<T>,
    pred: impl Fn(&Error) -> bool,
) -> Result<(), String> {
    match r {
        Err(e) if pred(&e) => Ok(()),
        Err(e) => Err(format!("{what}: wrong error: {e}")),
        Ok(_) => Err(format!("{what}: expected an error, got Ok")),
    }
}
