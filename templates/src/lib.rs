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
//!     multicluster: None,
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

mod builtin_kinds;
mod cargo_env;
mod cargo_toml;
mod error;
mod features;
pub mod image;
pub mod installer;
mod names;
mod project;
mod render;
mod templates;
mod webhook;

pub use cargo_env::{cargo_command, clear_crate_env};
pub use error::ScaffoldError;
pub use names::{snake_case, validate_group, validate_kind, validate_name, validate_version};
pub use project::{
    ClusterProvider, CreateApi, NewProject, OpkitDependency, ProjectFile, ProjectResource,
    find_project, manifests, shared_target_dir,
};
pub use webhook::CreateWebhook;
