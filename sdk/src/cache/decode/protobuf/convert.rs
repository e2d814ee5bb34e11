//! Conversions from the `k8s-pb` messages into the `k8s-openapi` types, and
//! the table of kinds that have one ([`codec`]).
//!
//! Values are moved, not copied (maps and strings). Absent and empty values
//! become `None` exactly as the JSON decoder sees them: the API server
//! omits empty fields in JSON but writes them in protobuf. The tests below
//! and the envtest suite (`cache_protobuf`) check each conversion against
//! the JSON decode of the same object.
//!
//! Only `ConfigMap` and `Secret` are converted: every other kind is read as
//! JSON. BENCHMARKS.md ("Protobuf beyond ConfigMap and Secret") has the
//! figures behind that choice.

use std::{
    any::{Any, TypeId},
    collections::BTreeMap,
};

use k8s_openapi::{
    ByteString,
    api::core::v1::{ConfigMap, Secret},
    apimachinery::pkg::apis::meta::v1 as meta,
};
use k8s_pb::{api::core::v1 as pb_core, apimachinery::pkg::apis::meta::v1 as pb_meta};
use prost::Message;

use super::{
    codec::{Codec, Decode},
    error::ProtobufError,
};

/// The protobuf codec of `K`, when opkit has one.
pub(crate) fn codec<K: 'static>() -> Option<Codec<K>> {
    let t = TypeId::of::<K>();
    if t == TypeId::of::<ConfigMap>() {
        (&Codec::<ConfigMap>::new(config_map) as &dyn Any)
            .downcast_ref::<Codec<K>>()
            .copied()
    } else if t == TypeId::of::<Secret>() {
        (&Codec::<Secret>::new(secret) as &dyn Any)
            .downcast_ref::<Codec<K>>()
            .copied()
    } else {
        None
    }
}

pub(super) fn non_empty(s: Option<String>) -> Option<String> {
    s.filter(|s| !s.is_empty())
}

pub(super) fn non_empty_map<V>(m: BTreeMap<String, V>) -> Option<BTreeMap<String, V>> {
    (!m.is_empty()).then_some(m)
}

fn non_empty_vec<T>(v: Vec<T>) -> Option<Vec<T>> {
    (!v.is_empty()).then_some(v)
}

fn bytes_map(m: BTreeMap<String, Vec<u8>>) -> Option<BTreeMap<String, ByteString>> {
    (!m.is_empty()).then(|| m.into_iter().map(|(k, v)| (k, ByteString(v))).collect())
}

/// `metav1.Time`: an empty message is the zero time, which JSON shows as
/// `null`.
fn time(t: Option<pb_meta::Time>) -> Option<meta::Time> {
    let t = t?;
    if t.seconds.is_none() && t.nanos.is_none() {
        return None;
    }
    k8s_openapi::jiff::Timestamp::new(t.seconds.unwrap_or_default(), t.nanos.unwrap_or_default())
        .ok()
        .map(meta::Time)
}

fn owner_reference(o: pb_meta::OwnerReference) -> meta::OwnerReference {
    meta::OwnerReference {
        api_version: o.api_version.unwrap_or_default(),
        kind: o.kind.unwrap_or_default(),
        name: o.name.unwrap_or_default(),
        uid: o.uid.unwrap_or_default(),
        controller: o.controller,
        block_owner_deletion: o.block_owner_deletion,
    }
}

fn managed_fields_entry(
    e: pb_meta::ManagedFieldsEntry,
) -> Result<meta::ManagedFieldsEntry, ProtobufError> {
    let fields_v1 = match e.fields_v1.and_then(|f| f.raw) {
        Some(raw) if !raw.is_empty() => Some(meta::FieldsV1(
            serde_json::from_slice(&raw)
                .map_err(|e| ProtobufError(format!("managedFields fieldsV1: {e}")))?,
        )),
        _ => None,
    };
    Ok(meta::ManagedFieldsEntry {
        api_version: non_empty(e.api_version),
        fields_type: non_empty(e.fields_type),
        fields_v1,
        manager: non_empty(e.manager),
        operation: non_empty(e.operation),
        subresource: non_empty(e.subresource),
        time: time(e.time),
    })
}

pub(crate) fn object_meta(
    m: pb_meta::ObjectMeta,
    opts: Decode,
) -> Result<meta::ObjectMeta, ProtobufError> {
    let managed_fields = if opts.managed_fields {
        m.managed_fields
            .into_iter()
            .map(managed_fields_entry)
            .collect::<Result<Vec<_>, _>>()?
    } else {
        Vec::new()
    };
    Ok(meta::ObjectMeta {
        annotations: non_empty_map(m.annotations),
        creation_timestamp: time(m.creation_timestamp),
        deletion_grace_period_seconds: m.deletion_grace_period_seconds,
        deletion_timestamp: time(m.deletion_timestamp),
        finalizers: non_empty_vec(m.finalizers),
        generate_name: non_empty(m.generate_name),
        generation: m.generation.filter(|g| *g != 0),
        labels: non_empty_map(m.labels),
        managed_fields: non_empty_vec(managed_fields),
        name: non_empty(m.name),
        namespace: non_empty(m.namespace),
        owner_references: non_empty_vec(
            m.owner_references
                .into_iter()
                .map(owner_reference)
                .collect(),
        ),
        resource_version: non_empty(m.resource_version),
        self_link: non_empty(m.self_link),
        uid: non_empty(m.uid),
    })
}

fn config_map(raw: &[u8], opts: Decode) -> Result<ConfigMap, ProtobufError> {
    let c = pb_core::ConfigMap::decode(raw)?;
    Ok(ConfigMap {
        metadata: object_meta(c.metadata.unwrap_or_default(), opts)?,
        binary_data: bytes_map(c.binary_data),
        data: non_empty_map(c.data),
        immutable: c.immutable,
    })
}

fn secret(raw: &[u8], opts: Decode) -> Result<Secret, ProtobufError> {
    let s = pb_core::Secret::decode(raw)?;
    Ok(Secret {
        metadata: object_meta(s.metadata.unwrap_or_default(), opts)?,
        data: bytes_map(s.data),
        immutable: s.immutable,
        string_data: non_empty_map(s.string_data),
        type_: non_empty(s.r#type),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codecs_exist_for_built_ins_only() {
        assert!(codec::<ConfigMap>().is_some());
        assert!(codec::<Secret>().is_some());
        assert!(codec::<kube::core::DynamicObject>().is_none());
        assert!(codec::<kube::core::PartialObjectMeta<ConfigMap>>().is_none());
    }

    #[test]
    fn secret_bytes_and_type() {
        let s = pb_core::Secret {
            metadata: Some(pb_meta::ObjectMeta {
                name: Some("s".into()),
                ..Default::default()
            }),
            data: [("k".to_string(), vec![0, 159, 146, 150])].into(),
            r#type: Some("Opaque".into()),
            ..Default::default()
        };
        let got = secret(&s.encode_to_vec(), Decode::default()).unwrap();
        assert_eq!(got.type_.as_deref(), Some("Opaque"));
        assert_eq!(got.data.unwrap()["k"].0, vec![0, 159, 146, 150]);
        assert_eq!(got.string_data, None);
    }
}
