//! `bench-informer --go-peer PATH [--sizes 10000,50000] [--runs 3]
//! [--kinds configmaps,pods]`
//!
//! Starts a real control plane (`opkit_envtest`), creates N objects of
//! each kind in a namespace per kind and size (ConfigMaps with ~1 KiB of
//! data; Pods in `bench-scale`'s shape, Running as kwok marks them: the
//! shapes of `tests/peers/memory-model`), then runs every peer as its own
//! process against the same control plane, `runs` times each in rotating
//! order, and prints Markdown tables of the medians: initial sync time
//! (× the raw paginated LIST floor) and process RSS after sync (×
//! client-go), then opkit ÷ its Go peer doing the same work: whole objects
//! (managedFields kept) ÷ client-go, managedFields stripped ÷ client-go
//! stripping them, the projection ÷ client-go trimming each object to the
//! projection's fields with a `cache.TransformFunc` (issue 39).
//!
//! `--peers opkit,opkit-no-ryow` runs only those peers (by mode, as
//! `informer-peers` names them), beside the raw LIST floor and the three
//! client-go peers, which always run (the ratios need them).

use std::{path::PathBuf, process::Command};

use bench_support::{arg, median};
use opkit_envtest::ControlPlane;

// The objects: the shapes the memory model measures (ConfigMaps of this
// benchmark, Pods of bench-scale).
#[path = "../../../memory-model/src/shapes.rs"]
mod shapes;

struct Peer {
    /// The mode `--peers` names it by.
    id: &'static str,
    label: &'static str,
    cmd: Vec<String>,
}

/// One figure of a sample (sync, CPU or RSS).
type Metric = fn(&Sample) -> f64;

#[derive(Clone, Copy, Default)]
struct Sample {
    sync_ms: f64,
    cpu_ms: f64,
    rss_kib: f64,
}

fn run(peer: &Peer, kubeconfig: &str, kind: &str, ns: &str, expect: usize) -> Sample {
    let out = Command::new(&peer.cmd[0])
        .args(&peer.cmd[1..])
        .args(["--kubeconfig", kubeconfig, "--namespace", ns])
        .args(["--resource", kind])
        .output()
        .unwrap_or_else(|e| panic!("running {}: {e}", peer.cmd[0]));
    if !out.status.success() {
        panic!(
            "{} failed: {}\n{}",
            peer.label,
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let line = String::from_utf8_lossy(&out.stdout);
    let v: serde_json::Value = serde_json::from_str(line.trim().lines().last().unwrap_or(""))
        .unwrap_or_else(|e| panic!("{}: bad output {line:?}: {e}", peer.label));
    let objects = v["objects"].as_u64().unwrap_or(0) as usize;
    assert_eq!(
        objects, expect,
        "{} synced {objects} objects, expected {expect}",
        peer.label
    );
    Sample {
        sync_ms: v["sync_ms"].as_f64().unwrap_or(f64::NAN),
        cpu_ms: v["cpu_ms"].as_f64().unwrap_or(f64::NAN),
        rss_kib: v["rss_kib"].as_f64().unwrap_or(f64::NAN),
    }
}

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let go_peer = arg(&args, "--go-peer").expect("--go-peer PATH");
    let sizes: Vec<usize> = arg(&args, "--sizes")
        .unwrap_or_else(|| "10000,50000".into())
        .split(',')
        .map(|s| s.trim().parse().expect("size"))
        .collect();
    let kinds: Vec<String> = arg(&args, "--kinds")
        .unwrap_or_else(|| "configmaps,pods".into())
        .split(',')
        .map(|k| match k.trim() {
            k @ ("configmaps" | "pods") => k.to_owned(),
            other => panic!("--kinds: configmaps or pods, not {other:?}"),
        })
        .collect();
    let runs: usize = arg(&args, "--runs")
        .and_then(|s| s.parse().ok())
        .unwrap_or(3);
    let me = std::env::current_exe().expect("current exe");
    let rust_peer: PathBuf = me.with_file_name("informer-peers");
    let rp = |mode: &str| vec![rust_peer.display().to_string(), mode.to_string()];
    let all = [
        Peer {
            id: "raw-list",
            label: "raw paginated LIST (floor)",
            cmd: rp("raw-list"),
        },
        Peer {
            id: "opkit",
            label: "opkit informer",
            cmd: rp("opkit"),
        },
        Peer {
            id: "opkit-no-ryow",
            label: "opkit informer, read-your-own-writes off",
            cmd: rp("opkit-no-ryow"),
        },
        Peer {
            id: "opkit-list",
            label: "opkit informer, LIST mode",
            cmd: rp("opkit-list"),
        },
        Peer {
            id: "opkit-keep-mf",
            label: "opkit informer, managedFields kept",
            cmd: rp("opkit-keep-mf"),
        },
        Peer {
            id: "opkit-json",
            label: "opkit informer, JSON",
            cmd: rp("opkit-json"),
        },
        Peer {
            id: "opkit-projected",
            label: "opkit informer, projected (name, labels, 1 key)",
            cmd: rp("opkit-projected"),
        },
        Peer {
            id: "kube-runtime",
            label: "kube-runtime reflector",
            cmd: rp("kube-runtime"),
        },
        Peer {
            id: "client-go-transform",
            label: "client-go informer, trimmed to the projection (TransformFunc)",
            cmd: vec![go_peer.clone(), "-transform".into()],
        },
        Peer {
            id: "client-go-strip-mf",
            label: "client-go informer, managedFields stripped",
            cmd: vec![go_peer.clone(), "-strip-managed-fields".into()],
        },
        Peer {
            id: "client-go",
            label: "client-go informer",
            cmd: vec![go_peer.clone()],
        },
    ];

    // `--peers a,b`: those, beside the floor and the three client-go peers
    // (the ratio columns need them); every peer when absent.
    let chosen: Option<Vec<String>> =
        arg(&args, "--peers").map(|s| s.split(',').map(|p| p.trim().to_owned()).collect());
    if let Some(chosen) = &chosen
        && let Some(unknown) = chosen
            .iter()
            .find(|c| all.iter().all(|p| p.id != c.as_str()))
    {
        panic!(
            "--peers: unknown peer {unknown:?}; known: {}",
            all.iter().map(|p| p.id).collect::<Vec<_>>().join(", ")
        );
    }
    let peers: Vec<Peer> = all
        .into_iter()
        .filter(|p| {
            matches!(
                p.id,
                "raw-list" | "client-go-transform" | "client-go-strip-mf" | "client-go"
            ) || chosen
                .as_ref()
                .is_none_or(|c| c.iter().any(|id| id == p.id))
        })
        .collect();

    eprintln!("bench-informer: starting a control plane");
    let cp = ControlPlane::start().await.expect("control plane");
    let client = cp.client().expect("client");
    let kubeconfig = cp.kubeconfig_path().display().to_string();
    let version = client
        .apiserver_version()
        .await
        .expect("version")
        .git_version;

    let mut rows = Vec::new();
    for kind in &kinds {
        for &size in &sizes {
            let ns = format!("bench-{kind}-{size}");
            let t = std::time::Instant::now();
            match kind.as_str() {
                "pods" => shapes::pods(&client, &ns, size).await,
                _ => shapes::configmaps(&client, &ns, size).await,
            }
            eprintln!("bench-informer: created {size} {kind} in {:?}", t.elapsed());
            if args.iter().any(|a| a == "--hold") {
                continue;
            }
            // warm the apiserver's caches and connections once
            run(&peers[0], &kubeconfig, kind, &ns, size);
            let mut samples: Vec<Vec<Sample>> = vec![Vec::new(); peers.len()];
            for r in 0..runs {
                for k in 0..peers.len() {
                    let i = (k + r) % peers.len();
                    let s = run(&peers[i], &kubeconfig, kind, &ns, size);
                    eprintln!(
                        "  {kind} {size:>6} {:<38} run {r}: sync {:>8.1} ms, cpu {:>7.0} ms, rss {:>8.1} MiB, load {}",
                        peers[i].label,
                        s.sync_ms,
                        s.cpu_ms,
                        s.rss_kib / 1024.0,
                        loadavg()
                    );
                    samples[i].push(s);
                }
            }
            let med: Vec<Sample> = samples
                .iter()
                .map(|v| Sample {
                    sync_ms: median(v.iter().map(|s| s.sync_ms).collect()),
                    cpu_ms: median(v.iter().map(|s| s.cpu_ms).collect()),
                    rss_kib: median(v.iter().map(|s| s.rss_kib).collect()),
                })
                .collect();
            rows.push((kind.as_str(), size, med, samples));
        }
    }

    if args.iter().any(|a| a == "--hold") {
        // for profiling peers by hand: keep the populated control plane up
        println!("kubeconfig: {kubeconfig}");
        tokio::signal::ctrl_c().await.ok();
        return;
    }
    println!(
        "Informer initial sync of ConfigMaps (~1 KiB of data each) and Pods (bench-scale's, Running), \
         one namespace, kube-apiserver {version}; \
         median of {runs} runs, each peer its own process; client CPU = user + system time of the \
         peer process until synced; RSS read 1 s after sync."
    );
    println!();
    println!(
        "| kind | objects | peer | sync (ms) | × raw LIST | client CPU (ms) | RSS after sync (MiB) | × client-go | × client-go, managedFields stripped |"
    );
    println!("|---|---:|---|---:|---:|---:|---:|---:|---:|");
    let position = |id: &str| peers.iter().position(|p| p.id == id);
    let go = position("client-go").expect("client-go always runs");
    let go_strip = position("client-go-strip-mf").expect("client-go always runs");
    for (kind, size, med, _) in &rows {
        for (i, p) in peers.iter().enumerate() {
            println!(
                "| {kind} | {size} | {} | {:.0} | {:.2} | {:.0} | {:.1} | {:.2} | {:.2} |",
                p.label,
                med[i].sync_ms,
                med[i].sync_ms / med[0].sync_ms,
                med[i].cpu_ms,
                med[i].rss_kib / 1024.0,
                med[i].rss_kib / med[go].rss_kib,
                med[i].rss_kib / med[go_strip].rss_kib
            );
        }
    }
    println!();
    // opkit ÷ the Go peer doing the same work (issue 39), medians and the
    // spread of the per-run ratios (runs pair up: the same rotation).
    println!(
        "opkit ÷ client-go doing the same work: ratio of medians (min–max of the {runs} per-run ratios)"
    );
    println!();
    println!("| kind | objects | opkit peer | Go peer | sync × | CPU × | RSS × |");
    println!("|---|---:|---|---|---:|---:|---:|");
    let pairs = [
        ("opkit-keep-mf", "client-go"),
        ("opkit", "client-go-strip-mf"),
        ("opkit-projected", "client-go-transform"),
    ];
    for (kind, size, med, samples) in &rows {
        for (ours, theirs) in pairs {
            let (Some(o), Some(g)) = (position(ours), position(theirs)) else {
                continue;
            };
            let ratio = |f: Metric| {
                let per_run: Vec<f64> = samples[o]
                    .iter()
                    .zip(&samples[g])
                    .map(|(a, b)| f(a) / f(b))
                    .collect();
                let lo = per_run.iter().copied().fold(f64::INFINITY, f64::min);
                let hi = per_run.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                format!("{:.2} ({lo:.2}–{hi:.2})", f(&med[o]) / f(&med[g]))
            };
            println!(
                "| {kind} | {size} | {ours} | {theirs} | {} | {} | {} |",
                ratio(|s| s.sync_ms),
                ratio(|s| s.cpu_ms),
                ratio(|s| s.rss_kib)
            );
        }
    }
    println!();
    let met = |ok: bool| if ok { "met" } else { "MISSED" };
    for (kind, size, med, _) in &rows {
        let by_id = |id: &str| position(id).map(|i| med[i]);
        if let (Some(p), Some(t)) = (by_id("opkit-projected"), by_id("client-go-transform")) {
            println!(
                "targets at {size} {kind} (issue 39, projection vs client-go trimming to the same fields): RSS ≤ 0.5×: {} ({:.2}×); sync ≤: {} ({:.2}×); CPU ≤: {} ({:.2}×)",
                met(p.rss_kib <= 0.5 * t.rss_kib),
                p.rss_kib / t.rss_kib,
                met(p.sync_ms <= t.sync_ms),
                p.sync_ms / t.sync_ms,
                met(p.cpu_ms <= t.cpu_ms),
                p.cpu_ms / t.cpu_ms,
            );
        }
    }
    for (kind, size, med, _) in &rows {
        let by_id = |id: &str| peers.iter().position(|p| p.id == id).map(|i| med[i]);
        let g = by_id("client-go").expect("client-go always runs");
        let Some(o) = by_id("opkit") else { continue };
        let kr = by_id("kube-runtime");
        println!(
            "targets at {size} {kind} (issue 13): sync ≤ client-go: {} ({:.2}×); client CPU ≤ client-go: {} ({:.2}×); RSS ≤ 0.5× client-go: {} ({:.2}×){}",
            met(o.sync_ms <= g.sync_ms),
            o.sync_ms / g.sync_ms,
            met(o.cpu_ms <= g.cpu_ms),
            o.cpu_ms / g.cpu_ms,
            met(o.rss_kib <= 0.5 * g.rss_kib),
            o.rss_kib / g.rss_kib,
            kr.map(|kr| format!(
                "; RSS below kube-runtime: {} ({:.1} vs {:.1} MiB)",
                met(o.rss_kib < kr.rss_kib),
                o.rss_kib / 1024.0,
                kr.rss_kib / 1024.0
            ))
            .unwrap_or_default(),
        );
    }
    for (kind, size, med, _) in &rows {
        let by_id = |id: &str| peers.iter().position(|p| p.id == id).map(|i| med[i]);
        let g = by_id("client-go-strip-mf").expect("client-go always runs");
        let Some(o) = by_id("opkit") else { continue };
        let mut line = format!(
            "targets at {size} {kind} (issue 27, vs client-go with managedFields stripped): whole objects RSS ≤ 0.9×: {} ({:.2}×); sync ≤: whole {} ({:.2}×); CPU ≤: whole {} ({:.2}×)",
            met(o.rss_kib <= 0.9 * g.rss_kib),
            o.rss_kib / g.rss_kib,
            met(o.sync_ms <= g.sync_ms),
            o.sync_ms / g.sync_ms,
            met(o.cpu_ms <= g.cpu_ms),
            o.cpu_ms / g.cpu_ms,
        );
        if let Some(p) = by_id("opkit-projected") {
            line.push_str(&format!(
                "; projected RSS ≤ 0.3×: {} ({:.2}×), sync {} ({:.2}×), CPU {} ({:.2}×)",
                met(p.rss_kib <= 0.3 * g.rss_kib),
                p.rss_kib / g.rss_kib,
                met(p.sync_ms <= g.sync_ms),
                p.sync_ms / g.sync_ms,
                met(p.cpu_ms <= g.cpu_ms),
                p.cpu_ms / g.cpu_ms,
            ));
        }
        println!("{line}");
    }
    // What read-your-own-writes costs the informer (issue 27): opkit with
    // it on (the default) against the same informer with it off, and how
    // far each peer's own runs spread, to tell a cost from noise.
    for (kind, size, med, samples) in &rows {
        let idx = |id: &str| peers.iter().position(|p| p.id == id);
        let (Some(on), Some(off)) = (idx("opkit"), idx("opkit-no-ryow")) else {
            continue;
        };
        let spread = |i: usize, f: Metric| {
            let v: Vec<f64> = samples[i].iter().map(f).collect();
            let lo = v.iter().copied().fold(f64::INFINITY, f64::min);
            let hi = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            (lo, hi, (hi - lo) / median(v.clone()))
        };
        let paired = |f: Metric| {
            median(
                samples[on]
                    .iter()
                    .zip(&samples[off])
                    .map(|(a, b)| f(a) / f(b))
                    .collect(),
            )
        };
        let metrics: [(&str, Metric); 3] = [
            ("sync (ms)", |s| s.sync_ms),
            ("CPU (ms)", |s| s.cpu_ms),
            ("RSS (KiB)", |s| s.rss_kib),
        ];
        let parts: Vec<String> = metrics
            .iter()
            .map(|(name, f)| {
                let (lo_on, hi_on, rel_on) = spread(on, *f);
                let (lo_off, hi_off, rel_off) = spread(off, *f);
                format!(
                    "{name} {:.3}× of medians, {:.3}× median of per-run ratios (on {lo_on:.1}–{hi_on:.1}, spread {:.0} %; off {lo_off:.1}–{hi_off:.1}, spread {:.0} %)",
                    f(&med[on]) / f(&med[off]),
                    paired(*f),
                    rel_on * 100.0,
                    rel_off * 100.0,
                )
            })
            .collect();
        println!(
            "read-your-own-writes at {size} {kind}, opkit ÷ opkit-no-ryow: {}",
            parts.join("; ")
        );
    }
    cp.stop();
}

/// The load average (1, 5, 15 min), for the log of each run.
fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}
