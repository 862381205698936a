//! Shared pieces of encoders: scale searches and importance weighting used by more than one
//! format family.

pub mod ternary;
