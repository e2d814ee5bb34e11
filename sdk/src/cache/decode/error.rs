//! A response that could not be decoded ([`DecodeError`]).

use super::protobuf;
use crate::cache::error::ReflectorError;

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
