//! What a caller may ask of plan selection.

use crate::{BackendKind, Error, Result};

/// How a plan chooses among candidate kernels or algorithms.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, Default)]
pub enum Autotune {
    /// Use the library's heuristics or baracuda's rules; no timing.
    #[default]
    Heuristic,
    /// Time the candidates once on the stream given to `select` and keep the
    /// fastest (cached per problem and device for the process).
    Measured,
}

/// Preferences a caller passes to `select`. Every field is honoured or
/// `select` returns [`Error::PreferenceRejected`]; none is silently ignored.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub struct PlanPreference {
    /// Force one backend. `None` lets the plan choose.
    pub backend: Option<BackendKind>,
    /// Allow TF32 tensor-core math for f32 inputs. Default `false`: f32
    /// means IEEE f32.
    pub allow_tf32: bool,
    /// Demand bitwise-deterministic results (no atomics-order dependence).
    pub deterministic: bool,
    /// Cap on the workspace the plan may ask for. `None` means no cap.
    pub max_workspace_bytes: Option<usize>,
    /// Heuristic or measured choice.
    pub autotune: Autotune,
}

impl Default for PlanPreference {
    fn default() -> Self {
        PlanPreference {
            backend: None,
            allow_tf32: false,
            deterministic: false,
            max_workspace_bytes: None,
            autotune: Autotune::Heuristic,
        }
    }
}

impl PlanPreference {
    /// Force a backend.
    pub fn with_backend(mut self, backend: BackendKind) -> Self {
        self.backend = Some(backend);
        self
    }
    /// Allow or forbid TF32.
    pub fn with_allow_tf32(mut self, allow: bool) -> Self {
        self.allow_tf32 = allow;
        self
    }
    /// Demand determinism.
    pub fn with_deterministic(mut self, deterministic: bool) -> Self {
        self.deterministic = deterministic;
        self
    }
    /// Cap the workspace.
    pub fn with_max_workspace_bytes(mut self, bytes: usize) -> Self {
        self.max_workspace_bytes = Some(bytes);
        self
    }
    /// Choose how candidates are ranked.
    pub fn with_autotune(mut self, autotune: Autotune) -> Self {
        self.autotune = autotune;
        self
    }

    /// Reject a forced backend other than the ones the op has.
    ///
    /// # Errors
    /// `PreferenceRejected` naming the backends the op offers.
    pub fn check_backend(&self, op: &'static str, offered: &[BackendKind]) -> Result<()> {
        match self.backend {
            Some(b) if !offered.contains(&b) => Err(Error::PreferenceRejected {
                op,
                field: "backend",
                reason: format!("{op} has no {b} implementation (offered: {offered:?})"),
            }),
            _ => Ok(()),
        }
    }

    /// Reject a workspace cap smaller than what the op needs.
    ///
    /// # Errors
    /// `PreferenceRejected` with both numbers.
    pub fn check_workspace(&self, op: &'static str, needed: usize) -> Result<()> {
        match self.max_workspace_bytes {
            Some(cap) if cap < needed => Err(Error::PreferenceRejected {
                op,
                field: "max_workspace_bytes",
                reason: format!("the op needs {needed} bytes of workspace, the cap is {cap}"),
            }),
            _ => Ok(()),
        }
    }
}
