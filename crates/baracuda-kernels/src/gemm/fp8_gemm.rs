//! FP8 GEMM (Hopper and newer): `D = (scale_a * scale_b) * (A B)` with
//! e4m3 / e5m2 operands, per-tensor f32 scale factors in device memory, f32
//! accumulation, bf16 / f16 / f32 output and an optional `amax = max |D|`.
//!
//! cuBLASLt's fp8 kernels (cuBLAS docs, `cublasLtMatmul`, "To use FP8
//! kernels ...") need: `A` transposed and `B` not (TN, in cuBLASLt's
//! column-major terms; a row-major `A` and column-major `B` here, which the
//! `Rcr`/`Rcc` layouts give after the row-major swap in `matmul.rs`), every
//! matrix pointer 16-byte aligned, compute `32F`, scale type `32F`, and the
//! Tensor Core sizes: `k`, `lda`, `ldb` multiples of 16 elements, the
//! contiguous extent of `D` (`n` for a row-major `D`, `m` for a column-major
//! one) a multiple of 16 and `ldd` a multiple of 16 bytes, as
//! `torch._scaled_mm` requires. `select` rejects every other shape with
//! `Unsupported`, so `run` never meets a cuBLASLt `NOT_SUPPORTED`.
//!
//! Two details follow PyTorch's `_scaled_mm` and NVIDIA's `LtFp8Matmul`
//! sample, the fp8 paths known to run on H100/H200: each scale factor is
//! its own 16-byte aligned allocation (`run` checks the alignment), and `C`
//! is passed as null (`beta` is always 0) rather than aliasing `D`. On
//! H200, with the scale of `B` 4 bytes into a shared buffer and `C`
//! aliasing `D`, `cublasLtMatmul` answers `NOT_SUPPORTED` for an algorithm
//! the heuristic offers when shown aligned placeholder scales.

use std::marker::PhantomData;

use baracuda_driver::{LtCompute, LtScalar, Stream};
use baracuda_kernels_types::{
    DevPtr, Element, ElementKind, Error, KernelSku, MathPrecision, MatrixMut, MatrixOrder,
    MatrixRef, PlanPreference, Result, Shape, TensorMut, TensorRef, Workspace,
};

use super::args::{check_disjoint, Region};
use super::epilogue::{kernel_args, EpilogueKernels};
use super::gemm::{check_operands, GemmDescriptor};
use super::int_gemm::{check_tn, prepare_tn};
use super::matmul::{lt_sku, Prepared, Ptrs};
use crate::checks::ALIGN_BYTES;
use crate::Plan;

const OP: &str = "fp8_gemm";

/// An fp8 GEMM; layout `Rcr` or `Rcc`, identity epilogue, `k`, `lda`,
/// `ldb` and the contiguous extent of `D` multiples of 16, `ldd` a multiple
/// of 16 bytes.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Fp8GemmDescriptor {
    /// Sizes, layout, leading dimensions.
    pub gemm: GemmDescriptor,
    /// Also write `max |D|` to `Fp8GemmArgs::amax`.
    pub amax: bool,
}

/// Tensors of one fp8 GEMM.
#[derive(Debug)]
pub struct Fp8GemmArgs<'a, A, B, O> {
    /// `A`, `m x k`.
    pub a: MatrixRef<'a, A>,
    /// `B`, `k x n`.
    pub b: MatrixRef<'a, B>,
    /// `D`, `m x n`, written.
    pub d: MatrixMut<'a, O>,
    /// Dequantisation scale of `A`: `[1]`, 16-byte aligned.
    pub scale_a: TensorRef<'a, f32, 1>,
    /// Dequantisation scale of `B`: `[1]`, 16-byte aligned.
    pub scale_b: TensorRef<'a, f32, 1>,
    /// `max |D|`, `[1]`, when the descriptor asks for it.
    pub amax: Option<TensorMut<'a, f32, 1>>,
}

/// The operand and output types a plan is for (a `fn` type keeps the plan
/// `Send + Sync` whatever they are).
type Operands<A, B, O> = fn() -> (A, B, O);

/// e4m3/e5m2 GEMM through cuBLASLt:
/// `D[i, j] = scale_a * scale_b * sum_l A[i, l] B[l, j]`, accumulated in
/// f32 and rounded once to `O`; with the descriptor's `amax`, also
/// `amax = max_ij |D[i, j]|` (of the stored `D`). No bias, activation or
/// `C`, and no backward.
///
/// # Shapes
/// `A`: `m x k`, `B`: `k x n`, `D`: `m x n`; `scale_a`, `scale_b` and
/// `amax`: `[1]` f32.
/// # Layout
/// Layout `Rcr` or `Rcc` (row-major `A`, column-major `B`, `D` in either
/// order), the descriptor's leading dimensions; `k`, `lda`, `ldb` and the
/// contiguous extent of `D` multiples of 16, `ldd` a multiple of 16 bytes
/// (the module doc says why). Every matrix and each scale 16-byte aligned
/// (each scale its own allocation). The workspace is `workspace_size()`
/// bytes.
/// # Dtypes
/// `A x B`: e4m3 x e4m3, e5m2 x e4m3 or e4m3 x e5m2 (`F8E4M3`, `F8E5M2`);
/// `O`: bf16, f16 or f32; all nine combinations, f32 accumulation.
/// e5m2 x e5m2 and any other type: `Unsupported`.
/// # Errors
/// From `select`: `Unsupported` (dtypes, a layout other than `Rcr`/`Rcc`,
/// an epilogue or `save_aux`, `k` or the contiguous extent of `D` not a
/// multiple of 16, `ldd` not a multiple of 16 bytes, or no fp8 algorithm
/// on this GPU: fp8 needs sm_89 or newer); `InvalidDescriptor`
/// ([`super::GemmPlan`]'s descriptor checks, `lda` or `ldb` not a
/// multiple of 16); `PreferenceRejected` and the library errors as
/// [`super::GemmPlan`]. From `run`: as [`super::GemmPlan`] for `A`, `B`,
/// `D` and the workspace; `ShapeMismatch` for a scale or amax other than
/// `[1]`, `ContextMismatch` for one on another context,
/// `InvalidArgument` for a scale not 16-byte aligned or an `amax` given
/// against the descriptor or missing.
/// # Aliasing
/// `D` and amax overlap neither each other nor `A`, `B` or the scales
/// (`InvalidArgument` naming the output).
pub struct Fp8GemmPlan<A: Element, B: Element, O: Element> {
    desc: Fp8GemmDescriptor,
    prepared: Prepared,
    kernels: Option<EpilogueKernels>,
    sku: KernelSku,
    _t: PhantomData<Operands<A, B, O>>,
}

pub(crate) fn check_fp8_dtypes(a: ElementKind, b: ElementKind, o: ElementKind) -> Result<()> {
    use ElementKind as K;
    let fp8 = |k| matches!(k, K::Fp8E4M3 | K::Fp8E5M2);
    if !fp8(a)
        || !fp8(b)
        || (a == K::Fp8E5M2 && b == K::Fp8E5M2)
        || !matches!(o, K::Bf16 | K::F16 | K::F32)
    {
        return Err(Error::Unsupported {
            op: OP,
            what: format!(
                "{a} x {b} -> {o} (operands e4m3/e5m2, not both e5m2; output bf16, f16, f32)"
            ),
        });
    }
    Ok(())
}

/// The Tensor Core size rules of cuBLASLt's fp8 kernels (module doc), on
/// top of [`check_tn`]'s layout and `lda`/`ldb` rules.
pub(crate) fn check_fp8_shape(g: &GemmDescriptor, out: ElementKind) -> Result<()> {
    let contiguous = match g.layout.c() {
        MatrixOrder::RowMajor => ("n", g.n),
        MatrixOrder::ColMajor => ("m", g.m),
    };
    for (field, v) in [("k", g.k), contiguous] {
        if v % 16 != 0 {
            return Err(Error::Unsupported {
                op: OP,
                what: format!(
                    "{field} = {v}: cuBLASLt's fp8 kernels need k and the contiguous extent of D \
                     multiples of 16"
                ),
            });
        }
    }
    if (g.ldd * out.size_bytes()) % 16 != 0 {
        return Err(Error::Unsupported {
            op: OP,
            what: format!(
                "ldd = {} ({out}): cuBLASLt's fp8 kernels need ldd a multiple of 16 bytes",
                g.ldd
            ),
        });
    }
    Ok(())
}

/// Check a one-element tensor (a scale or amax): shape `[1]`, on context
/// `ctx`. Its address.
fn one_f32(arg: &'static str, v: &TensorRef<'_, f32, 1>, ctx: usize) -> Result<DevPtr<f32>> {
    if v.data().ctx_id() != ctx {
        return Err(Error::ContextMismatch { op: OP, arg });
    }
    if v.shape() != &[1] {
        return Err(Error::ShapeMismatch {
            op: OP,
            arg,
            expected: Shape::from([1]),
            got: Shape::from(&v.shape()[..]),
        });
    }
    Ok(v.data().ptr())
}

/// A scale or amax pointer must be 16-byte aligned (module doc).
fn check_scale_aligned(arg: &'static str, p: DevPtr<f32>) -> Result<()> {
    let addr = p.addr();
    if addr % ALIGN_BYTES != 0 {
        return Err(Error::InvalidArgument {
            op: OP,
            arg,
            reason: format!(
                "device address {addr:#x} is not {ALIGN_BYTES}-byte aligned (cuBLASLt's fp8 \
                 kernels refuse a scale inside a shared buffer; give each scale its own \
                 allocation)"
            ),
        });
    }
    Ok(())
}

impl<A: Element, B: Element, O: Element> Plan for Fp8GemmPlan<A, B, O> {
    type Descriptor = Fp8GemmDescriptor;
    type Args<'a> = Fp8GemmArgs<'a, A, B, O>;

    fn select(stream: &Stream, desc: &Fp8GemmDescriptor, pref: &PlanPreference) -> Result<Self> {
        let g = &desc.gemm;
        check_fp8_dtypes(A::KIND, B::KIND, O::KIND)?;
        check_tn(OP, g)?;
        check_fp8_shape(g, O::KIND)?;
        let fp8 = ((A::KIND, B::KIND), O::KIND, LtCompute::F32);
        let prepared = prepare_tn(
            OP,
            stream,
            g,
            fp8,
            |p| p.fp8_scales = true,
            pref,
            || {
                format!(
                    "cuBLASLt has no fp8 algorithm for {g:?} on {} (fp8 needs sm_89 or newer)",
                    stream.context().device().arch
                )
            },
        )?;
        pref.check_workspace(OP, prepared.algo.workspace_bytes)?;
        let kernels = if desc.amax {
            Some(EpilogueKernels::load(stream, O::KIND)?)
        } else {
            None
        };
        let det = prepared.algo.is_deterministic();
        let sku = lt_sku(
            OP,
            stream,
            A::KIND,
            format!(
                "{} {}x{}->{} | {}{}",
                g.layout,
                A::KIND,
                B::KIND,
                O::KIND,
                prepared.describe(),
                if desc.amax { " + amax kernel" } else { "" }
            ),
            (MathPrecision::Fp8, ElementKind::F32, det),
        );
        Ok(Fp8GemmPlan {
            desc: desc.clone(),
            prepared,
            kernels,
            sku,
            _t: PhantomData,
        })
    }
    fn sku(&self) -> &KernelSku {
        &self.sku
    }
    fn workspace_size(&self) -> usize {
        self.prepared.algo.workspace_bytes
    }
    fn run(
        &self,
        stream: &Stream,
        workspace: Workspace<'_>,
        args: Fp8GemmArgs<'_, A, B, O>,
    ) -> Result<()> {
        let g = &self.desc.gemm;
        let ctx = stream.context().id();
        let (a, b, d) = check_operands(OP, g, (&args.a, &args.b, &args.d), ctx)?;
        let scale_a = one_f32("scale_a", &args.scale_a, ctx)?;
        let scale_b = one_f32("scale_b", &args.scale_b, ctx)?;
        check_scale_aligned("scale_a", scale_a)?;
        check_scale_aligned("scale_b", scale_b)?;
        let out = Region::matrix_mut(&args.d);
        let mut inputs = vec![
            ("a", Region::matrix(&args.a)),
            ("b", Region::matrix(&args.b)),
            ("scale_a", Region::flat::<f32>(scale_a.addr(), 1)),
            ("scale_b", Region::flat::<f32>(scale_b.addr(), 1)),
        ];
        check_disjoint(OP, ("d", out), &inputs[2..])?;
        let amax = match (&args.amax, self.desc.amax) {
            (Some(m), true) => {
                let p = one_f32("amax", &m.as_const(), ctx)?;
                inputs.push(("d", out));
                check_disjoint(OP, ("amax", Region::flat::<f32>(p.addr(), 1)), &inputs)?;
                m.data().ptr()
            }
            (None, false) => Default::default(),
            (Some(_), false) => {
                return Err(Error::InvalidArgument {
                    op: OP,
                    arg: "amax",
                    reason: "the descriptor has amax = false".into(),
                })
            }
            (None, true) => {
                return Err(Error::InvalidArgument {
                    op: OP,
                    arg: "amax",
                    reason: "missing: the descriptor has amax = true".into(),
                })
            }
        };
        let ws_bytes = self.prepared.algo.workspace_bytes;
        let ws = workspace.check_ptr(OP, ws_bytes, ctx)?;
        let mut ptrs = Ptrs::matmul(a.cast(), b.cast(), d.cast()).with_workspace(ws, ws_bytes);
        // beta is 0, so C is not read; null, as `_scaled_mm` passes it.
        ptrs.mat.c = DevPtr::NULL;
        ptrs.scales = Some((scale_a, scale_b));
        // SAFETY: A, B, D checked above; the scales hold one f32 each on
        // this context, 16-byte aligned; C is null and unread (beta 0); the
        // workspace covers the algorithm.
        unsafe {
            self.prepared
                .enqueue(stream, LtScalar::F32(1.0), LtScalar::F32(0.0), ptrs)
        }?;
        if let Some(k) = &self.kernels {
            let mut init = kernel_args(|a| {
                a.push(amax)?;
                Ok(())
            })?;
            // SAFETY: amax holds one f32 (checked), written as its bits.
            unsafe {
                k.amax_init.launch(
                    stream,
                    baracuda_driver::LaunchConfig::linear(1, 1),
                    &mut init,
                )
            }?;
            let row = i32::from(g.layout.c() == MatrixOrder::RowMajor);
            let mut a = kernel_args(|a| {
                a.push(d)?
                    .push(g.ldd as i64)?
                    .push(row)?
                    .push(g.m as i64)?
                    .push(g.n as i64)?
                    .push(amax)?;
                Ok(())
            })?;
            // SAFETY: D holds m x n at ldd in its order; amax one f32.
            unsafe { k.amax.launch(stream, k.cfg(g.m * g.n), &mut a) }?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ElementKind as K;

    #[test]
    fn dtypes() {
        assert!(check_fp8_dtypes(K::Fp8E4M3, K::Fp8E4M3, K::Bf16).is_ok());
        assert!(check_fp8_dtypes(K::Fp8E5M2, K::Fp8E4M3, K::F32).is_ok());
        for (a, b, o) in [
            (K::Fp8E5M2, K::Fp8E5M2, K::Bf16),
            (K::Fp8E4M3, K::Fp8E4M3, K::Fp8E4M3),
            (K::Bf16, K::Fp8E4M3, K::Bf16),
            (K::Fp8E4M3, K::Fp8E4M3, K::F64),
        ] {
            assert!(
                matches!(check_fp8_dtypes(a, b, o), Err(Error::Unsupported { .. })),
                "{a} {b} {o}"
            );
        }
    }

    #[test]
    fn fp8_shapes() {
        use baracuda_kernels_types::LayoutSku;
        let ok = GemmDescriptor::new(64, 48, 96, LayoutSku::Rcr);
        assert!(check_fp8_shape(&ok, K::Bf16).is_ok());
        // A column-major D needs m (its contiguous extent) aligned instead.
        assert!(
            check_fp8_shape(&GemmDescriptor::new(40, 48, 96, LayoutSku::Rcc), K::Bf16).is_err()
        );
        assert!(check_fp8_shape(&GemmDescriptor::new(40, 48, 96, LayoutSku::Rcr), K::Bf16).is_ok());
        for (d, what) in [
            (GemmDescriptor::new(64, 40, 96, LayoutSku::Rcr), "n = 40"),
            (GemmDescriptor::new(64, 48, 72, LayoutSku::Rcr), "k = 72"),
            (ok.clone().with_ld(96, 96, 52, 52), "ldd = 52"),
        ] {
            let e = check_fp8_shape(&d, K::Bf16).unwrap_err();
            assert!(
                matches!(&e, Error::Unsupported { what: w, .. } if w.contains(what)),
                "{e}"
            );
        }
        // 52 f32 = 208 bytes is a multiple of 16.
        assert!(check_fp8_shape(&ok.with_ld(96, 96, 52, 52), K::F32).is_ok());
    }

    #[test]
    fn scale_alignment() {
        assert!(check_scale_aligned("scale_a", DevPtr::from_addr(0x1000)).is_ok());
        assert!(matches!(
            check_scale_aligned("scale_b", DevPtr::from_addr(0x1004)),
            Err(Error::InvalidArgument { arg: "scale_b", .. })
        ));
    }

    #[test]
    fn scale_slices() {
        // SAFETY: host-only inspection of a fake address.
        let s = unsafe { baracuda_kernels_types::DeviceSlice::from_raw_parts(0x1000, 2, 1) };
        let v = |n| TensorRef::new(s, [n], [1]).unwrap();
        assert_eq!(one_f32("scale_a", &v(1), 1).unwrap().addr(), 0x1000);
        assert!(matches!(
            one_f32("scale_a", &v(0), 1),
            Err(Error::ShapeMismatch { arg: "scale_a", .. })
        ));
        assert!(matches!(
            one_f32("scale_a", &v(2), 1),
            Err(Error::ShapeMismatch { arg: "scale_a", .. })
        ));
        assert!(matches!(
            one_f32("scale_a", &v(1), 2),
            Err(Error::ContextMismatch { .. })
        ));
    }
}
