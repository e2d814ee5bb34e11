//! `opkit::shard` given bad input, on a real kube-apiserver: each case gets
//! one clear log line, nothing panics, and no object is reconciled by two
//! replicas at once.
//!
//! - Two operators share one ring name in one namespace (two Deployments
//!   by mistake): replicas reconciling ConfigMaps and one reconciling
//!   Secrets join ring `shared`. Each replica logs one error naming the
//!   other's members and both sets of kinds; the ConfigMaps the Secret
//!   replica owns are reconciled by no one (the error says so), the others
//!   each by its owner only.
//! - A member Lease edited by hand: its holder made garbage, its duration
//!   changed, its ring label removed, and a Lease made by hand with the
//!   ring's label. Each is logged once with the reason; the ring recovers
//!   (the edited member replaces its Lease, the hand-made one is deleted
//!   once stale) and every object is reconciled again by its owner; while
//!   objects are touched all along, no two reconciles of one object from
//!   two replicas overlap.
//!
//! The log lines are captured on the test's thread (a current-thread
//! runtime runs every replica's tasks there).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::api::{Api, ListParams, ObjectMeta, Patch, PatchParams, PostParams};
use opkit::cache::SharedCache;
use opkit::controller::Controller;
use opkit::reconcile::{Action, Context, Reconcile, ReconcileError, Request};
use opkit::shard::{ShardHandle, Sharding};
use opkit_tests::{RunningController, eventually, plane_with_namespace, spawn_controller};

use super::shard_support::{self, Log};
use tracing::field::{Field, Visit};
use tracing_subscriber::layer::{Context as LayerContext, SubscriberExt};

const LEASE: Duration = Duration::from_secs(3);
const RENEW: Duration = Duration::from_secs(2);
const RETRY: Duration = Duration::from_millis(500);
const RING_LABEL: &str = "shard.opkit.dev/ring";

/// One captured log event: level, message and fields.
#[derive(Debug, Clone)]
struct Logged {
    level: tracing::Level,
    message: String,
    fields: BTreeMap<String, String>,
}

#[derive(Clone, Default)]
struct Capture(Arc<Mutex<Vec<Logged>>>);

struct Fields<'a>(&'a mut BTreeMap<String, String>);

impl Visit for Fields<'_> {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().to_owned(), value.to_owned());
    }

    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.0.insert(field.name().to_owned(), format!("{value:?}"));
    }
}

impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for Capture {
    fn on_event(&self, event: &tracing::Event<'_>, _: LayerContext<'_, S>) {
        let mut fields = BTreeMap::new();
        event.record(&mut Fields(&mut fields));
        let message = fields.remove("message").unwrap_or_default();
        self.0.lock().unwrap().push(Logged {
            level: *event.metadata().level(),
            message,
            fields,
        });
    }
}

impl Capture {
    /// Captures the events of this thread (and so of every task of a
    /// current-thread runtime) until the guard is dropped.
    fn install(&self) -> tracing::subscriber::DefaultGuard {
        let subscriber = tracing_subscriber::registry()
            .with(self.clone())
            .with(tracing_subscriber::filter::LevelFilter::INFO);
        tracing::subscriber::set_default(subscriber)
    }

    fn with_message(&self, part: &str) -> Vec<Logged> {
        self.0
            .lock()
            .unwrap()
            .iter()
            .filter(|e| e.message.contains(part))
            .cloned()
            .collect()
    }
}

struct Recorder<K> {
    replica: String,
    log: Log,
    kind: std::marker::PhantomData<fn() -> K>,
}

impl<K> Reconcile for Recorder<K>
where
    K: kube::Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + std::fmt::Debug
        + opkit::cache::Cacheable,
{
    type Object = K;

    async fn reconcile(&self, req: Request, _: &Context<K>) -> Result<Action, ReconcileError> {
        let start = Instant::now();
        tokio::time::sleep(Duration::from_millis(30)).await;
        let key = format!("{}/{}", req.namespace.unwrap_or_default(), req.name);
        self.log
            .lock()
            .unwrap()
            .push((self.replica.clone(), key, start, Instant::now()));
        Ok(Action::done())
    }
}

struct Replica {
    name: String,
    shard: ShardHandle,
    controller: RunningController,
}

/// A replica of ring `ring` in `ns` reconciling objects of kind `K` there.
async fn start<K>(
    plane: &opkit_envtest::ControlPlane,
    ns: &str,
    ring: &str,
    name: &str,
    log: &Log,
) -> Replica
where
    K: kube::Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + std::fmt::Debug
        + opkit::cache::Cacheable,
{
    let client = plane.client().unwrap();
    let shard = Sharding::new(ring)
        .namespace(ns)
        .identity(name)
        .lease_duration(LEASE)
        .renew_deadline(RENEW)
        .retry_period(RETRY)
        .spawn(client.clone())
        .unwrap();
    let cache = SharedCache::builder(client).namespace(ns).build();
    let controller = Controller::new(Recorder::<K> {
        replica: name.to_owned(),
        log: log.clone(),
        kind: std::marker::PhantomData,
    })
    .name(format!("recorder-{name}"))
    .max_concurrent_reconciles(4)
    .sharded(shard.clone());
    cache.start().unwrap();
    Replica {
        name: name.to_owned(),
        shard,
        controller: spawn_controller(controller, &cache),
    }
}

impl Replica {
    async fn stop(self) {
        self.shard.shutdown().await;
        self.controller.stop().await;
    }
}

/// Waits until each replica is active on a member set of exactly their
/// names.
async fn converge(replicas: &[&Replica], within: Duration) -> Duration {
    shard_support::converge(replicas.iter().map(|r| &r.shard), within).await
}

fn owner<'a>(replicas: &'a [Replica], key: &str) -> &'a str {
    let owners: Vec<&str> = replicas
        .iter()
        .filter(|r| r.shard.owns(key))
        .map(|r| r.name.as_str())
        .collect();
    assert_eq!(owners.len(), 1, "{key} owned by {owners:?}");
    owners[0]
}

fn assert_no_overlap(log: &Log) -> usize {
    shard_support::assert_no_overlap(&log.lock().unwrap())
}

async fn create_config_maps(api: &Api<ConfigMap>, prefix: &str, count: usize) {
    for i in 0..count {
        let cm = ConfigMap {
            metadata: ObjectMeta {
                name: Some(format!("{prefix}-{i}")),
                ..ObjectMeta::default()
            },
            ..ConfigMap::default()
        };
        api.create(&PostParams::default(), &cm).await.unwrap();
    }
}

async fn touch(api: &Api<ConfigMap>, name: &str, round: &str) {
    let patch = serde_json::json!({"metadata": {"annotations": {"round": round}}});
    api.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
}

#[tokio::test]
async fn two_operators_sharing_a_ring_name_are_reported_once_naming_both() {
    const NS: &str = "shard-two-operators";
    const COUNT: usize = 30;
    let (plane, admin) = plane_with_namespace(NS).await;
    let capture = Capture::default();
    let _guard = capture.install();
    let api: Api<ConfigMap> = Api::namespaced(admin.clone(), NS);
    create_config_maps(&api, "cm", COUNT).await;

    // "memcached" replicas (ConfigMaps) and a "widget" replica (Secrets),
    // one ring name in one namespace.
    let log: Log = Arc::default();
    let replicas = vec![
        start::<ConfigMap>(plane, NS, "shared", "cm-a1", &log).await,
        start::<ConfigMap>(plane, NS, "shared", "cm-a2", &log).await,
        start::<Secret>(plane, NS, "shared", "secret-b1", &log).await,
    ];
    let all: Vec<&Replica> = replicas.iter().collect();
    converge(&all, Duration::from_secs(20)).await;

    // Every replica says so, once, naming the other operator's members and
    // both sets of kinds.
    let reported = eventually("each replica's error", Duration::from_secs(10), || async {
        let lines = capture.with_message("two operators share this shard ring");
        let by: BTreeSet<String> = lines
            .iter()
            .filter_map(|l| l.fields.get("this_replica").cloned())
            .collect();
        (by.len() == 3).then_some(lines)
    })
    .await;
    for line in &reported {
        println!("{:?} {} {:?}", line.level, line.message, line.fields);
        assert_eq!(line.level, tracing::Level::ERROR);
        assert_eq!(line.fields["ring"], "shared");
        assert_eq!(line.fields["namespace"], NS);
        let this = &line.fields["this_replica"];
        let others = &line.fields["other_members"];
        if this.starts_with("cm-") {
            assert_eq!(line.fields["this_replica_kinds"], "ConfigMap");
            assert_eq!(line.fields["other_kinds"], "Secret");
            assert_eq!(others, "secret-b1");
        } else {
            assert_eq!(line.fields["this_replica_kinds"], "Secret");
            assert_eq!(line.fields["other_kinds"], "ConfigMap");
            assert!(others.contains("cm-a"), "{others}");
        }
        assert!(
            line.message
                .contains("give each operator its own ring name"),
            "{}",
            line.message
        );
    }

    // Touched objects: each ConfigMap the ConfigMap replicas own is
    // reconciled by its owner only; those the Secret replica owns by no one.
    let since = Instant::now();
    for i in 0..COUNT {
        touch(&api, &format!("cm-{i}"), "one").await;
    }
    let keys: Vec<String> = (0..COUNT).map(|i| format!("{NS}/cm-{i}")).collect();
    let orphans: Vec<&String> = keys
        .iter()
        .filter(|k| owner(&replicas, k) == "secret-b1")
        .collect();
    eventually(
        "every ConfigMap owned by a ConfigMap replica reconciled",
        Duration::from_secs(20),
        || async {
            let log = log.lock().unwrap();
            let done: BTreeSet<&str> = log
                .iter()
                .filter(|(_, _, start, _)| *start >= since)
                .map(|(_, k, _, _)| k.as_str())
                .collect();
            keys.iter()
                .filter(|k| !orphans.contains(k))
                .all(|k| done.contains(k.as_str()))
                .then_some(())
        },
    )
    .await;
    // A few more rounds: still one error per replica, not one per round.
    tokio::time::sleep(RETRY * 4).await;
    for (r, key, start, _) in log.lock().unwrap().iter() {
        if *start >= since && keys.contains(key) {
            assert_eq!(r, owner(&replicas, key), "{key} reconciled by {r}");
        }
    }
    println!(
        "{} of {COUNT} ConfigMaps are the Secret replica's: reconciled by no one, as the error says",
        orphans.len()
    );
    assert_eq!(
        capture
            .with_message("two operators share this shard ring")
            .len(),
        3
    );
    assert_no_overlap(&log);
    for r in replicas {
        r.stop().await;
    }
}

/// The Lease of member `name` in ring `ring` of `ns`.
async fn member_lease(leases: &Api<Lease>, ring: &str, name: &str) -> Lease {
    let listed = leases
        .list(&ListParams::default().labels(&format!("{RING_LABEL}={ring}")))
        .await
        .unwrap();
    listed
        .items
        .into_iter()
        .find(|l| l.spec.as_ref().and_then(|s| s.holder_identity.as_deref()) == Some(name))
        .unwrap_or_else(|| panic!("no member Lease of {name}"))
}

/// Merge-patches member `name`'s Lease with `patch` (as `kubectl edit`
/// would); returns the Lease's name and uid.
async fn edit(
    leases: &Api<Lease>,
    ring: &str,
    name: &str,
    patch: serde_json::Value,
) -> (String, String) {
    let lease = member_lease(leases, ring, name).await;
    let lease_name = lease.metadata.name.clone().unwrap();
    let uid = lease.metadata.uid.clone().unwrap();
    leases
        .patch(&lease_name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap_or_else(|e| panic!("editing {lease_name} with {patch}: {e}"));
    (lease_name, uid)
}

/// Waits for a warning whose message has `part`, about `lease`, whose
/// `reason` (if given) contains `reason`; returns it.
async fn warned(capture: &Capture, part: &str, lease: &str, reason: Option<&str>) -> Logged {
    let field = |l: &Logged, name: &str| l.fields.get(name).cloned().unwrap_or_default();
    eventually(
        &format!("the warning {part:?} about {lease}"),
        Duration::from_secs(10),
        || async {
            capture.with_message(part).into_iter().find(|l| {
                l.level == tracing::Level::WARN
                    && field(l, "lease") == lease
                    && reason.is_none_or(|r| field(l, "reason").contains(r))
            })
        },
    )
    .await
}

/// Waits until the ring has healed: every replica holds a labelled member
/// Lease of its own — the edited one (uid `edited`, if any) replaced, as
/// its owner does once its reconciles end — and a, b and c are active
/// together on it. (The members' status alone can still show the ring
/// from before the edit.)
async fn recover(
    all: &[&Replica],
    leases: &Api<Lease>,
    ring: &str,
    edited: Option<&str>,
    what: &str,
) {
    let started = Instant::now();
    eventually(
        &format!("every replica's own Lease after {what}"),
        Duration::from_secs(30),
        || async {
            let listed = leases
                .list(&ListParams::default().labels(&format!("{RING_LABEL}={ring}")))
                .await
                .ok()?;
            all.iter()
                .all(|r| {
                    listed.items.iter().any(|l| {
                        l.spec.as_ref().and_then(|s| s.holder_identity.as_deref())
                            == Some(r.name.as_str())
                            && l.metadata.uid.as_deref() != edited
                    })
                })
                .then_some(())
        },
    )
    .await;
    converge(all, Duration::from_secs(30)).await;
    println!(
        "after {what}: the ring is whole again in {:.1?}",
        started.elapsed()
    );
}

#[tokio::test]
async fn member_leases_edited_by_hand_are_logged_and_cause_no_overlap() {
    const NS: &str = "shard-hand-edits";
    const RING: &str = "edited";
    const COUNT: usize = 60;
    let (plane, admin) = plane_with_namespace(NS).await;
    let capture = Capture::default();
    let _guard = capture.install();
    let api: Api<ConfigMap> = Api::namespaced(admin.clone(), NS);
    let leases: Api<Lease> = Api::namespaced(admin.clone(), NS);
    create_config_maps(&api, "obj", COUNT).await;
    let log: Log = Arc::default();
    let replicas = vec![
        start::<ConfigMap>(plane, NS, RING, "a", &log).await,
        start::<ConfigMap>(plane, NS, RING, "b", &log).await,
        start::<ConfigMap>(plane, NS, RING, "c", &log).await,
    ];
    let all: Vec<&Replica> = replicas.iter().collect();
    converge(&all, Duration::from_secs(20)).await;

    // Objects touched all along, so reconciles run through every edit.
    let stop = tokio_util::sync::CancellationToken::new();
    let toucher = tokio::spawn({
        let (api, stop) = (api.clone(), stop.clone());
        async move {
            let mut i = 0usize;
            while !stop.is_cancelled() {
                touch(&api, &format!("obj-{}", i % COUNT), &i.to_string()).await;
                i += 1;
                tokio::time::sleep(Duration::from_millis(15)).await;
            }
            i
        }
    });

    // 1. b's holder made garbage: its name no longer matches its holder.
    let (b, edited) = edit(
        &leases,
        RING,
        "b",
        serde_json::json!({"spec": {"holderIdentity": "garbage"}}),
    )
    .await;
    let line = warned(
        &capture,
        "is not a valid member Lease",
        &b,
        Some("its name is not its holder's"),
    )
    .await;
    println!("holder edited: {:?}", line.fields);
    recover(&all, &leases, RING, Some(&edited), "a garbage holder").await;

    // 2. b's lease duration changed: logged, ignored.
    let (b, edited) = edit(
        &leases,
        RING,
        "b",
        serde_json::json!({"spec": {"leaseDurationSeconds": 1}}),
    )
    .await;
    let line = warned(&capture, "states another lease duration", &b, None).await;
    assert_eq!(line.fields["lease_duration_seconds"], "1");
    println!("duration edited: {:?}", line.fields);
    recover(
        &all,
        &leases,
        RING,
        Some(&edited),
        "a changed lease duration",
    )
    .await;

    // 3. b's ring label removed: still seen (by its name), judged invalid.
    let (b, edited) = edit(
        &leases,
        RING,
        "b",
        serde_json::json!({"metadata": {"labels": {RING_LABEL: null}}}),
    )
    .await;
    let line = warned(
        &capture,
        "is not a valid member Lease",
        &b,
        Some("its label"),
    )
    .await;
    println!("label removed: {:?}", line.fields);
    recover(&all, &leases, RING, Some(&edited), "a removed label").await;

    // 4. A Lease made by hand with the ring's label: blocks new starts
    //    while fresh, then is deleted as stale.
    let intruder = Lease {
        metadata: ObjectMeta {
            name: Some("made-by-hand".into()),
            labels: Some(BTreeMap::from([(RING_LABEL.to_owned(), RING.to_owned())])),
            ..ObjectMeta::default()
        },
        spec: Some(LeaseSpec {
            holder_identity: Some("someone".into()),
            lease_duration_seconds: Some(99_999),
            ..LeaseSpec::default()
        }),
    };
    leases
        .create(&PostParams::default(), &intruder)
        .await
        .expect("create a Lease by hand");
    let line = warned(
        &capture,
        "is not a valid member Lease",
        "made-by-hand",
        None,
    )
    .await;
    println!("made by hand: {:?}", line.fields);
    eventually(
        "the hand-made Lease deleted",
        Duration::from_secs(20),
        || async {
            leases
                .get_opt("made-by-hand")
                .await
                .ok()?
                .is_none()
                .then_some(())
        },
    )
    .await;
    recover(&all, &leases, RING, None, "a hand-made Lease").await;

    stop.cancel();
    let touches = toucher.await.unwrap();
    // Every object reconciled again by its owner.
    let since = Instant::now();
    for i in 0..COUNT {
        touch(&api, &format!("obj-{i}"), "final").await;
    }
    let keys: Vec<String> = (0..COUNT).map(|i| format!("{NS}/obj-{i}")).collect();
    eventually(
        "every object reconciled after the edits",
        Duration::from_secs(20),
        || async {
            let log = log.lock().unwrap();
            let done: BTreeMap<&str, BTreeSet<&str>> = log
                .iter()
                .filter(|(_, _, start, _)| *start >= since)
                .fold(BTreeMap::new(), |mut m, (r, k, _, _)| {
                    m.entry(k.as_str()).or_default().insert(r.as_str());
                    m
                });
            keys.iter()
                .all(|k| done.contains_key(k.as_str()))
                .then_some(())
        },
    )
    .await;
    for (r, key, start, _) in log.lock().unwrap().iter() {
        if *start >= since && keys.contains(key) {
            assert_eq!(r, owner(&replicas, key), "{key} reconciled by {r}");
        }
    }
    let reconciles = assert_no_overlap(&log);
    println!("{touches} touches, {reconciles} reconciles, no overlap");
    // The edits left no stray Lease: the three members' only.
    let left = leases.list(&ListParams::default()).await.unwrap();
    let names: Vec<String> = left
        .items
        .iter()
        .filter_map(|l| l.metadata.name.clone())
        .collect();
    assert_eq!(names.len(), 3, "{names:?}");
    // Stopping checks no controller task failed or panicked.
    for r in replicas {
        r.stop().await;
    }
}
