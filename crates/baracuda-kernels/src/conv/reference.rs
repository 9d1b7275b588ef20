//! f64 oracles of the convolution and pooling family: direct loops over
//! contiguous channels-first (`[N, C, spatial...]`) data, spatial rank 1 to
//! 3. Backward passes are checked against finite differences below and the
//! forward passes against PyTorch goldens (`tests/golden_conv.rs`).

/// Geometry of a convolution (PyTorch `nn.ConvNd` semantics).
#[derive(Clone, Debug, PartialEq)]
pub struct ConvGeometry {
    /// Batch.
    pub batch: usize,
    /// Input channels.
    pub c_in: usize,
    /// Output channels.
    pub c_out: usize,
    /// Input spatial extents (rank 1 to 3).
    pub input: Vec<usize>,
    /// Filter spatial extents.
    pub filter: Vec<usize>,
    /// Zero padding before each axis.
    pub padding: Vec<usize>,
    /// Zero padding after each axis.
    pub padding_end: Vec<usize>,
    /// Stride per axis.
    pub stride: Vec<usize>,
    /// Dilation per axis.
    pub dilation: Vec<usize>,
    /// Groups.
    pub groups: usize,
    /// For the conv a transposed conv is the data gradient of
    /// ([`ConvGeometry::for_transpose`]): the transposed conv's
    /// `output_padding`, the last input elements per axis that the output
    /// extent does not count (PyTorch allows up to `max(stride, dilation) -
    /// 1`, so they may lie outside every window). Empty means zeros.
    pub output_padding: Vec<usize>,
}

impl ConvGeometry {
    /// Output spatial extents.
    pub fn output(&self) -> Vec<usize> {
        (0..self.input.len())
            .map(|a| {
                let eff = self.dilation[a] * (self.filter[a] - 1) + 1;
                let q = self.output_padding.get(a).copied().unwrap_or(0);
                (self.input[a] - q + self.padding[a] + self.padding_end[a] - eff) / self.stride[a]
                    + 1
            })
            .collect()
    }

    /// The conv whose backward-data pass is the transposed conv with these
    /// parameters (`input` is the transposed conv's input,
    /// `output_padding` its extra output extent): its input is the
    /// transposed conv's output and its channels are swapped.
    #[allow(clippy::too_many_arguments)] // PyTorch's ConvTranspose parameters
    pub fn for_transpose(
        batch: usize,
        c_in: usize,
        c_out: usize,
        input: &[usize],
        filter: &[usize],
        padding: &[usize],
        stride: &[usize],
        dilation: &[usize],
        output_padding: &[usize],
        groups: usize,
    ) -> ConvGeometry {
        let out = (0..input.len())
            .map(|a| {
                (input[a] - 1) * stride[a] + dilation[a] * (filter[a] - 1) + output_padding[a] + 1
                    - 2 * padding[a]
            })
            .collect();
        ConvGeometry {
            batch,
            c_in: c_out,
            c_out: c_in,
            input: out,
            filter: filter.to_vec(),
            padding: padding.to_vec(),
            padding_end: padding.to_vec(),
            stride: stride.to_vec(),
            dilation: dilation.to_vec(),
            groups,
            output_padding: output_padding.to_vec(),
        }
    }
}

fn pad3(v: &[usize], fill: usize) -> [usize; 3] {
    let mut o = [fill; 3];
    o[3 - v.len()..].copy_from_slice(v);
    o
}

/// Visit every (n, k, o, c, r) term of the convolution sum with the flat
/// indices of x, w and y it touches.
fn for_each_term(g: &ConvGeometry, mut f: impl FnMut(usize, usize, usize)) {
    let inp = pad3(&g.input, 1);
    let ker = pad3(&g.filter, 1);
    let out = pad3(&g.output(), 1);
    let (pd, st, dl) = (
        pad3(&g.padding, 0),
        pad3(&g.stride, 1),
        pad3(&g.dilation, 1),
    );
    let (cin_g, cout_g) = (g.c_in / g.groups, g.c_out / g.groups);
    let (in_sp, k_sp, out_sp) = (
        inp.iter().product::<usize>(),
        ker.iter().product::<usize>(),
        out.iter().product::<usize>(),
    );
    for n in 0..g.batch {
        for k in 0..g.c_out {
            let grp = k / cout_g;
            for o in 0..out_sp {
                let oc = [o / (out[1] * out[2]), (o / out[2]) % out[1], o % out[2]];
                let yi = (n * g.c_out + k) * out_sp + o;
                for c in 0..cin_g {
                    let ci = grp * cin_g + c;
                    for r in 0..k_sp {
                        let rc = [r / (ker[1] * ker[2]), (r / ker[2]) % ker[1], r % ker[2]];
                        let mut ii = [0usize; 3];
                        let mut inside = true;
                        for a in 0..3 {
                            let i = (oc[a] * st[a] + rc[a] * dl[a]) as isize - pd[a] as isize;
                            inside &= i >= 0 && (i as usize) < inp[a];
                            ii[a] = i.max(0) as usize;
                        }
                        if !inside {
                            continue;
                        }
                        let xi =
                            (n * g.c_in + ci) * in_sp + (ii[0] * inp[1] + ii[1]) * inp[2] + ii[2];
                        let wi = (k * cin_g + c) * k_sp + r;
                        f(xi, wi, yi);
                    }
                }
            }
        }
    }
}

fn n_elems(n: usize, c: usize, sp: &[usize]) -> usize {
    n * c * sp.iter().product::<usize>()
}

/// `y = conv(x, w)`; x `[N, c_in, input]`, w `[c_out, c_in/g, filter]`.
pub fn conv_fw(g: &ConvGeometry, x: &[f64], w: &[f64]) -> Vec<f64> {
    let mut y = vec![0.0; n_elems(g.batch, g.c_out, &g.output())];
    for_each_term(g, |xi, wi, yi| y[yi] += x[xi] * w[wi]);
    y
}

/// `dx` of [`conv_fw`] given `dy`.
pub fn conv_bw_data(g: &ConvGeometry, w: &[f64], dy: &[f64]) -> Vec<f64> {
    let mut dx = vec![0.0; n_elems(g.batch, g.c_in, &g.input)];
    for_each_term(g, |xi, wi, yi| dx[xi] += dy[yi] * w[wi]);
    dx
}

/// `dw` of [`conv_fw`] given `dy`.
pub fn conv_bw_filter(g: &ConvGeometry, x: &[f64], dy: &[f64]) -> Vec<f64> {
    let mut dw = vec![0.0; n_elems(g.c_out, g.c_in / g.groups, &g.filter)];
    for_each_term(g, |xi, wi, yi| dw[wi] += dy[yi] * x[xi]);
    dw
}

/// `y[n, c, s] = act(y[n, c, s] + b[c])` in place, act = ReLU if `relu`.
pub fn bias_act(y: &mut [f64], bias: &[f64], spatial: usize, relu: bool) {
    let c = bias.len();
    for (i, v) in y.iter_mut().enumerate() {
        *v += bias[(i / spatial) % c];
        if relu && *v < 0.0 {
            *v = 0.0;
        }
    }
}

/// `db[c] = sum_{n, s} dy[n, c, s]`.
pub fn bias_bw(dy: &[f64], channels: usize, spatial: usize) -> Vec<f64> {
    let mut db = vec![0.0; channels];
    for (i, v) in dy.iter().enumerate() {
        db[(i / spatial) % channels] += v;
    }
    db
}

/// The reduction of a pooling oracle.
#[derive(Copy, Clone, Debug, PartialEq)]
pub enum PoolKind {
    /// Max over the window (NaN wins; later NaN wins over earlier).
    Max,
    /// Average; see [`PoolGeometry`]'s divisor fields.
    Avg,
    /// `(sum x^p / pool * window_prod)^(1/p)` (PyTorch's LPPool form).
    Lp(f64),
    /// Adaptive average.
    AdaptiveAvg,
    /// Adaptive max.
    AdaptiveMax,
}

/// Geometry of a pooling (PyTorch semantics; window taps `o*stride -
/// padding + j*dilation`, the padded extent ending at `input +
/// padding_end`). `output` is given (it depends on ceil_mode);
/// window/stride/padding/dilation are unused by adaptive kinds.
#[derive(Clone, Debug, PartialEq)]
pub struct PoolGeometry {
    /// Batch.
    pub batch: usize,
    /// Channels.
    pub channels: usize,
    /// Input spatial extents.
    pub input: Vec<usize>,
    /// Output spatial extents.
    pub output: Vec<usize>,
    /// Window.
    pub window: Vec<usize>,
    /// Stride.
    pub stride: Vec<usize>,
    /// Padding before each axis.
    pub padding: Vec<usize>,
    /// Padding after each axis.
    pub padding_end: Vec<usize>,
    /// Step between window taps.
    pub dilation: Vec<usize>,
    /// Reduction.
    pub kind: PoolKind,
    /// Avg: include padding in the divisor.
    pub count_include_pad: bool,
    /// Avg: fixed divisor.
    pub divisor_override: Option<usize>,
}

/// The in-bounds taps of one output's window along each axis, and the
/// number of taps before the end of the padded input (the
/// `count_include_pad` divisor).
struct Window {
    taps: [Vec<usize>; 3],
    padded: [usize; 3],
}

fn window(g: &PoolGeometry, o: [usize; 3]) -> Window {
    let (inp, out) = (pad3(&g.input, 1), pad3(&g.output, 1));
    let (k, s) = (pad3(&g.window, 1), pad3(&g.stride, 1));
    let (p, pe, d) = (
        pad3(&g.padding, 0),
        pad3(&g.padding_end, 0),
        pad3(&g.dilation, 1),
    );
    let mut w = Window {
        taps: Default::default(),
        padded: [0; 3],
    };
    for a in 0..3 {
        if matches!(g.kind, PoolKind::AdaptiveAvg | PoolKind::AdaptiveMax) {
            let lo = o[a] * inp[a] / out[a];
            let hi = ((o[a] + 1) * inp[a]).div_ceil(out[a]);
            w.taps[a] = (lo..hi).collect();
            w.padded[a] = hi - lo;
        } else {
            let start = (o[a] * s[a]) as isize - p[a] as isize;
            let all = (0..k[a]).map(|j| start + (j * d[a]) as isize);
            let padded_end = (inp[a] + pe[a]) as isize;
            w.padded[a] = all.clone().filter(|&t| t < padded_end).count();
            w.taps[a] = all
                .filter(|&t| t >= 0 && t < inp[a] as isize)
                .map(|t| t as usize)
                .collect();
        }
    }
    w
}

fn divisor(g: &PoolGeometry, w: &Window) -> f64 {
    let prod = |v: [usize; 3]| v.iter().product::<usize>() as f64;
    match (g.kind, g.divisor_override) {
        (PoolKind::Avg, Some(d)) => d as f64,
        (PoolKind::Lp(_), _) => prod(w.padded),
        (PoolKind::Avg, None) if g.count_include_pad => prod(w.padded),
        _ => (0..3).map(|a| w.taps[a].len() as f64).product(),
    }
}

fn planes(g: &PoolGeometry) -> (usize, usize, [usize; 3], [usize; 3]) {
    let (inp, out) = (pad3(&g.input, 1), pad3(&g.output, 1));
    (inp.iter().product(), out.iter().product(), inp, out)
}

/// Forward pooling: `(y, indices)`; indices are the flat spatial input
/// index of each max (all zero for non-max kinds).
pub fn pool_fw(g: &PoolGeometry, x: &[f64]) -> (Vec<f64>, Vec<i64>) {
    let (in_sp, out_sp, inp, out) = planes(g);
    let nc = g.batch * g.channels;
    let k_prod = pad3(&g.window, 1).iter().product::<usize>() as f64;
    let mut y = vec![0.0; nc * out_sp];
    let mut idx = vec![0i64; nc * out_sp];
    for plane in 0..nc {
        for o in 0..out_sp {
            let oc = [o / (out[1] * out[2]), (o / out[2]) % out[1], o % out[2]];
            let w = window(g, oc);
            let mut m = f64::NEG_INFINITY;
            let first = |a: usize| w.taps[a].first().copied().unwrap_or(0);
            let mut arg = ((first(0) * inp[1] + first(1)) * inp[2] + first(2)) as i64;
            let mut sum = 0.0;
            for &d in &w.taps[0] {
                for &h in &w.taps[1] {
                    for &ww in &w.taps[2] {
                        let sp = (d * inp[1] + h) * inp[2] + ww;
                        let v = x[plane * in_sp + sp];
                        if v > m || v.is_nan() {
                            m = v;
                            arg = sp as i64;
                        }
                        sum += if let PoolKind::Lp(p) = g.kind {
                            v.powf(p)
                        } else {
                            v
                        };
                    }
                }
            }
            let yi = plane * out_sp + o;
            y[yi] = match g.kind {
                PoolKind::Max | PoolKind::AdaptiveMax => {
                    idx[yi] = arg;
                    m
                }
                PoolKind::Lp(p) => (sum / divisor(g, &w) * k_prod).powf(1.0 / p),
                _ => sum / divisor(g, &w),
            };
        }
    }
    (y, idx)
}

/// Backward pooling: `dx` from `dy` (max kinds use `idx`; Lp uses `x` and
/// `y`).
pub fn pool_bw(g: &PoolGeometry, dy: &[f64], idx: &[i64], x: &[f64], y: &[f64]) -> Vec<f64> {
    let (in_sp, out_sp, _inp, out) = planes(g);
    let nc = g.batch * g.channels;
    let k_prod = pad3(&g.window, 1).iter().product::<usize>() as f64;
    let mut dx = vec![0.0; nc * in_sp];
    let inp = pad3(&g.input, 1);
    for plane in 0..nc {
        for o in 0..out_sp {
            let yi = plane * out_sp + o;
            let oc = [o / (out[1] * out[2]), (o / out[2]) % out[1], o % out[2]];
            let w = window(g, oc);
            if matches!(g.kind, PoolKind::Max | PoolKind::AdaptiveMax) {
                dx[plane * in_sp + idx[yi] as usize] += dy[yi];
                continue;
            }
            let div = divisor(g, &w);
            for &d in &w.taps[0] {
                for &h in &w.taps[1] {
                    for &ww in &w.taps[2] {
                        let xi = plane * in_sp + (d * inp[1] + h) * inp[2] + ww;
                        dx[xi] += match g.kind {
                            PoolKind::Lp(p) => {
                                dy[yi] * (k_prod / div) * x[xi].powf(p - 1.0) * y[yi].powf(1.0 - p)
                            }
                            _ => dy[yi] / div,
                        };
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

    fn seq(n: usize, seed: u64) -> Vec<f64> {
        let mut s = seed;
        (0..n)
            .map(|_| {
                s = s
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                ((s >> 33) as f64 / (1u64 << 31) as f64) * 2.0 - 1.0
            })
            .collect()
    }

    fn geom() -> ConvGeometry {
        ConvGeometry {
            batch: 2,
            c_in: 4,
            c_out: 6,
            input: vec![5, 6],
            filter: vec![3, 2],
            padding: vec![1, 0],
            padding_end: vec![1, 0],
            stride: vec![2, 1],
            dilation: vec![1, 2],
            groups: 2,
            output_padding: Vec::new(),
        }
    }

    #[test]
    fn tiny_conv_by_hand() {
        // 1-D, one channel: x = [1 2 3], w = [1 -1], pad 1 -> [-1, -1, -1, 3]
        let g = ConvGeometry {
            batch: 1,
            c_in: 1,
            c_out: 1,
            input: vec![3],
            filter: vec![2],
            padding: vec![1],
            padding_end: vec![1],
            stride: vec![1],
            dilation: vec![1],
            groups: 1,
            output_padding: Vec::new(),
        };
        assert_eq!(
            conv_fw(&g, &[1.0, 2.0, 3.0], &[1.0, -1.0]),
            vec![-1.0, -1.0, -1.0, 3.0]
        );
    }

    #[test]
    fn conv_backward_matches_finite_differences() {
        // L = sum(dy * conv(x, w)) is bilinear, so central differences are
        // exact up to rounding.
        let g = geom();
        let x = seq(n_elems(2, 4, &g.input), 1);
        let w = seq(6 * 2 * 6, 2);
        let dy = seq(n_elems(2, 6, &g.output()), 3);
        let loss = |x: &[f64], w: &[f64]| {
            conv_fw(&g, x, w)
                .iter()
                .zip(&dy)
                .map(|(a, b)| a * b)
                .sum::<f64>()
        };
        let dx = conv_bw_data(&g, &w, &dy);
        let dw = conv_bw_filter(&g, &x, &dy);
        let h = 1e-3;
        for i in (0..x.len()).step_by(7) {
            let (mut xp, mut xm) = (x.clone(), x.clone());
            xp[i] += h;
            xm[i] -= h;
            let fd = (loss(&xp, &w) - loss(&xm, &w)) / (2.0 * h);
            assert!((fd - dx[i]).abs() < 1e-9, "dx[{i}]: {fd} vs {}", dx[i]);
        }
        for i in 0..w.len() {
            let (mut wp, mut wm) = (w.clone(), w.clone());
            wp[i] += h;
            wm[i] -= h;
            let fd = (loss(&x, &wp) - loss(&x, &wm)) / (2.0 * h);
            assert!((fd - dw[i]).abs() < 1e-9, "dw[{i}]: {fd} vs {}", dw[i]);
        }
    }

    #[test]
    fn transpose_geometry() {
        let g = ConvGeometry::for_transpose(
            1,
            4,
            2,
            &[5, 5],
            &[3, 3],
            &[1, 1],
            &[2, 2],
            &[1, 1],
            &[1, 0],
            1,
        );
        assert_eq!(g.input, vec![10, 9]);
        assert_eq!(g.output(), vec![5, 5]);
        assert_eq!((g.c_in, g.c_out), (2, 4));
    }

    fn pool(kind: PoolKind) -> PoolGeometry {
        PoolGeometry {
            batch: 1,
            channels: 2,
            input: vec![5, 7],
            output: vec![3, 4],
            window: vec![3, 2],
            stride: vec![2, 2],
            padding: vec![1, 1],
            padding_end: vec![1, 1],
            dilation: vec![1, 1],
            kind,
            count_include_pad: false,
            divisor_override: None,
        }
    }

    #[test]
    fn pool_backward_matches_finite_differences() {
        let x: Vec<f64> = seq(70, 5).iter().map(|v| v.abs() + 0.5).collect();
        let dy = seq(24, 6);
        // The last two: dilation 2 with padding 1 before and 0 after, which
        // gives [5, 7] -> [2, 3] with the 3x2 window at stride 2.
        for (kind, dilated) in [
            (PoolKind::Avg, false),
            (PoolKind::Lp(2.5), false),
            (PoolKind::AdaptiveAvg, false),
            (PoolKind::Max, false),
            (PoolKind::Avg, true),
            (PoolKind::Max, true),
        ] {
            let mut g = pool(kind);
            if let PoolKind::Lp(_) = kind {
                g.padding = vec![0, 0];
                g.padding_end = vec![0, 0];
                g.output = vec![2, 3];
            }
            if dilated {
                g.dilation = vec![2, 2];
                g.padding_end = vec![0, 0];
                g.output = vec![2, 3];
            }
            let n_out = 2 * g.output.iter().product::<usize>();
            let dy = &dy[..n_out];
            let (y, idx) = pool_fw(&g, &x);
            let dx = pool_bw(&g, dy, &idx, &x, &y);
            let loss = |x: &[f64]| {
                pool_fw(&g, x)
                    .0
                    .iter()
                    .zip(dy)
                    .map(|(a, b)| a * b)
                    .sum::<f64>()
            };
            let h = 1e-6;
            for i in 0..x.len() {
                let (mut xp, mut xm) = (x.clone(), x.clone());
                xp[i] += h;
                xm[i] -= h;
                let fd = (loss(&xp) - loss(&xm)) / (2.0 * h);
                assert!(
                    (fd - dx[i]).abs() < 1e-6,
                    "{kind:?} dx[{i}]: {fd} vs {}",
                    dx[i]
                );
            }
        }
    }

    #[test]
    fn avg_divisors() {
        // 1-D in 4, k 3, s 1, p 1: first window covers [-1, 2)
        let mut g = PoolGeometry {
            batch: 1,
            channels: 1,
            input: vec![4],
            output: vec![4],
            window: vec![3],
            stride: vec![1],
            padding: vec![1],
            padding_end: vec![1],
            dilation: vec![1],
            kind: PoolKind::Avg,
            count_include_pad: true,
            divisor_override: None,
        };
        let x = [3.0, 6.0, 9.0, 12.0];
        assert_eq!(pool_fw(&g, &x).0[0], 3.0);
        g.count_include_pad = false;
        assert_eq!(pool_fw(&g, &x).0[0], 4.5);
        g.divisor_override = Some(2);
        assert_eq!(pool_fw(&g, &x).0[0], 4.5);
        assert_eq!(pool_fw(&g, &x).0[1], 9.0);
        // k 2, dilation 2, p 1 before and 0 after: 3 outputs; window o has
        // taps o - 1 and o + 1, so output 0 reads only x[1] and counts the
        // padded tap -1.
        g.divisor_override = None;
        g.count_include_pad = true;
        (g.window, g.dilation, g.padding_end, g.output) = (vec![2], vec![2], vec![0], vec![3]);
        let y = pool_fw(&g, &x).0;
        assert_eq!(y, vec![6.0 / 2.0, (3.0 + 9.0) / 2.0, (6.0 + 12.0) / 2.0]);
        g.count_include_pad = false;
        assert_eq!(pool_fw(&g, &x).0[0], 6.0);
    }
}
