//! Shared machinery of the GPU tests: the device, seeded random inputs,
//! NaN-poisoned outputs (with guard regions), strided host views, dtype
//! tolerances, and the comparison that names the first bad element. The op
//! table and its runner are in `table.rs`.

#![allow(dead_code)] // each family uses part of the harness

use std::ops::Range;
use std::sync::OnceLock;

use baracuda_kernels::*;

/// The float dtypes most families claim.
pub const FLOATS: &[ElementKind] = &[
    ElementKind::F32,
    ElementKind::F64,
    ElementKind::F16,
    ElementKind::Bf16,
];

/// The float dtypes and the two integer ones the reductions and scans
/// claim (i32, i64).
pub const NUMERIC: &[ElementKind] = &[
    ElementKind::F32,
    ElementKind::F64,
    ElementKind::F16,
    ElementKind::Bf16,
    ElementKind::I32,
    ElementKind::I64,
];

/// The device, one context and one stream shared by every test.
pub struct Gpu {
    /// Context on device 0.
    pub ctx: Context,
    /// Stream the tests run on.
    pub stream: Stream,
}

thread_local! {
    /// The [`Gpu`] that [`gpu`] gives on this thread, when not the shared one.
    static OWN_STREAM: std::cell::Cell<Option<&'static Gpu>> = const { std::cell::Cell::new(None) };
}

/// The GPU of the calling thread: the shared context and stream, or inside
/// [`on_stream`] the stream given there (panics when there is no GPU:
/// these tests are `#[ignore]`d and run only on a GPU machine).
pub fn gpu() -> &'static Gpu {
    OWN_STREAM.with(|o| o.get()).unwrap_or_else(shared_gpu)
}

fn shared_gpu() -> &'static Gpu {
    static GPU: OnceLock<Gpu> = OnceLock::new();
    GPU.get_or_init(|| {
        let dev = Device::get(0).expect("a CUDA device");
        let ctx = Context::new(&dev).expect("a context");
        let stream = Stream::new(&ctx).expect("a stream");
        Gpu { ctx, stream }
    })
}

/// How many streams [`streams`] holds.
pub const STREAMS: usize = 16;

/// [`STREAMS`] more streams on the shared context, each as a [`Gpu`] of
/// its own for [`on_stream`]; made once and kept for the whole run.
pub fn streams() -> &'static [Gpu] {
    static POOL: OnceLock<Vec<Gpu>> = OnceLock::new();
    POOL.get_or_init(|| {
        let ctx = &shared_gpu().ctx;
        (0..STREAMS)
            .map(|_| Gpu {
                ctx: ctx.clone(),
                stream: Stream::new(ctx).expect("a stream"),
            })
            .collect()
    })
}

/// `f()` with [`gpu`] giving `g` on the calling thread: everything a table
/// row does on `gpu().stream` (select, uploads, runs, downloads) then goes
/// to `g.stream`. How the reliability tests run rows from many threads at
/// once, each on its own stream, without the rows knowing.
pub fn on_stream<R>(g: &'static Gpu, f: impl FnOnce() -> R) -> R {
    /// Puts the previous [`Gpu`] back, also when `f` panics.
    struct Restore(Option<&'static Gpu>);
    impl Drop for Restore {
        fn drop(&mut self) {
            OWN_STREAM.with(|o| o.set(self.0));
        }
    }
    let _restore = Restore(OWN_STREAM.with(|o| o.replace(Some(g))));
    f()
}

/// Inputs of at most this many elements (all inputs of a sample together)
/// make a small sample: 2^16, or `BARACUDA_TEST_SMALL_ELEMS` (smaller
/// bounds for the sanitizer tools that slow kernels down the most).
pub fn small_elems() -> usize {
    static ELEMS: OnceLock<usize> = OnceLock::new();
    *ELEMS.get_or_init(|| {
        std::env::var("BARACUDA_TEST_SMALL_ELEMS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(1 << 16)
    })
}

/// Whether the table checks dtype `kind` of the rows that claim it: all of
/// them, or those named in `BARACUDA_TEST_DTYPES` (comma-separated, for
/// example `f32,bf16`). Every other dtype's rejection is checked anyway.
pub fn dtype_selected(kind: ElementKind) -> bool {
    static PICK: OnceLock<Option<Vec<String>>> = OnceLock::new();
    PICK.get_or_init(|| {
        std::env::var("BARACUDA_TEST_DTYPES")
            .ok()
            .map(|v| v.split(',').map(|d| d.trim().to_string()).collect())
    })
    .as_ref()
    .is_none_or(|names| names.iter().any(|n| n == kind.name()))
}

/// Whether the suite runs in its small-shapes mode: everywhere with
/// `BARACUDA_TEST_SMALL=1` (set by `scripts/gpu-test.sh sanitize`), or on
/// this thread inside [`small_scope`]. The table runner then checks, of
/// each row's samples, only those whose inputs hold at most
/// [`small_elems`] elements (the smallest one when none does), and rows
/// that list their own samples pass them through [`small_samples`]; so a
/// run under compute-sanitizer ends in minutes.
pub fn small_mode() -> bool {
    static SMALL: OnceLock<bool> = OnceLock::new();
    *SMALL.get_or_init(|| std::env::var("BARACUDA_TEST_SMALL").is_ok_and(|v| v == "1"))
        || SMALL_HERE.with(std::cell::Cell::get)
}

thread_local! {
    /// Small-shapes mode on this thread alone ([`small_scope`]).
    static SMALL_HERE: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// `f()` in small-shapes mode on the calling thread.
pub fn small_scope<R>(f: impl FnOnce() -> R) -> R {
    /// Puts the previous mode back, also when `f` panics.
    struct Restore(bool);
    impl Drop for Restore {
        fn drop(&mut self) {
            SMALL_HERE.with(|c| c.set(self.0));
        }
    }
    let _restore = Restore(SMALL_HERE.with(|c| c.replace(true)));
    f()
}

/// `samples`, or in [`small_mode`] those of at most [`small_elems`]
/// elements by `elems` (the smallest when none is): for rows that list
/// their own samples.
pub fn small_samples<S>(samples: Vec<S>, elems: impl Fn(&S) -> usize) -> Vec<S> {
    if !small_mode() {
        return samples;
    }
    let small = small_elems();
    if samples.iter().any(|s| elems(s) <= small) {
        samples.into_iter().filter(|s| elems(s) <= small).collect()
    } else {
        let min = samples.iter().map(&elems).min();
        samples
            .into_iter()
            .filter(|s| Some(elems(s)) == min)
            .take(1)
            .collect()
    }
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
    /// Uniform in `0..n` (`n > 0`).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
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

/// `v` rounded to `kind` and widened back: what a device buffer of `kind`
/// holds.
pub fn round_to(kind: ElementKind, v: &[f64]) -> Vec<f64> {
    crate::with_element!(kind, T => round::<T>(v).1)
}

/// `v` with the values past `kind`'s finite range replaced by the
/// infinities they round to: what a kernel storing the exact value writes.
pub fn overflowed(kind: ElementKind, mut v: Vec<f64>) -> Vec<f64> {
    let rounded = round_to(kind, &v);
    for (w, r) in v.iter_mut().zip(rounded) {
        if r.is_infinite() && w.is_finite() {
            *w = r;
        }
    }
    v
}

/// Upload rounded values; returns the buffer and the values the device holds.
pub fn upload<T: Element>(v: &[f64]) -> (DeviceBuffer<T>, Vec<f64>) {
    let (t, back) = round::<T>(v);
    (
        DeviceBuffer::from_host(alloc_stream::<T>(v.len()), &t).expect("upload"),
        back,
    )
}

/// A buffer whose every byte is 0xFF: NaN in every float dtype.
pub fn poisoned<T: Element>(n: usize) -> DeviceBuffer<T> {
    DeviceBuffer::filled_bytes(alloc_stream::<T>(n), n, 0xFF).expect("poisoned buffer")
}

/// A second context on device 0, with a stream: where
/// [`with_foreign_allocation`] puts the allocation it probes.
pub fn other_gpu() -> &'static Gpu {
    static OTHER: OnceLock<Gpu> = OnceLock::new();
    OTHER.get_or_init(|| {
        let ctx = Context::new_non_primary(shared_gpu().ctx.device()).expect("a second context");
        let stream = Stream::new(&ctx).expect("a stream on the second context");
        Gpu { ctx, stream }
    })
}

/// The allocation a [`with_foreign_allocation`] on this thread moves to
/// [`other_gpu`]: its index among the harness's allocations, how many were
/// made so far, and what the moved one holds.
struct ForeignProbe {
    target: usize,
    made: usize,
    moved: Option<String>,
}

thread_local! {
    static PROBE: std::cell::RefCell<Option<ForeignProbe>> = const { std::cell::RefCell::new(None) };
}

/// The stream the harness allocates `n` elements of `T` on: [`gpu`]'s,
/// or [`other_gpu`]'s for the allocation a [`with_foreign_allocation`]
/// moves.
fn alloc_stream<T: Element>(n: usize) -> &'static Stream {
    PROBE.with(|p| {
        let mut p = p.borrow_mut();
        let Some(probe) = p.as_mut() else {
            return &gpu().stream;
        };
        let i = probe.made;
        probe.made += 1;
        if i != probe.target {
            return &gpu().stream;
        }
        probe.moved = Some(format!("allocation {i} ({n} x {})", T::KIND.name()));
        &other_gpu().stream
    })
}

/// `f()` with the allocations it makes left out of a
/// [`with_foreign_allocation`] probe: for buffers a row allocates that are
/// no plan's operand (an output the op does not write, such as the
/// indices of a scan without them).
pub fn not_an_operand<R>(f: impl FnOnce() -> R) -> R {
    /// Puts the probe back, also when `f` panics.
    struct Restore(Option<ForeignProbe>);
    impl Drop for Restore {
        fn drop(&mut self) {
            let probe = self.0.take();
            PROBE.with(|p| *p.borrow_mut() = probe);
        }
    }
    let _restore = Restore(PROBE.with(|p| p.borrow_mut().take()));
    f()
}

/// `make()`, outside the probe ([`not_an_operand`]) unless `operand`: a
/// buffer a row allocates whether or not the run it makes is given it.
pub fn operand_if<R>(operand: bool, make: impl FnOnce() -> R) -> R {
    if operand {
        make()
    } else {
        not_an_operand(make)
    }
}

/// `f()` with the `k`-th buffer the harness allocates on this thread
/// ([`upload`], [`poisoned`], [`workspace`], [`Guarded::new`], counted
/// from 0) made on [`other_gpu`]'s context instead: what `f` returned (or
/// its panic's message), and which allocation was moved (`None` when `f`
/// made at most `k`). Every buffer a row allocates is an operand of some
/// plan call, so each moved one must make a call fail with
/// `ContextMismatch`.
pub fn with_foreign_allocation<R>(
    k: usize,
    f: impl FnOnce() -> R,
) -> (Result<R, String>, Option<String>) {
    PROBE.with(|p| {
        *p.borrow_mut() = Some(ForeignProbe {
            target: k,
            made: 0,
            moved: None,
        })
    });
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).map_err(|e| {
        e.downcast_ref::<String>()
            .cloned()
            .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_else(|| "a panic without a message".into())
    });
    let moved = PROBE.with(|p| p.borrow_mut().take()).and_then(|p| p.moved);
    (r, moved)
}

/// A poisoned device buffer of `bytes` bytes (at least one) to borrow as a
/// workspace.
pub fn workspace(bytes: usize) -> DeviceBuffer<u8> {
    poisoned::<u8>(bytes.max(1))
}

/// Whether `v`, an element of a [`poisoned`] buffer of `T` read back as
/// f64, is still the poison: NaN in the float dtypes, all ones in the
/// integers (-1 signed, the maximum unsigned). Not for `bool`, which has no
/// 0xFF value.
pub fn is_poison<T: Element>(v: f64) -> bool {
    match T::KIND {
        k if k.is_float() => v.is_nan(),
        ElementKind::U8 => v == f64::from(u8::MAX),
        ElementKind::U32 => v == f64::from(u32::MAX),
        _ => v == -1.0,
    }
}

/// Download as f64.
pub fn download<T: Element>(b: &DeviceBuffer<T>) -> Vec<f64> {
    b.to_host(&gpu().stream)
        .expect("download")
        .iter()
        .map(|x| x.to_f64())
        .collect()
}

/// `v` as an array of `N` extents, padded with 1.
pub fn arr<const N: usize>(v: &[usize]) -> [usize; N] {
    std::array::from_fn(|i| v.get(i).copied().unwrap_or(1))
}

/// An input uploaded with strides into a buffer, from an element offset
/// on ([`upload_strided`]).
pub struct Strided<T: Element> {
    buf: DeviceBuffer<T>,
    offset: usize,
    strides: Vec<usize>,
}

/// The logical values `v` of a view of `shape` with `strides` over a
/// buffer of `len` elements starting `offset` elements into it (0 where
/// the view does not reach), rounded to `T` and uploaded.
pub fn upload_strided<T: Element>(
    v: &[f64],
    shape: &[usize],
    strides: &[usize],
    len: usize,
    offset: usize,
) -> Strided<T> {
    let mut host = vec![0.0; offset];
    host.extend(scatter(v, shape, strides, len));
    Strided {
        buf: upload::<T>(&host).0,
        offset,
        strides: strides.to_vec(),
    }
}

impl<T: Element> Strided<T> {
    /// The uploaded view, of `shape` (rank `N`).
    pub fn view<const N: usize>(&self, shape: &[usize]) -> Result<TensorRef<'_, T, N>, String> {
        let data = self
            .buf
            .as_slice()
            .slice(self.offset..self.buf.len())
            .expect("offset in buffer");
        TensorRef::new(data, arr::<N>(shape), arr::<N>(&self.strides)).map_err(|e| e.to_string())
    }
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

/// The strided view's logical values written into a buffer of `len`
/// elements at their offsets (the inverse of [`gather`]); elements outside
/// the view are 0.
pub fn scatter(logical: &[f64], shape: &[usize], strides: &[usize], len: usize) -> Vec<f64> {
    let mut buf = vec![0.0; len];
    for (&o, &v) in view_offsets(shape, strides).iter().zip(logical) {
        buf[o] = v;
    }
    buf
}

/// Poisoned elements on each side of a [`Guarded`] output, in bytes: a
/// multiple of 256, so the view keeps the allocation's alignment and the
/// op takes the same (vectorised, aligned) paths it takes on a buffer of
/// its own.
pub const GUARD_BYTES: usize = 256;

/// A NaN-poisoned output of `len` elements with [`GUARD_BYTES`] of poison
/// before and after it: an op that writes past either end of its view is
/// caught by [`Guarded::result`].
pub struct Guarded<T: Element> {
    buf: DeviceBuffer<T>,
    guard: usize,
    len: usize,
}

impl<T: Element> Guarded<T> {
    /// A poisoned output of `len` elements between two poisoned guards.
    pub fn new(len: usize) -> Self {
        let guard = GUARD_BYTES / std::mem::size_of::<T>().max(1);
        Guarded {
            buf: poisoned::<T>(len + 2 * guard),
            guard,
            len,
        }
    }
    /// Elements of the output (guards excluded).
    pub fn len(&self) -> usize {
        self.len
    }
    /// Whether the output has no element.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    fn region(&self) -> Range<usize> {
        self.guard..self.guard + self.len
    }
    /// The output's elements, to view as an input of a later call.
    pub fn slice(&self) -> DeviceSlice<'_, T> {
        self.buf
            .as_slice()
            .slice(self.region())
            .expect("region in buffer")
    }
    /// The output's elements, to view as an output.
    pub fn slice_mut(&mut self) -> DeviceSliceMut<'_, T> {
        let (guard, len) = (self.guard, self.len);
        let (_, rest) = self
            .buf
            .as_slice_mut()
            .split_at(guard)
            .expect("guard in buffer");
        rest.split_at(len).expect("region in buffer").0
    }
    /// The output's elements viewed as `O`, an element type of `T`'s size:
    /// a bool output over u8 poison (0xFF is no valid bool), which is only
    /// ever read back as `T`.
    pub fn slice_mut_as<O: Element>(&mut self) -> DeviceSliceMut<'_, O> {
        assert_eq!(std::mem::size_of::<O>(), std::mem::size_of::<T>());
        let s = self.slice_mut();
        // SAFETY: the same bytes as `s`, which this borrow holds mutably;
        // the kernels write only valid `O` (0 or 1 for bool), and the host
        // reads the bytes back as `T`, never as `O`.
        unsafe { DeviceSliceMut::from_raw_parts(s.addr(), s.len(), s.ctx_id()) }
    }
    /// The output's elements as stored (guards excluded), exact whatever
    /// `T` (an i64 beyond 2^53 included).
    pub fn host(&self) -> Vec<T> {
        let all = self.buf.to_host(&gpu().stream).expect("download");
        all[self.region()].to_vec()
    }
    /// The output's values in buffer order; an error names the first guard
    /// element that was written.
    pub fn result(&self, what: &str) -> Result<Vec<f64>, String> {
        let all = download(&self.buf);
        self.check_poison(what, &all, self.region())?;
        Ok(all[self.region()].to_vec())
    }
    fn check_poison(&self, what: &str, all: &[f64], skip: Range<usize>) -> Result<(), String> {
        let bad = (0..all.len()).find(|i| !skip.contains(i) && !is_poison::<T>(all[*i]));
        match bad {
            None => Ok(()),
            Some(i) => {
                let place = if i < self.guard {
                    format!("{} before the output view", self.guard - i)
                } else if i >= self.guard + self.len {
                    format!("{} after the output view", i + 1 - self.guard - self.len)
                } else {
                    format!("{} of the output view", i - self.guard)
                };
                Err(format!("{what}: element {place} was written ({})", all[i]))
            }
        }
    }
}

/// An output that a call which must write nothing was given.
pub trait Poisoned {
    /// `Ok` when every element, guards included, is still poison.
    fn untouched(&self, what: &str) -> Result<(), String>;
}

impl<T: Element> Poisoned for Guarded<T> {
    fn untouched(&self, what: &str) -> Result<(), String> {
        self.check_poison(what, &download(&self.buf), 0..0)
    }
}

/// A strided integer output's values in logical order, exactly (as i64),
/// after checking that nothing else in its buffer (guards included) was
/// written.
pub fn view_ints<T: Element + Into<i64>>(
    what: &str,
    out: &Guarded<T>,
    shape: &[usize],
    strides: &[usize],
) -> Result<Vec<i64>, String> {
    let all = out.result(what)?;
    check_untouched::<T>(what, &all, &view_offsets(shape, strides))?;
    let host = out.host();
    Ok(view_offsets(shape, strides)
        .into_iter()
        .map(|o| host[o].into())
        .collect())
}

/// How [`int_values`] draws integer test values.
#[derive(Copy, Clone, Debug, PartialEq)]
pub enum IntDraw {
    /// Half over the dtype's whole range (i64: up to 2^62 in magnitude, in
    /// f64's 53 bits), half in [-1000, 1000]: sums that leave i32 and
    /// wrap around i64.
    Wide,
    /// In [-3, 3]: many ties.
    Small,
    /// Odd factors in [-7, 7], and in i64 one in 64 an odd factor of up
    /// to 2^40: products that wrap around (never to 0).
    Factors,
}

/// `n` test values of integer `kind` (i32 or i64) drawn as `draw` says,
/// as f64 that hold them exactly.
pub fn int_values(kind: ElementKind, draw: IntDraw, n: usize, rng: &mut Rng) -> Vec<f64> {
    let wide = kind == ElementKind::I64;
    (0..n)
        .map(|_| match draw {
            IntDraw::Wide if rng.below(2) == 0 => rng.below(2001) as f64 - 1000.0,
            IntDraw::Wide if wide => ((rng.next_u64() as i64) >> 1) as f64,
            IntDraw::Wide => f64::from(rng.next_u64() as u32 as i32),
            IntDraw::Small => rng.below(7) as f64 - 3.0,
            IntDraw::Factors if wide && rng.below(64) == 0 => {
                let v = (rng.next_u64() >> 24) | 1;
                if rng.below(2) == 0 {
                    v as f64
                } else {
                    -(v as f64)
                }
            }
            IntDraw::Factors => 2.0 * rng.below(8) as f64 - 7.0,
        })
        .collect()
}

/// The smallest and largest value of integer `kind` (i32 or i64) as f64
/// exactly (i64's largest: the largest f64 below 2^63, 2^63 - 1024).
pub fn int_limits(kind: ElementKind) -> (f64, f64) {
    match kind {
        ElementKind::I32 => (f64::from(i32::MIN), f64::from(i32::MAX)),
        ElementKind::I64 => (i64::MIN as f64, (i64::MAX - 1023) as f64),
        other => panic!("{other} is no integer dtype of the reductions"),
    }
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

impl Tolerance {
    /// Exact equality: indices and other integers.
    pub const EXACT: Tolerance = Tolerance {
        rtol: 0.0,
        atol: 0.0,
    };
    /// `rtol` relative, plus `max_frac` of the largest `|want|` absolute:
    /// the bound of sums whose rounding error follows their largest terms
    /// rather than each result (small results of cancelling terms).
    pub fn of_max(rtol: f64, max_frac: f64, want: &[f64]) -> Tolerance {
        let scale = want.iter().fold(0.0f64, |m, v| m.max(v.abs()));
        Tolerance {
            rtol,
            atol: max_frac * scale,
        }
    }
}

/// Tolerance of a pointwise op whose f32 (f64) math rounds once to `kind`.
pub fn pointwise_tol(kind: ElementKind) -> Tolerance {
    let (rtol, atol) = match kind {
        ElementKind::F64 => (1e-13, 1e-13),
        ElementKind::F32 => (4e-6, 2e-6),
        ElementKind::F16 => (2e-3, 1e-3),
        ElementKind::Bf16 => (1e-2, 2e-3),
        other => panic!("no float tolerance for {other}"),
    };
    Tolerance { rtol, atol }
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
        let abs = tol.atol + extra.map_or(0.0, |e| e[i]);
        slack += abs * abs;
    }
    let rel = (num / den.max(1e-300)).sqrt();
    // The absolute part of each element's bound (sums that round more
    // than once per element, results of cancelling terms) joins in.
    let allowed = tol.rtol + (slack / den.max(1e-300)).sqrt();
    if den > 0.0 && rel > allowed.max(1e-15) {
        return Err(format!("{what}: relative L2 error {rel:e} > {allowed:e}"));
    }
    Ok(())
}

/// Every element of a [`poisoned`] buffer of `T` (read back as f64)
/// outside the `covered` offsets must still be the poison.
pub fn check_untouched<T: Element>(
    what: &str,
    buf: &[f64],
    covered: &[usize],
) -> Result<(), String> {
    let mut inside = vec![false; buf.len()];
    for &o in covered {
        inside[o] = true;
    }
    for (i, (&v, &c)) in buf.iter().zip(&inside).enumerate() {
        if !c && !is_poison::<T>(v) {
            return Err(format!(
                "{what}: element {i} outside the output view was written ({v})"
            ));
        }
    }
    Ok(())
}

/// `$body` with `$t` bound to the Rust type of `$kind`, for the kinds
/// listed as `Kind => type`; after a `;`, the arm for every other kind.
#[macro_export]
macro_rules! with_kinds {
    ($kind:expr, $t:ident => $body:expr; $($k:ident => $ty:ty),* $(; $other:pat => $else:expr)?) => {{
        use baracuda_kernels::ElementKind as K;
        match $kind {
            $(K::$k => {
                type $t = $ty;
                $body
            })*
            $($other => $else,)?
        }
    }};
}

/// Run `$body` with `T` bound to the Rust type of `$kind`.
#[macro_export]
macro_rules! with_element {
    ($kind:expr, $t:ident => $body:expr) => {
        $crate::with_kinds!($kind, $t => $body;
            F32 => f32, F64 => f64, F16 => half::f16, Bf16 => half::bf16,
            I8 => i8, U8 => u8, I16 => i16, I32 => i32, I64 => i64, U32 => u32, Bool => bool,
            Fp8E4M3 => float8::F8E4M3, Fp8E5M2 => float8::F8E5M2)
    };
}

/// Run `$body` with `T` bound to the Rust type of `$kind`, one of the four
/// float dtypes ([`FLOATS`]); for any other kind, an `Err` naming it
/// (`$body` is a `Result<_, String>`). Instantiates `$body` four times
/// where [`with_element!`] would thirteen.
#[macro_export]
macro_rules! with_float {
    ($kind:expr, $t:ident => $body:expr) => {
        $crate::with_kinds!($kind, $t => $body;
            F32 => f32, F64 => f64, F16 => half::f16, Bf16 => half::bf16;
            other => Err(format!("{other} is not a float dtype")))
    };
}

/// Run `$body` with `T` bound to the Rust type of `$kind`, one of the four
/// float dtypes or i32 or i64 ([`NUMERIC`]); for any other kind, an `Err`
/// naming it.
#[macro_export]
macro_rules! with_numeric {
    ($kind:expr, $t:ident => $body:expr) => {
        $crate::with_kinds!($kind, $t => $body;
            F32 => f32, F64 => f64, F16 => half::f16, Bf16 => half::bf16, I32 => i32, I64 => i64;
            other => Err(format!("{other} is not a dtype of the reductions")))
    };
}

/// `P::select` on the shared stream, its error as a message.
pub fn select<P: Plan>(desc: &P::Descriptor, pref: &PlanPreference) -> Result<P, String> {
    P::select(&gpu().stream, desc, pref).map_err(|e| format!("select: {e}"))
}

/// `Ok` when selecting `P` for `desc` returns `Error::Unsupported` (a dtype
/// the op does not claim).
pub fn expect_unsupported<P: Plan>(what: &str, desc: &P::Descriptor) -> Result<(), String> {
    let r = P::select(&gpu().stream, desc, &PlanPreference::default());
    expect_err(what, r, unsupported)
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

/// Matches `InvalidDescriptor` naming `field`.
pub fn invalid_descriptor(field: &'static str) -> impl Fn(&Error) -> bool {
    move |e| matches!(e, Error::InvalidDescriptor { field: f, .. } if *f == field)
}

/// Matches `ShapeMismatch` naming argument `arg`.
pub fn shape_mismatch(arg: &'static str) -> impl Fn(&Error) -> bool {
    move |e| matches!(e, Error::ShapeMismatch { arg: a, .. } if *a == arg)
}

/// Matches `InvalidArgument` naming argument `arg`.
pub fn invalid_argument(arg: &'static str) -> impl Fn(&Error) -> bool {
    move |e| matches!(e, Error::InvalidArgument { arg: a, .. } if *a == arg)
}

/// Matches `PreferenceRejected` naming preference field `field`.
pub fn preference_rejected(field: &'static str) -> impl Fn(&Error) -> bool {
    move |e| matches!(e, Error::PreferenceRejected { field: f, .. } if *f == field)
}

/// Matches `Unsupported`.
pub fn unsupported(e: &Error) -> bool {
    matches!(e, Error::Unsupported { .. })
}

/// Matches `DtypeMismatch`.
pub fn dtype_mismatch(e: &Error) -> bool {
    matches!(e, Error::DtypeMismatch { .. })
}

/// Matches `WorkspaceTooSmall`.
pub fn workspace_too_small(e: &Error) -> bool {
    matches!(e, Error::WorkspaceTooSmall { .. })
}
