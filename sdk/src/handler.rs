//! Event handlers: turn watch events into [`Request`]s on a workqueue
//! (crate-private: users wire watches through
//! [`Controller`](crate::controller::Controller)).
//!
//! A controller registers one [`EnqueueHandler`] per watch on the shared
//! informer of that kind. The handler runs the controller's event filter and
//! the watch's own predicates, maps the object to zero or more requests, and
//! adds them to the queue: objects
//! of an initial list or a resync at [`Priority::Low`], fresh events at
//! [`Priority::Normal`], so a startup storm never delays a user's new object.
//!
//! The mappings (what `Controller` builds for `new`, `owns` and `watches`):
//! [`the_object`] (the object itself), [`owner_of`] (its controller owner of
//! a kind), [`Mapper::from_fn`] (a user's map function).

use std::any::TypeId;
use std::sync::Arc;

use k8s_openapi::NamespaceResourceScope;
use kube::Resource;

use crate::cache::{DeletedObject, EventHandler};
use crate::predicate::{HasMetadata, Predicate, PredicateEvent};
use crate::reconcile::Request;
use crate::workqueue::{Priority, WorkQueue};

/// A shared mapping function.
type MapFn<K, T> = Arc<dyn Fn(&K) -> Vec<T> + Send + Sync>;

/// Maps an object of kind `K` to the requests it should trigger (`T`:
/// [`Request`]s, or the [`ClusterRequest`](crate::cluster_request::ClusterRequest)s
/// a hub-side watch of a multicluster controller names members with).
pub(crate) struct Mapper<K, T = Request> {
    map: MapFn<K, T>,
    /// The requests depend only on the object's name and namespace, which
    /// never change: an update's old object maps to the same requests.
    by_identity: bool,
}

impl<K, T> Clone for Mapper<K, T> {
    fn clone(&self) -> Self {
        Self {
            map: Arc::clone(&self.map),
            by_identity: self.by_identity,
        }
    }
}

impl<K, T> std::fmt::Debug for Mapper<K, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Mapper")
    }
}

impl<K, T> Mapper<K, T> {
    /// A mapper from a function (any object to any requests).
    pub(crate) fn from_fn(f: impl Fn(&K) -> Vec<T> + Send + Sync + 'static) -> Self {
        Self {
            map: Arc::new(f),
            by_identity: false,
        }
    }

    /// The requests for `obj`.
    pub(crate) fn map(&self, obj: &K) -> Vec<T> {
        (self.map)(obj)
    }
}

/// Where an [`EnqueueHandler`]'s mapped requests go: a controller's
/// [`WorkQueue`], or (for a multicluster controller's hub-side watch) the
/// queues of the engaged members a request names.
pub(crate) trait Enqueue: Send + Sync + 'static {
    /// What the handler's mapper yields.
    type Item: PartialEq + Send + 'static;

    /// Adds `item` at `priority`.
    fn enqueue(&self, item: Self::Item, priority: Priority);

    /// Adds the own key of an object that could not be decoded, for a watch
    /// that maps objects to themselves (only a controller's queue does).
    fn enqueue_undecodable(&self, _request: Request) {}
}

impl Enqueue for WorkQueue<Request> {
    type Item = Request;

    fn enqueue(&self, item: Request, priority: Priority) {
        self.add_with_priority(item, priority);
    }

    fn enqueue_undecodable(&self, request: Request) {
        self.add_with_priority(request, Priority::Normal);
    }
}

/// Enqueues the object itself (`for_`).
pub(crate) fn the_object<K: Resource>() -> Mapper<K> {
    Mapper {
        by_identity: true,
        ..Mapper::from_fn(|obj: &K| Request::for_object(obj).into_iter().collect())
    }
}

/// The kind of a controller owner, as [`owner_of`] matches it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct OwnerKind {
    /// API group (`""` for the core group).
    pub group: String,
    /// Kind.
    pub kind: String,
    /// Whether the owner kind is namespaced (then it lives in the owned
    /// object's namespace).
    pub namespaced: bool,
}

impl OwnerKind {
    /// The owner kind of Rust type `O`.
    pub(crate) fn of<O>() -> Self
    where
        O: Resource<DynamicType = ()>,
        O::Scope: 'static,
    {
        Self {
            group: O::group(&()).into_owned(),
            kind: O::kind(&()).into_owned(),
            namespaced: TypeId::of::<O::Scope>() == TypeId::of::<NamespaceResourceScope>(),
        }
    }
}

/// Enqueues the object's controller owner if it is of kind `owner`.
pub(crate) fn owner_of<K: Resource>(owner: OwnerKind) -> Mapper<K> {
    Mapper::from_fn(move |obj: &K| {
        let meta = obj.meta();
        meta.owner_references
            .iter()
            .flatten()
            .filter(|r| {
                r.controller == Some(true)
                    && r.kind == owner.kind
                    && group_of(&r.api_version) == owner.group
            })
            .map(|r| Request {
                namespace: if owner.namespaced {
                    meta.namespace.clone()
                } else {
                    None
                },
                name: r.name.clone(),
            })
            .collect()
    })
}

/// The group of an `apiVersion` (`apps/v1` → `apps`, `v1` → ``).
fn group_of(api_version: &str) -> &str {
    api_version.rsplit_once('/').map_or("", |(group, _)| group)
}

/// The predicates of one watch: the controller's event filters (which see
/// every kind as [`dyn HasMetadata`](HasMetadata)) and the watch's own.
pub(crate) struct WatchPredicates<K> {
    event_filters: Arc<[Arc<dyn Predicate<dyn HasMetadata>>]>,
    predicates: Vec<Arc<dyn Predicate<K>>>,
}

impl<K> Clone for WatchPredicates<K> {
    fn clone(&self) -> Self {
        Self {
            event_filters: Arc::clone(&self.event_filters),
            predicates: self.predicates.clone(),
        }
    }
}

impl<K> Default for WatchPredicates<K> {
    fn default() -> Self {
        Self {
            event_filters: Arc::from(Vec::new()),
            predicates: Vec::new(),
        }
    }
}

impl<K> std::fmt::Debug for WatchPredicates<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WatchPredicates")
            .field("event_filters", &self.event_filters.len())
            .field("predicates", &self.predicates.len())
            .finish()
    }
}

impl<K: Resource + 'static> WatchPredicates<K> {
    /// No predicates: every event passes.
    pub(crate) fn new() -> Self {
        Self::default()
    }

    /// Also require `predicate` (the watch's own).
    pub(crate) fn with(mut self, predicate: impl Predicate<K>) -> Self {
        self.predicates.push(Arc::new(predicate));
        self
    }

    /// Also require the controller-wide `filters`.
    pub(crate) fn with_event_filters(
        mut self,
        filters: Arc<[Arc<dyn Predicate<dyn HasMetadata>>]>,
    ) -> Self {
        self.event_filters = filters;
        self
    }

    /// Whether `event` passes every filter and predicate.
    pub(crate) fn passes(&self, event: &PredicateEvent<'_, K>) -> bool {
        if !self.event_filters.is_empty() {
            let erased = event.erased();
            if !self.event_filters.iter().all(|p| p.filter(&erased)) {
                return false;
            }
        }
        self.predicates.iter().all(|p| p.filter(event))
    }
}

/// An informer event handler that enqueues mapped requests.
pub(crate) struct EnqueueHandler<K, Q: Enqueue = WorkQueue<Request>> {
    mapper: Mapper<K, Q::Item>,
    predicates: WatchPredicates<K>,
    queue: Q,
}

impl<K: Resource + 'static, Q: Enqueue> EnqueueHandler<K, Q> {
    /// A handler adding `mapper`'s requests to `queue` for events that pass
    /// `predicates`.
    pub(crate) fn new(
        mapper: Mapper<K, Q::Item>,
        predicates: WatchPredicates<K>,
        queue: Q,
    ) -> Self {
        Self {
            mapper,
            predicates,
            queue,
        }
    }

    fn enqueue(&self, obj: &K, priority: Priority) {
        for request in self.mapper.map(obj) {
            self.queue.enqueue(request, priority);
        }
    }

    /// Enqueues the requests of `new`, and those of `old` that differ: an
    /// owner reference (or mapping) that moved away from an object must
    /// still wake the one it used to point at. A mapper by identity maps
    /// both to the same requests, so `old` is not mapped at all.
    fn enqueue_update(&self, old: &K, new: &K, priority: Priority) {
        let requests = self.mapper.map(new);
        if !self.mapper.by_identity {
            for request in self.mapper.map(old) {
                if !requests.contains(&request) {
                    self.queue.enqueue(request, priority);
                }
            }
        }
        for request in requests {
            self.queue.enqueue(request, priority);
        }
    }
}

fn priority(background: bool) -> Priority {
    if background {
        Priority::Low
    } else {
        Priority::Normal
    }
}

impl<K: Resource + Send + Sync + 'static, Q: Enqueue> EventHandler<K> for EnqueueHandler<K, Q> {
    async fn on_add(&mut self, obj: Arc<K>, is_in_initial_list: bool) {
        if self.predicates.passes(&PredicateEvent::Create(&*obj)) {
            self.enqueue(&obj, priority(is_in_initial_list));
        }
    }

    async fn on_update(&mut self, old: Arc<K>, new: Arc<K>, is_resync: bool) {
        let event = PredicateEvent::Update {
            old: &*old,
            new: &*new,
        };
        if self.predicates.passes(&event) {
            let priority = priority(is_resync);
            if is_resync {
                self.enqueue(&new, priority);
            } else {
                self.enqueue_update(&old, &new, priority);
            }
        }
    }

    async fn on_delete(&mut self, obj: DeletedObject<K>) {
        let obj = obj.object();
        if self.predicates.passes(&PredicateEvent::Delete(obj)) {
            self.enqueue(obj, Priority::Normal);
        }
    }

    /// The object's own key is enqueued (the primary kind's handler, whose
    /// reconciler then reads [`CacheError::Undecodable`](crate::cache::CacheError::Undecodable)),
    /// predicates unchecked: they need a `K`. Mapped handlers (`owns`,
    /// `watches`) enqueue nothing: their map functions need a `K` too.
    async fn on_undecodable(&mut self, obj: Arc<crate::cache::UndecodableObject>) {
        if self.mapper.by_identity {
            let request = Request {
                namespace: obj.namespace().map(str::to_owned),
                name: obj.name().to_owned(),
            };
            self.queue.enqueue_undecodable(request);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::predicate::GenerationChanged;
    use k8s_openapi::api::apps::v1::Deployment;
    use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;

    /// Enqueues the object's controller owner if it is of kind `O` (`owns`):
    /// the owner reference with `controller: true` whose kind and API group
    /// match `O` (any version).
    fn owner_of_kind<K, O>() -> Mapper<K>
    where
        K: Resource,
        O: Resource<DynamicType = ()>,
        O::Scope: 'static,
    {
        owner_of(OwnerKind::of::<O>())
    }

    fn cm(name: &str, owners: Vec<OwnerReference>) -> ConfigMap {
        let mut cm = ConfigMap::default();
        cm.metadata.name = Some(name.into());
        cm.metadata.namespace = Some("ns".into());
        cm.metadata.owner_references = Some(owners);
        cm
    }

    fn owner(api_version: &str, kind: &str, name: &str, controller: bool) -> OwnerReference {
        OwnerReference {
            api_version: api_version.into(),
            kind: kind.into(),
            name: name.into(),
            uid: "u".into(),
            controller: Some(controller),
            ..OwnerReference::default()
        }
    }

    #[test]
    fn owner_mapper_picks_the_controller_of_the_right_kind() {
        let map = owner_of_kind::<ConfigMap, Deployment>();
        let obj = cm(
            "c",
            vec![
                owner("apps/v1", "Deployment", "not-controller", false),
                owner("apps/v1", "ReplicaSet", "other-kind", true),
                owner("example.com/v1", "Deployment", "other-group", true),
                owner("apps/v1beta1", "Deployment", "web", true),
            ],
        );
        assert_eq!(map.map(&obj), vec![Request::namespaced("ns", "web")]);
        assert!(map.map(&cm("c", vec![])).is_empty());
    }

    #[test]
    fn cluster_scoped_owner_has_no_namespace() {
        let map = owner_of_kind::<ConfigMap, Namespace>();
        let obj = cm("c", vec![owner("v1", "Namespace", "team-a", true)]);
        assert_eq!(map.map(&obj), vec![Request::cluster("team-a")]);
    }

    #[tokio::test(start_paused = true)]
    async fn an_owner_change_wakes_the_old_and_the_new_owner() {
        let queue: WorkQueue<Request> = WorkQueue::builder().build();
        let mut handler = EnqueueHandler::new(
            owner_of_kind::<ConfigMap, Deployment>(),
            WatchPredicates::new(),
            queue.clone(),
        );
        let before = cm("c", vec![owner("apps/v1", "Deployment", "old-web", true)]);
        let after = cm("c", vec![owner("apps/v1", "Deployment", "new-web", true)]);
        handler
            .on_update(Arc::new(before.clone()), Arc::new(after), false)
            .await;
        let mut woken: Vec<Request> = std::iter::from_fn(|| queue.try_get()).collect();
        woken.sort();
        assert_eq!(
            woken,
            [
                Request::namespaced("ns", "new-web"),
                Request::namespaced("ns", "old-web")
            ]
        );
        for request in &woken {
            queue.done(request);
        }
        // Unchanged owner: one request, not two.
        handler
            .on_update(Arc::new(before.clone()), Arc::new(before), false)
            .await;
        assert_eq!(queue.len(), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn an_undecodable_object_wakes_its_own_key_only() {
        let bad = Arc::new(crate::cache::UndecodableObject::for_test(Some("ns"), "bad"));
        let queue: WorkQueue<Request> = WorkQueue::builder().build();
        let mut primary = EnqueueHandler::new(
            the_object::<ConfigMap>(),
            WatchPredicates::new(),
            queue.clone(),
        );
        primary.on_undecodable(Arc::clone(&bad)).await;
        assert_eq!(queue.try_get(), Some(Request::namespaced("ns", "bad")));
        // a mapped watch needs the object to map it: nothing
        let owners: WorkQueue<Request> = WorkQueue::builder().build();
        let mut owned = EnqueueHandler::new(
            owner_of_kind::<ConfigMap, Deployment>(),
            WatchPredicates::new(),
            owners.clone(),
        );
        owned.on_undecodable(bad).await;
        assert_eq!(owners.len(), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn initial_list_is_low_priority_and_predicates_filter() {
        let queue: WorkQueue<Request> = WorkQueue::builder().build();
        let predicates = WatchPredicates::new().with(GenerationChanged);
        let mut handler = EnqueueHandler::new(the_object::<ConfigMap>(), predicates, queue.clone());
        let mut old = cm("old", vec![]);
        old.metadata.generation = Some(1);
        handler.on_add(Arc::new(old.clone()), true).await;
        handler.on_add(Arc::new(cm("fresh", vec![])), false).await;
        // Same generation: filtered out.
        let mut touched = old.clone();
        touched.metadata.resource_version = Some("2".into());
        handler
            .on_update(Arc::new(old.clone()), Arc::new(touched), false)
            .await;
        assert_eq!(queue.len(), 2);
        let first = queue.get().await.unwrap();
        assert_eq!(
            first,
            Request::namespaced("ns", "fresh"),
            "fresh event first"
        );
        let second = queue.get().await.unwrap();
        assert_eq!(second, Request::namespaced("ns", "old"));
    }

    #[tokio::test(start_paused = true)]
    async fn event_filters_apply_to_every_watch_and_predicates_to_their_own() {
        use crate::predicate::{HasMetadata, LabelsChanged, PredicateEvent};
        let queue: WorkQueue<Request> = WorkQueue::builder().build();
        let not_skipped = |e: &PredicateEvent<'_, dyn HasMetadata>| {
            e.meta()
                .labels
                .as_ref()
                .and_then(|l| l.get("skip"))
                .is_none()
        };
        let filters: Arc<[Arc<dyn Predicate<dyn HasMetadata>>]> =
            Arc::from(vec![
                Arc::new(not_skipped) as Arc<dyn Predicate<dyn HasMetadata>>
            ]);
        // The primary watch only takes label changes; the owned watch takes all.
        let mut primary = EnqueueHandler::new(
            the_object::<ConfigMap>(),
            WatchPredicates::new()
                .with(LabelsChanged)
                .with_event_filters(Arc::clone(&filters)),
            queue.clone(),
        );
        let mut owned = EnqueueHandler::new(
            owner_of_kind::<ConfigMap, Deployment>(),
            WatchPredicates::new().with_event_filters(filters),
            queue.clone(),
        );
        let plain = cm("web-cfg", vec![owner("apps/v1", "Deployment", "web", true)]);
        let mut touched = plain.clone();
        touched.data = Some([("k".to_owned(), "v".to_owned())].into());
        // Same labels: the primary watch drops it, the owned watch enqueues the owner.
        primary
            .on_update(Arc::new(plain.clone()), Arc::new(touched.clone()), false)
            .await;
        owned
            .on_update(Arc::new(plain.clone()), Arc::new(touched.clone()), false)
            .await;
        let web = queue.try_get();
        assert_eq!(web, Some(Request::namespaced("ns", "web")));
        assert_eq!(queue.try_get(), None);
        queue.done(&Request::namespaced("ns", "web"));
        // The event filter drops `skip` objects on both watches.
        let mut skipped = touched.clone();
        skipped.metadata.labels = Some([("skip".to_owned(), "y".to_owned())].into());
        primary
            .on_update(Arc::new(touched.clone()), Arc::new(skipped.clone()), false)
            .await;
        owned.on_add(Arc::new(skipped), false).await;
        assert_eq!(queue.len(), 0, "the event filter dropped both");
    }
}
