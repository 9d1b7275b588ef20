//! LayerNorm and RMSNorm over rows of `h` elements (row-major `x` of
//! `rows * h`) and their residual forms (`y = norm(x + r)`), GroupNorm,
//! BatchNorm and LocalResponseNorm over channels-first `[N, C, S]`,
//! forward and backward, in f64.

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

    /// The residual form's forward: `s = x + r` and the forward on `s`
    /// (exact: a caller in a narrow dtype rounds `s` itself and calls
    /// [`Norm::forward`] on it).
    pub fn forward_residual(
        &self,
        x: &[f64],
        r: &[f64],
        weight: Option<&[f64]>,
        bias: Option<&[f64]>,
    ) -> (Vec<f64>, NormOut) {
        let s: Vec<f64> = x.iter().zip(r).map(|(a, b)| a + b).collect();
        let out = self.forward(&s, weight, bias);
        (s, out)
    }

    /// The residual form's backward on `s`: the gradients of `sum(y * dy) +
    /// sum(s * ds)`; `dx` is the gradient of both x and r.
    pub fn backward_residual(
        &self,
        s: &[f64],
        weight: Option<&[f64]>,
        dy: &[f64],
        ds: Option<&[f64]>,
    ) -> NormGrads {
        let mut g = self.backward(s, weight, dy);
        if let Some(ds) = ds {
            g.dx.iter_mut().zip(ds).for_each(|(d, e)| *d += e);
        }
        g
    }
}

/// One GroupNorm problem on channels-first `x` of `[batch, channels,
/// spatial]` (InstanceNorm: `groups == channels`).
#[derive(Clone, Debug)]
pub struct GroupNorm {
    /// Batch `N`.
    pub batch: usize,
    /// Channels `C`.
    pub channels: usize,
    /// Spatial positions (the product of the spatial dims).
    pub spatial: usize,
    /// Groups; divides `channels`.
    pub groups: usize,
    /// Added to the variance.
    pub eps: f64,
}

impl GroupNorm {
    /// Elements of a group.
    fn m(&self) -> usize {
        self.channels / self.groups * self.spatial
    }
    /// The elements of group `r = n * groups + g`, contiguous in
    /// channels-first order.
    fn range(&self, r: usize) -> core::ops::Range<usize> {
        r * self.m()..(r + 1) * self.m()
    }
    /// The channel of element `i` of `x`.
    fn channel(&self, i: usize) -> usize {
        i / self.spatial % self.channels
    }

    /// `y = xhat * weight[c] + bias[c]`, with the mean and rstd of every
    /// group (`[batch, groups]`, row-major).
    pub fn forward(&self, x: &[f64], weight: Option<&[f64]>, bias: Option<&[f64]>) -> NormOut {
        let mut out = NormOut {
            y: vec![0.0; x.len()],
            ..NormOut::default()
        };
        let m = self.m() as f64;
        for r in 0..self.batch * self.groups {
            let g = &x[self.range(r)];
            let mean = g.iter().sum::<f64>() / m;
            let var = g.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / m;
            let rstd = 1.0 / (var + self.eps).sqrt();
            out.mean.push(mean);
            out.rstd.push(rstd);
            for i in self.range(r) {
                let c = self.channel(i);
                let w = weight.map_or(1.0, |w| w[c]);
                let b = bias.map_or(0.0, |b| b[c]);
                out.y[i] = (x[i] - mean) * rstd * w + b;
            }
        }
        out
    }

    /// The gradients of `sum(y * dy)` with respect to x, the weight and the
    /// bias (`[channels]`).
    pub fn backward(&self, x: &[f64], weight: Option<&[f64]>, dy: &[f64]) -> NormGrads {
        let fw = self.forward(x, None, None);
        let m = self.m() as f64;
        let mut g = NormGrads {
            dx: vec![0.0; x.len()],
            dweight: vec![0.0; self.channels],
            dbias: vec![0.0; self.channels],
        };
        for r in 0..self.batch * self.groups {
            let rstd = fw.rstd[r];
            let gw = |i: usize| dy[i] * weight.map_or(1.0, |w| w[self.channel(i)]);
            let a = self.range(r).map(|i| gw(i) * fw.y[i]).sum::<f64>() / m;
            let k = self.range(r).map(gw).sum::<f64>() / m;
            for i in self.range(r) {
                let xhat = fw.y[i];
                g.dx[i] = rstd * (gw(i) - k - xhat * a);
                g.dweight[self.channel(i)] += dy[i] * xhat;
                g.dbias[self.channel(i)] += dy[i];
            }
        }
        g
    }
}

/// One BatchNorm problem on channels-first `x` of `[batch, channels,
/// spatial]`: statistics per channel over the batch and the spatial
/// positions.
#[derive(Clone, Debug)]
pub struct BatchNorm {
    /// Batch `N`.
    pub batch: usize,
    /// Channels `C`.
    pub channels: usize,
    /// Spatial positions (the product of the spatial dims).
    pub spatial: usize,
    /// Added to the variance.
    pub eps: f64,
    /// Training (batch statistics) or eval (the running statistics).
    pub training: bool,
    /// Weight of the batch statistics in the running-statistics update.
    pub momentum: f64,
}

/// BatchNorm's forward outputs.
#[derive(Clone, Debug, Default)]
pub struct BatchNormOut {
    /// The normalized output, channels-first.
    pub y: Vec<f64>,
    /// Per channel: the mean used (the batch's in training, the running
    /// mean in eval).
    pub mean: Vec<f64>,
    /// Per channel: the `1 / sqrt(var + eps)` used.
    pub rstd: Vec<f64>,
    /// The running mean after the update (training with running
    /// statistics; else as given, or empty).
    pub running_mean: Vec<f64>,
    /// The running variance after the update, likewise.
    pub running_var: Vec<f64>,
}

impl BatchNorm {
    /// Elements per channel: `batch * spatial`.
    fn m(&self) -> usize {
        self.batch * self.spatial
    }
    /// The offsets of channel `c`'s elements, in (n, s) order.
    fn elems(&self, c: usize) -> impl Iterator<Item = usize> + '_ {
        (0..self.batch).flat_map(move |n| {
            let base = (n * self.channels + c) * self.spatial;
            base..base + self.spatial
        })
    }
    /// Per channel: the mean and rstd used, and (training) the biased
    /// variance.
    fn stats(&self, x: &[f64], running: Option<(&[f64], &[f64])>) -> Vec<(f64, f64, f64)> {
        let m = self.m() as f64;
        (0..self.channels)
            .map(|c| {
                if self.training {
                    let mean = self.elems(c).map(|i| x[i]).sum::<f64>() / m;
                    let var = self.elems(c).map(|i| (x[i] - mean).powi(2)).sum::<f64>() / m;
                    (mean, 1.0 / (var + self.eps).sqrt(), var)
                } else {
                    let (rm, rv) = running.expect("eval takes the running statistics");
                    (rm[c], 1.0 / (rv[c] + self.eps).sqrt(), rv[c])
                }
            })
            .collect()
    }

    /// `y = (x - mean) rstd weight[c] + bias[c]`; in training, with
    /// `running` given, the updated running statistics `(1 - momentum)
    /// running + momentum batch`, the variance unbiased (`m / (m - 1)`).
    pub fn forward(
        &self,
        x: &[f64],
        weight: Option<&[f64]>,
        bias: Option<&[f64]>,
        running: Option<(&[f64], &[f64])>,
    ) -> BatchNormOut {
        let mut out = BatchNormOut {
            y: vec![0.0; x.len()],
            ..BatchNormOut::default()
        };
        if let Some((rm, rv)) = running {
            out.running_mean = rm.to_vec();
            out.running_var = rv.to_vec();
        }
        if self.m() == 0 {
            return out;
        }
        let m = self.m() as f64;
        for (c, (mean, rstd, var)) in self.stats(x, running).into_iter().enumerate() {
            out.mean.push(mean);
            out.rstd.push(rstd);
            let w = weight.map_or(1.0, |w| w[c]);
            let b = bias.map_or(0.0, |b| b[c]);
            for i in self.elems(c) {
                out.y[i] = (x[i] - mean) * rstd * w + b;
            }
            if self.training && running.is_some() {
                let k = self.momentum;
                out.running_mean[c] = (1.0 - k) * out.running_mean[c] + k * mean;
                let unbiased = var * m / (m - 1.0);
                out.running_var[c] = (1.0 - k) * out.running_var[c] + k * unbiased;
            }
        }
        out
    }

    /// Per element, the magnitude of the terms `dx` sums: `|w rstd| (|dy| +
    /// |sum(dy)| / m + |xhat sum(dy xhat)| / m)` in training, `|w rstd dy|`
    /// in eval. A channel of two elements has `xhat = ±sqrt(var / (var +
    /// eps))` and a `dx` smaller than these terms by `eps / (var + eps)`:
    /// what is left when they cancel, off by a rounding of the terms.
    pub fn dx_terms(
        &self,
        x: &[f64],
        weight: Option<&[f64]>,
        dy: &[f64],
        running: Option<(&[f64], &[f64])>,
    ) -> Vec<f64> {
        let mut t = vec![0.0; x.len()];
        if self.m() == 0 {
            return t;
        }
        let m = self.m() as f64;
        for (c, (mean, rstd, _)) in self.stats(x, running).into_iter().enumerate() {
            let w = weight.map_or(1.0, |w| w[c]);
            let sum_dy = self.elems(c).map(|i| dy[i]).sum::<f64>();
            let sum_dy_xhat = self.elems(c).map(|i| dy[i] * (x[i] - mean) * rstd).sum::<f64>();
            for i in self.elems(c) {
                let xhat = (x[i] - mean) * rstd;
                t[i] = (w * rstd).abs()
                    * if self.training {
                        dy[i].abs() + (sum_dy / m).abs() + (xhat * sum_dy_xhat / m).abs()
                    } else {
                        dy[i].abs()
                    };
            }
        }
        t
    }

    /// The gradients of `sum(y * dy)` with respect to x, the weight and the
    /// bias (`[channels]`): through the batch statistics in training, with
    /// the running statistics constant in eval.
    pub fn backward(
        &self,
        x: &[f64],
        weight: Option<&[f64]>,
        dy: &[f64],
        running: Option<(&[f64], &[f64])>,
    ) -> NormGrads {
        let mut g = NormGrads {
            dx: vec![0.0; x.len()],
            dweight: vec![0.0; self.channels],
            dbias: vec![0.0; self.channels],
        };
        if self.m() == 0 {
            return g;
        }
        let m = self.m() as f64;
        for (c, (mean, rstd, _)) in self.stats(x, running).into_iter().enumerate() {
            let w = weight.map_or(1.0, |w| w[c]);
            let sum_dy = self.elems(c).map(|i| dy[i]).sum::<f64>();
            let sum_dy_xhat = self.elems(c).map(|i| dy[i] * (x[i] - mean) * rstd).sum::<f64>();
            g.dweight[c] = sum_dy_xhat;
            g.dbias[c] = sum_dy;
            for i in self.elems(c) {
                g.dx[i] = if self.training {
                    let xhat = (x[i] - mean) * rstd;
                    w * rstd * (dy[i] - sum_dy / m - xhat * sum_dy_xhat / m)
                } else {
                    dy[i] * w * rstd
                };
            }
        }
        g
    }
}

/// One LocalResponseNorm problem (`torch.nn.functional.local_response_norm`)
/// on channels-first `x` of `[batch, channels, spatial]`: `y = x / (k +
/// alpha / size * sum x^2)^beta`, the sum over the channels `c - size / 2
/// ..= c + (size - 1) / 2` that exist (PyTorch's zero padding, the average
/// always over `size`).
#[derive(Clone, Debug)]
pub struct LocalResponseNorm {
    /// Batch `N`.
    pub batch: usize,
    /// Channels `C`.
    pub channels: usize,
    /// Spatial positions.
    pub spatial: usize,
    /// Channels in the window.
    pub size: usize,
    /// Scale of the average.
    pub alpha: f64,
    /// Exponent.
    pub beta: f64,
    /// Additive constant.
    pub k: f64,
}

impl LocalResponseNorm {
    /// The window of channel `c`.
    fn window(&self, c: usize) -> core::ops::Range<usize> {
        c.saturating_sub(self.size / 2)..(c + (self.size - 1) / 2 + 1).min(self.channels)
    }
    /// `k + alpha / size * sum x^2` at every element.
    fn denominators(&self, x: &[f64]) -> Vec<f64> {
        let (c_n, s_n) = (self.channels, self.spatial);
        let mut d = vec![0.0; x.len()];
        for n in 0..self.batch {
            for c in 0..c_n {
                for s in 0..s_n {
                    let sq: f64 = self
                        .window(c)
                        .map(|j| x[(n * c_n + j) * s_n + s].powi(2))
                        .sum();
                    d[(n * c_n + c) * s_n + s] = self.k + self.alpha / self.size as f64 * sq;
                }
            }
        }
        d
    }

    /// `y = x / d^beta`.
    pub fn forward(&self, x: &[f64]) -> Vec<f64> {
        let d = self.denominators(x);
        x.iter().zip(&d).map(|(v, d)| v / d.powf(self.beta)).collect()
    }

    /// The gradient of `sum(y * dy)` with respect to x: `dy d^-beta - 2
    /// alpha beta / size * x[c'] * sum_c dy[c] x[c] d[c]^(-beta - 1)` over
    /// the channels `c` whose window holds `c'`.
    pub fn backward(&self, x: &[f64], dy: &[f64]) -> Vec<f64> {
        let d = self.denominators(x);
        let (c_n, s_n) = (self.channels, self.spatial);
        let mut dx = vec![0.0; x.len()];
        let coef = 2.0 * self.alpha * self.beta / self.size as f64;
        for n in 0..self.batch {
            for c in 0..c_n {
                for s in 0..s_n {
                    let i = (n * c_n + c) * s_n + s;
                    dx[i] += dy[i] * d[i].powf(-self.beta);
                    // y[c] depends on x[j] for every j in c's window
                    let g = dy[i] * x[i] * d[i].powf(-self.beta - 1.0) * coef;
                    for j in self.window(c) {
                        let o = (n * c_n + j) * s_n + s;
                        dx[o] -= g * x[o];
                    }
                }
            }
        }
        dx
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
    fn group_norm_gradients_match_finite_differences() {
        for (groups, spatial) in [(1, 3), (2, 3), (4, 2), (4, 1)] {
            let p = GroupNorm {
                batch: 2,
                channels: 4,
                spatial,
                groups,
                eps: 1e-3,
            };
            let len = 2 * 4 * spatial;
            let (x, w, b, dy) = (input(len, 1), input(4, 2), input(4, 3), input(len, 4));
            let loss = |v: &[Vec<f64>; 3]| -> f64 {
                let y = p.forward(&v[0], Some(&v[1]), Some(&v[2])).y;
                y.iter().zip(&dy).map(|(a, b)| a * b).sum()
            };
            let g = p.backward(&x, Some(&w), &dy);
            let e = 1e-6;
            for (which, grad) in [(0, &g.dx), (1, &g.dweight), (2, &g.dbias)] {
                for (i, &an) in grad.iter().enumerate() {
                    let mut v = [x.clone(), w.clone(), b.clone()];
                    v[which][i] += e;
                    let hi = loss(&v);
                    v[which][i] -= 2.0 * e;
                    let num = (hi - loss(&v)) / (2.0 * e);
                    assert!(
                        (an - num).abs() < 1e-6 * (1.0 + num.abs()),
                        "groups {groups} spatial {spatial} grad {which}[{i}]: {an} vs {num}"
                    );
                }
            }
        }
    }

    #[test]
    fn instance_norm_normalizes_each_channel() {
        let p = GroupNorm {
            batch: 1,
            channels: 2,
            spatial: 2,
            groups: 2,
            eps: 0.0,
        };
        let out = p.forward(&[1.0, 3.0, 10.0, 20.0], None, Some(&[0.5, -0.5]));
        assert_eq!(out.mean, vec![2.0, 15.0]);
        assert_eq!(out.y, vec![-0.5, 1.5, -1.5, 0.5]);
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
    #[test]
    fn batch_norm_gradients_match_finite_differences() {
        for (training, batch, spatial) in [(true, 2, 3), (true, 3, 1), (true, 1, 2), (false, 2, 3)] {
            let p = BatchNorm {
                batch,
                channels: 3,
                spatial,
                eps: 1e-3,
                training,
                momentum: 0.1,
            };
            let len = batch * 3 * spatial;
            let (x, w, b, dy) = (input(len, 1), input(3, 2), input(3, 3), input(len, 4));
            let rm = input(3, 5);
            let rv: Vec<f64> = input(3, 6).iter().map(|v| v.abs() + 0.5).collect();
            let running = Some((&rm[..], &rv[..]));
            let loss = |v: &[Vec<f64>; 3]| -> f64 {
                let y = p.forward(&v[0], Some(&v[1]), Some(&v[2]), running).y;
                y.iter().zip(&dy).map(|(a, b)| a * b).sum()
            };
            let g = p.backward(&x, Some(&w), &dy, running);
            let e = 1e-6;
            for (which, grad) in [(0, &g.dx), (1, &g.dweight), (2, &g.dbias)] {
                for (i, &an) in grad.iter().enumerate() {
                    let mut v = [x.clone(), w.clone(), b.clone()];
                    v[which][i] += e;
                    let hi = loss(&v);
                    v[which][i] -= 2.0 * e;
                    let num = (hi - loss(&v)) / (2.0 * e);
                    assert!(
                        (an - num).abs() < 1e-6 * (1.0 + num.abs()),
                        "training {training} [{batch}, 3, {spatial}] grad {which}[{i}]: {an} vs {num}"
                    );
                }
            }
        }
    }

    #[test]
    fn batch_norm_updates_running_statistics_with_the_unbiased_variance() {
        let p = BatchNorm {
            batch: 2,
            channels: 1,
            spatial: 2,
            eps: 0.0,
            training: true,
            momentum: 0.5,
        };
        // mean 2.5, biased var 1.25, unbiased 5/3
        let out = p.forward(&[1.0, 2.0, 3.0, 4.0], None, None, Some((&[1.0], &[1.0])));
        assert_eq!(out.mean, vec![2.5]);
        assert_eq!(out.running_mean, vec![1.75]);
        assert!((out.running_var[0] - (0.5 + 0.5 * 5.0 / 3.0)).abs() < 1e-15);
        assert!((out.rstd[0] - 1.0 / 1.25f64.sqrt()).abs() < 1e-15);
        let eval = BatchNorm {
            training: false,
            ..p
        };
        let out = eval.forward(&[1.0, 2.0, 3.0, 4.0], Some(&[1.0]), Some(&[1.0]), Some((&[1.0], &[4.0])));
        assert_eq!(out.y, vec![1.0, 1.5, 2.0, 2.5]);
        assert_eq!(out.running_var, vec![4.0]);
    }
    #[test]
    fn local_response_norm_gradients_match_finite_differences() {
        for (size, channels) in [(3, 5), (2, 4), (5, 3), (1, 2), (4, 6)] {
            let p = LocalResponseNorm {
                batch: 2,
                channels,
                spatial: 3,
                size,
                alpha: 0.3,
                beta: 0.75,
                k: 1.5,
            };
            let len = 2 * channels * 3;
            let (x, dy) = (input(len, 1), input(len, 4));
            let loss = |x: &[f64]| -> f64 { p.forward(x).iter().zip(&dy).map(|(a, b)| a * b).sum() };
            let dx = p.backward(&x, &dy);
            let e = 1e-6;
            for (i, &an) in dx.iter().enumerate() {
                let mut v = x.clone();
                v[i] += e;
                let hi = loss(&v);
                v[i] -= 2.0 * e;
                let num = (hi - loss(&v)) / (2.0 * e);
                assert!(
                    (an - num).abs() < 1e-6 * (1.0 + num.abs()),
                    "size {size} channels {channels} dx[{i}]: {an} vs {num}"
                );
            }
        }
    }

    #[test]
    fn local_response_norm_windows_follow_pytorch_padding() {
        let p = LocalResponseNorm {
            batch: 1,
            channels: 4,
            spatial: 1,
            size: 2,
            alpha: 2.0,
            beta: 1.0,
            k: 1.0,
        };
        // size 2: the window of c is c - 1 ..= c
        assert_eq!(p.window(0), 0..1);
        assert_eq!(p.window(3), 2..4);
        let y = p.forward(&[1.0, 1.0, 2.0, 0.0]);
        // d = 1 + (2 / 2) * sum: [2, 3, 6, 5]
        assert_eq!(y, vec![0.5, 1.0 / 3.0, 2.0 / 6.0, 0.0]);
    }
}
