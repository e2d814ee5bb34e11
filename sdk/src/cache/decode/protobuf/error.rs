//! What a protobuf body that does not decode is.

/// A protobuf body that could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub(crate) struct ProtobufError(pub(super) String);

impl ProtobufError {
    pub(crate) fn new(what: &str) -> Self {
        Self(what.to_string())
    }
}

#[cfg(feature = "protobuf")]
impl From<prost::DecodeError> for ProtobufError {
    fn from(e: prost::DecodeError) -> Self {
        Self(e.to_string())
    }
}
