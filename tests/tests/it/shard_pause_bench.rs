//! `make bench-shard`, the pause at a membership change (issue 38): three
//! `shard_replica` processes over 300 ConfigMaps, each reconcile asking to
//! run again 250 ms after it ends, so every key is reconciled about four
//! times a second by its owner. Then the ring changes three times: a fourth
//! replica joins, it leaves gracefully (SIGINT), and one of the three is
//! SIGKILLed. For each change, every key is either *stayed* (the same
//! replica reconciled it last before the change and first after the ring
//! was active again) or *moved*; the table gives each group's longest gap
//! between two consecutive reconcile starts of one key across the change.
//! In steady state a gap is the 250 ms requeue plus queueing; a key that
//! waits for the member set's acknowledgement waits that much longer.
//! `cargo test -p opkit-tests --test it shard_pause_bench -- --ignored --nocapture`.
//! `SHARD_REPLICA_BIN` runs another build of the replica.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use opkit_envtest::ControlPlane;
use opkit_tests::init_tracing;

use crate::shard_bench::{Replica, Shared, converge, delete_leases, loadavg, now, populate, secs};

const OBJECTS: usize = 300;
const REQUEUE_MS: u64 = 250;
/// A gap longer than this is a pause (steady state: the requeue plus
/// queueing, a few ms).
const PAUSE_MS: u64 = REQUEUE_MS * 2;
/// Steady running before and after each change, so that the gaps around
/// it are measured from keys that were running normally.
const STEADY: Duration = Duration::from_secs(4);

fn env() -> Vec<(&'static str, String)> {
    vec![
        ("SHARD_REQUEUE_MS", REQUEUE_MS.to_string()),
        ("SHARD_RECONCILE_MS", "5".to_owned()),
    ]
}

/// One change's figures: keys that stayed and keys that moved, each with
/// its longest gap across the change (seconds).
struct Gaps {
    stayed: Vec<f64>,
    moved: Vec<f64>,
}

/// For each key: its owner is the replica of its last start before
/// `change`, then of its first start after `active` (when the ring was
/// active again); its gap is the longest between two consecutive starts
/// that enclose a moment of `[change, active]`.
fn gaps(tally: &Shared, change: u128, active: u128) -> Gaps {
    let tally = tally.lock().unwrap();
    let mut result = Gaps {
        stayed: Vec::new(),
        moved: Vec::new(),
    };
    for starts in tally.starts.values() {
        let mut starts = starts.clone();
        starts.sort_by_key(|(_, t)| *t);
        let before = starts.iter().rev().find(|(_, t)| *t < change);
        let after = starts.iter().find(|(_, t)| *t > active);
        let (Some((old, _)), Some((new, _))) = (before, after) else {
            continue;
        };
        let longest = starts
            .windows(2)
            .filter(|w| w[1].1 >= change && w[0].1 <= active)
            .map(|w| secs(w[1].1 - w[0].1))
            .fold(0.0, f64::max);
        if old == new {
            result.stayed.push(longest);
        } else {
            result.moved.push(longest);
        }
    }
    result.stayed.sort_by(f64::total_cmp);
    result.moved.sort_by(f64::total_cmp);
    result
}

fn quantile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let i = ((sorted.len() as f64 * q).ceil() as usize).clamp(1, sorted.len()) - 1;
    sorted[i]
}

/// One table row for a change at `change` whose ring was active again
/// (as the last replica reported) at `active`.
fn row(what: &str, tally: &Shared, change: u128, active: u128) -> String {
    let g = gaps(tally, change, active);
    let over = |v: &[f64]| {
        v.iter()
            .filter(|gap| **gap > PAUSE_MS as f64 / 1000.0)
            .count()
    };
    format!(
        "| {what} | {:.1} | {} | {:.2} / {:.2} / {:.2} | {} | {} | {:.2} / {:.2} | {} |",
        secs(active.saturating_sub(change)),
        g.stayed.len(),
        quantile(&g.stayed, 0.5),
        quantile(&g.stayed, 0.99),
        quantile(&g.stayed, 1.0),
        over(&g.stayed),
        g.moved.len(),
        quantile(&g.moved, 0.5),
        quantile(&g.moved, 1.0),
        loadavg(),
    )
}

/// The pause table; see the module docs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "measurement, not a check (about a minute)"]
async fn measure_pause() {
    init_tracing();
    let plane = ControlPlane::start().await.unwrap();
    let admin = plane.client().unwrap();
    populate(&admin, OBJECTS).await;
    delete_leases(&admin).await;
    let tally: Shared = Arc::default();
    let env = env();
    let mut replicas: BTreeMap<&str, Replica> = ["a", "b", "c"]
        .into_iter()
        .map(|name| (name, Replica::start_with(&plane, name, 3, &tally, &env)))
        .collect();
    converge(&tally, &["a", "b", "c"], Duration::from_secs(60)).await;
    tokio::time::sleep(STEADY).await;
    let mut rows = Vec::new();

    // a fourth joins
    let joined = now();
    replicas.insert("d", Replica::start_with(&plane, "d", 0, &tally, &env));
    let active = converge(&tally, &["a", "b", "c", "d"], Duration::from_secs(60)).await;
    tokio::time::sleep(STEADY).await;
    rows.push(row("d joins (3 → 4)", &tally, joined, active));

    // it leaves gracefully
    let left = now();
    if let Some(d) = replicas.remove("d") {
        d.stop().await;
    }
    let active = converge(&tally, &["a", "b", "c"], Duration::from_secs(60)).await;
    tokio::time::sleep(STEADY).await;
    rows.push(row("d leaves, SIGINT (4 → 3)", &tally, left, active));

    // one crashes
    let killed = now();
    if let Some(mut c) = replicas.remove("c") {
        c.child.start_kill().unwrap();
        let _ = c.child.wait().await;
    }
    let active = converge(&tally, &["a", "b"], Duration::from_secs(60)).await;
    tokio::time::sleep(STEADY).await;
    rows.push(row("c SIGKILLed (3 → 2)", &tally, killed, active));

    println!(
        "{OBJECTS} ConfigMaps, each reconciled again {REQUEUE_MS} ms after its last ended (5 ms reconciles, 4 workers); \
         lease 3 s, renew deadline 2 s, retry 500 ms; replica binary {}",
        std::env::var("SHARD_REPLICA_BIN").unwrap_or_else(|_| "debug (cargo test's)".into())
    );
    println!();
    println!(
        "| change | ring active again after s | keys that stayed | their longest gap s: p50 / p99 / max | stayed keys with a gap over {PAUSE_MS} ms | keys that moved | their gap s: p50 / max | load avg |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    for row in rows {
        println!("{row}");
    }
    for (_, replica) in replicas {
        replica.stop().await;
    }
    delete_leases(&admin).await;
}
