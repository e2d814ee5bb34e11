//! Protobuf response bodies: the `runtime.Unknown` envelope, LIST bodies,
//! watch events and error statuses.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::{
    codec::{Codec, Decode},
    error::ProtobufError,
    generated::{
        d_apimachinery_pkg_apis_meta_v1_ListMeta as list_meta,
        d_apimachinery_pkg_apis_meta_v1_ObjectMeta as object_meta,
        d_apimachinery_pkg_apis_meta_v1_Status as status,
    },
    wire::{self, Value},
};
use crate::cache::{
    decode::output::{ListPage, SkippedObject, WatchLine},
    error::ApiStatus,
};

/// The magic every enveloped object or list body starts with.
pub(super) const MAGIC: &[u8; 4] = b"k8s\0";

/// One field: its number and, for length-delimited fields, its bytes
/// (other wire types are reported as `None`).
fn field<'a>(buf: &mut &'a [u8]) -> Result<(u32, Option<&'a [u8]>), ProtobufError> {
    let (number, value) = wire::next(buf)?;
    Ok(match value {
        Value::Bytes(bytes) => (number, Some(bytes)),
        _ => (number, None),
    })
}

/// The `kind` (field 2) of a `runtime.TypeMeta`, borrowed: read on every
/// watch event, looked at only for `Status` and in errors.
fn type_meta_kind(mut buf: &[u8]) -> Result<Option<&[u8]>, ProtobufError> {
    let mut kind = None;
    while !buf.is_empty() {
        if let (2, value) = wire::next(&mut buf)? {
            kind = Some(wire::bytes(value)?);
        }
    }
    Ok(kind)
}

/// The parts of a `runtime.Unknown` envelope opkit reads.
struct Envelope<'a> {
    kind: Option<&'a [u8]>,
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
                kind = type_meta_kind(type_meta).ok().flatten();
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
            (1, Some(list_meta_bytes)) => {
                let m = list_meta(list_meta_bytes, Decode::default())?;
                page.resource_version = m.resource_version.unwrap_or_default();
                page.continue_token = m.continue_;
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
/// `metadata.managedFields` is left out.
fn metadata_only(object: &[u8]) -> Option<ObjectMeta> {
    let mut buf = object;
    let options = Decode {
        managed_fields: false,
    };
    while !buf.is_empty() {
        match field(&mut buf) {
            Ok((1, Some(meta))) => return object_meta(meta, options).ok(),
            Ok(_) => {}
            Err(_) => return None,
        }
    }
    None
}

fn skipped(object: &[u8], error: ProtobufError) -> SkippedObject {
    let m = metadata_only(object).unwrap_or_default();
    SkippedObject {
        namespace: m.namespace.clone(),
        name: m.name.clone(),
        resource_version: m.resource_version.clone(),
        error: format!("protobuf: {error}"),
        metadata: Box::new(m),
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
                m.resource_version,
                m.annotations.as_ref(),
            ))
        }
        b"ERROR" => Ok(WatchLine::Error(api_status(env.raw)?)),
        other => Err(ProtobufError(format!(
            "unknown watch event type {:?} (object kind {:?})",
            String::from_utf8_lossy(other),
            String::from_utf8_lossy(env.kind.unwrap_or_default())
        ))),
    }
}

/// Reads a `metav1.Status` (the object's bytes, envelope removed).
fn api_status(raw: &[u8]) -> Result<ApiStatus, ProtobufError> {
    let s = status(raw, Decode::default())?;
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
    if env.kind.is_some_and(|k| k != b"Status") {
        return None;
    }
    api_status(env.raw).ok()
}
