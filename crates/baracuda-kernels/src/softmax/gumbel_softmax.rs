//! Gumbel-softmax along one dim (`F.gumbel_softmax(logits, tau, hard,
//! dim)`): `y = softmax((logits + g) / tau)` with Gumbel noise `g` given
//! or drawn from Philox-4x32-10, and in the hard form the one-hot of its
//! argmax with the straight-through gradient.
//!
//! The math is at the top of `kernels/softmax/gumbel_softmax.cu`.

use core::marker::PhantomData;

use baracuda_driver::{Function, LaunchConfig, ModuleSpec, Stream};
use baracuda_kernels_types::{
    BackendKind, DevPtr, DevPtrMut, Element, ElementKind, Error, KernelSku, PlanPreference,
    Result, TensorMut, TensorRef, Workspace, MAX_RANK,
};

use crate::checks::{
    byte_span, check_dim, check_disjoint, check_views, float_dtype_code, invalid_descriptor,
    View,
};
use crate::kernel_sources;
use crate::launch::{grid_x, launch_params, padded};
use crate::plan::own_float_sku;
use crate::{Backward, Plan};

/// Where a Gumbel-softmax's noise comes from.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum GumbelNoise {
    /// A tensor of gumbels the caller gives (PyTorch's `gumbels`, `-log`
    /// of exponential draws): the output matches PyTorch's for the same
    /// gumbels.
    Given,
    /// Drawn on the device from Philox-4x32-10 keyed by a seed, the
    /// counter the element's row-major index and an offset
    /// ([`GumbelNoiseRef::Philox`]), then transformed as PyTorch's
    /// `-empty_like(logits).exponential_().log()` (not PyTorch's bits:
    /// its generator is another).
    Philox,
}

/// A Gumbel-softmax of a rank-`N` tensor along `dim`.
#[derive(Copy, Clone, Debug, PartialEq)]
pub struct GumbelSoftmaxDescriptor<const N: usize> {
    /// Element type of every tensor.
    pub element: ElementKind,
    /// Shape of the logits (and of every other tensor).
    pub shape: [usize; N],
    /// The dim the softmax runs along.
    pub dim: usize,
    /// The temperature: finite and > 0.
    pub tau: f64,
    /// The one-hot of the argmax (with the soft sample's gradient), or the
    /// soft sample.
    pub hard: bool,
    /// Where the noise comes from.
    pub noise: GumbelNoise,
}

impl<const N: usize> GumbelSoftmaxDescriptor<N> {
    /// The soft sample at temperature `tau` along the last dim, with given
    /// noise.
    pub fn new(element: ElementKind, shape: [usize; N], tau: f64) -> Self {
        GumbelSoftmaxDescriptor {
            element,
            shape,
            dim: N.saturating_sub(1),
            tau,
            hard: false,
            noise: GumbelNoise::Given,
        }
    }
    /// Run along `dim`.
    pub fn with_dim(mut self, dim: usize) -> Self {
        self.dim = dim;
        self
    }
    /// The hard (true) or soft sample.
    pub fn with_hard(mut self, hard: bool) -> Self {
        self.hard = hard;
        self
    }
    /// Take the noise from `noise`.
    pub fn with_noise(mut self, noise: GumbelNoise) -> Self {
        self.noise = noise;
        self
    }
}

/// The noise of a [`GumbelSoftmaxArgs`], the kind the descriptor names.
pub enum GumbelNoiseRef<'a, T, const N: usize> {
    /// The gumbels, of the plan's shape, any strides (0 = broadcast).
    Given(TensorRef<'a, T, N>),
    /// Philox-4x32-10 with key `seed`; `offset` is the counter's high half
    /// (a fresh offset, or seed, per draw gives fresh noise).
    Philox {
        /// The key.
        seed: u64,
        /// The counter's upper 64 bits (the lower are the element index).
        offset: u64,
    },
}

/// Arguments of [`GumbelSoftmaxPlan`]'s [`Plan::run`].
pub struct GumbelSoftmaxArgs<'a, T, const N: usize> {
    /// The logits, any strides (0 = broadcast).
    pub logits: TensorRef<'a, T, N>,
    /// The noise.
    pub noise: GumbelNoiseRef<'a, T, N>,
    /// The sample: soft, or hard (one-hot as PyTorch computes
    /// `y_hard - y_soft.detach() + y_soft`). Any non-overlapping strides.
    pub y: TensorMut<'a, T, N>,
    /// Hard: the soft sample, which the backward reads; soft: None (`y` is
    /// it).
    pub soft: Option<TensorMut<'a, T, N>>,
}

/// Arguments of [`GumbelSoftmaxPlan`]'s [`Backward::run_bw`].
pub struct GumbelSoftmaxBwArgs<'a, T, const N: usize> {
    /// The soft sample: the forward's `y` (soft) or its `soft` (hard).
    pub soft: TensorRef<'a, T, N>,
    /// Gradient of `y`.
    pub dy: TensorRef<'a, T, N>,
    /// Gradient of the logits; must not overlap `soft` or `dy`.
    pub dx: TensorMut<'a, T, N>,
}

/// `F.gumbel_softmax(logits, tau, hard, dim)` and its backward.
///
/// # Math
/// `z = (logits + g) / tau` (rounded to T after the add and after the
/// product with `1 / tau`, as PyTorch computes it), `soft = softmax(z)`;
/// soft: `y = soft`; hard: `y = onehot(argmax soft) - soft + soft` in T
/// (the first maximum on ties, NaN winning, as `torch.max`). Backward
/// (both forms, straight-through): `dx = soft (dy - sum(dy soft)) / tau`.
/// Philox noise: `g = -log(E)`, `E = -log(u)` stored in T, `u` uniform in
/// (0, 1] from Philox-4x32-10 (key `seed`, counter (element index / L,
/// `offset`), lane index mod L; L = 4, 2 on f64), PyTorch's transform and
/// its guard for `u` near 1; [`GumbelSoftmaxPlan::run_noise`] writes the
/// same gumbels.
/// # Shapes
/// Every tensor `desc.shape` (rank `1 <= N <= 8`), any extent (an empty
/// tensor writes nothing). No workspace.
/// # Layout
/// Any strides; logits, given noise, `soft` and `dy` may broadcast. A
/// group of threads per row, element loads (coalesced along a contiguous
/// dim), three passes forward and two backward (the rows come back from
/// L2). 64-bit offsets. Deterministic.
/// # Dtypes
/// f32, f64, f16, bf16 (f32 arithmetic, f64 in f64). Others:
/// `Unsupported`.
/// # Special values
/// As softmax: a row holding NaN or +inf, or only -inf, is NaN (hard: NaN
/// too).
/// # Errors
/// From `select`: `DtypeMismatch`, `Unsupported` (dtype, rank > 8),
/// `InvalidDescriptor` for `dim` past the rank or `tau` not finite and
/// positive, `PreferenceRejected`; the JIT's. From `run`: `ShapeMismatch`,
/// `ContextMismatch`, `InvalidArgument` for noise of the other kind
/// (`noise`), `soft` missing (hard) or given (soft), or an output
/// overlapping an input or the other output. From `run_bw` likewise for
/// `soft`, `dy`, `dx`.
pub struct GumbelSoftmaxPlan<T: Element, const N: usize> {
    desc: GumbelSoftmaxDescriptor<N>,
    sku: KernelSku,
    fw: Function,
    bw: Function,
    noise: Function,
    sm_count: u32,
    _t: PhantomData<T>,
}

const OP: &str = "gumbel_softmax";

/// The module of dtype code `dtype`.
pub(crate) fn spec(dtype: u32) -> ModuleSpec {
    ModuleSpec::new(&kernel_sources::GUMBEL_SOFTMAX).define("BARACUDA_DTYPE", dtype)
}

/// The checks `select` runs before it touches the GPU.
pub(crate) fn validate<T: Element, const N: usize>(
    desc: &GumbelSoftmaxDescriptor<N>,
) -> Result<u32> {
    let dtype = float_dtype_code::<T, N>(OP, desc.element, "gumbel_softmax takes")?;
    check_dim::<N>(OP, desc.dim)?;
    if !(desc.tau.is_finite() && desc.tau > 0.0) {
        return Err(invalid_descriptor(
            OP,
            "tau",
            desc.tau.to_string(),
            "not finite and positive",
        ));
    }
    Ok(dtype)
}

impl<T: Element, const N: usize> Plan for GumbelSoftmaxPlan<T, N> {
    type Descriptor = GumbelSoftmaxDescriptor<N>;
    type Args<'a> = GumbelSoftmaxArgs<'a, T, N>;

    fn select(stream: &Stream, desc: &Self::Descriptor, pref: &PlanPreference) -> Result<Self> {
        let dtype = validate::<T, N>(desc)?;
        pref.check_backend(OP, &[BackendKind::Baracuda])?;
        pref.check_workspace(OP, 0)?;
        let ctx = stream.context();
        let module = ctx.module(&spec(dtype))?;
        Ok(GumbelSoftmaxPlan {
            desc: *desc,
            sku: own_float_sku::<T>(
                stream,
                format!("gumbel_softmax.{}", if desc.hard { "hard" } else { "soft" }),
                "a thread group per row, three passes",
            ),
            fw: module.function("gumbel_softmax_fw")?,
            bw: module.function("gumbel_softmax_bw")?,
            noise: module.function("gumbel_noise")?,
            sm_count: ctx.device().sm_count,
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
        let shape = &self.desc.shape;
        let (x, y) = (&args.logits, &args.y);
        let mut views = vec![View::of("logits", shape, x), View::of_mut("y", shape, y)];
        let (g, seed, offset) = match (&args.noise, self.desc.noise) {
            (GumbelNoiseRef::Given(g), GumbelNoise::Given) => (Some(g), 0, 0),
            (GumbelNoiseRef::Philox { seed, offset }, GumbelNoise::Philox) => {
                (None, *seed, *offset)
            }
            _ => {
                return Err(Error::InvalidArgument {
                    op: OP,
                    arg: "noise",
                    reason: format!("not the descriptor's {:?} noise", self.desc.noise),
                })
            }
        };
        if let Some(g) = g {
            views.push(View::of("noise", shape, g));
        }
        match (&args.soft, self.desc.hard) {
            (Some(s), true) => views.push(View::of_mut("soft", shape, s)),
            (None, false) => {}
            (given, _) => {
                return Err(Error::InvalidArgument {
                    op: OP,
                    arg: "soft",
                    reason: if given.is_some() {
                        "given to a soft sample (y is the soft sample)".into()
                    } else {
                        "missing: the hard sample writes the soft one for the backward".into()
                    },
                })
            }
        }
        check_views(OP, stream, &views)?;
        let mut outputs = vec![byte_span("y", &y.as_const())];
        if let Some(s) = &args.soft {
            outputs.push(byte_span("soft", &s.as_const()));
        }
        let mut inputs = vec![byte_span("logits", x)];
        if let Some(g) = g {
            inputs.push(byte_span("noise", g));
        }
        check_disjoint(OP, &outputs, &inputs)?;
        let zero = [0usize; N];
        let (soft_ptr, soft_strides) = match &args.soft {
            Some(s) => (s.data().ptr(), *s.strides()),
            None => (DevPtrMut::NULL, zero),
        };
        let (g_ptr, g_strides) = match g {
            Some(g) => (g.data().ptr(), *g.strides()),
            None => (DevPtr::NULL, zero),
        };
        let rows = Rows {
            x: (x.data().ptr(), x.strides()),
            g: (g_ptr, &g_strides),
            out: (y.data().ptr(), y.strides()),
            soft: (soft_ptr, &soft_strides),
            seed,
            offset,
        };
        // SAFETY: every view was bounds-checked at construction and has
        // the plan's shape; the outputs overlap no input and each other.
        unsafe { self.launch_rows(stream, &self.fw, rows) }
    }
}

impl<T: Element, const N: usize> Backward for GumbelSoftmaxPlan<T, N> {
    type BwArgs<'a> = GumbelSoftmaxBwArgs<'a, T, N>;

    fn run_bw(
        &self,
        stream: &Stream,
        _workspace: Workspace<'_>,
        args: Self::BwArgs<'_>,
    ) -> Result<()> {
        let shape = &self.desc.shape;
        let (s, dy, dx) = (&args.soft, &args.dy, &args.dx);
        let views = [
            View::of("soft", shape, s),
            View::of("dy", shape, dy),
            View::of_mut("dx", shape, dx),
        ];
        check_views(OP, stream, &views)?;
        check_disjoint(
            OP,
            &[byte_span("dx", &dx.as_const())],
            &[byte_span("soft", s), byte_span("dy", dy)],
        )?;
        let zero = [0usize; N];
        let rows = Rows {
            x: (s.data().ptr(), s.strides()),
            g: (dy.data().ptr(), dy.strides()),
            out: (dx.data().ptr(), dx.strides()),
            soft: (DevPtrMut::NULL, &zero),
            seed: 0,
            offset: 0,
        };
        // SAFETY: every view was bounds-checked at construction and has
        // the plan's shape; dx overlaps neither input.
        unsafe { self.launch_rows(stream, &self.bw, rows) }
    }
}

impl<T: Element, const N: usize> GumbelSoftmaxPlan<T, N> {
    /// Write into `g` the gumbels the Philox forward draws with `seed` and
    /// `offset` (any plan of this shape and dtype, whatever its noise):
    /// reproduces a Philox run through the given-noise path, bit for bit.
    ///
    /// # Errors
    /// `ShapeMismatch` for a `g` of another shape, `ContextMismatch` for
    /// one on another context.
    pub fn run_noise(
        &self,
        stream: &Stream,
        seed: u64,
        offset: u64,
        g: TensorMut<'_, T, N>,
    ) -> Result<()> {
        let shape = &self.desc.shape;
        check_views(OP, stream, &[View::of_mut("g", shape, &g)])?;
        let total: usize = shape.iter().product();
        if total == 0 {
            return Ok(());
        }
        let p = GumbelParams {
            out: g.data().ptr(),
            rows: total as u64,
            n: 1,
            seed,
            offset,
            tau: 1.0,
            rank: N as u32,
            shape: padded(shape.iter().map(|&e| e as u64)),
            so: padded(g.strides().iter().map(|&s| s as i64)),
            ..GumbelParams::empty()
        };
        let cfg = LaunchConfig {
            grid: (grid_x(total.div_ceil(256).min(self.sm_count.max(1) as usize * 32)), 1, 1),
            block: (256, 1, 1),
            smem_bytes: 0,
        };
        // SAFETY: g was bounds-checked at construction and has the plan's
        // shape; the kernel writes exactly the offsets its strides give.
        unsafe { launch_params(stream, &self.noise, cfg, p) }
    }

    /// Enqueue `f` over every row.
    ///
    /// # Safety
    /// Every non-null operand must hold every element its strides reach
    /// over the plan's shape; the outputs must overlap no input and each
    /// other.
    unsafe fn launch_rows(&self, stream: &Stream, f: &Function, op: Rows<'_, T, N>) -> Result<()> {
        let dim = self.desc.dim;
        let shape = &self.desc.shape;
        let n = shape[dim];
        let outer: Vec<usize> = (0..N).filter(|&d| d != dim).collect();
        let rows: usize = outer.iter().map(|&d| shape[d]).product();
        if n == 0 || rows == 0 {
            return Ok(());
        }
        let group = group_of(n);
        let threads = group.max(256);
        let row_major = row_major(shape);
        let strides = |s: &[usize; N]| padded(outer.iter().map(|&d| s[d] as i64));
        let p = GumbelParams {
            x: op.x.0,
            g: op.g.0,
            out: op.out.0,
            soft: op.soft.0,
            rows: rows as u64,
            n: n as u64,
            seed: op.seed,
            offset: op.offset,
            tau: self.desc.tau,
            rank: outer.len() as u32,
            group: group as u32,
            hard: self.desc.hard as u32,
            philox: (self.desc.noise == GumbelNoise::Philox) as u32,
            shape: padded(outer.iter().map(|&d| shape[d] as u64)),
            sx: strides(op.x.1),
            sg: strides(op.g.1),
            so: strides(op.out.1),
            ss: strides(op.soft.1),
            sl: strides(&row_major),
            ax: op.x.1[dim] as i64,
            ag: op.g.1[dim] as i64,
            ao: op.out.1[dim] as i64,
            as_: op.soft.1[dim] as i64,
            al: row_major[dim] as i64,
        };
        let blocks = rows
            .div_ceil(threads / group)
            .min(self.sm_count.max(1) as usize * (2048 / threads).max(1) * 8);
        let cfg = LaunchConfig {
            grid: (grid_x(blocks), 1, 1),
            block: (threads as u32, 1, 1),
            smem_bytes: 0,
        };
        // SAFETY: forwarded from the caller's contract; the kernels reach
        // exactly the offsets the shape and strides give.
        unsafe { launch_params(stream, f, cfg, p) }
    }
}

/// Row-major strides of `shape`: the Philox counters are row-major
/// element indices.
pub(crate) fn row_major<const N: usize>(shape: &[usize; N]) -> [usize; N] {
    let mut s = [1usize; N];
    for d in (0..N.saturating_sub(1)).rev() {
        s[d] = s[d + 1] * shape[d + 1];
    }
    s
}

/// Threads per row: a power of two from 32 to 1024, about four elements
/// each (a [32768, 4096] forward: 1024 threads a row).
pub(crate) fn group_of(n: usize) -> usize {
    n.div_ceil(4).next_power_of_two().clamp(32, 1024)
}

/// A launch's operands: `x` (logits, or the backward's soft), `g` (given
/// noise, or the backward's dy), `out` (y or dx) and `soft` (hard forward).
struct Rows<'s, T, const N: usize> {
    x: (DevPtr<T>, &'s [usize; N]),
    g: (DevPtr<T>, &'s [usize; N]),
    out: (DevPtrMut<T>, &'s [usize; N]),
    soft: (DevPtrMut<T>, &'s [usize; N]),
    seed: u64,
    offset: u64,
}

/// `GumbelParams` of `gumbel_softmax.cu`, field for field.
#[repr(C)]
#[derive(Copy, Clone)]
struct GumbelParams<T> {
    x: DevPtr<T>,
    g: DevPtr<T>,
    out: DevPtrMut<T>,
    soft: DevPtrMut<T>,
    rows: u64,
    n: u64,
    seed: u64,
    offset: u64,
    tau: f64,
    rank: u32,
    group: u32,
    hard: u32,
    philox: u32,
    shape: [u64; MAX_RANK],
    sx: [i64; MAX_RANK],
    sg: [i64; MAX_RANK],
    so: [i64; MAX_RANK],
    ss: [i64; MAX_RANK],
    sl: [i64; MAX_RANK],
    ax: i64,
    ag: i64,
    ao: i64,
    as_: i64,
    al: i64,
}

impl<T> GumbelParams<T> {
    /// Every pointer null, every count and stride 0.
    fn empty() -> Self {
        GumbelParams {
            x: DevPtr::NULL,
            g: DevPtr::NULL,
            out: DevPtrMut::NULL,
            soft: DevPtrMut::NULL,
            rows: 0,
            n: 0,
            seed: 0,
            offset: 0,
            tau: 1.0,
            rank: 0,
            group: 0,
            hard: 0,
            philox: 0,
            shape: [0; MAX_RANK],
            sx: [0; MAX_RANK],
            sg: [0; MAX_RANK],
            so: [0; MAX_RANK],
            ss: [0; MAX_RANK],
            sl: [0; MAX_RANK],
            ax: 0,
            ag: 0,
            ao: 0,
            as_: 0,
            al: 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn params_layout_matches_cuda() {
        // 4 pointers, 4 u64, an f64, 4 u32, 6 arrays of 8, 5 i64
        assert_eq!(
            core::mem::size_of::<GumbelParams<f32>>(),
            32 + 32 + 8 + 16 + 6 * 64 + 40
        );
    }

    #[test]
    fn descriptors_are_checked() {
        let desc = GumbelSoftmaxDescriptor::new(ElementKind::F32, [4, 10], 0.5);
        assert_eq!(validate::<f32, 2>(&desc).ok(), Some(0));
        for tau in [0.0, -1.0, f64::NAN, f64::INFINITY] {
            let bad = GumbelSoftmaxDescriptor { tau, ..desc };
            assert!(matches!(
                validate::<f32, 2>(&bad),
                Err(Error::InvalidDescriptor { field: "tau", .. })
            ));
        }
        assert!(matches!(
            validate::<f32, 2>(&desc.with_dim(2)),
            Err(Error::InvalidDescriptor { field: "dim", .. })
        ));
        let i32_desc = GumbelSoftmaxDescriptor::new(ElementKind::I32, [4, 10], 1.0);
        assert!(matches!(
            validate::<i32, 2>(&i32_desc),
            Err(Error::Unsupported { .. })
        ));
        assert!(matches!(
            validate::<f64, 2>(&desc),
            Err(Error::DtypeMismatch { .. })
        ));
    }

    #[test]
    fn groups_follow_the_extent() {
        assert_eq!(group_of(1), 32);
        assert_eq!(group_of(200), 64);
        assert_eq!(group_of(4096), 1024);
        assert_eq!(group_of(128_256), 1024);
    }
}
