//! Kubernetes manifests as YAML: rendering objects into multi-document
//! YAML (what `deploy/` holds), reading it back, and server-side applying
//! it, as `kubectl apply --server-side -f` would.
//!
//! ```
//! use k8s_openapi::api::core::v1::Namespace;
//! use opkit::manifest;
//!
//! let mut ns = Namespace::default();
//! ns.metadata.name = Some("web-operator-system".into());
//! let yaml = manifest::to_yaml(&[&ns])?;
//! assert!(yaml.starts_with("---\n"));
//!
//! let objects = manifest::parse(&yaml)?;
//! assert_eq!(objects[0].metadata.name.as_deref(), Some("web-operator-system"));
//! # Ok::<(), opkit::manifest::ManifestError>(())
//! ```
//!
//! [`apply`] sends each object as a forced server-side apply, resolving its
//! resource (and whether it is namespaced) through API discovery, so any
//! kind the apiserver serves works, CRDs included, in the order given: put
//! the Namespace and CRDs first.

use kube::api::{Api, DynamicObject, Patch, PatchParams};
use kube::core::GroupVersionKind;
use kube::discovery::Scope;
use serde::Serialize;

use crate::client::ClientError;

/// Why manifests could not be rendered, read or applied.
#[derive(Debug, thiserror::Error)]
pub enum ManifestError {
    /// An object could not be rendered as YAML.
    #[error("cannot render manifest document {index} as YAML: {message}")]
    Render {
        /// The position of the object (0-based).
        index: usize,
        /// The serializer's message.
        message: String,
    },
    /// The text is not valid YAML, or a document is not an object.
    #[error("cannot read manifests: {message}")]
    Parse {
        /// The parser's message (with the line and column).
        message: String,
    },
    /// A document lacks a field every Kubernetes object needs.
    #[error("manifest document {index} has no {field}")]
    MissingField {
        /// The position of the document (0-based, empty documents skipped).
        index: usize,
        /// `apiVersion`, `kind` or `metadata.name`.
        field: &'static str,
    },
    /// The apiserver does not serve the object's kind.
    #[error("the apiserver does not serve {api_version} {kind} ({source}); install its CRD first")]
    UnknownKind {
        /// The object's apiVersion.
        api_version: String,
        /// The object's kind.
        kind: String,
        /// The discovery error.
        #[source]
        source: Box<kube::Error>,
    },
    /// Applying an object failed.
    #[error("cannot apply {kind} {name:?}: {source}")]
    Apply {
        /// The object's kind.
        kind: String,
        /// The object's name.
        name: String,
        /// The request's error (a 403 names the missing verb and resource).
        #[source]
        source: Box<ClientError>,
    },
}

/// Renders `objects` as multi-document YAML, each document starting with
/// `---`. Fields are written as the objects serialize them (Kubernetes
/// types omit unset fields).
pub fn to_yaml<T: Serialize>(objects: &[T]) -> Result<String, ManifestError> {
    let mut out = String::new();
    for (index, object) in objects.iter().enumerate() {
        let text = serde_saphyr::to_string(object).map_err(|e| ManifestError::Render {
            index,
            message: e.to_string(),
        })?;
        out.push_str("---\n");
        out.push_str(&text);
        if !text.ends_with('\n') {
            out.push('\n');
        }
    }
    Ok(out)
}

/// Renders objects of different types into one multi-document YAML text.
///
/// ```
/// use k8s_openapi::api::core::v1::{Namespace, ServiceAccount};
/// use opkit::manifest::Documents;
///
/// let mut ns = Namespace::default();
/// ns.metadata.name = Some("shop".into());
/// let mut sa = ServiceAccount::default();
/// sa.metadata.name = Some("web".into());
/// let yaml = Documents::new().push(&ns)?.push(&sa)?.to_yaml()?;
/// assert_eq!(yaml.matches("---").count(), 2);
/// # Ok::<(), opkit::manifest::ManifestError>(())
/// ```
#[derive(Debug, Clone, Default)]
pub struct Documents {
    docs: Vec<serde_json::Value>,
}

impl Documents {
    /// No documents.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds `object` as the next document.
    pub fn push<T: Serialize>(mut self, object: &T) -> Result<Self, ManifestError> {
        let value = serde_json::to_value(object).map_err(|e| ManifestError::Render {
            index: self.docs.len(),
            message: e.to_string(),
        })?;
        self.docs.push(value);
        Ok(self)
    }

    /// The documents as multi-document YAML.
    pub fn to_yaml(&self) -> Result<String, ManifestError> {
        to_yaml(&self.docs)
    }
}

/// Reads multi-document YAML into objects, skipping empty documents.
/// Every document must have `apiVersion`, `kind` and `metadata.name`.
pub fn parse(yaml: &str) -> Result<Vec<DynamicObject>, ManifestError> {
    let values: Vec<serde_json::Value> =
        serde_saphyr::from_multiple(yaml).map_err(|e| ManifestError::Parse {
            message: e.to_string(),
        })?;
    let mut objects = Vec::new();
    for value in values {
        if value.is_null() {
            continue;
        }
        let index = objects.len();
        for (field, present) in [
            ("apiVersion", value.get("apiVersion").is_some()),
            ("kind", value.get("kind").is_some()),
            (
                "metadata.name",
                value
                    .pointer("/metadata/name")
                    .is_some_and(|n| n.is_string()),
            ),
        ] {
            if !present {
                return Err(ManifestError::MissingField { index, field });
            }
        }
        let object: DynamicObject =
            serde_json::from_value(value).map_err(|e| ManifestError::Parse {
                message: format!("document {index}: {e}"),
            })?;
        objects.push(object);
    }
    Ok(objects)
}

/// Server-side applies each object, in order, as `field_manager` (forcing
/// conflicts), and returns them as stored. A namespaced object without a
/// namespace goes to the client's default namespace.
pub async fn apply(
    client: &kube::Client,
    objects: &[DynamicObject],
    field_manager: &str,
) -> Result<Vec<DynamicObject>, ManifestError> {
    let mut applied = Vec::with_capacity(objects.len());
    for object in objects {
        let types = object.types.clone().unwrap_or_default();
        let name = object.metadata.name.clone().unwrap_or_default();
        let gvk = GroupVersionKind::try_from(&types).map_err(|e| ManifestError::Parse {
            message: format!("{} {name:?}: {e}", types.kind),
        })?;
        let (resource, capabilities) =
            kube::discovery::pinned_kind(client, &gvk)
                .await
                .map_err(|source| ManifestError::UnknownKind {
                    api_version: types.api_version.clone(),
                    kind: types.kind.clone(),
                    source: Box::new(source),
                })?;
        let api: Api<DynamicObject> = match capabilities.scope {
            Scope::Cluster => Api::all_with(client.clone(), &resource),
            Scope::Namespaced => match object.metadata.namespace.as_deref() {
                Some(ns) => Api::namespaced_with(client.clone(), ns, &resource),
                None => Api::default_namespaced_with(client.clone(), &resource),
            },
        };
        let mut body = object.clone();
        body.metadata.managed_fields = None;
        body.metadata.resource_version = None;
        let params = PatchParams::apply(field_manager).force();
        tracing::debug!(kind = %types.kind, %name, field_manager, "applying manifest");
        let stored = api
            .patch(&name, &params, &Patch::Apply(&body))
            .await
            .map_err(|e| ManifestError::Apply {
                kind: types.kind.clone(),
                name: name.clone(),
                source: Box::new(ClientError::from(e)),
            })?;
        applied.push(stored);
    }
    Ok(applied)
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ConfigMap;

    #[test]
    fn round_trips_multiple_documents() {
        let mut a = ConfigMap::default();
        a.metadata.name = Some("a".into());
        a.data = Some([("k".to_owned(), "true".to_owned())].into());
        let mut b = a.clone();
        b.metadata.name = Some("b".into());
        let yaml = to_yaml(&[&a, &b]).unwrap();
        let objects = parse(&yaml).unwrap();
        assert_eq!(objects.len(), 2);
        assert_eq!(objects[1].metadata.name.as_deref(), Some("b"));
        // A string that looks like a bool stays a string.
        assert_eq!(objects[0].data["data"]["k"], "true");
    }

    #[test]
    fn empty_documents_are_skipped_and_missing_fields_named() {
        let yaml = "---\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n";
        assert_eq!(parse(yaml).unwrap().len(), 1);
        let err = parse("apiVersion: v1\nmetadata:\n  name: x\n").unwrap_err();
        assert_eq!(err.to_string(), "manifest document 0 has no kind");
        assert!(matches!(
            parse("a: [unclosed").unwrap_err(),
            ManifestError::Parse { .. }
        ));
    }
}
