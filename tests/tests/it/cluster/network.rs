//! The cluster's networking, by construction local: its own Service and pod
//! ranges, routed as a whole from the host into the node (or `unreachable`
//! without a node), the node with no route out, and the routes gone on
//! stop. A connection to an unused IP of either range fails on the machine:
//! the host's routing decision names the node link (never the default
//! interface), and an nftables counter on the host's output path reads 0
//! for the ranges on any other interface.

use std::net::{Ipv4Addr, SocketAddr, TcpStream};
use std::process::Command;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Pod, Service};
use kube::api::{Api, PostParams};
use opkit_envtest::{Cluster, Ipv4Cidr};
use opkit_tests::{create_namespace, eventually, init_tracing, pod_phase, run_to_completion};
use serde_json::json;

fn ip(args: &[&str]) -> String {
    let output = Command::new("ip").args(args).output().expect("run ip");
    format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

/// The host's routing decision for `ip` (`ip route get`).
fn route_get(ip_address: Ipv4Addr) -> String {
    ip(&["-4", "route", "get", &ip_address.to_string()])
}

/// The interface of the host's default route, if it has one.
fn default_interface() -> Option<String> {
    let line = ip(&["-4", "route", "show", "default"]);
    let mut words = line.split_whitespace();
    words.find(|w| *w == "dev")?;
    words.next().map(str::to_owned)
}

/// The word after `dev` in a routing decision.
fn device(decision: &str) -> Option<&str> {
    let mut words = decision.split_whitespace();
    words.find(|w| *w == "dev")?;
    words.next()
}

/// An nftables table on the host counting new packets the host itself
/// sends to `ranges`: those out of `link` and those out of any other
/// interface. Removed on drop.
struct LeakCounter {
    table: String,
}

impl LeakCounter {
    fn install(link: &str, ranges: &[Ipv4Cidr]) -> Self {
        let table = format!("opkit_leak_{}_{link}", std::process::id()).replace('-', "_");
        let set = ranges
            .iter()
            .map(Ipv4Cidr::to_string)
            .collect::<Vec<_>>()
            .join(", ");
        let script = format!(
            "table ip {table} {{\n\
             chain out {{\n\
             type filter hook output priority 0; policy accept;\n\
             ip daddr {{ {set} }} oifname \"{link}\" counter comment \"link\"\n\
             ip daddr {{ {set} }} oifname != \"{link}\" counter comment \"elsewhere\"\n\
             }}\n\
             }}\n"
        );
        let mut child = Command::new("nft")
            .args(["-f", "-"])
            .stdin(std::process::Stdio::piped())
            .spawn()
            .expect("run nft");
        use std::io::Write;
        child
            .stdin
            .take()
            .unwrap()
            .write_all(script.as_bytes())
            .unwrap();
        assert!(child.wait().unwrap().success(), "nft -f: {script}");
        Self { table }
    }

    /// Packets counted by the rule with `comment`.
    fn packets(&self, comment: &str) -> u64 {
        let output = Command::new("nft")
            .args(["list", "table", "ip", &self.table])
            .output()
            .expect("run nft");
        let text = String::from_utf8_lossy(&output.stdout);
        let line = text
            .lines()
            .find(|l| l.contains(&format!("comment \"{comment}\"")))
            .unwrap_or_else(|| panic!("no rule {comment} in {text}"));
        let mut words = line.split_whitespace();
        words.find(|w| *w == "packets");
        words
            .next()
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("{line}"))
    }
}

impl Drop for LeakCounter {
    fn drop(&mut self) {
        let _ = Command::new("nft")
            .args(["delete", "table", "ip", &self.table])
            .output();
    }
}

/// Tries a TCP connection; returns the error (a success is a test failure).
fn connect_fails(ip_address: Ipv4Addr) -> std::io::Error {
    match TcpStream::connect_timeout(&SocketAddr::from((ip_address, 80)), Duration::from_secs(2)) {
        Ok(_) => panic!("{ip_address}:80 accepted a connection"),
        Err(e) => e,
    }
}

#[tokio::test]
async fn the_service_and_pod_ranges_never_leave_the_machine() {
    init_tracing();
    let cluster = Cluster::start().await.unwrap();
    let node = cluster.node_address().expect("a node");
    let (services, pods_range) = (cluster.service_cidr(), cluster.pod_cidr());
    println!(
        "cluster started in {:.1?}: Services {services}, pods {pods_range}",
        cluster.started_in()
    );
    let unused_service = services.nth(250).unwrap();
    let unused_pod = pods_range.nth(250).unwrap();

    // The host's routing decision: into the node, never the default route.
    let default = default_interface();
    let mut link = String::new();
    for target in [
        unused_service,
        unused_pod,
        cluster.dns_service_ip().unwrap(),
    ] {
        let decision = route_get(target);
        let dev = device(&decision).unwrap_or_else(|| panic!("{decision}"));
        assert!(dev.starts_with("opkit-node"), "{target}: {decision}");
        assert!(decision.contains(&format!("via {node} ")), "{decision}");
        assert_ne!(Some(dev.to_owned()), default, "{decision}");
        link = dev.to_owned();
    }

    // A served ClusterIP answers the host with no step of ours: the
    // `kubernetes` Service, through kube-proxy in the node.
    let kubernetes = SocketAddr::from((services.nth(1).unwrap(), 443));
    TcpStream::connect_timeout(&kubernetes, Duration::from_secs(5))
        .unwrap_or_else(|e| panic!("the kubernetes Service from the host: {e}"));

    // A Service with no endpoints is refused inside the node, at once
    // (kube-proxy's reject), once kube-proxy has seen it.
    let client = cluster.client().unwrap();
    let ns = "network";
    create_namespace(&client, ns).await;
    let nobody: Service = Api::namespaced(client.clone(), ns)
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({
                "metadata": { "name": "nobody" },
                "spec": { "selector": { "app": "nobody" }, "ports": [{ "port": 80 }] }
            }))
            .unwrap(),
        )
        .await
        .unwrap();
    let nobody: Ipv4Addr = nobody
        .spec
        .and_then(|s| s.cluster_ip)
        .and_then(|ip| ip.parse().ok())
        .expect("a cluster IP");
    eventually(
        "the endpoint-less Service to be refused",
        Duration::from_secs(30),
        || async move {
            tokio::task::spawn_blocking(move || {
                TcpStream::connect_timeout(
                    &SocketAddr::from((nobody, 80)),
                    Duration::from_millis(300),
                )
                .err()
                .filter(|e| e.kind() == std::io::ErrorKind::ConnectionRefused)
            })
            .await
            .unwrap()
        },
    )
    .await;

    // Unused IPs of both ranges fail on the machine: packets go into the
    // node link only (kube-proxy drops unallocated ClusterIPs; no pod
    // answers ARP on the bridge).
    let counter = LeakCounter::install(&link, &[services, pods_range]);
    for target in [unused_service, unused_pod] {
        let began = Instant::now();
        let error = connect_fails(target);
        println!("{target}:80 failed after {:.1?}: {error}", began.elapsed());
    }
    assert!(
        counter.packets("link") >= 2,
        "the attempts went into the node"
    );
    assert_eq!(
        counter.packets("elsewhere"),
        0,
        "no packet for the cluster's ranges left by another interface"
    );

    // The node itself has no route out: what the host routes in goes no
    // further (a host-network pod sees the node's routing table).
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    let busybox = cluster.image("busybox").expect("a busybox image");
    let routes: Pod = serde_json::from_value(json!({
        "metadata": { "name": "node-routes" },
        "spec": {
            "hostNetwork": true,
            "restartPolicy": "Never",
            "containers": [{
                "name": "routes",
                "image": busybox,
                "imagePullPolicy": "IfNotPresent",
                "command": ["sh", "-c", "busybox ip -4 route; busybox ip -4 route get 203.0.113.1 2>&1; true"]
            }]
        }
    }))
    .unwrap();
    let (pod, output) = run_to_completion(&pods, &routes, Duration::from_secs(60)).await;
    assert_eq!(pod_phase(&pod), "Succeeded", "{output}");
    assert!(!output.contains("default"), "the node's routes: {output}");
    assert!(
        output.contains("Network is unreachable"),
        "the node's routes: {output}"
    );
    for line in output.lines().filter(|l| !l.contains("unreachable")) {
        let destination: Ipv4Addr = line
            .split(['/', ' '])
            .next()
            .and_then(|d| d.parse().ok())
            .unwrap_or_else(|| panic!("a route line: {line:?} in {output}"));
        let link_range = Ipv4Cidr::new(node, 24);
        assert!(
            [services, pods_range, link_range]
                .iter()
                .any(|r| r.contains(destination)),
            "the node routes {line:?} elsewhere: {output}"
        );
    }

    // Stopping removes the routes with everything else.
    let footprint = cluster.footprint().clone();
    cluster.stop();
    assert_eq!(footprint.remaining(), Vec::<String>::new());
    for range in [services, pods_range] {
        assert_eq!(
            ip(&["-4", "route", "show", "exact", &range.to_string()]),
            "",
            "{range}"
        );
    }
}

/// Without a node nothing serves the ranges: the host refuses them at once.
#[tokio::test]
async fn a_cluster_without_a_node_refuses_its_ranges() {
    init_tracing();
    let cluster = Cluster::builder().without_node().start().await.unwrap();
    for range in [cluster.service_cidr(), cluster.pod_cidr()] {
        let route = ip(&["-4", "route", "show", "exact", &range.to_string()]);
        assert!(route.starts_with("unreachable "), "{range}: {route}");
        let target = range.nth(20).unwrap();
        let decision = route_get(target);
        assert!(
            decision.contains("No route to host"),
            "{target}: {decision}"
        );
        let began = Instant::now();
        let error = connect_fails(target);
        assert_eq!(
            error.kind(),
            std::io::ErrorKind::HostUnreachable,
            "{target}: {error}"
        );
        assert!(
            began.elapsed() < Duration::from_secs(1),
            "refused at once, not timed out: {error}"
        );
    }
    let footprint = cluster.footprint().clone();
    cluster.stop();
    assert_eq!(footprint.remaining(), Vec::<String>::new());
}
