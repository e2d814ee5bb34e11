//! Built without the `protobuf` feature: no kind has a protobuf [`codec`],
//! so no request asks for protobuf and every kind is read as JSON. The
//! decoders keep their signatures for the callers' sake; a protobuf body
//! (which only a request that asked for it gets) is an error.

use super::{Codec, ProtobufError};
use crate::cache::decode::{ListPage, WatchLine};
use crate::cache::error::ApiStatus;

/// Why a protobuf body cannot be read.
const NOT_BUILT: &str = "opkit was built without its `protobuf` feature";

/// The protobuf codec of `K`: none without the `protobuf` feature.
pub(crate) fn codec<K: 'static>() -> Option<Codec<K>> {
    None
}

/// A protobuf LIST body: never asked for, refused.
pub(crate) fn decode_list<K>(_: &Codec<K>, _: &[u8]) -> Result<ListPage<K>, ProtobufError> {
    Err(ProtobufError::new(NOT_BUILT))
}

/// A protobuf watch frame: never asked for, refused.
pub(crate) fn decode_event<K>(_: &Codec<K>, _: &[u8]) -> Result<WatchLine<K>, ProtobufError> {
    Err(ProtobufError::new(NOT_BUILT))
}

/// A protobuf error body: never asked for, not read.
pub(crate) fn decode_error_status(_: &[u8]) -> Option<ApiStatus> {
    None
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::{ConfigMap, Secret};

    /// The two kinds the `protobuf` feature reads as protobuf have no
    /// codec without it: they are requested and read as JSON.
    #[test]
    fn no_kind_has_a_codec() {
        assert!(super::codec::<ConfigMap>().is_none());
        assert!(super::codec::<Secret>().is_none());
    }
}
