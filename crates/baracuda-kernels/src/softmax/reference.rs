//! f64 oracles of the softmax family: softmax, log-softmax and softmin
//! along one dim of a row-major tensor, masked or not, and their backward.

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
