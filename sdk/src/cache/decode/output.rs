//! What the decoders produce: a [`ListPage`] per LIST response, a
//! [`WatchLine`] per watch event, and a [`SkippedObject`] for an object
//! that does not decode into its type.

use std::collections::BTreeMap;

use crate::cache::{error::ApiStatus, key::ObjectKey};

/// The annotation of the bookmark that ends a streaming list's initial events.
pub(crate) const INITIAL_EVENTS_END_ANNOTATION: &str = "k8s.io/initial-events-end";

/// An object that did not deserialize into `K` and was skipped.
#[derive(Debug, Clone)]
pub(crate) struct SkippedObject {
    pub namespace: Option<String>,
    pub name: Option<String>,
    pub resource_version: Option<String>,
    pub error: String,
    /// What of `metadata` decodes (without `managedFields`); the default
    /// when even that does not.
    pub metadata: Box<k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta>,
}

impl SkippedObject {
    /// The cache key, from the raw `metadata` (which decodes even when the
    /// whole object does not); `None` without a name.
    pub(crate) fn key(&self) -> Option<ObjectKey> {
        let name = self.name.as_deref().filter(|n| !n.is_empty())?;
        Some(ObjectKey::new(self.namespace.as_deref(), name))
    }
}

/// One decoded LIST page.
pub(crate) struct ListPage<K> {
    pub items: Vec<K>,
    pub resource_version: String,
    pub continue_token: Option<String>,
    pub skipped: Vec<SkippedObject>,
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

impl<K> WatchLine<K> {
    /// The bookmark event of an object's `resourceVersion` and annotations.
    pub(crate) fn bookmark(
        resource_version: Option<String>,
        annotations: Option<&BTreeMap<String, String>>,
    ) -> Self {
        let initial_events_end = annotations
            .and_then(|a| a.get(INITIAL_EVENTS_END_ANNOTATION))
            .is_some_and(|v| v == "true");
        WatchLine::Bookmark {
            resource_version,
            initial_events_end,
        }
    }
}
