//! Repeat, repeat_interleave, diagonal, diag_embed, diag, unfold and
//! strided slices, forward and backward: each output element the sum (one
//! term for a forward) of the input elements a group map names.
//!
//! `kernels/shape/shape.cu` (at `GroupArgs`) lists the group kinds. A
//! forward gathers one element per output (or 0: diag_embed off its
//! diagonal); a backward gathers, for each `dx` element, every `dy`
//! element that read it (repeat's copies, unfold's overlapping windows),
//! in a fixed order: deterministic, no atomics.

use core::marker::PhantomData;

use baracuda_driver::{DeviceBuffer, Function, LaunchConfig, Stream};
use baracuda_kernels_types::{
    BackendKind, DevPtr, DevPtrMut, Element, ElementKind, Error, KernelSku, PlanPreference, Result,
    TensorMut, TensorRef, Workspace, MAX_RANK,
};

use super::gather::{shape_spec, IntList, THREADS};
use crate::checks::{check_alias, check_views, float_dtype_code, invalid_descriptor, Extent, View};
use crate::launch::{launch_params, padded};
use crate::plan::own_float_sku;
use crate::{Backward, Plan};

const OP: &str = "layout";

/// The repeat counts of `repeat_interleave`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Repeats {
    /// Every index repeated this many times.
    Scalar(i64),
    /// Index `i` along the dim repeated `counts[i]` times (one count
    /// applies to every index, as PyTorch broadcasts a one-element
    /// tensor).
    PerIndex(Vec<i64>),
}

/// An op of [`LayoutPlan`], with PyTorch's parameters. Dims may be
/// negative (counted from the end), as in PyTorch.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum LayoutOp {
    /// `x.repeat(*repeats)`: the tensor tiled `repeats[d]` times along
    /// each dim; one repeat per dim (the output has `x`'s rank).
    Repeat {
        /// Copies along each dim (>= 0).
        repeats: IntList,
    },
    /// `torch.repeat_interleave(x, repeats, dim, output_size)`: each
    /// index along `dim` repeated in place.
    RepeatInterleave {
        /// The counts (>= 0).
        repeats: Repeats,
        /// The dim.
        dim: i64,
        /// The output's extent along `dim`, as PyTorch's `output_size`:
        /// when given it must equal the sum of the repeats.
        output_size: Option<usize>,
    },
    /// `torch.diagonal(x, offset, dim1, dim2)`: the diagonal of every
    /// (dim1, dim2) matrix, appended as the last dim (rank `N - 1`).
    Diagonal {
        /// 0 is the main diagonal, positive above it.
        offset: i64,
        /// The row dim.
        dim1: i64,
        /// The column dim.
        dim2: i64,
    },
    /// `torch.diag_embed(x, offset, dim1, dim2)`: `x`'s last dim placed on
    /// the diagonal of new (dim1, dim2) matrices, zeros elsewhere (rank
    /// `N + 1`; dims count in the output's rank).
    DiagEmbed {
        /// 0 is the main diagonal, positive above it.
        offset: i64,
        /// The row dim of the output.
        dim1: i64,
        /// The column dim of the output.
        dim2: i64,
    },
    /// `torch.diag(x, offset)`: a 1-D `x` on the diagonal of a square
    /// matrix (rank 2), or a 2-D `x`'s diagonal (rank 1).
    Diag {
        /// 0 is the main diagonal, positive above it.
        offset: i64,
    },
    /// `x.unfold(dim, size, step)`: the windows of `size` elements every
    /// `step` along `dim` (rank `N + 1`: dim counts the windows, a new
    /// last dim of `size` runs through each).
    Unfold {
        /// The dim.
        dim: i64,
        /// Window length, at most the extent.
        size: i64,
        /// Distance between windows (> 0).
        step: i64,
    },
    /// `x[..., start:stop:step, ...]` along `dim`: Python's slice bounds
    /// (negative counts from the end, out-of-range bounds clamp), `step >
    /// 0`. `i64::MAX` as `stop` runs to the end.
    Slice {
        /// The dim.
        dim: i64,
        /// First index.
        start: i64,
        /// One past the last index.
        stop: i64,
        /// Distance between taken indices (> 0).
        step: i64,
    },
}

impl LayoutOp {
    /// `x.repeat(*repeats)`.
    pub fn repeat(repeats: &[i64]) -> Self {
        LayoutOp::Repeat {
            repeats: IntList::new(repeats),
        }
    }
    /// `torch.repeat_interleave(x, repeats, dim)` with a scalar count.
    pub fn repeat_interleave(repeats: i64, dim: i64) -> Self {
        LayoutOp::RepeatInterleave {
            repeats: Repeats::Scalar(repeats),
            dim,
            output_size: None,
        }
    }
    /// `torch.repeat_interleave(x, repeats, dim, output_size)` with a count
    /// per index.
    pub fn repeat_interleave_per_index(
        repeats: &[i64],
        dim: i64,
        output_size: Option<usize>,
    ) -> Self {
        LayoutOp::RepeatInterleave {
            repeats: Repeats::PerIndex(repeats.to_vec()),
            dim,
            output_size,
        }
    }
    /// `x[..., start:stop:step, ...]` along `dim`.
    pub fn slice(dim: i64, start: i64, stop: i64, step: i64) -> Self {
        LayoutOp::Slice {
            dim,
            start,
            stop,
            step,
        }
    }
    /// The op's name: `repeat`, `repeat_interleave`, `diagonal`,
    /// `diag_embed`, `diag`, `unfold`, `slice`.
    pub fn name(&self) -> &'static str {
        match self {
            LayoutOp::Repeat { .. } => "repeat",
            LayoutOp::RepeatInterleave { .. } => "repeat_interleave",
            LayoutOp::Diagonal { .. } => "diagonal",
            LayoutOp::DiagEmbed { .. } => "diag_embed",
            LayoutOp::Diag { .. } => "diag",
            LayoutOp::Unfold { .. } => "unfold",
            LayoutOp::Slice { .. } => "slice",
        }
    }
}

/// A [`LayoutOp`] over an input of shape `shape`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct LayoutDescriptor<const N: usize> {
    /// The op and its parameters.
    pub op: LayoutOp,
    /// Element type of `x` and `y`.
    pub element: ElementKind,
    /// Shape of `x` (and `dx`).
    pub shape: [usize; N],
}

impl<const N: usize> LayoutDescriptor<N> {
    /// `op` over `shape` in `element`.
    pub fn new(op: LayoutOp, element: ElementKind, shape: [usize; N]) -> Self {
        LayoutDescriptor { op, element, shape }
    }

    /// The shape of `y` (and `dy`); its length is the plan's output rank
    /// `M`.
    ///
    /// # Errors
    /// `InvalidDescriptor` and `Overflow` as [`LayoutPlan::select`].
    pub fn output_shape(&self) -> Result<Vec<usize>> {
        Ok(resolve(&self.op, &self.shape)?.out_shape)
    }
}

/// Arguments of [`LayoutPlan`]'s [`Plan::run`].
pub struct LayoutArgs<'a, T, const N: usize, const M: usize> {
    /// Input, `desc.shape`, any strides (0 = broadcast).
    pub x: TensorRef<'a, T, N>,
    /// Output, [`LayoutDescriptor::output_shape`], any non-overlapping
    /// strides; disjoint from `x`.
    pub y: TensorMut<'a, T, M>,
}

/// Arguments of [`LayoutPlan`]'s [`Backward::run_bw`].
pub struct LayoutBwArgs<'a, T, const N: usize, const M: usize> {
    /// Gradient of the output, any strides.
    pub dy: TensorRef<'a, T, M>,
    /// Gradient of the input, any non-overlapping strides; disjoint from
    /// `dy`.
    pub dx: TensorMut<'a, T, N>,
}

/// `GroupArgs` of `kernels/shape/shape.cu`, field for field.
#[repr(C)]
#[derive(Copy, Clone, Debug)]
pub(crate) struct GroupArgs {
    n: u64,
    rank: u32,
    pad0: u32,
    base: i64,
    out_shape: [u64; MAX_RANK],
    out_stride: [i64; MAX_RANK],
    kind: [u32; MAX_RANK],
    partner: [u32; MAX_RANK],
    st: [i64; MAX_RANK],
    st2: [i64; MAX_RANK],
    a: [i64; MAX_RANK],
    b: [i64; MAX_RANK],
    c: [i64; MAX_RANK],
    table: u64,
    out: DevPtrMut<u8>,
    inp: DevPtr<u8>,
}

/// Group kinds (`GroupKind` of shape.cu).
const G_NONE: u32 = 0;
const G_AFFINE: u32 = 1;
const G_MOD: u32 = 2;
const G_DIV: u32 = 3;
const G_SEARCH: u32 = 4;
const G_EVERY: u32 = 5;
const G_BLOCK: u32 = 6;
const G_SPAN: u32 = 7;
const G_WINDOWS: u32 = 8;
const G_UNSLICE: u32 = 9;
const G_DIAG: u32 = 10;

/// One direction of an op as the group kernel runs it, over an output of
/// `out_rank` dims from an input of `in_rank`. Strides in the input are
/// linear in its strides: group `d`'s `st` is `sum_k st_coef[d][k] *
/// in_stride[k]` (and `st2` likewise), the base offset `sum_k
/// base_coef[k] * in_stride[k]`.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
struct Map {
    out_rank: usize,
    out_shape: [usize; MAX_RANK],
    in_rank: usize,
    kind: [u32; MAX_RANK],
    partner: [u32; MAX_RANK],
    st_coef: [[i64; MAX_RANK]; MAX_RANK],
    st2_coef: [[i64; MAX_RANK]; MAX_RANK],
    a: [i64; MAX_RANK],
    b: [i64; MAX_RANK],
    c: [i64; MAX_RANK],
    base_coef: [i64; MAX_RANK],
}

impl Map {
    /// Every output dim a copy of nothing yet, over `out_shape`.
    fn new(out_shape: &[usize], in_rank: usize) -> Self {
        Map {
            out_rank: out_shape.len(),
            out_shape: padded(out_shape.iter().copied()),
            in_rank,
            kind: [G_NONE; MAX_RANK],
            partner: [0; MAX_RANK],
            st_coef: [[0; MAX_RANK]; MAX_RANK],
            st2_coef: [[0; MAX_RANK]; MAX_RANK],
            a: [0; MAX_RANK],
            b: [0; MAX_RANK],
            c: [0; MAX_RANK],
            base_coef: [0; MAX_RANK],
        }
    }
    /// Output dim `d` a group of `kind` reading input dim `k` (stride
    /// times `mult`).
    fn set(&mut self, d: usize, kind: u32, k: usize, mult: i64) {
        self.kind[d] = kind;
        self.st_coef[d][k] += mult;
    }
    /// Whether any group sums more than one term, or reads the table.
    fn sums(&self) -> bool {
        self.kind[..self.out_rank]
            .iter()
            .any(|&k| matches!(k, G_EVERY | G_BLOCK | G_SPAN | G_WINDOWS))
    }
}

/// The forward map, the backward map, the output shape and the table of
/// per-index repeat starts.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Resolved {
    out_shape: Vec<usize>,
    fw: Map,
    bw: Map,
    table: Option<Vec<i64>>,
}

fn bad(field: &'static str, value: String, reason: &str) -> Error {
    invalid_descriptor(OP, field, value, reason)
}

/// `dim` wrapped into `[0, rank)`, as PyTorch wraps a negative dim.
fn wrap_dim(field: &'static str, dim: i64, rank: usize) -> Result<usize> {
    let n = rank as i64;
    if dim < -n || dim >= n {
        return Err(bad(
            field,
            dim.to_string(),
            &format!("out of range for rank {rank} (expected [{}, {}])", -n, n - 1),
        ));
    }
    Ok(dim.rem_euclid(n.max(1)) as usize)
}

/// `a * b` or `Overflow`.
fn mul(a: usize, b: usize, what: &str) -> Result<usize> {
    a.checked_mul(b).ok_or_else(|| Error::Overflow {
        op: OP,
        what: what.into(),
    })
}

/// A count that is not negative.
fn count(field: &'static str, v: i64, what: &str) -> Result<usize> {
    usize::try_from(v).map_err(|_| bad(field, v.to_string(), &format!("{what} must not be negative")))
}

/// The two distinct diagonal dims of a rank-`rank` tensor.
fn diag_dims(dim1: i64, dim2: i64, rank: usize) -> Result<(usize, usize)> {
    let d1 = wrap_dim("dim1", dim1, rank)?;
    let d2 = wrap_dim("dim2", dim2, rank)?;
    if d1 == d2 {
        return Err(bad(
            "dim2",
            dim2.to_string(),
            &format!("diagonal dimensions cannot be identical ({dim1}, {dim2})"),
        ));
    }
    Ok((d1, d2))
}

/// The length of the `offset` diagonal of an `rows x cols` matrix.
fn diag_len(rows: usize, cols: usize, offset: i64) -> usize {
    let (r, c, o) = (rows as i128, cols as i128, i128::from(offset));
    let len = if o >= 0 { r.min(c - o) } else { (r + o).min(c) };
    len.max(0) as usize
}

/// Map of a diagonal: out dims = the in dims but `d1`, `d2` (in order),
/// then the diagonal; in has `in_rank` dims.
fn diagonal_map(in_shape: &[usize], d1: usize, d2: usize, offset: i64) -> Map {
    let len = diag_len(in_shape[d1], in_shape[d2], offset);
    let batch: Vec<usize> = (0..in_shape.len()).filter(|&k| k != d1 && k != d2).collect();
    let mut out: Vec<usize> = batch.iter().map(|&k| in_shape[k]).collect();
    out.push(len);
    let mut m = Map::new(&out, in_shape.len());
    for (d, &k) in batch.iter().enumerate() {
        m.set(d, G_AFFINE, k, 1);
    }
    let last = batch.len();
    m.set(last, G_AFFINE, d1, 1);
    m.st_coef[last][d2] += 1;
    if offset >= 0 {
        m.base_coef[d2] = offset;
    } else {
        m.base_coef[d1] = -offset;
    }
    m
}

/// Map of a diag_embed: out of `out_shape` (rank `in_rank + 1`), the pair
/// (`d1`, `d2`) reading in's last dim, the other out dims in's others in
/// order.
fn embed_map(out_shape: &[usize], in_rank: usize, d1: usize, d2: usize, offset: i64) -> Map {
    let mut m = Map::new(out_shape, in_rank);
    let mut k = 0;
    for d in 0..out_shape.len() {
        if d == d1 {
            m.set(d, G_DIAG, in_rank - 1, 1);
            m.partner[d] = d2 as u32;
            m.a[d] = offset;
        } else if d != d2 {
            m.set(d, G_AFFINE, k, 1);
            k += 1;
        }
    }
    m
}

/// Validate `op` over `shape` (PyTorch's rules) and build its maps; the
/// output's element count must fit an `i64` (the kernels' offsets).
fn resolve(op: &LayoutOp, shape: &[usize]) -> Result<Resolved> {
    let r = resolve_maps(op, shape)?;
    r.out_shape
        .iter()
        .try_fold(1usize, |a, &e| a.checked_mul(e))
        .filter(|&n| n <= i64::MAX as usize)
        .ok_or_else(|| Error::Overflow {
            op: OP,
            what: format!("the {} output's element count", op.name()),
        })?;
    Ok(r)
}

/// [`resolve`] before the output's element count is checked.
fn resolve_maps(op: &LayoutOp, shape: &[usize]) -> Result<Resolved> {
    let n = shape.len();
    let grows = matches!(op, LayoutOp::DiagEmbed { .. } | LayoutOp::Unfold { .. });
    if n + usize::from(grows) > MAX_RANK {
        return Err(Error::Unsupported {
            op: OP,
            what: format!("{} of a rank-{n} input (ranks up to {MAX_RANK})", op.name()),
        });
    }
    let same = |out: Vec<usize>, fw: Map, bw: Map, table| Resolved {
        out_shape: out,
        fw,
        bw,
        table,
    };
    match op {
        LayoutOp::Repeat { repeats } => {
            if repeats.len() != n {
                return Err(bad(
                    "repeats",
                    format!("{:?}", repeats.as_slice()),
                    &format!("{} repeats for a rank-{n} input (one per dim)", repeats.len()),
                ));
            }
            let mut out = shape.to_vec();
            for (d, &r) in repeats.as_slice().iter().enumerate() {
                let r = count("repeats", r, "a repeat count")?;
                out[d] = mul(shape[d], r, "the repeated extent")?;
            }
            let mut fw = Map::new(&out, n);
            let mut bw = Map::new(shape, n);
            for (d, &r) in repeats.as_slice().iter().enumerate() {
                if r == 1 {
                    fw.set(d, G_AFFINE, d, 1);
                    bw.set(d, G_AFFINE, d, 1);
                } else {
                    fw.set(d, G_MOD, d, 1);
                    fw.a[d] = shape[d] as i64;
                    bw.set(d, G_EVERY, d, 1);
                    bw.a[d] = shape[d] as i64;
                    bw.b[d] = r;
                }
            }
            Ok(same(out, fw, bw, None))
        }
        LayoutOp::RepeatInterleave {
            repeats,
            dim,
            output_size,
        } => {
            let d = wrap_dim("dim", *dim, n)?;
            let ext = shape[d];
            let scalar = match repeats {
                Repeats::Scalar(r) => Some(*r),
                Repeats::PerIndex(v) if v.len() == 1 => Some(v[0]),
                Repeats::PerIndex(v) if v.len() != ext => {
                    return Err(bad(
                        "repeats",
                        format!("{} counts", v.len()),
                        &format!("repeats must have the extent {ext} of dim {d} (or one count)"),
                    ))
                }
                Repeats::PerIndex(_) => None,
            };
            let mut table = None;
            let total = match (scalar, repeats) {
                (Some(r), _) => mul(ext, count("repeats", r, "a repeat count")?, "the output extent")?,
                (None, Repeats::PerIndex(v)) => {
                    let mut starts = Vec::with_capacity(v.len() + 1);
                    let mut sum = 0usize;
                    starts.push(0i64);
                    for &r in v {
                        sum = sum
                            .checked_add(count("repeats", r, "a repeat count")?)
                            .filter(|&s| s <= i64::MAX as usize)
                            .ok_or_else(|| Error::Overflow {
                                op: OP,
                                what: "the sum of the repeats".into(),
                            })?;
                        starts.push(sum as i64);
                    }
                    table = Some(starts);
                    sum
                }
                (None, Repeats::Scalar(_)) => unreachable!("a scalar count is Some"),
            };
            if let Some(o) = output_size {
                if *o != total {
                    return Err(bad(
                        "output_size",
                        o.to_string(),
                        &format!("the repeats sum to {total}"),
                    ));
                }
            }
            let mut out = shape.to_vec();
            out[d] = total;
            let mut fw = Map::new(&out, n);
            let mut bw = Map::new(shape, n);
            for k in 0..n {
                fw.set(k, G_AFFINE, k, 1);
                bw.set(k, G_AFFINE, k, 1);
            }
            match scalar {
                Some(1) => {}
                Some(r) => {
                    fw.kind[d] = G_DIV;
                    fw.a[d] = r;
                    bw.kind[d] = G_BLOCK;
                    bw.a[d] = r;
                }
                None => {
                    fw.kind[d] = G_SEARCH;
                    fw.a[d] = ext as i64;
                    bw.kind[d] = G_SPAN;
                }
            }
            Ok(same(out, fw, bw, table))
        }
        LayoutOp::Diagonal { offset, dim1, dim2 } => {
            if n < 2 {
                return Err(bad(
                    "shape",
                    format!("{shape:?}"),
                    "diagonal takes at least 2 dims",
                ));
            }
            let (d1, d2) = diag_dims(*dim1, *dim2, n)?;
            let fw = diagonal_map(shape, d1, d2, *offset);
            let out = fw.out_shape[..fw.out_rank].to_vec();
            let bw = embed_map(shape, n - 1, d1, d2, *offset);
            Ok(same(out, fw, bw, None))
        }
        LayoutOp::DiagEmbed { offset, dim1, dim2 } => {
            if n < 1 {
                return Err(bad("shape", "[]".into(), "diag_embed takes at least 1 dim"));
            }
            let (d1, d2) = diag_dims(*dim1, *dim2, n + 1)?;
            let ext = (shape[n - 1] as u128 + u128::from(offset.unsigned_abs()))
                .try_into()
                .map_err(|_| Error::Overflow {
                    op: OP,
                    what: "the embedded extent".into(),
                })?;
            let mut out = Vec::with_capacity(n + 1);
            let mut batch = shape[..n - 1].iter();
            for d in 0..=n {
                out.push(if d == d1 || d == d2 {
                    ext
                } else {
                    *batch.next().unwrap_or(&0)
                });
            }
            let fw = embed_map(&out, n, d1, d2, *offset);
            let bw = diagonal_map(&out, d1, d2, *offset);
            Ok(same(out, fw, bw, None))
        }
        LayoutOp::Diag { offset } => match n {
            1 => resolve(
                &LayoutOp::DiagEmbed {
                    offset: *offset,
                    dim1: 0,
                    dim2: 1,
                },
                shape,
            ),
            2 => resolve(
                &LayoutOp::Diagonal {
                    offset: *offset,
                    dim1: 0,
                    dim2: 1,
                },
                shape,
            ),
            _ => Err(bad(
                "shape",
                format!("{shape:?}"),
                "diag takes a 1-D or 2-D input",
            )),
        },
        LayoutOp::Unfold { dim, size, step } => {
            let d = wrap_dim("dim", *dim, n)?;
            let ext = shape[d];
            let size_u = count("size", *size, "the window size")?;
            if size_u > ext {
                return Err(bad(
                    "size",
                    size.to_string(),
                    &format!("the maximum size for dim {d} is {ext}"),
                ));
            }
            if *step <= 0 {
                return Err(bad("step", step.to_string(), "the step must be > 0"));
            }
            let windows = (ext - size_u) / *step as usize + 1;
            let mut out = shape.to_vec();
            out[d] = windows;
            out.push(size_u);
            let mut fw = Map::new(&out, n);
            let mut bw = Map::new(shape, n + 1);
            for k in 0..n {
                fw.set(k, G_AFFINE, k, if k == d { *step } else { 1 });
                if k != d {
                    bw.set(k, G_AFFINE, k, 1);
                }
            }
            fw.set(n, G_AFFINE, d, 1);
            bw.set(d, G_WINDOWS, d, 1);
            bw.st2_coef[d][n] = 1;
            bw.a[d] = *step;
            bw.b[d] = *size;
            bw.c[d] = windows as i64;
            Ok(same(out, fw, bw, None))
        }
        LayoutOp::Slice {
            dim,
            start,
            stop,
            step,
        } => {
            let d = wrap_dim("dim", *dim, n)?;
            if *step <= 0 {
                return Err(bad("step", step.to_string(), "slice step must be positive"));
            }
            let ext = shape[d] as i128;
            let clamp = |v: i64| -> i128 {
                let v = i128::from(v);
                let v = if v < 0 { v + ext } else { v };
                v.clamp(0, ext)
            };
            let (lo, hi, st) = (clamp(*start), clamp(*stop), i128::from(*step));
            let len = if hi > lo { (hi - lo + st - 1) / st } else { 0 };
            let mut out = shape.to_vec();
            out[d] = len as usize;
            let mut fw = Map::new(&out, n);
            let mut bw = Map::new(shape, n);
            for k in 0..n {
                fw.set(k, G_AFFINE, k, if k == d { *step } else { 1 });
                bw.set(k, if k == d { G_UNSLICE } else { G_AFFINE }, k, 1);
            }
            fw.base_coef[d] = lo as i64;
            bw.a[d] = lo as i64;
            bw.b[d] = *step;
            bw.c[d] = len as i64;
            Ok(same(out, fw, bw, None))
        }
    }
}

/// The group kernels for one index width: by element, and by row (a warp
/// each).
#[derive(Clone, Debug)]
struct Kernels {
    scalar: Function,
    rows: Function,
    vec: Function,
    vec_rows: Function,
}

/// A [`LayoutOp`] from a rank-`N` input to a rank-`M` output: `y[o] =
/// x[src(o)]` (0 where diag_embed leaves its diagonal), and its backward
/// `dx[i] = sum of dy[o] over src(o) = i`.
///
/// # Shapes
/// `x`, `dx`: `desc.shape`; `y`, `dy`:
/// [`LayoutDescriptor::output_shape`], whose length `M` is the op's:
/// `N` (repeat, repeat_interleave, slice), `N - 1` (diagonal, diag of a
/// matrix), `N + 1` (diag_embed, diag of a vector, unfold); `N`, `M <= 8`.
/// No workspace.
/// # Layout
/// Any strides; `x` and `dy` may broadcast (stride 0). Outputs with rows
/// of 32 or more (2048 rows or more) whose last dim is a plain copy
/// (repeat, repeat_interleave, slice, diagonal's batch) run a warp per
/// row.
/// # Aliasing
/// Outputs must not overlap inputs (`InvalidArgument`).
/// # Dtypes
/// f32, f64, f16, bf16 (values are moved exactly; backwards that sum
/// several terms, repeat, repeat_interleave and unfold with overlapping
/// windows, sum in f32, f64 for f64, and round once). Others:
/// `Error::Unsupported`.
/// # Determinism
/// Bitwise: every output element is written by one thread, summing its
/// terms in a fixed order without atomics.
/// # Errors
/// From `select`: `DtypeMismatch` if `desc.element != T::KIND`;
/// `Unsupported` for another dtype or a rank past 8; `InvalidDescriptor`
/// for what PyTorch rejects: a dim out of range, identical diagonal dims,
/// repeats not one per dim (repeat) or not one per index (or one) along
/// the dim (repeat_interleave), a negative repeat count, an
/// `output_size` other than the repeats' sum, a window larger than the
/// extent or negative, a step below 1 (unfold, slice), diag of other than
/// 1 or 2 dims, diagonal of fewer than 2 dims, and (field `rank`) an `M`
/// other than the op's output rank; `Overflow` for an output extent past
/// `usize`; `PreferenceRejected` when `pref` forces a backend other than
/// `Baracuda`. From `run` and `run_bw`: `ShapeMismatch`,
/// `ContextMismatch`, `InvalidArgument` when an output overlaps an input.
pub struct LayoutPlan<T: Element, const N: usize, const M: usize> {
    desc: LayoutDescriptor<N>,
    out_shape: [usize; M],
    fw: Map,
    bw: Map,
    /// `repeat_interleave`'s per-index starts (`i64`, one more than the
    /// indices), on the device.
    table: Option<DeviceBuffer<i64>>,
    sku: KernelSku,
    k32: Kernels,
    k64: Kernels,
    grid_cap: u32,
    _t: PhantomData<T>,
}

impl<T: Element, const N: usize, const M: usize> Plan for LayoutPlan<T, N, M> {
    type Descriptor = LayoutDescriptor<N>;
    type Args<'a> = LayoutArgs<'a, T, N, M>;

    fn select(stream: &Stream, desc: &Self::Descriptor, pref: &PlanPreference) -> Result<Self> {
        let dt = float_dtype_code::<T, N>(OP, desc.element, "layout kernels take")?;
        if M > MAX_RANK {
            return Err(Error::Unsupported {
                op: OP,
                what: format!("output rank {M} > {MAX_RANK}"),
            });
        }
        pref.check_backend(OP, &[BackendKind::Baracuda])?;
        pref.check_workspace(OP, 0)?;
        let resolved = resolve(&desc.op, &desc.shape)?;
        if resolved.out_shape.len() != M {
            return Err(invalid_descriptor(
                OP,
                "rank",
                M.to_string(),
                &format!(
                    "{} of a rank-{N} input has rank {}",
                    desc.op.name(),
                    resolved.out_shape.len()
                ),
            ));
        }
        let module = stream.context().module(&shape_spec(dt))?;
        let load = |w: &str| -> Result<Kernels> {
            Ok(Kernels {
                scalar: module.function(&format!("shape_group{w}"))?,
                rows: module.function(&format!("shape_group_rows{w}"))?,
                vec: module.function(&format!("shape_group_vec{w}"))?,
                vec_rows: module.function(&format!("shape_group_vec_rows{w}"))?,
            })
        };
        let (k32, k64) = (load("32")?, load("64")?);
        let grid_cap = crate::launch::resident_blocks(stream, &k64.scalar, THREADS)?;
        let table = match &resolved.table {
            Some(t) => Some(DeviceBuffer::<i64>::from_host(stream, t)?),
            None => None,
        };
        Ok(LayoutPlan {
            desc: desc.clone(),
            out_shape: std::array::from_fn(|d| resolved.out_shape[d]),
            fw: resolved.fw,
            bw: resolved.bw,
            table,
            sku: own_float_sku::<T>(
                stream,
                format!("shape.{}", desc.op.name()),
                "group-map gather",
            ),
            k32,
            k64,
            grid_cap,
            _t: PhantomData,
        })
    }

    fn sku(&self) -> &KernelSku {
        &self.sku
    }

    fn workspace_size(&self) -> usize {
        0
    }

    fn run(&self, stream: &Stream, _workspace: Workspace<'_>, args: Self::Args<'_>) -> Result<()> {
        let (xs, ys) = (&self.desc.shape, &self.out_shape);
        check_views(
            OP,
            stream,
            &[View::of("x", xs, &args.x), View::of_mut("y", ys, &args.y)],
        )?;
        check_alias(OP, &Extent::of_mut("y", &args.y), &Extent::of("x", &args.x), false)?;
        // SAFETY: both views were bounds-checked at construction and match
        // the map's shapes (checked above); y is disjoint from x.
        unsafe {
            self.launch(
                stream,
                &self.fw,
                (args.y.data().ptr().cast(), args.y.strides()),
                (args.x.data().ptr().cast(), args.x.strides()),
            )
        }
    }
}

impl<T: Element, const N: usize, const M: usize> Backward for LayoutPlan<T, N, M> {
    type BwArgs<'a> = LayoutBwArgs<'a, T, N, M>;

    fn run_bw(
        &self,
        stream: &Stream,
        _workspace: Workspace<'_>,
        args: Self::BwArgs<'_>,
    ) -> Result<()> {
        let (xs, ys) = (&self.desc.shape, &self.out_shape);
        check_views(
            OP,
            stream,
            &[View::of("dy", ys, &args.dy), View::of_mut("dx", xs, &args.dx)],
        )?;
        check_alias(OP, &Extent::of_mut("dx", &args.dx), &Extent::of("dy", &args.dy), false)?;
        // SAFETY: as in `run`: views bounds-checked and matching the
        // backward map's shapes, dx disjoint from dy.
        unsafe {
            self.launch(
                stream,
                &self.bw,
                (args.dx.data().ptr().cast(), args.dx.strides()),
                (args.dy.data().ptr().cast(), args.dy.strides()),
            )
        }
    }
}

impl<T: Element, const N: usize, const M: usize> LayoutPlan<T, N, M> {
    /// The descriptor the plan was selected for.
    pub fn descriptor(&self) -> &LayoutDescriptor<N> {
        &self.desc
    }

    /// The shape of `y` and `dy`.
    pub fn output_shape(&self) -> [usize; M] {
        self.out_shape
    }

    /// Launch `map` from `inp` into `out`.
    ///
    /// # Safety
    /// `out` and `inp` must hold every element their strides reach over
    /// `map`'s output and input shapes, and must not overlap.
    unsafe fn launch(
        &self,
        stream: &Stream,
        map: &Map,
        out: (DevPtrMut<u8>, &[usize]),
        inp: (DevPtr<u8>, &[usize]),
    ) -> Result<()> {
        let table = self.table.as_ref().map_or(0, |t| t.as_slice().addr());
        let Some((p, path, items)) = launch_args(map, out, inp, table, size_of::<T>()) else {
            return Ok(());
        };
        let k = if p.n <= u64::from(u32::MAX) {
            &self.k32
        } else {
            &self.k64
        };
        let f = match path {
            Path::Element => &k.scalar,
            Path::Rows => &k.rows,
            Path::Vector => &k.vec,
            Path::VectorRows => &k.vec_rows,
        };
        let blocks = items
            .div_ceil(THREADS as usize)
            .clamp(1, self.grid_cap as usize) as u32;
        // SAFETY: forwarded from the caller's contract; the kernels reach
        // only the elements of the shapes in `p` (and the table's
        // `indices + 1` starts, which the plan owns).
        unsafe { launch_params(stream, f, LaunchConfig::linear(blocks, THREADS), p) }
    }
}

/// Output rows at least this long run a warp per row...
const ROW_MIN: usize = 32;
/// ... when there are at least this many rows.
const ROW_MIN_ROWS: usize = 2048;

/// Which group kernel runs.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
enum Path {
    /// A thread per output element.
    Element,
    /// A warp per output row.
    Rows,
    /// A thread per 16 bytes of consecutive outputs.
    Vector,
    /// A warp per output row, 16 bytes of consecutive outputs a lane (no
    /// sums).
    VectorRows,
}

/// The kernel parameters of `map` from `inp` into `out` (addresses and
/// element strides; `table` the per-index starts' address or 0; elements
/// of `elem` bytes), which kernel runs, and how many threads' items
/// (elements, 32 per row, or 16-byte vectors) it covers; None when the
/// output is empty.
fn launch_args(
    map: &Map,
    out: (DevPtrMut<u8>, &[usize]),
    inp: (DevPtr<u8>, &[usize]),
    table: u64,
    elem: usize,
) -> Option<(GroupArgs, Path, usize)> {
    let r = map.out_rank;
    let n: usize = map.out_shape[..r].iter().product();
    if n == 0 {
        return None;
    }
    let fold = |coef: &[i64; MAX_RANK]| -> i64 {
        (0..map.in_rank)
            .map(|k| coef[k].wrapping_mul(inp.1[k] as i64))
            .fold(0i64, i64::wrapping_add)
    };
    let p = GroupArgs {
        n: n as u64,
        rank: r as u32,
        pad0: 0,
        base: fold(&map.base_coef),
        out_shape: padded(map.out_shape[..r].iter().map(|&e| e as u64)),
        out_stride: padded(out.1.iter().map(|&s| s as i64)),
        kind: map.kind,
        partner: map.partner,
        st: std::array::from_fn(|d| fold(&map.st_coef[d])),
        st2: std::array::from_fn(|d| fold(&map.st2_coef[d])),
        a: map.a,
        b: map.b,
        c: map.c,
        table,
        out: out.0,
        inp: inp.0,
    };
    let width = if r > 0 { map.out_shape[r - 1] } else { 1 };
    let last_partner = r > 0
        && map.kind[..r]
            .iter()
            .zip(&map.partner)
            .any(|(&k, &q)| k == G_DIAG && q as usize == r - 1);
    let own_last =
        r > 0 && matches!(map.kind[r - 1], G_AFFINE | G_MOD | G_DIV | G_SEARCH) && !last_partner;
    let rows = own_last && !map.sums() && width >= ROW_MIN && n / width >= ROW_MIN_ROWS;
    if vector_ok(map, &p, out, elem) {
        let vec = 16 / elem;
        // a warp per row of 32 vectors or more, enough rows to fill the
        // device, the outer groups independent of the innermost coordinate
        if !last_partner && !map.sums() && width / vec >= ROW_MIN && n / width >= ROW_MIN_ROWS {
            return Some((p, Path::VectorRows, n / width * 32));
        }
        return Some((p, Path::Vector, n / vec));
    }
    let (path, items) = if rows {
        (Path::Rows, n / width * 32)
    } else {
        (Path::Element, n)
    };
    Some((p, path, items))
}

/// Whether the vector kernel can run `p` (of `map`, into `out`): the
/// innermost output dim contiguous, a multiple of the vector long and
/// 16-byte aligned with every other output stride; its group a copy
/// (G_AFFINE, or G_MOD whose period is a multiple of the vector) or
/// repeat's sum (G_EVERY) of a unit-stride x dim, or unfold's backward
/// (G_WINDOWS of a unit-stride window position, step and size multiples
/// of the vector); every other group of at most one term and none paired
/// with the innermost dim.
fn vector_ok(map: &Map, p: &GroupArgs, out: (DevPtrMut<u8>, &[usize]), elem: usize) -> bool {
    let r = map.out_rank;
    if r == 0 || !matches!(elem, 2 | 4 | 8) {
        return false;
    }
    let (vec, last) = (16 / elem, r - 1);
    let v = vec as i64;
    // the first term's offset steps by 1 along each aligned vector, the
    // other terms' likewise, and their count stays
    let inner = match map.kind[last] {
        G_AFFINE | G_EVERY => p.st[last] == 1,
        G_MOD => p.st[last] == 1 && p.a[last] % v == 0,
        // windows (and gaps) start and end on vector boundaries
        G_WINDOWS => p.st2[last] == 1 && p.a[last] % v == 0 && p.b[last] % v == 0,
        _ => false,
    };
    let sums = |k: u32| matches!(k, G_EVERY | G_BLOCK | G_SPAN | G_WINDOWS);
    let outer = map.kind[..last]
        .iter()
        .zip(&map.partner)
        .all(|(&k, &q)| !(sums(k) || k == G_DIAG && q as usize == last));
    inner
        && outer
        && map.out_shape[last] % vec == 0
        && out.1[last] == 1
        && out.1[..last].iter().all(|&s| s % vec == 0)
        && out.0.addr() % 16 == 0
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn out(op: LayoutOp, shape: &[usize]) -> Result<Vec<usize>> {
        resolve(&op, shape).map(|r| r.out_shape)
    }

    fn field(r: Result<impl core::fmt::Debug>) -> &'static str {
        match r {
            Err(Error::InvalidDescriptor { field, .. }) => field,
            other => panic!("expected InvalidDescriptor, got {other:?}"),
        }
    }

    fn diagonal(offset: i64, dim1: i64, dim2: i64) -> LayoutOp {
        LayoutOp::Diagonal { offset, dim1, dim2 }
    }

    fn embed(offset: i64, dim1: i64, dim2: i64) -> LayoutOp {
        LayoutOp::DiagEmbed { offset, dim1, dim2 }
    }

    fn unfold(dim: i64, size: i64, step: i64) -> LayoutOp {
        LayoutOp::Unfold { dim, size, step }
    }

    #[test]
    fn params_layout_matches_cuda() {
        // 8 + 4 + 4 + 8 + 2 * 64 + 2 * 32 + 5 * 64 + 3 * 8
        assert_eq!(std::mem::size_of::<GroupArgs>(), 560);
    }

    #[test]
    fn output_shapes() {
        assert_eq!(out(LayoutOp::repeat(&[2, 1, 3]), &[4, 5, 6]), Ok(vec![8, 5, 18]));
        assert_eq!(out(LayoutOp::repeat(&[]), &[]), Ok(vec![]));
        assert_eq!(out(LayoutOp::repeat_interleave(3, -1), &[4, 5]), Ok(vec![4, 15]));
        assert_eq!(
            out(LayoutOp::repeat_interleave_per_index(&[1, 0, 4], 0, Some(5)), &[3, 2]),
            Ok(vec![5, 2])
        );
        assert_eq!(
            out(LayoutOp::repeat_interleave_per_index(&[2], 1, None), &[3, 2]),
            Ok(vec![3, 4])
        );
        assert_eq!(out(diagonal(0, 0, 1), &[3, 4]), Ok(vec![3]));
        assert_eq!(out(diagonal(2, 0, 1), &[3, 4]), Ok(vec![2]));
        assert_eq!(out(diagonal(-2, 0, 1), &[3, 4]), Ok(vec![1]));
        assert_eq!(out(diagonal(9, 0, 1), &[3, 4]), Ok(vec![0]));
        assert_eq!(out(diagonal(1, -1, 0), &[2, 5, 3]), Ok(vec![5, 1]));
        assert_eq!(out(diagonal(-1, -1, 0), &[2, 5, 3]), Ok(vec![5, 2]));
        assert_eq!(out(embed(0, -2, -1), &[2, 3]), Ok(vec![2, 3, 3]));
        assert_eq!(out(embed(-1, 0, 2), &[2, 3]), Ok(vec![4, 2, 4]));
        assert_eq!(out(LayoutOp::Diag { offset: 1 }, &[3]), Ok(vec![4, 4]));
        assert_eq!(out(LayoutOp::Diag { offset: -1 }, &[3, 5]), Ok(vec![2]));
        assert_eq!(out(unfold(1, 3, 2), &[2, 8]), Ok(vec![2, 3, 3]));
        assert_eq!(out(unfold(0, 0, 1), &[4]), Ok(vec![5, 0]));
        assert_eq!(out(LayoutOp::slice(0, 1, 8, 3), &[10, 2]), Ok(vec![3, 2]));
        assert_eq!(out(LayoutOp::slice(-1, -3, i64::MAX, 1), &[4, 10]), Ok(vec![4, 3]));
        assert_eq!(out(LayoutOp::slice(0, 7, 2, 1), &[10]), Ok(vec![0]));
        assert_eq!(out(LayoutOp::slice(0, -100, 100, 4), &[10]), Ok(vec![3]));
    }

    #[test]
    fn pytorch_rejections_are_invalid_descriptors() {
        assert_eq!(field(out(LayoutOp::repeat(&[2]), &[2, 3])), "repeats");
        assert_eq!(field(out(LayoutOp::repeat(&[2, -1]), &[2, 3])), "repeats");
        assert_eq!(field(out(LayoutOp::repeat_interleave(-1, 0), &[2, 3])), "repeats");
        assert_eq!(field(out(LayoutOp::repeat_interleave(2, 2), &[2, 3])), "dim");
        let per = LayoutOp::repeat_interleave_per_index;
        assert_eq!(field(out(per(&[1, 2], 1, None), &[2, 3])), "repeats");
        assert_eq!(field(out(per(&[1, -2, 1], 1, None), &[2, 3])), "repeats");
        assert_eq!(field(out(per(&[1, 2, 1], 1, Some(5)), &[2, 3])), "output_size");
        assert_eq!(field(out(diagonal(0, 1, -1), &[2, 2])), "dim2");
        assert_eq!(field(out(diagonal(0, 0, 2), &[2, 2])), "dim2");
        assert_eq!(field(out(diagonal(0, 0, 0), &[4])), "shape");
        assert_eq!(field(out(embed(0, 0, 3), &[2, 2])), "dim2");
        assert_eq!(field(out(embed(0, 0, 0), &[2, 2])), "dim2");
        assert_eq!(field(out(embed(0, 0, 1), &[])), "shape");
        assert_eq!(field(out(LayoutOp::Diag { offset: 0 }, &[2, 2, 2])), "shape");
        assert_eq!(field(out(unfold(0, 5, 1), &[4])), "size");
        assert_eq!(field(out(unfold(0, -1, 1), &[4])), "size");
        assert_eq!(field(out(unfold(0, 2, 0), &[4])), "step");
        assert_eq!(field(out(unfold(1, 2, 1), &[4])), "dim");
        assert_eq!(field(out(LayoutOp::slice(0, 0, 4, 0), &[4])), "step");
        assert_eq!(field(out(LayoutOp::slice(0, 0, 4, -1), &[4])), "step");
        assert_eq!(field(out(LayoutOp::slice(-2, 0, 4, 1), &[4])), "dim");
        assert!(matches!(
            out(LayoutOp::repeat(&[i64::MAX, 4]), &[2, 3]),
            Err(Error::Overflow { .. })
        ));
    }

    #[test]
    fn row_kernel_needs_a_plain_last_dim() {
        let path = |op: LayoutOp, shape: &[usize], fw: bool| {
            let r = resolve(&op, shape).unwrap();
            let map = if fw { r.fw } else { r.bw };
            let st = [1usize; MAX_RANK];
            launch_args(
                &map,
                (DevPtrMut::from_addr(512), &st[..map.out_rank]),
                (DevPtr::from_addr(256), &st[..map.in_rank]),
                0,
                4,
            )
            .map(|(_, path, items)| (path == Path::Rows, items))
        };
        let rep = LayoutOp::repeat(&[1, 4]);
        assert_eq!(path(rep.clone(), &[4096, 64], true), Some((true, 4096 * 32)));
        // the backward sums: by element
        assert_eq!(path(rep.clone(), &[4096, 64], false), Some((false, 4096 * 64)));
        assert_eq!(path(rep, &[16, 64], true), Some((false, 16 * 256)));
        // diag_embed's pair ends the output: by element
        assert_eq!(path(embed(0, -2, -1), &[4096, 40], true), Some((false, 4096 * 1600)));
        // ... but not when the pair leads: [4096, 4096, 40] by row
        assert_eq!(path(embed(0, 0, 1), &[40, 4096], true), Some((true, 4096 * 4096 * 32)));
        assert_eq!(path(LayoutOp::slice(0, 0, 0, 1), &[4, 4], true), None);
    }

    #[test]
    fn vector_kernel_needs_a_contiguous_unit_stride_last_dim() {
        let path = |op: LayoutOp, shape: &[usize], fw: bool, elem: usize| {
            let r = resolve(&op, shape).unwrap();
            let map = if fw { r.fw } else { r.bw };
            let o = map.out_shape[..map.out_rank].to_vec();
            let i = if fw { shape.to_vec() } else { r.out_shape.clone() };
            let (ost, ist) = (strides_of(&o, false), strides_of(&i, false));
            launch_args(
                &map,
                (DevPtrMut::from_addr(512), &ost),
                (DevPtr::from_addr(256), &ist),
                0,
                elem,
            )
            .map(|(_, path, items)| (path, items))
        };
        let rep = LayoutOp::repeat(&[1, 4]);
        let n = 4096 * 4096;
        // rows of 32 vectors or more, 2048 rows or more: a warp per row
        assert_eq!(path(rep.clone(), &[4096, 4096], true, 2), Some((Path::VectorRows, 4096 * 32)));
        assert_eq!(path(rep.clone(), &[1024, 4096], true, 2), Some((Path::Vector, 4 * 1024 * 4096 / 8)));
        // the backward sums the copies along the row: vectors of dx, a
        // thread each (a warp per row measured slower for sums)
        assert_eq!(path(rep.clone(), &[4096, 4096], false, 4), Some((Path::Vector, n / 4)));
        assert_eq!(path(rep.clone(), &[4096, 64], false, 4), Some((Path::Vector, 4096 * 64 / 4)));
        // a period that is no multiple of the vector: by row
        assert_eq!(path(rep, &[4096, 66], true, 4), Some((Path::Rows, 4096 * 32)));
        // sums over an outer dim too: by element
        let rep2 = LayoutOp::repeat(&[2, 4]);
        assert_eq!(path(rep2, &[512, 1024], false, 4), Some((Path::Element, 512 * 1024)));
        // unfold's windows along the row
        let unfold = LayoutOp::Unfold { dim: 1, size: 64, step: 32 };
        assert_eq!(path(unfold.clone(), &[1024, 16384], true, 4), Some((Path::Vector, 1024 * 511 * 16)));
        assert_eq!(path(unfold, &[1024, 16384], false, 4), Some((Path::Vector, 1024 * 4096)));
        // a step that is no multiple of the vector: by element
        let unfold = LayoutOp::Unfold { dim: 1, size: 64, step: 30 };
        assert_eq!(path(unfold, &[1024, 16384], false, 4).map(|p| p.0), Some(Path::Element));
        // diag_embed's pair ends the output
        assert_eq!(path(embed(0, -2, -1), &[4096, 40], true, 4).map(|p| p.0), Some(Path::Element));
    }

    /// The progression `(first, step, count)` of the group at dim `d` of
    /// output coordinates `c`, as shape.cu's `group_prog`.
    fn prog(p: &GroupArgs, d: usize, c: &[i64; MAX_RANK], table: &[i64]) -> (i64, i64, i64) {
        let (o, st, a, b) = (c[d], p.st[d], p.a[d], p.b[d]);
        match p.kind[d] {
            G_AFFINE => (o * st, 0, 1),
            G_MOD => ((o % a) * st, 0, 1),
            G_DIV => ((o / a) * st, 0, 1),
            G_SEARCH => {
                let (mut lo, mut hi) = (0i64, a);
                while hi - lo > 1 {
                    let mid = lo + (hi - lo) / 2;
                    if table[mid as usize] <= o {
                        lo = mid;
                    } else {
                        hi = mid;
                    }
                }
                (lo * st, 0, 1)
            }
            G_EVERY => (o * st, a * st, b),
            G_BLOCK => (o * a * st, st, a),
            G_SPAN => {
                let t0 = table[o as usize];
                (t0 * st, st, table[o as usize + 1] - t0)
            }
            G_WINDOWS => {
                let v = o - b + 1;
                let lo = if v <= 0 { 0 } else { (v + a - 1) / a };
                let hi = (o / a).min(p.c[d] - 1);
                let n = if hi >= lo { hi - lo + 1 } else { 0 };
                (lo * st + (o - lo * a) * p.st2[d], st - a * p.st2[d], n)
            }
            G_UNSLICE => {
                let v = o - a;
                if v < 0 || v % b != 0 || v / b >= p.c[d] {
                    (0, 0, 0)
                } else {
                    ((v / b) * st, 0, 1)
                }
            }
            G_DIAG => {
                let o2 = c[p.partner[d] as usize];
                if o2 - o != a {
                    (0, 0, 0)
                } else {
                    ((if a >= 0 { o } else { o2 }) * st, 0, 1)
                }
            }
            k => panic!("kind {k}"),
        }
    }

    /// The output coordinates of linear index `i` and its output offset.
    fn coords(p: &GroupArgs, i: usize) -> ([i64; MAX_RANK], i64) {
        let mut c = [0i64; MAX_RANK];
        let (mut rem, mut oo) = (i, 0i64);
        for d in (0..p.rank as usize).rev() {
            let ext = p.out_shape[d] as usize;
            c[d] = (rem % ext) as i64;
            rem /= ext;
            oo += c[d] * p.out_stride[d];
        }
        (c, oo)
    }

    /// The group kernel on the host, as shape.cu runs it: `y` (of the
    /// map's output shape, at `out_strides`) from `x` read at offsets.
    fn emulate(p: &GroupArgs, x: &[f64], table: &[i64], y: &mut [f64]) {
        let r = p.rank as usize;
        for i in 0..p.n as usize {
            let (c, oo) = coords(p, i);
            let mut off = p.base;
            let mut none = false;
            // as shape.cu: the first progression of several terms (s0,
            // c0), then the rest
            let (mut s0, mut c0) = (0i64, 1i64);
            let mut progs = Vec::new();
            for d in 0..r {
                if p.kind[d] == G_NONE {
                    continue;
                }
                let (first, step, count) = prog(p, d, &c, table);
                if count <= 0 {
                    none = true;
                }
                off += first;
                if count > 1 {
                    if c0 == 1 {
                        (s0, c0) = (step, count);
                    } else {
                        progs.push((step, count));
                    }
                }
            }
            let v = if none {
                0.0
            } else if c0 == 1 {
                x[off as usize]
            } else {
                let mut acc = x[off as usize];
                for k0 in 0..c0 {
                    let mut o = off + k0 * s0;
                    let mut idx = vec![0i64; progs.len()];
                    let mut first = k0 == 0;
                    loop {
                        if !first {
                            acc += x[o as usize];
                        }
                        first = false;
                        let mut g = progs.len();
                        let mut done = true;
                        while g > 0 {
                            g -= 1;
                            idx[g] += 1;
                            if idx[g] < progs[g].1 {
                                o += progs[g].0;
                                done = false;
                                break;
                            }
                            o -= progs[g].0 * (progs[g].1 - 1);
                            idx[g] = 0;
                        }
                        if done {
                            break;
                        }
                    }
                }
                acc
            };
            y[oo as usize] = v;
        }
    }

    /// The vector kernel on the host, as shape.cu's `group_vec` runs it
    /// with `vec` elements per vector: the progressions of each vector's
    /// first element, its terms read at `vec` consecutive offsets.
    fn emulate_vec(p: &GroupArgs, x: &[f64], table: &[i64], y: &mut [f64], vec: usize) {
        let (r, last) = (p.rank as usize, p.rank as usize - 1);
        for g in 0..p.n as usize / vec {
            let (c, oo) = coords(p, g * vec);
            let mut off = p.base;
            let mut none = false;
            for d in 0..r {
                if p.kind[d] == G_NONE {
                    continue;
                }
                let (first, step, count) = prog(p, d, &c, table);
                none |= count <= 0;
                off += first;
                if d == last {
                    for k in 0..vec {
                        let mut acc = 0.0;
                        if !none {
                            for t in 0..count {
                                let v = x[(off + t * step) as usize + k];
                                acc = if t == 0 { v } else { acc + v };
                            }
                        }
                        y[oo as usize + k] = acc;
                    }
                }
            }
        }
    }

    /// Row-major strides, or with `transposed` column-major ones.
    fn strides_of(shape: &[usize], transposed: bool) -> Vec<usize> {
        let mut st = vec![0; shape.len()];
        let mut acc = 1;
        let order: Vec<usize> = if transposed {
            (0..shape.len()).collect()
        } else {
            (0..shape.len()).rev().collect()
        };
        for d in order {
            st[d] = acc;
            acc *= shape[d].max(1);
        }
        st
    }

    /// `map` run on the host from a row-major-logical `x` stored with
    /// `in_st` into a row-major output, returned in logical order.
    fn run_map(map: &Map, x: &[f64], in_shape: &[usize], in_st: &[usize], table: &[i64]) -> Vec<f64> {
        // store x at its strides
        let len = in_shape
            .iter()
            .zip(in_st)
            .map(|(&e, &s)| e.saturating_sub(1) * s)
            .sum::<usize>()
            + 1;
        let mut buf = vec![f64::NAN; len];
        let n_x: usize = in_shape.iter().product();
        for (i, &v) in x.iter().enumerate().take(n_x) {
            let (mut rem, mut off) = (i, 0);
            for d in (0..in_shape.len()).rev() {
                off += rem % in_shape[d] * in_st[d];
                rem /= in_shape[d];
            }
            buf[off] = v;
        }
        let out = &map.out_shape[..map.out_rank];
        let out_st = strides_of(out, false);
        let n: usize = out.iter().product();
        let mut y = vec![f64::NAN; n];
        if let Some((p, _, _)) = launch_args(
            map,
            (DevPtrMut::from_addr(0), &out_st),
            (DevPtr::from_addr(0), in_st),
            0,
            4,
        ) {
            emulate(&p, &buf, table, &mut y);
            // where the vector kernel would run (vectors of 2, 4 or 8
            // elements), it writes the same values
            for elem in [8, 4, 2] {
                if vector_ok(map, &p, (DevPtrMut::from_addr(0), &out_st), elem) {
                    let mut v = vec![f64::NAN; n];
                    emulate_vec(&p, &buf, table, &mut v, 16 / elem);
                    let same = y.iter().zip(&v).all(|(a, b)| a.to_bits() == b.to_bits());
                    assert!(same, "vector kernel ({elem}-byte elements): {v:?}, elements: {y:?}");
                }
            }
        }
        y
    }

    fn noise(n: usize, seed: u64) -> Vec<f64> {
        (0..n)
            .map(|i| ((i as u64 * 2654435761 + seed * 97) % 1000) as f64 / 250.0 - 2.0)
            .collect()
    }

    /// Every op's maps, run as the kernel runs them on row-major and
    /// transposed inputs, match the f64 references forward and backward.
    #[test]
    fn maps_match_the_references() {
        let per = LayoutOp::repeat_interleave_per_index;
        let cases: Vec<(LayoutOp, Vec<usize>)> = vec![
            (LayoutOp::repeat(&[2, 1, 3]), vec![3, 4, 5]),
            (LayoutOp::repeat(&[1, 0]), vec![3, 4]),
            (LayoutOp::repeat(&[2, 3, 2, 2]), vec![2, 3, 1, 2]),
            (LayoutOp::repeat(&[]), vec![]),
            (LayoutOp::repeat_interleave(3, 1), vec![3, 4, 2]),
            (LayoutOp::repeat_interleave(0, 0), vec![3, 4]),
            (per(&[2, 0, 3, 1], -2, None), vec![4, 3]),
            (per(&[0, 0, 2], 1, Some(2)), vec![2, 3]),
            (per(&[2], 0, None), vec![3, 2]),
            (diagonal(0, 0, 1), vec![4, 4]),
            (diagonal(2, 0, 1), vec![3, 5]),
            (diagonal(-1, 2, 0), vec![3, 2, 5]),
            (diagonal(1, -1, 1), vec![2, 4, 3, 5]),
            (diagonal(9, 0, 1), vec![3, 3]),
            (embed(0, -2, -1), vec![2, 3]),
            (embed(2, 0, 2), vec![2, 3]),
            (embed(-1, 2, 1), vec![3, 2, 4]),
            (LayoutOp::Diag { offset: 1 }, vec![4]),
            (LayoutOp::Diag { offset: -2 }, vec![4, 5]),
            (unfold(1, 3, 2), vec![2, 8, 3]),
            (unfold(0, 2, 5), vec![11]),
            (unfold(-1, 4, 1), vec![3, 6]),
            (unfold(0, 0, 1), vec![4]),
            (LayoutOp::slice(1, 1, 7, 2), vec![3, 8]),
            (LayoutOp::slice(0, -3, i64::MAX, 1), vec![5, 2]),
            (LayoutOp::slice(-1, 6, 2, 1), vec![3, 8]),
            // the vector kernel: repeat along the row, unfold both ways
            (LayoutOp::repeat(&[1, 2]), vec![3, 4]),
            (LayoutOp::repeat(&[2, 4]), vec![1, 8]),
            (unfold(1, 4, 2), vec![2, 8]),
        ];
        for (op, shape) in cases {
            check_op(&op, &shape);
        }
    }

    /// `op`'s maps on `shape`, run as the kernels run them (the element,
    /// and where it applies the vector kernel) on row-major and transposed
    /// inputs, against the f64 references forward and backward.
    fn check_op(op: &LayoutOp, shape: &[usize]) {
        use crate::shape::reference as rf;
        let r = resolve(op, shape).unwrap();
        let x = noise(shape.iter().product(), 1);
        let dy = noise(r.out_shape.iter().product(), 2);
        let (want_y, want_dx) = rf::layout(op, shape, &x, Some(&dy));
        let want_dx = want_dx.unwrap();
        let table = r.table.clone().unwrap_or_default();
        for transposed in [false, true] {
            let what = format!("{op:?} on {shape:?} (transposed {transposed})");
            let y = run_map(&r.fw, &x, shape, &strides_of(shape, transposed), &table);
            assert_eq!(y, want_y, "{what} forward");
            let out = &r.out_shape;
            let dx = run_map(&r.bw, &dy, out, &strides_of(out, transposed), &table);
            assert_eq!(dx.len(), want_dx.len(), "{what} backward");
            for (g, w) in dx.iter().zip(&want_dx) {
                assert!((g - w).abs() < 1e-12, "{what} backward: {dx:?} vs {want_dx:?}");
            }
        }
    }

    /// A layout op of rank-`rank` input drawn at random, often invalid.
    fn any_op(rank: usize) -> impl Strategy<Value = LayoutOp> {
        let r = rank as i64;
        let dim = move || -r - 1..r + 1;
        prop_oneof![
            proptest::collection::vec(-1i64..4, rank..rank + 2)
                .prop_map(|v| LayoutOp::repeat(&v)),
            (-1i64..4, dim()).prop_map(|(k, d)| LayoutOp::repeat_interleave(k, d)),
            (proptest::collection::vec(0i64..4, 0..7), dim(), 0usize..3).prop_map(
                |(c, d, size)| {
                    let total = c.iter().sum::<i64>() as usize;
                    let size = [None, Some(total), Some(total + 1)][size];
                    LayoutOp::repeat_interleave_per_index(&c, d, size)
                }
            ),
            (-4i64..5, dim(), dim()).prop_map(|(o, a, b)| LayoutOp::Diagonal {
                offset: o,
                dim1: a,
                dim2: b,
            }),
            (-4i64..5, -r - 2..r + 2, -r - 2..r + 2).prop_map(|(o, a, b)| {
                LayoutOp::DiagEmbed {
                    offset: o,
                    dim1: a,
                    dim2: b,
                }
            }),
            (-4i64..5).prop_map(|offset| LayoutOp::Diag { offset }),
            (dim(), -1i64..7, -1i64..5).prop_map(|(dim, size, step)| LayoutOp::Unfold {
                dim,
                size,
                step,
            }),
            (dim(), -9i64..9, prop_oneof![-9i64..9, Just(i64::MAX)], -1i64..4).prop_map(
                |(d, start, stop, step)| LayoutOp::slice(d, start, stop, step)
            ),
        ]
    }

    proptest::proptest! {
        #![proptest_config(crate::fuzz::config())]

        /// Random ops on small shapes: `resolve` returns maps or a typed
        /// error, never panics; the maps (element and vector kernels)
        /// match the references both ways and read only inside x and dy.
        #[test]
        fn random_layout_ops_resolve_or_fail_typed(
            (shape, op) in (0usize..4)
                .prop_flat_map(|rank| (proptest::collection::vec(0usize..7, rank), any_op(rank)))
        ) {
            match resolve(&op, &shape) {
                Ok(_) => check_op(&op, &shape),
                Err(e) => crate::fuzz::typed("layout", &e)?,
            }
        }
    }

    #[test]
    fn strides_fold_into_groups() {
        // diagonal of a [3, 4] x with strides (10, 1), offset 1: y[k] =
        // x[k, k + 1], stride 11, base 1
        let r = resolve(&diagonal(1, 0, 1), &[3, 4]).unwrap();
        let (p, _, _) = launch_args(
            &r.fw,
            (DevPtrMut::from_addr(512), &[1]),
            (DevPtr::from_addr(256), &[10, 1]),
            0,
            4,
        )
        .unwrap();
        assert_eq!((p.base, p.st[0], p.kind[0], p.n), (1, 11, G_AFFINE, 3));
        // unfold dim 1 of [2, 9] strides (9, 1), size 3 step 2: windows
        // stride 2, inside stride 1
        let r = resolve(&unfold(1, 3, 2), &[2, 9]).unwrap();
        let (p, _, _) = launch_args(
            &r.fw,
            (DevPtrMut::from_addr(512), &[12, 3, 1]),
            (DevPtr::from_addr(256), &[9, 1]),
            0,
            4,
        )
        .unwrap();
        assert_eq!(p.st[..3], [9, 2, 1]);
        // its backward: windows of dy strides (12, 3, 1)
        let (p, _, _) = launch_args(
            &r.bw,
            (DevPtrMut::from_addr(512), &[9, 1]),
            (DevPtr::from_addr(256), &[12, 3, 1]),
            0,
            4,
        )
        .unwrap();
        assert_eq!((p.kind[1], p.st[1], p.st2[1], p.a[1], p.b[1], p.c[1]), (G_WINDOWS, 3, 1, 2, 3, 4));
    }
}
