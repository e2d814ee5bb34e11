//! [`SecureMetrics`]: `/metrics` over HTTPS, for authenticated and
//! authorized scrapers only.

use std::path::PathBuf;
use std::sync::Arc;

use axum::Router;
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;
use tokio_util::sync::CancellationToken;

use super::error::ManagerError;
use super::metrics_auth::{METRICS_PATH, MetricsAuth};
use super::scrape::scrape;
use crate::metrics::Metrics;
use crate::webhook::tls::{self, CertificateReloader};
use crate::webhook::{DEFAULT_RELOAD_INTERVAL, WebhookError};

/// Serve `/metrics` over HTTPS to authorized scrapers only, as
/// controller-runtime's `filters.WithAuthenticationAndAuthorization` and
/// kubebuilder's scaffold do. Give it to
/// [`ManagerBuilder::metrics_secure`](super::ManagerBuilder::metrics_secure).
///
/// ```no_run
/// use opkit::manager::{Manager, ManagerError, SecureMetrics};
///
/// # async fn example() -> Result<(), ManagerError> {
/// let manager = Manager::builder()
///     .metrics_bind_address(":8443")
///     // A self-signed certificate; `.cert_dir("/certs")` serves (and
///     // reloads) a mounted `tls.crt` / `tls.key` instead.
///     .metrics_secure(SecureMetrics::new())
///     .build()
///     .await?;
/// # Ok(()) }
/// ```
///
/// - **TLS**: a self-signed certificate made at start (for `localhost` and
///   `127.0.0.1`; scrapers skip verification, as with kubebuilder's
///   default), or `tls.crt` / `tls.key` from the [cert dir](Self::cert_dir),
///   read again when they change (checked every 2 s, like the webhook
///   server's: a pair caught half-written keeps the previous one).
/// - **Authentication**: the `Authorization: Bearer <token>` header is
///   checked with a `TokenReview`; no token or an invalid one answers 401.
/// - **Authorization**: the token's user must be allowed `get` on the
///   non-resource URL `/metrics` (a `SubjectAccessReview`), else 403. Bind
///   scrapers a ClusterRole like
///   [`rbac::metrics_reader_role`](crate::rbac::metrics_reader_role).
/// - **Cache**: decisions are kept per token (by its SHA-256) for **60 s**
///   when allowed and **10 s** when refused, so a scraper costs the API
///   server two reviews a minute, not two per scrape. An API server that
///   cannot be asked answers 500 and is asked again on the next scrape.
///
/// The manager's ServiceAccount needs `create` on `tokenreviews` and
/// `subjectaccessreviews` ([`Rules::metrics_auth`](crate::rbac::Rules::metrics_auth)).
/// The health probes stay plain HTTP (the kubelet probes them): give them
/// another address.
#[derive(Debug, Clone, Default)]
pub struct SecureMetrics {
    cert_dir: Option<PathBuf>,
}

impl SecureMetrics {
    /// HTTPS with a self-signed certificate, authentication and
    /// authorization on.
    pub fn new() -> Self {
        Self::default()
    }

    /// Serve `tls.crt` and `tls.key` from `dir` (a mounted
    /// `kubernetes.io/tls` Secret, e.g. cert-manager's), reloaded when they
    /// change, in place of a self-signed certificate.
    pub fn cert_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.cert_dir = Some(dir.into());
        self
    }

    /// The TLS settings and the reviewer, ready to serve with `client`.
    pub(crate) fn prepare(&self, client: &kube::Client) -> Result<Secured, ManagerError> {
        let error = |source: WebhookError| ManagerError::MetricsCertificate { source };
        let (config, reloader) = match &self.cert_dir {
            Some(dir) => {
                let reloader =
                    CertificateReloader::load(&dir.join("tls.crt"), &dir.join("tls.key"))
                        .map_err(error)?;
                let config = tls::server_config(Arc::clone(&reloader)).map_err(error)?;
                (config, Some(reloader))
            }
            None => (self_signed().map_err(error)?, None),
        };
        Ok(Secured {
            tls: Arc::new(config),
            reloader,
            auth: Arc::new(MetricsAuth::new(client.clone())),
        })
    }
}

/// A self-signed certificate for `localhost` and `127.0.0.1`, in memory.
fn self_signed() -> Result<rustls::ServerConfig, WebhookError> {
    let generated =
        rcgen::generate_simple_self_signed(vec!["localhost".to_owned(), "127.0.0.1".to_owned()])
            .map_err(|e| WebhookError::Tls(format!("generating a self-signed certificate: {e}")))?;
    let chain = vec![CertificateDer::from(generated.cert.der().to_vec())];
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(
        generated.signing_key.serialize_der(),
    ));
    let mut config = rustls::ServerConfig::builder_with_provider(tls::provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| WebhookError::Tls(e.to_string()))?
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .map_err(|e| WebhookError::Tls(e.to_string()))?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(config)
}

/// Secure metrics, set up: the TLS configuration, the certificate files
/// (when not self-signed) and the reviewer.
pub(crate) struct Secured {
    tls: Arc<rustls::ServerConfig>,
    reloader: Option<Arc<CertificateReloader>>,
    auth: Arc<MetricsAuth>,
}

impl std::fmt::Debug for Secured {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Secured")
            .field("certificate", &self.reloader)
            .finish_non_exhaustive()
    }
}

impl Secured {
    /// Serves `/metrics` on `listener` over HTTPS until `stop` is cancelled.
    pub(crate) async fn serve(
        self,
        listener: TcpListener,
        metrics: Metrics,
        stop: CancellationToken,
    ) {
        let watcher = self.reloader.map(|reloader| {
            tokio::spawn(reloader.watch(DEFAULT_RELOAD_INTERVAL, stop.child_token()))
        });
        let auth = self.auth;
        let router = Router::new().route(
            METRICS_PATH,
            get(move |headers: HeaderMap| {
                let auth = Arc::clone(&auth);
                let metrics = metrics.clone();
                async move { authorized_scrape(&auth, &headers, metrics).await }
            }),
        );
        crate::webhook::https::serve(
            "metrics",
            listener,
            TlsAcceptor::from(self.tls),
            router,
            stop,
        )
        .await;
        if let Some(watcher) = watcher {
            watcher.abort();
            let _ = watcher.await;
        }
    }
}

async fn authorized_scrape(auth: &MetricsAuth, headers: &HeaderMap, metrics: Metrics) -> Response {
    match auth.check(headers).await {
        Ok(()) => scrape(metrics).await,
        Err(refusal) => (
            refusal.status,
            [(
                axum::http::header::CONTENT_TYPE,
                "text/plain; charset=utf-8",
            )],
            refusal.body,
        )
            .into_response(),
    }
}
