//! Scratch operands for measured autotuning.

use baracuda_driver::{DeviceBuffer, Stream};
use baracuda_kernels_types::{ElementKind, Result};

/// `bytes` bytes of device memory holding seeded uniform values in [-1, 1)
/// of `kind` (integers: in [-100, 100]; a tail past whole elements is
/// zero). Candidates are timed on data like real data: tensor-core power,
/// and so clocks, depend on the bits, and a zero or constant fill can rank
/// kernels differently.
///
/// # Errors
/// Allocation or copy failure.
pub(crate) fn random_bytes(
    stream: &Stream,
    kind: ElementKind,
    bytes: usize,
    seed: u64,
) -> Result<DeviceBuffer<u8>> {
    DeviceBuffer::from_host(stream, &random_host_bytes(kind, bytes, seed))
}

/// The host bytes of [`random_bytes`].
fn random_host_bytes(kind: ElementKind, bytes: usize, seed: u64) -> Vec<u8> {
    let size = kind.size_bytes().max(1);
    let mut host = vec![0u8; bytes];
    let mut z = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    for chunk in host.chunks_exact_mut(size) {
        z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut r = z;
        r = (r ^ (r >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        r = (r ^ (r >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        r ^= r >> 31;
        let v = (r >> 11) as f64 / (1u64 << 52) as f64 - 1.0;
        match kind {
            ElementKind::F64 => chunk.copy_from_slice(&v.to_le_bytes()),
            ElementKind::F32 => chunk.copy_from_slice(&(v as f32).to_le_bytes()),
            ElementKind::F16 => chunk.copy_from_slice(&half::f16::from_f64(v).to_le_bytes()),
            ElementKind::Bf16 => chunk.copy_from_slice(&half::bf16::from_f64(v).to_le_bytes()),
            ElementKind::Fp8E4M3 => chunk[0] = float8::F8E4M3::from_f64(v).to_bits(),
            ElementKind::Fp8E5M2 => chunk[0] = float8::F8E5M2::from_f64(v).to_bits(),
            ElementKind::I8 => chunk[0] = ((v * 100.0).round() as i8) as u8,
            ElementKind::I32 => chunk.copy_from_slice(&((v * 100.0).round() as i32).to_le_bytes()),
            // Not an operand type of any tuned op: small finite bytes.
            _ => chunk.fill(0x3C),
        }
    }
    host
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every generated element decodes to a finite value in range, the
    /// values vary, and the tail past whole elements is zero.
    #[test]
    fn values_are_finite_varied_and_in_range() {
        let f = |k: ElementKind, b: &[u8]| -> f64 {
            match k {
                ElementKind::F64 => f64::from_le_bytes(b.try_into().unwrap()),
                ElementKind::F32 => f32::from_le_bytes(b.try_into().unwrap()) as f64,
                ElementKind::F16 => half::f16::from_le_bytes(b.try_into().unwrap()).to_f64(),
                ElementKind::Bf16 => half::bf16::from_le_bytes(b.try_into().unwrap()).to_f64(),
                ElementKind::Fp8E4M3 => float8::F8E4M3::from_bits(b[0]).to_f64(),
                ElementKind::Fp8E5M2 => float8::F8E5M2::from_bits(b[0]).to_f64(),
                ElementKind::I8 => (b[0] as i8) as f64 / 100.0,
                ElementKind::I32 => i32::from_le_bytes(b.try_into().unwrap()) as f64 / 100.0,
                _ => unreachable!("not generated in this test"),
            }
        };
        for kind in [
            ElementKind::F64,
            ElementKind::F32,
            ElementKind::F16,
            ElementKind::Bf16,
            ElementKind::Fp8E4M3,
            ElementKind::Fp8E5M2,
            ElementKind::I8,
            ElementKind::I32,
        ] {
            let size = kind.size_bytes();
            // size - 1 trailing bytes are not a whole element
            let bytes = random_host_bytes(kind, 1000 * size + size - 1, 7);
            let vals: Vec<f64> = bytes.chunks_exact(size).map(|c| f(kind, c)).collect();
            assert!(
                vals.iter().all(|v| v.is_finite() && v.abs() <= 1.0),
                "{kind}"
            );
            let distinct = vals.iter().filter(|&&v| v != vals[0]).count();
            assert!(distinct > 500, "{kind}: values barely vary");
            assert!(bytes[1000 * size..].iter().all(|&b| b == 0), "{kind}: tail");
        }
    }
}
