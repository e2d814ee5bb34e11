//! The election's timing on tokio's paused clock, over an in-memory Lease
//! store that behaves like the apiserver for get / create / replace
//! (resourceVersion checks included) and can fail one elector on demand.
//! The same properties are tested against a real kube-apiserver in
//! `tests/tests/leader.rs`.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use kube::core::Status;
use parking_lot::Mutex;
use tokio::time::Instant;

use super::election::Election;
use super::elector::spawn_election;
use super::lock::LeaseLock;
use super::timing::{Timing, lease_seconds};
use super::{LeaderHandle, LeaderState};

#[derive(Default)]
struct Store {
    lease: Option<Lease>,
    version: u64,
    writes: u64,
}

/// One elector's connection to the shared store.
#[derive(Clone)]
struct MemoryLock {
    store: Arc<Mutex<Store>>,
    failing: Arc<AtomicBool>,
}

fn api_error(code: u16, reason: &str) -> kube::Error {
    kube::Error::Api(Status::failure(reason, reason).with_code(code).boxed())
}

impl MemoryLock {
    fn check(&self) -> Result<(), kube::Error> {
        if self.failing.load(Ordering::SeqCst) {
            Err(api_error(503, "ServiceUnavailable"))
        } else {
            Ok(())
        }
    }
}

impl LeaseLock for MemoryLock {
    async fn get(&self) -> Result<Option<Lease>, kube::Error> {
        tokio::time::sleep(Duration::from_millis(5)).await;
        self.check()?;
        Ok(self.store.lock().lease.clone())
    }

    async fn create(&self, lease: &Lease) -> Result<Lease, kube::Error> {
        tokio::time::sleep(Duration::from_millis(5)).await;
        self.check()?;
        let mut store = self.store.lock();
        if store.lease.is_some() {
            return Err(api_error(409, "AlreadyExists"));
        }
        store.version += 1;
        store.writes += 1;
        let mut lease = lease.clone();
        lease.metadata.resource_version = Some(store.version.to_string());
        store.lease = Some(lease.clone());
        Ok(lease)
    }

    async fn replace(&self, lease: &Lease) -> Result<Lease, kube::Error> {
        tokio::time::sleep(Duration::from_millis(5)).await;
        self.check()?;
        let mut store = self.store.lock();
        let current = store
            .lease
            .as_ref()
            .and_then(|l| l.metadata.resource_version.clone());
        if current.is_none() {
            return Err(api_error(404, "NotFound"));
        }
        if lease.metadata.resource_version != current {
            return Err(api_error(409, "Conflict"));
        }
        store.version += 1;
        store.writes += 1;
        let mut lease = lease.clone();
        lease.metadata.resource_version = Some(store.version.to_string());
        store.lease = Some(lease.clone());
        Ok(lease)
    }

    fn describe(&self) -> &str {
        "test/lock"
    }
}

const TIMING: Timing = Timing {
    lease_duration: Duration::from_secs(2),
    renew_deadline: Duration::from_millis(1_500),
    retry_period: Duration::from_millis(250),
};

struct Replica {
    handle: LeaderHandle,
    failing: Arc<AtomicBool>,
    /// (state, time) of every transition, recorded as it is published.
    transitions: Arc<Mutex<Vec<(LeaderState, Instant)>>>,
}

fn replica(store: &Arc<Mutex<Store>>, name: &str, release: bool) -> Replica {
    let failing = Arc::new(AtomicBool::new(false));
    let lock = MemoryLock {
        store: store.clone(),
        failing: failing.clone(),
    };
    let identity: Arc<str> = Arc::from(name);
    let election = Election::new(
        lock,
        "test".to_owned(),
        "lock".to_owned(),
        identity.clone(),
        lease_seconds(TIMING.lease_duration).unwrap(),
    );
    let handle = spawn_election(
        election,
        TIMING.validate().unwrap(),
        release,
        identity,
        Arc::from("lock"),
    );
    let transitions = Arc::new(Mutex::new(vec![(LeaderState::Standby, Instant::now())]));
    let mut rx = handle.subscribe();
    let log = transitions.clone();
    tokio::spawn(async move {
        while rx.changed().await.is_ok() {
            let state = *rx.borrow_and_update();
            log.lock().push((state, Instant::now()));
            if state.is_final() {
                break;
            }
        }
    });
    Replica {
        handle,
        failing,
        transitions,
    }
}

fn time_of(replica: &Replica, state: LeaderState) -> Option<Instant> {
    replica
        .transitions
        .lock()
        .iter()
        .find(|(s, _)| *s == state)
        .map(|(_, t)| *t)
}

fn holder(store: &Arc<Mutex<Store>>) -> Option<String> {
    store
        .lock()
        .lease
        .as_ref()
        .and_then(|l| l.spec.as_ref())
        .and_then(|s| s.holder_identity.clone())
}

async fn wait_leader(replicas: &[&Replica], within: Duration) -> usize {
    tokio::time::timeout(within, async {
        loop {
            if let Some(i) = replicas.iter().position(|r| r.handle.is_leader()) {
                return i;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
    .expect("no leader in time")
}

#[tokio::test(start_paused = true)]
async fn first_elector_creates_the_lease_and_renews_it() {
    let store = Arc::new(Mutex::new(Store::default()));
    let a = replica(&store, "a", false);
    let scope = tokio::time::timeout(Duration::from_secs(1), a.handle.became_leader())
        .await
        .unwrap()
        .unwrap();
    assert!(!scope.is_cancelled());
    assert_eq!(holder(&store).as_deref(), Some("a"));
    let spec = store.lock().lease.clone().unwrap().spec.unwrap();
    assert_eq!(spec.lease_duration_seconds, Some(2));
    assert_eq!(spec.lease_transitions, Some(0));

    let writes = store.lock().writes;
    tokio::time::sleep(Duration::from_secs(5)).await;
    let renewals = store.lock().writes - writes;
    // One renew per retry period (each takes 5 ms of fake latency).
    assert!((18..=21).contains(&renewals), "{renewals} renewals in 5 s");
    assert!(a.handle.is_leader());
    assert_eq!(a.handle.observed_leader().as_deref(), Some("a"));
}

#[tokio::test(start_paused = true)]
async fn only_one_of_three_leads_and_a_standby_takes_over_after_expiry() {
    let store = Arc::new(Mutex::new(Store::default()));
    let replicas: Vec<Replica> = ["a", "b", "c"]
        .iter()
        .map(|n| replica(&store, n, false))
        .collect();
    let refs: Vec<&Replica> = replicas.iter().collect();
    let first = wait_leader(&refs, Duration::from_secs(1)).await;
    for _ in 0..400 {
        let leaders = replicas.iter().filter(|r| r.handle.is_leader()).count();
        assert_eq!(leaders, 1);
        tokio::time::sleep(Duration::from_millis(10)).await;
    }

    // Shut the leader down without releasing: a standby takes over only
    // after the lease duration since it last saw the lease change.
    let stopped_at = Instant::now();
    assert_eq!(
        replicas[first].handle.shutdown().await,
        LeaderState::Stopped
    );
    let rest: Vec<&Replica> = replicas
        .iter()
        .enumerate()
        .filter(|(i, _)| *i != first)
        .map(|(_, r)| r)
        .collect();
    let next = wait_leader(&rest, Duration::from_secs(5)).await;
    let took = time_of(rest[next], LeaderState::Leading).unwrap() - stopped_at;
    assert!(
        // The standby counts the lease from when it *saw* the last renewal,
        // which its jittered poll (up to 2.2 retry periods) may see after
        // the stop; then it takes over at its first poll (again up to 2.2
        // periods) past the lease duration.
        took >= TIMING.lease_duration - TIMING.retry_period
            && took <= TIMING.lease_duration + TIMING.retry_period.mul_f64(4.4),
        "took over after {took:?}"
    );
    let spec = store.lock().lease.clone().unwrap().spec.unwrap();
    assert_eq!(spec.lease_transitions, Some(1));
    assert_eq!(rest.iter().filter(|r| r.handle.is_leader()).count(), 1);
}

#[tokio::test(start_paused = true)]
async fn release_on_cancel_hands_over_at_the_next_try() {
    let store = Arc::new(Mutex::new(Store::default()));
    let a = replica(&store, "a", true);
    a.handle.became_leader().await.unwrap();
    let b = replica(&store, "b", true);
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(!b.handle.is_leader());
    assert_eq!(b.handle.observed_leader().as_deref(), Some("a"));

    let scope = a.handle.became_leader().await.unwrap();
    let stopped_at = Instant::now();
    assert_eq!(a.handle.shutdown().await, LeaderState::Stopped);
    assert!(scope.is_cancelled());
    let spec = store.lock().lease.clone().unwrap().spec.unwrap();
    assert_eq!(spec.holder_identity.as_deref(), Some(""));
    assert_eq!(spec.lease_duration_seconds, Some(1));

    b.handle.became_leader().await.unwrap();
    let took = time_of(&b, LeaderState::Leading).unwrap() - stopped_at;
    assert!(
        took <= TIMING.retry_period.mul_f64(2.2) + Duration::from_millis(50),
        "{took:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_leader_that_cannot_renew_stops_before_another_acquires() {
    let store = Arc::new(Mutex::new(Store::default()));
    let a = replica(&store, "a", false);
    let scope = a.handle.became_leader().await.unwrap();
    let b = replica(&store, "b", false);
    tokio::time::sleep(Duration::from_secs(2)).await;

    let writes_before = store.lock().writes;
    a.failing.store(true, Ordering::SeqCst);
    let failed_at = Instant::now();
    assert_eq!(
        tokio::time::timeout(Duration::from_secs(10), a.handle.stopped())
            .await
            .unwrap(),
        LeaderState::Lost
    );
    assert!(scope.is_cancelled());
    b.handle.became_leader().await.unwrap();

    let lost = time_of(&a, LeaderState::Lost).unwrap();
    let acquired = time_of(&b, LeaderState::Leading).unwrap();
    assert!(
        lost < acquired,
        "lost at {lost:?}, other acquired at {acquired:?}"
    );
    // The leader gave up within the renew deadline of the failure (its last
    // renew was sent at most a retry period before).
    assert!(
        lost - failed_at <= TIMING.renew_deadline,
        "{:?}",
        lost - failed_at
    );
    // And the margin is the lease duration minus the renew deadline.
    assert!(
        acquired - lost >= TIMING.lease_duration - TIMING.renew_deadline - TIMING.retry_period,
        "{:?}",
        acquired - lost
    );
    assert!(store.lock().writes > writes_before);
}

#[tokio::test(start_paused = true)]
async fn a_leader_that_sees_another_holder_stops_at_once() {
    let store = Arc::new(Mutex::new(Store::default()));
    let a = replica(&store, "a", false);
    let scope = a.handle.became_leader().await.unwrap();
    // Someone overwrites the lease (e.g. an operator edited it by hand).
    {
        let mut s = store.lock();
        let lease = s.lease.as_mut().unwrap();
        lease.spec.as_mut().unwrap().holder_identity = Some("intruder".to_owned());
        lease.metadata.resource_version = Some("999".to_owned());
    }
    let state = tokio::time::timeout(Duration::from_secs(1), a.handle.stopped())
        .await
        .unwrap();
    assert_eq!(state, LeaderState::Lost);
    assert!(scope.is_cancelled());
    assert_eq!(a.handle.observed_leader().as_deref(), Some("intruder"));
}

#[tokio::test(start_paused = true)]
async fn shutdown_in_standby_and_dropping_every_handle_end_the_election() {
    let store = Arc::new(Mutex::new(Store::default()));
    let a = replica(&store, "a", false);
    a.handle.became_leader().await.unwrap();
    let b = replica(&store, "b", false);
    let waiter = b.handle.clone();
    let waiting = tokio::spawn(async move { waiter.became_leader().await });
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(b.handle.shutdown().await, LeaderState::Stopped);
    let err = waiting.await.unwrap().unwrap_err();
    assert!(err.to_string().contains("Stopped"), "{err}");

    let rx = a.handle.subscribe();
    drop(a.handle);
    let mut rx = rx;
    tokio::time::timeout(Duration::from_secs(1), rx.wait_for(|s| s.is_final()))
        .await
        .unwrap()
        .unwrap();
}

/// Issue 11: the election's retry logs carry the attempt and the delay.
#[tokio::test(start_paused = true)]
async fn failed_tries_log_attempt_and_delay() {
    let (logs, _guard) = crate::test_log::capture();
    let store = Arc::new(Mutex::new(Store::default()));
    let a = replica(&store, "a", false);
    let scope = a.handle.became_leader().await.unwrap();
    // a leader whose renews fail: numbered, with the delay and the time
    // left before the renew deadline
    a.failing.store(true, Ordering::SeqCst);
    a.handle.stopped().await;
    assert!(scope.is_cancelled());
    let renews = logs.with_message("failed to renew the lease; retrying");
    assert!(renews.len() >= 2, "{:?}", logs.events());
    for (i, event) in renews.iter().enumerate() {
        assert_eq!(event.level, tracing::Level::WARN);
        assert_eq!(event.field("attempt"), Some((i + 1).to_string().as_str()));
        assert!(event.field("retry_in").is_some() && event.field("deadline_in").is_some());
    }

    // a standby whose tries fail: numbered, with the jittered retry period
    let b = replica(&store, "b", false);
    b.failing.store(true, Ordering::SeqCst);
    tokio::time::sleep(Duration::from_secs(2)).await;
    let tries = logs.with_message("failed to acquire the lease; retrying");
    assert!(tries.len() >= 3, "{:?}", logs.events());
    for (i, event) in tries.iter().enumerate() {
        assert_eq!(event.field("attempt"), Some((i + 1).to_string().as_str()));
        let delay = event.field("retry_in").unwrap_or_default();
        assert!(delay.ends_with("ms"), "{delay}");
        let ms: f64 = delay.trim_end_matches("ms").parse().unwrap();
        // retry period 250 ms, jittered up to 120 % more
        assert!((250.0..=550.0).contains(&ms), "{delay}");
    }
}
