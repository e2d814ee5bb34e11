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

#[cfg(feature = "protobuf")]
mod body;
mod codec;
#[cfg(feature = "protobuf")]
mod convert;
mod error;
#[cfg(feature = "protobuf")]
mod fields;
mod frames;
// Without the `protobuf` feature no kind has a codec, so every kind is
// requested and read as JSON; the decoders are never reached.
#[cfg(not(feature = "protobuf"))]
mod off;

#[cfg(feature = "protobuf")]
pub(crate) use body::{decode_error_status, decode_event, decode_list};
pub(crate) use codec::{ACCEPT, Codec, Decode, MEDIA_TYPE};
#[cfg(feature = "protobuf")]
pub(crate) use convert::codec;
pub(crate) use error::ProtobufError;
pub(crate) use frames::FrameSplitter;
#[cfg(not(feature = "protobuf"))]
pub(crate) use off::{codec, decode_error_status, decode_event, decode_list};

#[cfg(test)]
#[cfg(feature = "protobuf")]
pub(crate) mod tests;
