//! [`OpkitDependency`]: where a generated project gets opkit (and
//! opkit-envtest) from, as the lines of its `Cargo.toml`.

use std::path::{Path, PathBuf};

use crate::error::ScaffoldError;

/// Where a generated project gets opkit from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OpkitDependency {
    /// From the registry: a version requirement such as `0.1`.
    Version(String),
    /// From a local checkout: the opkit crate's directory (`sdk/`) or the
    /// repository root holding it.
    Path(PathBuf),
}

impl OpkitDependency {
    /// The opkit checkout this `cargo-opkit` was built from (its `sdk/`
    /// directory), if it still exists and still holds the opkit crate: a
    /// `cargo-opkit` built or installed from a checkout makes projects
    /// that build against that checkout with no flag.
    pub fn built_from() -> Option<Self> {
        let sdk = Path::new(env!("OPKIT_BUILT_FROM_SDK"));
        resolve_opkit_path(sdk).ok().map(Self::Path)
    }

    /// What `cargo opkit new` uses when given neither `--opkit-path` nor
    /// `--opkit-version`: [`built_from`](Self::built_from), else the
    /// published version matching this `cargo-opkit`.
    pub fn default_for_new() -> Self {
        Self::built_from().unwrap_or_else(|| Self::Version(env!("CARGO_PKG_VERSION").to_owned()))
    }

    /// One line saying which opkit a project uses and how to switch.
    pub fn describe(&self) -> String {
        let published = published_requirement();
        match self {
            Self::Version(version) => format!(
                "opkit: the published crates, `version = \"{version}\"` on the `opkit` and \
                 `opkit-envtest` lines of Cargo.toml"
            ),
            Self::Path(path) => format!(
                "opkit: the local checkout {} (path dependencies); to use the published crates, \
                 put `version = \"{published}\"` in place of `path = ...` on the `opkit` and \
                 `opkit-envtest` lines of Cargo.toml (or pass --opkit-version {published})",
                resolve_opkit_path(path)
                    .unwrap_or_else(|_| path.clone())
                    .display()
            ),
        }
    }

    /// The `[dependencies]` line (opkit, with its cargo `features`) and
    /// the `[dev-dependencies]` line (opkit-envtest, the test control
    /// plane, from the same place).
    pub(super) fn lines(&self, features: &[&str]) -> Result<(String, String), ScaffoldError> {
        let (opkit, envtest) = match self {
            Self::Version(version) => (
                format!("version = {}", toml_string(version)),
                format!("version = {}", toml_string(version)),
            ),
            Self::Path(path) => {
                let sdk = resolve_opkit_path(path)?;
                let envtest = resolve_envtest_path(&sdk)?;
                (
                    format!("path = {}", toml_string(&sdk.to_string_lossy())),
                    format!("path = {}", toml_string(&envtest.to_string_lossy())),
                )
            }
        };
        Ok((
            crate::features::dependency_line("opkit", &opkit, features),
            crate::features::dependency_line("opkit-envtest", &envtest, &[]),
        ))
    }
}

/// The opkit-envtest crate of the checkout whose opkit crate is `sdk`: its
/// sibling `envtest/`, absolute.
fn resolve_envtest_path(sdk: &Path) -> Result<PathBuf, ScaffoldError> {
    let dir = sdk
        .parent()
        .map(|root| root.join("envtest"))
        .unwrap_or_else(|| sdk.join("../envtest"));
    let is_envtest = std::fs::read_to_string(dir.join("Cargo.toml"))
        .is_ok_and(|text| text.lines().any(|l| l.trim() == "name = \"opkit-envtest\""));
    if !is_envtest {
        return Err(ScaffoldError::Io {
            path: dir,
            source: std::io::Error::new(
                std::io::ErrorKind::NotFound,
                "no opkit-envtest crate here (expected next to the opkit crate, \
                 a Cargo.toml with name = \"opkit-envtest\")",
            ),
        });
    }
    std::fs::canonicalize(&dir).map_err(|source| ScaffoldError::Io { path: dir, source })
}

/// The published version requirement matching this build: `0.1` for 0.1.x.
fn published_requirement() -> String {
    let version = env!("CARGO_PKG_VERSION");
    let mut parts = version.split('.');
    match (parts.next(), parts.next()) {
        (Some("0"), Some(minor)) => format!("0.{minor}"),
        (Some(major), _) => major.to_owned(),
        _ => version.to_owned(),
    }
}

/// The opkit crate directory at `path` (or at `path/sdk`), absolute.
fn resolve_opkit_path(path: &Path) -> Result<PathBuf, ScaffoldError> {
    let is_opkit = |dir: &Path| {
        std::fs::read_to_string(dir.join("Cargo.toml"))
            .is_ok_and(|text| text.lines().any(|l| l.trim() == "name = \"opkit\""))
    };
    for candidate in [path.to_owned(), path.join("sdk")] {
        if is_opkit(&candidate) {
            return std::fs::canonicalize(&candidate).map_err(|source| ScaffoldError::Io {
                path: candidate,
                source,
            });
        }
    }
    Err(ScaffoldError::Io {
        path: path.to_owned(),
        source: std::io::Error::new(
            std::io::ErrorKind::NotFound,
            "no opkit crate here (expected a Cargo.toml with name = \"opkit\", or sdk/Cargo.toml)",
        ),
    })
}

/// A TOML basic string.
pub(super) fn toml_string(text: &str) -> String {
    let mut out = String::from("\"");
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}
