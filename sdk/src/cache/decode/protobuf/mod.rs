//! Kubernetes protobuf (`application/vnd.kubernetes.protobuf`) for the
//! built-in kinds opkit decodes from it, as client-go's typed clients and
//! controller-runtime do by default: smaller responses, and an API server
//! that encodes them with far less CPU than JSON.
//!
//! Which kinds: those with a conversion in [`convert`] (see [`codec`]).
//! Every other type, custom resources included, is requested as JSON. A
//! request for protobuf also accepts JSON, and the response's
//! `Content-Type` decides the decoder, so a server that answers JSON anyway
//! is read as before.
//!
//! Wire format (apimachinery's protobuf serializer):
//! - an object or list body is the magic `k8s\0` followed by a
//!   `runtime.Unknown` message whose `raw` field holds the encoded object;
//! - a watch stream is a sequence of frames ([`frames`]), each a 4-byte
//!   big-endian length and a `metav1.WatchEvent` message (no magic); the
//!   event's object is a `RawExtension` whose `raw` is an enveloped object
//!   as above.
//!
//! The envelopes, lists and events are walked field by field without
//! copying ([`fields`]); each object is decoded with the `k8s-pb` bindings
//! (prost) and moved into its `k8s-openapi` type ([`convert`]).

use k8s_pb::apimachinery::pkg::apis::meta::v1 as pb_meta;
use prost::Message;

use super::{ListPage, SkippedObject, WatchLine};
use crate::cache::error::ApiStatus;

mod convert;
mod fields;
mod frames;

pub(crate) use convert::codec;
use convert::{non_empty, non_empty_map};
use fields::field;
pub(crate) use frames::FrameSplitter;

/// The protobuf media type.
pub(crate) const MEDIA_TYPE: &str = "application/vnd.kubernetes.protobuf";
/// `Accept` for a kind with a protobuf codec: protobuf, else JSON.
pub(crate) const ACCEPT: &str = "application/vnd.kubernetes.protobuf, application/json";
const MAGIC: &[u8; 4] = b"k8s\0";

/// A protobuf body that could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub(crate) struct ProtobufError(String);

impl ProtobufError {
    pub(crate) fn new(what: &str) -> Self {
        Self(what.to_string())
    }
}

impl From<prost::DecodeError> for ProtobufError {
    fn from(e: prost::DecodeError) -> Self {
        Self(e.to_string())
    }
}

/// How one kind is decoded from protobuf: the object message (without
/// envelope) into `K`.
pub(crate) struct Codec<K> {
    object: fn(&[u8], Decode) -> Result<K, ProtobufError>,
    options: Decode,
}

/// Decoding options.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Decode {
    /// Convert `metadata.managedFields` (false: leave them out, for
    /// informers that strip them anyway; saves parsing their JSON).
    pub(crate) managed_fields: bool,
}

impl Default for Decode {
    fn default() -> Self {
        Self {
            managed_fields: true,
        }
    }
}

impl<K> Clone for Codec<K> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<K> Copy for Codec<K> {}

impl<K> Codec<K> {
    /// The codec decoding an object message with `object`.
    pub(crate) fn new(object: fn(&[u8], Decode) -> Result<K, ProtobufError>) -> Self {
        Self {
            object,
            options: Decode::default(),
        }
    }

    /// Leaves `metadata.managedFields` out of decoded objects.
    pub(crate) fn without_managed_fields(mut self) -> Self {
        self.options.managed_fields = false;
        self
    }

    /// Decodes one object message (no envelope).
    pub(crate) fn object(&self, raw: &[u8]) -> Result<K, ProtobufError> {
        (self.object)(raw, self.options)
    }

    /// Decodes one object message (no envelope) with `options`.
    pub(crate) fn object_with(&self, raw: &[u8], options: Decode) -> Result<K, ProtobufError> {
        (self.object)(raw, options)
    }
}

impl<K> std::fmt::Debug for Codec<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("protobuf::Codec")
    }
}

/// The parts of a `runtime.Unknown` envelope opkit reads.
struct Envelope<'a> {
    kind: Option<String>,
    raw: &'a [u8],
}

/// Strips the magic and reads the `runtime.Unknown` around an object.
fn envelope(body: &[u8]) -> Result<Envelope<'_>, ProtobufError> {
    let mut buf = body
        .strip_prefix(MAGIC)
        .ok_or_else(|| ProtobufError::new("missing the k8s protobuf magic prefix"))?;
    let mut kind = None;
    let mut raw: &[u8] = &[];
    while !buf.is_empty() {
        match field(&mut buf)? {
            // runtime.TypeMeta (apiVersion = 1, kind = 2)
            (1, Some(type_meta)) => {
                kind = k8s_pb::apimachinery::pkg::runtime::TypeMeta::decode(type_meta)
                    .ok()
                    .and_then(|t| t.kind);
            }
            (2, Some(bytes)) => raw = bytes,
            (3, Some(encoding)) if !encoding.is_empty() => {
                return Err(ProtobufError(format!(
                    "unsupported content encoding {:?}",
                    String::from_utf8_lossy(encoding)
                )));
            }
            _ => {}
        }
    }
    Ok(Envelope { kind, raw })
}

/// Decodes a LIST response body (`<Kind>List` in an envelope): items one by
/// one; an item that does not decode is skipped with its metadata.
pub(crate) fn decode_list<K>(codec: &Codec<K>, body: &[u8]) -> Result<ListPage<K>, ProtobufError> {
    let env = envelope(body)?;
    let mut buf = env.raw;
    let mut page = ListPage {
        items: Vec::new(),
        resource_version: String::new(),
        continue_token: None,
        skipped: Vec::new(),
    };
    while !buf.is_empty() {
        match field(&mut buf)? {
            (1, Some(list_meta)) => {
                let m = pb_meta::ListMeta::decode(list_meta)?;
                page.resource_version = m.resource_version.unwrap_or_default();
                page.continue_token = m.r#continue.filter(|c| !c.is_empty());
            }
            (2, Some(item)) => match codec.object(item) {
                Ok(obj) => page.items.push(obj),
                Err(e) => page.skipped.push(skipped(item, e)),
            },
            _ => {}
        }
    }
    Ok(page)
}

/// The `ObjectMeta` of an object, read on its own: every built-in kind has
/// it as field 1. Reads up to the first broken field, so the key of an
/// object that does not decode is still found.
fn metadata_only(object: &[u8]) -> Option<pb_meta::ObjectMeta> {
    let mut buf = object;
    while !buf.is_empty() {
        match field(&mut buf) {
            Ok((1, Some(meta))) => return pb_meta::ObjectMeta::decode(meta).ok(),
            Ok(_) => {}
            Err(_) => return None,
        }
    }
    None
}

fn skipped(object: &[u8], error: ProtobufError) -> SkippedObject {
    let m = metadata_only(object).unwrap_or_default();
    let metadata = convert::object_meta(
        m.clone(),
        Decode {
            managed_fields: false,
        },
    )
    .unwrap_or_default();
    SkippedObject {
        namespace: non_empty(m.namespace),
        name: non_empty(m.name),
        resource_version: non_empty(m.resource_version),
        error: format!("protobuf: {error}"),
        metadata: Box::new(metadata),
    }
}

/// Decodes one watch frame (a `metav1.WatchEvent`, without length prefix).
pub(crate) fn decode_event<K>(
    codec: &Codec<K>,
    frame: &[u8],
) -> Result<WatchLine<K>, ProtobufError> {
    let mut buf = frame;
    let mut event_type: Option<&[u8]> = None;
    let mut raw: &[u8] = &[];
    while !buf.is_empty() {
        match field(&mut buf)? {
            (1, Some(t)) => event_type = Some(t),
            (2, Some(mut ext)) => {
                // RawExtension { raw = 1 }
                while !ext.is_empty() {
                    if let (1, Some(bytes)) = field(&mut ext)? {
                        raw = bytes;
                    }
                }
            }
            _ => {}
        }
    }
    let event_type = event_type.ok_or_else(|| ProtobufError::new("watch event without a type"))?;
    let env = envelope(raw)?;
    match event_type {
        b"ADDED" | b"MODIFIED" | b"DELETED" => {
            let obj = match codec.object(env.raw) {
                Ok(obj) => obj,
                Err(e) => {
                    return Ok(WatchLine::Skipped {
                        event_type: String::from_utf8_lossy(event_type).into_owned(),
                        object: skipped(env.raw, e),
                    });
                }
            };
            Ok(match event_type {
                b"ADDED" => WatchLine::Added(obj),
                b"MODIFIED" => WatchLine::Modified(obj),
                _ => WatchLine::Deleted(obj),
            })
        }
        b"BOOKMARK" => {
            let m = metadata_only(env.raw).unwrap_or_default();
            Ok(WatchLine::bookmark(
                non_empty(m.resource_version),
                non_empty_map(m.annotations).as_ref(),
            ))
        }
        b"ERROR" => Ok(WatchLine::Error(api_status(env.raw)?)),
        other => Err(ProtobufError(format!(
            "unknown watch event type {:?} (object kind {:?})",
            String::from_utf8_lossy(other),
            env.kind.as_deref().unwrap_or("")
        ))),
    }
}

/// Reads a `metav1.Status` (the object's bytes, envelope removed).
fn api_status(raw: &[u8]) -> Result<ApiStatus, ProtobufError> {
    let s = pb_meta::Status::decode(raw)?;
    Ok(ApiStatus {
        code: s
            .code
            .and_then(|c| u16::try_from(c).ok())
            .unwrap_or_default(),
        reason: s.reason.unwrap_or_default(),
        message: s.message.unwrap_or_default(),
    })
}

/// Decodes the body of an error response the server sent as protobuf (it
/// answers errors in the first type the request accepts): the `Status`
/// inside the envelope, or `None` if the body is not one.
pub(crate) fn decode_error_status(body: &[u8]) -> Option<ApiStatus> {
    let env = envelope(body).ok()?;
    if env.kind.as_deref().is_some_and(|k| k != "Status") {
        return None;
    }
    api_status(env.raw).ok()
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ConfigMap;
    use k8s_pb::api::core::v1 as pb_core;

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
        assert!(
            matches!(&lines[0], WatchLine::Added(cm) if cm.metadata.name.as_deref() == Some("a"))
        );
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
}
