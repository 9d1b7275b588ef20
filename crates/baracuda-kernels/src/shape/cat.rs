//! `torch.cat` and `torch.stack`, forward and backward: strided copies of
//! each input into its slice of the output (and of each slice of `dy` into
//! its input's gradient).
//!
//! Every input is one piece of a batched copy kernel (up to
//! [`CAT_PIECES`] per launch, one grid row each); a piece whose two sides
//! are contiguous and aligned along their innermost dim moves 16-byte
//! words, others narrower words down to one element.

use core::marker::PhantomData;

use baracuda_driver::{Function, LaunchConfig, Stream};
use baracuda_kernels_types::{
    BackendKind, DevPtr, DevPtrMut, Element, ElementKind, Error, KernelSku, MathPrecision,
    PlanPreference, PrecisionGuarantee, Result, Shape, TensorMut, TensorRef, Workspace, MAX_RANK,
};

use super::gather::{shape_spec, THREADS};
use crate::checks::{
    check_alias, check_ctx, check_element, check_shape, invalid_descriptor, Extent,
};
use crate::kernel_sources::kinds_except;
use crate::elementwise::layout::collapse;
use crate::launch::launch_params;
use crate::plan::own_float_sku;
use crate::{Backward, Plan};

/// Pieces one copy launch takes (`CAT_PIECES` in shape.cu).
pub const CAT_PIECES: usize = 8;

/// `CopyPiece` of shape.cu.
#[repr(C)]
#[derive(Copy, Clone, Debug)]
struct CopyPiece {
    src: DevPtr<u8>,
    dst: DevPtrMut<u8>,
    n: u64,
    rank: u32,
    pad0: u32,
    shape: [u64; MAX_RANK],
    src_stride: [i64; MAX_RANK],
    dst_stride: [i64; MAX_RANK],
}

/// Pieces of at most two dims one copy launch takes (`CAT_PIECES2` in
/// shape.cu): a cat of 32 contiguous inputs moves in one launch.
pub const CAT_PIECES2: usize = 36;

/// `CopyPiece2` of shape.cu.
#[repr(C)]
#[derive(Copy, Clone, Debug)]
struct CopyPiece2 {
    src: DevPtr<u8>,
    dst: DevPtrMut<u8>,
    rows: u32,
    cols: u32,
    src_stride: [i64; 2],
    dst_stride: [i64; 2],
}

/// `CopyArgs2` of shape.cu.
#[repr(C)]
#[derive(Copy, Clone, Debug)]
struct CopyArgs2 {
    pieces: u32,
    pad0: u32,
    piece: [CopyPiece2; CAT_PIECES2],
}

const EMPTY_PIECE2: CopyPiece2 = CopyPiece2 {
    src: DevPtr::NULL,
    dst: DevPtrMut::NULL,
    rows: 0,
    cols: 0,
    src_stride: [0; 2],
    dst_stride: [0; 2],
};

/// `CopyArgs` of shape.cu.
#[repr(C)]
#[derive(Copy, Clone, Debug)]
struct CopyArgs {
    pieces: u32,
    pad0: u32,
    piece: [CopyPiece; CAT_PIECES],
}

const EMPTY_PIECE: CopyPiece = CopyPiece {
    src: DevPtr::NULL,
    dst: DevPtrMut::NULL,
    n: 0,
    rank: 0,
    pad0: 0,
    shape: [1; MAX_RANK],
    src_stride: [0; MAX_RANK],
    dst_stride: [0; MAX_RANK],
};

/// Word widths of the copy kernels, widest first.
const WORDS: [usize; 5] = [16, 8, 4, 2, 1];

/// One strided copy: a logical shape, the source's address and element
/// strides, the destination's.
struct CopyPair {
    shape: Vec<usize>,
    src: (DevPtr<u8>, Vec<usize>),
    dst: (DevPtrMut<u8>, Vec<usize>),
}

/// A part (an input or its gradient) and its slice of the whole (the
/// output or its gradient): the part's shape, then the slice's address
/// and element strides, then the part's.
struct Piece {
    shape: Vec<usize>,
    slice: (DevPtr<u8>, Vec<usize>),
    part: (DevPtr<u8>, Vec<usize>),
}

impl Piece {
    /// The copy of the part into the slice (forward), or of the slice
    /// into the part (backward). The written side was a writable view.
    fn copy(self, into_slice: bool) -> CopyPair {
        let (src, dst) = if into_slice {
            (self.part, self.slice)
        } else {
            (self.slice, self.part)
        };
        CopyPair {
            shape: self.shape,
            src,
            dst: (DevPtrMut::from_addr(dst.0.addr()), dst.1),
        }
    }
}

/// The copy kernels of one element type: `[word width][index width]`,
/// for pieces of up to eight dims (`wide`) and of up to two (`flat`).
#[derive(Clone, Debug)]
struct CopyKernels {
    wide: Vec<[Function; 2]>,
    flat: Vec<[Function; 2]>,
    grid_cap: u32,
}

impl CopyKernels {
    /// The copy kernels, which move words whatever the element type: the
    /// f32 specialisation of the family's module serves every dtype.
    fn load(stream: &Stream) -> Result<Self> {
        let module = stream.context().module(&shape_spec(0))?;
        let (mut wide, mut flat) = (Vec::new(), Vec::new());
        for w in WORDS {
            wide.push([
                module.function(&format!("shape_copy{w}_32"))?,
                module.function(&format!("shape_copy{w}_64"))?,
            ]);
            flat.push([
                module.function(&format!("shape_copy2_{w}_32"))?,
                module.function(&format!("shape_copy2_{w}_64"))?,
            ]);
        }
        let grid_cap = crate::launch::resident_blocks(stream, &wide[0][1], THREADS)?;
        Ok(CopyKernels {
            wide,
            flat,
            grid_cap,
        })
    }

    /// Copy every `(src, dst)` pair of one logical `shape` each, with
    /// element strides; elements of `size` bytes.
    ///
    /// # Safety
    /// Each pair's views must hold every element their strides reach over
    /// its shape, and no destination may overlap a source or another
    /// destination.
    unsafe fn copy(&self, stream: &Stream, size: usize, pairs: &[CopyPair]) -> Result<()> {
        for launch in copy_launches(size, pairs) {
            let (word, k, most) = launch.extent();
            let w = WORDS.iter().position(|&x| x == word).unwrap_or(4);
            let index64 = usize::from(most > u32::MAX as usize);
            let blocks = most
                .div_ceil(THREADS as usize)
                .clamp(1, (self.grid_cap as usize / k).max(1)) as u32;
            let cfg = LaunchConfig {
                grid: (blocks, k as u32, 1),
                block: (THREADS, 1, 1),
                smem_bytes: 0,
            };
            match launch {
                // SAFETY: forwarded from the caller's contract; each piece
                // reaches only its views' elements, in words that
                // `copy_launches` keeps inside and aligned.
                Launch::Wide(_, args) => unsafe {
                    launch_params(stream, &self.wide[w][index64], cfg, args)
                },
                // SAFETY: as above.
                Launch::Flat(_, args) => unsafe {
                    launch_params(stream, &self.flat[w][index64], cfg, args)
                },
            }?;
        }
        Ok(())
    }
}

/// One launch of the copy kernels: its word width and pieces.
#[allow(clippy::large_enum_variant)] // both are ~2 KB parameter blocks, passed by value once
enum Launch {
    /// Pieces of up to eight dims.
    Wide(usize, CopyArgs),
    /// Pieces of up to two dims.
    Flat(usize, CopyArgs2),
}

impl Launch {
    /// Word width, pieces, and the most words of one piece.
    fn extent(&self) -> (usize, usize, usize) {
        match self {
            Launch::Wide(w, a) => {
                let k = a.pieces as usize;
                let most = a.piece[..k].iter().map(|p| p.n).max().unwrap_or(0);
                (*w, k, most as usize)
            }
            Launch::Flat(w, a) => {
                let k = a.pieces as usize;
                let most = a.piece[..k]
                    .iter()
                    .map(|p| u64::from(p.rows) * u64::from(p.cols))
                    .max()
                    .unwrap_or(0);
                (*w, k, most as usize)
            }
        }
    }
}

/// The piece as a [`CopyPiece2`] when it has at most two dims, each
/// under 2^32 words.
fn flat_piece(p: &CopyPiece) -> Option<CopyPiece2> {
    let r = p.rank as usize;
    if r > 2 || p.shape[..r].iter().any(|&e| e > u64::from(u32::MAX)) {
        return None;
    }
    // one dim: a single row
    let (rows, cols) = if r == 2 {
        (p.shape[0], p.shape[1])
    } else {
        (1, p.shape[0])
    };
    let st = |s: &[i64; MAX_RANK]| if r == 2 { [s[0], s[1]] } else { [0, s[0]] };
    Some(CopyPiece2 {
        src: p.src,
        dst: p.dst,
        rows: rows as u32,
        cols: cols as u32,
        src_stride: st(&p.src_stride),
        dst_stride: st(&p.dst_stride),
    })
}

/// The launches of a copy of `pairs` with elements of `size` bytes: each
/// pair collapsed to its fewest dims and moved in the widest word both
/// sides allow, then batched by word width: up to [`CAT_PIECES2`] pieces
/// of at most two dims a launch, up to [`CAT_PIECES`] of more. Empty pairs
/// are left out.
fn copy_launches(size: usize, pairs: &[CopyPair]) -> Vec<Launch> {
    let mut pieces: Vec<(usize, CopyPiece)> = Vec::new();
    for CopyPair {
        shape,
        src: (src, ss),
        dst: (dst, ds),
    } in pairs
    {
        if shape.contains(&0) {
            continue;
        }
        let (cs, st) = collapse(shape, &[ds, ss]);
        let (mut cs, mut dst_st, mut src_st) = (cs, st[0].clone(), st[1].clone());
        if cs.is_empty() {
            cs.push(1);
            dst_st.push(1);
            src_st.push(1);
        }
        let last = cs.len() - 1;
        let word = WORDS
            .into_iter()
            .find(|&w| {
                w >= size
                    && (w == size
                        || (dst_st[last] == 1
                            && src_st[last] == 1
                            && (cs[last] * size) % w == 0
                            && dst.addr() % w as u64 == 0
                            && src.addr() % w as u64 == 0
                            && (0..last).all(|d| {
                                (dst_st[d] * size) % w == 0 && (src_st[d] * size) % w == 0
                            })))
            })
            .unwrap_or(size);
        let per = word / size;
        let mut p = EMPTY_PIECE;
        p.src = *src;
        p.dst = *dst;
        p.rank = cs.len() as u32;
        for d in 0..cs.len() {
            let inner = d == last;
            p.shape[d] = if inner { cs[d] / per } else { cs[d] } as u64;
            let scale = |s: usize| if inner { s as i64 } else { (s / per) as i64 };
            p.src_stride[d] = scale(src_st[d]);
            p.dst_stride[d] = scale(dst_st[d]);
        }
        p.n = p.shape[..cs.len()].iter().product();
        pieces.push((word, p));
    }
    // flat pieces first, then by word width, widest first
    let mut flat: Vec<(usize, CopyPiece2)> = Vec::new();
    let mut wide: Vec<(usize, CopyPiece)> = Vec::new();
    for (w, p) in pieces {
        match flat_piece(&p) {
            Some(f) => flat.push((w, f)),
            None => wide.push((w, p)),
        }
    }
    flat.sort_by_key(|(w, _)| std::cmp::Reverse(*w));
    wide.sort_by_key(|(w, _)| std::cmp::Reverse(*w));
    let mut out = Vec::new();
    for (word, batch) in batches(&flat, CAT_PIECES2) {
        let mut args = CopyArgs2 {
            pieces: batch.len() as u32,
            pad0: 0,
            piece: [EMPTY_PIECE2; CAT_PIECES2],
        };
        for (slot, (_, p)) in args.piece.iter_mut().zip(batch) {
            *slot = *p;
        }
        out.push(Launch::Flat(word, args));
    }
    for (word, batch) in batches(&wide, CAT_PIECES) {
        let mut args = CopyArgs {
            pieces: batch.len() as u32,
            pad0: 0,
            piece: [EMPTY_PIECE; CAT_PIECES],
        };
        for (slot, (_, p)) in args.piece.iter_mut().zip(batch) {
            *slot = *p;
        }
        out.push(Launch::Wide(word, args));
    }
    out
}

/// `items` (sorted by word width) cut into runs of one width, each at
/// most `cap` long.
fn batches<P>(items: &[(usize, P)], cap: usize) -> Vec<(usize, &[(usize, P)])> {
    let mut out = Vec::new();
    let mut rest = items;
    while let Some(&(word, _)) = rest.first() {
        let k = rest
            .iter()
            .take(cap)
            .take_while(|(w, _)| *w == word)
            .count();
        let (batch, tail) = rest.split_at(k);
        out.push((word, batch));
        rest = tail;
    }
    out
}

/// `torch.cat(xs, dim)` of inputs of `shapes`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct CatDescriptor<const N: usize> {
    /// Element type of every input and the output.
    pub element: ElementKind,
    /// The dim to concatenate along; negative counts from the end.
    pub dim: i64,
    /// Each input's shape: equal but along `dim`, where any extent (0
    /// too) is allowed.
    pub shapes: Vec<[usize; N]>,
}

impl<const N: usize> CatDescriptor<N> {
    /// The shape of `y` (and `dy`).
    ///
    /// # Errors
    /// `InvalidDescriptor` as [`CatPlan::select`].
    pub fn output_shape(&self) -> Result<[usize; N]> {
        let (dim, out) = cat_layout(&self.shapes, self.dim)?;
        let _ = dim;
        Ok(out)
    }
}

const CAT: &str = "cat";
const STACK: &str = "stack";

/// The wrapped dim and the output shape of a cat, or PyTorch's errors.
fn cat_layout<const N: usize>(shapes: &[[usize; N]], dim: i64) -> Result<(usize, [usize; N])> {
    let Some(first) = shapes.first() else {
        return Err(invalid_descriptor(CAT, "shapes", "[]".into(), "cat takes at least one input"));
    };
    let n = N as i64;
    if N == 0 || dim < -n || dim >= n {
        return Err(invalid_descriptor(
            CAT,
            "dim",
            dim.to_string(),
            &format!("out of range for rank {N}"),
        ));
    }
    let d = dim.rem_euclid(n) as usize;
    let mut out = *first;
    out[d] = 0;
    for (k, s) in shapes.iter().enumerate() {
        if (0..N).any(|e| e != d && s[e] != first[e]) {
            return Err(invalid_descriptor(
                CAT,
                "shapes",
                format!("{s:?}"),
                &format!("input {k} differs from input 0 {first:?} outside dim {d}"),
            ));
        }
        out[d] += s[d];
    }
    Ok((d, out))
}

/// Arguments of [`CatPlan`]'s [`Plan::run`].
pub struct CatArgs<'a, T, const N: usize> {
    /// The inputs, one per descriptor shape, any strides.
    pub xs: &'a [TensorRef<'a, T, N>],
    /// The output, any non-overlapping strides; disjoint from every input.
    pub y: TensorMut<'a, T, N>,
}

/// Arguments of [`CatPlan`]'s [`Backward::run_bw`].
pub struct CatBwArgs<'a, T, const N: usize> {
    /// Gradient of the output.
    pub dy: TensorRef<'a, T, N>,
    /// One entry per input: its gradient, computed when `Some` (disjoint
    /// from `dy` and from each other).
    pub dxs: Vec<Option<TensorMut<'a, T, N>>>,
}

/// `y = cat(xs, dim)`: input `k` lands at `y[.., off_k .. off_k + n_k,
/// ..]` along `dim`, `off_k` the extents of the inputs before it. Backward:
/// `dx_k` is that slice of `dy`.
///
/// # Shapes
/// `xs[k]`, `dxs[k]`: `desc.shapes[k]`; `y`, `dy`:
/// [`CatDescriptor::output_shape`]; rank `1 <= N <= 8`. Inputs empty along
/// `dim` are allowed (and copy nothing). No workspace.
/// # Layout
/// Any strides; pieces contiguous and 16-byte aligned along their
/// innermost dim on both sides copy 16-byte words.
/// # Aliasing
/// No output may overlap an input (`InvalidArgument`).
/// # Dtypes
/// Every kind of [`CAT_STACK_KINDS`] (all but bool), moved exactly. Bool:
/// `Error::Unsupported`.
/// # Errors
/// From `select`: `DtypeMismatch`, `Unsupported` (dtype, rank),
/// `InvalidDescriptor` (no input, `dim` out of range, shapes that differ
/// outside `dim`), `PreferenceRejected`. From `run` and `run_bw`:
/// `InvalidArgument` for a wrong number of inputs or gradients or an
/// overlap, `ShapeMismatch`, `ContextMismatch`.
pub struct CatPlan<T: Element, const N: usize> {
    desc: CatDescriptor<N>,
    dim: usize,
    out_shape: [usize; N],
    copy: CopyKernels,
    sku: KernelSku,
    _t: PhantomData<T>,
}

/// The dtypes cat and stack take: every kind but bool (the kernels move
/// bytes, but no test checks bool outputs yet).
pub const CAT_STACK_KINDS: [ElementKind; 12] = kinds_except(&[ElementKind::Bool]);

/// The select checks both plans share: `element` is `T`, a kind of
/// [`CAT_STACK_KINDS`], rank `N <= 8`, and the preference allows our
/// kernels.
fn check_select<T: Element, const N: usize>(
    op: &'static str,
    element: ElementKind,
    pref: &PlanPreference,
) -> Result<()> {
    check_element::<T>(op, "desc.element", element)?;
    if !CAT_STACK_KINDS.contains(&element) || N > MAX_RANK {
        return Err(Error::Unsupported {
            op,
            what: format!(
                "dtype {element} at rank {N}; {op} takes every dtype but bool, rank <= {MAX_RANK}"
            ),
        });
    }
    pref.check_backend(op, &[BackendKind::Baracuda])?;
    pref.check_workspace(op, 0)
}

/// What cat and stack selected on `T`: exact copies, deterministic.
fn copy_sku<T: Element>(stream: &Stream, op: &str) -> KernelSku {
    let mut sku = own_float_sku::<T>(stream, op.into(), "batched strided copy");
    if !T::KIND.is_float() {
        sku.precision = PrecisionGuarantee {
            math: MathPrecision::Integer,
            accumulator: T::KIND,
            deterministic: true,
            bit_stable_on_same_hardware: true,
        };
    }
    sku
}

impl<T: Element, const N: usize> Plan for CatPlan<T, N> {
    type Descriptor = CatDescriptor<N>;
    type Args<'a> = CatArgs<'a, T, N>;

    fn select(stream: &Stream, desc: &Self::Descriptor, pref: &PlanPreference) -> Result<Self> {
        check_select::<T, N>(CAT, desc.element, pref)?;
        let (dim, out_shape) = cat_layout(&desc.shapes, desc.dim)?;
        Ok(CatPlan {
            desc: desc.clone(),
            dim,
            out_shape,
            copy: CopyKernels::load(stream)?,
            sku: copy_sku::<T>(stream, "shape.cat"),
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
        let xs: Vec<Option<TensorRef<'_, T, N>>> = args.xs.iter().map(|x| Some(*x)).collect();
        let y = args.y.as_const();
        let pairs = slices(
            CAT,
            stream,
            (&self.desc.shapes, self.dim),
            ("y", &self.out_shape, &y),
            &xs,
            "xs",
            true,
        )?;
        let pairs: Vec<CopyPair> = pairs.into_iter().map(|p| p.copy(true)).collect();
        // SAFETY: `slices` checked every view's shape and context, and
        // that y overlaps no input; each slice of y lies inside y.
        unsafe { self.copy.copy(stream, size_of::<T>(), &pairs) }
    }
}

impl<T: Element, const N: usize> Backward for CatPlan<T, N> {
    type BwArgs<'a> = CatBwArgs<'a, T, N>;

    fn run_bw(
        &self,
        stream: &Stream,
        _workspace: Workspace<'_>,
        args: Self::BwArgs<'_>,
    ) -> Result<()> {
        let dxs: Vec<Option<TensorRef<'_, T, N>>> =
            args.dxs.iter().map(|d| d.as_ref().map(|d| d.as_const())).collect();
        let pairs = slices(
            CAT,
            stream,
            (&self.desc.shapes, self.dim),
            ("dy", &self.out_shape, &args.dy),
            &dxs,
            "dxs",
            false,
        )?;
        let pairs: Vec<CopyPair> = pairs.into_iter().map(|p| p.copy(false)).collect();
        // SAFETY: `slices` checked shapes, contexts, and that no dx
        // overlaps dy or another dx.
        unsafe { self.copy.copy(stream, size_of::<T>(), &pairs) }
    }
}

/// Check the whole tensor and the parts (one per shape; `None` = not
/// computed), their contexts and overlaps, and pair each part with its
/// slice of the whole along `dim` (by `shapes` and `dim`).
/// `whole_written`: the whole is the output (it must overlap no part);
/// otherwise the parts are outputs (none may overlap the whole or another
/// part).
fn slices<T: Element, const N: usize>(
    op: &'static str,
    stream: &Stream,
    (shapes, dim): (&[[usize; N]], usize),
    (arg, expected, w): (&'static str, &[usize; N], &TensorRef<'_, T, N>),
    parts: &[Option<TensorRef<'_, T, N>>],
    parts_arg: &'static str,
    whole_written: bool,
) -> Result<Vec<Piece>> {
    check_shape(op, arg, expected, w.shape())?;
    check_parts(
        op,
        stream,
        (Extent::of(arg, w), w.data().ctx_id()),
        (parts, parts_arg, shapes.len()),
        |k| &shapes[k],
        whole_written,
    )?;
    let mut out = Vec::new();
    let mut offset = 0usize;
    for (p, s) in parts.iter().zip(shapes) {
        if let Some(p) = p {
            let slice = w.data().ptr().add(offset * w.strides()[dim]);
            out.push(Piece {
                shape: s.to_vec(),
                slice: (slice.cast(), w.strides().to_vec()),
                part: (p.data().ptr().cast(), p.strides().to_vec()),
            });
        }
        offset += s[dim];
    }
    Ok(out)
}

/// `torch.stack(xs, dim)` of `count` inputs of one `shape`.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub struct StackDescriptor<const N: usize> {
    /// Element type of every input and the output.
    pub element: ElementKind,
    /// The new dim of the output, in `[-(N + 1), N]`.
    pub dim: i64,
    /// Shape of every input.
    pub shape: [usize; N],
    /// How many inputs (at least 1).
    pub count: usize,
}

/// Arguments of [`StackPlan`]'s [`Plan::run`].
pub struct StackArgs<'a, T, const N: usize, const M: usize> {
    /// The `count` inputs, any strides.
    pub xs: &'a [TensorRef<'a, T, N>],
    /// The output (rank `M = N + 1`), disjoint from every input.
    pub y: TensorMut<'a, T, M>,
}

/// Arguments of [`StackPlan`]'s [`Backward::run_bw`].
pub struct StackBwArgs<'a, T, const N: usize, const M: usize> {
    /// Gradient of the output.
    pub dy: TensorRef<'a, T, M>,
    /// One entry per input: its gradient when `Some`.
    pub dxs: Vec<Option<TensorMut<'a, T, N>>>,
}

/// `y = stack(xs, dim)`: `y[.., k, ..] = xs[k]` with the new dim `dim`
/// of extent `count`; backward `dx_k = dy[.., k, ..]`.
///
/// # Shapes
/// `xs[k]`, `dxs[k]`: `desc.shape`; `y`, `dy`: `desc.shape` with `count`
/// inserted at `dim`, rank `M = N + 1 <= 8`. No workspace.
/// # Layout, aliasing, dtypes
/// As [`CatPlan`].
/// # Errors
/// As [`CatPlan`]; `InvalidDescriptor` naming `dim` out of `[-(N + 1), N]`,
/// `count` 0, or `rank` when `M != N + 1`.
pub struct StackPlan<T: Element, const N: usize, const M: usize> {
    desc: StackDescriptor<N>,
    dim: usize,
    out_shape: [usize; M],
    copy: CopyKernels,
    sku: KernelSku,
    _t: PhantomData<T>,
}

impl<T: Element, const N: usize, const M: usize> Plan for StackPlan<T, N, M> {
    type Descriptor = StackDescriptor<N>;
    type Args<'a> = StackArgs<'a, T, N, M>;

    fn select(stream: &Stream, desc: &Self::Descriptor, pref: &PlanPreference) -> Result<Self> {
        check_select::<T, M>(STACK, desc.element, pref)?;
        let (dim, out_shape) = stack_layout::<N, M>(desc)?;
        Ok(StackPlan {
            desc: *desc,
            dim,
            out_shape,
            copy: CopyKernels::load(stream)?,
            sku: copy_sku::<T>(stream, "shape.stack"),
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
        let xs: Vec<Option<TensorRef<'_, T, N>>> = args.xs.iter().map(|x| Some(*x)).collect();
        let y = args.y.as_const();
        let pairs = self.pieces(stream, "y", &y, &xs, "xs", true)?;
        let pairs: Vec<CopyPair> = pairs.into_iter().map(|p| p.copy(true)).collect();
        // SAFETY: `pieces` checked every view and the overlaps; each slice
        // of y lies inside y.
        unsafe { self.copy.copy(stream, size_of::<T>(), &pairs) }
    }
}

impl<T: Element, const N: usize, const M: usize> Backward for StackPlan<T, N, M> {
    type BwArgs<'a> = StackBwArgs<'a, T, N, M>;

    fn run_bw(
        &self,
        stream: &Stream,
        _workspace: Workspace<'_>,
        args: Self::BwArgs<'_>,
    ) -> Result<()> {
        let dxs: Vec<Option<TensorRef<'_, T, N>>> =
            args.dxs.iter().map(|d| d.as_ref().map(|d| d.as_const())).collect();
        let pairs = self.pieces(stream, "dy", &args.dy, &dxs, "dxs", false)?;
        let pairs: Vec<CopyPair> = pairs.into_iter().map(|p| p.copy(false)).collect();
        // SAFETY: `pieces` checked every view and the overlaps.
        unsafe { self.copy.copy(stream, size_of::<T>(), &pairs) }
    }
}

impl<T: Element, const N: usize, const M: usize> StackPlan<T, N, M> {
    /// The shape of `y` and `dy`.
    pub fn output_shape(&self) -> [usize; M] {
        self.out_shape
    }

    /// The checks of [`slices`] for a stack: the whole (`y` or `dy`,
    /// rank `M`) seen as a rank-`N` tensor per input.
    fn pieces(
        &self,
        stream: &Stream,
        arg: &'static str,
        whole: &TensorRef<'_, T, M>,
        parts: &[Option<TensorRef<'_, T, N>>],
        parts_arg: &'static str,
        whole_written: bool,
    ) -> Result<Vec<Piece>> {
        let op = STACK;
        check_shape(op, arg, &self.out_shape, whole.shape())?;
        let shape = self.desc.shape;
        check_parts(
            op,
            stream,
            (Extent::of(arg, whole), whole.data().ctx_id()),
            (parts, parts_arg, self.desc.count),
            |_| &shape,
            whole_written,
        )?;
        // the whole's strides without the stacked dim
        let ws = whole.strides();
        let sub: Vec<usize> = (0..M).filter(|&d| d != self.dim).map(|d| ws[d]).collect();
        let mut out = Vec::new();
        for (k, p) in parts.iter().enumerate() {
            if let Some(p) = p {
                let slice = whole.data().ptr().add(k * ws[self.dim]);
                out.push(Piece {
                    shape: shape.to_vec(),
                    slice: (slice.cast(), sub.clone()),
                    part: (p.data().ptr().cast(), p.strides().to_vec()),
                });
            }
        }
        Ok(out)
    }
}

/// The checks shared by cat and stack: one part per input (`count`), part
/// `k` of shape `shape_of(k)`, every tensor on `stream`'s context, and no
/// overlap between what is written and anything else. `whole_written`:
/// the whole is the output; otherwise the parts are.
fn check_parts<'s, T: Element, const N: usize>(
    op: &'static str,
    stream: &Stream,
    (we, whole_ctx): (Extent<'_, T>, usize),
    (parts, parts_arg, count): (&'s [Option<TensorRef<'_, T, N>>], &'static str, usize),
    shape_of: impl Fn(usize) -> &'s [usize; N],
    whole_written: bool,
) -> Result<()> {
    if parts.len() != count {
        return Err(Error::InvalidArgument {
            op,
            arg: parts_arg,
            reason: format!("{} tensors for {count} inputs", parts.len()),
        });
    }
    for (k, p) in parts.iter().enumerate() {
        let Some(p) = p else { continue };
        let s = shape_of(k);
        if p.shape() != s {
            return Err(Error::InvalidArgument {
                op,
                arg: parts_arg,
                reason: format!(
                    "tensor {k} has shape {}, expected {}",
                    Shape::from(&p.shape()[..]),
                    Shape::from(&s[..])
                ),
            });
        }
    }
    check_ctx(op, we.arg, stream, whole_ctx)?;
    for p in parts.iter().flatten() {
        check_ctx(op, parts_arg, stream, p.data().ctx_id())?;
    }
    let pe: Vec<Option<Extent<'_, T>>> =
        parts.iter().map(|p| p.as_ref().map(|p| Extent::of(parts_arg, p))).collect();
    for (k, e) in pe.iter().enumerate() {
        let Some(e) = e else { continue };
        if whole_written {
            check_alias(op, &we, e, false)?;
        } else {
            check_alias(op, e, &we, false)?;
            for o in pe[k + 1..].iter().flatten() {
                check_alias(op, e, o, false)?;
            }
        }
    }
    Ok(())
}

/// The wrapped new dim and the output shape of a stack, or the errors.
fn stack_layout<const N: usize, const M: usize>(
    desc: &StackDescriptor<N>,
) -> Result<(usize, [usize; M])> {
    if M != N + 1 {
        return Err(invalid_descriptor(
            STACK,
            "rank",
            format!("{M}"),
            &format!("the output of a stack of rank-{N} inputs has rank {}", N + 1),
        ));
    }
    if desc.count == 0 {
        return Err(invalid_descriptor(STACK, "count", "0".into(), "stack takes at least one input"));
    }
    let m = M as i64;
    if desc.dim < -m || desc.dim >= m {
        return Err(invalid_descriptor(
            STACK,
            "dim",
            desc.dim.to_string(),
            &format!("out of range for the rank-{M} output"),
        ));
    }
    let dim = desc.dim.rem_euclid(m) as usize;
    let mut out = [0; M];
    let mut src = desc.shape.iter();
    for (d, o) in out.iter_mut().enumerate() {
        *o = if d == dim {
            desc.count
        } else {
            src.next().copied().unwrap_or(1)
        };
    }
    Ok((dim, out))
}

impl<const N: usize> StackDescriptor<N> {
    /// The shape of `y` (and `dy`), of rank `M = N + 1`.
    ///
    /// # Errors
    /// `InvalidDescriptor` as [`StackPlan::select`].
    pub fn output_shape<const M: usize>(&self) -> Result<[usize; M]> {
        Ok(stack_layout::<N, M>(self)?.1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn params_layout_matches_cuda() {
        assert_eq!(std::mem::size_of::<CopyPiece>(), 224);
        assert_eq!(std::mem::size_of::<CopyArgs>(), 8 + 8 * 224);
        assert_eq!(std::mem::size_of::<CopyPiece2>(), 56);
        // what one launch's parameters may hold (LaunchArgs: 2048 bytes)
        assert_eq!(std::mem::size_of::<CopyArgs2>(), 8 + 36 * 56);
        assert!(std::mem::size_of::<CopyArgs2>() <= 2048);
    }

    /// A piece of `shape` from `src` to `dst` (byte addresses), both with
    /// element strides.
    fn pair(shape: &[usize], src: (u64, &[usize]), dst: (u64, &[usize])) -> CopyPair {
        CopyPair {
            shape: shape.to_vec(),
            src: (DevPtr::from_addr(src.0), src.1.to_vec()),
            dst: (DevPtrMut::from_addr(dst.0), dst.1.to_vec()),
        }
    }

    /// Each launch's kind (flat or wide), word width and piece count.
    fn summary(l: &[Launch]) -> Vec<(&'static str, usize, usize)> {
        l.iter()
            .map(|x| {
                let (w, k, _) = x.extent();
                let kind = match x {
                    Launch::Flat(..) => "flat",
                    Launch::Wide(..) => "wide",
                };
                (kind, w, k)
            })
            .collect()
    }

    #[test]
    fn pieces_take_the_widest_word_both_sides_allow() {
        // bf16 rows of 128 into rows of 4096: 16-byte words, 16 a row
        let rows = pair(&[4096, 128], (0x1000, &[128, 1]), (0x8000, &[4096, 1]));
        let l = copy_launches(2, &[rows]);
        assert_eq!(summary(&l), [("flat", 16, 1)]);
        let Launch::Flat(_, args) = &l[0] else {
            unreachable!()
        };
        let p = &args.piece[0];
        assert_eq!((p.rows, p.cols), (4096, 16));
        assert_eq!((p.src_stride, p.dst_stride), ([16, 1], [512, 1]));
        // whole tensors collapse to one row
        let whole = pair(&[128, 4096], (0x1000, &[4096, 1]), (0x8000, &[4096, 1]));
        let l = copy_launches(2, &[whole]);
        let Launch::Flat(16, args) = &l[0] else {
            panic!("{:?}", summary(&l))
        };
        assert_eq!((args.piece[0].rows, args.piece[0].cols), (1, 65536));
        // an address 4 bytes past a 16-byte boundary: 4-byte words
        let odd = pair(&[4, 6], (0x1004, &[6, 1]), (0x8000, &[12, 1]));
        assert_eq!(summary(&copy_launches(2, &[odd])), [("flat", 4, 1)]);
        // a transposed source: one element a word
        let t = pair(&[4, 6], (0x1000, &[1, 4]), (0x8000, &[6, 1]));
        assert_eq!(summary(&copy_launches(2, &[t])), [("flat", 2, 1)]);
        // three dims that do not merge: the eight-dim kernel
        let three = pair(&[2, 3, 4], (0x1000, &[1, 2, 6]), (0x8000, &[12, 4, 1]));
        let l = copy_launches(2, &[three]);
        assert_eq!(summary(&l), [("wide", 2, 1)]);
        let Launch::Wide(_, args) = &l[0] else {
            unreachable!()
        };
        assert_eq!((args.piece[0].rank, args.piece[0].n), (3, 24));
    }

    #[test]
    fn launches_batch_pieces_of_one_word_and_skip_empty_ones() {
        // 40 rows of 16-byte words: 36 in one launch, then 4
        let mut pairs: Vec<CopyPair> = (0..40)
            .map(|k| pair(&[2, 8], (0x1000 * (k + 1), &[8, 1]), (0x100000, &[320, 1])))
            .collect();
        pairs.push(pair(&[2, 0], (0x1000, &[0, 1]), (0x100000, &[320, 1])));
        pairs.push(pair(&[2, 3], (0x1002, &[3, 1]), (0x100000, &[320, 1])));
        let l = copy_launches(2, &pairs);
        assert_eq!(
            summary(&l),
            [("flat", 16, 36), ("flat", 16, 4), ("flat", 2, 1)]
        );
    }

    #[test]
    fn cat_shapes_and_errors() {
        let d = |dim, shapes: Vec<[usize; 2]>| CatDescriptor {
            element: ElementKind::F32,
            dim,
            shapes,
        };
        assert_eq!(d(1, vec![[2, 3], [2, 0], [2, 5]]).output_shape(), Ok([2, 8]));
        assert_eq!(d(-2, vec![[2, 3], [0, 3]]).output_shape(), Ok([2, 3]));
        let field = |r: Result<[usize; 2]>| match r {
            Err(Error::InvalidDescriptor { field, .. }) => field,
            other => panic!("{other:?}"),
        };
        assert_eq!(field(d(0, vec![]).output_shape()), "shapes");
        assert_eq!(field(d(2, vec![[1, 1]]).output_shape()), "dim");
        assert_eq!(field(d(0, vec![[1, 2], [1, 3]]).output_shape()), "shapes");
    }

    #[test]
    fn stack_shapes_and_errors() {
        let d = |dim, count| StackDescriptor {
            element: ElementKind::F32,
            dim,
            shape: [2, 3],
            count,
        };
        assert_eq!(d(0, 4).output_shape::<3>(), Ok([4, 2, 3]));
        assert_eq!(d(2, 4).output_shape::<3>(), Ok([2, 3, 4]));
        assert_eq!(d(-1, 4).output_shape::<3>(), Ok([2, 3, 4]));
        assert!(d(3, 4).output_shape::<3>().is_err());
        assert!(d(0, 0).output_shape::<3>().is_err());
        assert!(d(0, 4).output_shape::<4>().is_err());
    }
}
