//! f64 oracles of the scans ([`ScanOp`](crate::ScanOp)) along one dim of a row-major
//! tensor, and their gradients, as PyTorch defines them.

use crate::ScanOp;

/// A scan problem: the op, the input's shape, the scanned dim and the
/// direction.
#[derive(Clone, Debug)]
pub struct Scan {
    /// The op.
    pub op: ScanOp,
    /// Shape of `x` (row-major).
    pub shape: Vec<usize>,
    /// The scanned dim.
    pub dim: usize,
    /// `y[i]` combines the elements before `i` only.
    pub exclusive: bool,
    /// Scan from the last index down.
    pub reverse: bool,
}

impl Scan {
    /// Every line along `dim`: the flat indices of its elements in scan
    /// order.
    fn lines(&self) -> Vec<Vec<usize>> {
        let len = self.shape[self.dim];
        let inner: usize = self.shape[self.dim + 1..].iter().product();
        let outer: usize = self.shape[..self.dim].iter().product();
        let mut v = Vec::new();
        for o in 0..outer {
            for i in 0..inner {
                let mut line: Vec<usize> = (0..len).map(|p| (o * len + p) * inner + i).collect();
                if self.reverse {
                    line.reverse();
                }
                v.push(line);
            }
        }
        v
    }

    /// The position along `dim` of the `p`-th element in scan order.
    fn orig(&self, p: usize) -> usize {
        if self.reverse {
            self.shape[self.dim] - 1 - p
        } else {
            p
        }
    }
}

fn logaddexp(a: f64, b: f64) -> f64 {
    if a.is_nan() || b.is_nan() {
        return f64::NAN;
    }
    let (hi, lo) = if a >= b { (a, b) } else { (b, a) };
    if lo == f64::NEG_INFINITY || hi == f64::INFINITY {
        return hi;
    }
    hi + (lo - hi).exp().ln_1p()
}

/// Whether `v` replaces the running extreme `m` (later ties win, NaN wins).
fn takes(op: ScanOp, m: f64, v: f64) -> bool {
    v.is_nan() || (!m.is_nan() && if op == ScanOp::CumMax { v >= m } else { v <= m })
}

/// The scan of `x`: values, and for cummax/cummin the indices along the
/// dim (as f64; empty for the other ops).
pub fn scan(s: &Scan, x: &[f64]) -> (Vec<f64>, Vec<f64>) {
    let mut y = vec![0.0; x.len()];
    let mut idx = if s.op.has_indices() {
        vec![0.0; x.len()]
    } else {
        Vec::new()
    };
    for line in s.lines().into_iter().filter(|l| !l.is_empty()) {
        let (identity, f): (f64, fn(f64, f64) -> f64) = match s.op {
            ScanOp::CumSum => (0.0, |a, b| a + b),
            ScanOp::CumProd => (1.0, |a, b| a * b),
            ScanOp::LogCumSumExp => (f64::NEG_INFINITY, logaddexp),
            ScanOp::CumMax | ScanOp::CumMin => {
                let (mut m, mut at) = (x[line[0]], 0);
                for (p, &i) in line.iter().enumerate() {
                    if p == 0 || takes(s.op, m, x[i]) {
                        (m, at) = (x[i], p);
                    }
                    y[i] = m;
                    idx[i] = s.orig(at) as f64;
                }
                continue;
            }
        };
        let mut acc = identity;
        for &i in &line {
            let before = acc;
            acc = f(acc, x[i]);
            y[i] = if s.exclusive { before } else { acc };
        }
    }
    (y, idx)
}

/// The scan of an integer `x` (i32 or i64 values, widened), as PyTorch
/// computes it: cumsum and cumprod in i64 with two's complement
/// wrap-around (exclusive scans start from 0 and 1); cummax and cummin
/// exact, with the indices along the dim as [`scan`]'s (later ties win).
///
/// # Panics
/// For logcumsumexp, which takes no integers.
pub fn scan_i64(s: &Scan, x: &[i64]) -> (Vec<i64>, Vec<f64>) {
    let mut y = vec![0i64; x.len()];
    let mut idx = if s.op.has_indices() {
        vec![0.0; x.len()]
    } else {
        Vec::new()
    };
    for line in s.lines().into_iter().filter(|l| !l.is_empty()) {
        let (identity, f): (i64, fn(i64, i64) -> i64) = match s.op {
            ScanOp::CumSum => (0, i64::wrapping_add),
            ScanOp::CumProd => (1, i64::wrapping_mul),
            ScanOp::CumMax | ScanOp::CumMin => {
                let (mut m, mut at) = (x[line[0]], 0);
                for (p, &i) in line.iter().enumerate() {
                    let takes = if s.op == ScanOp::CumMax { x[i] >= m } else { x[i] <= m };
                    if takes {
                        (m, at) = (x[i], p);
                    }
                    y[i] = m;
                    idx[i] = s.orig(at) as f64;
                }
                continue;
            }
            ScanOp::LogCumSumExp => panic!("logcumsumexp takes no integers"),
        };
        let mut acc = identity;
        for &i in &line {
            let before = acc;
            acc = f(acc, x[i]);
            y[i] = if s.exclusive { before } else { acc };
        }
    }
    (y, idx)
}

/// The gradient of `sum(dy * scan(x))` with respect to `x`. `y` is the
/// forward output (read by logcumsumexp) and `idx` the forward indices
/// (read by cummax and cummin), as the device produced them.
pub fn scan_backward(s: &Scan, x: &[f64], y: &[f64], idx: &[f64], dy: &[f64]) -> Vec<f64> {
    let mut dx = vec![0.0; x.len()];
    for line in s.lines() {
        let l = line.len();
        match s.op {
            ScanOp::CumSum => {
                // dx_j = sum of dy_i over the outputs that include x_j
                let mut acc = 0.0;
                for &i in line.iter().rev() {
                    if s.exclusive {
                        dx[i] = acc;
                        acc += dy[i];
                    } else {
                        acc += dy[i];
                        dx[i] = acc;
                    }
                }
            }
            ScanOp::CumProd => {
                // dx_j = prod_{k<j} x_k * R_j, R_j = sum over the outputs i
                // that include x_j of dy_i prod_{j<k<=i (or <i)} x_k
                let mut r = vec![0.0; l];
                for p in (0..l).rev() {
                    let (next_x, next_r) = if p + 1 < l {
                        (x[line[p + 1]], r[p + 1])
                    } else {
                        (0.0, 0.0)
                    };
                    r[p] = if s.exclusive {
                        let next_dy = if p + 1 < l { dy[line[p + 1]] } else { 0.0 };
                        next_dy + next_x * next_r
                    } else {
                        dy[line[p]] + next_x * next_r
                    };
                }
                let mut prefix = 1.0;
                for p in 0..l {
                    dx[line[p]] = prefix * r[p];
                    prefix *= x[line[p]];
                }
            }
            ScanOp::CumMax | ScanOp::CumMin => {
                for &i in &line {
                    let target = idx[i] as usize;
                    let p = if s.reverse { l - 1 - target } else { target };
                    dx[line[p]] += dy[i];
                }
            }
            ScanOp::LogCumSumExp => {
                // dx_j = exp(x_j) sum_i dy_i exp(-y_i) over the outputs i
                // that include x_j
                let mut acc = 0.0;
                for &i in line.iter().rev() {
                    let term = if dy[i] == 0.0 {
                        0.0
                    } else {
                        dy[i] * (-y[i]).exp()
                    };
                    if s.exclusive {
                        dx[i] = x[i].exp() * acc;
                        acc += term;
                    } else {
                        acc += term;
                        dx[i] = x[i].exp() * acc;
                    }
                }
            }
        }
    }
    dx
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::finite_diff::check_vjp;

    #[test]
    fn integer_scans_wrap_around_and_later_ties_win() {
        let line = |op, exclusive, reverse| Scan {
            op,
            shape: vec![4],
            dim: 0,
            exclusive,
            reverse,
        };
        let x = [i64::MAX, 1, 3, -2];
        let s = |op, e, r| scan_i64(&line(op, e, r), &x);
        assert_eq!(s(ScanOp::CumSum, false, false).0, [i64::MAX, i64::MIN, i64::MIN + 3, i64::MIN + 1]);
        assert_eq!(s(ScanOp::CumSum, true, false).0, [0, i64::MAX, i64::MIN, i64::MIN + 3]);
        assert_eq!(s(ScanOp::CumProd, false, true).0, [i64::MAX.wrapping_mul(-6), -6, -6, -2]);
        let ties = [2i64, 5, 5, 1];
        let (y, i) = scan_i64(&line(ScanOp::CumMax, false, false), &ties);
        assert_eq!((y, i), (vec![2, 5, 5, 5], vec![0.0, 1.0, 2.0, 2.0]));
        let (y, i) = scan_i64(&line(ScanOp::CumMin, false, true), &ties);
        assert_eq!((y, i), (vec![1, 1, 1, 1], vec![3.0, 3.0, 3.0, 3.0]));
    }

    fn problem(op: ScanOp, exclusive: bool, reverse: bool, dim: usize) -> Scan {
        Scan {
            op,
            shape: vec![3, 5],
            dim,
            exclusive,
            reverse,
        }
    }

    fn check_fd(s: &Scan) {
        let n: usize = s.shape.iter().product();
        let x: Vec<f64> = (0..n)
            .map(|i| ((i * 37 % 11) as f64 - 5.0) / 4.0 + 0.01 * i as f64)
            .collect();
        let dy: Vec<f64> = (0..n).map(|i| ((i * 13 % 7) as f64 - 3.0) / 3.0).collect();
        let (y, idx) = scan(s, &x);
        let dx = scan_backward(s, &x, &y, &idx, &dy);
        // an exclusive logcumsumexp's first output is -inf for any x: it
        // stands as 0 in the sum
        check_vjp(&format!("{s:?} dx"), &x, &dy, &dx, 1e-5, |xs| {
            let y = scan(s, xs).0;
            y.into_iter()
                .map(|v| if v.is_finite() { v } else { 0.0 })
                .collect()
        });
    }

    #[test]
    fn gradients_match_finite_differences() {
        for op in ScanOp::ALL {
            for exclusive in [false, true] {
                if exclusive && op.has_indices() {
                    continue;
                }
                for reverse in [false, true] {
                    for dim in [0, 1] {
                        check_fd(&problem(op, exclusive, reverse, dim));
                    }
                }
            }
        }
    }

    #[test]
    fn cumprod_gradient_with_zeros_is_the_product_of_the_others() {
        let x = [2.0, 0.0, 3.0, 0.0, -1.0];
        let dy = [1.0, -2.0, 0.5, 3.0, 1.5];
        for exclusive in [false, true] {
            let s = Scan {
                op: ScanOp::CumProd,
                shape: vec![5],
                dim: 0,
                exclusive,
                reverse: false,
            };
            let dx = scan_backward(&s, &x, &[], &[], &dy);
            // d y_i / d x_j: the product of the other factors of y_i
            for (j, &got) in dx.iter().enumerate() {
                let want: f64 = (0..5)
                    .filter(|&i| if exclusive { i > j } else { i >= j })
                    .map(|i| {
                        let end = if exclusive { i } else { i + 1 };
                        dy[i] * (0..end).filter(|&k| k != j).map(|k| x[k]).product::<f64>()
                    })
                    .sum();
                assert_eq!(got, want, "exclusive {exclusive} dx[{j}]");
            }
        }
    }

    #[test]
    fn cummax_takes_the_last_of_equal_maxima_and_nan_wins() {
        let s = |op, reverse| Scan {
            op,
            shape: vec![6],
            dim: 0,
            exclusive: false,
            reverse,
        };
        let x = [1.0, 3.0, 3.0, 2.0, 3.0, 0.0];
        let (y, idx) = scan(&s(ScanOp::CumMax, false), &x);
        assert_eq!(y, [1.0, 3.0, 3.0, 3.0, 3.0, 3.0]);
        assert_eq!(idx, [0.0, 1.0, 2.0, 2.0, 4.0, 4.0]);
        let (_, idx) = scan(&s(ScanOp::CumMin, false), &x);
        assert_eq!(idx, [0.0, 0.0, 0.0, 0.0, 0.0, 5.0]);
        // reversed: later in scan order is the lower index
        let (_, idx) = scan(&s(ScanOp::CumMax, true), &x);
        assert_eq!(idx, [1.0, 1.0, 2.0, 4.0, 4.0, 5.0]);
        let nan = [1.0, f64::NAN, 5.0, f64::NAN, 2.0, 7.0];
        let (y, idx) = scan(&s(ScanOp::CumMax, false), &nan);
        assert!(y[1..].iter().all(|v| v.is_nan()));
        assert_eq!(idx, [0.0, 1.0, 1.0, 3.0, 3.0, 3.0]);
        let dx = scan_backward(
            &s(ScanOp::CumMax, false),
            &x,
            &[],
            &[0.0, 1.0, 2.0, 2.0, 4.0, 4.0],
            &[1.0; 6],
        );
        assert_eq!(dx, [1.0, 1.0, 2.0, 0.0, 2.0, 0.0]);
    }

    #[test]
    fn exclusive_scans_start_at_the_identity() {
        let x = [1.0, 2.0, 3.0];
        let s = |op| Scan {
            op,
            shape: vec![3],
            dim: 0,
            exclusive: true,
            reverse: false,
        };
        assert_eq!(scan(&s(ScanOp::CumSum), &x).0, [0.0, 1.0, 3.0]);
        assert_eq!(scan(&s(ScanOp::CumProd), &x).0, [1.0, 1.0, 2.0]);
        assert_eq!(scan(&s(ScanOp::LogCumSumExp), &x).0[0], f64::NEG_INFINITY);
    }
}
