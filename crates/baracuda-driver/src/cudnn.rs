//! Safe wrappers over cuDNN: the backend (graph) API for any graph in
//! [`graph`], and the legacy convolution API ([`LegacyConv`]) that serves
//! what a graph cannot (unaligned operands, problems without an engine).
//!
//! This module tree is the only code of the workspace that calls
//! `cudarc::cudnn`. Which graph to build and which engine or algorithm to
//! run is policy, and lives with the op families in `baracuda-kernels`.
//! Every object is written only while its owner holds it exclusively
//! (building, selection); executing takes `&self` and only reads, so one
//! plan may run from many threads at once, each with its own handle from
//! the context's registry.

pub mod graph;
mod legacy;

pub use legacy::{legacy_algo_name, ConvMath, LegacyAlgo, LegacyConv, LegacyConvShape};
