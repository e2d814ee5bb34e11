//! `cargo opkit manifests`: the project's binary renders its CRDs and
//! RBAC rules into `deploy/`, built in the target directory every
//! generated project shares.

use std::path::{Path, PathBuf};

use super::project_file::{ProjectFile, find_project};
use crate::error::ScaffoldError;

/// The target directory `cargo opkit` builds generated projects in, shared
/// by all of them so their dependencies compile once: `$CARGO_TARGET_DIR`
/// if set, else `$OPKIT_CACHE/target`, else `~/.cache/opkit/target`
/// (`None` when neither `OPKIT_CACHE` nor `HOME` is set: cargo's default).
/// The generated Makefile uses the same directory.
pub fn shared_target_dir() -> Option<PathBuf> {
    let set = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty());
    if let Some(dir) = set("CARGO_TARGET_DIR") {
        return Some(PathBuf::from(dir));
    }
    if let Some(cache) = set("OPKIT_CACHE") {
        return Some(PathBuf::from(cache).join("target"));
    }
    set("HOME").map(|home| PathBuf::from(home).join(".cache/opkit/target"))
}

/// `cargo opkit manifests`: builds the project in `dir` (or the project
/// holding it, see [`find_project`]) and runs its binary's `manifests`
/// command, which renders the CRDs and RBAC rules from the code into
/// `deploy/`. Cargo's progress and errors go to stderr as the build runs;
/// the binary's report (the files written) goes to stdout. Builds in
/// [`shared_target_dir`].
pub fn manifests(dir: &Path) -> Result<(), ScaffoldError> {
    manifests_in(&find_project(dir)?)
}

/// [`manifests`] in exactly `dir`.
pub(super) fn manifests_in(dir: &Path) -> Result<(), ScaffoldError> {
    let project = ProjectFile::read(dir)?;
    let mut command = crate::cargo_env::cargo_command();
    command.current_dir(dir).args([
        "run",
        "--bin",
        &project.name,
        "--",
        "manifests",
        "--dir",
        "deploy",
    ]);
    if let Some(target) = shared_target_dir() {
        command.env("CARGO_TARGET_DIR", target);
    }
    let status = command.status().map_err(|e| ScaffoldError::Manifests {
        detail: format!("cannot run cargo: {e}"),
    })?;
    if !status.success() {
        return Err(ScaffoldError::Manifests {
            detail: format!(
                "`cargo run --bin {} -- manifests` failed ({status}); cargo's output is above",
                project.name
            ),
        });
    }
    Ok(())
}
