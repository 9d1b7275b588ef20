//! Device buffers, pinned host buffers, and views of cudarc memory.

use std::sync::Arc;

use baracuda_kernels_types::{DeviceSlice, DeviceSliceMut, Element, ElementKind, Error, Result};
use cudarc::driver::{result, sys, CudaSlice, CudaStream, DevicePtr, DevicePtrMut};

use crate::context::{Context, Stream};
use crate::status::{alloc_error, CudaResultExt};

/// `len` elements of `T` in device memory, allocated and freed in stream
/// order on the stream that created it.
pub struct DeviceBuffer<T: Element> {
    ptr: sys::CUdeviceptr,
    len: usize,
    ctx: Context,
    stream: Arc<CudaStream>,
    _t: std::marker::PhantomData<T>,
}

// SAFETY: the buffer is a plain device allocation; every access goes
// through a stream and `&`/`&mut` borrows mediate host-side aliasing.
unsafe impl<T: Element> Send for DeviceBuffer<T> {}
// SAFETY: as above; shared references only hand out read-only views.
unsafe impl<T: Element> Sync for DeviceBuffer<T> {}

impl<T: Element> std::fmt::Debug for DeviceBuffer<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "DeviceBuffer<{}>({} elems)", T::KIND, self.len)
    }
}

fn byte_len<T>(op: &'static str, len: usize) -> Result<usize> {
    len.checked_mul(std::mem::size_of::<T>())
        .ok_or_else(|| Error::Overflow {
            op,
            what: format!("{len} elements in bytes"),
        })
}

impl<T: Element> DeviceBuffer<T> {
    /// Allocate `len` elements whose contents are unspecified until written
    /// (every element type is valid for any byte pattern except `bool`,
    /// which [`DeviceBuffer::to_host`] reads as "non-zero").
    ///
    /// # Errors
    /// `OutOfMemory` when the device cannot hold `len` more elements;
    /// `Overflow` when their size in bytes overflows; `Cuda` on any other
    /// failure.
    pub fn uninit(stream: &Stream, len: usize) -> Result<Self> {
        let bytes = byte_len::<T>("DeviceBuffer::uninit", len)?;
        stream.ctx.bind_to_thread()?;
        let ptr = if bytes == 0 {
            0
        } else if stream.ctx.inner.cu.has_async_alloc() {
            // SAFETY: the stream is live on the bound context; the
            // allocation is freed in `Drop` on the same stream.
            unsafe { result::malloc_async(stream.raw(), bytes) }
                .map_err(|e| alloc_error("cuMemAllocAsync", bytes, e))?
        } else {
            // SAFETY: the context is bound; freed in `Drop`.
            unsafe { result::malloc_sync(bytes) }
                .map_err(|e| alloc_error("cuMemAlloc", bytes, e))?
        };
        Ok(DeviceBuffer {
            ptr,
            len,
            ctx: stream.ctx.clone(),
            stream: stream.cu.clone(),
            _t: std::marker::PhantomData,
        })
    }

    /// Allocate `len` zeroed elements.
    ///
    /// # Errors
    /// As [`DeviceBuffer::uninit`]; `Cuda` when the fill fails.
    pub fn zeros(stream: &Stream, len: usize) -> Result<Self> {
        Self::filled_bytes(stream, len, 0)
    }

    /// Allocate and fill every byte with `byte` (0xFF gives NaN in every
    /// float dtype: handy to poison outputs in tests).
    ///
    /// # Errors
    /// As [`DeviceBuffer::uninit`]; `Cuda` when the fill fails.
    pub fn filled_bytes(stream: &Stream, len: usize, byte: u8) -> Result<Self> {
        let mut buf = Self::uninit(stream, len)?;
        buf.fill_bytes(stream, byte)?;
        Ok(buf)
    }

    /// Enqueue setting every byte of the buffer to `byte` on `stream`.
    ///
    /// # Errors
    /// `Cuda` on failure.
    pub fn fill_bytes(&mut self, stream: &Stream, byte: u8) -> Result<()> {
        if self.len > 0 {
            stream.ctx.bind_to_thread()?;
            // SAFETY: `self` owns `len * size_of::<T>()` bytes at `ptr`,
            // exclusively borrowed for the call; the memset is ordered on
            // `stream` like every other access.
            unsafe { result::memset_d8_async(self.ptr, byte, self.bytes(), stream.raw()) }
                .call("cuMemsetD8Async")?;
        }
        Ok(())
    }

    /// Copy a host slice to a new device buffer (waits for the copy, so the
    /// host slice may be dropped right after).
    ///
    /// # Errors
    /// `Cuda` on failure.
    pub fn from_host(stream: &Stream, host: &[T]) -> Result<Self> {
        let buf = Self::uninit(stream, host.len())?;
        if !host.is_empty() {
            // SAFETY: `buf` holds exactly `host.len()` elements of `T`; the
            // stream is synchronized before `host` can be dropped.
            unsafe { result::memcpy_htod_async(buf.ptr, host, stream.raw()) }
                .call("cuMemcpyHtoDAsync")?;
            stream.synchronize()?;
        }
        Ok(buf)
    }

    /// Copy the buffer to a new host vector, waiting for all earlier work on
    /// `stream`.
    ///
    /// # Errors
    /// `Cuda` on failure (including an earlier asynchronous kernel fault).
    pub fn to_host(&self, stream: &Stream) -> Result<Vec<T>> {
        let mut bytes = vec![0u8; self.bytes()];
        if !bytes.is_empty() {
            // SAFETY: `bytes` has room for the whole buffer; the stream is
            // synchronized before it is read.
            unsafe { result::memcpy_dtoh_async(&mut bytes[..], self.ptr, stream.raw()) }
                .call("cuMemcpyDtoHAsync")?;
        }
        stream.synchronize()?;
        Ok(bytes_to_elems::<T>(&bytes))
    }

    /// Copy `host` into elements `offset..offset + host.len()` (waits for
    /// the copy).
    ///
    /// # Errors
    /// `ViewOutOfBounds` when the range passes the end; `Cuda` on failure.
    pub fn write_at(&mut self, stream: &Stream, offset: usize, host: &[T]) -> Result<()> {
        self.check_range(offset, host.len())?;
        if !host.is_empty() {
            let addr = self.ptr + (offset * std::mem::size_of::<T>()) as u64;
            // SAFETY: the range lies inside the allocation (checked above);
            // the stream is synchronized before `host` can be dropped.
            unsafe { result::memcpy_htod_async(addr, host, stream.raw()) }
                .call("cuMemcpyHtoDAsync")?;
            stream.synchronize()?;
        }
        Ok(())
    }

    /// Copy elements `offset..offset + len` to the host, after all earlier
    /// work on `stream`.
    ///
    /// # Errors
    /// `ViewOutOfBounds` when the range passes the end; `Cuda` on failure.
    pub fn read_at(&self, stream: &Stream, offset: usize, len: usize) -> Result<Vec<T>> {
        self.check_range(offset, len)?;
        let mut bytes = vec![0u8; len * std::mem::size_of::<T>()];
        if !bytes.is_empty() {
            let addr = self.ptr + (offset * std::mem::size_of::<T>()) as u64;
            // SAFETY: the range lies inside the allocation; `bytes` has room
            // for it and the stream is synchronized before it is read.
            unsafe { result::memcpy_dtoh_async(&mut bytes[..], addr, stream.raw()) }
                .call("cuMemcpyDtoHAsync")?;
        }
        stream.synchronize()?;
        Ok(bytes_to_elems::<T>(&bytes))
    }

    fn check_range(&self, offset: usize, len: usize) -> Result<()> {
        match offset.checked_add(len) {
            Some(end) if end <= self.len => Ok(()),
            _ => Err(Error::ViewOutOfBounds {
                shape: [len].into(),
                strides: vec![1],
                needed: offset.saturating_add(len),
                len: self.len,
            }),
        }
    }

    /// Copy all of `src` into `self` on `stream`.
    ///
    /// # Errors
    /// `ShapeMismatch` when lengths differ; `Cuda` on failure.
    pub fn copy_from(&mut self, stream: &Stream, src: &DeviceBuffer<T>) -> Result<()> {
        if src.len != self.len {
            return Err(Error::ShapeMismatch {
                op: "DeviceBuffer::copy_from",
                arg: "src",
                expected: [self.len].into(),
                got: [src.len].into(),
            });
        }
        if self.len > 0 {
            // SAFETY: both buffers hold `len` elements and are distinct
            // (`&mut self` and `&src` cannot alias).
            unsafe { result::memcpy_dtod_async(self.ptr, src.ptr, self.bytes(), stream.raw()) }
                .call("cuMemcpyDtoDAsync")?;
        }
        Ok(())
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        self.len
    }
    /// True when the buffer is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    /// Size in bytes.
    pub fn bytes(&self) -> usize {
        self.len * std::mem::size_of::<T>()
    }
    /// The context the buffer lives on.
    pub fn context(&self) -> &Context {
        &self.ctx
    }
    /// A read-only view of the whole buffer.
    pub fn as_slice(&self) -> DeviceSlice<'_, T> {
        // SAFETY: `ptr` owns `len` elements on `ctx` for as long as `self`
        // is borrowed; a shared borrow excludes `as_slice_mut`.
        unsafe { DeviceSlice::from_raw_parts(self.ptr, self.len, self.ctx.id()) }
    }
    /// A mutable view of the whole buffer.
    pub fn as_slice_mut(&mut self) -> DeviceSliceMut<'_, T> {
        // SAFETY: as above, and `&mut self` makes the view exclusive.
        unsafe { DeviceSliceMut::from_raw_parts(self.ptr, self.len, self.ctx.id()) }
    }
}

impl<T: Element> Drop for DeviceBuffer<T> {
    fn drop(&mut self) {
        if self.ptr == 0 {
            return;
        }
        let _ = self.ctx.bind_to_thread();
        if self.ctx.inner.cu.has_async_alloc() {
            // SAFETY: allocated by `uninit` on this stream; freed once.
            let _ = unsafe { result::free_async(self.ptr, self.stream.cu_stream()) };
        } else {
            // SAFETY: allocated by `uninit`; freed once.
            let _ = unsafe { result::free_sync(self.ptr) };
        }
    }
}

/// Reinterpret downloaded bytes as elements. `bool` is read as "byte is
/// non-zero", so a kernel that stored another byte value cannot produce an
/// invalid `bool`.
fn bytes_to_elems<T: Element>(bytes: &[u8]) -> Vec<T> {
    let n = bytes.len() / std::mem::size_of::<T>().max(1);
    if T::KIND == ElementKind::Bool {
        return bytes
            .iter()
            .map(|&b| T::from_f64(if b != 0 { 1.0 } else { 0.0 }))
            .collect();
    }
    let mut out: Vec<T> = Vec::with_capacity(n);
    // SAFETY: every non-bool Element type is plain old data valid for any
    // bit pattern; `out` has capacity for `n` elements, exactly the bytes
    // copied, and its length is set only after the copy.
    unsafe {
        std::ptr::copy_nonoverlapping(bytes.as_ptr(), out.as_mut_ptr() as *mut u8, bytes.len());
        out.set_len(n);
    }
    out
}

/// Page-locked host memory, for asynchronous copies that overlap compute.
pub struct PinnedBuffer<T: Element> {
    ptr: *mut T,
    len: usize,
    ctx: Context,
}

// SAFETY: the host allocation is owned and accessed through `&`/`&mut`.
unsafe impl<T: Element> Send for PinnedBuffer<T> {}
// SAFETY: as above.
unsafe impl<T: Element> Sync for PinnedBuffer<T> {}

impl<T: Element> PinnedBuffer<T> {
    /// Allocate `len` pinned elements, zero-filled.
    ///
    /// # Errors
    /// `OutOfMemory` when the pinned allocation fails for lack of memory;
    /// `Cuda` on any other failure.
    pub fn zeros(ctx: &Context, len: usize) -> Result<Self> {
        let bytes = byte_len::<T>("PinnedBuffer::zeros", len)?.max(1);
        ctx.bind_to_thread()?;
        // SAFETY: the context is bound; the pointer is freed in `Drop`.
        let ptr = unsafe { result::malloc_host(bytes, 0) }
            .map_err(|e| alloc_error("cuMemHostAlloc", bytes, e))? as *mut T;
        // SAFETY: `ptr` points to `bytes` writable bytes; all-zero is a
        // valid value of every element type.
        unsafe { std::ptr::write_bytes(ptr as *mut u8, 0, bytes) };
        Ok(PinnedBuffer {
            ptr,
            len,
            ctx: ctx.clone(),
        })
    }
    /// The elements.
    pub fn as_slice(&self) -> &[T] {
        // SAFETY: `ptr` holds `len` initialised elements owned by `self`.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }
    /// The elements, mutably.
    pub fn as_mut_slice(&mut self) -> &mut [T] {
        // SAFETY: as above, exclusively borrowed.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.len) }
    }
    /// Enqueue a copy of `src` into this buffer; the data is there once
    /// `stream` has been synchronized. The `&mut` borrow lasts only for the
    /// call, so synchronize before reading.
    ///
    /// # Errors
    /// `ShapeMismatch` on length mismatch; `Cuda` on failure.
    pub fn copy_from_device(&mut self, stream: &Stream, src: &DeviceBuffer<T>) -> Result<()> {
        if src.len() != self.len {
            return Err(Error::ShapeMismatch {
                op: "PinnedBuffer::copy_from_device",
                arg: "src",
                expected: [self.len].into(),
                got: [src.len()].into(),
            });
        }
        if self.len > 0 {
            // SAFETY: both hold `len` elements; pinned memory stays valid
            // until `self` drops, which synchronizes the context first.
            unsafe {
                result::memcpy_dtoh_async(self.as_mut_slice(), src.as_slice().addr(), stream.raw())
            }
            .call("cuMemcpyDtoHAsync")?;
        }
        Ok(())
    }
}

impl<T: Element> Drop for PinnedBuffer<T> {
    fn drop(&mut self) {
        // An asynchronous copy may still target this memory.
        let _ = self.ctx.synchronize();
        // SAFETY: allocated by cuMemHostAlloc in `zeros`; freed once.
        let _ = unsafe { result::free_host(self.ptr as *mut std::ffi::c_void) };
    }
}

/// A read-only view of memory owned by cudarc (candle and others), without
/// copying. Run plans on `stream`, or order streams yourself.
pub fn cudarc_slice<'a, T: Element>(slice: &'a CudaSlice<T>, stream: &Stream) -> DeviceSlice<'a, T>
where
    CudaSlice<T>: DevicePtr<T>,
{
    let (ptr, _sync) = slice.device_ptr(&stream.cu);
    // SAFETY: cudarc guarantees `ptr` holds `slice.len()` elements on the
    // slice's context for the borrow `'a`.
    unsafe { DeviceSlice::from_raw_parts(ptr, slice.len(), slice.context().cu_ctx() as usize) }
}

/// A mutable view of memory owned by cudarc, without copying.
pub fn cudarc_slice_mut<'a, T: Element>(
    slice: &'a mut CudaSlice<T>,
    stream: &Stream,
) -> DeviceSliceMut<'a, T>
where
    CudaSlice<T>: DevicePtrMut<T>,
{
    let len = slice.len();
    let ctx = slice.context().cu_ctx() as usize;
    let (ptr, _sync) = slice.device_ptr_mut(&stream.cu);
    // SAFETY: as `cudarc_slice`, and the `&mut` borrow makes it exclusive.
    unsafe { DeviceSliceMut::from_raw_parts(ptr, len, ctx) }
}
