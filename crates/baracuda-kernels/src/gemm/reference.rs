//! f64 oracles of the GEMM family.

use baracuda_kernels_types::{Activation, MatrixOrder};

/// Element `(r, c)` of a stored matrix.
pub fn at(x: &[f64], ld: usize, order: MatrixOrder, r: usize, c: usize) -> f64 {
    match order {
        MatrixOrder::RowMajor => x[r * ld + c],
        MatrixOrder::ColMajor => x[c * ld + r],
    }
}

/// The activation.
pub fn act(a: Activation, z: f64) -> f64 {
    let k0 = (2.0 / std::f64::consts::PI).sqrt();
    match a {
        Activation::Identity => z,
        Activation::Relu => z.max(0.0),
        Activation::GeluErf => 0.5 * z * (1.0 + erf(z / std::f64::consts::SQRT_2)),
        Activation::GeluTanh => 0.5 * z * (1.0 + (k0 * (z + 0.044715 * z * z * z)).tanh()),
    }
}

/// Its derivative.
pub fn act_grad(a: Activation, z: f64) -> f64 {
    let k0 = (2.0 / std::f64::consts::PI).sqrt();
    match a {
        Activation::Identity => 1.0,
        Activation::Relu => f64::from(u8::from(z > 0.0)),
        Activation::GeluErf => {
            0.5 * (1.0 + erf(z / std::f64::consts::SQRT_2))
                + z * (-0.5 * z * z).exp() / (2.0 * std::f64::consts::PI).sqrt()
        }
        Activation::GeluTanh => {
            let t = (k0 * (z + 0.044715 * z * z * z)).tanh();
            0.5 * (1.0 + t) + 0.5 * z * (1.0 - t * t) * k0 * (1.0 + 3.0 * 0.044715 * z * z)
        }
    }
}

pub use crate::elementwise::reference::erf;

/// A stored operand: data, leading dimension, order.
pub type Stored<'a> = (&'a [f64], usize, MatrixOrder);

/// `Z = alpha * A B + beta * C + bias`, `D = act(Z)`; both `m x n`
/// row-major packed. `A` is `m x k`, `B` `k x n`, bias length `n`.
#[allow(clippy::too_many_arguments)] // mirrors the GEMM's operands
pub fn gemm(
    m: usize,
    n: usize,
    k: usize,
    a: Stored<'_>,
    b: Stored<'_>,
    c: Option<Stored<'_>>,
    bias: Option<&[f64]>,
    alpha: f64,
    beta: f64,
    activation: Activation,
) -> (Vec<f64>, Vec<f64>) {
    let mut z = vec![0.0; m * n];
    for i in 0..m {
        for j in 0..n {
            let mut s = 0.0;
            for p in 0..k {
                s += at(a.0, a.1, a.2, i, p) * at(b.0, b.1, b.2, p, j);
            }
            let mut v = alpha * s;
            if let Some(c) = c {
                v += beta * at(c.0, c.1, c.2, i, j);
            }
            if let Some(bias) = bias {
                v += bias[j];
            }
            z[i * n + j] = v;
        }
    }
    let d = z.iter().map(|&v| act(activation, v)).collect();
    (d, z)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_gemm_by_hand() {
        // [1 2; 3 4] * [5 6; 7 8] = [19 22; 43 50]
        let a = [1.0, 2.0, 3.0, 4.0];
        let bt = [5.0, 7.0, 6.0, 8.0]; // B column-major
        let (d, _) = gemm(
            2,
            2,
            2,
            (&a, 2, MatrixOrder::RowMajor),
            (&bt, 2, MatrixOrder::ColMajor),
            None,
            Some(&[1.0, -1.0]),
            1.0,
            0.0,
            Activation::Identity,
        );
        assert_eq!(d, vec![20.0, 21.0, 44.0, 49.0]);
    }

    #[test]
    fn activation_gradients_match_finite_differences() {
        for a in [Activation::Relu, Activation::GeluErf, Activation::GeluTanh] {
            for &z in &[-2.3, -0.7, 0.4, 1.9] {
                let h = 1e-6;
                let fd = (act(a, z + h) - act(a, z - h)) / (2.0 * h);
                assert!((fd - act_grad(a, z)).abs() < 1e-5, "{a:?} at {z}");
            }
        }
    }
}
