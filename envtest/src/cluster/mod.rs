//! [`Cluster`]: a whole single-node Kubernetes cluster from source — the
//! control plane, kube-controller-manager, kube-scheduler, and a node
//! (containerd, runc, the kubelet, kube-proxy, CNI bridge networking) in
//! namespaces of its own.
//!
//! ```no_run
//! use k8s_openapi::api::core::v1::Pod;
//! use kube::api::{Api, ListParams};
//! use opkit_envtest::Cluster;
//!
//! # async fn example() -> Result<(), Box<dyn std::error::Error>> {
//! let cluster = Cluster::start().await?;
//! println!("memcached image: {:?}", cluster.image("memcached"));
//! let pods: Api<Pod> = Api::namespaced(cluster.client()?, "default");
//! println!("{} pods", pods.list(&ListParams::default()).await?.items.len());
//! # Ok(()) }
//! ```
//!
//! # What runs
//!
//! - etcd and kube-apiserver, as in [`ControlPlane`], but listening on the
//!   host's end of the node link (`198.18.<slot>.1`) with ServiceAccount
//!   admission, the Node authorizer and NodeRestriction on.
//! - kube-controller-manager (each controller with its own service account)
//!   and kube-scheduler, on the host.
//! - The node `opkit-node`, inside PID, mount and network namespaces the
//!   cluster creates: containerd with runc and overlayfs, the kubelet
//!   (cgroupfs driver, pods under the cgroup `/opkit-cluster-<slot>`),
//!   kube-proxy (nftables mode), and a CNI bridge. A veth pair joins the
//!   node (`198.18.<slot>.2`) to the host.
//! - Networking, by construction local: each cluster has its own Service
//!   range (`10.96.<slot>.0/24`, see [`Cluster::service_cidr`]) and pod range
//!   (`10.244.<slot>.0/24`, [`Cluster::pod_cidr`]), and the host routes both
//!   whole ranges into the node — as kube-proxy gives a control-plane node,
//!   so kube-apiserver on the host reaches a webhook's Service by its
//!   ClusterIP with no extra step. kube-proxy in the node serves allocated
//!   ClusterIPs and drops or refuses the rest, and the node has no default
//!   route, so a packet for either range never leaves the machine. A
//!   cluster `without_node()` run as root makes both ranges `unreachable`
//!   on the host instead. The routes go with the cluster.
//! - Cluster DNS: CoreDNS (built by `tests/coredns/build.sh`) as a
//!   Deployment in `kube-system`, the `kube-dns` Service at
//!   [`Cluster::dns_service_ip`] (`10.96.<slot>.10`) and the kubelet's
//!   `clusterDNS` pointing pods at it: `<svc>.<ns>.svc.cluster.local` and
//!   `<svc>.<ns>` resolve from pods; names outside `cluster.local` are
//!   refused inside the node (nothing is forwarded). `start` returns once it
//!   answers; [`ClusterBuilder::without_dns`] leaves it out.
//! - Images are built by `tests/node/build-images.sh` (pause, a memcached
//!   packed from Debian's binary, a static busybox with every applet) and
//!   `tests/coredns/build.sh` (coredns), and imported into containerd at
//!   start; pods use them with `imagePullPolicy: IfNotPresent`.
//!
//! - With [`ClusterBuilder::with_registry`], a [`Registry`] on the host's
//!   end of the node link (plain HTTP), which the node's containerd pulls
//!   from: push to [`Cluster::registry`] and name the image in a pod.
//!
//! Stopping (or dropping) the cluster kills the namespaces' init, and with it
//! every process, mount, bridge and rule inside; then it removes the link,
//! the cgroups and the directory. If the test process dies instead, the
//! kernel does the same (the next cluster in the same slot clears the link
//! and cgroups). Needs root.

mod assets;
mod cgroups;
mod controllers;
mod dns;
mod dns_query;
mod files;
mod footprint;
mod namespaces;
mod network;
mod node;
mod node_name;
mod routes;

use std::net::{IpAddr, Ipv4Addr};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Node as NodeObject, ServiceAccount};
use kube::api::Api;
use tempfile::TempDir;

pub use assets::{
    DEFAULT_DNS_ASSETS, DEFAULT_IMAGES, DEFAULT_NODE_ASSETS, DnsAssets, ImageArchive, NodeAssets,
    find_dns_assets, find_images_dir, find_node_assets,
};
pub use dns::CLUSTER_DOMAIN;
pub use footprint::Footprint;
pub use network::Ipv4Cidr;
pub use node_name::NODE_NAME;

use super::control_plane::{ControlPlane, ControlPlaneBuilder};
use super::error::{EnvtestError, Result};
use super::pki::Pki;
use super::process::ChildProcess;
use super::registry::Registry;
use cgroups::NodeCgroups;
use controllers::Controllers;
use files::ClusterFiles;
use namespaces::{NodeLink, NodeNamespaces, SlotLease};
use network::ClusterNetwork;
use node::{Node, NodeDirs};
use routes::HostRoutes;

/// Prefix of each cluster's directory (followed by the owning process id).
const DIR_PREFIX: &str = "opkit-cluster-";
/// How often readiness is polled.
const POLL_INTERVAL: Duration = Duration::from_millis(100);

/// Options for starting a [`Cluster`]; see [`Cluster::builder`].
#[derive(Debug, Clone)]
pub struct ClusterBuilder {
    plane: ControlPlaneBuilder,
    with_node: bool,
    assets: Option<NodeAssets>,
    with_registry: bool,
    registry_login: Option<(String, String)>,
    with_dns: bool,
    start_timeout: Duration,
}

impl Default for ClusterBuilder {
    fn default() -> Self {
        Self {
            plane: ControlPlaneBuilder::default(),
            with_node: true,
            assets: None,
            with_registry: false,
            registry_login: None,
            with_dns: true,
            start_timeout: Duration::from_secs(90),
        }
    }
}

impl ClusterBuilder {
    /// Control plane and controllers only, on loopback: Deployments get
    /// ReplicaSets and Pods, the garbage collector and namespace deletion
    /// work, but no Pod is scheduled or runs. Needs no root.
    pub fn without_node(mut self) -> Self {
        self.with_node = false;
        self
    }

    /// Also start an OCI [`Registry`] the node pulls from: it listens on the
    /// host's end of the node link (loopback without a node), and the
    /// node's containerd is configured to pull `<host:port>/...` over plain
    /// HTTP. See [`Cluster::registry`].
    ///
    /// ```no_run
    /// use opkit_envtest::Cluster;
    ///
    /// # async fn example() -> Result<(), opkit_envtest::EnvtestError> {
    /// let cluster = Cluster::builder().with_registry().start().await?;
    /// let registry = cluster.registry().expect("started with_registry");
    /// // Push an image there (e.g. `cargo opkit image --push <ref> --insecure`),
    /// // then run a pod with `image: <ref>`.
    /// println!("{}", registry.reference("my-operator", "dev"));
    /// # Ok(()) }
    /// ```
    pub fn with_registry(mut self) -> Self {
        self.with_registry = true;
        self
    }

    /// [`with_registry`](Self::with_registry), the registry a private
    /// production one: HTTPS with a CA made for it, which the node's
    /// containerd trusts, and HTTP Basic authentication (htpasswd) for
    /// `username` and `password`, so a pod pulls from it only with an
    /// `imagePullSecrets` Secret. See [`RegistryBuilder::htpasswd`](crate::RegistryBuilder::htpasswd).
    ///
    /// ```no_run
    /// use opkit_envtest::Cluster;
    ///
    /// # async fn example() -> Result<(), opkit_envtest::EnvtestError> {
    /// let cluster = Cluster::builder().with_registry_auth("pusher", "s3cret").start().await?;
    /// let registry = cluster.registry().expect("started with a registry");
    /// println!("{} trusts {:?}", registry.host(), registry.ca_file());
    /// # Ok(()) }
    /// ```
    pub fn with_registry_auth(
        mut self,
        username: impl Into<String>,
        password: impl Into<String>,
    ) -> Self {
        self.with_registry = true;
        self.registry_login = Some((username.into(), password.into()));
        self
    }

    /// Leave out the cluster DNS (CoreDNS): `start` returns as soon as the
    /// node is Ready, and pods get no nameserver (the kubelet warns
    /// `MissingClusterDNS`). Without a node there is no DNS anyway.
    pub fn without_dns(mut self) -> Self {
        self.with_dns = false;
        self
    }

    /// Use these node assets instead of looking for them.
    pub fn node_assets(mut self, assets: NodeAssets) -> Self {
        self.assets = Some(assets);
        self
    }

    /// Adjust the control plane (extra apiserver flags, binaries, ...).
    pub fn control_plane(
        mut self,
        f: impl FnOnce(ControlPlaneBuilder) -> ControlPlaneBuilder,
    ) -> Self {
        self.plane = f(self.plane);
        self
    }

    /// How long to wait for each stage (default 90 s).
    pub fn start_timeout(mut self, timeout: Duration) -> Self {
        self.start_timeout = timeout;
        self
    }

    /// Starts everything and waits until the `default` ServiceAccount exists
    /// and (with a node) the node is `Ready` and the cluster DNS answers.
    pub async fn start(self) -> Result<Cluster> {
        let begun = Instant::now();
        let assets = match self.assets.clone() {
            Some(a) => a,
            None => find_node_assets()?,
        };
        let with_dns = self.with_node && self.with_dns;
        let dns_image = if with_dns {
            Some(find_dns_assets()?.image()?)
        } else {
            None
        };
        if self.with_node && !is_root() {
            return Err(EnvtestError::Unsupported(
                "running a node needs root (namespaces, cgroups, mounts); use `without_node()` \
                 for the control plane and controllers alone"
                    .to_owned(),
            ));
        }
        super::control_plane::remove_stale_dirs(DIR_PREFIX);
        let dir = tempfile::Builder::new()
            .prefix(&format!("{DIR_PREFIX}{}-", std::process::id()))
            .tempdir()
            .map_err(|source| EnvtestError::Io {
                what: "creating the cluster's directory",
                path: std::env::temp_dir(),
                source,
            })?;
        let mut footprint = Footprint::new(dir.path().to_owned());
        let mut parts = Parts::default();
        // Held by `parts` at once: on an early error it is released last.
        let slot: &SlotLease = parts.slot.insert(SlotLease::take()?);
        let network = ClusterNetwork::for_slot(slot.index());
        let ranges = [network.service, network.pod];
        if self.with_node {
            let namespaces = NodeNamespaces::create(
                &assets.bin("pause"),
                dir.path().join("node-init.log"),
                self.start_timeout,
            )?;
            footprint.add_init(namespaces.init_pid());
            let link = NodeLink::create(&slot.link_name(), &namespaces, slot.host_address())?;
            footprint.link = Some(slot.link_name());
            parts.namespaces = Some(namespaces);
            parts.link = Some(link);
            if let Some(namespaces) = &parts.namespaces {
                node::prepare_namespaces(namespaces, slot.node_address(), network.service)?;
            }
            parts.routes = Some(HostRoutes::into_node(
                &slot.link_name(),
                slot.node_address(),
                &ranges,
            )?);
            let cgroups = NodeCgroups::create(&slot.cgroup_name())?;
            footprint.cgroup = Some(slot.cgroup_name());
            parts.cgroups = Some(cgroups);
        } else if is_root() {
            // No node serves the ranges: refuse them on the host.
            parts.routes = Some(HostRoutes::unreachable(&ranges)?);
        } else {
            tracing::debug!(
                service_cidr = %network.service,
                "not root: the Service range of a cluster without a node is not routed"
            );
        }
        footprint.routes = parts
            .routes
            .as_ref()
            .map(|r| r.ranges().to_vec())
            .unwrap_or_default();
        let address = if self.with_node {
            slot.host_address()
        } else {
            Ipv4Addr::LOCALHOST
        };
        let node_address = self.with_node.then(|| slot.node_address());
        let pki = Arc::new(Pki::generate(&[
            address.to_string(),
            network.kubernetes_service_ip().to_string(),
        ])?);
        let files = ClusterFiles::write_certificates(
            dir.path(),
            &pki,
            node_address.unwrap_or(Ipv4Addr::LOCALHOST),
        )?;
        let mut plane_builder = self
            .plane
            .clone()
            .apiserver_arg(format!(
                "--kubelet-client-certificate={}",
                files.apiserver_kubelet_client_cert.display()
            ))
            .apiserver_arg(format!(
                "--kubelet-client-key={}",
                files.apiserver_kubelet_client_key.display()
            ))
            .apiserver_arg(format!(
                "--kubelet-certificate-authority={}",
                files.ca.display()
            ))
            .apiserver_arg("--kubelet-preferred-address-types=InternalIP".to_owned());
        plane_builder.address = address;
        plane_builder.pki = Some(Arc::clone(&pki));
        plane_builder.cluster_mode = true;
        plane_builder.service_cidr = network.service.to_string();
        let plane = plane_builder.start().await?;
        footprint.add_process(plane.pids().0);
        footprint.add_process(plane.pids().1);
        files.write_kubeconfigs(&pki, plane.server_url())?;

        let controllers = Controllers::start(&assets, &files, dir.path())?;
        footprint.add_process(controllers.controller_manager.pid());
        footprint.add_process(controllers.scheduler.pid());
        let registry = if self.with_registry {
            let mut builder = Registry::builder()
                .address(IpAddr::V4(address))
                .start_timeout(self.start_timeout);
            if let Some((username, password)) = &self.registry_login {
                builder = builder.htpasswd(username, password);
            }
            let registry = builder.start().await?;
            footprint.add_process(registry.pid());
            Some(registry)
        } else {
            None
        };
        let mut images = if self.with_node {
            assets.images()?
        } else {
            Vec::new()
        };
        images.extend(dns_image);
        let mut cluster = Cluster {
            node: Mutex::new(None),
            namespaces: Mutex::new(parts.namespaces.take()),
            routes: Mutex::new(parts.routes.take()),
            link: Mutex::new(parts.link.take()),
            cgroups: Mutex::new(parts.cgroups.take()),
            controllers: Mutex::new(Some(controllers)),
            registry,
            plane,
            images,
            node_address,
            network,
            with_dns,
            started_in: Duration::ZERO,
            start_timeout: self.start_timeout,
            footprint,
            dir: Mutex::new(Some(dir)),
            slot: Mutex::new(parts.slot.take()),
        };
        cluster.wait_for_default_service_account().await?;
        if let Some(node_address) = node_address {
            cluster.start_node(&assets, &files, node_address)?;
            if let Some(image) = cluster.image("coredns").filter(|_| with_dns) {
                // Once the node is registered, so the pod is scheduled at
                // once (before, it would wait out the scheduler's backoff);
                // it tolerates the node's not-ready taint.
                cluster
                    .wait_for_node("the node to register", |_| Ok(()))
                    .await?;
                dns::install(&cluster.client()?, image, network.dns_service_ip()).await?;
            }
            cluster.wait_for_node_ready().await?;
            let node_ready = begun.elapsed();
            if with_dns {
                cluster.wait_for_dns().await?;
                tracing::info!(
                    node_ready_ms = node_ready.as_millis() as u64,
                    dns_ready_ms = begun.elapsed().as_millis() as u64,
                    "cluster DNS answers"
                );
            }
        }
        cluster.footprint.record();
        cluster.started_in = begun.elapsed();
        tracing::info!(
            apiserver = %cluster.plane.server_url(),
            node = node_address.is_some(),
            elapsed_ms = cluster.started_in.as_millis() as u64,
            "cluster ready"
        );
        Ok(cluster)
    }
}

/// What is made before the [`Cluster`] value exists (dropped in reverse on
/// an early error).
#[derive(Default)]
struct Parts {
    namespaces: Option<NodeNamespaces>,
    routes: Option<HostRoutes>,
    link: Option<NodeLink>,
    cgroups: Option<NodeCgroups>,
    slot: Option<SlotLease>,
}

impl Drop for Parts {
    fn drop(&mut self) {
        self.namespaces.take();
        self.routes.take();
        self.link.take();
        self.cgroups.take();
        self.slot.take();
    }
}

fn is_root() -> bool {
    #[allow(unsafe_code)]
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe {
        libc::geteuid() == 0
    }
}

/// A running single-node cluster. Everything it started is stopped and
/// removed on [`stop`](Self::stop) or drop, even when a test panics.
#[derive(Debug)]
pub struct Cluster {
    // Field order is drop order: node processes, then their namespaces (which
    // takes every container with them), the host routes, the link, the
    // cgroups, the controllers, the control plane, the directory, and last
    // the slot.
    node: Mutex<Option<Node>>,
    namespaces: Mutex<Option<NodeNamespaces>>,
    routes: Mutex<Option<HostRoutes>>,
    link: Mutex<Option<NodeLink>>,
    cgroups: Mutex<Option<NodeCgroups>>,
    controllers: Mutex<Option<Controllers>>,
    registry: Option<Registry>,
    plane: ControlPlane,
    images: Vec<ImageArchive>,
    node_address: Option<Ipv4Addr>,
    network: ClusterNetwork,
    with_dns: bool,
    started_in: Duration,
    start_timeout: Duration,
    footprint: Footprint,
    dir: Mutex<Option<TempDir>>,
    slot: Mutex<Option<SlotLease>>,
}

impl Cluster {
    /// Options for starting a cluster.
    pub fn builder() -> ClusterBuilder {
        ClusterBuilder::default()
    }

    /// Starts a cluster with a node and the default options.
    pub async fn start() -> Result<Self> {
        Self::builder().start().await
    }

    fn start_node(
        &mut self,
        assets: &NodeAssets,
        files: &ClusterFiles,
        node_address: Ipv4Addr,
    ) -> Result<()> {
        let root = self.dir_path()?.join("node");
        let dirs = NodeDirs { root };
        let cgroup_root = self
            .cgroups
            .lock()
            .ok()
            .and_then(|c| c.as_ref().map(NodeCgroups::cgroup_root))
            .ok_or(EnvtestError::Stopped)?;
        let guard = self.namespaces.lock().map_err(|_| EnvtestError::Stopped)?;
        let namespaces = guard.as_ref().ok_or(EnvtestError::Stopped)?;
        let node = Node::start(
            namespaces,
            assets,
            files,
            &dirs,
            &self.images,
            node_address,
            self.network,
            self.with_dns.then(|| self.network.dns_service_ip()),
            &cgroup_root,
            self.registry.as_ref(),
            self.start_timeout,
        )?;
        drop(guard);
        for p in [&node.containerd, &node.proxy]
            .into_iter()
            .chain(node.kubelet.as_ref())
        {
            self.footprint.add_process(p.pid());
        }
        if let Ok(mut slot) = self.node.lock() {
            *slot = Some(node);
        }
        Ok(())
    }

    /// The control plane (etcd and kube-apiserver) of this cluster.
    pub fn control_plane(&self) -> &ControlPlane {
        &self.plane
    }

    /// A client authenticated as the admin (`system:masters`).
    pub fn client(&self) -> Result<kube::Client> {
        self.plane.client()
    }

    /// The admin kubeconfig file; `kubectl --kubeconfig <path>` works with it.
    pub fn kubeconfig_path(&self) -> &Path {
        self.plane.kubeconfig_path()
    }

    /// The node's IP address, `None` for a cluster started `without_node()`.
    pub fn node_address(&self) -> Option<Ipv4Addr> {
        self.node_address
    }

    /// This cluster's Service IP range (`10.96.<slot>.0/24`): ClusterIPs are
    /// allocated from it, and the host routes all of it into the node (or,
    /// without a node, makes it unreachable), so none of it leaves the
    /// machine.
    pub fn service_cidr(&self) -> Ipv4Cidr {
        self.network.service
    }

    /// This cluster's pod IP range (`10.244.<slot>.0/24`, the node's bridge),
    /// routed from the host into the node like the Service range.
    pub fn pod_cidr(&self) -> Ipv4Cidr {
        self.network.pod
    }

    /// The cluster DNS Service's (`kube-system/kube-dns`) ClusterIP, the
    /// pods' nameserver; `None` without a node or `without_dns()`.
    pub fn dns_service_ip(&self) -> Option<Ipv4Addr> {
        self.with_dns.then(|| self.network.dns_service_ip())
    }

    /// The reference of a built image by short name (`pause`, `memcached`,
    /// `busybox`, `coredns`), as pods must name it.
    pub fn image(&self, name: &str) -> Option<&str> {
        self.images
            .iter()
            .find(|i| i.name == name)
            .map(|i| i.reference.as_str())
    }

    /// The registry started by [`ClusterBuilder::with_registry`]: the node
    /// pulls `registry.reference(name, tag)` from it. `None` without it.
    pub fn registry(&self) -> Option<&Registry> {
        self.registry.as_ref()
    }

    /// How long [`ClusterBuilder::start`] took.
    pub fn started_in(&self) -> Duration {
        self.started_in
    }

    /// What this cluster started and made, to check that stopping removed it.
    pub fn footprint(&self) -> &Footprint {
        &self.footprint
    }

    /// The cluster's directory (logs of every component are here).
    pub fn dir_path(&self) -> Result<PathBuf> {
        self.dir
            .lock()
            .ok()
            .and_then(|d| d.as_ref().map(|d| d.path().to_owned()))
            .ok_or(EnvtestError::Stopped)
    }

    /// Kills the kubelet alone, as when it crashes: the node's containers go
    /// on running, and the node controller marks the node `NotReady` once
    /// its lease expires (about 16 s).
    pub fn stop_kubelet(&self) {
        if let Ok(mut node) = self.node.lock()
            && let Some(node) = node.as_mut()
        {
            node.stop_kubelet();
        }
    }

    async fn wait_for_default_service_account(&self) -> Result<()> {
        let accounts: Api<ServiceAccount> = Api::namespaced(self.client()?, "default");
        self.wait_for("the `default` ServiceAccount to be created", || {
            let accounts = accounts.clone();
            async move {
                match accounts.get_opt("default").await {
                    Ok(Some(_)) => Ok(()),
                    Ok(None) => Err("not yet created".to_owned()),
                    Err(e) => Err(e.to_string()),
                }
            }
        })
        .await
    }

    /// Waits until CoreDNS answers a query for the `kubernetes` Service from
    /// the host, through the `kube-dns` ClusterIP: the pod is Ready,
    /// kube-proxy serves the Service, and the host route leads there.
    async fn wait_for_dns(&self) -> Result<()> {
        let server = self.network.dns_service_ip();
        let name = format!("kubernetes.default.svc.{CLUSTER_DOMAIN}");
        self.wait_for("the cluster DNS to answer", || {
            let name = name.clone();
            async move {
                tokio::task::spawn_blocking(move || {
                    dns_query::resolves(server, &name, Duration::from_millis(200))
                })
                .await
                .map_err(|e| e.to_string())?
            }
        })
        .await
    }

    async fn wait_for_node_ready(&self) -> Result<()> {
        self.wait_for_node("the node to become Ready", |node| {
            let ready = node
                .status
                .and_then(|s| s.conditions)
                .unwrap_or_default()
                .into_iter()
                .find(|c| c.type_ == "Ready");
            match ready {
                Some(c) if c.status == "True" => Ok(()),
                Some(c) => Err(format!(
                    "Ready={} ({})",
                    c.status,
                    c.message.unwrap_or_default()
                )),
                None => Err("no Ready condition yet".to_owned()),
            }
        })
        .await
    }

    /// Waits until the node is registered and `check` accepts it.
    async fn wait_for_node(
        &self,
        what: &'static str,
        check: impl Fn(NodeObject) -> std::result::Result<(), String> + Copy,
    ) -> Result<()> {
        let nodes: Api<NodeObject> = Api::all(self.client()?);
        self.wait_for(what, || {
            let nodes = nodes.clone();
            async move {
                let node = nodes
                    .get_opt(NODE_NAME)
                    .await
                    .map_err(|e| e.to_string())?
                    .ok_or_else(|| "not registered yet".to_owned())?;
                check(node)
            }
        })
        .await
    }

    /// Polls `probe` until it succeeds, failing early (with its log) if a
    /// process of the cluster exits.
    async fn wait_for<F, Fut>(&self, what: &'static str, mut probe: F) -> Result<()>
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = std::result::Result<(), String>>,
    {
        let begun = Instant::now();
        loop {
            self.check_alive()?;
            let last_seen = match probe().await {
                Ok(()) => return Ok(()),
                Err(e) => e,
            };
            if begun.elapsed() > self.start_timeout {
                return Err(EnvtestError::ClusterTimeout {
                    what,
                    waited: self.start_timeout,
                    last_seen: format!(
                        "{last_seen}; logs are in {}",
                        self.dir_path().unwrap_or_default().display()
                    ),
                });
            }
            tokio::time::sleep(POLL_INTERVAL).await;
        }
    }

    fn check_alive(&self) -> Result<()> {
        let check = |p: &ChildProcess| match p.exit_status() {
            Some(status) => Err(p.exited_early(status)),
            None => Ok(()),
        };
        if let Ok(c) = self.controllers.lock()
            && let Some(c) = c.as_ref()
        {
            check(&c.controller_manager)?;
            check(&c.scheduler)?;
        }
        if let Ok(n) = self.node.lock()
            && let Some(n) = n.as_ref()
        {
            check(&n.containerd)?;
            check(&n.proxy)?;
            if let Some(k) = n.kubelet.as_ref() {
                check(k)?;
            }
        }
        Ok(())
    }

    /// Stops everything and removes what the cluster made: the node's
    /// namespaces (and every process, mount and rule in them), the host
    /// routes, the link, the
    /// cgroups, the controllers, the control plane and the directory.
    /// Dropping the cluster does the same; calling `stop` twice is harmless.
    pub fn stop(&self) {
        if let Ok(mut node) = self.node.lock() {
            node.take();
        }
        if let Ok(mut namespaces) = self.namespaces.lock() {
            namespaces.take();
        }
        if let Ok(mut routes) = self.routes.lock() {
            routes.take();
        }
        if let Ok(mut link) = self.link.lock() {
            link.take();
        }
        if let Ok(mut cgroups) = self.cgroups.lock() {
            cgroups.take();
        }
        if let Ok(mut controllers) = self.controllers.lock() {
            controllers.take();
        }
        if let Some(registry) = &self.registry {
            registry.stop();
        }
        self.plane.stop();
        if let Ok(mut dir) = self.dir.lock()
            && let Some(dir) = dir.take()
        {
            let path = dir.path().to_owned();
            if let Err(error) = dir.close() {
                tracing::warn!(path = %path.display(), %error, "could not remove the cluster's directory");
            }
        }
        if let Ok(mut slot) = self.slot.lock() {
            slot.take();
        }
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        self.stop();
    }
}
