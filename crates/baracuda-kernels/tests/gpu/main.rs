//! x
mod gemm;
mod conv;
