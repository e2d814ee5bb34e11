//! `cargo opkit`: scaffolds Kubernetes operator projects that use opkit.
//!
//! ```no_run
//! use cargo_opkit::{NewProject, OpkitDependency};
//!
//! let project = NewProject {
//!     name: "memcached-operator".into(),
//!     group: "cache.example.com".into(),
//!     version: "v1alpha1".into(),
//!     kind: Some("Memcached".into()),
//!     dir: None,
//!     opkit: OpkitDependency::Version("0.1".into()),
//!     sharding: false,
//! };
//! // Writes ./memcached-operator, builds it to render deploy/01-crds.yaml and
//! // deploy/03-rbac.yaml, all or nothing: a failed build leaves no directory.
//! let created = project.create_with_manifests(None)?;
//! // Later, from the project or any directory inside it:
//! cargo_opkit::manifests(&created.join("src"))?;
//! # Ok::<(), cargo_opkit::ScaffoldError>(())
//! ```
//!
//! Template files live under `templates/project/` (the project),
//! `templates/api/` (one kind and its controller, also used by
//! `create api`), `templates/controller/` (a controller for a kind the
//! project does not define, `create api --resource=false`), `templates/webhook/` and `templates/conversion/`
//! (`create webhook`, `--conversion`); the build embeds them all. Placeholders are `{{key}}`;
//! a `.tmpl` suffix is dropped and a `dot-` prefix becomes `.`; a file without
//! the `.tmpl` suffix is copied as it is (`project/grafana/*.json`).
#![deny(missing_docs)]
#![warn(clippy::unwrap_used)]

mod cargo_env;
pub mod dist;
pub mod image;
mod names;
mod project;
mod render;
mod webhook;

pub use cargo_env::{cargo_command, clear_crate_env};
pub use names::{snake_case, validate_group, validate_kind, validate_name, validate_version};
pub use project::{
    CreateApi, NewProject, OpkitDependency, ProjectFile, ProjectResource, find_project, manifests,
    shared_target_dir,
};
pub use webhook::CreateWebhook;

mod templates {
    include!(concat!(env!("OUT_DIR"), "/templates.rs"));
}

/// Why a `cargo opkit` command failed. Nothing is written when input is
/// invalid.
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
    #[error("the project already has kind {kind}")]
    KindExists {
        /// The kind.
        kind: String,
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
    /// Rendering the installer or the Helm chart failed (`cargo opkit
    /// installer`, `cargo opkit chart`).
    #[error(transparent)]
    Dist(#[from] dist::DistError),
    /// Building or pushing an image failed (`cargo opkit image`).
    #[error(transparent)]
    Image(#[from] image::ImageError),
    /// Building or running the project to render its manifests failed.
    #[error("generating the manifests failed: {detail}")]
    Manifests {
        /// What cargo said.
        detail: String,
    },
}
