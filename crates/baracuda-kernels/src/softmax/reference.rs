//! f64 oracles of the softmax family: softmax, log-softmax and softmin
//! along one dim of a row-major tensor, and their backward.

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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::finite_diff::check_vjp;

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
