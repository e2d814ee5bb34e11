//! Decoding of list and watch responses: bytes in, typed objects out. No
//! I/O here — the transport ([`wire`](crate::cache::informer)) issues the requests and
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

#[cfg(test)]
mod any_json;
mod error;
mod events;
mod exact_capacity;
mod format;
pub(crate) mod json;
mod json_strip;
pub(crate) mod output;
pub(crate) mod protobuf;

pub(crate) use events::EventDecoder;
pub use exact_capacity::from_slice as from_slice_exact;
pub(crate) use format::{Encoding, Format, error_status};
pub(crate) use output::{ListPage, SkippedObject, WatchLine};

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;

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

    #[cfg(feature = "protobuf")]
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
