use super::tracker::*;
use super::wait::{Observed, wait_observed};
use crate::cache::error::CacheError;
use crate::cache::informer::{Indexer, Store};
use crate::cache::key::ObjectKey;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Resource;
use kube::api::ObjectMeta;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;

fn cm(name: &str, rv: &str, uid: &str) -> Arc<ConfigMap> {
    Arc::new(ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some("ns".into()),
            resource_version: Some(rv.into()),
            uid: Some(uid.into()),
            ..Default::default()
        },
        ..Default::default()
    })
}

fn key(name: &str) -> WriteKey {
    WriteKey {
        api_version: "v1".into(),
        plural: "configmaps".into(),
        namespace: Some("ns".into()),
        name: name.into(),
    }
}

fn object(rv: &str) -> Written {
    Written::Object {
        resource_version: rv.into(),
        uid: Some("u1".into()),
        vanishing: false,
    }
}

fn never_shown() -> ShownCheck {
    Arc::new(|_: &WriteKey, _: &Written| false)
}

fn tracker() -> Arc<WriteTracker> {
    let t = WriteTracker::new();
    t.watch_kind("v1", "configmaps", None, never_shown());
    Arc::new(t)
}

struct Fixture {
    indexer: Indexer<ConfigMap>,
    alive: watch::Sender<()>,
}

impl Fixture {
    fn new() -> Self {
        Self {
            indexer: Indexer::new(),
            alive: watch::channel(()).0,
        }
    }
    fn observed(&self) -> Observed<ConfigMap> {
        Observed {
            store: Store::new(self.indexer.clone()),
            alive: self.alive.subscribe(),
            informer: "v1/ConfigMap".into(),
        }
    }
    /// What the informer does: store, drop caught-up records (which
    /// wakes the readers waiting for them).
    fn apply(&self, tracker: &WriteTracker, obj: Arc<ConfigMap>) {
        let name = obj.metadata.name.clone().unwrap();
        self.indexer
            .insert(ObjectKey::new(Some("ns"), &name), Arc::clone(&obj));
        tracker.observe(&key(&name), Some(obj.meta()), None, false);
    }
    fn delete(&self, tracker: &WriteTracker, obj: Arc<ConfigMap>) {
        let name = obj.metadata.name.clone().unwrap();
        self.indexer.remove(&format!("ns/{name}"));
        tracker.observe(&key(&name), None, Some(obj.meta()), false);
    }
}

fn deadline(secs: u64) -> Duration {
    Duration::from_secs(secs)
}

#[test]
fn versions_compare_as_integers_and_opaque_ones_only_equal() {
    assert!(at_least("10", "9"));
    assert!(at_least("10", "10"));
    assert!(!at_least("9", "10"));
    assert!(at_least("abc", "abc"));
    assert!(!at_least("abd", "abc"));
    assert!(!at_least("10", "abc"));
}

#[test]
fn deletions_are_observed_when_absent_or_replaced_by_another_uid() {
    let deleted = Written::Deleted {
        uid: Some("u1".into()),
    };
    assert!(deleted.observed_in(None));
    assert!(!deleted.observed_in(Some(cm("a", "5", "u1").meta())));
    assert!(deleted.observed_in(Some(cm("a", "9", "u2").meta())));
    assert!(!object("7").observed_in(None));
    assert!(!object("7").observed_in(Some(cm("a", "6", "u1").meta())));
    assert!(object("7").observed_in(Some(cm("a", "8", "u1").meta())));
}

/// Issue 38 (a finalizer's cleanup ran twice on one delete): the answer to
/// the write that released the last finalizer carries the resourceVersion
/// the object had before it (the apiserver deletes it within the update),
/// so the cached copy still listing the finalizer is not the write.
#[test]
fn a_release_of_the_last_finalizer_is_observed_only_once_the_object_is_gone() {
    let released = Written::Object {
        resource_version: "7".into(),
        uid: Some("u1".into()),
        vanishing: true,
    };
    let mut held = (*cm("a", "7", "u1")).clone();
    held.metadata.finalizers = Some(vec!["example.com/cleanup".into()]);
    assert!(!released.observed_in(Some(held.meta())));
    held.metadata.resource_version = Some("8".into());
    assert!(!released.observed_in(Some(held.meta())));
    assert!(released.observed_in(None));
    // A newer object of the same name shows it too.
    held.metadata.uid = Some("u2".into());
    assert!(released.observed_in(Some(held.meta())));
    // Without finalizers (a Pod's graceful deletion), versions compare.
    assert!(released.observed_in(Some(cm("a", "7", "u1").meta())));
    assert!(!released.observed_in(Some(cm("a", "6", "u1").meta())));
}

#[test]
fn records_only_watched_kinds_and_keeps_the_newest_version() {
    let t = tracker();
    let mut other = key("a");
    other.plural = "secrets".into();
    t.record(other.clone(), object("5"));
    assert!(!t.any_pending());
    t.record(key("a"), object("7"));
    t.record(key("a"), object("5")); // an older answer arriving late
    assert_eq!(t.pending(&key("a")).unwrap().0, object("7"));
    t.record(key("a"), object("9"));
    assert_eq!(t.pending(&key("a")).unwrap().0, object("9"));
    assert_eq!(t.len(), 1);
}

#[test]
fn a_namespaced_cache_records_only_its_namespace() {
    let t = WriteTracker::new();
    t.watch_kind("v1", "configmaps", Some("ns"), never_shown());
    let mut elsewhere = key("a");
    elsewhere.namespace = Some("other".into());
    t.record(elsewhere, object("5"));
    assert!(!t.any_pending());
    t.record(key("a"), object("5"));
    assert!(t.any_pending());
}

#[test]
fn records_are_bounded_and_the_oldest_goes_first() {
    let t = WriteTracker::with_capacity(2);
    t.watch_kind("v1", "configmaps", None, never_shown());
    t.record(key("a"), object("1"));
    t.record(key("b"), object("2"));
    t.record(key("c"), object("3"));
    assert_eq!(t.len(), 2);
    assert!(t.pending(&key("a")).is_none());
    assert!(t.pending(&key("c")).is_some());
}

#[test]
fn the_informer_drops_records_once_caught_up() {
    let t = tracker();
    let f = Fixture::new();
    t.record(key("a"), object("7"));
    f.apply(&t, cm("a", "6", "u1"));
    assert!(t.any_pending());
    f.apply(&t, cm("a", "8", "u1"));
    assert!(!t.any_pending());
    // Deleted by someone else after our write: absent is the truth.
    t.record(key("b"), object("10"));
    f.delete(&t, cm("b", "11", "u1"));
    assert!(!t.any_pending());
}

/// `t` records ConfigMap writes and checks them against `f`'s store.
fn watch_configmaps_in(t: &WriteTracker, f: &Fixture) {
    let store = Store::new(f.indexer.clone());
    t.watch_kind(
        "v1",
        "configmaps",
        None,
        Arc::new(move |k: &WriteKey, w: &Written| {
            w.observed_in(
                store
                    .get(k.namespace.as_deref(), &k.name)
                    .as_deref()
                    .map(Resource::meta),
            )
        }),
    );
}

#[test]
fn a_write_the_informer_applied_before_it_was_recorded_is_not_kept() {
    let f = Fixture::new();
    let t = WriteTracker::new();
    watch_configmaps_in(&t, &f);
    // The watch event won the race against the write's answer.
    f.apply(&t, cm("a", "7", "u1"));
    t.record(key("a"), object("7"));
    assert!(!t.any_pending());
    t.record(key("a"), object("8"));
    assert!(t.any_pending());
}

/// Issue 22: someone else deletes the object right after our write,
/// and the informer applies that deletion before our write's answer is
/// recorded: the write counts as observed (the object is gone), no read
/// stalls for the bound.
#[tokio::test(start_paused = true)]
async fn a_deletion_applied_before_the_write_was_recorded_counts_as_observed() {
    let f = Arc::new(Fixture::new());
    let t = Arc::new(WriteTracker::new());
    watch_configmaps_in(&t, &f);
    f.apply(&t, cm("a", "6", "u1"));
    // The deletion (rv 8) is applied first ...
    f.delete(&t, cm("a", "8", "u1"));
    t.note_deleted(key("a"), Some("8"));
    // ... then our write's answer (rv 7) is recorded.
    t.record(key("a"), object("7"));
    assert!(!t.any_pending(), "observed: the object is gone");
    let pending = t.pending_of_kind("v1", "configmaps", Some("ns"));
    let started = tokio::time::Instant::now();
    wait_observed(&t, f.observed(), pending, deadline(10))
        .await
        .unwrap();
    assert_eq!(started.elapsed(), Duration::ZERO, "no stall");
    // A deletion older than the write does not count.
    t.note_deleted(key("b"), Some("3"));
    t.record(key("b"), object("5"));
    assert!(t.any_pending());
}

#[tokio::test(start_paused = true)]
async fn a_read_waits_for_the_informer_and_wakes_on_its_change() {
    let t = tracker();
    let f = Arc::new(Fixture::new());
    f.apply(&t, cm("a", "5", "u1"));
    t.record(key("a"), object("7"));
    let pending = t.pending_of_kind("v1", "configmaps", Some("ns"));
    let started = tokio::time::Instant::now();
    let wait = tokio::spawn({
        let (t, observed) = (Arc::clone(&t), f.observed());
        async move { wait_observed(&t, observed, pending, deadline(10)).await }
    });
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(
        !wait.is_finished(),
        "returned before the informer showed rv 7"
    );
    f.apply(&t, cm("a", "6", "u1"));
    tokio::task::yield_now().await;
    assert!(!wait.is_finished(), "rv 6 is older than the write");
    f.apply(&t, cm("a", "7", "u1"));
    wait.await.unwrap().unwrap();
    assert_eq!(started.elapsed(), Duration::from_secs(3));
    assert!(!t.any_pending());
}

#[test]
fn only_a_record_leaving_bumps_the_wake_up_sequence() {
    let t = tracker();
    let f = Fixture::new();
    let woken = t.subscribe_resolved();
    // Nothing pending: the informer's changes wake no one.
    f.apply(&t, cm("a", "5", "u1"));
    assert!(!woken.has_changed().unwrap());
    t.record(key("a"), object("7"));
    // A change of another object, or an older version, resolves nothing.
    f.apply(&t, cm("b", "8", "u2"));
    f.apply(&t, cm("a", "6", "u1"));
    assert!(!woken.has_changed().unwrap());
    f.apply(&t, cm("a", "7", "u1"));
    assert!(woken.has_changed().unwrap());
}

#[tokio::test(start_paused = true)]
async fn a_read_whose_record_was_evicted_returns_at_once() {
    let t = Arc::new(WriteTracker::with_capacity(1));
    t.watch_kind("v1", "configmaps", None, never_shown());
    let f = Fixture::new();
    t.record(key("a"), object("7"));
    let pending = t.pending_of_kind("v1", "configmaps", None);
    let started = tokio::time::Instant::now();
    let wait = tokio::spawn({
        let (t, observed) = (Arc::clone(&t), f.observed());
        async move { wait_observed(&t, observed, pending, deadline(10)).await }
    });
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(!wait.is_finished());
    // Another write pushes the first out: its read stops waiting (the
    // module docs: it may then be stale), instead of timing out.
    t.record(key("b"), object("8"));
    wait.await.unwrap().unwrap();
    assert_eq!(started.elapsed(), Duration::from_secs(1));
}

#[tokio::test(start_paused = true)]
async fn a_read_waiting_on_a_stopped_informer_says_so() {
    let t = tracker();
    let f = Fixture::new();
    t.record(key("a"), object("7"));
    let pending = t.pending_of_kind("v1", "configmaps", None);
    let observed = f.observed();
    drop(f);
    let err = wait_observed(&t, observed, pending, deadline(10))
        .await
        .unwrap_err();
    assert!(matches!(err, CacheError::Stopped(_)), "{err}");
}

#[tokio::test(start_paused = true)]
async fn a_read_after_a_delete_waits_until_the_object_is_gone() {
    let t = tracker();
    let f = Arc::new(Fixture::new());
    f.apply(&t, cm("a", "5", "u1"));
    t.record(
        key("a"),
        Written::Deleted {
            uid: Some("u1".into()),
        },
    );
    let pending = t.pending_of_kind("v1", "configmaps", None);
    let wait = tokio::spawn({
        let (t, observed) = (Arc::clone(&t), f.observed());
        async move { wait_observed(&t, observed, pending, deadline(10)).await }
    });
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(!wait.is_finished());
    f.delete(&t, cm("a", "6", "u1"));
    wait.await.unwrap().unwrap();
}

#[tokio::test(start_paused = true)]
async fn a_write_the_informer_never_shows_times_out_with_a_clear_error() {
    let t = tracker();
    let f = Fixture::new();
    t.record(key("a"), object("7"));
    let pending = t.pending_of_kind("v1", "configmaps", None);
    let started = tokio::time::Instant::now();
    let err = wait_observed(&t, f.observed(), pending, deadline(5))
        .await
        .unwrap_err();
    assert_eq!(started.elapsed(), Duration::from_secs(5));
    let text = err.to_string();
    assert!(
        text.contains("ns/a") && text.contains("resourceVersion 7"),
        "{text}"
    );
    // Forgotten: the retry reads what the cache has.
    assert!(!t.any_pending());
}

#[tokio::test(start_paused = true)]
async fn dropping_the_read_ends_the_wait() {
    let t = tracker();
    let f = Fixture::new();
    t.record(key("a"), object("7"));
    let pending = t.pending_of_kind("v1", "configmaps", None);
    let read = wait_observed(&t, f.observed(), pending, deadline(60));
    let timed_out = tokio::time::timeout(Duration::from_secs(1), read).await;
    assert!(timed_out.is_err());
    assert_eq!(
        f.alive.receiver_count(),
        0,
        "the dropped read let go of the informer"
    );
}

#[tokio::test(start_paused = true)]
async fn nothing_pending_returns_at_once() {
    let t = tracker();
    let f = Fixture::new();
    let started = tokio::time::Instant::now();
    wait_observed(&t, f.observed(), Vec::new(), deadline(5))
        .await
        .unwrap();
    assert_eq!(started.elapsed(), Duration::ZERO);
}

/// Issue 38: a reconciler released the last finalizer of an object whose
/// body does not decode, and its next read found the record "absent" (the
/// decodable view has no object there) and ran the cleanup again. The
/// cache holds such an object as its metadata: the write is shown only
/// once the record is gone.
#[tokio::test(start_paused = true)]
async fn a_release_of_the_last_finalizer_of_an_undecodable_object_waits_until_it_is_gone() {
    let t = tracker();
    let f = Arc::new(Fixture::new());
    let held = ObjectMeta {
        name: Some("a".into()),
        namespace: Some("ns".into()),
        resource_version: Some("5".into()),
        uid: Some("u1".into()),
        finalizers: Some(vec!["example.com/cleanup".into()]),
        deletion_timestamp: Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
            k8s_openapi::jiff::Timestamp::UNIX_EPOCH,
        )),
        ..Default::default()
    };
    f.indexer.set_undecodable(
        ObjectKey::new(Some("ns"), "a"),
        Arc::new(crate::cache::UndecodableObject::new(
            "ConfigMap".into(),
            ObjectKey::new(Some("ns"), "a"),
            held,
            "unknown variant `Degraded`".into(),
        )),
    );
    // The apiserver answers the release with the object as sent: same
    // resourceVersion, no finalizers, being deleted.
    t.record(
        key("a"),
        Written::Object {
            resource_version: "5".into(),
            uid: Some("u1".into()),
            vanishing: true,
        },
    );
    let pending = t.pending_of_kind("v1", "configmaps", None);
    let wait = tokio::spawn({
        let (t, observed) = (Arc::clone(&t), f.observed());
        async move { wait_observed(&t, observed, pending, deadline(10)).await }
    });
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(
        !wait.is_finished(),
        "the read went on with the object still cached"
    );
    f.indexer.remove("ns/a");
    t.observe(&key("a"), None, None, false);
    wait.await.unwrap().unwrap();
}
