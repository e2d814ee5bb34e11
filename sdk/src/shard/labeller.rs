//! Label mode's labeller (see the module docs, "Label mode"): on a server
//! that ignores KEP-5866 shard selectors, each replica of a
//! [`by_namespace`](super::Sharding::by_namespace) ring puts its own
//! shard label on the primary objects it owns that carry no member's
//! label, and moves the ones in its cache that it no longer owns to their
//! new owner's label, so that each replica's cache, which lists by its own
//! label, holds its share.

use std::marker::PhantomData;
use std::sync::Arc;

use futures::StreamExt;
use kube::api::{Patch, PatchParams};
use tokio::sync::mpsc;
use tokio_util::sync::{CancellationToken, DropGuard};

use super::division::ShardMode;
use super::handle::{ShardHandle, ShardStatus};
use super::label::{label_key, member_id, strays_selector};
use super::view::{KeyScheme, View};
use crate::cache::Cacheable;
use crate::cache::{
    HandlerRegistration, InformerEvent, SharedCache, SharedIndexInformer, handler_fn,
    metadata_informer,
};
use crate::reconcile::Request;

/// At most this many objects are relabelled per batch (one log line each).
const BATCH: usize = 512;
/// Patches in flight at once.
const CONCURRENT_PATCHES: usize = 8;

/// An object that may need a new label, seen by one of the two watches.
#[derive(Debug)]
struct Candidate {
    /// Its namespace and name; its shard key is this request's `Display`.
    object: Request,
    resource_version: Option<String>,
    /// From the stray watch (no member's label): labelled if this replica
    /// owns it. Else from this replica's cache: relabelled if it does not.
    stray: bool,
}

impl Candidate {
    fn of(meta: &kube::core::ObjectMeta, stray: bool) -> Option<Self> {
        Some(Self {
            object: Request {
                namespace: meta.namespace.clone(),
                name: meta.name.clone()?,
            },
            resource_version: meta.resource_version.clone(),
            stray,
        })
    }

    fn key(&self) -> String {
        self.object.to_string()
    }
}

/// The label each object of `batch` needs, by `identity`'s judgement in
/// `view`: a stray (no member's label) it owns gets its id, a cached
/// object (labelled with its id) it does not own gets its owner's; any
/// other needs nothing from it. The latest sighting of a key counts.
fn targets(batch: Vec<Candidate>, view: &View, identity: &str) -> Vec<(Candidate, String)> {
    let mut wanted: hashbrown::HashMap<String, (Candidate, String)> = hashbrown::HashMap::new();
    for candidate in batch {
        let key = candidate.key();
        let Some(owner) = view.owner(&key) else {
            continue;
        };
        // every member labels only its own strays, and moves only its own
        let target = match (candidate.stray, owner == identity) {
            (true, true) => member_id(identity),
            (false, false) => member_id(owner),
            _ => {
                wanted.remove(&key);
                continue;
            }
        };
        wanted.insert(key, (candidate, target));
    }
    wanted.into_values().collect()
}

/// Removes an event handler from its informer when dropped.
struct Unregister<K: Cacheable>(SharedIndexInformer<K>, HandlerRegistration);

impl<K: Cacheable> Drop for Unregister<K> {
    fn drop(&mut self) {
        self.0.remove_event_handler(&self.1);
    }
}

/// What one batch of patches came to.
#[derive(Debug, Default)]
struct Outcome {
    labelled: usize,
    moved_out: usize,
    conflicts: usize,
    gone: usize,
    failed: usize,
    error: Option<String>,
}

/// Until the ring ends: labels `K` (a sharded controller's primary kind)
/// for `controller` while its cache is in label mode (the server ignores
/// shard selectors and this replica may patch the kind); returns once its
/// reflector decided on another mode, or at once if the ring does not
/// assign namespaces.
pub(crate) async fn run<K>(shard: ShardHandle, cache: SharedCache, controller: String)
where
    K: Cacheable<DynamicType = (), Scope: 'static>,
{
    if shard.scheme != KeyScheme::Namespace {
        return;
    }
    let mut status = shard.subscribe();
    let first = match status.wait_for(|s| s.active && !s.members.is_empty()).await {
        Ok(first) => first.clone(),
        Err(_) => return,
    };
    // Dividing the primary kind's cache asked the server (and whether
    // this replica may patch the kind) and decided; label only in label mode.
    let Some(mut mode) = shard.divided_mode::<K>() else {
        return;
    };
    let mut ring_status = status.clone();
    let decided = tokio::select! {
        decided = mode.wait_for(Option::is_some) => decided.ok().and_then(|m| *m),
        () = async { while ring_status.changed().await.is_ok() {} } => None,
    };
    if decided != Some(ShardMode::Labels) {
        return;
    }
    let client = cache.raw_client().clone();
    let labeller = Labeller::<K> {
        client,
        cache,
        key: label_key(&shard.ring),
        ring: shard.ring.clone(),
        identity: shard.identity.clone(),
        scheme: shard.scheme,
        controller,
        _k: PhantomData,
    };
    tracing::info!(
        controller = %labeller.controller,
        kind = %K::kind(&()),
        label = %labeller.key,
        id = %member_id(&labeller.identity),
        mode = "label selector",
        "label mode: this replica labels the objects it owns that carry no member's shard \
         label, and relabels the ones leaving its share for their new owner"
    );
    labeller.run(status, first).await;
}

struct Labeller<K> {
    client: kube::Client,
    cache: SharedCache,
    /// `shard.opkit.dev/<ring>`.
    key: String,
    ring: Arc<str>,
    identity: Arc<str>,
    scheme: KeyScheme,
    controller: String,
    _k: PhantomData<fn() -> K>,
}

impl<K> Labeller<K>
where
    K: Cacheable<DynamicType = (), Scope: 'static>,
{
    async fn run(self, mut status: tokio::sync::watch::Receiver<ShardStatus>, first: ShardStatus) {
        let (tx, mut rx) = mpsc::unbounded_channel::<Candidate>();
        // The objects arriving in this replica's cache (labelled with its id).
        let informer = match self.cache.informer::<K>() {
            Ok(informer) => informer,
            Err(error) => {
                tracing::warn!(controller = %self.controller, %error, "label mode: no cache of the primary kind; not labelling");
                return;
            }
        };
        let arrivals = {
            let tx = tx.clone();
            informer.add_event_handler(handler_fn(move |event: InformerEvent<K>| {
                let obj = match event {
                    InformerEvent::Add { obj, .. } => obj,
                    InformerEvent::Update { new, .. } => new,
                    InformerEvent::Delete { .. } => return,
                };
                if let Some(candidate) = Candidate::of(obj.meta(), false) {
                    let _ = tx.send(candidate);
                }
            }))
        };
        // removed when this task ends or is aborted with its controller
        let _arrivals = match arrivals {
            Ok(registration) => Unregister(informer, registration),
            Err(error) => {
                tracing::warn!(controller = %self.controller, %error, "label mode: cannot follow the cache of the primary kind; not labelling");
                return;
            }
        };
        let mut view = View::with_scheme(first.members.iter().cloned(), self.scheme);
        let mut seen = (first.rebalances, first.members.clone());
        let mut strays = self.watch_strays(&view, tx.clone());
        self.sweep(&view).await;
        loop {
            tokio::select! {
                changed = status.changed() => {
                    if changed.is_err() {
                        break;
                    }
                    let current = status.borrow_and_update().clone();
                    let now = (current.rebalances, current.members.clone());
                    if current.active && !current.members.is_empty() && now != seen {
                        seen = now;
                        view = View::with_scheme(current.members.iter().cloned(), self.scheme);
                        // dropping the guard stops the old watch
                        strays = self.watch_strays(&view, tx.clone());
                        self.sweep(&view).await;
                    }
                }
                Some(first) = rx.recv() => {
                    let mut batch = vec![first];
                    while batch.len() < BATCH {
                        match rx.try_recv() {
                            Ok(candidate) => batch.push(candidate),
                            Err(_) => break,
                        }
                    }
                    self.relabel(batch, &view, "watch").await;
                }
            }
        }
        drop(strays);
    }

    /// Starts the stray watch of `view`: the objects whose shard label
    /// names none of its members (or is missing). Stopped when the guard
    /// returned is dropped (also when this task is aborted).
    fn watch_strays(&self, view: &View, tx: mpsc::UnboundedSender<Candidate>) -> DropGuard {
        let cancel = CancellationToken::new();
        let selector =
            strays_selector(&self.ring, view.ring().members().iter().map(String::as_str));
        let informer = metadata_informer::<K>(
            self.client.clone(),
            self.cache.namespace(),
            &selector,
            cancel.clone(),
        );
        let handler = handler_fn(
            move |event: InformerEvent<kube::core::PartialObjectMeta<K>>| {
                let obj = match event {
                    InformerEvent::Add { obj, .. } => obj,
                    InformerEvent::Update { new, .. } => new,
                    InformerEvent::Delete { .. } => return,
                };
                if let Some(candidate) = Candidate::of(&obj.metadata, true) {
                    let _ = tx.send(candidate);
                }
            },
        );
        let started = informer
            .add_event_handler(handler)
            .map(drop)
            .and_then(|()| informer.start());
        if let Err(error) = started {
            tracing::warn!(controller = %self.controller, %error, selector, "label mode: could not watch the unlabelled objects");
        }
        cancel.drop_guard()
    }

    /// Relabels the objects in this replica's cache it does not own in
    /// `view` (it just became active on it).
    async fn sweep(&self, view: &View) {
        let cached = match self.cache.store::<K>().map(|store| store.list()) {
            Ok(cached) => cached,
            Err(error) => {
                tracing::warn!(controller = %self.controller, %error, "label mode: could not list the cache");
                return;
            }
        };
        let batch = cached
            .iter()
            .filter_map(|obj| Candidate::of(obj.meta(), false))
            .collect();
        self.relabel(batch, view, "rebalance").await;
    }

    /// Labels the strays of `batch` this replica owns in `view` with its
    /// id, and the cached objects it does not own with their owner's; logs
    /// the batch once if anything was patched.
    async fn relabel(&self, batch: Vec<Candidate>, view: &View, cause: &'static str) {
        let mine = member_id(&self.identity);
        let wanted = targets(batch, view, &self.identity);
        if wanted.is_empty() {
            return;
        }
        let results: Vec<(bool, Result<(), kube::Error>)> = futures::stream::iter(wanted)
            .map(|(candidate, target)| {
                let outgoing = target != mine;
                async move { (outgoing, self.patch(&candidate, &target).await) }
            })
            .buffer_unordered(CONCURRENT_PATCHES)
            .collect()
            .await;
        let mut outcome = Outcome::default();
        for (outgoing, result) in results {
            match result {
                Ok(()) if outgoing => outcome.moved_out += 1,
                Ok(()) => outcome.labelled += 1,
                // changed meanwhile: its next event brings it back
                Err(kube::Error::Api(status)) if status.code == 409 => outcome.conflicts += 1,
                Err(kube::Error::Api(status)) if status.code == 404 => outcome.gone += 1,
                Err(error) => {
                    outcome.failed += 1;
                    outcome.error.get_or_insert_with(|| error.to_string());
                }
            }
        }
        let kind = K::kind(&());
        if outcome.failed > 0 {
            tracing::warn!(
                controller = %self.controller,
                %kind,
                cause,
                labelled = outcome.labelled,
                moved_out = outcome.moved_out,
                conflicts = outcome.conflicts,
                gone = outcome.gone,
                failed = outcome.failed,
                error = outcome.error.as_deref().unwrap_or_default(),
                "label mode: some shard labels could not be set (label mode needs `patch` on \
                 this kind); those objects stay out of their owner's cache until the next try"
            );
        } else {
            tracing::info!(
                controller = %self.controller,
                %kind,
                cause,
                labelled = outcome.labelled,
                moved_out = outcome.moved_out,
                conflicts = outcome.conflicts,
                gone = outcome.gone,
                "label mode: shard labels set"
            );
        }
    }

    /// Sets the shard label of `candidate` to `target`, conditional on the
    /// resourceVersion it was seen at (409 if it changed since).
    async fn patch(&self, candidate: &Candidate, target: &str) -> Result<(), kube::Error> {
        let mut metadata = serde_json::json!({ "labels": { &self.key: target } });
        if let Some(rv) = &candidate.resource_version {
            metadata["resourceVersion"] = serde_json::Value::from(rv.as_str());
        }
        let body = serde_json::json!({ "metadata": metadata });
        let url = K::url_path(&(), candidate.object.namespace.as_deref());
        let request = kube::core::Request::new(url)
            .patch(
                &candidate.object.name,
                &PatchParams::default(),
                &Patch::Merge(&body),
            )
            .map_err(kube::Error::BuildRequest)?;
        self.client.request_text(request).await.map(drop)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn candidate(key: &str, stray: bool, rv: &str) -> Candidate {
        let (namespace, name) = key.split_once('/').unwrap_or(("", key));
        Candidate {
            object: Request {
                namespace: (!namespace.is_empty()).then(|| namespace.to_owned()),
                name: name.to_owned(),
            },
            resource_version: Some(rv.to_owned()),
            stray,
        }
    }

    /// Over many namespaces and three members: each member labels exactly
    /// the strays it owns with its own id, moves exactly the cached objects
    /// it does not own to their owner's id, and leaves the rest alone; so
    /// the three judge every stray once between them.
    #[test]
    fn each_member_labels_its_strays_and_moves_what_it_lost() {
        let members = ["a", "b", "c"];
        let view = View::with_scheme(members, KeyScheme::Namespace);
        let keys: Vec<String> = (0..300).map(|i| format!("ns-{i:03x}/obj")).collect();
        let mut labelled = 0;
        for member in members {
            let strays = keys.iter().map(|k| candidate(k, true, "1")).collect();
            let got = targets(strays, &view, member);
            for (c, target) in &got {
                assert_eq!(view.owner(&c.key()), Some(member));
                assert_eq!(*target, member_id(member));
            }
            labelled += got.len();
            let cached = keys.iter().map(|k| candidate(k, false, "1")).collect();
            for (c, target) in targets(cached, &view, member) {
                let owner = view.owner(&c.key()).unwrap();
                assert_ne!(owner, member);
                assert_eq!(target, member_id(owner));
            }
        }
        assert_eq!(labelled, keys.len());
    }

    #[test]
    fn the_latest_sighting_of_a_key_counts() {
        let view = View::with_scheme(["a"], KeyScheme::Namespace);
        let got = targets(
            vec![candidate("ns/x", true, "1"), candidate("ns/x", true, "2")],
            &view,
            "a",
        );
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].0.resource_version.as_deref(), Some("2"));
        // a stray that arrived in the cache since: nothing left to do
        let got = targets(
            vec![candidate("ns/x", true, "1"), candidate("ns/x", false, "2")],
            &view,
            "a",
        );
        assert!(got.is_empty());
        // no members: nobody to label for
        let empty = View::with_scheme(Vec::<String>::new(), KeyScheme::Namespace);
        assert!(targets(vec![candidate("ns/x", true, "1")], &empty, "a").is_empty());
    }
}
