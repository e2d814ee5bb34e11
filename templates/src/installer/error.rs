//! [`InstallerError`]: why `cargo opkit installer` or `cargo opkit chart`
//! failed.

use std::path::PathBuf;

/// Why `cargo opkit installer` or `cargo opkit chart` failed. Nothing is
/// written then.
#[derive(Debug, thiserror::Error)]
pub enum InstallerError {
    /// The directory is not in a project, or its PROJECT file is bad.
    #[error(transparent)]
    Project(Box<crate::error::ScaffoldError>),
    /// `deploy/` has no manifests.
    #[error("{} holds no *.yaml manifests: run `cargo opkit manifests` (or `make manifests`) first", dir.display())]
    NoManifests {
        /// The `deploy/` directory.
        dir: PathBuf,
    },
    /// A manifest is not valid YAML.
    #[error("{}: {message}", path.display())]
    Parse {
        /// The file.
        path: PathBuf,
        /// The parser's message (with the line and column).
        message: String,
    },
    /// No Deployment runs the project's image.
    #[error(
        "no Deployment in {} has a container with image {placeholder:?}: the installer and the chart set the image of that container (the manager's); restore it in deploy/04-deployment.yaml",
        dir.display()
    )]
    NoManager {
        /// The `deploy/` directory.
        dir: PathBuf,
        /// The image looked for (`<name>:latest`).
        placeholder: String,
    },
    /// The image reference cannot be used.
    #[error("invalid image {image:?}: {reason}")]
    InvalidImage {
        /// The reference given.
        image: String,
        /// What is wrong.
        reason: String,
    },
    /// The chart's directory holds something `cargo opkit chart` did not
    /// render, which replacing it would lose.
    #[error(
        "refusing to replace {}: it is not empty and holds no Chart.yaml rendered by `cargo opkit chart`; choose another --out or remove it",
        path.display()
    )]
    NotAChart {
        /// The directory.
        path: PathBuf,
    },
    /// Reading or writing a file failed.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
}
