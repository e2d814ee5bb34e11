//! Reading and writing the Lease: the only place the election talks to the
//! apiserver, behind a small trait so the timing logic can be tested on
//! tokio's paused clock.

use std::future::Future;

use k8s_openapi::api::coordination::v1::Lease;
use kube::api::{Api, PostParams};

/// Get, create and replace one Lease. `replace` must send the Lease's
/// `resourceVersion` so the apiserver rejects a stale write with 409.
pub(crate) trait LeaseLock: Send + Sync + 'static {
    /// The Lease, or `None` if it does not exist.
    fn get(&self) -> impl Future<Output = Result<Option<Lease>, kube::Error>> + Send;
    /// Creates the Lease (fails with 409 AlreadyExists if someone else did).
    fn create(&self, lease: &Lease) -> impl Future<Output = Result<Lease, kube::Error>> + Send;
    /// Replaces the Lease under optimistic concurrency.
    fn replace(&self, lease: &Lease) -> impl Future<Output = Result<Lease, kube::Error>> + Send;
    /// `namespace/name`, for logs.
    fn describe(&self) -> &str;
}

/// The real lock: a `coordination.k8s.io/v1` Lease through a `kube::Api`.
pub(crate) struct KubeLeaseLock {
    api: Api<Lease>,
    name: String,
    described: String,
}

impl KubeLeaseLock {
    pub(crate) fn new(client: kube::Client, namespace: &str, name: &str) -> Self {
        Self {
            api: Api::namespaced(client, namespace),
            name: name.to_owned(),
            described: format!("{namespace}/{name}"),
        }
    }
}

impl LeaseLock for KubeLeaseLock {
    async fn get(&self) -> Result<Option<Lease>, kube::Error> {
        self.api.get_opt(&self.name).await
    }

    async fn create(&self, lease: &Lease) -> Result<Lease, kube::Error> {
        self.api.create(&PostParams::default(), lease).await
    }

    async fn replace(&self, lease: &Lease) -> Result<Lease, kube::Error> {
        self.api
            .replace(&self.name, &PostParams::default(), lease)
            .await
    }

    fn describe(&self) -> &str {
        &self.described
    }
}
