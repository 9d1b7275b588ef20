//! f64 references of the shape family: flip, roll, tril/triu, pad,
//! repeat, repeat_interleave, diagonal, diag_embed, unfold, strided slices,
//! cat and stack, forward and backward, over row-major slices.
//!
//! Each forward is written as the map from an output index to the input
//! index it reads (or none: a pad constant); each backward is the adjoint
//! of that map, accumulated by scattering `dy` into `dx` (where the GPU
//! gathers). Parameters are the validated ones ([`crate::ShapeOp`]'s
//! checks): dims in range, shifts and pads as given.

use crate::shape::{LayoutOp, PadMode, Repeats};

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

/// The output shape of a source map and its forward: `y[o] = x[src(o)]`
/// (0 for none).
fn forward(
    out: Vec<usize>,
    x: &[f64],
    src: impl Fn(&[usize]) -> Option<usize>,
) -> (Vec<usize>, Vec<f64>) {
    let y = gather(&out, x, src);
    (out, y)
}

/// `x.repeat(*repeats)`, one repeat per dim: the output shape and values.
pub fn repeat(shape: &[usize], x: &[f64], repeats: &[usize]) -> (Vec<usize>, Vec<f64>) {
    let out: Vec<usize> = shape.iter().zip(repeats).map(|(&n, &r)| n * r).collect();
    let (out, src) = (out.clone(), repeat_source(shape, out));
    forward(out, x, src)
}

fn repeat_source(shape: &[usize], _out: Vec<usize>) -> impl Fn(&[usize]) -> Option<usize> {
    let shape = shape.to_vec();
    move |c: &[usize]| {
        let s: Vec<usize> = c.iter().zip(&shape).map(|(&o, &n)| o % n).collect();
        Some(linear(&shape, &s))
    }
}

/// The gradient of [`repeat`]: every copy's gradient summed.
pub fn repeat_backward(shape: &[usize], dy: &[f64], repeats: &[usize]) -> Vec<f64> {
    let out: Vec<usize> = shape.iter().zip(repeats).map(|(&n, &r)| n * r).collect();
    scatter(&out, dy, shape.iter().product(), repeat_source(shape, out.clone()))
}

/// The shape of `torch.repeat_interleave` with `repeats[i]` copies of
/// index `i` along `dim`.
fn interleave_shape(shape: &[usize], repeats: &[usize], dim: usize) -> Vec<usize> {
    let mut out = shape.to_vec();
    out[dim] = repeats.iter().sum();
    out
}

fn interleave_source(
    shape: &[usize],
    repeats: &[usize],
    dim: usize,
) -> impl Fn(&[usize]) -> Option<usize> {
    // the source index of every output index along dim
    let owner: Vec<usize> = repeats
        .iter()
        .enumerate()
        .flat_map(|(i, &r)| std::iter::repeat_n(i, r))
        .collect();
    let shape = shape.to_vec();
    move |c: &[usize]| {
        let mut s = c.to_vec();
        s[dim] = owner[c[dim]];
        Some(linear(&shape, &s))
    }
}

/// `torch.repeat_interleave(x, repeats, dim)`, `repeats` one count per
/// index along `dim`.
pub fn repeat_interleave(
    shape: &[usize],
    x: &[f64],
    repeats: &[usize],
    dim: usize,
) -> (Vec<usize>, Vec<f64>) {
    let out = interleave_shape(shape, repeats, dim);
    forward(out, x, interleave_source(shape, repeats, dim))
}

/// The gradient of [`repeat_interleave`].
pub fn repeat_interleave_backward(
    shape: &[usize],
    dy: &[f64],
    repeats: &[usize],
    dim: usize,
) -> Vec<f64> {
    let out = interleave_shape(shape, repeats, dim);
    scatter(&out, dy, shape.iter().product(), interleave_source(shape, repeats, dim))
}

/// Where the `offset` diagonal of a (rows, cols) matrix starts and how
/// long it is.
fn diag_start(rows: usize, cols: usize, offset: i64) -> (usize, usize, usize) {
    let (i0, j0) = if offset >= 0 {
        (0, offset as usize)
    } else {
        (offset.unsigned_abs() as usize, 0)
    };
    let len = rows.saturating_sub(i0).min(cols.saturating_sub(j0));
    (i0, j0, len)
}

/// The shape of `torch.diagonal(x, offset, d1, d2)` (dims wrapped,
/// distinct).
pub fn diagonal_shape(shape: &[usize], offset: i64, d1: usize, d2: usize) -> Vec<usize> {
    let mut out: Vec<usize> = (0..shape.len())
        .filter(|&k| k != d1 && k != d2)
        .map(|k| shape[k])
        .collect();
    out.push(diag_start(shape[d1], shape[d2], offset).2);
    out
}

fn diagonal_source(
    shape: &[usize],
    offset: i64,
    d1: usize,
    d2: usize,
) -> impl Fn(&[usize]) -> Option<usize> {
    let shape = shape.to_vec();
    let (i0, j0, _) = diag_start(shape[d1], shape[d2], offset);
    move |c: &[usize]| {
        let k = c[c.len() - 1];
        let mut batch = c[..c.len() - 1].iter();
        let s: Vec<usize> = (0..shape.len())
            .map(|d| {
                if d == d1 {
                    i0 + k
                } else if d == d2 {
                    j0 + k
                } else {
                    *batch.next().expect("a batch coordinate")
                }
            })
            .collect();
        Some(linear(&shape, &s))
    }
}

/// `torch.diagonal(x, offset, d1, d2)` (dims wrapped, distinct): the
/// diagonal appended as the last dim.
pub fn diagonal(
    shape: &[usize],
    x: &[f64],
    offset: i64,
    d1: usize,
    d2: usize,
) -> (Vec<usize>, Vec<f64>) {
    let out = diagonal_shape(shape, offset, d1, d2);
    forward(out, x, diagonal_source(shape, offset, d1, d2))
}

/// The gradient of [`diagonal`]: dy on the diagonal, 0 elsewhere.
pub fn diagonal_backward(shape: &[usize], dy: &[f64], offset: i64, d1: usize, d2: usize) -> Vec<f64> {
    let out = diagonal_shape(shape, offset, d1, d2);
    scatter(&out, dy, shape.iter().product(), diagonal_source(shape, offset, d1, d2))
}

/// The shape of `torch.diag_embed(x, offset, d1, d2)`, `d1` and `d2`
/// dims of the output (wrapped, distinct).
pub fn diag_embed_shape(shape: &[usize], offset: i64, d1: usize, d2: usize) -> Vec<usize> {
    let n = shape.len();
    let ext = shape[n - 1] + offset.unsigned_abs() as usize;
    let mut batch = shape[..n - 1].iter();
    (0..=n)
        .map(|d| {
            if d == d1 || d == d2 {
                ext
            } else {
                *batch.next().expect("a batch extent")
            }
        })
        .collect()
}

/// `torch.diag_embed(x, offset, d1, d2)`: `x`'s last dim on the
/// diagonals, 0 elsewhere.
pub fn diag_embed(
    shape: &[usize],
    x: &[f64],
    offset: i64,
    d1: usize,
    d2: usize,
) -> (Vec<usize>, Vec<f64>) {
    let out = diag_embed_shape(shape, offset, d1, d2);
    // diag_embed is the adjoint of the diagonal of its output
    let y = diagonal_backward(&out, x, offset, d1, d2);
    (out, y)
}

/// The gradient of [`diag_embed`]: dy's diagonals.
pub fn diag_embed_backward(shape: &[usize], dy: &[f64], offset: i64, d1: usize, d2: usize) -> Vec<f64> {
    let out = diag_embed_shape(shape, offset, d1, d2);
    diagonal(&out, dy, offset, d1, d2).1
}

/// The shape of `x.unfold(dim, size, step)`.
pub fn unfold_shape(shape: &[usize], dim: usize, size: usize, step: usize) -> Vec<usize> {
    let mut out = shape.to_vec();
    out[dim] = (shape[dim] - size) / step + 1;
    out.push(size);
    out
}

fn unfold_source(
    shape: &[usize],
    dim: usize,
    step: usize,
) -> impl Fn(&[usize]) -> Option<usize> {
    let shape = shape.to_vec();
    move |c: &[usize]| {
        let n = shape.len();
        let mut s = c[..n].to_vec();
        s[dim] = c[dim] * step + c[n];
        Some(linear(&shape, &s))
    }
}

/// `x.unfold(dim, size, step)`: the windows along `dim`, each a new last
/// dim.
pub fn unfold(
    shape: &[usize],
    x: &[f64],
    dim: usize,
    size: usize,
    step: usize,
) -> (Vec<usize>, Vec<f64>) {
    let out = unfold_shape(shape, dim, size, step);
    forward(out, x, unfold_source(shape, dim, step))
}

/// The gradient of [`unfold`]: overlapping windows summed.
pub fn unfold_backward(shape: &[usize], dy: &[f64], dim: usize, size: usize, step: usize) -> Vec<f64> {
    let out = unfold_shape(shape, dim, size, step);
    scatter(&out, dy, shape.iter().product(), unfold_source(shape, dim, step))
}

/// Python's `range(start, stop, step)` of a slice over `n` indices
/// (`step > 0`): the first index and the count.
pub fn slice_range(n: usize, start: i64, stop: i64, step: i64) -> (usize, usize) {
    let n = n as i128;
    let clamp = |v: i64| {
        let v = i128::from(v);
        (if v < 0 { v + n } else { v }).clamp(0, n)
    };
    let (lo, hi) = (clamp(start), clamp(stop));
    let len = if hi > lo {
        (hi - lo + i128::from(step) - 1) / i128::from(step)
    } else {
        0
    };
    (lo as usize, len as usize)
}

fn slice_source(
    shape: &[usize],
    dim: usize,
    start: usize,
    step: usize,
) -> impl Fn(&[usize]) -> Option<usize> {
    let shape = shape.to_vec();
    move |c: &[usize]| {
        let mut s = c.to_vec();
        s[dim] = start + c[dim] * step;
        Some(linear(&shape, &s))
    }
}

/// `x[..., start:stop:step, ...]` along `dim` (`step > 0`).
pub fn slice(
    shape: &[usize],
    x: &[f64],
    dim: usize,
    start: i64,
    stop: i64,
    step: i64,
) -> (Vec<usize>, Vec<f64>) {
    let (lo, len) = slice_range(shape[dim], start, stop, step);
    let mut out = shape.to_vec();
    out[dim] = len;
    forward(out, x, slice_source(shape, dim, lo, step as usize))
}

/// The gradient of [`slice()`]: dy inside the slice, 0 elsewhere.
pub fn slice_backward(
    shape: &[usize],
    dy: &[f64],
    dim: usize,
    start: i64,
    stop: i64,
    step: i64,
) -> Vec<f64> {
    let (lo, len) = slice_range(shape[dim], start, stop, step);
    let mut out = shape.to_vec();
    out[dim] = len;
    scatter(&out, dy, shape.iter().product(), slice_source(shape, dim, lo, step as usize))
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

/// The per-index counts of a repeat_interleave over an extent `ext`
/// (a scalar or a single count repeats for every index).
pub fn interleave_counts(repeats: &Repeats, ext: usize) -> Vec<usize> {
    match repeats {
        Repeats::Scalar(r) => vec![*r as usize; ext],
        Repeats::PerIndex(v) if v.len() == 1 => vec![v[0] as usize; ext],
        Repeats::PerIndex(v) => v.iter().map(|&c| c as usize).collect(),
    }
}

/// The f64 forward of a [`LayoutOp`] on `x` of `shape`, and (given `dy`)
/// its backward: the dispatch to the functions above, with negative dims
/// wrapped as PyTorch does.
pub fn layout(
    op: &LayoutOp,
    shape: &[usize],
    x: &[f64],
    dy: Option<&[f64]>,
) -> (Vec<f64>, Option<Vec<f64>>) {
    let n = shape.len();
    let wrap = |dim: i64, rank: usize| dim.rem_euclid(rank.max(1) as i64) as usize;
    let us = |v: &[i64]| v.iter().map(|&c| c as usize).collect::<Vec<_>>();
    match op {
        LayoutOp::Repeat { repeats } => {
            let rep = us(repeats.as_slice());
            (
                repeat(shape, x, &rep).1,
                dy.map(|dy| repeat_backward(shape, dy, &rep)),
            )
        }
        LayoutOp::RepeatInterleave { repeats, dim, .. } => {
            let d = wrap(*dim, n);
            let c = interleave_counts(repeats, shape[d]);
            (
                repeat_interleave(shape, x, &c, d).1,
                dy.map(|dy| repeat_interleave_backward(shape, dy, &c, d)),
            )
        }
        LayoutOp::Diagonal { offset, dim1, dim2 } => {
            let (d1, d2) = (wrap(*dim1, n), wrap(*dim2, n));
            (
                diagonal(shape, x, *offset, d1, d2).1,
                dy.map(|dy| diagonal_backward(shape, dy, *offset, d1, d2)),
            )
        }
        LayoutOp::DiagEmbed { offset, dim1, dim2 } => {
            let (d1, d2) = (wrap(*dim1, n + 1), wrap(*dim2, n + 1));
            (
                diag_embed(shape, x, *offset, d1, d2).1,
                dy.map(|dy| diag_embed_backward(shape, dy, *offset, d1, d2)),
            )
        }
        LayoutOp::Diag { offset } if n == 1 => (
            diag_embed(shape, x, *offset, 0, 1).1,
            dy.map(|dy| diag_embed_backward(shape, dy, *offset, 0, 1)),
        ),
        LayoutOp::Diag { offset } => (
            diagonal(shape, x, *offset, 0, 1).1,
            dy.map(|dy| diagonal_backward(shape, dy, *offset, 0, 1)),
        ),
        LayoutOp::Unfold { dim, size, step } => {
            let d = wrap(*dim, n);
            let (size, step) = (*size as usize, *step as usize);
            (
                unfold(shape, x, d, size, step).1,
                dy.map(|dy| unfold_backward(shape, dy, d, size, step)),
            )
        }
        LayoutOp::Slice {
            dim,
            start,
            stop,
            step,
        } => {
            let d = wrap(*dim, n);
            (
                slice(shape, x, d, *start, *stop, *step).1,
                dy.map(|dy| slice_backward(shape, dy, d, *start, *stop, *step)),
            )
        }
    }
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
    fn layout_ops_small() {
        // torch: arange(1, 7.).view(2, 3) as x
        let x = seq(6);
        let (s, y) = repeat(&[2, 3], &x, &[1, 2]);
        assert_eq!(s, [2, 6]);
        assert_eq!(y, [1.0, 2.0, 3.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 4.0, 5.0, 6.0]);
        let (s, y) = repeat_interleave(&[2, 3], &x, &[2, 0, 1], 1);
        assert_eq!(s, [2, 3]);
        assert_eq!(y, [1.0, 1.0, 3.0, 4.0, 4.0, 6.0]);
        let (s, y) = diagonal(&[2, 3], &x, 1, 0, 1);
        assert_eq!((s, y), (vec![2], vec![2.0, 6.0]));
        let (s, y) = diagonal(&[2, 3], &x, -1, 0, 1);
        assert_eq!((s, y), (vec![1], vec![4.0]));
        let (s, y) = diagonal(&[2, 3], &x, 0, 1, 0);
        assert_eq!((s, y), (vec![2], vec![1.0, 5.0]));
        let (s, y) = diag_embed(&[2], &x[..2], 1, 0, 1);
        assert_eq!(s, [3, 3]);
        assert_eq!(y, [0.0, 1.0, 0.0, 0.0, 0.0, 2.0, 0.0, 0.0, 0.0]);
        let (s, y) = unfold(&[6], &x, 0, 3, 2);
        assert_eq!(s, [2, 3]);
        assert_eq!(y, [1.0, 2.0, 3.0, 3.0, 4.0, 5.0]);
        assert_eq!(unfold_backward(&[6], &[1.0; 6], 0, 3, 2), [1.0, 1.0, 2.0, 1.0, 1.0, 0.0]);
        let (s, y) = slice(&[6], &x, 0, -5, i64::MAX, 2);
        assert_eq!((s, y), (vec![3], vec![2.0, 4.0, 6.0]));
        assert_eq!(slice_range(10, 7, 2, 1), (7, 0));
        assert_eq!(slice_range(10, -100, 100, 3), (0, 4));
        assert_eq!(slice_backward(&[6], &[1.0, 2.0], 0, 1, 4, 2), [0.0, 1.0, 0.0, 2.0, 0.0, 0.0]);
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
        // the layout ops
        let adj = |what: &str, y: &[f64], dy: &[f64], dx: &[f64]| {
            let (l, r) = (dot(y, dy), dot(&x, dx));
            assert!((l - r).abs() < 1e-12 * (1.0 + l.abs()), "{what}: {l} vs {r}");
        };
        let (_, y) = repeat(&shape, &x, &[2, 1, 3, 2]);
        let dy = noise(y.len(), 30);
        adj("repeat", &y, &dy, &repeat_backward(&shape, &dy, &[2, 1, 3, 2]));
        let reps = [2, 0, 3, 1, 1];
        let (_, y) = repeat_interleave(&shape, &x, &reps, 2);
        let dy = noise(y.len(), 31);
        adj("repeat_interleave", &y, &dy, &repeat_interleave_backward(&shape, &dy, &reps, 2));
        for (offset, d1, d2) in [(0, 1, 2), (2, 3, 1), (-1, 0, 3)] {
            let (_, y) = diagonal(&shape, &x, offset, d1, d2);
            let dy = noise(y.len(), 32);
            adj("diagonal", &y, &dy, &diagonal_backward(&shape, &dy, offset, d1, d2));
            let (_, y) = diag_embed(&shape, &x, offset, d1, d2);
            let dy = noise(y.len(), 33);
            adj("diag_embed", &y, &dy, &diag_embed_backward(&shape, &dy, offset, d1, d2));
        }
        for (dim, size, step) in [(2, 3, 1), (2, 2, 3), (3, 4, 2), (0, 1, 1)] {
            let (_, y) = unfold(&shape, &x, dim, size, step);
            let dy = noise(y.len(), 34);
            adj("unfold", &y, &dy, &unfold_backward(&shape, &dy, dim, size, step));
        }
        let (_, y) = slice(&shape, &x, 2, -4, 100, 2);
        let dy = noise(y.len(), 35);
        adj("slice", &y, &dy, &slice_backward(&shape, &dy, 2, -4, 100, 2));
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
