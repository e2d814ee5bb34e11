//! The three commands: `new`, `create api`, `manifests`; and the `PROJECT`
//! file they (and `create webhook`) read and write.

mod all_or_nothing;
mod api;
mod dependency;
mod external_module;
mod files;
mod manifests;
mod multicluster;
mod new;
mod project_file;

#[cfg(test)]
mod tests;

pub(crate) use all_or_nothing::write_all_or_nothing;
pub use api::CreateApi;
pub use dependency::OpkitDependency;
pub(crate) use files::{insert_before_marker, kind_values, read, render_set};
pub use manifests::{manifests, shared_target_dir};
pub use multicluster::ClusterProvider;
pub use new::NewProject;
pub use project_file::{ProjectFile, ProjectResource, find_project};
