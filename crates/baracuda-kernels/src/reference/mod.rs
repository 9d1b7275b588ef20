//! Plain f64 CPU implementations of every op: the oracles GPU tests compare
//! against. Obviously correct beats fast here.

pub mod conv;
pub mod elementwise;
/// f64 oracles of the GEMM family.
pub mod gemm;
pub mod norm;
pub mod reduce;
