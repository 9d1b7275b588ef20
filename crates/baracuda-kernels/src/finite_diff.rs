//! Central-difference checks of the f64 references' backward passes.

/// Check `grad`, the analytic gradient of the scalar `f` at `x`, against
/// central differences with step 1e-6: each entry within
/// `tol * (1 + |fd|)`.
pub(crate) fn check_grad(what: &str, x: &[f64], grad: &[f64], tol: f64, f: impl Fn(&[f64]) -> f64) {
    let h = 1e-6;
    let mut xs = x.to_vec();
    for i in 0..x.len() {
        xs[i] = x[i] + h;
        let plus = f(&xs);
        xs[i] = x[i] - h;
        let minus = f(&xs);
        xs[i] = x[i];
        let fd = (plus - minus) / (2.0 * h);
        assert!(
            (fd - grad[i]).abs() <= tol * (1.0 + fd.abs()),
            "{what}[{i}]: analytic {}, finite difference {fd}",
            grad[i]
        );
    }
}

/// Check `dx`, the gradient of `sum(dy * f(x))` by `x`, as
/// [`check_grad`].
pub(crate) fn check_vjp(
    what: &str,
    x: &[f64],
    dy: &[f64],
    dx: &[f64],
    tol: f64,
    f: impl Fn(&[f64]) -> Vec<f64>,
) {
    check_grad(what, x, dx, tol, |xs| {
        f(xs).iter().zip(dy).map(|(a, b)| a * b).sum()
    });
}
