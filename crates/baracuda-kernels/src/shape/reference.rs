//! f64 references of the shape family: flip, roll, tril/triu, pad, cat and
//! stack, forward and backward, over row-major slices.
//!
//! Each forward is written as the map from an output index to the input
//! index it reads (or none: a pad constant); each backward is the adjoint
//! of that map, accumulated by scattering `dy` into `dx` (where the GPU
//! gathers). Parameters are the validated ones ([`crate::ShapeOp`]'s
//! checks): dims in range, shifts and pads as given.

use crate::shape::PadMode;

/// Row-major strides of `shape`.
fn strides(shape: &[usize]) -> Vec<usize> {
    let mut s = vec![1; shape.len()];
    for d in (0..shape.len().saturating_sub(1)).rev() {
        s[d] = s[d + 1] * shape[d + 1];
    }
    s
}

/// Row-major coordinates of linear index `i` in `shape`.
fn coords(shape: &[usize], mut i: usize) -> Vec<usize> {
    let mut c = vec![0; shape.len()];
    for d in (0..shape.len()).rev() {
        c[d] = i % shape[d];
        i /= shape[d];
    }
    c
}

/// Linear index of coordinates `c` in `shape`.
fn linear(shape: &[usize], c: &[usize]) -> usize {
    c.iter().zip(strides(shape)).map(|(&a, s)| a * s).sum()
}

/// `y[o] = x[map(o)]` (0 for none) over an output of `out_shape`.
fn gather(out_shape: &[usize], x: &[f64], map: impl Fn(&[usize]) -> Option<usize>) -> Vec<f64> {
    let n: usize = out_shape.iter().product();
    (0..n)
        .map(|o| map(&coords(out_shape, o)).map_or(0.0, |i| x[i]))
        .collect()
}

/// `dx[map(o)] += dy[o]`: the adjoint of [`gather`], into `n_x` elements.
fn scatter(
    out_shape: &[usize],
    dy: &[f64],
    n_x: usize,
    map: impl Fn(&[usize]) -> Option<usize>,
) -> Vec<f64> {
    let mut dx = vec![0.0; n_x];
    for (o, &g) in dy.iter().enumerate() {
        if let Some(i) = map(&coords(out_shape, o)) {
            dx[i] += g;
        }
    }
    dx
}

/// `torch.flip(x, dims)`: `dims` distinct and in range.
pub fn flip(shape: &[usize], x: &[f64], dims: &[usize]) -> Vec<f64> {
    gather(shape, x, |c| {
        let s: Vec<usize> = (0..shape.len())
            .map(|d| {
                if dims.contains(&d) {
                    shape[d] - 1 - c[d]
                } else {
                    c[d]
                }
            })
            .collect();
        Some(linear(shape, &s))
    })
}

/// `torch.roll(x, shifts, dims)` with `dims` given (same length as
/// `shifts`, repeats allowed: their shifts add up).
pub fn roll(shape: &[usize], x: &[f64], shifts: &[i64], dims: &[usize]) -> Vec<f64> {
    let mut total = vec![0i64; shape.len()];
    for (&s, &d) in shifts.iter().zip(dims) {
        total[d] += s;
    }
    gather(shape, x, |c| {
        let s: Vec<usize> = (0..shape.len())
            .map(|d| {
                let n = shape[d] as i64;
                (c[d] as i64 - total[d]).rem_euclid(n) as usize
            })
            .collect();
        Some(linear(shape, &s))
    })
}

/// `torch.roll(x, shift)` without dims: the flattened tensor rolled, then
/// put back in `x`'s shape.
pub fn roll_flat(x: &[f64], shift: i64) -> Vec<f64> {
    let n = x.len() as i64;
    (0..n)
        .map(|o| x[(o - shift).rem_euclid(n.max(1)) as usize])
        .collect()
}

/// `torch.tril(x, diagonal)` (`lower`) or `torch.triu` over the last two
/// dims of `shape` (rank >= 2), every batch alike.
pub fn triangle(shape: &[usize], x: &[f64], diagonal: i64, lower: bool) -> Vec<f64> {
    let r = shape.len();
    gather(shape, x, |c| {
        let (i, j) = (c[r - 2] as i64, c[r - 1] as i64);
        let keep = if lower {
            j - i <= diagonal
        } else {
            j - i >= diagonal
        };
        keep.then(|| linear(shape, c))
    })
}

/// The shape `F.pad` gives `shape` with pad list `pad` (PyTorch's order:
/// last dim's before and after, then the dim before it's, ...).
pub fn pad_shape(shape: &[usize], pad: &[i64]) -> Vec<usize> {
    let r = shape.len();
    let mut out = shape.to_vec();
    for k in 0..pad.len() / 2 {
        let d = r - 1 - k;
        out[d] = (shape[d] as i64 + pad[2 * k] + pad[2 * k + 1]) as usize;
    }
    out
}

/// Source index in `x` of every output coordinate of `F.pad`, or none
/// (the constant).
fn pad_source(shape: &[usize], pad: &[i64], mode: PadMode) -> impl Fn(&[usize]) -> Option<usize> {
    let r = shape.len();
    let shape = shape.to_vec();
    let pad = pad.to_vec();
    move |c: &[usize]| {
        let mut s = Vec::with_capacity(r);
        for d in 0..r {
            let k = r - 1 - d;
            let (before, after) = if 2 * k < pad.len() {
                (pad[2 * k], pad[2 * k + 1])
            } else {
                (0, 0)
            };
            let n = shape[d] as i64;
            let i = c[d] as i64 - before;
            let src = match mode {
                PadMode::Constant => {
                    if i < 0 || i >= n {
                        return None;
                    }
                    i
                }
                PadMode::Reflect => {
                    let a = i.abs();
                    if a >= n {
                        2 * (n - 1) - a
                    } else {
                        a
                    }
                }
                PadMode::Replicate => i.clamp(0, n - 1),
                // negative pads crop first; the positive ones wrap
                // around what is left (PyTorch's `_pad_circular`)
                PadMode::Circular => {
                    let (crop, span) = (-before.min(0), n + before.min(0) + after.min(0));
                    crop + (c[d] as i64 - before.max(0)).rem_euclid(span)
                }
            };
            s.push(src as usize);
        }
        Some(linear(&shape, &s))
    }
}

/// `F.pad(x, pad, mode, value)` and its shape.
pub fn pad(
    shape: &[usize],
    x: &[f64],
    pad: &[i64],
    mode: PadMode,
    value: f64,
) -> (Vec<usize>, Vec<f64>) {
    let out = pad_shape(shape, pad);
    let src = pad_source(shape, pad, mode);
    let n: usize = out.iter().product();
    let y = (0..n)
        .map(|o| src(&coords(&out, o)).map_or(value, |i| x[i]))
        .collect();
    (out, y)
}

/// The gradient of [`pad`] wrt `x`: every `dy` element added to the input
/// element it was read from.
pub fn pad_backward(shape: &[usize], dy: &[f64], pad: &[i64], mode: PadMode) -> Vec<f64> {
    let out = pad_shape(shape, pad);
    scatter(&out, dy, shape.iter().product(), pad_source(shape, pad, mode))
}

/// The shape of `torch.cat` of `shapes` along `dim`.
pub fn cat_shape(shapes: &[Vec<usize>], dim: usize) -> Vec<usize> {
    let mut out = shapes[0].clone();
    out[dim] = shapes.iter().map(|s| s[dim]).sum();
    out
}

/// `torch.cat(xs, dim)`: each input of `shapes[k]` (equal but along
/// `dim`), row-major.
pub fn cat(shapes: &[Vec<usize>], xs: &[&[f64]], dim: usize) -> Vec<f64> {
    let out = cat_shape(shapes, dim);
    let n: usize = out.iter().product();
    (0..n)
        .map(|o| {
            let mut c = coords(&out, o);
            let mut k = 0;
            while c[dim] >= shapes[k][dim] {
                c[dim] -= shapes[k][dim];
                k += 1;
            }
            xs[k][linear(&shapes[k], &c)]
        })
        .collect()
}

/// The gradient of [`cat`] wrt each input: the slices of `dy` along `dim`.
pub fn cat_backward(shapes: &[Vec<usize>], dy: &[f64], dim: usize) -> Vec<Vec<f64>> {
    let out = cat_shape(shapes, dim);
    let mut dxs: Vec<Vec<f64>> = shapes
        .iter()
        .map(|s| vec![0.0; s.iter().product()])
        .collect();
    for (o, &g) in dy.iter().enumerate() {
        let mut c = coords(&out, o);
        let mut k = 0;
        while c[dim] >= shapes[k][dim] {
            c[dim] -= shapes[k][dim];
            k += 1;
        }
        let i = linear(&shapes[k], &c);
        dxs[k][i] += g;
    }
    dxs
}

/// `torch.stack(xs, dim)` of inputs of one `shape`: the output has a new
/// dim of extent `xs.len()` at `dim`.
pub fn stack(shape: &[usize], xs: &[&[f64]], dim: usize) -> Vec<f64> {
    let mut out = shape.to_vec();
    out.insert(dim, xs.len());
    let n: usize = out.iter().product();
    (0..n)
        .map(|o| {
            let mut c = coords(&out, o);
            let k = c.remove(dim);
            xs[k][linear(shape, &c)]
        })
        .collect()
}

/// The gradient of [`stack`] wrt each of its `count` inputs.
pub fn stack_backward(shape: &[usize], count: usize, dy: &[f64], dim: usize) -> Vec<Vec<f64>> {
    let n: usize = shape.iter().product();
    let mut out = shape.to_vec();
    out.insert(dim, count);
    let mut dxs = vec![vec![0.0; n]; count];
    for (o, &g) in dy.iter().enumerate() {
        let mut c = coords(&out, o);
        let k = c.remove(dim);
        dxs[k][linear(shape, &c)] += g;
    }
    dxs
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seq(n: usize) -> Vec<f64> {
        (0..n).map(|i| i as f64 + 1.0).collect()
    }

    /// `sum(a * b)`.
    fn dot(a: &[f64], b: &[f64]) -> f64 {
        a.iter().zip(b).map(|(x, y)| x * y).sum()
    }

    /// Pseudo-random values in [-1, 1).
    fn noise(n: usize, seed: u64) -> Vec<f64> {
        let mut s = seed;
        (0..n)
            .map(|_| {
                s = s
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                (s >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0
            })
            .collect()
    }

    #[test]
    fn flip_and_roll_small() {
        let x = seq(6);
        assert_eq!(flip(&[2, 3], &x, &[1]), [3.0, 2.0, 1.0, 6.0, 5.0, 4.0]);
        assert_eq!(flip(&[2, 3], &x, &[0, 1]), [6.0, 5.0, 4.0, 3.0, 2.0, 1.0]);
        assert_eq!(roll(&[2, 3], &x, &[1], &[1]), [3.0, 1.0, 2.0, 6.0, 4.0, 5.0]);
        // repeated dims add their shifts; negative shifts roll left
        assert_eq!(roll(&[2, 3], &x, &[2, -1], &[1, 1]), roll(&[2, 3], &x, &[1], &[1]));
        assert_eq!(roll_flat(&x, 2), [5.0, 6.0, 1.0, 2.0, 3.0, 4.0]);
        assert_eq!(roll_flat(&x, -8), roll_flat(&x, 4));
    }

    #[test]
    fn triangles_small() {
        let x = seq(9);
        assert_eq!(
            triangle(&[3, 3], &x, 0, true),
            [1.0, 0.0, 0.0, 4.0, 5.0, 0.0, 7.0, 8.0, 9.0]
        );
        assert_eq!(
            triangle(&[3, 3], &x, 1, false),
            [0.0, 2.0, 3.0, 0.0, 0.0, 6.0, 0.0, 0.0, 0.0]
        );
        assert_eq!(triangle(&[3, 3], &x, -5, true), [0.0; 9]);
    }

    #[test]
    fn pad_modes_small() {
        // torch: F.pad(arange(1, 5.), (2, 1), mode) for each mode
        let x = seq(4);
        let p = |m| pad(&[1, 4], &x, &[2, 1], m, 9.0).1;
        assert_eq!(p(PadMode::Constant), [9.0, 9.0, 1.0, 2.0, 3.0, 4.0, 9.0]);
        assert_eq!(p(PadMode::Reflect), [3.0, 2.0, 1.0, 2.0, 3.0, 4.0, 3.0]);
        assert_eq!(p(PadMode::Replicate), [1.0, 1.0, 1.0, 2.0, 3.0, 4.0, 4.0]);
        assert_eq!(p(PadMode::Circular), [3.0, 4.0, 1.0, 2.0, 3.0, 4.0, 1.0]);
        // negative pads crop
        let (s, y) = pad(&[1, 4], &x, &[-1, 2], PadMode::Reflect, 0.0);
        assert_eq!(s, [1, 5]);
        assert_eq!(y, [2.0, 3.0, 4.0, 3.0, 2.0]);
        let (s, y) = pad(&[1, 4], &x, &[-1, -2], PadMode::Constant, 0.0);
        assert_eq!((s, y), (vec![1, 1], vec![2.0]));
        // circular crops, then wraps around the cropped [2, 3, 4]
        let (_, y) = pad(&[1, 4], &x, &[-1, 2], PadMode::Circular, 0.0);
        assert_eq!(y, [2.0, 3.0, 4.0, 2.0, 3.0]);
        let (_, y) = pad(&[1, 4], &x, &[2, -1], PadMode::Circular, 0.0);
        assert_eq!(y, [2.0, 3.0, 1.0, 2.0, 3.0]);
    }

    #[test]
    fn cat_and_stack_small() {
        let a = seq(4);
        let b: Vec<f64> = seq(2).iter().map(|v| v * 10.0).collect();
        let shapes = vec![vec![2, 2], vec![2, 1]];
        assert_eq!(
            cat(&shapes, &[&a, &b], 1),
            [1.0, 2.0, 10.0, 3.0, 4.0, 20.0]
        );
        let shapes0 = vec![vec![2, 2], vec![1, 2]];
        assert_eq!(
            cat(&shapes0, &[&a, &b], 0),
            [1.0, 2.0, 3.0, 4.0, 10.0, 20.0]
        );
        assert_eq!(
            stack(&[2], &[&a[..2], &b], 1),
            [1.0, 10.0, 2.0, 20.0]
        );
    }

    /// Every backward is the adjoint of its forward: `<f(x), dy> = <x,
    /// f'(dy)>` for random x and dy (the ops are linear, so this is the
    /// gradient check, exact up to rounding).
    #[test]
    fn backwards_are_adjoints() {
        let shape = [2, 3, 5, 4];
        let n: usize = shape.iter().product();
        let x = noise(n, 1);
        let cases: &[(&[i64], PadMode)] = &[
            (&[1, 2], PadMode::Constant),
            (&[-1, 3, 2, -2, 1, 1], PadMode::Constant),
            (&[3, 2, 1, 4], PadMode::Reflect),
            (&[-1, 2, 2, -1], PadMode::Reflect),
            (&[5, 7, 0, 2, 6, 1], PadMode::Replicate),
            (&[-2, 3], PadMode::Replicate),
            (&[4, 3, 5, 1, 2, 2], PadMode::Circular),
            (&[-3, 4], PadMode::Circular),
        ];
        for (k, &(p, mode)) in cases.iter().enumerate() {
            let (out, y) = pad(&shape, &x, p, mode, 0.0);
            let dy = noise(out.iter().product(), 2 + k as u64);
            let dx = pad_backward(&shape, &dy, p, mode);
            let (l, r) = (dot(&y, &dy), dot(&x, &dx));
            assert!((l - r).abs() < 1e-12 * (1.0 + l.abs()), "{p:?} {mode:?}: {l} vs {r}");
        }
        let shapes = vec![vec![2, 3, 4], vec![2, 0, 4], vec![2, 5, 4]];
        let xs: Vec<Vec<f64>> = shapes
            .iter()
            .enumerate()
            .map(|(k, s)| noise(s.iter().product(), 10 + k as u64))
            .collect();
        let refs: Vec<&[f64]> = xs.iter().map(|v| v.as_slice()).collect();
        let y = cat(&shapes, &refs, 1);
        let dy = noise(y.len(), 20);
        let dxs = cat_backward(&shapes, &dy, 1);
        let r: f64 = xs.iter().zip(&dxs).map(|(a, b)| dot(a, b)).sum();
        assert!((dot(&y, &dy) - r).abs() < 1e-12);
        let y = stack(&[3, 4], &[&xs[0][..12], &xs[2][..12]], 2);
        let dy = noise(y.len(), 21);
        let dxs = stack_backward(&[3, 4], 2, &dy, 2);
        let r = dot(&xs[0][..12], &dxs[0]) + dot(&xs[2][..12], &dxs[1]);
        assert!((dot(&y, &dy) - r).abs() < 1e-12);
    }
}
