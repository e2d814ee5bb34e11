//! [`ScaffoldError`]: why scaffolding failed.

/// Why scaffolding failed (`new`, `create api`, `create webhook`,
/// `manifests`). Nothing is written when input is invalid. The installer,
/// the chart and the image have their own errors
/// ([`InstallerError`](crate::installer::InstallerError),
/// [`ImageError`](crate::image::ImageError)).
#[derive(Debug, thiserror::Error)]
pub enum ScaffoldError {
    /// The project name cannot be used.
    #[error("invalid project name {name:?}: {reason}")]
    InvalidName {
        /// The name given.
        name: String,
        /// What is wrong.
        reason: String,
    },
    /// The API group cannot be used.
    #[error("invalid API group {group:?}: {reason}")]
    InvalidGroup {
        /// The group given.
        group: String,
        /// What is wrong.
        reason: String,
    },
    /// The API version cannot be used.
    #[error(
        "invalid API version {version:?}: expected v<N>, v<N>alpha<M> or v<N>beta<M> (e.g. v1alpha1)"
    )]
    InvalidVersion {
        /// The version given.
        version: String,
    },
    /// `--multicluster` names no provider `cargo opkit new` knows.
    #[error("unknown cluster provider {given:?} for --multicluster: expected one of {known}")]
    UnknownClusterProvider {
        /// The name given.
        given: String,
        /// The names it knows.
        known: String,
    },
    /// The kind cannot be used.
    #[error("invalid kind {kind:?}: {reason}")]
    InvalidKind {
        /// The kind given.
        kind: String,
        /// What is wrong.
        reason: String,
    },
    /// The target directory already exists.
    #[error("{} already exists; choose another name or remove it", path.display())]
    Exists {
        /// The directory.
        path: std::path::PathBuf,
    },
    /// The directory is not a project made by `cargo opkit new`.
    #[error("{} is not inside an opkit project (no PROJECT file there or in a parent directory); run this in a directory made by `cargo opkit new`", path.display())]
    NotAProject {
        /// The directory.
        path: std::path::PathBuf,
    },
    /// Flags that do not go together (`create api --resource=false
    /// --namespaced=false`, ..).
    #[error("{reason}")]
    Flags {
        /// Which flags, and what to do instead.
        reason: String,
    },
    /// The kind is already part of the project.
    #[error(
        "the project already has kind {kind}; to serve it in another version too, run \
         `cargo opkit create webhook --kind {kind} --conversion --spoke <version>`"
    )]
    KindExists {
        /// The kind.
        kind: String,
    },
    /// `create webhook` for a kind that has its admission webhooks already.
    #[error(
        "{kind} has its webhooks already, in {}: add validation or defaulting there; \
         for another version of {kind}, run `cargo opkit create webhook --kind {kind} --conversion --spoke <version>`",
        path.display()
    )]
    WebhookExists {
        /// The kind.
        kind: String,
        /// Its webhook file, relative to the project.
        path: std::path::PathBuf,
    },
    /// A file `create api` must extend lacks its `opkit:scaffold` marker.
    #[error("{} has no `{marker}` line: restore it so `create api` knows where to add the new kind", path.display())]
    MissingMarker {
        /// The file.
        path: std::path::PathBuf,
        /// The marker comment.
        marker: String,
    },
    /// A file `create webhook` must extend lacks the line it adds to.
    #[error(
        "{} has no line `{anchor}`: `create webhook` adds {what} next to it; restore the line, or add {what} by hand and run again with the file as generated",
        path.display()
    )]
    MissingAnchor {
        /// The file.
        path: std::path::PathBuf,
        /// The line looked for.
        anchor: String,
        /// What would have been added.
        what: String,
    },
    /// The conversion asked for cannot be scaffolded.
    #[error("cannot scaffold a conversion for {kind}: {reason}")]
    Conversion {
        /// The kind.
        kind: String,
        /// What is wrong, and what to do.
        reason: String,
    },
    /// The PROJECT file is malformed.
    #[error("{}: {detail}", path.display())]
    BadProjectFile {
        /// The file.
        path: std::path::PathBuf,
        /// What is wrong.
        detail: String,
    },
    /// A template is broken (a bug in cargo-opkit).
    #[error("template {template}: {detail}")]
    Template {
        /// The template file.
        template: String,
        /// What is wrong.
        detail: String,
    },
    /// Reading or writing a file failed.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file or directory.
        path: std::path::PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// `create api` or `create webhook` failed after it began writing (a
    /// file could not be written, rustfmt or the build failed): every file
    /// it wrote was removed and every file it changed restored.
    #[error(
        "{cause}\nnothing was changed: the files written were removed and the files edited restored \
         (to add them without building, run again with --skip-manifests)"
    )]
    RolledBack {
        /// What failed.
        cause: Box<ScaffoldError>,
    },
    /// As [`RolledBack`](Self::RolledBack), but putting one file back
    /// failed too: the project is partly changed (see `git status`).
    #[error(
        "{cause}\nand undoing the change failed at {}: {source}; the project is partly changed (see `git status`)",
        path.display()
    )]
    RollbackFailed {
        /// What failed first.
        cause: Box<ScaffoldError>,
        /// The first file or directory that could not be put back.
        path: std::path::PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// Building or running the project to render its manifests failed.
    #[error("generating the manifests failed: {detail}")]
    Manifests {
        /// What cargo said.
        detail: String,
    },
}
