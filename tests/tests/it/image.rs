//! `cargo opkit image` against real parts: a tiny real program built as a
//! static binary, packed, pushed to a real registry (distribution), and —
//! with root — pulled by the local cluster's containerd and run in a pod.
//!
//! Needs the registry (`make registry`); the cluster test also needs the
//! node assets (`make cluster-assets`) and root.

use std::path::Path;
use std::time::Duration;

use cargo_opkit::image::{BuiltImage, ImageOptions, PushOptions};
use k8s_openapi::api::core::v1::Pod;
use kube::api::Api;
use opkit_envtest::{Cluster, Registry};
use opkit_tests::{create_namespace, init_tracing, pod_phase, run_to_completion};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// What the tiny program prints: its name, its user and group ids, and
/// whether it can write to /tmp and find its user in /etc/passwd.
const TINY_MAIN: &str = r#"fn main() {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .unwrap_or("?")
            .to_owned()
    };
    let passwd = std::fs::read_to_string("/etc/passwd").unwrap_or_default();
    let user = passwd
        .lines()
        .find(|l| l.split(':').nth(2) == Some(field("Uid:").as_str()))
        .and_then(|l| l.split(':').next())
        .unwrap_or("?");
    let tmp = std::fs::write("/tmp/probe", b"x").is_ok();
    println!("hello from opkit-tiny uid={} gid={} user={user} tmp={tmp}", field("Uid:"), field("Gid:"));
}
"#;

/// Writes the tiny package into `dir`.
fn tiny_project(dir: &Path) {
    std::fs::create_dir_all(dir.join("src")).unwrap();
    std::fs::write(
        dir.join("Cargo.toml"),
        "[package]\nname = \"opkit-tiny\"\nversion = \"0.3.0\"\nedition = \"2024\"\n\
         repository = \"https://example.com/opkit-tiny\"\n\n[workspace]\n",
    )
    .unwrap();
    std::fs::write(dir.join("src/main.rs"), TINY_MAIN).unwrap();
}

/// Builds the tiny program's image in `dir` (its own target directory).
fn build_tiny(dir: &Path) -> BuiltImage {
    tiny_project(dir);
    ImageOptions {
        dir: dir.to_owned(),
        ..ImageOptions::default()
    }
    .build()
    .unwrap()
}

/// `GET path` over HTTP/1.0; the status line and headers, lower-cased.
async fn http_head(address: std::net::SocketAddr, path: &str, accept: &str) -> String {
    let mut stream = tokio::net::TcpStream::connect(address).await.unwrap();
    let request = format!("HEAD {path} HTTP/1.0\r\nHost: {address}\r\nAccept: {accept}\r\n\r\n");
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).await.unwrap();
    response.to_lowercase()
}

/// The same source in two checkouts gives the same image; the registry
/// stores it under the digest `cargo opkit image` printed; pushing twice is
/// harmless; a registry that is gone is a clear error.
#[tokio::test]
async fn image_is_reproducible_and_the_registry_takes_it() {
    init_tracing();
    let first = tempfile::tempdir().unwrap();
    let second = tempfile::tempdir().unwrap();
    let image = tokio::task::spawn_blocking({
        let dir = first.path().to_owned();
        move || build_tiny(&dir)
    })
    .await
    .unwrap();
    let again = tokio::task::spawn_blocking({
        let dir = second.path().join("elsewhere");
        move || build_tiny(&dir)
    })
    .await
    .unwrap();
    assert_eq!(
        image.digest, again.digest,
        "the same source in another directory builds the same image"
    );
    assert!(image.output.join("index.json").is_file());
    println!(
        "tiny image {} size {} bytes (binary {} bytes)",
        image.digest, image.size, image.binary_size
    );

    let registry = Registry::start().await.unwrap();
    let reference = registry.reference("opkit/tiny", "v1");
    let pushed = image
        .push(&reference, PushOptions::default())
        .await
        .unwrap();
    assert_eq!(pushed, image.digest.to_string());
    // Blobs already there: the second push only re-tags.
    image
        .push(&reference, PushOptions::default())
        .await
        .unwrap();
    let head = http_head(
        registry.address(),
        "/v2/opkit/tiny/manifests/v1",
        "application/vnd.oci.image.manifest.v1+json",
    )
    .await;
    assert!(head.starts_with("http/1.0 200"), "{head}");
    assert!(
        head.contains(&format!("docker-content-digest: {}", image.digest)),
        "the registry knows the image by our digest: {head}"
    );

    registry.stop();
    let err = image
        .push(&reference, PushOptions::default())
        .await
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("is a registry listening at http://"),
        "unreachable registry: {err}"
    );
    assert!(
        image.output.join("index.json").is_file(),
        "a failed push leaves the layout"
    );
}

/// The cluster's containerd pulls the pushed image from the registry over
/// plain HTTP, and the program runs as 65532 (`nonroot`) with a writable
/// /tmp and prints what it should.
#[tokio::test]
async fn cluster_pulls_and_runs_a_pushed_image() {
    init_tracing();
    let dir = tempfile::tempdir().unwrap();
    let image = tokio::task::spawn_blocking({
        let dir = dir.path().to_owned();
        move || build_tiny(&dir)
    })
    .await
    .unwrap();
    let cluster = Cluster::builder().with_registry().start().await.unwrap();
    let registry = cluster.registry().expect("started with a registry");
    let reference = registry.reference("opkit/tiny", "v1");
    // The host's end of the node link is not loopback: plain HTTP on request.
    image
        .push(
            &reference,
            PushOptions {
                insecure: true,
                ..PushOptions::default()
            },
        )
        .await
        .unwrap();

    let client = cluster.client().unwrap();
    let ns = "image";
    create_namespace(&client, ns).await;
    let pods: Api<Pod> = Api::namespaced(client, ns);
    let pod: Pod = serde_json::from_value(serde_json::json!({
        "metadata": { "name": "tiny" },
        "spec": {
            "restartPolicy": "Never",
            "containers": [{ "name": "tiny", "image": reference, "imagePullPolicy": "Always" }]
        }
    }))
    .unwrap();
    let (pod, logs) = run_to_completion(&pods, &pod, Duration::from_secs(120)).await;
    assert_eq!(pod_phase(&pod), "Succeeded", "logs: {logs}; {pod:?}");
    assert_eq!(
        logs.trim(),
        "hello from opkit-tiny uid=65532 gid=65532 user=nonroot tmp=true"
    );
    let image_id = pod
        .status
        .and_then(|s| s.container_statuses)
        .and_then(|c| c.into_iter().next())
        .map(|c| c.image_id)
        .unwrap_or_default();
    assert!(
        image_id.ends_with(&image.digest.to_string()),
        "the node ran the pushed image: {image_id} vs {}",
        image.digest
    );
    cluster.stop();
}

/// A registry that wants credentials (htpasswd over HTTPS from a CA the
/// node trusts): `cargo opkit image` pushes with them; a pod without an
/// `imagePullSecrets` Secret cannot pull (ErrImagePull / ImagePullBackOff,
/// 401), the same pod with one runs. One cluster for both.
#[tokio::test]
async fn cluster_pulls_from_an_authenticated_registry_with_a_pull_secret() {
    use cargo_opkit::image::Login;
    use k8s_openapi::api::core::v1::Secret;
    use kube::api::PostParams;
    use opkit_tests::eventually;

    init_tracing();
    let dir = tempfile::tempdir().unwrap();
    let image = tokio::task::spawn_blocking({
        let dir = dir.path().to_owned();
        move || build_tiny(&dir)
    })
    .await
    .unwrap();
    let (user, password) = ("opkit-puller", "pull-Secret-1");
    let cluster = Cluster::builder()
        .with_registry_auth(user, password)
        .start()
        .await
        .unwrap();
    let registry = cluster.registry().expect("started with a registry");
    let reference = registry.reference("opkit/private", "v1");
    // HTTPS (the host's end of the node link is not loopback), trusting
    // the registry's CA, signing in with the user and password.
    let options = PushOptions {
        login: Some(Login {
            username: user.to_owned(),
            password: password.to_owned(),
        }),
        ca_file: registry.ca_file(),
        ..PushOptions::default()
    };
    image.push(&reference, options).await.unwrap();

    let client = cluster.client().unwrap();
    let ns = "private-image";
    create_namespace(&client, ns).await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    let pod = |name: &str, secret: Option<&str>| -> Pod {
        let mut spec = serde_json::json!({
            "restartPolicy": "Never",
            "containers": [{ "name": "tiny", "image": reference, "imagePullPolicy": "Always" }]
        });
        if let Some(secret) = secret {
            spec["imagePullSecrets"] = serde_json::json!([{ "name": secret }]);
        }
        serde_json::from_value(serde_json::json!({ "metadata": { "name": name }, "spec": spec }))
            .unwrap()
    };

    // Without a Secret the node is refused.
    pods.create(&PostParams::default(), &pod("no-secret", None))
        .await
        .unwrap();
    let (reason, message) = eventually(
        "pod no-secret to fail pulling",
        Duration::from_secs(90),
        || async {
            let pod = pods.get_opt("no-secret").await.ok().flatten()?;
            let waiting = pod
                .status?
                .container_statuses?
                .into_iter()
                .next()?
                .state?
                .waiting?;
            let reason = waiting.reason?;
            matches!(reason.as_str(), "ErrImagePull" | "ImagePullBackOff")
                .then(|| (reason, waiting.message.unwrap_or_default()))
        },
    )
    .await;
    println!("without a pull secret: {reason}: {message}");
    // containerd: "... may require authorization: authorization failed:
    // no basic auth credentials" (the registry answered 401).
    let lower = message.to_lowercase();
    assert!(
        lower.contains("authorization failed")
            || lower.contains("401")
            || lower.contains("unauthorized"),
        "{reason}: {message}"
    );
    let phase = pods.get("no-secret").await.unwrap();
    assert_eq!(pod_phase(&phase), "Pending");

    // A docker-registry Secret, as `kubectl create secret docker-registry`
    // makes it.
    let secret: Secret = serde_json::from_value(serde_json::json!({
        "metadata": { "name": "registry-login" },
        "type": "kubernetes.io/dockerconfigjson",
        "stringData": {
            ".dockerconfigjson": serde_json::json!({
                "auths": { registry.host(): { "username": user, "password": password } }
            }).to_string()
        }
    }))
    .unwrap();
    Api::<Secret>::namespaced(client, ns)
        .create(&PostParams::default(), &secret)
        .await
        .unwrap();
    let (ended, logs) = run_to_completion(
        &pods,
        &pod("with-secret", Some("registry-login")),
        Duration::from_secs(120),
    )
    .await;
    assert_eq!(pod_phase(&ended), "Succeeded", "logs: {logs}; {ended:?}");
    assert_eq!(
        logs.trim(),
        "hello from opkit-tiny uid=65532 gid=65532 user=nonroot tmp=true"
    );
    cluster.stop();
}
