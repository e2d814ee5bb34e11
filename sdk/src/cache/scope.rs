//! Which objects of a kind an informer watches ([`Scope`]), and the key
//! the shared cache finds an informer by.

use std::{any::TypeId, fmt};

use kube::Resource;

/// Which objects of a kind an informer watches: a namespace (or all), a label
/// selector, a field selector. The shared cache keeps one informer per
/// (GVK, Rust type, namespace, label selector, field selector).
pub struct Scope<K: Resource> {
    pub(super) dyntype: K::DynamicType,
    pub(super) namespace: Option<String>,
    pub(super) labels: Option<String>,
    pub(super) fields: Option<String>,
}

impl<K: Resource> fmt::Debug for Scope<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Scope")
            .field("namespace", &self.namespace)
            .field("labels", &self.labels)
            .field("fields", &self.fields)
            .finish()
    }
}

impl<K: Resource> Scope<K>
where
    K::DynamicType: Default,
{
    /// All objects of `K` in all namespaces.
    pub fn all() -> Self {
        Self::with_dyntype(Default::default())
    }
}

impl<K: Resource> Scope<K> {
    /// All objects of a dynamic kind (`DynamicObject` with its `ApiResource`).
    pub fn with_dyntype(dyntype: K::DynamicType) -> Self {
        Self {
            dyntype,
            namespace: None,
            labels: None,
            fields: None,
        }
    }

    /// Only this namespace.
    pub fn namespace(mut self, namespace: impl Into<String>) -> Self {
        self.namespace = Some(namespace.into()).filter(|s: &String| !s.is_empty());
        self
    }

    /// Only objects matching this label selector.
    pub fn labels(mut self, selector: impl Into<String>) -> Self {
        self.labels = Some(selector.into()).filter(|s: &String| !s.is_empty());
        self
    }

    /// Only objects matching this field selector.
    pub fn fields(mut self, selector: impl Into<String>) -> Self {
        self.fields = Some(selector.into()).filter(|s: &String| !s.is_empty());
        self
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(super) struct InformerKey {
    type_id: TypeId,
    api_version: String,
    kind: String,
    namespace: Option<String>,
    labels: Option<String>,
    fields: Option<String>,
}

impl InformerKey {
    pub(super) fn of<K: Resource + 'static>(scope: &Scope<K>) -> Self {
        Self {
            type_id: TypeId::of::<K>(),
            api_version: K::api_version(&scope.dyntype).into_owned(),
            kind: K::kind(&scope.dyntype).into_owned(),
            namespace: scope.namespace.clone(),
            labels: scope.labels.clone(),
            fields: scope.fields.clone(),
        }
    }

    /// `apps/v1/Deployment (namespace prod)`, for errors.
    pub(super) fn describe(&self) -> String {
        match &self.namespace {
            Some(ns) => format!("{}/{} (namespace {ns})", self.api_version, self.kind),
            None => format!("{}/{}", self.api_version, self.kind),
        }
    }
}

/// True when objects of `K` live in namespaces.
pub(crate) fn is_namespaced<K: Resource>() -> bool
where
    K::Scope: 'static,
{
    TypeId::of::<K::Scope>() != TypeId::of::<k8s_openapi::ClusterResourceScope>()
}
