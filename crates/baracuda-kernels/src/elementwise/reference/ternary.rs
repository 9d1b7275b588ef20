//! f64 oracles of the ternary ops (`lerp`, `addcmul`, `addcdiv`, `clamp`,
//! `where`) and the gated activations.

use super::{broadcast, reduce_to, unary_grad, unary_scalar};
use crate::elementwise::{GatedOp, TernaryOp, UnaryOp};

/// `f(a, b, c)` for one element, as PyTorch's CUDA kernel computes it
/// (lerp's two forms; clamp's NaN order and its `c` where `b > c`).
pub fn ternary_scalar(op: TernaryOp, a: f64, b: f64, c: f64) -> f64 {
    match op {
        TernaryOp::Lerp => {
            if c.abs() < 0.5 {
                a + c * (b - a)
            } else {
                b - (b - a) * (1.0 - c)
            }
        }
        TernaryOp::Addcmul { value } => a + value * b * c,
        TernaryOp::Addcdiv { value } => a + value * (b / c),
        TernaryOp::Clamp => {
            if a.is_nan() {
                a
            } else if b.is_nan() {
                b
            } else if c.is_nan() {
                c
            } else {
                // std::min(std::max(a, b), c): the first argument unless
                // the comparison holds
                let m = if a < b { b } else { a };
                if c < m {
                    c
                } else {
                    m
                }
            }
        }
    }
}

/// `(da, db, dc)` for one element: `dy` times each partial derivative, the
/// masks of clamp as PyTorch's `clamp_backward` and
/// `clamp_backward_min_max` (a select between `dy` and 0).
pub fn ternary_grad_scalar(op: TernaryOp, a: f64, b: f64, c: f64, dy: f64) -> (f64, f64, f64) {
    let pick = |p: bool| if p { dy } else { 0.0 };
    match op {
        TernaryOp::Lerp => (dy * (1.0 - c), dy * c, dy * (b - a)),
        TernaryOp::Addcmul { value } => (dy, dy * (c * value), dy * (b * value)),
        TernaryOp::Addcdiv { value } => (dy, dy * (value / c), -dy * (value * b / (c * c))),
        TernaryOp::Clamp => (
            pick(a >= b && a <= c),
            pick(a < b && b < c),
            pick(a > c || c < b),
        ),
    }
}

/// The broadcast of same-rank shapes (each axis equal or 1).
fn broadcast_all(shapes: &[&[usize]]) -> Vec<usize> {
    let rank = shapes.first().map_or(0, |s| s.len());
    (0..rank)
        .map(|d| shapes.iter().map(|s| s[d]).find(|&e| e != 1).unwrap_or(1))
        .collect()
}

/// `out = f(a, b, c)` with broadcasting, in the broadcast shape.
pub fn ternary(op: TernaryOp, inputs: [(&[f64], &[usize]); 3]) -> Vec<f64> {
    let out_shape = broadcast_all(&inputs.map(|(_, s)| s));
    let [a, b, c] = inputs.map(|(v, s)| broadcast(v, s, &out_shape));
    (0..a.len())
        .map(|i| ternary_scalar(op, a[i], b[i], c[i]))
        .collect()
}

/// Gradients of a broadcast op with one entry per input, each reduced to
/// its input's shape, with the absolute term sums that bound their
/// rounding error.
#[derive(Clone, Debug)]
pub struct TernaryGrads {
    /// Gradient of each input, in order.
    pub grads: Vec<Vec<f64>>,
    /// Sum of `|term|` per element of each gradient.
    pub abs: Vec<Vec<f64>>,
}

/// Reduce per-element gradient terms (`terms[k]` over `out_shape`) to the
/// input shapes.
fn reduced(terms: Vec<Vec<f64>>, shapes: &[&[usize]], out_shape: &[usize]) -> TernaryGrads {
    let abs = |v: &[f64]| v.iter().map(|x| x.abs()).collect::<Vec<_>>();
    TernaryGrads {
        grads: terms
            .iter()
            .zip(shapes)
            .map(|(t, s)| reduce_to(t, s, out_shape))
            .collect(),
        abs: terms
            .iter()
            .zip(shapes)
            .map(|(t, s)| reduce_to(&abs(t), s, out_shape))
            .collect(),
    }
}

/// `(da, db, dc)` of `out = f(a, b, c)` with broadcasting, `dy` in the
/// broadcast shape.
pub fn ternary_backward(
    op: TernaryOp,
    inputs: [(&[f64], &[usize]); 3],
    dy: &[f64],
) -> TernaryGrads {
    let shapes = inputs.map(|(_, s)| s);
    let out_shape = broadcast_all(&shapes);
    let [a, b, c] = inputs.map(|(v, s)| broadcast(v, s, &out_shape));
    let mut terms: Vec<Vec<f64>> = (0..3).map(|_| Vec::with_capacity(dy.len())).collect();
    for i in 0..dy.len() {
        let (ga, gb, gc) = ternary_grad_scalar(op, a[i], b[i], c[i], dy[i]);
        terms[0].push(ga);
        terms[1].push(gb);
        terms[2].push(gc);
    }
    reduced(terms, &shapes, &out_shape)
}

/// `torch.where(cond, a, b)` with broadcasting (`cond` nonzero is true).
pub fn where_(cond: (&[f64], &[usize]), a: (&[f64], &[usize]), b: (&[f64], &[usize])) -> Vec<f64> {
    let out_shape = broadcast_all(&[cond.1, a.1, b.1]);
    let k = broadcast(cond.0, cond.1, &out_shape);
    let x = broadcast(a.0, a.1, &out_shape);
    let y = broadcast(b.0, b.1, &out_shape);
    (0..k.len())
        .map(|i| if k[i] != 0.0 { x[i] } else { y[i] })
        .collect()
}

/// `(da, db)` of `where(cond, a, b)`: `dy` where `cond` holds (does not),
/// else 0, reduced to the shapes of `a` and `b`.
pub fn where_backward(
    cond: (&[f64], &[usize]),
    a_shape: &[usize],
    b_shape: &[usize],
    dy: &[f64],
) -> TernaryGrads {
    let out_shape = broadcast_all(&[cond.1, a_shape, b_shape]);
    let k = broadcast(cond.0, cond.1, &out_shape);
    let da = (0..dy.len())
        .map(|i| if k[i] != 0.0 { dy[i] } else { 0.0 })
        .collect();
    let db = (0..dy.len())
        .map(|i| if k[i] != 0.0 { 0.0 } else { dy[i] })
        .collect();
    reduced(vec![da, db], &[a_shape, b_shape], &out_shape)
}

/// `y = act(gate) * other` for one pair of elements `a` (first half) and
/// `b` (second half).
pub fn gated_scalar(op: GatedOp, a: f64, b: f64) -> f64 {
    let (act, half) = op.activation();
    let (g, u) = if half == 0 { (a, b) } else { (b, a) };
    unary_scalar(act, g) * u
}

/// `(da, db)` for one pair: the gate's `act'(g) (dy u)` (the unary
/// backward at `dy u`, relu's a select between it and 0) and the other
/// half's `dy act(g)`.
pub fn gated_grad_scalar(op: GatedOp, a: f64, b: f64, dy: f64) -> (f64, f64) {
    let (act, half) = op.activation();
    let (g, u) = if half == 0 { (a, b) } else { (b, a) };
    // relu's backward is PyTorch's select (threshold_backward), which
    // gives 0 where g <= 0 even when dy u is not finite
    let dg = match act {
        UnaryOp::Relu if g <= 0.0 => 0.0,
        _ => unary_grad(act, g, dy * u),
    };
    let du = dy * unary_scalar(act, g);
    if half == 0 {
        (dg, du)
    } else {
        (du, dg)
    }
}

/// Row-major `[outer, 2, inner]` view of `x_shape` split along `dim`.
fn split(x_shape: &[usize], dim: usize) -> (usize, usize) {
    let outer: usize = x_shape[..dim].iter().product();
    let inner: usize = x_shape[dim] / 2 * x_shape[dim + 1..].iter().product::<usize>();
    (outer, inner)
}

/// `y` of a gated op over `x` (row-major, `x_shape`) split along `dim`,
/// row-major in `x_shape` with `dim` halved.
pub fn gated(op: GatedOp, x: &[f64], x_shape: &[usize], dim: usize) -> Vec<f64> {
    let (outer, inner) = split(x_shape, dim);
    let mut y = Vec::with_capacity(outer * inner);
    for o in 0..outer {
        for i in 0..inner {
            let a = x[o * 2 * inner + i];
            let b = x[o * 2 * inner + inner + i];
            y.push(gated_scalar(op, a, b));
        }
    }
    y
}

/// `dx` (row-major, `x_shape`) of a gated op, `dy` row-major in `y`'s
/// shape.
pub fn gated_backward(
    op: GatedOp,
    x: &[f64],
    x_shape: &[usize],
    dim: usize,
    dy: &[f64],
) -> Vec<f64> {
    let (outer, inner) = split(x_shape, dim);
    let mut dx = vec![0.0; x.len()];
    for o in 0..outer {
        for i in 0..inner {
            let (ia, ib) = (o * 2 * inner + i, o * 2 * inner + inner + i);
            let (da, db) = gated_grad_scalar(op, x[ia], x[ib], dy[o * inner + i]);
            dx[ia] = da;
            dx[ib] = db;
        }
    }
    dx
}

/// The ternary ops the tests check, by case name: [`TernaryOp::ALL`] with
/// `value`s other than 1 (the GPU rows `ternary_<name>`, the goldens).
pub fn ternary_cases() -> Vec<(&'static str, TernaryOp)> {
    vec![
        ("lerp", TernaryOp::Lerp),
        ("addcmul", TernaryOp::Addcmul { value: 0.5 }),
        ("addcdiv", TernaryOp::Addcdiv { value: -1.5 }),
        ("clamp", TernaryOp::Clamp),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Central difference of `f` at `x`, step `h`.
    fn fd(f: impl Fn(f64) -> f64, x: f64, h: f64) -> f64 {
        (f(x + h) - f(x - h)) / (2.0 * h)
    }

    fn close(what: &str, got: f64, want: f64) {
        assert!(
            (got - want).abs() <= 1e-6 * (1.0 + want.abs()),
            "{what}: {got} vs {want}"
        );
    }

    /// Points away from every kink: lerp's switch at |c| = 0.5, clamp's
    /// bounds, addcdiv's pole.
    const POINTS: [(f64, f64, f64); 5] = [
        (0.3, -1.2, 0.7),
        (-0.8, 0.4, 0.2),
        (1.5, -0.5, 1.1),
        (-2.0, -1.0, 3.0),
        (0.9, 1.3, -0.6),
    ];

    #[test]
    fn ternary_gradients_match_finite_differences() {
        for (name, op) in ternary_cases() {
            for &(a, b, c) in &POINTS {
                let (ga, gb, gc) = ternary_grad_scalar(op, a, b, c, 1.0);
                let h = 1e-6;
                let at = format!("{name} at {a},{b},{c}");
                close(
                    &format!("da {at}"),
                    ga,
                    fd(|x| ternary_scalar(op, x, b, c), a, h),
                );
                close(
                    &format!("db {at}"),
                    gb,
                    fd(|x| ternary_scalar(op, a, x, c), b, h),
                );
                close(
                    &format!("dc {at}"),
                    gc,
                    fd(|x| ternary_scalar(op, a, b, x), c, h),
                );
            }
        }
    }

    #[test]
    fn gated_gradients_match_finite_differences() {
        for op in GatedOp::ALL {
            for &(a, b) in &[(0.3, -1.2), (-0.8, 0.4), (1.5, 2.5), (-2.0, -1.0)] {
                let (ga, gb) = gated_grad_scalar(op, a, b, 1.0);
                let h = 1e-6;
                let name = op.name();
                close(
                    &format!("{name} da at {a},{b}"),
                    ga,
                    fd(|x| gated_scalar(op, x, b), a, h),
                );
                close(
                    &format!("{name} db at {a},{b}"),
                    gb,
                    fd(|x| gated_scalar(op, a, x), b, h),
                );
            }
        }
    }

    #[test]
    fn clamp_follows_pytorch_at_nan_and_crossed_bounds() {
        let nan = f64::NAN;
        let c = |a, b, c| ternary_scalar(TernaryOp::Clamp, a, b, c);
        assert!(c(nan, 0.0, 1.0).is_nan());
        assert!(c(0.5, nan, 1.0).is_nan());
        assert!(c(0.5, 0.0, nan).is_nan());
        // min > max: the result is max, and only max gets the gradient
        assert_eq!(c(0.5, 2.0, 1.0), 1.0);
        assert_eq!(c(3.0, 2.0, 1.0), 1.0);
        let g = |a, b, c| ternary_grad_scalar(TernaryOp::Clamp, a, b, c, 1.0);
        assert_eq!(g(0.5, 2.0, 1.0), (0.0, 0.0, 1.0));
        assert_eq!(g(-5.0, 2.0, 1.0), (0.0, 0.0, 1.0));
        // inside, below, above, on the bounds (x gets it on a bound)
        assert_eq!(g(0.5, 0.0, 1.0), (1.0, 0.0, 0.0));
        assert_eq!(g(-1.0, 0.0, 1.0), (0.0, 1.0, 0.0));
        assert_eq!(g(2.0, 0.0, 1.0), (0.0, 0.0, 1.0));
        assert_eq!(g(0.0, 0.0, 1.0), (1.0, 0.0, 0.0));
        assert_eq!(g(1.0, 1.0, 1.0), (1.0, 0.0, 0.0));
        // NaN x: no gradient anywhere
        assert_eq!(g(nan, 0.0, 1.0), (0.0, 0.0, 0.0));
    }

    #[test]
    fn lerp_takes_both_forms_and_ends_exactly() {
        let l = |a, b, c| ternary_scalar(TernaryOp::Lerp, a, b, c);
        assert_eq!(l(1.0, 3.0, 0.0), 1.0);
        assert_eq!(l(1.0, 3.0, 1.0), 3.0);
        assert_eq!(l(1.0, 3.0, 0.5), 2.0);
        assert_eq!(l(1.0, 3.0, 2.0), 5.0);
        assert!(l(1.0, f64::INFINITY, 0.25).is_infinite());
        assert!(l(f64::NAN, 3.0, 0.25).is_nan());
    }

    #[test]
    fn where_selects_and_routes_the_gradient() {
        let y = where_(
            (&[1.0, 0.0], &[2, 1]),
            (&[10.0, f64::NAN, 30.0], &[1, 3]),
            (&[-1.0], &[1, 1]),
        );
        assert!(y[1].is_nan());
        assert_eq!(
            [y[0], y[2], y[3], y[4], y[5]],
            [10.0, 30.0, -1.0, -1.0, -1.0]
        );
        let g = where_backward((&[1.0, 0.0], &[2, 1]), &[1, 3], &[1, 1], &[1.0; 6]);
        assert_eq!(g.grads[0], vec![1.0, 1.0, 1.0]);
        assert_eq!(g.grads[1], vec![3.0]);
    }

    #[test]
    fn gated_splits_halves_along_dim() {
        // x [2, 4] split along dim 1: a = columns 0..2, b = columns 2..4
        let x = [1.0, -2.0, 3.0, 4.0, 0.5, 0.0, -1.0, 2.0];
        let y = gated(GatedOp::Reglu, &x, &[2, 4], 1);
        assert_eq!(y, vec![3.0, 0.0, -0.5, 0.0]);
        // along dim 0: a = row 0, b = row 1
        let y = gated(GatedOp::Reglu, &x, &[2, 4], 0);
        assert_eq!(y, vec![0.5, 0.0, -3.0, 8.0]);
        let glu = gated(GatedOp::Glu, &[2.0, 0.0], &[2], 0);
        assert_eq!(glu, vec![1.0]);
        let dx = gated_backward(GatedOp::Reglu, &x, &[2, 4], 1, &[1.0; 4]);
        assert_eq!(dx, vec![3.0, 0.0, 1.0, 0.0, -1.0, 0.0, 0.5, 0.0]);
    }

    #[test]
    fn reglu_gradient_is_a_select() {
        // a <= 0: no gradient to a, whatever dy b is (PyTorch's
        // threshold_backward)
        assert_eq!(gated_grad_scalar(GatedOp::Reglu, -1.0, f64::NAN, 1.0).0, 0.0);
        assert!(gated_grad_scalar(GatedOp::Reglu, 1.0, f64::NAN, 1.0).0.is_nan());
        assert!(gated_grad_scalar(GatedOp::Swiglu, -1.0, f64::NAN, 1.0).0.is_nan());
    }

    #[test]
    fn gated_propagates_nan_and_inf() {
        assert!(gated_scalar(GatedOp::Swiglu, f64::NAN, 1.0).is_nan());
        assert!(gated_scalar(GatedOp::Reglu, f64::NAN, 1.0).is_nan());
        assert_eq!(
            gated_scalar(GatedOp::Swiglu, f64::INFINITY, 2.0),
            f64::INFINITY
        );
        assert_eq!(gated_scalar(GatedOp::Glu, 3.0, f64::INFINITY), 3.0);
        assert_eq!(gated_scalar(GatedOp::Glu, 3.0, f64::NEG_INFINITY), 0.0);
        // gelu(-inf) is -inf * 0, NaN, as PyTorch's x / 2 (1 + erf(x / sqrt 2))
        assert!(gated_scalar(GatedOp::GegluErf, f64::NEG_INFINITY, 2.0).is_nan());
    }
}
