//! Elementwise ops with exact results and no gradient: comparisons,
//! `isclose`, logical and bitwise ops, shifts, `gcd` and `lcm` of two
//! broadcast tensors ([`BinaryLogicPlan`]), and the predicates `isnan` to
//! `signbit`, `logical_not` and `bitwise_not` of one ([`UnaryLogicPlan`]).
//!
//! Both plans are generic over the input element type `T` and the output
//! type `O`: `bool` for the comparisons, the logical ops and the
//! predicates, `T` itself for the bitwise ops, shifts, `gcd` and `lcm`
//! ([`BinaryLogicOp::output`], [`UnaryLogicOp::output`]). The math of each
//! op is in its doc and at the top of `kernels/elementwise/logic.cu`; every
//! op follows PyTorch's CUDA kernel of the same name, inputs of one dtype
//! (no type promotion).

use core::marker::PhantomData;

use baracuda_driver::{ModuleSpec, Stream};
use baracuda_kernels_types::{
    BackendKind, DevPtrMut, Element, ElementKind, Error, KernelSku, MathPrecision, PlanPreference,
    PrecisionGuarantee, Result, TensorMut, TensorRef, Workspace, MAX_RANK,
};

use super::layout::{
    binary_in_place_forms, binary_in_place_operands, binary_operands, check_operand,
    check_out_aliases, eq_by_key, unary_in_place_form, variant_index, ContigShape, In,
    MapKernels, Out, THREADS,
};
use super::{BinaryDescriptor, UnaryDescriptor};
use crate::checks::check_element;
use crate::kernel_sources::{self, element_code, kinds_except};
use crate::plan::own_float_sku;
use crate::Plan;

use ElementKind as K;

/// The input kinds of the comparisons, the logical ops and the predicates
/// but `signbit`: f32, f64, f16, bf16, i8, u8, i16, i32, i64 and bool (the
/// logical reductions' kinds; PyTorch's CUDA kernels of these ops take no
/// u32 or fp8 either).
pub const LOGIC_KINDS: [ElementKind; 10] = crate::reduce::LOGICAL_REDUCE_KINDS;

/// The four float kinds: `isclose`'s.
const FLOAT_KINDS: [ElementKind; 4] = [K::F32, K::F64, K::F16, K::Bf16];

/// The five integer kinds: the shifts', `gcd`'s and `lcm`'s.
const INT_KINDS: [ElementKind; 5] = kinds_except(&[
    K::F32,
    K::F64,
    K::F16,
    K::Bf16,
    K::U32,
    K::Bool,
    K::Fp8E4M3,
    K::Fp8E5M2,
]);

/// The integer kinds and bool: the bitwise ops'.
const BITS_KINDS: [ElementKind; 6] = kinds_except(&[
    K::F32,
    K::F64,
    K::F16,
    K::Bf16,
    K::U32,
    K::Fp8E4M3,
    K::Fp8E5M2,
]);

/// The float and integer kinds: `signbit`'s (PyTorch's takes no bool).
const SIGNED_KINDS: [ElementKind; 9] = kinds_except(&[K::U32, K::Bool, K::Fp8E4M3, K::Fp8E5M2]);

/// The op name errors and skus carry.
const OP: &str = "logic";

/// A function of two tensors with an exact result (no gradient).
///
/// Comparisons and logical ops give `bool`; the others give the input's
/// element type. `a` and `b` have one element type; NaN compares as IEEE
/// (unordered), `-0 == 0`; f16 and bf16 are compared as their (exact) f32
/// values. "Nonzero" is `x != 0`: NaN is true, `-0` false.
#[derive(Copy, Clone, Debug)]
#[non_exhaustive]
pub enum BinaryLogicOp {
    /// `torch.eq`: `a == b`.
    Eq,
    /// `torch.ne`: `a != b` (true where either is NaN).
    Ne,
    /// `torch.lt`: `a < b`.
    Lt,
    /// `torch.le`: `a <= b`.
    Le,
    /// `torch.gt`: `a > b`.
    Gt,
    /// `torch.ge`: `a >= b`.
    Ge,
    /// `torch.isclose(a, b, rtol, atol, equal_nan)` (floats): `a == b`, or
    /// both NaN when `equal_nan`, or, unless `rtol` and `atol` are both 0,
    /// `|a - b|` finite and at most `atol + |rtol b|`. As PyTorch's
    /// composite: in f32 (f64 for f64) with `rtol` and `atol` rounded to
    /// it, `rtol b`, its sum with `atol` and `a - b` each rounded to the
    /// element type. PyTorch's defaults: `rtol` 1e-5, `atol` 1e-8, no
    /// `equal_nan`.
    IsClose {
        /// Relative tolerance, at least 0.
        rtol: f64,
        /// Absolute tolerance, at least 0.
        atol: f64,
        /// NaN is close to NaN.
        equal_nan: bool,
    },
    /// `torch.logical_and`: both nonzero.
    LogicalAnd,
    /// `torch.logical_or`: either nonzero.
    LogicalOr,
    /// `torch.logical_xor`: exactly one nonzero.
    LogicalXor,
    /// `torch.bitwise_and` (integers; bool: both true).
    BitwiseAnd,
    /// `torch.bitwise_or` (integers; bool: either true).
    BitwiseOr,
    /// `torch.bitwise_xor` (integers; bool: exactly one true).
    BitwiseXor,
    /// `torch.bitwise_left_shift` (integers): `a << b`, wrapping; 0 where
    /// `b` is negative or at least the type's width in bits (a u8 count of
    /// 128 or more reads as negative, as PyTorch's).
    BitwiseLeftShift,
    /// `torch.bitwise_right_shift` (integers): `a >> b`, arithmetic for
    /// signed types; where `b` is negative or at least the width less the
    /// sign bit, `a` shifted by that: the sign (-1 or 0) of a signed `a`,
    /// 0 for u8.
    BitwiseRightShift,
    /// `torch.gcd` (integers): Euclid's algorithm on `|a|` and `|b|`, as
    /// PyTorch's CUDA function: `|.|` wraps at the type's minimum, so
    /// `gcd(MIN, 0)` is `MIN` and a gcd with `MIN` may be negative.
    Gcd,
    /// `torch.lcm` (integers): 0 where `gcd(a, b)` is 0, else
    /// `|a / gcd * b|` in C++'s promoted type (int for i8, u8, i16, i32;
    /// i64 for i64), wrapping where that overflows, narrowed to the
    /// element type.
    Lcm,
}

impl BinaryLogicOp {
    /// Every op, in declaration order (`isclose` with PyTorch's defaults).
    pub const ALL: [BinaryLogicOp; 17] = [
        BinaryLogicOp::Eq,
        BinaryLogicOp::Ne,
        BinaryLogicOp::Lt,
        BinaryLogicOp::Le,
        BinaryLogicOp::Gt,
        BinaryLogicOp::Ge,
        BinaryLogicOp::IsClose {
            rtol: 1e-5,
            atol: 1e-8,
            equal_nan: false,
        },
        BinaryLogicOp::LogicalAnd,
        BinaryLogicOp::LogicalOr,
        BinaryLogicOp::LogicalXor,
        BinaryLogicOp::BitwiseAnd,
        BinaryLogicOp::BitwiseOr,
        BinaryLogicOp::BitwiseXor,
        BinaryLogicOp::BitwiseLeftShift,
        BinaryLogicOp::BitwiseRightShift,
        BinaryLogicOp::Gcd,
        BinaryLogicOp::Lcm,
    ];

    /// Position of the op's kind in [`BinaryLogicOp::ALL`] (`LOGIC_OP` of
    /// the kernel source), whatever its parameters.
    pub fn index(self) -> u32 {
        variant_index(&Self::ALL, &self)
    }

    /// Kernel-name suffix and op name (PyTorch's).
    pub fn name(self) -> &'static str {
        use BinaryLogicOp as B;
        match self {
            B::Eq => "eq",
            B::Ne => "ne",
            B::Lt => "lt",
            B::Le => "le",
            B::Gt => "gt",
            B::Ge => "ge",
            B::IsClose { .. } => "isclose",
            B::LogicalAnd => "logical_and",
            B::LogicalOr => "logical_or",
            B::LogicalXor => "logical_xor",
            B::BitwiseAnd => "bitwise_and",
            B::BitwiseOr => "bitwise_or",
            B::BitwiseXor => "bitwise_xor",
            B::BitwiseLeftShift => "bitwise_left_shift",
            B::BitwiseRightShift => "bitwise_right_shift",
            B::Gcd => "gcd",
            B::Lcm => "lcm",
        }
    }

    /// The input kinds the op takes; every other is `Unsupported`.
    pub const fn kinds(self) -> &'static [ElementKind] {
        use BinaryLogicOp as B;
        match self {
            B::IsClose { .. } => &FLOAT_KINDS,
            B::BitwiseAnd | B::BitwiseOr | B::BitwiseXor => &BITS_KINDS,
            B::BitwiseLeftShift | B::BitwiseRightShift | B::Gcd | B::Lcm => &INT_KINDS,
            _ => &LOGIC_KINDS,
        }
    }

    /// The output's element type for inputs of `element`: bool for the
    /// comparisons, `isclose` and the logical ops, `element` for the
    /// others.
    pub fn output(self, element: ElementKind) -> ElementKind {
        if self.index() < BinaryLogicOp::BitwiseAnd.index() {
            ElementKind::Bool
        } else {
            element
        }
    }

    /// `InvalidDescriptor` for parameters PyTorch rejects: a negative (or
    /// NaN) `rtol` or `atol`.
    fn check_params(self) -> Result<()> {
        if let BinaryLogicOp::IsClose { rtol, atol, .. } = self {
            for (what, v) in [("rtol", rtol), ("atol", atol)] {
                if v.is_nan() || v < 0.0 {
                    return Err(crate::checks::invalid_descriptor(
                        OP,
                        "op",
                        format!("isclose {what} {v}"),
                        "isclose's rtol and atol must be at least 0",
                    ));
                }
            }
        }
        Ok(())
    }

    /// The kernel's parameters.
    fn params(self) -> LogicParams {
        match self {
            BinaryLogicOp::IsClose {
                rtol,
                atol,
                equal_nan,
            } => LogicParams {
                rtol,
                atol,
                equal_nan: u32::from(equal_nan),
                pad: 0,
            },
            _ => LogicParams::default(),
        }
    }

    /// The op's kind and its parameters as bits: what equality and
    /// hashing compare.
    fn key(self) -> (u32, [u64; 3]) {
        let bits = match self {
            BinaryLogicOp::IsClose {
                rtol,
                atol,
                equal_nan,
            } => [rtol.to_bits(), atol.to_bits(), u64::from(equal_nan)],
            _ => [0; 3],
        };
        (self.index(), bits)
    }
}

eq_by_key!(BinaryLogicOp, key);

/// A predicate or bitwise function of one tensor (no gradient). The
/// predicates and `logical_not` give `bool`, `bitwise_not` the input's
/// element type. Integers and bool are never NaN or infinite and always
/// finite, as PyTorch defines these ops for them.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum UnaryLogicOp {
    /// `torch.isnan`.
    IsNan,
    /// `torch.isinf`: `±inf`.
    IsInf,
    /// `torch.isfinite`: neither NaN nor infinite.
    IsFinite,
    /// `torch.isposinf`: `+inf`.
    IsPosInf,
    /// `torch.isneginf`: `-inf`.
    IsNegInf,
    /// `torch.signbit` (floats and integers): the sign bit of a float (set
    /// for `-0` and `-inf`), `x < 0` for an integer.
    Signbit,
    /// `torch.logical_not`: `x == 0` (NaN is nonzero).
    LogicalNot,
    /// `torch.bitwise_not` (integers: `~x`; bool: `!x`).
    BitwiseNot,
}

impl UnaryLogicOp {
    /// Every op, in declaration order.
    pub const ALL: [UnaryLogicOp; 8] = [
        UnaryLogicOp::IsNan,
        UnaryLogicOp::IsInf,
        UnaryLogicOp::IsFinite,
        UnaryLogicOp::IsPosInf,
        UnaryLogicOp::IsNegInf,
        UnaryLogicOp::Signbit,
        UnaryLogicOp::LogicalNot,
        UnaryLogicOp::BitwiseNot,
    ];

    /// Kernel-name suffix and op name (PyTorch's).
    pub fn name(self) -> &'static str {
        use UnaryLogicOp as U;
        match self {
            U::IsNan => "isnan",
            U::IsInf => "isinf",
            U::IsFinite => "isfinite",
            U::IsPosInf => "isposinf",
            U::IsNegInf => "isneginf",
            U::Signbit => "signbit",
            U::LogicalNot => "logical_not",
            U::BitwiseNot => "bitwise_not",
        }
    }

    /// The input kinds the op takes; every other is `Unsupported`.
    pub const fn kinds(self) -> &'static [ElementKind] {
        match self {
            UnaryLogicOp::Signbit => &SIGNED_KINDS,
            UnaryLogicOp::BitwiseNot => &BITS_KINDS,
            _ => &LOGIC_KINDS,
        }
    }

    /// The output's element type for an input of `element`: `element`
    /// for `bitwise_not`, bool for the others.
    pub fn output(self, element: ElementKind) -> ElementKind {
        if self == UnaryLogicOp::BitwiseNot {
            element
        } else {
            ElementKind::Bool
        }
    }

    /// `LOGIC_OP` of the kernel source: after the binary ops.
    fn kernel_index(self) -> u32 {
        let at = Self::ALL.iter().position(|&o| o == self).unwrap_or(0);
        BinaryLogicOp::ALL.len() as u32 + at as u32
    }
}

/// A binary logic op of two rank-`N` inputs broadcast to a common shape
/// (NumPy's rules: each axis of `a_shape` and `b_shape` equal, or one of
/// them 1): [`BinaryDescriptor`] with a [`BinaryLogicOp`].
pub type BinaryLogicDescriptor<const N: usize> = BinaryDescriptor<N, BinaryLogicOp>;

impl<const N: usize> BinaryLogicDescriptor<N> {
    /// The output's element type ([`BinaryLogicOp::output`]).
    pub fn output_element(&self) -> ElementKind {
        self.op.output(self.element)
    }
}

/// A unary logic op over a rank-`N` tensor: [`UnaryDescriptor`] with a
/// [`UnaryLogicOp`].
pub type UnaryLogicDescriptor<const N: usize> = UnaryDescriptor<N, UnaryLogicOp>;

impl<const N: usize> UnaryLogicDescriptor<N> {
    /// The output's element type ([`UnaryLogicOp::output`]).
    pub fn output_element(&self) -> ElementKind {
        self.op.output(self.element)
    }
}

/// Arguments of [`BinaryLogicPlan`]'s [`Plan::run`];
/// [`BinaryLogicPlan::run_in_place_a`] and
/// [`BinaryLogicPlan::run_in_place_b`] write `out` over an input.
pub struct BinaryLogicArgs<'a, T, O, const N: usize> {
    /// First input, shape `a_shape`.
    pub a: TensorRef<'a, T, N>,
    /// Second input, shape `b_shape`.
    pub b: TensorRef<'a, T, N>,
    /// Output, the broadcast shape. It shares no memory with `a` or `b`,
    /// except as the same view when `O` is `T` (in place).
    pub out: TensorMut<'a, O, N>,
}

/// Arguments of [`UnaryLogicPlan`]'s [`Plan::run`];
/// [`UnaryLogicPlan::run_in_place`] takes one view that is both.
pub struct UnaryLogicArgs<'a, T, O, const N: usize> {
    /// Input, any strides (0 = broadcast).
    pub x: TensorRef<'a, T, N>,
    /// Output. It shares no memory with `x`, except as the same view when
    /// `O` is `T` (in place).
    pub y: TensorMut<'a, O, N>,
}

/// `LogicParams` of logic.cu: `isclose`'s tolerances (0 for every other
/// op).
#[repr(C)]
#[derive(Copy, Clone, Debug, Default, PartialEq)]
struct LogicParams {
    rtol: f64,
    atol: f64,
    equal_nan: u32,
    pad: u32,
}

/// Launch shape of the contiguous kernels: 256 threads, one group of
/// `16 / min(size of T, size of O)` elements each (typed_map.cuh).
const CONTIG: ContigShape = ContigShape {
    threads: THREADS,
    tile: 1,
};

/// The module of op `index` (`LOGIC_OP`) on inputs of element code `code`
/// (`LOGIC_IN`, [`element_code`]).
fn logic_spec(code: u32, index: u32) -> ModuleSpec {
    ModuleSpec::new(&kernel_sources::LOGIC)
        .define("LOGIC_IN", code)
        .define("LOGIC_OP", index)
}

/// Every module the plans can request: each op on each kind it takes.
pub(crate) fn logic_specs() -> Vec<ModuleSpec> {
    let binary = BinaryLogicOp::ALL.map(|op| (op.index(), op.kinds()));
    let unary = UnaryLogicOp::ALL.map(|op| (op.kernel_index(), op.kinds()));
    binary
        .into_iter()
        .chain(unary)
        .flat_map(|(index, kinds)| {
            kinds
                .iter()
                .filter_map(move |&k| element_code(k).map(|code| logic_spec(code, index)))
        })
        .collect()
}

/// The checks of `select` before it touches the GPU, for op `name` taking
/// the input kinds `kinds` and giving `output` (the output argument named
/// `out_arg`): `desc.element` is `T` (`DtypeMismatch`), `T` one of `kinds`
/// and `N` at most [`MAX_RANK`] (`Unsupported`), `O` the output element
/// (`DtypeMismatch` naming `out_arg`), the preference's backend ours.
/// Returns `T`'s element code.
fn validate<T: Element, O: Element, const N: usize>(
    name: &str,
    element: ElementKind,
    kinds: &[ElementKind],
    (out_arg, output): (&'static str, ElementKind),
    pref: &PlanPreference,
) -> Result<u32> {
    check_element::<T>(OP, "desc.element", element)?;
    let code = element_code(T::KIND).filter(|_| kinds.contains(&T::KIND));
    let code = code.ok_or_else(|| {
        let takes: Vec<&str> = kinds.iter().map(|k| k.name()).collect();
        Error::Unsupported {
            op: OP,
            what: format!("{name} on dtype {}; it takes {}", T::KIND, takes.join(", ")),
        }
    })?;
    if N > MAX_RANK {
        return Err(Error::Unsupported {
            op: OP,
            what: format!("rank {N} > {MAX_RANK}"),
        });
    }
    if O::KIND != output {
        return Err(Error::DtypeMismatch {
            op: OP,
            arg: out_arg,
            expected: output,
            got: O::KIND,
        });
    }
    pref.check_backend(OP, &[BackendKind::Baracuda])?;
    Ok(code)
}

/// What both plans share: one op's kernels on one input type, with its
/// parameters and sku.
struct LogicMap {
    kernels: MapKernels,
    params: LogicParams,
    sku: KernelSku,
}

impl LogicMap {
    /// Op `(index, name)` on inputs of `T`, element code `code`.
    fn load<T: Element>(
        stream: &Stream,
        (index, name): (u32, &'static str),
        code: u32,
        params: LogicParams,
    ) -> Result<Self> {
        let kernels = MapKernels::load(stream, &logic_spec(code, index), OP, name, CONTIG)?;
        let variant = "16 / min(size of T, size of out) elements per thread contiguous / rank-8 \
                       strided";
        let mut sku = own_float_sku::<T>(stream, format!("{OP}.{name}"), variant);
        if !T::KIND.is_float() {
            sku.precision = PrecisionGuarantee {
                math: MathPrecision::Integer,
                // C++'s promoted type, which gcd and lcm compute in
                accumulator: if T::KIND == K::I64 { K::I64 } else { K::I32 },
                deterministic: true,
                bit_stable_on_same_hardware: true,
            };
        }
        Ok(LogicMap {
            kernels,
            params,
            sku,
        })
    }

    /// Launch over `shape`.
    ///
    /// # Safety
    /// The inputs are bounds-checked views of `shape` in the kernels'
    /// order, and `out` a checked view of it, disjoint from each input or,
    /// when `O` is `T`, that input itself.
    unsafe fn launch<T: Element, O: Element>(
        &self,
        stream: &Stream,
        shape: &[usize],
        out: Out<'_, O>,
        ins: &[In<'_, T>],
    ) -> Result<()> {
        let q = self.params;
        // SAFETY: forwarded from the caller's contract.
        unsafe {
            self.kernels
                .launch_with(OP, stream, shape, &[out], ins, |a| a.push(q).map(|_| ()))
        }
    }
}

/// `out = f(a, b)` elementwise with broadcasting: the comparisons,
/// `isclose`, the logical and bitwise ops, the shifts, `gcd` and `lcm`
/// ([`BinaryLogicOp`]). No gradient: the plan has no
/// [`Backward`](crate::Backward).
///
/// # Shapes
/// `a`: `a_shape`, `b`: `b_shape`, `out`: their broadcast
/// ([`BinaryLogicDescriptor::out_shape`]); rank `N <= 8`, empty extents
/// included. No workspace (`workspace_size` is 0 and `run` does not read
/// it).
/// # Layout
/// Any strides; contiguous, 16-byte-aligned, same-shape operands take the
/// vectorised kernel (`16 / min(size of T, size of O)` elements per
/// thread), everything else the strided kernel (64-bit offsets).
/// # Dtypes
/// `T` ([`BinaryLogicOp::kinds`]): the comparisons and logical ops f32,
/// f64, f16, bf16, i8, u8, i16, i32, i64 and bool ([`LOGIC_KINDS`]);
/// `isclose` the four floats; the bitwise ops the integers and bool; the
/// shifts, `gcd` and `lcm` the integers. Others: `Unsupported`. `O`
/// ([`BinaryLogicDescriptor::output_element`]): bool for the comparisons,
/// `isclose` and the logical ops, `T` for the others.
/// # Aliasing
/// `out` may be `a` or `b` itself (the same view, so that input has the
/// output's shape) when `O` is `T`: [`BinaryLogicPlan::run_in_place_a`],
/// [`BinaryLogicPlan::run_in_place_b`]. Any other overlap of `out` with an
/// input is `InvalidArgument` naming the output, and nothing is written.
/// # Errors
/// From `select`: `DtypeMismatch` if `desc.element != T::KIND` (arg
/// `desc.element`) or `O` is not the output element (arg `out`);
/// `Unsupported` for a dtype the op does not take or a rank `N > 8`;
/// `InvalidDescriptor` for a negative or NaN `isclose` tolerance;
/// `BroadcastMismatch` when an axis of `a_shape` and `b_shape` differs and
/// neither is 1; `PreferenceRejected` when `pref` forces a backend other
/// than `Baracuda`. From `run` and the in-place forms: `ShapeMismatch`
/// when a view's shape is not the one above; `ContextMismatch` when a view
/// lives on another context; `InvalidArgument` for an overlap the aliasing
/// rules forbid, or an in-place form whose written input is broadcast.
pub struct BinaryLogicPlan<T: Element, O: Element, const N: usize> {
    desc: BinaryLogicDescriptor<N>,
    out_shape: [usize; N],
    map: LogicMap,
    _t: PhantomData<(T, O)>,
}

impl<T: Element, O: Element, const N: usize> Plan for BinaryLogicPlan<T, O, N> {
    type Descriptor = BinaryLogicDescriptor<N>;
    type Args<'a> = BinaryLogicArgs<'a, T, O, N>;

    fn select(stream: &Stream, desc: &Self::Descriptor, pref: &PlanPreference) -> Result<Self> {
        let op = desc.op;
        let output = ("out", desc.output_element());
        let code = validate::<T, O, N>(op.name(), desc.element, op.kinds(), output, pref)?;
        op.check_params()?;
        let out_shape = desc.broadcast(OP)?;
        let map = LogicMap::load::<T>(stream, (op.index(), op.name()), code, op.params())?;
        Ok(BinaryLogicPlan {
            desc: *desc,
            out_shape,
            map,
            _t: PhantomData,
        })
    }

    fn sku(&self) -> &KernelSku {
        &self.map.sku
    }

    fn workspace_size(&self) -> usize {
        0
    }

    fn run(&self, stream: &Stream, _workspace: Workspace<'_>, args: Self::Args<'_>) -> Result<()> {
        let out = &args.out;
        let [a, b] = binary_operands(OP, stream, self.shapes(), &args.a, &args.b, out)?;
        // SAFETY: views bounds-checked at construction (broadcast views
        // reach no new elements), shapes checked above; out is disjoint
        // from a and b, or of their type and one of them itself.
        unsafe { self.forward(stream, (out.data().ptr(), out.strides()), &a, &b) }
    }
}

impl<T: Element, O: Element, const N: usize> BinaryLogicPlan<T, O, N> {
    /// The shapes of `a`, `b` and the output.
    fn shapes(&self) -> [&[usize; N]; 3] {
        [&self.desc.a_shape, &self.desc.b_shape, &self.out_shape]
    }

    /// Launch the map over the output shape.
    ///
    /// # Safety
    /// `a` and `b` are views of the output shape and `out` is a checked
    /// view of it, disjoint from each input or, when `O` is `T`, that
    /// input itself.
    unsafe fn forward(
        &self,
        stream: &Stream,
        out: (DevPtrMut<O>, &[usize; N]),
        a: &TensorRef<'_, T, N>,
        b: &TensorRef<'_, T, N>,
    ) -> Result<()> {
        let ins: [In<'_, T>; 2] = [(a.data().ptr(), a.strides()), (b.data().ptr(), b.strides())];
        // SAFETY: forwarded from the caller's contract.
        unsafe { self.map.launch(stream, &self.out_shape, (out.0, out.1), &ins) }
    }
}

/// The in-place forms (`a &= b`, `a <<= b`, ...), where the output's
/// element type is the inputs'.
impl<T: Element, const N: usize> BinaryLogicPlan<T, T, N> {
    binary_in_place_forms!(BinaryLogicPlan);

}

/// `y = f(x)` elementwise: the predicates `isnan` to `signbit`,
/// `logical_not` and `bitwise_not` ([`UnaryLogicOp`]). No gradient: the
/// plan has no [`Backward`](crate::Backward).
///
/// # Shapes
/// `x`, `y`: `desc.shape`, rank `N <= 8`, empty extents included. No
/// workspace.
/// # Layout
/// Any strides; `x` may broadcast (stride 0). Contiguous, 16-byte aligned
/// operands take the vectorised kernel, others the strided kernel (64-bit
/// offsets).
/// # Dtypes
/// `T` ([`UnaryLogicOp::kinds`]): f32, f64, f16, bf16, i8, u8, i16, i32,
/// i64 and bool, but `signbit` no bool and `bitwise_not` only the
/// integers and bool. Others: `Unsupported`. `O`: bool, `T` for
/// `bitwise_not`.
/// # Aliasing
/// `y` may be `x` itself (the same view) when `O` is `T`:
/// [`UnaryLogicPlan::run_in_place`]. Any other overlap is
/// `InvalidArgument` naming `y`.
/// # Errors
/// From `select`: `DtypeMismatch` if `desc.element != T::KIND` (arg
/// `desc.element`) or `O` is not the output element (arg `y`);
/// `Unsupported` for a dtype the op does not take or a rank `N > 8`;
/// `PreferenceRejected` when `pref` forces a backend other than
/// `Baracuda`. From `run` and `run_in_place`: `ShapeMismatch`,
/// `ContextMismatch` naming the view; `InvalidArgument` when `y` overlaps
/// `x` other than in place.
pub struct UnaryLogicPlan<T: Element, O: Element, const N: usize> {
    desc: UnaryLogicDescriptor<N>,
    map: LogicMap,
    _t: PhantomData<(T, O)>,
}

impl<T: Element, O: Element, const N: usize> Plan for UnaryLogicPlan<T, O, N> {
    type Descriptor = UnaryLogicDescriptor<N>;
    type Args<'a> = UnaryLogicArgs<'a, T, O, N>;

    fn select(stream: &Stream, desc: &Self::Descriptor, pref: &PlanPreference) -> Result<Self> {
        let op = desc.op;
        let output = ("y", desc.output_element());
        let code = validate::<T, O, N>(op.name(), desc.element, op.kinds(), output, pref)?;
        let index = (op.kernel_index(), op.name());
        let map = LogicMap::load::<T>(stream, index, code, LogicParams::default())?;
        Ok(UnaryLogicPlan {
            desc: *desc,
            map,
            _t: PhantomData,
        })
    }

    fn sku(&self) -> &KernelSku {
        &self.map.sku
    }

    fn workspace_size(&self) -> usize {
        0
    }

    fn run(&self, stream: &Stream, _workspace: Workspace<'_>, args: Self::Args<'_>) -> Result<()> {
        let shape = &self.desc.shape;
        let (x, y) = (&args.x, &args.y);
        check_operand(OP, "x", stream, shape, x.shape(), x.data().ctx_id())?;
        check_operand(OP, "y", stream, shape, y.shape(), y.data().ctx_id())?;
        check_out_aliases(OP, ("y", y), &[("x", x)])?;
        // SAFETY: both views were bounds-checked at construction and match
        // the plan's shape; y is disjoint from x, or of its type and x
        // itself (checked above).
        unsafe {
            self.forward(
                stream,
                (y.data().ptr(), y.strides()),
                (x.data().ptr(), x.strides()),
            )
        }
    }
}

impl<T: Element, O: Element, const N: usize> UnaryLogicPlan<T, O, N> {
    /// Launch the map `y = f(x)` over the plan's shape.
    ///
    /// # Safety
    /// `y` and `x` are checked views of the plan's shape; `y` is disjoint
    /// from `x` or, when `O` is `T`, `x` itself.
    unsafe fn forward(&self, stream: &Stream, y: Out<'_, O>, x: In<'_, T>) -> Result<()> {
        // SAFETY: forwarded from the caller's contract.
        unsafe { self.map.launch(stream, &self.desc.shape, y, &[x]) }
    }
}

/// The in-place form (`bitwise_not_`), where the output's element type is
/// the input's.
impl<T: Element, const N: usize> UnaryLogicPlan<T, T, N> {
    unary_in_place_form!();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_and_outputs_follow_pytorch() {
        use BinaryLogicOp as B;
        assert_eq!(B::Eq.kinds(), &LOGIC_KINDS);
        assert!(B::Lt.kinds().contains(&K::Bool));
        assert_eq!(B::ALL[6].kinds(), &FLOAT_KINDS);
        assert_eq!(BITS_KINDS, [K::I8, K::U8, K::I16, K::I32, K::I64, K::Bool]);
        assert_eq!(INT_KINDS, [K::I8, K::U8, K::I16, K::I32, K::I64]);
        assert!(!B::Gcd.kinds().contains(&K::Bool));
        assert!(!UnaryLogicOp::Signbit.kinds().contains(&K::Bool));
        assert!(UnaryLogicOp::Signbit.kinds().contains(&K::U8));
        for op in B::ALL {
            let out = op.output(K::I32);
            let bits = op.index() >= B::BitwiseAnd.index();
            assert_eq!(out, if bits { K::I32 } else { K::Bool }, "{}", op.name());
        }
        assert_eq!(UnaryLogicOp::BitwiseNot.output(K::U8), K::U8);
        assert_eq!(UnaryLogicOp::IsNan.output(K::F16), K::Bool);
        // one module per op and kind
        let n: usize = B::ALL.iter().map(|op| op.kinds().len()).sum::<usize>()
            + UnaryLogicOp::ALL.iter().map(|op| op.kinds().len()).sum::<usize>();
        assert_eq!(logic_specs().len(), n);
        assert_eq!(n, 6 * 10 + 4 + 3 * 10 + 3 * 6 + 4 * 5 + 5 * 10 + 9 + 10 + 6);
    }

    #[test]
    fn kernel_indices_follow_logic_cu() {
        let names: Vec<&str> = BinaryLogicOp::ALL
            .iter()
            .map(|op| op.name())
            .chain(UnaryLogicOp::ALL.iter().map(|op| op.name()))
            .collect();
        let src = kernel_sources::LOGIC.source;
        for (i, name) in names.iter().enumerate() {
            let line = format!("#elif LOGIC_OP == {i}\n");
            let at = src.find(&line).or_else(|| src.find(&format!("#if LOGIC_OP == {i}\n")));
            let at = at.unwrap_or_else(|| panic!("no LOGIC_OP {i} in logic.cu"));
            assert!(src[at..].contains(&format!("LOGIC({name}, ")), "op {i} is not {name}");
        }
        for (i, op) in UnaryLogicOp::ALL.iter().enumerate() {
            assert_eq!(op.kernel_index(), 17 + i as u32);
        }
        assert_eq!(BinaryLogicOp::IsClose { rtol: 0.0, atol: 0.0, equal_nan: true }.index(), 6);
    }

    #[test]
    fn validation_names_the_bad_field() {
        let pref = PlanPreference::default();
        let eq = ("out", K::Bool);
        let v = validate::<f32, bool, 2>("eq", K::F32, &LOGIC_KINDS, eq, &pref);
        assert_eq!(v, Ok(0));
        let e = validate::<f32, bool, 2>("eq", K::F16, &LOGIC_KINDS, eq, &pref);
        assert!(matches!(e, Err(Error::DtypeMismatch { arg: "desc.element", .. })));
        let e = validate::<u32, bool, 2>("eq", K::U32, &LOGIC_KINDS, eq, &pref);
        assert!(matches!(e, Err(Error::Unsupported { .. })));
        let e = validate::<f32, f32, 2>("gcd", K::F32, &INT_KINDS, ("out", K::F32), &pref);
        assert!(matches!(e, Err(Error::Unsupported { .. })));
        let e = validate::<f32, bool, 9>("eq", K::F32, &LOGIC_KINDS, eq, &pref);
        assert!(matches!(e, Err(Error::Unsupported { .. })));
        let e = validate::<f32, f32, 2>("eq", K::F32, &LOGIC_KINDS, eq, &pref);
        assert!(matches!(e, Err(Error::DtypeMismatch { arg: "out", .. })));
        let y = validate::<i8, i8, 1>("bitwise_not", K::I8, &BITS_KINDS, ("y", K::I8), &pref);
        assert_eq!(y, Ok(6));
        let cudnn = pref.with_backend(BackendKind::Cudnn);
        let e = validate::<f32, bool, 2>("eq", K::F32, &LOGIC_KINDS, eq, &cudnn);
        assert!(matches!(e, Err(Error::PreferenceRejected { field: "backend", .. })));
    }

    #[test]
    fn isclose_tolerances_are_checked_and_compared_by_bits() {
        let close = |rtol, atol| BinaryLogicOp::IsClose {
            rtol,
            atol,
            equal_nan: false,
        };
        assert!(close(0.0, 0.0).check_params().is_ok());
        for bad in [close(-1e-5, 1e-8), close(1e-5, -0.5), close(f64::NAN, 0.0)] {
            assert!(matches!(
                bad.check_params(),
                Err(Error::InvalidDescriptor { field: "op", .. })
            ));
        }
        assert_eq!(close(f64::NAN, 1.0), close(f64::NAN, 1.0));
        assert_ne!(close(1e-5, 1e-8), close(1e-5, 1e-7));
        assert_ne!(BinaryLogicOp::Eq, BinaryLogicOp::Ne);
        let q = BinaryLogicOp::IsClose {
            rtol: 0.5,
            atol: 0.25,
            equal_nan: true,
        }
        .params();
        assert_eq!((q.rtol, q.atol, q.equal_nan), (0.5, 0.25, 1));
        assert_eq!(std::mem::size_of::<LogicParams>(), 24);
    }

    #[test]
    fn descriptors_broadcast_and_name_the_output() {
        let d = BinaryLogicDescriptor {
            op: BinaryLogicOp::Lt,
            element: K::Bf16,
            a_shape: [4, 1],
            b_shape: [1, 3],
        };
        assert_eq!(d.out_shape(), Ok([4, 3]));
        assert_eq!(d.output_element(), K::Bool);
        let bad = BinaryLogicDescriptor {
            b_shape: [2, 3],
            ..d
        };
        assert!(matches!(
            bad.broadcast(OP),
            Err(Error::BroadcastMismatch { op: "logic", .. })
        ));
        let empty = BinaryLogicDescriptor {
            a_shape: [0, 1],
            ..d
        };
        assert_eq!(empty.out_shape(), Ok([0, 3]));
        let u = UnaryLogicDescriptor {
            op: UnaryLogicOp::BitwiseNot,
            element: K::I16,
            shape: [5],
        };
        assert_eq!(u.output_element(), K::I16);
    }
}
