//! Launches of the elementwise kernels in `kernels/gemm/gemm_epilogue.cu`:
//! what cuBLASLt's fused epilogues do not cover (GELU-erf, a bias along a
//! column-major `D`, the pre-activation of ReLU, activation backward, int
//! GEMM scaling, amax).

use baracuda_driver::{Function, LaunchArgs, LaunchConfig, ModuleSpec, Stream};
use baracuda_kernels_types::{
    Activation, DevPtr, DevPtrMut, ElementKind, Error, MatrixOrder, Result,
};

use super::matmul::Batch;
use crate::kernel_sources::{typed_spec, GEMM_EPILOGUE};

/// The module spec for outputs of `kind`.
pub(crate) fn spec(kind: ElementKind) -> Result<ModuleSpec> {
    let spec = typed_spec(&GEMM_EPILOGUE, kind).ok_or_else(|| Error::Unsupported {
        op: "gemm epilogue",
        what: format!("no GEMM epilogue kernel for {kind} outputs"),
    })?;
    Ok(spec
        .define("SKINNY_ROWS", SKINNY_ROWS)
        .define("SKINNY_SPLIT", SKINNY_SPLIT)
        .define("SKINNY_UNROLL", SKINNY_UNROLL)
        .define("SKINNY_WARPS", SKINNY_WARPS))
}

/// Every spec a GEMM plan can request.
pub(crate) fn module_specs() -> Vec<ModuleSpec> {
    [
        ElementKind::F32,
        ElementKind::F64,
        ElementKind::F16,
        ElementKind::Bf16,
    ]
    .into_iter()
    .filter_map(|k| spec(k).ok())
    .collect()
}

pub(crate) fn act_code(a: Activation) -> i32 {
    match a {
        Activation::Identity => 0,
        Activation::Relu => 1,
        Activation::GeluErf => 2,
        Activation::GeluTanh => 3,
    }
}

/// The epilogue kernels for one output dtype, loaded in `select`.
#[derive(Clone, Debug)]
pub(crate) struct EpilogueKernels {
    bias_act: Function,
    pub dact: Function,
    col_sum_part_vec: Function,
    col_sum_part_1: Function,
    col_sum_fin: Function,
    pub scale_i32: Function,
    pub amax_init: Function,
    pub amax: Function,
    /// `skinny_1` .. `skinny_4`: the linear forward for 1 to 4 rows of X.
    skinny: [Function; SKINNY_MAX_TOKENS],
    kind: ElementKind,
    sm_count: u32,
}

/// Most rows of X the skinny linear kernel takes (`skinny_N` in
/// `gemm_epilogue.cu`).
pub(crate) const SKINNY_MAX_TOKENS: usize = 4;
/// The skinny kernel's shape, passed to `gemm_epilogue.cu` as defines and
/// used for its grid: rows of W per warp group, warps per group (each sums
/// one slice of K), 16-byte loads in flight per row and lane, and warps per
/// block. The fastest of `docs/perf-notes/experiments/decode_gemv.cu`'s sweep on
/// H200, ahead of cuBLASLt's candidates and `cublasGemmEx` in both its
/// timing regimes.
const SKINNY_ROWS: usize = 4;
const SKINNY_SPLIT: usize = 4;
const SKINNY_UNROLL: usize = 2;
const SKINNY_WARPS: usize = 8;

/// Whether the skinny kernel computes the forward of a linear layer with
/// `tokens` rows of X, `k` inputs and `n` outputs of `kind` on a GPU of
/// `sm_count` SMs: at most [`SKINNY_MAX_TOKENS`] rows, `k` a whole number
/// of 16-byte vectors, and enough rows of W to give every SM at least 4
/// warps (fewer rows leave HBM idle; cuBLASLt's split-K covers them).
pub(crate) fn skinny_fits(
    kind: ElementKind,
    sm_count: u32,
    tokens: usize,
    k: usize,
    n: usize,
) -> bool {
    let vec = 16 / kind.size_bytes().max(1);
    (1..=SKINNY_MAX_TOKENS).contains(&tokens)
        && k > 0
        && k % vec == 0
        && n.div_ceil(SKINNY_ROWS) * SKINNY_SPLIT >= 4 * sm_count.max(1) as usize
}

/// How the two-pass column sum splits a `[rows, cols]` matrix: row chunks
/// of `chunk` rows (a multiple of the 8 row lanes), `chunks` of them.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) struct ColSumSplit {
    chunk: usize,
    chunks: usize,
    /// Columns per 16-byte load; 1 when the shape rules vectors out.
    vec: usize,
}

impl EpilogueKernels {
    pub(crate) fn load(stream: &Stream, kind: ElementKind) -> Result<Self> {
        let ctx = stream.context();
        let m = ctx.module(&spec(kind)?)?;
        Ok(EpilogueKernels {
            bias_act: m.function("bias_act")?,
            dact: m.function("dact")?,
            col_sum_part_vec: m.function("col_sum_part_vec")?,
            col_sum_part_1: m.function("col_sum_part_1")?,
            col_sum_fin: m.function("col_sum_fin")?,
            scale_i32: m.function("scale_i32")?,
            amax_init: m.function("amax_init")?,
            amax: m.function("amax")?,
            skinny: [
                m.function("skinny_1")?,
                m.function("skinny_2")?,
                m.function("skinny_3")?,
                m.function("skinny_4")?,
            ],
            kind,
            sm_count: ctx.device().sm_count,
        })
    }

    /// A grid-stride launch over `total` items: enough blocks to fill the
    /// GPU a few times over (132 SMs * 8 = 1056 blocks of 256 on an H200),
    /// fewer for small problems.
    pub(crate) fn cfg(&self, total: usize) -> LaunchConfig {
        let blocks = total
            .div_ceil(256)
            .clamp(1, (self.sm_count.max(1) * 8) as usize);
        LaunchConfig::linear(blocks as u32, 256)
    }

    /// `Z = D + bias` (bias `n` values along the columns), `aux = Z` when
    /// `aux` is not 0, `D = act(Z)`, in place over every entry of `batch`
    /// (its `d`, `bias` and `aux` strides; the aux matrices share `D`'s
    /// order and leading dimension). `bias` and `aux` may be null (none).
    /// The addresses are untyped: the elements are the kernels' kind.
    ///
    /// # Safety
    /// Every entry's `D` and aux must hold the `m x n` elements that `ldd`
    /// and `order` reach, and its bias `n` elements, of the kernels'
    /// kind; aux must not overlap `D`.
    pub(crate) unsafe fn bias_act(
        &self,
        stream: &Stream,
        (m, n, ldd, order): (usize, usize, usize, MatrixOrder),
        batch: &Batch,
        (d, bias, aux): (DevPtrMut<u8>, DevPtr<u8>, DevPtrMut<u8>),
        act: Activation,
    ) -> Result<()> {
        let (x, y) = batch_grid(self.sm_count, m * n, batch.count);
        let cfg = LaunchConfig {
            grid: (x, y, 1),
            block: (256, 1, 1),
            smem_bytes: 0,
        };
        let row = i32::from(order == MatrixOrder::RowMajor);
        let mut a = kernel_args(|a| {
            a.push(d)?.push(ldd as i64)?.push(row)?;
            a.push(m as i64)?.push(n as i64)?;
            a.push(bias)?
                .push(act_code(act))?
                .push(aux)?
                .push(ldd as i64)?;
            a.push(batch.count as i64)?.push(batch.d as i64)?;
            a.push(batch.bias as i64)?.push(batch.aux as i64)?;
            Ok(())
        })?;
        // SAFETY: the parameters match bias_act's signature; the caller
        // guarantees every entry the grid reaches (entries below
        // batch.count, m x n elements each) lies in its buffers.
        unsafe { self.bias_act.launch(stream, cfg, &mut a) }
    }

    /// The split of a column sum over a row-major `[rows, cols]` matrix with
    /// leading dimension `ld` on this device (see [`col_sum_split`]).
    pub(crate) fn col_sum_split(&self, rows: usize, cols: usize, ld: usize) -> ColSumSplit {
        col_sum_split(self.kind, self.sm_count, rows, cols, ld)
    }

    /// Workspace bytes of [`EpilogueKernels::col_sum`] for `split`.
    pub(crate) fn col_sum_workspace(&self, split: ColSumSplit, cols: usize) -> usize {
        let acc = if self.kind == ElementKind::F64 { 8 } else { 4 };
        if split.chunks > 1 {
            split.chunks * cols * acc
        } else {
            0
        }
    }

    /// `out[j] = sum_i x[i, j]` of a row-major `[rows, cols]` `x` with
    /// leading dimension `ld`, in the accumulation type, deterministic for
    /// a given shape and device (fixed split, fixed summation order).
    ///
    /// # Safety
    /// `x` must hold `(rows - 1) * ld + cols` elements of the kernels' kind,
    /// `out` `cols`, and `ws` [`EpilogueKernels::col_sum_workspace`] bytes
    /// for `split`, which must come from [`EpilogueKernels::col_sum_split`]
    /// of the same shape.
    pub(crate) unsafe fn col_sum(
        &self,
        stream: &Stream,
        x: DevPtr<u8>,
        (rows, cols, ld): (usize, usize, usize),
        split: ColSumSplit,
        out: DevPtrMut<u8>,
        ws: DevPtrMut<u8>,
    ) -> Result<()> {
        // 16-byte loads also need a 16-byte aligned base.
        let vec = if x.addr() % 16 == 0 { split.vec } else { 1 };
        let (f, tile) = if vec > 1 {
            (&self.col_sum_part_vec, 32 * vec)
        } else {
            (&self.col_sum_part_1, 32)
        };
        let cfg = LaunchConfig {
            grid: (cols.div_ceil(tile) as u32, split.chunks as u32, 1),
            block: (32, 8, 1),
            smem_bytes: 0,
        };
        let mut a = kernel_args(|a| {
            a.push(x)?
                .push(rows as i64)?
                .push(cols as i64)?
                .push(ld as i64)?
                .push(split.chunk as i64)?
                .push(ws)?
                .push(out)?;
            Ok(())
        })?;
        // SAFETY: the caller guarantees x, out and ws cover what the grid
        // reaches: rows below `rows`, columns below `cols`, partials
        // chunks x cols.
        unsafe { f.launch(stream, cfg, &mut a) }?;
        if split.chunks > 1 {
            let mut a = kernel_args(|a| {
                a.push(ws)?
                    .push(split.chunks as i64)?
                    .push(cols as i64)?
                    .push(out)?;
                Ok(())
            })?;
            // SAFETY: as above; the finishing pass reads the partials the
            // first wrote and writes `cols` outputs.
            unsafe { self.col_sum_fin.launch(stream, self.cfg(cols), &mut a) }?;
        }
        Ok(())
    }
}

impl EpilogueKernels {
    /// The linear forward `Y = act(X W^T + b)` (and `aux = X W^T + b`) of
    /// `tokens` rows through the skinny kernel: `x` `[tokens, k]`, `w`
    /// `[n, k]`, `y` and `aux` `[tokens, n]`, all row-major and packed and
    /// of the kernels' kind; `bias` (`n`) and `aux` may be null (none).
    ///
    /// # Safety
    /// [`skinny_fits`] must hold for the shape; `x` and `w` must be 16-byte
    /// aligned; every pointer must hold the elements above, of the kernels'
    /// kind, and `y`/`aux` must not overlap the inputs.
    pub(crate) unsafe fn skinny(
        &self,
        stream: &Stream,
        (tokens, k, n): (usize, usize, usize),
        (x, w, bias): (DevPtr<u8>, DevPtr<u8>, DevPtr<u8>),
        (y, aux): (DevPtrMut<u8>, DevPtrMut<u8>),
        act: i32,
    ) -> Result<()> {
        let f = self
            .skinny
            .get(tokens.wrapping_sub(1))
            .ok_or_else(|| Error::Unsupported {
                op: "linear",
                what: format!(
                    "the skinny kernel takes 1 to {SKINNY_MAX_TOKENS} rows, not {tokens}"
                ),
            })?;
        let blocks = n.div_ceil(SKINNY_ROWS * (SKINNY_WARPS / SKINNY_SPLIT));
        let cfg = LaunchConfig::linear(blocks as u32, (32 * SKINNY_WARPS) as u32);
        let mut a = kernel_args(|a| {
            a.push(x)?.push(w)?.push(bias)?.push(y)?.push(aux)?;
            a.push(n as i64)?.push(k as i64)?.push(act)?;
            Ok(())
        })?;
        // SAFETY: the parameters match skinny_N's signature; the caller
        // guarantees the extents and alignment the kernel reads and writes
        // (rows below n, k elements per row, tokens rows of X, Y and aux).
        unsafe { f.launch(stream, cfg, &mut a) }
    }
}

/// The split of a column sum over a row-major `[rows, cols]` matrix of
/// `kind` with leading dimension `ld` on a GPU of `sm_count` SMs: enough
/// row chunks that the column tiles times the chunks fill the GPU about 8
/// blocks per SM, but no more chunks than `rows / 64` rounded up; each chunk
/// a multiple of the 8 row lanes (at most `8 * sm_count` chunks, far below
/// the grid's y limit).
fn col_sum_split(
    kind: ElementKind,
    sm_count: u32,
    rows: usize,
    cols: usize,
    ld: usize,
) -> ColSumSplit {
    let v = 16 / kind.size_bytes();
    let vec = if cols % v == 0 && ld % v == 0 { v } else { 1 };
    let tiles = cols.div_ceil(32 * vec).max(1);
    let target = (sm_count.max(1) as usize) * 8;
    let want = target.div_ceil(tiles).clamp(1, rows.div_ceil(64).max(1));
    let chunk = rows.div_ceil(want).div_ceil(8).max(1) * 8;
    ColSumSplit {
        chunk,
        chunks: rows.div_ceil(chunk).max(1),
        vec,
    }
}

/// The grid of a pass over `count` entries of `elems` elements each: x
/// blocks of 256 over one entry (as [`EpilogueKernels::cfg`]: at most 8
/// per SM) times y entries at a time, together about 8 blocks per SM. On
/// 132 SMs, 64 entries of 33 x 40: 6 x 64 blocks; one entry of
/// 8192 x 14336: 1056 x 1.
fn batch_grid(sm_count: u32, elems: usize, count: usize) -> (u32, u32) {
    let target = (sm_count.max(1) * 8) as usize;
    let x = elems.div_ceil(256).clamp(1, target);
    let y = (target / x).clamp(1, count.clamp(1, 65535));
    (x as u32, y as u32)
}

/// Push a list of kernel parameters.
pub(crate) fn kernel_args(push: impl FnOnce(&mut LaunchArgs) -> Result<()>) -> Result<LaunchArgs> {
    let mut a = LaunchArgs::new();
    push(&mut a)?;
    Ok(a)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn col_sum_split_covers_every_row_once() {
        for kind in [
            ElementKind::F32,
            ElementKind::F64,
            ElementKind::F16,
            ElementKind::Bf16,
        ] {
            for rows in [1, 7, 8, 63, 64, 65, 517, 1000, 8192, 1 << 20] {
                for (cols, ld) in [(1, 1), (18, 18), (36, 40), (40, 40), (14336, 14336)] {
                    let sp = col_sum_split(kind, 132, rows, cols, ld);
                    assert_eq!(sp.chunk % 8, 0, "{sp:?}");
                    assert!(sp.chunks * sp.chunk >= rows, "{rows} {sp:?}");
                    assert!((sp.chunks - 1) * sp.chunk < rows, "{rows} {sp:?}");
                    assert!(sp.chunks <= 8 * 132, "{sp:?}");
                    let v = 16 / kind.size_bytes();
                    let want_vec = if cols % v == 0 && ld % v == 0 { v } else { 1 };
                    assert_eq!(sp.vec, want_vec, "{kind:?} {cols} {ld}");
                }
            }
        }
        // The prefill dY: 56 column tiles of 256 bf16, 19 chunks of 432 rows.
        let sp = col_sum_split(ElementKind::Bf16, 132, 8192, 14336, 14336);
        assert_eq!((sp.chunk, sp.chunks, sp.vec), (432, 19, 8));
    }

    #[test]
    fn batch_grid_fills_the_gpu_once() {
        assert_eq!(batch_grid(132, 33 * 40, 64), (6, 64));
        assert_eq!(batch_grid(132, 8192 * 14336, 1), (1056, 1));
        assert_eq!(batch_grid(132, 1, 1 << 20), (1, 1056));
        assert_eq!(batch_grid(132, 1, 3), (1, 3));
        assert_eq!(batch_grid(0, 0, 0), (1, 1));
    }

    #[test]
    fn skinny_takes_decode_shapes_only() {
        use ElementKind::{Bf16, F16, F32, F64};
        // Decode, up and down projections, 1 to 4 tokens, on 132 SMs.
        for t in 1..=4 {
            assert!(skinny_fits(Bf16, 132, t, 4096, 14336));
            assert!(skinny_fits(Bf16, 132, t, 14336, 4096));
        }
        assert!(!skinny_fits(Bf16, 132, 0, 4096, 14336));
        assert!(!skinny_fits(Bf16, 132, 5, 4096, 14336));
        // K a whole number of 16-byte vectors of the dtype.
        assert!(!skinny_fits(Bf16, 132, 1, 4100, 14336));
        assert!(skinny_fits(F32, 132, 1, 4100, 14336));
        assert!(!skinny_fits(F32, 132, 1, 4098, 14336));
        assert!(skinny_fits(F64, 132, 1, 4098, 14336));
        assert!(!skinny_fits(F16, 132, 1, 0, 14336));
        // At least 4 warps per SM, groups of 4 warps over 4 rows: 528 rows
        // (132 groups) on 132 SMs.
        assert!(skinny_fits(Bf16, 132, 1, 4096, 528));
        assert!(skinny_fits(Bf16, 132, 1, 4096, 525));
        assert!(!skinny_fits(Bf16, 132, 1, 4096, 524));
        assert!(skinny_fits(Bf16, 16, 1, 4096, 64));
        assert!(!skinny_fits(Bf16, 16, 1, 4096, 60));
    }
}
