//! The cluster DNS (CoreDNS, the `kube-dns` Service): from a pod, a
//! Service's full name and its short `<svc>.<ns>` resolve, and an HTTP
//! fetch by name works; a name outside the cluster fails at once inside the
//! node (nothing is forwarded).

use std::time::Duration;

use k8s_openapi::api::core::v1::{Pod, Service};
use kube::api::{Api, PostParams};
use opkit_envtest::{CLUSTER_DOMAIN, Cluster};
use opkit_tests::{create_namespace, eventually, init_tracing, pod_phase, run_to_completion};
use serde_json::json;

use super::is_ready;

fn from_json<T: serde::de::DeserializeOwned>(value: serde_json::Value) -> T {
    serde_json::from_value(value).expect("a valid object")
}

#[tokio::test]
async fn pods_resolve_services_by_name_and_nothing_else() {
    init_tracing();
    let cluster = Cluster::start().await.unwrap();
    println!(
        "cluster (with DNS at {:?}) started in {:.1?}",
        cluster.dns_service_ip(),
        cluster.started_in()
    );
    let client = cluster.client().unwrap();
    let ns = "dns";
    create_namespace(&client, ns).await;
    let busybox = cluster.image("busybox").expect("a busybox image");

    // A web server (busybox httpd) behind the Service `web`.
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    let web: Pod = from_json(json!({
        "metadata": { "name": "web", "labels": { "app": "web" } },
        "spec": { "containers": [{
            "name": "web",
            "image": busybox,
            "imagePullPolicy": "IfNotPresent",
            "command": ["sh", "-c", "mkdir -p /tmp/www && echo served-by-name > /tmp/www/index.html && exec busybox httpd -f -p 8080 -h /tmp/www"],
            "ports": [{ "containerPort": 8080 }],
            "readinessProbe": { "tcpSocket": { "port": 8080 }, "periodSeconds": 1 }
        }]}
    }));
    pods.create(&PostParams::default(), &web).await.unwrap();
    let services: Api<Service> = Api::namespaced(client.clone(), ns);
    services
        .create(
            &PostParams::default(),
            &from_json(json!({
                "metadata": { "name": "web" },
                "spec": { "selector": { "app": "web" }, "ports": [{ "port": 80, "targetPort": 8080 }] }
            })),
        )
        .await
        .unwrap();
    eventually(
        "the web pod to be Ready",
        Duration::from_secs(60),
        || async { is_ready(&pods, "web").await.then_some(()) },
    )
    .await;

    // A client pod: lookups, a fetch by name, and a name outside.
    let script = format!(
        "busybox nslookup web.{ns}.svc.{CLUSTER_DOMAIN}; echo \"fqdn=$?\"; \
         wget -q -O - http://web.{ns}/; echo \"short=$?\"; \
         wget -q -O - http://web.{ns}.svc.{CLUSTER_DOMAIN}/; echo \"full=$?\"; \
         cat /etc/resolv.conf; \
         t0=$(busybox date +%s); wget -q -O - http://example.com/ 2>&1; echo \"outside=$?\"; \
         echo \"outside_seconds=$(( $(busybox date +%s) - t0 ))\""
    );
    let probe: Pod = from_json(json!({
        "metadata": { "name": "resolver" },
        "spec": {
            "restartPolicy": "Never",
            "containers": [{
                "name": "resolver",
                "image": busybox,
                "imagePullPolicy": "IfNotPresent",
                "command": ["sh", "-c", script]
            }]
        }
    }));
    let (pod, output) = run_to_completion(&pods, &probe, Duration::from_secs(60)).await;
    println!("{output}");
    assert_eq!(pod_phase(&pod), "Succeeded", "{output}");
    let web_ip = services
        .get("web")
        .await
        .unwrap()
        .spec
        .and_then(|s| s.cluster_ip)
        .unwrap();
    assert!(
        output.contains(&web_ip),
        "nslookup names the ClusterIP: {output}"
    );
    assert!(output.contains("fqdn=0"), "{output}");
    assert!(output.contains("served-by-name\nshort=0"), "{output}");
    assert!(output.contains("served-by-name\nfull=0"), "{output}");
    assert!(
        output.contains(&format!("nameserver {}", cluster.dns_service_ip().unwrap())),
        "{output}"
    );
    assert!(output.contains("bad address"), "{output}");
    assert!(output.contains("outside=1"), "{output}");
    let seconds: u64 = output
        .lines()
        .find_map(|l| l.strip_prefix("outside_seconds="))
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or_else(|| panic!("{output}"));
    assert!(seconds <= 2, "a name outside fails at once: {output}");

    let footprint = cluster.footprint().clone();
    cluster.stop();
    assert_eq!(footprint.remaining(), Vec::<String>::new());
}
