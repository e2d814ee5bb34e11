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
