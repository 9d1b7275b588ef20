//! Timing and reporting shared by every benchmark family.
//!
//! Each case is timed with CUDA events around replays of a CUDA graph of
//! its `run` calls (see [`time_ms`]): warm-up first (module load, handle
//! creation and autotuning stay out of the numbers), then the median of
//! many replays. Inputs are seeded random values,
//! never zeros or constants. One JSON line per case and pass on stdout:
//! `{"op", "pass", "dtype", "shape", "ms", "gbps"?, "tflops"?}`, the
//! case's [`Row`] (from the case list) with the time.

use baracuda_kernels::*;

use crate::cases::{Job, Row};

/// Run `job` of `family` unless `BARACUDA_BENCH_ONLY` (a comma-separated
/// list of substrings; the same variable filters `bench/torch_baseline.py`)
/// names none of its name; a ceiling runs whatever it says. An error goes
/// to stderr and the run goes on.
pub fn case(family: &str, job: &Job, s: &Stream) {
    let only = std::env::var("BARACUDA_BENCH_ONLY").ok();
    if !selected(&job.name, job.ceiling, only.as_deref()) {
        return;
    }
    if let Err(e) = (job.run)(s, &job.rows) {
        eprintln!("{family} {}: error: {e}", job.name);
    }
}

/// Whether a case named `name` runs under `BARACUDA_BENCH_ONLY` = `only`
/// (None: unset): a ceiling always, any case when unset, else a case whose
/// name contains one of the comma-separated substrings.
pub fn selected(name: &str, ceiling: bool, only: Option<&str>) -> bool {
    ceiling || only.is_none_or(|o| o.split(',').any(|p| !p.is_empty() && name.contains(p)))
}

/// Warm-up runs before timing.
pub const WARMUP: usize = 10;
/// Idle milliseconds before each case's warm-up (`BARACUDA_BENCH_COOL_MS`
/// overrides), so that every case on both sides starts from the same
/// power state. A large GEMM runs into the H200's power limit within
/// about 50 ms of back-to-back launches (bf16 8192^3: 1.39 ms per call
/// cold, 1.6 ms after 300 ms of load, back to 1.40 ms after 100-200 ms
/// idle; `docs/perf-notes/experiments/gemm_sustained.cu recover`), and a plan's
/// measured autotuning is a few hundred ms of such load right before its
/// case. Without the pause that one-time select cost would be charged to
/// the per-call time.
pub const COOL_MS: u64 = 250;

/// [`COOL_MS`], or `BARACUDA_BENCH_COOL_MS` when set.
fn cool_ms() -> u64 {
    std::env::var("BARACUDA_BENCH_COOL_MS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(COOL_MS)
}

/// Let the GPU idle for [`cool_ms`] after the work already on `s`.
fn cool_down(s: &Stream) -> Result<()> {
    s.synchronize()?;
    std::thread::sleep(std::time::Duration::from_millis(cool_ms()));
    Ok(())
}
/// Timed replays: as many as fit in [`TIMED_MS`], between [`MIN_ITERS`]
/// and [`ITERS`]; the median is reported.
pub const ITERS: usize = 50;
/// Fewest timed replays.
pub const MIN_ITERS: usize = 10;
/// The timed window: short enough that the warm-up and the timed replays
/// of a power-bound case end before the power limit sets in, so that the
/// median is taken in one power state rather than across the change.
pub const TIMED_MS: f64 = 30.0;

/// Replays of about `each_ms` that fit the timed window.
fn iters(each_ms: f64) -> usize {
    ((TIMED_MS / each_ms.max(1e-3)).round() as usize).clamp(MIN_ITERS, ITERS)
}

/// Most buffer sets a case rotates through.
pub const MAX_SETS: usize = 32;

/// How many buffer sets a case whose calls each touch `bytes_per_call`
/// bytes rotates through, so that a call does not find its operands in L2
/// from the calls before it (as in a network, where each layer reads what
/// an earlier one wrote long before): enough sets to cover three times the
/// L2 size, at most [`MAX_SETS`], 1 for operands that already exceed it.
/// `bench/torch_baseline.py` `rotation` computes the same number.
///
/// Only inputs rotate. Each pass writes its outputs to one buffer, as
/// PyTorch does: its caching allocator hands every call the block the call
/// before freed (in eager mode and inside graph capture alike), so a
/// PyTorch output that fits in L2 is rewritten in place while its lines
/// may still be there. (The copy ceiling rotates its destinations on both
/// sides.)
pub fn rotation(s: &Stream, bytes_per_call: usize) -> usize {
    let l2 = s.context().device().l2_bytes.max(1);
    (3 * l2).div_ceil(bytes_per_call.max(1)).clamp(1, MAX_SETS)
}

/// Part `i` of `b` cut into parts of `n` elements (a case's buffer set
/// `i`).
///
/// # Errors
/// `InvalidArgument` when part `i` does not lie inside `b`.
pub fn part<T: Element>(b: &DeviceBuffer<T>, i: usize, n: usize) -> Result<DeviceSlice<'_, T>> {
    b.as_slice()
        .slice(i * n..(i + 1) * n)
        .ok_or_else(|| out_of_range(i, n, b.len()))
}

/// [`part`] for writing.
///
/// # Errors
/// `InvalidArgument` when part `i` does not lie inside `b`.
pub fn part_mut<T: Element>(
    b: &mut DeviceBuffer<T>,
    i: usize,
    n: usize,
) -> Result<DeviceSliceMut<'_, T>> {
    let len = b.len();
    b.as_slice_mut()
        .split_at(i * n)
        .and_then(|(_, rest)| rest.split_at(n))
        .map(|(p, _)| p)
        .ok_or_else(|| out_of_range(i, n, len))
}

fn out_of_range(i: usize, n: usize, len: usize) -> Error {
    Error::InvalidArgument {
        op: "bench",
        arg: "buffer set",
        reason: format!("set {i} of {n} elements lies outside a buffer of {len}"),
    }
}

/// Device milliseconds of one call of `f` on `s`.
///
/// After an idle [`COOL_MS`] and [`WARMUP`] calls (module loads, handle
/// creation and autotuning stay out; the pause lets the GPU recover from
/// the autotuning's load), `k` calls are captured into a CUDA graph and the graph is replayed
/// about [`TIMED_MS`] worth of times (see [`iters`]), each replay bracketed
/// by CUDA events; the result is the
/// median replay time over `k`. `k` is about 1 ms of work (between 1 and
/// 20 calls), so launch gaps and host overhead, ours or PyTorch's, are not
/// what is measured; `bench/torch_baseline.py` times its side the same way.
/// If `f` cannot be captured the calls are timed one by one instead (and a
/// note goes to stderr).
///
/// # Errors
/// Whatever `f` or the events return.
pub fn time_ms(s: &Stream, mut f: impl FnMut() -> Result<()>) -> Result<f64> {
    time_rotating_ms(s, 1, |_| f())
}

/// [`time_ms`] of a case with `sets` buffer sets (see [`rotation`]):
/// successive calls run `f(0)`, `f(1)`, ..., `f(sets - 1)`, `f(0)`, ...,
/// and the graph holds a whole number of rounds, so every replay visits
/// every set.
///
/// # Errors
/// Whatever `f` or the events return.
pub fn time_rotating_ms(
    s: &Stream,
    sets: usize,
    mut f: impl FnMut(usize) -> Result<()>,
) -> Result<f64> {
    let sets = sets.max(1);
    let mut next = 0usize;
    let mut f = move || {
        let i = next;
        next = (next + 1) % sets;
        f(i)
    };
    cool_down(s)?;
    for _ in 0..WARMUP.max(sets) {
        f()?;
    }
    let eager = time_calls(s, 1, &mut f)?;
    let k = (1.0 / eager.max(1e-3)).round().clamp(1.0, 20.0) as usize;
    let k = k.div_ceil(sets) * sets;
    match capture(s, k, &mut f) {
        Ok(graph) => {
            graph.launch()?;
            let replay = median_bracketed(s, iters(eager * k as f64), || graph.launch())?;
            Ok(replay / k as f64)
        }
        Err(e) => {
            eprintln!("time_ms: graph capture failed ({e}); timing calls one by one");
            time_calls(s, ITERS, &mut f)
        }
    }
}

/// Device milliseconds of one call of `f` on `s`, timed eagerly: for the
/// copy ceiling, since a device-to-device copy captured in a graph becomes
/// a memcpy node, which runs slower than the same copy issued directly.
///
/// Like [`time_rotating_ms`], successive calls run `f(0)`, `f(1)`, ...,
/// `f(sets - 1)`, `f(0)`, ...: after an idle [`COOL_MS`] and [`WARMUP`]
/// calls (at least one round), [`ITERS`] calls rounded up to whole rounds
/// are issued back to back, each round bracketed by CUDA events; the
/// result is the median round time over `sets`. With one set that is the
/// median of [`ITERS`] single calls.
///
/// # Errors
/// Whatever `f` or the events return.
pub fn time_eager_rotating_ms(
    s: &Stream,
    sets: usize,
    mut f: impl FnMut(usize) -> Result<()>,
) -> Result<f64> {
    let sets = sets.max(1);
    cool_down(s)?;
    for i in 0..WARMUP.max(sets) {
        f(i % sets)?;
    }
    let round = median_bracketed(s, ITERS.div_ceil(sets).max(5), || {
        for i in 0..sets {
            f(i)?;
        }
        Ok(())
    })?;
    Ok(round / sets as f64)
}

/// `k` calls of `f` captured into one graph.
fn capture(s: &Stream, k: usize, f: &mut impl FnMut() -> Result<()>) -> Result<Graph> {
    s.begin_capture()?;
    let mut status = Ok(());
    for _ in 0..k {
        status = f();
        if status.is_err() {
            break;
        }
    }
    let graph = s.end_capture();
    status?;
    graph
}

/// Median of `n` (at least 5) calls, each bracketed by CUDA events.
fn time_calls(s: &Stream, n: usize, f: &mut impl FnMut() -> Result<()>) -> Result<f64> {
    median_bracketed(s, n.max(5), f)
}

/// Median milliseconds of `n` runs of `work` on `s`, each bracketed by a
/// pair of CUDA events (all enqueued, then one synchronize).
fn median_bracketed(s: &Stream, n: usize, mut work: impl FnMut() -> Result<()>) -> Result<f64> {
    let ctx = s.context();
    let events: Vec<(Event, Event)> = (0..n.max(1))
        .map(|_| Ok((Event::new(ctx)?, Event::new(ctx)?)))
        .collect::<Result<_>>()?;
    for (a, b) in &events {
        a.record(s)?;
        work()?;
        b.record(s)?;
    }
    s.synchronize()?;
    let mut ms: Vec<f64> = events
        .iter()
        .map(|(a, b)| a.elapsed_ms(b).map(f64::from))
        .collect::<Result<_>>()?;
    ms.sort_by(f64::total_cmp);
    Ok(ms[ms.len() / 2])
}

/// `sets` buffers of `n` seeded uniform values in `[lo, hi)`, each its own
/// allocation; set `i` uses seed `seed + 16 * i` ([`random_buffer`]).
///
/// # Errors
/// Allocation or copy failure.
pub fn random_sets<T: Element>(
    s: &Stream,
    n: usize,
    sets: usize,
    seed: u64,
    lo: f64,
    hi: f64,
) -> Result<Vec<DeviceBuffer<T>>> {
    (0..sets as u64)
        .map(|i| random_buffer::<T>(s, n, seed + 16 * i, lo, hi))
        .collect()
}

/// A device buffer of `n` seeded uniform values in `[lo, hi)` (generated
/// on the host in parallel, then copied).
///
/// # Errors
/// Allocation or copy failure.
pub fn random_buffer<T: Element>(
    s: &Stream,
    n: usize,
    seed: u64,
    lo: f64,
    hi: f64,
) -> Result<DeviceBuffer<T>> {
    let threads = std::thread::available_parallelism()
        .map_or(4, |p| p.get())
        .min(16);
    let chunk = n.div_ceil(threads).max(1);
    let mut host: Vec<T> = vec![T::default(); n];
    std::thread::scope(|sc| {
        for (i, part) in host.chunks_mut(chunk).enumerate() {
            sc.spawn(move || {
                let mut z = seed ^ (i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
                for v in part.iter_mut() {
                    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
                    let mut x = z;
                    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
                    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
                    x ^= x >> 31;
                    let u = (x >> 11) as f64 / (1u64 << 53) as f64;
                    *v = T::from_f64(lo + (hi - lo) * u);
                }
            });
        }
    });
    DeviceBuffer::from_host(s, &host)
}

/// Print `row`, timed at `ms`, as one JSON line (its `name` as `op`).
pub fn emit(row: &Row, ms: f64) {
    let mut line = format!(
        "{{\"op\":\"{}\",\"pass\":\"{}\",\"dtype\":\"{}\",\"shape\":\"{}\",\"ms\":{:.5}",
        row.name, row.pass, row.dtype, row.shape, ms
    );
    if let Some(b) = row.bytes {
        line += &format!(",\"gbps\":{:.1}", b as f64 / (ms * 1e-3) / 1e9);
    }
    if let Some(f) = row.flops {
        line += &format!(",\"tflops\":{:.2}", f as f64 / (ms * 1e-3) / 1e12);
    }
    println!("{line}}}");
}

/// Time each of `rows`' passes with `time(pass)`, in order, and print
/// its row as soon as it is timed.
///
/// # Errors
/// The first error of `time`.
pub fn time_passes(rows: &[Row], mut time: impl FnMut(&str) -> Result<f64>) -> Result<()> {
    for r in rows {
        let ms = time(r.pass)?;
        emit(r, ms);
    }
    Ok(())
}

/// The buffer sets of a case whose rows carry `rotation_bytes` (see
/// [`rotation`]).
///
/// # Errors
/// `InvalidArgument` when the rows have none (a bench bug).
pub fn rotation_of(s: &Stream, rows: &[Row]) -> Result<usize> {
    match rows.first().and_then(|r| r.rotation_bytes) {
        Some(b) => Ok(rotation(s, b as usize)),
        None => Err(Error::InvalidArgument {
            op: "bench",
            arg: "rows",
            reason: "no rotation_bytes".into(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::selected;

    #[test]
    fn only_selects_by_name_substrings_and_keeps_ceilings() {
        let only = Some("linear_prefill,bmm_");
        assert!(selected("linear_prefill_bias_bf16", false, only));
        assert!(selected("bmm_attn_qk_bf16", false, only));
        assert!(!selected("linear_decode_bf16", false, only));
        assert!(selected("ceiling_copy", true, only));
        assert!(selected("anything", false, None));
    }
}
