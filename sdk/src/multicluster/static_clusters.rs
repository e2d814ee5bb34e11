//! [`StaticClusters`]: a fixed set of clusters, from `kube::Config`s or
//! kubeconfig files and contexts.

use std::path::PathBuf;

use tokio_util::sync::CancellationToken;

use super::credentials;
use super::error::{MultiClusterError, ProviderError};
use super::provider::{ClusterSink, Provider};
use crate::cluster_request::ClusterName;

/// Where one cluster's connection settings come from.
#[derive(Debug, Clone)]
enum Source {
    Config(Box<kube::Config>),
    Kubeconfig {
        path: PathBuf,
        context: Option<String>,
    },
}

/// A provider of a fixed set of clusters, each named by the caller: all of
/// them are engaged when the fleet starts and stay engaged (the file
/// provider of multicluster-runtime, without watching the files). A
/// cluster whose settings cannot be loaded is logged and left out; the
/// others are engaged.
///
/// ```no_run
/// use opkit::multicluster::StaticClusters;
///
/// # fn doc(east: kube::Config) {
/// let clusters = StaticClusters::new()
///     .config("east", east)
///     .kubeconfig_context("west", "/etc/fleet/kubeconfig", "west-admin");
/// # let _ = clusters;
/// # }
/// ```
#[derive(Debug, Clone, Default)]
pub struct StaticClusters {
    clusters: Vec<(ClusterName, Source)>,
}

impl StaticClusters {
    /// No cluster yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// The cluster `name`, reached with `config`.
    pub fn config(mut self, name: impl Into<ClusterName>, config: kube::Config) -> Self {
        self.clusters
            .push((name.into(), Source::Config(Box::new(config))));
        self
    }

    /// The cluster `name`, reached with the current context of the
    /// kubeconfig file at `path` (read when the fleet starts).
    pub fn kubeconfig(mut self, name: impl Into<ClusterName>, path: impl Into<PathBuf>) -> Self {
        let source = Source::Kubeconfig {
            path: path.into(),
            context: None,
        };
        self.clusters.push((name.into(), source));
        self
    }

    /// The cluster `name`, reached with the context `context` of the
    /// kubeconfig file at `path` (read when the fleet starts).
    pub fn kubeconfig_context(
        mut self,
        name: impl Into<ClusterName>,
        path: impl Into<PathBuf>,
        context: impl Into<String>,
    ) -> Self {
        let source = Source::Kubeconfig {
            path: path.into(),
            context: Some(context.into()),
        };
        self.clusters.push((name.into(), source));
        self
    }
}

/// The client for `source`.
async fn client_of(
    cluster: &ClusterName,
    source: Source,
) -> Result<kube::Client, MultiClusterError> {
    match source {
        Source::Config(config) => credentials::client_of(cluster, *config, ""),
        Source::Kubeconfig { path, context } => {
            let origin = path.display().to_string();
            let kubeconfig = kube::config::Kubeconfig::read_from(&path).map_err(|e| {
                credentials::credentials(cluster, &origin, format!("cannot read it: {e}"))
            })?;
            let config = credentials::config_of(cluster, kubeconfig, context, &origin).await?;
            credentials::client_of(cluster, config, &origin)
        }
    }
}

impl Provider for StaticClusters {
    async fn run(
        self,
        clusters: ClusterSink,
        stop: CancellationToken,
    ) -> Result<(), ProviderError> {
        for (name, source) in self.clusters {
            let engaged = match client_of(&name, source).await {
                Ok(client) => clusters.engage(name.clone(), client).await,
                Err(error) => Err(error),
            };
            match engaged {
                Ok(()) => {}
                Err(MultiClusterError::FleetStopped) => return Ok(()),
                Err(error) => {
                    tracing::error!(cluster = %name, %error, "cluster left out of the fleet")
                }
            }
        }
        stop.cancelled().await;
        Ok(())
    }
}
