//! Typed errors of `opkit::cache`, one enum per concern.
//!
//! ```
//! use opkit::cache::{CacheError, IndexError};
//!
//! let err = CacheError::from(IndexError::UnknownIndex("by-owner".into()));
//! assert!(err.to_string().contains("by-owner"));
//! ```

use std::time::Duration;

/// An index operation on a [`Store`](super::Store) (or an informer's indexes) failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IndexError {
    /// No index function is registered under this name.
    #[error("no index named {0:?}: add it with add_index before reading it")]
    UnknownIndex(String),
    /// An index function with this name is already registered.
    #[error("an index named {0:?} already exists")]
    DuplicateIndex(String),
}

/// The [`DeltaFifo`](super::DeltaFifo) was closed; nothing more will be popped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the DeltaFIFO is closed")]
pub struct FifoClosed;

/// A `Status` returned by the API server for a failed request or in a watch
/// `ERROR` event.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ApiStatus {
    /// HTTP status code (e.g. 410 for an expired resourceVersion).
    pub code: u16,
    /// Machine-readable reason (`Expired`, `Gone`, `Forbidden`, ...).
    pub reason: String,
    /// Human-readable message.
    pub message: String,
}

impl std::fmt::Display for ApiStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}: {}", self.code, self.reason, self.message)
    }
}

impl ApiStatus {
    /// `410 Gone` / reason `Expired` or `Gone`: the requested resourceVersion
    /// (or continue token) is too old; a full relist is needed.
    pub(crate) fn is_expired(&self) -> bool {
        self.code == 410 || self.reason == "Expired" || self.reason == "Gone"
    }

    /// `429 Too Many Requests` (also what a starting API server's watch
    /// cache answers): retry after a backoff.
    pub(crate) fn is_too_many_requests(&self) -> bool {
        self.code == 429
    }

    /// `403 Forbidden`: the identity lacks RBAC permission.
    pub fn is_forbidden(&self) -> bool {
        self.code == 403
    }

    /// `404 Not Found` on a collection: the API server does not serve the
    /// resource (a CRD that is not installed, a wrong apiVersion).
    pub fn is_not_found(&self) -> bool {
        self.code == 404
    }
}

/// Why the lists of an informer keep failing, for the failures that waiting
/// alone will not fix (the manager gives up on them after a bounded number
/// of attempts at start).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ListFailure {
    /// The API server answered 404: the resource is not served.
    NotServed,
    /// The API server could not be reached; the error with its causes.
    Unreachable(String),
    /// Anything else (403, 5xx, ...): left to the sync timeout.
    Other,
}

/// The consecutive failed list/watch rounds of a reflector since its last
/// successful list, and the last one's class.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct ListFailures {
    /// How many rounds failed in a row (0 after a successful list).
    pub(crate) consecutive: u32,
    /// The class of the last failure.
    pub(crate) last: Option<ListFailure>,
}

/// `error` and its sources, joined by `: ` (kube's transport errors say
/// little at the top: "client error (Connect)").
pub(crate) fn error_chain(error: &(dyn std::error::Error + 'static)) -> String {
    let mut out = error.to_string();
    let mut source = error.source();
    while let Some(e) = source {
        let s = e.to_string();
        if !out.contains(&s) {
            out.push_str(": ");
            out.push_str(&s);
        }
        source = e.source();
    }
    out
}

/// A list or watch request of an informer failed.
#[derive(Debug, thiserror::Error)]
pub enum ReflectorError {
    /// The API server answered with an error status.
    #[error("the API server answered {0}")]
    Api(ApiStatus),
    /// The request could not be sent or its response not read (connection
    /// refused or reset, TLS, timeout).
    #[error("request failed: {0}")]
    Transport(#[source] kube::Error),
    /// A response (not a single object: those are skipped) could not be decoded.
    #[error("could not decode {what}: {source}")]
    Decode {
        /// What was being decoded.
        what: &'static str,
        /// The JSON error.
        #[source]
        source: serde_json::Error,
    },
    /// A protobuf response (not a single object: those are skipped) could
    /// not be decoded.
    #[error("could not decode {what} (protobuf): {reason}")]
    DecodeProtobuf {
        /// What was being decoded.
        what: &'static str,
        /// What is wrong with it.
        reason: String,
    },
    /// The request could not be built (bad selector characters, a
    /// resourceVersion match without a resourceVersion, ...).
    #[error("could not build the request: {0}")]
    Request(#[source] kube::core::request::Error),
    /// A watch closed within a second without delivering any event.
    #[error("very short watch: the watch closed after {0:?} without any event")]
    VeryShortWatch(Duration),
    /// The streaming list ended before the `k8s.io/initial-events-end` bookmark.
    #[error("the streaming list ended before the initial-events-end bookmark")]
    StreamingListIncomplete,
}

impl ReflectorError {
    /// True when the error means the resourceVersion (or continue token) has
    /// expired: 410 Gone / Expired.
    pub(crate) fn is_expired(&self) -> bool {
        matches!(self, Self::Api(s) if s.is_expired())
    }

    /// True when retrying the same watch after a backoff is the right move
    /// (connection refused/reset, 429, 5xx) rather than a relist.
    pub(crate) fn is_retriable(&self) -> bool {
        match self {
            Self::Transport(_) => true,
            Self::Api(s) => s.is_too_many_requests() || s.code >= 500,
            _ => false,
        }
    }

    /// The class of this error for the bounded retry at start.
    pub(crate) fn list_failure(&self) -> ListFailure {
        match self {
            Self::Api(s) if s.is_not_found() => ListFailure::NotServed,
            Self::Transport(e) => ListFailure::Unreachable(error_chain(e)),
            _ => ListFailure::Other,
        }
    }
}

/// An error of the shared cache, the informer or a handler registration.
#[derive(Debug, thiserror::Error)]
pub enum CacheError {
    /// `wait_for_sync` timed out. `kinds` names each informer that did not
    /// sync, with its last list/watch error when there was one.
    #[error(
        "cache did not sync within {timeout:?}: {}. The usual cause is missing RBAC \
         permission to list and watch the resource (check the ClusterRole/Role bound to \
         the operator's ServiceAccount), or a CRD that is not installed",
        .kinds.join("; ")
    )]
    SyncTimeout {
        /// The timeout that elapsed.
        timeout: Duration,
        /// One description per informer that did not sync.
        kinds: Vec<String>,
    },
    /// The API server answers 404 to the list of a custom resource: its
    /// CustomResourceDefinition is not installed.
    #[error(
        "the CustomResourceDefinition for {crd} is not installed (listing {informer} answered \
         404 Not Found {attempts} times): install it (`make install` in a project made by \
         `cargo opkit new`, or `kubectl apply -f` the CRD manifest), then start again"
    )]
    CrdNotInstalled {
        /// The CRD's name, `<plural>.<group>` (e.g. `memcacheds.cache.example.com`).
        crd: String,
        /// The informer that could not list.
        informer: String,
        /// How many list attempts failed.
        attempts: u32,
    },
    /// The API server answers 404 to the list of a built-in kind: it does
    /// not serve this apiVersion/kind.
    #[error(
        "the API server does not serve {informer}: GET {path} answered 404 Not Found {attempts} \
         times; check the apiVersion and kind against `kubectl api-resources`"
    )]
    KindNotServed {
        /// The informer that could not list.
        informer: String,
        /// The request path that answered 404.
        path: String,
        /// How many list attempts failed.
        attempts: u32,
    },
    /// The API server could not be reached.
    #[error(
        "cannot reach the API server at {url} ({attempts} attempts to list): {error}; check \
         that it is running and that the kubeconfig (or the in-cluster configuration) points \
         at it"
    )]
    Unreachable {
        /// The API server's URL, as configured.
        url: String,
        /// The last connection error with its causes.
        error: String,
        /// How many list attempts failed.
        attempts: u32,
    },
    /// The cache or informer was stopped before it synced.
    #[error("the cache was stopped before {0} synced")]
    Stopped(String),
    /// An event handler was added to an informer that is stopped (client-go
    /// refuses it the same way): it would never get an event. Take the
    /// informer from a running cache, or register handlers before stopping.
    #[error(
        "the informer {0} is stopped: it accepts no new event handlers (register handlers \
         before stopping it, or on an informer of a running cache)"
    )]
    InformerStopped(String),
    /// A setting that only takes effect at start (the watch-error handler)
    /// was changed on an informer that had already started.
    #[error(
        "the informer {0} has already started: set its watch-error handler before starting it \
         (or for every informer with SharedCacheBuilder::watch_error_handler)"
    )]
    InformerStarted(String),
    /// A read asked for a kind the cache has no informer for.
    #[error(
        "the cache has no informer for {0}: watch the kind (for/owns/watches/reads on the \
         controller), take a handle with SharedCache::store, or read it through the \
         reconcile Context, which starts one"
    )]
    NoInformer(String),
    /// A read asked for a namespace outside a namespaced cache's scope.
    #[error(
        "namespace {namespace:?} is not in the cache: it watches only namespace {cached:?} \
         (ManagerBuilder::namespace / SharedCacheBuilder::namespace)"
    )]
    NamespaceNotCached {
        /// The namespace asked for.
        namespace: String,
        /// The namespace the cache watches.
        cached: String,
    },
    /// A read waited for the cache to show a write this process made, and
    /// the informer did not get there in time (see
    /// [read-your-own-writes](super::read_your_writes)).
    #[error("{0}")]
    WriteNotObserved(Box<UnobservedWrite>),
    /// An operation needs a Tokio runtime and was called outside one.
    #[error("no Tokio runtime: {0} must be called from within a Tokio runtime")]
    NoRuntime(&'static str),
    /// An index error.
    #[error(transparent)]
    Index(#[from] IndexError),
    /// A watch needs metadata that the projection of the kind it watches
    /// does not keep (see [`Projection`](super::Projection)).
    #[error(
        "the projection {projection} drops metadata.{field}, which {needed_by} needs: keep it \
         (Projection::{constant} = true, the default) or watch the whole kind"
    )]
    ProjectionDropsField {
        /// The projection type.
        projection: &'static str,
        /// The metadata field it drops.
        field: &'static str,
        /// What needs the field.
        needed_by: &'static str,
        /// The `Projection` constant that keeps it.
        constant: &'static str,
    },
    /// The object read is in the cluster, but its current version does not
    /// deserialize into the Rust type: it is not deleted, and its metadata
    /// (finalizers, deletion, owners) is in the record (see
    /// [`undecodable`](super::undecodable)).
    #[error("{0}")]
    Undecodable(std::sync::Arc<super::undecodable::UndecodableObject>),
}

/// What [`CacheError::WriteNotObserved`] reports: which write the cache did
/// not show in time.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "the cache ({informer}) did not show {written} of {object}, written by this process, \
     within {waited:?}: the watch is lagging or was interrupted; the key is retried and the \
     next read returns what the cache holds (raise the bound with \
     Controller::read_your_writes_timeout)"
)]
pub struct UnobservedWrite {
    /// The informer read.
    pub informer: String,
    /// `namespace/name` of the object written.
    pub object: String,
    /// What was written: `resourceVersion N`, or `its deletion`.
    pub written: String,
    /// How long the read waited.
    pub waited: Duration,
}
