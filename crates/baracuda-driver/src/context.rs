//! Contexts, streams, events and captured graphs.

use std::sync::Arc;

use baracuda_kernels_types::Result;
use cudarc::driver::{sys, CudaContext, CudaEvent, CudaGraph, CudaStream};

use crate::device::Device;
use crate::libs::{ensure_loaded, CudaLib};
use crate::registry::Registry;
use crate::status::CudaResultExt;

pub(crate) struct ContextInner {
    pub(crate) cu: Arc<CudaContext>,
    pub(crate) device: Device,
    /// The library handles (`handles.rs`) and loaded modules (`jit.rs`).
    pub(crate) registry: Registry,
}

/// A CUDA context on one device (the device's primary context), with its
/// compiled-module cache and its library handles. Cheap to clone; `Send +
/// Sync`.
#[derive(Clone)]
pub struct Context {
    pub(crate) inner: Arc<ContextInner>,
}

impl std::fmt::Debug for Context {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Context({}, {})",
            self.inner.device.ordinal, self.inner.device.name
        )
    }
}

impl Context {
    /// Retain the primary context of `device`.
    ///
    /// # Errors
    /// `LibraryNotFound` without a driver; `Cuda` on failure.
    pub fn new(device: &Device) -> Result<Context> {
        ensure_loaded(CudaLib::Driver)?;
        let cu = CudaContext::new(device.ordinal).call("cuDevicePrimaryCtxRetain")?;
        Ok(Self::wrap(cu, device))
    }

    /// A new context of its own on `device`, apart from the primary one
    /// that [`Context::new`] shares: buffers, modules and plans of one are
    /// not usable on streams of the other. For code that needs isolation
    /// (and for tests that mix contexts).
    ///
    /// # Errors
    /// `LibraryNotFound` without a driver; `Cuda` on failure.
    pub fn new_non_primary(device: &Device) -> Result<Context> {
        ensure_loaded(CudaLib::Driver)?;
        let cu = CudaContext::new_non_primary(device.ordinal, 0).call("cuCtxCreate")?;
        Ok(Self::wrap(cu, device))
    }

    fn wrap(cu: Arc<CudaContext>, device: &Device) -> Context {
        // SAFETY: baracuda orders work across streams explicitly (plans run
        // on the stream they are given; buffers are freed stream-ordered), so
        // cudarc's implicit per-slice events are not needed. Turning them off
        // keeps launches free of event records, which graph capture needs.
        unsafe { cu.disable_event_tracking() };
        Context {
            inner: Arc::new(ContextInner {
                cu,
                device: device.clone(),
                registry: Registry::default(),
            }),
        }
    }

    /// Free and total device memory in bytes, `(free, total)`.
    ///
    /// # Errors
    /// `Cuda` on failure.
    pub fn memory_info(&self) -> Result<(usize, usize)> {
        self.inner.cu.mem_get_info().call("cuMemGetInfo")
    }

    /// The device this context runs on.
    pub fn device(&self) -> &Device {
        &self.inner.device
    }

    /// Identity of the context, as stored in device slices (`CUcontext`
    /// handle as a usize).
    pub fn id(&self) -> usize {
        self.inner.cu.cu_ctx() as usize
    }

    /// The cudarc context, for interop with code built on cudarc.
    pub fn cudarc(&self) -> &Arc<CudaContext> {
        &self.inner.cu
    }

    /// Make this context current on the calling thread.
    ///
    /// # Errors
    /// `Cuda` on failure.
    pub fn bind_to_thread(&self) -> Result<()> {
        self.inner.cu.bind_to_thread().call("cuCtxSetCurrent")
    }

    /// Block until all work on the context has finished.
    ///
    /// # Errors
    /// `Cuda` with the first asynchronous error, if any.
    pub fn synchronize(&self) -> Result<()> {
        self.inner.cu.synchronize().call("cuCtxSynchronize")
    }
}

/// A CUDA stream. Plans enqueue work on the stream given to `run`.
#[derive(Clone)]
pub struct Stream {
    pub(crate) ctx: Context,
    pub(crate) cu: Arc<CudaStream>,
}

impl std::fmt::Debug for Stream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Stream({:?})", self.cu.cu_stream())
    }
}

impl Stream {
    /// A new non-blocking stream on `ctx`.
    ///
    /// # Errors
    /// `Cuda` on failure.
    pub fn new(ctx: &Context) -> Result<Stream> {
        let cu = ctx.inner.cu.new_stream().call("cuStreamCreate")?;
        Ok(Stream {
            ctx: ctx.clone(),
            cu,
        })
    }

    /// Wrap a stream created by cudarc (for example a candle device's).
    pub fn from_cudarc(ctx: &Context, stream: Arc<CudaStream>) -> Stream {
        Stream {
            ctx: ctx.clone(),
            cu: stream,
        }
    }

    /// The context the stream belongs to.
    pub fn context(&self) -> &Context {
        &self.ctx
    }

    /// The cudarc stream, for interop.
    pub fn cudarc(&self) -> &Arc<CudaStream> {
        &self.cu
    }

    pub(crate) fn raw(&self) -> sys::CUstream {
        self.cu.cu_stream()
    }

    /// Block until the stream's work has finished.
    ///
    /// # Errors
    /// `Cuda` with the first asynchronous error, if any.
    pub fn synchronize(&self) -> Result<()> {
        self.cu.synchronize().call("cuStreamSynchronize")
    }

    /// Make later work on `self` wait for everything enqueued on `other` so
    /// far.
    ///
    /// # Errors
    /// `Cuda` on failure.
    pub fn wait_for(&self, other: &Stream) -> Result<()> {
        self.cu.join(&other.cu).call("cuStreamWaitEvent")
    }

    /// Start capturing the work enqueued on this stream into a graph,
    /// instead of running it. Thread-local mode: a synchronizing or
    /// allocating call from the calling thread fails the capture, while
    /// other threads go on as usual.
    ///
    /// # Errors
    /// `Cuda` on failure.
    pub fn begin_capture(&self) -> Result<()> {
        self.cu
            .begin_capture(sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL)
            .call("cuStreamBeginCapture")
    }

    /// Stop capturing and instantiate the captured graph.
    ///
    /// # Errors
    /// `Cuda` on failure, including work that is illegal under capture.
    pub fn end_capture(&self) -> Result<Graph> {
        let g = self
            .cu
            .end_capture(
                sys::CUgraphInstantiate_flags::CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH,
            )
            .call("cuStreamEndCapture")?;
        g.map(|graph| Graph { graph })
            .ok_or(baracuda_kernels_types::Error::Cuda {
                call: "cuStreamEndCapture",
                status: baracuda_kernels_types::LibraryStatus {
                    code: 0,
                    name: "empty capture: no work was enqueued".into(),
                },
            })
    }
}

/// An instantiated CUDA graph captured from a stream.
pub struct Graph {
    graph: CudaGraph,
}

impl Graph {
    /// Replay the graph on the stream it was captured from.
    ///
    /// # Errors
    /// `Cuda` on failure.
    pub fn launch(&self) -> Result<()> {
        self.graph.launch().call("cuGraphLaunch")
    }
}

/// A CUDA event with timing enabled.
pub struct Event {
    ev: CudaEvent,
}

impl Event {
    /// A new timing event on `ctx`.
    ///
    /// # Errors
    /// `Cuda` on failure.
    pub fn new(ctx: &Context) -> Result<Event> {
        let ev = ctx
            .inner
            .cu
            .new_event(Some(sys::CUevent_flags::CU_EVENT_DEFAULT))
            .call("cuEventCreate")?;
        Ok(Event { ev })
    }

    /// Record the event on `stream`.
    ///
    /// # Errors
    /// `Cuda` on failure.
    pub fn record(&self, stream: &Stream) -> Result<()> {
        self.ev.record(&stream.cu).call("cuEventRecord")
    }

    /// Block until the event has completed.
    ///
    /// # Errors
    /// `Cuda` on failure.
    pub fn synchronize(&self) -> Result<()> {
        self.ev.synchronize().call("cuEventSynchronize")
    }

    /// Milliseconds between `self` and a later event `end`, both completed.
    ///
    /// # Errors
    /// `Cuda` on failure (for example an event not yet recorded).
    pub fn elapsed_ms(&self, end: &Event) -> Result<f32> {
        self.ev.elapsed_ms(&end.ev).call("cuEventElapsedTime")
    }
}
