//! The operator's reconcilers, one module per kind.

pub mod backup;
pub mod schedule;
// opkit:scaffold:controllers
