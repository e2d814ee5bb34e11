//! `bench_multicluster --go-peer PATH --opkit-peer PATH [--objects 1000]
//! [--rounds 1,10,50,50] [--runs 1] [--trim-engaged]`: the driver of
//! `make bench-multicluster-peers` (tests/peers/bench-multicluster-peers.sh).
//!
//! What an engaged cluster costs, opkit's multicluster `Fleet` beside
//! sigs.k8s.io/multicluster-runtime: starts one control plane
//! (`opkit_envtest`), creates `objects` small ConfigMaps in one namespace,
//! then runs each peer as its own process against it: the opkit peer
//! (`opkit_fleet_peer`), the multicluster-runtime peer with
//! controller-runtime's default cache, and the same with managedFields
//! stripped from cached objects (as opkit's cache does by default). Each
//! peer engages N clusters per round (every one a client of its own to the
//! same control plane, with its own cache of the ConfigMaps), waits until
//! all N × objects were reconciled, and removes them all again; see the
//! peers' docs for what they measure. `runs` times each peer, the order
//! rotating per run; the tables show medians per round.
//!
//! Prints Markdown: one table per peer, then opkit ÷ each Go peer per round
//! (engage time, memory per engaged cluster, CPU per event, RSS after
//! disengaging every cluster once the allocator gave back what it could:
//! glibc's `malloc_trim(0)` against Go's `debug.FreeOSMemory()`).
//! `--trim-engaged` has the peers also read the engaged RSS after that,
//! and adds the memory per engaged cluster so measured to the tables
//! (what the clusters hold live, without what the allocator kept).

use std::process::{Command, Stdio};

use bench_support::{arg, median, parsed};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{Api, ObjectMeta, PostParams};
use opkit_envtest::ControlPlane;
use serde::Deserialize;

const NS: &str = "bench-multicluster";

/// One round of a peer's output (the JSON line it prints).
#[derive(Clone, Copy, Deserialize)]
struct Round {
    n: usize,
    engage_s: f64,
    rss_baseline_mib: f64,
    rss_engaged_mib: f64,
    #[serde(default)]
    rss_engaged_trim_mib: Option<f64>,
    cpu_s: f64,
    events: usize,
    rss_after_mib: f64,
    rss_after_trim_mib: f64,
    tasks: f64,
    tasks_after: f64,
    sockets: f64,
    sockets_after: f64,
    tasks_baseline: f64,
    sockets_baseline: f64,
}

impl Round {
    /// RSS over the baseline per engaged cluster, MiB.
    fn per_cluster_mib(&self) -> f64 {
        (self.rss_engaged_mib - self.rss_baseline_mib) / self.n as f64
    }

    /// RSS over the baseline per engaged cluster once the allocator gave
    /// back what it could (`--trim-engaged`), MiB; NaN without it.
    fn per_cluster_trim_mib(&self) -> f64 {
        self.rss_engaged_trim_mib
            .map_or(f64::NAN, |t| (t - self.rss_baseline_mib) / self.n as f64)
    }

    /// CPU time per reconciled object, µs.
    fn cpu_per_event_us(&self) -> f64 {
        self.cpu_s / self.events as f64 * 1e6
    }
}

/// One figure of a round.
type Metric = fn(&Round) -> f64;

struct Peer {
    label: &'static str,
    cmd: Vec<String>,
}

/// Runs `peer` once; its rounds.
fn run(peer: &Peer, kubeconfig: &str, objects: usize, rounds: &str, trim: bool) -> Vec<Round> {
    let out = Command::new(&peer.cmd[0])
        .args(&peer.cmd[1..])
        .args(trim.then_some("--trim-engaged"))
        .args(["--kubeconfig", kubeconfig, "--namespace", NS])
        .args(["--objects", &objects.to_string(), "--rounds", rounds])
        .stderr(Stdio::inherit())
        .output()
        .unwrap_or_else(|e| panic!("running {}: {e}", peer.cmd[0]));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{} failed: {}; its output: {stdout}",
        peer.label,
        out.status
    );
    stdout
        .lines()
        .filter(|l| l.starts_with('{'))
        .map(|l| {
            serde_json::from_str(l)
                .unwrap_or_else(|e| panic!("{}: bad line {l:?}: {e}", peer.label))
        })
        .collect()
}

/// Creates `count` small ConfigMaps in `ns` (as the opkit tests'
/// `create_config_maps`: `obj-<i>` with one short data key).
async fn create_config_maps(client: &kube::Client, ns: &str, count: usize) {
    Api::<Namespace>::all(client.clone())
        .create(
            &PostParams::default(),
            &Namespace {
                metadata: ObjectMeta {
                    name: Some(ns.to_owned()),
                    ..ObjectMeta::default()
                },
                ..Namespace::default()
            },
        )
        .await
        .unwrap_or_else(|e| panic!("creating namespace {ns}: {e}"));
    let api = Api::<ConfigMap>::namespaced(client.clone(), ns);
    let names: Vec<usize> = (0..count).collect();
    for chunk in names.chunks(100) {
        futures::future::join_all(chunk.iter().map(|i| {
            let cm = ConfigMap {
                metadata: ObjectMeta {
                    name: Some(format!("obj-{i}")),
                    ..ObjectMeta::default()
                },
                data: Some([("k".to_owned(), format!("value {i}"))].into()),
                ..ConfigMap::default()
            };
            let api = api.clone();
            async move {
                api.create(&PostParams::default(), &cm)
                    .await
                    .unwrap_or_else(|e| panic!("creating {ns}/obj-{i}: {e}"))
            }
        }))
        .await;
    }
}

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let go_peer = arg(&args, "--go-peer").expect("--go-peer PATH is required");
    let opkit_peer = arg(&args, "--opkit-peer").expect("--opkit-peer PATH is required");
    let objects: usize = parsed(&args, "--objects", 1000);
    let rounds = arg(&args, "--rounds").unwrap_or_else(|| "1,10,50,50".into());
    let runs: usize = parsed(&args, "--runs", 1);
    let trim = args.iter().any(|a| a == "--trim-engaged");
    let peers = [
        Peer {
            label: "opkit Fleet",
            cmd: vec![opkit_peer],
        },
        Peer {
            label: "multicluster-runtime",
            cmd: vec![go_peer.clone()],
        },
        Peer {
            label: "multicluster-runtime, managedFields stripped",
            cmd: vec![go_peer, "--strip-managed-fields".into()],
        },
    ];

    eprintln!("bench-multicluster-peers: starting a control plane");
    let cp = ControlPlane::start()
        .await
        .expect("starting the control plane");
    let client = cp.client().expect("a client for the control plane");
    let kubeconfig = cp.kubeconfig_path().display().to_string();
    let version = client
        .apiserver_version()
        .await
        .expect("the apiserver's version")
        .git_version;
    let t = std::time::Instant::now();
    create_config_maps(&client, NS, objects).await;
    eprintln!(
        "bench-multicluster-peers: created {objects} ConfigMaps in {:?}",
        t.elapsed()
    );

    // samples[peer][run][round]
    let mut samples: Vec<Vec<Vec<Round>>> = vec![Vec::new(); peers.len()];
    for r in 0..runs {
        for k in 0..peers.len() {
            let i = (k + r) % peers.len();
            let started = std::time::Instant::now();
            let rounds = run(&peers[i], &kubeconfig, objects, &rounds, trim);
            eprintln!(
                "  {:<46} run {r}: {:.0} s, load {}",
                peers[i].label,
                started.elapsed().as_secs_f64(),
                loadavg()
            );
            for s in &rounds {
                eprintln!(
                    "    N={:<3} engage {:>6.2} s, RSS {:>7.1} MiB ({:.2} MiB/cluster), CPU {:>6.2} s, after {:>6.1} / trimmed {:>6.1} MiB",
                    s.n,
                    s.engage_s,
                    s.rss_engaged_mib,
                    s.per_cluster_mib(),
                    s.cpu_s,
                    s.rss_after_mib,
                    s.rss_after_trim_mib
                );
            }
            samples[i].push(rounds);
        }
    }

    // the median of each figure per round, over the runs
    let med = |p: usize, round: usize, f: Metric| {
        median(
            samples[p]
                .iter()
                .filter_map(|rounds| rounds.get(round))
                .map(f)
                .collect(),
        )
    };
    let n_rounds = samples[0][0].len();
    let ns: Vec<usize> = samples[0][0].iter().map(|s| s.n).collect();

    println!(
        "Engaging N clusters, each with {objects} ConfigMaps: one control plane (kube-apiserver {version}) \
         reached by N clients of their own, each cluster with its own cache; one multicluster controller \
         on ConfigMaps; each peer its own process, {} of {runs} run{}. Engage = from the first add until \
         all N × {objects} reconciled; CPU = user + system time of the peer over that; memory per \
         cluster = (RSS engaged − RSS baseline) / N; after = every cluster removed and its sockets \
         closed; trimmed = after malloc_trim(0) (opkit) / runtime.GC + debug.FreeOSMemory (Go).",
        if runs == 1 { "one" } else { "median" },
        if runs == 1 { "" } else { "s" },
    );
    for (p, peer) in peers.iter().enumerate() {
        println!();
        println!(
            "{} (baseline, running with nothing engaged: RSS {:.1} MiB, {:.0} {}, {:.0} sockets)",
            peer.label,
            med(p, 0, |s| s.rss_baseline_mib),
            med(p, 0, |s| s.tasks_baseline),
            if p == 0 { "tokio tasks" } else { "goroutines" },
            med(p, 0, |s| s.sockets_baseline),
        );
        println!();
        let trim_column = if trim {
            " over baseline per cluster, trimmed MiB |"
        } else {
            ""
        };
        println!(
            "| clusters | engage s | RSS baseline MiB | RSS engaged MiB | over baseline per cluster MiB |{trim_column} CPU s | CPU per event µs | RSS after disengaging all MiB | after trim MiB | tasks engaged | tasks after | sockets engaged | sockets after |"
        );
        println!(
            "|---:|---:|---:|---:|---:|{}---:|---:|---:|---:|---:|---:|---:|---:|",
            if trim { "---:|" } else { "" }
        );
        for (round, n) in ns.iter().enumerate() {
            let m = |f: Metric| med(p, round, f);
            let trimmed = if trim {
                format!(" {:.2} |", m(Round::per_cluster_trim_mib))
            } else {
                String::new()
            };
            println!(
                "| {n} | {:.2} | {:.1} | {:.1} | {:.2} |{trimmed} {:.2} | {:.1} | {:.1} | {:.1} | {:.0} | {:.0} | {:.0} | {:.0} |",
                m(|s| s.engage_s),
                m(|s| s.rss_baseline_mib),
                m(|s| s.rss_engaged_mib),
                m(Round::per_cluster_mib),
                m(|s| s.cpu_s),
                m(Round::cpu_per_event_us),
                m(|s| s.rss_after_mib),
                m(|s| s.rss_after_trim_mib),
                m(|s| s.tasks),
                m(|s| s.tasks_after),
                m(|s| s.sockets),
                m(|s| s.sockets_after),
            );
        }
    }
    println!();
    println!("opkit ÷ multicluster-runtime (ratios of the medians; below 1: opkit is lower)");
    println!();
    println!(
        "| clusters | multicluster-runtime peer | engage time × | memory per engaged cluster × |{} CPU per event × | RSS after disengaging, trimmed × |",
        if trim {
            " memory per engaged cluster, trimmed × |"
        } else {
            ""
        }
    );
    println!(
        "|---:|---|---:|---:|{}---:|---:|",
        if trim { "---:|" } else { "" }
    );
    for (round, n) in ns.iter().enumerate() {
        for (g, go) in peers.iter().enumerate().skip(1) {
            let ratio = |f: Metric| med(0, round, f) / med(g, round, f);
            let trimmed = if trim {
                format!(" {:.2} |", ratio(Round::per_cluster_trim_mib))
            } else {
                String::new()
            };
            println!(
                "| {n} | {} | {:.2} | {:.2} |{trimmed} {:.2} | {:.2} |",
                go.label,
                ratio(|s| s.engage_s),
                ratio(Round::per_cluster_mib),
                ratio(Round::cpu_per_event_us),
                ratio(|s| s.rss_after_trim_mib),
            );
        }
    }
    println!();
    let met = |ok: bool| if ok { "met" } else { "MISSED" };
    let goal: Vec<String> = (0..n_rounds)
        .map(|round| {
            let ratio =
                med(0, round, Round::per_cluster_mib) / med(1, round, Round::per_cluster_mib);
            format!("N={}: {} ({ratio:.2}×)", ns[round], met(ratio <= 0.5))
        })
        .collect();
    println!(
        "goal, memory per engaged cluster ≤ 0.5× multicluster-runtime's: {}",
        goal.join("; ")
    );
    cp.stop();
}

/// The load average (1, 5, 15 min), for the log of each run.
fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}
