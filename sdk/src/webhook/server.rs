//! [`WebhookServer`]: HTTPS for the apiserver's admission and conversion
//! calls, with the serving certificate reloaded from its files.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::DefaultBodyLimit;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio_rustls::TlsAcceptor;
use tokio_util::sync::CancellationToken;

use super::admission::{self, AdmissionHandler};
use super::conversion::{self, ConvertKind};
use super::error::WebhookError;
use super::https;
use super::tls::{self, CertificateReloader, DEFAULT_RELOAD_INTERVAL};
use super::webhooks::{CONVERSION_PATH, Webhooks};

/// The usual webhook port (controller-runtime's and kubebuilder's).
pub const DEFAULT_PORT: u16 = 9443;
/// Where the certificate is read from by default (controller-runtime's
/// default): `tls.crt` and `tls.key` in this directory.
pub const DEFAULT_CERT_DIR: &str = "/tmp/k8s-webhook-server/serving-certs";

/// The largest review accepted (a conversion of a whole list can be large).
const BODY_LIMIT: usize = 32 * 1024 * 1024;

/// The options of a webhook server. [`bind`](Self::bind) it, or give it to
/// the manager with
/// [`ManagerBuilder::webhook_server`](crate::manager::ManagerBuilder::webhook_server),
/// which serves it from [`run`](crate::manager::Manager::run) on (before
/// the caches sync, since reading a converted kind needs the conversion
/// webhook), adds the `webhook` readiness check, and stops it last.
///
/// | option | default |
/// |---|---|
/// | [`bind_address`](Self::bind_address) | `0.0.0.0:9443` |
/// | [`cert_dir`](Self::cert_dir) | `/tmp/k8s-webhook-server/serving-certs` (`tls.crt`, `tls.key`) |
/// | [`reload_interval`](Self::reload_interval) | 2 s |
/// | [`managed_certificate`](Self::managed_certificate) (feature `dev-cert`) | none: the files are mounted |
/// | [`local`](Self::local) (feature `dev-cert`) | none: the cluster calls the webhooks through its own configurations |
#[derive(Debug, Clone)]
pub struct WebhookServer {
    webhooks: Webhooks,
    bind_address: String,
    cert_file: PathBuf,
    key_file: PathBuf,
    reload_interval: Duration,
    #[cfg(feature = "dev-cert")]
    managed: Option<super::ManagedCertificate>,
    #[cfg(feature = "dev-cert")]
    injector: Option<super::managed_cert::CaInjector>,
    #[cfg(feature = "dev-cert")]
    local: Option<super::LocalWebhooks>,
    /// A local server's listener, bound before its certificate is issued
    /// for the address (shared so the server stays `Clone`).
    #[cfg(feature = "dev-cert")]
    prebound: Option<Arc<std::net::TcpListener>>,
    #[cfg(feature = "dev-cert")]
    registered: Option<super::local::Registered>,
}

impl WebhookServer {
    /// A server answering `webhooks`, with the defaults above.
    pub fn new(webhooks: Webhooks) -> Self {
        let dir = PathBuf::from(DEFAULT_CERT_DIR);
        Self {
            webhooks,
            bind_address: format!("0.0.0.0:{DEFAULT_PORT}"),
            cert_file: dir.join("tls.crt"),
            key_file: dir.join("tls.key"),
            reload_interval: DEFAULT_RELOAD_INTERVAL,
            #[cfg(feature = "dev-cert")]
            managed: None,
            #[cfg(feature = "dev-cert")]
            injector: None,
            #[cfg(feature = "dev-cert")]
            local: None,
            #[cfg(feature = "dev-cert")]
            prebound: None,
            #[cfg(feature = "dev-cert")]
            registered: None,
        }
    }

    /// Listen on `address` (`"0.0.0.0:9443"`, `":9443"`, `"127.0.0.1:0"`
    /// for any free port).
    pub fn bind_address(mut self, address: impl Into<String>) -> Self {
        let address = address.into();
        self.bind_address = match address.strip_prefix(':') {
            Some(port) => format!("0.0.0.0:{port}"),
            None => address,
        };
        self
    }

    /// Read `tls.crt` and `tls.key` from `dir` (where a `kubernetes.io/tls`
    /// Secret is mounted).
    pub fn cert_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        let dir = dir.into();
        self.cert_file = dir.join("tls.crt");
        self.key_file = dir.join("tls.key");
        self
    }

    /// Read the certificate chain (PEM) from `cert_file` and its private key
    /// (PEM) from `key_file`.
    pub fn cert_files(
        mut self,
        cert_file: impl Into<PathBuf>,
        key_file: impl Into<PathBuf>,
    ) -> Self {
        self.cert_file = cert_file.into();
        self.key_file = key_file.into();
        self
    }

    /// Check the certificate files for a change this often (default 2 s).
    pub fn reload_interval(mut self, interval: Duration) -> Self {
        self.reload_interval = interval.max(Duration::from_millis(10));
        self
    }

    /// Have the manager issue the certificate, keep it in a Secret and
    /// inject its CA (see [`ManagedCertificate`](super::ManagedCertificate));
    /// it is written to the [cert files](Self::cert_dir) before they are
    /// read. Needs the manager's client: [`bind`](Self::bind) alone refuses.
    #[cfg(feature = "dev-cert")]
    #[cfg_attr(docsrs, doc(cfg(feature = "dev-cert")))]
    pub fn managed_certificate(mut self, certificate: super::ManagedCertificate) -> Self {
        self.managed = Some(certificate);
        self
    }

    /// Serve the webhooks for an apiserver on this machine, registered by
    /// URL while the server runs, with a certificate issued for the bound
    /// address (see [`LocalWebhooks`](super::LocalWebhooks)): what `make
    /// run` does. The [cert files](Self::cert_dir) are not read.
    #[cfg(feature = "dev-cert")]
    #[cfg_attr(docsrs, doc(cfg(feature = "dev-cert")))]
    pub fn local(mut self, local: super::LocalWebhooks) -> Self {
        self.local = Some(local);
        self
    }

    /// Provisions the [managed certificate](Self::managed_certificate) or
    /// the [local registration](Self::local), if any, with `client` (of the
    /// apiserver at `api_url`); the manager calls it before
    /// [`bind`](Self::bind). `false`: the server is to be left out (a local
    /// one, for an apiserver that is not on this machine; said in a
    /// warning).
    pub(crate) async fn provision(
        &mut self,
        client: &kube::Client,
        api_url: &str,
    ) -> Result<bool, WebhookError> {
        #[cfg(feature = "dev-cert")]
        if let Some(local) = self.local.take() {
            if !super::LocalWebhooks::apiserver_is_on_this_host(api_url) {
                tracing::warn!(
                    apiserver = %api_url,
                    "webhooks not served: the apiserver is not on this machine, so it could not \
                     call them here; they are served in the cluster (`make deploy`), or run with \
                     ENABLE_WEBHOOKS=true and a certificate the cluster trusts"
                );
                return Ok(false);
            }
            self.webhooks.check_paths()?;
            let listener = std::net::TcpListener::bind(&self.bind_address).map_err(|source| {
                WebhookError::Bind {
                    address: self.bind_address.clone(),
                    source,
                }
            })?;
            let address = listener.local_addr().map_err(|source| WebhookError::Bind {
                address: self.bind_address.clone(),
                source,
            })?;
            let (registered, cert, key) = local.register(client, &self.webhooks, address).await?;
            self.cert_file = cert;
            self.key_file = key;
            self.prebound = Some(Arc::new(listener));
            self.registered = Some(registered);
        }
        #[cfg(not(feature = "dev-cert"))]
        let _ = api_url;
        #[cfg(feature = "dev-cert")]
        if let Some(managed) = self.managed.take() {
            let ca_pem = managed
                .provision(client, &self.cert_file, &self.key_file)
                .await?;
            self.injector = Some(super::managed_cert::CaInjector {
                certificate: managed,
                client: client.clone(),
                ca_pem,
            });
        }
        #[cfg(not(feature = "dev-cert"))]
        let _ = client;
        Ok(true)
    }

    /// Reads the certificate and binds the address; nothing is served
    /// until [`BoundWebhookServer::serve`].
    pub async fn bind(self) -> Result<BoundWebhookServer, WebhookError> {
        #[cfg(feature = "dev-cert")]
        if self.managed.is_some() || self.local.is_some() {
            return Err(WebhookError::NoClientForManagedCertificate);
        }
        self.webhooks.check_paths()?;
        let certificates = CertificateReloader::load(&self.cert_file, &self.key_file)?;
        let tls = Arc::new(tls::server_config(Arc::clone(&certificates))?);
        let bind_error = |source| WebhookError::Bind {
            address: self.bind_address.clone(),
            source,
        };
        #[cfg(feature = "dev-cert")]
        let prebound = match &self.prebound {
            Some(listener) => Some(
                listener
                    .try_clone()
                    .and_then(|l| l.set_nonblocking(true).map(|()| l))
                    .and_then(TcpListener::from_std)
                    .map_err(bind_error)?,
            ),
            None => None,
        };
        #[cfg(not(feature = "dev-cert"))]
        let prebound: Option<TcpListener> = None;
        let listener = match prebound {
            Some(listener) => listener,
            None => TcpListener::bind(&self.bind_address)
                .await
                .map_err(bind_error)?,
        };
        Ok(BoundWebhookServer {
            router: router(&self.webhooks),
            listener,
            tls,
            certificates,
            reload_interval: self.reload_interval,
            serving: Arc::new(AtomicBool::new(false)),
            #[cfg(feature = "dev-cert")]
            injector: self.injector,
            #[cfg(feature = "dev-cert")]
            registered: self.registered,
        })
    }
}

/// A webhook server with its address bound and certificate loaded.
pub struct BoundWebhookServer {
    router: Router,
    listener: TcpListener,
    tls: Arc<rustls::ServerConfig>,
    certificates: Arc<CertificateReloader>,
    reload_interval: Duration,
    serving: Arc<AtomicBool>,
    #[cfg(feature = "dev-cert")]
    injector: Option<super::managed_cert::CaInjector>,
    #[cfg(feature = "dev-cert")]
    registered: Option<super::local::Registered>,
}

impl std::fmt::Debug for BoundWebhookServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BoundWebhookServer")
            .field("address", &self.local_addr())
            .field("certificates", &self.certificates)
            .finish_non_exhaustive()
    }
}

/// Whether a webhook server is serving: the `webhook` readiness check.
#[derive(Debug, Clone)]
pub(crate) struct WebhookReadiness {
    serving: Arc<AtomicBool>,
}

impl WebhookReadiness {
    /// `Ok` while the server accepts connections with a loaded certificate.
    pub(crate) fn check(&self) -> Result<(), String> {
        if self.serving.load(Ordering::Acquire) {
            Ok(())
        } else {
            Err("the webhook server is not serving".to_owned())
        }
    }
}

impl BoundWebhookServer {
    /// The address bound (with port 0, the port chosen).
    pub fn local_addr(&self) -> Option<SocketAddr> {
        self.listener.local_addr().ok()
    }

    /// The readiness of this server, for a `/readyz` check.
    pub(crate) fn readiness(&self) -> WebhookReadiness {
        WebhookReadiness {
            serving: Arc::clone(&self.serving),
        }
    }

    /// Counts the certificates loaded (1 at first, one more per reload):
    /// wait on it to know a rotated certificate is being served.
    pub fn certificate_loads(&self) -> watch::Receiver<u64> {
        self.certificates.loads()
    }

    /// Serves until `stop` is cancelled, then lets requests in flight finish
    /// (for up to 5 s).
    pub async fn serve(self, stop: CancellationToken) -> Result<(), WebhookError> {
        let address = self.local_addr();
        let acceptor = TlsAcceptor::from(self.tls);
        let watcher = tokio::spawn(
            Arc::clone(&self.certificates).watch(self.reload_interval, stop.child_token()),
        );
        #[cfg(feature = "dev-cert")]
        let injector = self
            .injector
            .map(|injector| tokio::spawn(injector.run(stop.child_token())));
        self.serving.store(true, Ordering::Release);
        match address {
            Some(address) => tracing::info!(server = "webhook", address = %address, "serving"),
            None => tracing::info!(server = "webhook", "serving (address unknown)"),
        }
        https::serve(
            "webhook",
            self.listener,
            acceptor,
            self.router,
            stop.clone(),
        )
        .await;
        self.serving.store(false, Ordering::Release);
        watcher.abort();
        let _ = watcher.await;
        #[cfg(feature = "dev-cert")]
        if let Some(injector) = injector {
            injector.abort();
            let _ = injector.await;
        }
        #[cfg(feature = "dev-cert")]
        if let Some(registered) = self.registered {
            registered.remove().await;
        }
        tracing::info!(server = "webhook", "stopped");
        Ok(())
    }
}

fn router(webhooks: &Webhooks) -> Router {
    let mut router = Router::new();
    for entry in &webhooks.admission {
        let handler: Arc<dyn AdmissionHandler> = Arc::clone(&entry.handler);
        router = router.route(
            &entry.path,
            post(move |body: Bytes| {
                let handler = Arc::clone(&handler);
                async move { json(admission::review(handler.as_ref(), &body).await) }
            }),
        );
    }
    if !webhooks.conversions.is_empty() {
        let kinds: Arc<[Arc<dyn ConvertKind>]> = webhooks.conversions.clone().into();
        router = router.route(
            CONVERSION_PATH,
            post(move |body: Bytes| {
                let kinds = Arc::clone(&kinds);
                async move { json(conversion::review(&kinds, &body)) }
            }),
        );
    }
    router.layer(DefaultBodyLimit::max(BODY_LIMIT))
}

fn json((status, body): (u16, Vec<u8>)) -> Response {
    let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    (status, [(header::CONTENT_TYPE, "application/json")], body).into_response()
}
