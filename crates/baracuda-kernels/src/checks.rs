//! The argument checks every family's `select` and `run` share: shapes,
//! contexts, dense layouts, matrix views, alignment, partial overlap,
//! optional arguments and requested gradients. Each returns the named
//! `Error` variant, never panics, and runs before anything is enqueued, so a
//! failed check writes nothing.

use baracuda_driver::Stream;
use baracuda_kernels_types::{
    DevPtr, DeviceSlice, Element, ElementKind, Error, Grads, MatrixMut, MatrixOrder, MatrixRef,
    Result, Shape, TensorMut, TensorRef, MAX_RANK,
};

use crate::memory_format::ConvLayout;

/// Pointer alignment the selected library algorithms may assume (cuBLASLt's
/// vectorised kernels: 16 bytes); `run` checks it with [`check_aligned`].
pub(crate) const ALIGN_BYTES: u64 = 16;

/// What `run` checks of a matrix argument.
pub(crate) struct MatInfo {
    pub rows: usize,
    pub cols: usize,
    pub order: MatrixOrder,
    pub ld: usize,
    pub addr: u64,
    pub ctx: usize,
}

/// Bytes a view of `shape`/`strides` spans from its first element.
pub(crate) fn span_bytes<T>(shape: &[usize], strides: &[usize]) -> usize {
    if shape.contains(&0) {
        return 0;
    }
    let last: usize = shape.iter().zip(strides).map(|(&d, &s)| (d - 1) * s).sum();
    (last + 1) * std::mem::size_of::<T>()
}

/// `ShapeMismatch` naming `arg` unless `got` is `expected`.
pub(crate) fn check_shape(
    op: &'static str,
    arg: &'static str,
    expected: &[usize],
    got: &[usize],
) -> Result<()> {
    if expected != got {
        return Err(Error::ShapeMismatch {
            op,
            arg,
            expected: Shape::from(expected),
            got: Shape::from(got),
        });
    }
    Ok(())
}

/// `DtypeMismatch` naming `arg` unless `element` is `T`'s kind.
pub(crate) fn check_element<T: Element>(
    op: &'static str,
    arg: &'static str,
    element: ElementKind,
) -> Result<()> {
    if element != T::KIND {
        return Err(Error::DtypeMismatch {
            op,
            arg,
            expected: T::KIND,
            got: element,
        });
    }
    Ok(())
}

/// The `BARACUDA_DTYPE` code of a plan on element type `T` whose
/// descriptor names `element`, for kernels specialised on the four float
/// types and ranks up to [`MAX_RANK`]: `DtypeMismatch` unless `element` is
/// `T`, `Unsupported` for another dtype (`takes` says what the op takes,
/// in words) or a rank `N` past [`MAX_RANK`].
pub(crate) fn float_dtype_code<T: Element, const N: usize>(
    op: &'static str,
    element: ElementKind,
    takes: &str,
) -> Result<u32> {
    check_element::<T>(op, "desc.element", element)?;
    let code = crate::kernel_sources::dtype_code(T::KIND).ok_or_else(|| Error::Unsupported {
        op,
        what: format!("dtype {}; {takes} f32, f64, f16 and bf16", T::KIND),
    })?;
    if N > MAX_RANK {
        return Err(Error::Unsupported {
            op,
            what: format!("rank {N} > {MAX_RANK}"),
        });
    }
    Ok(code)
}

/// `DtypeMismatch` naming `y` unless the output type `O` is `expected`
/// (the descriptor's output element).
pub(crate) fn check_output_element<O: Element>(
    op: &'static str,
    expected: ElementKind,
) -> Result<()> {
    if O::KIND != expected {
        return Err(Error::DtypeMismatch {
            op,
            arg: "y",
            expected,
            got: O::KIND,
        });
    }
    Ok(())
}

/// `Unsupported` for an integer `T` when op `name` takes floats only
/// (`integers` lists the ops that do take them, or is empty).
pub(crate) fn check_integer_op<T: Element>(
    op: &'static str,
    name: &str,
    takes_integers: bool,
    integers: &str,
) -> Result<()> {
    if T::KIND.is_float() || takes_integers {
        return Ok(());
    }
    Err(Error::Unsupported {
        op,
        what: format!(
            "{name} on dtype {}; it takes f32, f64, f16 and bf16{integers}",
            T::KIND
        ),
    })
}

/// [`float_dtype_code`] for kernels that also take i32 and i64
/// (`kernel_sources::numeric_dtype_code`): the reductions and scans.
pub(crate) fn numeric_dtype_code<T: Element, const N: usize>(
    op: &'static str,
    element: ElementKind,
    takes: &str,
) -> Result<u32> {
    check_element::<T>(op, "desc.element", element)?;
    let code =
        crate::kernel_sources::numeric_dtype_code(T::KIND).ok_or_else(|| Error::Unsupported {
            op,
            what: format!(
                "dtype {}; {takes} f32, f64, f16, bf16, i32 and i64",
                T::KIND
            ),
        })?;
    if N > MAX_RANK {
        return Err(Error::Unsupported {
            op,
            what: format!("rank {N} > {MAX_RANK}"),
        });
    }
    Ok(code)
}

/// `InvalidDescriptor` naming `field` of `op`, its value and why.
pub(crate) fn invalid_descriptor(
    op: &'static str,
    field: &'static str,
    value: String,
    reason: &str,
) -> Error {
    Error::InvalidDescriptor {
        op,
        field,
        value,
        reason: reason.into(),
    }
}

/// `InvalidDescriptor` naming field `dim` unless `dim` is a dim of a
/// rank-`N` tensor.
pub(crate) fn check_dim<const N: usize>(op: &'static str, dim: usize) -> Result<()> {
    if dim >= N {
        return Err(invalid_descriptor(
            op,
            "dim",
            dim.to_string(),
            &format!("past the rank {N}"),
        ));
    }
    Ok(())
}

/// `ContextMismatch` naming `arg` unless context `ctx` is `stream`'s.
pub(crate) fn check_ctx(
    op: &'static str,
    arg: &'static str,
    stream: &Stream,
    ctx: usize,
) -> Result<()> {
    if stream.context().id() != ctx {
        return Err(Error::ContextMismatch { op, arg });
    }
    Ok(())
}

/// A view as `run` checks it against the plan: its argument name, the
/// shape the plan expects, its shape and its context.
#[derive(Copy, Clone, Debug)]
pub(crate) struct View<'s> {
    arg: &'static str,
    expected: &'s [usize],
    shape: &'s [usize],
    ctx: usize,
}

impl<'s> View<'s> {
    fn new(arg: &'static str, expected: &'s [usize], shape: &'s [usize], ctx: usize) -> Self {
        View {
            arg,
            expected,
            shape,
            ctx,
        }
    }
    /// A read-only view `arg` the plan expects of shape `expected`.
    pub(crate) fn of<T: Element, const N: usize>(
        arg: &'static str,
        expected: &'s [usize; N],
        v: &'s TensorRef<'_, T, N>,
    ) -> Self {
        View::new(arg, expected, v.shape(), v.data().ctx_id())
    }
    /// A writable view `arg` the plan expects of shape `expected`.
    pub(crate) fn of_mut<T: Element, const N: usize>(
        arg: &'static str,
        expected: &'s [usize; N],
        v: &'s TensorMut<'_, T, N>,
    ) -> Self {
        View::new(arg, expected, v.shape(), v.data().ctx_id())
    }
}

/// Every view's shape ([`check_shape`]: `ShapeMismatch` naming the first
/// that differs), then every view's context ([`check_ctx`]:
/// `ContextMismatch` naming the first on another context).
pub(crate) fn check_views(op: &'static str, stream: &Stream, views: &[View<'_>]) -> Result<()> {
    for v in views {
        check_shape(op, v.arg, v.expected, v.shape)?;
    }
    for v in views {
        check_ctx(op, v.arg, stream, v.ctx)?;
    }
    Ok(())
}

/// The memory an operand reaches, for the aliasing checks: its argument
/// name, typed address, shape and element strides.
#[derive(Copy, Clone, Debug)]
pub(crate) struct Extent<'s, T> {
    pub arg: &'static str,
    pub ptr: DevPtr<T>,
    pub shape: &'s [usize],
    pub strides: &'s [usize],
}

impl<'s, T> Extent<'s, T> {
    /// An extent from its parts.
    pub(crate) fn new(
        arg: &'static str,
        ptr: DevPtr<T>,
        shape: &'s [usize],
        strides: &'s [usize],
    ) -> Self {
        Extent {
            arg,
            ptr,
            shape,
            strides,
        }
    }

    /// Byte range `[first, last + 1)` the operand spans; empty for an empty
    /// view.
    fn bytes(&self) -> core::ops::Range<u64> {
        let start = self.ptr.addr();
        start..start + span_bytes::<T>(self.shape, self.strides) as u64
    }

    /// True when both name the same elements in the same order: one address,
    /// one shape, and equal strides on every axis longer than 1.
    fn same_view(&self, other: &Extent<'_, T>) -> bool {
        self.ptr == other.ptr
            && self.shape == other.shape
            && self
                .shape
                .iter()
                .zip(self.strides.iter().zip(other.strides))
                .all(|(&d, (&s, &t))| d <= 1 || s == t)
    }
}

impl<'s, T: Element> Extent<'s, T> {
    /// The extent of a read-only view.
    pub(crate) fn of<const N: usize>(arg: &'static str, v: &'s TensorRef<'_, T, N>) -> Self {
        Extent::new(arg, v.data().ptr(), v.shape(), v.strides())
    }
    /// The extent of a writable view.
    pub(crate) fn of_mut<const N: usize>(arg: &'static str, v: &'s TensorMut<'_, T, N>) -> Self {
        Extent::new(arg, v.data().ptr().as_const(), v.shape(), v.strides())
    }
}

/// How an output shares memory with an input.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) enum Overlap {
    /// Their byte spans do not intersect (or one is empty).
    Disjoint,
    /// The same view: in place.
    Same,
    /// Anything else that shares bytes.
    Partial,
}

/// How `out` shares memory with `input` (spans are compared as byte
/// intervals, so two interleaved views count as overlapping).
pub(crate) fn overlap<T>(out: &Extent<'_, T>, input: &Extent<'_, T>) -> Overlap {
    let (o, i) = (out.bytes(), input.bytes());
    if o.is_empty() || i.is_empty() || o.end <= i.start || i.end <= o.start {
        Overlap::Disjoint
    } else if out.same_view(input) {
        Overlap::Same
    } else {
        Overlap::Partial
    }
}

/// `InvalidArgument` naming `out.arg` when it shares memory with `input`,
/// except as the same view when `in_place_ok` (the plan computes that
/// pairing correctly in place).
pub(crate) fn check_alias<T>(
    op: &'static str,
    out: &Extent<'_, T>,
    input: &Extent<'_, T>,
    in_place_ok: bool,
) -> Result<()> {
    let reason = match overlap(out, input) {
        Overlap::Disjoint => return Ok(()),
        Overlap::Same if in_place_ok => return Ok(()),
        Overlap::Same => format!(
            "is {} itself, which this plan cannot write in place",
            input.arg
        ),
        Overlap::Partial => format!(
            "overlaps {} without being the same view (only exact in-place aliasing is allowed)",
            input.arg
        ),
    };
    Err(Error::InvalidArgument {
        op,
        arg: out.arg,
        reason,
    })
}

/// Dense element strides of a logical `[n, c, spatial...]` shape.
pub(crate) fn layout_strides(shape: &[usize], layout: ConvLayout) -> Vec<usize> {
    let r = shape.len();
    let mut st = vec![0usize; r];
    let mut acc = 1usize;
    match layout {
        ConvLayout::ChannelsFirst => {
            for i in (0..r).rev() {
                st[i] = acc;
                acc = acc.saturating_mul(shape[i]);
            }
        }
        ConvLayout::ChannelsLast => {
            st[1] = 1;
            acc = shape[1];
            for i in (2..r).rev() {
                st[i] = acc;
                acc = acc.saturating_mul(shape[i]);
            }
            st[0] = acc;
        }
    }
    st
}

/// A tensor operand of `run`: its address after checking shape, dense
/// layout strides and context. Writable operands are checked through
/// `as_const()`.
pub(crate) fn check_tensor<T: Element, const R: usize>(
    op: &'static str,
    arg: &'static str,
    view: &TensorRef<'_, T, R>,
    expected: &[usize],
    layout: ConvLayout,
    ctx: usize,
) -> Result<u64> {
    let (data, shape, strides) = (view.data(), &view.shape()[..], &view.strides()[..]);
    if shape != expected {
        return Err(Error::ShapeMismatch {
            op,
            arg,
            expected: Shape::from(expected),
            got: Shape::from(shape),
        });
    }
    let want = layout_strides(expected, layout);
    let ok = shape
        .iter()
        .zip(strides.iter().zip(&want))
        .all(|(&e, (&s, &w))| e == 1 || s == w);
    if !ok {
        return Err(Error::InvalidArgument {
            op,
            arg,
            reason: format!("strides {strides:?} are not the dense {layout:?} strides {want:?}"),
        });
    }
    if data.ctx_id() != ctx {
        return Err(Error::ContextMismatch { op, arg });
    }
    Ok(data.addr())
}

/// `Unsupported` when a tensor of `shape` has more elements than cuDNN's
/// 32-bit legacy descriptors can index.
pub(crate) fn check_i32_elems(op: &'static str, arg: &str, shape: &[usize]) -> Result<()> {
    let n = shape.iter().try_fold(1usize, |a, &d| a.checked_mul(d));
    match n {
        Some(n) if n <= i32::MAX as usize => Ok(()),
        _ => Err(Error::Unsupported {
            op,
            what: format!(
                "{arg} of shape {} has more than 2^31-1 elements",
                Shape::from(shape)
            ),
        }),
    }
}

/// What [`check_mat`] reads of a matrix view.
pub(crate) fn mat_ref<T: Element>(m: &MatrixRef<'_, T>) -> MatInfo {
    MatInfo {
        rows: m.rows(),
        cols: m.cols(),
        order: m.order(),
        ld: m.ld(),
        addr: m.data().addr(),
        ctx: m.data().ctx_id(),
    }
}

/// [`mat_ref`] of a writable view.
pub(crate) fn mat_mut<T: Element>(m: &MatrixMut<'_, T>) -> MatInfo {
    mat_ref(&m.as_const())
}

/// Check a matrix argument against `(rows, cols, order, ld)` of the plan.
pub(crate) fn check_mat(
    op: &'static str,
    arg: &'static str,
    got: MatInfo,
    want: (usize, usize, MatrixOrder, usize),
    ctx: usize,
) -> Result<()> {
    if got.ctx != ctx {
        return Err(Error::ContextMismatch { op, arg });
    }
    if (got.rows, got.cols) != (want.0, want.1) {
        return Err(Error::ShapeMismatch {
            op,
            arg,
            expected: Shape::from([want.0, want.1]),
            got: Shape::from([got.rows, got.cols]),
        });
    }
    if got.order != want.2 {
        return Err(Error::InvalidArgument {
            op,
            arg,
            reason: format!(
                "stored {:?}, the plan was selected for {:?}",
                got.order, want.2
            ),
        });
    }
    if got.ld != want.3 {
        return Err(Error::InvalidArgument {
            op,
            arg,
            reason: format!(
                "leading dimension {}, the plan was selected for {}",
                got.ld, want.3
            ),
        });
    }
    check_aligned(op, arg, got.addr)
}

/// Check a slice argument: on context `ctx`, holding `need` elements
/// (exactly, or at least when not `exact`), 16-byte aligned. Its address.
pub(crate) fn check_slice<T>(
    op: &'static str,
    arg: &'static str,
    s: &DeviceSlice<'_, T>,
    need: usize,
    exact: bool,
    ctx: usize,
) -> Result<u64> {
    if s.ctx_id() != ctx {
        return Err(Error::ContextMismatch { op, arg });
    }
    if s.len() < need || (exact && s.len() != need) {
        return Err(Error::ShapeMismatch {
            op,
            arg,
            expected: Shape::from([need]),
            got: Shape::from([s.len()]),
        });
    }
    check_aligned(op, arg, s.addr())?;
    Ok(s.addr())
}

/// `InvalidDescriptor` naming `field` unless `value >= min`; `why` says
/// what `min` is (`"the row length 96"`).
pub(crate) fn check_at_least(
    op: &'static str,
    field: &'static str,
    value: usize,
    min: usize,
    why: impl FnOnce() -> String,
) -> Result<()> {
    if value >= min {
        return Ok(());
    }
    Err(Error::InvalidDescriptor {
        op,
        field,
        value: value.to_string(),
        reason: format!("smaller than {}", why()),
    })
}

/// The address of an argument the plan takes exactly when `wanted`:
/// `check(given)` when both, 0 when neither, else `InvalidArgument` with
/// `why.0` (given but not wanted) or `why.1` (wanted but missing).
pub(crate) fn optional_arg<A>(
    op: &'static str,
    arg: &'static str,
    given: Option<A>,
    wanted: bool,
    why: (&str, &str),
    check: impl FnOnce(A) -> Result<u64>,
) -> Result<u64> {
    match (given, wanted) {
        (Some(a), true) => check(a),
        (None, false) => Ok(0),
        (Some(_), false) => Err(unexpected(op, arg, why.0)),
        (None, true) => Err(unexpected(op, arg, &format!("missing: {}", why.1))),
    }
}

/// `InvalidArgument` unless `addr` is aligned to [`ALIGN_BYTES`].
pub(crate) fn check_aligned(op: &'static str, arg: &'static str, addr: u64) -> Result<()> {
    if addr % ALIGN_BYTES != 0 {
        return Err(Error::InvalidArgument {
            op,
            arg,
            reason: format!(
                "device address {addr:#x} is not {ALIGN_BYTES}-byte aligned (the selected \
                 cuBLASLt algorithm assumes it)"
            ),
        });
    }
    Ok(())
}

/// Reject gradients `wants` holds that the plan (computing `offered`) does
/// not.
pub(crate) fn check_grads(op: &'static str, wants: Grads, offered: Grads) -> Result<()> {
    match wants.iter().find(|&g| !offered.contains(g)) {
        Some(g) => Err(Error::InvalidArgument {
            op,
            arg: g.arg(),
            reason: format!("{op} computes only {offered:?}"),
        }),
        None => Ok(()),
    }
}

/// `InvalidArgument` naming `arg`, saying `why`.
fn unexpected(op: &'static str, arg: &'static str, why: &str) -> Error {
    Error::InvalidArgument {
        op,
        arg,
        reason: why.to_string(),
    }
}

/// Why a bias is unexpected, and why it is needed (for [`optional_arg`]).
pub(crate) const BIAS_WHY: (&str, &str) = ("the epilogue has no bias", "the epilogue adds a bias");
/// Likewise for the aux output.
pub(crate) const AUX_WHY: (&str, &str) = (
    "the descriptor has save_aux = false",
    "the descriptor has save_aux = true",
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overlap_rules() {
        let sh = [4usize];
        let st = [1usize];
        let check = |out: u64, input: u64| {
            let p = DevPtr::<f32>::from_addr;
            let (y, x) = (
                Extent::new("y", p(out), &sh, &st),
                Extent::new("x", p(input), &sh, &st),
            );
            check_alias("t", &y, &x, true)
        };
        assert!(check(0x1000, 0x1000).is_ok());
        assert!(check(0x1004, 0x1000).is_err());
        assert!(check(0x1010, 0x1000).is_ok());
    }

    #[test]
    fn alias_kinds() {
        let p = DevPtr::<f32>::from_addr;
        let x = Extent::new("x", p(0x1000), &[4, 1], &[1, 1]);
        // extent-1 axes may carry any stride: still the same view
        let y = Extent::new("y", p(0x1000), &[4, 1], &[1, 7]);
        assert_eq!(overlap(&y, &x), Overlap::Same);
        assert!(check_alias("t", &y, &x, true).is_ok());
        assert!(matches!(
            check_alias("t", &y, &x, false),
            Err(Error::InvalidArgument { arg: "y", .. })
        ));
        // a transposed view of the same bytes is not in place
        let t = Extent::new("y", p(0x1000), &[2, 2], &[1, 2]);
        let u = Extent::new("x", p(0x1000), &[2, 2], &[2, 1]);
        assert_eq!(overlap(&t, &u), Overlap::Partial);
        // empty views and adjacent spans are disjoint
        let e = Extent::new("y", p(0x1000), &[0, 4], &[4, 1]);
        assert_eq!(overlap(&e, &x), Overlap::Disjoint);
        let z = Extent::new("y", p(0x1010), &[4, 1], &[1, 1]);
        assert_eq!(overlap(&z, &x), Overlap::Disjoint);
    }

    #[test]
    fn dims_past_the_rank_name_the_field() {
        assert!(check_dim::<3>("t", 2).is_ok());
        assert_eq!(
            check_dim::<3>("t", 3),
            Err(Error::InvalidDescriptor {
                op: "t",
                field: "dim",
                value: "3".into(),
                reason: "past the rank 3".into(),
            })
        );
    }

    #[test]
    fn strides() {
        assert_eq!(
            layout_strides(&[2, 3, 4, 5], ConvLayout::ChannelsLast),
            vec![60, 1, 15, 3]
        );
        assert_eq!(
            layout_strides(&[2, 3, 4], ConvLayout::ChannelsFirst),
            vec![12, 4, 1]
        );
    }
}

/// An operand's name and the device bytes it spans: `(arg, first byte,
/// byte count)`, for [`check_disjoint`].
pub(crate) type ByteSpan = (&'static str, u64, usize);

/// The [`ByteSpan`] of a tensor view `arg` (empty views span no bytes).
pub(crate) fn byte_span<T: Element, const R: usize>(
    arg: &'static str,
    view: &TensorRef<'_, T, R>,
) -> ByteSpan {
    let bytes = span_bytes::<T>(&view.shape()[..], &view.strides()[..]);
    (arg, view.data().addr(), bytes)
}

/// For a plan whose outputs may alias nothing: `InvalidArgument` naming
/// the output when its bytes meet those of an input or of another output
/// (the first such output, in order).
pub(crate) fn check_disjoint(
    op: &'static str,
    outputs: &[ByteSpan],
    inputs: &[ByteSpan],
) -> Result<()> {
    let meet = |a: &ByteSpan, b: &ByteSpan| {
        let (a0, b0) = (a.1, b.1);
        a.2 > 0 && b.2 > 0 && a0 < b0 + b.2 as u64 && b0 < a0 + a.2 as u64
    };
    for (i, out) in outputs.iter().enumerate() {
        let other = inputs.iter().chain(&outputs[..i]).chain(&outputs[i + 1..]);
        if let Some(hit) = other.into_iter().find(|e| meet(out, e)) {
            return Err(Error::InvalidArgument {
                op,
                arg: out.0,
                reason: format!(
                    "overlaps {} in memory; {op} writes no output in place",
                    hit.0
                ),
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod disjoint_tests {
    use super::*;

    #[test]
    fn disjoint_rules() {
        let x: ByteSpan = ("x", 0x1000, 64);
        assert!(check_disjoint("t", &[("y", 0x1040, 16)], &[x]).is_ok());
        assert!(check_disjoint("t", &[("y", 0x1000, 0)], &[x]).is_ok());
        let e = check_disjoint("t", &[("dw", 0x2000, 8), ("dx", 0x103c, 8)], &[x]);
        assert!(matches!(e, Err(Error::InvalidArgument { arg: "dx", .. })));
        let e = check_disjoint("t", &[("dx", 0x2000, 8), ("dw", 0x2004, 8)], &[x]);
        assert!(matches!(e, Err(Error::InvalidArgument { arg: "dx", .. })));
    }
}
