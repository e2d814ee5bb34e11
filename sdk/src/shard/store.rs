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

/// The real store: Leases in one namespace through a `kube::Api`.
pub(crate) struct KubeLeaseStore {
    api: Api<Lease>,
    selector: String,
}

impl KubeLeaseStore {
    pub(crate) fn new(client: kube::Client, namespace: &str, ring: &str) -> Self {
        Self {
            api: Api::namespaced(client, namespace),
            selector: format!("{RING_LABEL}={ring}"),
        }
    }
}

impl LeaseStore for KubeLeaseStore {
    async fn list(&self) -> Result<Vec<Lease>, kube::Error> {
        // No resourceVersion: the apiserver reads etcd with a quorum read.
        let list = self
            .api
            .list(&ListParams::default().labels(&self.selector))
            .await?;
        Ok(list.items)
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
