//! [`Engagements`]: what a provider that watches a source of kubeconfigs
//! (Secrets, `ClusterProfile`s) engaged, and how a changed kubeconfig is
//! carried out: nothing if unchanged, new credentials swapped in if the
//! server is the same, engaged again otherwise.

use std::collections::HashMap;

use super::credentials::{self, Endpoint};
use super::error::MultiClusterError;
use super::provider::ClusterSink;
use crate::cluster_request::ClusterName;

/// The clusters a provider engaged, each with the kubeconfig it was last
/// engaged (or given credentials) from.
#[derive(Default)]
pub(super) struct Engagements {
    engaged: HashMap<ClusterName, Engaged>,
}

/// An engaged cluster's kubeconfig (as its source holds it) and the
/// endpoint it reaches.
struct Engaged {
    source: Vec<u8>,
    endpoint: Endpoint,
}

impl Engagements {
    /// Whether `cluster` is engaged from exactly `source`.
    pub(super) fn unchanged(&self, cluster: &ClusterName, source: &[u8]) -> bool {
        self.engaged
            .get(cluster)
            .is_some_and(|e| e.source.as_slice() == source)
    }

    /// Whether `cluster` is engaged.
    pub(super) fn is_engaged(&self, cluster: &ClusterName) -> bool {
        self.engaged.contains_key(cluster)
    }

    /// `cluster` is gone: disengaged if it was engaged.
    pub(super) async fn remove(
        &mut self,
        clusters: &ClusterSink,
        cluster: &ClusterName,
    ) -> Result<(), MultiClusterError> {
        if self.engaged.remove(cluster).is_some() {
            clusters.disengage(cluster).await?;
        }
        Ok(())
    }

    /// `cluster`'s source no longer loads (`error`): its old credentials
    /// are not trusted either, so it is disengaged if it was engaged, and
    /// `error` is the answer.
    pub(super) async fn refuse(
        &mut self,
        clusters: &ClusterSink,
        cluster: &ClusterName,
        error: MultiClusterError,
    ) -> Result<(), MultiClusterError> {
        self.remove(clusters, cluster).await?;
        Err(error)
    }

    /// `cluster` is now reached through `config`, loaded from `source`
    /// (`origin` names it in errors): its credentials swapped in under its
    /// caches if it reaches the same server (URL and trust) as before,
    /// engaged (again) otherwise. A config that makes no client
    /// disengages the cluster and is the error.
    pub(super) async fn apply(
        &mut self,
        clusters: &ClusterSink,
        cluster: ClusterName,
        source: Vec<u8>,
        config: kube::Config,
        origin: &str,
    ) -> Result<(), MultiClusterError> {
        let endpoint = Endpoint::of(&config);
        let client = match credentials::client_of(&cluster, config, origin) {
            Ok(client) => client,
            Err(error) => return self.refuse(clusters, &cluster, error).await,
        };
        let same_server = self
            .engaged
            .get(&cluster)
            .is_some_and(|e| e.endpoint == endpoint);
        if !same_server
            || !clusters
                .update_credentials(&cluster, client.clone())
                .await?
        {
            clusters.engage(cluster.clone(), client).await?;
        }
        self.engaged.insert(cluster, Engaged { source, endpoint });
        Ok(())
    }
}
