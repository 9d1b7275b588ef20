//! The argument checks the GEMM plans share: the operand matrices of a
//! [`GemmDescriptor`], bias vectors as views, the `C` operand (its own
//! tensor, or `D` itself), and the rules for outputs that overlap inputs.
//!
//! # Aliasing
//! cuBLASLt reads `C` and writes `D` element by element in one pass, so it
//! takes `C == D` when both have the same layout: that is the in-place
//! accumulation `D = alpha op(A) op(B) + beta D`, [`GemmC::Output`]. Every
//! other overlap of an output with an input (or with another output) is
//! refused with `InvalidArgument` naming the output, before anything is
//! enqueued: the tiles of `D` are written while other tiles still read
//! `A` and `B`, and the epilogue kernel rewrites `D` and aux after the
//! matmul. Overlap is judged on the bytes each view reaches; two matrices
//! with the same row pitch are compared row by row, so disjoint column
//! blocks of one wide tensor (a fused QKV output, say) pass.

use baracuda_kernels_types::{
    DevPtr, DevPtrMut, Element, Error, MatrixMut, MatrixOrder, MatrixRef, Result, Shape, TensorMut,
    TensorRef,
};

use crate::checks::{check_aligned, optional_arg, BIAS_WHY};

/// Where `C` comes from in `D = alpha op(A) op(B) + beta C`.
#[derive(Debug)]
pub enum GemmC<V> {
    /// No `C`: `beta` must be 0.
    None,
    /// `C` is its own tensor, with the descriptor's `ldc`. A `C` that is
    /// exactly the output (same address and layout) is the same as
    /// [`GemmC::Output`]; any other overlap with an output is refused.
    Tensor(V),
    /// `C` is the output itself: `D = alpha op(A) op(B) + beta D`, in
    /// place. Needs `ldc == ldd` (and, batched, `stride_c == stride_d`).
    Output,
}

impl<V> From<Option<V>> for GemmC<V> {
    fn from(c: Option<V>) -> Self {
        c.map_or(GemmC::None, GemmC::Tensor)
    }
}

impl<V> GemmC<V> {
    /// The address of `C`: null for [`GemmC::None`] (only with
    /// `beta == 0`), `d` for [`GemmC::Output`] (only when `same_layout`,
    /// i.e. `C`'s layout in the plan is `D`'s), else what `check` returns
    /// for the tensor (which must also check it against the outputs).
    pub(crate) fn resolve(
        &self,
        op: &'static str,
        beta: f64,
        (d, same_layout): (DevPtrMut<u8>, bool),
        check: impl FnOnce(&V) -> Result<DevPtr<u8>>,
    ) -> Result<DevPtr<u8>> {
        match self {
            GemmC::Tensor(c) => check(c),
            GemmC::Output if same_layout => Ok(d.as_const()),
            GemmC::Output => Err(Error::InvalidArgument {
                op,
                arg: "c",
                reason: "C = D (in place) needs C's layout to be D's: ldc == ldd (and \
                         stride_c == stride_d in a batch)"
                    .into(),
            }),
            GemmC::None if beta != 0.0 => Err(Error::InvalidArgument {
                op,
                arg: "c",
                reason: format!("beta = {beta} but no C was given"),
            }),
            // Null: cuBLASLt reads no C when beta is 0.
            GemmC::None => Ok(DevPtr::NULL),
        }
    }
}

/// The bytes a view reaches: `rows` runs of `width` bytes, `pitch` bytes
/// apart, from `start` (no bytes when `rows` or `width` is 0).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) struct Region {
    start: u64,
    rows: usize,
    width: usize,
    pitch: usize,
}

impl Region {
    /// The elements of a matrix view.
    pub(crate) fn matrix<T: Element>(m: &MatrixRef<'_, T>) -> Region {
        let (outer, inner) = match m.order() {
            MatrixOrder::RowMajor => (m.rows(), m.cols()),
            MatrixOrder::ColMajor => (m.cols(), m.rows()),
        };
        let size = std::mem::size_of::<T>();
        Region::runs(m.data().addr(), outer, inner * size, m.ld() * size)
    }

    /// [`Region::matrix`] of a writable view.
    pub(crate) fn matrix_mut<T: Element>(m: &MatrixMut<'_, T>) -> Region {
        Region::matrix(&m.as_const())
    }

    /// The elements of a vector view (one run when its stride is 1).
    pub(crate) fn vector<T: Element>(v: &TensorRef<'_, T, 1>) -> Region {
        let size = std::mem::size_of::<T>();
        let (n, stride) = (v.shape()[0], v.strides()[0]);
        Region::runs(v.data().addr(), n, size, stride * size)
    }

    /// `elems` consecutive elements of `T` from `start`.
    pub(crate) fn flat<T>(start: u64, elems: usize) -> Region {
        Region::runs(start, 1, elems * std::mem::size_of::<T>(), 0)
    }

    fn runs(start: u64, rows: usize, width: usize, pitch: usize) -> Region {
        if rows == 0 || width == 0 {
            return Region {
                start,
                rows: 0,
                width: 0,
                pitch: 0,
            };
        }
        // Runs that touch or overlap (a unit-stride vector, a packed
        // matrix) are one run.
        if rows == 1 || pitch <= width {
            let width = (rows - 1) * pitch + width;
            return Region {
                start,
                rows: 1,
                width,
                pitch: width,
            };
        }
        Region {
            start,
            rows,
            width,
            pitch,
        }
    }

    /// One past the last byte reached.
    fn end(&self) -> u64 {
        self.start + ((self.rows.max(1) - 1) * self.pitch + self.width) as u64
    }

    /// Whether some byte lies in both regions. Regions whose runs have
    /// different pitches are taken to overlap when their extents do.
    pub(crate) fn overlaps(&self, o: &Region) -> bool {
        if self.rows == 0 || o.rows == 0 || self.end() <= o.start || o.end() <= self.start {
            return false;
        }
        let pitch = match (self.rows, o.rows) {
            (1, 1) => return true,
            (1, _) => o.pitch,
            (_, 1) => self.pitch,
            _ if self.pitch == o.pitch => self.pitch,
            _ => return true,
        };
        // Run i of self starts at s + i p, run j of o at t + j p; they
        // meet when -w_o < (t - s) + (j - i) p < w_self, for some
        // k = j - i in [-(rows_self - 1), rows_o - 1].
        let p = pitch as i128;
        let d = o.start as i128 - self.start as i128;
        let (ws, wo) = (self.width as i128, o.width as i128);
        let k_min = (-wo - d).div_euclid(p) + 1;
        let k_max = -((d - ws).div_euclid(p)) - 1;
        let lo = k_min.max(1 - self.rows.max(1) as i128);
        let hi = k_max.min(o.rows.max(1) as i128 - 1);
        lo <= hi
    }
}

/// `InvalidArgument` naming the output `out.0` when it overlaps any of
/// `others` (inputs, or outputs written by the same run).
pub(crate) fn check_disjoint(
    op: &'static str,
    out: (&'static str, Region),
    others: &[(&'static str, Region)],
) -> Result<()> {
    match others.iter().find(|(_, r)| out.1.overlaps(r)) {
        Some((name, _)) => Err(Error::InvalidArgument {
            op,
            arg: out.0,
            reason: format!(
                "overlaps {name}; an output may alias no input (only C, exactly, as D itself)"
            ),
        }),
        None => Ok(()),
    }
}

/// Check a vector argument: shape `[n]`, on context `ctx`, 16-byte
/// aligned, and unit stride (cuBLASLt's bias epilogues and the epilogue
/// kernels read it contiguously) unless it holds one element. Its address.
pub(crate) fn check_vector<T: Element>(
    op: &'static str,
    arg: &'static str,
    v: &TensorRef<'_, T, 1>,
    n: usize,
    ctx: usize,
) -> Result<DevPtr<T>> {
    if v.data().ctx_id() != ctx {
        return Err(Error::ContextMismatch { op, arg });
    }
    if v.shape()[0] != n {
        return Err(Error::ShapeMismatch {
            op,
            arg,
            expected: Shape::from([n]),
            got: Shape::from(&v.shape()[..]),
        });
    }
    if n > 1 && v.strides()[0] != 1 {
        return Err(Error::InvalidArgument {
            op,
            arg,
            reason: format!(
                "stride {}: the bias is read contiguously (stride 1)",
                v.strides()[0]
            ),
        });
    }
    check_aligned(op, arg, v.data().addr())?;
    Ok(v.data().ptr())
}

/// [`check_vector`] of a bias the plan takes exactly when `wanted`; null
/// when none.
pub(crate) fn check_bias<T: Element>(
    op: &'static str,
    arg: &'static str,
    wanted: bool,
    bias: Option<&TensorRef<'_, T, 1>>,
    n: usize,
    ctx: usize,
) -> Result<DevPtr<T>> {
    let addr = optional_arg(op, arg, bias, wanted, BIAS_WHY, |b| {
        check_vector(op, arg, b, n, ctx).map(DevPtr::addr)
    })?;
    Ok(DevPtr::from_addr(addr))
}

/// [`check_bias`] of a written vector (a bias gradient).
pub(crate) fn check_bias_mut<T: Element>(
    op: &'static str,
    arg: &'static str,
    wanted: bool,
    bias: Option<&TensorMut<'_, T, 1>>,
    n: usize,
    ctx: usize,
) -> Result<DevPtrMut<T>> {
    let b = bias.map(TensorMut::as_const);
    let p = check_bias(op, arg, wanted, b.as_ref(), n, ctx)?;
    Ok(DevPtrMut::from_addr(p.addr()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use baracuda_kernels_types::DeviceSlice;

    /// The bytes of `r`, one by one.
    fn bytes(r: &Region) -> Vec<u64> {
        (0..r.rows)
            .flat_map(|i| (0..r.width).map(move |j| r.start + (i * r.pitch + j) as u64))
            .collect()
    }

    #[test]
    fn overlap_matches_the_bytes() {
        let mut regions = Vec::new();
        for start in [0u64, 3, 8, 13, 16, 40] {
            for rows in [0, 1, 2, 3, 5] {
                for width in [1, 4, 8] {
                    for pitch in [8, 12, 16] {
                        regions.push(Region::runs(start, rows, width, pitch));
                    }
                }
            }
        }
        for x in &regions {
            let bx = bytes(x);
            for y in &regions {
                let by = bytes(y);
                let truth = bx.iter().any(|b| by.contains(b));
                let got = x.overlaps(y);
                if x.rows > 1 && y.rows > 1 && x.pitch != y.pitch {
                    // Different pitches: conservative, never a miss.
                    assert!(got || !truth, "{x:?} {y:?}");
                } else {
                    assert_eq!(got, truth, "{x:?} {y:?}");
                }
            }
        }
    }

    fn mat<'a>(addr: u64, rows: usize, cols: usize, ld: usize) -> MatrixRef<'a, f32> {
        // SAFETY: host-only inspection of a fake address.
        let s = unsafe { DeviceSlice::from_raw_parts(addr, (rows - 1) * ld + cols, 1) };
        MatrixRef::new(s, rows, cols, ld, MatrixOrder::RowMajor).unwrap()
    }

    #[test]
    fn column_blocks_of_one_tensor_are_disjoint() {
        // Q, K and V: 8 x 16 blocks of one 8 x 48 f32 tensor.
        let q = Region::matrix(&mat(0x1000, 8, 16, 48));
        let k = Region::matrix(&mat(0x1000 + 64, 8, 16, 48));
        let v = Region::matrix(&mat(0x1000 + 128, 8, 16, 48));
        assert!(!q.overlaps(&k) && !k.overlaps(&v) && !q.overlaps(&v));
        // A block one element wider reaches the next.
        let wide = Region::matrix(&mat(0x1000, 8, 17, 48));
        assert!(wide.overlaps(&k));
        assert!(check_disjoint("t", ("d", wide), &[("a", q), ("b", k)]).is_err());
        assert!(check_disjoint("t", ("d", q), &[("a", k), ("b", v)]).is_ok());
        // A bias vector inside the padding of a row does not meet it.
        let padded = Region::matrix(&mat(0x1000, 4, 16, 32));
        assert!(!padded.overlaps(&Region::flat::<f32>(0x1000 + 64, 16)));
        assert!(padded.overlaps(&Region::flat::<f32>(0x1000 + 60, 2)));
    }

    #[test]
    fn c_sources() {
        let d = DevPtrMut::<u8>::from_addr(0x2000);
        let tensor = |_: &u64| Ok(DevPtr::from_addr(0x3000));
        let c = GemmC::Tensor(0u64).resolve("t", 1.0, (d, false), tensor);
        assert_eq!(c.unwrap().addr(), 0x3000);
        let c = GemmC::<u64>::Output.resolve("t", 1.0, (d, true), tensor);
        assert_eq!(c.unwrap().addr(), 0x2000);
        let c = GemmC::<u64>::Output.resolve("t", 1.0, (d, false), tensor);
        assert!(matches!(c, Err(Error::InvalidArgument { arg: "c", .. })));
        let c = GemmC::<u64>::None.resolve("t", 0.5, (d, true), tensor);
        assert!(matches!(c, Err(Error::InvalidArgument { arg: "c", .. })));
        let c = GemmC::<u64>::None.resolve("t", 0.0, (d, true), tensor);
        assert!(c.unwrap().is_null());
        assert!(matches!(GemmC::from(Some(3)), GemmC::Tensor(3)));
        assert!(matches!(GemmC::<u8>::from(None), GemmC::None));
    }

    #[test]
    fn vectors() {
        // SAFETY: host-only inspection of a fake address.
        let s = unsafe { DeviceSlice::<f32>::from_raw_parts(0x1000, 64, 7) };
        let v = |n, stride| TensorRef::new(s, [n], [stride]).unwrap();
        assert_eq!(check_vector("t", "bias", &v(8, 1), 8, 7).unwrap().addr(), 0x1000);
        assert!(matches!(
            check_vector("t", "bias", &v(8, 2), 8, 7),
            Err(Error::InvalidArgument { arg: "bias", .. })
        ));
        // One element: any stride.
        assert!(check_vector("t", "bias", &v(1, 5), 1, 7).is_ok());
        assert!(matches!(
            check_vector("t", "bias", &v(7, 1), 8, 7),
            Err(Error::ShapeMismatch { arg: "bias", .. })
        ));
        assert!(matches!(
            check_vector("t", "bias", &v(8, 1), 8, 6),
            Err(Error::ContextMismatch { .. })
        ));
        let off = TensorRef::new(s.slice(1..64).unwrap(), [8], [1]).unwrap();
        assert!(matches!(
            check_vector("t", "bias", &off, 8, 7),
            Err(Error::InvalidArgument { arg: "bias", .. })
        ));
        assert!(matches!(
            check_bias::<f32>("t", "bias", true, None, 8, 7),
            Err(Error::InvalidArgument { arg: "bias", .. })
        ));
        assert!(matches!(
            check_bias("t", "bias", false, Some(&v(8, 1)), 8, 7),
            Err(Error::InvalidArgument { arg: "bias", .. })
        ));
        assert!(check_bias::<f32>("t", "bias", false, None, 8, 7)
            .unwrap()
            .is_null());
    }
}
