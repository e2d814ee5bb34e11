//! A token service for distribution's `token` auth (Docker's token
//! protocol), for the push tests: the registry is real and verifies real
//! JWTs (ES256, the key named by `kid` in a JWKS file it reads); this
//! issues them, the part a production registry delegates to its identity
//! provider (Docker Hub's auth.docker.io, GHCR's, Harbor's).
//!
//! - `GET /token?service=..&scope=..` with HTTP Basic `user:password`
//!   (what `docker login` and oci-client do with a password);
//! - `POST /token` with `grant_type=refresh_token&refresh_token=..` (what
//!   docker does with an identity token).
//!
//! Either answers `{"token", "access_token"}` granting the scope's actions,
//! or 401.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use base64::Engine as _;
use rcgen::{KeyPair, SigningKey as _};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpListener;

/// The issuer and service names the registry is configured with.
pub const ISSUER: &str = "opkit-test-token-service";
pub const SERVICE: &str = "opkit-test-registry";
const KEY_ID: &str = "opkit-test-key";

/// A running token service; stops when dropped.
pub struct TokenService {
    address: SocketAddr,
    jwks: PathBuf,
    task: tokio::task::JoinHandle<()>,
    /// How each request was authenticated: `basic`, `refresh`, or `refused`.
    pub seen: Arc<Mutex<Vec<String>>>,
}

impl Drop for TokenService {
    fn drop(&mut self) {
        self.task.abort();
    }
}

struct Accepts {
    user: String,
    password: String,
    refresh_token: String,
}

impl TokenService {
    /// Starts on a free loopback port, accepting `user`/`password` and the
    /// identity token `refresh_token`; writes its JWKS into `dir`.
    pub async fn start(dir: &Path, user: &str, password: &str, refresh_token: &str) -> Self {
        let key = Arc::new(KeyPair::generate().unwrap());
        let raw = key.public_key_raw();
        assert_eq!(raw.len(), 65, "an uncompressed P-256 point");
        let b64 = |b: &[u8]| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(b);
        let jwks = dir.join("jwks.json");
        std::fs::write(
            &jwks,
            serde_json::json!({ "keys": [{
                "kty": "EC", "crv": "P-256", "kid": KEY_ID, "alg": "ES256", "use": "sig",
                "x": b64(&raw[1..33]), "y": b64(&raw[33..65]),
            }]})
            .to_string(),
        )
        .unwrap();
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let accepts = Arc::new(Accepts {
            user: user.to_owned(),
            password: password.to_owned(),
            refresh_token: refresh_token.to_owned(),
        });
        let seen = Arc::new(Mutex::new(Vec::new()));
        let task = tokio::spawn({
            let seen = seen.clone();
            async move {
                loop {
                    let Ok((stream, _)) = listener.accept().await else {
                        return;
                    };
                    let (key, accepts, seen) = (key.clone(), accepts.clone(), seen.clone());
                    tokio::spawn(async move {
                        let _ = serve(stream, &key, &accepts, &seen).await;
                    });
                }
            }
        });
        Self {
            address,
            jwks,
            task,
            seen,
        }
    }

    /// The realm the registry sends clients to.
    pub fn realm(&self) -> String {
        format!("http://{}/token", self.address)
    }

    /// The JWKS file the registry trusts.
    pub fn jwks(&self) -> &Path {
        &self.jwks
    }
}

/// Answers one HTTP/1.1 request (and closes the connection).
async fn serve(
    stream: tokio::net::TcpStream,
    key: &KeyPair,
    accepts: &Accepts,
    seen: &Mutex<Vec<String>>,
) -> std::io::Result<()> {
    let mut reader = BufReader::new(stream);
    let mut request_line = String::new();
    reader.read_line(&mut request_line).await?;
    let mut authorization = None;
    let mut length = 0usize;
    loop {
        let mut line = String::new();
        reader.read_line(&mut line).await?;
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        if let Some((name, value)) = line.split_once(':') {
            match name.trim().to_ascii_lowercase().as_str() {
                "authorization" => authorization = Some(value.trim().to_owned()),
                "content-length" => length = value.trim().parse().unwrap_or(0),
                _ => {}
            }
        }
    }
    let mut body = vec![0; length];
    reader.read_exact(&mut body).await?;
    let mut parts = request_line.split_whitespace();
    let method = parts.next().unwrap_or_default().to_owned();
    let target = parts.next().unwrap_or_default().to_owned();
    let query = target.split_once('?').map(|(_, q)| q).unwrap_or_default();
    let mut params: Vec<(String, String)> = form_urlencoded::parse(query.as_bytes())
        .into_owned()
        .collect();
    if method == "POST" {
        params.extend(form_urlencoded::parse(&body).into_owned());
    }
    let param = |name: &str| {
        params
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.clone())
    };
    let how = match (method.as_str(), authorization) {
        ("GET", Some(auth)) => {
            let decoded = auth
                .strip_prefix("Basic ")
                .and_then(|b| base64::engine::general_purpose::STANDARD.decode(b).ok())
                .map(|b| String::from_utf8_lossy(&b).into_owned());
            (decoded == Some(format!("{}:{}", accepts.user, accepts.password))).then_some("basic")
        }
        ("POST", _) => (param("grant_type").as_deref() == Some("refresh_token")
            && param("refresh_token").as_deref() == Some(accepts.refresh_token.as_str()))
        .then_some("refresh"),
        _ => None,
    };
    seen.lock()
        .unwrap()
        .push(how.unwrap_or("refused").to_owned());
    let stream = reader.get_mut();
    let Some(_) = how else {
        let body = r#"{"errors":[{"code":"UNAUTHORIZED","message":"bad credentials"}]}"#;
        let response = format!(
            "HTTP/1.1 401 Unauthorized\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        );
        return stream.write_all(response.as_bytes()).await;
    };
    let access: Vec<serde_json::Value> = params
        .iter()
        .filter(|(k, _)| k == "scope")
        .flat_map(|(_, v)| v.split(' ').map(str::to_owned).collect::<Vec<_>>())
        .filter_map(|scope| {
            let mut it = scope.splitn(3, ':');
            let (kind, name, actions) = (it.next()?, it.next()?, it.next()?);
            Some(serde_json::json!({
                "type": kind, "name": name,
                "actions": actions.split(',').collect::<Vec<_>>(),
            }))
        })
        .collect();
    let token = jwt(key, param("service").as_deref().unwrap_or(SERVICE), access);
    let body =
        serde_json::json!({ "token": token, "access_token": token, "expires_in": 300 }).to_string();
    let response = format!(
        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(response.as_bytes()).await
}

/// An ES256 JWT for `audience` granting `access`.
fn jwt(key: &KeyPair, audience: &str, access: Vec<serde_json::Value>) -> String {
    let b64 = |b: &[u8]| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(b);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let header = serde_json::json!({ "alg": "ES256", "typ": "JWT", "kid": KEY_ID });
    let claims = serde_json::json!({
        "iss": ISSUER, "sub": "opkit", "aud": audience,
        "exp": now + 300, "nbf": now - 10, "iat": now, "jti": format!("{now}"),
        "access": access,
    });
    let signing_input = format!(
        "{}.{}",
        b64(header.to_string().as_bytes()),
        b64(claims.to_string().as_bytes())
    );
    let der = key.sign(signing_input.as_bytes()).unwrap();
    format!("{signing_input}.{}", b64(&der_to_raw(&der)))
}

/// An ECDSA signature from DER (`SEQUENCE { r INTEGER, s INTEGER }`) to
/// JWS's `r || s`, 32 bytes each.
fn der_to_raw(der: &[u8]) -> Vec<u8> {
    assert_eq!(der[0], 0x30, "a DER sequence");
    let mut at = 2;
    let mut out = Vec::with_capacity(64);
    for _ in 0..2 {
        assert_eq!(der[at], 0x02, "a DER integer");
        let len = der[at + 1] as usize;
        let mut int = &der[at + 2..at + 2 + len];
        while int.len() > 32 && int[0] == 0 {
            int = &int[1..];
        }
        out.extend(std::iter::repeat_n(0u8, 32 - int.len()));
        out.extend_from_slice(int);
        at += 2 + len;
    }
    out
}
