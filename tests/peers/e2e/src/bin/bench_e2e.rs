//! `bench-e2e --peer LABEL=PATH[ ARGS] ... [--sizes 1000,10000] [--reps 3]
//! [--workers 4] [--updates 2000] [--probes 100] [--churn 50]`
//!
//! The end-to-end benchmark of issue 13. Starts ONE real control plane
//! (`opkit_envtest`), creates N source ConfigMaps (`bench=src`, ~256 B of
//! data) in a namespace per size, then runs every peer (the same operator in
//! opkit, controller-runtime and kube-runtime, each its own process) `reps`
//! times in rotating order. Each run:
//!
//! 1. **converge**: the peer starts with a new salt (mixed into the hash),
//!    so all N sources need their derived object updated and their
//!    annotation written; time from spawning the process until the peer has
//!    reported the last source converged (`W name hash` with the expected
//!    hash) — every reported hash is the one the driver expects.
//! 2. **update stream**: the driver changes the payload of `updates`
//!    sources (16 merge patches in flight); changes reconciled per second =
//!    `updates` / (last expected `W` − first patch sent).
//! 3. **latency**: a background churn of `churn` updates/s on other
//!    sources, and `probes` single updates, one at a time, on 20 probe
//!    sources; latency = the peer's reconcile start for the probe's
//!    resourceVersion (`S name rv t`) − the moment the driver sent the
//!    update's API call (not when its response returned: a peer can start
//!    reconciling before the driver has read the response, which read as a
//!    negative latency). Both clocks are the same machine's CLOCK_REALTIME.
//!
//! Then: client CPU (utime + stime of the peer process, from
//! /proc/PID/stat) at convergence and at the end, peak RSS (VmHWM), and API
//! requests per reconcile (requests counted by the peer's own HTTP client
//! ÷ reconciles it started, over the whole run). Prints Markdown tables of
//! the medians, with ratios against controller-runtime.
//!
//! A peer's PATH may be followed by extra arguments for it, separated by
//! spaces (`--peer "opkit-ryow-off=PATH --read-your-writes false"`). With a
//! peer labelled `opkit-ryow-off` the driver also prints what opkit's
//! read-your-own-writes default costs (opkit ÷ opkit-ryow-off).

use std::collections::{HashMap, HashSet};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bench_support::{Peer, Pid, arg, cpu_secs, median, now_ns, peers, percentile, status_kib};
use futures::StreamExt;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{Api, ObjectMeta, Patch, PatchParams, PostParams};
use opkit_envtest::ControlPlane;
use tokio::io::{AsyncBufReadExt, BufReader};

const PROBE_OBJECTS: usize = 20;

/// FNV-1a 64 over salt, a newline and the payload, as hex (the peers' hash).
fn source_hash(salt: &str, payload: &str) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in salt
        .bytes()
        .chain(std::iter::once(b'\n'))
        .chain(payload.bytes())
    {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    format!("{h:016x}")
}

/// ~256 bytes of varied text for source `i`, version `v`.
fn payload(i: usize, v: u64) -> String {
    let mut x =
        (i as u64 ^ v.wrapping_mul(0xD1B5_4A32_D192_ED03)).wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..256)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (b'a' + (x % 26) as u8) as char
        })
        .collect()
}

fn src_name(i: usize) -> String {
    format!("src-{i:06}")
}

/// What a running peer has reported on stdout.
#[derive(Default)]
struct Reported {
    /// Per source: (hash, unix ns) of every `W` line.
    converged: HashMap<String, Vec<(String, i128)>>,
    /// Per probe source: (resourceVersion, unix ns) of every `S` line.
    starts: HashMap<String, Vec<(String, i128)>>,
    /// Unix ns of every `S` line.
    start_times: Vec<i128>,
    /// Highest request count the peer reported.
    requests: u64,
    /// The peer closed its stdout (it exited).
    exited: bool,
}

fn parse_line(line: &str, probes: &HashSet<String>, rep: &mut Reported) {
    let f: Vec<&str> = line.split_whitespace().collect();
    match f.as_slice() {
        ["S", name, rv, t, reqs] => {
            let t: i128 = t.parse().unwrap_or(0);
            rep.start_times.push(t);
            rep.requests = rep.requests.max(reqs.parse().unwrap_or(0));
            if probes.contains(*name) {
                rep.starts
                    .entry((*name).to_string())
                    .or_default()
                    .push(((*rv).to_string(), t));
            }
        }
        ["W", name, hash, t, reqs] => {
            rep.requests = rep.requests.max(reqs.parse().unwrap_or(0));
            rep.converged
                .entry((*name).to_string())
                .or_default()
                .push(((*hash).to_string(), t.parse().unwrap_or(0)));
        }
        _ => {}
    }
}

#[derive(Clone, Copy)]
struct Sample {
    converge_s: f64,
    converge_cpu_s: f64,
    changes_per_s: f64,
    p50_ms: f64,
    p99_ms: f64,
    cpu_s: f64,
    rss_mib: f64,
    requests_per_reconcile: f64,
}

struct Workload {
    api: Api<ConfigMap>,
    ns: String,
    n: usize,
    /// Current payload version of every source.
    versions: Vec<u64>,
    next_version: u64,
}

impl Workload {
    fn expected(&self, salt: &str, i: usize) -> String {
        source_hash(salt, &payload(i, self.versions[i]))
    }

    /// Patches source `i` to `version`; returns the new resourceVersion
    /// and when the successful request was sent (unix ns): latency is
    /// measured from the send, so a reconcile that starts before this
    /// client has read the response still counts as positive.
    async fn bump(api: &Api<ConfigMap>, i: usize, version: u64) -> (String, i128) {
        let patch = serde_json::json!({"data": {"payload": payload(i, version)}});
        for attempt in 0..5 {
            let sent = now_ns();
            match api
                .patch(&src_name(i), &PatchParams::default(), &Patch::Merge(&patch))
                .await
            {
                Ok(cm) => {
                    return (cm.metadata.resource_version.unwrap_or_default(), sent);
                }
                Err(e) if attempt < 4 => {
                    eprintln!("bench-e2e: update {}: {e}; retrying", src_name(i));
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                Err(e) => panic!("update {}: {e}", src_name(i)),
            }
        }
        unreachable!()
    }
}

async fn populate(client: &kube::Client, ns: &str, n: usize) -> Workload {
    let nss: Api<Namespace> = Api::all(client.clone());
    let _ = nss
        .create(
            &PostParams::default(),
            &Namespace {
                metadata: ObjectMeta {
                    name: Some(ns.into()),
                    ..Default::default()
                },
                ..Default::default()
            },
        )
        .await;
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), ns);
    futures::stream::iter(0..n)
        .for_each_concurrent(32, |i| {
            let api = api.clone();
            async move {
                let cm = ConfigMap {
                    metadata: ObjectMeta {
                        name: Some(src_name(i)),
                        labels: Some([("bench".to_string(), "src".to_string())].into()),
                        ..Default::default()
                    },
                    data: Some([("payload".to_string(), payload(i, 0))].into()),
                    ..Default::default()
                };
                for attempt in 0..5 {
                    match api.create(&PostParams::default(), &cm).await {
                        Ok(_) => return,
                        Err(kube::Error::Api(e)) if e.code == 409 => return,
                        Err(e) if attempt < 4 => {
                            eprintln!("create {}: {e}; retrying", src_name(i));
                            tokio::time::sleep(Duration::from_millis(200)).await;
                        }
                        Err(e) => panic!("create {}: {e}", src_name(i)),
                    }
                }
            }
        })
        .await;
    Workload {
        api,
        ns: ns.to_string(),
        n,
        versions: vec![0; n],
        next_version: 1,
    }
}

/// Waits until every source in `targets` has a `W` with its expected hash
/// at or after `since`; returns the latest such time, or `None` on timeout.
async fn wait_converged(
    rep: &Arc<Mutex<Reported>>,
    wl: &Workload,
    salt: &str,
    targets: &[usize],
    since: i128,
    timeout: Duration,
) -> Option<i128> {
    let expected: Vec<(String, String)> = targets
        .iter()
        .map(|&i| (src_name(i), wl.expected(salt, i)))
        .collect();
    let deadline = Instant::now() + timeout;
    let mut pending: Vec<usize> = (0..expected.len()).collect();
    let mut latest = since;
    loop {
        {
            let r = rep.lock().expect("lock");
            if r.exited {
                eprintln!("bench-e2e: the peer exited before converging");
                return None;
            }
            pending.retain(|&k| {
                let (name, hash) = &expected[k];
                match r.converged.get(name).and_then(|v| {
                    v.iter()
                        .filter(|(h, t)| h == hash && *t >= since)
                        .map(|(_, t)| *t)
                        .min()
                }) {
                    Some(t) => {
                        latest = latest.max(t);
                        false
                    }
                    None => true,
                }
            });
        }
        if pending.is_empty() {
            return Some(latest);
        }
        if Instant::now() > deadline {
            eprintln!(
                "bench-e2e: timed out with {} of {} sources not converged (e.g. {})",
                pending.len(),
                expected.len(),
                expected[pending[0]].0
            );
            return None;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[allow(clippy::too_many_arguments)]
async fn run_peer(
    peer: &Peer,
    kubeconfig: &str,
    wl: &mut Workload,
    salt: &str,
    workers: usize,
    updates: usize,
    probes: usize,
    churn_per_s: u64,
    measure: bool,
) -> Option<Sample> {
    let probe_names: HashSet<String> = (0..PROBE_OBJECTS.min(wl.n)).map(src_name).collect();
    let rep = Arc::new(Mutex::new(Reported::default()));
    let t0 = now_ns();
    let mut child = tokio::process::Command::new(&peer.path)
        .args([
            "--kubeconfig",
            kubeconfig,
            "--namespace",
            &wl.ns,
            "--salt",
            salt,
            "--workers",
            &workers.to_string(),
        ])
        .args(&peer.args)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .unwrap_or_else(|e| panic!("starting {}: {e}", peer.path));
    let pid = child.id().expect("pid");
    let stdout = child.stdout.take().expect("stdout");
    let reader = {
        let rep = rep.clone();
        tokio::spawn(async move {
            let mut lines = BufReader::new(stdout).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                parse_line(&line, &probe_names, &mut rep.lock().expect("lock"));
            }
            rep.lock().expect("lock").exited = true;
        })
    };

    // 1. converge
    let all: Vec<usize> = (0..wl.n).collect();
    let timeout = Duration::from_secs(120 + wl.n as u64 / 10);
    let done = wait_converged(&rep, wl, salt, &all, t0, timeout).await;
    let converge_cpu_s = cpu_secs(Pid::Of(pid));
    let Some(done) = done else {
        let _ = child.kill().await;
        return None;
    };
    let converge_s = (done - t0) as f64 / 1e9;
    if !measure {
        let _ = child.kill().await;
        reader.abort();
        return None;
    }
    tokio::time::sleep(Duration::from_millis(500)).await;

    // 2. update stream
    let first = PROBE_OBJECTS.min(wl.n);
    let targets: Vec<usize> = (first..wl.n).take(updates).collect();
    let version = wl.next_version;
    wl.next_version += 1;
    let stream_start = now_ns();
    futures::stream::iter(targets.iter().copied())
        .for_each_concurrent(16, |i| {
            let api = wl.api.clone();
            async move {
                Workload::bump(&api, i, version).await;
            }
        })
        .await;
    let sent_s = (now_ns() - stream_start) as f64 / 1e9;
    for &i in &targets {
        wl.versions[i] = version;
    }
    let stream_done = wait_converged(&rep, wl, salt, &targets, stream_start, timeout).await;
    let changes_per_s = match stream_done {
        Some(t) => targets.len() as f64 / ((t - stream_start) as f64 / 1e9),
        None => f64::NAN,
    };
    eprintln!(
        "bench-e2e:   {}: {} updates sent in {sent_s:.2} s, all reconciled after {:.2} s",
        peer.label,
        targets.len(),
        stream_done.map_or(f64::NAN, |t| (t - stream_start) as f64 / 1e9)
    );
    tokio::time::sleep(Duration::from_millis(500)).await;

    // 3. single updates under background churn
    let stop_churn = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let churn = {
        let api = wl.api.clone();
        let stop = stop_churn.clone();
        let (lo, hi) = (first, wl.n);
        let churn_version = wl.next_version;
        wl.next_version += 1;
        tokio::spawn(async move {
            let mut tick =
                tokio::time::interval(Duration::from_micros(1_000_000 / churn_per_s.max(1)));
            let mut touched = Vec::new();
            while !stop.load(std::sync::atomic::Ordering::Relaxed) && hi > lo {
                tick.tick().await;
                let i = lo + fastrand::usize(..hi - lo);
                let api = api.clone();
                touched.push(i);
                tokio::spawn(async move { Workload::bump(&api, i, churn_version).await });
            }
            (churn_version, touched)
        })
    };
    let mut latencies = Vec::with_capacity(probes);
    for k in 0..probes {
        let i = k % first;
        let version = wl.next_version;
        wl.next_version += 1;
        let (rv, sent) = Workload::bump(&wl.api, i, version).await;
        wl.versions[i] = version;
        let name = src_name(i);
        let deadline = Instant::now() + Duration::from_secs(30);
        let started = loop {
            let t = rep
                .lock()
                .expect("lock")
                .starts
                .get(&name)
                .and_then(|v| v.iter().find(|(r, _)| *r == rv).map(|(_, t)| *t));
            if t.is_some() || Instant::now() > deadline {
                break t;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        };
        match started {
            Some(t) => latencies.push((t - sent) as f64 / 1e6),
            None => eprintln!("bench-e2e: no reconcile seen for {name} at rv {rv}"),
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    stop_churn.store(true, std::sync::atomic::Ordering::Relaxed);
    let (churn_version, touched) = churn.await.expect("churn");
    for i in touched {
        wl.versions[i] = churn_version;
    }
    tokio::time::sleep(Duration::from_millis(500)).await;

    let cpu_s = cpu_secs(Pid::Of(pid));
    let rss_mib = status_kib(Pid::Of(pid), "VmHWM") / 1024.0;
    let _ = child.kill().await;
    let _ = reader.await;
    let r = rep.lock().expect("lock");
    let reconciles = r.start_times.len().max(1) as f64;
    Some(Sample {
        converge_s,
        converge_cpu_s,
        changes_per_s,
        p50_ms: percentile(&latencies, 50.0),
        p99_ms: percentile(&latencies, 99.0),
        cpu_s,
        rss_mib,
        requests_per_reconcile: r.requests as f64 / reconciles,
    })
}

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let peers = peers(&args);
    let sizes: Vec<usize> = arg(&args, "--sizes")
        .unwrap_or_else(|| "1000,10000".into())
        .split(',')
        .map(|s| s.trim().parse().expect("size"))
        .collect();
    let reps: usize = arg(&args, "--reps")
        .and_then(|s| s.parse().ok())
        .unwrap_or(3);
    let workers: usize = arg(&args, "--workers")
        .and_then(|s| s.parse().ok())
        .unwrap_or(4);
    let updates: usize = arg(&args, "--updates")
        .and_then(|s| s.parse().ok())
        .unwrap_or(2000);
    let probes: usize = arg(&args, "--probes")
        .and_then(|s| s.parse().ok())
        .unwrap_or(100);
    let churn: u64 = arg(&args, "--churn")
        .and_then(|s| s.parse().ok())
        .unwrap_or(50);

    eprintln!("bench-e2e: starting a control plane");
    let cp = ControlPlane::start().await.expect("control plane");
    let client = cp.client().expect("client");
    let kubeconfig = cp.kubeconfig_path().display().to_string();
    let version = client
        .apiserver_version()
        .await
        .expect("version")
        .git_version;

    let mut rows: Vec<(usize, usize, Vec<Sample>)> = Vec::new();
    for &n in &sizes {
        let t = Instant::now();
        let mut wl = populate(&client, &format!("e2e-{n}"), n).await;
        eprintln!(
            "bench-e2e: created {n} source ConfigMaps in {:?}",
            t.elapsed()
        );
        // One unmeasured run creates the derived objects, so that every
        // measured run does the same work (update, not create).
        eprintln!("bench-e2e: {n}: warm-up run ({})", peers[0].label);
        let _ = run_peer(
            &peers[0],
            &kubeconfig,
            &mut wl,
            "warm-up",
            workers,
            0,
            0,
            churn,
            false,
        )
        .await;
        let mut samples: Vec<Vec<Sample>> = vec![Vec::new(); peers.len()];
        for r in 0..reps {
            for k in 0..peers.len() {
                let p = (k + r) % peers.len();
                let salt = format!("rep{r}-{}", peers[p].label);
                let updates = updates.min(n.saturating_sub(PROBE_OBJECTS));
                match run_peer(
                    &peers[p],
                    &kubeconfig,
                    &mut wl,
                    &salt,
                    workers,
                    updates,
                    probes,
                    churn,
                    true,
                )
                .await
                {
                    Some(s) => {
                        eprintln!(
                            "  {n:>6} {:<20} rep {r}: converge {:>7.2} s (cpu {:>6.2} s), {:>7.0} changes/s, \
                             latency p50 {:>6.1} ms p99 {:>7.1} ms, cpu {:>6.2} s, peak rss {:>6.1} MiB, {:.2} req/reconcile",
                            peers[p].label,
                            s.converge_s,
                            s.converge_cpu_s,
                            s.changes_per_s,
                            s.p50_ms,
                            s.p99_ms,
                            s.cpu_s,
                            s.rss_mib,
                            s.requests_per_reconcile
                        );
                        samples[p].push(s);
                    }
                    None => eprintln!(
                        "  {n:>6} {:<20} rep {r}: FAILED (see above)",
                        peers[p].label
                    ),
                }
            }
        }
        let med: Vec<Sample> = samples
            .iter()
            .map(|v| {
                let m = |f: fn(&Sample) -> f64| median(v.iter().map(f).collect());
                Sample {
                    converge_s: m(|s| s.converge_s),
                    converge_cpu_s: m(|s| s.converge_cpu_s),
                    changes_per_s: m(|s| s.changes_per_s),
                    p50_ms: m(|s| s.p50_ms),
                    p99_ms: m(|s| s.p99_ms),
                    cpu_s: m(|s| s.cpu_s),
                    rss_mib: m(|s| s.rss_mib),
                    requests_per_reconcile: m(|s| s.requests_per_reconcile),
                }
            })
            .collect();
        let runs = samples.iter().map(Vec::len).min().unwrap_or(0);
        rows.push((n, runs, med));
    }
    cp.stop();

    let base = peers
        .iter()
        .position(|p| p.label == "controller-runtime")
        .unwrap_or(0);
    println!(
        "End to end: the same operator (ConfigMap bench=src -> owned ConfigMap <name>-derived + annotation \
         write-back) per peer, kube-apiserver {version}; {workers} workers each, no client-side rate limit; \
         median of {reps} interleaved runs, each peer its own process; update stream = {updates} changes \
         (16 in flight); latency = {probes} single updates under {churn}/s background churn."
    );
    println!();
    println!(
        "| objects | peer | converge (s) | × c-r | converge CPU (s) | changes/s (stream) | latency p50 (ms) | p99 (ms) | × c-r | client CPU, whole run (s) | × c-r | peak RSS (MiB) | × c-r | API requests / reconcile |"
    );
    println!("|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for (n, _, med) in &rows {
        let b = med[base];
        for (i, p) in peers.iter().enumerate() {
            let s = med[i];
            println!(
                "| {n} | {} | {:.2} | {:.2} | {:.2} | {:.0} | {:.1} | {:.1} | {:.2} | {:.2} | {:.2} | {:.1} | {:.2} | {:.2} |",
                p.label,
                s.converge_s,
                s.converge_s / b.converge_s,
                s.converge_cpu_s,
                s.changes_per_s,
                s.p50_ms,
                s.p99_ms,
                s.p99_ms / b.p99_ms,
                s.cpu_s,
                s.cpu_s / b.cpu_s,
                s.rss_mib,
                s.rss_mib / b.rss_mib,
                s.requests_per_reconcile
            );
        }
    }
    println!();
    let Some(o) = peers.iter().position(|p| p.label == "opkit") else {
        return;
    };
    let kr = peers.iter().position(|p| p.label == "kube-runtime");
    if let Some(off) = peers.iter().position(|p| p.label == "opkit-ryow-off") {
        for (n, runs, med) in &rows {
            let (on, off) = (med[o], med[off]);
            println!(
                "read-your-own-writes cost at {n} ({runs} runs), opkit ÷ opkit-ryow-off: converge {:.2}×, \
                 changes/s {:.2}×, latency p50 {:+.1} ms, p99 {:.2}×, client CPU {:.2}×, peak RSS {:.2}×, \
                 requests/reconcile {:.2}×",
                on.converge_s / off.converge_s,
                on.changes_per_s / off.changes_per_s,
                on.p50_ms - off.p50_ms,
                on.p99_ms / off.p99_ms,
                on.cpu_s / off.cpu_s,
                on.rss_mib / off.rss_mib,
                on.requests_per_reconcile / off.requests_per_reconcile,
            );
        }
    }
    let verdict = |ok: bool| if ok { "met" } else { "MISSED" };
    for (n, runs, med) in &rows {
        let (s, b) = (med[o], med[base]);
        println!(
            "goals at {n} ({runs} runs): converge ≤ controller-runtime: {} ({:.2}×); p99 ≤ controller-runtime: {} ({:.2}×); \
             CPU ≤ 0.5× controller-runtime: {} ({:.2}×); RSS ≤ 0.5× controller-runtime: {} ({:.2}×)",
            verdict(s.converge_s <= b.converge_s),
            s.converge_s / b.converge_s,
            verdict(s.p99_ms <= b.p99_ms),
            s.p99_ms / b.p99_ms,
            verdict(s.cpu_s <= 0.5 * b.cpu_s),
            s.cpu_s / b.cpu_s,
            verdict(s.rss_mib <= 0.5 * b.rss_mib),
            s.rss_mib / b.rss_mib,
        );
        if let Some(k) = kr {
            let q = med[k];
            let ahead = [
                ("converge", s.converge_s <= q.converge_s),
                ("changes/s", s.changes_per_s >= q.changes_per_s),
                ("p50", s.p50_ms <= q.p50_ms),
                ("p99", s.p99_ms <= q.p99_ms),
                ("CPU", s.cpu_s <= q.cpu_s),
                ("RSS", s.rss_mib <= q.rss_mib),
                (
                    "requests/reconcile",
                    s.requests_per_reconcile <= q.requests_per_reconcile,
                ),
            ];
            let behind: Vec<&str> = ahead
                .iter()
                .filter(|(_, ok)| !ok)
                .map(|(l, _)| *l)
                .collect();
            println!(
                "ahead of kube-runtime at {n} on every line: {}{}",
                verdict(behind.is_empty()),
                if behind.is_empty() {
                    String::new()
                } else {
                    format!(" (behind on: {})", behind.join(", "))
                }
            );
        }
    }
}
