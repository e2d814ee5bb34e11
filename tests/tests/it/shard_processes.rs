//! `opkit::shard` across real processes (`tests/src/bin/shard_replica.rs`)
//! on a real kube-apiserver, over 300 ConfigMaps: three replicas split
//! them, each object reconciled by exactly one; a fourth takes about a
//! quarter; a SIGKILLed replica's objects are taken over after its Lease
//! expires; a replica SIGSTOPped past its Lease starts nothing when
//! resumed until it rejoined. Every reconcile is logged with its start and
//! end; no two intervals of one object from two replicas may intersect.

use std::collections::{BTreeMap, BTreeSet};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ListParams, ObjectMeta, Patch, PatchParams, PostParams};
use opkit_envtest::ControlPlane;
use opkit_tests::{eventually, plane_with_namespace};
use tokio::io::{AsyncBufReadExt, BufReader};

use crate::shard_support::Interval;

const NS: &str = "shard-processes";
const OBJECTS: usize = 300;
const LEASE_MS: u64 = 3_000;
const RENEW_MS: u64 = 2_000;
const RETRY_MS: u64 = 500;

fn now() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos()
}

/// Every line of every replica: (replica, received at, line).
type Lines = Arc<Mutex<Vec<(String, u128, String)>>>;

struct Replica {
    name: String,
    child: tokio::process::Child,
}

impl Replica {
    fn start(plane: &ControlPlane, name: &str, lines: &Lines) -> Self {
        let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_shard_replica"))
            .arg(plane.kubeconfig_path())
            .arg(NS)
            .arg(name)
            .args([LEASE_MS, RENEW_MS, RETRY_MS].map(|ms| ms.to_string()))
            .env("RUST_LOG", "info")
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("start shard_replica");
        let stdout = child.stdout.take().unwrap();
        let (lines, who) = (lines.clone(), name.to_owned());
        tokio::spawn(async move {
            let mut reader = BufReader::new(stdout).lines();
            while let Ok(Some(line)) = reader.next_line().await {
                lines.lock().unwrap().push((who.clone(), now(), line));
            }
        });
        Self {
            name: name.to_owned(),
            child,
        }
    }

    fn pid(&self) -> String {
        self.child.id().expect("running").to_string()
    }

    /// Waits until every thread of the process is in state `T` (stopped).
    async fn wait_stopped(&self) {
        let tasks = format!("/proc/{}/task", self.pid());
        for _ in 0..200 {
            let all_stopped = std::fs::read_dir(&tasks).unwrap().all(|task| {
                let stat =
                    std::fs::read_to_string(task.unwrap().path().join("stat")).unwrap_or_default();
                // `pid (comm) S ...`: the state follows the last ')'.
                stat.rsplit_once(')')
                    .is_some_and(|(_, rest)| rest.trim_start().starts_with('T'))
            });
            if all_stopped {
                return;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        panic!("{} did not stop", self.name);
    }

    fn signal(&self, signal: &str) {
        let status = std::process::Command::new("kill")
            .args([signal, &self.pid()])
            .status()
            .unwrap();
        assert!(status.success());
    }
}

/// Waits until each of `names` last reported `status true <names>`;
/// returns when (test clock).
async fn converge(lines: &Lines, names: &[&str], within: Duration) -> Instant {
    let started = Instant::now();
    let want = format!("status true {}", names.join(","));
    loop {
        let done = {
            let lines = lines.lock().unwrap();
            names.iter().all(|n| {
                lines
                    .iter()
                    .rev()
                    .find(|(r, _, l)| r == n && l.starts_with("status "))
                    .is_some_and(|(_, _, l)| *l == want)
            })
        };
        if done {
            return Instant::now();
        }
        assert!(
            started.elapsed() < within,
            "no {want:?} from {names:?} within {within:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Touches every object; waits until each was started after that; returns
/// which replica(s) started each.
async fn touch_round(
    api: &Api<ConfigMap>,
    lines: &Lines,
    round: &str,
) -> BTreeMap<String, BTreeSet<String>> {
    let since = now();
    for i in 0..OBJECTS {
        let patch = serde_json::json!({"metadata": {"annotations": {"round": round}}});
        api.patch(
            &format!("obj-{i}"),
            &PatchParams::default(),
            &Patch::Merge(&patch),
        )
        .await
        .unwrap();
    }
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let mut by: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for (r, _, line) in lines.lock().unwrap().iter() {
            let mut parts = line.split(' ');
            if let (Some("start"), Some(key), Some(t)) = (parts.next(), parts.next(), parts.next())
                && t.parse::<u128>().unwrap() >= since
                && key.starts_with(&format!("{NS}/obj-"))
            {
                by.entry(key.to_owned()).or_default().insert(r.clone());
            }
        }
        if by.len() == OBJECTS {
            for (key, replicas) in &by {
                assert_eq!(
                    replicas.len(),
                    1,
                    "round {round}: {key} reconciled by {replicas:?}"
                );
            }
            return by;
        }
        assert!(
            Instant::now() < deadline,
            "round {round}: only {} of {OBJECTS} reconciled",
            by.len()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// How many reconciles `replica` started and has not finished.
fn reconciling(lines: &Lines, replica: &str) -> usize {
    let lines = lines.lock().unwrap();
    let count = |what: &str| {
        lines
            .iter()
            .filter(|(r, _, line)| r == replica && line.starts_with(what))
            .count()
    };
    count("start ") - count("end ")
}

/// No two reconciles of one key by two replicas overlap. A start without
/// its end (a killed replica) lasts until `killed` of that replica.
fn assert_no_overlap(lines: &Lines, killed: &BTreeMap<String, u128>) {
    let mut open: BTreeMap<(String, String), u128> = BTreeMap::new();
    let mut intervals: Vec<Interval<u128>> = Vec::new();
    for (r, _, line) in lines.lock().unwrap().iter() {
        let parts: Vec<&str> = line.split(' ').collect();
        match parts.as_slice() {
            ["start", key, t] => {
                open.insert((r.clone(), (*key).to_owned()), t.parse().unwrap());
            }
            ["end", key, t] => {
                let start = open
                    .remove(&(r.clone(), (*key).to_owned()))
                    .expect("end after start");
                intervals.push((r.clone(), (*key).to_owned(), start, t.parse().unwrap()));
            }
            _ => {}
        }
    }
    for ((r, key), start) in open {
        let end = killed.get(&r).copied().unwrap_or(u128::MAX);
        intervals.push((r, key, start, end));
    }
    let checked = crate::shard_support::assert_no_overlap(&intervals);
    eprintln!("no overlap among {checked} reconciles");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_processes_split_scale_survive_sigkill_and_sigstop() {
    let (plane, admin) = plane_with_namespace(NS).await;
    let api: Api<ConfigMap> = Api::namespaced(admin.clone(), NS);
    for i in 0..OBJECTS {
        let cm = ConfigMap {
            metadata: ObjectMeta {
                name: Some(format!("obj-{i}")),
                ..ObjectMeta::default()
            },
            ..ConfigMap::default()
        };
        api.create(&PostParams::default(), &cm).await.unwrap();
    }
    let lines: Lines = Arc::default();
    let mut replicas: Vec<Replica> = ["a", "b", "c"]
        .iter()
        .map(|n| Replica::start(plane, n, &lines))
        .collect();
    converge(&lines, &["a", "b", "c"], Duration::from_secs(30)).await;
    let three = touch_round(&api, &lines, "three").await;
    let shares: BTreeMap<&str, usize> = ["a", "b", "c"]
        .iter()
        .map(|n| (*n, three.values().filter(|r| r.contains(*n)).count()))
        .collect();
    eprintln!("3 replicas, shares {shares:?}");
    assert!(shares.values().all(|s| *s > OBJECTS / 6), "{shares:?}");

    // Scale 3 -> 4: objects move only to d, about a quarter of them.
    replicas.push(Replica::start(plane, "d", &lines));
    converge(&lines, &["a", "b", "c", "d"], Duration::from_secs(30)).await;
    let four = touch_round(&api, &lines, "four").await;
    let moved: Vec<&String> = four.keys().filter(|k| four[*k] != three[*k]).collect();
    for key in &moved {
        assert!(four[*key].contains("d"), "{key} moved between old replicas");
    }
    let fraction = moved.len() as f64 / OBJECTS as f64;
    eprintln!(
        "scale 3 -> 4 moved {}/{OBJECTS} = {fraction:.3} (ideal 0.25)",
        moved.len()
    );
    assert!((0.15..0.36).contains(&fraction), "moved {fraction}");

    // SIGKILL c: its objects are taken over after its Lease expires.
    let mut killed = BTreeMap::new();
    let c = replicas.iter().position(|r| r.name == "c").unwrap();
    let mut c = replicas.remove(c);
    c.signal("-KILL");
    let _ = c.child.wait().await;
    killed.insert("c".to_owned(), now());
    let at = Instant::now();
    let back = converge(
        &lines,
        &["a", "b", "d"],
        Duration::from_millis(LEASE_MS) + Duration::from_secs(5),
    )
    .await;
    eprintln!("SIGKILL: taken over after {:?}", back - at);
    let after_kill = touch_round(&api, &lines, "after-kill").await;
    assert!(after_kill.values().all(|r| !r.contains("c")));

    // SIGSTOP b past its Lease: a and d take its objects; resumed, b starts
    // nothing until it has rejoined.
    let b = replicas.iter().find(|r| r.name == "b").unwrap();
    // Stopped between reconciles: one in flight at SIGSTOP would resume
    // and finish after its key moved, which no membership protocol can
    // prevent (only the apiserver's resourceVersion fences its writes).
    eventually(
        "b to finish the reconciles it started",
        Duration::from_secs(10),
        || async { (reconciling(&lines, "b") == 0).then_some(()) },
    )
    .await;
    b.signal("-STOP");
    // `kill` returns before every thread has stopped (a loaded machine may
    // take milliseconds): the process is stopped once all its threads are.
    b.wait_stopped().await;
    let stopped = now();
    converge(
        &lines,
        &["a", "d"],
        Duration::from_millis(LEASE_MS) + Duration::from_secs(5),
    )
    .await;
    let while_stopped = touch_round(&api, &lines, "b-stopped").await;
    assert!(while_stopped.values().all(|r| !r.contains("b")));
    b.signal("-CONT");
    let resumed = now();
    converge(&lines, &["a", "b", "d"], Duration::from_secs(30)).await;
    let rejoined = lines
        .lock()
        .unwrap()
        .iter()
        .find(|(r, at, l)| r == "b" && *at >= resumed && l == "status true a,b,d")
        .map(|(_, at, _)| *at)
        .unwrap();
    // b's Lease was removed while it was stopped; resumed, b found its
    // renew rejected and created a new Lease (acquireTime: b's clock, the
    // machine's) before it could be acknowledged. Nothing may start between
    // the stop and that creation. (b's status line can print a moment after
    // its first starts, so it is not the bound.)
    let leases: Api<Lease> = Api::namespaced(admin.clone(), NS);
    let lease = leases
        .list(&ListParams::default().labels("shard.opkit.dev/ring=replicas"))
        .await
        .unwrap()
        .items
        .into_iter()
        .find(|l| l.spec.as_ref().and_then(|s| s.holder_identity.as_deref()) == Some("b"))
        .expect("b has a Lease again");
    let recreated = lease.spec.unwrap().acquire_time.unwrap().0.as_nanosecond() as u128;
    assert!(recreated > resumed && recreated < rejoined);
    let early: Vec<String> = lines
        .lock()
        .unwrap()
        .iter()
        .filter(|(r, _, l)| {
            let at = l.rsplit(' ').next().and_then(|t| t.parse::<u128>().ok());
            r == "b" && l.starts_with("start ") && at.is_some_and(|t| t > stopped && t <= recreated)
        })
        .map(|(_, _, l)| l.clone())
        .collect();
    assert!(
        early.is_empty(),
        "b started while out of the ring: {early:?}"
    );
    eprintln!(
        "SIGSTOP/SIGCONT: b recreated its Lease {} ms and was active {} ms after resuming",
        (recreated - resumed) / 1_000_000,
        (rejoined - resumed) / 1_000_000
    );
    let last = touch_round(&api, &lines, "b-back").await;
    assert!(last.values().any(|r| r.contains("b")));

    assert_no_overlap(&lines, &killed);
    for mut r in replicas {
        let _ = r.child.start_kill();
        let _ = r.child.wait().await;
    }
}
