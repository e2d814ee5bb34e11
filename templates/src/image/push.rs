//! Pushing the image by the OCI distribution API (`oci-client`): the layer
//! and the config as blobs, then the manifest under the reference's tag,
//! byte for byte as in the layout, so the registry's digest is the one
//! `cargo opkit image` printed. The manifest goes only after every blob
//! is in: a failed push never leaves a tag behind.
//!
//! Credentials are found as `docker` and `ko` find them (see
//! [`credentials`](super::credentials)); with a user name and password the
//! client signs in as the registry asks in `WWW-Authenticate`: HTTP Basic,
//! or a bearer token from the token service it names (Docker's token
//! protocol, oci-client's token flow), or an identity token exchanged at
//! that service for an access token (OAuth2 `refresh_token` grant).
//!
//! HTTPS trusts the system's roots, plus `--ca-file` and the CA files
//! Docker reads for the registry (`/etc/docker/certs.d/<host:port>/*.crt`,
//! and the same under `/etc/containers/certs.d`). Plain HTTP is used for a
//! registry on a loopback address (`localhost`, `127.0.0.0/8`, `[::1]`)
//! that has no CA configured, or when asked (`--insecure`).

use std::net::IpAddr;
use std::path::{Path, PathBuf};

use oci_client::client::{Certificate, CertificateEncoding, ClientConfig, ClientProtocol};
use oci_client::errors::{OciDistributionError, OciErrorCode};
use oci_client::secrets::RegistryAuth;
use oci_client::{Client, Reference, RegistryOperation};

use super::credentials::{self, Credential, Found, Login};
use super::error::ImageError;
use super::layout::{ImageBlobs, MANIFEST_MEDIA_TYPE};
use super::token;

/// Where Docker (and podman) look for a registry's CA files, by host.
const CERTS_DIRS: [&str; 2] = ["/etc/docker/certs.d", "/etc/containers/certs.d"];

/// How to reach the registry, and as whom.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PushOptions {
    /// Use plain HTTP even for a registry that is not on loopback.
    pub insecure: bool,
    /// Sign in with this user name and password instead of the credentials
    /// the Docker configuration holds for the registry.
    pub login: Option<Login>,
    /// Trust the CA certificates (PEM) in this file for the registry's
    /// HTTPS, besides the system's roots and `certs.d`.
    pub ca_file: Option<PathBuf>,
}

/// Parses an image reference (`host[:port]/name[:tag]`), which must name a
/// tag (a digest is what the push produces, not an input).
pub(crate) fn parse_reference(reference: &str) -> Result<Reference, ImageError> {
    let bad = |reason: String| ImageError::BadReference {
        reference: reference.to_owned(),
        reason,
    };
    let parsed: Reference = reference.parse().map_err(|e| bad(format!("{e}")))?;
    if parsed.digest().is_some() {
        return Err(bad(
            "name a tag (host:port/name:tag), not a digest: the digest is the push's result"
                .to_owned(),
        ));
    }
    Ok(parsed)
}

/// Whether `registry` (`host[:port]`) is on this machine's loopback.
pub(crate) fn is_loopback(registry: &str) -> bool {
    let host = match registry.rsplit_once(':') {
        // `[::1]:5000` or `host:5000`.
        Some((host, port)) if port.chars().all(|c| c.is_ascii_digit()) => host,
        _ => registry,
    };
    let host = host.trim_start_matches('[').trim_end_matches(']');
    host.eq_ignore_ascii_case("localhost")
        || host.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

/// Pushes `blobs` as `reference`; returns the manifest digest the registry
/// knows the image by.
pub(crate) async fn push(
    blobs: &ImageBlobs,
    reference: &str,
    options: &PushOptions,
) -> Result<String, ImageError> {
    let image = parse_reference(reference)?;
    let registry = image.resolve_registry().to_owned();
    let roots = trusted_certificates(&registry, options.ca_file.as_deref())?;
    let plain_http = options.insecure || (is_loopback(&registry) && roots.is_empty());
    let found = credentials::find(image.registry(), options.login.as_ref())?;
    tracing::info!(registry = %registry, credentials = %found.source, plain_http, "pushing");
    // reqwest is built without a default TLS provider: use ring, as kube does.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let config = ClientConfig {
        protocol: if plain_http {
            ClientProtocol::Http
        } else {
            ClientProtocol::Https
        },
        connect_timeout: Some(std::time::Duration::from_secs(10)),
        extra_root_certificates: roots.clone(),
        ..ClientConfig::default()
    };
    let client = Client::try_from(config).map_err(|e| ImageError::Push {
        reference: reference.to_owned(),
        step: "setting up the HTTPS client",
        detail: e.to_string(),
    })?;
    let scheme = if plain_http { "http" } else { "https" };
    let failed = |step: &'static str| {
        let registry = registry.clone();
        let found = &found;
        move |e: OciDistributionError| ImageError::Push {
            reference: reference.to_owned(),
            step,
            detail: explain(&e, &registry, scheme, found),
        }
    };
    let auth = match &found.auth {
        Credential::IdentityToken(refresh) => {
            let access = token::exchange_identity_token(
                &registry,
                image.repository(),
                refresh,
                scheme,
                &roots,
            )
            .await
            .map_err(|detail| ImageError::Push {
                reference: reference.to_owned(),
                step: "exchanging the identity token",
                detail: format!("{detail} (credentials from {})", found.source),
            })?;
            RegistryAuth::Bearer(access)
        }
        other => other.to_registry_auth(),
    };
    client.store_auth_if_needed(&registry, &auth).await;
    if auth != RegistryAuth::Anonymous {
        // Sign in now, so a token service's refusal is reported as such.
        client
            .auth(&image, &auth, RegistryOperation::Push)
            .await
            .map_err(failed("signing in"))?;
    }
    for (blob, step) in [
        (&blobs.layer, "uploading the layer"),
        (&blobs.config, "uploading the config"),
    ] {
        let digest = blob.digest.to_string();
        let present = client
            .blob_exists(&image, &digest)
            .await
            .map_err(failed("asking the registry which blobs it has"))?;
        if !present {
            client
                .push_blob(&image, blob.bytes.clone(), &digest)
                .await
                .map_err(failed(step))?;
        }
    }
    // Only now, with every blob in, does the tag appear.
    let content_type = http::HeaderValue::from_static(MANIFEST_MEDIA_TYPE);
    client
        .push_manifest_raw(&image, blobs.manifest.bytes.clone(), content_type)
        .await
        .map_err(failed("uploading the manifest"))?;
    Ok(blobs.manifest.digest.to_string())
}

/// The CA certificates to trust for `registry` besides the system's:
/// `ca_file`, and `certs.d/<registry>/*.crt`.
fn trusted_certificates(
    registry: &str,
    ca_file: Option<&Path>,
) -> Result<Vec<Certificate>, ImageError> {
    let mut files: Vec<PathBuf> = ca_file.into_iter().map(Path::to_owned).collect();
    for dir in CERTS_DIRS {
        files.extend(certs_d_files(Path::new(dir), registry));
    }
    let mut certificates = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(&file).map_err(|source| ImageError::Io {
            what: "reading a CA file",
            path: file.clone(),
            source,
        })?;
        let found = pem_certificates(&text);
        if found.is_empty() {
            return Err(ImageError::Io {
                what: "reading a CA file",
                path: file,
                source: std::io::Error::other("it holds no PEM certificate (BEGIN CERTIFICATE)"),
            });
        }
        certificates.extend(found.into_iter().map(|pem| Certificate {
            encoding: CertificateEncoding::Pem,
            data: pem.into_bytes(),
        }));
    }
    Ok(certificates)
}

/// `root/<registry>/*.crt`, sorted (what Docker reads as the registry's CAs).
fn certs_d_files(root: &Path, registry: &str) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(root.join(registry)) else {
        return Vec::new();
    };
    let mut files: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "crt"))
        .collect();
    files.sort();
    files
}

/// Each `BEGIN CERTIFICATE` block of a PEM bundle.
fn pem_certificates(text: &str) -> Vec<String> {
    const BEGIN: &str = "-----BEGIN CERTIFICATE-----";
    const END: &str = "-----END CERTIFICATE-----";
    let mut found = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find(BEGIN) {
        let Some(len) = rest[start..].find(END) else {
            break;
        };
        let end = start + len + END.len();
        found.push(format!("{}\n", &rest[start..end]));
        rest = &rest[end..];
    }
    found
}

/// Whether the registry refused the credentials (or wants some).
fn is_unauthorized(error: &OciDistributionError) -> bool {
    match error {
        OciDistributionError::UnauthorizedError { .. }
        | OciDistributionError::AuthenticationFailure(_) => true,
        OciDistributionError::RequestError(e) => e
            .status()
            .is_some_and(|s| s == http::StatusCode::UNAUTHORIZED),
        OciDistributionError::ServerError { code, .. } => *code == 401,
        OciDistributionError::RegistryError { envelope, .. } => envelope
            .errors
            .iter()
            .any(|e| matches!(e.code, OciErrorCode::Unauthorized)),
        _ => false,
    }
}

/// The error with what to do about it.
fn explain(error: &OciDistributionError, registry: &str, scheme: &str, found: &Found) -> String {
    let mut chain = error.to_string();
    let mut source = std::error::Error::source(error);
    while let Some(cause) = source {
        let text = cause.to_string();
        if !chain.contains(&text) {
            chain.push_str(": ");
            chain.push_str(&text);
        }
        source = cause.source();
    }
    let hint = match error {
        e if is_unauthorized(e) => match found.auth {
            Credential::Anonymous => format!(
                "; {scheme}://{registry} answered 401 Unauthorized: it wants credentials, and \
                 none were found ({}). Run `docker login {registry}`, or pass --username and \
                 --password-stdin",
                found.source
            ),
            _ => format!(
                "; {scheme}://{registry} answered 401 Unauthorized: it refused the credentials \
                 from {}. Check the user name and password (`docker login {registry}`), or pass \
                 --username and --password-stdin",
                found.source
            ),
        },
        OciDistributionError::RequestError(e) if e.is_connect() || e.is_timeout() => {
            let tls = if scheme == "https" {
                " If it serves a certificate from a private CA, pass --ca-file (or put the CA in \
                 /etc/docker/certs.d/<host:port>/ca.crt)."
            } else {
                ""
            };
            format!(
                "; is a registry listening at {scheme}://{registry}? (plain HTTP is used for \
                 loopback registries without a CA, and with --insecure){tls}"
            )
        }
        OciDistributionError::RequestError(e)
            if scheme == "http" && e.status() == Some(http::StatusCode::BAD_REQUEST) =>
        {
            format!(
                "; {registry} may speak HTTPS (a TLS server answers plain HTTP with 400): pass \
                 --ca-file with the CA of its certificate, or put it in \
                 /etc/docker/certs.d/{registry}/ca.crt"
            )
        }
        OciDistributionError::RequestError(_) if scheme == "https" => {
            " (for a registry with a certificate from a private CA, pass --ca-file or put it in \
                 /etc/docker/certs.d/<host:port>/ca.crt; for one that speaks plain HTTP, add --insecure)"
                .to_owned()
        }
        _ => String::new(),
    };
    format!("{chain}{hint}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_registries() {
        for r in [
            "localhost:5000",
            "127.0.0.1:5000",
            "127.1.2.3",
            "[::1]:5000",
            "LOCALHOST",
        ] {
            assert!(is_loopback(r), "{r}");
        }
        for r in [
            "198.18.1.1:5000",
            "registry.example.com",
            "10.0.0.1:5000",
            "ghcr.io",
        ] {
            assert!(!is_loopback(r), "{r}");
        }
    }

    #[test]
    fn references() {
        let r = parse_reference("127.0.0.1:5000/demo/app:v1").unwrap();
        assert_eq!(r.registry(), "127.0.0.1:5000");
        assert_eq!(r.repository(), "demo/app");
        assert_eq!(r.tag(), Some("v1"));
        let err = parse_reference("127.0.0.1:5000/Bad Name:v1").unwrap_err();
        assert!(err.to_string().contains("Bad Name"), "{err}");
        let digest = format!("127.0.0.1:5000/app@sha256:{}", "a".repeat(64));
        let err = parse_reference(&digest).unwrap_err();
        assert!(err.to_string().contains("not a digest"), "{err}");
    }

    #[test]
    fn pem_bundles_split_into_certificates() {
        let one = "-----BEGIN CERTIFICATE-----\nAAA\n-----END CERTIFICATE-----";
        let two = "-----BEGIN CERTIFICATE-----\nBBB\n-----END CERTIFICATE-----";
        let bundle = format!("# comment\n{one}\n{two}\n");
        let found = pem_certificates(&bundle);
        assert_eq!(found, vec![format!("{one}\n"), format!("{two}\n")]);
        assert!(pem_certificates("not a certificate").is_empty());
    }

    #[test]
    fn certs_d_holds_a_registrys_cas() {
        let dir = tempfile::tempdir().unwrap();
        let host = dir.path().join("registry.example:5000");
        std::fs::create_dir_all(&host).unwrap();
        for file in ["ca.crt", "b.crt", "client.cert", "client.key"] {
            std::fs::write(host.join(file), "x").unwrap();
        }
        let files = certs_d_files(dir.path(), "registry.example:5000");
        assert_eq!(files, vec![host.join("b.crt"), host.join("ca.crt")]);
        assert!(certs_d_files(dir.path(), "other:5000").is_empty());
    }
}
