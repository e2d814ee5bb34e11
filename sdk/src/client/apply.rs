//! Server-side apply of whole objects and of their status, and merge
//! patches of status.

use std::fmt::Debug;

use kube::api::{Api, Patch, PatchParams};
use kube::{Resource, ResourceExt};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value, json};

use super::error::{ClientError, Target};

/// The object's name, or a clear error.
pub(crate) fn name_of<K>(obj: &K) -> Result<String, ClientError>
where
    K: Resource<DynamicType = ()>,
{
    obj.meta()
        .name
        .clone()
        .ok_or_else(|| ClientError::MissingName {
            kind: K::kind(&()).into_owned(),
        })
}

fn to_value<K>(obj: &K, name: &str) -> Result<Value, ClientError>
where
    K: Resource<DynamicType = ()> + Serialize,
{
    serde_json::to_value(obj).map_err(|source| ClientError::Serialize {
        kind: K::kind(&()).into_owned(),
        name: name.to_owned(),
        source,
    })
}

/// The body of an apply request: the object with `apiVersion` and `kind`
/// set, and without the fields an apply configuration must not carry
/// (`managedFields`) or should not (`resourceVersion`, which would turn the
/// apply into a conditional write).
fn apply_body<K>(obj: &K, name: &str) -> Result<Value, ClientError>
where
    K: Resource<DynamicType = ()> + Serialize,
{
    let mut body = to_value(obj, name)?;
    if let Value::Object(map) = &mut body {
        map.insert(
            "apiVersion".into(),
            Value::String(K::api_version(&()).into_owned()),
        );
        map.insert("kind".into(), Value::String(K::kind(&()).into_owned()));
        if let Some(Value::Object(meta)) = map.get_mut("metadata") {
            meta.remove("managedFields");
            meta.remove("resourceVersion");
        }
    }
    Ok(body)
}

/// Server-side applies `obj` as `field_manager`, forcing conflicts (the
/// controller takes ownership of the fields it sets, as controller-runtime's
/// `client.Apply` with `ForceOwnership`). Creates the object if it does not
/// exist; returns the object as stored.
///
/// Send only the fields this controller manages: every field in `obj` is
/// owned by `field_manager` afterwards, and fields it owned before but
/// omits now are removed. `managedFields` and `resourceVersion` are cleared
/// from the body; `apiVersion` and `kind` are filled in.
pub async fn apply<K>(api: &Api<K>, obj: &K, field_manager: &str) -> Result<K, ClientError>
where
    K: Resource<DynamicType = ()> + Serialize + DeserializeOwned + Clone + Debug,
{
    let name = name_of(obj)?;
    let body = apply_body(obj, &name)?;
    let target = Target::of::<K>("patch", obj.namespace(), &name);
    let params = PatchParams::apply(field_manager).force();
    tracing::debug!(kind = %K::kind(&()), namespace = ?obj.namespace(), %name, field_manager, "server-side apply");
    api.patch(&name, &params, &Patch::Apply(&body))
        .await
        .map_err(|e| ClientError::from_kube(e, &target))
}

/// Server-side applies the `status` of `obj` on the status subresource as
/// `field_manager`, forcing conflicts. Only `apiVersion`, `kind`, the name
/// and namespace, and `status` are sent; the spec is left alone.
pub async fn apply_status<K>(api: &Api<K>, obj: &K, field_manager: &str) -> Result<K, ClientError>
where
    K: Resource<DynamicType = ()> + Serialize + DeserializeOwned + Clone + Debug,
{
    let name = name_of(obj)?;
    let full = to_value(obj, &name)?;
    let mut metadata = Map::new();
    metadata.insert("name".into(), Value::String(name.clone()));
    if let Some(ns) = obj.namespace() {
        metadata.insert("namespace".into(), Value::String(ns));
    }
    let mut body = Map::new();
    body.insert(
        "apiVersion".into(),
        Value::String(K::api_version(&()).into_owned()),
    );
    body.insert("kind".into(), Value::String(K::kind(&()).into_owned()));
    body.insert("metadata".into(), Value::Object(metadata));
    if let Some(status) = full.get("status").filter(|s| !s.is_null()) {
        body.insert("status".into(), status.clone());
    }
    let target = Target::of::<K>("patch", obj.namespace(), &name).subresource("status");
    let params = PatchParams::apply(field_manager).force();
    tracing::debug!(kind = %K::kind(&()), namespace = ?obj.namespace(), %name, field_manager, "server-side apply of status");
    api.patch_status(&name, &params, &Patch::Apply(&Value::Object(body)))
        .await
        .map_err(|e| ClientError::from_kube(e, &target))
}

/// Merge-patches the status subresource of the object `name` with
/// `{"status": status}`: the spec and metadata cannot change, and status
/// fields not in `status` are kept. `null` fields in `status` delete.
pub async fn patch_status<K, S>(api: &Api<K>, name: &str, status: &S) -> Result<K, ClientError>
where
    K: Resource<DynamicType = ()> + Serialize + DeserializeOwned + Clone + Debug,
    S: Serialize,
{
    let status = serde_json::to_value(status).map_err(|source| ClientError::Serialize {
        kind: K::kind(&()).into_owned(),
        name: name.to_owned(),
        source,
    })?;
    let target = Target::of::<K>("patch", None, name).subresource("status");
    tracing::debug!(kind = %K::kind(&()), %name, "merge-patching status");
    api.patch_status(
        name,
        &PatchParams::default(),
        &Patch::Merge(&json!({ "status": status })),
    )
    .await
    .map_err(|e| ClientError::from_kube(e, &target))
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::api::ObjectMeta;

    #[test]
    fn apply_body_strips_managed_fields_and_resource_version_and_sets_type() {
        let cm = ConfigMap {
            metadata: ObjectMeta {
                name: Some("c".into()),
                namespace: Some("ns".into()),
                resource_version: Some("42".into()),
                managed_fields: Some(vec![Default::default()]),
                ..ObjectMeta::default()
            },
            ..ConfigMap::default()
        };
        let body = apply_body(&cm, "c").unwrap();
        assert_eq!(body["apiVersion"], "v1");
        assert_eq!(body["kind"], "ConfigMap");
        assert_eq!(body["metadata"]["name"], "c");
        assert!(body["metadata"].get("resourceVersion").is_none());
        assert!(body["metadata"].get("managedFields").is_none());
    }

    #[test]
    fn a_nameless_object_is_a_clear_error() {
        let err = name_of(&ConfigMap::default()).unwrap_err();
        assert_eq!(err.to_string(), "the ConfigMap has no metadata.name");
    }
}
