//! Flip, roll, tril/triu and pad: each output element gathered from the
//! input element an index map names, forward and backward.
//!
//! The maps are separable per dim (`kernels/shape/shape.cu` lists them);
//! a flattened roll maps the row-major linear index. Backward: flip, roll,
//! tril/triu and pad constant gather `dy` by the inverse map with the same
//! kernels; reflect, replicate and circular pad sum, for each `dx`
//! element, the `dy` elements read from it, in a fixed order.

use core::marker::PhantomData;

use baracuda_driver::{Function, LaunchConfig, ModuleSpec, Stream};
use baracuda_kernels_types::{
    BackendKind, DevPtr, DevPtrMut, Element, ElementKind, Error, KernelSku, PlanPreference, Result,
    TensorMut, TensorRef, Workspace, MAX_RANK,
};

use crate::checks::{check_alias, check_views, float_dtype_code, invalid_descriptor, Extent, View};
use crate::kernel_sources;
use crate::launch::{launch_params, padded};
use crate::plan::own_float_sku;
use crate::{Backward, Plan};

/// Threads per block of the shape kernels (`__launch_bounds__(256)`).
pub(crate) const THREADS: u32 = 256;

/// How `F.pad` fills the border.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum PadMode {
    /// `value` outside the input.
    Constant,
    /// The input mirrored about its edge elements (`[c b | a b c | b a]`).
    Reflect,
    /// The edge element repeated.
    Replicate,
    /// The input wrapped around (`[b c | a b c | a b]`).
    Circular,
}

impl PadMode {
    /// PyTorch's name of the mode.
    pub fn name(self) -> &'static str {
        match self {
            PadMode::Constant => "constant",
            PadMode::Reflect => "reflect",
            PadMode::Replicate => "replicate",
            PadMode::Circular => "circular",
        }
    }
}

/// Most values an [`IntList`] holds: a pad list over every dim.
pub const INT_LIST_CAP: usize = 2 * MAX_RANK;

/// A short list of integers (dims, shifts, pads), held inline so that
/// descriptors stay `Copy`. A list built from more than [`INT_LIST_CAP`]
/// values keeps their count and is rejected by `select`.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub struct IntList {
    len: usize,
    values: [i64; INT_LIST_CAP],
}

impl IntList {
    /// The list of `values`.
    pub fn new(values: &[i64]) -> Self {
        let mut v = [0; INT_LIST_CAP];
        for (s, &x) in v.iter_mut().zip(values) {
            *s = x;
        }
        IntList {
            len: values.len(),
            values: v,
        }
    }
    /// The values (the first [`INT_LIST_CAP`] of a longer list).
    pub fn as_slice(&self) -> &[i64] {
        &self.values[..self.len.min(INT_LIST_CAP)]
    }
    /// How many values the list was built from.
    pub fn len(&self) -> usize {
        self.len
    }
    /// Whether the list is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

/// A data-movement op of [`ShapePlan`], with PyTorch's parameters. Dims
/// may be negative (counted from the end), as in PyTorch.
#[derive(Copy, Clone, Debug, PartialEq)]
pub enum ShapeOp {
    /// `torch.flip(x, dims)`: reverse along each dim of `dims` (distinct).
    Flip {
        /// The dims to reverse.
        dims: IntList,
    },
    /// `torch.roll(x, shifts, dims)`: element `i` along `dims[k]` moves to
    /// `i + shifts[k]` (mod the extent); a dim named twice moves by the sum.
    /// With `dims` empty, `shifts` holds one shift of the flattened tensor.
    Roll {
        /// The shifts, one per dim of `dims` (one when `dims` is empty).
        shifts: IntList,
        /// The dims, or none: roll the row-major flattening.
        dims: IntList,
    },
    /// `torch.tril(x, diagonal)`: keep `x[.., i, j]` where `j - i <=
    /// diagonal`, 0 elsewhere; the last two dims, every batch alike.
    Tril {
        /// 0 is the main diagonal, positive above it.
        diagonal: i64,
    },
    /// `torch.triu(x, diagonal)`: keep `x[.., i, j]` where `j - i >=
    /// diagonal`.
    Triu {
        /// 0 is the main diagonal, positive above it.
        diagonal: i64,
    },
    /// `F.pad(x, pad, mode, value)`: `pad` holds (before, after) pairs
    /// from the last dim backwards; negative entries crop.
    Pad {
        /// The border.
        mode: PadMode,
        /// `[last_before, last_after, second_last_before, ...]`.
        pad: IntList,
        /// The value of the constant border (rounded to the element type).
        value: f64,
    },
}

impl ShapeOp {
    /// `torch.flip(x, dims)`.
    pub fn flip(dims: &[i64]) -> Self {
        ShapeOp::Flip {
            dims: IntList::new(dims),
        }
    }
    /// `torch.roll(x, shifts, dims)`; `dims` empty rolls the flattening.
    pub fn roll(shifts: &[i64], dims: &[i64]) -> Self {
        ShapeOp::Roll {
            shifts: IntList::new(shifts),
            dims: IntList::new(dims),
        }
    }
    /// `F.pad(x, pad, mode, value)`.
    pub fn pad(mode: PadMode, pad: &[i64], value: f64) -> Self {
        ShapeOp::Pad {
            mode,
            pad: IntList::new(pad),
            value,
        }
    }
    /// The op's name: `flip`, `roll`, `tril`, `triu`, `pad_<mode>`.
    pub fn name(&self) -> &'static str {
        match self {
            ShapeOp::Flip { .. } => "flip",
            ShapeOp::Roll { .. } => "roll",
            ShapeOp::Tril { .. } => "tril",
            ShapeOp::Triu { .. } => "triu",
            ShapeOp::Pad { mode, .. } => match mode {
                PadMode::Constant => "pad_constant",
                PadMode::Reflect => "pad_reflect",
                PadMode::Replicate => "pad_replicate",
                PadMode::Circular => "pad_circular",
            },
        }
    }
}

/// A [`ShapeOp`] over an input of shape `shape`.
#[derive(Copy, Clone, Debug, PartialEq)]
pub struct ShapeDescriptor<const N: usize> {
    /// The op and its parameters.
    pub op: ShapeOp,
    /// Element type of `x` and `y`.
    pub element: ElementKind,
    /// Shape of `x` (and `dx`).
    pub shape: [usize; N],
}

impl<const N: usize> ShapeDescriptor<N> {
    /// `op` over `shape` in `element`.
    pub fn new(op: ShapeOp, element: ElementKind, shape: [usize; N]) -> Self {
        ShapeDescriptor { op, element, shape }
    }

    /// The shape of `y` (and `dy`): `shape` for every op but pad.
    ///
    /// # Errors
    /// `InvalidDescriptor` as [`ShapePlan::select`] for the parameters.
    pub fn output_shape(&self) -> Result<[usize; N]> {
        Ok(resolve(&self.op, &self.shape)?.out_shape)
    }
}

/// Arguments of [`ShapePlan`]'s [`Plan::run`].
pub struct ShapeArgs<'a, T, const N: usize> {
    /// Input, `desc.shape`, any strides (0 = broadcast).
    pub x: TensorRef<'a, T, N>,
    /// Output, [`ShapeDescriptor::output_shape`], any non-overlapping
    /// strides; disjoint from `x`.
    pub y: TensorMut<'a, T, N>,
}

/// Arguments of [`ShapePlan`]'s [`Backward::run_bw`].
pub struct ShapeBwArgs<'a, T, const N: usize> {
    /// Gradient of the output, any strides.
    pub dy: TensorRef<'a, T, N>,
    /// Gradient of the input, any non-overlapping strides; disjoint from
    /// `dy`.
    pub dx: TensorMut<'a, T, N>,
}

/// `GatherArgs` of `kernels/shape/shape.cu`, field for field.
#[repr(C)]
#[derive(Copy, Clone, Debug)]
pub(crate) struct GatherArgs {
    n: u64,
    rank: u32,
    tri: u32,
    diagonal: i64,
    flat: u32,
    pad0: u32,
    flat_shift: i64,
    fill: f64,
    out_shape: [u64; MAX_RANK],
    in_shape: [u64; MAX_RANK],
    out_stride: [i64; MAX_RANK],
    in_stride: [i64; MAX_RANK],
    kind: [u32; MAX_RANK],
    shift: [i64; MAX_RANK],
    crop: [i64; MAX_RANK],
    span: [i64; MAX_RANK],
    run_lo: [i64; 2],
    run_hi: [i64; 2],
    run_off: [i64; 2],
    out: DevPtrMut<u8>,
    inp: DevPtr<u8>,
}

/// Per-dim map kinds (`MapKind` of shape.cu).
const K_IDENTITY: u32 = 0;
const K_FLIP: u32 = 1;
const K_ROLL: u32 = 2;
const K_CONSTANT: u32 = 3;
const K_REFLECT: u32 = 4;
const K_REPLICATE: u32 = 5;
const K_CIRCULAR: u32 = 6;

/// One direction of an op as the gather kernel runs it: `y[o] =
/// x[src(o)]` over an output of `out_shape` from an input of `in_shape`.
#[derive(Copy, Clone, Debug, PartialEq)]
struct Map<const N: usize> {
    out_shape: [usize; N],
    in_shape: [usize; N],
    kind: [u32; MAX_RANK],
    shift: [i64; MAX_RANK],
    crop: [i64; MAX_RANK],
    span: [i64; MAX_RANK],
    /// 0 none, 1 tril, 2 triu.
    tri: u32,
    diagonal: i64,
    /// A flattened roll by this shift, in `[0, n)`.
    flat: Option<i64>,
    fill: f64,
}

impl<const N: usize> Map<N> {
    fn identity(shape: [usize; N]) -> Self {
        let mut span = [0; MAX_RANK];
        for (s, &n) in span.iter_mut().zip(&shape) {
            *s = n as i64;
        }
        Map {
            out_shape: shape,
            in_shape: shape,
            kind: [K_IDENTITY; MAX_RANK],
            shift: [0; MAX_RANK],
            crop: [0; MAX_RANK],
            span,
            tri: 0,
            diagonal: 0,
            flat: None,
            fill: 0.0,
        }
    }
}

/// How the backward runs.
#[derive(Copy, Clone, Debug, PartialEq)]
enum BwKind {
    /// A gather of `dy` by this map (out: dx, in: dy).
    Gather,
    /// The accumulating pad backward, with the forward map.
    PadSum,
}

/// The forward map, the backward map and how the backward runs.
#[derive(Copy, Clone, Debug, PartialEq)]
struct Resolved<const N: usize> {
    out_shape: [usize; N],
    fw: Map<N>,
    bw: Map<N>,
    bw_kind: BwKind,
}

fn bad(field: &'static str, value: String, reason: &str) -> Error {
    invalid_descriptor(OP, field, value, reason)
}

/// `dim` wrapped into `[0, N)`, as PyTorch wraps a negative dim.
fn wrap_dim<const N: usize>(field: &'static str, dim: i64) -> Result<usize> {
    let n = N as i64;
    if dim < -n || dim >= n {
        return Err(bad(
            field,
            dim.to_string(),
            &format!("out of range for rank {N} (expected [{}, {}])", -n, n - 1),
        ));
    }
    Ok(dim.rem_euclid(n.max(1)) as usize)
}

/// A list no longer than its capacity.
fn check_len(field: &'static str, list: &IntList) -> Result<()> {
    if list.len() > INT_LIST_CAP {
        return Err(bad(
            field,
            format!("{} values", list.len()),
            &format!("holds at most {INT_LIST_CAP}"),
        ));
    }
    Ok(())
}

/// Validate `op` over `shape` (PyTorch's rules) and build its maps.
fn resolve<const N: usize>(op: &ShapeOp, shape: &[usize; N]) -> Result<Resolved<N>> {
    let mut fw = Map::identity(*shape);
    match *op {
        ShapeOp::Flip { dims } => {
            check_len("dims", &dims)?;
            for &d in dims.as_slice() {
                let d = wrap_dim::<N>("dims", d)?;
                if fw.kind[d] == K_FLIP {
                    return Err(bad(
                        "dims",
                        format!("{:?}", dims.as_slice()),
                        &format!("dim {d} appears multiple times"),
                    ));
                }
                fw.kind[d] = K_FLIP;
            }
            Ok(Resolved {
                out_shape: *shape,
                fw,
                bw: fw,
                bw_kind: BwKind::Gather,
            })
        }
        ShapeOp::Roll { shifts, dims } => {
            check_len("shifts", &shifts)?;
            check_len("dims", &dims)?;
            let mut bw = fw;
            if dims.is_empty() {
                if shifts.len() != 1 {
                    return Err(bad(
                        "shifts",
                        format!("{:?}", shifts.as_slice()),
                        "without dims, roll takes exactly one shift",
                    ));
                }
                let n = shape.iter().product::<usize>() as i64;
                let s = shifts.as_slice()[0].rem_euclid(n.max(1));
                fw.flat = Some(s);
                bw.flat = Some((n - s).rem_euclid(n.max(1)));
            } else {
                if shifts.len() != dims.len() {
                    return Err(bad(
                        "shifts",
                        format!("{:?}", shifts.as_slice()),
                        &format!("{} shifts for {} dims", shifts.len(), dims.len()),
                    ));
                }
                let mut total = [0i128; MAX_RANK];
                for (&s, &d) in shifts.as_slice().iter().zip(dims.as_slice()) {
                    total[wrap_dim::<N>("dims", d)?] += i128::from(s);
                }
                for d in 0..N {
                    let n = (shape[d] as i128).max(1);
                    let s = total[d].rem_euclid(n) as i64;
                    if s != 0 {
                        fw.kind[d] = K_ROLL;
                        fw.shift[d] = s;
                        bw.kind[d] = K_ROLL;
                        bw.shift[d] = (n as i64 - s).rem_euclid(n as i64);
                    }
                }
            }
            Ok(Resolved {
                out_shape: *shape,
                fw,
                bw,
                bw_kind: BwKind::Gather,
            })
        }
        ShapeOp::Tril { diagonal } | ShapeOp::Triu { diagonal } => {
            if N < 2 {
                return Err(bad(
                    "shape",
                    format!("{shape:?}"),
                    "tril and triu take at least 2 dims",
                ));
            }
            fw.tri = if matches!(op, ShapeOp::Tril { .. }) { 1 } else { 2 };
            fw.diagonal = diagonal;
            Ok(Resolved {
                out_shape: *shape,
                fw,
                bw: fw,
                bw_kind: BwKind::Gather,
            })
        }
        ShapeOp::Pad { mode, pad, value } => resolve_pad(mode, &pad, value, shape),
    }
}

/// [`resolve`] of `F.pad`: PyTorch's checks, then the maps.
fn resolve_pad<const N: usize>(
    mode: PadMode,
    pad: &IntList,
    value: f64,
    shape: &[usize; N],
) -> Result<Resolved<N>> {
    check_len("pad", pad)?;
    let p = pad.as_slice();
    let show = || format!("{p:?}");
    if p.len() % 2 != 0 {
        return Err(bad("pad", show(), "the pad list's length must be even"));
    }
    let dims = p.len() / 2;
    if dims > N {
        return Err(bad(
            "pad",
            show(),
            &format!("pads {dims} dims of a rank-{N} input"),
        ));
    }
    if mode != PadMode::Constant {
        if !(1..=3).contains(&dims) {
            return Err(bad(
                "pad",
                show(),
                &format!("{} pads 1 to 3 trailing dims", mode.name()),
            ));
        }
        if N != dims + 1 && N != dims + 2 {
            return Err(bad(
                "shape",
                format!("{shape:?}"),
                &format!(
                    "{} padding of {dims} dims takes a rank-{} or rank-{} input",
                    mode.name(),
                    dims + 1,
                    dims + 2
                ),
            ));
        }
    }
    let mut fw = Map::identity(*shape);
    fw.fill = value;
    let mut out_shape = *shape;
    for k in 0..dims {
        let d = N - 1 - k;
        let (before, after) = (p[2 * k], p[2 * k + 1]);
        let n = shape[d] as i64;
        let out = i128::from(n) + i128::from(before) + i128::from(after);
        // PyTorch: reflect and replicate outputs hold at least one element
        let min_out = match mode {
            PadMode::Reflect | PadMode::Replicate => 1,
            PadMode::Constant | PadMode::Circular => 0,
        };
        if out < min_out {
            return Err(bad(
                "pad",
                show(),
                &format!("dim {d} of extent {n} padded by ({before}, {after}) has extent {out}"),
            ));
        }
        if matches!(mode, PadMode::Reflect | PadMode::Replicate) && n == 0 {
            return Err(bad(
                "shape",
                format!("{shape:?}"),
                &format!("{} padding of an empty dim {d}", mode.name()),
            ));
        }
        let (crop, span) = (-before.min(0), n + before.min(0) + after.min(0));
        let valid = match mode {
            PadMode::Constant | PadMode::Replicate => Ok(()),
            // PyTorch: "Padding size should be less than the corresponding
            // input dimension"
            PadMode::Reflect if before >= n || after >= n => Err(format!(
                "reflect pads ({before}, {after}) must be less than the extent {n} of dim {d}"
            )),
            PadMode::Reflect => Ok(()),
            // crop first, then wrap at most once around what is left
            PadMode::Circular if span < 0 || before > span || after > span => Err(format!(
                "circular pads ({before}, {after}) of dim {d} (extent {n}) wrap around more \
                 than once"
            )),
            PadMode::Circular => Ok(()),
        };
        valid.map_err(|r| bad("pad", show(), &r))?;
        out_shape[d] = out as usize;
        fw.kind[d] = match mode {
            PadMode::Constant => K_CONSTANT,
            PadMode::Reflect => K_REFLECT,
            PadMode::Replicate => K_REPLICATE,
            PadMode::Circular => K_CIRCULAR,
        };
        fw.shift[d] = if mode == PadMode::Circular {
            before.max(0)
        } else {
            before
        };
        fw.crop[d] = crop;
        fw.span[d] = span;
    }
    fw.out_shape = out_shape;
    if mode == PadMode::Constant {
        // the gradient is dy cropped back: a constant pad by the opposite
        // amounts, with 0 outside
        let mut bw = Map::identity(*shape);
        bw.in_shape = out_shape;
        for k in 0..dims {
            let d = N - 1 - k;
            bw.kind[d] = K_CONSTANT;
            bw.shift[d] = -p[2 * k];
        }
        return Ok(Resolved {
            out_shape,
            fw,
            bw,
            bw_kind: BwKind::Gather,
        });
    }
    // the accumulating backward runs over dx (x's shape) reading dy
    let mut bw = fw;
    bw.out_shape = *shape;
    bw.in_shape = out_shape;
    Ok(Resolved {
        out_shape,
        fw,
        bw,
        bw_kind: BwKind::PadSum,
    })
}

/// The gather kernels for one index width: by element, by 16-byte vector
/// (flat or a warp per row), by row (a warp each), and the accumulating
/// pad backward by element and by row.
#[derive(Clone, Debug)]
struct Kernels {
    scalar: Function,
    vec: Function,
    vec_rows: Function,
    rows: Function,
    pad_bw: Function,
    pad_bw_rows: Function,
}

/// A [`ShapeOp`]: `y[o] = x[src(o)]` (or the pad value, or 0 outside the
/// triangle), and its backward `dx[i] = sum of dy[o] over src(o) = i`.
///
/// # Shapes
/// `x`, `dx`: `desc.shape`; `y`, `dy`: [`ShapeDescriptor::output_shape`]
/// (`desc.shape` but for pad); rank `N <= 8`. No workspace.
/// # Layout
/// Any strides; `x` and `dy` may broadcast (stride 0). When `y`'s last
/// dim is contiguous, a multiple of 16 bytes long and 16-byte aligned
/// (with its other strides), each thread stores a 16-byte vector and loads
/// one where its sources are consecutive and aligned (interior of a pad,
/// tril/triu, flip and roll of outer dims).
/// # Aliasing
/// Outputs must not overlap inputs (`InvalidArgument`): a gather reads
/// elements other threads write.
/// # Dtypes
/// f32, f64, f16, bf16 (values are moved exactly; the pad backward sums
/// in f32, f64 for f64, and rounds once). Others: `Error::Unsupported`.
/// # Determinism
/// Bitwise: every output element is written by one thread, and the pad
/// backward sums in a fixed order without atomics.
/// # Errors
/// From `select`: `DtypeMismatch` if `desc.element != T::KIND`;
/// `Unsupported` for another dtype or a rank `N > 8`;
/// `InvalidDescriptor` for what PyTorch rejects: a dim out of range or
/// repeated (flip), shifts not matching dims (roll), rank < 2 (tril,
/// triu), an odd or too long pad list, reflect pads not less than the
/// extent, circular pads wrapping more than once, a non-constant pad of
/// other than 1 to 3 trailing dims of a rank `dims + 1` or `dims + 2`
/// input, an output extent below 0 (constant, circular) or 1 (reflect,
/// replicate), reflect or replicate of an empty dim;
/// `PreferenceRejected` when `pref` forces a backend other than
/// `Baracuda`. From `run` and `run_bw`: `ShapeMismatch`,
/// `ContextMismatch`, `InvalidArgument` when an output overlaps an input.
pub struct ShapePlan<T: Element, const N: usize> {
    desc: ShapeDescriptor<N>,
    resolved: Resolved<N>,
    sku: KernelSku,
    k32: Kernels,
    k64: Kernels,
    grid_cap: u32,
    _t: PhantomData<T>,
}

const OP: &str = "shape";

/// The family's module for element type code `dtype`.
pub(crate) fn shape_spec(dtype: u32) -> ModuleSpec {
    ModuleSpec::new(&kernel_sources::SHAPE).define("BARACUDA_DTYPE", dtype)
}

impl<T: Element, const N: usize> Plan for ShapePlan<T, N> {
    type Descriptor = ShapeDescriptor<N>;
    type Args<'a> = ShapeArgs<'a, T, N>;

    fn select(stream: &Stream, desc: &Self::Descriptor, pref: &PlanPreference) -> Result<Self> {
        let dt = float_dtype_code::<T, N>(OP, desc.element, "shape kernels take")?;
        pref.check_backend(OP, &[BackendKind::Baracuda])?;
        pref.check_workspace(OP, 0)?;
        let resolved = resolve(&desc.op, &desc.shape)?;
        let module = stream.context().module(&shape_spec(dt))?;
        let load = |w: &str| -> Result<Kernels> {
            Ok(Kernels {
                scalar: module.function(&format!("shape_gather{w}"))?,
                vec: module.function(&format!("shape_gather_vec{w}"))?,
                vec_rows: module.function(&format!("shape_gather_vec_rows{w}"))?,
                rows: module.function(&format!("shape_gather_rows{w}"))?,
                pad_bw: module.function(&format!("shape_pad_bw{w}"))?,
                pad_bw_rows: module.function(&format!("shape_pad_bw_rows{w}"))?,
            })
        };
        let (k32, k64) = (load("32")?, load("64")?);
        let grid_cap = crate::launch::resident_blocks(stream, &k64.scalar, THREADS)?;
        Ok(ShapePlan {
            desc: *desc,
            resolved,
            sku: own_float_sku::<T>(
                stream,
                format!("shape.{}", desc.op.name()),
                "index-map gather, vec16 stores",
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
        let (xs, ys) = (&self.desc.shape, &self.resolved.out_shape);
        check_views(
            OP,
            stream,
            &[View::of("x", xs, &args.x), View::of_mut("y", ys, &args.y)],
        )?;
        check_alias(OP, &Extent::of_mut("y", &args.y), &Extent::of("x", &args.x), false)?;
        // SAFETY: both views were bounds-checked at construction and match
        // the map's shapes (checked above); y is disjoint from x.
        unsafe {
            self.gather(
                stream,
                &self.resolved.fw,
                (args.y.data().ptr().cast(), args.y.strides()),
                (args.x.data().ptr().cast(), args.x.strides()),
                false,
            )
        }
    }
}

impl<T: Element, const N: usize> Backward for ShapePlan<T, N> {
    type BwArgs<'a> = ShapeBwArgs<'a, T, N>;

    fn run_bw(
        &self,
        stream: &Stream,
        _workspace: Workspace<'_>,
        args: Self::BwArgs<'_>,
    ) -> Result<()> {
        let (xs, ys) = (&self.desc.shape, &self.resolved.out_shape);
        check_views(
            OP,
            stream,
            &[View::of("dy", ys, &args.dy), View::of_mut("dx", xs, &args.dx)],
        )?;
        check_alias(OP, &Extent::of_mut("dx", &args.dx), &Extent::of("dy", &args.dy), false)?;
        // SAFETY: as in `run`: views bounds-checked and matching the
        // backward map's shapes, dx disjoint from dy.
        unsafe {
            self.gather(
                stream,
                &self.resolved.bw,
                (args.dx.data().ptr().cast(), args.dx.strides()),
                (args.dy.data().ptr().cast(), args.dy.strides()),
                self.resolved.bw_kind == BwKind::PadSum,
            )
        }
    }
}

impl<T: Element, const N: usize> ShapePlan<T, N> {
    /// The descriptor the plan was selected for.
    pub fn descriptor(&self) -> &ShapeDescriptor<N> {
        &self.desc
    }

    /// The shape of `y` and `dy`.
    pub fn output_shape(&self) -> [usize; N] {
        self.resolved.out_shape
    }

    /// Launch `map` from `inp` into `out` (the accumulating pad backward
    /// when `pad_sum`).
    ///
    /// # Safety
    /// `out` and `inp` must hold every element their strides reach over
    /// `map`'s output and input shapes, and must not overlap.
    unsafe fn gather(
        &self,
        stream: &Stream,
        map: &Map<N>,
        out: (DevPtrMut<u8>, &[usize; N]),
        inp: (DevPtr<u8>, &[usize; N]),
        pad_sum: bool,
    ) -> Result<()> {
        let Some((p, path, items)) =
            launch_args(map, out, inp, pad_sum, std::mem::size_of::<T>())
        else {
            return Ok(());
        };
        let k = if p.n <= u64::from(u32::MAX) {
            &self.k32
        } else {
            &self.k64
        };
        let f = match path {
            Path::PadSum => &k.pad_bw,
            Path::PadSumRows => &k.pad_bw_rows,
            Path::Vector => &k.vec,
            Path::VectorRows => &k.vec_rows,
            Path::Rows => &k.rows,
            Path::Scalar => &k.scalar,
        };
        let blocks = items
            .div_ceil(THREADS as usize)
            .clamp(1, self.grid_cap as usize) as u32;
        // SAFETY: forwarded from the caller's contract; the kernels reach
        // only the elements of the shapes in `p`.
        unsafe { launch_params(stream, f, LaunchConfig::linear(blocks, THREADS), p) }
    }
}

/// Which kernel a launch runs.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
enum Path {
    /// One output element per thread.
    Scalar,
    /// 16-byte vectors of outputs, [`VEC_UNROLL`] per thread.
    Vector,
    /// 16-byte vectors of outputs, one output row per warp.
    VectorRows,
    /// One output row per warp.
    Rows,
    /// The accumulating pad backward, one element per thread.
    PadSum,
    /// The accumulating pad backward, one row per warp.
    PadSumRows,
}

/// Vectors per thread and step of the flat vector kernel (`VEC_UNROLL`).
const VEC_UNROLL: usize = 4;

/// Output rows at least this long run a warp per row (`Path::Rows`,
/// `Path::PadSumRows`): every lane has an element.
const ROW_MIN: usize = 32;
/// ... when there are at least this many rows: 2048 warps, enough to keep
/// every SM busy (fewer, longer rows run an element per thread).
const ROW_MIN_ROWS: usize = 2048;

/// The output columns `[lo, hi)` of dim `d` whose source is column
/// `j + off` of x's dim, as up to two straight runs `(lo, hi, off)`: the
/// interior of a pad, the two parts of a roll, every column of an
/// unmapped dim; `(0, 0, 0)` for none (a flip). The row kernels read a run
/// without the per-column map.
fn straight_runs(p: &GatherArgs, d: usize) -> [(i64, i64, i64); 2] {
    let width = p.out_shape[d] as i64;
    let (n, shift) = (p.in_shape[d] as i64, p.shift[d]);
    let runs = match p.kind[d] {
        K_IDENTITY => [(0, width, 0), (0, 0, 0)],
        K_CONSTANT | K_REFLECT | K_REPLICATE => [(shift, shift + n, -shift), (0, 0, 0)],
        K_ROLL => [(shift, width, -shift), (0, shift, n - shift)],
        K_CIRCULAR => [(shift, shift + p.span[d], p.crop[d] - shift), (0, 0, 0)],
        _ => [(0, 0, 0); 2],
    };
    runs.map(|(lo, hi, off)| {
        let (lo, hi) = (lo.clamp(0, width), hi.clamp(0, width));
        if lo < hi {
            (lo, hi, off)
        } else {
            (0, 0, 0)
        }
    })
}

/// Whether `strides` lay `shape` out row-major and dense (extent-1 dims
/// may have any stride).
fn is_row_major(shape: &[usize], strides: &[usize]) -> bool {
    let mut want = 1;
    for d in (0..shape.len()).rev() {
        if shape[d] != 1 && strides[d] != want {
            return false;
        }
        want *= shape[d];
    }
    true
}

/// The kernel parameters of `map` from `inp` into `out` (addresses and
/// element strides) for elements of `size` bytes, the kernel and how many
/// threads' items (elements, vectors, or 32 per row) it covers; None when
/// the output is empty.
fn launch_args<const N: usize>(
    map: &Map<N>,
    out: (DevPtrMut<u8>, &[usize; N]),
    inp: (DevPtr<u8>, &[usize; N]),
    pad_sum: bool,
    size: usize,
) -> Option<(GatherArgs, Path, usize)> {
    let n: usize = map.out_shape.iter().product();
    if n == 0 {
        return None;
    }
    let vec = 16 / size;
    let mut p = GatherArgs {
        n: n as u64,
        rank: N as u32,
        tri: map.tri,
        diagonal: map.diagonal,
        flat: u32::from(map.flat.is_some()),
        pad0: 0,
        flat_shift: map.flat.unwrap_or(0),
        fill: map.fill,
        out_shape: padded(map.out_shape.iter().map(|&e| e as u64)),
        in_shape: padded(map.in_shape.iter().map(|&e| e as u64)),
        out_stride: padded(out.1.iter().map(|&s| s as i64)),
        in_stride: padded(inp.1.iter().map(|&s| s as i64)),
        kind: map.kind,
        shift: map.shift,
        crop: map.crop,
        span: map.span,
        run_lo: [0; 2],
        run_hi: [0; 2],
        run_off: [0; 2],
        out: out.0,
        inp: inp.0,
    };
    // A rank-0 tensor is one element: a rank-1 copy of it (the kernels
    // index the last dim).
    if N == 0 {
        p.rank = 1;
        p.flat = 0;
        p.out_shape = padded([1u64].into_iter());
        p.in_shape = p.out_shape;
        p.span = padded([1i64].into_iter());
    }
    // A flattened roll of dense row-major tensors is a roll of one dim of
    // n elements: no division per element, and 16-byte vectors.
    if let Some(shift) = map.flat.filter(|_| N > 0) {
        if is_row_major(&map.out_shape, out.1) && is_row_major(&map.in_shape, inp.1) {
            p.rank = 1;
            p.flat = 0;
            p.out_shape = padded([n as u64].into_iter());
            p.in_shape = p.out_shape;
            p.out_stride = padded([1i64].into_iter());
            p.in_stride = p.out_stride;
            p.kind = padded([if shift == 0 { K_IDENTITY } else { K_ROLL }].into_iter());
            p.shift = padded([shift].into_iter());
            p.span = padded([n as i64].into_iter());
        }
    }
    let rank = p.rank as usize;
    let last = rank.saturating_sub(1);
    let width = p.out_shape[last] as usize;
    for (q, (lo, hi, off)) in straight_runs(&p, last).into_iter().enumerate() {
        (p.run_lo[q], p.run_hi[q], p.run_off[q]) = (lo, hi, off);
    }
    let stride = |d: usize| p.out_stride[d] as usize;
    // a warp per row: rows of at least ROW_MIN, enough of them to fill
    // the device
    let by_rows = rank > 0 && width >= ROW_MIN && n / width >= ROW_MIN_ROWS;
    let path = if pad_sum && by_rows {
        Path::PadSumRows
    } else if pad_sum {
        Path::PadSum
    } else if rank > 0
        && p.flat == 0
        && stride(last) == 1
        && width % vec == 0
        && out.0.addr() % 16 == 0
        && (0..last).all(|d| p.out_shape[d] == 1 || stride(d) % vec == 0)
    {
        // y's last dim contiguous, a whole number of 16-byte vectors, and
        // every vector aligned; a warp per row of 32 vectors or more
        if by_rows && width / vec >= ROW_MIN {
            Path::VectorRows
        } else {
            Path::Vector
        }
    } else if by_rows && p.flat == 0 {
        Path::Rows
    } else {
        Path::Scalar
    };
    let items = match path {
        Path::Vector => (n / vec).div_ceil(VEC_UNROLL),
        Path::VectorRows | Path::Rows | Path::PadSumRows => n / width * 32,
        Path::Scalar | Path::PadSum => n,
    };
    Some((p, path, items))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn out<const N: usize>(op: ShapeOp, shape: [usize; N]) -> Result<[usize; N]> {
        ShapeDescriptor::new(op, ElementKind::F32, shape).output_shape()
    }

    fn field(r: Result<impl core::fmt::Debug>) -> &'static str {
        match r {
            Err(Error::InvalidDescriptor { field, .. }) => field,
            other => panic!("expected InvalidDescriptor, got {other:?}"),
        }
    }

    #[test]
    fn params_layout_matches_cuda() {
        // 8 + 4 + 4 + 8 + 4 + 4 + 8 + 8 + 4 * 64 + 32 + 3 * 64 + 48 + 16
        assert_eq!(std::mem::size_of::<GatherArgs>(), 592);
    }

    #[test]
    fn output_shapes() {
        assert_eq!(out(ShapeOp::flip(&[0, -1]), [2, 3]), Ok([2, 3]));
        assert_eq!(
            out(ShapeOp::pad(PadMode::Constant, &[1, 2, -1, 0], 0.0), [4, 5, 6]),
            Ok([4, 4, 9])
        );
        assert_eq!(
            out(ShapeOp::pad(PadMode::Reflect, &[3, 3, 3, 3], 0.0), [2, 3, 8, 8]),
            Ok([2, 3, 14, 14])
        );
        assert_eq!(
            out(ShapeOp::pad(PadMode::Constant, &[-2, -2], 0.0), [3, 4]),
            Ok([3, 0])
        );
    }

    #[test]
    fn pytorch_rejections_are_invalid_descriptors() {
        assert_eq!(field(out(ShapeOp::flip(&[0, 0]), [2, 3])), "dims");
        assert_eq!(field(out(ShapeOp::flip(&[0, -2]), [2, 3])), "dims");
        assert_eq!(field(out(ShapeOp::flip(&[2]), [2, 3])), "dims");
        assert_eq!(field(out(ShapeOp::roll(&[1, 2], &[0]), [2, 3])), "shifts");
        assert_eq!(field(out(ShapeOp::roll(&[1, 2], &[]), [2, 3])), "shifts");
        assert_eq!(field(out(ShapeOp::roll(&[1], &[3]), [2, 3])), "dims");
        assert_eq!(field(out(ShapeOp::Tril { diagonal: 0 }, [5])), "shape");
        let pad = |m, p: &[i64]| ShapeOp::pad(m, p, 0.0);
        assert_eq!(field(out(pad(PadMode::Constant, &[1]), [2, 3])), "pad");
        assert_eq!(field(out(pad(PadMode::Constant, &[1; 6]), [2, 3])), "pad");
        assert_eq!(field(out(pad(PadMode::Constant, &[-2, -2]), [2, 3])), "pad");
        assert_eq!(field(out(pad(PadMode::Reflect, &[3, 0]), [2, 3])), "pad");
        assert_eq!(field(out(pad(PadMode::Reflect, &[2, 2]), [3])), "shape");
        assert_eq!(
            field(out(pad(PadMode::Reflect, &[1, 1]), [2, 2, 2, 3])),
            "shape"
        );
        assert_eq!(field(out(pad(PadMode::Replicate, &[1; 8]), [1, 2, 2, 2, 2])), "pad");
        assert_eq!(field(out(pad(PadMode::Circular, &[4, 0]), [2, 3])), "pad");
        assert_eq!(field(out(pad(PadMode::Circular, &[-1, 3]), [2, 3])), "pad");
        assert_eq!(field(out(pad(PadMode::Replicate, &[-2, -1]), [2, 3])), "pad");
        assert_eq!(field(out(pad(PadMode::Replicate, &[1, 1]), [2, 0])), "shape");
        // allowed: pads just inside the limits, and empty batches
        assert!(out(pad(PadMode::Reflect, &[2, 2]), [2, 3]).is_ok());
        assert!(out(pad(PadMode::Circular, &[3, 3]), [2, 3]).is_ok());
        assert!(out(pad(PadMode::Circular, &[-1, 2]), [2, 3]).is_ok());
        assert_eq!(out(pad(PadMode::Circular, &[-2, -2]), [2, 4]), Ok([2, 0]));
        assert!(out(pad(PadMode::Replicate, &[1, 1]), [0, 3]).is_ok());
    }

    #[test]
    fn contiguous_aligned_rows_take_the_vector_path() {
        let path = |op, addr: u64, strides: [usize; 2], pad_sum| {
            let r = resolve(&op, &[4, 8]).unwrap();
            let map = if pad_sum { r.bw } else { r.fw };
            let st = [r.fw.out_shape[1], 1];
            let strides = if pad_sum { [8, 1] } else { strides };
            launch_args(
                &map,
                (DevPtrMut::from_addr(addr), &strides),
                (DevPtr::from_addr(256), &st),
                pad_sum,
                4,
            )
            .map(|(_, p, items)| (p, items))
        };
        let flip = ShapeOp::flip(&[1]);
        assert_eq!(path(flip, 512, [8, 1], false), Some((Path::Vector, 2)));
        // misaligned, strided rows, strided elements
        assert_eq!(path(flip, 516, [8, 1], false), Some((Path::Scalar, 32)));
        assert_eq!(path(flip, 512, [9, 1], false), Some((Path::Scalar, 32)));
        assert_eq!(path(flip, 512, [16, 2], false), Some((Path::Scalar, 32)));
        // a flattened roll: of dense tensors one rolled dim of 32, else by
        // element; a padded row of 10 is no whole number of f32 vectors
        let flat = ShapeOp::roll(&[3], &[]);
        assert_eq!(path(flat, 512, [8, 1], false), Some((Path::Vector, 2)));
        assert_eq!(path(flat, 512, [9, 1], false), Some((Path::Scalar, 32)));
        let pad = ShapeOp::pad(PadMode::Reflect, &[1, 1], 0.0);
        assert_eq!(path(pad, 512, [10, 1], false), Some((Path::Scalar, 40)));
        assert_eq!(path(pad, 512, [8, 1], true), Some((Path::PadSum, 32)));
        // rows of 32 or more, 2048 of them or more: a warp per row
        let wide = ShapeOp::pad(PadMode::Reflect, &[3, 3], 0.0);
        let r = resolve(&wide, &[4096, 40]).unwrap();
        let launch = |map: &Map<2>, st: &[usize; 2], pad_sum| {
            launch_args(
                map,
                (DevPtrMut::from_addr(512), st),
                (DevPtr::from_addr(256), st),
                pad_sum,
                2,
            )
            .map(|(_, p, items)| (p, items))
        };
        assert_eq!(launch(&r.fw, &[46, 1], false), Some((Path::Rows, 4096 * 32)));
        assert_eq!(launch(&r.bw, &[40, 1], true), Some((Path::PadSumRows, 4096 * 32)));
        let few = resolve(&wide, &[4, 40]).unwrap();
        assert_eq!(launch(&few.fw, &[46, 1], false), Some((Path::Scalar, 4 * 46)));
        // rows of 32 vectors or more that take vectors: a warp per row;
        // fewer rows than that, the flat vector kernel
        let tri = ShapeOp::Tril { diagonal: 0 };
        let r = resolve(&tri, &[4096, 256]).unwrap();
        assert_eq!(launch(&r.fw, &[256, 1], false), Some((Path::VectorRows, 4096 * 32)));
        let r = resolve(&tri, &[4096, 248]).unwrap();
        assert_eq!(launch(&r.fw, &[248, 1], false), Some((Path::Vector, 4096 * 31 / 4)));
        let r = resolve(&tri, &[16, 4096]).unwrap();
        assert_eq!(launch(&r.fw, &[4096, 1], false), Some((Path::Vector, 16 * 512 / 4)));
        // a rank-0 tensor: one element, by element
        let r0 = resolve(&ShapeOp::roll(&[5], &[]), &[]).unwrap();
        let (p, kernel, items) = launch_args(
            &r0.fw,
            (DevPtrMut::from_addr(512), &[]),
            (DevPtr::from_addr(256), &[]),
            false,
            4,
        )
        .unwrap();
        assert_eq!((p.rank, p.out_shape[0], p.flat, p.kind[0]), (1, 1, 0, K_IDENTITY));
        assert_eq!((kernel, items), (Path::Scalar, 1));
        // a flattened roll of dense tensors: one rolled dim, vectors
        let flat = resolve(&ShapeOp::roll(&[8], &[]), &[64, 40]).unwrap();
        let (p, kernel, items) = launch_args(
            &flat.fw,
            (DevPtrMut::from_addr(512), &[40, 1]),
            (DevPtr::from_addr(256), &[40, 1]),
            false,
            2,
        )
        .unwrap();
        assert_eq!((p.rank, p.kind[0], p.shift[0], p.flat), (1, K_ROLL, 8, 0));
        assert_eq!((kernel, items), (Path::Vector, 64 * 40 / 8 / VEC_UNROLL));
        let empty = ShapeOp::pad(PadMode::Constant, &[-4, -4], 0.0);
        assert_eq!(path(empty, 512, [0, 1], false), None);
    }

    #[test]
    fn straight_runs_match_the_map() {
        // every column of the run reads column j + off, as the map says
        let ops = [
            ShapeOp::pad(PadMode::Constant, &[3, 5], 0.0),
            ShapeOp::pad(PadMode::Constant, &[-2, 4], 0.0),
            ShapeOp::pad(PadMode::Reflect, &[3, 2], 0.0),
            ShapeOp::pad(PadMode::Replicate, &[7, 1], 0.0),
            ShapeOp::pad(PadMode::Circular, &[3, -2], 0.0),
            ShapeOp::roll(&[3], &[1]),
            ShapeOp::flip(&[0]),
            ShapeOp::Tril { diagonal: 1 },
        ];
        for (i, op) in ops.into_iter().enumerate() {
            let r = resolve(&op, &[4, 10]).unwrap();
            // the backward of reflect, replicate and circular pads sums
            let gathers = if (2..5).contains(&i) { vec![r.fw] } else { vec![r.fw, r.bw] };
            for map in gathers {
                let (p, _, _) = launch_args(
                    &map,
                    (DevPtrMut::from_addr(512), &[map.out_shape[1], 1]),
                    (DevPtr::from_addr(256), &[map.in_shape[1], 1]),
                    false,
                    4,
                )
                .unwrap();
                let runs = (0..2).map(|q| (p.run_lo[q], p.run_hi[q], p.run_off[q]));
                let src = |o: i64| match p.kind[1] {
                    K_IDENTITY => o,
                    K_FLIP => p.in_shape[1] as i64 - 1 - o,
                    K_ROLL => (o - p.shift[1]).rem_euclid(p.in_shape[1] as i64),
                    K_CIRCULAR => p.crop[1] + (o - p.shift[1]).rem_euclid(p.span[1]),
                    _ => {
                        let s = o - p.shift[1];
                        if p.kind[1] == K_REFLECT {
                            let s = s.abs();
                            let n = p.in_shape[1] as i64;
                            if s >= n {
                                2 * (n - 1) - s
                            } else {
                                s
                            }
                        } else if p.kind[1] == K_REPLICATE {
                            s.clamp(0, p.in_shape[1] as i64 - 1)
                        } else if (0..p.in_shape[1] as i64).contains(&s) {
                            s
                        } else {
                            -1
                        }
                    }
                };
                let mut covered = 0;
                for (lo, hi, off) in runs {
                    assert!(0 <= lo && lo <= hi && hi <= p.out_shape[1] as i64, "{op:?}");
                    for j in lo..hi {
                        assert_eq!(src(j), j + off, "{op:?} column {j}");
                    }
                    covered += hi - lo;
                }
                if p.kind[1] != K_FLIP {
                    assert!(covered > 0, "{op:?} has a run");
                }
                if p.kind[1] == K_ROLL {
                    assert_eq!(covered, p.out_shape[1] as i64, "a roll is two runs");
                }
            }
        }
    }

    #[test]
    fn roll_shifts_are_normalised_and_inverted() {
        let r = resolve(&ShapeOp::roll(&[-1, 7, 3], &[1, 1, 0]), &[3, 4]).unwrap();
        // dim 1: -1 + 7 = 6 = 2 (mod 4); dim 0: 3 = 0 (mod 3)
        assert_eq!(r.fw.kind[..2], [K_IDENTITY, K_ROLL]);
        assert_eq!(r.fw.shift[1], 2);
        assert_eq!(r.bw.shift[1], 2);
        let r = resolve(&ShapeOp::roll(&[-1], &[]), &[3, 4]).unwrap();
        assert_eq!((r.fw.flat, r.bw.flat), (Some(11), Some(1)));
    }
}
