//! f64 oracles for the elementwise family.

use crate::elementwise::{BinaryOp, UnaryOp};

/// `erf` in f64, accurate to ~1e-15: the Maclaurin series below |x| = 2.5
/// and the Laplace continued fraction of `erfc` above (Rust's std has no
/// `erf`).
pub fn erf(x: f64) -> f64 {
    // Series for small |x|, continued fraction (Lentz) for erfc otherwise.
    let ax = x.abs();
    let r = if ax < 2.5 {
        // erf(x) = 2/sqrt(pi) * sum_n (-1)^n x^(2n+1) / (n! (2n+1))
        let mut sum = 0.0;
        let mut term = ax;
        let x2 = ax * ax;
        // |x| < 2.5: the terms fall below 1e-17 of the sum within 60 steps.
        for n in 0..200 {
            let t = term / (2.0 * n as f64 + 1.0);
            sum += t;
            if t.abs() <= 1e-17 * sum.abs() {
                break;
            }
            term *= -x2 / (n as f64 + 1.0);
        }
        sum * std::f64::consts::FRAC_2_SQRT_PI
    } else {
        1.0 - erfc_cf(ax)
    };
    if x < 0.0 {
        -r
    } else {
        r
    }
}

/// `erfc(x)` for `x >= 2.5` by the Laplace continued fraction (Lentz),
/// accurate to ~1e-15 relative, so deep into the tail where `1 - erf(x)`
/// has no digits left:
/// erfc(x) = exp(-x^2)/sqrt(pi) * 1/(x + 1/2/(x + 1/(x + 3/2/(x + ...)))).
fn erfc_cf(ax: f64) -> f64 {
    let mut f = ax;
    let mut c = ax;
    let mut d = 0.0;
    for k in 1..200 {
        let an = k as f64 / 2.0;
        d = ax + an * d;
        d = if d == 0.0 { 1e-300 } else { 1.0 / d };
        c = ax + an / c;
        let delta = c * d;
        f *= delta;
        if (delta - 1.0).abs() < 1e-16 {
            break;
        }
    }
    (-ax * ax).exp() / (f * std::f64::consts::PI.sqrt())
}

/// `erfc(x) = 1 - erf(x)` in f64, accurate to ~1e-15 relative for every
/// `x` (through the continued fraction from 2.5 up, where `1 - erf` would
/// cancel).
pub fn erfc(x: f64) -> f64 {
    if x >= 2.5 {
        erfc_cf(x)
    } else {
        1.0 - erf(x)
    }
}

const SQRT_2_OVER_PI: f64 = 0.797_884_560_802_865_4;
const GELU_C: f64 = 0.044715;

fn sigmoid(x: f64) -> f64 {
    1.0 / (1.0 + (-x).exp())
}

/// `f(x)` for one element.
pub fn unary_scalar(op: UnaryOp, x: f64) -> f64 {
    match op {
        UnaryOp::Relu => {
            if x < 0.0 {
                0.0
            } else {
                x
            }
        }
        UnaryOp::GeluErf => 0.5 * x * (1.0 + erf(x / std::f64::consts::SQRT_2)),
        UnaryOp::GeluTanh => 0.5 * x * (1.0 + (SQRT_2_OVER_PI * (x + GELU_C * x * x * x)).tanh()),
        UnaryOp::Silu => x * sigmoid(x),
        UnaryOp::Sigmoid => sigmoid(x),
        UnaryOp::Tanh => x.tanh(),
        UnaryOp::Exp => x.exp(),
        UnaryOp::Neg => -x,
    }
}

/// `f'(x)` for one element (the relu subgradient at 0 is 0, as PyTorch).
pub fn unary_derivative(op: UnaryOp, x: f64) -> f64 {
    match op {
        UnaryOp::Relu => {
            if x <= 0.0 {
                0.0
            } else {
                1.0
            }
        }
        UnaryOp::GeluErf => {
            let cdf = 0.5 * (1.0 + erf(x / std::f64::consts::SQRT_2));
            let pdf = (-0.5 * x * x).exp() / (2.0 * std::f64::consts::PI).sqrt();
            cdf + x * pdf
        }
        UnaryOp::GeluTanh => {
            let t = (SQRT_2_OVER_PI * (x + GELU_C * x * x * x)).tanh();
            0.5 * (1.0 + t)
                + 0.5 * x * (1.0 - t * t) * SQRT_2_OVER_PI * (1.0 + 3.0 * GELU_C * x * x)
        }
        UnaryOp::Silu => {
            let s = sigmoid(x);
            s * (1.0 + x * (1.0 - s))
        }
        UnaryOp::Sigmoid => {
            let s = sigmoid(x);
            s * (1.0 - s)
        }
        UnaryOp::Tanh => 1.0 - x.tanh() * x.tanh(),
        UnaryOp::Exp => x.exp(),
        UnaryOp::Neg => -1.0,
    }
}

/// `y = f(x)`.
pub fn unary(op: UnaryOp, x: &[f64]) -> Vec<f64> {
    x.iter().map(|&v| unary_scalar(op, v)).collect()
}

/// `dx = dy * f'(x)`.
pub fn unary_backward(op: UnaryOp, x: &[f64], dy: &[f64]) -> Vec<f64> {
    x.iter()
        .zip(dy)
        .map(|(&v, &g)| g * unary_derivative(op, v))
        .collect()
}

/// `f(a, b)` for one element pair.
pub fn binary_scalar(op: BinaryOp, a: f64, b: f64) -> f64 {
    match op {
        BinaryOp::Add => a + b,
        BinaryOp::Sub => a - b,
        BinaryOp::Mul => a * b,
        BinaryOp::Div => a / b,
        BinaryOp::Maximum | BinaryOp::Minimum if a.is_nan() => a,
        BinaryOp::Maximum | BinaryOp::Minimum if b.is_nan() => b,
        BinaryOp::Maximum => a.max(b),
        BinaryOp::Minimum => a.min(b),
    }
}

/// `(dy * df/da, dy * df/db)` for one element (PyTorch's tie rule for
/// maximum and minimum: each side gets `dy / 2`).
pub fn binary_grad_scalar(op: BinaryOp, a: f64, b: f64, dy: f64) -> (f64, f64) {
    match op {
        BinaryOp::Add => (dy, dy),
        BinaryOp::Sub => (dy, -dy),
        BinaryOp::Mul => (dy * b, dy * a),
        BinaryOp::Div => (dy / b, -dy * a / (b * b)),
        BinaryOp::Maximum | BinaryOp::Minimum => {
            if a == b {
                return (dy / 2.0, dy / 2.0);
            }
            let a_loses = if op == BinaryOp::Maximum {
                a < b
            } else {
                a > b
            };
            let b_loses = if op == BinaryOp::Maximum {
                a > b
            } else {
                a < b
            };
            (
                if a_loses { 0.0 } else { dy },
                if b_loses { 0.0 } else { dy },
            )
        }
    }
}

/// Row-major index of every element of `target` mapped into a broadcast
/// input of `shape` (same rank, each axis equal or 1).
fn broadcast_index(shape: &[usize], target: &[usize]) -> Vec<usize> {
    let n: usize = target.iter().product();
    let mut out = Vec::with_capacity(n);
    for lin in 0..n {
        let mut rem = lin;
        let mut idx = 0;
        let mut mul = 1;
        for d in (0..target.len()).rev() {
            let c = rem % target[d];
            rem /= target[d];
            let c_in = if shape[d] == 1 { 0 } else { c };
            idx += c_in * mul;
            mul *= shape[d];
        }
        out.push(idx);
    }
    out
}

/// Broadcast `x` of `shape` to `target` (row-major, same rank).
pub fn broadcast(x: &[f64], shape: &[usize], target: &[usize]) -> Vec<f64> {
    broadcast_index(shape, target)
        .into_iter()
        .map(|i| x[i])
        .collect()
}

/// Sum `x` of `target` shape over the axes where `shape` has extent 1.
pub fn reduce_to(x: &[f64], shape: &[usize], target: &[usize]) -> Vec<f64> {
    let mut out = vec![0.0; shape.iter().product()];
    for (i, j) in broadcast_index(shape, target).into_iter().enumerate() {
        out[j] += x[i];
    }
    out
}

/// The broadcast of two same-rank shapes (each axis equal or 1).
fn broadcast_shape(a_shape: &[usize], b_shape: &[usize]) -> Vec<usize> {
    a_shape
        .iter()
        .zip(b_shape)
        .map(|(&x, &y)| if x == 1 { y } else { x })
        .collect()
}

/// `out = f(a, b)` with broadcasting, in the broadcast shape.
pub fn binary(
    op: BinaryOp,
    a: &[f64],
    a_shape: &[usize],
    b: &[f64],
    b_shape: &[usize],
) -> Vec<f64> {
    let out_shape = broadcast_shape(a_shape, b_shape);
    let ab = broadcast(a, a_shape, &out_shape);
    let bb = broadcast(b, b_shape, &out_shape);
    ab.iter()
        .zip(&bb)
        .map(|(&x, &y)| binary_scalar(op, x, y))
        .collect()
}

/// `(da, db)` of `out = f(a, b)` with broadcasting, each reduced to its
/// input's shape. Also returns, per gradient element, the sum of the
/// absolute values of its terms (the scale of its rounding error).
pub fn binary_backward(
    op: BinaryOp,
    a: &[f64],
    a_shape: &[usize],
    b: &[f64],
    b_shape: &[usize],
    dy: &[f64],
) -> BinaryGrads {
    let out_shape = broadcast_shape(a_shape, b_shape);
    let ab = broadcast(a, a_shape, &out_shape);
    let bb = broadcast(b, b_shape, &out_shape);
    let (ga, gb): (Vec<f64>, Vec<f64>) = (0..dy.len())
        .map(|i| binary_grad_scalar(op, ab[i], bb[i], dy[i]))
        .unzip();
    let abs = |v: &[f64]| v.iter().map(|x| x.abs()).collect::<Vec<_>>();
    BinaryGrads {
        da: reduce_to(&ga, a_shape, &out_shape),
        db: reduce_to(&gb, b_shape, &out_shape),
        da_abs: reduce_to(&abs(&ga), a_shape, &out_shape),
        db_abs: reduce_to(&abs(&gb), b_shape, &out_shape),
    }
}

/// Gradients of a binary op, with the absolute term sums that bound their
/// rounding error.
#[derive(Clone, Debug)]
pub struct BinaryGrads {
    /// Gradient of `a`.
    pub da: Vec<f64>,
    /// Gradient of `b`.
    pub db: Vec<f64>,
    /// Sum of `|term|` per element of `da`.
    pub da_abs: Vec<f64>,
    /// Sum of `|term|` per element of `db`.
    pub db_abs: Vec<f64>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn erf_matches_known_values() {
        // values from tables (15+ digits)
        assert!((erf(0.5) - 0.520_499_877_813_046_5).abs() < 1e-15);
        assert!((erf(1.0) - 0.842_700_792_949_714_9).abs() < 1e-15);
        assert!((erf(3.0) - 0.999_977_909_503_001_4).abs() < 1e-15);
        assert!((erf(-2.0) + 0.995_322_265_018_952_7).abs() < 1e-15);
        assert_eq!(erf(0.0), 0.0);
    }

    /// Central differences in f64 confirm every derivative.
    #[test]
    fn unary_derivatives_match_finite_differences() {
        let h = 1e-6;
        for op in UnaryOp::ALL {
            for i in 0..41 {
                let x = -4.0 + 0.2 * i as f64 + 0.013; // avoid relu's kink at 0
                let fd = (unary_scalar(op, x + h) - unary_scalar(op, x - h)) / (2.0 * h);
                let an = unary_derivative(op, x);
                assert!(
                    (fd - an).abs() <= 1e-7 * (1.0 + an.abs()),
                    "{op:?} at {x}: fd {fd} vs {an}"
                );
            }
        }
    }

    #[test]
    fn binary_gradients_match_finite_differences() {
        let h = 1e-6;
        for op in BinaryOp::ALL {
            for &(a, b) in &[(0.7, -1.3), (-2.1, 0.4), (1.5, 1.25), (-0.3, -0.9)] {
                let (ga, gb) = binary_grad_scalar(op, a, b, 1.0);
                let fa = (binary_scalar(op, a + h, b) - binary_scalar(op, a - h, b)) / (2.0 * h);
                let fb = (binary_scalar(op, a, b + h) - binary_scalar(op, a, b - h)) / (2.0 * h);
                assert!(
                    (fa - ga).abs() < 1e-7 * (1.0 + ga.abs()),
                    "{op:?} da at ({a},{b})"
                );
                assert!(
                    (fb - gb).abs() < 1e-7 * (1.0 + gb.abs()),
                    "{op:?} db at ({a},{b})"
                );
            }
        }
        // ties split the gradient
        assert_eq!(
            binary_grad_scalar(BinaryOp::Maximum, 1.0, 1.0, 2.0),
            (1.0, 1.0)
        );
        assert_eq!(
            binary_grad_scalar(BinaryOp::Minimum, 3.0, 1.0, 2.0),
            (0.0, 2.0)
        );
    }

    #[test]
    fn broadcast_reduce_round_trip() {
        let b = [1.0, 2.0, 3.0];
        let full = broadcast(&b, &[1, 3], &[2, 3]);
        assert_eq!(full, vec![1.0, 2.0, 3.0, 1.0, 2.0, 3.0]);
        assert_eq!(reduce_to(&full, &[1, 3], &[2, 3]), vec![2.0, 4.0, 6.0]);
        assert_eq!(reduce_to(&full, &[2, 1], &[2, 3]), vec![6.0, 6.0]);
        // the backward of a broadcast add sums dy over the broadcast axis
        let g = binary_backward(BinaryOp::Add, &[0.0; 6], &[2, 3], &b, &[1, 3], &[1.0; 6]);
        assert_eq!(g.db, vec![2.0, 2.0, 2.0]);
        assert_eq!(g.da, vec![1.0; 6]);
    }
}
