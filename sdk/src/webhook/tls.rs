//! The webhook server's serving certificate: read from a certificate and a
//! key file, and read again when either file changes, so a rotated
//! certificate (cert-manager renewing a Secret, the kubelet updating the
//! mounted volume) is served without a restart.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::RwLock;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::error::WebhookError;

/// How often the certificate files are checked for a change by default
/// (the webhook server's and the secure metrics server's).
pub const DEFAULT_RELOAD_INTERVAL: Duration = Duration::from_secs(2);

/// The certificate in use and the file contents it came from.
struct Loaded {
    cert_bytes: Vec<u8>,
    key_bytes: Vec<u8>,
    key: Arc<CertifiedKey>,
}

/// Hands rustls the current certificate for every handshake, and swaps it
/// when the files change (see [`CertificateReloader::watch`]).
pub(crate) struct CertificateReloader {
    cert_path: PathBuf,
    key_path: PathBuf,
    provider: Arc<CryptoProvider>,
    current: RwLock<Loaded>,
    /// Counts the certificates loaded (1 after the first).
    loads: watch::Sender<u64>,
}

impl std::fmt::Debug for CertificateReloader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CertificateReloader")
            .field("cert_path", &self.cert_path)
            .field("key_path", &self.key_path)
            .field("loads", &*self.loads.borrow())
            .finish_non_exhaustive()
    }
}

/// The crypto provider of every webhook TLS connection: ring, as kube's
/// client uses.
pub(crate) fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// A server configuration that serves the reloader's certificate, over
/// HTTP/1.1.
pub(crate) fn server_config(
    reloader: Arc<CertificateReloader>,
) -> Result<rustls::ServerConfig, WebhookError> {
    let mut config = rustls::ServerConfig::builder_with_provider(Arc::clone(&reloader.provider))
        .with_safe_default_protocol_versions()
        .map_err(|e| WebhookError::Tls(e.to_string()))?
        .with_no_client_auth()
        .with_cert_resolver(reloader);
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(config)
}

impl CertificateReloader {
    /// Reads the pair once; fails with a clear error if it is missing or
    /// unusable.
    pub(crate) fn load(cert_path: &Path, key_path: &Path) -> Result<Arc<Self>, WebhookError> {
        let provider = provider();
        let (cert_bytes, key_bytes) = read_pair(cert_path, key_path)?;
        let key = certified_key(&provider, cert_path, key_path, &cert_bytes, &key_bytes)?;
        let (loads, _) = watch::channel(1);
        Ok(Arc::new(Self {
            cert_path: cert_path.to_owned(),
            key_path: key_path.to_owned(),
            provider,
            current: RwLock::new(Loaded {
                cert_bytes,
                key_bytes,
                key,
            }),
            loads,
        }))
    }

    /// Reads both files and, if either changed and the new pair is usable,
    /// serves it from the next handshake on. `Ok(true)` when a new
    /// certificate was loaded; an error (the old certificate stays) when the
    /// files changed into something unusable, e.g. half-way through an
    /// update of the two files.
    pub(crate) fn reload_if_changed(&self) -> Result<bool, WebhookError> {
        let (cert_bytes, key_bytes) = read_pair(&self.cert_path, &self.key_path)?;
        {
            let current = self.current.read();
            if current.cert_bytes == cert_bytes && current.key_bytes == key_bytes {
                return Ok(false);
            }
        }
        let key = certified_key(
            &self.provider,
            &self.cert_path,
            &self.key_path,
            &cert_bytes,
            &key_bytes,
        )?;
        *self.current.write() = Loaded {
            cert_bytes,
            key_bytes,
            key,
        };
        self.loads.send_modify(|n| *n += 1);
        tracing::info!(
            cert = %self.cert_path.display(),
            key = %self.key_path.display(),
            "serving certificate reloaded"
        );
        Ok(true)
    }

    #[cfg(feature = "webhook")]
    /// How many certificates were loaded so far; changes on every reload.
    pub(crate) fn loads(&self) -> watch::Receiver<u64> {
        self.loads.subscribe()
    }

    /// Checks the files every `interval` until `stop` is cancelled. A
    /// failed check keeps the current certificate and is logged once per
    /// distinct error, so a pair caught mid-update is simply retried.
    pub(crate) async fn watch(self: Arc<Self>, interval: Duration, stop: CancellationToken) {
        let mut tick = tokio::time::interval(interval);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        tick.tick().await;
        let mut last_error: Option<String> = None;
        loop {
            tokio::select! {
                () = stop.cancelled() => return,
                _ = tick.tick() => {}
            }
            match self.reload_if_changed() {
                Ok(_) => last_error = None,
                Err(error) => {
                    let text = error.to_string();
                    if last_error.as_deref() != Some(text.as_str()) {
                        tracing::warn!(%error, "serving certificate not reloaded; serving the previous one");
                        last_error = Some(text);
                    }
                }
            }
        }
    }
}

impl ResolvesServerCert for CertificateReloader {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(Arc::clone(&self.current.read().key))
    }
}

fn read_pair(cert_path: &Path, key_path: &Path) -> Result<(Vec<u8>, Vec<u8>), WebhookError> {
    let read = |what, path: &Path| {
        std::fs::read(path).map_err(|source| WebhookError::ReadFile {
            what,
            path: path.to_owned(),
            source,
        })
    };
    Ok((
        read("certificate", cert_path)?,
        read("private key", key_path)?,
    ))
}

/// Parses a PEM certificate chain and key and checks that they match.
fn certified_key(
    provider: &CryptoProvider,
    cert_path: &Path,
    key_path: &Path,
    cert_bytes: &[u8],
    key_bytes: &[u8],
) -> Result<Arc<CertifiedKey>, WebhookError> {
    let chain = CertificateDer::pem_slice_iter(cert_bytes)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| WebhookError::Pem {
            what: "certificate",
            path: cert_path.to_owned(),
            expected: "CERTIFICATE",
            reason: e.to_string(),
        })?;
    if chain.is_empty() {
        return Err(WebhookError::Pem {
            what: "certificate",
            path: cert_path.to_owned(),
            expected: "CERTIFICATE",
            reason: "the file has no CERTIFICATE block".to_owned(),
        });
    }
    let key = PrivateKeyDer::from_pem_slice(key_bytes).map_err(|e| WebhookError::Pem {
        what: "private key",
        path: key_path.to_owned(),
        expected: "PRIVATE KEY",
        reason: e.to_string(),
    })?;
    let key = CertifiedKey::from_der(chain, key, provider).map_err(|e| {
        WebhookError::InvalidCertificate {
            cert: cert_path.to_owned(),
            key: key_path.to_owned(),
            reason: e.to_string(),
        }
    })?;
    Ok(Arc::new(key))
}

#[cfg(test)]
#[cfg(feature = "dev-cert")]
mod tests {
    use super::*;
    use crate::webhook::DevCertificate;

    #[test]
    fn loads_and_reloads_only_on_change() {
        let dir = tempfile::tempdir().unwrap();
        let first = DevCertificate::generate(&["127.0.0.1"]).unwrap();
        let (cert, key) = first.write_to(dir.path()).unwrap();
        let reloader = CertificateReloader::load(&cert, &key).unwrap();
        assert!(!reloader.reload_if_changed().unwrap());
        assert_eq!(*reloader.loads().borrow(), 1);

        let second = DevCertificate::generate(&["127.0.0.1"]).unwrap();
        // Only the certificate changed: the pair does not match, the old one stays.
        std::fs::write(&cert, second.cert_pem()).unwrap();
        let error = reloader.reload_if_changed().unwrap_err();
        assert!(
            matches!(error, WebhookError::InvalidCertificate { .. }),
            "{error}"
        );
        assert_eq!(*reloader.loads().borrow(), 1);

        std::fs::write(&key, second.key_pem()).unwrap();
        assert!(reloader.reload_if_changed().unwrap());
        assert_eq!(*reloader.loads().borrow(), 2);
    }

    #[test]
    fn missing_and_garbage_files_are_named() {
        let dir = tempfile::tempdir().unwrap();
        let cert = dir.path().join("tls.crt");
        let key = dir.path().join("tls.key");
        let error = CertificateReloader::load(&cert, &key).unwrap_err();
        assert!(error.to_string().contains("tls.crt"), "{error}");
        std::fs::write(&cert, "not pem").unwrap();
        std::fs::write(&key, "not pem").unwrap();
        let error = CertificateReloader::load(&cert, &key).unwrap_err();
        assert!(
            matches!(
                error,
                WebhookError::Pem {
                    what: "certificate",
                    ..
                }
            ),
            "{error}"
        );
    }
}
