//! [`Request`]: the key of the object to reconcile (public as
//! `opkit::reconcile::Request`).

use std::fmt;

use kube::Resource;

/// The key of the object to reconcile.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Debug)]
pub struct Request {
    /// The namespace; `None` for cluster-scoped objects.
    pub namespace: Option<String>,
    /// The object's name.
    pub name: String,
}

impl Request {
    /// A request for a namespaced object.
    pub fn namespaced(namespace: impl Into<String>, name: impl Into<String>) -> Self {
        Self {
            namespace: Some(namespace.into()),
            name: name.into(),
        }
    }

    /// A request for a cluster-scoped object.
    pub fn cluster(name: impl Into<String>) -> Self {
        Self {
            namespace: None,
            name: name.into(),
        }
    }

    /// The request for `obj`, or `None` if it has no name.
    pub fn for_object<K: Resource>(obj: &K) -> Option<Self> {
        let meta = obj.meta();
        Some(Self {
            namespace: meta.namespace.clone(),
            name: meta.name.clone()?,
        })
    }
}

impl fmt::Display for Request {
    /// `namespace/name`, or `name` for cluster-scoped objects.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.namespace {
            Some(ns) => write!(f, "{ns}/{}", self.name),
            None => f.write_str(&self.name),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_display_and_for_object() {
        assert_eq!(Request::namespaced("prod", "web").to_string(), "prod/web");
        assert_eq!(Request::cluster("node-1").to_string(), "node-1");
        let mut cm = k8s_openapi::api::core::v1::ConfigMap::default();
        assert_eq!(Request::for_object(&cm), None);
        cm.metadata.name = Some("a".into());
        cm.metadata.namespace = Some("ns".into());
        assert_eq!(
            Request::for_object(&cm),
            Some(Request::namespaced("ns", "a"))
        );
    }
}
