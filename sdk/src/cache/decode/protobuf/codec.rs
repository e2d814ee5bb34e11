//! How one kind is decoded from protobuf ([`Codec`]), and the media types
//! a request for protobuf names.

use super::error::ProtobufError;

/// The protobuf media type.
pub(crate) const MEDIA_TYPE: &str = "application/vnd.kubernetes.protobuf";
/// `Accept` for a kind with a protobuf codec: protobuf, else JSON.
pub(crate) const ACCEPT: &str = "application/vnd.kubernetes.protobuf, application/json";

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
    #[cfg(feature = "protobuf")]
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
