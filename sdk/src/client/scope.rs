//! [`ResourceScope`]: an `Api` for a kind in a namespace, whatever its scope.
//!
//! ```
//! use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
//! use kube::{Api, Resource};
//! use opkit::client::ResourceScope;
//!
//! # async fn example(client: kube::Client) {
//! // One way to say where, for every kind: `Some(namespace)` or `None`.
//! let in_shop: Api<ConfigMap> = <ConfigMap as Resource>::Scope::api(client.clone(), Some("shop"));
//! let namespaces: Api<Namespace> = <Namespace as Resource>::Scope::api(client, None);
//! # let _ = (in_shop, namespaces);
//! # }
//! ```

use k8s_openapi::{ClusterResourceScope, NamespaceResourceScope};
use kube::{Api, Client, Resource};

/// The scope of a kind (`kube::Resource::Scope`), and how to build an
/// `Api` for it from an optional namespace: what lets
/// [`Context::api`](crate::reconcile::Context::api) take the namespace the
/// same way for namespaced and cluster-scoped kinds.
pub trait ResourceScope: Sized {
    /// An `Api` for kind `K`: in `namespace` if the kind is namespaced and
    /// one is given, else across the cluster (every namespace). A namespace
    /// given for a cluster-scoped kind is ignored.
    fn api<K>(client: Client, namespace: Option<&str>) -> Api<K>
    where
        K: Resource<DynamicType = (), Scope = Self>;
}

impl ResourceScope for NamespaceResourceScope {
    fn api<K>(client: Client, namespace: Option<&str>) -> Api<K>
    where
        K: Resource<DynamicType = (), Scope = Self>,
    {
        match namespace {
            Some(namespace) => Api::namespaced(client, namespace),
            None => Api::all(client),
        }
    }
}

impl ResourceScope for ClusterResourceScope {
    fn api<K>(client: Client, _namespace: Option<&str>) -> Api<K>
    where
        K: Resource<DynamicType = (), Scope = Self>,
    {
        Api::all(client)
    }
}
