//! [`Registry`]: a real OCI registry (`distribution`, the `registry`
//! command of `github.com/distribution/distribution/v3`) for tests that push
//! and pull images.
//!
//! ```no_run
//! use opkit_envtest::Registry;
//!
//! # async fn example() -> Result<(), opkit_envtest::EnvtestError> {
//! let registry = Registry::start().await?;
//! // Plain HTTP on loopback: `cargo opkit image --push <this>` pushes there.
//! println!("push to {}", registry.reference("demo", "v1"));
//! # Ok(()) }
//! ```
//!
//! The registry listens on a free port of a loopback address (or, for a
//! [`Cluster`](super::Cluster), the host's end of the node link, where
//! the node's containerd pulls from it), keeps its blobs in a temporary
//! directory, and speaks plain HTTP without authentication — or, with
//! [`RegistryBuilder::htpasswd`], HTTPS with a certificate from a CA made
//! for it ([`Registry::ca_file`]) and HTTP Basic authentication against an
//! htpasswd file (bcrypt, the scheme distribution reads), as a private
//! production registry behaves:
//!
//! ```no_run
//! use opkit_envtest::Registry;
//!
//! # async fn example() -> Result<(), opkit_envtest::EnvtestError> {
//! let registry = Registry::builder().htpasswd("pusher", "s3cret").start().await?;
//! let ca = registry.ca_file().expect("an authenticated registry serves HTTPS");
//! println!("push to {} trusting {}", registry.reference("demo", "v1"), ca.display());
//! # Ok(()) }
//! ```
//!
//! It is killed and its directory removed when the [`Registry`] is stopped or dropped (and it
//! dies with the test process on Linux); with `OPKIT_RUN_DIR` set, the
//! process and the directory are recorded for `tests/check-orphans.sh`.
//!
//! # Binary
//!
//! `$OPKIT_REGISTRY` (the path of a `registry` binary) when set, else the
//! cache `tests/registry/build.sh` (`make registry`) fills:
//! `${OPKIT_CACHE:-$HOME/.cache/opkit}/registry/v3.1.2/bin/registry`.

use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::time::Duration;

use tempfile::TempDir;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::control_plane::{is_port_race, remove_stale_dirs, wait_until_ready};
use super::error::{EnvtestError, Result};
use super::pki::Pki;
use super::process::ChildProcess;

/// The distribution release `tests/registry/build.sh` builds (kept in step
/// with `tests/registry/go.mod` by a unit test).
pub const DEFAULT_REGISTRY_VERSION: &str = "v3.1.2";
/// Prefix of each registry's directory (followed by the owning process id).
const DIR_PREFIX: &str = "opkit-registry-";
/// How often a start is retried when another process took the port first.
const PORT_RACE_ATTEMPTS: u32 = 3;

/// Options for starting a [`Registry`]; see [`Registry::builder`].
#[derive(Debug, Clone)]
pub struct RegistryBuilder {
    address: IpAddr,
    binary: Option<PathBuf>,
    start_timeout: Duration,
    login: Option<(String, String)>,
    token: Option<TokenAuth>,
}

/// distribution's `token` auth: the registry answers `WWW-Authenticate:
/// Bearer realm=...,service=...` and accepts only JWTs that `issuer` signed
/// with a key of `jwks` (a JSON Web Key Set file; the token header names the
/// key by `kid`) for the audience `service`.
#[derive(Debug, Clone)]
struct TokenAuth {
    realm: String,
    service: String,
    issuer: String,
    jwks: PathBuf,
}

impl Default for RegistryBuilder {
    fn default() -> Self {
        Self {
            address: IpAddr::V4(Ipv4Addr::LOCALHOST),
            binary: None,
            start_timeout: Duration::from_secs(30),
            login: None,
            token: None,
        }
    }
}

impl RegistryBuilder {
    /// Listen on this address instead of `127.0.0.1`. Only loopback or an
    /// address of a link the caller made (as a cluster's host address):
    /// the registry accepts pushes from anyone who reaches it.
    pub fn address(mut self, address: IpAddr) -> Self {
        self.address = address;
        self
    }

    /// Use this `registry` binary instead of looking for one.
    pub fn binary(mut self, path: impl Into<PathBuf>) -> Self {
        self.binary = Some(path.into());
        self
    }

    /// How long to wait for the registry to answer (default 30 s).
    pub fn start_timeout(mut self, timeout: Duration) -> Self {
        self.start_timeout = timeout;
        self
    }

    /// Require this user name and password (HTTP Basic against an
    /// htpasswd file), and serve HTTPS with a certificate for the
    /// registry's address signed by a CA made for it
    /// ([`Registry::ca_file`], [`Registry::ca_pem`]).
    pub fn htpasswd(mut self, username: impl Into<String>, password: impl Into<String>) -> Self {
        self.login = Some((username.into(), password.into()));
        self
    }

    /// Require bearer tokens from a token service (Docker's token
    /// protocol; distribution's `token` auth), and serve HTTPS as with
    /// [`htpasswd`](Self::htpasswd). Clients are sent to `realm` for tokens
    /// for `service`; a token is accepted when `issuer` signed it (ES256 or
    /// RS256) with a key in the JSON Web Key Set file `jwks`, named by the
    /// token's `kid`. The token service is the caller's.
    pub fn token_auth(
        mut self,
        realm: impl Into<String>,
        service: impl Into<String>,
        issuer: impl Into<String>,
        jwks: impl Into<PathBuf>,
    ) -> Self {
        self.token = Some(TokenAuth {
            realm: realm.into(),
            service: service.into(),
            issuer: issuer.into(),
            jwks: jwks.into(),
        });
        self
    }

    /// Starts the registry and waits until `GET /v2/` answers (200, or 401
    /// with [`htpasswd`](Self::htpasswd) or [`token_auth`](Self::token_auth)).
    pub async fn start(self) -> Result<Registry> {
        let binary = match self.binary.clone() {
            Some(path) => path,
            None => find_registry_binary()?,
        };
        remove_stale_dirs(DIR_PREFIX);
        let dir = tempfile::Builder::new()
            .prefix(&format!("{DIR_PREFIX}{}-", std::process::id()))
            .tempdir()
            .map_err(|source| EnvtestError::Io {
                what: "creating the registry's directory",
                path: std::env::temp_dir(),
                source,
            })?;
        super::footprint::record(&format!("dir {}", dir.path().display()));
        let mut attempt = 0;
        loop {
            attempt += 1;
            match self.start_once(&binary, dir.path()).await {
                Ok((process, address, ca_pem)) => {
                    tracing::info!(%address, dir = %dir.path().display(), tls = ca_pem.is_some(), "registry ready");
                    return Ok(Registry {
                        process,
                        address,
                        ca_pem,
                        login: self.login.clone(),
                        dir,
                    });
                }
                Err(e) if attempt < PORT_RACE_ATTEMPTS && is_port_race(&e) => {
                    tracing::warn!(attempt, error = %e, "registry port taken; retrying on another");
                }
                Err(e) => return Err(e),
            }
        }
    }

    async fn start_once(
        &self,
        binary: &Path,
        dir: &Path,
    ) -> Result<(ChildProcess, SocketAddr, Option<String>)> {
        let address = free_address(self.address)?;
        let mut yaml = config_yaml(address, &dir.join("storage"));
        let mut ca_pem = None;
        if self.login.is_some() || self.token.is_some() {
            let pki = Pki::generate(&[address.ip().to_string()])?;
            write(&dir.join(CA_FILE), &pki.ca_pem)?;
            write(&dir.join("tls.crt"), &pki.serving_cert_pem)?;
            write(&dir.join("tls.key"), &pki.serving_key_pem)?;
            yaml.push_str(&tls_yaml(dir));
            ca_pem = Some(pki.ca_pem);
        }
        if let Some((username, password)) = &self.login {
            write(&dir.join("htpasswd"), &htpasswd_line(username, password)?)?;
            yaml.push_str(&htpasswd_yaml(dir));
        } else if let Some(token) = &self.token {
            yaml.push_str(&token_yaml(token));
        }
        let config = dir.join("config.yml");
        write(&config, &yaml)?;
        let args = vec!["serve".to_owned(), config.display().to_string()];
        let process = spawn_registry(binary, &args, dir.join("registry.log"))?;
        let tls = ca_pem.is_some();
        wait_until_ready(&process, None, self.start_timeout, || {
            v2_answers(address, tls)
        })
        .await?;
        Ok((process, address, ca_pem))
    }
}

/// Starts `registry serve <config>` with tracing export off (distribution
/// otherwise dials an OTLP collector on loopback).
fn spawn_registry(binary: &Path, args: &[String], log: PathBuf) -> Result<ChildProcess> {
    let mut env_args = vec![
        "OTEL_TRACES_EXPORTER=none".to_owned(),
        binary.display().to_string(),
    ];
    env_args.extend(args.iter().cloned());
    ChildProcess::spawn("registry", Path::new("/usr/bin/env"), &env_args, log)
}

/// The registry's configuration: filesystem storage under `storage`,
/// deletes allowed, plain HTTP on `address`, no access log.
fn config_yaml(address: SocketAddr, storage: &Path) -> String {
    format!(
        "version: 0.1\n\
         log:\n  level: warn\n  accesslog:\n    disabled: true\n\
         storage:\n  filesystem:\n    rootdirectory: {storage}\n  delete:\n    enabled: true\n\
         http:\n  addr: {address}\n  secret: opkit-envtest\n  draintimeout: 1s\n",
        storage = storage.display()
    )
}

/// The CA file's name in the registry's directory.
const CA_FILE: &str = "ca.crt";

fn write(path: &Path, contents: &str) -> Result<()> {
    std::fs::write(path, contents).map_err(|source| EnvtestError::Io {
        what: "writing the registry's configuration",
        path: path.to_owned(),
        source,
    })
}

/// The `http.tls` section, for files in `dir`.
fn tls_yaml(dir: &Path) -> String {
    format!(
        "  tls:\n    certificate: {dir}/tls.crt\n    key: {dir}/tls.key\n",
        dir = dir.display()
    )
}

/// The `auth.htpasswd` section, for the file in `dir`.
fn htpasswd_yaml(dir: &Path) -> String {
    format!(
        "auth:\n  htpasswd:\n    realm: opkit-envtest\n    path: {dir}/htpasswd\n",
        dir = dir.display()
    )
}

/// The `auth.token` section (values quoted as YAML takes JSON strings).
fn token_yaml(token: &TokenAuth) -> String {
    let quote = |v: &str| serde_json::Value::String(v.to_owned()).to_string();
    format!(
        "auth:\n  token:\n    realm: {}\n    service: {}\n    issuer: {}\n    jwks: {}\n",
        quote(&token.realm),
        quote(&token.service),
        quote(&token.issuer),
        quote(&token.jwks.display().to_string()),
    )
}

/// One htpasswd line, `user:$2y$...` (bcrypt, the only scheme distribution
/// reads; cost 5 keeps a test's start fast).
fn htpasswd_line(username: &str, password: &str) -> Result<String> {
    let hash = bcrypt::hash(password, 5).map_err(|e| EnvtestError::Io {
        what: "hashing the registry's password",
        path: PathBuf::from("htpasswd"),
        source: std::io::Error::other(e.to_string()),
    })?;
    Ok(format!("{username}:{hash}\n"))
}

/// A free port on `ip`, as `ip:port`.
fn free_address(ip: IpAddr) -> Result<SocketAddr> {
    let listener = TcpListener::bind((ip, 0)).map_err(|source| EnvtestError::Io {
        what: "finding a free port for the registry",
        path: PathBuf::from(ip.to_string()),
        source,
    })?;
    listener.local_addr().map_err(|source| EnvtestError::Io {
        what: "finding a free port for the registry",
        path: PathBuf::from(ip.to_string()),
        source,
    })
}

/// `Ok` once `GET /v2/` answers `200`; with `tls`, once the port accepts
/// connections (distribution listens only when it is ready to serve).
async fn v2_answers(address: SocketAddr, tls: bool) -> std::result::Result<(), String> {
    let mut stream = tokio::net::TcpStream::connect(address)
        .await
        .map_err(|e| format!("connecting to {address}: {e}"))?;
    if tls {
        return Ok(());
    }
    let request = format!("GET /v2/ HTTP/1.0\r\nHost: {address}\r\n\r\n");
    stream
        .write_all(request.as_bytes())
        .await
        .map_err(|e| e.to_string())?;
    let mut head = [0u8; 12];
    stream
        .read_exact(&mut head)
        .await
        .map_err(|e| e.to_string())?;
    let status = String::from_utf8_lossy(&head);
    if status.ends_with(" 200") {
        Ok(())
    } else {
        Err(format!("GET /v2/ answered {status:?}"))
    }
}

/// Finds the `registry` binary: `$OPKIT_REGISTRY`, else the build cache.
pub fn find_registry_binary() -> Result<PathBuf> {
    let (path, label) = match std::env::var_os("OPKIT_REGISTRY").filter(|v| !v.is_empty()) {
        Some(path) => (PathBuf::from(path), "$OPKIT_REGISTRY"),
        None => {
            let cache = std::env::var_os("OPKIT_CACHE")
                .filter(|v| !v.is_empty())
                .map(PathBuf::from)
                .or_else(|| {
                    std::env::var_os("HOME").map(|h| Path::new(&h).join(".cache").join("opkit"))
                })
                .ok_or_else(|| EnvtestError::MissingRegistry {
                    searched: "nowhere ($HOME, OPKIT_CACHE and OPKIT_REGISTRY are all unset)"
                        .to_owned(),
                })?;
            (
                cache
                    .join("registry")
                    .join(DEFAULT_REGISTRY_VERSION)
                    .join("bin")
                    .join("registry"),
                "the opkit build cache",
            )
        }
    };
    if path.is_file() {
        Ok(path)
    } else {
        Err(EnvtestError::MissingRegistry {
            searched: format!("{} ({label})", path.display()),
        })
    }
}

/// A running registry. Killed, and its storage removed, on
/// [`stop`](Self::stop) or drop.
#[derive(Debug)]
pub struct Registry {
    // Field order is drop order: the process before its directory.
    process: ChildProcess,
    address: SocketAddr,
    ca_pem: Option<String>,
    login: Option<(String, String)>,
    dir: TempDir,
}

impl Registry {
    /// Options for starting a registry.
    pub fn builder() -> RegistryBuilder {
        RegistryBuilder::default()
    }

    /// Starts a registry on a free port of `127.0.0.1`.
    pub async fn start() -> Result<Self> {
        Self::builder().start().await
    }

    /// The address it listens on.
    pub fn address(&self) -> SocketAddr {
        self.address
    }

    /// `host:port`, the first part of an image reference.
    pub fn host(&self) -> String {
        self.address.to_string()
    }

    /// `host:port/repository:tag`.
    pub fn reference(&self, repository: &str, tag: &str) -> String {
        format!("{}/{repository}:{tag}", self.address)
    }

    /// The registry's directory: its configuration, `storage/` and
    /// `registry.log`.
    pub fn dir_path(&self) -> &Path {
        self.dir.path()
    }

    /// With [`RegistryBuilder::htpasswd`]: the CA (PEM) that signed the
    /// registry's serving certificate.
    pub fn ca_pem(&self) -> Option<&str> {
        self.ca_pem.as_deref()
    }

    /// With [`RegistryBuilder::htpasswd`]: the file holding [`ca_pem`](Self::ca_pem).
    pub fn ca_file(&self) -> Option<PathBuf> {
        self.ca_pem.as_ref().map(|_| self.dir.path().join(CA_FILE))
    }

    /// With [`RegistryBuilder::htpasswd`]: the user name and password it accepts.
    pub fn login(&self) -> Option<(&str, &str)> {
        self.login.as_ref().map(|(u, p)| (u.as_str(), p.as_str()))
    }

    /// The registry's log file.
    pub fn log_path(&self) -> &Path {
        self.process.log_path()
    }

    /// The registry's process id.
    pub fn pid(&self) -> u32 {
        self.process.pid()
    }

    /// Kills the registry (its storage stays until the value is dropped).
    /// Harmless to call twice.
    pub fn stop(&self) {
        self.process.kill();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_names_the_address_and_storage() {
        let yaml = config_yaml("127.0.0.1:5000".parse().unwrap(), Path::new("/d/storage"));
        assert!(yaml.contains("addr: 127.0.0.1:5000"), "{yaml}");
        assert!(yaml.contains("rootdirectory: /d/storage"), "{yaml}");
    }

    #[test]
    fn htpasswd_lines_are_bcrypt_and_verify() {
        let line = htpasswd_line("pusher", "s3cret").unwrap();
        let (user, hash) = line.trim_end().split_once(':').unwrap();
        assert_eq!(user, "pusher");
        assert!(hash.starts_with("$2"), "{hash}");
        assert!(bcrypt::verify("s3cret", hash).unwrap());
        assert!(!bcrypt::verify("wrong", hash).unwrap());
        let yaml = htpasswd_yaml(Path::new("/d"));
        assert!(yaml.contains("path: /d/htpasswd"), "{yaml}");
        let yaml = tls_yaml(Path::new("/d"));
        assert!(yaml.contains("certificate: /d/tls.crt"), "{yaml}");
        let yaml = token_yaml(&TokenAuth {
            realm: "http://127.0.0.1:1/token".into(),
            service: "svc".into(),
            issuer: "iss".into(),
            jwks: "/d/jwks.json".into(),
        });
        assert!(
            yaml.contains("realm: \"http://127.0.0.1:1/token\"")
                && yaml.contains("jwks: \"/d/jwks.json\""),
            "{yaml}"
        );
    }

    /// The constant names the version the build script builds.
    #[test]
    fn default_version_matches_the_build_script() {
        let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let gomod = std::fs::read_to_string(repo.join("tests/registry/go.mod")).unwrap();
        assert!(
            gomod.contains(&format!(
                "github.com/distribution/distribution/v3 {DEFAULT_REGISTRY_VERSION}"
            )),
            "tests/registry/go.mod does not pin {DEFAULT_REGISTRY_VERSION}"
        );
    }

    #[test]
    fn missing_binary_says_how_to_build_it() {
        let err = EnvtestError::MissingRegistry {
            searched: "/x/registry".to_owned(),
        };
        assert!(err.to_string().contains("make registry"), "{err}");
    }
}
