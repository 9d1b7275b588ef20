//! Host side of the reductions over any dims (`kernels/common/reduce_dims.cuh`,
//! whose kernels `reduce.cu` and `logical_reduce.cu` instantiate): the
//! dims of a reduction merged and ordered, the choice between the row and
//! column kernels, the split of small problems over more blocks, and the
//! launches; [`Reduction`] holds what a plan keeps of them.
//!
//! A reduction's dims fall into kept dims (one output each) and reduced
//! dims. Extent-1 dims are dropped; each set is ordered by the input's
//! stride, outermost first, and neighbours contiguous in every operand are
//! merged. Then:
//! - the innermost reduced dim has input stride 1: the row kernel
//!   (segments of that dim, 16-byte loads when aligned);
//! - else the innermost kept dim has input stride 1: the column kernel
//!   (threads along it, coalesced);
//! - else the row kernel over strided segments (any strides, broadcast
//!   too).

use baracuda_driver::{Function, LaunchConfig, Stream};
use baracuda_kernels_types::{
    DevPtr, DevPtrMut, Element, Error, Result, TensorMut, TensorRef, Workspace, MAX_RANK,
};

use crate::checks::{byte_span, check_disjoint, check_views, invalid_descriptor, View};
use crate::launch::{grid_x, launch_params, padded};

/// Threads per block of every reduction kernel (`__launch_bounds__(256)`).
pub(crate) const THREADS: u32 = 256;

/// Loads each thread of the row and column kernels issues before folding
/// them (`FOLD_AHEAD` of `kernels/common/reduce_dims.cuh`).
pub(crate) const FOLD_AHEAD: usize = 4;

/// Blocks the launch heuristics aim for per SM: two waves of eight
/// 256-thread blocks (2048 threads, full residency on sm_80/sm_90).
pub(crate) const BLOCKS_PER_SM: usize = 16;

/// A split state of a reduction kernel (reduce.cu's `St`, logical_reduce.cu's
/// count), a marker for typed workspace addresses.
pub(crate) enum PartialState {}
/// A backward statistic of `reduce.cu` (`Stat2`: two accumulators).
pub(crate) enum StatPair {}

/// Bytes of one `St` for element type `T` (three accumulators).
pub(crate) fn state_bytes<T: Element>() -> usize {
    3 * acc_bytes::<T>()
}

/// Bytes of one `Stat2` for element type `T`.
pub(crate) fn stat_bytes<T: Element>() -> usize {
    2 * acc_bytes::<T>()
}

/// Bytes of reduce.cu's `ACC` for `T`: the float accumulator, i64 for the
/// integer kinds.
fn acc_bytes<T: Element>() -> usize {
    if T::KIND.is_float() {
        T::KIND.float_accumulator().size_bytes()
    } else {
        8
    }
}

/// `OpArgs` of `common/reduce_dims.cuh`.
#[repr(C)]
#[derive(Copy, Clone, Debug)]
pub(crate) struct OpArgs {
    pub p: f64,
    pub correction: f64,
    pub n_red: u64,
}

/// The operand a reduction kernel has per output besides `y` (`aux` of
/// `common/reduce_dims.cuh`): none, an input its fold reads (the ties
/// statistics read the forward output), or a second output its fold
/// writes (var_mean's mean).
#[derive(Debug)]
pub(crate) enum Aux<T, O> {
    None,
    Input(DevPtr<T>),
    Output(DevPtrMut<O>),
}

impl<T, O> Aux<T, O> {
    /// The device address (0 for none).
    fn addr(&self) -> u64 {
        match *self {
            Aux::None => 0,
            Aux::Input(p) => p.addr(),
            Aux::Output(p) => p.addr(),
        }
    }
}

/// `ReduceParams` of `common/reduce_dims.cuh`, field for field.
#[repr(C)]
pub(crate) struct ReduceParams<T, O> {
    x: DevPtr<T>,
    y: DevPtrMut<O>,
    /// [`Aux::addr`]: the kernel's `A*`, `const X*` or `Y*` by the fold.
    aux: u64,
    partial: DevPtrMut<PartialState>,
    n_out: u64,
    nk: u32,
    nr: u32,
    kshape: [u64; MAX_RANK],
    kx: [i64; MAX_RANK],
    ky: [i64; MAX_RANK],
    kaux: [i64; MAX_RANK],
    rshape: [u64; MAX_RANK],
    rx: [i64; MAX_RANK],
    n_seg: u64,
    chunk: u64,
    splits: u32,
    seg_splits: u32,
    group: u32,
    vec: u32,
    op: OpArgs,
}

impl<T, O> Clone for ReduceParams<T, O> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T, O> Copy for ReduceParams<T, O> {}

/// The logical dims of a reduction of a rank-`N` tensor: its shape, which
/// dims it folds, and whether the output keeps them with extent 1.
#[derive(Copy, Clone, Debug, PartialEq)]
pub(crate) struct ReducedDims<const N: usize> {
    pub shape: [usize; N],
    pub reduced: [bool; N],
    pub keepdim: bool,
}

impl<const N: usize> ReducedDims<N> {
    /// The dims of `shape` for which `is_reduced(d)` holds are folded.
    pub(crate) fn new(shape: [usize; N], keepdim: bool, is_reduced: impl Fn(usize) -> bool) -> Self {
        ReducedDims {
            shape,
            reduced: core::array::from_fn(is_reduced),
            keepdim,
        }
    }

    /// Shape of the output: the reduced dims as 1 (keepdim) or dropped.
    pub(crate) fn output_shape(&self) -> Vec<usize> {
        (0..N)
            .filter_map(|d| match (self.reduced[d], self.keepdim) {
                (false, _) => Some(self.shape[d]),
                (true, true) => Some(1),
                (true, false) => None,
            })
            .collect()
    }

    /// [`ReducedDims::output_shape`] as an array of the plan's output rank
    /// `M` (which `select` checked).
    pub(crate) fn output_array<const M: usize>(&self) -> [usize; M] {
        let v = self.output_shape();
        core::array::from_fn(|i| v[i])
    }

    /// `InvalidDescriptor` naming `keepdim` of `op` unless the output has
    /// the plan's rank `M`; `reason` says so from the output's rank.
    pub(crate) fn check_output_rank<const M: usize>(
        &self,
        op: &'static str,
        reason: impl FnOnce(usize) -> String,
    ) -> Result<()> {
        let rank = self.output_shape().len();
        if rank != M {
            let value = self.keepdim.to_string();
            return Err(invalid_descriptor(op, "keepdim", value, &reason(rank)));
        }
        Ok(())
    }

    /// The checks of a descriptor's `dims` bit `mask` (bit `d` reduces dim
    /// `d`): `InvalidDescriptor` naming `dims` for a bit past the rank `N`,
    /// or `keepdim` unless the output has the plan's rank `M`.
    pub(crate) fn check_mask<const M: usize>(&self, op: &'static str, mask: u32) -> Result<()> {
        if N < 32 && mask >> N != 0 {
            let why = format!("names a dim past the rank {N}");
            return Err(invalid_descriptor(op, "dims", format!("{mask:#b}"), &why));
        }
        self.check_output_rank::<M>(op, |r| {
            format!("the output has rank {r} with these dims, the plan's y rank {M}")
        })
    }

    /// Elements each output folds (the product of the reduced extents).
    pub(crate) fn n_red(&self) -> usize {
        self.extent_product(true)
    }

    /// Outputs (the product of the kept extents).
    pub(crate) fn n_out(&self) -> usize {
        self.extent_product(false)
    }

    fn extent_product(&self, reduced: bool) -> usize {
        (0..N)
            .filter(|&d| self.reduced[d] == reduced)
            .map(|d| self.shape[d])
            .product()
    }

    /// An output view's strides (rank `M`) spread over x's `N` dims: 0
    /// along every reduced dim, kept or dropped.
    pub(crate) fn spread<const M: usize>(&self, strides: &[usize; M]) -> [usize; N] {
        let mut out = [0usize; N];
        let mut k = 0;
        for (d, o) in out.iter_mut().enumerate() {
            if !self.reduced[d] {
                *o = strides[k];
            }
            if !self.reduced[d] || self.keepdim {
                k += 1;
            }
        }
        out
    }

    /// Row-major strides over the reduced dims (`reduced`) or the kept
    /// dims, as if those dims alone were stored densely; 0 along the
    /// others.
    pub(crate) fn dense_strides(&self, reduced: bool) -> [usize; N] {
        let mut strides = [0usize; N];
        let mut s = 1usize;
        for d in (0..N).rev() {
            if self.reduced[d] == reduced {
                strides[d] = s;
                s *= self.shape[d];
            }
        }
        strides
    }
}

/// The `dims` bit mask of every dim of a rank-`n` tensor.
pub(crate) const fn all_dims(n: usize) -> u32 {
    if n >= 32 {
        u32::MAX
    } else {
        (1u32 << n) - 1
    }
}

/// The methods of a reduction descriptor with `shape: [usize; N]`,
/// `dims: u32` (bit `d` reduces dim `d`) and `keepdim: bool` fields:
/// `with_dims`, `with_keepdim`, `is_reduced`, `output_shape` and the
/// private `dims` ([`ReducedDims`]).
macro_rules! reduced_dims_methods {
    ($ty:ident) => {
        impl<const N: usize> $ty<N> {
            /// Reduce exactly `dims` (a dim past 31 is kept as an invalid
            /// bit that `select` rejects).
            pub fn with_dims(mut self, dims: &[usize]) -> Self {
                self.dims = dims
                    .iter()
                    .fold(0, |m, &d| m | 1u32.checked_shl(d as u32).unwrap_or(1 << 31));
                self
            }
            /// Keep the reduced dims with extent 1.
            pub fn with_keepdim(mut self, keepdim: bool) -> Self {
                self.keepdim = keepdim;
                self
            }
            /// Whether dim `d` is reduced.
            pub fn is_reduced(&self, d: usize) -> bool {
                d < 32 && self.dims & (1 << d) != 0
            }
            /// Shape of `y`: the reduced dims as 1 (keepdim) or dropped.
            pub fn output_shape(&self) -> Vec<usize> {
                self.dims().output_shape()
            }
            pub(crate) fn dims(&self) -> $crate::reduce::layout::ReducedDims<N> {
                $crate::reduce::layout::ReducedDims::new(self.shape, self.keepdim, |d| self.is_reduced(d))
            }
        }
    };
}
pub(crate) use reduced_dims_methods;

/// A kept dim: extent and the strides of x, y and the auxiliary operand.
#[derive(Copy, Clone, Debug, PartialEq)]
pub(crate) struct KeptDim {
    pub extent: usize,
    pub x: usize,
    pub y: usize,
    pub aux: usize,
}

/// A reduced dim: extent and input stride.
#[derive(Copy, Clone, Debug, PartialEq)]
pub(crate) struct RedDim {
    pub extent: usize,
    pub x: usize,
}

/// The merged and ordered dims of one reduction (outermost first).
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Geometry {
    pub kept: Vec<KeptDim>,
    /// Never empty: an empty reduction is one dim of extent 0, no
    /// reduction at all one dim of extent 1.
    pub red: Vec<RedDim>,
}

impl Geometry {
    /// Split `shape` into kept and reduced dims (`reduced[d]`), with the
    /// strides of x, y and aux per dim (those of y and aux unused on
    /// reduced dims), drop extent-1 dims, order and merge.
    pub(crate) fn new(
        shape: &[usize],
        reduced: &[bool],
        x: &[usize],
        y: &[usize],
        aux: &[usize],
    ) -> Geometry {
        let mut kept: Vec<KeptDim> = Vec::new();
        let mut red: Vec<RedDim> = Vec::new();
        for d in 0..shape.len() {
            if shape[d] == 1 {
                continue;
            }
            if reduced[d] {
                red.push(RedDim {
                    extent: shape[d],
                    x: x[d],
                });
            } else {
                kept.push(KeptDim {
                    extent: shape[d],
                    x: x[d],
                    y: y[d],
                    aux: aux[d],
                });
            }
        }
        kept.sort_by(|a, b| b.x.cmp(&a.x).then(b.y.cmp(&a.y)));
        red.sort_by_key(|r| core::cmp::Reverse(r.x));
        let kept = merge(kept, |o, i| {
            let joins =
                o.x == i.x * i.extent && o.y == i.y * i.extent && o.aux == i.aux * i.extent;
            joins.then_some(KeptDim {
                extent: o.extent * i.extent,
                ..*i
            })
        });
        let mut red = merge(red, |o, i| {
            (o.x == i.x * i.extent).then_some(RedDim {
                extent: o.extent * i.extent,
                x: i.x,
            })
        });
        if red.iter().any(|r| r.extent == 0) {
            red = vec![RedDim { extent: 0, x: 1 }];
        } else if red.is_empty() {
            red = vec![RedDim { extent: 1, x: 1 }];
        }
        Geometry { kept, red }
    }

    /// Outputs (product of kept extents).
    pub(crate) fn n_out(&self) -> usize {
        self.kept.iter().map(|k| k.extent).product()
    }

    /// Elements reduced per output.
    pub(crate) fn n_red(&self) -> usize {
        self.red.iter().map(|r| r.extent).product()
    }

    /// Which kernel runs.
    pub(crate) fn kernel(&self) -> Kernel {
        let red_inner = self.red[self.red.len() - 1];
        if red_inner.x == 1 || self.n_red() <= 1 {
            return Kernel::Row;
        }
        match self.kept.last() {
            Some(k) if k.x == 1 => Kernel::Col,
            _ => Kernel::Row,
        }
    }
}

/// Merge each neighbour pair `(outer, inner)` that `join` combines.
pub(crate) fn merge<D: Copy>(dims: Vec<D>, join: impl Fn(&D, &D) -> Option<D>) -> Vec<D> {
    let mut out: Vec<D> = Vec::with_capacity(dims.len());
    for d in dims {
        match out.last().and_then(|o| join(o, &d)) {
            Some(m) => *out.last_mut().expect("non-empty") = m,
            None => out.push(d),
        }
    }
    out
}

/// The two reduction kernels.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) enum Kernel {
    /// Groups of threads fold segments of the reduced set.
    Row,
    /// Threads along the contiguous kept dim, over reduced rows.
    Col,
}

/// Upper bound on the splits of an output's reduction (`gridDim.y`), from
/// the problem size alone, so that the workspace is known at `select`:
/// enough blocks for [`BLOCKS_PER_SM`] per SM when every block covers at
/// most 256 outputs, at least 64 elements per split, and at most the
/// 65,535 blocks of a grid's y. Worked example (H200, 132 SMs): one
/// output of 2^28 elements may split 65,535 ways (the row kernel takes
/// 2,112 of them); 8192 outputs of 16384, 66 ways.
pub(crate) fn max_splits(n_out: usize, n_red: usize, sm_count: u32) -> usize {
    if n_out == 0 {
        return 1;
    }
    let target = BLOCKS_PER_SM * sm_count as usize * THREADS as usize;
    target
        .div_ceil(n_out)
        .min(n_red / 64)
        .clamp(1, u16::MAX as usize)
}

/// The kernels of one op for one reduction kind (forward or statistic).
#[derive(Clone, Debug)]
pub(crate) struct ReduceKernels {
    pub row: Function,
    pub col: Function,
    pub combine: Function,
}

impl ReduceKernels {
    /// `<prefix>_row`, `<prefix>_col` and `<prefix>_combine` of `module`.
    pub(crate) fn load(module: &baracuda_driver::Module, prefix: &str) -> Result<Self> {
        Ok(ReduceKernels {
            row: module.function(&format!("{prefix}_row"))?,
            col: module.function(&format!("{prefix}_col"))?,
            combine: module.function(&format!("{prefix}_combine"))?,
        })
    }
}

/// One reduction to launch: its operands and geometry.
pub(crate) struct Launch<T, O> {
    pub x: DevPtr<T>,
    pub y: DevPtrMut<O>,
    pub aux: Aux<T, O>,
    pub partial: DevPtrMut<PartialState>,
    /// Splits the workspace at `partial` holds per output.
    pub max_splits: usize,
    pub geometry: Geometry,
    pub op: OpArgs,
    pub sm_count: u32,
    /// Bytes of the kernel's state (the column kernel's shared memory
    /// holds one per thread and column).
    pub state_bytes: usize,
}

impl<T: Element, O: 'static> Launch<T, O> {
    /// Enqueue the reduction (and the combine pass when it splits).
    ///
    /// # Safety
    /// `x` must hold every element the geometry's strides reach, `y` and
    /// `aux` (when not none) likewise for the kept dims, and
    /// `partial` `n_out * max_splits` states when `max_splits > 1`.
    pub(crate) unsafe fn run(&self, stream: &Stream, k: &ReduceKernels) -> Result<()> {
        let n_out = self.geometry.n_out();
        if n_out == 0 {
            return Ok(());
        }
        let (kernel, p, cfg) = self.configure()?;
        let f = match kernel {
            Kernel::Row => &k.row,
            Kernel::Col => &k.col,
        };
        // SAFETY: forwarded from the caller's contract; the geometry came
        // from the views' shapes and strides, and `splits` fits the
        // workspace (checked by `configure`).
        unsafe { launch_split(stream, (f, &k.combine), cfg, p, p.splits as usize, n_out) }
    }

    /// The kernel, its parameters and its launch shape (`n_out > 0`).
    ///
    /// # Errors
    /// `InvalidArgument` when the split would need more workspace than
    /// `max_splits` (the plan sized it so that this cannot happen).
    fn configure(&self) -> Result<(Kernel, ReduceParams<T, O>, LaunchConfig)> {
        let g = &self.geometry;
        let n_out = g.n_out();
        let vec_elems = 16 / std::mem::size_of::<T>();
        let target = BLOCKS_PER_SM * self.sm_count.max(1) as usize;
        let kernel = g.kernel();
        let (nk, nr) = (g.kept.len(), g.red.len());
        let mut p = ReduceParams::<T, O> {
            x: self.x,
            y: self.y,
            aux: self.aux.addr(),
            partial: self.partial,
            n_out: n_out as u64,
            nk: nk as u32,
            nr: nr as u32,
            kshape: padded(g.kept.iter().map(|d| d.extent as u64)),
            kx: padded(g.kept.iter().map(|d| d.x as i64)),
            ky: padded(g.kept.iter().map(|d| d.y as i64)),
            kaux: padded(g.kept.iter().map(|d| d.aux as i64)),
            rshape: padded(g.red.iter().map(|d| d.extent as u64)),
            rx: padded(g.red.iter().map(|d| d.x as i64)),
            n_seg: 1,
            chunk: 1,
            splits: 1,
            seg_splits: 1,
            group: 1,
            vec: 0,
            op: self.op,
        };
        let aligned = self.x.addr() % 16 == 0;
        let cfg = match kernel {
            Kernel::Row => {
                let seg = g.red[nr - 1];
                let outer = &g.red[..nr - 1];
                let vec = seg.x == 1
                    && aligned
                    && g.kept.iter().all(|d| d.x % vec_elems == 0)
                    && outer.iter().all(|d| d.x % vec_elems == 0);
                let v = if vec { vec_elems } else { 1 };
                let n_seg: usize = outer.iter().map(|d| d.extent).product();
                // A group gives each thread FOLD_AHEAD loads of a segment
                // (all in flight at once) where the segment has that many,
                // with up to 256 threads: 8192 f32 (2048 vectors) take 256
                // threads of 8 vectors, 2048 bf16 64 threads of 4, 7
                // strided elements 2 threads.
                let group = seg
                    .extent
                    .div_ceil(v)
                    .div_ceil(FOLD_AHEAD)
                    .next_power_of_two()
                    .min(THREADS as usize);
                let per_block = THREADS as usize / group;
                let blocks = n_out.div_ceil(per_block);
                // Splits fill the GPU but leave each at least 2048 elements.
                let wanted = target.div_ceil(blocks);
                let splits = wanted
                    .min(self.max_splits)
                    .min((n_seg * seg.extent / 2048).max(1))
                    .max(1);
                let (seg_splits, chunk, splits) = if n_seg >= splits {
                    (splits, seg.extent, splits)
                } else {
                    let per_seg = (splits / n_seg).max(1);
                    let chunk = seg.extent.div_ceil(per_seg).div_ceil(v) * v;
                    let per_seg = seg.extent.div_ceil(chunk.max(1)).max(1);
                    (n_seg, chunk.max(1), n_seg * per_seg)
                };
                p.n_seg = n_seg as u64;
                p.chunk = chunk as u64;
                p.splits = splits as u32;
                p.seg_splits = seg_splits as u32;
                p.group = group as u32;
                p.vec = u32::from(vec);
                LaunchConfig {
                    grid: (grid_x(blocks), splits as u32, 1),
                    block: (THREADS, 1, 1),
                    smem_bytes: 0,
                }
            }
            Kernel::Col => {
                let inner = g.kept[nk - 1].extent;
                let vec = aligned
                    && g.kept[..nk - 1].iter().all(|d| d.x % vec_elems == 0)
                    && g.red.iter().all(|d| d.x % vec_elems == 0);
                let v = if vec { vec_elems } else { 1 };
                let bx = inner.div_ceil(v).next_power_of_two().min(32);
                let by = THREADS as usize / bx;
                let blocks = (n_out / inner) * inner.div_ceil(bx * v);
                let n_red = g.n_red();
                let wanted = target.div_ceil(blocks);
                let splits = wanted
                    .min(self.max_splits)
                    .min((n_red / 64).max(1))
                    .max(1);
                let chunk = n_red.div_ceil(splits);
                let splits = n_red.div_ceil(chunk);
                p.n_seg = n_red as u64;
                p.chunk = chunk as u64;
                p.splits = splits as u32;
                p.vec = u32::from(vec);
                LaunchConfig {
                    grid: (grid_x(blocks), splits as u32, 1),
                    block: (bx as u32, by as u32, 1),
                    smem_bytes: (THREADS as usize * v * self.state_bytes) as u32,
                }
            }
        };
        if p.splits as usize > self.max_splits.max(1) {
            return Err(Error::InvalidArgument {
                op: "reduce",
                arg: "workspace",
                reason: format!(
                    "{} splits exceed the {} the workspace was sized for",
                    p.splits, self.max_splits
                ),
            });
        }
        Ok((kernel, p, cfg))
    }
}

/// What a plan keeps of a reduction over dims: the dims, the op's
/// scalars, the SM count its launches aim at, the splits its workspace
/// holds per output and the bytes of one kernel state.
#[derive(Copy, Clone, Debug)]
pub(crate) struct Reduction<const N: usize> {
    pub dims: ReducedDims<N>,
    pub op: OpArgs,
    pub sm_count: u32,
    /// Splits the workspace holds per output ([`max_splits`]).
    pub splits: usize,
    state_bytes: usize,
}

impl<const N: usize> Reduction<N> {
    /// The reduction of `dims` on a device of `sm_count` SMs, with kernel
    /// states of `state_bytes` bytes; the op's norm order and correction
    /// 0 ([`Reduction::with_scalars`]).
    pub(crate) fn new(dims: ReducedDims<N>, sm_count: u32, state_bytes: usize) -> Self {
        Reduction {
            dims,
            op: OpArgs {
                p: 0.0,
                correction: 0.0,
                n_red: dims.n_red() as u64,
            },
            sm_count,
            splits: max_splits(dims.n_out(), dims.n_red(), sm_count),
            state_bytes,
        }
    }

    /// The op's norm order `p` and variance correction.
    pub(crate) fn with_scalars(mut self, p: f64, correction: f64) -> Self {
        self.op.p = p;
        self.op.correction = correction;
        self
    }

    /// Bytes of the split states, `n_out * splits` of them (0 when each
    /// output is reduced by one block), a multiple of 256.
    pub(crate) fn partial_bytes(&self) -> usize {
        if self.splits > 1 {
            (self.dims.n_out() * self.splits * self.state_bytes).next_multiple_of(256)
        } else {
            0
        }
    }

    /// Enqueue `kernels` over `x` (address, strides) into `y`, with the
    /// auxiliary operand `aux` (an input the op reads, a second output it
    /// writes, or none) and the split states at `partial`; the strides of
    /// `y` and `aux` spread over x's dims ([`ReducedDims::spread`]).
    ///
    /// # Safety
    /// `x` must hold every element its strides reach over the dims'
    /// shape, `y` and `aux` (when not none) likewise over the kept dims,
    /// and `partial` [`Reduction::partial_bytes`] bytes.
    pub(crate) unsafe fn launch<T: Element, O: 'static>(
        &self,
        stream: &Stream,
        kernels: &ReduceKernels,
        x: (DevPtr<T>, &[usize; N]),
        y: (DevPtrMut<O>, [usize; N]),
        aux: (Aux<T, O>, [usize; N]),
        partial: DevPtrMut<u8>,
    ) -> Result<()> {
        let geometry = Geometry::new(&self.dims.shape, &self.dims.reduced, x.1, &y.1, &aux.1);
        let launch = Launch {
            x: x.0,
            y: y.0,
            aux: aux.0,
            partial: partial.cast(),
            max_splits: self.splits,
            geometry,
            op: self.op,
            sm_count: self.sm_count,
            state_bytes: self.state_bytes,
        };
        // SAFETY: forwarded from the caller's contract.
        unsafe { launch.run(stream, kernels) }
    }

    /// The forward of `op`'s plan: `x`, `y` and the second output `y2`
    /// (named by its `&str`; the op's `aux`, when it writes one) checked
    /// against the dims (shapes, context, the outputs disjoint from `x`
    /// and each other), the workspace against [`Reduction::partial_bytes`],
    /// then `kernels` launched.
    pub(crate) fn run<I: Element, O: Element, const M: usize>(
        &self,
        op: &'static str,
        stream: &Stream,
        workspace: Workspace<'_>,
        kernels: &ReduceKernels,
        (x, y, y2): Operands<'_, '_, I, O, N, M>,
    ) -> Result<()> {
        let out: [usize; M] = self.dims.output_array();
        let mut views = vec![View::of("x", &self.dims.shape, x), View::of_mut("y", &out, y)];
        let mut outputs = vec![byte_span("y", &y.as_const())];
        if let Some((name, y2)) = &y2 {
            views.push(View::of_mut(name, &out, y2));
            outputs.push(byte_span(name, &y2.as_const()));
        }
        check_views(op, stream, &views)?;
        let partial = workspace.check_ptr(op, self.partial_bytes(), stream.context().id())?;
        check_disjoint(op, &outputs, &[byte_span("x", x)])?;
        let aux = match &y2 {
            Some((_, y2)) => (Aux::Output(y2.data().ptr()), self.dims.spread(y2.strides())),
            None => (Aux::None, [0; N]),
        };
        // SAFETY: x and the outputs were bounds-checked at their views'
        // construction and their shapes against the dims above; the
        // workspace holds `partial_bytes`, checked above.
        unsafe {
            self.launch(
                stream,
                kernels,
                (x.data().ptr(), x.strides()),
                (y.data().ptr(), self.dims.spread(y.strides())),
                aux,
                partial,
            )
        }
    }
}

/// The operands of [`Reduction::run`]: `x`, `y` and an optional second
/// output with its name.
pub(crate) type Operands<'v, 'a, I, O, const N: usize, const M: usize> = (
    &'v TensorRef<'a, I, N>,
    &'v TensorMut<'a, O, M>,
    Option<(&'static str, &'v TensorMut<'a, O, M>)>,
);

/// `BwParams` of `reduce.cu`.
#[repr(C)]
#[derive(Copy, Clone)]
pub(crate) struct BwParams<T> {
    dx: DevPtrMut<T>,
    x: DevPtr<T>,
    dy: DevPtr<T>,
    y: DevPtr<T>,
    stat: DevPtr<StatPair>,
    n: u64,
    rank: u32,
    pad: u32,
    shape: [u64; MAX_RANK],
    stride: [[i64; MAX_RANK]; 5],
    op: OpArgs,
}

/// The backward's operands: dx, x, dy, y, stat, each with its strides
/// over x's dims (0 along reduced dims for dy, y and stat).
pub(crate) struct BwLaunch<'s, T> {
    pub dx: (DevPtrMut<T>, &'s [usize]),
    pub x: (DevPtr<T>, &'s [usize]),
    pub dy: (DevPtr<T>, &'s [usize]),
    pub y: (DevPtr<T>, &'s [usize]),
    pub stat: (DevPtr<StatPair>, &'s [usize]),
    pub op: OpArgs,
}

impl<T: Element> BwLaunch<'_, T> {
    /// Enqueue the elementwise backward over `shape` (x's shape).
    ///
    /// # Safety
    /// Every non-null operand must hold every element its strides reach
    /// over `shape`.
    pub(crate) unsafe fn run(
        &self,
        stream: &Stream,
        shape: &[usize],
        bw32: &Function,
        bw64: &Function,
        sm_count: u32,
    ) -> Result<()> {
        let n: usize = shape.iter().product();
        if n == 0 {
            return Ok(());
        }
        let c = Collapsed::new(shape, [self.dx.1, self.x.1, self.dy.1, self.y.1, self.stat.1]);
        let p = BwParams {
            dx: self.dx.0,
            x: self.x.0,
            dy: self.dy.0,
            y: self.y.0,
            stat: self.stat.0,
            n: n as u64,
            rank: c.rank,
            pad: 0,
            shape: c.shape,
            stride: c.strides,
            op: self.op,
        };
        // SAFETY: forwarded from the caller's contract.
        unsafe { launch_elementwise(stream, n, sm_count, (bw32, bw64), p) }
    }
}

/// The dims of an elementwise pass over x's `shape` with `K` operands of
/// the given strides (the first the one written): ordered by the first
/// operand's strides (outermost first), extent-1 dims dropped and
/// neighbours contiguous in every operand merged; the rank, shape and
/// strides the kernels' parameters hold (`BwParams` of reduce.cu).
pub(crate) struct Collapsed<const K: usize> {
    pub rank: u32,
    pub shape: [u64; MAX_RANK],
    pub strides: [[i64; MAX_RANK]; K],
}

impl<const K: usize> Collapsed<K> {
    pub(crate) fn new(shape: &[usize], strides: [&[usize]; K]) -> Self {
        let mut dims: Vec<usize> = (0..shape.len()).filter(|&d| shape[d] != 1).collect();
        dims.sort_by(|&a, &b| strides[0][b].cmp(&strides[0][a]));
        let merged = merge(
            dims.iter()
                .map(|&d| (shape[d], strides.map(|s| s[d])))
                .collect(),
            |o: &(usize, [usize; K]), i: &(usize, [usize; K])| {
                (0..K)
                    .all(|k| o.1[k] == i.1[k] * i.0)
                    .then_some((o.0 * i.0, i.1))
            },
        );
        Collapsed {
            rank: merged.len() as u32,
            shape: padded(merged.iter().map(|m| m.0 as u64)),
            strides: core::array::from_fn(|k| padded(merged.iter().map(|m| m.1[k] as i64))),
        }
    }
}

/// Launch an elementwise pass of `n` elements (n > 0) with parameters
/// `p`: the 32-bit-index kernel `kernels.0` when `n` fits in u32, else the
/// 64-bit one; a grid-stride loop over at most four waves of blocks.
///
/// # Safety
/// Every address in `p` must hold what the kernel reaches for `n`
/// elements.
pub(crate) unsafe fn launch_elementwise<P: Copy + 'static>(
    stream: &Stream,
    n: usize,
    sm_count: u32,
    kernels: (&Function, &Function),
    p: P,
) -> Result<()> {
    let blocks = n
        .div_ceil(THREADS as usize)
        .min(BLOCKS_PER_SM * 4 * sm_count.max(1) as usize);
    let f = if n <= u32::MAX as usize { kernels.0 } else { kernels.1 };
    // SAFETY: forwarded from the caller's contract.
    unsafe { launch_params(stream, f, LaunchConfig::linear(grid_x(blocks), THREADS), p) }
}

/// Launch a split reduction: `kernels.0` with `cfg` and parameters `p`,
/// then, when it split each of the `n_out` outputs `splits > 1` ways, the
/// combine `kernels.1` (a warp per output) over the states it wrote.
///
/// # Safety
/// Every address in `p` must hold what both kernels reach for `n_out`
/// outputs of `splits` states each.
pub(crate) unsafe fn launch_split<P: Copy + 'static>(
    stream: &Stream,
    kernels: (&Function, &Function),
    cfg: LaunchConfig,
    p: P,
    splits: usize,
    n_out: usize,
) -> Result<()> {
    // SAFETY: forwarded from the caller's contract.
    unsafe { launch_params(stream, kernels.0, cfg, p) }?;
    if splits > 1 {
        let warps = (THREADS / 32) as usize;
        let cfg = LaunchConfig::linear(grid_x(n_out.div_ceil(warps)), THREADS);
        // SAFETY: as above; the states were written by the launch before
        // on the same stream.
        unsafe { launch_params(stream, kernels.1, cfg, p) }?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn last_dim_of_a_matrix_is_a_contiguous_row() {
        let g = Geometry::new(&[16, 8], &[false, true], &[8, 1], &[1, 0], &[1, 0]);
        assert_eq!(g.kernel(), Kernel::Row);
        assert_eq!(g.red, vec![RedDim { extent: 8, x: 1 }]);
        assert_eq!((g.n_out(), g.n_red()), (16, 8));
    }

    #[test]
    fn dim_zero_of_a_matrix_is_a_column_reduction() {
        let g = Geometry::new(&[16, 8], &[true, false], &[8, 1], &[0, 1], &[0, 1]);
        assert_eq!(g.kernel(), Kernel::Col);
        assert_eq!(g.red, vec![RedDim { extent: 16, x: 8 }]);
    }

    #[test]
    fn nchw_over_n_h_w_merges_h_and_w_into_segments() {
        let s = [64, 256, 56, 56];
        let x = [256 * 3136, 3136, 56, 1];
        let g = Geometry::new(&s, &[true, false, true, true], &x, &[0, 1, 0, 0], &[0, 1, 0, 0]);
        assert_eq!(g.kernel(), Kernel::Row);
        assert_eq!(
            g.red,
            vec![
                RedDim {
                    extent: 64,
                    x: 256 * 3136
                },
                RedDim {
                    extent: 3136,
                    x: 1
                }
            ]
        );
        assert_eq!(g.kept.len(), 1);
    }

    #[test]
    fn transposed_input_reduced_over_its_rows_is_a_column_reduction() {
        // x [8, 16] stored column-major, reduce dim 1 (stride 8)
        let g = Geometry::new(&[8, 16], &[false, true], &[1, 8], &[1, 0], &[1, 0]);
        assert_eq!(g.kernel(), Kernel::Col);
    }

    #[test]
    fn broadcast_and_size_one_dims() {
        // reduce a stride-0 dim: a strided row of stride 0
        let g = Geometry::new(&[1, 5, 3], &[false, true, false], &[0, 0, 1], &[3, 3, 1], &[3, 3, 1]);
        assert_eq!(g.red, vec![RedDim { extent: 5, x: 0 }]);
        assert_eq!(g.kernel(), Kernel::Col);
        let empty = Geometry::new(&[4, 0], &[false, true], &[1, 1], &[1, 0], &[1, 0]);
        assert_eq!((empty.n_out(), empty.n_red()), (4, 0));
        assert_eq!(empty.kernel(), Kernel::Row);
        let none = Geometry::new(&[4, 3], &[false, false], &[3, 1], &[3, 1], &[3, 1]);
        assert_eq!((none.n_out(), none.n_red()), (12, 1));
    }

    #[test]
    fn split_bound_example() {
        assert_eq!(max_splits(1, 1 << 28, 132), 65_535);
        assert_eq!(max_splits(8192, 16384, 132), 66);
        assert_eq!(max_splits(1 << 20, 8, 132), 1);
        assert_eq!(max_splits(0, 8, 132), 1);
    }

    /// Offset of linear index `i` over the first `rank` dims (reduce.cuh
    /// `strided_offset`).
    fn offset(mut i: u64, rank: usize, shape: &[u64], stride: &[i64]) -> i64 {
        let mut o = 0;
        for d in (0..rank).rev() {
            o += (i % shape[d]) as i64 * stride[d];
            i /= shape[d];
        }
        o
    }

    /// Every (output, x offset) the launch folds and the partial slots it
    /// writes, by running common/reduce_dims.cuh's loops over every block and thread
    /// of the grid on the host.
    fn simulate(l: &Launch<f32, f32>) -> (Vec<(u64, i64)>, Vec<u64>) {
        let (kernel, p, cfg) = l.configure().expect("configure");
        let (nk, nr) = (p.nk as usize, p.nr as usize);
        let v = 4u64;
        let (mut folds, mut slots) = (Vec::new(), Vec::new());
        let mut emit = |o: u64, by: u32| {
            if p.splits > 1 {
                slots.push(o * u64::from(p.splits) + u64::from(by));
            } else {
                slots.push(o);
            }
        };
        match kernel {
            Kernel::Row => {
                let g = u64::from(p.group);
                let per_block = u64::from(THREADS) / g;
                let l_splits = p.splits / p.seg_splits;
                let (seg_len, seg_stride) = (p.rshape[nr - 1], p.rx[nr - 1]);
                for by in 0..cfg.grid.1 {
                    let (so, sl) = (u64::from(by / l_splits), u64::from(by % l_splits));
                    let ss = u64::from(p.seg_splits);
                    let (s0, s1) = (p.n_seg * so / ss, p.n_seg * (so + 1) / ss);
                    let l0 = sl * p.chunk;
                    let l1 = seg_len.min(l0 + p.chunk);
                    for bx in 0..u64::from(cfg.grid.0) {
                        for tid in 0..u64::from(THREADS) {
                            let (t, slot) = (tid % g, tid / g);
                            let mut ob = bx;
                            while ob * per_block < p.n_out {
                                let o = ob * per_block + slot;
                                if o < p.n_out {
                                    let xo = offset(o, nk, &p.kshape, &p.kx);
                                    for seg in s0..s1 {
                                        if l0 >= l1 {
                                            break;
                                        }
                                        let base = xo + offset(seg, nr - 1, &p.rshape, &p.rx);
                                        let mut i = l0;
                                        if p.vec == 1 {
                                            let nv = (l1 - l0) / v;
                                            for vv in (t..nv).step_by(g as usize) {
                                                for k in 0..v {
                                                    folds.push((o, base + (l0 + vv * v + k) as i64));
                                                }
                                            }
                                            i = l0 + nv * v;
                                        }
                                        for j in (i + t..l1).step_by(g as usize) {
                                            folds.push((o, base + j as i64 * seg_stride));
                                        }
                                    }
                                    if t == 0 {
                                        emit(o, by);
                                    }
                                }
                                ob += u64::from(cfg.grid.0);
                            }
                        }
                    }
                }
            }
            Kernel::Col => {
                let cv = if p.vec == 1 { v } else { 1 };
                let (bx_n, by_n) = (u64::from(cfg.block.0), u64::from(cfg.block.1));
                let inner = p.kshape[nk - 1];
                let cols_per_block = bx_n * cv;
                let col_blocks = inner.div_ceil(cols_per_block);
                let n_outer = p.n_out / inner;
                for by in 0..cfg.grid.1 {
                    let r0 = u64::from(by) * p.chunk;
                    let r1 = p.n_seg.min(r0 + p.chunk);
                    for bx in 0..u64::from(cfg.grid.0) {
                        let mut b = bx;
                        while b < n_outer * col_blocks {
                            let outer = b / col_blocks;
                            let xo = offset(outer, nk - 1, &p.kshape, &p.kx);
                            for tx in 0..bx_n {
                                let c0 = (b % col_blocks) * cols_per_block + tx * cv;
                                for ty in 0..by_n {
                                    for r in (r0 + ty..r1).step_by(by_n as usize) {
                                        let ro = offset(r, nr, &p.rshape, &p.rx);
                                        for k in 0..cv {
                                            if c0 + k < inner {
                                                let o = outer * inner + c0 + k;
                                                folds.push((o, xo + ro + (c0 + k) as i64));
                                            }
                                        }
                                    }
                                }
                                for k in 0..cv {
                                    if c0 + k < inner {
                                        emit(outer * inner + c0 + k, by);
                                    }
                                }
                            }
                            b += u64::from(cfg.grid.0);
                        }
                    }
                }
            }
        }
        folds.sort_unstable();
        slots.sort_unstable();
        (folds, slots)
    }

    /// The launch of a reduction of a tensor of `shape` and strides `x`
    /// over `reduced`, at address `addr`, on `sm_count` SMs.
    fn launch(shape: &[usize], reduced: &[bool], x: &[usize], addr: u64, sm_count: u32) -> Launch<f32, f32> {
        let zeros = vec![0; shape.len()];
        let mut y = vec![0; shape.len()];
        let mut s = 1;
        for d in (0..shape.len()).rev() {
            if !reduced[d] {
                y[d] = s;
                s *= shape[d];
            }
        }
        let geometry = Geometry::new(shape, reduced, x, &y, &zeros);
        let n_red = geometry.n_red();
        Launch {
            x: DevPtr::from_addr(addr),
            y: DevPtrMut::NULL,
            aux: Aux::None,
            partial: DevPtrMut::NULL,
            max_splits: max_splits(geometry.n_out(), n_red, sm_count),
            geometry,
            op: OpArgs {
                p: 2.0,
                correction: 1.0,
                n_red: n_red as u64,
            },
            sm_count,
            state_bytes: state_bytes::<f32>(),
        }
    }

    /// Every output folds each of its elements exactly once, and writes
    /// each of its result slots once, for every kernel and split.
    #[test]
    fn every_element_is_folded_once() {
        // (shape, reduced dims, x strides, x address)
        type Case<'a> = (&'a [usize], &'a [bool], &'a [usize], u64);
        let cases: &[Case] = &[
            (&[3, 1000], &[false, true], &[1000, 1], 0),
            (&[30_011], &[true], &[1], 0),
            (&[5, 9000], &[false, true], &[9000, 1], 4),
            (&[2000, 40], &[true, false], &[40, 1], 0),
            (&[2000, 7], &[true, false], &[7, 1], 0),
            (&[3, 5, 7, 9], &[true, false, true, false], &[315, 63, 9, 1], 0),
            (&[3, 5, 7, 9], &[false, true, false, true], &[315, 63, 9, 1], 0),
            (&[8, 16, 12, 12], &[true, false, true, true], &[2304, 144, 12, 1], 0),
            (&[6, 50, 70], &[false, false, true], &[1, 6, 300], 0),
            (&[6, 50, 70], &[true, false, false], &[1, 6, 300], 0),
            (&[8, 300], &[true, false], &[0, 1], 0),
            (&[8, 300], &[false, true], &[0, 1], 0),
            (&[5, 0], &[false, true], &[1, 1], 0),
            (&[4, 3], &[false, false], &[3, 1], 0),
            // splits over segments, and over segments and within them
            (&[64, 4, 300], &[true, false, true], &[1200, 300, 1], 0),
            (&[2, 3, 20_000], &[true, false, true], &[60_000, 20_000, 1], 0),
        ];
        for &(shape, reduced, x, addr) in cases {
            for sm_count in [2, 132] {
                let l = launch(shape, reduced, x, addr, sm_count);
                let g = &l.geometry;
                let (n_out, n_red) = (g.n_out() as u64, g.n_red() as u64);
                let p = l.configure().expect("configure").1;
                let mut want = Vec::new();
                for o in 0..n_out {
                    let xo = offset(o, p.nk as usize, &p.kshape, &p.kx);
                    for r in 0..n_red {
                        want.push((o, xo + offset(r, p.nr as usize, &p.rshape, &p.rx)));
                    }
                }
                want.sort_unstable();
                let (folds, slots) = simulate(&l);
                let what = format!("{shape:?} {reduced:?} {x:?} on {sm_count} SMs: {:?}", g.kernel());
                assert!(folds == want, "{what}: folds differ");
                let splits = u64::from(p.splits);
                let all: Vec<u64> = (0..n_out * splits).collect();
                assert_eq!(slots, all, "{what}: result slots");
                assert!(p.splits as usize <= l.max_splits, "{what}");
            }
        }
    }

    #[test]
    fn params_layout_matches_cuda() {
        // 4 pointers, n_out, nk/nr, 6 arrays of 8, 2 u64, 4 u32, OpArgs
        assert_eq!(
            std::mem::size_of::<ReduceParams<f32, f32>>(),
            32 + 8 + 8 + 6 * 64 + 16 + 16 + 24
        );
        assert_eq!(
            std::mem::size_of::<BwParams<f32>>(),
            40 + 8 + 8 + 64 + 5 * 64 + 24
        );
    }
}
