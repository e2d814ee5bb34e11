//! Exchanging a Docker identity token (an OAuth2 refresh token, what
//! `docker login` stores as `identitytoken` for registries such as Azure's)
//! for an access token, at the token service the registry names in its
//! `WWW-Authenticate: Bearer realm=...,service=...` challenge: a `POST` of
//! `grant_type=refresh_token` (Docker's token protocol, as `docker` and
//! go-containerregistry do it; oci-client only knows the `GET` with Basic).

use oci_client::client::Certificate;
use serde::Deserialize;

/// The access token for pushing to `repository` at `registry`.
pub(crate) async fn exchange_identity_token(
    registry: &str,
    repository: &str,
    refresh_token: &str,
    scheme: &str,
    roots: &[Certificate],
) -> Result<String, String> {
    let mut builder =
        reqwest::Client::builder().connect_timeout(std::time::Duration::from_secs(10));
    for root in roots {
        let certificate = reqwest::Certificate::from_pem(&root.data)
            .map_err(|e| format!("a CA certificate is unusable: {e}"))?;
        builder = builder.add_root_certificate(certificate);
    }
    let client = builder
        .build()
        .map_err(|e| format!("setting up the HTTPS client: {e}"))?;
    let v2 = format!("{scheme}://{registry}/v2/");
    let answer = client
        .get(&v2)
        .send()
        .await
        .map_err(|e| format!("GET {v2}: {e}"))?;
    let challenge = answer
        .headers()
        .get(http::header::WWW_AUTHENTICATE)
        .and_then(|h| h.to_str().ok())
        .and_then(bearer_challenge)
        .ok_or_else(|| {
            format!(
                "{registry} names no token service (GET {v2} answered {} without a Bearer \
                 challenge), so an identity token cannot be used there; log in with a user \
                 name and password",
                answer.status()
            )
        })?;
    let scope = format!("repository:{repository}:pull,push");
    let mut form = form_urlencoded::Serializer::new(String::new());
    form.append_pair("grant_type", "refresh_token")
        .append_pair("refresh_token", refresh_token)
        .append_pair("client_id", "cargo-opkit")
        .append_pair("scope", &scope);
    if let Some(service) = &challenge.service {
        form.append_pair("service", service);
    }
    let response = client
        .post(&challenge.realm)
        .header(
            http::header::CONTENT_TYPE,
            "application/x-www-form-urlencoded",
        )
        .body(form.finish())
        .send()
        .await
        .map_err(|e| format!("POST {}: {e}", challenge.realm))?;
    let status = response.status();
    let body = response
        .text()
        .await
        .map_err(|e| format!("reading the token service's answer: {e}"))?;
    if !status.is_success() {
        return Err(format!(
            "the token service {} refused the identity token ({status}): {}",
            challenge.realm,
            body.trim()
        ));
    }
    let token: TokenAnswer = serde_json::from_str(&body).map_err(|e| {
        format!(
            "the token service {} answered no token: {e}",
            challenge.realm
        )
    })?;
    token
        .access_token
        .or(token.token)
        .filter(|t| !t.is_empty())
        .ok_or_else(|| format!("the token service {} answered no token", challenge.realm))
}

#[derive(Debug, Deserialize)]
struct TokenAnswer {
    #[serde(default)]
    access_token: Option<String>,
    #[serde(default)]
    token: Option<String>,
}

/// A `Bearer` challenge's realm and service.
#[derive(Debug, PartialEq, Eq)]
struct Challenge {
    realm: String,
    service: Option<String>,
}

/// Parses `Bearer realm="...",service="...",scope="..."`.
fn bearer_challenge(header: &str) -> Option<Challenge> {
    let header = header.trim();
    let (scheme, params) = header.split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("bearer") {
        return None;
    }
    let mut realm = None;
    let mut service = None;
    let mut rest = params.trim();
    while !rest.is_empty() {
        let (key, after) = rest.split_once('=')?;
        let key = key.trim().trim_start_matches(',').trim();
        let (value, after) = match after.strip_prefix('"') {
            Some(quoted) => {
                let end = quoted.find('"')?;
                (&quoted[..end], &quoted[end + 1..])
            }
            None => match after.find(',') {
                Some(end) => (&after[..end], &after[end..]),
                None => (after, ""),
            },
        };
        match key.to_ascii_lowercase().as_str() {
            "realm" => realm = Some(value.to_owned()),
            "service" => service = Some(value.to_owned()),
            _ => {}
        }
        rest = after.trim_start().trim_start_matches(',').trim_start();
    }
    Some(Challenge {
        realm: realm?,
        service,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bearer_challenges_parse() {
        let c = bearer_challenge(
            r#"Bearer realm="https://auth.example/token",service="registry.example",scope="repository:a:pull""#,
        )
        .unwrap();
        assert_eq!(
            c,
            Challenge {
                realm: "https://auth.example/token".into(),
                service: Some("registry.example".into())
            }
        );
        let c = bearer_challenge("bearer realm=https://auth.example/token").unwrap();
        assert_eq!(c.realm, "https://auth.example/token");
        assert_eq!(c.service, None);
        assert!(bearer_challenge(r#"Basic realm="x""#).is_none());
        assert!(bearer_challenge(r#"Bearer service="x""#).is_none());
    }
}
