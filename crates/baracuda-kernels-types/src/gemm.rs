//! Vocabulary of the GEMM family: storage orders of the operands
//! ([`LayoutSku`]) and fused epilogues ([`EpilogueKind`], [`Activation`]).

use core::fmt;

use crate::MatrixOrder;

/// Storage order of `A`, `B` and `C`/`D` of a GEMM, in that order:
/// `R` = row-major, `C` = column-major. `Rcr` is the PyTorch `F.linear`
/// shape: row-major `A`, column-major `B` (a row-major `W` read as `W^T`),
/// row-major output.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum LayoutSku {
    /// A row, B row, C/D row.
    Rrr,
    /// A row, B row, C/D column.
    Rrc,
    /// A row, B column, C/D row.
    Rcr,
    /// A row, B column, C/D column.
    Rcc,
    /// A column, B row, C/D row.
    Crr,
    /// A column, B row, C/D column.
    Crc,
    /// A column, B column, C/D row.
    Ccr,
    /// A column, B column, C/D column.
    Ccc,
}

impl LayoutSku {
    /// All eight layouts.
    pub const ALL: [LayoutSku; 8] = [
        LayoutSku::Rrr,
        LayoutSku::Rrc,
        LayoutSku::Rcr,
        LayoutSku::Rcc,
        LayoutSku::Crr,
        LayoutSku::Crc,
        LayoutSku::Ccr,
        LayoutSku::Ccc,
    ];

    /// The layout with these orders of `A`, `B` and `C`/`D`.
    pub const fn new(a: MatrixOrder, b: MatrixOrder, c: MatrixOrder) -> LayoutSku {
        use MatrixOrder::{ColMajor as C, RowMajor as R};
        match (a, b, c) {
            (R, R, R) => LayoutSku::Rrr,
            (R, R, C) => LayoutSku::Rrc,
            (R, C, R) => LayoutSku::Rcr,
            (R, C, C) => LayoutSku::Rcc,
            (C, R, R) => LayoutSku::Crr,
            (C, R, C) => LayoutSku::Crc,
            (C, C, R) => LayoutSku::Ccr,
            (C, C, C) => LayoutSku::Ccc,
        }
    }

    const fn bits(self) -> u8 {
        // bit 2: A column-major, bit 1: B column-major, bit 0: C/D column-major
        match self {
            LayoutSku::Rrr => 0,
            LayoutSku::Rrc => 1,
            LayoutSku::Rcr => 2,
            LayoutSku::Rcc => 3,
            LayoutSku::Crr => 4,
            LayoutSku::Crc => 5,
            LayoutSku::Ccr => 6,
            LayoutSku::Ccc => 7,
        }
    }

    const fn order(bit: bool) -> MatrixOrder {
        if bit {
            MatrixOrder::ColMajor
        } else {
            MatrixOrder::RowMajor
        }
    }

    /// Storage order of `A`.
    pub const fn a(self) -> MatrixOrder {
        Self::order(self.bits() & 4 != 0)
    }
    /// Storage order of `B`.
    pub const fn b(self) -> MatrixOrder {
        Self::order(self.bits() & 2 != 0)
    }
    /// Storage order of `C` and `D`.
    pub const fn c(self) -> MatrixOrder {
        Self::order(self.bits() & 1 != 0)
    }

    /// Lowercase name (`rcr`).
    pub const fn name(self) -> &'static str {
        match self {
            LayoutSku::Rrr => "rrr",
            LayoutSku::Rrc => "rrc",
            LayoutSku::Rcr => "rcr",
            LayoutSku::Rcc => "rcc",
            LayoutSku::Crr => "crr",
            LayoutSku::Crc => "crc",
            LayoutSku::Ccr => "ccr",
            LayoutSku::Ccc => "ccc",
        }
    }
}

impl fmt::Display for LayoutSku {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// An elementwise activation applied by a GEMM epilogue.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum Activation {
    /// `f(z) = z`.
    Identity,
    /// `f(z) = max(z, 0)`.
    Relu,
    /// `f(z) = z/2 * (1 + erf(z / sqrt 2))` (PyTorch `gelu`).
    GeluErf,
    /// `f(z) = z/2 * (1 + tanh(sqrt(2/pi) * (z + 0.044715 z^3)))`
    /// (PyTorch `gelu(approximate="tanh")`).
    GeluTanh,
}

impl Activation {
    /// Lowercase name.
    pub const fn name(self) -> &'static str {
        match self {
            Activation::Identity => "identity",
            Activation::Relu => "relu",
            Activation::GeluErf => "gelu_erf",
            Activation::GeluTanh => "gelu_tanh",
        }
    }
}

/// What a GEMM does to `alpha * op(A) op(B) + beta * C` before storing it
/// in `D`: add a bias vector of length `n` to every row (`D[i, j] += b[j]`,
/// PyTorch's `addmm` / `linear` convention), then apply an activation.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum EpilogueKind {
    /// `D = Z`.
    Identity,
    /// `D = relu(Z)`.
    Relu,
    /// `D = gelu_erf(Z)`.
    GeluErf,
    /// `D = gelu_tanh(Z)`.
    GeluTanh,
    /// `D = Z + b`.
    Bias,
    /// `D = relu(Z + b)`.
    BiasRelu,
    /// `D = gelu_erf(Z + b)`.
    BiasGeluErf,
    /// `D = gelu_tanh(Z + b)`.
    BiasGeluTanh,
}

impl EpilogueKind {
    /// Every epilogue.
    pub const ALL: [EpilogueKind; 8] = [
        EpilogueKind::Identity,
        EpilogueKind::Relu,
        EpilogueKind::GeluErf,
        EpilogueKind::GeluTanh,
        EpilogueKind::Bias,
        EpilogueKind::BiasRelu,
        EpilogueKind::BiasGeluErf,
        EpilogueKind::BiasGeluTanh,
    ];

    /// The epilogue with this bias flag and activation.
    pub const fn new(bias: bool, activation: Activation) -> EpilogueKind {
        match (bias, activation) {
            (false, Activation::Identity) => EpilogueKind::Identity,
            (false, Activation::Relu) => EpilogueKind::Relu,
            (false, Activation::GeluErf) => EpilogueKind::GeluErf,
            (false, Activation::GeluTanh) => EpilogueKind::GeluTanh,
            (true, Activation::Identity) => EpilogueKind::Bias,
            (true, Activation::Relu) => EpilogueKind::BiasRelu,
            (true, Activation::GeluErf) => EpilogueKind::BiasGeluErf,
            (true, Activation::GeluTanh) => EpilogueKind::BiasGeluTanh,
        }
    }

    /// True when the epilogue adds a bias vector.
    pub const fn has_bias(self) -> bool {
        matches!(
            self,
            EpilogueKind::Bias
                | EpilogueKind::BiasRelu
                | EpilogueKind::BiasGeluErf
                | EpilogueKind::BiasGeluTanh
        )
    }

    /// The activation applied last.
    pub const fn activation(self) -> Activation {
        match self {
            EpilogueKind::Identity | EpilogueKind::Bias => Activation::Identity,
            EpilogueKind::Relu | EpilogueKind::BiasRelu => Activation::Relu,
            EpilogueKind::GeluErf | EpilogueKind::BiasGeluErf => Activation::GeluErf,
            EpilogueKind::GeluTanh | EpilogueKind::BiasGeluTanh => Activation::GeluTanh,
        }
    }

    /// Lowercase name (`bias_gelu_tanh`).
    pub const fn name(self) -> &'static str {
        match self {
            EpilogueKind::Identity => "identity",
            EpilogueKind::Relu => "relu",
            EpilogueKind::GeluErf => "gelu_erf",
            EpilogueKind::GeluTanh => "gelu_tanh",
            EpilogueKind::Bias => "bias",
            EpilogueKind::BiasRelu => "bias_relu",
            EpilogueKind::BiasGeluErf => "bias_gelu_erf",
            EpilogueKind::BiasGeluTanh => "bias_gelu_tanh",
        }
    }
}

impl fmt::Display for EpilogueKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layouts_round_trip() {
        for l in LayoutSku::ALL {
            assert_eq!(LayoutSku::new(l.a(), l.b(), l.c()), l);
        }
        assert_eq!(LayoutSku::Rcr.b(), MatrixOrder::ColMajor);
        assert_eq!(LayoutSku::Rcr.c(), MatrixOrder::RowMajor);
        assert_eq!(LayoutSku::Crc.a(), MatrixOrder::ColMajor);
    }

    #[test]
    fn epilogues_round_trip() {
        for e in EpilogueKind::ALL {
            assert_eq!(EpilogueKind::new(e.has_bias(), e.activation()), e);
        }
    }
}
