//! Which gradients a backward pass computes.
//!
//! Every differentiable plan takes its gradient outputs as `Option`s in its
//! `BwArgs`: a gradient is computed exactly when its output is given. The
//! same set, as a [`Grads`] value, sizes the backward workspace before the
//! call (`Backward::bw_workspace_size`), so a caller who wants only `dx` of
//! a convolution allocates only what the data gradient needs.

use std::fmt;
use std::ops::BitOr;

/// The operand a gradient belongs to. Plans name which ones they compute
/// (`Backward::grads`); the names follow the operands of the forward.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Grad {
    /// `dx`: the data input of a unary op, pooling, convolution or linear.
    X,
    /// `da`: the first input of a binary (or ternary) op.
    A,
    /// `db`: the second input of a binary op (of a ternary op).
    B,
    /// `dc`: the third input of a ternary op.
    C,
    /// `dw`: the weight or filter.
    Weight,
    /// `dbias`: the bias.
    Bias,
    /// `dq`: the queries of attention.
    Q,
    /// `dk`: the keys of attention.
    K,
    /// `dv`: the values of attention.
    V,
}

impl Grad {
    const ALL: [Grad; 9] = [
        Grad::X,
        Grad::A,
        Grad::B,
        Grad::C,
        Grad::Weight,
        Grad::Bias,
        Grad::Q,
        Grad::K,
        Grad::V,
    ];

    const fn bit(self) -> u16 {
        1 << self as u16
    }

    /// The argument name of this gradient (`dx`, `da`, `db`, `dw`, `dbias`).
    pub fn arg(self) -> &'static str {
        match self {
            Grad::X => "dx",
            Grad::A => "da",
            Grad::B => "db",
            Grad::C => "dc",
            Grad::Weight => "dw",
            Grad::Bias => "dbias",
            Grad::Q => "dq",
            Grad::K => "dk",
            Grad::V => "dv",
        }
    }
}

/// A set of [`Grad`]s. Built with `|`: `Grad::X | Grad::Weight`, or
/// [`Grads::of`].
#[derive(Copy, Clone, Default, PartialEq, Eq, Hash)]
pub struct Grads(u16);

impl Grads {
    /// The empty set.
    pub const NONE: Grads = Grads(0);

    /// The set of `grads`.
    pub fn of(grads: &[Grad]) -> Grads {
        grads.iter().fold(Grads::NONE, |s, &g| s | g)
    }

    /// The set of the gradients whose output is present (`Some`), as a
    /// plan's `BwArgs` holds them.
    pub fn present(outputs: &[(Grad, bool)]) -> Grads {
        outputs
            .iter()
            .filter(|(_, given)| *given)
            .fold(Grads::NONE, |s, &(g, _)| s | g)
    }

    /// Whether `g` is in the set.
    pub fn contains(self, g: Grad) -> bool {
        self.0 & g.bit() != 0
    }

    /// Whether every gradient of `self` is in `other`.
    pub fn is_subset(self, other: Grads) -> bool {
        self.0 & !other.0 == 0
    }

    /// Whether the set is empty.
    pub fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// The gradients in the set, in declaration order.
    pub fn iter(self) -> impl Iterator<Item = Grad> {
        Grad::ALL.into_iter().filter(move |&g| self.contains(g))
    }
}

impl From<Grad> for Grads {
    fn from(g: Grad) -> Grads {
        Grads(g.bit())
    }
}

impl BitOr<Grad> for Grad {
    type Output = Grads;
    fn bitor(self, rhs: Grad) -> Grads {
        Grads(self.bit() | rhs.bit())
    }
}

impl BitOr<Grad> for Grads {
    type Output = Grads;
    fn bitor(self, rhs: Grad) -> Grads {
        Grads(self.0 | rhs.bit())
    }
}

impl BitOr for Grads {
    type Output = Grads;
    fn bitor(self, rhs: Grads) -> Grads {
        Grads(self.0 | rhs.0)
    }
}

impl fmt::Debug for Grads {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_set().entries(self.iter().map(Grad::arg)).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sets_combine_and_list_in_order() {
        let s = Grad::Weight | Grad::X;
        assert!(s.contains(Grad::X) && s.contains(Grad::Weight));
        assert!(!s.contains(Grad::Bias));
        assert_eq!(s.iter().collect::<Vec<_>>(), [Grad::X, Grad::Weight]);
        assert_eq!(
            s | Grad::Bias,
            Grads::of(&[Grad::Bias, Grad::X, Grad::Weight])
        );
        assert!(Grads::from(Grad::X).is_subset(s));
        assert!(!s.is_subset(Grad::X.into()));
        assert!(Grads::NONE.is_empty() && Grads::NONE.is_subset(Grads::NONE));
        assert_eq!(format!("{s:?}"), r#"{"dx", "dw"}"#);
    }

    #[test]
    fn present_keeps_the_given_outputs() {
        let s = Grads::present(&[(Grad::A, true), (Grad::B, false)]);
        assert_eq!(s, Grad::A.into());
    }
}
