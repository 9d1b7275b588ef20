//! Shared launch machinery of the elementwise family: axis collapsing, the
//! strided-kernel parameter block, and the contiguous/strided dispatch.

use baracuda_driver::{Function, LaunchArgs, LaunchConfig, ModuleSpec, Stream};
use baracuda_kernels_types::{
    BackendKind, DevPtr, DevPtrMut, Element, ElementKind, Error, PlanPreference, Result, Shape,
    TensorMut, TensorRef, MAX_RANK,
};

use crate::checks::{
    byte_span, check_alias, check_ctx, check_disjoint, check_shape, float_dtype_code, Extent,
};

/// Threads per block of the strided and reduction kernels, and the most
/// any elementwise kernel takes (`__launch_bounds__(256)` in the sources).
pub(crate) const THREADS: u32 = 256;

/// Launch shape of a contiguous kernel: threads per block and 16-byte
/// vectors per thread (`TILE_UNROLL` in pointwise.cuh).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) struct ContigShape {
    pub threads: u32,
    pub tile: usize,
}

/// The contiguous launch shape for an op on `dtype` (a `BARACUDA_DTYPE`
/// value), from the sweep in `docs/perf-notes/experiments/elementwise_math.cu` (H200,
/// 2^28 elements). Ops whose math costs about as much as their traffic
/// (`transcendental`) run 128-thread blocks, which keep more loads in flight
/// per SM while other warps compute: f32 gelu-erf 0.509 ms at 128 threads
/// against 0.515 at 256; on 16-bit types (8 elements per vector) also two
/// vectors per thread: bf16 gelu-erf 0.259 ms against 0.268 (256 x 2) and
/// 0.282 (128 x 1). Memory-bound ops keep 256 x 1 (bf16 relu and add
/// measured no faster shape in that sweep), except binary forwards on
/// 16-bit types (`binary::binary_fw_shape`).
pub(crate) fn contig_shape(transcendental: bool, dtype: u32) -> ContigShape {
    match (transcendental, dtype) {
        (true, 0) => ContigShape {
            threads: 128,
            tile: 1,
        },
        (true, 2 | 3) => ContigShape {
            threads: 128,
            tile: 2,
        },
        _ => ContigShape {
            threads: THREADS,
            tile: 1,
        },
    }
}

/// Position of `op`'s variant in `all`, whatever its parameters: the
/// kernel index of an op enum whose variants carry parameters.
pub(crate) fn variant_index<T>(all: &[T], op: &T) -> u32 {
    let d = core::mem::discriminant(op);
    all.iter()
        .position(|o| core::mem::discriminant(o) == d)
        .unwrap_or(0) as u32
}

/// `PartialEq`, `Eq` and `Hash` of an op enum through its method `$key`:
/// what identifies the op, its kind and its parameters as bits (so that a
/// NaN parameter equals itself).
macro_rules! eq_by_key {
    ($t:ty, $key:ident) => {
        impl PartialEq for $t {
            fn eq(&self, other: &Self) -> bool {
                self.$key() == other.$key()
            }
        }

        impl Eq for $t {}

        impl core::hash::Hash for $t {
            fn hash<H: core::hash::Hasher>(&self, state: &mut H) {
                self.$key().hash(state);
            }
        }
    };
}
pub(crate) use eq_by_key;

/// `run_in_place_a` and `run_in_place_b` of the broadcasting binary plan
/// `$plan` (whose output element type is its inputs' `T`), through its
/// `shapes()` and `unsafe fn forward(stream, out, a, b)` and the module's
/// `OP`.
macro_rules! binary_in_place_forms {
    ($plan:ident) => {
        /// `a = f(a, b)` in place: [`Plan::run`] with `out` the same view
        /// as `a`, which must have the output's shape.
        ///
        /// # Errors
        /// As [`Plan::run`]; `InvalidArgument` naming `a` when `a` is
        /// broadcast, or `b` when `b` overlaps `a` other than as the same
        /// view.
        pub fn run_in_place_a(
            &self,
            stream: &Stream,
            _workspace: Workspace<'_>,
            a: TensorMut<'_, T, N>,
            b: TensorRef<'_, T, N>,
        ) -> Result<()> {
            self.in_place(stream, true, a, b)
        }

        #[doc = concat!(
            "`b = f(a, b)` in place: [`Plan::run`] with `out` the same view as\n",
            "`b`, which must have the output's shape.\n\n",
            "# Errors\n",
            "As [`", stringify!($plan), "::run_in_place_a`], with the roles of `a` and `b`\n",
            "exchanged."
        )]
        pub fn run_in_place_b(
            &self,
            stream: &Stream,
            _workspace: Workspace<'_>,
            a: TensorRef<'_, T, N>,
            b: TensorMut<'_, T, N>,
        ) -> Result<()> {
            self.in_place(stream, false, b, a)
        }

        /// `run_in_place_a` (`into_a`) or `run_in_place_b`: `inout` is the
        /// input written over, `other` the other input.
        fn in_place(
            &self,
            stream: &Stream,
            into_a: bool,
            inout: TensorMut<'_, T, N>,
            other: TensorRef<'_, T, N>,
        ) -> Result<()> {
            let shapes = self.shapes();
            let [a, b] = binary_in_place_operands(OP, stream, shapes, into_a, &inout, &other)?;
            // SAFETY: views bounds-checked at construction, shapes checked
            // above; out is the input it is written over, and disjoint from
            // the other input or that input itself.
            unsafe { self.forward(stream, (inout.data().ptr(), inout.strides()), &a, &b) }
        }
    };
}
pub(crate) use binary_in_place_forms;

/// `run_in_place` of the unary plan whose output element type is its
/// input's `T`, through its `desc.shape` and `unsafe fn forward(stream, y,
/// x)` and the module's `OP`.
macro_rules! unary_in_place_form {
    () => {
        /// `xy = f(xy)` in place: [`Plan::run`] with `y` the same view as
        /// `x`.
        ///
        /// # Errors
        /// As [`Plan::run`], naming `xy`.
        pub fn run_in_place(
            &self,
            stream: &Stream,
            _workspace: Workspace<'_>,
            xy: TensorMut<'_, T, N>,
        ) -> Result<()> {
            let shape = &self.desc.shape;
            check_operand(OP, "xy", stream, shape, xy.shape(), xy.data().ctx_id())?;
            let (ptr, strides) = (xy.data().ptr(), xy.strides());
            // SAFETY: the view was bounds-checked at construction and
            // matches the plan's shape; output and input are one view.
            unsafe { self.forward(stream, (ptr, strides), (ptr.as_const(), strides)) }
        }
    };
}
pub(crate) use unary_in_place_form;

/// Outputs and inputs a strided kernel takes at most (`MAX_OUTS`,
/// `MAX_INS` in strided.cuh).
pub(crate) const MAX_OUTS: usize = 3;
pub(crate) const MAX_INS: usize = 4;

/// `StridedArgs` of `kernels/common/strided.cuh`, field for field (the
/// kernels take the operands' addresses untyped).
#[repr(C)]
#[derive(Copy, Clone, Debug)]
pub(crate) struct StridedArgs {
    pub n: u64,
    pub rank: u32,
    pub pad: u32,
    pub shape: [u64; MAX_RANK],
    pub out_stride: [[i64; MAX_RANK]; MAX_OUTS],
    pub in_stride: [[i64; MAX_RANK]; MAX_INS],
    pub out: [DevPtrMut<u8>; MAX_OUTS],
    pub inp: [DevPtr<u8>; MAX_INS],
}

/// An output of a pointwise map: where it is written, and its element
/// strides over the map's shape. A null address is an output not written.
pub(crate) type Out<'s, T> = (DevPtrMut<T>, &'s [usize]);
/// An input of a pointwise map: where it is read, and its element strides.
pub(crate) type In<'s, T> = (DevPtr<T>, &'s [usize]);

/// The checks every elementwise `select` starts with: the descriptor's
/// element type is `T`, a supported dtype (its `BARACUDA_DTYPE` value is
/// returned), rank `N <= 8`, and the preference allows our kernels.
///
/// # Errors
/// `DtypeMismatch`, `Unsupported`, `PreferenceRejected`.
pub(crate) fn check_select<T: Element, const N: usize>(
    op: &'static str,
    element: ElementKind,
    pref: &PlanPreference,
) -> Result<u32> {
    let dt = float_dtype_code::<T, N>(op, element, "elementwise kernels take")?;
    pref.check_backend(op, &[BackendKind::Baracuda])?;
    Ok(dt)
}

/// One operand of `run`: its shape is `expected` and it lives on
/// `stream`'s context.
///
/// # Errors
/// `ShapeMismatch` or `ContextMismatch` naming `arg`.
pub(crate) fn check_operand<const N: usize>(
    op: &'static str,
    arg: &'static str,
    stream: &Stream,
    expected: &[usize; N],
    shape: &[usize; N],
    ctx: usize,
) -> Result<()> {
    check_shape(op, arg, expected, shape)?;
    check_ctx(op, arg, stream, ctx)
}

/// The operands of a broadcasting binary map's forward checked against
/// the plan's shapes `[a, b, out]`: each its shape (`ShapeMismatch`) and on
/// `stream`'s context (`ContextMismatch`); `out` sharing no memory with `a`
/// or `b` (`InvalidArgument` naming `out`), except as the very same view
/// when its element type is theirs (in place). Returns `a` and `b` as views
/// of the output's shape.
pub(crate) fn binary_operands<'v, T: Element, O: Element, const N: usize>(
    op: &'static str,
    stream: &Stream,
    shapes: [&[usize; N]; 3],
    a: &TensorRef<'v, T, N>,
    b: &TensorRef<'v, T, N>,
    out: &TensorMut<'_, O, N>,
) -> Result<[TensorRef<'v, T, N>; 2]> {
    let [a_shape, b_shape, out_shape] = shapes;
    check_operand(op, "a", stream, a_shape, a.shape(), a.data().ctx_id())?;
    check_operand(op, "b", stream, b_shape, b.shape(), b.data().ctx_id())?;
    check_operand(op, "out", stream, out_shape, out.shape(), out.data().ctx_id())?;
    let a = a.broadcast_to(*out_shape)?;
    let b = b.broadcast_to(*out_shape)?;
    check_out_aliases(op, ("out", out), &[("a", &a), ("b", &b)])?;
    Ok([a, b])
}

/// `InvalidArgument` naming the output `out` (`(name, view)`) when it
/// shares memory with one of the named `inputs` (views of its shape),
/// except as the very same view when its element type is theirs (in
/// place: one thread reads each element before it writes it).
pub(crate) fn check_out_aliases<T: Element, O: Element, const N: usize>(
    op: &'static str,
    (arg, out): (&'static str, &TensorMut<'_, O, N>),
    inputs: &[(&'static str, &TensorRef<'_, T, N>)],
) -> Result<()> {
    if O::KIND == T::KIND {
        let ptr = out.data().ptr().as_const().cast::<T>();
        let out_ext = Extent::new(arg, ptr, out.shape(), out.strides());
        for (name, input) in inputs {
            check_alias(op, &out_ext, &Extent::of(name, input), true)?;
        }
        Ok(())
    } else {
        let spans: Vec<_> = inputs.iter().map(|(name, v)| byte_span(name, v)).collect();
        check_disjoint(op, &[byte_span(arg, &out.as_const())], &spans)
    }
}

/// The operands of a binary map's forward written over input `a`
/// (`into_a`) or `b`, `inout`, checked against the plan's shapes
/// `[a, b, out]`: that input has the output's shape (`InvalidArgument`
/// naming it otherwise), shapes and contexts, and the other input
/// (`other`) overlapping `inout` only as the same view. Returns `a` and `b`
/// as views of the output's shape.
pub(crate) fn binary_in_place_operands<'v, T: Element, const N: usize>(
    op: &'static str,
    stream: &Stream,
    shapes: [&[usize; N]; 3],
    into_a: bool,
    inout: &'v TensorMut<'_, T, N>,
    other: &TensorRef<'v, T, N>,
) -> Result<[TensorRef<'v, T, N>; 2]> {
    let [a_shape, b_shape, out_shape] = shapes;
    let ((io_arg, io_shape), (other_arg, other_shape)) = if into_a {
        (("a", a_shape), ("b", b_shape))
    } else {
        (("b", b_shape), ("a", a_shape))
    };
    if io_shape != out_shape {
        return Err(Error::InvalidArgument {
            op,
            arg: io_arg,
            reason: format!(
                "{io_arg} of shape {} is broadcast to the output shape {}, so it cannot hold \
                 the output",
                Shape::from(&io_shape[..]),
                Shape::from(&out_shape[..])
            ),
        });
    }
    let ctx = inout.data().ctx_id();
    check_operand(op, io_arg, stream, io_shape, inout.shape(), ctx)?;
    let ctx = other.data().ctx_id();
    check_operand(op, other_arg, stream, other_shape, other.shape(), ctx)?;
    let other = other.broadcast_to(*out_shape)?;
    let io_ext = Extent::of_mut(io_arg, inout);
    check_alias(op, &io_ext, &Extent::of(other_arg, &other), true)?;
    let io = inout.as_const();
    Ok(if into_a { [io, other] } else { [other, io] })
}

/// The module of one op of an elementwise source for one dtype: a plan
/// compiles only the kernels it runs, which keeps cold starts short.
pub(crate) fn spec(
    source: &'static baracuda_driver::KernelSource,
    dtype: u32,
    op: u32,
    shape: ContigShape,
) -> ModuleSpec {
    ModuleSpec::new(source)
        .define("BARACUDA_DTYPE", dtype)
        .define("BARACUDA_OP", op)
        .define("TILE_UNROLL", shape.tile)
}

/// Collapse a shared index space over several operands: drop extent-1
/// axes, order axes by the first operand's stride (outermost first, so the
/// output is walked in memory order), and merge neighbours that are
/// contiguous in every operand.
///
/// Returns the collapsed shape and, per operand, its strides.
pub(crate) fn collapse(shape: &[usize], strides: &[&[usize]]) -> (Vec<usize>, Vec<Vec<usize>>) {
    let mut axes: Vec<usize> = (0..shape.len()).filter(|&d| shape[d] != 1).collect();
    if let Some(first) = strides.first() {
        axes.sort_by(|&x, &y| first[y].cmp(&first[x]));
    }
    let mut out_shape: Vec<usize> = Vec::with_capacity(axes.len());
    let mut out_strides: Vec<Vec<usize>> = vec![Vec::with_capacity(axes.len()); strides.len()];
    for &d in &axes {
        let mergeable = !out_shape.is_empty()
            && strides.iter().enumerate().all(|(k, s)| {
                let prev = *out_strides[k].last().unwrap_or(&0);
                prev == s[d] * shape[d]
            });
        if mergeable {
            let last = out_shape.len() - 1;
            out_shape[last] *= shape[d];
            for (k, s) in strides.iter().enumerate() {
                out_strides[k][last] = s[d];
            }
        } else {
            out_shape.push(shape[d]);
            for (k, s) in strides.iter().enumerate() {
                out_strides[k].push(s[d]);
            }
        }
    }
    (out_shape, out_strides)
}

/// The three kernels of one pointwise map: contiguous (16-byte vectors),
/// strided with a u32 linear index, strided with a u64 linear index.
#[derive(Clone, Debug)]
pub(crate) struct MapKernels {
    contig: Function,
    strided32: Function,
    strided64: Function,
    /// Blocks that fit on the device at once: the strided kernels'
    /// grid-stride loops never launch more.
    grid_cap: u32,
    /// Launch shape of the contiguous kernel (its `TILE_UNROLL`).
    shape: ContigShape,
    /// The tiled kernel of a one-input map (`typed_tiled` in
    /// typed_map.cuh) and the blocks of it that fit at once, where the
    /// map has one.
    tiled: Option<(Function, u32)>,
}

impl MapKernels {
    /// Load `<prefix>_contig_<name>`, `<prefix>_strided32_<name>` and
    /// `<prefix>_strided64_<name>` from `spec`, built for `shape`.
    pub(crate) fn load(
        stream: &Stream,
        spec: &ModuleSpec,
        prefix: &str,
        name: &str,
        shape: ContigShape,
    ) -> Result<Self> {
        let names = ["contig", "strided32", "strided64"].map(|k| format!("{prefix}_{k}_{name}"));
        Self::load_named(stream, spec, names.each_ref().map(String::as_str), shape)
    }

    /// Load the contiguous, strided32 and strided64 kernels named `names`
    /// from `spec`, built for `shape`.
    pub(crate) fn load_named(
        stream: &Stream,
        spec: &ModuleSpec,
        names: [&str; 3],
        shape: ContigShape,
    ) -> Result<Self> {
        let module = stream.context().module(spec)?;
        let contig = module.function(names[0])?;
        let strided32 = module.function(names[1])?;
        let strided64 = module.function(names[2])?;
        let grid_cap = crate::launch::resident_blocks(stream, &strided32, THREADS)?;
        Ok(MapKernels {
            contig,
            strided32,
            strided64,
            grid_cap,
            shape,
            tiled: None,
        })
    }

    /// With `name` of `spec`, the map's `typed_tiled` kernel, which runs
    /// where the input's unit-stride dim is not the output's
    /// ([`TiledArgs::new`] says when).
    pub(crate) fn with_tiled(mut self, stream: &Stream, spec: &ModuleSpec, name: &str) -> Result<Self> {
        let f = stream.context().module(spec)?.function(name)?;
        let cap = crate::launch::resident_blocks(stream, &f, THREADS)?;
        self.tiled = Some((f, cap));
        Ok(self)
    }

    /// Launch over `shape` with the kernels' outputs (of `O`) and inputs
    /// (of `I`), and `tail` pushing the kernels' scalar parameters after the
    /// contiguous kernel's `n` and after the strided kernels'
    /// `StridedArgs`. When every written or read operand is contiguous and
    /// 16-byte aligned the contiguous kernel runs, taking the inputs, the
    /// outputs and then `n`, a 16-byte vector of the narrower type per
    /// thread and tile. Errors name `op`.
    ///
    /// # Safety
    /// Each non-null address must hold every element its strides reach over
    /// `shape` (checked by the views the plan took), the outputs and inputs
    /// must be the kernels' in number and order, an output may share
    /// memory with an input only as the same view, and `tail` must push
    /// what the kernels take.
    pub(crate) unsafe fn launch_with<I: Element, O: Element>(
        &self,
        op: &'static str,
        stream: &Stream,
        shape: &[usize],
        outs: &[Out<'_, O>],
        ins: &[In<'_, I>],
        tail: impl Fn(&mut LaunchArgs) -> Result<()>,
    ) -> Result<()> {
        let n: usize = shape.iter().product();
        if n == 0 {
            return Ok(());
        }
        if outs.len() > MAX_OUTS || ins.len() > MAX_INS {
            return Err(Error::InvalidArgument {
                op,
                arg: "operands",
                reason: format!("{} outputs and {} inputs", outs.len(), ins.len()),
            });
        }
        // Operands by address (0 = absent) and strides, outputs first: the
        // first output orders the collapsed axes.
        let ops: Vec<(u64, &[usize])> = outs
            .iter()
            .map(|(p, s)| (p.addr(), *s))
            .chain(ins.iter().map(|(p, s)| (p.addr(), *s)))
            .collect();
        let strides: Vec<&[usize]> = ops.iter().map(|(_, s)| *s).collect();
        let (cshape, cstrides) = collapse(shape, &strides);
        let contiguous = cstrides
            .iter()
            .zip(&ops)
            .all(|(s, (addr, _))| *addr == 0 || (s.iter().all(|&x| x == 1) && addr % 16 == 0))
            && cshape.len() <= 1;
        if contiguous {
            // One tile of threads * tile vectors per block, one pass.
            let vec = 16 / std::mem::size_of::<I>().min(std::mem::size_of::<O>());
            let tile = self.shape.threads as usize * self.shape.tile;
            let blocks = (n / vec).div_ceil(tile).max(1);
            if blocks > i32::MAX as usize {
                return Err(Error::Unsupported {
                    op,
                    what: format!("{n} elements exceed one launch of 2^31 - 1 blocks"),
                });
            }
            let blocks = blocks as u32;
            let mut args = LaunchArgs::new();
            for (p, _) in ins {
                args.push(*p)?;
            }
            for (p, _) in outs {
                args.push(*p)?;
            }
            args.push(n as u64)?;
            tail(&mut args)?;
            // SAFETY: forwarded from the caller's contract.
            return unsafe {
                self.contig.launch(
                    stream,
                    LaunchConfig::linear(blocks, self.shape.threads),
                    &mut args,
                )
            };
        }
        if let (Some((f, cap)), [(y, _)], [(x, _)]) = (&self.tiled, outs, ins) {
            let (ys, xs) = (&cstrides[0], &cstrides[1]);
            let (ysize, xsize) = (std::mem::size_of::<O>(), std::mem::size_of::<I>());
            if let Some(p) = TiledArgs::new(&cshape, (y.addr(), ysize, ys), (x.addr(), xsize, xs)) {
                let blocks = p.tiles.clamp(1, u64::from(*cap)) as u32;
                let mut args = LaunchArgs::new();
                args.push(p)?;
                tail(&mut args)?;
                // SAFETY: forwarded from the caller's contract; the kernel
                // reaches exactly the elements of the collapsed shape.
                return unsafe { f.launch(stream, LaunchConfig::linear(blocks, THREADS), &mut args) };
            }
        }
        let mut p = StridedArgs {
            n: n as u64,
            rank: cshape.len() as u32,
            pad: 0,
            shape: [1; MAX_RANK],
            out_stride: [[0; MAX_RANK]; MAX_OUTS],
            in_stride: [[0; MAX_RANK]; MAX_INS],
            out: [DevPtrMut::NULL; MAX_OUTS],
            inp: [DevPtr::NULL; MAX_INS],
        };
        for (d, &e) in cshape.iter().enumerate() {
            p.shape[d] = e as u64;
        }
        let (out_strides, in_strides) = cstrides.split_at(outs.len());
        for (k, (ptr, _)) in outs.iter().enumerate() {
            p.out[k] = ptr.cast();
            fill_strides(&mut p.out_stride[k], &out_strides[k]);
        }
        for (k, (ptr, _)) in ins.iter().enumerate() {
            p.inp[k] = ptr.cast();
            fill_strides(&mut p.in_stride[k], &in_strides[k]);
        }
        let blocks = n
            .div_ceil(THREADS as usize)
            .clamp(1, self.grid_cap as usize) as u32;
        let f = if n <= u32::MAX as usize {
            &self.strided32
        } else {
            &self.strided64
        };
        let mut args = LaunchArgs::new();
        args.push(p)?;
        tail(&mut args)?;
        // SAFETY: forwarded from the caller's contract.
        unsafe { f.launch(stream, LaunchConfig::linear(blocks, THREADS), &mut args) }
    }
}

/// `TiledArgs` of `kernels/common/typed_map.cuh`, field for field: a map
/// of one input over tiles of the output's unit-stride dim `a` and the
/// input's `b`, every other dim a batch dim.
#[repr(C)]
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) struct TiledArgs {
    pub inp: u64,
    pub out: u64,
    pub na: u64,
    pub nb: u64,
    pub in_sa: i64,
    pub out_sb: i64,
    pub tiles_a: u64,
    pub tiles_b: u64,
    pub tiles: u64,
    pub rest: u32,
    pub vec: u32,
    pub shape: [u64; MAX_RANK - 2],
    pub in_s: [i64; MAX_RANK - 2],
    pub out_s: [i64; MAX_RANK - 2],
}

impl TiledArgs {
    /// Edge of a tile in elements (`TILE_T`).
    pub const TILE: usize = 64;
    /// The least extent of `a` and of `b` that takes tiles: below it most
    /// of a tile would be idle, and the strided kernel does as well.
    pub const MIN_EXTENT: usize = 16;

    /// The tiled launch over the collapsed `shape` (output axes, its
    /// unit-stride axis last) of the output `y` and the input `x`, each
    /// `(address, element bytes, strides)`; None where it does not apply:
    /// the output's last axis is not unit-stride, the input has no other
    /// unit-stride axis, or either spans fewer than
    /// [`MIN_EXTENT`](Self::MIN_EXTENT) elements. 16-byte vectors are
    /// allowed on a side (bit 0 x, bit 1 y) whose address and other
    /// strides keep every vector of the tiles aligned.
    pub fn new(
        shape: &[usize],
        (y, ysize, ys): (u64, usize, &[usize]),
        (x, xsize, xs): (u64, usize, &[usize]),
    ) -> Option<Self> {
        let r = shape.len();
        if r < 2 || y == 0 {
            return None;
        }
        let a = r - 1;
        if ys[a] != 1 || xs[a] == 1 {
            return None;
        }
        let b = (0..a).filter(|&d| xs[d] == 1).max_by_key(|&d| shape[d])?;
        if shape[a] < Self::MIN_EXTENT || shape[b] < Self::MIN_EXTENT {
            return None;
        }
        let rest: Vec<usize> = (0..a).filter(|&d| d != b).collect();
        let vectors = |addr: u64, size: usize, strides: &[usize], unit: usize| {
            addr % 16 == 0 && (0..r).all(|d| d == unit || (strides[d] * size) % 16 == 0)
        };
        let tiles_a = shape[a].div_ceil(Self::TILE) as u64;
        let tiles_b = shape[b].div_ceil(Self::TILE) as u64;
        let batch: usize = rest.iter().map(|&d| shape[d]).product();
        let mut p = TiledArgs {
            inp: x,
            out: y,
            na: shape[a] as u64,
            nb: shape[b] as u64,
            in_sa: xs[a] as i64,
            out_sb: ys[b] as i64,
            tiles_a,
            tiles_b,
            tiles: tiles_a * tiles_b * batch as u64,
            rest: rest.len() as u32,
            vec: u32::from(vectors(x, xsize, xs, b)) | u32::from(vectors(y, ysize, ys, a)) << 1,
            shape: [1; MAX_RANK - 2],
            in_s: [0; MAX_RANK - 2],
            out_s: [0; MAX_RANK - 2],
        };
        for (k, &d) in rest.iter().enumerate() {
            p.shape[k] = shape[d] as u64;
            p.in_s[k] = xs[d] as i64;
            p.out_s[k] = ys[d] as i64;
        }
        Some(p)
    }
}

/// Copy collapsed element strides into a kernel's fixed-rank stride row.
fn fill_strides(row: &mut [i64; MAX_RANK], strides: &[usize]) {
    for (d, &s) in strides.iter().enumerate() {
        row[d] = s as i64;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tiled_args_layout_matches_cuda() {
        // 9 u64/i64, 2 u32, 3 x [u64; 6]
        assert_eq!(core::mem::size_of::<TiledArgs>(), 72 + 8 + 144);
    }

    #[test]
    fn tiled_args_take_permutes_that_move_the_unit_stride_dim() {
        // bf16 [64, 4096, 4096] transposed in its last two dims, as
        // collapse orders it (the output's axes, its unit stride last)
        let shape = [64, 4096, 4096];
        let (ys, xs) = ([4096 * 4096, 4096, 1], [4096 * 4096, 1, 4096]);
        let p = TiledArgs::new(&shape, (256, 2, &ys), (512, 2, &xs)).unwrap();
        assert_eq!((p.na, p.nb, p.in_sa, p.out_sb), (4096, 4096, 4096, 4096));
        assert_eq!((p.tiles_a, p.tiles_b, p.tiles), (64, 64, 64 * 64 * 64));
        assert_eq!((p.rest, p.shape[0], p.in_s[0], p.out_s[0]), (1, 64, 1 << 24, 1 << 24));
        assert_eq!(p.vec, 3);
        // an address off the 16-byte grid, or a stride off 16 bytes,
        // drops that side's vectors only
        assert_eq!(TiledArgs::new(&shape, (256, 2, &ys), (514, 2, &xs)).unwrap().vec, 2);
        let odd = [4096 * 4097, 4097, 1];
        assert_eq!(TiledArgs::new(&shape, (256, 2, &odd), (512, 2, &xs)).unwrap().vec, 1);
        // 1-byte elements: strides of 16 keep vectors, of 8 do not
        let (y1, x1) = ([4096 * 4096, 4096, 1], [4096 * 4096, 1, 4104]);
        assert_eq!(TiledArgs::new(&shape, (16, 1, &y1), (32, 1, &x1)).unwrap().vec, 2);
        // not a permute of the unit-stride dim, a strided output, or a
        // dim too short: the strided kernel
        assert!(TiledArgs::new(&shape, (256, 2, &ys), (512, 2, &ys)).is_none());
        assert!(TiledArgs::new(&shape, (256, 2, &[1 << 25, 8192, 2]), (512, 2, &xs)).is_none());
        let thin = [64, 4096, 8];
        assert!(TiledArgs::new(&thin, (256, 2, &[32768, 8, 1]), (512, 2, &[32768, 1, 4096])).is_none());
        // rank 1 never
        assert!(TiledArgs::new(&[100], (256, 2, &[1]), (512, 2, &[2])).is_none());
    }

    #[test]
    fn collapse_merges_contiguous_axes() {
        let (s, st) = collapse(&[2, 3, 4], &[&[12, 4, 1], &[12, 4, 1]]);
        assert_eq!(s, vec![24]);
        assert_eq!(st, vec![vec![1], vec![1]]);
    }

    #[test]
    fn collapse_keeps_broadcast_and_drops_ones() {
        // b broadcast along axis 0
        let (s, st) = collapse(&[5, 1, 4], &[&[4, 4, 1], &[0, 0, 1]]);
        assert_eq!(s, vec![5, 4]);
        assert_eq!(st, vec![vec![4, 1], vec![0, 1]]);
    }

    #[test]
    fn collapse_orders_by_output_stride() {
        // a transposed output: walk it in memory order
        let (s, st) = collapse(&[3, 4], &[&[1, 3], &[4, 1]]);
        assert_eq!(s, vec![4, 3]);
        assert_eq!(st, vec![vec![3, 1], vec![1, 4]]);
    }

    #[test]
    fn select_checks_return_their_variants() {
        let pref = PlanPreference::default();
        assert_eq!(check_select::<f32, 2>("t", ElementKind::F32, &pref), Ok(0));
        assert!(matches!(
            check_select::<f32, 2>("t", ElementKind::F16, &pref),
            Err(Error::DtypeMismatch { op: "t", .. })
        ));
        assert!(matches!(
            check_select::<i32, 2>("t", ElementKind::I32, &pref),
            Err(Error::Unsupported { op: "t", .. })
        ));
        assert!(matches!(
            check_select::<f32, 9>("t", ElementKind::F32, &pref),
            Err(Error::Unsupported { op: "t", .. })
        ));
        let cudnn = pref.with_backend(BackendKind::Cudnn);
        assert!(matches!(
            check_select::<f32, 2>("t", ElementKind::F32, &cudnn),
            Err(Error::PreferenceRejected { field: "backend", .. })
        ));
    }

    #[test]
    fn params_layout_matches_cuda() {
        // 8 + 4 + 4 + 64 + 3*64 + 4*64 + 3*8 + 4*8
        assert_eq!(std::mem::size_of::<StridedArgs>(), 584);
    }
}
