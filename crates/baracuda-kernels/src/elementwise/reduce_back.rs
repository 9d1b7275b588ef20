//! The gradient of a broadcast input of a pointwise map, summed back to
//! that input's shape: what the binary and ternary backwards share. The
//! kernels are `reduce_back` and `reduce_back_finalize` of
//! `kernels/common/reduce_back.cuh`, instantiated by each source.
//!
//! A gradient whose input has the output's shape is written by the map's
//! pointwise backward kernel; one whose input was broadcast is summed over
//! the broadcast axes here, in a fixed order (deterministic), split across
//! blocks when there are few outputs, with the partial sums of the splits
//! in the workspace.

use baracuda_driver::{Function, LaunchArgs, LaunchConfig, Stream};
use baracuda_kernels_types::{
    DevPtr, DevPtrMut, Element, ElementKind, Error, Result, Shape, TensorMut, MAX_RANK,
};

use super::layout::{check_operand, Out, THREADS};
use crate::checks::Extent;

/// Inputs a reduction reads at most (`RB_MAX_INS` in reduce_back.cuh).
pub(crate) const MAX_INS: usize = 4;

/// `ReduceArgs` of `kernels/common/reduce_back.cuh`, field for field.
#[repr(C)]
#[derive(Copy, Clone, Debug)]
struct ReduceArgs {
    n_out: u64,
    n_red: u64,
    chunk: u64,
    rank_out: u32,
    rank_red: u32,
    splits: u32,
    pad: u32,
    shape_out: [u64; MAX_RANK],
    shape_red: [u64; MAX_RANK],
    /// The gradient, then the inputs, along the kept axes.
    out_stride: [[i64; MAX_RANK]; MAX_INS + 1],
    /// The inputs along the reduced axes.
    red_stride: [[i64; MAX_RANK]; MAX_INS],
    inp: [DevPtr<u8>; MAX_INS],
    grad: DevPtrMut<u8>,
    /// `ACC[splits][n_out]` in the workspace when `splits > 1`.
    partial: DevPtrMut<u8>,
}

/// How the gradient of one broadcast input is reduced: which axes are
/// kept, which summed, and in how many deterministic splits.
#[derive(Clone, Debug)]
pub(crate) struct Reduction {
    kept: Vec<usize>,
    reduced: Vec<usize>,
    n_out: usize,
    n_red: usize,
    /// Block shape: `tx` outputs by `ty` threads striding the reduced range.
    tx: u32,
    ty: u32,
    splits: usize,
    chunk: usize,
    reduce: Function,
    /// The source's kernel that sums the splits' partials.
    finalize: Function,
}

impl Reduction {
    /// The reduction of the gradient of an input of `shape` broadcast to
    /// `out`, or `None` when it is not broadcast. Its partials take at most
    /// `room` bytes of workspace (else it runs unsplit), and `room` is
    /// reduced by what they take; `load` loads its reduction and finalize
    /// kernels.
    pub(crate) fn plan<T: Element>(
        shape: &[usize],
        out: &[usize],
        sm_count: u32,
        room: &mut usize,
        load: impl FnOnce() -> Result<(Function, Function)>,
    ) -> Result<Option<Self>> {
        if shape == out {
            return Ok(None);
        }
        let rank = out.len();
        let kept: Vec<usize> = (0..rank)
            .filter(|&d| shape[d] == out[d] && shape[d] != 1)
            .collect();
        let reduced: Vec<usize> = (0..rank).filter(|&d| shape[d] != out[d]).collect();
        let n_out: usize = kept.iter().map(|&d| out[d]).product();
        let n_red: usize = reduced.iter().map(|&d| out[d]).product();
        let (tx, ty, mut splits, mut chunk) = plan_reduction(n_out, n_red, sm_count);
        if partial_bytes::<T>(splits, n_out) > *room {
            (splits, chunk) = (1, n_red);
        }
        *room -= partial_bytes::<T>(splits, n_out);
        let (reduce, finalize) = load()?;
        Ok(Some(Reduction {
            kept,
            reduced,
            n_out,
            n_red,
            tx,
            ty,
            splits,
            chunk,
            reduce,
            finalize,
        }))
    }

    /// How many splits the reduced range is summed in.
    pub(crate) fn splits(&self) -> usize {
        self.splits
    }

    /// Bytes of this reduction's partials in the workspace, 256-aligned.
    pub(crate) fn ws_bytes<T: Element>(&self) -> usize {
        partial_bytes::<T>(self.splits, self.n_out)
    }

    /// Enqueue the reduction (and finalize when split) of one gradient
    /// over the map's `out` shape: `ins` are the inputs the kernel reads,
    /// each with its element strides over `out` (0 where broadcast), `grad`
    /// the gradient with its strides over the input's shape, `partial` this
    /// reduction's partials in the workspace; `tail` pushes the reduction
    /// kernel's parameters after its `ReduceArgs` (finalize takes none).
    ///
    /// # Safety
    /// Every address must hold what its strides reach over `out` (bounds-
    /// checked views), `ins` must be the kernel's inputs in number and
    /// order, `grad` must be disjoint from every input, and `partial` must
    /// hold [`Reduction::ws_bytes`] bytes.
    pub(crate) unsafe fn launch<T: Element>(
        &self,
        stream: &Stream,
        out: &[usize],
        ins: &[(DevPtr<u8>, &[usize])],
        grad: Out<'_, T>,
        partial: DevPtrMut<u8>,
        tail: impl Fn(&mut LaunchArgs) -> Result<()>,
    ) -> Result<()> {
        if self.n_out == 0 {
            return Ok(());
        }
        let mut p = ReduceArgs {
            n_out: self.n_out as u64,
            n_red: self.n_red as u64,
            chunk: self.chunk as u64,
            rank_out: self.kept.len() as u32,
            rank_red: self.reduced.len() as u32,
            splits: self.splits as u32,
            pad: 0,
            shape_out: [1; MAX_RANK],
            shape_red: [1; MAX_RANK],
            out_stride: [[0; MAX_RANK]; MAX_INS + 1],
            red_stride: [[0; MAX_RANK]; MAX_INS],
            inp: [DevPtr::NULL; MAX_INS],
            grad: grad.0.cast(),
            partial: if self.splits > 1 {
                partial
            } else {
                DevPtrMut::NULL
            },
        };
        for (slot, (ptr, _)) in p.inp.iter_mut().zip(ins) {
            *slot = *ptr;
        }
        for (i, &d) in self.kept.iter().enumerate() {
            p.shape_out[i] = out[d] as u64;
            p.out_stride[0][i] = grad.1[d] as i64;
            for (row, (_, st)) in p.out_stride[1..].iter_mut().zip(ins) {
                row[i] = st[d] as i64;
            }
        }
        for (i, &d) in self.reduced.iter().enumerate() {
            p.shape_red[i] = out[d] as u64;
            for (row, (_, st)) in p.red_stride.iter_mut().zip(ins) {
                row[i] = st[d] as i64;
            }
        }
        let cols = self.n_out.div_ceil(self.tx as usize) as u32;
        let cfg = LaunchConfig {
            grid: (cols, self.splits as u32, 1),
            block: (self.tx, self.ty, 1),
            smem_bytes: reduce_smem_bytes::<T>(true),
        };
        let mut args = LaunchArgs::new();
        args.push(p)?;
        tail(&mut args)?;
        // SAFETY: the caller's contract: the kernel reads the inputs at
        // offsets inside their views and writes grad at its own offsets, or
        // partials inside the workspace.
        unsafe { self.reduce.launch(stream, cfg, &mut args)? };
        if self.splits > 1 {
            let cfg = LaunchConfig {
                grid: (self.n_out.div_ceil(THREADS as usize) as u32, 1, 1),
                block: (THREADS, 1, 1),
                smem_bytes: reduce_smem_bytes::<T>(false),
            };
            let mut args = LaunchArgs::new();
            args.push(p)?;
            // SAFETY: as above; finalize reads the partials just written and
            // writes grad.
            unsafe { self.finalize.launch(stream, cfg, &mut args)? };
        }
        Ok(())
    }
}

/// The reductions of the wanted gradients among `rs` (`None` for an input
/// not broadcast or a gradient not wanted), each with the byte offset of
/// its partials in the workspace, laid out in that order.
pub(crate) fn with_offsets<'r, T: Element>(
    rs: impl Iterator<Item = Option<&'r Reduction>>,
) -> impl Iterator<Item = (usize, &'r Reduction, usize)> {
    let mut offset = 0;
    rs.enumerate().filter_map(move |(k, r)| {
        let r = r?;
        let at = offset;
        offset += r.ws_bytes::<T>();
        Some((k, r, at))
    })
}

/// Workspace of `splits` partial sums of `n_out` outputs (none unsplit),
/// rounded up to 256 bytes.
fn partial_bytes<T: Element>(splits: usize, n_out: usize) -> usize {
    if splits <= 1 {
        return 0;
    }
    (splits * n_out * acc_bytes::<T>()).div_ceil(256) * 256
}

/// Bytes of the accumulator of `T` (f64 for f64, else f32).
fn acc_bytes<T: Element>() -> usize {
    if T::KIND == ElementKind::F64 {
        8
    } else {
        4
    }
}

/// `PAIRWISE_LEVELS` of `kernels/common/reduce_back.cuh`.
const PAIRWISE_LEVELS: usize = 16;

/// Dynamic shared memory of the reduction kernel (`with_part`: the block
/// tree's 256 partials, then the pairwise levels of 256 threads) or of
/// finalize (the levels alone).
fn reduce_smem_bytes<T: Element>(with_part: bool) -> u32 {
    let slots = PAIRWISE_LEVELS * 256 + if with_part { 256 } else { 0 };
    (slots * acc_bytes::<T>()) as u32
}

/// Block shape and splits of one reduction. A block is `tx * ty = 256`
/// threads: `tx` (a power of two up to 256) outputs, `ty` threads striding
/// the reduced range of each. Splits along grid.y fill the device when
/// there are few output blocks, keeping at least 16 reduced elements per
/// thread and at most 1024 partials per output (summed in order later).
///
/// Worked example (H200, 132 SMs, 270336 resident threads): the gradient of
/// a scalar `b` under dy `[4096, 513]` has 1 output and 2101248 reduced
/// elements, so tx = 1, ty = 256, one block column; splits = min(ceil(270336
/// / 256) = 1056, ceil(2101248 / (256 * 16)) = 513) = 513, chunk = 4096
/// elements per split, 16 per thread. A bias `[1024]` under `[8192, 1024]`
/// gives tx = 256, ty = 1, 4 block columns, splits = min(264, 512) = 264,
/// chunk = ceil(8192 / 264) = 32 rows, hence 256 splits.
fn plan_reduction(n_out: usize, n_red: usize, sm_count: u32) -> (u32, u32, usize, usize) {
    let tx = n_out.clamp(1, 256).next_power_of_two().min(256) as u32;
    let ty = 256 / tx;
    if n_out == 0 || n_red == 0 {
        return (tx, ty, 1, n_red);
    }
    let target = sm_count as usize * 2048;
    let block_cols = n_out.div_ceil(tx as usize);
    let splits = target
        .div_ceil(256 * block_cols)
        .min(n_red.div_ceil(ty as usize * 16))
        .clamp(1, 1024);
    let chunk = n_red.div_ceil(splits);
    (tx, ty, n_red.div_ceil(chunk), chunk)
}

/// A gradient output: where it is written, and its extent for the
/// aliasing checks.
pub(crate) struct GradOut<'s, T> {
    pub ptr: DevPtrMut<T>,
    pub ext: Extent<'s, T>,
}

impl<'s, T: Element> GradOut<'s, T> {
    /// The gradient `arg` of `op`, when given, after checking its shape is
    /// `shape` and its context `stream`'s.
    pub(crate) fn checked<const N: usize>(
        op: &'static str,
        stream: &Stream,
        arg: &'static str,
        g: Option<&'s TensorMut<'_, T, N>>,
        shape: &[usize; N],
    ) -> Result<Option<Self>> {
        let Some(g) = g else { return Ok(None) };
        check_operand(op, arg, stream, shape, g.shape(), g.data().ctx_id())?;
        Ok(Some(GradOut {
            ptr: g.data().ptr(),
            ext: Extent::of_mut(arg, g),
        }))
    }
}

/// The pointwise pass's output for gradient `g`: itself when given and not
/// reduced, else null with `absent` strides (dy's, so the output's axes
/// still collapse).
pub(crate) fn pointwise_out<'s, T>(
    g: &Option<GradOut<'s, T>>,
    r: &Option<Reduction>,
    absent: &'s [usize],
) -> Out<'s, T> {
    match (g, r) {
        (Some(g), None) => (g.ptr, g.ext.strides),
        _ => (DevPtrMut::NULL, absent),
    }
}

/// Strides of an operand of `shape` read over the broadcast `out` shape: 0
/// along the axes it is broadcast on.
pub(crate) fn broadcast_strides<const N: usize>(
    shape: &[usize],
    strides: &[usize],
    out: &[usize; N],
) -> [usize; N] {
    let mut st = [0usize; N];
    for d in 0..N {
        if shape[d] == out[d] {
            st[d] = strides[d];
        }
    }
    st
}

/// The broadcast of `shapes` by NumPy's rules (each axis equal or 1), or
/// the first two shapes that do not broadcast.
pub(crate) fn broadcast_shapes<const N: usize>(
    shapes: &[&[usize; N]],
) -> core::result::Result<[usize; N], ([usize; N], [usize; N])> {
    let mut out = [1usize; N];
    for (k, s) in shapes.iter().enumerate() {
        for d in 0..N {
            if out[d] == 1 {
                out[d] = s[d];
            } else if s[d] != 1 && s[d] != out[d] {
                let first = shapes[..k].iter().find(|p| p[d] != 1).map_or(out, |p| **p);
                return Err((first, *shapes[k]));
            }
        }
    }
    // An axis of extent 0 somewhere: the output's extent is 0 there even
    // when an earlier shape had 1.
    Ok(out)
}

/// The broadcast of `shapes`, or `BroadcastMismatch` naming `op` and the
/// first two shapes that do not broadcast.
pub(crate) fn out_shape<const N: usize>(op: &'static str, shapes: &[&[usize; N]]) -> Result<[usize; N]> {
    broadcast_shapes(shapes).map_err(|(a, b)| Error::BroadcastMismatch {
        op,
        a: Shape::from(&a[..]),
        b: Shape::from(&b[..]),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reductions_follow_the_worked_example() {
        assert_eq!(plan_reduction(1, 4096 * 513, 132), (1, 256, 513, 4096));
        assert_eq!(plan_reduction(1024, 8192, 132), (256, 1, 256, 32));
        // many outputs, short reduction: no split
        assert_eq!(plan_reduction(1 << 20, 16, 132), (256, 1, 1, 16));
        // 33 outputs: 64 x 4 blocks
        assert_eq!(plan_reduction(33, 64, 132).0, 64);
        // nothing to sum: one split writing zeros
        assert_eq!(plan_reduction(5, 0, 132), (8, 32, 1, 0));
    }

    #[test]
    fn pairwise_levels_match_the_kernel() {
        let define = format!("#define PAIRWISE_LEVELS {PAIRWISE_LEVELS}\n");
        let header = crate::kernel_sources::COMMON
            .iter()
            .find(|(name, _)| *name == "common/reduce_back.cuh")
            .map(|(_, text)| *text)
            .unwrap_or_default();
        assert!(header.contains(&define));
        assert!(header.contains(&format!("#define RB_MAX_INS {MAX_INS}\n")));
        // f64 reduction: (16 + 1) * 256 slots of 8 bytes, 34 KiB, under the
        // 48 KiB a launch takes without opting in
        assert_eq!(reduce_smem_bytes::<f64>(true), 34816);
    }

    #[test]
    fn reduce_args_layout_matches_cuda() {
        // 3*8 + 4*4 + 2*64 + 5*64 + 4*64 + 4*8 + 2*8
        assert_eq!(
            std::mem::size_of::<ReduceArgs>(),
            24 + 16 + 128 + 320 + 256 + 32 + 16
        );
    }

    #[test]
    fn shapes_broadcast_by_numpy_rules() {
        assert_eq!(broadcast_shapes(&[&[4, 1], &[1, 3], &[1, 1]]), Ok([4, 3]));
        assert_eq!(broadcast_shapes(&[&[0, 1], &[1, 3]]), Ok([0, 3]));
        assert_eq!(broadcast_shapes(&[&[1, 0], &[1, 1]]), Ok([1, 0]));
        assert_eq!(
            broadcast_shapes(&[&[4, 2], &[1, 1], &[1, 3]]),
            Err(([4, 2], [1, 3]))
        );
    }
}
