//! Typed errors of `opkit::webhook`.

use std::path::PathBuf;

/// Why a webhook server could not be set up or stopped serving.
#[derive(Debug, thiserror::Error)]
pub enum WebhookError {
    /// A certificate or key file could not be read.
    #[error(
        "cannot read the webhook server's {what} {path}: {source}; mount the serving certificate \
         there (a Secret of type kubernetes.io/tls), or generate one for development with \
         `DevCertificate`"
    )]
    ReadFile {
        /// `certificate` or `private key`.
        what: &'static str,
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A certificate or key file holds no usable PEM block.
    #[error("the webhook server's {what} {path} holds no PEM {expected}: {reason}")]
    Pem {
        /// `certificate` or `private key`.
        what: &'static str,
        /// The file.
        path: PathBuf,
        /// What was looked for (`CERTIFICATE`, `PRIVATE KEY`).
        expected: &'static str,
        /// The parser's message.
        reason: String,
    },
    /// The certificate and key do not make a usable pair.
    #[error(
        "the webhook server's certificate {cert} and key {key} cannot be used together: {reason}"
    )]
    InvalidCertificate {
        /// The certificate file.
        cert: PathBuf,
        /// The key file.
        key: PathBuf,
        /// Why (an unsupported key type, or a key that does not match the certificate).
        reason: String,
    },
    /// The TLS settings could not be built.
    #[error("cannot configure TLS for the webhook server: {0}")]
    Tls(String),
    /// The address could not be bound.
    #[error(
        "cannot listen on {address} for the webhook server: {source}; choose another \
         address (port 9443 is the usual one)"
    )]
    Bind {
        /// The address as given.
        address: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// Accepting connections failed for good.
    #[error("the webhook server failed: {0}")]
    Serve(#[source] std::io::Error),
    /// Two webhooks were registered on the same path.
    #[error(
        "two webhooks are registered on the path {path}; give one of them another path with \
         WebhookOptions::path"
    )]
    DuplicatePath {
        /// The path.
        path: String,
    },
    /// A development certificate could not be generated.
    #[cfg(feature = "dev-cert")]
    #[cfg_attr(docsrs, doc(cfg(feature = "dev-cert")))]
    #[error("cannot generate the development certificate ({what}): {source}")]
    Generate {
        /// Which part.
        what: &'static str,
        /// Why.
        #[source]
        source: rcgen::Error,
    },
    /// A file could not be written.
    #[error("cannot write {path}: {source}")]
    WriteFile {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// Reading or writing the managed certificate's Secret, or injecting
    /// its CA, failed.
    #[cfg(feature = "dev-cert")]
    #[cfg_attr(docsrs, doc(cfg(feature = "dev-cert")))]
    #[error(
        "managing the webhook certificate: {action} {object} failed: {source}; check the \
         manager's RBAC (ManagedCertificate::rbac_rules) and that the namespace exists"
    )]
    ManagedCertificate {
        /// What was being done.
        action: &'static str,
        /// The object (`Secret ns/name`, `CustomResourceDefinition name`).
        object: String,
        /// The API error.
        #[source]
        source: Box<kube::Error>,
    },
    /// The Secret another replica stored lacks a part or was issued for
    /// other hosts.
    #[cfg(feature = "dev-cert")]
    #[cfg_attr(docsrs, doc(cfg(feature = "dev-cert")))]
    #[error(
        "the webhook certificate {secret} lacks ca.crt, tls.crt or tls.key, or was issued for \
         other host names; delete it and restart the manager to issue a new one"
    )]
    UnusableSecret {
        /// `Secret ns/name`.
        secret: String,
    },
    /// Registering the webhooks of a [`LocalWebhooks`](super::LocalWebhooks)
    /// server with the apiserver failed (nothing stays registered).
    #[cfg(feature = "dev-cert")]
    #[cfg_attr(docsrs, doc(cfg(feature = "dev-cert")))]
    #[error(
        "serving the webhooks locally: {action} {object} failed: {source}; the kubeconfig's \
         user needs to create, patch and delete webhook configurations and patch the CRDs \
         (an admin's, as for `make install`)"
    )]
    LocalRegistration {
        /// What was being done.
        action: &'static str,
        /// The object (`ValidatingWebhookConfiguration name`, ...).
        object: String,
        /// The API error.
        #[source]
        source: Box<kube::Error>,
    },
    /// A managed certificate was asked for without a client to reach the
    /// cluster (a server bound outside a manager).
    #[error(
        "the webhook server's certificate is managed (ManagedCertificate or LocalWebhooks) \
         but no client was given: serve it from a Manager"
    )]
    NoClientForManagedCertificate,
}
