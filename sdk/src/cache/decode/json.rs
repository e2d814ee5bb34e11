//! JSON: LIST bodies, watch streams (one event per line) and error
//! statuses.
//!
//! A LIST page is decoded straight into `K`; should one item not
//! deserialize (schema drift, a bad custom resource) the page is decoded
//! again item by item and only that item is skipped. Watch lines are
//! decoded the same way: straight into `K`, and on failure a generic parse
//! tells a bad object (skipped, with its key taken from the raw `metadata`)
//! from a bad line (an error).

use std::{collections::BTreeMap, fmt, marker::PhantomData};

use bytes::Bytes;
use serde::{
    Deserialize,
    de::{self, DeserializeOwned, DeserializeSeed, IgnoredAny, MapAccess, Visitor},
};

use super::{
    exact_capacity,
    output::{ListPage, SkippedObject, WatchLine},
};
use crate::cache::error::ApiStatus;

#[derive(Deserialize, Default)]
struct ListMetaLite {
    #[serde(rename = "resourceVersion", default)]
    resource_version: Option<String>,
    #[serde(rename = "continue", default)]
    continue_token: Option<String>,
}

#[derive(Deserialize)]
#[serde(bound(deserialize = "K: DeserializeOwned"))]
struct ListBody<K> {
    #[serde(default)]
    metadata: ListMetaLite,
    #[serde(default)]
    items: Option<Vec<K>>,
}

#[derive(Deserialize)]
struct LooseListBody {
    #[serde(default)]
    metadata: ListMetaLite,
    #[serde(default)]
    items: Option<Vec<serde_json::Value>>,
}

#[derive(Deserialize, Default)]
struct StatusLite {
    #[serde(default)]
    code: Option<u16>,
    #[serde(default)]
    reason: Option<String>,
    #[serde(default)]
    message: Option<String>,
}

impl From<StatusLite> for ApiStatus {
    fn from(s: StatusLite) -> Self {
        ApiStatus {
            code: s.code.unwrap_or_default(),
            reason: s.reason.unwrap_or_default(),
            message: s.message.unwrap_or_default(),
        }
    }
}

/// The `Status` of an error response's body, if it is one.
pub(crate) fn decode_status(body: &[u8]) -> Option<ApiStatus> {
    serde_json::from_slice::<StatusLite>(body)
        .ok()
        .map(ApiStatus::from)
}

fn skipped_from_value(v: &serde_json::Value, error: String) -> SkippedObject {
    let meta = v.get("metadata");
    let s = |k: &str| {
        meta.and_then(|m| m.get(k))
            .and_then(|x| x.as_str())
            .map(str::to_string)
    };
    let mut metadata = meta
        .and_then(|m| {
            serde_json::from_value::<k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta>(
                m.clone(),
            )
            .ok()
        })
        .unwrap_or_default();
    metadata.managed_fields = None;
    SkippedObject {
        namespace: s("namespace"),
        name: s("name"),
        resource_version: s("resourceVersion"),
        error,
        metadata: Box::new(metadata),
    }
}

/// Decodes a list body: all at once into `K` (fast path), or item by item
/// when one item does not deserialize.
pub(crate) fn decode_list<K: DeserializeOwned>(
    bytes: &[u8],
) -> Result<ListPage<K>, serde_json::Error> {
    if let Ok(body) = exact_capacity::from_slice::<ListBody<K>>(bytes) {
        return Ok(ListPage {
            items: body.items.unwrap_or_default(),
            resource_version: body.metadata.resource_version.unwrap_or_default(),
            continue_token: body.metadata.continue_token.filter(|c| !c.is_empty()),
            skipped: Vec::new(),
        });
    }
    let body: LooseListBody = serde_json::from_slice(bytes)?;
    let raw = body.items.unwrap_or_default();
    let mut items = Vec::with_capacity(raw.len());
    let mut skipped = Vec::new();
    for v in raw {
        let info = skipped_from_value(&v, String::new());
        match serde_json::from_value::<K>(v) {
            Ok(k) => items.push(k),
            Err(e) => skipped.push(SkippedObject {
                error: e.to_string(),
                ..info
            }),
        }
    }
    Ok(ListPage {
        items,
        resource_version: body.metadata.resource_version.unwrap_or_default(),
        continue_token: body.metadata.continue_token.filter(|c| !c.is_empty()),
        skipped,
    })
}

#[derive(Deserialize, Clone, Copy, Debug)]
enum EventType {
    #[serde(rename = "ADDED")]
    Added,
    #[serde(rename = "MODIFIED")]
    Modified,
    #[serde(rename = "DELETED")]
    Deleted,
    #[serde(rename = "BOOKMARK")]
    Bookmark,
    #[serde(rename = "ERROR")]
    Error,
}

#[derive(Deserialize)]
#[serde(field_identifier, rename_all = "lowercase")]
enum Field {
    Type,
    Object,
    #[serde(other)]
    Other,
}

#[derive(Deserialize, Default)]
struct BookmarkMeta {
    #[serde(rename = "resourceVersion", default)]
    resource_version: Option<String>,
    #[serde(default)]
    annotations: Option<BTreeMap<String, String>>,
}

#[derive(Deserialize, Default)]
struct BookmarkObject {
    #[serde(default)]
    metadata: BookmarkMeta,
}

impl BookmarkObject {
    fn into_line<K>(self) -> WatchLine<K> {
        WatchLine::bookmark(
            self.metadata.resource_version,
            self.metadata.annotations.as_ref(),
        )
    }
}

struct ObjectSeed<K>(EventType, PhantomData<K>);

impl<'de, K: DeserializeOwned> DeserializeSeed<'de> for ObjectSeed<K> {
    type Value = WatchLine<K>;
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        Ok(match self.0 {
            EventType::Added => WatchLine::Added(K::deserialize(d)?),
            EventType::Modified => WatchLine::Modified(K::deserialize(d)?),
            EventType::Deleted => WatchLine::Deleted(K::deserialize(d)?),
            EventType::Bookmark => BookmarkObject::deserialize(d)?.into_line(),
            EventType::Error => WatchLine::Error(StatusLite::deserialize(d)?.into()),
        })
    }
}

struct LineVisitor<K>(PhantomData<K>);

impl<'de, K: DeserializeOwned> Visitor<'de> for LineVisitor<K> {
    type Value = WatchLine<K>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a watch event")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut ty: Option<EventType> = None;
        let mut out = None;
        while let Some(field) = map.next_key::<Field>()? {
            match field {
                Field::Type => ty = Some(map.next_value()?),
                Field::Object => {
                    let Some(t) = ty else {
                        return Err(de::Error::custom("object before type"));
                    };
                    out = Some(map.next_value_seed(ObjectSeed::<K>(t, PhantomData))?);
                }
                Field::Other => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        out.ok_or_else(|| de::Error::missing_field("object"))
    }
}

/// Decodes one watch line: fast path straight into `K`; if that fails, one
/// generic parse tells a bad object (skipped) from a bad line (error), and
/// reads a line whose object comes before its type.
pub(crate) fn decode_watch_line<K: DeserializeOwned>(
    line: &[u8],
) -> Result<WatchLine<K>, serde_json::Error> {
    if let Ok(ev) = exact_capacity::deserialize_map(line, LineVisitor::<K>(PhantomData)) {
        return Ok(ev);
    }
    let v: serde_json::Value = match serde_json::from_slice(line) {
        Ok(v) => v,
        // The fast path walks skipped values and a `Value` holds every
        // number, both stricter than serde_json's skip (`1e400` in a field
        // `K` does not have): serde_json's own decode has the last word.
        Err(e) => {
            return de::Deserializer::deserialize_map(
                &mut serde_json::Deserializer::from_slice(line),
                LineVisitor::<K>(PhantomData),
            )
            .map_err(|_| e);
        }
    };
    let ty = v
        .get("type")
        .and_then(|t| t.as_str())
        .unwrap_or_default()
        .to_string();
    let object = v.get("object").cloned().unwrap_or_default();
    match ty.as_str() {
        "ADDED" | "MODIFIED" | "DELETED" => {
            let info = skipped_from_value(&object, String::new());
            match serde_json::from_value::<K>(object) {
                Ok(k) => Ok(match ty.as_str() {
                    "ADDED" => WatchLine::Added(k),
                    "MODIFIED" => WatchLine::Modified(k),
                    _ => WatchLine::Deleted(k),
                }),
                Err(e) => Ok(WatchLine::Skipped {
                    event_type: ty,
                    object: SkippedObject {
                        error: e.to_string(),
                        ..info
                    },
                }),
            }
        }
        "BOOKMARK" => Ok(serde_json::from_value::<BookmarkObject>(object)
            .unwrap_or_default()
            .into_line()),
        "ERROR" => Ok(WatchLine::Error(
            serde_json::from_value::<StatusLite>(object)
                .unwrap_or_default()
                .into(),
        )),
        other => Err(de::Error::custom(format!(
            "unknown watch event type {other:?}"
        ))),
    }
}

/// One line of a watch stream: shared with the chunk it arrived in when it
/// arrived whole, owned when it was joined from pieces.
pub(crate) enum Line {
    Shared(Bytes),
    Owned(Vec<u8>),
}

impl std::ops::Deref for Line {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match self {
            Line::Shared(b) => b,
            Line::Owned(v) => v,
        }
    }
}

/// Splits a stream of chunks into newline-terminated lines without copying
/// the lines that arrive whole in one chunk.
#[derive(Default)]
pub(crate) struct LineSplitter {
    chunk: Bytes,
    partial: Vec<u8>,
}

impl LineSplitter {
    /// Appends a chunk; call only once [`next_line`](Self::next_line) has
    /// returned `None` (the previous chunk is used up).
    pub(crate) fn push(&mut self, chunk: Bytes) {
        if !self.chunk.is_empty() {
            // not used up: keep its bytes ahead of the new ones
            self.partial
                .extend_from_slice(&std::mem::take(&mut self.chunk));
        }
        self.chunk = chunk;
    }

    /// The next complete line, if the buffered data holds one.
    pub(crate) fn next_line(&mut self) -> Option<Line> {
        if self.chunk.is_empty() {
            return None;
        }
        if let Some(nl) = memchr::memchr(b'\n', &self.chunk) {
            let line = self.chunk.split_to(nl + 1).slice(..nl);
            if self.partial.is_empty() {
                return Some(Line::Shared(line));
            }
            self.partial.extend_from_slice(&line);
            return Some(Line::Owned(std::mem::take(&mut self.partial)));
        }
        self.partial.extend_from_slice(&self.chunk);
        self.chunk = Bytes::new();
        None
    }

    /// What is left at the end of the stream (a last line without newline).
    pub(crate) fn finish(&mut self) -> Option<Line> {
        let mut rest = std::mem::take(&mut self.partial);
        rest.extend_from_slice(&std::mem::take(&mut self.chunk));
        (!rest.is_empty()).then_some(Line::Owned(rest))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::core::{DynamicObject, PartialObjectMeta};

    #[derive(Deserialize, Debug, Clone)]
    struct Strict {
        spec: StrictSpec,
    }
    #[derive(Deserialize, Debug, Clone)]
    struct StrictSpec {
        #[allow(dead_code)]
        replicas: u32,
    }

    #[test]
    fn list_fast_path_and_skip_bad_items() {
        let good = br#"{"kind":"ConfigMapList","apiVersion":"v1","metadata":{"resourceVersion":"42","continue":"abc"},"items":[{"metadata":{"name":"a","namespace":"n"}}]}"#;
        let page = decode_list::<ConfigMap>(good).unwrap();
        assert_eq!(page.items.len(), 1);
        assert_eq!(page.resource_version, "42");
        assert_eq!(page.continue_token.as_deref(), Some("abc"));

        let mixed = br#"{"metadata":{"resourceVersion":"7"},"items":[{"metadata":{"name":"ok"},"spec":{"replicas":1}},{"metadata":{"name":"bad","namespace":"n","resourceVersion":"6"},"spec":{"replicas":"many"}}]}"#;
        let page = decode_list::<Strict>(mixed).unwrap();
        assert_eq!(page.items.len(), 1);
        assert_eq!(page.skipped.len(), 1);
        assert_eq!(page.skipped[0].name.as_deref(), Some("bad"));
        assert_eq!(page.skipped[0].resource_version.as_deref(), Some("6"));
        assert_eq!(page.items[0].spec.replicas, 1);

        let null_items = br#"{"metadata":{"resourceVersion":"1","continue":""},"items":null}"#;
        let page = decode_list::<ConfigMap>(null_items).unwrap();
        assert!(page.items.is_empty());
        assert!(page.continue_token.is_none());

        assert!(decode_list::<ConfigMap>(b"not json").is_err());
    }

    #[test]
    fn watch_lines() {
        let added = br#"{"type":"ADDED","object":{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"a","resourceVersion":"5"}}}"#;
        assert!(matches!(
            decode_watch_line::<ConfigMap>(added).unwrap(),
            WatchLine::Added(cm) if cm.metadata.name.as_deref() == Some("a")
        ));
        // object before type still decodes (slow path)
        let swapped = br#"{"object":{"metadata":{"name":"a"}},"type":"DELETED"}"#;
        assert!(matches!(
            decode_watch_line::<ConfigMap>(swapped).unwrap(),
            WatchLine::Deleted(_)
        ));
        let bookmark = br#"{"type":"BOOKMARK","object":{"kind":"Strict","metadata":{"resourceVersion":"99","annotations":{"k8s.io/initial-events-end":"true"}}}}"#;
        assert!(matches!(
            decode_watch_line::<Strict>(bookmark).unwrap(),
            WatchLine::Bookmark { resource_version: Some(rv), initial_events_end: true } if rv == "99"
        ));
        let error = br#"{"type":"ERROR","object":{"kind":"Status","code":410,"reason":"Expired","message":"too old"}}"#;
        assert!(matches!(
            decode_watch_line::<ConfigMap>(error).unwrap(),
            WatchLine::Error(s) if s.is_expired()
        ));
        let bad = br#"{"type":"MODIFIED","object":{"metadata":{"name":"x","namespace":"n","resourceVersion":"8"},"spec":{"replicas":-1}}}"#;
        match decode_watch_line::<Strict>(bad).unwrap() {
            WatchLine::Skipped { event_type, object } => {
                assert_eq!(event_type, "MODIFIED");
                assert_eq!(object.name.as_deref(), Some("x"));
                assert_eq!(object.resource_version.as_deref(), Some("8"));
            }
            other => panic!("unexpected {other:?}"),
        }
        assert!(decode_watch_line::<ConfigMap>(b"{garbage").is_err());
        // a number beyond f64's range in a field ConfigMap does not have:
        // serde_json skips it, and so does the decode
        let far = br#"{"type":"ADDED","object":{"metadata":{"name":"f"},"extra":[1e400],"data":{"k":"v"}}}"#;
        assert!(serde_json::from_slice::<serde_json::Value>(far).is_err());
        assert!(matches!(
            decode_watch_line::<ConfigMap>(far).unwrap(),
            WatchLine::Added(cm) if cm.data.as_ref().is_some_and(|d| d["k"] == "v")
        ));
        let dynamic = br#"{"type":"ADDED","object":{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w"},"spec":{"x":1}}}"#;
        assert!(matches!(
            decode_watch_line::<DynamicObject>(dynamic).unwrap(),
            WatchLine::Added(_)
        ));
        let meta = br#"{"type":"ADDED","object":{"apiVersion":"meta.k8s.io/v1","kind":"PartialObjectMetadata","metadata":{"name":"m"}}}"#;
        assert!(matches!(
            decode_watch_line::<PartialObjectMeta<ConfigMap>>(meta).unwrap(),
            WatchLine::Added(_)
        ));
    }

    #[test]
    fn line_splitter_joins_split_lines() {
        let mut sp = LineSplitter::default();
        let mut lines = vec![];
        for chunk in [&b"{\"a\":1}\n{\"b\""[..], b":2}\n", b"{\"c\":3}"] {
            sp.push(Bytes::copy_from_slice(chunk));
            while let Some(l) = sp.next_line() {
                lines.push(String::from_utf8(l.to_vec()).unwrap());
            }
        }
        if let Some(l) = sp.finish() {
            lines.push(String::from_utf8(l.to_vec()).unwrap());
        }
        assert_eq!(lines, ["{\"a\":1}", "{\"b\":2}", "{\"c\":3}"]);
    }

    #[test]
    fn error_status_of_a_json_body() {
        let st =
            decode_status(br#"{"kind":"Status","code":403,"reason":"Forbidden","message":"no"}"#)
                .unwrap();
        assert_eq!((st.code, st.reason.as_str()), (403, "Forbidden"));
        assert!(decode_status(b"404 page not found").is_none());
    }
}
