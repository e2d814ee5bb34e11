//! `managed-fields [--copies 10000] [--go PATH] [--out DIR]`
//!
//! What `managedFields` costs a cache per object, kept the way k8s-openapi
//! decodes it (a `serde_json::Value` tree per `fieldsV1`) against kept as
//! raw JSON bytes (the compact form Go's `metav1.FieldsV1{Raw []byte}`
//! holds), for the two objects of opkit's benchmarks: the informer
//! benchmark's ConfigMap (~1 KiB of data, written by one manager) and the
//! scale benchmark's Pod (created by one manager, its status written by a
//! second, as kwok does).
//!
//! 1. Starts a real control plane (`opkit_envtest`), creates both objects,
//!    writes the Pod's status under a second field manager (`kwok`), and
//!    reads both back as the apiserver serves them; writes that JSON to
//!    `--out` (default: a temporary directory).
//! 2. Decodes `--copies` copies of each into k8s-openapi's type, holding
//!    them as a cache does (`Arc<K>`), under a counting global allocator:
//!    heap bytes asked for, bytes the allocator handed out
//!    (`malloc_usable_size`, so its slack shows) and allocations, per
//!    object — whole, with `managedFields` stripped after decoding (opkit's
//!    default), stripped plus the entries kept as raw JSON bytes
//!    (`Box<[u8]>`), and as opkit caches it with
//!    `Projected<K, WithManagedFields<K>>` (the raw bytes, plus the
//!    metadata essentials every projection keeps beside the object).
//! 3. With `--go PATH` (tests/peers/scale-controller-runtime/memory), runs
//!    Go's figure for the same JSON: the typed object decoded into
//!    `corev1.ConfigMap` / `corev1.Pod`, heap bytes per object from
//!    `runtime.MemStats` after a GC, with and without `managedFields`.
//!
//! Prints a Markdown table. Run by `tests/peers/bench-managed-fields.sh`.

use std::alloc::{GlobalAlloc, Layout, System};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};

use bench_support::arg;
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::api::{Api, Patch, PatchParams, PostParams};
use opkit::cache::{Projected, WithManagedFields};
use opkit_envtest::ControlPlane;
use serde::de::DeserializeOwned;

/// Counts live heap bytes (asked for and handed out) and allocations.
struct Counting;

static ASKED: AtomicI64 = AtomicI64::new(0);
static USABLE: AtomicI64 = AtomicI64::new(0);
static LIVE: AtomicI64 = AtomicI64::new(0);

unsafe extern "C" {
    fn malloc_usable_size(ptr: *mut std::ffi::c_void) -> usize;
}

fn usable(ptr: *mut u8) -> i64 {
    // SAFETY: `ptr` came from the system allocator (glibc malloc), which
    // `System` is on Linux, and is live.
    unsafe { malloc_usable_size(ptr.cast()) as i64 }
}

// SAFETY: every call is forwarded to `System`; the counters only observe.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded as given.
        let ptr = unsafe { System.alloc(layout) };
        if !ptr.is_null() {
            ASKED.fetch_add(layout.size() as i64, Ordering::Relaxed);
            USABLE.fetch_add(usable(ptr), Ordering::Relaxed);
            LIVE.fetch_add(1, Ordering::Relaxed);
        }
        ptr
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        ASKED.fetch_sub(layout.size() as i64, Ordering::Relaxed);
        USABLE.fetch_sub(usable(ptr), Ordering::Relaxed);
        LIVE.fetch_sub(1, Ordering::Relaxed);
        // SAFETY: forwarded as given.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

#[derive(Clone, Copy)]
struct Counters {
    asked: i64,
    usable: i64,
    live: i64,
}

fn counters() -> Counters {
    Counters {
        asked: ASKED.load(Ordering::Relaxed),
        usable: USABLE.load(Ordering::Relaxed),
        live: LIVE.load(Ordering::Relaxed),
    }
}

/// Bytes asked for, bytes handed out and allocations per object that
/// `hold` keeps alive for `copies` objects.
fn per_object<T>(copies: usize, mut make: impl FnMut() -> T) -> (f64, f64, f64) {
    let mut held = Vec::with_capacity(copies);
    let before = counters();
    for _ in 0..copies {
        held.push(make());
    }
    let after = counters();
    drop(held);
    let n = copies as f64;
    (
        (after.asked - before.asked) as f64 / n,
        (after.usable - before.usable) as f64 / n,
        (after.live - before.live) as f64 / n,
    )
}

/// A row per form of one kind of object: (form, asked, usable, allocations).
fn measure<K>(json: &[u8], copies: usize) -> Vec<(&'static str, (f64, f64, f64))>
where
    K: DeserializeOwned + kube::Resource + Send + Sync + 'static,
    K::DynamicType: 'static,
{
    let decode = || serde_json::from_slice::<K>(json).expect("decodes");
    let whole = per_object(copies, || Arc::new(decode()));
    let stripped = per_object(copies, || {
        let mut k = decode();
        k.meta_mut().managed_fields = None;
        Arc::new(k)
    });
    let compact = per_object(copies, || {
        let mut k = decode();
        let entries = k.meta_mut().managed_fields.take();
        let raw: Box<[u8]> = serde_json::to_vec(&entries)
            .expect("encodes")
            .into_boxed_slice();
        (Arc::new(k), raw)
    });
    let projected = per_object(copies, || {
        Arc::new(Projected::<K, WithManagedFields<K>>::project(decode()))
    });
    vec![
        ("whole (managedFields decoded, k8s-openapi)", whole),
        ("managedFields stripped (opkit's default)", stripped),
        ("stripped + managedFields as raw JSON bytes", compact),
        (
            "opkit `Projected<K, WithManagedFields<K>>` (raw bytes + metadata essentials)",
            projected,
        ),
    ]
}

/// The informer benchmark's ConfigMap shape: one label, ~1 KiB of data
/// and the key its projected peer keeps.
fn config_map() -> ConfigMap {
    let payload: String = (0..1024u32)
        .map(|x| (b'a' + (x.wrapping_mul(2_654_435_761) >> 27) as u8 % 26) as char)
        .collect();
    serde_json::from_value(serde_json::json!({
        "metadata": {"name": "cm-000001", "labels": {"bench": "informer"}},
        "data": {"payload": payload, "shard": "1"},
    }))
    .expect("config map")
}

async fn fixtures(dir: &Path) -> (Vec<u8>, Vec<u8>) {
    let plane = ControlPlane::start().await.expect("control plane");
    let client = plane.client().expect("client");
    let namespaces: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(client.clone());
    let namespace =
        serde_json::from_value(serde_json::json!({"metadata": {"name": scale_peers::NAMESPACE}}))
            .expect("namespace");
    namespaces
        .create(&PostParams::default(), &namespace)
        .await
        .expect("create the namespace");
    let create = PostParams {
        field_manager: Some("bench".into()),
        ..Default::default()
    };
    let config_maps: Api<ConfigMap> = Api::namespaced(client.clone(), scale_peers::NAMESPACE);
    config_maps
        .create(&create, &config_map())
        .await
        .expect("create the ConfigMap");
    let pods: Api<Pod> = Api::namespaced(client.clone(), scale_peers::NAMESPACE);
    let pod = scale_peers::pod(1, 0, 1);
    let name = pod.metadata.name.clone().expect("named");
    pods.create(&create, &pod).await.expect("create the Pod");
    // The status kwok's Stage writes: Running, Ready, an IP, a start time
    // and the container's state.
    let status = serde_json::json!({"status": {
        "phase": "Running",
        "hostIP": "10.0.0.1",
        "podIP": "10.244.0.17",
        "podIPs": [{"ip": "10.244.0.17"}],
        "startTime": "2026-11-26T07:00:00Z",
        "conditions": [
            {"type": "Initialized", "status": "True", "lastTransitionTime": "2026-11-26T07:00:00Z"},
            {"type": "Ready", "status": "True", "lastTransitionTime": "2026-11-26T07:00:01Z"},
            {"type": "ContainersReady", "status": "True", "lastTransitionTime": "2026-11-26T07:00:01Z"},
            {"type": "PodScheduled", "status": "True", "lastTransitionTime": "2026-11-26T07:00:00Z"},
        ],
        "containerStatuses": [{
            "name": "app",
            "image": "registry.example/scale-bench/app:1.4.2",
            "imageID": "",
            "ready": true,
            "started": true,
            "restartCount": 0,
            "state": {"running": {"startedAt": "2026-11-26T07:00:01Z"}},
        }],
    }});
    pods.patch_status(
        &name,
        &PatchParams {
            field_manager: Some("kwok".into()),
            ..Default::default()
        },
        &Patch::Merge(&status),
    )
    .await
    .expect("write the Pod's status as kwok");
    let config_map =
        serde_json::to_vec(&config_maps.get("cm-000001").await.expect("get")).expect("encode");
    let pod = serde_json::to_vec(&pods.get(&name).await.expect("get")).expect("encode");
    std::fs::write(dir.join("configmap.json"), &config_map).expect("write");
    std::fs::write(dir.join("pod.json"), &pod).expect("write");
    (config_map, pod)
}

fn managed_fields_bytes<K: DeserializeOwned + kube::Resource>(json: &[u8]) -> (usize, usize) {
    let k: K = serde_json::from_slice(json).expect("decodes");
    let entries = k.meta().managed_fields.clone().unwrap_or_default();
    let raw = serde_json::to_vec(&entries).expect("encodes").len();
    (entries.len(), raw)
}

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let copies: usize = arg(&args, "--copies")
        .map(|c| c.parse().expect("--copies is a number"))
        .unwrap_or(10_000);
    let tmp = tempfile_dir();
    let out = arg(&args, "--out")
        .map(PathBuf::from)
        .unwrap_or(tmp.clone());
    std::fs::create_dir_all(&out).expect("--out");
    let (config_map, pod) = fixtures(&out).await;

    let (cm_entries, cm_raw) = managed_fields_bytes::<ConfigMap>(&config_map);
    let (pod_entries, pod_raw) = managed_fields_bytes::<Pod>(&pod);
    println!(
        "JSON as served: ConfigMap {} B ({cm_entries} managedFields entries, {cm_raw} B of them), \
         Pod {} B ({pod_entries} entries, {pod_raw} B); {copies} copies each",
        config_map.len(),
        pod.len()
    );
    println!();
    println!(
        "| object | form | heap bytes asked / object | bytes handed out / object (malloc_usable_size) | allocations / object |"
    );
    println!("|---|---|---:|---:|---:|");
    let rows = measure::<ConfigMap>(&config_map, copies)
        .into_iter()
        .map(|r| ("ConfigMap", r))
        .chain(measure::<Pod>(&pod, copies).into_iter().map(|r| ("Pod", r)));
    for (object, (form, (asked, usable, allocations))) in rows {
        println!("| {object} | Rust: {form} | {asked:.0} | {usable:.0} | {allocations:.1} |");
    }
    if let Some(go) = arg(&args, "--go") {
        let output = std::process::Command::new(go)
            .arg("--copies")
            .arg(copies.to_string())
            .arg(out.join("configmap.json"))
            .arg(out.join("pod.json"))
            .output()
            .expect("run the Go measurer");
        assert!(
            output.status.success(),
            "the Go measurer failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        print!("{}", String::from_utf8_lossy(&output.stdout));
    }
    if out == tmp {
        let _ = std::fs::remove_dir_all(&tmp);
    }
}

fn tempfile_dir() -> PathBuf {
    std::env::temp_dir().join(format!("opkit-managed-fields-{}", std::process::id()))
}
