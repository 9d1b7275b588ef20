//! x
mod conv;
