//! What a reflector is set up with: its settings ([`ReflectorConfig`]),
//! the transform run on each object, the watch-error handler, and what it
//! lists by beyond its own selectors ([`ListFilter`]).

use std::{sync::Arc, time::Duration};

use kube::Resource;

use super::backoff::BackoffConfig;
use crate::cache::error::ReflectorError;

/// A function applied to every object before it is stored (e.g. to drop
/// fields the controller never reads, saving memory).
pub type Transform<K> = Arc<dyn Fn(&mut K) + Send + Sync>;

/// Called with every failed list or watch attempt of an informer (client-go's
/// `WatchErrorHandler`), for logging and metrics: the informer's
/// description ([`SharedIndexInformer::describe`](super::SharedIndexInformer::describe))
/// and the error. It runs on the reflector's task, before the retry's
/// backoff: keep it quick and non-blocking. The reflector logs the failure
/// either way, and retries whatever the handler does; a panic in it is
/// logged and ignored. A `410 Gone` that only calls for a relist, and a
/// streaming list that falls back to LIST in the same round, are not
/// failures (the LIST's outcome is reported).
pub type WatchErrorHandler = Arc<dyn Fn(&str, &ReflectorError) + Send + Sync>;

/// The default transform: drops `metadata.managedFields`, which is often the
/// largest part of an object and is almost never read by a controller.
pub(crate) fn strip_managed_fields<K: Resource>(obj: &mut K) {
    obj.meta_mut().managed_fields = None;
}

/// Whether to use a streaming list (`sendInitialEvents`) for the initial
/// state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum StreamingList {
    /// Use it when the server supports it, else paginated LIST (default).
    #[default]
    Auto,
    /// Always paginated LIST.
    Off,
}

/// Reflector settings.
#[derive(Debug, Clone)]
pub struct ReflectorConfig {
    /// Objects per LIST page (500).
    pub page_size: u32,
    /// Streaming list or LIST ([`StreamingList::Auto`]).
    pub streaming_list: StreamingList,
    /// Minimum server-side watch timeout; the actual one is random in
    /// `[min, 2*min]` (5 min).
    pub min_watch_timeout: Duration,
    /// Backoff between failed rounds.
    pub backoff: BackoffConfig,
    /// Ask for protobuf for the built-in kinds (every listable kind of
    /// k8s-openapi, `CustomResourceDefinition` and `APIService` included),
    /// as client-go does for built-in kinds (true; needs the `protobuf`
    /// feature). The request accepts JSON as well and the response's
    /// content type decides; custom resources, `DynamicObject` and
    /// metadata-only informers always use JSON. False: JSON for everything.
    pub protobuf: bool,
    /// Kinds read as JSON even when [`protobuf`](Self::protobuf) is on, by
    /// kind (`Pod`) or by `apiVersion/kind` (`apps/v1/Deployment`,
    /// `v1/Pod`). Empty by default.
    pub json_kinds: Vec<String>,
}

impl Default for ReflectorConfig {
    fn default() -> Self {
        Self {
            page_size: 500,
            streaming_list: StreamingList::Auto,
            min_watch_timeout: Duration::from_secs(300),
            backoff: BackoffConfig::default(),
            protobuf: true,
            json_kinds: Vec::new(),
        }
    }
}

/// What a reflector lists and watches by beyond its informer's own
/// selectors, as the informer's owner hands it (a sharded replica's share
/// of a kind): an extra label selector and a KEP-5866 shard selector.
/// The reflector applies whatever it is given and relists when it changes;
/// deciding which (and probing the server) is its owner's job.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct ListFilter {
    /// A label selector, joined to the informer's own.
    pub(crate) labels: Option<String>,
    /// A KEP-5866 `shardSelector` (served only where the server filters by it).
    pub(crate) shard_selector: Option<String>,
}
