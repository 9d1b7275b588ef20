//! The `Plan` trait every op implements.
//!
//! Lifecycle: `Descriptor -> Plan::select -> workspace_size -> Args -> run`.
//! `select` validates the descriptor, compiles or looks up kernels, builds
//! library descriptors and picks the implementation; `run` checks the
//! arguments against the plan and only enqueues work on the given stream.
//! It never allocates device memory, never synchronizes and never prints,
//! so a plan works under CUDA graph capture and from many threads.

use baracuda_driver::Stream;
use baracuda_kernels_types::{KernelSku, PlanPreference, PrecisionGuarantee, Result, Workspace};

/// A selected implementation of one op for one problem.
pub trait Plan: Sized + Send + Sync {
    /// The problem description `select` takes.
    type Descriptor;
    /// The tensors `run` takes.
    type Args<'a>;

    /// Validate `desc`, choose an implementation and prepare it (compile
    /// kernels, build library descriptors). May time candidates on `stream`
    /// when `pref.autotune` is `Measured`.
    ///
    /// # Errors
    /// `InvalidDescriptor`, `Unsupported` (dtype, layout, arch the op does
    /// not implement), `PreferenceRejected`, and library or compile errors.
    fn select(stream: &Stream, desc: &Self::Descriptor, pref: &PlanPreference) -> Result<Self>;

    /// What was selected.
    fn sku(&self) -> &KernelSku;

    /// The numerical guarantee of the selection.
    fn precision_guarantee(&self) -> PrecisionGuarantee {
        self.sku().precision
    }

    /// Device scratch `run` needs, in bytes.
    fn workspace_size(&self) -> usize;

    /// Check `args` against the plan and enqueue the work on `stream`.
    ///
    /// # Errors
    /// `ShapeMismatch`, `DtypeMismatch`, `ContextMismatch`,
    /// `WorkspaceTooSmall`, `InvalidArgument`, and launch errors. Nothing is
    /// written when an argument check fails.
    fn run(&self, stream: &Stream, workspace: Workspace<'_>, args: Self::Args<'_>) -> Result<()>;
}
