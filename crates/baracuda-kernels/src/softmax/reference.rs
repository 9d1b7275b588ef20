//! f64 oracles of the softmax family: softmax, log-softmax and softmin
//! along one dim of a row-major tensor, masked or not, Gumbel-softmax
//! (with the Philox-4x32-10 stream its device noise comes from), and their
//! backward.

use crate::softmax::SoftmaxOp;

/// The rows of `shape` along `dim`: for each row, the flat (row-major)
/// indices of its elements in order.
fn rows(shape: &[usize], dim: usize) -> Vec<Vec<usize>> {
    let n = shape[dim];
    let inner: usize = shape[dim + 1..].iter().product();
    let outer: usize = shape[..dim].iter().product();
    (0..outer)
        .flat_map(|o| {
            (0..inner).map(move |k| (0..n).map(move |i| (o * n + i) * inner + k).collect())
        })
        .collect()
}

/// The maximum, NaN if any element is NaN (-inf over nothing).
fn nan_max(v: impl Iterator<Item = f64>) -> f64 {
    v.fold(
        f64::NEG_INFINITY,
        |m, z| if z.is_nan() || z > m { z } else { m },
    )
}

/// `op` of `x` (row-major, `shape`) along `dim`. A row holding NaN or
/// +inf, or only -inf, is NaN throughout (`exp(z - m)` meets `inf - inf`),
/// as PyTorch's.
pub fn softmax(op: SoftmaxOp, shape: &[usize], dim: usize, x: &[f64]) -> Vec<f64> {
    let sign = if op == SoftmaxOp::Softmin { -1.0 } else { 1.0 };
    let mut y = vec![0.0; x.len()];
    for row in rows(shape, dim) {
        let m = nan_max(row.iter().map(|&i| sign * x[i]));
        let s: f64 = row.iter().map(|&i| (sign * x[i] - m).exp()).sum();
        for &i in &row {
            let z = sign * x[i] - m;
            y[i] = match op {
                SoftmaxOp::LogSoftmax => z - s.ln(),
                _ => z.exp() / s,
            };
        }
    }
    y
}

/// The gradient `dx` of `op` from its output `y` and `dy` (row-major,
/// `shape`, along `dim`).
pub fn softmax_backward(
    op: SoftmaxOp,
    shape: &[usize],
    dim: usize,
    y: &[f64],
    dy: &[f64],
) -> Vec<f64> {
    let mut dx = vec![0.0; y.len()];
    for row in rows(shape, dim) {
        match op {
            SoftmaxOp::LogSoftmax => {
                let t: f64 = row.iter().map(|&i| dy[i]).sum();
                for &i in &row {
                    dx[i] = dy[i] - y[i].exp() * t;
                }
            }
            _ => {
                let sign = if op == SoftmaxOp::Softmin { -1.0 } else { 1.0 };
                let t: f64 = row.iter().map(|&i| dy[i] * y[i]).sum();
                for &i in &row {
                    dx[i] = sign * y[i] * (dy[i] - t);
                }
            }
        }
    }
    dx
}

/// The mask of [`masked_softmax`], of x's shape (row-major).
#[derive(Copy, Clone, Debug)]
pub enum Mask<'a> {
    /// No mask.
    None,
    /// True = kept: the op of `x.masked_fill(~keep, -inf)`.
    Keep(&'a [bool]),
    /// Added to x: the op of `x + mask` (exactly; a caller matching a
    /// 16-bit PyTorch rounds the sum itself).
    Add(&'a [f64]),
}

/// `op` of `x` under `mask` (row-major, `shape`) along `dim`. A row with
/// nothing kept is NaN throughout, as PyTorch's composite.
pub fn masked_softmax(op: SoftmaxOp, shape: &[usize], dim: usize, x: &[f64], mask: Mask<'_>) -> Vec<f64> {
    let z: Vec<f64> = match mask {
        Mask::None => x.to_vec(),
        Mask::Keep(k) => x
            .iter()
            .zip(k)
            .map(|(&v, &k)| if k { v } else { f64::NEG_INFINITY })
            .collect(),
        Mask::Add(m) => x.iter().zip(m).map(|(a, b)| a + b).collect(),
    };
    softmax(op, shape, dim, &z)
}

/// The gradient `dx` of [`masked_softmax`] from its output `y` and `dy`,
/// as PyTorch's autograd of the composite: the op's own backward (for an
/// additive mask that is all: the gradient of `x + mask` by `x` is the
/// identity), then 0 where a keep mask masks (masked_fill's backward; a
/// row with nothing kept is 0 throughout). The log-softmax sum of `dy`
/// runs over the masked elements too, as the composite's.
pub fn masked_softmax_backward(
    op: SoftmaxOp,
    shape: &[usize],
    dim: usize,
    y: &[f64],
    dy: &[f64],
    mask: Mask<'_>,
) -> Vec<f64> {
    let mut dx = softmax_backward(op, shape, dim, y, dy);
    if let Mask::Keep(k) = mask {
        for (d, &k) in dx.iter_mut().zip(k) {
            if !k {
                *d = 0.0;
            }
        }
    }
    dx
}

/// Gumbel-softmax of `logits` with gumbels `g` (row-major, `shape`) along
/// `dim`: the soft sample `softmax((logits + g) / tau)`, and with `hard`
/// the one-hot of its first argmax ([`hard_sample`]).
pub fn gumbel_softmax(
    shape: &[usize],
    dim: usize,
    tau: f64,
    hard: bool,
    logits: &[f64],
    g: &[f64],
) -> Vec<f64> {
    let z: Vec<f64> = logits.iter().zip(g).map(|(x, g)| (x + g) / tau).collect();
    let soft = softmax(SoftmaxOp::Softmax, shape, dim, &z);
    if hard {
        hard_sample(shape, dim, &soft, |v| v)
    } else {
        soft
    }
}

/// The hard sample of `soft`: `round(round(onehot - soft) + soft)` with the
/// one-hot at each row's first maximum (NaN winning, as `torch.max`), and
/// `round` the rounding to the sample's dtype (PyTorch's `y_hard -
/// y_soft.detach() + y_soft` in it).
pub fn hard_sample(shape: &[usize], dim: usize, soft: &[f64], round: impl Fn(f64) -> f64) -> Vec<f64> {
    let mut y = vec![0.0; soft.len()];
    for row in rows(shape, dim) {
        let Some(&first) = row.first() else {
            continue;
        };
        let mut best = first;
        for &i in &row[1..] {
            let (v, b) = (soft[i], soft[best]);
            if !b.is_nan() && (v.is_nan() || v > b) {
                best = i;
            }
        }
        for &i in &row {
            let h = if i == best { 1.0 } else { 0.0 };
            y[i] = round(round(h - soft[i]) + soft[i]);
        }
    }
    y
}

/// The gradient of the logits of [`gumbel_softmax`] (either form: the hard
/// one's is straight-through) from the soft sample and `dy`:
/// `soft (dy - sum(dy soft)) / tau`.
pub fn gumbel_softmax_backward(shape: &[usize], dim: usize, tau: f64, soft: &[f64], dy: &[f64]) -> Vec<f64> {
    softmax_backward(SoftmaxOp::Softmax, shape, dim, soft, dy)
        .into_iter()
        .map(|d| d / tau)
        .collect()
}

/// Philox-4x32-10 (Salmon et al. 2011) with Random123's constants: the
/// counter `(ctr, offset)` (low words first) under key `seed`.
pub fn philox4x32_10(ctr: u64, offset: u64, seed: u64) -> [u32; 4] {
    let mut c = [ctr as u32, (ctr >> 32) as u32, offset as u32, (offset >> 32) as u32];
    let mut k = [seed as u32, (seed >> 32) as u32];
    for _ in 0..10 {
        let p0 = u64::from(0xD251_1F53u32) * u64::from(c[0]);
        let p1 = u64::from(0xCD9E_8D57u32) * u64::from(c[2]);
        c = [
            (p1 >> 32) as u32 ^ c[1] ^ k[0],
            p1 as u32,
            (p0 >> 32) as u32 ^ c[3] ^ k[1],
            p0 as u32,
        ];
        k[0] = k[0].wrapping_add(0x9E37_79B9);
        k[1] = k[1].wrapping_add(0xBB67_AE85);
    }
    c
}

/// The uniform in (0, 1] that the Gumbel-softmax noise of element `idx`
/// (row-major) starts from, as the device computes it: f32 `w 2^-32 +
/// 2^-33` from lane `idx % 4` of counter `idx / 4` (curand_uniform's
/// formula), or on f64 (`wide`) 53 bits of lanes `2 (idx % 2)` and the next
/// of counter `idx / 2`, `b 2^-53 + 2^-54`.
pub fn gumbel_uniform(idx: u64, offset: u64, seed: u64, wide: bool) -> f64 {
    if wide {
        let r = philox4x32_10(idx >> 1, offset, seed);
        let (hi, lo) = if idx & 1 == 1 { (r[2], r[3]) } else { (r[0], r[1]) };
        let bits = ((u64::from(hi) << 32) | u64::from(lo)) >> 11;
        bits as f64 * 2f64.powi(-53) + 2f64.powi(-54)
    } else {
        let w = philox4x32_10(idx >> 2, offset, seed)[(idx & 3) as usize];
        f64::from((w as f32) * 2f32.powi(-32) + 2f32.powi(-33))
    }
}

/// The gumbel of uniform `u` as PyTorch's `-exponential_().log()` makes
/// it in a dtype of machine epsilon `eps` whose rounding is `round`:
/// `E = -log u` (`log u` taken as `-eps/2` for `u >= 1 - eps/2`) stored in
/// the dtype, then `-log E` in it.
pub fn gumbel_of_uniform(u: f64, eps: f64, round: impl Fn(f64) -> f64) -> f64 {
    let lg = if u >= 1.0 - eps / 2.0 { -eps / 2.0 } else { u.ln() };
    let e = round(-lg);
    -round(e.ln())
}

/// Sparsemax of `x` (row-major, `shape`) along `dim`: `y = max(x - tau,
/// 0)` with `tau` from the sorted row (Martins & Astudillo 2016): the
/// largest `k` with `1 + k z_(k) > sum_{j <= k} z_(j)`, `tau = (sum_{j <=
/// k} z_(j) - 1) / k`. A row holding NaN or +inf, or only -inf, is NaN.
pub fn sparsemax(shape: &[usize], dim: usize, x: &[f64]) -> Vec<f64> {
    let mut y = vec![0.0; x.len()];
    for row in rows(shape, dim) {
        let vals: Vec<f64> = row.iter().map(|&i| x[i]).collect();
        let bad = vals.iter().any(|v| v.is_nan() || *v == f64::INFINITY)
            || vals.iter().all(|v| *v == f64::NEG_INFINITY);
        if bad {
            row.iter().for_each(|&i| y[i] = f64::NAN);
            continue;
        }
        let mut z: Vec<f64> = vals.iter().copied().filter(|v| v.is_finite()).collect();
        z.sort_by(|a, b| b.total_cmp(a));
        let (mut cum, mut k, mut cum_k) = (0.0, 0, 0.0);
        for (j, &v) in z.iter().enumerate() {
            cum += v;
            if 1.0 + (j + 1) as f64 * v > cum {
                k = j + 1;
                cum_k = cum;
            }
        }
        let tau = (cum_k - 1.0) / k as f64;
        for &i in &row {
            y[i] = (x[i] - tau).max(0.0);
        }
    }
    y
}

/// The gradient `dx` of [`sparsemax`] from its output `y` and `dy`: on
/// the support `S = {y > 0}`, `dy - mean_S dy`; 0 off it.
pub fn sparsemax_backward(shape: &[usize], dim: usize, y: &[f64], dy: &[f64]) -> Vec<f64> {
    let mut dx = vec![0.0; y.len()];
    for row in rows(shape, dim) {
        let support: Vec<usize> = row.iter().copied().filter(|&i| y[i] > 0.0 || y[i].is_nan()).collect();
        let mean = support.iter().map(|&i| dy[i]).sum::<f64>() / support.len() as f64;
        for &i in &support {
            dx[i] = dy[i] - mean;
        }
    }
    dx
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::finite_diff::{check_grad, check_vjp};

    const SHAPE: [usize; 3] = [3, 5, 4];

    fn input() -> Vec<f64> {
        (0..60)
            .map(|i| ((i * 37 % 61) as f64 - 30.0) / 9.0)
            .collect()
    }

    /// The backward against central differences of `sum(dy * y(x))`.
    #[test]
    fn gradients_match_finite_differences() {
        let x = input();
        let dy: Vec<f64> = (0..60)
            .map(|i| ((i * 13 % 17) as f64 - 8.0) / 8.0)
            .collect();
        for op in SoftmaxOp::ALL {
            for dim in 0..3 {
                let y = softmax(op, &SHAPE, dim, &x);
                let dx = softmax_backward(op, &SHAPE, dim, &y, &dy);
                check_vjp(&format!("{op:?} dim {dim} dx"), &x, &dy, &dx, 1e-6, |xs| {
                    softmax(op, &SHAPE, dim, xs)
                });
            }
        }
    }

    /// The masked backward against central differences. Under a keep
    /// mask log-softmax's masked outputs are -inf whatever x is: the check
    /// takes `dy = 0` there (the composite's sum of `dy` over them is not a
    /// derivative of anything finite; the goldens check it).
    #[test]
    fn masked_gradients_match_finite_differences() {
        let x = input();
        let keep: Vec<bool> = (0..60).map(|i| i % 4 != 1).collect();
        let add: Vec<f64> = (0..60).map(|i| ((i * 7 % 11) as f64 - 5.0) / 2.0).collect();
        for op in [SoftmaxOp::Softmax, SoftmaxOp::LogSoftmax] {
            for dim in 0..3 {
                for mask in [Mask::Keep(&keep), Mask::Add(&add)] {
                    let dy: Vec<f64> = (0..60)
                        .map(|i| match mask {
                            Mask::Keep(k) if !k[i] => 0.0,
                            _ => ((i * 13 % 17) as f64 - 8.0) / 8.0,
                        })
                        .collect();
                    let y = masked_softmax(op, &SHAPE, dim, &x, mask);
                    let dx = masked_softmax_backward(op, &SHAPE, dim, &y, &dy, mask);
                    check_grad(&format!("{op:?} dim {dim} {mask:?}"), &x, &dx, 1e-6, |xs| {
                        masked_softmax(op, &SHAPE, dim, xs, mask)
                            .iter()
                            .zip(&dy)
                            .filter(|(_, &d)| d != 0.0)
                            .map(|(a, b)| a * b)
                            .sum()
                    });
                }
            }
        }
    }

    #[test]
    fn masks_follow_the_composite() {
        let inf = f64::INFINITY;
        let x = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0];
        let keep = [true, false, true, false, false, false];
        let y = masked_softmax(SoftmaxOp::Softmax, &[2, 3], 1, &x, Mask::Keep(&keep));
        let e = (2.0f64).exp();
        assert!((y[0] - 1.0 / (1.0 + e)).abs() < 1e-15 && y[1] == 0.0);
        // nothing kept: NaN forward, 0 backward
        assert!(y[3..].iter().all(|v| v.is_nan()));
        let dx = masked_softmax_backward(
            SoftmaxOp::LogSoftmax,
            &[2, 3],
            1,
            &masked_softmax(SoftmaxOp::LogSoftmax, &[2, 3], 1, &x, Mask::Keep(&keep)),
            &[1.0; 6],
            Mask::Keep(&keep),
        );
        assert_eq!((dx[1], &dx[3..]), (0.0, &[0.0; 3][..]));
        // log-softmax's sum of dy includes the masked elements
        assert!((dx[0] - (1.0 - 3.0 / (1.0 + e))).abs() < 1e-15);
        // an additive -inf is a masked element; its log-softmax dx is dy
        let add = [0.0, -inf, 0.0, 0.0, 0.0, 0.0];
        let y = masked_softmax(SoftmaxOp::LogSoftmax, &[2, 3], 1, &x, Mask::Add(&add));
        assert_eq!(y[1], -inf);
        let dx = masked_softmax_backward(SoftmaxOp::LogSoftmax, &[2, 3], 1, &y, &[1.0; 6], Mask::Add(&add));
        assert_eq!(dx[1], 1.0);
    }

    /// Sparsemax's gradient against central differences (the inputs keep
    /// clear of the kinks), rows on the simplex, and the special rows.
    #[test]
    fn sparsemax_gradients_match_finite_differences() {
        // scaled and jittered: input() puts some rows exactly on a kink
        // (two elements 1 apart)
        let x: Vec<f64> = input()
            .iter()
            .map(|v| v * 0.3 + (v * 7.3).sin() * 0.01)
            .collect();
        let dy: Vec<f64> = (0..60).map(|i| ((i * 13 % 17) as f64 - 8.0) / 8.0).collect();
        for dim in 0..3 {
            let y = sparsemax(&SHAPE, dim, &x);
            for row in rows(&SHAPE, dim) {
                let s: f64 = row.iter().map(|&i| y[i]).sum();
                assert!((s - 1.0).abs() < 1e-12 && row.iter().all(|&i| y[i] >= 0.0));
            }
            let dx = sparsemax_backward(&SHAPE, dim, &y, &dy);
            check_vjp(&format!("sparsemax dim {dim}"), &x, &dy, &dx, 1e-6, |xs| {
                sparsemax(&SHAPE, dim, xs)
            });
        }
        // a clear winner takes all; a flat row is uniform
        assert_eq!(sparsemax(&[3], 0, &[3.0, 1.0, 0.5]), vec![1.0, 0.0, 0.0]);
        assert_eq!(sparsemax(&[4], 0, &[0.5; 4]), vec![0.25; 4]);
        let y = sparsemax(&[3], 0, &[0.2, 0.0, f64::NEG_INFINITY]);
        assert!((y[0] - 0.6).abs() < 1e-15 && (y[1] - 0.4).abs() < 1e-15 && y[2] == 0.0);
        assert!(sparsemax(&[2], 0, &[f64::NAN, 1.0]).iter().all(|v| v.is_nan()));
        assert!(sparsemax(&[2], 0, &[f64::INFINITY, 1.0]).iter().all(|v| v.is_nan()));
        assert!(sparsemax(&[2], 0, &[f64::NEG_INFINITY; 2]).iter().all(|v| v.is_nan()));
    }

    /// Random123's known-answer vectors of Philox-4x32-10.
    #[test]
    fn philox_matches_random123() {
        assert_eq!(
            philox4x32_10(0, 0, 0),
            [0x6627_e8d5, 0xe169_c58d, 0xbc57_ac4c, 0x9b00_dbd8]
        );
        assert_eq!(
            philox4x32_10(u64::MAX, u64::MAX, u64::MAX),
            [0x408f_276d, 0x41c8_3b0e, 0xa20b_c7c6, 0x6d54_51fd]
        );
        assert_eq!(
            philox4x32_10(
                0x85a3_08d3_243f_6a88,
                0x0370_7344_1319_8a2e,
                0x299f_31d0_a409_3822
            ),
            [0xd16c_fe09, 0x94fd_cceb, 0x5001_e420, 0x2412_6ea1]
        );
    }

    /// The noise is Gumbel(0, 1): mean Euler's gamma, variance pi^2 / 6
    /// (200000 draws: standard errors 0.003 and 0.012).
    #[test]
    fn philox_gumbels_are_gumbel_distributed() {
        for wide in [false, true] {
            let eps = if wide { f64::EPSILON } else { f64::from(f32::EPSILON) };
            let n = 200_000;
            let g: Vec<f64> = (0..n)
                .map(|i| gumbel_of_uniform(gumbel_uniform(i, 7, 2024, wide), eps, |v| v))
                .collect();
            let mean = g.iter().sum::<f64>() / n as f64;
            let var = g.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / n as f64;
            assert!((mean - 0.577_215_664_9).abs() < 0.015, "mean {mean}");
            assert!((var - core::f64::consts::PI.powi(2) / 6.0).abs() < 0.06, "var {var}");
            let u = gumbel_uniform(5, 7, 2024, wide);
            assert!(u > 0.0 && u <= 1.0);
        }
        // another offset, another stream
        assert_ne!(gumbel_uniform(0, 1, 9, false), gumbel_uniform(0, 2, 9, false));
    }

    /// The soft sample's gradient against central differences; the hard
    /// sample's backward is the soft one's (straight-through) and its
    /// forward a one-hot of the soft sample's argmax.
    #[test]
    fn gumbel_softmax_gradients_match_finite_differences() {
        let x = input();
        let g: Vec<f64> = (0..60).map(|i| ((i * 11 % 23) as f64 - 5.0) / 7.0).collect();
        let dy: Vec<f64> = (0..60).map(|i| ((i * 13 % 17) as f64 - 8.0) / 8.0).collect();
        for dim in 0..3 {
            for tau in [0.5, 1.0, 2.5] {
                let soft = gumbel_softmax(&SHAPE, dim, tau, false, &x, &g);
                let dx = gumbel_softmax_backward(&SHAPE, dim, tau, &soft, &dy);
                check_vjp(&format!("gumbel dim {dim} tau {tau}"), &x, &dy, &dx, 1e-6, |xs| {
                    gumbel_softmax(&SHAPE, dim, tau, false, xs, &g)
                });
                let hard = gumbel_softmax(&SHAPE, dim, tau, true, &x, &g);
                for row in rows(&SHAPE, dim) {
                    let ones: Vec<usize> = row.iter().copied().filter(|&i| (hard[i] - 1.0).abs() < 1e-12).collect();
                    assert_eq!(ones.len(), 1);
                    assert!(row.iter().all(|&i| soft[i] <= soft[ones[0]]));
                    assert!(row.iter().filter(|&&i| i != ones[0]).all(|&i| hard[i].abs() < 1e-15));
                }
            }
        }
        // ties: the first; NaN wins
        let y = hard_sample(&[1, 3], 1, &[0.25, 0.5, 0.5], |v| v);
        assert_eq!(y, vec![0.0, 1.0, 0.0]);
        let y = hard_sample(&[1, 3], 1, &[0.25, f64::NAN, 0.5], |v| v);
        assert!(y[1].is_nan() && y[0] == 0.0 && y[2] == 0.0);
    }

    #[test]
    fn rows_sum_to_one_and_special_rows_follow_pytorch() {
        let x = input();
        let y = softmax(SoftmaxOp::Softmax, &SHAPE, 1, &x);
        for row in rows(&SHAPE, 1) {
            let s: f64 = row.iter().map(|&i| y[i]).sum();
            assert!((s - 1.0).abs() < 1e-12);
        }
        let inf = f64::INFINITY;
        let y = softmax(SoftmaxOp::Softmax, &[1, 3], 1, &[-inf, 0.0, -inf]);
        assert_eq!(y, vec![0.0, 1.0, 0.0]);
        let all = softmax(SoftmaxOp::Softmax, &[3], 0, &[-inf; 3]);
        assert!(all.iter().all(|v| v.is_nan()));
        let pos = softmax(SoftmaxOp::LogSoftmax, &[2], 0, &[inf, 1.0]);
        assert!(pos.iter().all(|v| v.is_nan()));
        // softmin is softmax of -x
        let a = softmax(SoftmaxOp::Softmin, &SHAPE, 2, &x);
        let neg: Vec<f64> = x.iter().map(|v| -v).collect();
        assert_eq!(a, softmax(SoftmaxOp::Softmax, &SHAPE, 2, &neg));
    }
}
