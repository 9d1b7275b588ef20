//! The narrow matmul (`kernels/gemm/narrow_matmul.cu`): the forward and
//! data-gradient matmuls of a linear layer with few input and output
//! features (32, 64, 96 or 128 each) over many rows, in f16 or bf16. Such
//! a matmul moves `rows x (in + out)` elements and does little math per
//! byte, so its speed is the memory's; this kernel streams it like a copy
//! (one 16-byte load per operand vector straight into tensor-core
//! fragments) where a tiled GEMM spends its time on tile setup and tails.
//! It serves pointwise convolutions over channels-last tensors (ResNet's
//! 1x1 64->64 layer), where measured autotuning times it with cuDNN's
//! engines and cuBLASLt's matmul.

use baracuda_driver::{Function, LaunchConfig, ModuleSpec, Stream};
use baracuda_kernels_types::{DevPtr, DevPtrMut, ElementKind, Error, Result};

use super::epilogue::kernel_args;
use crate::kernel_sources::{typed_spec, NARROW_MATMUL};
use super::plain::LinearMatmul;

/// Threads per block (`WARPS` x 32 in the source).
const THREADS: u32 = 128;
/// Rows a warp takes per chunk (`TILES` x 16 in the source: two tiles
/// when `k + n <= 128`, else one).
fn chunk_rows(k: usize, n: usize) -> usize {
    if k + n <= 128 {
        32
    } else {
        16
    }
}
/// Channel counts the kernel is specialised for (`NARROW_K`, `NARROW_N`).
const WIDTHS: [usize; 4] = [32, 64, 96, 128];

/// The kernel's tensor-core path takes the 16-bit float kinds.
fn is_16bit(kind: ElementKind) -> bool {
    matches!(kind, ElementKind::F16 | ElementKind::Bf16)
}

/// `(K, N, TRANS)` of a role's matmul for `(tokens, in, out)`: the
/// forward reduces over `in` and writes `out` channels from `w[out, in]`;
/// the data gradient reduces over `out` and writes `in`, reading `w`
/// transposed. None for the weight gradient (a reduction over the rows).
fn dims(role: LinearMatmul, (_, i, o): (usize, usize, usize)) -> Option<(usize, usize, u32)> {
    match role {
        LinearMatmul::Forward => Some((i, o, 0)),
        LinearMatmul::DataGrad => Some((o, i, 1)),
        LinearMatmul::WeightGrad => None,
    }
}

/// Whether the narrow kernel computes `role` of a `(tokens, in, out)`
/// linear layer in `kind`.
pub(crate) fn narrow_fits(
    role: LinearMatmul,
    shape: (usize, usize, usize),
    kind: ElementKind,
) -> bool {
    is_16bit(kind)
        && shape.0 > 0
        && dims(role, shape).is_some_and(|(k, n, _)| WIDTHS.contains(&k) && WIDTHS.contains(&n))
}

/// The module of one specialisation.
fn spec(kind: ElementKind, k: usize, n: usize, trans: u32) -> Option<ModuleSpec> {
    let spec = typed_spec(&NARROW_MATMUL, kind).filter(|_| is_16bit(kind))?;
    Some(
        spec.define("NARROW_K", k)
            .define("NARROW_N", n)
            .define("TRANS", trans),
    )
}

/// Every specialisation a plan can request.
pub(crate) fn module_specs() -> Vec<ModuleSpec> {
    let mut v = Vec::new();
    for kind in [ElementKind::F16, ElementKind::Bf16] {
        for k in WIDTHS {
            for n in WIDTHS {
                for trans in [0, 1] {
                    v.extend(spec(kind, k, n, trans));
                }
            }
        }
    }
    v
}

/// One narrow matmul, loaded and sized in `select`.
#[derive(Clone, Debug)]
pub(crate) struct NarrowMatmul {
    f: Function,
    rows: usize,
    k: usize,
    n: usize,
    blocks: u32,
    chunks_per_warp: usize,
}

impl NarrowMatmul {
    /// Load the kernel for `role` of a `(tokens, in, out)` linear layer;
    /// `Ok(None)` when [`narrow_fits`] does not hold.
    ///
    /// # Errors
    /// Module load or occupancy query failures.
    pub(crate) fn new(
        stream: &Stream,
        role: LinearMatmul,
        shape: (usize, usize, usize),
        kind: ElementKind,
    ) -> Result<Option<NarrowMatmul>> {
        if !narrow_fits(role, shape, kind) {
            return Ok(None);
        }
        let Some((k, n, trans)) = dims(role, shape) else {
            return Ok(None);
        };
        let Some(spec) = spec(kind, k, n, trans) else {
            return Ok(None);
        };
        let ctx = stream.context();
        let f = ctx.module(&spec)?.function("narrow_matmul")?;
        // Every warp takes the same number of chunks, and the grid fits
        // the GPU at once: no block waits for a second wave.
        let per_sm = f.max_active_blocks_per_sm(THREADS, 0)?.max(1) as usize;
        let warps = THREADS as usize / 32;
        let slots = ctx.device().sm_count.max(1) as usize * per_sm * warps;
        let chunks = shape.0.div_ceil(chunk_rows(k, n));
        let chunks_per_warp = chunks.div_ceil(slots).max(1);
        let blocks = chunks.div_ceil(chunks_per_warp * warps);
        let blocks = u32::try_from(blocks).map_err(|_| Error::Unsupported {
            op: "narrow matmul",
            what: format!("{} rows", shape.0),
        })?;
        Ok(Some(NarrowMatmul {
            f,
            rows: shape.0,
            k,
            n,
            blocks,
            chunks_per_warp,
        }))
    }

    /// The SKU fragment.
    pub(crate) fn describe(&self) -> String {
        format!(
            "narrow mma kernel (k {} n {}, {} blocks, {} chunks of {} rows per warp)",
            self.k,
            self.n,
            self.blocks,
            self.chunks_per_warp,
            chunk_rows(self.k, self.n)
        )
    }

    /// Enqueue `D = A Bm^T` on `(a, b, d)` (the role's A, its weight `w`
    /// and D, as [`LinearMatmul`] names them).
    ///
    /// # Safety
    /// `a` must hold `rows x k` and `d` `rows x n` elements and `b` the
    /// `k x n` weights, all of the kind the kernel was loaded for, packed
    /// row-major, 16-byte aligned and valid until the work completes; `d`
    /// must not overlap `a` or `b`.
    pub(crate) unsafe fn enqueue(
        &self,
        stream: &Stream,
        (a, b, d): (DevPtr<u8>, DevPtr<u8>, DevPtrMut<u8>),
    ) -> Result<()> {
        let cfg = LaunchConfig::linear(self.blocks, THREADS);
        let mut args = kernel_args(|p| {
            p.push(a)?.push(b)?.push(d)?.push(self.rows as i64)?;
            Ok(())
        })?;
        // SAFETY: the arguments match narrow_matmul's signature; the
        // caller guarantees the extents and alignment it reads and writes
        // (rows below `rows`, `k` and `n` channels per row).
        unsafe { self.f.launch(stream, cfg, &mut args) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fits_narrow_layers_in_16_bit_floats() {
        use ElementKind::{Bf16, F16, F32};
        use LinearMatmul::{DataGrad, Forward, WeightGrad};
        // (direction, (tokens, in, out), dtype, fits): the forward reduces
        // over `in` and writes `out`, the data gradient the reverse.
        let cases = [
            (Forward, (200_704, 64, 64), Bf16, true),
            (DataGrad, (200_704, 64, 64), F16, true),
            (WeightGrad, (200_704, 64, 64), Bf16, false),
            (Forward, (200_704, 64, 64), F32, false),
            (Forward, (0, 64, 64), Bf16, false),
            (Forward, (8, 32, 128), Bf16, true),
            (Forward, (8, 64, 256), Bf16, false),
            (DataGrad, (8, 256, 64), Bf16, false),
            (Forward, (8, 48, 64), Bf16, false),
        ];
        for (dir, shape, kind, fits) in cases {
            assert_eq!(
                narrow_fits(dir, shape, kind),
                fits,
                "{dir:?} {shape:?} {kind}"
            );
        }
        assert_eq!(dims(LinearMatmul::Forward, (1, 32, 64)), Some((32, 64, 0)));
        assert_eq!(dims(LinearMatmul::DataGrad, (1, 32, 64)), Some((64, 32, 1)));
    }

    #[test]
    fn one_spec_per_dtype_width_pair_and_direction() {
        assert_eq!(module_specs().len(), 2 * 4 * 4 * 2);
    }
}
