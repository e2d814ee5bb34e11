//! What a project ships: `cargo opkit installer` (every manifest of
//! `deploy/` in one `dist/install.yaml`, the image set) and `cargo opkit
//! chart` (a Helm chart in `dist/chart/` rendered from the same manifests).
//!
//! ```no_run
//! use std::path::Path;
//!
//! let project = Path::new("memcached-operator");
//! let written = cargo_opkit::installer::install_yaml(
//!     project,
//!     Some("registry.example.com/memcached-operator:v0.1.0"),
//!     None,
//! )?;
//! println!("wrote {}", written.display());
//! let chart = cargo_opkit::installer::chart(project, None)?;
//! println!("wrote {}", chart.display());
//! # Ok::<(), cargo_opkit::installer::InstallerError>(())
//! ```
//!
//! Both take whatever `deploy/*.yaml` holds, in file order (the order
//! `make deploy` applies). The chart parameterises the manager's
//! Deployment (the one whose container runs the project's image,
//! `<name>:latest` in `deploy/`) by what it finds there: replicas, image,
//! resources, `--leader-elect`, `--metrics-bind-address` and the `metrics`
//! port, `--metrics-secure`, the `webhook` port; any other manifest goes
//! into the chart as it is, in the release's namespace.

mod chart;
mod error;
mod files;
mod image_ref;
mod manifests;
mod values;
mod yaml;

use std::path::{Path, PathBuf};

pub use error::InstallerError;
pub use image_ref::ImageRef;

use files::{check_replaceable, write_file, write_tree};
use manifests::{GENERATED, Manifests, containers_running};
use yaml::Node;

/// Writes `dist/install.yaml` (or `out`): every document of `deploy/*.yaml`
/// in file order, separated by `---`, the manager's image set to `image`
/// (default `<name>:latest`, as `deploy/` has it). `dir` is the project's
/// directory or one inside it. Returns the file written.
pub fn install_yaml(
    dir: &Path,
    image: Option<&str>,
    out: Option<&Path>,
) -> Result<PathBuf, InstallerError> {
    let mut manifests = Manifests::read(dir)?;
    let placeholder = manifests.placeholder();
    let image = match image {
        Some(image) => ImageRef::parse(image)?.to_string(),
        None => placeholder.clone(),
    };
    let mut text = format!(
        "{GENERATED} installer` from deploy/; do not edit.\n# Apply with: kubectl apply --server-side -f install.yaml\n"
    );
    let mut found = false;
    for (_, docs) in &mut manifests.files {
        for doc in docs.iter_mut() {
            for container in containers_running(doc, &placeholder) {
                container.set("image", Node::Str(image.clone()));
                found = true;
            }
            text.push_str("---\n");
            text.push_str(&yaml::emit(doc));
        }
    }
    if !found {
        return Err(manifests.no_manager());
    }
    let out = out
        .map(Path::to_owned)
        .unwrap_or_else(|| manifests.root.join("dist/install.yaml"));
    write_file(&out, &text)?;
    tracing::debug!(path = %out.display(), %image, "wrote the installer");
    Ok(out)
}

/// Writes the Helm chart rendered from `deploy/` to `dist/chart` (or
/// `out`), replacing what was there. Returns the chart's directory.
pub fn chart(dir: &Path, out: Option<&Path>) -> Result<PathBuf, InstallerError> {
    let manifests = Manifests::read(dir)?;
    let files = chart::render(manifests.clone())?;
    let out = out
        .map(Path::to_owned)
        .unwrap_or_else(|| manifests.root.join("dist/chart"));
    check_replaceable(&out)?;
    write_tree(&out, &files)?;
    tracing::debug!(path = %out.display(), files = files.len(), "wrote the chart");
    Ok(out)
}
