//! Measured autotuning support: scratch operands and candidate timing.

use baracuda_driver::{DeviceBuffer, Event, Stream};
use baracuda_kernels_types::{ElementKind, Error, Result};

/// Timing rounds per candidate; the median round decides.
const ROUNDS: usize = 5;
/// Each timed sample repeats a candidate back to back for about this long
/// (at most [`MAX_REPS`] launches).
const BURST_MS: f32 = 1.0;
const MAX_REPS: usize = 64;
/// Untimed load before the rounds, so that candidates are timed at the
/// clocks and power state of sustained work, as a training step runs them,
/// not at the boost clocks of a GPU that was idle.
const HEAT_MS: f32 = 50.0;

/// Most scratch operand sets a timing rotates through.
const MAX_SETS: usize = 32;

/// How many scratch operand sets of `bytes_per_set` bytes a candidate's
/// timing rotates through: enough to cover three times the L2 size (at
/// most [`MAX_SETS`], 1 when one set already exceeds it), so that a launch
/// does not find its operands in L2 from the launches before it. This is
/// the condition the benchmarks time under (`baracuda-bench` `rotation`)
/// and the one a network's layer meets (its inputs were written long
/// before). Ranking on L2-resident operands picks differently for small
/// problems: on H200 the ResNet-50 1x1 64->64 56x56 forward's winner at
/// 0.0160 ms with its operands in L2 took 0.0172 ms rotated.
pub(crate) fn operand_sets(stream: &Stream, bytes_per_set: usize) -> usize {
    let l2 = stream.context().device().l2_bytes.max(1);
    (3 * l2).div_ceil(bytes_per_set.max(1)).clamp(1, MAX_SETS)
}

/// What [`fastest`] found.
pub(crate) struct Timing {
    /// The fastest candidate's index and its median time per launch (ms).
    pub best: Option<(usize, f32)>,
    /// The first error a candidate returned (it was dropped).
    pub first_error: Option<Error>,
    /// Every candidate's median time per launch (ms); None when dropped.
    pub times: Vec<Option<f32>>,
}

impl Timing {
    /// With `BARACUDA_LOG_AUTOTUNE` set, print each candidate (named by
    /// `name`) and its time to stderr, marking the winner: the record of
    /// why a plan chose what its SKU says.
    pub(crate) fn log(&self, what: &str, name: impl Fn(usize) -> String) {
        if std::env::var_os("BARACUDA_LOG_AUTOTUNE").is_none() {
            return;
        }
        let best = self.best.map(|(i, _)| i);
        eprintln!("baracuda autotune: {what}");
        for (i, t) in self.times.iter().enumerate() {
            let mark = if Some(i) == best { '*' } else { ' ' };
            match t {
                Some(ms) => eprintln!("  {mark} {ms:>10.4} ms  {}", name(i)),
                None => eprintln!("  {mark}     failed     {}", name(i)),
            }
        }
    }
}

/// Time candidates `0..n`, each enqueued on `stream` by `run(i)`, and pick
/// the fastest by median time per launch.
///
/// One warm-up launch each (a candidate whose launch or execution fails is
/// dropped) sizes its burst; [`HEAT_MS`] of untimed launches bring the GPU
/// to its sustained clocks; then [`ROUNDS`] rounds visit the candidates in
/// turn, each timing one burst between events, with no idle gap until the
/// last round ends. Interleaving spreads clock and power drift over every
/// candidate instead of favouring whichever ran first. Synchronizes the
/// stream.
///
/// # Errors
/// Event creation or a synchronization failure.
pub(crate) fn fastest(
    stream: &Stream,
    n: usize,
    mut run: impl FnMut(usize) -> Result<()>,
) -> Result<Timing> {
    let ctx = stream.context();
    let (a, b) = (Event::new(ctx)?, Event::new(ctx)?);
    let mut first_error = None;
    let mut warm = vec![0f32; n];
    let mut reps = vec![0usize; n];
    for i in 0..n {
        a.record(stream)?;
        let r = run(i);
        b.record(stream)?;
        match r
            .and_then(|_| b.synchronize())
            .and_then(|_| a.elapsed_ms(&b))
        {
            Ok(ms) => {
                warm[i] = ms.max(1e-4);
                reps[i] = ((BURST_MS / warm[i]).ceil() as usize).clamp(1, MAX_REPS);
            }
            Err(e) => {
                first_error.get_or_insert(e);
            }
        }
    }
    if let Some(h) = (0..n).find(|&i| reps[i] > 0) {
        let heat = ((HEAT_MS / warm[h]).ceil() as usize).clamp(1, 4096);
        for _ in 0..heat {
            if let Err(e) = run(h) {
                first_error.get_or_insert(e);
                reps[h] = 0;
                break;
            }
        }
    }
    // Events per (round, candidate), read after one synchronize at the end.
    let mut marks: Vec<Vec<Option<(Event, Event)>>> = Vec::with_capacity(ROUNDS);
    for _ in 0..ROUNDS {
        let mut row = Vec::with_capacity(n);
        for (i, r) in reps.iter_mut().enumerate() {
            if *r == 0 {
                row.push(None);
                continue;
            }
            let (s0, s1) = (Event::new(ctx)?, Event::new(ctx)?);
            s0.record(stream)?;
            let mut res = Ok(());
            for _ in 0..*r {
                res = run(i);
                if res.is_err() {
                    break;
                }
            }
            s1.record(stream)?;
            match res {
                Ok(()) => row.push(Some((s0, s1))),
                Err(e) => {
                    first_error.get_or_insert(e);
                    *r = 0;
                    row.push(None);
                }
            }
        }
        marks.push(row);
    }
    stream.synchronize()?;
    let mut best: Option<(usize, f32)> = None;
    let mut times = vec![None; n];
    for i in 0..n {
        if reps[i] == 0 {
            continue;
        }
        let mut s = Vec::with_capacity(ROUNDS);
        for row in &marks {
            if let Some((s0, s1)) = &row[i] {
                s.push(s0.elapsed_ms(s1)? / reps[i] as f32);
            }
        }
        if s.is_empty() {
            continue;
        }
        s.sort_by(f32::total_cmp);
        let ms = s[s.len() / 2];
        times[i] = Some(ms);
        if best.is_none_or(|(_, t)| ms < t) {
            best = Some((i, ms));
        }
    }
    Ok(Timing {
        best,
        first_error,
        times,
    })
}

/// `bytes` bytes of device memory holding seeded uniform values in [-1, 1)
/// of `kind` (integers: in [-100, 100]; a tail past whole elements is
/// zero). Candidates are timed on data like real data: tensor-core power,
/// and so clocks, depend on the bits, and a zero or constant fill can rank
/// kernels differently.
///
/// # Errors
/// Allocation or copy failure.
pub(crate) fn random_bytes(
    stream: &Stream,
    kind: ElementKind,
    bytes: usize,
    seed: u64,
) -> Result<DeviceBuffer<u8>> {
    DeviceBuffer::from_host(stream, &random_host_bytes(kind, bytes, seed))
}

/// The host bytes of [`random_bytes`].
fn random_host_bytes(kind: ElementKind, bytes: usize, seed: u64) -> Vec<u8> {
    let size = kind.size_bytes().max(1);
    let mut host = vec![0u8; bytes];
    let mut z = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    for chunk in host.chunks_exact_mut(size) {
        z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut r = z;
        r = (r ^ (r >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        r = (r ^ (r >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        r ^= r >> 31;
        let v = (r >> 11) as f64 / (1u64 << 52) as f64 - 1.0;
        match kind {
            ElementKind::F64 => chunk.copy_from_slice(&v.to_le_bytes()),
            ElementKind::F32 => chunk.copy_from_slice(&(v as f32).to_le_bytes()),
            ElementKind::F16 => chunk.copy_from_slice(&half::f16::from_f64(v).to_le_bytes()),
            ElementKind::Bf16 => chunk.copy_from_slice(&half::bf16::from_f64(v).to_le_bytes()),
            ElementKind::Fp8E4M3 => chunk[0] = float8::F8E4M3::from_f64(v).to_bits(),
            ElementKind::Fp8E5M2 => chunk[0] = float8::F8E5M2::from_f64(v).to_bits(),
            ElementKind::I8 => chunk[0] = ((v * 100.0).round() as i8) as u8,
            ElementKind::I32 => chunk.copy_from_slice(&((v * 100.0).round() as i32).to_le_bytes()),
            // Not an operand type of any tuned op: small finite bytes.
            _ => chunk.fill(0x3C),
        }
    }
    host
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every generated element decodes to a finite value in range, the
    /// values vary, and the tail past whole elements is zero.
    #[test]
    fn values_are_finite_varied_and_in_range() {
        let f = |k: ElementKind, b: &[u8]| -> f64 {
            match k {
                ElementKind::F64 => f64::from_le_bytes(b.try_into().unwrap()),
                ElementKind::F32 => f32::from_le_bytes(b.try_into().unwrap()) as f64,
                ElementKind::F16 => half::f16::from_le_bytes(b.try_into().unwrap()).to_f64(),
                ElementKind::Bf16 => half::bf16::from_le_bytes(b.try_into().unwrap()).to_f64(),
                ElementKind::Fp8E4M3 => float8::F8E4M3::from_bits(b[0]).to_f64(),
                ElementKind::Fp8E5M2 => float8::F8E5M2::from_bits(b[0]).to_f64(),
                ElementKind::I8 => (b[0] as i8) as f64 / 100.0,
                ElementKind::I32 => i32::from_le_bytes(b.try_into().unwrap()) as f64 / 100.0,
                _ => unreachable!("not generated in this test"),
            }
        };
        for kind in [
            ElementKind::F64,
            ElementKind::F32,
            ElementKind::F16,
            ElementKind::Bf16,
            ElementKind::Fp8E4M3,
            ElementKind::Fp8E5M2,
            ElementKind::I8,
            ElementKind::I32,
        ] {
            let size = kind.size_bytes();
            // size - 1 trailing bytes are not a whole element
            let bytes = random_host_bytes(kind, 1000 * size + size - 1, 7);
            let vals: Vec<f64> = bytes.chunks_exact(size).map(|c| f(kind, c)).collect();
            assert!(
                vals.iter().all(|v| v.is_finite() && v.abs() <= 1.0),
                "{kind}"
            );
            let distinct = vals.iter().filter(|&&v| v != vals[0]).count();
            assert!(distinct > 500, "{kind}: values barely vary");
            assert!(bytes[1000 * size..].iter().all(|&b| b == 0), "{kind}: tail");
        }
    }
}
