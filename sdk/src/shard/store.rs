//! Reading and writing the member Leases: the only place membership talks
//! to the apiserver, behind a small trait so the protocol's timing can be
//! tested on tokio's paused clock.

use std::future::Future;

use k8s_openapi::api::coordination::v1::Lease;
use kube::api::{Api, DeleteParams, ListParams, PostParams, Preconditions};

/// The label every member Lease of a ring carries; its value is the ring.
pub(crate) const RING_LABEL: &str = "shard.opkit.dev/ring";
/// The annotation where a member acknowledges the view it acts on.
pub(crate) const VIEW_ANNOTATION: &str = "shard.opkit.dev/view";

/// List, create, replace and delete the member Leases of one ring.
pub(crate) trait LeaseStore: Send + Sync + 'static {
    /// Every Lease of the ring, read consistently (a quorum read).
    fn list(&self) -> impl Future<Output = Result<Vec<Lease>, kube::Error>> + Send;
    /// Creates a Lease (409 if it exists).
    fn create(&self, lease: &Lease) -> impl Future<Output = Result<Lease, kube::Error>> + Send;
    /// Replaces a Lease under its `resourceVersion` (409 if stale, 404 if gone).
    fn replace(&self, lease: &Lease) -> impl Future<Output = Result<Lease, kube::Error>> + Send;
    /// Deletes `name` only if its `resourceVersion` is still `version`.
    fn delete(
        &self,
        name: &str,
        version: &str,
    ) -> impl Future<Output = Result<(), kube::Error>> + Send;
}

/// The annotation where a member lists the kinds its sharded controllers
/// reconcile (`Kind.group`, comma-separated, sorted): replicas of one
/// ring that disagree on it are two operators sharing a ring name.
pub(crate) const KINDS_ANNOTATION: &str = "shard.opkit.dev/kinds";

/// The real store: Leases in one namespace through a `kube::Api`.
pub(crate) struct KubeLeaseStore {
    api: Api<Lease>,
    ring: String,
}

impl KubeLeaseStore {
    pub(crate) fn new(client: kube::Client, namespace: &str, ring: &str) -> Self {
        Self {
            api: Api::namespaced(client, namespace),
            ring: ring.to_owned(),
        }
    }
}

/// Whether `lease` is one of `ring`'s: labelled with it, or named as its
/// member Leases are (`<ring>-<16 hex digits>`) whatever its labels say, so
/// that a member Lease whose label was edited away by hand is still seen
/// (and judged invalid) rather than silently dropping its member.
pub(crate) fn of_ring(lease: &Lease, ring: &str) -> bool {
    let labelled = lease
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(RING_LABEL))
        .is_some_and(|r| r == ring);
    let named = lease
        .metadata
        .name
        .as_deref()
        .and_then(|n| n.strip_prefix(ring))
        .and_then(|n| n.strip_prefix('-'))
        .is_some_and(|hex| hex.len() == 16 && hex.bytes().all(|b| b.is_ascii_hexdigit()));
    labelled || named
}

impl LeaseStore for KubeLeaseStore {
    async fn list(&self) -> Result<Vec<Lease>, kube::Error> {
        // No resourceVersion: the apiserver reads etcd with a quorum read.
        // No label selector: a member Lease relabelled by hand must still
        // be seen (an operator's namespace holds few Leases).
        let list = self.api.list(&ListParams::default()).await?;
        Ok(list
            .items
            .into_iter()
            .filter(|lease| of_ring(lease, &self.ring))
            .collect())
    }

    async fn create(&self, lease: &Lease) -> Result<Lease, kube::Error> {
        self.api.create(&PostParams::default(), lease).await
    }

    async fn replace(&self, lease: &Lease) -> Result<Lease, kube::Error> {
        let name = lease.metadata.name.clone().unwrap_or_default();
        self.api.replace(&name, &PostParams::default(), lease).await
    }

    async fn delete(&self, name: &str, version: &str) -> Result<(), kube::Error> {
        let params = DeleteParams {
            preconditions: Some(Preconditions {
                resource_version: Some(version.to_owned()),
                uid: None,
            }),
            ..DeleteParams::default()
        };
        self.api.delete(name, &params).await.map(|_| ())
    }
}
