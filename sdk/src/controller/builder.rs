//! [`Controller`]: what a controller watches, reads and indexes, and the
//! settings of its run, set one builder method at a time.

use std::sync::Arc;
use std::time::Duration;

use kube::Resource;
use kube::core::PartialObjectMeta;

use super::observer::{ControllerObservers, ReconcileObserver};
use super::settings::{RunSettings, ShutdownBound};
#[cfg(feature = "shard")]
use super::sharded;
use super::stats::ReconcileStats;
#[cfg(feature = "shard")]
use super::watch::ShardKindFn;
use super::watch::{self, IndexFn, WatchFn};
use crate::cache::Cacheable;
use crate::cache::{CacheError, SharedCache, Store};
use crate::handler::{Mapper, OwnerKind, WatchPredicates, owner_of, the_object};
use crate::predicate::{HasMetadata, Predicate};
use crate::reconcile::{Reconcile, Request};
use crate::workqueue::{Quota, RateLimiter};

/// A controller for the kind of its reconciler ([`Reconcile::Object`]).
pub struct Controller<R> {
    pub(super) settings: RunSettings,
    pub(super) reconciler: Arc<R>,
    pub(super) indexes: Vec<IndexFn>,
    pub(super) watches: Vec<WatchFn>,
    #[cfg(feature = "shard")]
    /// The owned kinds a sharded cache divides besides the primary: those
    /// of the same scope (namespaced or not) as the primary.
    pub(super) sharded_kinds: Vec<ShardKindFn>,
    pub(super) event_filters: Vec<Arc<dyn Predicate<dyn HasMetadata>>>,
    pub(super) rate_limiter: Option<Box<dyn RateLimiter<Request>>>,
    pub(super) throttle: Option<Quota>,
    pub(super) primary: OwnerKind,
    pub(super) stats: Arc<ReconcileStats>,
    /// What makes the reconcile observer and the queue's metrics (the
    /// manager's metrics), if anything observes this controller.
    pub(super) observers: Option<Arc<dyn ControllerObservers>>,
    /// The reconcile observer, when made before the controller is prepared.
    pub(super) observer: Option<Arc<dyn ReconcileObserver>>,
    /// Whether it reconciles in every cluster of a fleet
    /// ([`multicluster`](Self::multicluster)).
    #[cfg(feature = "multicluster")]
    pub(super) multicluster: bool,
    /// Watches crossing a fleet's clusters ([`watches_hub`](Self::watches_hub),
    /// [`watches_members`](Self::watches_members)).
    #[cfg(feature = "multicluster")]
    pub(super) fleet_watches: super::fleet_watch::FleetWatches,
    /// Sources of requests outside any watch ([`watches_channel`](Self::watches_channel)):
    /// taken by the one queue the controller is prepared with.
    pub(super) sources: Vec<watch::Source>,
}

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
                field_manager: None,
                #[cfg(feature = "shard")]
                shard: None,
                #[cfg(feature = "multicluster")]
                cluster: None,
            },
            reconciler: Arc::new(reconciler),
            indexes: Vec::new(),
            watches: Vec::new(),
            #[cfg(feature = "shard")]
            sharded_kinds: Vec::new(),
            event_filters: Vec::new(),
            rate_limiter: None,
            throttle: None,
            primary,
            stats: Arc::default(),
            observers: None,
            observer: None,
            #[cfg(feature = "multicluster")]
            multicluster: false,
            #[cfg(feature = "multicluster")]
            fleet_watches: Default::default(),
            sources: Vec::new(),
        };
        controller.add_watch::<R::Object>(|_| Ok(the_object::<R::Object>()), predicates);
        controller
    }

    /// Also reconcile the controller-owner (of the primary kind) of objects
    /// of kind `C` when they change. Caches whole objects, so the
    /// reconciler can read them (as controller-runtime's `Owns`).
    pub fn owns<C>(self) -> Self
    where
        C: Cacheable<DynamicType = ()>,
        C::Scope: 'static,
    {
        self.owns_watch::<C>(WatchPredicates::new())
    }

    /// [`owns`](Self::owns), for the events that pass `predicate` only.
    pub fn owns_with<C>(self, predicate: impl Predicate<C>) -> Self
    where
        C: Cacheable<DynamicType = ()>,
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
        C: Cacheable<DynamicType = ()>,
        C::Scope: 'static,
        P: crate::cache::Projection<C>,
    {
        self.owns_watch::<crate::cache::Projected<C, P>>(WatchPredicates::new())
    }

    fn owns_watch<C>(mut self, predicates: WatchPredicates<C>) -> Self
    where
        C: Cacheable<DynamicType = ()>,
        C::Scope: 'static,
    {
        let owner = self.primary.clone();
        // An owned object lives in its owner's namespace: with namespaces
        // hashed, it lands on its owner's replica when both kinds are
        // namespaced (or both cluster-scoped: all on one replica).
        #[cfg(feature = "shard")]
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
                Ok(owner_of(owner.clone()))
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
        W: Cacheable<DynamicType = ()>,
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
        W: Cacheable<DynamicType = ()>,
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
        W: Cacheable<DynamicType = ()>,
        W::Scope: 'static,
    {
        let map = Arc::new(map);
        self.add_watch::<W>(
            move |cache| {
                let store = cache.store::<R::Object>()?;
                let map = Arc::clone(&map);
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
        W: Cacheable<DynamicType = ()>,
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
        W: Cacheable<DynamicType = ()>,
        W::Scope: 'static,
    {
        self.index_watch::<W>(index.into(), WatchPredicates::new().with(predicate))
    }

    fn index_watch<W>(mut self, index: String, predicates: WatchPredicates<W>) -> Self
    where
        W: Cacheable<DynamicType = ()>,
        W::Scope: 'static,
    {
        let primary_namespaced = self.primary.namespaced;
        self.add_watch::<W>(
            move |cache| {
                let store = cache.store::<R::Object>()?;
                if !store.index_names().contains(&index) {
                    return Err(CacheError::Index(crate::cache::IndexError::UnknownIndex(
                        index.clone(),
                    )));
                }
                let index = index.clone();
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
        T: Cacheable<DynamicType = ()>,
        T::Scope: 'static,
    {
        self.indexes.push(watch::index_fn::<T>(name.into(), values));
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
        self.sources
            .push(parking_lot::Mutex::new(Box::pin(requests)));
        self
    }

    /// Cache objects of kind `K` for the reconciler to read, without
    /// reconciling on their changes: the informer is started with the
    /// controller and synced before the first reconcile (a kind read but
    /// never declared is started on its first read instead).
    pub fn reads<K>(mut self) -> Self
    where
        K: Cacheable<DynamicType = ()>,
        K::Scope: 'static,
    {
        self.watches.push(watch::read_watch::<K>());
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

    /// The field manager of this controller's server-side applies through
    /// [`Context::apply`](crate::reconcile::Context::apply) and
    /// [`Context::apply_status`](crate::reconcile::Context::apply_status)
    /// (default: the controller's [`name`](Self::name), as
    /// controller-runtime defaults a client's field owner). Set it when
    /// several controllers must own the same fields as one manager, or to
    /// keep the manager an earlier version of the operator used.
    pub fn field_manager(mut self, manager: impl Into<String>) -> Self {
        self.settings.field_manager = Some(manager.into());
        self
    }

    #[cfg(feature = "shard")]
    #[cfg_attr(docsrs, doc(cfg(feature = "shard")))]
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

    /// Hands the controller what makes its reconcile observer and its
    /// queue's metrics (what [`metrics`](Self::metrics) and a
    /// [`Manager`](crate::manager::Manager) do).
    pub(crate) fn observed_by(mut self, observers: Arc<dyn ControllerObservers>) -> Self {
        self.observers = Some(observers);
        self.observer = None;
        self
    }

    /// Creates the controller's metric series now (at zero) rather than
    /// when it starts: what a manager does when the controller is added, so
    /// a scrape shows it at once.
    pub(crate) fn create_metric_series(mut self) -> Self {
        self.observer = self.reconcile_observer(None);
        self
    }

    fn add_watch<K>(
        &mut self,
        mapper: impl Fn(&SharedCache) -> Result<Mapper<K>, CacheError> + Send + Sync + 'static,
        predicates: WatchPredicates<K>,
    ) where
        K: Cacheable<DynamicType = ()>,
        K::Scope: 'static,
    {
        self.watches
            .push(watch::kind_watch::<K>(mapper, predicates));
    }
}
