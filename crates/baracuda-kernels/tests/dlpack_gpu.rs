//! GPU test (ignored without a GPU; `scripts/gpu-test.sh` runs it): device
//! buffers exported through DLPack, imported again as a consumer would, run
//! through a plan in place of copies, and released by their deleters.

use baracuda_kernels::dlpack::{self, DLManagedTensor, DLManagedTensorVersioned, DlpackTensor};
use baracuda_kernels::*;

/// `len` f32s at `addr` on `ctx`, copied to the host.
fn read(ctx: &Context, addr: u64, len: usize) -> Vec<f32> {
    ctx.bind_to_thread().expect("bind");
    let mut out = vec![0f32; len];
    // SAFETY: `addr` holds `len` f32s on `ctx`, alive until the caller
    // drops the tensor that owns them; the copy is synchronous.
    unsafe { cudarc::driver::result::memcpy_dtoh_sync(&mut out, addr) }.expect("copy");
    out
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn dlpack_tensors_run_through_a_plan_without_copies() -> Result<()> {
    let ctx = Context::new(&Device::get(0)?)?;
    let stream = Stream::new(&ctx)?;
    let host: Vec<f32> = (0..12).map(|i| i as f32 - 6.5).collect();
    let x = DeviceBuffer::from_host(&stream, &host)?;
    let y = DeviceBuffer::<f32>::filled_bytes(&stream, 12, 0xff)?;
    let (x_addr, y_addr) = (x.as_slice().addr(), y.as_slice().addr());

    // x as a legacy DLManagedTensor, y as DLPack 1.0's versioned struct.
    let xr: *mut DLManagedTensor = dlpack::into_dlpack(x, &[3, 4], None)?;
    let yr: *mut DLManagedTensorVersioned = dlpack::into_dlpack(y, &[3, 4], None)?;
    // SAFETY: both were just exported and are handed over once.
    let (xt, mut yt) = unsafe {
        (
            DlpackTensor::from_raw(xr, &ctx)?,
            DlpackTensor::from_raw(yr, &ctx)?,
        )
    };
    assert_eq!(xt.kind(), ElementKind::F32);
    let xv = xt.view::<f32, 2>()?;
    assert_eq!(xv.data().addr(), x_addr, "the view is the exported memory");
    assert_eq!(xv.strides(), &[4, 1]);
    let desc = UnaryDescriptor {
        op: UnaryOp::Relu,
        element: ElementKind::F32,
        shape: [3, 4],
    };
    let plan = UnaryPlan::<f32, 2>::select(&stream, &desc, &PlanPreference::default())?;
    plan.run(
        &stream,
        Workspace::None,
        UnaryArgs {
            x: xv,
            y: yt.view_mut::<f32, 2>()?,
        },
    )?;
    stream.synchronize()?;
    let want: Vec<f32> = host.iter().map(|v| v.max(0.0)).collect();
    assert_eq!(read(&ctx, y_addr, 12), want);

    // A view of the wrong element type or rank is an error, not a view.
    assert!(matches!(
        xt.view::<half::f16, 2>(),
        Err(Error::DtypeMismatch { .. })
    ));
    assert!(matches!(
        xt.view::<f32, 1>(),
        Err(Error::InvalidArgument { .. })
    ));

    // A tensor that claims another device is refused and still released.
    let zr: *mut DLManagedTensor =
        dlpack::into_dlpack(DeviceBuffer::<f32>::zeros(&stream, 4)?, &[4], None)?;
    // SAFETY: `zr` is live and not yet handed on.
    unsafe { (*zr).dl_tensor.device.device_id += 1 };
    // SAFETY: handed over once.
    let r = unsafe { DlpackTensor::from_raw(zr, &ctx) };
    assert!(matches!(
        r,
        Err(Error::InvalidArgument { arg: "device", .. })
    ));

    // The deleters free both buffers in stream order.
    drop((xt, yt));
    stream.synchronize()?;
    Ok(())
}
