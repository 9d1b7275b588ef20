//! f64 oracles for the elementwise family.
