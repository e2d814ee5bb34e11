//! What the sharding tests (`shard`, `shard_cache`, `shard_processes`,
//! `shard_bad_input`) share: [`Recorder`], a ConfigMap reconciler that logs
//! each reconcile's interval; [`converge`] on in-process replicas; and the overlap check
//! that can fail, [`assert_no_overlap`]: no two reconciles of one key by
//! two replicas intersect in time.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::fmt::Debug;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::ConfigMap;
use opkit::reconcile::{Action, Context, Reconcile, ReconcileError, Request};
use opkit::shard::ShardHandle;

/// One reconcile: (replica, `namespace/name`, start, end).
pub type Interval<T> = (String, String, T, T);

/// Every reconcile of the replicas of one process.
pub type Log = Arc<Mutex<Vec<Interval<Instant>>>>;

/// Reconciles a ConfigMap by waiting (a simulated call), then logs the
/// reconcile's interval under its replica's name.
pub struct Recorder {
    replica: String,
    log: Log,
    wait: Duration,
}

impl Recorder {
    /// `replica`'s recorder into `log`, each reconcile waiting `wait`.
    pub fn new(replica: &str, log: &Log, wait: Duration) -> Self {
        Self {
            replica: replica.to_owned(),
            log: log.clone(),
            wait,
        }
    }
}

impl Reconcile for Recorder {
    type Object = ConfigMap;

    async fn reconcile(
        &self,
        req: Request,
        _: &Context<ConfigMap>,
    ) -> Result<Action, ReconcileError> {
        let start = Instant::now();
        if !self.wait.is_zero() {
            tokio::time::sleep(self.wait).await;
        }
        let key = format!("{}/{}", req.namespace.unwrap_or_default(), req.name);
        self.log
            .lock()
            .unwrap()
            .push((self.replica.clone(), key, start, Instant::now()));
        Ok(Action::done())
    }
}

/// Waits until every one of `shards` is active on a member set of exactly
/// their identities; returns how long that took.
pub async fn converge<'a>(
    shards: impl IntoIterator<Item = &'a ShardHandle>,
    within: Duration,
) -> Duration {
    let shards: Vec<&ShardHandle> = shards.into_iter().collect();
    let started = Instant::now();
    let mut names: Vec<String> = shards.iter().map(|s| s.identity().to_owned()).collect();
    names.sort();
    loop {
        if shards.iter().all(|shard| {
            let s = shard.status();
            s.active && s.members == names
        }) {
            return started.elapsed();
        }
        assert!(
            started.elapsed() < within,
            "no convergence on {names:?} within {within:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Asserts that no two reconciles of one key by two replicas intersect;
/// returns how many reconciles were checked.
pub fn assert_no_overlap<T: Copy + Ord + Debug>(intervals: &[Interval<T>]) -> usize {
    let mut by_key: BTreeMap<&str, Vec<&Interval<T>>> = BTreeMap::new();
    for interval in intervals {
        by_key
            .entry(interval.1.as_str())
            .or_default()
            .push(interval);
    }
    for (key, list) in by_key {
        for a in &list {
            for b in &list {
                assert!(
                    a.0 == b.0 || !(a.2 < b.3 && b.2 < a.3),
                    "{key} reconciled by {} ({:?}..{:?}) and {} ({:?}..{:?}) at once",
                    a.0,
                    a.2,
                    a.3,
                    b.0,
                    b.2,
                    b.3
                );
            }
        }
    }
    intervals.len()
}
