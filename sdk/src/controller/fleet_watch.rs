//! The watches that cross a fleet's clusters (feature `multicluster`):
//! a multicluster controller's hub-side watches, whose requests name the
//! member cluster they are for ([`Controller::watches_hub`](crate::controller::Controller::watches_hub)),
//! and a hub controller's member-side watches, whose objects in every
//! engaged member map back to hub objects
//! ([`Controller::watches_members`](crate::controller::Controller::watches_members)):
//! what each watch registers, where its requests go, and how the fleet
//! registers them on a member it engages.
//!
//! ```
//! use k8s_openapi::api::core::v1::{ConfigMap, Secret};
//! use opkit::controller::Controller;
//! use opkit::multicluster::ClusterRequest;
//! use opkit::reconcile::{Action, Context, Reconcile, ReconcileError, Request};
//!
//! // In every member: the ConfigMaps a hub ConfigMap lists in its
//! // `clusters` key, one per named member.
//! struct Copy;
//! impl Reconcile for Copy {
//!     type Object = ConfigMap;
//!     async fn reconcile(&self, _: Request, _: &Context<ConfigMap>) -> Result<Action, ReconcileError> {
//!         Ok(Action::done())
//!     }
//! }
//! let members = Controller::new(Copy).multicluster().watches_hub(|hub: &ConfigMap| {
//!     let clusters = hub.data.as_ref().and_then(|d| d.get("clusters")).cloned().unwrap_or_default();
//!     let name = hub.metadata.name.clone().unwrap_or_default();
//!     clusters
//!         .split(',')
//!         .map(|cluster| ClusterRequest::new(cluster.trim(), Request::namespaced("copies", &name)))
//!         .collect()
//! });
//!
//! // On the hub: a Secret reconciled again when a member's copy of it changes.
//! struct Report;
//! impl Reconcile for Report {
//!     type Object = Secret;
//!     async fn reconcile(&self, _: Request, _: &Context<Secret>) -> Result<Action, ReconcileError> {
//!         Ok(Action::done())
//!     }
//! }
//! let hub = Controller::new(Report).watches_members(|_cluster, copy: &Secret| {
//!     Request::for_object(copy).into_iter().collect()
//! });
//! # let _ = (members, hub);
//! ```

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use futures::future::BoxFuture;
use parking_lot::{Mutex, RwLock};

use super::error::ControllerError;
use super::watch::{RegisteredWatch, WatchTarget, register_handler};
use crate::cache::{CacheError, Cacheable, SharedCache};
use crate::cluster_request::{ClusterName, ClusterRequest};
use crate::handler::{Enqueue, Mapper, WatchPredicates};
use crate::predicate::{HasMetadata, Predicate, PredicateEvent};
use crate::reconcile::Request;
use crate::workqueue::{Priority, WorkQueue};

/// The controller-wide event filters a watch applies.
pub(super) type EventFilters = Arc<[Arc<dyn Predicate<dyn HasMetadata>>]>;

/// What crosses the fleet in one controller's watches.
#[derive(Default)]
pub(super) struct FleetWatches {
    /// Hub-side watches (a multicluster controller's).
    pub(super) hub: Vec<HubWatch>,
    /// Member-side watches (a hub controller's).
    pub(super) members: Vec<MemberWatch>,
    /// Where the member-side watches are handed to the fleet, once the
    /// controller's queue exists (set by the manager).
    pub(super) feed: Option<MemberWatchFeed>,
}

/// Registers a hub-side watch on the hub's cache, routing to the members' queues.
type RegisterFn = Arc<
    dyn Fn(
            &SharedCache,
            &MemberQueues,
            &EventFilters,
        ) -> Result<RegisteredWatch, (String, CacheError)>
        + Send
        + Sync,
>;

/// Queues in one member's queue the requests a hub-side watch maps the
/// hub's objects to that name it, once the hub's informer synced.
type ReplayFn = Arc<
    dyn Fn(&SharedCache, &EventFilters, &ClusterName, &WorkQueue<Request>) -> BoxFuture<'static, ()>
        + Send
        + Sync,
>;

/// A hub-side watch's map function.
type HubMapFn<H> = Arc<dyn Fn(&H) -> Vec<ClusterRequest> + Send + Sync>;

/// The queues of a controller's instances, by cluster, each with the
/// number of the route that put it there.
type QueuesByCluster = Arc<RwLock<HashMap<ClusterName, (u64, WorkQueue<Request>)>>>;

/// One hub-side watch of a multicluster controller: its handler on the
/// hub's cache, and its replay of the hub's objects into a newly engaged
/// member's queue (what the handler could not route before it was engaged).
pub(super) struct HubWatch {
    register: RegisterFn,
    replay: ReplayFn,
}

/// One member-side watch of a hub controller, registered on each engaged
/// member's cache, enqueueing into the hub controller's queue; with what
/// it does when the member is disengaged.
pub(super) type MemberWatch = Arc<
    dyn Fn(
            &ClusterName,
            &SharedCache,
            &WatchTarget,
        ) -> Result<(RegisteredWatch, Farewell), (String, CacheError)>
        + Send
        + Sync,
>;

/// What a member-side watch does when its member is disengaged (not when
/// the fleet shuts down): maps every object the member held once more.
type Farewell = Box<dyn FnOnce() + Send + Sync>;

impl FleetWatches {
    /// Adds a hub-side watch of kind `H` (see `Controller::watches_hub`).
    pub(super) fn add_hub<H>(
        &mut self,
        map: impl Fn(&H) -> Vec<ClusterRequest> + Send + Sync + 'static,
    ) where
        H: Cacheable<DynamicType = ()>,
        H::Scope: 'static,
    {
        let map: HubMapFn<H> = Arc::new(map);
        let register: RegisterFn = {
            let map = Arc::clone(&map);
            Arc::new(
                move |hub: &SharedCache, queues: &MemberQueues, filters: &EventFilters| {
                    let map = Arc::clone(&map);
                    let predicates =
                        WatchPredicates::<H>::new().with_event_filters(Arc::clone(filters));
                    register_handler(
                        hub,
                        Mapper::from_fn(move |obj: &H| map(obj)),
                        predicates,
                        queues.clone(),
                    )
                },
            )
        };
        let replay: ReplayFn = Arc::new(
            move |hub: &SharedCache,
                  filters: &EventFilters,
                  cluster: &ClusterName,
                  queue: &WorkQueue<Request>| {
                let informer = hub.informer::<H>();
                let predicates =
                    WatchPredicates::<H>::new().with_event_filters(Arc::clone(filters));
                let (map, cluster, queue) = (Arc::clone(&map), cluster.clone(), queue.clone());
                Box::pin(async move {
                    let Ok(informer) = informer else { return };
                    if informer.wait_for_sync().await.is_err() {
                        return;
                    }
                    for obj in informer.store().list() {
                        // as the handler saw it when it was added
                        if !predicates.passes(&PredicateEvent::Create(&*obj)) {
                            continue;
                        }
                        for request in map(&obj) {
                            if request.cluster == cluster {
                                queue.add_with_priority(request.request, Priority::Low);
                            }
                        }
                    }
                }) as BoxFuture<'static, ()>
            },
        );
        self.hub.push(HubWatch { register, replay });
    }

    /// Adds a member-side watch of kind `K` (see `Controller::watches_members`).
    pub(super) fn add_members<K>(
        &mut self,
        map: impl Fn(&ClusterName, &K) -> Vec<Request> + Send + Sync + 'static,
    ) where
        K: Cacheable<DynamicType = ()>,
        K::Scope: 'static,
    {
        let map = Arc::new(map);
        self.members.push(Arc::new(
            move |cluster: &ClusterName, member: &SharedCache, target: &WatchTarget| {
                let (map, cluster) = (Arc::clone(&map), cluster.clone());
                let predicates = WatchPredicates::<K>::new()
                    .with_event_filters(Arc::clone(&target.event_filters));
                let mapper = Mapper::from_fn(move |obj: &K| map(&cluster, obj));
                let registered = register_handler(
                    member,
                    mapper.clone(),
                    predicates.clone(),
                    target.queue.clone(),
                )?;
                // At the member's disengagement (before its informers stop),
                // every object it held is mapped once more, as if deleted.
                let store = member
                    .store::<K>()
                    .map_err(|e| (registered.kind.clone(), e))?;
                let queue = target.queue.clone();
                let farewell: Farewell = Box::new(move || {
                    for obj in store.list() {
                        if predicates.passes(&PredicateEvent::Delete(&*obj)) {
                            for request in mapper.map(&obj) {
                                queue.add_with_priority(request, Priority::Normal);
                            }
                        }
                    }
                });
                Ok((registered, farewell))
            },
        ));
    }

    /// Hands controller `controller`'s member-side watches, bound to
    /// `target` (its prepared queue), to the fleet; fails for one that has
    /// some and runs without a fleet.
    pub(super) fn feed(
        &self,
        controller: &str,
        target: &WatchTarget,
    ) -> Result<(), ControllerError> {
        if self.members.is_empty() {
            return Ok(());
        }
        let Some(feed) = &self.feed else {
            return Err(ControllerError::NoFleet {
                controller: controller.to_owned(),
            });
        };
        let mut bound = feed.watches.lock();
        for watch in &self.members {
            bound.push(BoundMemberWatch {
                controller: controller.to_owned(),
                watch: Arc::clone(watch),
                target: target.clone(),
            });
        }
        Ok(())
    }

    /// Registers controller `controller`'s hub-side watches on `hub`
    /// (applying `filters`), routing into `queues`.
    pub(super) fn register_hub(
        &self,
        controller: &str,
        filters: &EventFilters,
        hub: Option<&SharedCache>,
        queues: &MemberQueues,
    ) -> Result<WatchRegistrations, ControllerError> {
        let mut registrations = WatchRegistrations::default();
        if self.hub.is_empty() {
            return Ok(registrations);
        }
        let Some(hub) = hub else {
            return Err(ControllerError::NoHub {
                controller: controller.to_owned(),
            });
        };
        for watch in &self.hub {
            let registered = (watch.register)(hub, queues, filters).map_err(|(kind, source)| {
                ControllerError::Watch {
                    controller: controller.to_owned(),
                    kind,
                    source,
                }
            })?;
            registrations.0.push(registered);
        }
        Ok(registrations)
    }

    /// The replays of the hub's objects into `cluster`'s `queue`, one per
    /// hub-side watch (applying `filters`): each waits for the hub's
    /// informer to sync.
    pub(super) fn replay_hub(
        &self,
        filters: &EventFilters,
        hub: &SharedCache,
        cluster: &ClusterName,
        queue: &WorkQueue<Request>,
    ) -> Vec<BoxFuture<'static, ()>> {
        self.hub
            .iter()
            .map(|watch| (watch.replay)(hub, filters, cluster, queue))
            .collect()
    }
}

/// The queues of a multicluster controller's instances, by engaged
/// cluster: where its hub-side watches route each request.
#[derive(Clone, Default)]
pub(crate) struct MemberQueues {
    queues: QueuesByCluster,
    routes: Arc<AtomicU64>,
}

impl MemberQueues {
    /// Routes `cluster`'s requests to `queue` until the returned route is
    /// dropped.
    pub(super) fn route(&self, cluster: ClusterName, queue: WorkQueue<Request>) -> Route {
        let id = self.routes.fetch_add(1, Ordering::Relaxed);
        self.queues.write().insert(cluster.clone(), (id, queue));
        Route {
            queues: self.clone(),
            cluster,
            id,
        }
    }
}

impl Enqueue for MemberQueues {
    type Item = ClusterRequest;

    fn enqueue(&self, item: ClusterRequest, priority: Priority) {
        match self.queues.read().get(&item.cluster) {
            Some((_, queue)) => queue.add_with_priority(item.request, priority),
            None => tracing::trace!(
                cluster = %item.cluster,
                request = %item.request,
                "a hub watch names a cluster not engaged here; queued there when it is engaged"
            ),
        }
    }
}

/// A member's queue in its controller's [`MemberQueues`], removed when
/// dropped (unless a later engagement of the cluster replaced it).
pub(super) struct Route {
    queues: MemberQueues,
    cluster: ClusterName,
    id: u64,
}

impl Drop for Route {
    fn drop(&mut self) {
        let mut queues = self.queues.queues.write();
        if queues
            .get(&self.cluster)
            .is_some_and(|(id, _)| *id == self.id)
        {
            queues.remove(&self.cluster);
        }
    }
}

/// Registered watches, removed when dropped.
#[derive(Default)]
pub(crate) struct WatchRegistrations(Vec<RegisteredWatch>);

impl Drop for WatchRegistrations {
    fn drop(&mut self) {
        for watch in self.0.drain(..) {
            (watch.remove)();
        }
    }
}

/// The hub controllers' member-side watches, bound to their queues: the
/// fleet registers each on every cluster it engages.
#[derive(Clone, Default)]
pub(crate) struct MemberWatchFeed {
    watches: Arc<Mutex<Vec<BoundMemberWatch>>>,
}

/// A member-side watch and the hub controller's queue it enqueues into.
struct BoundMemberWatch {
    controller: String,
    watch: MemberWatch,
    target: WatchTarget,
}

impl MemberWatchFeed {
    /// Registers every bound member-side watch on `member`'s cache (the
    /// cache of engaged cluster `cluster`); removed when the result drops.
    pub(crate) fn register(
        &self,
        cluster: &ClusterName,
        member: &SharedCache,
    ) -> Result<MemberRegistrations, ControllerError> {
        let mut registrations = MemberRegistrations::default();
        for bound in self.watches.lock().iter() {
            let (registered, farewell) =
                (bound.watch)(cluster, member, &bound.target).map_err(|(kind, source)| {
                    ControllerError::Watch {
                        controller: bound.controller.clone(),
                        kind,
                        source,
                    }
                })?;
            registrations.watches.0.push(registered);
            registrations.farewells.push(farewell);
        }
        Ok(registrations)
    }
}

/// The hub controllers' watches registered on one member: removed when
/// dropped (at the fleet's shutdown), after their farewells at the
/// member's disengagement ([`farewell`](Self::farewell)).
#[derive(Default)]
pub(crate) struct MemberRegistrations {
    watches: WatchRegistrations,
    farewells: Vec<Farewell>,
}

impl MemberRegistrations {
    /// The member is disengaged: every object it held is mapped once more
    /// (as if deleted), then the watches are removed.
    pub(crate) fn farewell(self) {
        let Self { watches, farewells } = self;
        for farewell in farewells {
            farewell();
        }
        drop(watches);
    }
}
