//! The measured choices of a [`super::LinearPlan`]: whether `db` comes
//! out of the `dW` matmul's BGRADB epilogue or the column-sum kernel, and
//! whether the skinny kernel or cuBLASLt runs the forward. Each is timed
//! on random scratch operands once per device model, descriptor, dtype and
//! preference, and kept in the crate's autotune cache (`crate::autotune`).

use baracuda_driver::{CudaLib, DeviceBuffer, LtCompute, Stream};
use baracuda_kernels_types::{Element, ElementKind, PlanPreference, Result};

use super::{round_up, LinearDescriptor};
use crate::gemm::epilogue::{act_code, ColSumSplit, EpilogueKernels};
use crate::gemm::gemm::GemmPlan;
use crate::gemm::matmul::{scalar, Prepared, Ptrs};
use crate::autotune;
use crate::scratch::{fastest, operand_sets, random_bytes};
use crate::Plan;

/// A measured either/or choice of a linear layer's plan (`which` names
/// it), computed by `time` once per device, descriptor, dtype and
/// preference (determinism, TF32, workspace cap) for the process and
/// cached.
fn cached_choice<T: Element>(
    which: &str,
    stream: &Stream,
    desc: &LinearDescriptor,
    pref: &PlanPreference,
    time: impl FnOnce() -> Result<bool>,
) -> Result<bool> {
    let problem = format!(
        "{which}:{desc:?}:{:?}:{}:{}:{:?}",
        T::KIND,
        pref.deterministic,
        pref.allow_tf32,
        pref.max_workspace_bytes
    );
    let key = autotune::Key {
        family: "linear",
        library: Some(CudaLib::CublasLt),
        problem: &problem,
    };
    autotune::get_or_measure(stream, key, time)
}

/// Whether `dW` with `db` runs faster through the BGRADB epilogue (`fused`)
/// than as the plain `dW` matmul followed by the column sum, timed on
/// random scratch operands; cached per device, descriptor, dtype and
/// preference for the process.
pub(super) fn fused_db_is_faster<T: Element>(
    stream: &Stream,
    desc: &LinearDescriptor,
    pref: &PlanPreference,
    compute: LtCompute,
    (plain, fused): (&Prepared, &Prepared),
    kernels: &EpilogueKernels,
    split: ColSumSplit,
) -> Result<bool> {
    cached_choice::<T>("db", stream, desc, pref, || {
        let (t, i, o) = desc.shape();
        let dz_ld = desc.dz_ld();
        let size = T::KIND.size_bytes();
        // Each matrix as its layout reaches it (row-major, own ld).
        let bytes = |rows: usize, cols: usize, ld: usize| ((rows - 1) * ld + cols) * size;
        let dz = random_bytes(stream, T::KIND, bytes(t, o, dz_ld), 3)?;
        let x = random_bytes(stream, T::KIND, bytes(t, i, desc.ldx), 4)?;
        let mut dw = DeviceBuffer::<u8>::zeros(stream, bytes(o, i, desc.lddw))?;
        let mut db =
            DeviceBuffer::<u8>::zeros(stream, o * size.max(ElementKind::F64.size_bytes()))?;
        let lt_ws = plain.algo.workspace_bytes.max(fused.algo.workspace_bytes);
        let cs_off = round_up(lt_ws);
        let mut ws = DeviceBuffer::<u8>::zeros(
            stream,
            (cs_off + kernels.col_sum_workspace(split, o)).max(1),
        )?;
        let ws_ptr = ws.as_slice_mut().ptr();
        let db_ptr = db.as_slice_mut().ptr();
        let dw_ptr = dw.as_slice_mut().ptr();
        let dz_ptr = dz.as_slice().ptr();
        let one = scalar(compute, true, 1.0);
        let zero = scalar(compute, true, 0.0);
        let ptrs = |p: &Prepared| Ptrs {
            dbias: db_ptr,
            ..Ptrs::matmul(dz_ptr, x.as_slice().ptr(), dw_ptr)
                .with_workspace(ws_ptr, p.algo.workspace_bytes)
        };
        let timing = fastest(stream, 2, |c| {
            // SAFETY: dz, x, dw and db are scratch buffers of the extents the
            // matmuls and the column sum reach; ws covers the larger matmul
            // workspace and the column-sum partials at cs_off. `fastest`
            // synchronizes before they drop.
            unsafe {
                if c == 0 {
                    fused.enqueue(stream, one, zero, ptrs(fused))
                } else {
                    plain.enqueue(stream, one, zero, ptrs(plain))?;
                    kernels.col_sum(
                        stream,
                        dz_ptr,
                        (t, o, dz_ld),
                        split,
                        db_ptr,
                        ws_ptr.byte_add(cs_off),
                    )
                }
            }
        })?;
        timing.log(&format!("linear dW + db {desc:?} {:?}", T::KIND), |c| {
            if c == 0 {
                format!("BGRADB epilogue: {}", fused.describe())
            } else {
                format!("plain dW + column sum: {}", plain.describe())
            }
        });
        Ok(match (timing.best, timing.first_error) {
            (Some((c, _)), _) => c == 0,
            (None, Some(e)) => return Err(e),
            (None, None) => true,
        })
    })
}

/// Whether the forward runs faster through the skinny kernel than through
/// the cuBLASLt plan `fw`, timed on random scratch operands rotated over
/// [`operand_sets`] sets; cached per device, descriptor, dtype and
/// preference for the process.
pub(super) fn skinny_is_faster<T: Element>(
    stream: &Stream,
    desc: &LinearDescriptor,
    pref: &PlanPreference,
    fw: &GemmPlan<T>,
    kernels: &EpilogueKernels,
) -> Result<bool> {
    cached_choice::<T>("skinny", stream, desc, pref, || {
        // Packed: the caller checked `packed_forward`.
        let (t, i, o) = desc.shape();
        let size = T::KIND.size_bytes();
        let has_bias = desc.epilogue.has_bias();
        let set_bytes = (t * i + o * i + 2 * t * o + o) * size;
        let n_sets = operand_sets(stream, set_bytes);
        let mut sets = Vec::with_capacity(n_sets);
        for s in 0..n_sets as u64 {
            sets.push((
                random_bytes(stream, T::KIND, t * i * size, 3 * s + 1)?,
                random_bytes(stream, T::KIND, o * i * size, 3 * s + 2)?,
                random_bytes(stream, T::KIND, o * size, 3 * s + 3)?,
                DeviceBuffer::<u8>::zeros(stream, t * o * size)?,
                DeviceBuffer::<u8>::zeros(stream, t * o * size)?,
            ));
        }
        let mut ws = DeviceBuffer::<u8>::zeros(stream, fw.workspace_size().max(1))?;
        let ws_ptr = ws.as_slice_mut().ptr();
        let ptrs: Vec<Ptrs> = sets
            .iter_mut()
            .map(|(x, w, b, y, z)| {
                let mut p = Ptrs::matmul(x.as_slice().ptr(), w.as_slice().ptr(), y.as_slice_mut().ptr())
                    .with_workspace(ws_ptr, fw.workspace_size());
                if has_bias {
                    p.bias = b.as_slice().ptr();
                }
                if desc.save_aux {
                    p.aux = z.as_slice_mut().ptr();
                }
                p
            })
            .collect();
        let one = scalar(fw.compute(), true, 1.0);
        let zero = scalar(fw.compute(), true, 0.0);
        let act = act_code(desc.epilogue.activation());
        let mut launches = 0usize;
        let timing = fastest(stream, 2, |c| {
            let p = ptrs[launches % ptrs.len()];
            launches += 1;
            // SAFETY: every scratch buffer holds the elements of its operand
            // (x [t, i], w [o, i], bias [o], y and aux [t, o]), device
            // allocations are 256-byte aligned, `skinny_fits` held for the
            // shape (the caller checked), and ws covers fw's workspace;
            // `fastest` synchronizes before they drop.
            unsafe {
                if c == 0 {
                    let m = p.mat;
                    kernels.skinny(stream, (t, i, o), (m.a, m.b, p.bias), (m.d, p.aux), act)
                } else {
                    fw.enqueue_checked(stream, one, zero, p)
                }
            }
        })?;
        timing.log(&format!("linear forward {desc:?} {:?}", T::KIND), |c| {
            if c == 0 {
                "skinny kernel".to_string()
            } else {
                format!("cuBLASLt: {}", fw.sku().variant)
            }
        });
        Ok(match (timing.best, timing.first_error) {
            (Some((c, _)), _) => c == 0,
            (None, Some(e)) => return Err(e),
            (None, None) => false,
        })
    })
}
