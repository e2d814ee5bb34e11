//! The node: containerd, the kubelet and kube-proxy, run inside the node's
//! namespaces with every directory under the cluster's own directory.

use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::error::{EnvtestError, Result};
use crate::process::ChildProcess;
use crate::registry::Registry;

use super::assets::{ImageArchive, NodeAssets};
use super::dns::CLUSTER_DOMAIN;
use super::files::{ClusterFiles, write};
use super::namespaces::{NodeNamespaces, kill_entered, run};
use super::network::{ClusterNetwork, Ipv4Cidr};
use super::node_name::NODE_NAME;

/// Where the node's processes keep their state.
#[derive(Debug, Clone)]
pub(crate) struct NodeDirs {
    pub root: PathBuf,
}

impl NodeDirs {
    fn containerd(&self) -> PathBuf {
        self.root.join("containerd")
    }
    /// containerd's CRI socket.
    pub fn containerd_socket(&self) -> PathBuf {
        self.containerd().join("containerd.sock")
    }
    fn kubelet(&self) -> PathBuf {
        self.root.join("kubelet")
    }
    /// containerd's registry hosts directory (`<host:port>/hosts.toml`).
    fn registry_hosts(&self) -> PathBuf {
        self.root.join("containerd").join("certs.d")
    }
    fn cni_conf(&self) -> PathBuf {
        self.root.join("cni").join("net.d")
    }
}

/// Sets up the inside of the node's namespaces: private `/run`, `/var/lib`
/// and `/var/log` (so nothing the node writes there reaches the host), the
/// link's address, a route for the cluster's Service range (kube-proxy
/// rewrites a served ClusterIP before a packet leaves, and drops or refuses
/// the rest) and forwarding for the pod bridge. There is no default route:
/// nothing inside can reach beyond the host's end of the link, so what the
/// host routes into the node (its Service and pod ranges) goes no further.
pub(crate) fn prepare_namespaces(
    namespaces: &NodeNamespaces,
    node: Ipv4Addr,
    service_cidr: Ipv4Cidr,
) -> Result<()> {
    let script = format!(
        "mount -t tmpfs -o mode=755 opkit-node-run /run\n\
         mount -t tmpfs -o mode=755 opkit-node-var-lib /var/lib\n\
         mount -t tmpfs -o mode=755 opkit-node-var-log /var/log\n\
         ip link set lo up\n\
         ip addr add {node}/24 dev eth0\n\
         ip link set eth0 up\n\
         ip route add {service_cidr} dev eth0\n\
         echo 1 > /proc/sys/net/ipv4/ip_forward\n\
         if [ -e /proc/sys/net/bridge/bridge-nf-call-iptables ]; then echo 1 > /proc/sys/net/bridge/bridge-nf-call-iptables; fi\n"
    );
    namespaces.run_script("preparing the node namespaces", &script)?;
    Ok(())
}

fn containerd_config(assets: &NodeAssets, dirs: &NodeDirs, pause_image: &str) -> String {
    let cd = dirs.containerd();
    format!(
        r#"version = 3
root = "{root}"
state = "{state}"
disabled_plugins = [
  "io.containerd.snapshotter.v1.btrfs",
  "io.containerd.snapshotter.v1.zfs",
  "io.containerd.snapshotter.v1.devmapper",
  "io.containerd.snapshotter.v1.blockfile",
  "io.containerd.snapshotter.v1.erofs",
  "io.containerd.tracing.processor.v1.otlp",
  "io.containerd.internal.v1.tracing",
  "io.containerd.nri.v1.nri",
]

[grpc]
  address = "{socket}"

[ttrpc]
  address = "{ttrpc}"

[debug]
  level = "warn"

[plugins.'io.containerd.cri.v1.images']
  snapshotter = "overlayfs"
  [plugins.'io.containerd.cri.v1.images'.registry]
    config_path = "{registry_hosts}"
  [plugins.'io.containerd.cri.v1.images'.pinned_images]
    sandbox = "{pause_image}"

[plugins.'io.containerd.cri.v1.runtime']
  enable_selinux = false
  # Without CAP_SYS_RESOURCE (as in some VMs) a process may not lower its
  # oom_score_adj; the kubelet asks -998 for sandboxes. Clamp to containerd's.
  restrict_oom_score_adj = true
  [plugins.'io.containerd.cri.v1.runtime'.containerd]
    default_runtime_name = "runc"
    [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
        BinaryName = "{runc}"
        SystemdCgroup = false
  [plugins.'io.containerd.cri.v1.runtime'.cni]
    bin_dirs = ["{cni_bin}"]
    conf_dir = "{cni_conf}"

[plugins.'io.containerd.grpc.v1.cri']
  disable_tcp_service = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
"#,
        root = cd.join("root").display(),
        state = cd.join("state").display(),
        socket = dirs.containerd_socket().display(),
        ttrpc = cd.join("containerd.ttrpc.sock").display(),
        runc = assets.bin("runc").display(),
        cni_bin = assets.cni_dir().display(),
        cni_conf = dirs.cni_conf().display(),
        registry_hosts = dirs.registry_hosts().display(),
    )
}

/// containerd's `hosts.toml` for a registry at `host` (`ip:port`): pulls
/// of `host/...` go to `http://host`, or, with `ca` (the path of the CA
/// that signed its certificate), to `https://host` trusting that CA.
fn registry_hosts_toml(host: &str, ca: Option<&Path>) -> String {
    match ca {
        None => format!(
            "server = \"http://{host}\"\n\n[host.\"http://{host}\"]\n  capabilities = [\"pull\", \"resolve\"]\n"
        ),
        Some(ca) => format!(
            "server = \"https://{host}\"\n\n[host.\"https://{host}\"]\n  capabilities = [\"pull\", \"resolve\"]\n  ca = {ca:?}\n",
            ca = ca.display().to_string()
        ),
    }
}

fn cni_config(dirs: &NodeDirs, pod_cidr: Ipv4Cidr) -> String {
    serde_json::json!({
        "cniVersion": "1.0.0",
        "name": "opkit",
        "plugins": [
            {
                "type": "bridge",
                "bridge": "cni0",
                "isGateway": true,
                // Pod traffic to the host's end of the link leaves as the
                // node's address; this NAT lives inside the node's namespace.
                "ipMasq": true,
                "hairpinMode": true,
                "ipam": {
                    "type": "host-local",
                    "ranges": [[{ "subnet": pod_cidr.to_string() }]],
                    "routes": [{ "dst": "0.0.0.0/0" }],
                    "dataDir": dirs.root.join("cni").join("ipam").display().to_string(),
                }
            },
            { "type": "portmap", "capabilities": { "portMappings": true } }
        ]
    })
    .to_string()
}

fn kubelet_config(
    files: &ClusterFiles,
    dirs: &NodeDirs,
    node: Ipv4Addr,
    cgroup_root: &str,
    cluster_dns: Option<Ipv4Addr>,
) -> String {
    let cluster_dns: Vec<String> = cluster_dns.iter().map(Ipv4Addr::to_string).collect();
    serde_json::json!({
        "kind": "KubeletConfiguration",
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        // cgroups v1 hosts need this from Kubernetes 1.35 on.
        "failCgroupV1": false,
        "cgroupDriver": "cgroupfs",
        "cgroupRoot": cgroup_root,
        "containerRuntimeEndpoint": format!("unix://{}", dirs.containerd_socket().display()),
        "address": node.to_string(),
        "port": 10250,
        "readOnlyPort": 0,
        "healthzBindAddress": "127.0.0.1",
        "healthzPort": 10248,
        "tlsCertFile": files.kubelet_serving_cert.display().to_string(),
        "tlsPrivateKeyFile": files.kubelet_serving_key.display().to_string(),
        "authentication": {
            "x509": { "clientCAFile": files.ca.display().to_string() },
            "webhook": { "enabled": false },
            "anonymous": { "enabled": false }
        },
        "authorization": { "mode": "AlwaysAllow" },
        "failSwapOn": false,
        "resolvConf": dirs.root.join("resolv.conf").display().to_string(),
        // Pods (dnsPolicy ClusterFirst) ask the cluster DNS Service; with
        // none, the kubelet warns MissingClusterDNS and uses resolvConf.
        "clusterDNS": cluster_dns,
        "clusterDomain": CLUSTER_DOMAIN,
        "volumePluginDir": dirs.kubelet().join("volume-plugins").display().to_string(),
        "podLogsDir": dirs.root.join("pod-logs").display().to_string(),
        "nodeStatusUpdateFrequency": "4s",
        "nodeStatusReportFrequency": "10s",
        "nodeLeaseDurationSeconds": 10,
        "serializeImagePulls": false,
        "imageGCHighThresholdPercent": 100,
        "imageGCLowThresholdPercent": 99,
        "evictionHard": {
            "memory.available": "100Mi",
            "nodefs.available": "1%",
            "imagefs.available": "1%",
            "nodefs.inodesFree": "1%"
        },
        "protectKernelDefaults": false,
        "shutdownGracePeriod": "0s",
        "logging": { "format": "text" }
    })
    .to_string()
}

fn proxy_config(files: &ClusterFiles, pod_cidr: Ipv4Cidr) -> String {
    serde_json::json!({
        "kind": "KubeProxyConfiguration",
        "apiVersion": "kubeproxy.config.k8s.io/v1alpha1",
        "clientConnection": { "kubeconfig": files.proxy_kubeconfig.display().to_string() },
        "mode": "nftables",
        "hostnameOverride": NODE_NAME,
        "clusterCIDR": pod_cidr.to_string(),
        "healthzBindAddress": "127.0.0.1:10256",
        "metricsBindAddress": "127.0.0.1:10249",
        // Leave the host-wide conntrack limits and timeouts as they are.
        "conntrack": {
            "maxPerCore": 0,
            "min": 0,
            "tcpEstablishedTimeout": "0s",
            "tcpCloseWaitTimeout": "0s"
        }
    })
    .to_string()
}

/// The node's running processes (each an `nsenter` whose child runs inside).
#[derive(Debug)]
pub(crate) struct Node {
    pub containerd: ChildProcess,
    pub kubelet: Option<ChildProcess>,
    pub proxy: ChildProcess,
}

impl Node {
    /// Starts containerd, imports the images, then starts the kubelet and
    /// kube-proxy.
    #[allow(clippy::too_many_arguments)]
    pub fn start(
        namespaces: &NodeNamespaces,
        assets: &NodeAssets,
        files: &ClusterFiles,
        dirs: &NodeDirs,
        images: &[ImageArchive],
        node: Ipv4Addr,
        network: ClusterNetwork,
        cluster_dns: Option<Ipv4Addr>,
        cgroup_root: &str,
        registry: Option<&Registry>,
        timeout: Duration,
    ) -> Result<Self> {
        for dir in [
            dirs.containerd(),
            dirs.kubelet(),
            dirs.cni_conf(),
            dirs.root.join("pod-logs"),
        ] {
            std::fs::create_dir_all(&dir).map_err(|source| EnvtestError::Io {
                what: "creating a node directory",
                path: dir.clone(),
                source,
            })?;
        }
        let pause =
            images
                .iter()
                .find(|i| i.name == "pause")
                .ok_or_else(|| EnvtestError::NodeSetup {
                    step: "finding the pause image",
                    detail: "images/refs lists no pause.tar".to_owned(),
                })?;
        let containerd_toml = dirs.containerd().join("config.toml");
        write(
            &containerd_toml,
            &containerd_config(assets, dirs, &pause.reference),
        )?;
        write(
            &dirs.cni_conf().join("10-opkit.conflist"),
            &cni_config(dirs, network.pod),
        )?;
        write(&dirs.root.join("resolv.conf"), "")?;
        if let Some(registry) = registry {
            let host = registry.host();
            let hosts = dirs.registry_hosts().join(&host);
            std::fs::create_dir_all(&hosts).map_err(|source| EnvtestError::Io {
                what: "creating containerd's registry hosts directory",
                path: hosts.clone(),
                source,
            })?;
            // containerd trusts an HTTPS registry's CA from beside hosts.toml.
            let ca = match registry.ca_pem() {
                Some(pem) => {
                    let path = hosts.join("ca.crt");
                    write(&path, pem)?;
                    Some(path)
                }
                None => None,
            };
            write(
                &hosts.join("hosts.toml"),
                &registry_hosts_toml(&host, ca.as_deref()),
            )?;
        }
        let kubelet_yaml = dirs.kubelet().join("config.json");
        write(
            &kubelet_yaml,
            &kubelet_config(files, dirs, node, cgroup_root, cluster_dns),
        )?;
        let proxy_yaml = dirs.root.join("kube-proxy.json");
        write(&proxy_yaml, &proxy_config(files, network.pod))?;

        // containerd finds the shim, and CNI plugins find iptables, on PATH.
        let path = format!(
            "PATH={}:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
            assets.root.join("bin").display()
        );
        let containerd = ChildProcess::spawn(
            "containerd",
            Path::new("nsenter"),
            &namespaces.enter(
                Path::new("/usr/bin/env"),
                &[
                    path.clone(),
                    assets.bin("containerd").display().to_string(),
                    format!("--config={}", containerd_toml.display()),
                ],
            ),
            dirs.root.join("containerd.log"),
        )?;
        wait_for_containerd(&containerd, assets, dirs, timeout)?;
        import_images(assets, dirs, images)?;

        let kubelet = spawn_kubelet(namespaces, assets, files, dirs, node, &path)?;
        let proxy = ChildProcess::spawn(
            "kube-proxy",
            Path::new("nsenter"),
            &namespaces.enter(
                Path::new("/usr/bin/env"),
                &[
                    path,
                    assets.bin("kube-proxy").display().to_string(),
                    format!("--config={}", proxy_yaml.display()),
                    "--v=1".to_owned(),
                ],
            ),
            dirs.root.join("kube-proxy.log"),
        )?;
        Ok(Self {
            containerd,
            kubelet: Some(kubelet),
            proxy,
        })
    }

    /// Kills the kubelet (only it: containers keep running, as when a real
    /// kubelet dies).
    pub fn stop_kubelet(&mut self) {
        if let Some(kubelet) = self.kubelet.take() {
            kill_entered(&kubelet);
        }
    }
}

fn spawn_kubelet(
    namespaces: &NodeNamespaces,
    assets: &NodeAssets,
    files: &ClusterFiles,
    dirs: &NodeDirs,
    node: Ipv4Addr,
    path: &str,
) -> Result<ChildProcess> {
    ChildProcess::spawn(
        "kubelet",
        Path::new("nsenter"),
        &namespaces.enter(
            Path::new("/usr/bin/env"),
            &[
                path.to_owned(),
                assets.bin("kubelet").display().to_string(),
                format!("--config={}", dirs.kubelet().join("config.json").display()),
                format!("--kubeconfig={}", files.kubelet_kubeconfig.display()),
                format!("--root-dir={}", dirs.kubelet().display()),
                format!("--cert-dir={}", dirs.kubelet().join("pki").display()),
                format!("--node-ip={node}"),
                format!("--hostname-override={NODE_NAME}"),
                "--v=1".to_owned(),
            ],
        ),
        dirs.root.join("kubelet.log"),
    )
}

fn wait_for_containerd(
    containerd: &ChildProcess,
    assets: &NodeAssets,
    dirs: &NodeDirs,
    timeout: Duration,
) -> Result<()> {
    let begun = Instant::now();
    let args = [
        format!("--address={}", dirs.containerd_socket().display()),
        "version".to_owned(),
    ];
    loop {
        if let Some(status) = containerd.exit_status() {
            return Err(containerd.exited_early(status));
        }
        let last = match run(
            "asking containerd its version",
            &assets.bin("ctr").display().to_string(),
            &args,
        ) {
            Ok(_) => return Ok(()),
            Err(e) => e.to_string(),
        };
        if begun.elapsed() > timeout {
            return Err(EnvtestError::NotReady {
                name: "containerd",
                waited: timeout,
                last_error: last,
                log: containerd.log_path().to_owned(),
                tail: containerd.log_tail(),
            });
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Imports every built image into containerd's `k8s.io` namespace, where the
/// kubelet's CRI calls find them (no registry is involved). The archives are
/// imported side by side, as this is on the path to a Ready node; one that
/// fails so (e.g. a blob two archives share, locked by the other import) is
/// imported again on its own.
fn import_images(assets: &NodeAssets, dirs: &NodeDirs, images: &[ImageArchive]) -> Result<()> {
    let ctr = assets.bin("ctr").display().to_string();
    let address = format!("--address={}", dirs.containerd_socket().display());
    let import = |image: &ImageArchive| -> Result<()> {
        let began = Instant::now();
        run(
            "importing an image into containerd",
            &ctr,
            &[
                address.clone(),
                "--namespace=k8s.io".to_owned(),
                "images".to_owned(),
                "import".to_owned(),
                image.path.display().to_string(),
            ],
        )?;
        tracing::debug!(
            image = %image.reference,
            elapsed_ms = began.elapsed().as_millis() as u64,
            "image imported"
        );
        Ok(())
    };
    let began = Instant::now();
    let failed: Vec<&ImageArchive> = std::thread::scope(|scope| {
        let imports: Vec<_> = images
            .iter()
            .map(|image| (image, scope.spawn(|| import(image))))
            .collect();
        imports
            .into_iter()
            .filter_map(|(image, handle)| match handle.join() {
                Ok(Ok(())) => None,
                Ok(Err(error)) => {
                    tracing::debug!(image = %image.reference, %error, "import failed; retrying alone");
                    Some(image)
                }
                Err(_) => Some(image),
            })
            .collect()
    });
    for image in failed {
        import(image)?;
    }
    tracing::debug!(
        images = images.len(),
        elapsed_ms = began.elapsed().as_millis() as u64,
        "images imported"
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registry_hosts_use_plain_http() {
        let toml = registry_hosts_toml("198.18.1.1:5000", None);
        assert!(
            toml.starts_with("server = \"http://198.18.1.1:5000\"\n"),
            "{toml}"
        );
        assert!(toml.contains("[host.\"http://198.18.1.1:5000\"]"), "{toml}");
        assert!(toml.contains("\"pull\", \"resolve\""), "{toml}");
    }

    #[test]
    fn a_tls_registry_is_pulled_over_https_trusting_its_ca() {
        let toml = registry_hosts_toml("198.18.1.1:5000", Some(Path::new("/n/ca.crt")));
        assert!(
            toml.starts_with("server = \"https://198.18.1.1:5000\"\n"),
            "{toml}"
        );
        assert!(
            toml.contains("[host.\"https://198.18.1.1:5000\"]"),
            "{toml}"
        );
        assert!(toml.contains("ca = \"/n/ca.crt\""), "{toml}");
    }

    #[test]
    fn containerd_reads_registry_hosts_from_the_node_directory() {
        let assets = NodeAssets {
            root: "/assets".into(),
        };
        let dirs = NodeDirs {
            root: "/node".into(),
        };
        let config = containerd_config(&assets, &dirs, "opkit.local/pause:1");
        assert!(
            config.contains("config_path = \"/node/containerd/certs.d\""),
            "{config}"
        );
    }
}
