//! `memory-model [--objects 10000] [--reps 3] [--kinds configmap,pod]
//! [--go-peer PATH]`: the memory model of BENCHMARKS.md (issue 27): bytes
//! per cached object, by component, for the ConfigMap of `bench-informer`
//! and the Pod of `bench-scale`.
//!
//! Starts a real control plane (`opkit_envtest`), creates `objects`
//! ConfigMaps and `objects` Pods (`shapes`), then runs each measurement
//! (`measure`: the bare k8s-openapi objects, opkit's informer in its
//! variants, a projection) `reps` times as a process of its own under a
//! counting global allocator (`counting`), and the client-go peer
//! (`tests/peers/go-informer -heap`, Go's `runtime.MemStats.HeapAlloc`
//! after a forced GC) for the same objects. Prints the medians as a
//! Markdown table per kind. `memory-model sizes [--go-peer PATH]` prints
//! only the inline sizes of the types (`sizes`), Rust beside Go.

mod counting;
mod measure;
mod shapes;
mod sizes;

use std::{collections::BTreeMap, process::Command};

use bench_support::{arg, median};
use opkit_envtest::ControlPlane;

#[global_allocator]
static ALLOC: counting::Counting = counting::Counting;

/// Runs `cmd` and parses the last line of its stdout as JSON.
fn json_of(cmd: &mut Command, what: &str) -> serde_json::Value {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("running {what}: {e}"));
    if !out.status.success() {
        panic!(
            "{what} failed: {}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let text = String::from_utf8_lossy(&out.stdout);
    serde_json::from_str(text.trim().lines().last().unwrap_or(""))
        .unwrap_or_else(|e| panic!("{what}: bad output {text:?}: {e}"))
}

/// The medians of the numeric fields of `reps` runs.
fn medians(runs: &[serde_json::Value]) -> BTreeMap<String, f64> {
    let mut fields: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    for run in runs {
        for (k, v) in run.as_object().into_iter().flatten() {
            if let Some(x) = v.as_f64() {
                fields.entry(k.clone()).or_default().push(x);
            }
        }
    }
    fields.into_iter().map(|(k, v)| (k, median(v))).collect()
}

async fn child(args: &[String]) {
    let mode = args.get(2).expect("measure MODE");
    let kind = arg(args, "--kind").expect("--kind");
    let ns = arg(args, "--namespace").expect("--namespace");
    let objects: usize = arg(args, "--objects")
        .and_then(|s| s.parse().ok())
        .expect("--objects N");
    let kubeconfig = arg(args, "--kubeconfig").expect("--kubeconfig");
    let kc = kube::config::Kubeconfig::read_from(&kubeconfig).expect("read kubeconfig");
    let config = kube::Config::from_custom_kubeconfig(kc, &Default::default())
        .await
        .expect("kubeconfig");
    let client = kube::Client::try_from(config).expect("client");
    measure::run(mode, &kind, client, &ns, objects).await;
}

const MODES: [(&str, &str); 6] = [
    (
        "bare",
        "k8s-openapi objects, LISTed (JSON) and kept in a `Vec<K>`",
    ),
    (
        "bare-exact",
        "k8s-openapi objects, the same, decoded as opkit decodes JSON (`from_slice_exact`)",
    ),
    ("opkit", "opkit informer (defaults)"),
    ("opkit-no-ryow", "opkit informer, read-your-own-writes off"),
    ("opkit-json", "opkit informer, JSON"),
    ("opkit-projected", "opkit informer, projected"),
];

/// The mode opkit's own overhead is measured against (the `−` columns).
const OVERHEAD_BASE: &str = "bare-exact";

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("measure") {
        return child(&args).await;
    }
    if args.get(1).map(String::as_str) == Some("sizes") {
        return print_sizes(arg(&args, "--go-peer").as_deref());
    }
    let objects: usize = arg(&args, "--objects")
        .and_then(|s| s.parse().ok())
        .unwrap_or(10_000);
    let reps: usize = arg(&args, "--reps")
        .and_then(|s| s.parse().ok())
        .unwrap_or(3);
    let kinds: Vec<String> = arg(&args, "--kinds")
        .unwrap_or_else(|| "configmap,pod".into())
        .split(',')
        .map(str::to_owned)
        .collect();
    let go_peer = arg(&args, "--go-peer");
    let me = std::env::current_exe().expect("current exe");
    print_sizes(go_peer.as_deref());

    eprintln!("memory-model: starting a control plane");
    let cp = ControlPlane::start().await.expect("control plane");
    let client = cp.client().expect("client");
    let kubeconfig = cp.kubeconfig_path().display().to_string();

    for kind in &kinds {
        let ns = format!("mem-{kind}");
        let t = std::time::Instant::now();
        match kind.as_str() {
            "configmap" => shapes::configmaps(&client, &ns, objects).await,
            "pod" => shapes::pods(&client, &ns, objects).await,
            other => panic!("unknown kind {other:?}"),
        }
        eprintln!(
            "memory-model: created {objects} {kind}s in {:?}",
            t.elapsed()
        );
        let mut rows: Vec<(&str, BTreeMap<String, f64>)> = Vec::new();
        for (mode, label) in MODES {
            let runs: Vec<serde_json::Value> = (0..reps)
                .map(|_| {
                    json_of(
                        Command::new(&me).args([
                            "measure",
                            mode,
                            "--kind",
                            kind.as_str(),
                            "--kubeconfig",
                            kubeconfig.as_str(),
                            "--namespace",
                            ns.as_str(),
                            "--objects",
                            objects.to_string().as_str(),
                        ]),
                        mode,
                    )
                })
                .collect();
            for r in &runs {
                eprintln!("  {kind} {mode}: {r}");
            }
            rows.push((label, medians(&runs)));
        }
        let mut go_rows: Vec<(&str, BTreeMap<String, f64>)> = Vec::new();
        if let Some(go) = &go_peer {
            let resource = if kind == "pod" { "pods" } else { "configmaps" };
            let go_run = |ns: &str, bare: bool| {
                let mut cmd = Command::new(go);
                cmd.args([
                    "-kubeconfig",
                    kubeconfig.as_str(),
                    "-namespace",
                    ns,
                    "-resource",
                    resource,
                    "-strip-managed-fields",
                    "-heap",
                ]);
                if bare {
                    cmd.arg("-bare");
                }
                json_of(&mut cmd, "go-informer")
            };
            // the Go process with no objects, for its RSS per object
            let empty: Vec<_> = (0..reps).map(|_| go_run("mem-empty", false)).collect();
            let empty_rss = medians(&empty).get("rss_kib").copied().unwrap_or(f64::NAN);
            for (bare, label) in [
                (true, "Go: objects LISTed (protobuf) and kept in slices"),
                (false, "client-go informer, managedFields stripped"),
            ] {
                let runs: Vec<_> = (0..reps).map(|_| go_run(&ns, bare)).collect();
                for r in &runs {
                    eprintln!("  {kind} go {label}: {r}");
                }
                let mut m = medians(&runs);
                let n = m.get("objects").copied().unwrap_or(f64::NAN);
                let rss = m.get("rss_kib").copied().unwrap_or(f64::NAN);
                m.insert("rss_per_object".into(), (rss - empty_rss) * 1024.0 / n);
                go_rows.push((label, m));
            }
        }
        print_table(kind, objects, reps, &rows, &go_rows);
    }
    cp.stop();
}

/// The inline sizes of the types, Rust beside Go.
fn print_sizes(go_peer: Option<&str>) {
    let go = go_peer.map(|go| json_of(Command::new(go).arg("-sizes"), "go-informer -sizes"));
    println!();
    println!("Inline size of one value (`size_of` / Go's `unsafe.Sizeof`), bytes:");
    println!();
    println!("| type | k8s-openapi (Rust) | k8s.io/api (Go) |");
    println!("|---|---:|---:|");
    for (name, size) in sizes::rust_sizes() {
        let g = go
            .as_ref()
            .and_then(|g| g[name].as_u64())
            .map_or_else(|| "?".to_owned(), |g| g.to_string());
        println!("| {name} | {size} | {g} |");
    }
}

fn print_table(
    kind: &str,
    objects: usize,
    reps: usize,
    rows: &[(&str, BTreeMap<String, f64>)],
    go_rows: &[(&str, BTreeMap<String, f64>)],
) {
    let get = |m: &BTreeMap<String, f64>, k: &str| m.get(k).copied().unwrap_or(f64::NAN);
    println!();
    println!(
        "{kind}, {objects} objects, medians of {reps} processes; bytes per object \
         (asked for = the sum of live allocation sizes; malloc chunks = glibc's, with \
         rounding and headers; RSS = the process's resident set added)"
    );
    println!();
    println!(
        "| what is held | size_of | asked for (B) | allocations | malloc chunks (B) | RSS (B) | − bare-exact, asked for (B) | − bare-exact, allocations |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|");
    // opkit's own overhead: against the objects decoded as opkit decodes them
    let base_label = MODES
        .iter()
        .find(|(mode, _)| *mode == OVERHEAD_BASE)
        .map(|(_, label)| *label);
    let empty = BTreeMap::new();
    let bare = rows
        .iter()
        .find(|(label, _)| Some(*label) == base_label)
        .map_or(&empty, |(_, m)| m);
    for (label, m) in rows {
        println!(
            "| {label} | {:.0} | {:.0} | {:.1} | {:.0} | {:.0} | {:.0} | {:.1} |",
            get(m, "size_of"),
            get(m, "bytes_per_object"),
            get(m, "allocs_per_object"),
            get(m, "chunks_per_object"),
            get(m, "rss_per_object"),
            get(m, "bytes_per_object") - get(bare, "bytes_per_object"),
            get(m, "allocs_per_object") - get(bare, "allocs_per_object"),
        );
    }
    if go_rows.is_empty() {
        return;
    }
    println!();
    println!(
        "| Go (HeapAlloc after GC: size-class bytes) | heap (B) | heap objects | RSS (B) | − Go bare, heap (B) |"
    );
    println!("|---|---:|---:|---:|---:|");
    let go_bare = &go_rows[0].1;
    for (label, m) in go_rows {
        println!(
            "| {label} | {:.0} | {:.1} | {:.0} | {:.0} |",
            get(m, "heap_bytes_per_object"),
            get(m, "heap_objects_per_object"),
            get(m, "rss_per_object"),
            get(m, "heap_bytes_per_object") - get(go_bare, "heap_bytes_per_object"),
        );
    }
}
