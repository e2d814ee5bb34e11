//! The crates as published: `tests/package/check.sh` packages opkit-macros,
//! opkit, opkit-envtest and cargo-opkit, serves them from a local directory
//! registry standing in for crates.io, installs `cargo opkit` from it, and
//! builds and tests a project it generates (`opkit = "0.1.0"`, no path),
//! with the toolchain of the declared MSRV. Needs the control plane
//! (`make controlplane`) for the project's tests.

use std::process::Command;

use crate::support::{succeeds, workspace};

#[test]
fn a_project_builds_and_passes_its_tests_from_the_packaged_crates() {
    let script = workspace().join("tests/package/check.sh");
    let mut command = Command::new("bash");
    // The script picks its own target directory (in the opkit cache) and
    // toolchain; nothing of this test's cargo reaches it.
    cargo_opkit::clear_crate_env(&mut command)
        .arg(&script)
        .env_remove("CARGO_TARGET_DIR")
        .env_remove("CARGO")
        .env_remove("RUSTC")
        .env_remove("RUSTDOC");
    succeeds(
        command.output().expect("run tests/package/check.sh"),
        "tests/package/check.sh",
    );
}
