//! [`ObjectKey`]: the cache key of an object, `namespace/name` (or `name` for
//! cluster-scoped objects), as client-go's `MetaNamespaceKeyFunc`.
//!
//! ```no_run
//! // Keys are the cache's own; reads name the same two parts, and a
//! // tombstone carries the key of what was deleted.
//! use k8s_openapi::api::core::v1::ConfigMap;
//! use opkit::cache::{DeletedFinalStateUnknown, Store};
//!
//! fn describe(store: &Store<ConfigMap>, gone: &DeletedFinalStateUnknown<ConfigMap>) {
//!     let web = store.get(Some("default"), "web"); // the key "default/web"
//!     println!("{:?}", web.map(|cm| cm.metadata.uid.clone()));
//!     println!("{} in {:?}", gone.key.name(), gone.key.namespace());
//! }
//! ```
//!
//! The key is one shared allocation (`Arc<str>`): the store's map, its indexes
//! and the DeltaFIFO's queue all hold clones of the same string.

use std::{borrow::Borrow, fmt, sync::Arc};

use kube::Resource;

/// The key of an object in the cache: `namespace/name`, or `name` when the
/// object is cluster-scoped. Cloning is a reference-count increment.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ObjectKey(Arc<str>);

impl ObjectKey {
    /// The key of the object `name` in `namespace` (`None` for cluster-scoped).
    pub fn new(namespace: Option<&str>, name: &str) -> Self {
        match namespace {
            Some(ns) if !ns.is_empty() => {
                let mut s = String::with_capacity(ns.len() + 1 + name.len());
                s.push_str(ns);
                s.push('/');
                s.push_str(name);
                Self(Arc::from(s))
            }
            _ => Self(Arc::from(name)),
        }
    }

    /// The key of `obj`, from its `metadata.namespace` and `metadata.name`.
    ///
    /// Fails when the object has no name (objects from the API server always
    /// have one).
    pub fn of<K: Resource>(obj: &K) -> Result<Self, KeyError> {
        let meta = obj.meta();
        match meta.name.as_deref() {
            Some(name) if !name.is_empty() => Ok(Self::new(meta.namespace.as_deref(), name)),
            _ => Err(KeyError::MissingName {
                namespace: meta.namespace.clone(),
            }),
        }
    }

    /// The key as a string slice (`namespace/name` or `name`).
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The namespace part, `None` for a cluster-scoped key.
    pub fn namespace(&self) -> Option<&str> {
        self.0.split_once('/').map(|(ns, _)| ns)
    }

    /// The name part.
    pub fn name(&self) -> &str {
        match self.0.split_once('/') {
            Some((_, name)) => name,
            None => &self.0,
        }
    }
}

impl Borrow<str> for ObjectKey {
    fn borrow(&self) -> &str {
        &self.0
    }
}

impl AsRef<str> for ObjectKey {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl From<&str> for ObjectKey {
    fn from(s: &str) -> Self {
        Self(Arc::from(s))
    }
}

impl From<String> for ObjectKey {
    fn from(s: String) -> Self {
        Self(Arc::from(s))
    }
}

impl fmt::Display for ObjectKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for ObjectKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&*self.0, f)
    }
}

/// An object could not be given a cache key.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeyError {
    /// The object has no `metadata.name`.
    #[error("object has no metadata.name (namespace {namespace:?})")]
    MissingName {
        /// The object's namespace, if it had one.
        namespace: Option<String>,
    },
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::api::ObjectMeta;

    #[test]
    fn key_of_namespaced_and_cluster_objects() {
        let cm = ConfigMap {
            metadata: ObjectMeta {
                name: Some("a".into()),
                namespace: Some("ns".into()),
                ..Default::default()
            },
            ..Default::default()
        };
        let key = ObjectKey::of(&cm).unwrap();
        assert_eq!(key.as_str(), "ns/a");
        assert_eq!(key.namespace(), Some("ns"));
        assert_eq!(key.name(), "a");

        let cluster = ConfigMap {
            metadata: ObjectMeta {
                name: Some("b".into()),
                ..Default::default()
            },
            ..Default::default()
        };
        assert_eq!(ObjectKey::of(&cluster).unwrap().as_str(), "b");
        assert!(ObjectKey::of(&ConfigMap::default()).is_err());
    }

    #[test]
    fn borrow_lookup_matches() {
        let mut m = std::collections::HashMap::new();
        m.insert(ObjectKey::new(Some("x"), "y"), 1);
        assert_eq!(m.get("x/y"), Some(&1));
    }
}
