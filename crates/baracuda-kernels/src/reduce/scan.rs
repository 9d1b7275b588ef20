//! Scans along one dim: `y[.., i, ..] = x[.., 0, ..] (+) ... (+) x[.., i, ..]`
//! for the combines of [`ScanOp`], inclusive or exclusive, forward or
//! reversed, and the backward `dx`.
//!
//! The kernels and the math of each backward are in
//! `kernels/reduce/scan.cu`; the block-scan building blocks in
//! `kernels/common/scan.cuh`.

use core::marker::PhantomData;

use baracuda_driver::{Function, LaunchConfig, ModuleSpec, Stream};
use baracuda_kernels_types::{
    contiguous_strides, BackendKind, DevPtr, DevPtrMut, Element, ElementKind, Error, Grad, Grads,
    KernelSku, PlanPreference, Result, TensorMut, TensorRef, Workspace, MAX_RANK,
};

use crate::checks::{
    check_alias, check_dim, check_integer_op, check_output_element, check_views, invalid_descriptor,
    numeric_dtype_code, Extent, View,
};
use crate::kernel_sources;
use crate::launch::{grid_x, launch_params};
use crate::plan::own_numeric_sku;
use crate::{Backward, Plan};

/// A scan's combine.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ScanOp {
    /// `torch.cumsum`: running sum (exclusive: starts at 0). Gradient: the
    /// sum of `dy` scanned the other way.
    CumSum,
    /// `torch.cumprod`: running product (exclusive: starts at 1). Gradient
    /// exact with zeros in `x` (no division).
    CumProd,
    /// `torch.cummax`: running max and the index of the element it came
    /// from; among equal maxima the latest in scan order, and a NaN once
    /// seen (the latest NaN). Gradient: `dy` summed into the returned
    /// indices.
    CumMax,
    /// `torch.cummin`, as [`ScanOp::CumMax`].
    CumMin,
    /// `torch.logcumsumexp`: `log sum exp` of the prefix (exclusive: starts
    /// at -inf). Gradient `dx_j = sum_{i >= j} dy_i exp(x_j - y_i)`.
    LogCumSumExp,
}

impl ScanOp {
    /// Every op, in declaration order.
    pub const ALL: [ScanOp; 5] = [
        ScanOp::CumSum,
        ScanOp::CumProd,
        ScanOp::CumMax,
        ScanOp::CumMin,
        ScanOp::LogCumSumExp,
    ];

    /// The op's name (PyTorch's).
    pub fn name(self) -> &'static str {
        match self {
            ScanOp::CumSum => "cumsum",
            ScanOp::CumProd => "cumprod",
            ScanOp::CumMax => "cummax",
            ScanOp::CumMin => "cummin",
            ScanOp::LogCumSumExp => "logcumsumexp",
        }
    }

    /// True for the ops that take i32 and i64 inputs, as PyTorch's: cumsum
    /// and cumprod (whose output is i64), cummax and cummin (whose values
    /// keep the input's dtype). logcumsumexp is float-only.
    pub const fn takes_integers(self) -> bool {
        !matches!(self, ScanOp::LogCumSumExp)
    }

    /// True for the ops that return indices.
    pub fn has_indices(self) -> bool {
        matches!(self, ScanOp::CumMax | ScanOp::CumMin)
    }

    /// The forward kernel and the backward passes (scan.cu's codes).
    fn codes(self) -> (u32, &'static [u32]) {
        match self {
            ScanOp::CumSum => (0, &[0]),
            ScanOp::CumProd => (1, &[5, 6]),
            ScanOp::CumMax => (2, &[7]),
            ScanOp::CumMin => (3, &[7]),
            ScanOp::LogCumSumExp => (4, &[8]),
        }
    }
}

/// A scan of a rank-`N` tensor along `dim`.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct ScanDescriptor<const N: usize> {
    /// The combine.
    pub op: ScanOp,
    /// Element type of `x` (and of `y`, but for the integer cumsum and
    /// cumprod: [`ScanDescriptor::output_element`]).
    pub element: ElementKind,
    /// Shape of `x` (and `y`).
    pub shape: [usize; N],
    /// The scanned dim.
    pub dim: usize,
    /// `y[i]` combines the elements before `i` only (cumsum, cumprod and
    /// logcumsumexp).
    pub exclusive: bool,
    /// Scan from the last index down (`flip(scan(flip(x)))`); indices stay
    /// positions along the dim.
    pub reverse: bool,
    /// `y` keeps `x`'s dtype for an integer cumsum or cumprod (JAX's
    /// `associative_scan`, wrapping around it) instead of PyTorch's i64.
    pub keep_dtype: bool,
}

impl<const N: usize> ScanDescriptor<N> {
    /// An inclusive forward scan of `shape` along `dim`.
    pub fn new(op: ScanOp, element: ElementKind, shape: [usize; N], dim: usize) -> Self {
        ScanDescriptor {
            op,
            element,
            shape,
            dim,
            exclusive: false,
            reverse: false,
            keep_dtype: false,
        }
    }
    /// JAX's `lax.associative_scan(fn, x, reverse, axis)` for `fn` one of
    /// add ([`ScanOp::CumSum`]), multiply ([`ScanOp::CumProd`]), maximum
    /// ([`ScanOp::CumMax`]) and minimum ([`ScanOp::CumMin`]): an inclusive
    /// scan whose `y` keeps `x`'s dtype (integer sums and products wrap
    /// around it); max and min run without indices (`ScanArgs::indices`
    /// None). Other ops: [`ScanDescriptor::new`]'s scan with `keep_dtype`.
    pub fn associative(
        op: ScanOp,
        element: ElementKind,
        shape: [usize; N],
        axis: usize,
        reverse: bool,
    ) -> Self {
        ScanDescriptor {
            reverse,
            keep_dtype: true,
            ..Self::new(op, element, shape, axis)
        }
    }
    /// Element type of `y`, PyTorch's: i64 for cumsum and cumprod of an
    /// integer `x` (unless `keep_dtype`), else `x`'s.
    pub fn output_element(&self) -> ElementKind {
        let sum_like = matches!(self.op, ScanOp::CumSum | ScanOp::CumProd);
        if sum_like && !self.element.is_float() && !self.keep_dtype {
            ElementKind::I64
        } else {
            self.element
        }
    }
    /// Exclusive (true) or inclusive.
    pub fn with_exclusive(mut self, exclusive: bool) -> Self {
        self.exclusive = exclusive;
        self
    }
    /// Reverse (true) or forward.
    pub fn with_reverse(mut self, reverse: bool) -> Self {
        self.reverse = reverse;
        self
    }
}

/// Arguments of [`ScanPlan`]'s [`Plan::run`]; `O` is the output's element
/// type ([`ScanDescriptor::output_element`]).
pub struct ScanArgs<'a, T, const N: usize, O = T> {
    /// Input, any strides (0 = broadcast).
    pub x: TensorRef<'a, T, N>,
    /// Output, any non-overlapping strides; must not overlap `x`.
    pub y: TensorMut<'a, O, N>,
    /// cummax and cummin: the indices, or None for the values alone (the
    /// backward needs them); other ops: None.
    pub indices: Option<TensorMut<'a, i64, N>>,
}

/// Arguments of [`ScanPlan`]'s [`Backward::run_bw`] (float plans only,
/// where `O` is `T`).
pub struct ScanBwArgs<'a, T, const N: usize, O = T> {
    /// The forward input (read by cumprod and logcumsumexp).
    pub x: TensorRef<'a, T, N>,
    /// The forward output: required by logcumsumexp, else None.
    pub y: Option<TensorRef<'a, O, N>>,
    /// The forward indices: required by cummax and cummin, else None.
    pub indices: Option<TensorRef<'a, i64, N>>,
    /// Gradient of `y`.
    pub dy: TensorRef<'a, O, N>,
    /// Gradient of `x`; must not overlap the other operands.
    pub dx: TensorMut<'a, T, N>,
}

/// A scan along one dim of a strided tensor, and its backward.
/// Deterministic: each line is scanned in a fixed order by one block or
/// one thread, no atomics.
///
/// # Math
/// Along `dim`, `y[i] = x[0] (+) x[1] (+) ... (+) x[i]` with the combine
/// of [`ScanOp`]; exclusive scans stop at `x[i - 1]` and start from the
/// identity (0, 1, -inf), reversed scans run from the last index down.
/// cummax and cummin also write `indices[i]`, the position along `dim`
/// of the element `y[i]` came from. The backward `dx` is each op's
/// gradient in [`ScanOp`] (cumsum: `dy` scanned the other way).
/// # Shapes
/// `x`, `y`, `indices`, `dy`, `dx`: `desc.shape` (rank `1 <= N <= 8`).
/// # Layout
/// Any strides; `x` and `dy` may broadcast (stride 0). A scan along a dim
/// of stride 1 runs a block per line; along an outer dim (or over lines of
/// at most 32 elements) a thread per line, consecutive threads on
/// consecutive lines. Lines too few to fill the GPU and long are cut into
/// segments, a block per segment (block lines of at least 32768
/// positions) or a thread per segment (thread lines of at least 256), in
/// two passes: segment totals, then each segment from the fold of the
/// earlier totals in a fixed order (x read twice, still bitwise
/// reproducible). 64-bit offsets.
/// # Workspace
/// `workspace_size()`: 32 bytes per segment when the lines may be cut
/// (the launch, chosen from the strides `run` gets, may not cut them),
/// else 0 (`Workspace::None` will do). `bw_workspace_size(Grad::X)`:
/// cumprod's accumulators (one per element) plus those segment states.
/// # Dtypes
/// f32, f64, f16, bf16; f16/bf16 accumulate in f32, f64 in f64; indices
/// i64. i32 and i64 ([`ScanOp::takes_integers`], as PyTorch): cumsum and
/// cumprod accumulate in i64 with two's complement wrap-around and write
/// i64 (`O` = i64; with `keep_dtype`, JAX's `associative_scan`, the
/// input's dtype, wrapping around it), cummax and cummin write the
/// input's dtype (`O` = `T`); exact. Others (and logcumsumexp on
/// integers): `Error::Unsupported`.
/// # Gradient
/// Float plans only: the backward of an integer plan is
/// `Error::Unsupported` (PyTorch has no integer gradients).
/// # Errors
/// From `select`: `DtypeMismatch` if `desc.element != T::KIND` (arg
/// `desc.element`) or `O` is not [`ScanDescriptor::output_element`] (arg
/// `y`);
/// `Unsupported` for another dtype or a rank `N > 8`; `InvalidDescriptor`
/// for a dim past the rank (every dim for `N = 0`) or an exclusive
/// cummax/cummin; `PreferenceRejected` when `pref` forces a backend other
/// than `Baracuda` or caps the workspace below cumprod's backward; the
/// kernel JIT's errors. From `run` and `run_bw`: `ShapeMismatch`,
/// `ContextMismatch` (a view or the workspace on another context),
/// `WorkspaceTooSmall` (a segmented `run`, cumprod's `run_bw`), and
/// `InvalidArgument` for an output overlapping an input (in place
/// included), `indices` given to an op without them, or a missing or
/// unexpected `indices` or `y` in `run_bw`.
pub struct ScanPlan<T: Element, const N: usize, O: Element = T> {
    desc: ScanDescriptor<N>,
    sku: KernelSku,
    fw: Kernels,
    /// The backward passes; empty on integers.
    bw: Vec<Kernels>,
    sm_count: u32,
    _t: PhantomData<(T, O)>,
}

const OP: &str = "scan";

/// The block-per-line, thread-per-line and segmented (two-pass) kernels
/// of one code.
struct Kernels {
    block: Function,
    thread: Function,
    part: Function,
    seg: Function,
    thread_part: Function,
    thread_seg: Function,
}

impl Kernels {
    fn load(module: &baracuda_driver::Module, code: u32) -> Result<Self> {
        let f = |kind: &str| module.function(&format!("scan_{kind}_{code}"));
        Ok(Kernels {
            block: f("block")?,
            thread: f("thread")?,
            part: f("part")?,
            seg: f("seg")?,
            thread_part: f("tpart")?,
            thread_seg: f("tseg")?,
        })
    }
}

/// The module of scan.cu for dtype code `dtype`.
pub(crate) fn spec(dtype: u32) -> ModuleSpec {
    ModuleSpec::new(&kernel_sources::SCAN).define("BARACUDA_DTYPE", dtype)
}

/// Threads per block of every kernel (`SCAN_THREADS`).
const THREADS: u32 = 256;
/// Positions per tile of the block kernels (`SCAN_ITEMS * SCAN_THREADS`).
const TILE: usize = 4 * THREADS as usize;
/// The fewest positions of a segment.
const MIN_SEGMENT: usize = 16 * TILE;
/// Blocks per SM the segments of a few long lines aim to fill.
const SEGMENT_BLOCKS_PER_SM: usize = 8;
/// Threads per SM the segments of lines run by threads aim to fill.
const SEGMENT_THREADS_PER_SM: usize = 1024;
/// The fewest positions of a thread's segment (a multiple of
/// `SCAN_UNROLL`).
const MIN_THREAD_SEGMENT: usize = 128;
/// Bytes of one segment's state in `part` (the largest scan state: two
/// online log-sum-exps of f64).
const PART_STATE: usize = 32;
/// Operand slots of `ScanParams` (`SLOTS`).
const SLOTS: usize = 6;
const X: usize = 0;
const Y: usize = 1;
const DY: usize = 2;
const YFW: usize = 3;
const IDX: usize = 4;
const WS: usize = 5;

/// The accumulator of scan.cu (`ACC`), a marker for the workspace.
enum Acc {}

/// `Axis` of scan.cu.
#[repr(C)]
#[derive(Copy, Clone, Default)]
struct Axis {
    stride: [i64; MAX_RANK],
    start: i64,
    step: i64,
}

/// `ScanParams` of scan.cu, field for field.
#[repr(C)]
#[derive(Copy, Clone)]
struct ScanParams<T: 'static> {
    x: DevPtr<T>,
    y: DevPtrMut<T>,
    dy: DevPtr<T>,
    yfw: DevPtr<T>,
    idx: DevPtrMut<i64>,
    idx_in: DevPtr<i64>,
    ws: DevPtrMut<Acc>,
    part: DevPtrMut<u8>,
    ax: [Axis; SLOTS],
    shape: [u64; MAX_RANK],
    len: u64,
    lines: u64,
    seg_len: u64,
    segs: u64,
    rank: u32,
    exclusive: u32,
    flipped: u32,
    keep: u32,
}

/// The checks `select` makes before it touches the GPU: the dtype code of
/// `T`, or the typed error of a bad descriptor.
pub(crate) fn validate<T: Element, const N: usize, O: Element>(desc: &ScanDescriptor<N>) -> Result<u32> {
    let dtype = numeric_dtype_code::<T, N>(OP, desc.element, "scans take")?;
    check_integer_op::<T>(OP, desc.op.name(), desc.op.takes_integers(), "")?;
    check_output_element::<O>(OP, desc.output_element())?;
    check_dim::<N>(OP, desc.dim)?;
    if desc.exclusive && desc.op.has_indices() {
        return Err(invalid_descriptor(
            OP,
            "exclusive",
            "true".into(),
            &format!("{} has no value before the first element", desc.op.name()),
        ));
    }
    Ok(dtype)
}

/// `InvalidArgument` naming `arg`: given without being read, or missing.
fn check_presence(arg: &'static str, given: bool, wanted: bool, op: ScanOp) -> Result<()> {
    let reason = match (given, wanted) {
        (true, false) => format!("{} has no {arg}", op.name()),
        (false, true) => format!("missing: {} needs {arg}", op.name()),
        _ => return Ok(()),
    };
    Err(Error::InvalidArgument { op: OP, arg, reason })
}

/// Byte range of a view of any element type, empty for an empty view.
fn byte_range<E>(ptr: u64, shape: &[usize], strides: &[usize]) -> (u64, u64) {
    if shape.contains(&0) {
        return (ptr, ptr);
    }
    let last: usize = shape.iter().zip(strides).map(|(&d, &s)| (d - 1) * s).sum();
    (ptr, ptr + ((last + 1) * core::mem::size_of::<E>()) as u64)
}

/// `InvalidArgument` naming `out` when its bytes meet `other`'s (the
/// indices against the value operands, which have another element type).
fn check_apart(out: (&'static str, (u64, u64)), other: (&str, (u64, u64))) -> Result<()> {
    let ((name, (a0, a1)), (input, (b0, b1))) = (out, other);
    if a0 < a1 && b0 < b1 && a0 < b1 && b0 < a1 {
        return Err(Error::InvalidArgument {
            op: OP,
            arg: name,
            reason: format!("overlaps {input}"),
        });
    }
    Ok(())
}

impl<T: Element, const N: usize, O: Element> ScanPlan<T, N, O> {
    fn len(&self) -> usize {
        self.desc.shape[self.desc.dim]
    }
    fn lines(&self) -> usize {
        let n: usize = self.desc.shape.iter().product();
        n / self.len().max(1)
    }
    /// Segments per line and positions per segment when `units` (blocks
    /// or threads) per SM would otherwise idle: lines too few to give the
    /// GPU `units` and long enough are cut into segments of at least
    /// `min` positions, a multiple of `round`; otherwise `(1, len)`.
    fn cut(&self, units_per_sm: usize, min: usize, round: usize) -> (usize, usize) {
        let (len, lines) = (self.len(), self.lines());
        let target = self.sm_count as usize * units_per_sm;
        if lines == 0 || lines >= target / 2 || len < 2 * min {
            return (1, len);
        }
        let seg_len = len
            .div_ceil(target.div_ceil(lines))
            .next_multiple_of(round)
            .max(min);
        (len.div_ceil(seg_len), seg_len)
    }
    /// The segments of the block-per-line launch (a block per segment of
    /// whole tiles). Never cut where the launch runs a thread per line (at
    /// most 32 positions, or 1024 lines and more).
    fn segments(&self) -> (usize, usize) {
        self.cut(SEGMENT_BLOCKS_PER_SM, MIN_SEGMENT, TILE)
    }
    /// The segments of the thread-per-line launch, a thread per (line,
    /// segment).
    fn thread_segments(&self) -> (usize, usize) {
        self.cut(SEGMENT_THREADS_PER_SM, MIN_THREAD_SEGMENT, 8)
    }
    /// Bytes of the segment states: enough for either launch (which one
    /// runs depends on the strides `run` gets); 0 when neither cuts.
    fn part_bytes(&self) -> usize {
        let segs = self.segments().0.max(self.thread_segments().0);
        if segs == 1 {
            0
        } else {
            (self.lines() * segs * PART_STATE).next_multiple_of(256)
        }
    }
    /// Bytes of cumprod's backward accumulators: one per element.
    fn bw_bytes(&self) -> usize {
        if self.desc.op == ScanOp::CumProd && T::KIND.is_float() {
            let acc = T::KIND.float_accumulator().size_bytes();
            (self.desc.shape.iter().product::<usize>() * acc).next_multiple_of(256)
        } else {
            0
        }
    }
    /// Bytes of the backward's workspace: cumprod's accumulators, then the
    /// segment states.
    fn bw_total_bytes(&self) -> usize {
        if self.bw.is_empty() {
            0
        } else {
            self.bw_bytes() + self.part_bytes()
        }
    }
    /// The axis of an operand of `strides` when positions run from the
    /// last index down (`flipped`) or up.
    fn axis(&self, strides: &[usize; N], flipped: bool) -> Axis {
        let mut ax = Axis::default();
        let mut k = 0;
        for (d, &s) in strides.iter().enumerate() {
            if d != self.desc.dim {
                ax.stride[k] = s as i64;
                k += 1;
            }
        }
        let s = strides[self.desc.dim] as i64;
        let last = self.len().saturating_sub(1) as i64;
        (ax.start, ax.step) = if flipped { (last * s, -s) } else { (0, s) };
        ax
    }
    /// Params with every pointer null; `flipped` and the shape set.
    fn params(&self, flipped: bool) -> ScanParams<T> {
        let mut shape = [1u64; MAX_RANK];
        let mut k = 0;
        for (d, &e) in self.desc.shape.iter().enumerate() {
            if d != self.desc.dim {
                shape[k] = e as u64;
                k += 1;
            }
        }
        ScanParams {
            x: DevPtr::NULL,
            y: DevPtrMut::NULL,
            dy: DevPtr::NULL,
            yfw: DevPtr::NULL,
            idx: DevPtrMut::NULL,
            idx_in: DevPtr::NULL,
            ws: DevPtrMut::NULL,
            part: DevPtrMut::NULL,
            ax: [Axis::default(); SLOTS],
            shape,
            len: self.len() as u64,
            lines: self.lines() as u64,
            seg_len: self.len() as u64,
            segs: 1,
            rank: (N - 1) as u32,
            exclusive: u32::from(self.desc.exclusive),
            flipped: u32::from(flipped),
            keep: u32::from(self.desc.keep_dtype),
        }
    }
    /// Enqueue `k` over every line. `lead` is the scan-dim stride of the
    /// operand the kernel mostly reads; `part` the segment states'
    /// [`part_bytes`](Self::part_bytes) (unused when the lines are not cut).
    ///
    /// # Safety
    /// Every non-null pointer of `p` must reach each element its axis
    /// addresses for `p.len` positions over `p.lines` lines; `part` must
    /// hold `part_bytes()` bytes.
    unsafe fn launch(
        &self,
        stream: &Stream,
        k: &Kernels,
        mut p: ScanParams<T>,
        lead: usize,
        part: DevPtrMut<u8>,
    ) -> Result<()> {
        let (len, lines) = (self.len(), self.lines());
        if len == 0 || lines == 0 {
            return Ok(());
        }
        // A thread per line for short lines, and along outer dims when
        // there are lines enough to fill the GPU (1024 lines: 4 blocks).
        let per_thread = len <= 32 || (lead != 1 && lines >= 1024);
        if per_thread {
            let (segs, seg_len) = self.thread_segments();
            if segs > 1 {
                (p.part, p.segs, p.seg_len) = (part, segs as u64, seg_len as u64);
                let units = lines * segs;
                let blocks = units.div_ceil(THREADS as usize);
                let cfg = LaunchConfig::linear(grid_x(blocks), THREADS);
                // SAFETY: forwarded from the caller's contract; pass 1
                // writes `lines * segs` states of at most PART_STATE bytes,
                // pass 2 reads them after it on the same stream.
                unsafe { launch_params(stream, &k.thread_part, cfg, p) }?;
                // SAFETY: as above.
                return unsafe { launch_params(stream, &k.thread_seg, cfg, p) };
            }
        }
        let (segs, seg_len) = self.segments();
        if !per_thread && segs > 1 {
            (p.part, p.segs, p.seg_len) = (part, segs as u64, seg_len as u64);
            let units = lines * segs;
            let blocks = units.min(self.sm_count as usize * 64);
            let cfg = LaunchConfig::linear(grid_x(blocks), THREADS);
            // SAFETY: forwarded from the caller's contract; pass 1 writes
            // `lines * segs` states of at most PART_STATE bytes, pass 2
            // reads them after it on the same stream.
            unsafe { launch_params(stream, &k.part, cfg, p) }?;
            // SAFETY: as above.
            return unsafe { launch_params(stream, &k.seg, cfg, p) };
        }
        let (f, blocks) = if per_thread {
            (&k.thread, lines.div_ceil(THREADS as usize))
        } else {
            let cap = self.sm_count as usize * 64;
            (&k.block, lines.min(cap))
        };
        let cfg = LaunchConfig::linear(grid_x(blocks), THREADS);
        // SAFETY: forwarded from the caller's contract.
        unsafe { launch_params(stream, f, cfg, p) }
    }
}

impl<T: Element, const N: usize, O: Element> Plan for ScanPlan<T, N, O> {
    type Descriptor = ScanDescriptor<N>;
    type Args<'a> = ScanArgs<'a, T, N, O>;

    fn select(stream: &Stream, desc: &Self::Descriptor, pref: &PlanPreference) -> Result<Self> {
        let dtype = validate::<T, N, O>(desc)?;
        let float = T::KIND.is_float();
        pref.check_backend(OP, &[BackendKind::Baracuda])?;
        let module = stream.context().module(&spec(dtype))?;
        let (fw, bw) = desc.op.codes();
        let plan = ScanPlan {
            desc: *desc,
            sku: own_numeric_sku::<T>(
                stream,
                format!("scan.{}", desc.op.name()),
                "block per line / thread per line",
            ),
            fw: Kernels::load(&module, fw)?,
            bw: bw
                .iter()
                .filter(|_| float)
                .map(|&c| Kernels::load(&module, c))
                .collect::<Result<_>>()?,
            sm_count: stream.context().device().sm_count,
            _t: PhantomData,
        };
        pref.check_workspace(OP, plan.bw_total_bytes().max(plan.part_bytes()))?;
        Ok(plan)
    }

    fn sku(&self) -> &KernelSku {
        &self.sku
    }

    fn workspace_size(&self) -> usize {
        self.part_bytes()
    }

    fn run(&self, stream: &Stream, workspace: Workspace<'_>, args: Self::Args<'_>) -> Result<()> {
        let (x, y) = (&args.x, &args.y);
        let shape = &self.desc.shape;
        check_views(OP, stream, &[View::of("x", shape, x), View::of_mut("y", shape, y)])?;
        // cummax and cummin may run without indices (the values alone)
        let given = args.indices.is_some();
        check_presence("indices", given, given && self.desc.op.has_indices(), self.desc.op)?;
        let part = workspace.check_ptr(OP, self.part_bytes(), stream.context().id())?;
        let x_range = byte_range::<T>(x.data().ptr().addr(), shape, x.strides());
        let y_range = byte_range::<O>(y.data().ptr().addr(), shape, y.strides());
        check_apart(("y", y_range), ("x", x_range))?;
        let mut p = self.params(self.desc.reverse);
        p.x = x.data().ptr();
        // The kernel writes y as its op's output element (`O`).
        p.y = y.data().ptr().cast::<T>();
        p.ax[X] = self.axis(x.strides(), self.desc.reverse);
        p.ax[Y] = self.axis(y.strides(), self.desc.reverse);
        if let Some(idx) = &args.indices {
            check_views(OP, stream, &[View::of_mut("indices", shape, idx)])?;
            let ir = byte_range::<i64>(idx.data().ptr().addr(), idx.shape(), idx.strides());
            check_apart(("indices", ir), ("x", x_range))?;
            check_apart(("indices", ir), ("y", y_range))?;
            p.idx = idx.data().ptr();
            p.ax[IDX] = self.axis(idx.strides(), self.desc.reverse);
        }
        // SAFETY: every view's bounds were proven at construction and its
        // shape checked above; the axes come from those strides.
        unsafe { self.launch(stream, &self.fw, p, x.strides()[self.desc.dim], part) }
    }
}

impl<T: Element, const N: usize, O: Element> Backward for ScanPlan<T, N, O> {
    type BwArgs<'a> = ScanBwArgs<'a, T, N, O>;

    fn bw_workspace_size(&self, wants: Grads) -> usize {
        if wants.contains(Grad::X) {
            self.bw_total_bytes()
        } else {
            0
        }
    }

    fn run_bw(&self, stream: &Stream, workspace: Workspace<'_>, args: Self::BwArgs<'_>) -> Result<()> {
        let op = self.desc.op;
        if self.bw.is_empty() {
            return Err(Error::Unsupported {
                op: OP,
                what: format!(
                    "the backward of {} on dtype {}: integer outputs have no gradient",
                    op.name(),
                    T::KIND
                ),
            });
        }
        let shape = &self.desc.shape;
        let (x, dy, dx) = (&args.x, &args.dy, &args.dx);
        let views = [View::of("x", shape, x), View::of("dy", shape, dy), View::of_mut("dx", shape, dx)];
        check_views(OP, stream, &views)?;
        check_presence("y", args.y.is_some(), op == ScanOp::LogCumSumExp, op)?;
        check_presence("indices", args.indices.is_some(), op.has_indices(), op)?;
        let ws = workspace.check_ptr(OP, self.bw_total_bytes(), stream.context().id())?;
        // the segment states lie past cumprod's accumulators
        let part = ws.byte_add(self.bw_bytes());
        let dx_extent = Extent::of_mut("dx", dx);
        check_alias(OP, &dx_extent, &Extent::of("x", x), false)?;
        // A float plan: O is T.
        let dy_extent = Extent::new("dy", dy.data().ptr().cast::<T>(), dy.shape(), dy.strides());
        check_alias(OP, &dx_extent, &dy_extent, false)?;
        // The backward scans run against the forward direction.
        let (fw_flip, bw_flip) = (self.desc.reverse, !self.desc.reverse);
        let mut p = self.params(bw_flip);
        p.x = x.data().ptr();
        p.y = dx.data().ptr();
        p.dy = dy.data().ptr().cast::<T>();
        p.ax[X] = self.axis(x.strides(), bw_flip);
        p.ax[Y] = self.axis(dx.strides(), bw_flip);
        p.ax[DY] = self.axis(dy.strides(), bw_flip);
        if let Some(y) = &args.y {
            check_views(OP, stream, &[View::of("y", shape, y)])?;
            let y_extent = Extent::new("y", y.data().ptr().cast::<T>(), y.shape(), y.strides());
            check_alias(OP, &dx_extent, &y_extent, false)?;
            p.yfw = y.data().ptr().cast::<T>();
            p.ax[YFW] = self.axis(y.strides(), bw_flip);
        }
        if let Some(idx) = &args.indices {
            check_views(OP, stream, &[View::of("indices", shape, idx)])?;
            let ir = byte_range::<i64>(idx.data().ptr().addr(), shape, idx.strides());
            check_apart(("dx", byte_range::<T>(p.y.addr(), shape, dx.strides())), ("indices", ir))?;
            p.idx_in = idx.data().ptr();
            p.ax[IDX] = self.axis(idx.strides(), bw_flip);
        }
        let dim = self.desc.dim;
        match op {
            ScanOp::CumSum => {
                // cumsum of dy the other way: the forward kernel on dy.
                p.x = p.dy;
                p.ax[X] = p.ax[DY];
                // SAFETY: the views were bounds-checked at construction and
                // their shapes above.
                unsafe { self.launch(stream, &self.bw[0], p, dy.strides()[dim], part) }
            }
            ScanOp::CumProd => {
                let dense = contiguous_strides(shape);
                p.ws = ws.cast();
                p.ax[WS] = self.axis(&dense, bw_flip);
                // SAFETY: as above; the workspace holds one accumulator per
                // element (`bw_bytes`, checked above).
                unsafe { self.launch(stream, &self.bw[0], p, x.strides()[dim], part) }?;
                let mut q = p;
                q.flipped = u32::from(fw_flip);
                for s in [X, Y, WS] {
                    let strides = match s {
                        X => *x.strides(),
                        Y => *dx.strides(),
                        _ => dense,
                    };
                    q.ax[s] = self.axis(&strides, fw_flip);
                }
                // SAFETY: as above; pass 1 wrote the workspace before on
                // the same stream.
                unsafe { self.launch(stream, &self.bw[1], q, x.strides()[dim], part) }
            }
            // SAFETY: as above.
            _ => unsafe { self.launch(stream, &self.bw[0], p, dy.strides()[dim], part) },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn params_match_the_kernel_layout() {
        // 8 pointers, 6 axes of 10 words, 8 extents, len, lines, seg_len,
        // segs, 4 u32
        assert_eq!(core::mem::size_of::<ScanParams<f32>>(), 64 + 6 * 80 + 64 + 32 + 16);
    }

    #[test]
    fn byte_ranges_meet_only_when_they_share_bytes() {
        let a = byte_range::<i64>(0x1000, &[2, 3], &[3, 1]);
        assert_eq!(a, (0x1000, 0x1030));
        assert!(check_apart(("i", a), ("x", (0x102c, 0x1040))).is_err());
        assert!(check_apart(("i", a), ("x", (0x1030, 0x1040))).is_ok());
        assert!(check_apart(("i", (0x1000, 0x1000)), ("x", (0, 0x2000))).is_ok());
    }

    #[test]
    fn every_op_has_a_forward_and_a_backward() {
        for op in ScanOp::ALL {
            let (fw, bw) = op.codes();
            assert!(fw <= 8 && !bw.is_empty() && bw.iter().all(|&c| c <= 8));
        }
    }
}
