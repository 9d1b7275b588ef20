//! f64 oracles of the reduce family: every [`ReduceOp`] over any subset of
//! dims of a row-major tensor, var_mean and std_mean, the trace of a
//! matrix, and their gradients, as PyTorch defines them; and the i64
//! oracles of the integer inputs ([`reduce_i64`], [`trace_i64`]), whose
//! sums and products wrap around as PyTorch's int64 arithmetic does.

/// The scans' oracles.
pub mod scan;

use crate::{ArgReduceOp, LogicalReduceOp, ReduceOp};

/// A reduction problem: the op, the input's shape, which dims are reduced,
/// the var/std correction and the norm order.
#[derive(Clone, Debug)]
pub struct Reduction {
    /// The op.
    pub op: ReduceOp,
    /// Shape of `x` (row-major).
    pub shape: Vec<usize>,
    /// `reduced[d]`: dim `d` is reduced.
    pub reduced: Vec<bool>,
    /// Var/std: divisor `n - correction`.
    pub correction: f64,
    /// Norm order.
    pub p: f64,
}

impl Reduction {
    /// `op` over the dims `reduced` marks, with PyTorch's defaults
    /// (correction 1, p 2).
    pub fn new(op: ReduceOp, shape: &[usize], reduced: &[bool]) -> Self {
        Reduction {
            op,
            shape: shape.to_vec(),
            reduced: reduced.to_vec(),
            correction: 1.0,
            p: 2.0,
        }
    }

    /// Output index (row-major over the kept dims) of each input element.
    fn output_of(&self) -> (usize, Vec<usize>) {
        let n: usize = self.shape.iter().product();
        let n_out: usize = (0..self.shape.len())
            .filter(|&d| !self.reduced[d])
            .map(|d| self.shape[d])
            .product();
        let map = (0..n)
            .map(|lin| {
                let (mut rem, mut o, mut scale) = (lin, 0, 1);
                for d in (0..self.shape.len()).rev() {
                    let c = rem % self.shape[d];
                    rem /= self.shape[d];
                    if !self.reduced[d] {
                        o += c * scale;
                        scale *= self.shape[d];
                    }
                }
                o
            })
            .collect();
        (n_out, map)
    }

    /// The elements each output folds, in input order.
    fn groups<V: Copy>(&self, x: &[V]) -> (Vec<Vec<V>>, Vec<usize>) {
        let (n_out, map) = self.output_of();
        let mut g = vec![Vec::new(); n_out];
        for (i, &o) in map.iter().enumerate() {
            g[o].push(x[i]);
        }
        (g, map)
    }

    /// Elements each output folds.
    pub fn n_red(&self) -> usize {
        (0..self.shape.len())
            .filter(|&d| self.reduced[d])
            .map(|d| self.shape[d])
            .product()
    }
}

fn sum(v: &[f64]) -> f64 {
    v.iter().sum()
}

/// NaN if any is NaN, else the max (min with `less`).
fn pick(v: &[f64], init: f64, better: fn(f64, f64) -> bool) -> f64 {
    v.iter()
        .fold(init, |a, &x| if x.is_nan() || better(x, a) { x } else { a })
}

fn mean(v: &[f64]) -> f64 {
    sum(v) / v.len() as f64
}

/// NaN over no element, whatever the correction (PyTorch's).
fn var(v: &[f64], correction: f64) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    let m = mean(v);
    let m2: f64 = v.iter().map(|x| (x - m) * (x - m)).sum();
    m2 / (v.len() as f64 - correction).max(0.0)
}

fn logsumexp(v: &[f64]) -> f64 {
    let m = pick(v, f64::NEG_INFINITY, |a, b| a > b);
    if m.is_nan() || m.is_infinite() {
        return m;
    }
    m + v.iter().map(|x| (x - m).exp()).sum::<f64>().ln()
}

fn norm(v: &[f64], p: f64) -> f64 {
    let abs: Vec<f64> = v.iter().map(|x| x.abs()).collect();
    if p == 0.0 {
        v.iter().filter(|&&x| x != 0.0).count() as f64
    } else if p == f64::INFINITY {
        pick(&abs, 0.0, |a, b| a > b)
    } else if p == f64::NEG_INFINITY {
        pick(&abs, f64::INFINITY, |a, b| a < b)
    } else if p == 1.0 {
        sum(&abs)
    } else if p == 2.0 {
        abs.iter().map(|a| a * a).sum::<f64>().sqrt()
    } else {
        abs.iter().map(|a| a.powf(p)).sum::<f64>().powf(1.0 / p)
    }
}

fn fold(r: &Reduction, v: &[f64]) -> f64 {
    let non_nan: Vec<f64> = v.iter().copied().filter(|x| !x.is_nan()).collect();
    match r.op {
        ReduceOp::Sum => sum(v),
        ReduceOp::Mean => mean(v),
        ReduceOp::NanSum => sum(&non_nan),
        ReduceOp::NanMean => mean(&non_nan),
        ReduceOp::Prod => v.iter().product(),
        ReduceOp::Amax => pick(v, f64::NEG_INFINITY, |a, b| a > b),
        ReduceOp::Amin => pick(v, f64::INFINITY, |a, b| a < b),
        ReduceOp::Var => var(v, r.correction),
        ReduceOp::Std => var(v, r.correction).sqrt(),
        ReduceOp::LogSumExp => logsumexp(v),
        ReduceOp::Norm => norm(v, r.p),
    }
}

/// `y`, row-major over the kept dims.
pub fn reduce(r: &Reduction, x: &[f64]) -> Vec<f64> {
    r.groups(x).0.iter().map(|v| fold(r, v)).collect()
}

/// `y` of an integer `x` (i32 or i64 values, widened), row-major over the
/// kept dims, as PyTorch computes it: sum and nansum (integers hold no
/// NaN) add and prod multiplies in i64 with two's complement wrap-around
/// (0 and 1 over nothing); amax and amin are exact.
///
/// # Panics
/// For an op that does not take integers, or amax and amin over nothing.
pub fn reduce_i64(r: &Reduction, x: &[i64]) -> Vec<i64> {
    r.groups(x)
        .0
        .iter()
        .map(|v| match r.op {
            ReduceOp::Sum | ReduceOp::NanSum => v.iter().fold(0i64, |a, &b| a.wrapping_add(b)),
            ReduceOp::Prod => v.iter().fold(1i64, |a, &b| a.wrapping_mul(b)),
            ReduceOp::Amax => *v.iter().max().expect("amax over no element"),
            ReduceOp::Amin => *v.iter().min().expect("amin over no element"),
            op => panic!("{} takes no integers", op.name()),
        })
        .collect()
}

fn sgn(x: f64) -> f64 {
    if x > 0.0 {
        1.0
    } else if x < 0.0 {
        -1.0
    } else {
        0.0
    }
}

/// `dx` (row-major, x's shape) from `x`, the forward output `y` and `dy`
/// (row-major over the kept dims), as PyTorch's autograd formulas.
pub fn reduce_backward(r: &Reduction, x: &[f64], y: &[f64], dy: &[f64]) -> Vec<f64> {
    let (groups, map) = r.groups(x);
    let n = r.n_red() as f64;
    // Per output: the statistic the gradient needs.
    let stat: Vec<(f64, f64)> = groups
        .iter()
        .zip(y)
        .map(|(v, &yo)| match r.op {
            ReduceOp::NanMean => (v.iter().filter(|x| !x.is_nan()).count() as f64, 0.0),
            ReduceOp::Prod => (
                v.iter().filter(|&&x| x == 0.0).count() as f64,
                v.iter().filter(|&&x| x != 0.0).product(),
            ),
            ReduceOp::Amax | ReduceOp::Amin => (v.iter().filter(|&&x| x == yo).count() as f64, 0.0),
            ReduceOp::Norm if r.p.is_infinite() => {
                (v.iter().filter(|&&x| x.abs() == yo).count() as f64, 0.0)
            }
            ReduceOp::Var | ReduceOp::Std => (mean(v), 0.0),
            _ => (0.0, 0.0),
        })
        .collect();
    x.iter()
        .zip(&map)
        .map(|(&x, &o)| {
            let (g, yo, (s0, s1)) = (dy[o], y[o], stat[o]);
            match r.op {
                ReduceOp::Sum => g,
                ReduceOp::Mean => g / n,
                ReduceOp::NanSum => {
                    if x.is_nan() {
                        0.0
                    } else {
                        g
                    }
                }
                ReduceOp::NanMean => {
                    if x.is_nan() {
                        0.0
                    } else {
                        g / s0
                    }
                }
                ReduceOp::Prod => match s0 as usize {
                    0 => g * (s1 / x),
                    1 if x == 0.0 => g * s1,
                    _ => 0.0,
                },
                ReduceOp::Amax | ReduceOp::Amin => (g / s0) * f64::from(u8::from(x == yo)),
                ReduceOp::Var => (2.0 / (n - r.correction)) * g * (x - s0),
                ReduceOp::Std => {
                    let gv = if yo == 0.0 { 0.0 } else { g / (2.0 * yo) };
                    (2.0 / (n - r.correction)) * gv * (x - s0)
                }
                ReduceOp::LogSumExp => g * (x - yo).exp(),
                ReduceOp::Norm => norm_grad(r.p, x, g, yo, s0),
            }
        })
        .collect()
}

/// `torch.var_mean` (`r.op` [`ReduceOp::Var`]) or `torch.std_mean`
/// ([`ReduceOp::Std`]): `(var or std, mean)`, each row-major over the kept
/// dims.
pub fn var_mean(r: &Reduction, x: &[f64]) -> (Vec<f64>, Vec<f64>) {
    (reduce(r, x), reduce(&mean_of(r), x))
}

/// The mean over `r`'s dims.
fn mean_of(r: &Reduction) -> Reduction {
    Reduction {
        op: ReduceOp::Mean,
        ..r.clone()
    }
}

/// The gradient of [`var_mean`] from the forward's `y` (var or std) and
/// the gradients of either output (`None`: the loss does not depend on
/// it), as PyTorch's `var_mean_backward` and `std_mean_backward`: var's
/// (std's) gradient plus the mean's, `dmean / n`; 0 when neither is given.
pub fn var_mean_backward(
    r: &Reduction,
    x: &[f64],
    y: &[f64],
    dy: Option<&[f64]>,
    dmean: Option<&[f64]>,
) -> Vec<f64> {
    let mut dx = match dy {
        Some(dy) => reduce_backward(r, x, y, dy),
        None => vec![0.0; x.len()],
    };
    if let Some(dm) = dmean {
        let m = mean_of(r);
        for (d, g) in dx.iter_mut().zip(reduce_backward(&m, x, &reduce(&m, x), dm)) {
            *d += g;
        }
    }
    dx
}

/// `torch.trace` of a row-major `[rows, cols]` matrix: the sum of its
/// diagonal (0 when empty).
pub fn trace(rows: usize, cols: usize, x: &[f64]) -> f64 {
    (0..rows.min(cols)).map(|i| x[i * cols + i]).sum()
}

/// [`trace`] of an integer matrix: the diagonal summed in i64 with two's
/// complement wrap-around, as PyTorch's int64 trace.
pub fn trace_i64(rows: usize, cols: usize, x: &[i64]) -> i64 {
    (0..rows.min(cols)).fold(0i64, |a, i| a.wrapping_add(x[i * cols + i]))
}

/// The gradient of [`trace`]: `dy` on the diagonal, 0 elsewhere
/// (row-major, `[rows, cols]`).
pub fn trace_backward(rows: usize, cols: usize, dy: f64) -> Vec<f64> {
    (0..rows * cols)
        .map(|i| if i / cols == i % cols { dy } else { 0.0 })
        .collect()
}

/// PyTorch's `linalg_vector_norm_backward` for one element.
fn norm_grad(p: f64, x: f64, g: f64, y: f64, ties: f64) -> f64 {
    if p == 0.0 {
        0.0
    } else if p == 1.0 {
        sgn(x) * g
    } else if p == 2.0 {
        if y == 0.0 {
            0.0
        } else {
            g * (x / y)
        }
    } else if p.is_infinite() {
        sgn(x) * ((g / ties) * f64::from(u8::from(x.abs() == y)))
    } else if p < 1.0 {
        let sc = if x == 0.0 {
            0.0
        } else {
            sgn(x) * x.abs().powf(p - 1.0)
        };
        sc * g * y.powf(1.0 - p)
    } else {
        let sc = if p < 2.0 {
            sgn(x) * x.abs().powf(p - 1.0)
        } else {
            x * x.abs().powf(p - 2.0)
        };
        let sv = if y == 0.0 { 0.0 } else { g / y.powf(p - 1.0) };
        sc * sv
    }
}

/// Max (min) with the first index over the dims `reduced` marks of a
/// row-major `x` of `shape`: `(values, indices)`, row-major over the kept
/// dims, the index row-major over the reduced dims. A NaN is the extreme
/// of both ops (the first NaN wins), as PyTorch's `max(x, dim)`,
/// `argmax`, `min` and `argmin`. Exact for integer inputs that f64 holds
/// exactly (every i32; i64 values read back from f64).
pub fn arg_reduce(
    op: ArgReduceOp,
    shape: &[usize],
    reduced: &[bool],
    x: &[f64],
) -> (Vec<f64>, Vec<f64>) {
    let r = Reduction::new(ReduceOp::Amax, shape, reduced);
    let better = |a: f64, b: f64| match op {
        ArgReduceOp::Max => a > b,
        ArgReduceOp::Min => a < b,
    };
    r.groups(x)
        .0
        .iter()
        .map(|g| {
            let mut best = 0;
            for (i, &v) in g.iter().enumerate() {
                let b = g[best];
                if !b.is_nan() && (v.is_nan() || better(v, b)) {
                    best = i;
                }
            }
            (g[best], best as f64)
        })
        .unzip()
}

/// The gradient of [`arg_reduce`]'s values: `dv[o]` at each element whose
/// position is `indices[o]`, 0 elsewhere (row-major, x's shape).
pub fn arg_reduce_backward(
    shape: &[usize],
    reduced: &[bool],
    indices: &[f64],
    dv: &[f64],
) -> Vec<f64> {
    let r = Reduction::new(ReduceOp::Amax, shape, reduced);
    let (_, map) = r.output_of();
    let mut seen = vec![0usize; indices.len()];
    map.iter()
        .map(|&o| {
            let pos = seen[o];
            seen[o] += 1;
            if pos as f64 == indices[o] {
                dv[o]
            } else {
                0.0
            }
        })
        .collect()
}

/// [`LogicalReduceOp`] over the dims `reduced` of a row-major `x` of
/// `shape`, as f64: all and any 1.0 or 0.0, count_nonzero the count. An
/// element is nonzero when `x != 0.0` (NaN is, -0.0 is not); over no
/// element all is 1, any and count 0.
pub fn logical_reduce(op: LogicalReduceOp, shape: &[usize], reduced: &[bool], x: &[f64]) -> Vec<f64> {
    let r = Reduction::new(ReduceOp::Sum, shape, reduced);
    r.groups(x)
        .0
        .iter()
        .map(|g| {
            let nonzero = g.iter().filter(|&&v| v != 0.0).count();
            match op {
                LogicalReduceOp::All => f64::from(u8::from(nonzero == g.len())),
                LogicalReduceOp::Any => f64::from(u8::from(nonzero > 0)),
                LogicalReduceOp::CountNonzero => nonzero as f64,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::finite_diff::check_vjp;

    #[test]
    fn logical_reductions_count_nan_and_not_negative_zero() {
        // [[0, -0, NaN], [1, 2, NaN]]
        let x = [0.0, -0.0, f64::NAN, 1.0, 2.0, f64::NAN];
        let red = |op, reduced: &[bool]| logical_reduce(op, &[2, 3], reduced, &x);
        assert_eq!(red(LogicalReduceOp::CountNonzero, &[false, true]), [1.0, 3.0]);
        assert_eq!(red(LogicalReduceOp::CountNonzero, &[true, false]), [1.0, 1.0, 2.0]);
        assert_eq!(red(LogicalReduceOp::All, &[true, false]), [0.0, 0.0, 1.0]);
        assert_eq!(red(LogicalReduceOp::Any, &[false, true]), [1.0, 1.0]);
        assert_eq!(red(LogicalReduceOp::All, &[true, true]), [0.0]);
        assert_eq!(red(LogicalReduceOp::CountNonzero, &[true, true]), [4.0]);
        // over no element
        let empty = |op| logical_reduce(op, &[2, 0], &[false, true], &[]);
        assert_eq!(empty(LogicalReduceOp::All), [1.0, 1.0]);
        assert_eq!(empty(LogicalReduceOp::Any), [0.0, 0.0]);
        assert_eq!(empty(LogicalReduceOp::CountNonzero), [0.0, 0.0]);
    }

    fn problem(op: ReduceOp, p: f64) -> Reduction {
        Reduction {
            p,
            ..Reduction::new(op, &[3, 4, 5], &[true, false, true])
        }
    }

    /// Distinct values of both signs away from 0, no ties.
    fn input() -> Vec<f64> {
        (0..60)
            .map(|i| {
                let v = ((i * 37 % 61) as f64 - 30.0) / 17.0;
                if v.abs() < 0.1 {
                    v + 0.3
                } else {
                    v
                }
            })
            .collect()
    }

    /// The backward against central differences of `sum(dy * y(x))`.
    fn check_fd(op: ReduceOp, p: f64) {
        let r = problem(op, p);
        let x = input();
        let y = reduce(&r, &x);
        let dy: Vec<f64> = (0..y.len()).map(|i| 0.5 + 0.1 * i as f64).collect();
        let dx = reduce_backward(&r, &x, &y, &dy);
        check_vjp(&format!("{op:?} p={p} dx"), &x, &dy, &dx, 1e-5, |xs| {
            reduce(&r, xs)
        });
    }

    #[test]
    fn gradients_match_finite_differences() {
        for op in ReduceOp::ALL {
            if op != ReduceOp::Norm {
                check_fd(op, 2.0);
            }
        }
        for p in [
            1.0,
            2.0,
            3.0,
            1.5,
            0.5,
            -1.0,
            f64::INFINITY,
            f64::NEG_INFINITY,
        ] {
            check_fd(ReduceOp::Norm, p);
        }
    }

    #[test]
    fn var_mean_gradients_match_finite_differences() {
        let x = input();
        for op in [ReduceOp::Var, ReduceOp::Std] {
            for correction in [1.0, 0.0, 2.5] {
                let r = Reduction {
                    correction,
                    ..problem(op, 2.0)
                };
                let (y, _) = var_mean(&r, &x);
                let dy: Vec<f64> = (0..y.len()).map(|i| 0.5 + 0.1 * i as f64).collect();
                let dm: Vec<f64> = (0..y.len()).map(|i| 0.3 - 0.2 * i as f64).collect();
                let what = format!("{op:?}_mean correction {correction}");
                // Both gradients, as one vector-Jacobian product of (y, mean).
                let both: Vec<f64> = dy.iter().chain(&dm).copied().collect();
                let dx = var_mean_backward(&r, &x, &y, Some(&dy), Some(&dm));
                check_vjp(&format!("{what} dx"), &x, &both, &dx, 1e-5, |xs| {
                    let (a, b) = var_mean(&r, xs);
                    a.into_iter().chain(b).collect()
                });
                // Each alone.
                let dx = var_mean_backward(&r, &x, &y, None, Some(&dm));
                check_vjp(&format!("{what} dx of the mean"), &x, &dm, &dx, 1e-5, |xs| {
                    var_mean(&r, xs).1
                });
                let dx = var_mean_backward(&r, &x, &y, Some(&dy), None);
                check_vjp(&format!("{what} dx of y"), &x, &dy, &dx, 1e-5, |xs| {
                    var_mean(&r, xs).0
                });
            }
        }
        let r = problem(ReduceOp::Var, 2.0);
        let (y, _) = var_mean(&r, &x);
        assert!(var_mean_backward(&r, &x, &y, None, None)
            .iter()
            .all(|&d| d == 0.0));
    }

    #[test]
    fn var_mean_matches_the_separate_reductions_and_is_nan_when_empty() {
        let x = input();
        let r = problem(ReduceOp::Std, 2.0);
        let (y, mean) = var_mean(&r, &x);
        assert_eq!(y, reduce(&r, &x));
        assert_eq!(mean, reduce(&mean_of(&r), &x));
        for correction in [1.0, 0.0, -1.0] {
            let e = Reduction {
                correction,
                ..Reduction::new(ReduceOp::Var, &[2, 0], &[false, true])
            };
            let (v, m) = var_mean(&e, &[]);
            assert!(v.iter().chain(&m).all(|a| a.is_nan()), "{correction}");
        }
    }

    #[test]
    fn trace_gradient_matches_finite_differences() {
        for (rows, cols) in [(4, 4), (3, 5), (6, 2), (1, 1)] {
            let x: Vec<f64> = input()[..rows * cols].to_vec();
            let dx = trace_backward(rows, cols, 0.7);
            check_vjp(&format!("trace [{rows}, {cols}]"), &x, &[0.7], &dx, 1e-6, |xs| {
                vec![trace(rows, cols, xs)]
            });
        }
        assert_eq!(trace(2, 3, &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]), 6.0);
        assert_eq!(trace(0, 3, &[]), 0.0);
        assert_eq!(trace_backward(2, 3, 2.0), [2.0, 0.0, 0.0, 0.0, 2.0, 0.0]);
    }

    #[test]
    fn prod_gradient_with_zeros_is_the_product_of_the_others() {
        let r = Reduction::new(ReduceOp::Prod, &[4], &[true]);
        let one_zero = [2.0, 0.0, 3.0, -1.0];
        let y = reduce(&r, &one_zero);
        assert_eq!(y, vec![0.0]);
        assert_eq!(
            reduce_backward(&r, &one_zero, &y, &[1.0]),
            vec![0.0, -6.0, 0.0, 0.0]
        );
        let two = [2.0, 0.0, 0.0, -1.0];
        assert_eq!(reduce_backward(&r, &two, &[0.0], &[1.0]), vec![0.0; 4]);
    }

    #[test]
    fn ties_share_the_gradient_and_empty_sets_follow_pytorch() {
        let r = Reduction::new(ReduceOp::Amax, &[4], &[true]);
        let x = [1.0, 3.0, 3.0, 2.0];
        assert_eq!(
            reduce_backward(&r, &x, &[3.0], &[1.0]),
            vec![0.0, 0.5, 0.5, 0.0]
        );
        let pair = Reduction::new(ReduceOp::Amax, &[2], &[true]);
        assert!(reduce(&pair, &[1.0, f64::NAN])[0].is_nan());
        let empty = |op| Reduction::new(op, &[2, 0], &[false, true]);
        assert_eq!(reduce(&empty(ReduceOp::Sum), &[]), vec![0.0, 0.0]);
        assert_eq!(reduce(&empty(ReduceOp::Prod), &[]), vec![1.0, 1.0]);
        assert!(reduce(&empty(ReduceOp::Mean), &[])[0].is_nan());
        assert_eq!(
            reduce(&empty(ReduceOp::LogSumExp), &[])[0],
            f64::NEG_INFINITY
        );
        assert_eq!(reduce(&empty(ReduceOp::NanSum), &[]), vec![0.0, 0.0]);
    }
    #[test]
    fn arg_gradients_match_finite_differences() {
        let (shape, x) = ([3, 4, 5], input());
        for op in ArgReduceOp::ALL {
            for reduced in [
                [false, true, false],
                [true, true, true],
                [false, false, true],
            ] {
                let (v, idx) = arg_reduce(op, &shape, &reduced, &x);
                let dv: Vec<f64> = (0..v.len()).map(|i| 0.5 + 0.1 * i as f64).collect();
                let dx = arg_reduce_backward(&shape, &reduced, &idx, &dv);
                check_vjp(
                    &format!("{op:?} {reduced:?} dx"),
                    &x,
                    &dv,
                    &dx,
                    1e-6,
                    |xs| arg_reduce(op, &shape, &reduced, xs).0,
                );
            }
        }
    }

    #[test]
    fn integer_sums_and_products_wrap_around() {
        let r = |op| Reduction::new(op, &[2, 3], &[false, true]);
        let x = [i64::MAX, 1, 0, 3, -7, 5];
        assert_eq!(reduce_i64(&r(ReduceOp::Sum), &x), [i64::MIN, 1]);
        assert_eq!(reduce_i64(&r(ReduceOp::NanSum), &x), [i64::MIN, 1]);
        assert_eq!(reduce_i64(&r(ReduceOp::Prod), &x), [0, -105]);
        assert_eq!(reduce_i64(&r(ReduceOp::Amax), &x), [i64::MAX, 5]);
        assert_eq!(reduce_i64(&r(ReduceOp::Amin), &x), [0, -7]);
        // 3^41 > 2^64: the product keeps its low 64 bits
        let threes = vec![3i64; 41];
        let p = reduce_i64(&Reduction::new(ReduceOp::Prod, &[41], &[true]), &threes)[0];
        assert_eq!(p, (0..41).fold(1i64, |a, _| a.wrapping_mul(3)));
        assert_eq!(p as u64, 3u64.wrapping_pow(41));
        let empty = |op| reduce_i64(&Reduction::new(op, &[2, 0], &[false, true]), &[]);
        assert_eq!(empty(ReduceOp::Sum), [0, 0]);
        assert_eq!(empty(ReduceOp::Prod), [1, 1]);
        assert_eq!(trace_i64(2, 2, &[i64::MAX, 0, 0, 2]), i64::MIN + 1);
    }

    #[test]
    fn arg_ties_take_the_first_index_and_nan_wins() {
        let one = |op, x: &[f64]| arg_reduce(op, &[x.len()], &[true], x);
        assert_eq!(
            one(ArgReduceOp::Max, &[1.0, 3.0, 3.0, 2.0]),
            (vec![3.0], vec![1.0])
        );
        assert_eq!(
            one(ArgReduceOp::Min, &[2.0, 1.0, 3.0, 1.0]),
            (vec![1.0], vec![1.0])
        );
        for op in ArgReduceOp::ALL {
            let (v, i) = one(op, &[1.0, f64::NAN, 5.0, f64::NAN]);
            assert!(v[0].is_nan());
            assert_eq!(i, vec![1.0]);
        }
        // over dim 0 of [2, 3]: positions along dim 0
        let (v, i) = arg_reduce(
            ArgReduceOp::Max,
            &[2, 3],
            &[true, false],
            &[1.0, 5.0, 2.0, 4.0, 5.0, 0.0],
        );
        assert_eq!((v, i), (vec![4.0, 5.0, 2.0], vec![1.0, 0.0, 0.0]));
        let dx = arg_reduce_backward(&[2, 3], &[true, false], &[1.0, 0.0, 0.0], &[7.0, 8.0, 9.0]);
        assert_eq!(dx, vec![0.0, 8.0, 9.0, 7.0, 0.0, 0.0]);
    }
}
