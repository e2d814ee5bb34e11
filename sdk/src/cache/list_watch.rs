//! [`ListWatch`]: what the [`Reflector`](super::Reflector) lists and watches —
//! a resource (typed, dynamic or metadata-only), a namespace or all, label and
//! field selectors — and the raw HTTP requests and decoding behind it.
//!
//! ```no_run
//! use k8s_openapi::api::core::v1::ConfigMap;
//! use kube::core::{ApiResource, DynamicObject, GroupVersionKind, PartialObjectMeta};
//! use opkit::cache::ListWatch;
//!
//! # async fn doc(client: kube::Client) {
//! // typed, one namespace, label-selected
//! let lw = ListWatch::<ConfigMap>::new(client.clone(), &())
//!     .namespace("prod")
//!     .labels("app=shop");
//! // dynamic
//! let gvk = GroupVersionKind::gvk("example.com", "v1", "Widget");
//! let ar = ApiResource::from_gvk(&gvk);
//! let dynamic = ListWatch::<DynamicObject>::new(client.clone(), &ar);
//! // metadata only (memory-light owner watches)
//! let meta = ListWatch::<PartialObjectMeta<ConfigMap>>::new(client, &());
//! # }
//! ```
//!
//! Lists are decoded page by page straight into `K`; should one item not
//! deserialize (schema drift, a bad custom resource) the page is decoded again
//! item by item and only that item is skipped. Watch events are decoded line
//! by line the same way: a bad object is reported as skipped, with its key
//! taken from the raw `metadata`, so the reflector can remove the stale copy;
//! the stream goes on.

use std::{collections::BTreeMap, fmt, marker::PhantomData};

use bytes::Bytes;
use http::{Request, header};
use http_body_util::BodyExt;
use kube::{Client, Resource, client::Body};
use serde::{
    Deserialize,
    de::{self, DeserializeOwned, DeserializeSeed, IgnoredAny, MapAccess, Visitor},
};

use super::{
    error::{ApiStatus, ReflectorError},
    protobuf,
};

const JSON: &str = "application/json";
const META_LIST: &str =
    "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json";
const META_ONE: &str =
    "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json";

/// The annotation of the bookmark that ends a streaming list's initial events.
pub const INITIAL_EVENTS_END_ANNOTATION: &str = "k8s.io/initial-events-end";

/// What to list and watch. Cheap to clone.
pub struct ListWatch<K> {
    client: Client,
    url_path: String,
    namespace: Option<String>,
    label_selector: Option<String>,
    field_selector: Option<String>,
    metadata_only: bool,
    kind: String,
    api_version: String,
    ns_template: String,
    /// Set for kinds decoded from protobuf (and not turned off).
    protobuf: Option<protobuf::Codec<K>>,
    _k: PhantomData<fn() -> K>,
}

const NS_PLACEHOLDER: &str = "\u{0}";

impl<K> Clone for ListWatch<K> {
    fn clone(&self) -> Self {
        Self {
            client: self.client.clone(),
            url_path: self.url_path.clone(),
            namespace: self.namespace.clone(),
            label_selector: self.label_selector.clone(),
            field_selector: self.field_selector.clone(),
            metadata_only: self.metadata_only,
            kind: self.kind.clone(),
            api_version: self.api_version.clone(),
            ns_template: self.ns_template.clone(),
            protobuf: self.protobuf,
            _k: PhantomData,
        }
    }
}

impl<K> fmt::Debug for ListWatch<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.describe())
    }
}

impl<K: Resource + 'static> ListWatch<K> {
    /// Lists and watches `K` (described by `dyntype`: `&()` for typed
    /// resources, an [`ApiResource`](kube::core::ApiResource) for
    /// `DynamicObject`) in all namespaces.
    ///
    /// Built-in kinds opkit decodes from protobuf (`ConfigMap`, `Secret`)
    /// are requested as protobuf, with JSON accepted too; everything else,
    /// custom resources included, as JSON (see
    /// [`ReflectorConfig::protobuf`](super::ReflectorConfig::protobuf)).
    pub fn new(client: Client, dyntype: &K::DynamicType) -> Self {
        Self {
            client,
            url_path: K::url_path(dyntype, None),
            namespace: None,
            label_selector: None,
            field_selector: None,
            metadata_only: K::metadata_api(),
            kind: K::kind(dyntype).into_owned(),
            api_version: K::api_version(dyntype).into_owned(),
            ns_template: K::url_path(dyntype, Some(NS_PLACEHOLDER)),
            protobuf: protobuf::codec::<K>(),
            _k: PhantomData,
        }
    }
}

impl<K> ListWatch<K> {
    /// Restricts to one namespace (for namespaced resources; an empty
    /// string means all namespaces).
    pub fn namespace(mut self, namespace: impl Into<String>) -> Self {
        let ns = namespace.into();
        if ns.is_empty() {
            return self;
        }
        self.url_path = self.ns_template.replace(NS_PLACEHOLDER, &ns);
        self.namespace = Some(ns);
        self
    }

    /// Restricts to objects matching a label selector (`app=shop,tier!=db`).
    pub fn labels(mut self, selector: impl Into<String>) -> Self {
        self.label_selector = Some(selector.into()).filter(|s: &String| !s.is_empty());
        self
    }

    /// Restricts to objects matching a field selector (`metadata.name=x`).
    pub fn fields(mut self, selector: impl Into<String>) -> Self {
        self.field_selector = Some(selector.into()).filter(|s: &String| !s.is_empty());
        self
    }

    /// The client the requests go through.
    pub fn client(&self) -> Client {
        self.client.clone()
    }

    /// The namespace watched, `None` for all.
    pub fn get_namespace(&self) -> Option<&str> {
        self.namespace.as_deref()
    }

    /// The label selector, if any.
    pub fn label_selector(&self) -> Option<&str> {
        self.label_selector.as_deref()
    }

    /// The field selector, if any.
    pub fn field_selector(&self) -> Option<&str> {
        self.field_selector.as_deref()
    }

    /// True when lists and watches ask for protobuf (a built-in kind opkit
    /// decodes from protobuf, not turned off); the response's content type
    /// still decides, so a JSON answer is read as JSON.
    pub fn is_protobuf(&self) -> bool {
        self.protobuf.is_some()
    }

    /// Asks for JSON only, even for kinds opkit decodes from protobuf.
    pub(crate) fn json_only(mut self) -> Self {
        self.protobuf = None;
        self
    }

    /// Leaves `metadata.managedFields` out of what is decoded from
    /// protobuf, for an informer that strips them anyway (JSON decodes them
    /// and the transform drops them).
    pub(crate) fn without_managed_fields(mut self) -> Self {
        self.protobuf = self.protobuf.map(protobuf::Codec::without_managed_fields);
        self
    }

    /// The `Accept` header of a list or watch.
    fn accept(&self, metadata: &'static str) -> &'static str {
        if self.metadata_only {
            metadata
        } else if self.protobuf.is_some() {
            protobuf::ACCEPT
        } else {
            JSON
        }
    }

    /// True for a metadata-only (`PartialObjectMeta`) list/watch.
    pub fn is_metadata_only(&self) -> bool {
        self.metadata_only
    }

    /// The kind, e.g. `ConfigMap`.
    pub fn kind(&self) -> &str {
        &self.kind
    }

    /// The apiVersion, e.g. `apps/v1`.
    pub fn api_version(&self) -> &str {
        &self.api_version
    }

    /// The request path, e.g. `/api/v1/namespaces/prod/configmaps`.
    pub fn url_path(&self) -> &str {
        &self.url_path
    }

    /// A human description: `v1/ConfigMap (namespace prod, labels app=shop)`.
    pub fn describe(&self) -> String {
        let mut scope = vec![match &self.namespace {
            Some(ns) => format!("namespace {ns}"),
            None => "all namespaces".to_string(),
        }];
        if let Some(l) = &self.label_selector {
            scope.push(format!("labels {l}"));
        }
        if let Some(f) = &self.field_selector {
            scope.push(format!("fields {f}"));
        }
        if self.metadata_only {
            scope.push("metadata only".to_string());
        }
        format!("{}/{} ({})", self.api_version, self.kind, scope.join(", "))
    }

    fn query(&self, qp: &mut form_urlencoded::Serializer<'_, String>) {
        if let Some(l) = &self.label_selector {
            qp.append_pair("labelSelector", l);
        }
        if let Some(f) = &self.field_selector {
            qp.append_pair("fieldSelector", f);
        }
    }

    fn request(&self, query: String, accept: &str) -> Result<Request<Body>, ReflectorError> {
        Request::get(format!("{}?{}", self.url_path, query))
            .header(header::ACCEPT, accept)
            .body(Body::empty())
            .map_err(ReflectorError::Request)
    }

    /// Sends a request; the body of a successful response, and whether it
    /// is protobuf.
    async fn send(&self, req: Request<Body>) -> Result<(Body, bool), ReflectorError> {
        let res = self
            .client
            .send(req)
            .await
            .map_err(ReflectorError::Transport)?;
        let status = res.status();
        if status.is_success() {
            let is_protobuf = protobuf::is_protobuf(res.headers().get(header::CONTENT_TYPE));
            return Ok((res.into_body(), is_protobuf));
        }
        let content_type = res.headers().get(header::CONTENT_TYPE).cloned();
        let body = res
            .into_body()
            .collect()
            .await
            .map(|c| c.to_bytes())
            .unwrap_or_default();
        let decoded = if protobuf::is_protobuf(content_type.as_ref()) {
            protobuf::decode_error_status(&body)
        } else {
            serde_json::from_slice::<StatusLite>(&body)
                .ok()
                .map(ApiStatus::from)
        };
        let mut st = decoded.unwrap_or_else(|| ApiStatus {
            code: status.as_u16(),
            reason: status.canonical_reason().unwrap_or_default().to_string(),
            // a plain-text body ("404 page not found\n"): no blank lines in logs
            message: String::from_utf8_lossy(&body).trim().to_owned(),
        });
        st.code = status.as_u16();
        Err(ReflectorError::Api(st))
    }
}

/// Options of one LIST request.
#[derive(Debug, Clone, Default)]
pub(crate) struct ListOptions {
    pub resource_version: Option<String>,
    pub resource_version_match: Option<&'static str>,
    pub limit: Option<u32>,
    pub continue_token: Option<String>,
}

/// Options of one WATCH request.
#[derive(Debug, Clone, Default)]
pub(crate) struct WatchOptions {
    pub resource_version: Option<String>,
    pub timeout_secs: u32,
    pub send_initial_events: bool,
}

/// An object that did not deserialize into `K` and was skipped.
#[derive(Debug, Clone)]
pub(crate) struct SkippedObject {
    pub namespace: Option<String>,
    pub name: Option<String>,
    pub resource_version: Option<String>,
    pub error: String,
}

impl SkippedObject {
    /// The cache key, from the raw `metadata` (which decodes even when the
    /// whole object does not); `None` without a name.
    pub(crate) fn key(&self) -> Option<super::key::ObjectKey> {
        let name = self.name.as_deref().filter(|n| !n.is_empty())?;
        Some(super::key::ObjectKey::new(self.namespace.as_deref(), name))
    }
}

/// One decoded LIST page.
pub(crate) struct ListPage<K> {
    pub items: Vec<K>,
    pub resource_version: String,
    pub continue_token: Option<String>,
    pub skipped: Vec<SkippedObject>,
}

impl<K: DeserializeOwned> ListWatch<K> {
    /// One LIST request.
    pub(crate) async fn list_page(
        &self,
        opts: &ListOptions,
    ) -> Result<ListPage<K>, ReflectorError> {
        let req = self.list_request(opts)?;
        let (body, is_protobuf) = self.send(req).await?;
        let bytes = body
            .collect()
            .await
            .map_err(ReflectorError::Transport)?
            .to_bytes();
        match (&self.protobuf, is_protobuf) {
            (Some(codec), true) => protobuf::decode_list(codec, &bytes).map_err(|source| {
                ReflectorError::DecodeProtobuf {
                    what: "list response",
                    reason: source.to_string(),
                }
            }),
            (None, true) => Err(unasked_protobuf("list response")),
            (_, false) => decode_list(&bytes),
        }
    }

    fn list_request(&self, opts: &ListOptions) -> Result<Request<Body>, ReflectorError> {
        let mut qp = form_urlencoded::Serializer::new(String::new());
        if let Some(limit) = opts.limit {
            qp.append_pair("limit", &limit.to_string());
        }
        if let Some(c) = &opts.continue_token {
            qp.append_pair("continue", c);
        } else if let Some(rv) = &opts.resource_version {
            qp.append_pair("resourceVersion", rv);
            if let Some(m) = opts.resource_version_match {
                qp.append_pair("resourceVersionMatch", m);
            }
        }
        self.query(&mut qp);
        let accept = self.accept(META_LIST);
        self.request(qp.finish(), accept)
    }

    /// Opens a WATCH.
    pub(crate) async fn watch(
        &self,
        opts: &WatchOptions,
    ) -> Result<WatchStream<K>, ReflectorError> {
        let req = self.watch_request(opts)?;
        let (body, is_protobuf) = self.send(req).await?;
        let reader = match (self.protobuf, is_protobuf) {
            (Some(codec), true) => EventReader::Protobuf(FrameReader::new(body, codec)),
            (None, true) => return Err(unasked_protobuf("watch response")),
            (_, false) => EventReader::Json(LineReader::new(body)),
        };
        Ok(WatchStream {
            reader,
            _k: PhantomData,
        })
    }

    fn watch_request(&self, opts: &WatchOptions) -> Result<Request<Body>, ReflectorError> {
        let mut qp = form_urlencoded::Serializer::new(String::new());
        qp.append_pair("watch", "true");
        if let Some(rv) = &opts.resource_version {
            qp.append_pair("resourceVersion", rv);
        }
        qp.append_pair("allowWatchBookmarks", "true");
        qp.append_pair("timeoutSeconds", &opts.timeout_secs.to_string());
        if opts.send_initial_events {
            qp.append_pair("sendInitialEvents", "true");
            qp.append_pair("resourceVersionMatch", "NotOlderThan");
        }
        self.query(&mut qp);
        let accept = self.accept(META_ONE);
        self.request(qp.finish(), accept)
    }
}

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

fn skipped_from_value(v: &serde_json::Value, error: String) -> SkippedObject {
    let meta = v.get("metadata");
    let s = |k: &str| {
        meta.and_then(|m| m.get(k))
            .and_then(|x| x.as_str())
            .map(str::to_string)
    };
    SkippedObject {
        namespace: s("namespace"),
        name: s("name"),
        resource_version: s("resourceVersion"),
        error,
    }
}

/// Decodes a list body: all at once into `K` (fast path), or item by item
/// when one item does not deserialize.
pub(crate) fn decode_list<K: DeserializeOwned>(
    bytes: &[u8],
) -> Result<ListPage<K>, ReflectorError> {
    match serde_json::from_slice::<ListBody<K>>(bytes) {
        Ok(body) => Ok(ListPage {
            items: body.items.unwrap_or_default(),
            resource_version: body.metadata.resource_version.unwrap_or_default(),
            continue_token: body.metadata.continue_token.filter(|c| !c.is_empty()),
            skipped: Vec::new(),
        }),
        Err(_) => {
            let body: LooseListBody =
                serde_json::from_slice(bytes).map_err(|source| ReflectorError::Decode {
                    what: "list response",
                    source,
                })?;
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
    }
}

/// One decoded watch event.
#[derive(Debug)]
pub(crate) enum WatchLine<K> {
    Added(K),
    Modified(K),
    Deleted(K),
    Bookmark {
        resource_version: Option<String>,
        initial_events_end: bool,
    },
    Error(ApiStatus),
    /// An event whose object did not deserialize into `K`.
    Skipped {
        event_type: String,
        object: SkippedObject,
    },
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
pub(crate) struct BookmarkMeta {
    #[serde(rename = "resourceVersion", default)]
    pub(crate) resource_version: Option<String>,
    #[serde(default)]
    pub(crate) annotations: Option<BTreeMap<String, String>>,
}

#[derive(Deserialize, Default)]
pub(crate) struct BookmarkObject {
    #[serde(default)]
    pub(crate) metadata: BookmarkMeta,
}

impl BookmarkObject {
    pub(crate) fn into_line<K>(self) -> WatchLine<K> {
        let end = self
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(INITIAL_EVENTS_END_ANNOTATION))
            .is_some_and(|v| v == "true");
        WatchLine::Bookmark {
            resource_version: self.metadata.resource_version,
            initial_events_end: end,
        }
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

/// Decodes one watch line: fast path straight into `K`; if that fails, a
/// generic parse tells a bad object (skipped) from a bad line (error).
pub(crate) fn decode_watch_line<K: DeserializeOwned>(
    line: &[u8],
) -> Result<WatchLine<K>, serde_json::Error> {
    let mut de = serde_json::Deserializer::from_slice(line);
    if let Ok(ev) = de::Deserializer::deserialize_map(&mut de, LineVisitor::<K>(PhantomData)) {
        return Ok(ev);
    }
    let v: serde_json::Value = serde_json::from_slice(line)?;
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

/// An open watch: decoded events, one at a time.
pub(crate) struct WatchStream<K> {
    reader: EventReader<K>,
    _k: PhantomData<fn() -> K>,
}

/// How the events of a watch are framed and encoded.
enum EventReader<K> {
    /// JSON, one event per line.
    Json(LineReader),
    /// Protobuf, length-prefixed frames.
    Protobuf(FrameReader<K>),
}

impl<K: DeserializeOwned> WatchStream<K> {
    /// The next event; `None` when the server ended the watch (or the
    /// connection dropped mid-stream, which client-go also treats as an end).
    pub(crate) async fn next(&mut self) -> Option<Result<WatchLine<K>, ReflectorError>> {
        let lines = match &mut self.reader {
            EventReader::Json(lines) => lines,
            EventReader::Protobuf(frames) => return frames.next_event().await,
        };
        loop {
            let line = match lines.next_line().await {
                Ok(Some(line)) => line,
                Ok(None) => return None,
                Err(e) => {
                    tracing::debug!(error = %e, "watch stream read error; treating as end of watch");
                    return None;
                }
            };
            let bytes: &[u8] = &line;
            if bytes.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            return Some(
                decode_watch_line(bytes).map_err(|source| ReflectorError::Decode {
                    what: "watch event",
                    source,
                }),
            );
        }
    }
}

enum Line {
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
struct LineSplitter {
    chunk: Bytes,
    partial: Vec<u8>,
}

impl LineSplitter {
    fn push(&mut self, chunk: Bytes) {
        debug_assert!(self.chunk.is_empty());
        self.chunk = chunk;
    }

    /// The next complete line, if the buffered data holds one.
    fn next_line(&mut self) -> Option<Line> {
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
    fn finish(&mut self) -> Option<Line> {
        let mut rest = std::mem::take(&mut self.partial);
        rest.extend_from_slice(&std::mem::take(&mut self.chunk));
        (!rest.is_empty()).then_some(Line::Owned(rest))
    }
}

/// A protobuf answer to a request that asked for JSON only.
fn unasked_protobuf(what: &'static str) -> ReflectorError {
    ReflectorError::DecodeProtobuf {
        what,
        reason: "the server answered protobuf to a request for JSON".into(),
    }
}

/// A response body, chunk by chunk, ending for good at its end or at the
/// first read error.
struct BodyChunks {
    body: Body,
    done: bool,
}

impl BodyChunks {
    fn new(body: Body) -> Self {
        Self { body, done: false }
    }

    /// The next chunk of data; `None` once the body has ended (or was
    /// stopped), then forever.
    async fn next(&mut self) -> Result<Option<Bytes>, kube::Error> {
        while !self.done {
            match self.body.frame().await {
                None => self.done = true,
                Some(Err(e)) => {
                    self.done = true;
                    return Err(e);
                }
                Some(Ok(frame)) => {
                    if let Ok(data) = frame.into_data() {
                        return Ok(Some(data));
                    }
                }
            }
        }
        Ok(None)
    }

    /// Reads no more.
    fn stop(&mut self) {
        self.done = true;
    }
}

/// Reads a protobuf watch body frame by frame.
struct FrameReader<K> {
    body: BodyChunks,
    split: protobuf::FrameSplitter,
    codec: protobuf::Codec<K>,
}

impl<K> FrameReader<K> {
    fn new(body: Body, codec: protobuf::Codec<K>) -> Self {
        Self {
            body: BodyChunks::new(body),
            split: protobuf::FrameSplitter::default(),
            codec,
        }
    }

    async fn next_event(&mut self) -> Option<Result<WatchLine<K>, ReflectorError>> {
        let decode_error = |reason: String| ReflectorError::DecodeProtobuf {
            what: "watch event",
            reason,
        };
        loop {
            match self.split.next_frame() {
                Ok(Some(frame)) => {
                    return Some(
                        protobuf::decode_event(&self.codec, &frame)
                            .map_err(|e| decode_error(e.to_string())),
                    );
                }
                Ok(None) => {}
                Err(e) => {
                    self.body.stop();
                    self.split = protobuf::FrameSplitter::default();
                    return Some(Err(decode_error(e.to_string())));
                }
            }
            match self.body.next().await {
                Ok(Some(data)) => self.split.push(&data),
                Ok(None) => {
                    if self.split.has_partial() {
                        tracing::debug!(
                            "protobuf watch stream ended inside a frame; treating as end of watch"
                        );
                    }
                    return None;
                }
                Err(e) => {
                    tracing::debug!(error = %e, "watch stream read error; treating as end of watch");
                    self.split = protobuf::FrameSplitter::default();
                    return None;
                }
            }
        }
    }
}

/// Reads a response body line by line.
struct LineReader {
    body: BodyChunks,
    split: LineSplitter,
}

impl LineReader {
    fn new(body: Body) -> Self {
        Self {
            body: BodyChunks::new(body),
            split: LineSplitter::default(),
        }
    }

    async fn next_line(&mut self) -> Result<Option<Line>, kube::Error> {
        loop {
            if let Some(line) = self.split.next_line() {
                return Ok(Some(line));
            }
            match self.body.next().await {
                Ok(Some(data)) => self.split.push(data),
                Ok(None) => return Ok(self.split.finish()),
                Err(e) => {
                    self.split = LineSplitter::default();
                    return Err(e);
                }
            }
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
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

    #[tokio::test]
    async fn namespace_path_and_description() {
        let lw = ListWatch::<ConfigMap>::new(test_client(), &())
            .namespace("prod")
            .labels("app=x");
        assert_eq!(lw.url_path(), "/api/v1/namespaces/prod/configmaps");
        assert_eq!(lw.describe(), "v1/ConfigMap (namespace prod, labels app=x)");
        let all = ListWatch::<ConfigMap>::new(test_client(), &());
        assert_eq!(all.url_path(), "/api/v1/configmaps");
        let meta = ListWatch::<PartialObjectMeta<ConfigMap>>::new(test_client(), &());
        assert!(meta.is_metadata_only());
    }

    /// A client answering every request with `body` as `content_type`,
    /// recording the `Accept` headers it was sent.
    fn answering(
        content_type: &'static str,
        body: Vec<u8>,
    ) -> (Client, std::sync::Arc<std::sync::Mutex<Vec<String>>>) {
        let accepts = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let seen = std::sync::Arc::clone(&accepts);
        let svc = tower::service_fn(move |req: http::Request<Body>| {
            let accept = req
                .headers()
                .get(header::ACCEPT)
                .and_then(|v| v.to_str().ok())
                .unwrap_or_default()
                .to_owned();
            seen.lock().unwrap().push(accept);
            let body = body.clone();
            async move {
                Ok::<_, std::convert::Infallible>(
                    http::Response::builder()
                        .header(header::CONTENT_TYPE, content_type)
                        .body(Body::from(body))
                        .unwrap(),
                )
            }
        });
        (Client::new(svc, "default"), accepts)
    }

    #[tokio::test]
    async fn protobuf_is_asked_for_and_a_json_answer_still_decodes() {
        let json = br#"{"kind":"ConfigMapList","apiVersion":"v1","metadata":{"resourceVersion":"5"},"items":[{"metadata":{"name":"a","namespace":"n"}}]}"#;
        let (client, accepts) = answering("application/json", json.to_vec());
        let lw = ListWatch::<ConfigMap>::new(client, &());
        assert!(lw.is_protobuf());
        let page = lw.list_page(&ListOptions::default()).await.unwrap();
        assert_eq!(page.items.len(), 1);
        assert_eq!(page.resource_version, "5");
        // JSON only: the request asks for JSON alone
        let page = lw
            .clone()
            .json_only()
            .list_page(&ListOptions::default())
            .await
            .unwrap();
        assert_eq!(page.items.len(), 1);
        assert_eq!(
            *accepts.lock().unwrap(),
            [protobuf::ACCEPT, "application/json"],
            "protobuf (with JSON as the fallback), then JSON alone"
        );
        // a watch answered in JSON is read line by line
        let line = br#"{"type":"ADDED","object":{"metadata":{"name":"w","namespace":"n","resourceVersion":"6"}}}"#;
        let (client, _) = answering("application/json", [&line[..], b"\n"].concat());
        let mut w = ListWatch::<ConfigMap>::new(client, &())
            .watch(&WatchOptions::default())
            .await
            .unwrap();
        assert!(
            matches!(w.next().await, Some(Ok(WatchLine::Added(cm))) if cm.metadata.name.as_deref() == Some("w"))
        );
        assert!(w.next().await.is_none());
    }

    #[tokio::test]
    async fn a_protobuf_answer_to_a_json_request_is_an_error() {
        let (client, _) = answering(protobuf::MEDIA_TYPE, b"k8s\0".to_vec());
        let lw = ListWatch::<DynamicObject>::new(
            client,
            &kube::core::ApiResource::from_gvk(&kube::core::GroupVersionKind::gvk(
                "example.com",
                "v1",
                "Widget",
            )),
        );
        assert!(!lw.is_protobuf());
        let err = lw
            .list_page(&ListOptions::default())
            .await
            .err()
            .expect("an error");
        assert!(err.to_string().contains("protobuf"), "{err}");
    }

    pub(crate) fn test_client() -> Client {
        let svc = tower::service_fn(|_req: http::Request<Body>| async {
            Ok::<_, std::convert::Infallible>(http::Response::new(Body::empty()))
        });
        Client::new(svc, "default")
    }
}
