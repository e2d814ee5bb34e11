//! `make bench-shard`, throughput (issue 26's "Benchmark"): N = 1, 2, 3, 4
//! `shard_replica` processes over 10 000 ConfigMaps in one namespace, each
//! replica with 4 workers and a reconcile that waits 20 ms (a simulated
//! external call). Per N: the time from the first reconcile to the last
//! once every object was reconciled (the replicas form their ring before
//! their controllers start, so this is throughput, not ring formation),
//! reconciles/s, the speed-up over one replica, each replica's share, RSS,
//! bytes read and CPU, and the control plane's CPU. Then one of the 4 is
//! SIGKILLed: the time from the kill until every object it had reconciled
//! was reconciled by another replica. A control plane of its own, so that
//! its CPU is this benchmark's. Prints markdown tables:
//! `cargo test -p opkit-tests --test it shard_bench -- --ignored --nocapture`.
//! `SHARD_REPLICA_BIN` runs another build of the replica (`make
//! bench-shard` runs the debug one: 2 s of CPU per 10 000 reconciles);
//! `SHARD_BENCH_OBJECTS` changes the object count; `SHARD_BENCH_TRACE=1`
//! prints the last of the killed replica's keys to be taken over, and
//! which survivor ran them.

use std::collections::{BTreeMap, HashMap};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use k8s_openapi::api::coordination::v1::Lease;
use kube::api::{Api, DeleteParams, ListParams};
use opkit_envtest::ControlPlane;
use opkit_tests::{create_config_maps, create_namespace, init_tracing};
use tokio::io::{AsyncBufReadExt, BufReader};

pub(crate) const NS: &str = "shard-bench";
const WORKERS: u64 = 4;
const RECONCILE_MS: u64 = 20;
const LEASE_MS: u64 = 3_000;
const RENEW_MS: u64 = 2_000;
const RETRY_MS: u64 = 500;
const NAMES: [&str; 4] = ["a", "b", "c", "d"];
/// Idle this long with every object reconciled: the run is over.
const QUIET: Duration = Duration::from_secs(2);

pub(crate) fn now() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos()
}

pub(crate) fn secs(ns: u128) -> f64 {
    ns as f64 / 1e9
}

fn objects() -> usize {
    std::env::var("SHARD_BENCH_OBJECTS").map_or(10_000, |v| v.parse().unwrap())
}

/// What the replicas reported, folded as it arrives (10 000s of lines).
#[derive(Default)]
pub(crate) struct Tally {
    /// Per replica: its last status line (`true a,b,c`) and when it was read.
    status: HashMap<String, (String, u128)>,
    /// Reconciles starting before this (Unix ns) do not count.
    since: u128,
    /// Counted starts not yet ended: (replica, key) -> start.
    open: HashMap<(String, String), u128>,
    /// Per key: its first counted reconcile (replica, start, end).
    first: HashMap<String, (String, u128, u128)>,
    /// Counted reconciles ended.
    reconciles: usize,
    first_start: Option<u128>,
    last_end: u128,
    /// When the last start or end line was read.
    last_activity: u128,
    /// Per key: every reconcile start (replica, Unix ns), counted or not.
    pub(crate) starts: HashMap<String, Vec<(String, u128)>>,
}

impl Tally {
    fn fold(&mut self, replica: &str, line: &str) {
        let read = now();
        let mut parts = line.splitn(3, ' ');
        match (parts.next(), parts.next(), parts.next()) {
            (Some("status"), Some(active), members) => {
                let text = format!("{active} {}", members.unwrap_or(""));
                self.status.insert(replica.to_owned(), (text, read));
            }
            (Some("start"), Some(key), Some(t)) => {
                self.last_activity = read;
                let t: u128 = t.parse().unwrap();
                self.starts
                    .entry(key.to_owned())
                    .or_default()
                    .push((replica.to_owned(), t));
                if t >= self.since {
                    self.open.insert((replica.to_owned(), key.to_owned()), t);
                    self.first_start = Some(self.first_start.map_or(t, |f| f.min(t)));
                }
            }
            (Some("end"), Some(key), Some(t)) => {
                self.last_activity = read;
                let end: u128 = t.parse().unwrap();
                if let Some(start) = self.open.remove(&(replica.to_owned(), key.to_owned())) {
                    self.reconciles += 1;
                    self.last_end = self.last_end.max(end);
                    self.first
                        .entry(key.to_owned())
                        .or_insert_with(|| (replica.to_owned(), start, end));
                }
            }
            _ => {}
        }
    }

    /// Counts only reconciles starting from `since` on.
    fn reset(&mut self, since: u128) {
        self.since = since;
        self.open.clear();
        self.first.clear();
        self.reconciles = 0;
        self.first_start = None;
        self.last_end = 0;
    }

    /// How many distinct keys each replica reconciled first.
    fn shares(&self) -> BTreeMap<String, usize> {
        let mut shares = BTreeMap::new();
        for (replica, _, _) in self.first.values() {
            *shares.entry(replica.clone()).or_default() += 1;
        }
        shares
    }
}

pub(crate) type Shared = Arc<Mutex<Tally>>;

pub(crate) struct Replica {
    pub(crate) name: String,
    pub(crate) pid: u32,
    pub(crate) child: tokio::process::Child,
}

impl Replica {
    pub(crate) fn start(plane: &ControlPlane, name: &str, members: usize, tally: &Shared) -> Self {
        Self::start_with(plane, name, members, tally, &[])
    }

    /// [`Replica::start`] with more environment for `shard_replica`.
    pub(crate) fn start_with(
        plane: &ControlPlane,
        name: &str,
        members: usize,
        tally: &Shared,
        env: &[(&str, String)],
    ) -> Self {
        let binary = std::env::var("SHARD_REPLICA_BIN")
            .unwrap_or_else(|_| env!("CARGO_BIN_EXE_shard_replica").to_owned());
        let mut child = tokio::process::Command::new(binary)
            .arg(plane.kubeconfig_path())
            .arg(NS)
            .arg(name)
            .args([LEASE_MS, RENEW_MS, RETRY_MS].map(|ms| ms.to_string()))
            .env("SHARD_RECONCILE_MS", RECONCILE_MS.to_string())
            .env("SHARD_WORKERS", WORKERS.to_string())
            .env("SHARD_WAIT_MEMBERS", members.to_string())
            .env("RUST_LOG", "warn")
            .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("start shard_replica");
        let stdout = child.stdout.take().unwrap();
        let (tally, who) = (tally.clone(), name.to_owned());
        tokio::spawn(async move {
            let mut reader = BufReader::new(stdout).lines();
            while let Ok(Some(line)) = reader.next_line().await {
                tally.lock().unwrap().fold(&who, &line);
            }
        });
        Self {
            name: name.to_owned(),
            pid: child.id().expect("running"),
            child,
        }
    }

    pub(crate) async fn stop(mut self) {
        let _ = std::process::Command::new("kill")
            .args(["-INT", &self.pid.to_string()])
            .status();
        if tokio::time::timeout(Duration::from_secs(10), self.child.wait())
            .await
            .is_err()
        {
            let _ = self.child.start_kill();
            let _ = self.child.wait().await;
        }
    }
}

/// (RSS MiB, MiB received, CPU seconds) of a process. RSS from `/proc`;
/// received: `bytes_received` of its open TCP connections (`ss -tinp`):
/// its connections to the apiserver (TLS: lists, watches, Lease traffic);
/// a connection already closed is not counted.
fn usage(pid: u32) -> (f64, f64, f64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let rss_kib: f64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0.0);
    let received = received_bytes(pid) as f64;
    (
        rss_kib / 1024.0,
        received / (1024.0 * 1024.0),
        cpu_seconds(pid),
    )
}

/// The sum of `bytes_received` over `pid`'s TCP connections, from `ss`.
fn received_bytes(pid: u32) -> u64 {
    let Ok(out) = std::process::Command::new("ss").arg("-tinpH").output() else {
        return 0;
    };
    let text = String::from_utf8_lossy(&out.stdout);
    let owner = format!("pid={pid},");
    let mut ours = false;
    let mut total = 0;
    for line in text.lines() {
        if !line.starts_with(char::is_whitespace) {
            ours = line.contains(&owner);
        } else if ours {
            total += line
                .split_whitespace()
                .find_map(|f| f.strip_prefix("bytes_received:"))
                .and_then(|v| v.parse::<u64>().ok())
                .unwrap_or(0);
        }
    }
    total
}

/// utime + stime of a process, in seconds (`/proc/PID/stat`, fields 14
/// and 15, in clock ticks of `getconf CLK_TCK`).
fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let Some((_, rest)) = stat.rsplit_once(')') else {
        return 0.0;
    };
    // Fields after the name start at field 3 (state).
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks: f64 = [11, 12]
        .iter()
        .filter_map(|i| fields.get(*i)?.parse::<f64>().ok())
        .sum();
    ticks / clock_ticks()
}

fn clock_ticks() -> f64 {
    std::process::Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok()?.trim().parse().ok())
        .unwrap_or(100.0)
}

pub(crate) fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .unwrap_or_default()
        .split_whitespace()
        .take(3)
        .collect::<Vec<_>>()
        .join(" ")
}

/// Waits until each of `names` last reported `true <names>`; returns when
/// the last of them did (Unix ns, as read).
pub(crate) async fn converge(tally: &Shared, names: &[&str], within: Duration) -> u128 {
    let want = format!("true {}", names.join(","));
    let started = Instant::now();
    loop {
        let at = {
            let tally = tally.lock().unwrap();
            names
                .iter()
                .map(|n| {
                    tally
                        .status
                        .get(*n)
                        .filter(|(s, _)| *s == want)
                        .map(|(_, t)| *t)
                })
                .collect::<Option<Vec<u128>>>()
        };
        if let Some(at) = at {
            return at.into_iter().max().unwrap_or_default();
        }
        assert!(
            started.elapsed() < within,
            "no {want:?} from {names:?} within {within:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Waits until `done` holds and no reconcile started or ended for [`QUIET`].
async fn settle(tally: &Shared, within: Duration, done: impl Fn(&Tally) -> bool) {
    let started = Instant::now();
    loop {
        {
            let tally = tally.lock().unwrap();
            let quiet = now().saturating_sub(tally.last_activity) > QUIET.as_nanos();
            if done(&tally) && tally.open.is_empty() && quiet {
                return;
            }
            assert!(
                started.elapsed() < within,
                "not settled within {within:?}: {} keys reconciled, {} running",
                tally.first.len(),
                tally.open.len()
            );
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

pub(crate) async fn delete_leases(admin: &kube::Client) {
    let leases: Api<Lease> = Api::namespaced(admin.clone(), NS);
    let _ = leases
        .delete_collection(
            &DeleteParams::default(),
            &ListParams::default().labels("shard.opkit.dev/ring=replicas"),
        )
        .await;
}

pub(crate) async fn populate(admin: &kube::Client, count: usize) {
    create_namespace(admin, NS).await;
    create_config_maps(admin, NS, count).await;
}

/// What one run printed: its summary row and one row per replica.
struct Rows {
    summary: String,
    replicas: Vec<String>,
}

/// One converge run of `n` replicas; returns its rows, its reconciles/s,
/// and the replicas, still running.
async fn run(
    plane: &ControlPlane,
    admin: &kube::Client,
    n: usize,
    total: usize,
    baseline: Option<f64>,
) -> (Rows, f64, Vec<Replica>, Shared) {
    delete_leases(admin).await;
    let tally: Shared = Arc::default();
    let names = &NAMES[..n];
    let replicas: Vec<Replica> = names
        .iter()
        .map(|name| Replica::start(plane, name, n, &tally))
        .collect();
    converge(&tally, names, Duration::from_secs(60)).await;
    let (etcd, apiserver) = plane.pids();
    let plane_cpu = || cpu_seconds(etcd) + cpu_seconds(apiserver);
    let cpu_before: Vec<f64> = replicas.iter().map(|r| cpu_seconds(r.pid)).collect();
    let plane_before = plane_cpu();
    let load_before = loadavg();
    settle(&tally, Duration::from_secs(600), |t| t.first.len() >= total).await;
    let plane_used = plane_cpu() - plane_before;
    let (elapsed, reconciles, shares) = {
        let t = tally.lock().unwrap();
        let elapsed = secs(t.last_end - t.first_start.unwrap_or(t.last_end));
        (elapsed, t.reconciles, t.shares())
    };
    let rate = total as f64 / elapsed;
    let speedup = baseline.map_or(1.0, |b| rate / b);
    let largest = shares.values().copied().max().unwrap_or(0);
    let summary = format!(
        "| {n} | {elapsed:.1} | {rate:.0} | {speedup:.2}× | {:.1} % | {reconciles} | {plane_used:.1} | {load_before} → {} |",
        100.0 * largest as f64 / total as f64,
        loadavg()
    );
    let rows = replicas
        .iter()
        .zip(&cpu_before)
        .map(|(replica, before)| {
            let (rss, read, cpu) = usage(replica.pid);
            format!(
                "| {n} | {} | {} | {rss:.1} | {read:.1} | {:.1} |",
                replica.name,
                shares.get(&replica.name).copied().unwrap_or(0),
                cpu - before
            )
        })
        .collect();
    let rows = Rows {
        summary,
        replicas: rows,
    };
    (rows, rate, replicas, tally)
}

/// SIGKILLs one of `replicas` after a converged run: the time until every
/// key it had reconciled first was reconciled by another replica.
async fn kill_one(mut replicas: Vec<Replica>, tally: &Shared, total: usize) {
    let victim = replicas.remove(2);
    let theirs: Vec<String> = {
        let t = tally.lock().unwrap();
        t.first
            .iter()
            .filter(|(_, (r, _, _))| *r == victim.name)
            .map(|(k, _)| k.clone())
            .collect()
    };
    let killed = now();
    tally.lock().unwrap().reset(killed);
    let mut child = victim.child;
    child.start_kill().unwrap();
    let _ = child.wait().await;
    let survivors: Vec<&str> = replicas.iter().map(|r| r.name.as_str()).collect();
    let reformed = converge(tally, &survivors, Duration::from_secs(60)).await;
    settle(tally, Duration::from_secs(600), |t| {
        theirs.iter().all(|k| t.first.contains_key(k))
    })
    .await;
    let (mut ends, starts, reconciles, all_done) = {
        let t = tally.lock().unwrap();
        if std::env::var_os("SHARD_BENCH_TRACE").is_some() {
            let mut late: Vec<&(String, u128, u128)> = theirs.iter().map(|k| &t.first[k]).collect();
            late.sort_by_key(|(_, _, end)| *end);
            for (r, start, end) in late.iter().rev().take(8) {
                eprintln!(
                    "late: {r} {:.2}..{:.2}",
                    secs(start - killed),
                    secs(end - killed)
                );
            }
            let mut per: BTreeMap<&str, (usize, u128)> = BTreeMap::new();
            for (r, _, end) in &late {
                let e = per.entry(r.as_str()).or_default();
                e.0 += 1;
                e.1 = e.1.max(*end);
            }
            for (r, (n, end)) in per {
                eprintln!(
                    "survivor {r}: {n} of c's keys, last at {:.2}",
                    secs(end - killed)
                );
            }
        }
        let ends: Vec<u128> = theirs.iter().map(|k| t.first[k].2).collect();
        let starts: Vec<u128> = theirs.iter().map(|k| t.first[k].1).collect();
        (ends, starts, t.reconciles, t.last_end)
    };
    ends.sort_unstable();
    let first_start = starts.iter().min().copied().unwrap_or(killed);
    let at = |q: f64| {
        let i = ((ends.len() as f64 * q).ceil() as usize).clamp(1, ends.len().max(1)) - 1;
        secs(
            ends.get(i)
                .copied()
                .unwrap_or(killed)
                .saturating_sub(killed),
        )
    };
    println!(
        "| {} | {} of {total} | {:.1} | {:.1} | {:.1} / {:.1} / {:.1} | {} in {:.1} s |",
        victim.name,
        theirs.len(),
        secs(reformed.saturating_sub(killed)),
        secs(first_start.saturating_sub(killed)),
        at(0.5),
        at(0.99),
        at(1.0),
        reconciles,
        secs(all_done.saturating_sub(killed)),
    );
    for r in replicas {
        r.stop().await;
    }
}

/// The throughput table; see the module docs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "measurement, not a check (about five minutes)"]
async fn measure_throughput() {
    init_tracing();
    let total = objects();
    let plane = ControlPlane::start().await.unwrap();
    let admin = plane.client().unwrap();
    let populating = Instant::now();
    populate(&admin, total).await;
    println!(
        "{total} ConfigMaps created in {:.1} s; {WORKERS} workers per replica, reconcile = sleep {RECONCILE_MS} ms; \
         lease {LEASE_MS} ms, renew deadline {RENEW_MS} ms, retry {RETRY_MS} ms; replica binary {}",
        populating.elapsed().as_secs_f64(),
        std::env::var("SHARD_REPLICA_BIN").unwrap_or_else(|_| "debug (cargo test's)".into())
    );
    let mut baseline = None;
    let mut all = Vec::new();
    let mut last = None;
    for n in 1..=NAMES.len() {
        let (rows, rate, replicas, tally) = run(&plane, &admin, n, total, baseline).await;
        eprintln!("{}", rows.summary);
        baseline.get_or_insert(rate);
        all.push(rows);
        if n == NAMES.len() {
            last = Some((replicas, tally));
        } else {
            for r in replicas {
                r.stop().await;
            }
        }
    }
    println!();
    println!(
        "| replicas | converge s | reconciles/s | speed-up | largest share | reconciles run | apiserver+etcd CPU s | load avg before → after |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    for rows in &all {
        println!("{}", rows.summary);
    }
    println!();
    println!(
        "| replicas | replica | objects reconciled | RSS MiB | MiB received | CPU s in the run |"
    );
    println!("|---|---|---|---|---|---|");
    for rows in &all {
        for row in &rows.replicas {
            println!("{row}");
        }
    }
    println!();
    println!(
        "| SIGKILLed | its share | ring of 3 active after s | first of its keys started after s | its keys reconciled after s: half / 99 % / all | reconciles by the 3 (all they own, re-enqueued) |"
    );
    println!("|---|---|---|---|---|---|");
    let (replicas, tally) = last.unwrap();
    kill_one(replicas, &tally, total).await;
    delete_leases(&admin).await;
}
