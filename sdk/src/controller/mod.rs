//! Controllers: watches that enqueue keys, and workers that reconcile them.
//!
//! ```no_run
//! use std::time::Duration;
//! use k8s_openapi::api::apps::v1::Deployment;
//! use k8s_openapi::api::core::v1::{ConfigMap, Secret, Service};
//! use opkit::cache::SharedCache;
//! use opkit::controller::Controller;
//! use opkit::predicate::{GenerationChanged, LabelSelector};
//! use opkit::reconcile::{Action, Context, Reconcile, ReconcileError, Request};
//! use opkit::workqueue::Quota;
//!
//! struct Web;
//!
//! impl Reconcile for Web {
//!     type Object = Deployment;
//!
//!     async fn reconcile(&self, req: Request, ctx: &Context<Deployment>) -> Result<Action, ReconcileError> {
//!         let Some(_deployment) = ctx.object().await? else {
//!             return Ok(Action::done());
//!         };
//!         let _service = ctx.get::<Service>(req.namespace.as_deref(), &req.name).await?;
//!         // ... create or update the Service it owns ...
//!         Ok(Action::done())
//!     }
//! }
//!
//! # async fn example(client: kube::Client) -> Result<(), Box<dyn std::error::Error>> {
//! let cache = SharedCache::new(client);
//! let controller = Controller::with_predicate(Web, GenerationChanged) // spec changes only
//!     .owns::<Service>() // every change of an owned Service wakes its controller-owner
//!     // Deployments name their settings ConfigMap in an annotation; index them by it ...
//!     .index::<Deployment>("settings", |d| {
//!         d.metadata.annotations.iter().flatten()
//!             .filter(|(k, _)| *k == "example.com/settings")
//!             .map(|(_, v)| v.clone())
//!             .collect()
//!     })
//!     // ... and a ConfigMap change wakes every Deployment of its namespace indexed by its name.
//!     .watches_by_index::<ConfigMap>("settings")
//!     .watches::<Secret>(|secret, deployments| {
//!         // a Secret change wakes the Deployment of the same name, if there is one
//!         let name = secret.metadata.name.as_deref().unwrap_or_default();
//!         deployments
//!             .get(secret.metadata.namespace.as_deref(), name)
//!             .and_then(|d| Request::for_object(&*d))
//!             .into_iter()
//!             .collect()
//!     })
//!     .with_event_filter(LabelSelector::new([("team", "web")].into_iter().collect()))
//!     .max_concurrent_reconciles(4)
//!     .throttle(Quota::per_second(50).burst(10)); // requeue_after loops included
//! controller.run(&cache, tokio::signal::ctrl_c().map(|_| ())).await?; // starts the cache
//! # Ok(()) }
//! # use futures::FutureExt;
//! ```
//!
//! Each watch has its own predicates (`with_predicate`, `owns_with`,
//! `watches_with`); [`Controller::with_event_filter`] filters every watch.
//! A mapper gets the primary kind's [`Store`], typed: it reads what it
//! needs without a fallible lookup of the kind.
//! `owns` caches whole objects, so the reconciler can read them;
//! [`Controller::owns_metadata`] caches only their metadata when memory
//! matters more.
//!
//! Per key, at most one reconcile runs at a time; up to
//! `max_concurrent_reconciles` keys run at once. Workers start only after
//! every cache the controller watches or reads has synced; the result of each
//! reconcile decides what happens to the key (see [`crate::reconcile`]).

mod error;
mod sharded;
mod stats;
mod worker;

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use kube::Resource;
use kube::core::PartialObjectMeta;
use serde::de::DeserializeOwned;
use tokio_util::sync::CancellationToken;

pub use error::ControllerError;
pub use stats::{ReconcileCounts, ReconcileStats};
pub(crate) use stats::{ReconcileObserver, ReconcileResult};

use crate::cache::{CacheError, START_LIST_ATTEMPTS, SharedCache, Store};
use crate::client::EventRecorder;
use crate::handler::{EnqueueHandler, Mapper, OwnerKind, WatchPredicates, owner_of, the_object};
use crate::metrics::Metrics;
use crate::predicate::{HasMetadata, Predicate};
use crate::reconcile::{ControllerShared, Reconcile, Request};
use crate::workqueue::{Quota, RateLimiter, WorkQueue};

/// Registers one watch of a controller on the shared cache.
type WatchFn = Box<
    dyn FnOnce(&SharedCache, &WatchTarget) -> Result<RegisteredWatch, (String, CacheError)> + Send,
>;

/// Registers one index of a controller on the shared cache.
type IndexFn = Box<dyn FnOnce(&SharedCache) -> Result<(), (String, CacheError)> + Send>;

/// Makes the cache of one kind list only this replica's shard.
type ShardKindFn = fn(
    &crate::shard::ShardHandle,
    &SharedCache,
    tokio::sync::watch::Receiver<Option<crate::shard::ShardSelector>>,
);

/// Waits until a registered watch (or read) has synced; false if it never will.
type SyncWait = Box<dyn Fn() -> futures::future::BoxFuture<'static, bool> + Send + Sync>;

/// A registered watch: its kind, its sync state, and how to remove it.
struct RegisteredWatch {
    kind: String,
    synced: SyncWait,
    remove: Box<dyn FnOnce() + Send + Sync>,
}

/// What every watch of a controller enqueues into, and how.
struct WatchTarget {
    queue: WorkQueue<Request>,
    event_filters: Arc<[Arc<dyn Predicate<dyn HasMetadata>>]>,
}

/// A controller for the kind of its reconciler ([`Reconcile::Object`]).
pub struct Controller<R> {
    settings: RunSettings,
    reconciler: Arc<R>,
    indexes: Vec<IndexFn>,
    watches: Vec<WatchFn>,
    /// The owned kinds a sharded cache divides besides the primary: those
    /// of the same scope (namespaced or not) as the primary.
    sharded_kinds: Vec<ShardKindFn>,
    event_filters: Vec<Arc<dyn Predicate<dyn HasMetadata>>>,
    rate_limiter: Option<Box<dyn RateLimiter<Request>>>,
    throttle: Option<Quota>,
    primary: OwnerKind,
    stats: Arc<ReconcileStats>,
    metrics: Option<Metrics>,
    observer: Option<Arc<dyn ReconcileObserver>>,
}

/// How long running reconciles get to finish at shutdown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ShutdownBound {
    /// The controller's own bound (it runs on its own).
    Own(Duration),
    /// No bound of its own: the controller drains until its runner stops
    /// it, as the manager does at its graceful shutdown timeout.
    Runner,
}

/// The settings of a controller's run, set on the builder and read by its
/// workers.
#[derive(Debug, Clone)]
struct RunSettings {
    name: String,
    max_concurrent_reconciles: usize,
    reconcile_timeout: Option<Duration>,
    cache_sync_timeout: Duration,
    shutdown: ShutdownBound,
    read_your_writes: Option<Duration>,
    shard: Option<crate::shard::ShardHandle>,
}

/// Resolves to the leading scope once the workers of a prepared controller
/// may start (a token cancelled when leadership ends), or to `None` if they
/// never may (the elector stopped first).
pub(crate) type StartGate = futures::future::BoxFuture<'static, Option<CancellationToken>>;

impl<R> std::fmt::Debug for Controller<R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Controller")
            .field("name", &self.settings.name)
            .field("watches", &self.watches.len())
            .field(
                "max_concurrent_reconciles",
                &self.settings.max_concurrent_reconciles,
            )
            .finish_non_exhaustive()
    }
}

impl<R: Reconcile> Controller<R> {
    /// A controller reconciling objects of the reconciler's kind
    /// ([`Reconcile::Object`]): every change of one enqueues it (as
    /// controller-runtime's `For`). Named after the kind (lower case) unless
    /// [`name`](Self::name) says otherwise.
    ///
    /// This is the builder alone: for a reconciler with
    /// `#[derive(Controller)]`, call
    /// [`ControllerWiring::controller`](crate::ControllerWiring::controller)
    /// (`MyReconciler.controller()`) instead, which also applies the
    /// attribute's `owns(..)`, `watches(..)`, `index(..)` and other options;
    /// `Controller::new` ignores them.
    pub fn new(reconciler: R) -> Self {
        Self::primary(reconciler, WatchPredicates::new())
    }

    /// [`new`](Self::new), enqueueing only the events of the primary kind
    /// that pass `predicate` (combine several with
    /// [`PredicateExt`](crate::predicate::PredicateExt)).
    pub fn with_predicate(reconciler: R, predicate: impl Predicate<R::Object>) -> Self {
        Self::primary(reconciler, WatchPredicates::new().with(predicate))
    }

    fn primary(reconciler: R, predicates: WatchPredicates<R::Object>) -> Self {
        let primary = OwnerKind::of::<R::Object>();
        let mut controller = Self {
            settings: RunSettings {
                name: primary.kind.to_lowercase(),
                max_concurrent_reconciles: 1,
                reconcile_timeout: None,
                cache_sync_timeout: Duration::from_secs(120),
                shutdown: ShutdownBound::Own(Duration::from_secs(30)),
                read_your_writes: Some(crate::cache::read_your_writes::DEFAULT_WAIT),
                shard: None,
            },
            reconciler: Arc::new(reconciler),
            indexes: Vec::new(),
            watches: Vec::new(),
            sharded_kinds: Vec::new(),
            event_filters: Vec::new(),
            rate_limiter: None,
            throttle: None,
            primary,
            stats: Arc::default(),
            metrics: None,
            observer: None,
        };
        controller.add_watch::<R::Object>(|_| Ok(the_object::<R::Object>()), predicates);
        controller
    }

    /// Also reconcile the controller-owner (of the primary kind) of objects
    /// of kind `C` when they change. Caches whole objects, so the
    /// reconciler can read them (as controller-runtime's `Owns`).
    pub fn owns<C>(self) -> Self
    where
        C: Resource<DynamicType = ()> + DeserializeOwned + Send + Sync + 'static,
        C::Scope: 'static,
    {
        self.owns_watch::<C>(WatchPredicates::new())
    }

    /// [`owns`](Self::owns), for the events that pass `predicate` only.
    pub fn owns_with<C>(self, predicate: impl Predicate<C>) -> Self
    where
        C: Resource<DynamicType = ()> + DeserializeOwned + Send + Sync + 'static,
        C::Scope: 'static,
    {
        self.owns_watch::<C>(WatchPredicates::new().with(predicate))
    }

    /// [`owns`](Self::owns), caching only the metadata of `C` objects
    /// (`PartialObjectMeta<C>`): less memory, and the reconciler reads them
    /// as `PartialObjectMeta<C>`.
    pub fn owns_metadata<C>(self) -> Self
    where
        C: Resource<DynamicType = ()> + Send + Sync + 'static,
        C::Scope: 'static,
    {
        self.owns_watch::<PartialObjectMeta<C>>(WatchPredicates::new())
    }

    /// [`owns_metadata`](Self::owns_metadata), for the events that pass
    /// `predicate` only.
    pub fn owns_metadata_with<C>(self, predicate: impl Predicate<PartialObjectMeta<C>>) -> Self
    where
        C: Resource<DynamicType = ()> + Send + Sync + 'static,
        C::Scope: 'static,
    {
        self.owns_watch::<PartialObjectMeta<C>>(WatchPredicates::new().with(predicate))
    }

    /// [`owns`](Self::owns), caching each `C` object as its projection
    /// `P` ([`Projected<C, P>`](crate::cache::Projected), see
    /// [projections](crate::cache::Projection)): the mapping runs once per
    /// event, and the reconciler, predicates and reads see `P`. A
    /// projection that drops `ownerReferences` fails the wiring.
    ///
    /// ```
    /// use k8s_openapi::api::{apps::v1::Deployment, core::v1::Pod};
    /// use opkit::cache::Projection;
    /// use opkit::controller::Controller;
    /// use opkit::reconcile::{Action, Context, Reconcile, ReconcileError, Request};
    ///
    /// struct PodPhase(Option<String>);
    /// impl Projection<Pod> for PodPhase {
    ///     fn project(pod: Pod) -> Self {
    ///         PodPhase(pod.status.and_then(|s| s.phase))
    ///     }
    /// }
    ///
    /// struct Web;
    /// impl Reconcile for Web {
    ///     type Object = Deployment;
    ///     async fn reconcile(&self, _: Request, _: &Context<Deployment>) -> Result<Action, ReconcileError> {
    ///         Ok(Action::done())
    ///     }
    /// }
    ///
    /// let controller = Controller::new(Web).owns_projected::<Pod, PodPhase>();
    /// # let _ = controller;
    /// ```
    pub fn owns_projected<C, P>(self) -> Self
    where
        C: Resource<DynamicType = ()> + DeserializeOwned + Send + Sync + 'static,
        C::Scope: 'static,
        P: crate::cache::Projection<C>,
    {
        self.owns_watch::<crate::cache::Projected<C, P>>(WatchPredicates::new())
    }

    fn owns_watch<C>(mut self, predicates: WatchPredicates<C>) -> Self
    where
        C: Resource<DynamicType = ()> + DeserializeOwned + Send + Sync + 'static,
        C::Scope: 'static,
    {
        let owner = self.primary.clone();
        // An owned object lives in its owner's namespace: with namespaces
        // hashed, it lands on its owner's replica when both kinds are
        // namespaced (or both cluster-scoped: all on one replica).
        if crate::cache::is_namespaced::<C>() == owner.namespaced {
            self.sharded_kinds.push(sharded::shard_kind::<C>);
        }
        self.add_watch::<C>(
            move |_| {
                // asking the kind registers a projection (see cache::projection)
                let _ = C::kind(&());
                if let Some(projection) = crate::cache::projection_drops_owner_references::<C>() {
                    return Err(CacheError::ProjectionDropsField {
                        projection,
                        field: "ownerReferences",
                        needed_by: "owns (mapping an owned object to its owner)",
                        constant: "OWNER_REFERENCES",
                    });
                }
                Ok(owner_of(owner))
            },
            predicates,
        );
        self
    }

    /// Also watch objects of kind `W` and reconcile the requests `map`
    /// returns for each changed object. `map` gets the primary kind's
    /// [`Store`] to look up the objects that refer to the changed one (or
    /// an index of it: see [`watches_by_index`](Self::watches_by_index)); it
    /// runs on the cache's event path, so it should only read.
    pub fn watches<W>(
        self,
        map: impl Fn(&W, &Store<R::Object>) -> Vec<Request> + Send + Sync + 'static,
    ) -> Self
    where
        W: Resource<DynamicType = ()> + DeserializeOwned + Send + Sync + 'static,
        W::Scope: 'static,
    {
        self.mapped_watch::<W>(map, WatchPredicates::new())
    }

    /// [`watches`](Self::watches), for the events that pass `predicate` only.
    pub fn watches_with<W>(
        self,
        map: impl Fn(&W, &Store<R::Object>) -> Vec<Request> + Send + Sync + 'static,
        predicate: impl Predicate<W>,
    ) -> Self
    where
        W: Resource<DynamicType = ()> + DeserializeOwned + Send + Sync + 'static,
        W::Scope: 'static,
    {
        self.mapped_watch::<W>(map, WatchPredicates::new().with(predicate))
    }

    fn mapped_watch<W>(
        mut self,
        map: impl Fn(&W, &Store<R::Object>) -> Vec<Request> + Send + Sync + 'static,
        predicates: WatchPredicates<W>,
    ) -> Self
    where
        W: Resource<DynamicType = ()> + DeserializeOwned + Send + Sync + 'static,
        W::Scope: 'static,
    {
        self.add_watch::<W>(
            move |cache| {
                let store = cache.store::<R::Object>()?;
                Ok(Mapper::from_fn(move |obj: &W| map(obj, &store)))
            },
            predicates,
        );
        self
    }

    /// Also watch objects of kind `W`, and on a change reconcile every
    /// object of the primary kind whose index `index` (added with
    /// [`index`](Self::index)) lists the changed object's name — in the
    /// changed object's namespace when both kinds are namespaced
    /// (controller-runtime's `IndexField` plus a map function listing by
    /// that field). An index nobody added fails the wiring, not a reconcile.
    pub fn watches_by_index<W>(self, index: impl Into<String>) -> Self
    where
        W: Resource<DynamicType = ()> + DeserializeOwned + Send + Sync + 'static,
        W::Scope: 'static,
    {
        self.index_watch::<W>(index.into(), WatchPredicates::new())
    }

    /// [`watches_by_index`](Self::watches_by_index), for the events that
    /// pass `predicate` only.
    pub fn watches_by_index_with<W>(
        self,
        index: impl Into<String>,
        predicate: impl Predicate<W>,
    ) -> Self
    where
        W: Resource<DynamicType = ()> + DeserializeOwned + Send + Sync + 'static,
        W::Scope: 'static,
    {
        self.index_watch::<W>(index.into(), WatchPredicates::new().with(predicate))
    }

    fn index_watch<W>(mut self, index: String, predicates: WatchPredicates<W>) -> Self
    where
        W: Resource<DynamicType = ()> + DeserializeOwned + Send + Sync + 'static,
        W::Scope: 'static,
    {
        let primary_namespaced = self.primary.namespaced;
        self.add_watch::<W>(
            move |cache| {
                let store = cache.store::<R::Object>()?;
                if !store.index_names().contains(&index) {
                    return Err(CacheError::Index(crate::cache::IndexError::UnknownIndex(
                        index,
                    )));
                }
                Ok(Mapper::from_fn(move |obj: &W| {
                    let meta = obj.meta();
                    let Some(name) = meta.name.as_deref() else {
                        return Vec::new();
                    };
                    let same_namespace = primary_namespaced && meta.namespace.is_some();
                    store
                        .by_index(&index, name)
                        .unwrap_or_default()
                        .iter()
                        .filter(|p| !same_namespace || p.meta().namespace == meta.namespace)
                        .filter_map(|p| Request::for_object(&**p))
                        .collect()
                }))
            },
            predicates,
        );
        self
    }

    /// Adds the index `name` to the cache's informer of kind `T` when the
    /// controller is wired (before any of its watches): `values` gives an
    /// object's index values. Read it with
    /// [`Context::by_index`](crate::reconcile::Context::by_index), or map
    /// events through it with [`watches_by_index`](Self::watches_by_index).
    /// A second index of the same name on one cache fails the wiring.
    pub fn index<T>(
        mut self,
        name: impl Into<String>,
        values: impl Fn(&T) -> Vec<String> + Send + Sync + 'static,
    ) -> Self
    where
        T: Resource<DynamicType = ()> + DeserializeOwned + Send + Sync + 'static,
        T::Scope: 'static,
    {
        let name = name.into();
        self.indexes.push(Box::new(move |cache: &SharedCache| {
            let kind = T::kind(&()).into_owned();
            cache.add_index::<T>(name, values).map_err(|e| (kind, e))
        }));
        self
    }

    /// Also reconcile every request `source` yields: a source of events
    /// outside any watch (a webhook callback, a timer, another system),
    /// as controller-runtime's `source.Channel`. Requests go through the
    /// same queue as watch events (deduplicated, throttled, never two
    /// workers on one key) at normal priority; the controller's event
    /// filters do not apply (there is no object to filter). The source is
    /// read from when the controller is wired until it ends or the
    /// controller stops.
    ///
    /// ```
    /// use k8s_openapi::api::core::v1::ConfigMap;
    /// use opkit::controller::Controller;
    /// use opkit::reconcile::{Action, Context, Reconcile, ReconcileError, Request};
    ///
    /// struct Settings;
    /// impl Reconcile for Settings {
    ///     type Object = ConfigMap;
    ///     async fn reconcile(&self, _: Request, _: &Context<ConfigMap>) -> Result<Action, ReconcileError> {
    ///         Ok(Action::done())
    ///     }
    /// }
    ///
    /// let (wake, woken) = tokio::sync::mpsc::channel(16);
    /// let controller = Controller::new(Settings).watches_channel(woken);
    /// // elsewhere, e.g. in a webhook callback:
    /// wake.try_send(Request::namespaced("shop", "settings")).ok();
    /// # let _ = controller;
    /// ```
    pub fn watches_channel(self, requests: tokio::sync::mpsc::Receiver<Request>) -> Self {
        self.watches_stream(futures::stream::unfold(requests, |mut rx| async move {
            rx.recv().await.map(|request| (request, rx))
        }))
    }

    /// [`watches_channel`](Self::watches_channel) for any stream of
    /// requests.
    pub(crate) fn watches_stream(
        mut self,
        requests: impl futures::Stream<Item = Request> + Send + 'static,
    ) -> Self {
        let controller = self.settings.name.clone();
        self.watches
            .push(Box::new(move |_: &SharedCache, target: &WatchTarget| {
                let kind = "(external source)".to_owned();
                let runtime = tokio::runtime::Handle::try_current().map_err(|_| {
                    (
                        kind.clone(),
                        CacheError::NoRuntime("Controller::watches_stream"),
                    )
                })?;
                let queue = target.queue.clone();
                let forward = runtime.spawn(async move {
                    use futures::StreamExt;
                    let mut requests = std::pin::pin!(requests);
                    while let Some(request) = requests.next().await {
                        if queue.is_shutting_down() {
                            break;
                        }
                        tracing::debug!(controller, %request, "request from an external source");
                        queue.add(request);
                    }
                });
                let synced: SyncWait = Box::new(|| Box::pin(async { true }));
                Ok(RegisteredWatch {
                    kind,
                    synced,
                    remove: Box::new(move || forward.abort()),
                })
            }));
        self
    }

    /// Cache objects of kind `K` for the reconciler to read, without
    /// reconciling on their changes: the informer is started with the
    /// controller and synced before the first reconcile (a kind read but
    /// never declared is started on its first read instead).
    pub fn reads<K>(mut self) -> Self
    where
        K: Resource<DynamicType = ()> + DeserializeOwned + Send + Sync + 'static,
        K::Scope: 'static,
    {
        self.watches
            .push(Box::new(|cache: &SharedCache, _: &WatchTarget| {
                let kind = K::kind(&()).into_owned();
                let informer = cache.informer::<K>().map_err(|e| (kind.clone(), e))?;
                let synced: SyncWait = Box::new(move || {
                    let informer = informer.clone();
                    Box::pin(async move { informer.wait_for_sync().await.is_ok() })
                });
                Ok(RegisteredWatch {
                    kind,
                    synced,
                    remove: Box::new(|| {}),
                })
            }));
        self
    }

    /// Only events that pass `filter` enqueue, on every watch of this
    /// controller (controller-runtime's `WithEventFilter`). The filter sees
    /// objects of every kind as [`dyn HasMetadata`](HasMetadata); call again
    /// to require several.
    pub fn with_event_filter(mut self, filter: impl Predicate<dyn HasMetadata>) -> Self {
        self.event_filters.push(Arc::new(filter));
        self
    }

    /// The controller's name, in logs and metrics (default: the kind, lower case).
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.settings.name = name.into();
        self
    }

    /// Reconcile only the keys `shard` gives this replica, each under a
    /// [`ShardPermit`](crate::shard::ShardPermit), so that no key is ever
    /// reconciled by two replicas at once (see [`crate::shard`]). Keys of
    /// other replicas are dropped; when this replica's share changes, the
    /// cached objects it now owns are enqueued. A reconcile whose permit
    /// lapses (the renew deadline passed, the replica left the ring, or the
    /// key moved) is cancelled: its future is dropped, the cancellation is
    /// logged and counted (`opkit_shard_cancelled_reconciles_total`), and
    /// the key is not retried unless this replica gets a permit for it again.
    pub fn sharded(mut self, shard: crate::shard::ShardHandle) -> Self {
        self.settings.shard = Some(shard);
        self
    }

    /// How many keys may be reconciled at once (default 1). One key is never
    /// reconciled by two workers at once, whatever this says.
    pub fn max_concurrent_reconciles(mut self, workers: usize) -> Self {
        self.settings.max_concurrent_reconciles = workers.max(1);
        self
    }

    /// The per-key rate limiter for retries (default: exponential, 5 ms
    /// doubling to 1000 s).
    pub fn rate_limiter(mut self, limiter: impl RateLimiter<Request> + 'static) -> Self {
        self.rate_limiter = Some(Box::new(limiter));
        self
    }

    /// At most `quota` reconciles (e.g. `Quota::per_second(50).burst(10)`),
    /// for every reconcile whatever put the key in the queue.
    pub fn throttle(mut self, quota: Quota) -> Self {
        self.throttle = Some(quota);
        self
    }

    /// Cancel a reconcile that runs longer than `timeout`; it counts as a
    /// retryable error.
    pub fn reconcile_timeout(mut self, timeout: Duration) -> Self {
        self.settings.reconcile_timeout = Some(timeout);
        self
    }

    /// How long to wait for the watched caches to sync before failing
    /// (default 120 s); also how long a read of an undeclared kind waits for
    /// the informer it starts.
    pub fn cache_sync_timeout(mut self, timeout: Duration) -> Self {
        self.settings.cache_sync_timeout = timeout;
        self
    }

    /// Whether reads through the reconcile [`Context`](crate::reconcile::Context) wait until the cache
    /// shows this controller's own writes (default: on; see the contract in
    /// [`Context`](crate::reconcile::Context)). Off, [`Context::client`](crate::reconcile::Context::client) is the plain client and reads
    /// return whatever the cache holds, the classic stale read after a write.
    pub fn read_your_writes(mut self, enabled: bool) -> Self {
        self.settings.read_your_writes = match (enabled, self.settings.read_your_writes) {
            (false, _) => None,
            (true, Some(wait)) => Some(wait),
            (true, None) => Some(crate::cache::read_your_writes::DEFAULT_WAIT),
        };
        self
    }

    /// How long a read waits for the cache to show this controller's write
    /// before failing with [`CacheError::WriteNotObserved`]
    /// (default 10 s). Turns read-your-writes on.
    pub fn read_your_writes_timeout(mut self, wait: Duration) -> Self {
        self.settings.read_your_writes = Some(wait);
        self
    }

    /// How long in-flight reconciles may take to finish at shutdown (default
    /// 30 s) when the controller runs on its own. Under a
    /// [`Manager`](crate::manager::Manager) the manager's graceful shutdown
    /// timeout applies instead, one bound for every controller.
    pub fn shutdown_timeout(mut self, timeout: Duration) -> Self {
        self.settings.shutdown = ShutdownBound::Own(timeout);
        self
    }

    /// Drops the controller's own shutdown bound: its runner (the manager)
    /// stops it at the runner's own timeout.
    pub(crate) fn shutdown_bounded_by_runner(mut self) -> Self {
        self.settings.shutdown = ShutdownBound::Runner;
        self
    }

    /// The controller's live reconcile counters.
    pub fn stats(&self) -> Arc<ReconcileStats> {
        Arc::clone(&self.stats)
    }

    /// The controller's name.
    pub fn controller_name(&self) -> &str {
        &self.settings.name
    }

    /// Reports the controller's reconciles (`controller_runtime_reconcile_*`)
    /// and its queue (`workqueue_*`) to `metrics`, with controller-runtime's
    /// names: what a [`Manager`](crate::manager::Manager) does for every
    /// controller added to it, for a controller run on its own.
    ///
    /// ```no_run
    /// # use k8s_openapi::api::core::v1::ConfigMap;
    /// # use opkit::reconcile::{Action, Context, Reconcile, ReconcileError, Request};
    /// # struct Settings;
    /// # impl Reconcile for Settings {
    /// #     type Object = ConfigMap;
    /// #     async fn reconcile(&self, _: Request, _: &Context<ConfigMap>) -> Result<Action, ReconcileError> { Ok(Action::done()) }
    /// # }
    /// # async fn run(cache: opkit::cache::SharedCache) -> Result<(), opkit::controller::ControllerError> {
    /// let metrics = opkit::metrics::Metrics::new();
    /// let controller = opkit::controller::Controller::new(Settings).metrics(&metrics);
    /// controller.run(&cache, std::future::pending()).await?;
    /// // serve `metrics.encode()` where Prometheus scrapes it
    /// # Ok(()) }
    /// ```
    pub fn metrics(mut self, metrics: &Metrics) -> Self {
        self.metrics = Some(metrics.clone());
        self.observer = None;
        self
    }

    /// Creates the controller's metric series now (at zero) rather than
    /// when it starts: what a manager does when the controller is added, so
    /// a scrape shows it at once.
    pub(crate) fn create_metric_series(mut self) -> Self {
        self.observer = self.metrics.as_ref().map(|metrics| {
            metrics
                .controller_observer(&self.settings.name, self.settings.max_concurrent_reconciles)
        });
        self
    }

    fn add_watch<K>(
        &mut self,
        mapper: impl FnOnce(&SharedCache) -> Result<Mapper<K>, CacheError> + Send + 'static,
        mut predicates: WatchPredicates<K>,
    ) where
        K: Resource<DynamicType = ()> + DeserializeOwned + Send + Sync + 'static,
        K::Scope: 'static,
    {
        self.watches.push(Box::new(
            move |cache: &SharedCache, target: &WatchTarget| {
                let kind = K::kind(&()).into_owned();
                predicates = predicates.with_event_filters(Arc::clone(&target.event_filters));
                let mapper = mapper(cache).map_err(|e| (kind.clone(), e))?;
                let handler = EnqueueHandler::new(mapper, predicates, target.queue.clone());
                let informer = cache.informer::<K>().map_err(|e| (kind.clone(), e))?;
                let registration = informer
                    .add_event_handler(handler)
                    .map_err(|e| (kind.clone(), e))?;
                let synced: SyncWait = {
                    let registration = registration.clone();
                    Box::new(move || {
                        let registration = registration.clone();
                        Box::pin(async move {
                            registration.wait_synced().await;
                            true
                        })
                    })
                };
                let remove = Box::new(move || {
                    informer.remove_event_handler(&registration);
                }) as Box<dyn FnOnce() + Send + Sync>;
                Ok(RegisteredWatch {
                    kind,
                    synced,
                    remove,
                })
            },
        ));
    }

    /// Registers the watches on `cache`, starts the cache (if it is not
    /// already), waits for the watches to sync, then reconciles until
    /// `shutdown` completes. At shutdown no new reconcile starts; running
    /// ones get [`shutdown_timeout`](Self::shutdown_timeout) to finish.
    pub async fn run(
        self,
        cache: &SharedCache,
        shutdown: impl Future<Output = ()>,
    ) -> Result<(), ControllerError> {
        let token = CancellationToken::new();
        let run = self.run_until_cancelled(cache, token.clone());
        tokio::pin!(run);
        tokio::select! {
            result = &mut run => return result,
            () = shutdown => token.cancel(),
        }
        run.await
    }

    /// Like [`run`](Self::run), stopping when `token` is cancelled.
    pub(crate) async fn run_until_cancelled(
        self,
        cache: &SharedCache,
        token: CancellationToken,
    ) -> Result<(), ControllerError> {
        let prepared = self.prepare(cache)?;
        let name = prepared.settings.name.clone();
        cache.start().map_err(|source| ControllerError::Watch {
            controller: name.clone(),
            kind: "(starting the cache)".to_owned(),
            source,
        })?;
        // A missing CRD or an unreachable server fails the run after a few
        // attempts instead of waiting out the sync timeout (as a manager does).
        let workers = token.child_token();
        let run = prepared.run(workers.clone(), None);
        tokio::pin!(run);
        let checked = tokio::select! {
            result = &mut run => return result,
            checked = cache.wait_for_start(START_LIST_ATTEMPTS, "its configured URL", &workers) => checked,
        };
        match checked {
            Ok(()) => run.await,
            Err(source) => {
                workers.cancel();
                let _ = run.await;
                Err(ControllerError::Start {
                    controller: name,
                    source,
                })
            }
        }
    }

    /// Builds the queue and registers every watch on `cache`, so events
    /// start filling the queue; no reconcile runs until
    /// [`Prepared::run`]. On error nothing stays registered.
    pub(crate) fn prepare(self, cache: &SharedCache) -> Result<Prepared<R>, ControllerError> {
        let mut builder = WorkQueue::builder().name(self.settings.name.clone());
        if let Some(limiter) = self.rate_limiter {
            builder = builder.rate_limiter(limiter);
        }
        if let Some(quota) = self.throttle {
            builder = builder.throttle(quota);
        }
        let observer = self.observer.or_else(|| {
            self.metrics.as_ref().map(|metrics| {
                metrics.controller_observer(
                    &self.settings.name,
                    self.settings.max_concurrent_reconciles,
                )
            })
        });
        if let Some(metrics) = &self.metrics {
            builder = builder.metrics(metrics);
        }
        let queue = builder.build();
        let target = WatchTarget {
            queue: queue.clone(),
            event_filters: Arc::from(self.event_filters),
        };
        let mut prepared = Prepared {
            settings: self.settings,
            reconciler: self.reconciler,
            cache: cache.clone(),
            queue,
            watches: Vec::with_capacity(self.watches.len()),
            stats: self.stats,
            observer,
        };
        if let Some(shard) = &prepared.settings.shard {
            shard.register_kind(&self.primary.group, &self.primary.kind);
        }
        // The primary kind is divided by label where the server does not
        // filter by shard selectors (label mode); owned kinds only by them.
        let selectors = prepared
            .settings
            .shard
            .as_ref()
            .and_then(|shard| Some((shard, shard.cache_selectors()?)));
        if let Some((shard, selectors)) = selectors {
            sharded::shard_kind::<R::Object>(shard, cache, selectors.primary);
            for shard_kind in &self.sharded_kinds {
                shard_kind(shard, cache, selectors.owned.clone());
            }
        } else if prepared.settings.shard.is_some() {
            tracing::info!(
                controller = %prepared.settings.name,
                mode = "filter-at-queue",
                "sharded controller: every replica caches every object and reconciles its share \
                 (Sharding::by_namespace divides the cache: server-side where the API server \
                 supports it, else by a shard label)"
            );
        }
        for index in self.indexes {
            if let Err((kind, source)) = index(cache) {
                return Err(ControllerError::Watch {
                    controller: prepared.settings.name.clone(),
                    kind,
                    source,
                });
            }
        }
        for watch in self.watches {
            match watch(cache, &target) {
                Ok(registered) => prepared.watches.push(registered),
                Err((kind, source)) => {
                    // Dropping `prepared` shuts the queue down and removes
                    // the watches registered so far.
                    return Err(ControllerError::Watch {
                        controller: prepared.settings.name.clone(),
                        kind,
                        source,
                    });
                }
            }
        }
        Ok(prepared)
    }
}

/// A controller whose watches are registered: its queue fills while it
/// waits to [`run`](Self::run). Dropping it shuts the queue down and
/// removes the watches.
pub(crate) struct Prepared<R> {
    settings: RunSettings,
    reconciler: Arc<R>,
    cache: SharedCache,
    queue: WorkQueue<Request>,
    watches: Vec<RegisteredWatch>,
    stats: Arc<ReconcileStats>,
    observer: Option<Arc<dyn ReconcileObserver>>,
}

impl<R> Drop for Prepared<R> {
    fn drop(&mut self) {
        self.queue.shutdown();
        for watch in self.watches.drain(..) {
            (watch.remove)();
        }
    }
}

impl<R: Reconcile> Prepared<R> {
    /// Waits for the watched caches to sync, then for `gate` (if any), then
    /// reconciles until `token` is cancelled (running reconciles get the
    /// shutdown timeout) or the gate's leading scope is (running reconciles
    /// are abandoned at once: another replica may take over).
    pub(crate) async fn run(
        self,
        token: CancellationToken,
        gate: Option<StartGate>,
    ) -> Result<(), ControllerError> {
        let workers = Workers {
            settings: &self.settings,
            reconciler: Arc::clone(&self.reconciler),
            cache: &self.cache,
            queue: &self.queue,
            stats: &self.stats,
            observer: self.observer.clone(),
        };
        workers.run(&self.watches, token, gate).await
    }
}

/// Everything the worker pool of one controller needs.
struct Workers<'a, R> {
    settings: &'a RunSettings,
    reconciler: Arc<R>,
    cache: &'a SharedCache,
    queue: &'a WorkQueue<Request>,
    stats: &'a Arc<ReconcileStats>,
    observer: Option<Arc<dyn ReconcileObserver>>,
}

impl<R: Reconcile> Workers<'_, R> {
    /// Waits for the watched caches (and the gate), then runs `count`
    /// workers until `token` is cancelled, then gives running reconciles the
    /// shutdown timeout. If the gate's scope ends first, running reconciles
    /// are abandoned at once.
    async fn run(
        self,
        watches: &[RegisteredWatch],
        token: CancellationToken,
        gate: Option<StartGate>,
    ) -> Result<(), ControllerError> {
        for watch in watches {
            tokio::select! {
                () = token.cancelled() => return Ok(()),
                synced = tokio::time::timeout(self.settings.cache_sync_timeout, (watch.synced)()) => {
                    if !synced.unwrap_or(false) {
                        return Err(ControllerError::CacheSync {
                            controller: self.settings.name.clone(),
                            kind: watch.kind.clone(),
                            timeout: self.settings.cache_sync_timeout,
                        });
                    }
                }
            }
        }
        let scope = match gate {
            None => CancellationToken::new(),
            Some(gate) => {
                tracing::debug!(
                    controller = %self.settings.name,
                    "caches synced; waiting for leadership"
                );
                tokio::select! {
                    () = token.cancelled() => return Ok(()),
                    scope = gate => match scope {
                        Some(scope) => scope,
                        None => return Ok(()),
                    },
                }
            }
        };
        tracing::info!(
            controller = %self.settings.name,
            workers = self.settings.max_concurrent_reconciles,
            "caches synced; starting workers"
        );
        let recorder = EventRecorder::builder(self.cache.client().clone(), &self.settings.name)
            .build()
            .map_err(|source| ControllerError::EventRecorder {
                controller: self.settings.name.clone(),
                source,
            })?;
        let shared = Arc::new(ControllerShared {
            name: self.settings.name.clone(),
            cache: self.cache.clone(),
            recorder,
            read_sync_timeout: self.settings.cache_sync_timeout,
            read_your_writes: self.settings.read_your_writes,
        });
        let mut tasks = tokio::task::JoinSet::new();
        let resync = self.settings.shard.clone().map(|shard| {
            tokio::spawn(sharded::resync_on_rebalance::<R>(
                shard,
                self.cache.clone(),
                self.queue.clone(),
                self.settings.name.clone(),
            ))
        });
        let _resync = resync.map(tokio_util::task::AbortOnDropHandle::new);
        let labeller = self.settings.shard.clone().map(|shard| {
            tokio::spawn(crate::shard::label_primary::<R::Object>(
                shard,
                self.cache.clone(),
                self.settings.name.clone(),
            ))
        });
        let _labeller = labeller.map(tokio_util::task::AbortOnDropHandle::new);
        for _ in 0..self.settings.max_concurrent_reconciles {
            let shard = self.settings.shard.clone();
            let reconciler = Arc::clone(&self.reconciler);
            let shared = Arc::clone(&shared);
            let queue = self.queue.clone();
            let stats = Arc::clone(self.stats);
            let observer = self.observer.clone();
            let token = token.clone();
            let scope = scope.clone();
            let timeout = self.settings.reconcile_timeout;
            tasks.spawn(async move {
                loop {
                    // A cancelled token wins over a ready key: no new work at shutdown.
                    let request = tokio::select! {
                        biased;
                        () = token.cancelled() => break,
                        () = scope.cancelled() => break,
                        request = queue.get_with_priority() => match request {
                            Some(request) => request,
                            None => break,
                        },
                    };
                    let Some(shard) = &shard else {
                        worker::process_observed(
                            &*reconciler,
                            &shared,
                            &queue,
                            &stats,
                            observer.as_deref(),
                            timeout,
                            request,
                        )
                        .await;
                        continue;
                    };
                    let Some(permit) = sharded::admit(shard, &queue, &request.0) else {
                        continue;
                    };
                    let key = request.0.clone();
                    let reconcile = worker::process_observed(
                        &*reconciler,
                        &shared,
                        &queue,
                        &stats,
                        observer.as_deref(),
                        timeout,
                        request,
                    );
                    sharded::run_under(shard, &queue, &shared.name, &key, permit, reconcile).await;
                }
            });
        }
        tokio::select! {
            () = token.cancelled() => {}
            () = scope.cancelled() => {
                tracing::warn!(
                    controller = %self.settings.name,
                    "leadership lost; abandoning running reconciles"
                );
                tasks.abort_all();
                while tasks.join_next().await.is_some() {}
                return Ok(());
            }
        }
        tracing::info!(
            controller = %self.settings.name,
            "shutting down; waiting for running reconciles"
        );
        let ShutdownBound::Own(bound) = self.settings.shutdown else {
            // The runner bounds the drain (and aborts this task at its end).
            while tasks.join_next().await.is_some() {}
            return Ok(());
        };
        let drained =
            tokio::time::timeout(bound, async { while tasks.join_next().await.is_some() {} }).await;
        if drained.is_err() {
            tracing::warn!(
                controller = %self.settings.name,
                timeout = ?bound,
                "reconciles still running at the shutdown timeout; abandoning them"
            );
            tasks.abort_all();
        }
        Ok(())
    }
}

#[cfg(test)]
mod sharded_tests;
#[cfg(test)]
mod tests;
