//! A sharded controller's side of [`crate::shard`]: a key runs only under
//! a [`ShardPermit`]; keys of other replicas are dropped, a reconcile whose
//! permit lapses is cancelled, and every time this replica becomes active
//! on a new member set, the cached objects it now owns are enqueued again.

use std::time::Duration;

use crate::cache::SharedCache;
use crate::reconcile::{Reconcile, Request};
use crate::shard::{ShardHandle, ShardPermit};
use crate::workqueue::WorkQueue;

/// How soon a key this replica owns but may not start yet (a handover in
/// progress) is tried again.
const HANDOVER_RETRY: Duration = Duration::from_millis(500);

/// Divides `K`'s cache-scope informer by this replica's share `selector` holds.
pub(crate) fn shard_kind<K>(
    shard: &ShardHandle,
    cache: &SharedCache,
    selector: tokio::sync::watch::Receiver<Option<crate::shard::ShardSelector>>,
) where
    K: kube::Resource<DynamicType = ()> + 'static,
    K::Scope: 'static,
{
    shard.divide_kind::<K>(cache, selector);
}

/// Registers a sharded controller's primary kind with its ring and divides
/// the cache of its primary kind and of `owned` (same-scope owned kinds)
/// by this replica's share, where the ring hashes namespaces; otherwise
/// every replica caches everything and logs that it does.
pub(super) fn divide_cache<K>(
    shard: &ShardHandle,
    cache: &SharedCache,
    primary: &crate::handler::OwnerKind,
    owned: &[super::watch::ShardKindFn],
    controller: &str,
) where
    K: kube::Resource<DynamicType = ()> + 'static,
    K::Scope: 'static,
{
    shard.register_kind(&primary.group, &primary.kind);
    // The primary kind is divided by label where the server does not
    // filter by shard selectors (label mode); owned kinds only by them.
    let Some(selectors) = shard.cache_selectors() else {
        tracing::info!(
            controller,
            mode = "filter-at-queue",
            "sharded controller: every replica caches every object and reconciles its share \
             (Sharding::by_namespace divides the cache: server-side where the API server \
             supports it, else by a shard label)"
        );
        return;
    };
    shard_kind::<K>(shard, cache, selectors.primary);
    for shard_kind in owned {
        shard_kind(shard, cache, selectors.owned.clone());
    }
}

/// The shard key of a request: `namespace/name`, or `name` if cluster-scoped.
pub(crate) fn shard_key(request: &Request) -> String {
    request.to_string()
}

/// A permit for `request`, or `None` after settling the key in the queue:
/// retried soon if this replica owns it, dropped if another one does.
pub(crate) fn admit(
    shard: &ShardHandle,
    queue: &WorkQueue<Request>,
    request: &Request,
) -> Option<ShardPermit> {
    let key = shard_key(request);
    if let Some(permit) = shard.try_start(&key) {
        return Some(permit);
    }
    queue.done(request);
    settle(shard, queue, request, &key);
    None
}

/// Runs `reconcile` (of `request`, admitted under `permit`) unless the
/// permit lapses first: then the reconcile's future is dropped where it
/// stands (polled no more: the lapse is checked before it on every poll),
/// the cancellation is logged and counted, and the key is settled as by
/// [`admit`] — no retry, no backoff, no `on_error`; tried again under a
/// new permit if this replica still owns it, else left to its new owner.
/// Returns the reconcile's output, or `None` if it was cancelled.
pub(crate) async fn run_under<F: Future>(
    shard: &ShardHandle,
    queue: &WorkQueue<Request>,
    controller: &str,
    request: &Request,
    permit: ShardPermit,
    reconcile: F,
) -> Option<F::Output> {
    let lapse = tokio::select! {
        biased;
        lapse = permit.lapsed() => lapse,
        output = reconcile => return Some(output),
    };
    // The reconcile future is gone. Logged while the permit is still held,
    // so this line precedes any other replica's start of the key.
    tracing::warn!(
        controller,
        namespace = request.namespace.as_deref().unwrap_or(""),
        name = %request.name,
        reason = lapse.as_str(),
        "shard permit lapsed; reconcile cancelled"
    );
    // Only now does the key count as free.
    drop(permit);
    if let Some(families) = shard.shares.get() {
        families.cancelled(controller);
    }
    queue.done(request);
    settle(shard, queue, request, &shard_key(request));
    None
}

/// A key that may not run now: retried soon if this replica owns it,
/// dropped if another one does.
fn settle(shard: &ShardHandle, queue: &WorkQueue<Request>, request: &Request, key: &str) {
    if shard.owns(key) {
        queue.add_after(request.clone(), HANDOVER_RETRY);
    } else {
        queue.forget(request);
        tracing::trace!(key, "not this replica's key; dropped");
    }
}

/// Until `stop`: whenever this replica turns active on a member set it had
/// not been active on, enqueues every cached primary object it owns, the
/// ones it did not own in the last member set it was active on first (a
/// dead replica's share is picked up before the survivors' own keys are
/// reconciled again).
pub(crate) async fn resync_on_rebalance<R: Reconcile>(
    shard: ShardHandle,
    cache: SharedCache,
    queue: WorkQueue<Request>,
    controller: String,
) {
    let mut status = shard.subscribe();
    let mut last: Option<(u64, Vec<String>)> = None;
    let mut previous: Option<hashbrown::HashSet<String>> = None;
    loop {
        let current = status.borrow_and_update().clone();
        let seen = Some((current.rebalances, current.members.clone()));
        if current.active && seen != last {
            last = seen;
            // what the cache holds now: enqueueing needs no wait for writes
            match cache.store::<R::Object>().map(|store| store.list()) {
                Ok(objects) => {
                    let requests = objects.iter().filter_map(|o| Request::for_object(&**o));
                    let resync = Resync::plan(requests, |key| shard.owns(key), previous.as_ref());
                    let (owned, gained) = (resync.owned, resync.moved_in);
                    for request in resync.order {
                        queue.add(request);
                    }
                    if let Some(families) = shard.shares.get() {
                        families.record(&controller, owned.len(), gained);
                    }
                    tracing::info!(
                        controller,
                        owned = owned.len(),
                        moved_in = gained,
                        members = current.members.len(),
                        "shard active; enqueued the objects this replica owns"
                    );
                    previous = Some(owned);
                }
                Err(error) => {
                    tracing::warn!(controller, %error, "could not list the cache to resync a shard")
                }
            }
        }
        if status.changed().await.is_err() {
            return;
        }
    }
}

/// What a replica turning active enqueues, in order.
#[derive(Debug)]
struct Resync {
    /// The requests to enqueue: the keys moved in first, then the keys
    /// kept from the last member set this replica was active on. Moved-in
    /// keys are the ones nobody may have reconciled since their old owner
    /// lost them; kept keys are enqueued too (an event that came while this
    /// replica briefly saw them elsewhere was dropped), but after.
    order: Vec<Request>,
    /// The keys this replica owns now.
    owned: hashbrown::HashSet<String>,
    /// How many of them it did not own before (all of them after joining).
    moved_in: usize,
}

impl Resync {
    /// The resync of the cached `requests` this replica `owns`, given the
    /// keys it owned when `previous`ly active (`None`: it just joined).
    fn plan(
        requests: impl Iterator<Item = Request>,
        owns: impl Fn(&str) -> bool,
        previous: Option<&hashbrown::HashSet<String>>,
    ) -> Self {
        let mut owned = hashbrown::HashSet::new();
        let mut order = Vec::new();
        let mut kept = Vec::new();
        for request in requests {
            let key = shard_key(&request);
            if !owns(&key) {
                continue;
            }
            let moved_in = previous.is_none_or(|before| !before.contains(&key));
            owned.insert(key);
            if moved_in {
                order.push(request);
            } else {
                kept.push(request);
            }
        }
        let moved_in = order.len();
        order.extend(kept);
        Self {
            order,
            owned,
            moved_in,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn requests(names: &[&str]) -> impl Iterator<Item = Request> {
        names
            .iter()
            .map(|name| Request::namespaced("ns", *name))
            .collect::<Vec<_>>()
            .into_iter()
    }

    fn names(order: &[Request]) -> Vec<&str> {
        order.iter().map(|r| r.name.as_str()).collect()
    }

    #[test]
    fn keys_moved_in_are_enqueued_before_keys_kept() {
        let previous: hashbrown::HashSet<String> = ["ns/a".into(), "ns/c".into()].into();
        let owns = |key: &str| key != "ns/d";
        let resync = Resync::plan(requests(&["a", "b", "c", "d", "e"]), owns, Some(&previous));
        assert_eq!(names(&resync.order), ["b", "e", "a", "c"]);
        assert_eq!(resync.moved_in, 2);
        assert_eq!(resync.owned.len(), 4);
        assert!(!resync.owned.contains("ns/d"), "not this replica's");
    }

    #[test]
    fn after_joining_every_owned_key_counts_as_moved_in() {
        let resync = Resync::plan(requests(&["a", "b"]), |_| true, None);
        assert_eq!(names(&resync.order), ["a", "b"]);
        assert_eq!(resync.moved_in, 2);
    }
}
