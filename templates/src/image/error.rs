//! [`ImageError`]: why building or pushing an image failed.

use std::path::PathBuf;

/// Why building or pushing an image failed.
#[derive(Debug, thiserror::Error)]
pub enum ImageError {
    /// The directory holds no Cargo project.
    #[error(
        "{} is not inside a Cargo project ({detail}); run this in the operator's directory or pass --dir",
        dir.display()
    )]
    NotACargoProject {
        /// The directory.
        dir: PathBuf,
        /// What cargo said.
        detail: String,
    },
    /// The binary to put in the image could not be chosen.
    #[error("{}: {detail}", manifest.display())]
    NoBinary {
        /// The package's `Cargo.toml`.
        manifest: PathBuf,
        /// What is wrong.
        detail: String,
    },
    /// The Rust standard library for the image's target is not installed.
    #[error(
        "the Rust target {target} is not installed (no {}/lib/rustlib/{target}); run `rustup target add {target}`",
        sysroot.display()
    )]
    TargetMissing {
        /// The target.
        target: &'static str,
        /// rustc's sysroot.
        sysroot: PathBuf,
    },
    /// A cargo command failed.
    #[error("{what}: {detail}")]
    Cargo {
        /// What was being done.
        what: &'static str,
        /// What cargo said.
        detail: String,
    },
    /// The shared libraries of a dev-profile manager could not be found.
    #[error(
        "cannot find the shared libraries of {}: {detail}",
        binary.display()
    )]
    Libraries {
        /// The binary.
        binary: PathBuf,
        /// Why.
        detail: String,
    },
    /// The built binary cannot run in an image without libc.
    #[error(
        "{} is not a static executable ({reason}); the image holds no libc or loader. \
         Is something overriding `-C target-feature=+crt-static` (RUSTFLAGS, .cargo/config.toml)?",
        binary.display()
    )]
    NotStatic {
        /// The binary.
        binary: PathBuf,
        /// Why.
        reason: String,
    },
    /// `SOURCE_DATE_EPOCH` is set but unusable.
    #[error("{0}")]
    BadSourceDate(String),
    /// The output path holds something that is not an earlier image.
    #[error("{} is {what}; refusing to replace it: choose another --output or remove it", path.display())]
    OutputInUse {
        /// The path.
        path: PathBuf,
        /// What is there.
        what: String,
    },
    /// The credentials for a registry could not be found or read (a bad
    /// Docker configuration, a credential helper missing or failing).
    #[error("credentials for {registry}: {detail}")]
    Credentials {
        /// The registry.
        registry: String,
        /// What is wrong, and where the credentials were looked for.
        detail: String,
    },
    /// The image reference cannot be used.
    #[error("invalid image reference {reference:?}: {reason}")]
    BadReference {
        /// The reference given.
        reference: String,
        /// What is wrong.
        reason: String,
    },
    /// The registry did not take the image. The layout on disk is intact.
    #[error("pushing {reference} failed while {step}: {detail}")]
    Push {
        /// The reference.
        reference: String,
        /// What was being done.
        step: &'static str,
        /// What went wrong, and what to do.
        detail: String,
    },
    /// Reading or writing a file failed.
    #[error("{what}: {}: {source}", path.display())]
    Io {
        /// What was being done.
        what: &'static str,
        /// The file or directory.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A bug in cargo-opkit.
    #[error("internal error: {0}")]
    Internal(String),
}
