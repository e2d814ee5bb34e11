//! Errors of this crate.

use std::path::{Path, PathBuf};
use std::time::Duration;

/// What can go wrong while starting, using or stopping a local control plane.
///
/// Its `Debug` is its message: a test's `.expect("start")` or `.unwrap()`
/// then prints what is wrong and what to do (e.g. the script that builds the
/// missing binaries), not the variant's fields.
#[derive(thiserror::Error)]
pub enum EnvtestError {
    /// The etcd or kube-apiserver binary was not found in any place searched.
    #[error(
        "{binary} not found; looked in: {searched}.\n\
         Build the control plane into that cache with `bash {script}` (shipped in this crate; \
         `make controlplane` in the opkit repository runs it), or point KUBEBUILDER_ASSETS \
         (or OPKIT_ASSETS) at a directory holding `etcd` and `kube-apiserver`, e.g. one made by \
         `setup-envtest use -p path 1.36.x`",
        script = script("controlplane/build.sh")
    )]
    MissingBinary {
        /// The binary's file name.
        binary: &'static str,
        /// Every directory looked in, in order, with where it came from.
        searched: String,
    },

    /// The cluster's node components and images were not found.
    #[error(
        "the local cluster's components were not found; looked in: {searched}.\n\
         Build them with `bash {script}` (shipped in this crate; `make cluster-assets` in the \
         opkit repository runs it), or point OPKIT_CLUSTER_ASSETS at the directory that script \
         printed",
        script = script("node/build-node.sh")
    )]
    MissingNodeAssets {
        /// Where they were looked for.
        searched: String,
    },

    /// The cluster DNS (CoreDNS) build was not found.
    #[error(
        "the local cluster's DNS server (CoreDNS) was not found; looked in: {searched}.\n\
         Build it with `bash {script}` (shipped in this crate; `make cluster-assets` in the \
         opkit repository runs it), or start the cluster `without_dns()`",
        script = script("coredns/build.sh")
    )]
    MissingDnsAssets {
        /// Where it was looked for.
        searched: String,
    },

    /// The image archives the cluster's node imports were not found.
    #[error(
        "the local cluster's images were not found; looked in: {searched}.\n\
         Build them with `bash {script}` (shipped in this crate; `make cluster-assets` in the \
         opkit repository runs it), or point OPKIT_CLUSTER_IMAGES at the directory that script \
         printed",
        script = script("node/build-images.sh")
    )]
    MissingImages {
        /// Where they were looked for.
        searched: String,
    },

    /// The OCI registry binary was not found.
    #[error(
        "the OCI registry (distribution) was not found; looked in: {searched}.\n\
         Build it with `bash {script}` (shipped in this crate; `make registry` in the opkit \
         repository runs it), or point OPKIT_REGISTRY at a `registry` binary",
        script = script("registry/build.sh")
    )]
    MissingRegistry {
        /// Where it was looked for.
        searched: String,
    },

    /// A cluster cannot run on this machine as it is (not root, no cgroups, ...).
    #[error("cannot start a local cluster here: {0}")]
    Unsupported(String),

    /// A step of setting up or tearing down the cluster's node failed.
    #[error("cluster node: {step} failed: {detail}")]
    NodeSetup {
        /// What was being done.
        step: &'static str,
        /// What went wrong (a command's output, an OS error).
        detail: String,
    },

    /// The cluster did not reach the expected state in time.
    #[error("cluster: {what} did not happen within {waited:?}; last seen: {last_seen}")]
    ClusterTimeout {
        /// What was awaited.
        what: &'static str,
        /// How long we waited.
        waited: Duration,
        /// The last observation.
        last_seen: String,
    },

    /// A file or directory operation failed.
    #[error("{what} ({path}): {source}")]
    Io {
        /// What was being done.
        what: &'static str,
        /// The path involved.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },

    /// A process could not be started at all.
    #[error("could not start {name} ({path}): {source}")]
    Spawn {
        /// `etcd` or `kube-apiserver`.
        name: &'static str,
        /// The binary.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },

    /// A process exited before it became ready.
    #[error("{name} exited early ({status}); last lines of its log ({log}):\n{tail}")]
    ExitedEarly {
        /// `etcd` or `kube-apiserver`.
        name: &'static str,
        /// How it exited.
        status: String,
        /// Its log file.
        log: PathBuf,
        /// The last lines of its log.
        tail: String,
    },

    /// A process did not become ready in time.
    #[error(
        "{name} was not ready after {waited:?}; last error: {last_error}; last lines of its log ({log}):\n{tail}"
    )]
    NotReady {
        /// `etcd` or `kube-apiserver`.
        name: &'static str,
        /// How long we waited.
        waited: Duration,
        /// The last error seen while polling.
        last_error: String,
        /// Its log file.
        log: PathBuf,
        /// The last lines of its log.
        tail: String,
    },

    /// Generating keys or certificates failed.
    #[error("could not generate {what}: {source}")]
    Certificate {
        /// Which key or certificate.
        what: &'static str,
        /// The underlying error.
        #[source]
        source: rcgen::Error,
    },

    /// A kube client or config could not be built.
    #[error("could not build a Kubernetes client: {0}")]
    Client(#[from] kube::Error),

    /// The kubeconfig could not be written or read.
    #[error("kubeconfig: {0}")]
    Kubeconfig(String),

    /// A CustomResourceDefinition could not be installed or was not served in time.
    #[error("CRD: {0}")]
    Crd(String),

    /// A webhook configuration could not be installed or removed.
    #[error("webhooks: {0}")]
    Webhook(String),

    /// The control plane was stopped; start a new one.
    #[error("the control plane was stopped; start a new one")]
    Stopped,

    /// The shared control plane failed to start earlier in this process.
    #[error("the shared control plane failed to start: {0}")]
    SharedUnavailable(String),
}

impl std::fmt::Debug for EnvtestError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Display::fmt(self, f)
    }
}

/// Shorthand for results in this module.
pub type Result<T, E = EnvtestError> = std::result::Result<T, E>;

/// A build script shipped in this crate (`scripts/`, links to the
/// repository's `tests/` directories), by its path in this crate's source
/// directory: the registry's copy for a user of the published crate, the
/// checkout for opkit's own tests.
fn script(relative: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("scripts")
        .join(relative)
        .display()
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every "not found" error names a build script that exists where this
    /// crate's source is (the same layout ships in the published package).
    #[test]
    fn missing_errors_name_a_shipped_script() {
        let searched = || "/nowhere".to_owned();
        let errors = [
            EnvtestError::MissingBinary {
                binary: "etcd",
                searched: searched(),
            },
            EnvtestError::MissingNodeAssets {
                searched: searched(),
            },
            EnvtestError::MissingDnsAssets {
                searched: searched(),
            },
            EnvtestError::MissingImages {
                searched: searched(),
            },
            EnvtestError::MissingRegistry {
                searched: searched(),
            },
        ];
        for err in errors {
            let msg = err.to_string();
            // What `.expect(..)` in a test prints.
            assert_eq!(format!("{err:?}"), msg);
            let script = msg
                .split('`')
                .find_map(|part| part.strip_prefix("bash "))
                .unwrap_or_else(|| panic!("no `bash SCRIPT` in: {msg}"));
            assert!(script.starts_with(env!("CARGO_MANIFEST_DIR")), "{script}");
            assert!(Path::new(script).is_file(), "{script} does not exist");
        }
    }
}
