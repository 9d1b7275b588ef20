//! Views of device memory whose safe constructors prove every reachable
//! element lies inside the buffer.
//!
//! A view never owns memory. [`DeviceSlice`] / [`DeviceSliceMut`] are a
//! device address, an element count and the CUDA context the memory belongs
//! to, borrowed for `'a`; `baracuda-driver` builds them safely from its own
//! buffers and from cudarc slices, and [`DeviceSlice::from_raw_parts`] lets a
//! caller holding memory from elsewhere build one under an explicit contract.
//! Tensor and matrix views add a shape and element strides and check them
//! against the slice at construction, so plans only compare shapes.

use core::marker::PhantomData;
use core::ops::Range;

use crate::{DevPtr, DevPtrMut, Element, Error, Result, Shape};

/// Largest tensor rank the strided kernels take.
pub const MAX_RANK: usize = 8;

/// The accessors [`DeviceSlice`] and [`DeviceSliceMut`] share; `$ptr` is
/// the typed address `ptr()` returns, for `$role`.
macro_rules! slice_accessors {
    ($ptr:ident, $role:literal) => {
        /// Device address of the first element.
        pub fn addr(&self) -> u64 {
            self.addr
        }
        #[doc = concat!("Typed address of the first element, for ", $role, ".")]
        pub fn ptr(&self) -> $ptr<T> {
            $ptr::from_addr(self.addr)
        }
        /// Number of elements.
        pub fn len(&self) -> usize {
            self.len
        }
        /// True when the slice holds no element.
        pub fn is_empty(&self) -> bool {
            self.len == 0
        }
        /// The `CUcontext` handle (as a usize) the memory belongs to.
        pub fn ctx_id(&self) -> usize {
            self.ctx
        }
    };
}

/// A read-only borrow of `len` elements of device memory.
#[derive(Debug)]
pub struct DeviceSlice<'a, T> {
    addr: u64,
    len: usize,
    ctx: usize,
    _borrow: PhantomData<&'a [T]>,
}

impl<T> Clone for DeviceSlice<'_, T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for DeviceSlice<'_, T> {}

impl<'a, T> DeviceSlice<'a, T> {
    /// Build a view from a raw device address.
    ///
    /// # Safety
    /// `addr` must point to `len` initialised elements of `T` in device memory
    /// of the CUDA context whose `CUcontext` handle is `ctx` (as a usize),
    /// aligned for `T`, that stay allocated and are not written through
    /// another handle while `'a` lasts (except by work ordered on the same
    /// stream as the plans that read it).
    pub unsafe fn from_raw_parts(addr: u64, len: usize, ctx: usize) -> Self {
        DeviceSlice {
            addr,
            len,
            ctx,
            _borrow: PhantomData,
        }
    }
    slice_accessors!(DevPtr, "reading");
    /// A sub-slice, or `None` when the range is out of bounds.
    pub fn slice(&self, range: Range<usize>) -> Option<DeviceSlice<'a, T>> {
        if range.start > range.end || range.end > self.len {
            return None;
        }
        Some(DeviceSlice {
            addr: self.addr + (range.start * core::mem::size_of::<T>()) as u64,
            len: range.end - range.start,
            ctx: self.ctx,
            _borrow: PhantomData,
        })
    }
}

/// An exclusive borrow of `len` elements of device memory.
#[derive(Debug)]
pub struct DeviceSliceMut<'a, T> {
    addr: u64,
    len: usize,
    ctx: usize,
    _borrow: PhantomData<&'a mut [T]>,
}

impl<'a, T> DeviceSliceMut<'a, T> {
    /// Build a mutable view from a raw device address.
    ///
    /// # Safety
    /// As [`DeviceSlice::from_raw_parts`], and no other live view or handle
    /// may read or write the memory while `'a` lasts, except work ordered on
    /// the same stream.
    pub unsafe fn from_raw_parts(addr: u64, len: usize, ctx: usize) -> Self {
        DeviceSliceMut {
            addr,
            len,
            ctx,
            _borrow: PhantomData,
        }
    }
    slice_accessors!(DevPtrMut, "writing");
    /// Borrow again for a shorter lifetime.
    pub fn reborrow(&mut self) -> DeviceSliceMut<'_, T> {
        DeviceSliceMut {
            addr: self.addr,
            len: self.len,
            ctx: self.ctx,
            _borrow: PhantomData,
        }
    }
    /// A read-only view of the same memory.
    pub fn as_const(&self) -> DeviceSlice<'_, T> {
        DeviceSlice {
            addr: self.addr,
            len: self.len,
            ctx: self.ctx,
            _borrow: PhantomData,
        }
    }
    /// Split into two disjoint mutable slices at `mid`, or `None` when
    /// `mid > len`.
    pub fn split_at(self, mid: usize) -> Option<(DeviceSliceMut<'a, T>, DeviceSliceMut<'a, T>)> {
        if mid > self.len {
            return None;
        }
        let second = self.addr + (mid * core::mem::size_of::<T>()) as u64;
        Some((
            DeviceSliceMut {
                addr: self.addr,
                len: mid,
                ctx: self.ctx,
                _borrow: PhantomData,
            },
            DeviceSliceMut {
                addr: second,
                len: self.len - mid,
                ctx: self.ctx,
                _borrow: PhantomData,
            },
        ))
    }
}

/// Element strides of the logical `[N, C, spatial...]` `shape` stored
/// channels-last (`[N, spatial..., C]` row-major).
fn channels_last_strides<const N: usize>(
    op: &'static str,
    shape: &[usize; N],
) -> Result<[usize; N]> {
    if N < 3 {
        return Err(Error::InvalidArgument {
            op,
            arg: "shape",
            reason: format!("channels-last needs [N, C, spatial...], got rank {N}"),
        });
    }
    let mut strides = [0usize; N];
    strides[1] = 1;
    let mut acc = shape[1];
    for a in (2..N).rev() {
        strides[a] = acc;
        acc = acc.saturating_mul(shape[a]);
    }
    strides[0] = acc;
    Ok(strides)
}

/// Row-major (C) element strides of `shape`.
pub fn contiguous_strides<const N: usize>(shape: &[usize; N]) -> [usize; N] {
    let mut strides = [0usize; N];
    let mut s = 1usize;
    for i in (0..N).rev() {
        strides[i] = s;
        s = s.saturating_mul(shape[i].max(1));
    }
    strides
}

/// Elements a view of this shape and these strides reaches (max index + 1),
/// or 0 for an empty view. `None` on overflow.
fn span(shape: &[usize], strides: &[usize]) -> Option<usize> {
    if shape.contains(&0) {
        return Some(0);
    }
    let mut last = 0usize;
    for (&d, &s) in shape.iter().zip(strides) {
        last = last.checked_add((d - 1).checked_mul(s)?)?;
    }
    last.checked_add(1)
}

fn check_bounds(shape: &[usize], strides: &[usize], len: usize) -> Result<()> {
    let needed = span(shape, strides).ok_or_else(|| Error::Overflow {
        op: "tensor view",
        what: format!(
            "the extent of shape {} with strides {strides:?}",
            Shape::from(shape)
        ),
    })?;
    if needed > len {
        return Err(Error::ViewOutOfBounds {
            shape: Shape::from(shape),
            strides: strides.to_vec(),
            needed,
            len,
        });
    }
    Ok(())
}

/// True when no two indices of the view name the same element: sorted by
/// stride, every axis must step past everything the smaller axes reach.
fn is_non_overlapping(shape: &[usize], strides: &[usize]) -> bool {
    if shape.contains(&0) {
        return true;
    }
    let mut axes: Vec<(usize, usize)> = shape
        .iter()
        .zip(strides)
        .filter(|(&d, _)| d > 1)
        .map(|(&d, &s)| (s, d))
        .collect();
    axes.sort_unstable();
    let mut reach = 0usize; // largest offset reachable by the smaller axes
    for (s, d) in axes {
        if s <= reach {
            return false;
        }
        reach = match (d - 1).checked_mul(s).and_then(|x| x.checked_add(reach)) {
            Some(r) => r,
            None => return false,
        };
    }
    true
}

/// The constructors and accessors [`TensorRef`] and [`TensorMut`] share;
/// `$slice` is the slice type the view borrows.
macro_rules! tensor_accessors {
    ($slice:ident) => {
        /// A row-major contiguous view.
        ///
        /// # Errors
        /// As [`Self::new`].
        pub fn contiguous(data: $slice<'a, T>, shape: [usize; N]) -> Result<Self> {
            let strides = contiguous_strides(&shape);
            Self::new(data, shape, strides)
        }

        /// A dense channels-last view (PyTorch's `channels_last` memory
        /// format: `[N, H, W, C]` in memory) of the logical
        /// `[N, C, spatial...]` `shape`, as the convolution and pooling plans
        /// take it.
        ///
        /// # Errors
        /// As [`Self::new`]; `InvalidArgument` below rank 3.
        pub fn channels_last(data: $slice<'a, T>, shape: [usize; N]) -> Result<Self> {
            Self::new(data, shape, channels_last_strides("channels_last", &shape)?)
        }

        /// The shape.
        pub fn shape(&self) -> &[usize; N] {
            &self.shape
        }
        /// The element strides.
        pub fn strides(&self) -> &[usize; N] {
            &self.strides
        }
        /// Number of logical elements.
        pub fn n_elems(&self) -> usize {
            self.shape.iter().product()
        }
        /// True when the strides are the row-major strides of the shape
        /// (ignoring axes of extent 1).
        pub fn is_contiguous(&self) -> bool {
            is_contiguous(&self.shape, &self.strides)
        }
    };
}

/// A read-only strided view of a rank-`N` tensor in device memory.
///
/// Strides are in elements; a stride of 0 repeats an element along that
/// axis (broadcast). Construction proves every reachable element lies in the
/// slice.
#[derive(Debug)]
pub struct TensorRef<'a, T, const N: usize> {
    data: DeviceSlice<'a, T>,
    shape: [usize; N],
    strides: [usize; N],
}

impl<T, const N: usize> Clone for TensorRef<'_, T, N> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T, const N: usize> Copy for TensorRef<'_, T, N> {}

impl<'a, T: Element, const N: usize> TensorRef<'a, T, N> {
    /// A view with explicit element strides.
    ///
    /// # Errors
    /// `ViewOutOfBounds` when an element would lie past the slice;
    /// `Overflow` when the extent does not fit in `usize`.
    pub fn new(data: DeviceSlice<'a, T>, shape: [usize; N], strides: [usize; N]) -> Result<Self> {
        check_bounds(&shape, &strides, data.len())?;
        Ok(TensorRef {
            data,
            shape,
            strides,
        })
    }

    tensor_accessors!(DeviceSlice);

    /// Broadcast to a shape of rank `M >= N` by NumPy rules: axes align on
    /// the right, an extent-1 axis (or a missing leading one) repeats with
    /// stride 0.
    ///
    /// # Errors
    /// `BroadcastMismatch` when an axis is neither equal nor 1.
    pub fn broadcast_to<const M: usize>(&self, shape: [usize; M]) -> Result<TensorRef<'a, T, M>> {
        let mismatch = || Error::BroadcastMismatch {
            op: "broadcast_to",
            a: Shape::from(&self.shape[..]),
            b: Shape::from(&shape[..]),
        };
        if M < N {
            return Err(mismatch());
        }
        let mut strides = [0usize; M];
        for i in 0..N {
            let j = M - N + i;
            if self.shape[i] == shape[j] {
                strides[j] = self.strides[i];
            } else if self.shape[i] == 1 {
                strides[j] = 0;
            } else {
                return Err(mismatch());
            }
        }
        Ok(TensorRef {
            data: self.data,
            shape,
            strides,
        })
    }

    /// Reorder the axes: axis `i` of the result is axis `perm[i]` of `self`.
    ///
    /// # Errors
    /// `InvalidArgument` when `perm` is not a permutation of `0..N`.
    pub fn permute(&self, perm: [usize; N]) -> Result<Self> {
        let (shape, strides) = permuted(&self.shape, &self.strides, &perm)?;
        Ok(TensorRef {
            data: self.data,
            shape,
            strides,
        })
    }

    /// The underlying slice.
    pub fn data(&self) -> DeviceSlice<'a, T> {
        self.data
    }
}

fn is_contiguous(shape: &[usize], strides: &[usize]) -> bool {
    let mut expected = 1usize;
    for i in (0..shape.len()).rev() {
        if shape[i] != 1 && strides[i] != expected {
            return false;
        }
        expected = expected.saturating_mul(shape[i]);
    }
    true
}

fn permuted<const N: usize>(
    shape: &[usize; N],
    strides: &[usize; N],
    perm: &[usize; N],
) -> Result<([usize; N], [usize; N])> {
    let mut seen = [false; N];
    let mut s = [0usize; N];
    let mut st = [0usize; N];
    for (i, &p) in perm.iter().enumerate() {
        if p >= N || seen[p] {
            return Err(Error::InvalidArgument {
                op: "permute",
                arg: "perm",
                reason: format!("{perm:?} is not a permutation of 0..{N}"),
            });
        }
        seen[p] = true;
        s[i] = shape[p];
        st[i] = strides[p];
    }
    Ok((s, st))
}

/// A writable strided view of a rank-`N` tensor in device memory.
///
/// Construction proves every element lies in the slice and that no two
/// indices name the same element (so no stride 0 on an axis longer than 1).
#[derive(Debug)]
pub struct TensorMut<'a, T, const N: usize> {
    data: DeviceSliceMut<'a, T>,
    shape: [usize; N],
    strides: [usize; N],
}

impl<'a, T: Element, const N: usize> TensorMut<'a, T, N> {
    /// A writable view with explicit element strides.
    ///
    /// # Errors
    /// `ViewOutOfBounds`, `Overflow`, or `OverlappingView` when two indices
    /// would write one element.
    pub fn new(
        data: DeviceSliceMut<'a, T>,
        shape: [usize; N],
        strides: [usize; N],
    ) -> Result<Self> {
        check_bounds(&shape, &strides, data.len())?;
        if !is_non_overlapping(&shape, &strides) {
            return Err(Error::OverlappingView {
                shape: Shape::from(&shape[..]),
                strides: strides.to_vec(),
            });
        }
        Ok(TensorMut {
            data,
            shape,
            strides,
        })
    }

    tensor_accessors!(DeviceSliceMut);

    /// Reorder the axes: axis `i` of the result is axis `perm[i]` of `self`.
    ///
    /// # Errors
    /// `InvalidArgument` when `perm` is not a permutation of `0..N`.
    pub fn permute(self, perm: [usize; N]) -> Result<Self> {
        let (shape, strides) = permuted(&self.shape, &self.strides, &perm)?;
        Ok(TensorMut {
            data: self.data,
            shape,
            strides,
        })
    }

    /// Borrow again for a shorter lifetime.
    pub fn reborrow(&mut self) -> TensorMut<'_, T, N> {
        TensorMut {
            data: self.data.reborrow(),
            shape: self.shape,
            strides: self.strides,
        }
    }
    /// A read-only view of the same elements.
    pub fn as_const(&self) -> TensorRef<'_, T, N> {
        TensorRef {
            data: self.data.as_const(),
            shape: self.shape,
            strides: self.strides,
        }
    }
    /// The underlying slice.
    pub fn data(&self) -> &DeviceSliceMut<'a, T> {
        &self.data
    }
}

/// Storage order of a matrix view.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum MatrixOrder {
    /// Element `(r, c)` at `r * ld + c`.
    RowMajor,
    /// Element `(r, c)` at `c * ld + r`.
    ColMajor,
}

fn check_matrix(rows: usize, cols: usize, ld: usize, order: MatrixOrder, len: usize) -> Result<()> {
    let (outer, inner) = match order {
        MatrixOrder::RowMajor => (rows, cols),
        MatrixOrder::ColMajor => (cols, rows),
    };
    if outer > 1 && ld < inner.max(1) {
        return Err(Error::InvalidArgument {
            op: "matrix view",
            arg: "ld",
            reason: format!(
                "leading dimension {ld} is smaller than the contiguous extent {inner} \
                 ({order:?}, {rows}x{cols})"
            ),
        });
    }
    check_bounds(&[outer, inner], &[ld, 1], len)
}

/// The constructors and accessors [`MatrixRef`] and [`MatrixMut`] share;
/// `$slice` is the slice type the view borrows.
macro_rules! matrix_accessors {
    ($slice:ident) => {
        /// A matrix view.
        ///
        /// # Errors
        /// `InvalidArgument` when `ld` is smaller than the contiguous extent;
        /// `ViewOutOfBounds` when the last element lies past the slice.
        pub fn new(
            data: $slice<'a, T>,
            rows: usize,
            cols: usize,
            ld: usize,
            order: MatrixOrder,
        ) -> Result<Self> {
            check_matrix(rows, cols, ld, order, data.len())?;
            Ok(Self {
                data,
                rows,
                cols,
                ld,
                order,
            })
        }
        /// A packed row-major `rows x cols` view (`ld = cols`), as a PyTorch
        /// contiguous 2-D tensor is laid out.
        ///
        /// # Errors
        /// As [`Self::new`].
        pub fn row_major(data: $slice<'a, T>, rows: usize, cols: usize) -> Result<Self> {
            Self::new(data, rows, cols, cols, MatrixOrder::RowMajor)
        }
        /// Rows.
        pub fn rows(&self) -> usize {
            self.rows
        }
        /// Columns.
        pub fn cols(&self) -> usize {
            self.cols
        }
        /// Leading dimension in elements.
        pub fn ld(&self) -> usize {
            self.ld
        }
        /// Storage order.
        pub fn order(&self) -> MatrixOrder {
            self.order
        }
    };
}

/// A read-only matrix view: `rows x cols` elements with leading dimension
/// `ld` (elements between consecutive rows, or columns when column-major).
#[derive(Debug)]
pub struct MatrixRef<'a, T> {
    data: DeviceSlice<'a, T>,
    rows: usize,
    cols: usize,
    ld: usize,
    order: MatrixOrder,
}

impl<T> Clone for MatrixRef<'_, T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for MatrixRef<'_, T> {}

impl<'a, T: Element> MatrixRef<'a, T> {
    matrix_accessors!(DeviceSlice);
    /// The underlying slice.
    pub fn data(&self) -> DeviceSlice<'a, T> {
        self.data
    }
}

/// A writable matrix view; see [`MatrixRef`].
#[derive(Debug)]
pub struct MatrixMut<'a, T> {
    data: DeviceSliceMut<'a, T>,
    rows: usize,
    cols: usize,
    ld: usize,
    order: MatrixOrder,
}

impl<'a, T: Element> MatrixMut<'a, T> {
    matrix_accessors!(DeviceSliceMut);
    /// The underlying slice.
    pub fn data(&self) -> &DeviceSliceMut<'a, T> {
        &self.data
    }
    /// A read-only view of the same matrix.
    pub fn as_const(&self) -> MatrixRef<'_, T> {
        MatrixRef {
            data: self.data.as_const(),
            rows: self.rows,
            cols: self.cols,
            ld: self.ld,
            order: self.order,
        }
    }
}

/// Scratch device memory a caller lends to `run`.
#[derive(Debug)]
pub enum Workspace<'a> {
    /// No workspace; valid when the plan's `workspace_size()` is 0.
    None,
    /// A borrowed byte buffer, at least `workspace_size()` long.
    Borrowed(DeviceSliceMut<'a, u8>),
}

impl<'a> Workspace<'a> {
    /// Split off the first `bytes` for one part of a plan's work and return
    /// it with the rest. Plans that run several passes lay their scratch out
    /// this way; `bytes` is a multiple of 256 there, so the rest stays
    /// aligned for every element type.
    ///
    /// # Errors
    /// `WorkspaceTooSmall` when fewer than `bytes` are available.
    pub fn split_at(
        self,
        op: &'static str,
        bytes: usize,
    ) -> Result<(Workspace<'a>, Workspace<'a>)> {
        match self {
            _ if bytes == 0 => Ok((Workspace::None, self)),
            Workspace::Borrowed(s) => {
                let got = s.len();
                let (head, rest) = s.split_at(bytes).ok_or(Error::WorkspaceTooSmall {
                    op,
                    needed: bytes,
                    got,
                })?;
                Ok((Workspace::Borrowed(head), Workspace::Borrowed(rest)))
            }
            Workspace::None => Err(Error::WorkspaceTooSmall {
                op,
                needed: bytes,
                got: 0,
            }),
        }
    }

    /// Bytes available.
    pub fn bytes(&self) -> usize {
        match self {
            Workspace::None => 0,
            Workspace::Borrowed(s) => s.len(),
        }
    }

    /// Check the workspace holds `needed` bytes on context `ctx` and return
    /// its device address (0 when nothing is needed and none was given).
    ///
    /// # Errors
    /// `WorkspaceTooSmall`, or `ContextMismatch` when it lives elsewhere.
    pub fn check(&self, op: &'static str, needed: usize, ctx: usize) -> Result<u64> {
        let got = self.bytes();
        if got < needed {
            return Err(Error::WorkspaceTooSmall { op, needed, got });
        }
        match self {
            Workspace::None => Ok(0),
            Workspace::Borrowed(s) => {
                if s.ctx_id() != ctx {
                    return Err(Error::ContextMismatch {
                        op,
                        arg: "workspace",
                    });
                }
                Ok(s.addr())
            }
        }
    }

    /// [`Workspace::check`], returning the typed address (null when nothing
    /// is needed and none was given).
    ///
    /// # Errors
    /// As [`Workspace::check`].
    pub fn check_ptr(&self, op: &'static str, needed: usize, ctx: usize) -> Result<DevPtrMut<u8>> {
        self.check(op, needed, ctx).map(DevPtrMut::from_addr)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn slice<'a>(len: usize) -> DeviceSlice<'a, f32> {
        // SAFETY: the views are only inspected on the host; nothing reads
        // the fake address.
        unsafe { DeviceSlice::from_raw_parts(0x1000, len, 1) }
    }
    fn slice_mut<'a>(len: usize) -> DeviceSliceMut<'a, f32> {
        // SAFETY: as above.
        unsafe { DeviceSliceMut::from_raw_parts(0x1000, len, 1) }
    }

    #[test]
    fn row_major_matrices_are_packed() {
        let m = MatrixRef::row_major(slice(12), 3, 4).unwrap();
        assert_eq!(
            (m.rows(), m.cols(), m.ld(), m.order()),
            (3, 4, 4, MatrixOrder::RowMajor)
        );
        assert!(MatrixRef::row_major(slice(11), 3, 4).is_err());
        assert!(MatrixMut::row_major(slice_mut(12), 4, 3).is_ok());
    }

    #[test]
    fn channels_last_views() {
        let v = TensorRef::channels_last(slice(2 * 3 * 4 * 5), [2, 3, 4, 5]).unwrap();
        assert_eq!(v.strides(), &[60, 1, 15, 3]);
        assert!(TensorRef::channels_last(slice(119), [2, 3, 4, 5]).is_err());
        assert!(matches!(
            TensorMut::channels_last(slice_mut(6), [2, 3]),
            Err(Error::InvalidArgument { .. })
        ));
    }

    #[test]
    fn workspace_splits_in_bounds() {
        // SAFETY: host-only view of a fake address.
        let ws = Workspace::Borrowed(unsafe { DeviceSliceMut::from_raw_parts(0x1000, 1024, 1) });
        let (head, rest) = ws.split_at("t", 256).unwrap();
        assert_eq!((head.bytes(), rest.bytes()), (256, 768));
        assert_eq!(rest.check("t", 768, 1).unwrap(), 0x1100);
        let (none, all) = rest.split_at("t", 0).unwrap();
        assert_eq!((none.bytes(), all.bytes()), (0, 768));
        assert!(matches!(
            all.split_at("t", 769),
            Err(Error::WorkspaceTooSmall {
                needed: 769,
                got: 768,
                ..
            })
        ));
        assert!(Workspace::None.split_at("t", 1).is_err());
    }

    #[test]
    fn bounds_are_checked() {
        assert!(TensorRef::contiguous(slice(12), [3, 4]).is_ok());
        assert!(matches!(
            TensorRef::contiguous(slice(11), [3, 4]),
            Err(Error::ViewOutOfBounds {
                needed: 12,
                len: 11,
                ..
            })
        ));
        // strided: last element at 2*10 + 3*1 = 23
        assert!(TensorRef::new(slice(24), [3, 4], [10, 1]).is_ok());
        assert!(TensorRef::new(slice(23), [3, 4], [10, 1]).is_err());
        // empty views need nothing
        assert!(TensorRef::contiguous(slice(0), [0, 4]).is_ok());
        // overflow is an error, not a wrap
        assert!(matches!(
            TensorRef::new(slice(10), [usize::MAX, 2], [2, 1]),
            Err(Error::Overflow { .. })
        ));
    }

    #[test]
    fn mutable_views_reject_overlap() {
        assert!(TensorMut::contiguous(slice_mut(12), [3, 4]).is_ok());
        assert!(matches!(
            TensorMut::new(slice_mut(12), [3, 4], [0, 1]),
            Err(Error::OverlappingView { .. })
        ));
        assert!(matches!(
            TensorMut::new(slice_mut(12), [2, 4], [2, 1]),
            Err(Error::OverlappingView { .. })
        ));
        // transposed is fine
        assert!(TensorMut::new(slice_mut(12), [4, 3], [1, 4]).is_ok());
        // extent-1 axes may have any stride
        assert!(TensorMut::new(slice_mut(4), [1, 4], [0, 1]).is_ok());
    }

    #[test]
    fn broadcast_and_permute() {
        let t = TensorRef::contiguous(slice(4), [4]).unwrap();
        let b = t.broadcast_to([3, 4]).unwrap();
        assert_eq!(b.strides(), &[0, 1]);
        assert!(t.broadcast_to([3, 5]).is_err());
        let m = TensorRef::contiguous(slice(12), [3, 4]).unwrap();
        let p = m.permute([1, 0]).unwrap();
        assert_eq!(p.shape(), &[4, 3]);
        assert_eq!(p.strides(), &[1, 4]);
        assert!(!p.is_contiguous());
        assert!(m.permute([0, 0]).is_err());
    }

    #[test]
    fn matrices() {
        assert!(MatrixRef::new(slice(12), 3, 4, 4, MatrixOrder::RowMajor).is_ok());
        assert!(MatrixRef::new(slice(12), 3, 4, 3, MatrixOrder::RowMajor).is_err());
        assert!(MatrixRef::new(slice(12), 3, 4, 3, MatrixOrder::ColMajor).is_ok());
        assert!(MatrixRef::new(slice(11), 3, 4, 3, MatrixOrder::ColMajor).is_err());
    }

    #[test]
    fn workspace_checks() {
        assert!(Workspace::None.check("op", 0, 1).is_ok());
        assert!(matches!(
            Workspace::None.check("op", 16, 1),
            Err(Error::WorkspaceTooSmall {
                needed: 16,
                got: 0,
                ..
            })
        ));
        // SAFETY: host-only inspection.
        let ws = unsafe { DeviceSliceMut::<u8>::from_raw_parts(0x2000, 64, 2) };
        assert!(matches!(
            Workspace::Borrowed(ws).check("op", 16, 1),
            Err(Error::ContextMismatch { .. })
        ));
    }
}
