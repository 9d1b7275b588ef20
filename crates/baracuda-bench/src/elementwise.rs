//! Elementwise benchmark cases (same names, shapes and dtypes as
//! `bench/torch_cases/elementwise.py`): every unary and binary op on 2^28
//! contiguous elements in bf16 and f32, two backward passes, and the
//! device-to-device copy that sets the bandwidth ceiling.

use baracuda_kernels::*;
use half::bf16;

use crate::harness::{case, emit, random_buffer, time_eager_ms, time_ms, Record};

/// Elements per tensor: 2^28 (512 MiB in bf16, 1 GiB in f32).
const N: usize = 1 << 28;

fn shape() -> String {
    format!("[{N}]")
}

fn unary<T: Element>(s: &Stream, op: UnaryOp) -> Result<()> {
    let x = random_buffer::<T>(s, N, 1, -4.0, 4.0)?;
    let mut y = DeviceBuffer::<T>::uninit(s, N)?;
    let plan = UnaryPlan::<T, 1>::select(
        s,
        &UnaryDescriptor {
            op,
            element: T::KIND,
            shape: [N],
        },
        &PlanPreference::default(),
    )?;
    let ms = time_ms(s, || {
        plan.run(
            s,
            Workspace::None,
            UnaryArgs {
                x: TensorRef::contiguous(x.as_slice(), [N])?,
                y: TensorMut::contiguous(y.as_slice_mut(), [N])?,
            },
        )
    })?;
    let bytes = (2 * N * std::mem::size_of::<T>()) as f64;
    emit(&Record {
        op: op.name(),
        pass: "fw",
        dtype: T::KIND,
        shape: shape(),
        ms,
        bytes: Some(bytes),
        flops: None,
    });
    if matches!(op, UnaryOp::GeluTanh | UnaryOp::Silu) {
        let dy = random_buffer::<T>(s, N, 2, -1.0, 1.0)?;
        let bw = UnaryBackwardPlan::<T, 1>::select(
            s,
            &UnaryDescriptor {
                op,
                element: T::KIND,
                shape: [N],
            },
            &PlanPreference::default(),
        )?;
        let ms = time_ms(s, || {
            bw.run(
                s,
                Workspace::None,
                UnaryBwArgs {
                    x: TensorRef::contiguous(x.as_slice(), [N])?,
                    dy: TensorRef::contiguous(dy.as_slice(), [N])?,
                    dx: TensorMut::contiguous(y.as_slice_mut(), [N])?,
                },
            )
        })?;
        let bytes = (3 * N * std::mem::size_of::<T>()) as f64;
        emit(&Record {
            op: op.name(),
            pass: "bw",
            dtype: T::KIND,
            shape: shape(),
            ms,
            bytes: Some(bytes),
            flops: None,
        });
    }
    Ok(())
}

fn binary<T: Element>(s: &Stream, op: BinaryOp) -> Result<()> {
    let a = random_buffer::<T>(s, N, 3, -2.0, 2.0)?;
    let b = random_buffer::<T>(s, N, 4, 0.5, 2.0)?;
    let mut out = DeviceBuffer::<T>::uninit(s, N)?;
    let desc = BinaryDescriptor {
        op,
        element: T::KIND,
        a_shape: [N],
        b_shape: [N],
    };
    let plan = BinaryPlan::<T, 1>::select(s, &desc, &PlanPreference::default())?;
    let ms = time_ms(s, || {
        plan.run(
            s,
            Workspace::None,
            BinaryArgs {
                a: TensorRef::contiguous(a.as_slice(), [N])?,
                b: TensorRef::contiguous(b.as_slice(), [N])?,
                out: TensorMut::contiguous(out.as_slice_mut(), [N])?,
            },
        )
    })?;
    let bytes = (3 * N * std::mem::size_of::<T>()) as f64;
    emit(&Record {
        op: op.name(),
        pass: "fw",
        dtype: T::KIND,
        shape: shape(),
        ms,
        bytes: Some(bytes),
        flops: None,
    });
    if op == BinaryOp::Mul {
        let bw = BinaryBackwardPlan::<T, 1>::select(s, &desc, &PlanPreference::default())?;
        let dy = random_buffer::<T>(s, N, 5, -1.0, 1.0)?;
        let mut db = DeviceBuffer::<T>::uninit(s, N)?;
        let ms = time_ms(s, || {
            bw.run(
                s,
                Workspace::None,
                BinaryBwArgs {
                    a: TensorRef::contiguous(a.as_slice(), [N])?,
                    b: TensorRef::contiguous(b.as_slice(), [N])?,
                    dy: TensorRef::contiguous(dy.as_slice(), [N])?,
                    da: Some(TensorMut::contiguous(out.as_slice_mut(), [N])?),
                    db: Some(TensorMut::contiguous(db.as_slice_mut(), [N])?),
                },
            )
        })?;
        let bytes = (5 * N * std::mem::size_of::<T>()) as f64;
        emit(&Record {
            op: op.name(),
            pass: "bw",
            dtype: T::KIND,
            shape: shape(),
            ms,
            bytes: Some(bytes),
            flops: None,
        });
    }
    Ok(())
}

/// Device-to-device copy of 1 GiB: the bandwidth ceiling (bytes read +
/// bytes written).
fn copy(s: &Stream) -> Result<()> {
    let x = random_buffer::<f32>(s, N, 6, -1.0, 1.0)?;
    let mut y = DeviceBuffer::<f32>::uninit(s, N)?;
    let ms = time_eager_ms(s, || y.copy_from(s, &x))?;
    emit(&Record {
        op: "ceiling_copy",
        pass: "fw",
        dtype: ElementKind::F32,
        shape: shape(),
        ms,
        bytes: Some((2 * N * 4) as f64),
        flops: None,
    });
    Ok(())
}

/// Run every case; errors are reported per case and do not stop the rest.
pub fn run(s: &Stream) {
    // The ceiling every case is judged against: always measured.
    if let Err(e) = copy(s) {
        eprintln!("elementwise copy: error: {e}");
    }
    for op in UnaryOp::ALL {
        case("elementwise", op.name(), || unary::<bf16>(s, op));
        case("elementwise", op.name(), || unary::<f32>(s, op));
    }
    for op in BinaryOp::ALL {
        case("elementwise", op.name(), || binary::<bf16>(s, op));
        case("elementwise", op.name(), || binary::<f32>(s, op));
    }
}
