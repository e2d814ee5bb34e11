use super::body::{MAGIC, decode_error_status, decode_event, decode_list};
use super::generated::codec;
use super::*;
use crate::cache::decode::output::WatchLine;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_pb::api::core::v1 as pb_core;
use k8s_pb::apimachinery::pkg::apis::meta::v1 as pb_meta;
use prost::Message;

/// `raw` in the envelope of a `kind` (apiVersion v1).
pub(crate) fn enveloped(kind: &str, raw: Vec<u8>) -> Vec<u8> {
    let unknown = k8s_pb::apimachinery::pkg::runtime::Unknown {
        type_meta: Some(k8s_pb::apimachinery::pkg::runtime::TypeMeta {
            api_version: Some("v1".into()),
            kind: Some(kind.into()),
        }),
        raw: Some(raw),
        content_encoding: Some(String::new()),
        content_type: Some(String::new()),
    };
    let mut out = MAGIC.to_vec();
    out.extend(unknown.encode_to_vec());
    out
}

fn pb_config_map(name: &str, rv: &str) -> pb_core::ConfigMap {
    pb_core::ConfigMap {
        metadata: Some(pb_meta::ObjectMeta {
            name: Some(name.into()),
            namespace: Some("ns".into()),
            generate_name: Some(String::new()),
            uid: Some("u-1".into()),
            resource_version: Some(rv.into()),
            generation: Some(0),
            creation_timestamp: Some(pb_meta::Time {
                seconds: Some(1_700_000_000),
                nanos: None,
            }),
            labels: [("app".to_string(), "x".to_string())].into(),
            ..Default::default()
        }),
        data: [("k".to_string(), "v".to_string())].into(),
        ..Default::default()
    }
}

fn event(ty: &str, object: Vec<u8>) -> Vec<u8> {
    pb_meta::WatchEvent {
        r#type: Some(ty.into()),
        object: Some(k8s_pb::apimachinery::pkg::runtime::RawExtension { raw: Some(object) }),
    }
    .encode_to_vec()
}

fn cm_codec() -> Codec<ConfigMap> {
    codec::<ConfigMap>().expect("a ConfigMap codec")
}

#[test]
fn list_decodes_with_json_view_of_empty_fields() {
    let list = pb_core::ConfigMapList {
        metadata: Some(pb_meta::ListMeta {
            resource_version: Some("42".into()),
            r#continue: Some("next".into()),
            ..Default::default()
        }),
        items: vec![pb_config_map("a", "40"), pb_config_map("b", "41")],
    };
    let body = enveloped("ConfigMapList", list.encode_to_vec());
    let page = decode_list(&cm_codec(), &body).unwrap();
    assert_eq!(page.resource_version, "42");
    assert_eq!(page.continue_token.as_deref(), Some("next"));
    assert_eq!(page.items.len(), 2);
    let json: ConfigMap = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "a", "namespace": "ns", "uid": "u-1", "resourceVersion": "40",
                     "creationTimestamp": "2023-11-14T22:13:20Z", "labels": {"app": "x"}},
        "data": {"k": "v"}
    }))
    .unwrap();
    assert_eq!(page.items[0], json);
    assert!(page.skipped.is_empty());
}

#[test]
fn watch_frames_split_and_decode() {
    let cm = enveloped("ConfigMap", pb_config_map("a", "7").encode_to_vec());
    let mut bookmark_meta = pb_meta::ObjectMeta {
        resource_version: Some("9".into()),
        ..Default::default()
    };
    bookmark_meta
        .annotations
        .insert("k8s.io/initial-events-end".into(), "true".into());
    let bookmark = enveloped(
        "ConfigMap",
        pb_core::ConfigMap {
            metadata: Some(bookmark_meta),
            ..Default::default()
        }
        .encode_to_vec(),
    );
    let status = enveloped(
        "Status",
        pb_meta::Status {
            code: Some(410),
            reason: Some("Expired".into()),
            message: Some("too old".into()),
            ..Default::default()
        }
        .encode_to_vec(),
    );
    let mut stream = Vec::new();
    for f in [
        event("ADDED", cm.clone()),
        event("DELETED", cm),
        event("BOOKMARK", bookmark),
        event("ERROR", status),
    ] {
        stream.extend((f.len() as u32).to_be_bytes());
        stream.extend(f);
    }
    // delivered in awkward pieces
    let mut split = FrameSplitter::default();
    let mut lines = Vec::new();
    for piece in stream.chunks(5) {
        split.push(piece);
        while let Some(frame) = split.next_frame().unwrap() {
            lines.push(decode_event(&cm_codec(), &frame).unwrap());
        }
    }
    assert!(!split.has_partial());
    assert_eq!(lines.len(), 4);
    assert!(matches!(&lines[0], WatchLine::Added(cm) if cm.metadata.name.as_deref() == Some("a")));
    assert!(matches!(&lines[1], WatchLine::Deleted(_)));
    assert!(matches!(
        &lines[2],
        WatchLine::Bookmark { resource_version: Some(rv), initial_events_end: true } if rv == "9"
    ));
    assert!(matches!(&lines[3], WatchLine::Error(s) if s.is_expired()));
}

#[test]
fn error_bodies_decode_to_their_status() {
    let forbidden = enveloped(
        "Status",
        pb_meta::Status {
            code: Some(403),
            reason: Some("Forbidden".into()),
            message: Some("configmaps is forbidden".into()),
            ..Default::default()
        }
        .encode_to_vec(),
    );
    let st = decode_error_status(&forbidden).unwrap();
    assert_eq!(
        (st.code, st.reason.as_str(), st.message.as_str()),
        (403, "Forbidden", "configmaps is forbidden")
    );
    assert!(decode_error_status(b"404 page not found").is_none());
    let not_status = enveloped("ConfigMap", pb_config_map("a", "1").encode_to_vec());
    assert!(decode_error_status(&not_status).is_none());
}

#[test]
fn bad_object_is_skipped_with_its_key() {
    let mut raw = pb_config_map("bad", "8").encode_to_vec();
    // an unterminated field at the end: the object does not decode
    raw.extend([0x12, 0x7f]);
    let frame = event("MODIFIED", enveloped("ConfigMap", raw.clone()));
    match decode_event(&cm_codec(), &frame).unwrap() {
        WatchLine::Skipped { event_type, object } => {
            assert_eq!(event_type, "MODIFIED");
            assert_eq!(object.name.as_deref(), Some("bad"));
            assert_eq!(object.resource_version.as_deref(), Some("8"));
            assert!(object.error.starts_with("protobuf: "), "{}", object.error);
        }
        other => panic!("unexpected {other:?}"),
    }
    // a broken envelope is an error of the stream, not a skipped object
    assert!(decode_event(&cm_codec(), b"\x0a\x05ADDED\x12\x03\x0a\x01x").is_err());
    assert!(decode_list(&cm_codec(), b"{\"kind\":\"List\"}").is_err());
}

#[test]
fn codecs_exist_for_built_ins_only() {
    use k8s_openapi::api::{
        apps::v1::Deployment, coordination::v1::Lease, core::v1::Pod, core::v1::Secret,
    };
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    assert!(codec::<ConfigMap>().is_some());
    assert!(codec::<Secret>().is_some());
    assert!(codec::<Pod>().is_some());
    assert!(codec::<Deployment>().is_some());
    assert!(codec::<Lease>().is_some());
    assert!(codec::<CustomResourceDefinition>().is_some());
    assert!(codec::<kube::core::DynamicObject>().is_none());
    assert!(codec::<kube::core::PartialObjectMeta<ConfigMap>>().is_none());
    // not a kind (no list or watch of its own)
    assert!(codec::<k8s_openapi::api::core::v1::PodSpec>().is_none());
    assert!(generated::KINDS.len() > 80, "{}", generated::KINDS.len());
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
    let got = codec::<k8s_openapi::api::core::v1::Secret>()
        .unwrap()
        .object(&s.encode_to_vec())
        .unwrap();
    assert_eq!(got.type_.as_deref(), Some("Opaque"));
    assert_eq!(got.data.unwrap()["k"].0, vec![0, 159, 146, 150]);
    assert_eq!(got.string_data, None);
}

/// A field this version does not know (from a newer server) is skipped;
/// a field of the wrong wire type makes the object undecodable, kept with
/// its key, and the next object still decodes.
#[test]
fn unknown_fields_are_skipped_and_a_malformed_object_is_its_own_error() {
    use k8s_openapi::api::core::v1::Pod;
    let pod_codec = codec::<Pod>().expect("a Pod codec");
    let pod = |name: &str| pb_core::Pod {
        metadata: Some(pb_meta::ObjectMeta {
            name: Some(name.into()),
            namespace: Some("ns".into()),
            resource_version: Some("3".into()),
            ..Default::default()
        }),
        spec: Some(pb_core::PodSpec {
            containers: vec![pb_core::Container {
                name: Some("c".into()),
                image: Some("nginx".into()),
                ..Default::default()
            }],
            ..Default::default()
        }),
        ..Default::default()
    };
    // field 999 (varint) and field 1000 (bytes) appended to the Pod
    let mut newer = pod("newer").encode_to_vec();
    newer.extend([0xb8, 0x3e, 0x01, 0xc2, 0x3e, 0x02, b'h', b'i']);
    let decoded = pod_codec.object(&newer).unwrap();
    assert_eq!(decoded.metadata.name.as_deref(), Some("newer"));
    assert_eq!(
        decoded.spec.unwrap().containers[0].image.as_deref(),
        Some("nginx")
    );

    // the Pod's spec (field 2) sent as a varint: wrong wire type
    let mut broken = pod("broken").encode_to_vec();
    broken.extend([0x10, 0x01]);
    assert!(pod_codec.object(&broken).is_err());
    let list = pb_core::PodList {
        metadata: Some(pb_meta::ListMeta {
            resource_version: Some("9".into()),
            ..Default::default()
        }),
        items: vec![],
    };
    let mut raw = list.encode_to_vec();
    for item in [broken, pod("fine").encode_to_vec()] {
        raw.push(0x12);
        let mut len = item.len();
        while len >= 0x80 {
            raw.push((len as u8) | 0x80);
            len >>= 7;
        }
        raw.push(len as u8);
        raw.extend(item);
    }
    let page = decode_list(&pod_codec, &enveloped("PodList", raw)).unwrap();
    assert_eq!(page.resource_version, "9");
    assert_eq!(page.items.len(), 1);
    assert_eq!(page.items[0].metadata.name.as_deref(), Some("fine"));
    assert_eq!(page.skipped.len(), 1);
    assert_eq!(page.skipped[0].name.as_deref(), Some("broken"));
    assert_eq!(page.skipped[0].metadata.namespace.as_deref(), Some("ns"));
}

/// What JSON shows, the protobuf decode shows: zero values of fields Go
/// leaves out (`omitempty`) are absent, zero values behind a pointer are
/// set, structs JSON always writes are there even when empty, and the
/// special types read as JSON reads them.
#[test]
fn zero_values_follow_json() {
    use k8s_openapi::api::{apps::v1::Deployment, core::v1::Pod};
    use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
    let pod = pb_core::Pod {
        metadata: Some(pb_meta::ObjectMeta {
            name: Some("p".into()),
            generate_name: Some(String::new()),
            generation: Some(0),
            ..Default::default()
        }),
        spec: Some(pb_core::PodSpec {
            // a pointer: false and 0 are set
            automount_service_account_token: Some(false),
            termination_grace_period_seconds: Some(0),
            // omitempty, not a pointer: "" is left out
            service_account_name: Some(String::new()),
            host_network: Some(false),
            ..Default::default()
        }),
        ..Default::default()
    };
    let got = codec::<Pod>()
        .unwrap()
        .object(&pod.encode_to_vec())
        .unwrap();
    assert_eq!(got.metadata.generate_name, None);
    assert_eq!(got.metadata.generation, None);
    let spec = got.spec.expect("spec");
    assert_eq!(spec.automount_service_account_token, Some(false));
    assert_eq!(spec.termination_grace_period_seconds, Some(0));
    assert_eq!(spec.service_account_name, None);
    assert_eq!(spec.host_network, None);
    assert_eq!(spec.containers, Vec::new());
    // `status` is a struct JSON always writes: present though not sent
    assert!(got.status.is_some());

    let d = k8s_pb::api::apps::v1::Deployment {
        spec: Some(k8s_pb::api::apps::v1::DeploymentSpec {
            strategy: Some(k8s_pb::api::apps::v1::DeploymentStrategy {
                r#type: Some("RollingUpdate".into()),
                rolling_update: Some(k8s_pb::api::apps::v1::RollingUpdateDeployment {
                    max_surge: Some(k8s_pb::apimachinery::pkg::util::intstr::IntOrString {
                        r#type: Some(1),
                        int_val: Some(0),
                        str_val: Some("25%".into()),
                    }),
                    max_unavailable: Some(k8s_pb::apimachinery::pkg::util::intstr::IntOrString {
                        r#type: Some(0),
                        int_val: Some(1),
                        str_val: Some(String::new()),
                    }),
                }),
            }),
            ..Default::default()
        }),
        ..Default::default()
    };
    let got = codec::<Deployment>()
        .unwrap()
        .object(&d.encode_to_vec())
        .unwrap();
    let rolling = got.spec.unwrap().strategy.unwrap().rolling_update.unwrap();
    assert_eq!(rolling.max_surge, Some(IntOrString::String("25%".into())));
    assert_eq!(rolling.max_unavailable, Some(IntOrString::Int(1)));
}
