//! Decoding of list and watch responses: bytes in, typed objects out. No
//! I/O here — the transport ([`wire`](super::wire)) issues the requests and
//! hands the bytes of each response to the decoder its `Content-Type` picks.
//!
//! - [`json`]: a LIST body decoded straight into `K`, or item by item when
//!   one item does not deserialize; a watch stream split into lines, one
//!   event per line.
//! - [`protobuf`]: Kubernetes protobuf for the built-in kinds opkit converts
//!   from it; a LIST body in its envelope, a watch stream split into
//!   length-prefixed frames.
//!
//! Both decoders agree on what they produce: a [`ListPage`] per LIST
//! response and a [`WatchLine`] per watch event; an object that does not
//! decode into `K` is a [`SkippedObject`] with its key, never an error of
//! the whole response.

use std::collections::BTreeMap;

use http::HeaderValue;
use serde::de::DeserializeOwned;

use super::{
    error::{ApiStatus, ReflectorError},
    key::ObjectKey,
};

#[cfg(test)]
mod any_json;
mod events;
mod exact_capacity;
pub(crate) mod json;
mod json_strip;
pub(crate) mod protobuf;

pub(crate) use events::EventDecoder;
pub use exact_capacity::from_slice as from_slice_exact;

/// The annotation of the bookmark that ends a streaming list's initial events.
pub(crate) const INITIAL_EVENTS_END_ANNOTATION: &str = "k8s.io/initial-events-end";

/// An object that did not deserialize into `K` and was skipped.
#[derive(Debug, Clone)]
pub(crate) struct SkippedObject {
    pub namespace: Option<String>,
    pub name: Option<String>,
    pub resource_version: Option<String>,
    pub error: String,
    /// What of `metadata` decodes (without `managedFields`); the default
    /// when even that does not.
    pub metadata: Box<k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta>,
}

impl SkippedObject {
    /// The cache key, from the raw `metadata` (which decodes even when the
    /// whole object does not); `None` without a name.
    pub(crate) fn key(&self) -> Option<ObjectKey> {
        let name = self.name.as_deref().filter(|n| !n.is_empty())?;
        Some(ObjectKey::new(self.namespace.as_deref(), name))
    }
}

/// One decoded LIST page.
pub(crate) struct ListPage<K> {
    pub items: Vec<K>,
    pub resource_version: String,
    pub continue_token: Option<String>,
    pub skipped: Vec<SkippedObject>,
}

/// One decoded watch event.
#[derive(Debug)]
pub(crate) enum WatchLine<K> {
    Added(K),
    Modified(K),
    Deleted(K),
    Bookmark {
        resource_version: Option<String>,
        initial_events_end: bool,
    },
    Error(ApiStatus),
    /// An event whose object did not deserialize into `K`.
    Skipped {
        event_type: String,
        object: SkippedObject,
    },
}

impl<K> WatchLine<K> {
    /// The bookmark event of an object's `resourceVersion` and annotations.
    pub(crate) fn bookmark(
        resource_version: Option<String>,
        annotations: Option<&BTreeMap<String, String>>,
    ) -> Self {
        let initial_events_end = annotations
            .and_then(|a| a.get(INITIAL_EVENTS_END_ANNOTATION))
            .is_some_and(|v| v == "true");
        WatchLine::Bookmark {
            resource_version,
            initial_events_end,
        }
    }
}

/// A response (not a single object: those are skipped) that could not be
/// decoded.
#[derive(Debug, thiserror::Error)]
pub(crate) enum DecodeError {
    /// Bad JSON.
    #[error(transparent)]
    Json(#[from] serde_json::Error),
    /// A bad protobuf body or frame.
    #[error(transparent)]
    Protobuf(#[from] protobuf::ProtobufError),
    /// A protobuf answer to a request that asked for JSON only.
    #[error("the server answered protobuf to a request for JSON")]
    UnaskedProtobuf,
}

impl DecodeError {
    /// The reflector's error for this one, decoding `what`.
    pub(crate) fn into_reflector(self, what: &'static str) -> ReflectorError {
        match self {
            Self::Json(source) => ReflectorError::Decode { what, source },
            Self::Protobuf(e) => ReflectorError::DecodeProtobuf {
                what,
                reason: e.to_string(),
            },
            Self::UnaskedProtobuf => ReflectorError::DecodeProtobuf {
                what,
                reason: self.to_string(),
            },
        }
    }
}

/// How a response body is encoded, from its `Content-Type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Encoding {
    Json,
    Protobuf,
}

impl Encoding {
    /// The encoding a `Content-Type` names: protobuf for
    /// `application/vnd.kubernetes.protobuf` (with or without parameters),
    /// JSON for anything else.
    pub(crate) fn of(content_type: Option<&HeaderValue>) -> Self {
        let is_protobuf = content_type
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.split(';').next())
            .is_some_and(|v| v.trim().eq_ignore_ascii_case(protobuf::MEDIA_TYPE));
        if is_protobuf {
            Self::Protobuf
        } else {
            Self::Json
        }
    }
}

/// What a list or watch asked to be answered in, and so how an answer may
/// be decoded.
pub(crate) struct Format<K> {
    /// Protobuf (JSON accepted too), converted into `K` by this codec;
    /// `None`: JSON only.
    codec: Option<protobuf::Codec<K>>,
    /// JSON answers have each object's `metadata.managedFields` cut out
    /// before they are deserialized (the codec skips the field itself).
    strip_managed_fields: bool,
}

impl<K> Clone for Format<K> {
    fn clone(&self) -> Self {
        Self {
            codec: self.codec,
            strip_managed_fields: self.strip_managed_fields,
        }
    }
}

impl<K> Format<K> {
    /// JSON only, every field decoded.
    pub(crate) fn json() -> Self {
        Self {
            codec: None,
            strip_managed_fields: false,
        }
    }

    /// Protobuf through `codec` (JSON accepted too), every field decoded.
    pub(crate) fn protobuf(codec: protobuf::Codec<K>) -> Self {
        Self {
            codec: Some(codec),
            strip_managed_fields: false,
        }
    }

    /// True when protobuf is asked for.
    pub(crate) fn is_protobuf(&self) -> bool {
        self.codec.is_some()
    }

    /// Asks for JSON only; what is left out of decoding stays left out.
    pub(crate) fn json_only(self) -> Self {
        Self {
            codec: None,
            ..self
        }
    }

    /// Leaves `metadata.managedFields` out of what is decoded: protobuf
    /// skips the field, JSON bytes have it cut out first.
    pub(crate) fn without_managed_fields(self) -> Self {
        Self {
            codec: self.codec.map(protobuf::Codec::without_managed_fields),
            strip_managed_fields: true,
        }
    }
}

impl<K: DeserializeOwned> Format<K> {
    /// Decodes a LIST body of `encoding`.
    pub(crate) fn list(&self, encoding: Encoding, body: &[u8]) -> Result<ListPage<K>, DecodeError> {
        match (&self.codec, encoding) {
            (Some(codec), Encoding::Protobuf) => Ok(protobuf::decode_list(codec, body)?),
            (None, Encoding::Protobuf) => Err(DecodeError::UnaskedProtobuf),
            (_, Encoding::Json) => {
                let stripped = self
                    .strip_managed_fields
                    .then(|| json_strip::list_body(body))
                    .flatten();
                Ok(json::decode_list(stripped.as_deref().unwrap_or(body))?)
            }
        }
    }

    /// A decoder for a watch body of `encoding`.
    pub(crate) fn events(&self, encoding: Encoding) -> Result<EventDecoder<K>, DecodeError> {
        match (&self.codec, encoding) {
            (Some(codec), Encoding::Protobuf) => Ok(EventDecoder::Protobuf {
                frames: protobuf::FrameSplitter::default(),
                codec: *codec,
                broken: false,
            }),
            (None, Encoding::Protobuf) => Err(DecodeError::UnaskedProtobuf),
            (_, Encoding::Json) => Ok(EventDecoder::Json {
                lines: json::LineSplitter::default(),
                cut: self.strip_managed_fields.then(Vec::new),
            }),
        }
    }
}

/// The status in the body of an error response, if it holds one (the
/// server answers errors in the first type the request accepts).
pub(crate) fn error_status(encoding: Encoding, body: &[u8]) -> Option<ApiStatus> {
    match encoding {
        Encoding::Protobuf => protobuf::decode_error_status(body),
        Encoding::Json => json::decode_status(body),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encoding_follows_the_content_type() {
        let ct = |v: &'static str| Some(HeaderValue::from_static(v));
        assert_eq!(
            Encoding::of(ct("application/vnd.kubernetes.protobuf;stream=watch").as_ref()),
            Encoding::Protobuf
        );
        assert_eq!(
            Encoding::of(ct("application/json").as_ref()),
            Encoding::Json
        );
        assert_eq!(Encoding::of(None), Encoding::Json);
    }

    #[test]
    fn json_only_keeps_managed_fields_left_out() {
        use k8s_openapi::api::core::v1::ConfigMap;
        let codec = protobuf::codec::<ConfigMap>().expect("a ConfigMap codec");
        let line = br#"{"type":"ADDED","object":{"metadata":{"name":"a","managedFields":[{"manager":"m"}]}}}
"#;
        for (format, stripped) in [
            (
                Format::protobuf(codec).without_managed_fields().json_only(),
                true,
            ),
            (Format::protobuf(codec).json_only(), false),
            (Format::json().without_managed_fields(), true),
        ] {
            assert!(!format.is_protobuf());
            let mut events = format.events(Encoding::Json).expect("JSON is always read");
            events.push(bytes::Bytes::from_static(line));
            match events.next_event() {
                Some(Ok(WatchLine::Added(cm))) => {
                    assert_eq!(cm.metadata.managed_fields.is_none(), stripped);
                }
                other => panic!("unexpected {other:?}"),
            }
        }
    }
}
