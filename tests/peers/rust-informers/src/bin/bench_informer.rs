//! `bench-informer --go-peer PATH [--sizes 10000,50000] [--runs 3]`
//!
//! Starts a real control plane (`opkit_envtest`), creates N ConfigMaps with
//! ~1 KiB of data in a namespace per size, then runs every peer as its own
//! process against the same control plane, `runs` times each in rotating
//! order, and prints a Markdown table of the medians: initial sync time
//! (× the raw paginated LIST floor) and process RSS after sync (× client-go).
//!
//! `--peers opkit,opkit-no-ryow` runs only those peers (by mode, as
//! `informer-peers` names them), beside the raw LIST floor and the two
//! client-go peers, which always run (the ratios need them).

use std::{path::PathBuf, process::Command, time::Duration};

use bench_support::{arg, median};
use futures::StreamExt;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{Api, ObjectMeta, PostParams};
use opkit_envtest::ControlPlane;

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

fn payload(i: usize) -> String {
    // ~1 KiB of varied text per object
    let mut x = (i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..1024)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (b'a' + (x % 26) as u8) as char
        })
        .collect()
}

async fn populate(client: &kube::Client, ns: &str, n: usize) {
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
        .for_each_concurrent(64, |i| {
            let api = api.clone();
            async move {
                let cm = ConfigMap {
                    metadata: ObjectMeta {
                        name: Some(format!("cm-{i:06}")),
                        labels: Some([("bench".to_string(), "informer".to_string())].into()),
                        ..Default::default()
                    },
                    data: Some(
                        [
                            ("payload".to_string(), payload(i)),
                            // the one key the projected peer keeps (issue 27)
                            ("shard".to_string(), (i % 16).to_string()),
                        ]
                        .into(),
                    ),
                    ..Default::default()
                };
                for attempt in 0..5 {
                    match api.create(&PostParams::default(), &cm).await {
                        Ok(_) => return,
                        Err(kube::Error::Api(e)) if e.code == 409 => return,
                        Err(e) if attempt < 4 => {
                            eprintln!("create cm-{i:06}: {e}; retrying");
                            tokio::time::sleep(Duration::from_millis(200)).await;
                        }
                        Err(e) => panic!("create cm-{i:06}: {e}"),
                    }
                }
            }
        })
        .await;
}

fn run(peer: &Peer, kubeconfig: &str, ns: &str, expect: usize) -> Sample {
    let out = Command::new(&peer.cmd[0])
        .args(&peer.cmd[1..])
        .args(["--kubeconfig", kubeconfig, "--namespace", ns])
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

    // `--peers a,b`: those, beside the floor and the two client-go peers
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
            matches!(p.id, "raw-list" | "client-go-strip-mf" | "client-go")
                || chosen
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
    for &size in &sizes {
        let ns = format!("bench-{size}");
        let t = std::time::Instant::now();
        populate(&client, &ns, size).await;
        eprintln!(
            "bench-informer: created {size} ConfigMaps in {:?}",
            t.elapsed()
        );
        if args.iter().any(|a| a == "--hold") {
            continue;
        }
        // warm the apiserver's caches and connections once
        run(&peers[0], &kubeconfig, &ns, size);
        let mut samples: Vec<Vec<Sample>> = vec![Vec::new(); peers.len()];
        for r in 0..runs {
            for k in 0..peers.len() {
                let i = (k + r) % peers.len();
                let s = run(&peers[i], &kubeconfig, &ns, size);
                eprintln!(
                    "  {size:>6} {:<38} run {r}: sync {:>8.1} ms, cpu {:>7.0} ms, rss {:>8.1} MiB",
                    peers[i].label,
                    s.sync_ms,
                    s.cpu_ms,
                    s.rss_kib / 1024.0
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
        rows.push((size, med, samples));
    }

    if args.iter().any(|a| a == "--hold") {
        // for profiling peers by hand: keep the populated control plane up
        println!("kubeconfig: {kubeconfig}");
        tokio::signal::ctrl_c().await.ok();
        return;
    }
    println!(
        "Informer initial sync of ConfigMaps (~1 KiB of data each), one namespace, kube-apiserver {version}; \
         median of {runs} runs, each peer its own process; client CPU = user + system time of the \
         peer process until synced; RSS read 1 s after sync."
    );
    println!();
    println!(
        "| objects | peer | sync (ms) | × raw LIST | client CPU (ms) | RSS after sync (MiB) | × client-go | × client-go, managedFields stripped |"
    );
    println!("|---:|---|---:|---:|---:|---:|---:|---:|");
    let go = peers.len() - 1;
    let go_strip = peers.len() - 2;
    for (size, med, _) in &rows {
        for (i, p) in peers.iter().enumerate() {
            println!(
                "| {size} | {} | {:.0} | {:.2} | {:.0} | {:.1} | {:.2} | {:.2} |",
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
    let met = |ok: bool| if ok { "met" } else { "MISSED" };
    for (size, med, _) in &rows {
        let by_id = |id: &str| peers.iter().position(|p| p.id == id).map(|i| med[i]);
        let g = by_id("client-go").expect("client-go always runs");
        let Some(o) = by_id("opkit") else { continue };
        let kr = by_id("kube-runtime");
        println!(
            "targets at {size} (issue 13): sync ≤ client-go: {} ({:.2}×); client CPU ≤ client-go: {} ({:.2}×); RSS ≤ 0.5× client-go: {} ({:.2}×){}",
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
    for (size, med, _) in &rows {
        let by_id = |id: &str| peers.iter().position(|p| p.id == id).map(|i| med[i]);
        let g = by_id("client-go-strip-mf").expect("client-go always runs");
        let Some(o) = by_id("opkit") else { continue };
        let mut line = format!(
            "targets at {size} (issue 27, vs client-go with managedFields stripped): whole objects RSS ≤ 0.9×: {} ({:.2}×); sync ≤: whole {} ({:.2}×); CPU ≤: whole {} ({:.2}×)",
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
    for (size, med, samples) in &rows {
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
            "read-your-own-writes at {size}, opkit ÷ opkit-no-ryow: {}",
            parts.join("; ")
        );
    }
    cp.stop();
}
