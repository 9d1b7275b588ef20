//! Rotary position embedding ([`RopePlan`]).

use core::marker::PhantomData;

use baracuda_driver::{Function, LaunchConfig, ModuleSpec, Stream};
use baracuda_kernels_types::{
    DevPtr, DevPtrMut, Element, ElementKind, Error, KernelSku, PlanPreference, Result, TensorMut,
    TensorRef, Workspace,
};

use super::reference::RopeStyle;
use crate::checks::{
    byte_span, check_ctx, check_disjoint, check_shape, float_dtype_code, ByteSpan,
};
use crate::launch::{grid_x, launch_params};
use crate::plan::own_float_sku;
use crate::{kernel_sources, BackendKind, Backward, Plan};

const OP: &str = "rope";

/// Where the rotation angles come from.
#[derive(Copy, Clone, Debug, PartialEq)]
pub enum RopeFreqs {
    /// `angle = position / pos_scale * theta^(-2e / rotary_dim)` for pair
    /// `e` (`pos_scale` 1 is plain RoPE; above 1, linear position
    /// interpolation).
    Theta {
        /// The base (10000 in most models).
        theta: f64,
        /// Positions are divided by it.
        pos_scale: f64,
    },
    /// `cos` and `sin` tables `[positions, rotary_dim / 2]` (f32) in the
    /// arguments: any frequency scheme (NTK, YaRN, Llama 3 scaling)
    /// precomputed by the caller.
    Table,
}

/// A rotary embedding of `x` `[batch, seq, heads, head_dim]`.
#[derive(Copy, Clone, Debug, PartialEq)]
pub struct RopeDescriptor {
    /// How elements pair.
    pub style: RopeStyle,
    /// Element type of `x` and `y`.
    pub element: ElementKind,
    /// `[batch, seq, heads, head_dim]`.
    pub shape: [usize; 4],
    /// Leading elements of each head that rotate (even, at most
    /// `head_dim`); the rest are copied.
    pub rotary_dim: usize,
    /// The angles.
    pub freqs: RopeFreqs,
}

impl RopeDescriptor {
    /// NeoX-style RoPE over whole heads with base `theta`.
    pub fn new(element: ElementKind, shape: [usize; 4], theta: f64) -> Self {
        RopeDescriptor {
            style: RopeStyle::NeoX,
            element,
            shape,
            rotary_dim: shape[3],
            freqs: RopeFreqs::Theta {
                theta,
                pos_scale: 1.0,
            },
        }
    }
    /// Pair elements as `style` does.
    pub fn with_style(mut self, style: RopeStyle) -> Self {
        self.style = style;
        self
    }
    /// Rotate only the leading `rotary_dim` elements of each head.
    pub fn with_rotary_dim(mut self, rotary_dim: usize) -> Self {
        self.rotary_dim = rotary_dim;
        self
    }
    /// Take the angles from `freqs`.
    pub fn with_freqs(mut self, freqs: RopeFreqs) -> Self {
        self.freqs = freqs;
        self
    }
}

/// The tensors of the forward.
#[derive(Debug)]
pub struct RopeArgs<'a, T> {
    /// Input `[batch, seq, heads, head_dim]`, any strides.
    pub x: TensorRef<'a, T, 4>,
    /// Position of each token `[batch, seq]`; `None`: token `s` is at `s`.
    pub positions: Option<TensorRef<'a, i64, 2>>,
    /// `(cos, sin)` tables `[positions, rotary_dim / 2]` for
    /// [`RopeFreqs::Table`]; `None` otherwise.
    pub table: Option<(TensorRef<'a, f32, 2>, TensorRef<'a, f32, 2>)>,
    /// Output, `x`'s shape; must not overlap any input.
    pub y: TensorMut<'a, T, 4>,
}

/// The tensors of the backward (`dx` is `dy` rotated back).
#[derive(Debug)]
pub struct RopeBwArgs<'a, T> {
    /// Gradient of the output.
    pub dy: TensorRef<'a, T, 4>,
    /// As in [`RopeArgs`].
    pub positions: Option<TensorRef<'a, i64, 2>>,
    /// As in [`RopeArgs`].
    pub table: Option<(TensorRef<'a, f32, 2>, TensorRef<'a, f32, 2>)>,
    /// Gradient of the input, written; must not overlap any input.
    pub dx: TensorMut<'a, T, 4>,
}

/// Rotary position embedding, forward and backward.
///
/// # Math
/// Pair `e < rotary_dim / 2` of each head holds elements `(e, e +
/// rotary_dim / 2)` (NeoX) or `(2e, 2e + 1)` (GPT-J) and rotates by
/// `a = pos * inv_freq(e)`: `y0 = x0 cos a - x1 sin a`, `y1 = x1 cos a +
/// x0 sin a`. Elements past `rotary_dim` are copied. The backward rotates
/// `dy` by `-a`.
///
/// # Dtypes
/// f32, f64, f16, bf16 (arithmetic in f32, f64 in f64); others
/// `Unsupported`.
///
/// # Kernels
/// `run` picks per call ([`RopePlan::vectorized`] tells which):
/// - token rows in 16-byte vectors, when `x` and `y` have unit element
///   stride, 16-byte aligned bases and batch, seq and head strides that are
///   whole vectors, and `rotary_dim / 2` (NeoX) or `rotary_dim` (GPT-J) and
///   `head_dim` are multiples of the vector (`16 / size_of::<T>()`
///   elements). A block takes consecutive tokens with all their heads (or
///   some heads of one token), computes each token's `rotary_dim / 2`
///   angles once into shared memory and rotates every head with them.
/// - otherwise one thread per pair over any strides, each computing its
///   own angle.
///
/// Both compute the angles alike (the product and its reduction mod 2 pi
/// in f64, sine and cosine in f32, f64 for f64), so they give the same
/// values.
///
/// # Errors
/// `select`: `DtypeMismatch`, `Unsupported` (dtype), `InvalidDescriptor`
/// (an odd or too large `rotary_dim`, a non-positive or non-finite theta or
/// scale), `PreferenceRejected`. `run`, `run_bw`: `ShapeMismatch` (any
/// view; positions `[batch, seq]`; tables `[rows, rotary_dim / 2]`),
/// `InvalidArgument` (tables given or missing against the descriptor, an
/// output overlapping an input), `ContextMismatch`. A position outside the
/// tables is reported in-band: its rotated elements are NaN.
pub struct RopePlan<T: Element> {
    desc: RopeDescriptor,
    sku: KernelSku,
    /// `rope_rows`: 16-byte vectors, a block per group of token rows.
    rows: Function,
    /// `rope`: any strides, a thread per pair.
    strided: Function,
    sm_count: u32,
    _t: PhantomData<T>,
}

/// The module on dtype code `dtype`.
pub(crate) fn spec(dtype: u32) -> ModuleSpec {
    ModuleSpec::new(&kernel_sources::ROPE).define("BARACUDA_DTYPE", dtype)
}

/// `InvalidDescriptor` of this op.
fn invalid(field: &'static str, value: String, reason: &str) -> Error {
    crate::checks::invalid_descriptor(OP, field, value, reason)
}

/// The checks `select` runs before it touches the GPU.
pub(crate) fn validate<T: Element>(desc: &RopeDescriptor) -> Result<u32> {
    let dtype = float_dtype_code::<T, 4>(OP, desc.element, "rope takes")?;
    let d = desc.shape[3];
    if desc.rotary_dim % 2 != 0 || desc.rotary_dim > d {
        return Err(invalid(
            "rotary_dim",
            desc.rotary_dim.to_string(),
            &format!("must be even and at most head_dim {d}"),
        ));
    }
    if let RopeFreqs::Theta { theta, pos_scale } = desc.freqs {
        if !(theta.is_finite() && theta > 0.0) {
            return Err(invalid(
                "freqs.theta",
                theta.to_string(),
                "must be finite and > 0",
            ));
        }
        if !(pos_scale.is_finite() && pos_scale > 0.0) {
            return Err(invalid(
                "freqs.pos_scale",
                pos_scale.to_string(),
                "must be finite and > 0",
            ));
        }
    }
    Ok(dtype)
}

/// `RopeParams` of `rope.cu`, field for field.
#[repr(C)]
#[derive(Copy, Clone)]
struct RopeParams<T> {
    x: DevPtr<T>,
    y: DevPtrMut<T>,
    pos: DevPtr<i64>,
    cos: DevPtr<f32>,
    sin: DevPtr<f32>,
    shape: [u64; 4],
    sx: [i64; 4],
    sy: [i64; 4],
    sp: [i64; 2],
    sc: [i64; 2],
    table_rows: u64,
    n_pairs: u64,
    n_tail: u64,
    n_groups: u64,
    log2_theta: f64,
    pos_scale: f64,
    rotary_dim: u32,
    gptj: u32,
    inverse: u32,
    tokens_per_cta: u32,
    heads_per_cta: u32,
    head_groups: u32,
    rot_items: u32,
    head_items: u32,
}

/// Rows one thread of `rope_rows` takes per pass (`ROPE_ROWS_PER_THREAD`
/// in rope.cu).
const ROWS_PER_THREAD: usize = 4;
/// Most threads of a `rope_rows` block (its `__launch_bounds__`).
const ROW_THREADS: usize = 256;
/// Blocks per SM the row groups aim to fill (one wave of full blocks).
const ROW_BLOCKS_PER_SM: usize = 8;
/// Shared angle table bytes a block of several tokens stays within.
const ANGLE_BYTES: usize = 16 << 10;
/// Shared bytes a launch gets without opting in: the angle table of one
/// token must fit.
const MAX_ANGLE_BYTES: usize = 48 << 10;

/// How `rope_rows` splits a problem: a row is one head of one token, a
/// block takes `tokens` consecutive tokens with all their heads, or
/// `heads` heads of one token.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
struct RowSplit {
    tokens: u32,
    heads: u32,
    head_groups: u32,
    groups: u64,
    /// Rotated items of a head (NeoX: vector pairs; GPT-J: vectors).
    rot_items: u32,
    /// Items of a head: the rotated ones, then the pass-through vectors.
    head_items: u32,
    threads: u32,
    smem_bytes: u32,
}

/// The split of `rope_rows` for `shape` with 16-byte vectors of `elem`
/// bytes and angles of `acc` bytes, on `sm_count` SMs; `None` when the
/// head does not cut into whole vectors (`rotary_dim / 2` for NeoX,
/// `rotary_dim` for GPT-J, and `head_dim`), has more than
/// [`ROW_THREADS`] items, a token's angle table exceeds
/// [`MAX_ANGLE_BYTES`], or the tokens pass `i32::MAX` (the kernel's 32-bit
/// token indices).
fn row_split(
    shape: [usize; 4],
    rotary_dim: usize,
    style: RopeStyle,
    (elem, acc): (usize, usize),
    sm_count: u32,
) -> Option<RowSplit> {
    let vec = 16 / elem;
    let [b, s, h, d] = shape;
    let half = rotary_dim / 2;
    let rotated = if style == RopeStyle::GptJ {
        rotary_dim
    } else {
        half
    };
    if d % vec != 0 || rotated % vec != 0 {
        return None;
    }
    let rot_items = rotated / vec;
    let head_items = rot_items + (d - rotary_dim) / vec;
    let tokens = b.checked_mul(s)?;
    let angle_bytes = 2 * half * acc;
    if head_items == 0
        || head_items > ROW_THREADS
        || angle_bytes > MAX_ANGLE_BYTES
        || tokens > i32::MAX as usize
        || h > u32::MAX as usize
    {
        return None;
    }
    // rows a full block takes in one pass, fewer where the device would
    // otherwise not fill
    let cap = ROW_THREADS / head_items * ROWS_PER_THREAD;
    let fill = (tokens * h).div_ceil(sm_count.max(1) as usize * ROW_BLOCKS_PER_SM);
    let rows = cap.min(fill).max(1);
    let (tpc, hpc) = if rows >= h {
        let by_smem = ANGLE_BYTES.checked_div(angle_bytes).unwrap_or(usize::MAX);
        ((rows / h).min(by_smem).min(tokens).max(1), h)
    } else {
        (1, rows)
    };
    let head_groups = h.div_ceil(hpc);
    let threads = (head_items * (tpc * hpc).div_ceil(ROWS_PER_THREAD))
        .next_multiple_of(32)
        .min(ROW_THREADS);
    Some(RowSplit {
        tokens: tpc as u32,
        heads: hpc as u32,
        head_groups: head_groups as u32,
        groups: (tokens.div_ceil(tpc) * head_groups) as u64,
        rot_items: rot_items as u32,
        head_items: head_items as u32,
        threads: threads as u32,
        smem_bytes: (tpc * angle_bytes) as u32,
    })
}

/// Whether `rope_rows` can read and write the views at `x` and `y`
/// (addresses, strides) of `shape` in 16-byte vectors of `vec` elements:
/// unit element stride, 16-byte aligned bases, and token and head strides
/// (of the axes longer than 1) whole vectors.
fn vector_views(shape: &[usize; 4], vec: usize, views: [(u64, &[usize; 4]); 2]) -> bool {
    views.into_iter().all(|(addr, st)| {
        addr % 16 == 0 && st[3] == 1 && (0..3).all(|i| shape[i] <= 1 || st[i] % vec == 0)
    })
}

type Table<'a> = Option<(TensorRef<'a, f32, 2>, TensorRef<'a, f32, 2>)>;

/// Where the angles of one run come from: the positions, the tables (or
/// none) with their strides and rows, and theta's log2 and the scale.
struct Angles {
    pos: DevPtr<i64>,
    sp: [i64; 2],
    cos: DevPtr<f32>,
    sin: DevPtr<f32>,
    sc: [i64; 2],
    rows: u64,
    log2_theta: f64,
    pos_scale: f64,
}

impl<T: Element> RopePlan<T> {
    /// The split `rope_rows` takes views `x` and `y` with, or `None` for
    /// the strided kernel.
    fn rows_for(&self, x: &TensorRef<'_, T, 4>, y: &TensorMut<'_, T, 4>) -> Option<RowSplit> {
        let elem = size_of::<T>();
        let acc = if T::KIND == ElementKind::F64 { 8 } else { 4 };
        let shape = &self.desc.shape;
        let views = [
            (x.data().ptr().addr(), x.strides()),
            (y.data().ptr().addr(), y.strides()),
        ];
        if !vector_views(shape, 16 / elem, views) {
            return None;
        }
        row_split(
            *shape,
            self.desc.rotary_dim,
            self.desc.style,
            (elem, acc),
            self.sm_count,
        )
    }

    /// Whether `run` (or `run_bw`) on input `x` and output `y` takes the
    /// vectorised kernel (`rope_rows` in rope.cu); otherwise the strided
    /// one. Both give the same values.
    pub fn vectorized(&self, x: &TensorRef<'_, T, 4>, y: &TensorMut<'_, T, 4>) -> bool {
        self.rows_for(x, y).is_some()
    }

    /// Check the positions and tables against the plan; their spans join
    /// `inputs`.
    fn angles(
        &self,
        stream: &Stream,
        positions: &Option<TensorRef<'_, i64, 2>>,
        table: &Table<'_>,
        inputs: &mut Vec<ByteSpan>,
    ) -> Result<Angles> {
        let shape = self.desc.shape;
        let (pos, sp) = match positions {
            Some(p) => {
                check_shape(OP, "positions", &[shape[0], shape[1]], p.shape())?;
                check_ctx(OP, "positions", stream, p.data().ctx_id())?;
                inputs.push(byte_span("positions", p));
                (
                    p.data().ptr(),
                    [p.strides()[0] as i64, p.strides()[1] as i64],
                )
            }
            None => (DevPtr::NULL, [0; 2]),
        };
        let half = self.desc.rotary_dim / 2;
        match (self.desc.freqs, table) {
            (RopeFreqs::Theta { theta, pos_scale }, None) => Ok(Angles {
                pos,
                sp,
                cos: DevPtr::NULL,
                sin: DevPtr::NULL,
                sc: [0; 2],
                rows: 0,
                log2_theta: theta.log2(),
                pos_scale,
            }),
            (RopeFreqs::Table, Some((c, s))) => {
                let rows = c.shape()[0];
                check_shape(OP, "cos", &[rows, half], c.shape())?;
                check_shape(OP, "sin", &[rows, half], s.shape())?;
                check_ctx(OP, "cos", stream, c.data().ctx_id())?;
                check_ctx(OP, "sin", stream, s.data().ctx_id())?;
                if c.strides() != s.strides() {
                    return Err(Error::InvalidArgument {
                        op: OP,
                        arg: "sin",
                        reason: format!(
                            "strides {:?}; the tables share cos's strides {:?}",
                            s.strides(),
                            c.strides()
                        ),
                    });
                }
                inputs.push(byte_span("cos", c));
                inputs.push(byte_span("sin", s));
                Ok(Angles {
                    pos,
                    sp,
                    cos: c.data().ptr(),
                    sin: s.data().ptr(),
                    sc: [c.strides()[0] as i64, c.strides()[1] as i64],
                    rows: rows as u64,
                    log2_theta: 0.0,
                    pos_scale: 1.0,
                })
            }
            (RopeFreqs::Table, None) => Err(Error::InvalidArgument {
                op: OP,
                arg: "table",
                reason: "the descriptor takes its angles from cos and sin tables".into(),
            }),
            (RopeFreqs::Theta { .. }, Some(_)) => Err(Error::InvalidArgument {
                op: OP,
                arg: "table",
                reason: "the descriptor computes its angles from theta; pass no tables".into(),
            }),
        }
    }

    /// Check and enqueue one rotation of `x` into `y` (`inverse`: by -a).
    fn rotate(
        &self,
        stream: &Stream,
        (x_name, x): (&'static str, &TensorRef<'_, T, 4>),
        positions: &Option<TensorRef<'_, i64, 2>>,
        table: &Table<'_>,
        (y_name, y): (&'static str, &TensorMut<'_, T, 4>),
        inverse: bool,
    ) -> Result<()> {
        let shape = self.desc.shape;
        check_shape(OP, x_name, &shape, x.shape())?;
        check_shape(OP, y_name, &shape, y.shape())?;
        check_ctx(OP, x_name, stream, x.data().ctx_id())?;
        check_ctx(OP, y_name, stream, y.data().ctx_id())?;
        let mut inputs = vec![byte_span(x_name, x)];
        let a = self.angles(stream, positions, table, &mut inputs)?;
        check_disjoint(OP, &[byte_span(y_name, &y.as_const())], &inputs)?;
        let heads: usize = shape[..3].iter().product();
        let n_pairs = heads * (self.desc.rotary_dim / 2);
        let n_tail = heads * (shape[3] - self.desc.rotary_dim);
        if n_pairs + n_tail == 0 {
            return Ok(());
        }
        let strides = |s: &[usize; 4]| s.map(|v| v as i64);
        let rows = self.rows_for(x, y);
        let split = rows.unwrap_or_default();
        let p = RopeParams {
            x: x.data().ptr(),
            y: y.data().ptr(),
            pos: a.pos,
            cos: a.cos,
            sin: a.sin,
            shape: shape.map(|v| v as u64),
            sx: strides(x.strides()),
            sy: strides(y.strides()),
            sp: a.sp,
            sc: a.sc,
            table_rows: a.rows,
            n_pairs: n_pairs as u64,
            n_tail: n_tail as u64,
            n_groups: split.groups,
            log2_theta: a.log2_theta,
            pos_scale: a.pos_scale,
            rotary_dim: self.desc.rotary_dim as u32,
            gptj: u32::from(self.desc.style == RopeStyle::GptJ),
            inverse: u32::from(inverse),
            tokens_per_cta: split.tokens,
            heads_per_cta: split.heads,
            head_groups: split.head_groups,
            rot_items: split.rot_items,
            head_items: split.head_items,
        };
        let (f, cfg) = match rows {
            Some(r) => (
                &self.rows,
                LaunchConfig {
                    grid: (grid_x(r.groups as usize), 1, 1),
                    block: (r.threads, 1, 1),
                    smem_bytes: r.smem_bytes,
                },
            ),
            None => {
                let blocks = n_pairs.max(n_tail).div_ceil(256);
                let grid = grid_x(blocks.min(self.sm_count.max(1) as usize * 32));
                (&self.strided, LaunchConfig::linear(grid, 256))
            }
        };
        // SAFETY: every view was bounds-checked at construction and against
        // the plan's shapes above; the kernels reach exactly the offsets
        // their strides give (rope_rows in 16-byte vectors, which
        // `rows_for` checked the alignment of), and positions index the
        // tables only after the kernels' range check; y overlaps no input.
        unsafe { launch_params(stream, f, cfg, p) }
    }
}

impl<T: Element> Plan for RopePlan<T> {
    type Descriptor = RopeDescriptor;
    type Args<'a> = RopeArgs<'a, T>;

    fn select(stream: &Stream, desc: &Self::Descriptor, pref: &PlanPreference) -> Result<Self> {
        let dtype = validate::<T>(desc)?;
        pref.check_backend(OP, &[BackendKind::Baracuda])?;
        pref.check_workspace(OP, 0)?;
        let module = stream.context().module(&spec(dtype))?;
        Ok(RopePlan {
            desc: *desc,
            sku: own_float_sku::<T>(
                stream,
                format!("rope.{:?}", desc.style),
                "token rows in 16-byte vectors / pair per thread (strided)",
            ),
            rows: module.function("rope_rows")?,
            strided: module.function("rope")?,
            sm_count: stream.context().device().sm_count,
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
        self.rotate(
            stream,
            ("x", &args.x),
            &args.positions,
            &args.table,
            ("y", &args.y),
            false,
        )
    }
}

impl<T: Element> Backward for RopePlan<T> {
    type BwArgs<'a> = RopeBwArgs<'a, T>;

    fn run_bw(
        &self,
        stream: &Stream,
        _workspace: Workspace<'_>,
        args: Self::BwArgs<'_>,
    ) -> Result<()> {
        self.rotate(
            stream,
            ("dy", &args.dy),
            &args.positions,
            &args.table,
            ("dx", &args.dx),
            true,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn params_layout_matches_cuda() {
        // 5 pointers, 3 x [u64; 4], 2 x [i64; 2], 4 u64, 2 f64, 8 u32
        assert_eq!(
            core::mem::size_of::<RopeParams<f32>>(),
            40 + 96 + 32 + 32 + 16 + 32
        );
    }

    #[test]
    fn row_split_fills_blocks_and_the_device() {
        use RopeStyle::{GptJ, NeoX};
        // Llama: bf16 [4, 4096, 32, 128], 8 items a head, four tokens a
        // block, 256 threads with four rows each
        let llama = row_split([4, 4096, 32, 128], 128, NeoX, (2, 4), 132);
        assert_eq!(
            llama,
            Some(RowSplit {
                tokens: 4,
                heads: 32,
                head_groups: 1,
                groups: 4096,
                rot_items: 8,
                head_items: 8,
                threads: 256,
                smem_bytes: 4 * 64 * 2 * 4,
            })
        );
        // GPT-J, half the head rotated: 16 rotated and 16 copied vectors of f32
        let gptj = row_split([2, 5, 4, 128], 64, GptJ, (4, 4), 132).unwrap();
        assert_eq!((gptj.rot_items, gptj.head_items), (16, 32));
        // NeoX partial: the pairs of vectors, then the tail
        let neox = row_split([2, 5, 4, 128], 64, NeoX, (2, 4), 132).unwrap();
        assert_eq!((neox.rot_items, neox.head_items), (4, 12));
        // one token of many heads: split across blocks to fill the device
        let one = row_split([1, 1, 64, 256], 256, NeoX, (2, 4), 132).unwrap();
        assert_eq!(
            (one.tokens, one.heads, one.head_groups, one.groups),
            (1, 1, 64, 64)
        );
        assert_eq!(one.threads, 32);
        // f64: two elements a vector, the angles in f64
        let f64s = row_split([2, 7, 3, 64], 64, NeoX, (8, 8), 132).unwrap();
        assert_eq!(f64s.rot_items, 16);
        assert_eq!(f64s.smem_bytes as usize, f64s.tokens as usize * 32 * 2 * 8);
        // every split covers the rows within the thread budget and the
        // shared memory
        for (shape, rot, style, sizes) in [
            ([4, 4096, 32, 128], 128, NeoX, (2, 4)),
            ([4, 512, 8, 128], 128, NeoX, (4, 4)),
            ([3, 4, 5, 48], 32, NeoX, (2, 4)),
            ([1, 9, 2, 16], 16, GptJ, (2, 4)),
            ([1000, 1, 1, 16], 16, NeoX, (2, 4)),
            ([2, 3, 64, 256], 256, NeoX, (2, 4)),
            ([1, 1, 1, 2048], 2048, GptJ, (2, 4)),
        ] {
            let r = row_split(shape, rot, style, sizes, 132).unwrap();
            let tokens = shape[0] * shape[1];
            assert!(r.tokens as usize <= tokens.max(1), "{shape:?}");
            assert!(r.heads as usize <= shape[2], "{shape:?}");
            assert!(r.heads == shape[2] as u32 || r.tokens == 1, "{shape:?}");
            assert_eq!(r.head_groups as usize, shape[2].div_ceil(r.heads as usize));
            assert_eq!(
                r.groups as usize,
                tokens.div_ceil(r.tokens as usize) * r.head_groups as usize
            );
            assert!(r.threads >= r.head_items && r.threads % 32 == 0 && r.threads <= 256);
            assert!(r.smem_bytes as usize <= MAX_ANGLE_BYTES, "{shape:?}");
        }
    }

    #[test]
    fn row_split_takes_whole_vectors_only() {
        use RopeStyle::{GptJ, NeoX};
        // head_dim, NeoX half and GPT-J rotary_dim not whole bf16 vectors
        assert_eq!(row_split([1, 1, 1, 2], 2, NeoX, (2, 4), 132), None);
        assert_eq!(row_split([2, 9, 2, 16], 8, NeoX, (2, 4), 132), None);
        assert_eq!(row_split([1, 12, 3, 40], 20, GptJ, (2, 4), 132), None);
        assert_eq!(row_split([2, 7, 3, 36], 32, NeoX, (2, 4), 132), None);
        // the same head in f32 vectors of 4
        assert!(row_split([2, 9, 2, 16], 8, NeoX, (4, 4), 132).is_some());
        assert!(row_split([1, 12, 3, 40], 20, GptJ, (4, 4), 132).is_some());
        // more than 256 items a head
        assert_eq!(row_split([1, 1, 1, 4096], 4096, NeoX, (4, 4), 132), None);
        // nothing rotated: every vector copied
        let copy = row_split([2, 3, 4, 64], 0, NeoX, (2, 4), 132).unwrap();
        assert_eq!(
            (copy.rot_items, copy.head_items, copy.smem_bytes),
            (0, 8, 0)
        );
    }

    #[test]
    fn vector_views_need_unit_aligned_strides() {
        let shape = [2, 33, 4, 64];
        let bshd = [33 * 4 * 64, 4 * 64, 64, 1];
        let bhsd = [4 * 33 * 64, 64, 33 * 64, 1];
        assert!(vector_views(&shape, 8, [(0x1000, &bshd), (0x2000, &bshd)]));
        assert!(vector_views(&shape, 8, [(0x1000, &bhsd), (0x2000, &bshd)]));
        // a base one element in
        assert!(!vector_views(&shape, 8, [(0x1002, &bshd), (0x2000, &bshd)]));
        assert!(!vector_views(
            &shape,
            8,
            [(0x1000, &bshd), (0x2010 + 2, &bshd)]
        ));
        // every other element
        let every_other = bshd.map(|s| 2 * s);
        assert!(!vector_views(
            &shape,
            8,
            [(0x1000, &bshd), (0x2000, &every_other)]
        ));
        // a head stride that is not whole vectors
        let odd = [33 * 4 * 68, 4 * 68, 68, 1];
        assert!(!vector_views(&shape, 8, [(0x1000, &odd), (0x2000, &bshd)]));
        assert!(vector_views(&shape, 4, [(0x1000, &odd), (0x2000, &bshd)]));
        // the stride of an axis of extent 1 is never taken
        let single = [1, 33, 4, 64];
        let loose = [3, 4 * 64, 64, 1];
        assert!(vector_views(
            &single,
            8,
            [(0x1000, &loose), (0x2000, &bshd)]
        ));
    }

    #[test]
    fn descriptors_are_checked() {
        let d = RopeDescriptor::new(ElementKind::F32, [2, 8, 4, 64], 10000.0);
        assert!(validate::<f32>(&d).is_ok());
        assert!(validate::<f32>(&d.with_rotary_dim(32)).is_ok());
        let field = |r: Result<u32>| match r {
            Err(Error::InvalidDescriptor { field, .. }) => field,
            other => panic!("expected InvalidDescriptor, got {other:?}"),
        };
        assert_eq!(field(validate::<f32>(&d.with_rotary_dim(33))), "rotary_dim");
        assert_eq!(field(validate::<f32>(&d.with_rotary_dim(66))), "rotary_dim");
        let bad = d.with_freqs(RopeFreqs::Theta {
            theta: 0.0,
            pos_scale: 1.0,
        });
        assert_eq!(field(validate::<f32>(&bad)), "freqs.theta");
        let bad = d.with_freqs(RopeFreqs::Theta {
            theta: 10000.0,
            pos_scale: f64::NAN,
        });
        assert_eq!(field(validate::<f32>(&bad)), "freqs.pos_scale");
        assert!(matches!(
            validate::<f64>(&d),
            Err(Error::DtypeMismatch { .. })
        ));
        let i8_desc = RopeDescriptor {
            element: ElementKind::I8,
            ..d
        };
        assert!(matches!(
            validate::<i8>(&i8_desc),
            Err(Error::Unsupported { .. })
        ));
    }
}
