//! [`ClusterName`] and [`ClusterRequest`]: which cluster of a fleet a
//! key belongs to (public as `opkit::multicluster::{ClusterName,
//! ClusterRequest}`). Leaf values: the controller tags what it reconciles
//! with them, and the fleet names the clusters it engages by them.

use std::fmt;
use std::sync::Arc;

use crate::request::Request;

/// The name of a cluster of a fleet, unique among the clusters its
/// [`Provider`](crate::multicluster::Provider) discovers (for the
/// kubeconfig-Secret provider, the Secret's name). Cheap to clone.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ClusterName(Arc<str>);

impl ClusterName {
    /// A cluster name.
    pub fn new(name: impl AsRef<str>) -> Self {
        Self(Arc::from(name.as_ref()))
    }

    /// The name as a string.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for ClusterName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&*self.0, f)
    }
}

impl fmt::Display for ClusterName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl From<&str> for ClusterName {
    fn from(name: &str) -> Self {
        Self::new(name)
    }
}

impl From<String> for ClusterName {
    fn from(name: String) -> Self {
        Self(Arc::from(name))
    }
}

impl AsRef<str> for ClusterName {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

/// The key of an object in one cluster of a fleet: the cluster's name and
/// the object's [`Request`] there (multicluster-runtime's
/// `mcreconcile.Request`). A multicluster reconciler still receives the
/// plain `Request`; its [`Context`](crate::reconcile::Context) names the
/// cluster ([`Context::cluster`](crate::reconcile::Context::cluster),
/// [`Context::cluster_request`](crate::reconcile::Context::cluster_request)).
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Debug)]
pub struct ClusterRequest {
    /// The cluster the object lives in.
    pub cluster: ClusterName,
    /// The object's key in that cluster.
    pub request: Request,
}

impl ClusterRequest {
    /// The request for `request` in `cluster`.
    pub fn new(cluster: impl Into<ClusterName>, request: Request) -> Self {
        Self {
            cluster: cluster.into(),
            request,
        }
    }
}

impl fmt::Display for ClusterRequest {
    /// `cluster/namespace/name`, or `cluster/name` for cluster-scoped objects.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.cluster, self.request)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_requests_display() {
        let name = ClusterName::from("east");
        assert_eq!(name.as_str(), "east");
        assert_eq!(format!("{name:?}"), "\"east\"");
        let request = ClusterRequest::new(name.clone(), Request::namespaced("shop", "web"));
        assert_eq!(request.to_string(), "east/shop/web");
        assert_eq!(
            ClusterRequest::new("west", Request::cluster("node-1")).to_string(),
            "west/node-1"
        );
        assert_eq!(ClusterName::from(String::from("east")), name);
    }
}
