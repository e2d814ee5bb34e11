//! How one watch of a controller registers on the shared cache: the
//! registration functions the builder collects and `prepare` runs (once,
//! or once per engaged cluster of a multicluster controller), and what a
//! registered watch leaves behind (its sync wait and its removal).

use std::sync::Arc;

use crate::cache::Cacheable;
use crate::cache::{CacheError, SharedCache};
use crate::handler::{Enqueue, EnqueueHandler, Mapper, WatchPredicates};
use crate::predicate::{HasMetadata, Predicate};
use crate::reconcile::Request;
use crate::workqueue::WorkQueue;

/// Registers one watch of a controller on a shared cache (again on each
/// cache it is called with: a multicluster controller registers its
/// watches on every engaged cluster's cache).
pub(super) type WatchFn = Arc<
    dyn Fn(&SharedCache, &WatchTarget) -> Result<RegisteredWatch, (String, CacheError)>
        + Send
        + Sync,
>;

/// Registers one index of a controller on a shared cache.
pub(super) type IndexFn =
    Arc<dyn Fn(&SharedCache) -> Result<(), (String, CacheError)> + Send + Sync>;

#[cfg(feature = "shard")]
/// Makes the cache of one kind list only this replica's shard.
pub(super) type ShardKindFn = fn(
    &crate::shard::ShardHandle,
    &SharedCache,
    tokio::sync::watch::Receiver<Option<crate::shard::ShardSelector>>,
);

/// Waits until a registered watch (or read) has synced; false if it never will.
pub(super) type SyncWait = Box<dyn Fn() -> futures::future::BoxFuture<'static, bool> + Send + Sync>;

/// A registered watch: its kind, its sync state, and how to remove it.
pub(super) struct RegisteredWatch {
    pub(super) kind: String,
    pub(super) synced: SyncWait,
    pub(super) remove: Box<dyn FnOnce() + Send + Sync>,
}

/// What every watch of a controller enqueues into, and how.
#[derive(Clone)]
pub(super) struct WatchTarget {
    pub(super) queue: WorkQueue<Request>,
    pub(super) event_filters: Arc<[Arc<dyn Predicate<dyn HasMetadata>>]>,
}

/// A watch of kind `K`: the informer's events pass `predicates` (and the
/// controller's event filters), and `mapper` (made when the watch
/// registers) turns each into requests.
pub(super) fn kind_watch<K>(
    mapper: impl Fn(&SharedCache) -> Result<Mapper<K>, CacheError> + Send + Sync + 'static,
    predicates: WatchPredicates<K>,
) -> WatchFn
where
    K: Cacheable<DynamicType = ()>,
    K::Scope: 'static,
{
    Arc::new(move |cache: &SharedCache, target: &WatchTarget| {
        let predicates = predicates
            .clone()
            .with_event_filters(Arc::clone(&target.event_filters));
        let mapper = mapper(cache).map_err(|e| (K::kind(&()).into_owned(), e))?;
        register_handler(cache, mapper, predicates, target.queue.clone())
    })
}

/// Registers on `cache`'s informer of kind `K` a handler adding `mapper`'s
/// requests for the events that pass `predicates` to `queue`: what every
/// watch of a controller leaves behind (and the fleet-crossing ones, whose
/// `queue` routes to other clusters' controllers).
pub(super) fn register_handler<K, Q>(
    cache: &SharedCache,
    mapper: Mapper<K, Q::Item>,
    predicates: WatchPredicates<K>,
    queue: Q,
) -> Result<RegisteredWatch, (String, CacheError)>
where
    K: Cacheable<DynamicType = ()>,
    K::Scope: 'static,
    Q: Enqueue,
{
    let kind = K::kind(&()).into_owned();
    let handler = EnqueueHandler::new(mapper, predicates, queue);
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
}

/// A source of requests outside any watch, boxed (behind a lock only so
/// that the controller holding it is `Sync`; it is taken whole).
pub(super) type Source = parking_lot::Mutex<futures::stream::BoxStream<'static, Request>>;

/// Forwards `requests` into `queue` until the source ends or the returned
/// registration is removed. A source feeds the one queue it is handed
/// (a controller's `prepare` takes its sources; a multicluster
/// controller, whose watches register once per cluster, has none:
/// `Fleet::add` refuses them).
pub(super) fn forward_source(
    controller: &str,
    requests: Source,
    queue: &WorkQueue<Request>,
) -> Result<RegisteredWatch, (String, CacheError)> {
    let kind = "(external source)".to_owned();
    let runtime = tokio::runtime::Handle::try_current().map_err(|_| {
        (
            kind.clone(),
            CacheError::NoRuntime("Controller::watches_stream"),
        )
    })?;
    let controller = controller.to_owned();
    let queue = queue.clone();
    let mut requests = requests.into_inner();
    let forward = runtime.spawn(async move {
        use futures::StreamExt;
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
}

/// A kind cached for reads only: its informer started and synced with the
/// controller, no handler.
pub(super) fn read_watch<K>() -> WatchFn
where
    K: Cacheable<DynamicType = ()>,
    K::Scope: 'static,
{
    Arc::new(|cache: &SharedCache, _: &WatchTarget| {
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
    })
}

/// The index `name` on the informer of kind `T`, `values` giving an
/// object's index values.
pub(super) fn index_fn<T>(
    name: String,
    values: impl Fn(&T) -> Vec<String> + Send + Sync + 'static,
) -> IndexFn
where
    T: Cacheable<DynamicType = ()>,
    T::Scope: 'static,
{
    let values = Arc::new(values);
    Arc::new(move |cache: &SharedCache| {
        let kind = T::kind(&()).into_owned();
        let values = Arc::clone(&values);
        cache
            .add_index::<T>(name.clone(), move |obj: &T| values(obj))
            .map_err(|e| (kind, e))
    })
}
