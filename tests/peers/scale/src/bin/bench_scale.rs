//! `bench-scale --kwok PATH --kwok-config PATH --peer 'LABEL=PATH [ARGS]' ...
//! [--pods 10000] [--nodes 20] [--reps 3] [--workers 4] [--churn 20]
//! [--churn-secs 20]`
//!
//! The scale benchmark of issue 13. Starts ONE real control plane
//! (`opkit_envtest`: kube-apiserver + etcd, no scheduler, no
//! controller-manager) and kwok (simulated Nodes and Pods, with the Stages
//! in `--kwok-config`), creates `nodes` fake Nodes, then:
//!
//! 1. **baseline**: each peer (the same Pod controller in opkit and
//!    controller-runtime, each its own process) is started `reps` times,
//!    rotating, while the cluster has no Pods; its resident set (VmRSS)
//!    2 s after its Pod cache synced is its RSS with 0 Pods.
//! 2. **populate**: `pods` Pods in namespace `scale`, bound round-robin to
//!    the Nodes (`spec.nodeName`; there is no scheduler); kwok marks each
//!    Running and Ready (one status write per Pod).
//! 3. **measured runs**, `reps` times per peer, rotating order. Each run
//!    starts the peer and measures the time until it has reconciled `pods`
//!    Pods (the initial list), then its VmRSS after 3 s more (steady RSS
//!    after sync). Memory per Pod = (that RSS − the peer's median 0-Pod
//!    RSS) ÷ `pods`. Then the churn: for `churn-secs` seconds, `churn`
//!    times a second the driver deletes a Pod (kwok removes it) and creates
//!    its successor on the same Node (kwok marks it Running and Ready), so
//!    the cluster keeps `pods` Pods. CPU per event = the peer's user +
//!    system CPU (/proc/PID/stat) from the start of the churn until the
//!    cluster is back to `pods` Running Pods and the peer has seen no new
//!    event for 1 s, ÷ the watch events the peer counted in that window.
//!    Peak RSS = VmHWM at the end of the run. One unmeasured run of the
//!    first peer comes first: it absorbs kwok's late status writes.
//!
//! Prints a Markdown table of the medians, with ratios against the peer
//! labelled `controller-runtime`.

use std::process::Stdio;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bench_support::{Peer, Pid, arg, cpu_secs, median, now_ns, parsed, peers, status_kib};
use futures::StreamExt;
use k8s_openapi::api::core::v1::{Namespace, Node, Pod};
use kube::api::{Api, DeleteParams, ListParams, ObjectMeta, PostParams};
use opkit_envtest::ControlPlane;
use tokio::io::{AsyncBufReadExt, BufReader};

use scale_peers::{NAMESPACE, node_name, pod, pod_name};

/// What a running peer has reported on stdout.
#[derive(Default, Clone, Copy)]
struct Reported {
    /// Unix ns at which the Pod cache synced (`Y`).
    synced_at: Option<i128>,
    /// Unix ns of the first `T` line with at least the awaited reconciles.
    reconciled_at: Option<i128>,
    /// Latest counters (`T` line).
    events: u64,
    reconciles: u64,
    ready: u64,
    gone: u64,
    /// Unix ns at which `events` last changed.
    events_changed_at: i128,
    /// The peer closed its stdout (it exited).
    exited: bool,
}

fn parse_line(line: &str, await_reconciles: u64, rep: &mut Reported) {
    let f: Vec<&str> = line.split_whitespace().collect();
    match f.as_slice() {
        ["Y", t] => rep.synced_at = t.parse().ok(),
        ["T", t, events, reconciles, ready, gone] => {
            let t: i128 = t.parse().unwrap_or(0);
            let events: u64 = events.parse().unwrap_or(0);
            if events != rep.events {
                rep.events_changed_at = t;
            }
            rep.events = events;
            rep.reconciles = reconciles.parse().unwrap_or(0);
            rep.ready = ready.parse().unwrap_or(0);
            rep.gone = gone.parse().unwrap_or(0);
            if rep.reconciled_at.is_none() && rep.reconciles >= await_reconciles {
                rep.reconciled_at = Some(t);
            }
        }
        _ => {}
    }
}

/// A peer process and what it reports.
struct Running {
    child: tokio::process::Child,
    pid: u32,
    started_ns: i128,
    rep: Arc<Mutex<Reported>>,
    reader: tokio::task::JoinHandle<()>,
}

impl Running {
    fn spawn(peer: &Peer, kubeconfig: &str, workers: usize, await_reconciles: u64) -> Running {
        let rep = Arc::new(Mutex::new(Reported::default()));
        let started_ns = now_ns();
        let mut child = tokio::process::Command::new(&peer.path)
            .args(&peer.args)
            .args([
                "--kubeconfig",
                kubeconfig,
                "--workers",
                &workers.to_string(),
            ])
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
                    parse_line(&line, await_reconciles, &mut rep.lock().expect("lock"));
                }
                rep.lock().expect("lock").exited = true;
            })
        };
        Running {
            child,
            pid,
            started_ns,
            rep,
            reader,
        }
    }

    fn report(&self) -> Reported {
        *self.rep.lock().expect("lock")
    }

    /// Polls until `done` holds for the peer's report; `false` on timeout or
    /// if the peer exited.
    async fn wait_for(
        &self,
        what: &str,
        timeout: Duration,
        done: impl Fn(&Reported) -> bool,
    ) -> bool {
        let deadline = Instant::now() + timeout;
        loop {
            let r = self.report();
            if done(&r) {
                return true;
            }
            if r.exited {
                eprintln!("bench-scale: the peer exited while waiting for {what}");
                return false;
            }
            if Instant::now() > deadline {
                eprintln!(
                    "bench-scale: timed out after {timeout:?} waiting for {what} \
                     (events {}, reconciles {})",
                    r.events, r.reconciles
                );
                return false;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    async fn stop(mut self) {
        let _ = self.child.kill().await;
        let _ = self.reader.await;
    }
}

async fn create_with_retry<K>(api: &Api<K>, obj: &K, what: &str)
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + serde::Serialize + std::fmt::Debug,
{
    for attempt in 0..5 {
        match api.create(&PostParams::default(), obj).await {
            Ok(_) => return,
            Err(kube::Error::Api(e)) if e.code == 409 => return,
            Err(e) if attempt < 4 => {
                eprintln!("bench-scale: create {what}: {e}; retrying");
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            Err(e) => panic!("create {what}: {e}"),
        }
    }
}

/// Number of Pods in the namespace (a one-item list and its
/// `remainingItemCount`).
async fn pod_count(pods: &Api<Pod>) -> usize {
    let list = pods
        .list_metadata(&ListParams::default().limit(1))
        .await
        .expect("list pods");
    list.items.len() + list.metadata.remaining_item_count.unwrap_or(0) as usize
}

/// Whether some Pod in the namespace is not Running yet.
async fn any_pod_not_running(pods: &Api<Pod>) -> bool {
    let mut lp = ListParams::default()
        .fields("status.phase!=Running")
        .limit(500);
    loop {
        let list = pods.list_metadata(&lp).await.expect("list pods");
        if !list.items.is_empty() {
            return true;
        }
        match list.metadata.continue_ {
            Some(c) if !c.is_empty() => lp = lp.continue_token(&c),
            _ => return false,
        }
    }
}

/// Waits until the namespace holds exactly `n` Pods, all Running.
async fn wait_pods_settled(pods: &Api<Pod>, n: usize, timeout: Duration) -> bool {
    let deadline = Instant::now() + timeout;
    loop {
        let count = pod_count(pods).await;
        if count == n && !any_pod_not_running(pods).await {
            return true;
        }
        if Instant::now() > deadline {
            eprintln!("bench-scale: timed out waiting for {n} Running Pods (have {count} Pods)");
            return false;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

#[derive(Clone, Copy)]
struct Sample {
    cache_synced_s: f64,
    reconciled_s: f64,
    rss_sync_mib: f64,
    peak_rss_mib: f64,
    churn_events: f64,
    churn_cpu_s: f64,
    cpu_per_event_us: f64,
}

struct Churn {
    rate: u64,
    secs: u64,
}

/// Deletes Pod `name`, retrying transport errors; a Pod already gone counts
/// as deleted.
async fn delete_with_retry(api: &Api<Pod>, name: &str) -> Result<(), kube::Error> {
    let mut attempt = 0;
    loop {
        match api.delete(name, &DeleteParams::default()).await {
            Ok(_) => return Ok(()),
            Err(kube::Error::Api(e)) if e.code == 404 => return Ok(()),
            Err(_) if attempt < 9 => {
                attempt += 1;
                tokio::time::sleep(Duration::from_millis(100 * attempt)).await;
            }
            Err(e) => return Err(e),
        }
    }
}

/// Creates `pod`, retrying transport errors; a Pod that already exists
/// counts as created.
async fn create_pod_with_retry(api: &Api<Pod>, pod: &Pod) -> Result<(), kube::Error> {
    let mut attempt = 0;
    loop {
        match api.create(&PostParams::default(), pod).await {
            Ok(_) => return Ok(()),
            Err(kube::Error::Api(e)) if e.code == 409 => return Ok(()),
            Err(_) if attempt < 9 => {
                attempt += 1;
                tokio::time::sleep(Duration::from_millis(100 * attempt)).await;
            }
            Err(e) => return Err(e),
        }
    }
}

/// The churn: `rate` times a second, delete the Pod of the next index and
/// create its successor (each call retried on transport errors, which an
/// overloaded apiserver produces). Returns (cycles started, retries
/// exhausted).
async fn churn(pods: &Api<Pod>, generations: &mut [u32], nodes: usize, c: &Churn) -> (usize, u64) {
    let errors = Arc::new(AtomicU64::new(0));
    let cycles = (c.rate * c.secs) as usize;
    let mut tick = tokio::time::interval(Duration::from_micros(1_000_000 / c.rate.max(1)));
    let mut tasks = Vec::with_capacity(cycles);
    for k in 0..cycles {
        tick.tick().await;
        let i = k % generations.len();
        let old = pod_name(i, generations[i]);
        generations[i] += 1;
        let new = pod(i, generations[i], nodes);
        let api = pods.clone();
        let errors = errors.clone();
        tasks.push(tokio::spawn(async move {
            let (deleted, created) = tokio::join!(
                delete_with_retry(&api, &old),
                create_pod_with_retry(&api, &new)
            );
            if let Err(e) = deleted.and(created)
                && errors.fetch_add(1, Ordering::Relaxed) < 5
            {
                eprintln!("bench-scale: churn {old}: {e} (after 10 attempts)");
            }
        }));
    }
    for t in tasks {
        let _ = t.await;
    }
    (cycles, errors.load(Ordering::Relaxed))
}

/// With `SCALE_PERF_DIR` set, `perf record -g` of the peer from the start
/// of its churn until it is quiet again (a profile of the per-event work),
/// into `<dir>/<label>-<pid>.data`; its CPU is the profiler's, not the
/// peer's, so the run's figures still hold.
fn profile_churn(peer: &Peer, pid: u32) -> Option<std::process::Child> {
    let dir = std::env::var("SCALE_PERF_DIR").ok()?;
    let name: String = peer
        .label
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    let out = format!("{dir}/{name}-{pid}.data");
    std::process::Command::new("perf")
        .args([
            "record",
            "-g",
            "-F",
            "999",
            "-p",
            &pid.to_string(),
            "-o",
            &out,
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| eprintln!("bench-scale: perf record: {e}"))
        .ok()
}

#[allow(clippy::too_many_arguments)]
async fn measured_run(
    peer: &Peer,
    kubeconfig: &str,
    pods: &Api<Pod>,
    generations: &mut [u32],
    n: usize,
    nodes: usize,
    workers: usize,
    c: &Churn,
) -> Option<Sample> {
    let run = Running::spawn(peer, kubeconfig, workers, n as u64);
    let sync_timeout = Duration::from_secs(120 + n as u64 / 20);
    let ok = run
        .wait_for("the initial reconciles", sync_timeout, |r| {
            r.synced_at.is_some() && r.reconciled_at.is_some()
        })
        .await;
    if !ok {
        run.stop().await;
        return None;
    }
    let r = run.report();
    let t0 = run.started_ns;
    let cache_synced_s = (r.synced_at.unwrap_or(0) - t0) as f64 / 1e9;
    let reconciled_s = (r.reconciled_at.unwrap_or(0) - t0) as f64 / 1e9;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let rss_sync_mib = status_kib(Pid::Of(run.pid), "VmRSS") / 1024.0;

    let perf = profile_churn(peer, run.pid);
    let cpu0 = cpu_secs(Pid::Of(run.pid));
    let events0 = run.report().events;
    let churn_start = Instant::now();
    let (cycles, errors) = churn(pods, generations, nodes, c).await;
    let sent_s = churn_start.elapsed().as_secs_f64();
    let settled = wait_pods_settled(pods, n, Duration::from_secs(120)).await;
    let quiet = run
        .wait_for("the churn's events", Duration::from_secs(120), |r| {
            now_ns() - r.events_changed_at > 1_000_000_000
        })
        .await;
    let cpu1 = cpu_secs(Pid::Of(run.pid));
    if let Some(mut perf) = perf {
        // SIGINT: perf writes its data and exits
        let _ = std::process::Command::new("kill")
            .args(["-INT", &perf.id().to_string()])
            .status();
        let _ = perf.wait();
    }
    let r = run.report();
    let peak_rss_mib = status_kib(Pid::Of(run.pid), "VmHWM") / 1024.0;
    run.stop().await;
    let churn_events = (r.events - events0) as f64;
    eprintln!(
        "bench-scale:   {}: {cycles} delete+create cycles sent in {sent_s:.1} s ({errors} errors), \
         {churn_events} events seen ({:.2} per cycle), settled in {:.1} s, reconciles {} (ready {}, gone {})",
        peer.label,
        churn_events / cycles.max(1) as f64,
        churn_start.elapsed().as_secs_f64(),
        r.reconciles,
        r.ready,
        r.gone
    );
    if !quiet {
        return None;
    }
    if !settled {
        // The events were counted all the same; the next run starts from
        // the Pods there are (the table says how many runs were clean).
        eprintln!(
            "bench-scale:   {}: the cluster did not get back to {n} Running Pods; \
             CPU per event still counts every event the peer saw",
            peer.label
        );
    }
    Some(Sample {
        cache_synced_s,
        reconciled_s,
        rss_sync_mib,
        peak_rss_mib,
        churn_events,
        churn_cpu_s: cpu1 - cpu0,
        cpu_per_event_us: (cpu1 - cpu0) / churn_events.max(1.0) * 1e6,
    })
}

async fn start_kwok(path: &str, config: &str, kubeconfig: &str) -> tokio::process::Child {
    let log = std::env::temp_dir().join(format!("bench-scale-kwok-{}.log", std::process::id()));
    let file = std::fs::File::create(&log).expect("kwok log file");
    eprintln!("bench-scale: starting kwok (log: {})", log.display());
    tokio::process::Command::new(path)
        .args([
            "--kubeconfig",
            kubeconfig,
            "--config",
            config,
            "--manage-all-nodes=true",
            // Its default logs one JSON line per Pod patch: at 100k Pods
            // that is most of kwok's CPU and ~60 MB of log.
            "--v=WARN",
        ])
        .stdout(Stdio::null())
        .stderr(file)
        .kill_on_drop(true)
        .spawn()
        .unwrap_or_else(|e| panic!("starting kwok {path}: {e}"))
}

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let peers = peers(&args);
    let kwok = arg(&args, "--kwok").expect("--kwok PATH (tests/peers/scale/build-kwok.sh)");
    let kwok_config = arg(&args, "--kwok-config").expect("--kwok-config PATH");
    let n: usize = parsed(&args, "--pods", 10_000);
    let nodes: usize = parsed(&args, "--nodes", 20);
    let reps: usize = parsed(&args, "--reps", 3);
    let workers: usize = parsed(&args, "--workers", 4);
    let c = Churn {
        rate: parsed(&args, "--churn", 20),
        secs: parsed(&args, "--churn-secs", 20),
    };
    assert!(
        n > 0 && nodes > 0 && c.rate > 0,
        "--pods, --nodes and --churn must be > 0"
    );

    eprintln!("bench-scale: starting a control plane");
    let cp = ControlPlane::start().await.expect("control plane");
    let client = cp.client().expect("client");
    let kubeconfig = cp.kubeconfig_path().display().to_string();
    let version = client
        .apiserver_version()
        .await
        .expect("version")
        .git_version;
    let mut kwok_child = start_kwok(&kwok, &kwok_config, &kubeconfig).await;

    let nss: Api<Namespace> = Api::all(client.clone());
    let ns: Namespace =
        serde_json::from_value(serde_json::json!({"metadata": {"name": NAMESPACE}}))
            .expect("namespace");
    create_with_retry(&nss, &ns, NAMESPACE).await;
    let node_api: Api<Node> = Api::all(client.clone());
    for k in 0..nodes {
        let node = Node {
            metadata: ObjectMeta {
                name: Some(node_name(k)),
                labels: Some(
                    [
                        ("type".to_string(), "kwok".to_string()),
                        ("kubernetes.io/hostname".to_string(), node_name(k)),
                    ]
                    .into(),
                ),
                ..Default::default()
            },
            ..Default::default()
        };
        create_with_retry(&node_api, &node, &node_name(k)).await;
    }
    let t = Instant::now();
    loop {
        let list = node_api.list(&ListParams::default()).await.expect("nodes");
        let ready = list
            .items
            .iter()
            .filter(|n| n.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running"))
            .count();
        if ready == nodes {
            break;
        }
        if let Ok(Some(status)) = kwok_child.try_wait() {
            panic!("kwok exited ({status}); see its log");
        }
        assert!(
            t.elapsed() < Duration::from_secs(120),
            "kwok did not mark the Nodes ready within 120 s ({ready} of {nodes}); see its log"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    eprintln!(
        "bench-scale: {nodes} kwok Nodes ready after {:?}",
        t.elapsed()
    );

    // 1. baseline: RSS with no Pods.
    let mut rss0: Vec<Vec<f64>> = vec![Vec::new(); peers.len()];
    for r in 0..reps {
        for k in 0..peers.len() {
            let p = (k + r) % peers.len();
            let run = Running::spawn(&peers[p], &kubeconfig, workers, 0);
            if run
                .wait_for("the empty Pod cache", Duration::from_secs(60), |r| {
                    r.synced_at.is_some()
                })
                .await
            {
                tokio::time::sleep(Duration::from_secs(2)).await;
                let kib = status_kib(Pid::Of(run.pid), "VmRSS");
                eprintln!(
                    "bench-scale: 0 Pods: {} rep {r}: RSS {:.1} MiB",
                    peers[p].label,
                    kib / 1024.0
                );
                rss0[p].push(kib / 1024.0);
            }
            run.stop().await;
        }
    }

    // 2. populate.
    let pods: Api<Pod> = Api::namespaced(client.clone(), NAMESPACE);
    let t = Instant::now();
    futures::stream::iter(0..n)
        .for_each_concurrent(32, |i| {
            let pods = pods.clone();
            async move { create_with_retry(&pods, &pod(i, 0, nodes), &pod_name(i, 0)).await }
        })
        .await;
    let created = t.elapsed();
    assert!(
        wait_pods_settled(&pods, n, Duration::from_secs(600)).await,
        "kwok did not mark the Pods Running; see its log"
    );
    eprintln!(
        "bench-scale: created {n} Pods in {created:?}; all Running and Ready after {:?}",
        t.elapsed()
    );
    let mut generations = vec![0u32; n];

    // kwok keeps writing Pod statuses for a minute or two after they all
    // report Running (a second status write for many of them); one
    // unmeasured run absorbs that, so every measured churn sees the same
    // ~5 events per cycle.
    eprintln!(
        "bench-scale: warm-up run ({}), not measured: absorbs kwok's late status writes",
        peers[0].label
    );
    let _ = measured_run(
        &peers[0],
        &kubeconfig,
        &pods,
        &mut generations,
        n,
        nodes,
        workers,
        &c,
    )
    .await;

    // 3. measured runs.
    let mut samples: Vec<Vec<Sample>> = vec![Vec::new(); peers.len()];
    for r in 0..reps {
        for k in 0..peers.len() {
            let p = (k + r) % peers.len();
            match measured_run(
                &peers[p],
                &kubeconfig,
                &pods,
                &mut generations,
                n,
                nodes,
                workers,
                &c,
            )
            .await
            {
                Some(s) => {
                    eprintln!(
                        "  {:<28} rep {r}: cache synced {:>6.2} s, {n} reconciled {:>6.2} s, RSS {:>6.1} MiB \
                         (peak {:>6.1}), churn {:>6.0} events, cpu {:>5.2} s, {:>6.1} µs/event",
                        peers[p].label,
                        s.cache_synced_s,
                        s.reconciled_s,
                        s.rss_sync_mib,
                        s.peak_rss_mib,
                        s.churn_events,
                        s.churn_cpu_s,
                        s.cpu_per_event_us
                    );
                    samples[p].push(s);
                }
                None => eprintln!("  {:<28} rep {r}: FAILED (see above)", peers[p].label),
            }
        }
    }
    let _ = kwok_child.kill().await;
    cp.stop();

    struct Row {
        runs: usize,
        rss0: f64,
        s: Sample,
        kib_per_pod: f64,
    }
    let rows: Vec<Row> = samples
        .iter()
        .zip(&rss0)
        .map(|(v, r0)| {
            let m = |f: fn(&Sample) -> f64| median(v.iter().map(f).collect());
            let rss0 = median(r0.clone());
            let per_pod: Vec<f64> = v
                .iter()
                .map(|s| (s.rss_sync_mib - rss0) * 1024.0 / n as f64)
                .collect();
            Row {
                runs: v.len(),
                rss0,
                s: Sample {
                    cache_synced_s: m(|s| s.cache_synced_s),
                    reconciled_s: m(|s| s.reconciled_s),
                    rss_sync_mib: m(|s| s.rss_sync_mib),
                    peak_rss_mib: m(|s| s.peak_rss_mib),
                    churn_events: m(|s| s.churn_events),
                    churn_cpu_s: m(|s| s.churn_cpu_s),
                    cpu_per_event_us: m(|s| s.cpu_per_event_us),
                },
                kib_per_pod: median(per_pod),
            }
        })
        .collect();
    let base = peers
        .iter()
        .position(|p| p.label == "controller-runtime")
        .unwrap_or(0);
    let b = &rows[base];

    println!(
        "Scale: {n} Pods on {nodes} kwok Nodes, kube-apiserver {version}; the same controller per peer \
         (every Pod cluster-wide -> read it from the cache, tally Running+Ready; no writes), {workers} \
         workers each; churn = {} delete+create cycles/s for {} s; median of {reps} interleaved runs, \
         each peer its own process. Ratios are peer ÷ controller-runtime (below 1: the peer uses less).",
        c.rate, c.secs
    );
    println!();
    println!(
        "| peer | runs | time to reconcile {n} (s) | × c-r | cache synced (s) | RSS, 0 Pods (MiB) | RSS after sync (MiB) | × c-r | KiB per Pod | × c-r | peak RSS (MiB) | × c-r | churn events | CPU in churn (s) | CPU per event (µs) | × c-r |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for (p, row) in peers.iter().zip(&rows) {
        let s = row.s;
        println!(
            "| {} | {} | {:.2} | {:.2} | {:.2} | {:.1} | {:.1} | {:.2} | {:.2} | {:.2} | {:.1} | {:.2} | {:.0} | {:.2} | {:.1} | {:.2} |",
            p.label,
            row.runs,
            s.reconciled_s,
            s.reconciled_s / b.s.reconciled_s,
            s.cache_synced_s,
            row.rss0,
            s.rss_sync_mib,
            s.rss_sync_mib / b.s.rss_sync_mib,
            row.kib_per_pod,
            row.kib_per_pod / b.kib_per_pod,
            s.peak_rss_mib,
            s.peak_rss_mib / b.s.peak_rss_mib,
            s.churn_events,
            s.churn_cpu_s,
            s.cpu_per_event_us,
            s.cpu_per_event_us / b.s.cpu_per_event_us,
        );
    }
}
