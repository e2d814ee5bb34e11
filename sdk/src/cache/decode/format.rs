//! What a list or watch asked to be answered in ([`Format`]), and the
//! decoder its answer's `Content-Type` picks ([`Encoding`]).

use http::HeaderValue;
use serde::de::DeserializeOwned;

use super::{
    error::DecodeError, events::EventDecoder, json, json_strip, output::ListPage, protobuf,
};
use crate::cache::error::ApiStatus;

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
