//! Pushing the image by the OCI distribution API (`oci-client`): the layer
//! and the config as blobs, then the manifest under the reference's tag,
//! byte for byte as in the layout, so the registry's digest is the one
//! `cargo opkit image` printed.
//!
//! Plain HTTP is used for a registry on a loopback address (`localhost`,
//! `127.0.0.0/8`, `[::1]`) or when asked (`--insecure`); HTTPS otherwise.

use std::net::IpAddr;

use oci_client::client::{ClientConfig, ClientProtocol};
use oci_client::errors::OciDistributionError;
use oci_client::secrets::RegistryAuth;
use oci_client::{Client, Reference};

use super::ImageError;
use super::layout::{ImageBlobs, MANIFEST_MEDIA_TYPE};

/// How to reach the registry.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PushOptions {
    /// Use plain HTTP even for a registry that is not on loopback.
    pub insecure: bool,
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
    options: PushOptions,
) -> Result<String, ImageError> {
    let image = parse_reference(reference)?;
    let registry = image.resolve_registry().to_owned();
    let plain_http = options.insecure || is_loopback(&registry);
    // reqwest is built without a default TLS provider: use ring, as kube does.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let client = Client::new(ClientConfig {
        protocol: if plain_http {
            ClientProtocol::Http
        } else {
            ClientProtocol::Https
        },
        connect_timeout: Some(std::time::Duration::from_secs(10)),
        ..ClientConfig::default()
    });
    let scheme = if plain_http { "http" } else { "https" };
    let failed = |step: &'static str| {
        let registry = registry.clone();
        move |e: OciDistributionError| ImageError::Push {
            reference: reference.to_owned(),
            step,
            detail: explain(&e, &registry, scheme),
        }
    };
    client
        .store_auth_if_needed(&registry, &RegistryAuth::Anonymous)
        .await;
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
    let content_type = http::HeaderValue::from_static(MANIFEST_MEDIA_TYPE);
    client
        .push_manifest_raw(&image, blobs.manifest.bytes.clone(), content_type)
        .await
        .map_err(failed("uploading the manifest"))?;
    Ok(blobs.manifest.digest.to_string())
}

/// The error with what to do about it.
fn explain(error: &OciDistributionError, registry: &str, scheme: &str) -> String {
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
        OciDistributionError::RequestError(e) if e.is_connect() || e.is_timeout() => format!(
            "; is a registry listening at {scheme}://{registry}? (plain HTTP is used for loopback \
             registries and with --insecure)"
        ),
        OciDistributionError::RequestError(_) if scheme == "https" => {
            " (for a registry that speaks plain HTTP, add --insecure)".to_owned()
        }
        OciDistributionError::UnauthorizedError { .. }
        | OciDistributionError::AuthenticationFailure(_) => {
            "; the registry wants credentials, which cargo opkit image does not send yet: push \
             the layout with a tool that has them (e.g. `skopeo copy oci:<dir> docker://<ref>`)"
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
}
