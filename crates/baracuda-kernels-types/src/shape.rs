//! Shapes as values that error messages can print.

use core::fmt;

use crate::{Error, Result};

/// A tensor shape, printed as `[a, b, c]`.
#[derive(Clone, PartialEq, Eq, Hash, Default)]
pub struct Shape(pub Vec<usize>);

impl Shape {
    /// Number of elements (1 for rank 0).
    pub fn n_elems(&self) -> usize {
        self.0.iter().product()
    }
    /// Number of axes.
    pub fn rank(&self) -> usize {
        self.0.len()
    }
}

impl<const N: usize> From<[usize; N]> for Shape {
    fn from(v: [usize; N]) -> Self {
        Shape(v.to_vec())
    }
}

impl From<&[usize]> for Shape {
    fn from(v: &[usize]) -> Self {
        Shape(v.to_vec())
    }
}

impl From<Vec<usize>> for Shape {
    fn from(v: Vec<usize>) -> Self {
        Shape(v)
    }
}

impl fmt::Debug for Shape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl fmt::Display for Shape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[")?;
        for (i, d) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{d}")?;
        }
        f.write_str("]")
    }
}

/// NumPy broadcasting of two shapes: align on the right, an extent of 1
/// stretches to the other's extent.
///
/// # Errors
/// `BroadcastMismatch` when two aligned extents differ and neither is 1.
pub fn broadcast_shapes(op: &'static str, a: &[usize], b: &[usize]) -> Result<Vec<usize>> {
    let rank = a.len().max(b.len());
    let mut out = vec![0; rank];
    for i in 0..rank {
        let da = if i < rank - a.len() {
            1
        } else {
            a[i - (rank - a.len())]
        };
        let db = if i < rank - b.len() {
            1
        } else {
            b[i - (rank - b.len())]
        };
        out[i] = match (da, db) {
            (x, y) if x == y => x,
            (1, y) => y,
            (x, 1) => x,
            _ => {
                return Err(Error::BroadcastMismatch {
                    op,
                    a: Shape::from(a),
                    b: Shape::from(b),
                })
            }
        };
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display() {
        assert_eq!(Shape::from([4095usize]).to_string(), "[4095]");
        assert_eq!(Shape::from([2usize, 3]).to_string(), "[2, 3]");
        assert_eq!(Shape(vec![]).to_string(), "[]");
    }

    #[test]
    fn broadcast() {
        assert_eq!(
            broadcast_shapes("t", &[4, 1, 3], &[5, 1]).unwrap(),
            vec![4, 5, 3]
        );
        assert_eq!(broadcast_shapes("t", &[], &[2]).unwrap(), vec![2]);
        assert!(matches!(
            broadcast_shapes("t", &[3], &[4]),
            Err(Error::BroadcastMismatch { .. })
        ));
    }
}
