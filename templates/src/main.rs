//! `cargo opkit`: scaffolds operator projects that use opkit.
//!
//! The scaffolder lands with the user-journey work; today it only says so.
#![warn(clippy::unwrap_used)]

use std::process::ExitCode;

fn main() -> ExitCode {
    eprintln!(
        "cargo-opkit {}: project scaffolding (`cargo opkit new`) is not available yet",
        env!("CARGO_PKG_VERSION")
    );
    ExitCode::FAILURE
}
