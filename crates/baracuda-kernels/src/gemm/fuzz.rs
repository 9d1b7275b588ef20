//! Property tests of the GEMM family's host-side validation (GEMM,
//! batched, grouped, linear): random sizes, layouts, epilogues, leading
//! dimensions, batches and strides go through the checks `select` runs
//! before it touches the GPU: nothing
//! panics, every answer is `Ok` or a typed `Error`, and an accepted
//! descriptor's matrices fit their leading dimensions and its batched
//! outputs do not overlap.

use baracuda_kernels_types::{EpilogueKind, LayoutSku, MatrixOrder};
use proptest::prelude::*;

use super::{BatchedGemmDescriptor, GemmDescriptor, GroupedGemmDescriptor, LinearDescriptor};
use crate::fuzz::{config, size, typed};

fn gemm() -> impl Strategy<Value = GemmDescriptor> {
    (
        (size(), size(), size()),
        proptest::sample::select(LayoutSku::ALL.to_vec()),
        proptest::sample::select(EpilogueKind::ALL.to_vec()),
        (size(), size(), size(), size()),
        any::<bool>(),
        any::<bool>(),
    )
        .prop_map(|((m, n, k), layout, epilogue, lds, packed, save_aux)| {
            let d = GemmDescriptor::new(m, n, k, layout);
            let (lda, ldb, ldc, ldd) = if packed {
                (d.lda, d.ldb, d.ldc, d.ldd)
            } else {
                lds
            };
            GemmDescriptor {
                epilogue,
                lda,
                ldb,
                ldc,
                ldd,
                save_aux,
                ..d
            }
        })
}

/// The contiguous extent of a `rows x cols` matrix in `order`.
fn inner(order: MatrixOrder, rows: usize, cols: usize) -> usize {
    match order {
        MatrixOrder::RowMajor => cols,
        MatrixOrder::ColMajor => rows,
    }
}

/// The elements a `rows x cols` matrix with leading dimension `ld` spans,
/// in `u128`.
fn span(order: MatrixOrder, rows: usize, cols: usize, ld: usize) -> u128 {
    let outer = match order {
        MatrixOrder::RowMajor => rows,
        MatrixOrder::ColMajor => cols,
    };
    (outer as u128 - 1) * ld as u128 + inner(order, rows, cols) as u128
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn gemm_descriptors(d in gemm()) {
        match d.validate("gemm") {
            Ok(()) => {
                let l = d.layout;
                for (ld, order, r, c) in [
                    (d.lda, l.a(), d.m, d.k),
                    (d.ldb, l.b(), d.k, d.n),
                    (d.ldc, l.c(), d.m, d.n),
                    (d.ldd, l.c(), d.m, d.n),
                ] {
                    prop_assert!(r >= 1 && c >= 1 && ld >= inner(order, r, c), "{d:?}");
                }
            }
            Err(e) => typed("gemm", &e)?,
        }
    }

    #[test]
    fn linear_descriptors(
        (tokens, in_features, out_features) in (size(), size(), size()),
        lds in proptest::array::uniform6(size()), packed in any::<bool>(),
        epilogue in proptest::sample::select(EpilogueKind::ALL.to_vec()), save_aux in any::<bool>(),
    ) {
        let mut d = LinearDescriptor::new(tokens, in_features, out_features);
        d.epilogue = epilogue;
        d.save_aux = save_aux;
        if !packed {
            let [ldx, ldw, ldy, lddx, lddw, lddy] = lds;
            d = d.with_forward_ld(ldx, ldw, ldy).with_backward_ld(lddx, lddw, lddy);
        }
        match d.validate() {
            Ok(()) => {
                let (i, o) = (d.in_features, d.out_features);
                prop_assert!(d.tokens >= 1 && i >= 1 && o >= 1, "{d:?}");
                prop_assert!(d.ldx >= i && d.ldw >= i && d.lddx >= i && d.lddw >= i, "{d:?}");
                prop_assert!(d.ldy >= o && d.lddy >= o, "{d:?}");
            }
            Err(e) => typed("linear", &e)?,
        }
    }

    #[test]
    fn grouped_gemm_descriptors(
        problems in proptest::collection::vec((size(), size(), size()), 0..5),
        layout in proptest::sample::select(LayoutSku::ALL.to_vec()),
        epilogue in proptest::sample::select(EpilogueKind::ALL.to_vec()), save_aux in any::<bool>(),
    ) {
        let mut d = GroupedGemmDescriptor::new(problems, layout);
        d.epilogue = epilogue;
        d.save_aux = save_aux;
        match d.validate() {
            Ok(()) => {
                prop_assert!(!d.problems.is_empty());
                for &(m, n, k) in &d.problems {
                    let g = GemmDescriptor {
                        epilogue, save_aux, ..GemmDescriptor::new(m.max(1), n, k, layout)
                    };
                    prop_assert!(g.validate("grouped_gemm").is_ok(), "{d:?}");
                }
            }
            Err(e) => typed("grouped_gemm", &e)?,
        }
    }

    #[test]
    fn batched_gemm_descriptors(
        d in gemm(), batch in size(), strides in proptest::array::uniform6(size()),
        packed in any::<bool>(),
    ) {
        let b = if packed && d.validate("gemm").is_ok() {
            BatchedGemmDescriptor::packed(d, batch)
        } else {
            let [stride_a, stride_b, stride_c, stride_d, stride_bias, stride_aux] = strides;
            BatchedGemmDescriptor {
                gemm: d, batch, stride_a, stride_b, stride_c, stride_d, stride_bias, stride_aux,
            }
        };
        match b.validate() {
            Ok(()) => {
                let g = &b.gemm;
                let one = span(g.layout.c(), g.m, g.n, g.ldd);
                prop_assert!(b.batch >= 1);
                prop_assert!(b.batch == 1 || b.stride_d as u128 >= one, "{b:?}");
            }
            Err(e) => typed("batched_gemm", &e)?,
        }
    }
}
