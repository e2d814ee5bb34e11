//! What `cargo metadata` says about the project: the package to build, its
//! targets, and where it builds.

use std::path::PathBuf;

use serde::Deserialize;

/// What `cargo metadata` says about the project.
#[derive(Debug, Clone)]
pub(crate) struct Project {
    /// The package's `Cargo.toml`.
    pub manifest: PathBuf,
    /// The workspace root (remapped to `/src` in the binary).
    pub workspace_root: PathBuf,
    /// The target directory.
    pub target_dir: PathBuf,
    /// The package version.
    pub version: String,
    /// The package's `repository`, if set.
    pub repository: Option<String>,
    /// The bin target to build.
    pub bin: String,
}

#[derive(Deserialize)]
pub(super) struct Metadata {
    pub(super) packages: Vec<Package>,
    pub(super) workspace_root: PathBuf,
    pub(super) target_directory: PathBuf,
}

#[derive(Deserialize)]
pub(super) struct Package {
    pub(super) name: String,
    pub(super) version: String,
    pub(super) manifest_path: PathBuf,
    pub(super) repository: Option<String>,
    pub(super) targets: Vec<Target>,
}

#[derive(Deserialize)]
pub(crate) struct Target {
    pub name: String,
    pub kind: Vec<String>,
}

impl Package {
    pub(super) fn bins(&self) -> Vec<&str> {
        self.targets
            .iter()
            .filter(|t| t.kind.iter().any(|k| k == "bin"))
            .map(|t| t.name.as_str())
            .collect()
    }
}
