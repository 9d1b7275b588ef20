//! DLPack interop: tensors from PyTorch, JAX, CuPy (through a Python
//! binding layer that hands over the capsule's pointer) run through plans
//! without a copy, and device buffers go the other way.
//!
//! The structs follow `dlpack.h` (v1.0, ABI-compatible with v0.8 for
//! [`DLManagedTensor`]): [`DLTensor`] describes the memory,
//! [`DLManagedTensor`] and [`DLManagedTensorVersioned`] add the owner's
//! context and the deleter that releases it.
//!
//! - **Import**: [`DlpackTensor::from_raw`] takes ownership of a managed
//!   tensor (either struct: [`ManagedTensor`]) on a CUDA device and calls
//!   its deleter when dropped. Its
//!   [`view`](DlpackTensor::view) and [`view_mut`](DlpackTensor::view_mut)
//!   check the device type (`kDLCUDA` or `kDLCUDAManaged`), the device
//!   ordinal against the context, the dtype against the element type, the
//!   rank, and the alignment of `data + byte_offset`; null strides mean a
//!   row-major contiguous tensor; negative strides are rejected.
//! - **Export**: [`into_dlpack`] hands a [`DeviceBuffer`] with a shape
//!   (and optional strides) to a consumer as either struct; the deleter
//!   frees the buffer and the shape arrays.
//!
//! DLPack does not carry a stream: the producer's pending work must be
//! ordered before the consumer's (the Python `__dlpack__(stream=...)`
//! protocol arranges this; from Rust, synchronize the stream that wrote the
//! buffer before exporting it, and have an imported tensor's producer do
//! the same).
//!
//! ```no_run
//! use baracuda_driver::dlpack::{self, DLManagedTensor, DlpackTensor};
//! use baracuda_driver::{Context, Device, DeviceBuffer, Stream};
//!
//! # fn main() -> baracuda_driver::Result<()> {
//! let ctx = Context::new(&Device::get(0)?)?;
//! let stream = Stream::new(&ctx)?;
//! let buf = DeviceBuffer::<f32>::from_host(&stream, &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0])?;
//! // Hand the buffer to a consumer as a 2x3 row-major tensor...
//! let raw: *mut DLManagedTensor = dlpack::into_dlpack(buf, &[2, 3], None)?;
//! // ...and take it back (as a consumer would a PyTorch capsule's pointer).
//! // SAFETY: `raw` is a live managed tensor whose ownership moves here.
//! let t = unsafe { DlpackTensor::from_raw(raw, &ctx)? };
//! let view = t.view::<f32, 2>()?;
//! assert_eq!(view.shape(), &[2, 3]);
//! drop(t); // calls the deleter, which frees the device buffer
//! # Ok(())
//! # }
//! ```

use std::ffi::c_void;
use std::ptr::NonNull;

use baracuda_kernels_types::{
    DeviceSlice, DeviceSliceMut, Element, ElementKind, Error, Result, TensorMut, TensorRef,
};

use crate::context::Context;
use crate::memory::DeviceBuffer;

/// The DLPack version these structs follow (`DLPACK_MAJOR_VERSION`,
/// `DLPACK_MINOR_VERSION`).
pub const DLPACK_VERSION: DLPackVersion = DLPackVersion { major: 1, minor: 0 };
/// `DLPACK_FLAG_BITMASK_READ_ONLY`: the consumer must not write.
pub const DLPACK_FLAG_BITMASK_READ_ONLY: u64 = 1;
/// `DLPACK_FLAG_BITMASK_IS_COPIED`: the producer made a copy for the
/// consumer.
pub const DLPACK_FLAG_BITMASK_IS_COPIED: u64 = 1 << 1;

/// `DLDeviceType`, kept as its C `int` so any value a producer writes is
/// valid to read.
#[repr(transparent)]
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub struct DLDeviceType(pub i32);

impl DLDeviceType {
    /// `kDLCPU`.
    pub const CPU: Self = Self(1);
    /// `kDLCUDA`: CUDA device memory.
    pub const CUDA: Self = Self(2);
    /// `kDLCUDAHost`: pinned host memory.
    pub const CUDA_HOST: Self = Self(3);
    /// `kDLCUDAManaged`: CUDA managed (unified) memory.
    pub const CUDA_MANAGED: Self = Self(13);
}

/// `DLDevice`: where the data lives.
#[repr(C)]
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct DLDevice {
    /// The device type.
    pub device_type: DLDeviceType,
    /// The device ordinal (CUDA: the ordinal the driver numbers devices by).
    pub device_id: i32,
}

/// `DLDataType`: type code, bits per lane and lanes per element.
#[repr(C)]
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct DLDataType {
    /// `DLDataTypeCode` (one of the `DLDataType::*` code constants).
    pub code: u8,
    /// Bits per lane.
    pub bits: u8,
    /// Lanes (1 for scalars).
    pub lanes: u16,
}

impl DLDataType {
    /// `kDLInt`.
    pub const INT: u8 = 0;
    /// `kDLUInt`.
    pub const UINT: u8 = 1;
    /// `kDLFloat`.
    pub const FLOAT: u8 = 2;
    /// `kDLBfloat`.
    pub const BFLOAT: u8 = 4;
    /// `kDLBool`.
    pub const BOOL: u8 = 6;
    /// `kDLFloat8_e4m3fn` (OCP E4M3, finite-only).
    pub const FLOAT8_E4M3FN: u8 = 10;
    /// `kDLFloat8_e5m2`.
    pub const FLOAT8_E5M2: u8 = 12;

    /// The DLPack type of an element kind (one lane).
    pub fn of(kind: ElementKind) -> DLDataType {
        let (code, bits) = match kind {
            ElementKind::F32 => (Self::FLOAT, 32),
            ElementKind::F64 => (Self::FLOAT, 64),
            ElementKind::F16 => (Self::FLOAT, 16),
            ElementKind::Bf16 => (Self::BFLOAT, 16),
            ElementKind::I8 => (Self::INT, 8),
            ElementKind::U8 => (Self::UINT, 8),
            ElementKind::I16 => (Self::INT, 16),
            ElementKind::I32 => (Self::INT, 32),
            ElementKind::I64 => (Self::INT, 64),
            ElementKind::U32 => (Self::UINT, 32),
            ElementKind::Bool => (Self::BOOL, 8),
            ElementKind::Fp8E4M3 => (Self::FLOAT8_E4M3FN, 8),
            ElementKind::Fp8E5M2 => (Self::FLOAT8_E5M2, 8),
        };
        DLDataType {
            code,
            bits,
            lanes: 1,
        }
    }

    /// The element kind of a DLPack type, None for types baracuda has no
    /// element for (complex, vector lanes, other fp8 formats).
    pub fn kind(self) -> Option<ElementKind> {
        ElementKind::ALL
            .into_iter()
            .find(|&k| DLDataType::of(k) == self)
    }
}

/// `DLTensor`: a strided view of memory on one device. Shapes and strides
/// are in elements; null `strides` means row-major contiguous.
#[repr(C)]
#[derive(Copy, Clone, Debug)]
pub struct DLTensor {
    /// Base address (a device address for CUDA tensors).
    pub data: *mut c_void,
    /// Where the data lives.
    pub device: DLDevice,
    /// Rank.
    pub ndim: i32,
    /// Element type.
    pub dtype: DLDataType,
    /// `ndim` extents.
    pub shape: *mut i64,
    /// `ndim` strides in elements, or null for row-major contiguous.
    pub strides: *mut i64,
    /// Bytes from `data` to the first element.
    pub byte_offset: u64,
}

/// `DLManagedTensor` (DLPack < 1.0, still what `torch.utils.dlpack` and
/// most `__dlpack__` implementations hand out by default).
#[repr(C)]
#[derive(Debug)]
pub struct DLManagedTensor {
    /// The tensor.
    pub dl_tensor: DLTensor,
    /// The producer's context for `deleter`.
    pub manager_ctx: *mut c_void,
    /// Releases the tensor; called once by the consumer, may be null.
    pub deleter: Option<unsafe extern "C" fn(*mut DLManagedTensor)>,
}

/// `DLPackVersion`.
#[repr(C)]
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct DLPackVersion {
    /// Major version (ABI).
    pub major: u32,
    /// Minor version.
    pub minor: u32,
}

/// `DLManagedTensorVersioned` (DLPack 1.0): adds the version and flags.
#[repr(C)]
#[derive(Debug)]
pub struct DLManagedTensorVersioned {
    /// The DLPack version the producer wrote.
    pub version: DLPackVersion,
    /// The producer's context for `deleter`.
    pub manager_ctx: *mut c_void,
    /// Releases the tensor; called once by the consumer, may be null.
    pub deleter: Option<unsafe extern "C" fn(*mut DLManagedTensorVersioned)>,
    /// `DLPACK_FLAG_BITMASK_*` bits.
    pub flags: u64,
    /// The tensor.
    pub dl_tensor: DLTensor,
}

mod sealed {
    pub trait Sealed {}
    impl Sealed for super::DLManagedTensor {}
    impl Sealed for super::DLManagedTensorVersioned {}
}

/// The two managed-tensor structs ([`DLManagedTensor`] and DLPack 1.0's
/// [`DLManagedTensorVersioned`]), as import and export use them.
pub trait ManagedTensor: sealed::Sealed + Sized {
    /// The tensor description.
    fn dl_tensor(&self) -> &DLTensor;
    /// The DLPack version the producer wrote (None before 1.0).
    fn version(&self) -> Option<DLPackVersion>;
    /// `DLPACK_FLAG_BITMASK_*` bits (0 before 1.0).
    fn flags(&self) -> u64;
    /// The producer's release function.
    fn deleter(&self) -> Option<unsafe extern "C" fn(*mut Self)>;
    /// The producer's context.
    fn manager_ctx(&self) -> *mut c_void;
    /// A managed tensor as this crate exports it (version 1.0, no flags).
    fn exported(
        dl_tensor: DLTensor,
        manager_ctx: *mut c_void,
        deleter: unsafe extern "C" fn(*mut Self),
    ) -> Self;
}

/// The accessors whose fields both structs name alike.
macro_rules! same_fields {
    () => {
        fn dl_tensor(&self) -> &DLTensor {
            &self.dl_tensor
        }
        fn deleter(&self) -> Option<unsafe extern "C" fn(*mut Self)> {
            self.deleter
        }
        fn manager_ctx(&self) -> *mut c_void {
            self.manager_ctx
        }
    };
}

impl ManagedTensor for DLManagedTensor {
    same_fields!();
    fn version(&self) -> Option<DLPackVersion> {
        None
    }
    fn flags(&self) -> u64 {
        0
    }
    fn exported(
        dl_tensor: DLTensor,
        manager_ctx: *mut c_void,
        deleter: unsafe extern "C" fn(*mut Self),
    ) -> Self {
        DLManagedTensor {
            dl_tensor,
            manager_ctx,
            deleter: Some(deleter),
        }
    }
}

impl ManagedTensor for DLManagedTensorVersioned {
    same_fields!();
    fn version(&self) -> Option<DLPackVersion> {
        Some(self.version)
    }
    fn flags(&self) -> u64 {
        self.flags
    }
    fn exported(
        dl_tensor: DLTensor,
        manager_ctx: *mut c_void,
        deleter: unsafe extern "C" fn(*mut Self),
    ) -> Self {
        DLManagedTensorVersioned {
            version: DLPACK_VERSION,
            manager_ctx,
            deleter: Some(deleter),
            flags: 0,
            dl_tensor,
        }
    }
}

/// Call the deleter of the `M` at `p`, if it has one.
///
/// # Safety
/// `p` is a live `M` owned by the caller, released once.
unsafe fn release<M: ManagedTensor>(p: NonNull<c_void>) {
    let m = p.cast::<M>();
    // SAFETY: `p` is a live `M` (caller's contract).
    if let Some(d) = unsafe { m.as_ref() }.deleter() {
        // SAFETY: the deleter is called once, with its own tensor.
        unsafe { d(m.as_ptr()) };
    }
}

/// An imported DLPack tensor: owns the producer's managed tensor and calls
/// its deleter when dropped. Views borrow it.
#[derive(Debug)]
pub struct DlpackTensor {
    /// The producer's managed tensor, released by `release`.
    managed: NonNull<c_void>,
    release: unsafe fn(NonNull<c_void>),
    ctx: usize,
    kind: ElementKind,
    /// Address of the first element (`data + byte_offset`).
    addr: u64,
    shape: Vec<usize>,
    strides: Vec<usize>,
    read_only: bool,
}

// SAFETY: the handle only reads the producer's immutable tensor
// description and calls the deleter once; DLPack allows the deleter to be
// called from any thread.
unsafe impl Send for DlpackTensor {}
// SAFETY: shared access only reads the description.
unsafe impl Sync for DlpackTensor {}

const OP: &str = "DlpackTensor";

fn invalid(arg: &'static str, reason: String) -> Error {
    Error::InvalidArgument {
        op: OP,
        arg,
        reason,
    }
}

impl DlpackTensor {
    /// Take ownership of a managed tensor (a [`DLManagedTensor`] or a
    /// DLPack 1.0 [`DLManagedTensorVersioned`]) on `ctx`'s device. The
    /// deleter runs when the returned handle is dropped, or before this
    /// returns an error. A tensor flagged read-only gives only
    /// [`view`](DlpackTensor::view).
    ///
    /// # Errors
    /// `InvalidArgument` for a null pointer, a device that is not CUDA or
    /// not `ctx`'s, a bad rank, a null shape, or a negative extent or
    /// stride; `Unsupported` for a dtype baracuda has no element for or a
    /// DLPack major version other than 1; `Overflow` when the extent does
    /// not fit the address space.
    ///
    /// # Safety
    /// `ptr` is null or a live managed tensor whose ownership passes to
    /// this call (the caller must not call its deleter), whose `shape` and
    /// `strides` hold `ndim` values, and whose data stays allocated and is
    /// not written by others, except in stream order, until the deleter
    /// runs.
    pub unsafe fn from_raw<M: ManagedTensor>(ptr: *mut M, ctx: &Context) -> Result<Self> {
        let managed = NonNull::new(ptr).ok_or_else(|| invalid("ptr", "null".into()))?;
        // SAFETY: forwarded from the caller.
        unsafe { Self::adopt(managed, ctx.device().ordinal, ctx.id()) }
    }

    /// Own `managed` (so an error below still runs its deleter) and read
    /// its description.
    ///
    /// # Safety
    /// As [`DlpackTensor::from_raw`].
    unsafe fn adopt<M: ManagedTensor>(
        managed: NonNull<M>,
        ordinal: usize,
        ctx: usize,
    ) -> Result<Self> {
        let mut t = DlpackTensor {
            managed: managed.cast(),
            release: release::<M>,
            ctx,
            kind: ElementKind::U8,
            addr: 0,
            shape: Vec::new(),
            strides: Vec::new(),
            read_only: false,
        };
        // SAFETY: the pointer is live (caller's contract).
        let m = unsafe { managed.as_ref() };
        let (dl, version, flags) = (*m.dl_tensor(), m.version(), m.flags());
        if let Some(v) = version {
            if v.major != DLPACK_VERSION.major {
                return Err(Error::Unsupported {
                    op: OP,
                    what: format!("DLPack version {}.{}", v.major, v.minor),
                });
            }
        }
        t.read_only = flags & DLPACK_FLAG_BITMASK_READ_ONLY != 0;
        let dev = dl.device;
        if dev.device_type != DLDeviceType::CUDA && dev.device_type != DLDeviceType::CUDA_MANAGED {
            return Err(invalid(
                "device",
                format!(
                    "device type {} is not CUDA memory (kDLCUDA = 2, kDLCUDAManaged = 13)",
                    dev.device_type.0
                ),
            ));
        }
        if usize::try_from(dev.device_id).ok() != Some(ordinal) {
            return Err(invalid(
                "device",
                format!(
                    "the tensor is on CUDA device {}, the context on device {ordinal}",
                    dev.device_id
                ),
            ));
        }
        t.kind = dl.dtype.kind().ok_or_else(|| Error::Unsupported {
            op: OP,
            what: format!(
                "DLPack dtype code {} with {} bits and {} lanes",
                dl.dtype.code, dl.dtype.bits, dl.dtype.lanes
            ),
        })?;
        let ndim = usize::try_from(dl.ndim)
            .map_err(|_| invalid("ndim", format!("negative rank {}", dl.ndim)))?;
        // SAFETY: `shape` and `strides` (when not null) hold `ndim` values.
        let (shape, strides) = unsafe {
            (
                raw_dims(dl.shape, ndim, "shape")?,
                match dl.strides.is_null() {
                    true => None,
                    false => Some(raw_dims(dl.strides, ndim, "strides")?),
                },
            )
        };
        t.shape = shape;
        t.strides = match strides {
            Some(s) => s,
            None => row_major(&t.shape)?,
        };
        t.addr = (dl.data as u64)
            .checked_add(dl.byte_offset)
            .ok_or_else(|| Error::Overflow {
                op: OP,
                what: "data + byte_offset".into(),
            })?;
        Ok(t)
    }

    /// The element kind the producer declared.
    pub fn kind(&self) -> ElementKind {
        self.kind
    }

    /// Extents.
    pub fn shape(&self) -> &[usize] {
        &self.shape
    }

    /// Strides in elements.
    pub fn strides(&self) -> &[usize] {
        &self.strides
    }

    /// True when the producer flagged the tensor read-only (DLPack 1.0).
    pub fn is_read_only(&self) -> bool {
        self.read_only
    }

    /// Check `T` and `N` against the tensor; the element count the view
    /// reaches.
    fn check<T: Element, const N: usize>(&self) -> Result<([usize; N], [usize; N], usize)> {
        if T::KIND != self.kind {
            return Err(Error::DtypeMismatch {
                op: OP,
                arg: "T",
                expected: self.kind,
                got: T::KIND,
            });
        }
        let rank_err = || {
            invalid(
                "N",
                format!("rank {} tensor viewed with rank {N}", self.shape.len()),
            )
        };
        let shape: [usize; N] = self.shape.as_slice().try_into().map_err(|_| rank_err())?;
        let strides: [usize; N] = self.strides.as_slice().try_into().map_err(|_| rank_err())?;
        if !self.addr.is_multiple_of(std::mem::align_of::<T>() as u64) {
            return Err(invalid(
                "data",
                format!("address {:#x} is not aligned for {}", self.addr, T::KIND),
            ));
        }
        let len = extent(&shape, &strides)?;
        Ok((shape, strides, len))
    }

    /// A read-only view of the tensor as `T` with rank `N`.
    ///
    /// # Errors
    /// `DtypeMismatch` when `T` is not the tensor's dtype; `InvalidArgument`
    /// when `N` is not its rank or its address is misaligned for `T`;
    /// `Overflow` as for any view.
    pub fn view<T: Element, const N: usize>(&self) -> Result<TensorRef<'_, T, N>> {
        let (shape, strides, len) = self.check::<T, N>()?;
        // SAFETY: the producer guarantees the `len` elements the strides
        // reach are allocated on this context's device until the deleter
        // runs, which is after every borrow of `self` ends.
        let data = unsafe { DeviceSlice::from_raw_parts(self.addr, len, self.ctx) };
        TensorRef::new(data, shape, strides)
    }

    /// A writable view of the tensor as `T` with rank `N`.
    ///
    /// # Errors
    /// As [`DlpackTensor::view`]; `InvalidArgument` when the producer
    /// flagged the tensor read-only; `OverlappingView` when strides alias
    /// elements (a broadcast tensor).
    pub fn view_mut<T: Element, const N: usize>(&mut self) -> Result<TensorMut<'_, T, N>> {
        if self.read_only {
            return Err(invalid(
                "tensor",
                "the producer flagged it read-only".into(),
            ));
        }
        let (shape, strides, len) = self.check::<T, N>()?;
        // SAFETY: as in `view`; `&mut self` makes this the only view.
        let data = unsafe { DeviceSliceMut::from_raw_parts(self.addr, len, self.ctx) };
        TensorMut::new(data, shape, strides)
    }
}

impl Drop for DlpackTensor {
    fn drop(&mut self) {
        // SAFETY: this handle owns the managed tensor, of the type `release`
        // was instantiated for; it is released once, here.
        unsafe { (self.release)(self.managed) };
    }
}

/// `n` non-negative `i64`s at `p` as `usize`s.
///
/// # Safety
/// `p` is null or holds `n` values.
unsafe fn raw_dims(p: *const i64, n: usize, arg: &'static str) -> Result<Vec<usize>> {
    if n == 0 {
        return Ok(Vec::new());
    }
    if p.is_null() {
        return Err(invalid(arg, format!("null with rank {n}")));
    }
    // SAFETY: `p` holds `n` values (caller's contract).
    let vals = unsafe { std::slice::from_raw_parts(p, n) };
    vals.iter()
        .map(|&v| {
            usize::try_from(v).map_err(|_| {
                invalid(
                    arg,
                    format!("{vals:?} has a negative value (negative strides are not supported)"),
                )
            })
        })
        .collect()
}

/// Row-major strides of `shape`.
fn row_major(shape: &[usize]) -> Result<Vec<usize>> {
    let mut strides = vec![0usize; shape.len()];
    let mut acc = 1usize;
    for (s, &d) in strides.iter_mut().zip(shape).rev() {
        *s = acc;
        acc = acc.checked_mul(d.max(1)).ok_or_else(|| Error::Overflow {
            op: OP,
            what: format!("the strides of shape {shape:?}"),
        })?;
    }
    Ok(strides)
}

/// Elements a strided view reaches (largest index + 1; 0 when empty).
fn extent(shape: &[usize], strides: &[usize]) -> Result<usize> {
    if shape.contains(&0) {
        return Ok(0);
    }
    shape
        .iter()
        .zip(strides)
        .try_fold(1usize, |acc, (&d, &s)| {
            acc.checked_add((d - 1).checked_mul(s)?)
        })
        .ok_or_else(|| Error::Overflow {
            op: OP,
            what: format!("the extent of shape {shape:?} with strides {strides:?}"),
        })
}

// ---------------------------------------------------------------------------
// Export
// ---------------------------------------------------------------------------

/// What an exported tensor's `manager_ctx` points to: the owner of the
/// memory and the arrays `shape` and `strides` point into.
struct Exported {
    _owner: Box<dyn Send>,
    shape: Vec<i64>,
    strides: Vec<i64>,
}

/// The owner, shape and strides of an export, checked against the owner's
/// `len` elements of `kind` at `addr` on device `ordinal`.
fn exported_tensor(
    owner: Box<dyn Send>,
    addr: u64,
    len: usize,
    kind: ElementKind,
    ordinal: usize,
    shape: &[usize],
    strides: Option<&[usize]>,
) -> Result<(Box<Exported>, DLTensor)> {
    let op = "dlpack::into_dlpack";
    let strides = match strides {
        Some(s) if s.len() != shape.len() => {
            return Err(Error::InvalidArgument {
                op,
                arg: "strides",
                reason: format!("{} strides for rank {}", s.len(), shape.len()),
            })
        }
        Some(s) => s.to_vec(),
        None => row_major(shape)?,
    };
    let needed = extent(shape, &strides)?;
    if needed > len {
        return Err(Error::ViewOutOfBounds {
            shape: shape.into(),
            strides,
            needed,
            len,
        });
    }
    let to_i64 = |v: &[usize]| -> Result<Vec<i64>> {
        v.iter()
            .map(|&x| {
                i64::try_from(x).map_err(|_| Error::Overflow {
                    op,
                    what: format!("{x} as a DLPack int64"),
                })
            })
            .collect()
    };
    let mut ex = Box::new(Exported {
        _owner: owner,
        shape: to_i64(shape)?,
        strides: to_i64(&strides)?,
    });
    let dl = DLTensor {
        data: addr as *mut c_void,
        device: DLDevice {
            device_type: DLDeviceType::CUDA,
            device_id: i32::try_from(ordinal).map_err(|_| Error::Overflow {
                op,
                what: format!("device ordinal {ordinal}"),
            })?,
        },
        ndim: i32::try_from(shape.len()).map_err(|_| Error::Overflow {
            op,
            what: format!("rank {}", shape.len()),
        })?,
        dtype: DLDataType::of(kind),
        shape: ex.shape.as_mut_ptr(),
        strides: ex.strides.as_mut_ptr(),
        byte_offset: 0,
    };
    Ok((ex, dl))
}

/// The deleter of every tensor this crate exports.
///
/// # Safety
/// `p` is null or was made by [`export`], and is released once.
unsafe extern "C" fn delete_exported<M: ManagedTensor>(p: *mut M) {
    if p.is_null() {
        return;
    }
    // SAFETY: `p` and its `manager_ctx` were made by `Box::into_raw` in
    // `export` and are released once, here.
    unsafe {
        let m = Box::from_raw(p);
        drop(Box::from_raw(m.manager_ctx() as *mut Exported));
    }
}

/// A managed tensor owning `owner`, which holds `len` elements of `kind`
/// at `addr` on device `ordinal`.
fn export<M: ManagedTensor>(
    owner: Box<dyn Send>,
    addr: u64,
    len: usize,
    kind: ElementKind,
    ordinal: usize,
    shape: &[usize],
    strides: Option<&[usize]>,
) -> Result<*mut M> {
    let (ex, dl_tensor) = exported_tensor(owner, addr, len, kind, ordinal, shape, strides)?;
    let ctx = Box::into_raw(ex) as *mut c_void;
    Ok(Box::into_raw(Box::new(M::exported(
        dl_tensor,
        ctx,
        delete_exported::<M>,
    ))))
}

/// Hand `buffer` to a DLPack consumer as a tensor of `shape` with
/// `strides` in elements (row-major when None), as a [`DLManagedTensor`]
/// or a DLPack 1.0 [`DLManagedTensorVersioned`] (no flags set: writable,
/// not a copy). The consumer owns the result and calls its deleter once,
/// which frees the buffer (in stream order on the stream that allocated
/// it).
///
/// # Errors
/// `InvalidArgument` when `strides` has another rank than `shape`;
/// `ViewOutOfBounds` when the tensor would reach past the buffer;
/// `Overflow` when a value does not fit DLPack's integers.
pub fn into_dlpack<M: ManagedTensor, T: Element>(
    buffer: DeviceBuffer<T>,
    shape: &[usize],
    strides: Option<&[usize]>,
) -> Result<*mut M> {
    let (addr, len) = (buffer.as_slice().addr(), buffer.len());
    let ordinal = buffer.context().device().ordinal;
    export(
        Box::new(buffer),
        addr,
        len,
        T::KIND,
        ordinal,
        shape,
        strides,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::mem::{align_of, offset_of, size_of};
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    /// The layouts `dlpack.h` gives on 64-bit platforms.
    #[test]
    fn struct_layouts_match_dlpack_h() {
        let layout = [
            ("sizeof DLDevice", size_of::<DLDevice>(), 8),
            ("sizeof DLDataType", size_of::<DLDataType>(), 4),
            ("DLDataType.bits", offset_of!(DLDataType, bits), 1),
            ("DLDataType.lanes", offset_of!(DLDataType, lanes), 2),
            ("sizeof DLTensor", size_of::<DLTensor>(), 48),
            ("alignof DLTensor", align_of::<DLTensor>(), 8),
            ("DLTensor.data", offset_of!(DLTensor, data), 0),
            ("DLTensor.device", offset_of!(DLTensor, device), 8),
            ("DLTensor.ndim", offset_of!(DLTensor, ndim), 16),
            ("DLTensor.dtype", offset_of!(DLTensor, dtype), 20),
            ("DLTensor.shape", offset_of!(DLTensor, shape), 24),
            ("DLTensor.strides", offset_of!(DLTensor, strides), 32),
            (
                "DLTensor.byte_offset",
                offset_of!(DLTensor, byte_offset),
                40,
            ),
            ("sizeof DLManagedTensor", size_of::<DLManagedTensor>(), 64),
            (
                "DLManagedTensor.manager_ctx",
                offset_of!(DLManagedTensor, manager_ctx),
                48,
            ),
            (
                "DLManagedTensor.deleter",
                offset_of!(DLManagedTensor, deleter),
                56,
            ),
            ("sizeof DLPackVersion", size_of::<DLPackVersion>(), 8),
            (
                "sizeof DLManagedTensorVersioned",
                size_of::<DLManagedTensorVersioned>(),
                80,
            ),
            (
                "Versioned.manager_ctx",
                offset_of!(DLManagedTensorVersioned, manager_ctx),
                8,
            ),
            (
                "Versioned.deleter",
                offset_of!(DLManagedTensorVersioned, deleter),
                16,
            ),
            (
                "Versioned.flags",
                offset_of!(DLManagedTensorVersioned, flags),
                24,
            ),
            (
                "Versioned.dl_tensor",
                offset_of!(DLManagedTensorVersioned, dl_tensor),
                32,
            ),
        ];
        for (what, got, want) in layout {
            assert_eq!(got, want, "{what}");
        }
    }

    /// Every element kind maps to a distinct one-lane DLPack type and back;
    /// PyTorch's codes for the common ones.
    #[test]
    fn dtypes_round_trip() {
        for k in ElementKind::ALL {
            let t = DLDataType::of(k);
            assert_eq!(t.lanes, 1);
            assert_eq!(t.kind(), Some(k), "{k}");
        }
        let f32_ = DLDataType {
            code: 2,
            bits: 32,
            lanes: 1,
        };
        assert_eq!(f32_.kind(), Some(ElementKind::F32));
        let bf16 = DLDataType {
            code: 4,
            bits: 16,
            lanes: 1,
        };
        assert_eq!(bf16.kind(), Some(ElementKind::Bf16));
        let complex64 = DLDataType {
            code: 5,
            bits: 64,
            lanes: 1,
        };
        assert_eq!(complex64.kind(), None);
        let f32x4 = DLDataType {
            code: 2,
            bits: 32,
            lanes: 4,
        };
        assert_eq!(f32x4.kind(), None);
    }

    const ORDINAL: usize = 0;
    const CTX: usize = 0xc0ffee;

    /// Export a host-owned stand-in for device memory (a counter of drops
    /// as the owner; the address is never dereferenced on the host).
    fn export_counted<M: ManagedTensor>(
        addr: u64,
        len: usize,
        kind: ElementKind,
        shape: &[usize],
        strides: Option<&[usize]>,
        drops: &Arc<AtomicUsize>,
    ) -> Result<*mut M> {
        struct Owner(Arc<AtomicUsize>);
        impl Drop for Owner {
            fn drop(&mut self) {
                self.0.fetch_add(1, Ordering::SeqCst);
            }
        }
        let owner = Box::new(Owner(drops.clone()));
        super::export(owner, addr, len, kind, ORDINAL, shape, strides)
    }

    fn export(
        addr: u64,
        len: usize,
        kind: ElementKind,
        shape: &[usize],
        strides: Option<&[usize]>,
        drops: &Arc<AtomicUsize>,
    ) -> Result<*mut DLManagedTensor> {
        export_counted(addr, len, kind, shape, strides, drops)
    }

    fn import<M: ManagedTensor>(p: *mut M) -> Result<DlpackTensor> {
        let p = NonNull::new(p).expect("exported");
        // SAFETY: `p` came from `export` and is owned by this call.
        unsafe { DlpackTensor::adopt(p, ORDINAL, CTX) }
    }

    /// Export then import: the view has the shape, strides, address and
    /// context given, and the owner is dropped exactly once, when the
    /// imported handle is.
    #[test]
    fn export_import_round_trip_calls_the_deleter_once() {
        let drops = Arc::new(AtomicUsize::new(0));
        let raw = export(0x1000, 24, ElementKind::F32, &[2, 3, 4], None, &drops).unwrap();
        let t = import(raw).unwrap();
        assert_eq!(t.shape(), &[2, 3, 4]);
        assert_eq!(t.strides(), &[12, 4, 1]);
        let v = t.view::<f32, 3>().unwrap();
        assert_eq!(v.data().addr(), 0x1000);
        assert_eq!(v.data().len(), 24);
        assert_eq!(v.data().ctx_id(), CTX);
        assert!(v.is_contiguous());
        assert_eq!(drops.load(Ordering::SeqCst), 0);
        drop(t);
        assert_eq!(drops.load(Ordering::SeqCst), 1);

        // The same through DLPack 1.0's versioned struct.
        let raw = export_counted::<DLManagedTensorVersioned>(
            0x3000,
            8,
            ElementKind::Bf16,
            &[8],
            None,
            &drops,
        )
        .unwrap();
        // SAFETY: `raw` was just exported and not handed on.
        let m = unsafe { &*raw };
        assert_eq!(m.version, DLPACK_VERSION);
        assert_eq!(m.flags, 0);
        let mut t = import(raw).unwrap();
        assert!(!t.is_read_only());
        assert_eq!(t.view_mut::<half::bf16, 1>().unwrap().data().addr(), 0x3000);
        drop(t);
        assert_eq!(drops.load(Ordering::SeqCst), 2);
    }

    /// Explicit strides (a transposed matrix) come through as given.
    #[test]
    fn strided_export_is_viewed_with_its_strides() {
        let drops = Arc::new(AtomicUsize::new(0));
        let raw = export(0x2000, 12, ElementKind::F16, &[4, 3], Some(&[1, 4]), &drops).unwrap();
        let mut t = import(raw).unwrap();
        let v = t.view_mut::<half::f16, 2>().unwrap();
        assert_eq!(v.strides(), &[1, 4]);
        assert!(!v.is_contiguous());
    }

    /// Exports that would reach past the buffer or disagree in rank are
    /// errors, and the owner is released.
    #[test]
    fn bad_exports_are_errors() {
        let drops = Arc::new(AtomicUsize::new(0));
        let e = export(0x1000, 5, ElementKind::F32, &[2, 3], None, &drops);
        assert!(
            matches!(
                e,
                Err(Error::ViewOutOfBounds {
                    needed: 6,
                    len: 5,
                    ..
                })
            ),
            "{e:?}"
        );
        let e = export(0x1000, 6, ElementKind::F32, &[2, 3], Some(&[1]), &drops);
        assert!(
            matches!(e, Err(Error::InvalidArgument { arg: "strides", .. })),
            "{e:?}"
        );
        assert_eq!(drops.load(Ordering::SeqCst), 2);
    }

    /// Views check the element type, rank and alignment.
    #[test]
    fn views_check_dtype_rank_and_alignment() {
        let drops = Arc::new(AtomicUsize::new(0));
        let t =
            import(export(0x1000, 6, ElementKind::F32, &[2, 3], None, &drops).unwrap()).unwrap();
        assert!(matches!(
            t.view::<half::bf16, 2>(),
            Err(Error::DtypeMismatch {
                expected: ElementKind::F32,
                got: ElementKind::Bf16,
                ..
            })
        ));
        assert!(matches!(
            t.view::<f32, 3>(),
            Err(Error::InvalidArgument { arg: "N", .. })
        ));
        let t = import(export(0x1002, 6, ElementKind::F32, &[6], None, &drops).unwrap()).unwrap();
        assert!(matches!(
            t.view::<f32, 1>(),
            Err(Error::InvalidArgument { arg: "data", .. })
        ));
    }

    /// Tensors not on a CUDA device of this context, with negative strides
    /// or unknown dtypes are rejected on import, and the producer's deleter
    /// still runs.
    #[test]
    fn bad_imports_are_errors_and_still_released() {
        let drops = Arc::new(AtomicUsize::new(0));
        type Edit = fn(&mut DLTensor);
        let cases: [(&str, Edit); 5] = [
            ("cpu", |t| t.device.device_type = DLDeviceType::CPU),
            ("other device", |t| t.device.device_id = 1),
            ("complex", |t| {
                t.dtype = DLDataType {
                    code: 5,
                    bits: 64,
                    lanes: 1,
                }
            }),
            ("negative rank", |t| t.ndim = -1),
            // SAFETY: the exported strides array holds `ndim` values.
            ("negative stride", |t| unsafe { *t.strides = -1 }),
        ];
        for (i, (what, edit)) in cases.iter().enumerate() {
            let raw = export(0x1000, 6, ElementKind::F32, &[2, 3], None, &drops).unwrap();
            // SAFETY: `raw` is a live exported tensor not yet handed on.
            edit(unsafe { &mut (*raw).dl_tensor });
            assert!(import(raw).is_err(), "{what}");
            assert_eq!(drops.load(Ordering::SeqCst), i + 1, "{what}");
        }
    }

    /// A read-only DLPack 1.0 tensor gives a view but no mutable view; null
    /// strides mean row-major; `byte_offset` moves the first element.
    #[test]
    fn versioned_flags_and_byte_offset() {
        let mut shape = [2i64, 4];
        let mut m = DLManagedTensorVersioned {
            version: DLPACK_VERSION,
            manager_ctx: std::ptr::null_mut(),
            deleter: None,
            flags: DLPACK_FLAG_BITMASK_READ_ONLY,
            dl_tensor: DLTensor {
                data: 0x4000 as *mut c_void,
                device: DLDevice {
                    device_type: DLDeviceType::CUDA,
                    device_id: 0,
                },
                ndim: 2,
                dtype: DLDataType::of(ElementKind::I32),
                shape: shape.as_mut_ptr(),
                strides: std::ptr::null_mut(),
                byte_offset: 16,
            },
        };
        let p = NonNull::from(&mut m);
        // SAFETY: `m` outlives the handle; it has no deleter.
        let mut t = unsafe { DlpackTensor::adopt(p, ORDINAL, CTX) }.unwrap();
        assert!(t.is_read_only());
        assert_eq!(t.strides(), &[4, 1]);
        assert_eq!(t.view::<i32, 2>().unwrap().data().addr(), 0x4010);
        assert!(matches!(
            t.view_mut::<i32, 2>(),
            Err(Error::InvalidArgument { arg: "tensor", .. })
        ));
        drop(t);
        m.version.major = 2;
        let p = NonNull::from(&mut m);
        // SAFETY: as above.
        let r = unsafe { DlpackTensor::adopt(p, ORDINAL, CTX) };
        assert!(matches!(r, Err(Error::Unsupported { .. })));
    }
}
