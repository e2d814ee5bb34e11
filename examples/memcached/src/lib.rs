//! memcached-operator: a Kubernetes operator for Memcached (cache.example.com), built with opkit.
//!
//! The API types live in [`api`], their reconcilers in [`controllers`].
//! This file lists them for the manager ([`add_controllers`]) and for the
//! manifests ([`crds`], [`rbac_rules`]); `cargo opkit create api` adds to
//! each list at its `opkit:scaffold` marker.

pub mod api;
pub mod controllers;

use std::path::{Path, PathBuf};

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::CustomResourceExt;
use opkit::ControllerWiring;
use opkit::manager::{Manager, ManagerError};
use opkit::manifest::{Documents, ManifestError};
use opkit::rbac::{self, Rules};

/// The operator's name: field manager, event reporter, label value.
pub const NAME: &str = "memcached-operator";
/// The namespace the operator is deployed to (`deploy/00-namespace.yaml`).
pub const NAMESPACE: &str = "memcached-operator-system";
/// The operator's ServiceAccount (`deploy/02-service-account.yaml`).
pub const SERVICE_ACCOUNT: &str = "memcached-operator-controller-manager";
/// The ClusterRole holding the rules of [`rbac_rules`].
pub const CLUSTER_ROLE: &str = "memcached-operator-manager-role";
/// The ClusterRole a scraper's ServiceAccount needs bound to read the secure
/// `/metrics` (`get` on the non-resource URL `/metrics`).
pub const METRICS_READER_ROLE: &str = "memcached-operator-metrics-reader";
/// The Lease replicas elect a leader on.
pub const LEADER_ELECTION_ID: &str = "memcached-operator-lock";

/// Adds every controller of this operator to the manager.
pub fn add_controllers(manager: &mut Manager) -> Result<(), ManagerError> {
    controllers::memcached::MemcachedReconciler.add_to(manager)?;
    // opkit:scaffold:controllers
    Ok(())
}

/// The CustomResourceDefinitions of this operator's API types.
pub fn crds() -> Vec<CustomResourceDefinition> {
    vec![
        api::memcached::Memcached::crd(),
        // opkit:scaffold:crds
    ]
}

/// The RBAC rules the operator needs: its controllers' (from their
/// `#[controller(...)]` declarations), leader election's, and secure
/// metrics' (TokenReviews and SubjectAccessReviews of scrapers' tokens).
pub fn rbac_rules() -> Rules {
    Rules::new()
        .merge(controllers::memcached::MemcachedReconciler::rbac_rules())
        // opkit:scaffold:rbac
        .leader_election()
        .metrics_auth()
}

/// Why the manifests could not be written.
#[derive(Debug)]
pub enum WriteError {
    /// Rendering YAML failed.
    Render(ManifestError),
    /// Writing a file failed.
    Io(PathBuf, std::io::Error),
}

impl std::fmt::Display for WriteError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Render(e) => write!(f, "{e}"),
            Self::Io(path, e) => write!(f, "cannot write {}: {e}", path.display()),
        }
    }
}

impl std::error::Error for WriteError {}

/// The generated manifests, as (file name, YAML): the CRDs and the RBAC
/// rules (the operator's, and its CRDs' admin, editor and viewer roles),
/// rendered from the code.
pub fn manifests() -> Result<Vec<(&'static str, String)>, ManifestError> {
    const HEADER: &str = "# Generated from the code by `cargo opkit manifests`; do not edit.\n";
    let crds = opkit::manifest::to_yaml(&crds())?;
    let mut rbac = Documents::new()
        .push(&rbac_rules().cluster_role(CLUSTER_ROLE))?
        .push(&rbac::cluster_role_binding(
            &format!("{NAME}-manager-rolebinding"),
            CLUSTER_ROLE,
            SERVICE_ACCOUNT,
            NAMESPACE,
        ))?
        // For scrapers: `get` on the non-resource URL /metrics.
        .push(&rbac::metrics_reader_role(METRICS_READER_ROLE))?;
    // For the cluster's users, not the operator: each CRD's admin, editor
    // and viewer ClusterRoles, aggregated into the built-in admin, edit and
    // view.
    for crd in crate::crds() {
        for role in rbac::user_roles(&crd, NAME) {
            rbac = rbac.push(&role)?;
        }
    }
    let rbac = rbac.to_yaml()?;
    Ok(vec![
        ("01-crds.yaml", format!("{HEADER}{crds}")),
        ("03-rbac.yaml", format!("{HEADER}{rbac}")),
    ])
}

/// Writes [`manifests`] into `dir`; returns the paths written.
pub fn write_manifests(dir: &Path) -> Result<Vec<PathBuf>, WriteError> {
    std::fs::create_dir_all(dir).map_err(|e| WriteError::Io(dir.to_owned(), e))?;
    let mut written = Vec::new();
    for (file, text) in manifests().map_err(WriteError::Render)? {
        let path = dir.join(file);
        std::fs::write(&path, text).map_err(|e| WriteError::Io(path.clone(), e))?;
        written.push(path);
    }
    Ok(written)
}
