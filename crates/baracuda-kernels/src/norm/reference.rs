//! LayerNorm and RMSNorm over rows of `h` elements (row-major `x` of
//! `rows * h`), forward and backward, in f64.

/// One normalization problem.
#[derive(Clone, Debug)]
pub struct Norm {
    /// LayerNorm (true) or RMSNorm.
    pub layer: bool,
    /// Rows.
    pub rows: usize,
    /// Elements per row (the normalized shape's product).
    pub h: usize,
    /// Added to the variance (mean square).
    pub eps: f64,
}

/// The forward's outputs: `y` (`rows * h`), the per-row mean (0 for
/// RMSNorm) and rstd.
#[derive(Clone, Debug, Default)]
pub struct NormOut {
    /// The normalized output.
    pub y: Vec<f64>,
    /// Per-row mean.
    pub mean: Vec<f64>,
    /// Per-row `1 / sqrt(var + eps)` (mean square for RMSNorm).
    pub rstd: Vec<f64>,
}

/// The gradients: `dx` (`rows * h`), `dweight` and `dbias` (`h`).
#[derive(Clone, Debug, Default)]
pub struct NormGrads {
    /// Gradient of x.
    pub dx: Vec<f64>,
    /// Gradient of the weight.
    pub dweight: Vec<f64>,
    /// Gradient of the bias.
    pub dbias: Vec<f64>,
}

impl Norm {
    /// Mean and rstd of row `x`.
    fn stats(&self, x: &[f64]) -> (f64, f64) {
        let n = self.h as f64;
        let mean = if self.layer {
            x.iter().sum::<f64>() / n
        } else {
            0.0
        };
        let ms = x.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / n;
        (mean, 1.0 / (ms + self.eps).sqrt())
    }

    /// `y = xhat * weight + bias` with the statistics.
    pub fn forward(&self, x: &[f64], weight: Option<&[f64]>, bias: Option<&[f64]>) -> NormOut {
        let mut out = NormOut::default();
        for r in 0..self.rows {
            let row = &x[r * self.h..(r + 1) * self.h];
            let (mean, rstd) = self.stats(row);
            out.mean.push(mean);
            out.rstd.push(rstd);
            for (j, &v) in row.iter().enumerate() {
                let w = weight.map_or(1.0, |w| w[j]);
                let b = bias.map_or(0.0, |b| b[j]);
                out.y.push((v - mean) * rstd * w + b);
            }
        }
        out
    }

    /// The gradients of `sum(y * dy)` with respect to x, the weight and the
    /// bias.
    pub fn backward(&self, x: &[f64], weight: Option<&[f64]>, dy: &[f64]) -> NormGrads {
        let h = self.h;
        let n = h as f64;
        let mut g = NormGrads {
            dx: Vec::with_capacity(x.len()),
            dweight: vec![0.0; h],
            dbias: vec![0.0; h],
        };
        for r in 0..self.rows {
            let row = &x[r * h..(r + 1) * h];
            let d = &dy[r * h..(r + 1) * h];
            let (mean, rstd) = self.stats(row);
            let xhat: Vec<f64> = row.iter().map(|v| (v - mean) * rstd).collect();
            let gw: Vec<f64> = (0..h)
                .map(|j| d[j] * weight.map_or(1.0, |w| w[j]))
                .collect();
            let a = (0..h).map(|j| gw[j] * xhat[j]).sum::<f64>() / n;
            let c = if self.layer {
                gw.iter().sum::<f64>() / n
            } else {
                0.0
            };
            for j in 0..h {
                g.dx.push(rstd * (gw[j] - c - xhat[j] * a));
                g.dweight[j] += d[j] * xhat[j];
                g.dbias[j] += d[j];
            }
        }
        g
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn input(n: usize, seed: u64) -> Vec<f64> {
        (0..n)
            .map(|i| (((i as u64 * 7919 + seed * 104_729) % 1000) as f64 / 500.0 - 1.0) * 1.5)
            .collect()
    }

    /// `sum(y * dy)` of the forward.
    fn loss(p: &Norm, x: &[f64], w: &[f64], b: &[f64], dy: &[f64]) -> f64 {
        let y = p
            .forward(x, Some(w), if p.layer { Some(b) } else { None })
            .y;
        y.iter().zip(dy).map(|(a, b)| a * b).sum()
    }

    fn check_fd(layer: bool) {
        let p = Norm {
            layer,
            rows: 3,
            h: 7,
            eps: 1e-3,
        };
        let x = input(21, 1);
        let w = input(7, 2);
        let b = input(7, 3);
        let dy = input(21, 4);
        let g = p.backward(&x, Some(&w), &dy);
        let e = 1e-6;
        let fd = |which: usize, i: usize| {
            let mut v = [x.clone(), w.clone(), b.clone()];
            v[which][i] += e;
            let hi = loss(&p, &v[0], &v[1], &v[2], &dy);
            v[which][i] -= 2.0 * e;
            let lo = loss(&p, &v[0], &v[1], &v[2], &dy);
            (hi - lo) / (2.0 * e)
        };
        for (which, grad) in [(0, &g.dx), (1, &g.dweight), (2, &g.dbias)] {
            if which == 2 && !layer {
                continue;
            }
            for (i, &an) in grad.iter().enumerate() {
                let num = fd(which, i);
                assert!(
                    (an - num).abs() < 1e-6 * (1.0 + num.abs()),
                    "layer {layer} grad {which}[{i}]: analytic {an}, numeric {num}"
                );
            }
        }
    }

    #[test]
    fn gradients_match_finite_differences() {
        check_fd(true);
        check_fd(false);
    }

    #[test]
    fn rows_are_normalized() {
        let p = Norm {
            layer: true,
            rows: 2,
            h: 4,
            eps: 0.0,
        };
        let out = p.forward(&[1.0, 2.0, 3.0, 4.0, -1.0, -1.0, 1.0, 1.0], None, None);
        assert_eq!(out.mean, vec![2.5, 0.0]);
        assert_eq!(&out.y[4..], &[-1.0, -1.0, 1.0, 1.0]);
        let y0: f64 = out.y[..4].iter().map(|v| v * v).sum::<f64>() / 4.0;
        assert!((y0 - 1.0).abs() < 1e-12);
        let rms = Norm {
            layer: false,
            rows: 1,
            h: 2,
            ..p
        };
        let out = rms.forward(&[3.0, 4.0], Some(&[2.0, 1.0]), None);
        let r = (12.5f64).sqrt();
        assert_eq!(out.y, vec![6.0 / r, 4.0 / r]);
    }
}
