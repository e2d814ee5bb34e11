//! [`DevCertificate`]: a throw-away CA and serving certificate for running
//! a webhook server on a laptop or in tests (feature `dev-cert`, which the
//! `opkit-envtest` crate enables). In a cluster, use cert-manager or another issuer instead.

use std::path::{Path, PathBuf};

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};

use super::error::WebhookError;

/// The file names [`DevCertificate::write_to`] writes, as a
/// `kubernetes.io/tls` Secret mounts them.
pub const CERT_FILE: &str = "tls.crt";
/// The private key's file name.
pub const KEY_FILE: &str = "tls.key";
/// The CA's file name.
pub const CA_FILE: &str = "ca.crt";

/// A self-made CA and a serving certificate it signed (ECDSA P-256), PEM
/// encoded. The CA goes into the webhook configurations' `caBundle`; the
/// certificate and key into the webhook server.
///
/// ```
/// use opkit::webhook::DevCertificate;
///
/// let dev = DevCertificate::generate(&["127.0.0.1", "localhost"])?;
/// assert!(dev.ca_pem().starts_with("-----BEGIN CERTIFICATE-----"));
/// let dir = tempfile::tempdir().unwrap();
/// let (cert, key) = dev.write_to(dir.path())?;
/// assert!(cert.ends_with("tls.crt") && key.ends_with("tls.key"));
/// # Ok::<(), opkit::webhook::WebhookError>(())
/// ```
#[derive(Clone)]
pub struct DevCertificate {
    ca_pem: String,
    cert_pem: String,
    key_pem: String,
}

impl std::fmt::Debug for DevCertificate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DevCertificate").finish_non_exhaustive()
    }
}

fn generate_err(what: &'static str) -> impl FnOnce(rcgen::Error) -> WebhookError {
    move |source| WebhookError::Generate { what, source }
}

impl DevCertificate {
    /// A new CA and a certificate for `hosts` (DNS names or IP addresses,
    /// e.g. `127.0.0.1` for envtest, or `my-webhook.my-ns.svc`).
    pub fn generate(hosts: &[&str]) -> Result<Self, WebhookError> {
        let ca_key = KeyPair::generate().map_err(generate_err("the CA key"))?;
        let mut ca =
            CertificateParams::new(Vec::<String>::new()).map_err(generate_err("the CA"))?;
        ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca.distinguished_name
            .push(DnType::CommonName, "opkit-webhook-dev-ca");
        ca.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let ca_cert = ca.self_signed(&ca_key).map_err(generate_err("the CA"))?;
        let issuer = Issuer::new(ca, ca_key);

        let key = KeyPair::generate().map_err(generate_err("the serving key"))?;
        let mut serving =
            CertificateParams::new(hosts.iter().map(|h| (*h).to_owned()).collect::<Vec<_>>())
                .map_err(generate_err("the serving certificate"))?;
        serving.distinguished_name.push(
            DnType::CommonName,
            hosts.first().copied().unwrap_or("webhook"),
        );
        serving.key_usages = vec![
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyEncipherment,
        ];
        serving.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        let cert = serving
            .signed_by(&key, &issuer)
            .map_err(generate_err("the serving certificate"))?;
        Ok(Self {
            ca_pem: ca_cert.pem(),
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
        })
    }

    /// A certificate read back (from a Secret).
    pub(crate) fn from_pems(ca_pem: String, cert_pem: String, key_pem: String) -> Self {
        Self {
            ca_pem,
            cert_pem,
            key_pem,
        }
    }

    /// Writes the pair to `cert` and `key` (mode 0600) and the CA to
    /// `ca.crt` beside the certificate, key last.
    pub(crate) fn write_pair(&self, cert: &Path, key: &Path) -> Result<(), WebhookError> {
        for dir in [cert.parent(), key.parent()].into_iter().flatten() {
            std::fs::create_dir_all(dir).map_err(|source| WebhookError::WriteFile {
                path: dir.to_owned(),
                source,
            })?;
        }
        let ca = cert.with_file_name(CA_FILE);
        write(&ca, &self.ca_pem, 0o644)?;
        write(cert, &self.cert_pem, 0o644)?;
        write(key, &self.key_pem, 0o600)
    }

    /// The CA certificate (PEM): the `caBundle` of the webhook configurations.
    pub fn ca_pem(&self) -> &str {
        &self.ca_pem
    }

    /// The serving certificate (PEM).
    pub fn cert_pem(&self) -> &str {
        &self.cert_pem
    }

    /// The serving certificate's private key (PEM, PKCS #8).
    pub fn key_pem(&self) -> &str {
        &self.key_pem
    }

    /// Writes `tls.crt`, `tls.key` (mode 0600) and `ca.crt` into `dir`
    /// (created if missing); returns the certificate's and the key's paths.
    /// The key is written last, so a reloading server never pairs a new key
    /// with an old certificate.
    pub fn write_to(&self, dir: &Path) -> Result<(PathBuf, PathBuf), WebhookError> {
        let cert = dir.join(CERT_FILE);
        let key = dir.join(KEY_FILE);
        self.write_pair(&cert, &key)?;
        Ok((cert, key))
    }
}

/// Writes `text` to `path` through a temporary file and a rename, so a
/// reader sees the old or the new content, never a mix.
fn write(path: &Path, text: &str, mode: u32) -> Result<(), WebhookError> {
    use std::os::unix::fs::PermissionsExt;
    let err = |source| WebhookError::WriteFile {
        path: path.to_owned(),
        source,
    };
    let mut partial = path.as_os_str().to_owned();
    partial.push(".partial");
    let partial = PathBuf::from(partial);
    std::fs::write(&partial, text).map_err(err)?;
    std::fs::set_permissions(&partial, std::fs::Permissions::from_mode(mode)).map_err(err)?;
    std::fs::rename(&partial, path).map_err(err)
}
