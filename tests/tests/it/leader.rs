//! `opkit::leader` against a real kube-apiserver: one leader among several
//! electors, hand-over on release and on expiry, and a leader that can no
//! longer renew stops acting before anyone else starts.

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::rbac::v1::RoleBinding;
use kube::api::{Api, DeleteParams};
use opkit::leader::{LeaderElection, LeaderHandle, LeaderState};
use opkit_tests::{eventually, grant, plane_with_namespace, rule};
use std::sync::Mutex;

const LEASE: Duration = Duration::from_secs(2);
const RENEW: Duration = Duration::from_millis(1_500);
const RETRY: Duration = Duration::from_millis(250);

fn elector(client: kube::Client, ns: &str, identity: &str, release: bool) -> LeaderHandle {
    LeaderElection::new("operator-lock")
        .namespace(ns)
        .identity(identity)
        .lease_duration(LEASE)
        .renew_deadline(RENEW)
        .retry_period(RETRY)
        .release_on_cancel(release)
        .spawn(client)
        .unwrap()
}

/// Every state an elector publishes, with the (real) time it was seen.
#[derive(Clone, Default)]
struct Transitions(Arc<Mutex<Vec<(LeaderState, Instant, SystemTime)>>>);

impl Transitions {
    fn record(handle: &LeaderHandle) -> Self {
        let log = Self::default();
        let mut rx = handle.subscribe();
        let sink = log.clone();
        tokio::spawn(async move {
            while rx.changed().await.is_ok() {
                let state = *rx.borrow_and_update();
                sink.0
                    .lock()
                    .unwrap()
                    .push((state, Instant::now(), SystemTime::now()));
                if state.is_final() {
                    break;
                }
            }
        });
        log
    }

    /// When `state` was first seen; waits (bounded) for the recorder task,
    /// which may run a moment after the change.
    async fn first(&self, state: LeaderState) -> (Instant, SystemTime) {
        tokio::time::timeout(Duration::from_secs(5), async {
            loop {
                let found = self
                    .0
                    .lock()
                    .unwrap()
                    .iter()
                    .find(|(s, _, _)| *s == state)
                    .map(|(_, i, w)| (*i, *w));
                if let Some(found) = found {
                    return found;
                }
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        })
        .await
        .unwrap_or_else(|_| panic!("{state:?} was never recorded"))
    }
}

/// Waits until one of `handles` leads; returns its index.
async fn wait_for_leader(handles: &[&LeaderHandle], within: Duration) -> usize {
    tokio::time::timeout(within, async {
        loop {
            let leaders: Vec<usize> = (0..handles.len())
                .filter(|i| handles[*i].state().is_leading())
                .collect();
            assert!(leaders.len() <= 1, "two leaders at once: {leaders:?}");
            if let Some(i) = leaders.first() {
                return *i;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await
    .expect("no elector became leader in time")
}

async fn lease_spec(
    client: &kube::Client,
    ns: &str,
) -> k8s_openapi::api::coordination::v1::LeaseSpec {
    let leases: Api<Lease> = Api::namespaced(client.clone(), ns);
    leases.get("operator-lock").await.unwrap().spec.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_electors_one_leader_and_hand_over_on_release() {
    let ns = "leader-three";
    let (plane, admin) = plane_with_namespace(ns).await;

    let handles: Vec<LeaderHandle> = ["a", "b", "c"]
        .iter()
        .map(|id| elector(plane.client().unwrap(), ns, id, true))
        .collect();
    let logs: Vec<Transitions> = handles.iter().map(Transitions::record).collect();
    let refs: Vec<&LeaderHandle> = handles.iter().collect();
    let first = wait_for_leader(&refs, Duration::from_secs(10)).await;
    let spec = lease_spec(&admin, ns).await;
    assert_eq!(
        spec.holder_identity.as_deref(),
        Some(handles[first].identity())
    );
    assert_eq!(spec.lease_duration_seconds, Some(2));

    // Sample for three lease durations: always exactly one leader.
    let until = Instant::now() + 3 * LEASE;
    while Instant::now() < until {
        let leaders: Vec<&str> = handles
            .iter()
            .filter(|h| h.state().is_leading())
            .map(|h| h.identity())
            .collect();
        assert_eq!(leaders, [handles[first].identity()]);
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    for (i, h) in handles.iter().enumerate() {
        assert_eq!(
            h.observed_leader().as_deref(),
            Some(handles[first].identity()),
            "elector {i}"
        );
    }

    // Stop the leader with release: a standby takes over within the lease
    // duration plus a retry period, and never while the old one leads.
    let scope = handles[first].became_leader().await.unwrap();
    let stopped_at = Instant::now();
    assert_eq!(handles[first].shutdown().await, LeaderState::Stopped);
    assert!(scope.is_cancelled());
    let rest: Vec<&LeaderHandle> = (0..3)
        .filter(|i| *i != first)
        .map(|i| &handles[i])
        .collect();
    let next = wait_for_leader(&rest, LEASE + RETRY).await;
    let took = stopped_at.elapsed();
    assert!(took < LEASE + RETRY, "hand-over took {took:?}");
    let next_log = &logs[(0..3).filter(|i| *i != first).nth(next).unwrap()];
    let (stopped, _) = logs[first].first(LeaderState::Stopped).await;
    let (acquired, _) = next_log.first(LeaderState::Leading).await;
    assert!(stopped < acquired);
    let spec = lease_spec(&admin, ns).await;
    assert_eq!(spec.holder_identity.as_deref(), Some(rest[next].identity()));
    assert_eq!(spec.lease_transitions, Some(1));

    // Exactly one of the remaining two leads for another lease duration.
    let until = Instant::now() + LEASE;
    while Instant::now() < until {
        assert_eq!(rest.iter().filter(|h| h.state().is_leading()).count(), 1);
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    for h in &handles {
        h.shutdown().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_release_a_standby_waits_for_the_lease_to_expire() {
    let ns = "leader-expiry";
    let (plane, admin) = plane_with_namespace(ns).await;

    let a = elector(plane.client().unwrap(), ns, "a", false);
    a.became_leader().await.unwrap();
    let b = elector(plane.client().unwrap(), ns, "b", false);
    let b_log = Transitions::record(&b);
    eventually(
        "b to see a holding the Lease",
        Duration::from_secs(10),
        || async { (b.observed_leader().as_deref() == Some("a")).then_some(()) },
    )
    .await;
    assert!(!b.state().is_leading());

    let stopped_at = Instant::now();
    assert_eq!(a.shutdown().await, LeaderState::Stopped);
    // The Lease still names `a`: nobody released it.
    assert_eq!(
        lease_spec(&admin, ns).await.holder_identity.as_deref(),
        Some("a")
    );
    tokio::time::timeout(LEASE + 4 * RETRY, b.became_leader())
        .await
        .expect("b did not take over after the lease expired")
        .unwrap();
    let (acquired, _) = b_log.first(LeaderState::Leading).await;
    let waited = acquired - stopped_at;
    // b saw a's last renew at most one retry period before a stopped.
    assert!(
        waited >= LEASE - 2 * RETRY,
        "b took over after only {waited:?}"
    );
    b.shutdown().await;
}

async fn grant_lease_access(admin: &kube::Client, ns: &str, user: &str) {
    let lease_rules = vec![rule(
        "coordination.k8s.io",
        &["leases"],
        &["get", "create", "update"],
    )];
    grant(admin, ns, user, user, lease_rules).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_that_cannot_renew_stops_before_another_acquires() {
    let ns = "leader-cut-off";
    let (plane, admin) = plane_with_namespace(ns).await;
    grant_lease_access(&admin, ns, "elector-a").await;

    // `a` runs as a user whose only right is on leases; it leads first.
    let a = elector(plane.client_as("elector-a", &[]).unwrap(), ns, "a", true);
    let a_log = Transitions::record(&a);
    let scope = tokio::time::timeout(Duration::from_secs(10), a.became_leader())
        .await
        .unwrap()
        .unwrap();
    let b = elector(plane.client().unwrap(), ns, "b", true);
    let b_log = Transitions::record(&b);
    eventually(
        "b to see a holding the Lease",
        Duration::from_secs(10),
        || async { (b.observed_leader().as_deref() == Some("a")).then_some(()) },
    )
    .await;
    assert!(a.state().is_leading() && !b.state().is_leading());

    // Take `a`'s rights away: every renew is now a real 403 from the apiserver.
    let bindings: Api<RoleBinding> = Api::namespaced(admin.clone(), ns);
    bindings
        .delete("elector-a", &DeleteParams::default())
        .await
        .unwrap();
    let cut_at = Instant::now();

    assert_eq!(
        tokio::time::timeout(Duration::from_secs(10), a.stopped())
            .await
            .unwrap(),
        LeaderState::Lost
    );
    assert!(
        scope.is_cancelled(),
        "the leading scope ends with leadership"
    );
    tokio::time::timeout(Duration::from_secs(10), b.became_leader())
        .await
        .unwrap()
        .unwrap();

    let (lost, lost_wall) = a_log.first(LeaderState::Lost).await;
    let (acquired, _) = b_log.first(LeaderState::Leading).await;
    assert!(
        lost < acquired,
        "a was still leading when b acquired: lost {:?} after the cut, b acquired {:?} after",
        lost - cut_at,
        acquired - cut_at
    );
    // `a` gave up within its renew deadline of the cut (its last renew was
    // sent before the cut; the margin covers the RBAC cache catching up with
    // the deleted binding and a loaded scheduler).
    assert!(
        lost - cut_at <= RENEW + Duration::from_millis(500),
        "{:?}",
        lost - cut_at
    );
    // The apiserver's record agrees: b's acquireTime is after a stopped.
    let spec = lease_spec(&admin, ns).await;
    assert_eq!(spec.holder_identity.as_deref(), Some("b"));
    let acquire_time = spec.acquire_time.unwrap().0;
    let lost_ts = k8s_openapi::jiff::Timestamp::try_from(lost_wall).unwrap();
    assert!(
        lost_ts < acquire_time,
        "a lost at {lost_ts}, b acquired at {acquire_time}"
    );
    b.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn default_identity_is_hostname_and_uuid() {
    let ns = "leader-identity";
    let (plane, admin) = plane_with_namespace(ns).await;
    let handle = LeaderElection::new("operator-lock")
        .namespace(ns)
        .lease_duration(LEASE)
        .renew_deadline(RENEW)
        .retry_period(RETRY)
        .spawn(plane.client().unwrap())
        .unwrap();
    tokio::time::timeout(Duration::from_secs(10), handle.became_leader())
        .await
        .unwrap()
        .unwrap();
    let holder = lease_spec(&admin, ns).await.holder_identity.unwrap();
    assert_eq!(holder, handle.identity());
    let (host, uuid) = holder.rsplit_once('_').unwrap();
    assert!(!host.is_empty() && uuid.len() == 36, "{holder}");

    // Invalid timings are refused before anything runs.
    let err = LeaderElection::new("operator-lock")
        .namespace(ns)
        .lease_duration(Duration::from_secs(1))
        .renew_deadline(Duration::from_secs(2))
        .spawn(admin)
        .unwrap_err();
    assert!(err.to_string().contains("renew_deadline"), "{err}");
    handle.shutdown().await;
}
