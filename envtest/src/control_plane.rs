//! [`ControlPlane`]: a real etcd and kube-apiserver on loopback.

use std::net::{Ipv4Addr, TcpListener};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::config::KubeConfigOptions;
use tempfile::TempDir;
use tokio::sync::OnceCell;

use super::assets::{Binaries, DEFAULT_KUBERNETES_VERSION, find_binaries};
use super::error::{EnvtestError, Result};
use super::kubeconfig::{self, Credentials};
use super::pki::Pki;
use super::process::{ChildProcess, Lifetime};

/// How often readiness is polled while a process starts.
const POLL_INTERVAL: Duration = Duration::from_millis(50);
/// How many times a start is retried when another process took a port.
const PORT_RACE_ATTEMPTS: usize = 3;
/// Prefix of the temporary directory of each control plane.
const DIR_PREFIX: &str = "opkit-envtest-";

/// Options for starting a [`ControlPlane`]; see [`ControlPlane::builder`].
#[derive(Debug, Clone)]
pub struct ControlPlaneBuilder {
    kubernetes_version: String,
    binaries: Option<Binaries>,
    etcd_compaction_interval: Option<Duration>,
    extra_apiserver_args: Vec<String>,
    start_timeout: Duration,
    /// Where kube-apiserver listens and what it advertises (loopback unless
    /// a [`Cluster`](super::Cluster) gives it the host end of its node link).
    pub(crate) address: Ipv4Addr,
    /// Key material made by the caller (a cluster signs more with its CA).
    pub(crate) pki: Option<Arc<Pki>>,
    /// Serve a whole cluster: ServiceAccount admission on, Node authorizer
    /// and NodeRestriction admission for the kubelet.
    pub(crate) cluster_mode: bool,
    /// The Service IP range (`--service-cluster-ip-range`): a cluster gives
    /// each control plane its own.
    pub(crate) service_cidr: String,
    /// Where a control plane that outlives this process goes (see
    /// [`ControlPlane::shared`]): its processes are detached and its
    /// directory is kept.
    detached_in: Option<PathBuf>,
}

/// The Service IP range of a control plane started on its own.
const DEFAULT_SERVICE_CIDR: &str = "10.0.0.0/16";

impl Default for ControlPlaneBuilder {
    fn default() -> Self {
        Self {
            kubernetes_version: DEFAULT_KUBERNETES_VERSION.to_owned(),
            binaries: None,
            etcd_compaction_interval: None,
            extra_apiserver_args: Vec::new(),
            start_timeout: Duration::from_secs(60),
            address: Ipv4Addr::LOCALHOST,
            pki: None,
            cluster_mode: false,
            service_cidr: DEFAULT_SERVICE_CIDR.to_owned(),
            detached_in: None,
        }
    }
}

impl ControlPlaneBuilder {
    /// Which release's binaries to look for in the build cache (default
    /// `v1.36.3`). `KUBEBUILDER_ASSETS` and `OPKIT_ASSETS` are used as they are.
    pub fn kubernetes_version(mut self, version: impl Into<String>) -> Self {
        self.kubernetes_version = version.into();
        self
    }

    /// Use these binaries instead of searching for them.
    pub fn binaries(
        mut self,
        etcd: impl Into<PathBuf>,
        kube_apiserver: impl Into<PathBuf>,
    ) -> Self {
        self.binaries = Some(Binaries {
            etcd: etcd.into(),
            kube_apiserver: kube_apiserver.into(),
        });
        self
    }

    /// How often kube-apiserver compacts etcd (`--etcd-compaction-interval`,
    /// default 5 min). A short interval makes old resourceVersions expire
    /// quickly, so watches from them fail with 410 Gone.
    pub fn etcd_compaction_interval(mut self, interval: Duration) -> Self {
        self.etcd_compaction_interval = Some(interval);
        self
    }

    /// Pass an extra flag to kube-apiserver, e.g. `--feature-gates=...`.
    /// Later flags override earlier ones, including the defaults.
    pub fn apiserver_arg(mut self, arg: impl Into<String>) -> Self {
        self.extra_apiserver_args.push(arg.into());
        self
    }

    /// Where kube-apiserver listens and what it advertises (default
    /// `127.0.0.1`); its serving certificate names the address too. Give it
    /// the host end of a [`Cluster`](super::Cluster)'s node link (the
    /// address in `cluster.control_plane().server_url()`) for a control
    /// plane the cluster's pods can reach, e.g. a member cluster of a
    /// multicluster operator that runs in a pod. The address must be one of
    /// this host's.
    pub fn address(mut self, address: Ipv4Addr) -> Self {
        self.address = address;
        self
    }

    /// How long to wait for each process to become ready (default 60 s).
    pub fn start_timeout(mut self, timeout: Duration) -> Self {
        self.start_timeout = timeout;
        self
    }

    /// Starts etcd and kube-apiserver and waits until the apiserver's
    /// `/readyz` answers `ok`.
    pub async fn start(self) -> Result<ControlPlane> {
        let binaries = match self.binaries.clone() {
            Some(b) => b,
            None => find_binaries(&self.kubernetes_version)?,
        };
        remove_stale_dirs(DIR_PREFIX);
        let prefix = format!("{DIR_PREFIX}{}-", std::process::id());
        let mut builder = tempfile::Builder::new();
        let builder = builder.prefix(&prefix);
        let created = match &self.detached_in {
            Some(parent) => builder.tempdir_in(parent),
            None => builder.tempdir(),
        };
        let dir = created.map_err(|source| EnvtestError::Io {
            what: "creating a temporary directory",
            path: self.detached_in.clone().unwrap_or_else(std::env::temp_dir),
            source,
        })?;
        let pki = match self.pki.clone() {
            Some(pki) => pki,
            None if self.address.is_loopback() => Arc::new(Pki::generate(&[])?),
            None => Arc::new(Pki::generate(&[self.address.to_string()])?),
        };
        let files = write_pki(dir.path(), &pki)?;
        let begun = Instant::now();
        let mut attempt = 0;
        loop {
            attempt += 1;
            match self.start_once(&binaries, &dir, &pki, &files).await {
                Ok(plane) => {
                    tracing::info!(
                        apiserver = %plane.server_url,
                        elapsed_ms = begun.elapsed().as_millis() as u64,
                        dir = %dir.path().display(),
                        "control plane ready"
                    );
                    return Ok(plane.finish(dir, binaries));
                }
                Err(e) if attempt < PORT_RACE_ATTEMPTS && is_port_race(&e) => {
                    tracing::warn!(attempt, error = %e, "port taken while starting; retrying on new ports");
                }
                Err(e) => return Err(e),
            }
        }
    }

    fn lifetime(&self) -> Lifetime {
        if self.detached_in.is_some() {
            Lifetime::Detached
        } else {
            Lifetime::OfThisProcess
        }
    }

    async fn start_once(
        &self,
        binaries: &Binaries,
        dir: &TempDir,
        pki: &Pki,
        files: &PkiFiles,
    ) -> Result<Started> {
        let [etcd_port, peer_port, apiserver_port] = free_ports()?;
        let etcd_url = format!("http://127.0.0.1:{etcd_port}");
        let data_dir = dir.path().join(format!("etcd-{etcd_port}"));
        let etcd_args = etcd_args(&data_dir, &etcd_url, peer_port);
        let etcd = ChildProcess::spawn_as(
            "etcd",
            &binaries.etcd,
            &etcd_args,
            dir.path().join("etcd.log"),
            self.lifetime(),
        )?;
        wait_for_etcd(&etcd, &etcd_url, self.start_timeout).await?;

        let server_url = format!("https://{}:{apiserver_port}", self.address);
        let mut apiserver_args = apiserver_args(
            self.address,
            apiserver_port,
            &etcd_url,
            files,
            self.cluster_mode,
            &self.service_cidr,
        );
        if let Some(interval) = self.etcd_compaction_interval {
            apiserver_args.push(format!(
                "--etcd-compaction-interval={}ms",
                interval.as_millis()
            ));
        }
        apiserver_args.extend(self.extra_apiserver_args.iter().cloned());

        let admin_kubeconfig = kubeconfig::build(
            &server_url,
            &pki.ca_pem,
            Credentials::Certificate {
                cert_pem: &pki.admin_cert_pem,
                key_pem: &pki.admin_key_pem,
            },
            None,
        );
        let kubeconfig_path = dir.path().join("kubeconfig");
        let text = kubeconfig::to_json(&admin_kubeconfig)
            .map_err(|e| EnvtestError::Kubeconfig(format!("serializing: {e}")))?;
        write_file(&kubeconfig_path, &text)?;
        let admin_config =
            kube::Config::from_custom_kubeconfig(admin_kubeconfig, &KubeConfigOptions::default())
                .await
                .map_err(|e| EnvtestError::Kubeconfig(e.to_string()))?;

        let apiserver = spawn_apiserver(binaries, dir.path(), &apiserver_args, self.lifetime())?;
        wait_for_apiserver(&apiserver, &etcd, &admin_config, self.start_timeout).await?;
        Ok(Started {
            etcd,
            apiserver,
            apiserver_args,
            server_url,
            ca_pem: pki.ca_pem.clone(),
            admin_config,
            kubeconfig_path,
            start_timeout: self.start_timeout,
        })
    }
}

/// A started etcd + kube-apiserver pair, before it is wrapped in a [`ControlPlane`].
struct Started {
    etcd: ChildProcess,
    apiserver: ChildProcess,
    apiserver_args: Vec<String>,
    server_url: String,
    ca_pem: String,
    admin_config: kube::Config,
    kubeconfig_path: PathBuf,
    start_timeout: Duration,
}

impl Started {
    fn finish(self, dir: TempDir, binaries: Binaries) -> ControlPlane {
        ControlPlane {
            apiserver: Mutex::new(Some(self.apiserver)),
            etcd: Mutex::new(Some(Arc::new(self.etcd))),
            apiserver_args: self.apiserver_args,
            server_url: self.server_url,
            ca_pem: self.ca_pem,
            admin_config: self.admin_config,
            kubeconfig_path: self.kubeconfig_path,
            start_timeout: self.start_timeout,
            binaries,
            dir: Mutex::new(Some(dir)),
            shared_dir: None,
        }
    }
}

/// A running etcd and kube-apiserver on loopback, with TLS, RBAC and an admin
/// identity. Both processes are killed and the temporary directory removed
/// on [`stop`](Self::stop) or drop, even when a test panics; they also die
/// with the test process if it is killed.
#[derive(Debug)]
pub struct ControlPlane {
    // Field order matters for drop: processes die before the directory goes.
    apiserver: Mutex<Option<ChildProcess>>,
    etcd: Mutex<Option<Arc<ChildProcess>>>,
    apiserver_args: Vec<String>,
    server_url: String,
    ca_pem: String,
    admin_config: kube::Config,
    kubeconfig_path: PathBuf,
    start_timeout: Duration,
    binaries: Binaries,
    dir: Mutex<Option<TempDir>>,
    /// The directory of a plane shared across processes, which this one
    /// only attached to (no processes, no directory of its own).
    shared_dir: Option<PathBuf>,
}

impl ControlPlane {
    /// Options for starting a control plane.
    pub fn builder() -> ControlPlaneBuilder {
        ControlPlaneBuilder::default()
    }

    /// Starts a control plane with the default options.
    pub async fn start() -> Result<Self> {
        Self::builder().start().await
    }

    /// One control plane for the whole test process, started on first use.
    ///
    /// Tests that do not need a private control plane share this one and save
    /// the start-up time. It is never dropped: its processes die with the test
    /// process, and its directory is removed by the next start in a later
    /// process. Give each test its own namespace to keep tests apart.
    ///
    /// With `OPKIT_SHARED_PLANES=DIR` set (`make test` sets it, as its
    /// runner gives each test a process of its own), the plane is one per
    /// test binary across processes instead: the first test of a binary
    /// starts it, detached, in `DIR/<binary>/`, and the binary's later tests
    /// attach to it, so every test of a binary shares one plane as when
    /// they ran in one process. Whoever set `DIR` stops its processes (the
    /// PIDs in `DIR/<binary>/pids`) when the run ends.
    pub async fn shared() -> Result<&'static Self> {
        static SHARED: OnceCell<std::result::Result<ControlPlane, String>> = OnceCell::const_new();
        // A failed start is remembered: every test reports it, none retries it.
        let started = SHARED
            .get_or_init(|| async {
                match std::env::var_os(SHARED_PLANES_ENV).filter(|d| !d.is_empty()) {
                    Some(root) => shared_across_processes(Path::new(&root)).await,
                    None => Self::start().await,
                }
                .map_err(|e| e.to_string())
            })
            .await;
        started
            .as_ref()
            .map_err(|e| EnvtestError::SharedUnavailable(e.clone()))
    }

    /// A client authenticated as the admin (`system:masters`).
    ///
    /// Each call builds a new client; a `kube::Client` belongs to the tokio
    /// runtime it was created on, so create it where you use it.
    pub fn client(&self) -> Result<kube::Client> {
        Ok(kube::Client::try_from(self.admin_config.clone())?)
    }

    /// The admin's `kube::Config`, for building clients with extra layers.
    pub fn config(&self) -> &kube::Config {
        &self.admin_config
    }

    /// A client that acts as `user` in `groups`: the apiserver authorizes
    /// every request for that identity (plus `system:authenticated`), so RBAC
    /// rules apply to it exactly as to a real user.
    ///
    /// The client authenticates with the admin certificate and impersonates
    /// the identity, as `kubectl --as=USER --as-group=GROUP` does.
    pub fn client_as(&self, user: &str, groups: &[&str]) -> Result<kube::Client> {
        Ok(kube::Client::try_from(self.config_as(user, groups))?)
    }

    /// The `kube::Config` behind [`client_as`](Self::client_as).
    pub fn config_as(&self, user: &str, groups: &[&str]) -> kube::Config {
        let mut config = self.admin_config.clone();
        config.auth_info.impersonate = Some(user.to_owned());
        config.auth_info.impersonate_groups =
            (!groups.is_empty()).then(|| groups.iter().map(|g| (*g).to_owned()).collect());
        config
    }

    /// A client that authenticates with a bearer token, e.g. a
    /// service-account token from the TokenRequest API.
    pub fn client_with_token(&self, token: &str) -> Result<kube::Client> {
        let mut config = self.admin_config.clone();
        config.auth_info = kube::config::AuthInfo {
            token: Some(token.to_owned().into()),
            ..kube::config::AuthInfo::default()
        };
        Ok(kube::Client::try_from(config)?)
    }

    /// Writes a kubeconfig that authenticates with `token` to `path`, for
    /// running an operator binary as a service account.
    pub fn write_token_kubeconfig(&self, token: &str, path: &Path) -> Result<()> {
        let kc = kubeconfig::build(
            &self.server_url,
            &self.ca_pem,
            Credentials::Token(token),
            None,
        );
        let text = kubeconfig::to_json(&kc)
            .map_err(|e| EnvtestError::Kubeconfig(format!("serializing: {e}")))?;
        write_file(path, &text)
    }

    /// Installs CustomResourceDefinitions as the admin (server-side apply)
    /// and waits until each is `Established`, so custom resources of those
    /// kinds can be created as soon as this returns.
    ///
    /// ```no_run
    /// # use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    /// # async fn example(plane: &opkit_envtest::ControlPlane, crd: CustomResourceDefinition) -> opkit_envtest::Result<()> {
    /// plane.install_crds(&[crd]).await?;
    /// # Ok(()) }
    /// ```
    pub async fn install_crds(&self, crds: &[CustomResourceDefinition]) -> Result<()> {
        super::crds::install(&self.client()?, crds, self.start_timeout).await
    }

    /// The admin kubeconfig file; `kubectl --kubeconfig <path>` works with it.
    pub fn kubeconfig_path(&self) -> &Path {
        &self.kubeconfig_path
    }

    /// The apiserver's URL, `https://127.0.0.1:<port>`.
    pub fn server_url(&self) -> &str {
        &self.server_url
    }

    /// The CA certificate (PEM) that signed the apiserver's serving certificate.
    pub fn ca_pem(&self) -> &str {
        &self.ca_pem
    }

    /// The binaries this control plane runs.
    pub fn binaries(&self) -> &Binaries {
        &self.binaries
    }

    /// The last lines of kube-apiserver's log, for test failure messages.
    pub fn apiserver_log_tail(&self) -> String {
        match (self.apiserver.lock().ok().as_deref(), &self.shared_dir) {
            (Some(Some(p)), _) => p.log_tail(),
            (_, Some(dir)) => {
                super::process::tail_of_file(&dir.join("kube-apiserver.log"), LOG_TAIL_LINES)
            }
            _ => "(kube-apiserver is not running)".to_owned(),
        }
    }

    /// The OS process ids of etcd and kube-apiserver (0 once stopped).
    pub fn pids(&self) -> (u32, u32) {
        let etcd = self
            .etcd
            .lock()
            .ok()
            .and_then(|p| p.as_ref().map(|p| p.pid()));
        let apiserver = self
            .apiserver
            .lock()
            .ok()
            .and_then(|p| p.as_ref().map(ChildProcess::pid));
        (etcd.unwrap_or(0), apiserver.unwrap_or(0))
    }

    /// Stops kube-apiserver and starts it again on the same port and etcd,
    /// waiting until it is ready. Open watches break; resourceVersions stay
    /// valid (nothing in etcd changes).
    pub async fn restart_apiserver(&self) -> Result<()> {
        if let Ok(mut guard) = self.apiserver.lock() {
            // Dropping the old process kills and reaps it, freeing the port.
            guard.take();
        }
        let dir = self
            .dir
            .lock()
            .ok()
            .and_then(|d| d.as_ref().map(|d| d.path().to_owned()))
            .ok_or(EnvtestError::Stopped)?;
        let apiserver = spawn_apiserver(
            &self.binaries,
            &dir,
            &self.apiserver_args,
            Lifetime::OfThisProcess,
        )?;
        let etcd = self
            .etcd
            .lock()
            .ok()
            .and_then(|e| e.as_ref().map(Arc::clone))
            .ok_or(EnvtestError::Stopped)?;
        wait_for_apiserver(&apiserver, &etcd, &self.admin_config, self.start_timeout).await?;
        if let Ok(mut guard) = self.apiserver.lock() {
            *guard = Some(apiserver);
        }
        Ok(())
    }

    /// Kills both processes and removes the temporary directory. Dropping the
    /// control plane does the same; calling `stop` twice is harmless.
    pub fn stop(&self) {
        // The apiserver first, so it does not log a lost etcd on the way out.
        if let Ok(mut apiserver) = self.apiserver.lock() {
            apiserver.take();
        }
        if let Ok(mut etcd) = self.etcd.lock() {
            etcd.take();
        }
        if let Ok(mut dir) = self.dir.lock()
            && let Some(dir) = dir.take()
        {
            let path = dir.path().to_owned();
            if let Err(error) = dir.close() {
                tracing::warn!(path = %path.display(), %error, "could not remove the control plane's directory");
            }
        }
    }
}

impl Drop for ControlPlane {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The environment variable naming where [`ControlPlane::shared`] keeps
/// planes shared across processes (one per test binary).
const SHARED_PLANES_ENV: &str = "OPKIT_SHARED_PLANES";
/// How many log lines an attached plane's failure message quotes.
const LOG_TAIL_LINES: usize = 25;

/// The plane of this test binary under `root`: started (detached) by the
/// first process that asks, under a lock, and attached to by the rest.
async fn shared_across_processes(root: &Path) -> Result<ControlPlane> {
    let io = |what: &'static str, path: &Path| {
        let path = path.to_owned();
        move |source| EnvtestError::Io { what, path, source }
    };
    std::fs::create_dir_all(root).map_err(io("creating the shared planes' directory", root))?;
    // One plane per test binary: its file name holds cargo's hash, so two
    // binaries of one package get two planes, as two processes did.
    let exe = std::env::current_exe().map_err(io("finding the test binary", root))?;
    let key = exe
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "tests".to_owned());
    let dir = root.join(&key);
    let lock_path = root.join(format!("{key}.lock"));
    let root = root.to_owned();
    // The lock is held while the first process starts the plane (seconds):
    // off the runtime's threads.
    let joined = tokio::task::spawn_blocking(move || {
        let lock = std::fs::File::create(&lock_path)
            .map_err(io("creating the shared plane's lock", &lock_path))?;
        lock.lock()
            .map_err(io("locking the shared plane", &lock_path))?;
        if !dir.join("ready").exists() {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map_err(io("starting a runtime", &dir))?;
            runtime.block_on(start_detached(&root, &dir))?;
        }
        Ok::<_, EnvtestError>(dir)
    })
    .await;
    let dir = joined.map_err(|e| EnvtestError::SharedUnavailable(e.to_string()))??;
    attach(&dir).await
}

/// Starts a plane whose processes outlive this one, writes what
/// [`attach`] reads into `dir`, then `dir/ready`.
async fn start_detached(root: &Path, dir: &Path) -> Result<()> {
    let builder = ControlPlaneBuilder {
        detached_in: Some(root.to_owned()),
        ..ControlPlaneBuilder::default()
    };
    let plane = builder.start().await?;
    let own_dir = plane
        .dir
        .lock()
        .ok()
        .and_then(|mut d| d.take())
        .ok_or(EnvtestError::Stopped)?
        .keep();
    let mut pids = String::new();
    for process in [
        plane.apiserver.lock().ok().and_then(|mut p| p.take()),
        plane
            .etcd
            .lock()
            .ok()
            .and_then(|mut p| p.take())
            .and_then(|p| Arc::try_unwrap(p).ok()),
    ]
    .into_iter()
    .flatten()
    {
        let pid = process.pid();
        if let Some(start) = super::footprint::start_time(pid) {
            pids.push_str(&format!("{pid} {start}\n"));
        }
        process.detach();
    }
    write_file(&own_dir.join("pids"), &pids)?;
    write_file(&own_dir.join("server-url"), &plane.server_url)?;
    write_file(
        &own_dir.join("apiserver-args"),
        &plane.apiserver_args.join("\n"),
    )?;
    // etcd and kube-apiserver keep using their files by path: the plane's
    // name for this binary is a link to the directory, not a move of it.
    std::os::unix::fs::symlink(&own_dir, dir).map_err(|source| EnvtestError::Io {
        what: "linking the shared plane's directory",
        path: dir.to_owned(),
        source,
    })?;
    write_file(&dir.join("ready"), "")?;
    tracing::info!(dir = %dir.display(), apiserver = %plane.server_url, "shared control plane started for this test binary");
    Ok(())
}

/// A [`ControlPlane`] for the plane another process started in `dir`.
async fn attach(dir: &Path) -> Result<ControlPlane> {
    let read = |name: &str| {
        let path = dir.join(name);
        std::fs::read_to_string(&path).map_err(|source| EnvtestError::Io {
            what: "reading the shared plane",
            path,
            source,
        })
    };
    let kubeconfig_path = dir.join("kubeconfig");
    let kubeconfig = kube::config::Kubeconfig::read_from(&kubeconfig_path)
        .map_err(|e| EnvtestError::Kubeconfig(e.to_string()))?;
    let admin_config =
        kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
            .await
            .map_err(|e| EnvtestError::Kubeconfig(e.to_string()))?;
    Ok(ControlPlane {
        apiserver: Mutex::new(None),
        etcd: Mutex::new(None),
        apiserver_args: read("apiserver-args")?.lines().map(str::to_owned).collect(),
        server_url: read("server-url")?,
        ca_pem: read("ca.crt")?,
        admin_config,
        kubeconfig_path,
        start_timeout: ControlPlaneBuilder::default().start_timeout,
        binaries: find_binaries(DEFAULT_KUBERNETES_VERSION)?,
        dir: Mutex::new(None),
        shared_dir: Some(dir.to_owned()),
    })
}

/// Paths of the key material kube-apiserver reads.
struct PkiFiles {
    ca: PathBuf,
    serving_cert: PathBuf,
    serving_key: PathBuf,
    sa_key: PathBuf,
    sa_pub: PathBuf,
}

fn write_file(path: &Path, contents: &str) -> Result<()> {
    std::fs::write(path, contents).map_err(|source| EnvtestError::Io {
        what: "writing a file",
        path: path.to_owned(),
        source,
    })
}

fn write_pki(dir: &Path, pki: &Pki) -> Result<PkiFiles> {
    let files = PkiFiles {
        ca: dir.join("ca.crt"),
        serving_cert: dir.join("apiserver.crt"),
        serving_key: dir.join("apiserver.key"),
        sa_key: dir.join("sa.key"),
        sa_pub: dir.join("sa.pub"),
    };
    write_file(&files.ca, &pki.ca_pem)?;
    write_file(&files.serving_cert, &pki.serving_cert_pem)?;
    write_file(&files.serving_key, &pki.serving_key_pem)?;
    write_file(&files.sa_key, &pki.service_account_key_pem)?;
    write_file(&files.sa_pub, &pki.service_account_pub_pem)?;
    Ok(files)
}

/// Three distinct free loopback ports. Another process may take one before we
/// bind it; [`ControlPlaneBuilder::start`] retries when that happens.
fn free_ports() -> Result<[u16; 3]> {
    let bind = || {
        TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).map_err(|source| EnvtestError::Io {
            what: "finding a free port",
            path: PathBuf::from("127.0.0.1:0"),
            source,
        })
    };
    // Hold all three listeners at once so the ports are distinct.
    let listeners = [bind()?, bind()?, bind()?];
    let mut ports = [0u16; 3];
    for (port, listener) in ports.iter_mut().zip(&listeners) {
        *port = listener
            .local_addr()
            .map_err(|source| EnvtestError::Io {
                what: "finding a free port",
                path: PathBuf::from("127.0.0.1:0"),
                source,
            })?
            .port();
    }
    Ok(ports)
}

pub(crate) fn is_port_race(error: &EnvtestError) -> bool {
    match error {
        EnvtestError::ExitedEarly { tail, .. } | EnvtestError::NotReady { tail, .. } => {
            tail.contains("address already in use")
        }
        _ => false,
    }
}

fn etcd_args(data_dir: &Path, client_url: &str, peer_port: u16) -> Vec<String> {
    let peer_url = format!("http://127.0.0.1:{peer_port}");
    vec![
        "--name=default".to_owned(),
        format!("--data-dir={}", data_dir.display()),
        format!("--listen-client-urls={client_url}"),
        format!("--advertise-client-urls={client_url}"),
        format!("--listen-peer-urls={peer_url}"),
        format!("--initial-advertise-peer-urls={peer_url}"),
        format!("--initial-cluster=default={peer_url}"),
        "--unsafe-no-fsync=true".to_owned(),
        "--log-level=warn".to_owned(),
    ]
}

fn apiserver_args(
    address: Ipv4Addr,
    port: u16,
    etcd_url: &str,
    files: &PkiFiles,
    cluster_mode: bool,
    service_cidr: &str,
) -> Vec<String> {
    let mut args = vec![
        format!("--advertise-address={address}"),
        format!("--bind-address={address}"),
        format!("--secure-port={port}"),
        format!("--etcd-servers={etcd_url}"),
        format!("--tls-cert-file={}", files.serving_cert.display()),
        format!("--tls-private-key-file={}", files.serving_key.display()),
        format!("--client-ca-file={}", files.ca.display()),
        "--service-account-issuer=https://kubernetes.default.svc.cluster.local".to_owned(),
        format!("--service-account-key-file={}", files.sa_pub.display()),
        format!(
            "--service-account-signing-key-file={}",
            files.sa_key.display()
        ),
        format!("--service-cluster-ip-range={service_cidr}"),
        "--allow-privileged=true".to_owned(),
        "--profiling=false".to_owned(),
        // KEP-5866 (alpha in 1.36): list/watch with `shardSelector`, what
        // a sharded opkit cache asks for. A later `--feature-gates` flag
        // (`apiserver_arg`) adds to or overrides this one, key by key.
        "--feature-gates=ShardedListAndWatch=true".to_owned(),
    ];
    if cluster_mode {
        // A whole cluster: the controller-manager creates every namespace's
        // `default` ServiceAccount, so ServiceAccount admission stays on; the
        // kubelet is authorized by the Node authorizer and NodeRestriction.
        args.push("--authorization-mode=Node,RBAC".to_owned());
        args.push("--enable-admission-plugins=NodeRestriction".to_owned());
    } else {
        // No controller-manager runs to create each namespace's `default`
        // ServiceAccount, so the admission plugin would reject every Pod.
        args.push("--authorization-mode=RBAC".to_owned());
        args.push("--disable-admission-plugins=ServiceAccount".to_owned());
    }
    args
}

fn spawn_apiserver(
    binaries: &Binaries,
    dir: &Path,
    args: &[String],
    lifetime: Lifetime,
) -> Result<ChildProcess> {
    ChildProcess::spawn_as(
        "kube-apiserver",
        &binaries.kube_apiserver,
        args,
        dir.join("kube-apiserver.log"),
        lifetime,
    )
}

/// Polls `probe` until it returns `Ok`, failing early if a process exits.
/// What the probe's client logs is dropped (a refused connection per
/// attempt while the process starts would flood a test's output); instead
/// one line is logged each time the probe's answer changes.
pub(crate) async fn wait_until_ready<F, Fut>(
    process: &ChildProcess,
    also_alive: Option<&ChildProcess>,
    timeout: Duration,
    mut probe: F,
) -> Result<()>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = std::result::Result<(), String>>,
{
    use tracing::instrument::WithSubscriber as _;
    let begun = Instant::now();
    let mut state: Option<String> = None;
    loop {
        for p in std::iter::once(process).chain(also_alive) {
            if let Some(status) = p.exit_status() {
                return Err(p.exited_early(status));
            }
        }
        let answer = probe()
            .with_subscriber(tracing::subscriber::NoSubscriber::default())
            .await;
        let last_error = match answer {
            Ok(()) => return Ok(()),
            Err(e) => e,
        };
        if state.as_ref() != Some(&last_error) {
            tracing::info!(process = process.name(), answer = %last_error, "waiting until ready");
            state = Some(last_error.clone());
        }
        if begun.elapsed() >= timeout {
            return Err(EnvtestError::NotReady {
                name: process.name(),
                waited: timeout,
                last_error,
                log: process.log_path().to_owned(),
                tail: process.log_tail(),
            });
        }
        tokio::time::sleep(POLL_INTERVAL).await;
    }
}

async fn wait_for_etcd(etcd: &ChildProcess, url: &str, timeout: Duration) -> Result<()> {
    let uri: http::Uri = url
        .parse()
        .map_err(|e| EnvtestError::Kubeconfig(format!("bad etcd URL {url}: {e}")))?;
    let client = kube::Client::try_from(kube::Config::new(uri))?;
    wait_until_ready(etcd, None, timeout, || {
        let client = client.clone();
        async move {
            let request = http::Request::get("/health")
                .body(Vec::new())
                .map_err(|e| e.to_string())?;
            let body = client
                .request_text(request)
                .await
                .map_err(|e| e.to_string())?;
            if body.contains("\"health\":\"true\"") {
                Ok(())
            } else {
                Err(format!("etcd /health answered {body}"))
            }
        }
    })
    .await
}

async fn wait_for_apiserver(
    apiserver: &ChildProcess,
    etcd: &ChildProcess,
    config: &kube::Config,
    timeout: Duration,
) -> Result<()> {
    let client = kube::Client::try_from(config.clone())?;
    wait_until_ready(apiserver, Some(etcd), timeout, || {
        let client = client.clone();
        async move {
            let request = http::Request::get("/readyz")
                .body(Vec::new())
                .map_err(|e| e.to_string())?;
            match client.request_text(request).await {
                Ok(body) if body.trim() == "ok" => Ok(()),
                Ok(body) => Err(format!("/readyz answered {body}")),
                Err(kube::Error::Api(status)) => Err(failing_checks(&status.message)),
                Err(e) => Err(e.to_string()),
            }
        }
    })
    .await
}

/// What a `/readyz` refusal (one `[+]name ok` or `[-]name failed: ...`
/// line per check) says, in one line: the checks still failing.
fn failing_checks(body: &str) -> String {
    let failing: Vec<&str> = body
        .lines()
        .filter_map(|line| line.strip_prefix("[-]"))
        .map(|line| line.split_whitespace().next().unwrap_or(line))
        .collect();
    if failing.is_empty() {
        format!(
            "/readyz refused: {}",
            body.lines().next().unwrap_or_default()
        )
    } else {
        format!("/readyz: waiting for {}", failing.join(", "))
    }
}

/// Removes directories named `<prefix><pid>-...` in the temporary directory
/// whose process no longer runs (a `shared()` control plane, or one whose
/// process was killed).
pub(crate) fn remove_stale_dirs(prefix: &str) {
    let Ok(entries) = std::fs::read_dir(std::env::temp_dir()) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(rest) = name.to_str().and_then(|n| n.strip_prefix(prefix)) else {
            continue;
        };
        let Some(pid) = rest.split('-').next().and_then(|p| p.parse::<u32>().ok()) else {
            continue;
        };
        if !Path::new(&format!("/proc/{pid}")).exists() {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_readyz_refusal_is_one_line_naming_the_failing_checks() {
        let body = "[+]ping ok\n[+]etcd ok\n[-]poststarthook/rbac/bootstrap-roles failed: not finished\n\
                    [-]poststarthook/crd-informer-synced failed: reason withheld\nreadyz check failed";
        assert_eq!(
            failing_checks(body),
            "/readyz: waiting for poststarthook/rbac/bootstrap-roles, poststarthook/crd-informer-synced"
        );
        assert_eq!(failing_checks("nope\nmore"), "/readyz refused: nope");
    }

    #[test]
    fn only_a_taken_port_counts_as_a_race() {
        let exited = |tail: &str| EnvtestError::ExitedEarly {
            name: "etcd",
            status: "exit status: 1".to_owned(),
            log: PathBuf::from("etcd.log"),
            tail: tail.to_owned(),
        };
        assert!(is_port_race(&exited(
            "listen tcp 127.0.0.1:2379: bind: address already in use"
        )));
        assert!(!is_port_race(&exited("open /data: permission denied")));
        assert!(!is_port_race(&EnvtestError::Kubeconfig("x".to_owned())));
    }

    #[test]
    fn free_ports_are_distinct() {
        let [a, b, c] = free_ports().unwrap();
        assert!(a != b && b != c && a != c);
    }
}
