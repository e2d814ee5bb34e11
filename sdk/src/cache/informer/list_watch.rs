//! [`ListWatch`]: what the [`Reflector`](super::reflector::Reflector) lists and watches —
//! a resource (typed, dynamic or metadata-only), a namespace or all, label and
//! field selectors — and the raw HTTP requests and decoding behind it.
//!
//! Users name what to watch with a [`Scope`](crate::cache::Scope) (the shared
//! cache builds the `ListWatch`):
//!
//! ```no_run
//! use k8s_openapi::api::core::v1::ConfigMap;
//! use kube::core::{ApiResource, DynamicObject, GroupVersionKind, PartialObjectMeta};
//! use opkit::cache::{Scope, SharedCache};
//!
//! # fn doc(client: kube::Client) -> Result<(), opkit::cache::CacheError> {
//! let cache = SharedCache::new(client);
//! // typed, one namespace, label-selected
//! let shop = cache.informer_for(Scope::<ConfigMap>::all().namespace("prod").labels("app=shop"))?;
//! // dynamic
//! let gvk = GroupVersionKind::gvk("example.com", "v1", "Widget");
//! let ar = ApiResource::from_gvk(&gvk);
//! let dynamic = cache.informer_for(Scope::<DynamicObject>::with_dyntype(ar))?;
//! // metadata only (memory-light owner watches)
//! let meta = cache.informer::<PartialObjectMeta<ConfigMap>>()?;
//! # let _ = (shop, dynamic, meta);
//! # Ok(()) }
//! ```
//!
//! Lists are decoded page by page straight into `K`; should one item not
//! deserialize (schema drift, a bad custom resource) the page is decoded again
//! item by item and only that item is set aside. Watch events are decoded
//! line by line the same way: a bad object is reported with its raw
//! `metadata`, which the informer keeps in place of any stale copy (see
//! [`undecodable`](crate::cache::undecodable)); the stream goes on.

use std::{fmt, marker::PhantomData};

use kube::{Client, Resource};
use serde::de::DeserializeOwned;

use super::wire::{self, Answer, ListOptions, Target, WatchOptions, WatchStream};
use crate::cache::{
    cacheable::{self, Cacheable},
    decode::{Format, ListPage},
    error::ReflectorError,
};

/// What to list and watch. Cheap to clone.
pub(crate) struct ListWatch<K> {
    client: Client,
    url_path: String,
    namespace: Option<String>,
    label_selector: Option<String>,
    field_selector: Option<String>,
    /// A KEP-5866 shard selector, set by the reflector of a sharded cache.
    shard_selector: Option<String>,
    /// In label mode: the scope's label selector and the replica's shard
    /// label, joined (what is sent in place of `label_selector`).
    shard_labels: Option<String>,
    metadata_only: bool,
    kind: String,
    /// The view's type name, for a projected kind.
    projection: Option<&'static str>,
    api_version: String,
    ns_template: String,
    /// Protobuf for kinds opkit decodes from it (and not turned off), and
    /// whether managedFields are decoded.
    format: Format<K>,
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
            shard_selector: self.shard_selector.clone(),
            shard_labels: self.shard_labels.clone(),
            metadata_only: self.metadata_only,
            kind: self.kind.clone(),
            projection: self.projection,
            api_version: self.api_version.clone(),
            ns_template: self.ns_template.clone(),
            format: self.format.clone(),
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
    /// Lists and watches the whole objects of `K` (described by
    /// `dyntype`: `&()` for typed resources, an
    /// [`ApiResource`](kube::core::ApiResource) for `DynamicObject`) in all
    /// namespaces, as JSON: what a probe of the server needs.
    fn of_kind(client: Client, dyntype: &K::DynamicType) -> Self {
        Self {
            client,
            url_path: K::url_path(dyntype, None),
            namespace: None,
            label_selector: None,
            field_selector: None,
            shard_selector: None,
            shard_labels: None,
            metadata_only: K::metadata_api(),
            kind: K::kind(dyntype).into_owned(),
            projection: None,
            api_version: K::api_version(dyntype).into_owned(),
            ns_template: K::url_path(dyntype, Some(NS_PLACEHOLDER)),
            format: Format::json(),
            _k: PhantomData,
        }
    }

    /// [`of_kind`](Self::of_kind) for a probe: JSON, whatever the kind.
    #[cfg(feature = "shard")]
    pub(crate) fn probe(client: Client, dyntype: &K::DynamicType) -> Self {
        Self::of_kind(client, dyntype)
    }
}

impl<K: Cacheable> ListWatch<K> {
    /// Lists and watches `K` (described by `dyntype`: `&()` for typed
    /// resources, an [`ApiResource`](kube::core::ApiResource) for
    /// `DynamicObject`) in all namespaces.
    ///
    /// Built-in kinds (every kind with a generated protobuf decoder) are
    /// requested as protobuf, with JSON accepted too; everything else,
    /// custom resources included, as JSON (see
    /// [`ReflectorConfig::protobuf`](super::ReflectorConfig::protobuf)). A
    /// projection is requested as its whole kind is.
    pub(crate) fn new(client: Client, dyntype: &K::DynamicType) -> Self {
        let mut lw = Self::of_kind(client, dyntype);
        lw.projection = K::projection().map(|p| p.name());
        if let Some(codec) = cacheable::protobuf_codec::<K>() {
            lw.format = Format::protobuf(codec);
        }
        lw
    }
}

impl<K> ListWatch<K> {
    /// Restricts to one namespace (for namespaced resources; an empty
    /// string means all namespaces).
    pub(crate) fn namespace(mut self, namespace: impl Into<String>) -> Self {
        let ns = namespace.into();
        if ns.is_empty() {
            return self;
        }
        self.url_path = self.ns_template.replace(NS_PLACEHOLDER, &ns);
        self.namespace = Some(ns);
        self
    }

    /// Restricts to objects matching a label selector (`app=shop,tier!=db`).
    pub(crate) fn labels(mut self, selector: impl Into<String>) -> Self {
        self.label_selector = Some(selector.into()).filter(|s: &String| !s.is_empty());
        self
    }

    /// Restricts to objects matching a field selector (`metadata.name=x`).
    pub(crate) fn fields(mut self, selector: impl Into<String>) -> Self {
        self.field_selector = Some(selector.into()).filter(|s: &String| !s.is_empty());
        self
    }

    /// Lists and watches only the objects `selector` (KEP-5866) selects;
    /// `None`: all.
    pub(crate) fn set_shard_selector(&mut self, selector: Option<String>) {
        self.shard_selector = selector;
    }

    /// Lists and watches only the objects the label selector `selector`
    /// also selects (a sharded cache in label mode); `None`: the scope's
    /// own label selector alone.
    pub(crate) fn set_shard_labels(&mut self, selector: Option<&str>) {
        self.shard_labels = selector.map(|shard| match &self.label_selector {
            Some(own) => format!("{own},{shard}"),
            None => shard.to_owned(),
        });
    }

    /// The client the requests go through.
    pub(crate) fn client(&self) -> Client {
        self.client.clone()
    }

    /// True when lists and watches ask for protobuf (a built-in kind opkit
    /// decodes from protobuf, not turned off); the response's content type
    /// still decides, so a JSON answer is read as JSON.
    pub(crate) fn is_protobuf(&self) -> bool {
        self.format.is_protobuf()
    }

    /// Whether `name` names this kind: its kind (`Pod`) or its
    /// `apiVersion/kind` (`v1/Pod`, `apps/v1/Deployment`).
    pub(crate) fn is_kind(&self, name: &str) -> bool {
        match name.rsplit_once('/') {
            Some((api_version, kind)) => api_version == self.api_version && kind == self.kind,
            None => name == self.kind,
        }
    }

    /// Asks for JSON only, even for kinds opkit decodes from protobuf.
    pub(crate) fn json_only(mut self) -> Self {
        self.format = self.format.json_only();
        self
    }

    /// Leaves `metadata.managedFields` out of what is decoded, for an
    /// informer that strips them anyway: protobuf skips the field, JSON
    /// bytes have it cut out before they are deserialized.
    pub(crate) fn without_managed_fields(mut self) -> Self {
        self.format = self.format.without_managed_fields();
        self
    }

    /// The kind, e.g. `Deployment`.
    pub(crate) fn kind(&self) -> &str {
        &self.kind
    }

    /// The apiVersion, e.g. `apps/v1`.
    pub(crate) fn api_version(&self) -> &str {
        &self.api_version
    }

    /// The request path, e.g. `/api/v1/namespaces/prod/configmaps`.
    pub(crate) fn url_path(&self) -> &str {
        &self.url_path
    }

    /// A human description: `v1/ConfigMap (namespace prod, labels app=shop)`.
    pub(crate) fn describe(&self) -> String {
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
        if let Some(view) = self.projection {
            scope.push(format!("projected as {view}"));
        }
        format!("{}/{} ({})", self.api_version, self.kind, scope.join(", "))
    }

    /// The collection, its selectors and the representation asked for.
    fn target(&self) -> Target<'_> {
        let answer = if self.metadata_only {
            Answer::Metadata
        } else if self.is_protobuf() {
            Answer::Protobuf
        } else {
            Answer::Json
        };
        Target {
            url_path: &self.url_path,
            label_selector: self
                .shard_labels
                .as_deref()
                .or(self.label_selector.as_deref()),
            field_selector: self.field_selector.as_deref(),
            shard_selector: self.shard_selector.as_deref(),
            answer,
        }
    }
}

impl<K> ListWatch<K> {
    /// Whether the server filters by the shard selector set: one LIST of
    /// one object, in JSON, whose `metadata.shardInfo` a KEP-5866 server
    /// (gate `ShardedListAndWatch` on) sets and any other server leaves
    /// out (it ignores the parameter).
    #[cfg(feature = "shard")]
    pub(crate) async fn server_shards(&self) -> Result<bool, ReflectorError> {
        let target = Target {
            answer: Answer::Json,
            ..self.target()
        };
        let opts = ListOptions {
            limit: Some(1),
            ..ListOptions::default()
        };
        let req = wire::request::list(target, &opts)?;
        let (body, _) = wire::send(&self.client, req).await?;
        let bytes = wire::read_all(body).await?;
        #[derive(serde::Deserialize)]
        struct List {
            #[serde(default)]
            metadata: Meta,
        }
        #[derive(serde::Deserialize, Default)]
        struct Meta {
            #[serde(rename = "shardInfo")]
            shard_info: Option<serde_json::Value>,
        }
        Ok(serde_json::from_slice::<List>(&bytes).is_ok_and(|l| l.metadata.shard_info.is_some()))
    }
}

impl<K: DeserializeOwned> ListWatch<K> {
    /// One LIST request.
    pub(crate) async fn list_page(
        &self,
        opts: &ListOptions,
    ) -> Result<ListPage<K>, ReflectorError> {
        let req = wire::request::list(self.target(), opts)?;
        let (body, encoding) = wire::send(&self.client, req).await?;
        let bytes = wire::read_all(body).await?;
        self.format
            .list(encoding, &bytes)
            .map_err(|e| e.into_reflector("list response"))
    }

    /// Opens a WATCH.
    pub(crate) async fn watch(
        &self,
        opts: &WatchOptions,
    ) -> Result<WatchStream<K>, ReflectorError> {
        let req = wire::request::watch(self.target(), opts)?;
        let (body, encoding) = wire::send(&self.client, req).await?;
        let decoder = self
            .format
            .events(encoding)
            .map_err(|e| e.into_reflector("watch response"))?;
        Ok(WatchStream::new(body, decoder))
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::core::{DynamicObject, PartialObjectMeta};

    #[cfg(feature = "protobuf")]
    use crate::cache::decode::{WatchLine, protobuf};
    use http::header;
    use kube::client::Body;

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
        assert!(meta.metadata_only);
    }

    #[tokio::test]
    async fn a_shard_label_joins_the_scopes_own_selector() {
        let mut lw = ListWatch::<ConfigMap>::new(test_client(), &()).labels("app=x");
        lw.set_shard_labels(Some("shard.opkit.dev/r=00"));
        assert_eq!(
            lw.target().label_selector,
            Some("app=x,shard.opkit.dev/r=00")
        );
        lw.set_shard_labels(None);
        assert_eq!(lw.target().label_selector, Some("app=x"));
        let mut all = ListWatch::<ConfigMap>::new(test_client(), &());
        all.set_shard_labels(Some("shard.opkit.dev/r=00"));
        assert_eq!(all.target().label_selector, Some("shard.opkit.dev/r=00"));
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

    #[cfg(feature = "protobuf")]
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
        let (client, _) = answering("application/vnd.kubernetes.protobuf", b"k8s\0".to_vec());
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

    #[cfg(feature = "protobuf")]
    /// Moved from the integration tests (no request needed): which kinds
    /// ask for protobuf is decided by type.
    #[tokio::test]
    async fn custom_resources_and_metadata_stay_json() {
        let gvk = kube::core::GroupVersionKind::gvk("example.com", "v1", "Widget");
        let ar = kube::core::ApiResource::from_gvk(&gvk);
        assert!(!ListWatch::<DynamicObject>::new(test_client(), &ar).is_protobuf());
        assert!(!ListWatch::<PartialObjectMeta<ConfigMap>>::new(test_client(), &()).is_protobuf());
        assert!(ListWatch::<ConfigMap>::new(test_client(), &()).is_protobuf());
        assert!(
            ListWatch::<k8s_openapi::api::core::v1::Secret>::new(test_client(), &()).is_protobuf()
        );
        let deployment =
            ListWatch::<k8s_openapi::api::apps::v1::Deployment>::new(test_client(), &());
        assert!(deployment.is_protobuf());
        assert!(deployment.is_kind("Deployment") && deployment.is_kind("apps/v1/Deployment"));
        assert!(!deployment.is_kind("v1/Deployment") && !deployment.is_kind("Pod"));
    }

    pub(crate) fn test_client() -> Client {
        let svc = tower::service_fn(|_req: http::Request<Body>| async {
            Ok::<_, std::convert::Infallible>(http::Response::new(Body::empty()))
        });
        Client::new(svc, "default")
    }
}
