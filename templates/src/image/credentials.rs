//! Registry credentials, found as `docker` and `ko` find them.
//!
//! In order, the first that gives a credential wins:
//!
//! 1. `--username` with `--password-stdin` ([`Login`] in [`PushOptions`](super::PushOptions)).
//! 2. The Docker configuration: `$DOCKER_CONFIG/config.json`, else
//!    `~/.docker/config.json`:
//!    - `credHelpers["<registry>"]`: runs `docker-credential-<name> get`;
//!    - `credsStore`: runs `docker-credential-<name> get` (for every registry);
//!    - `auths["<registry>"]`: `auth` (base64 of `user:password`), or
//!      `username` and `password`, or `identitytoken`, or `registrytoken`.
//! 3. None: anonymous (an open registry).
//!
//! A helper is given the registry's server address on stdin and answers
//! `{"ServerURL", "Username", "Secret"}` (the docker-credential-helpers
//! protocol); a helper that has nothing for the registry (`credentials not
//! found`) lets the search go on to `auths`.
//!
//! Registry keys are compared as Docker compares them: `https://` and
//! `http://` prefixes and any path are ignored (`https://host:5000/v1/` is
//! `host:5000`), and Docker Hub is one registry under every name
//! (`docker.io`, `index.docker.io`, `registry-1.docker.io`,
//! `https://index.docker.io/v1/`, the key `docker login` writes and the
//! address helpers are asked for).

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use base64::Engine as _;
use oci_client::secrets::RegistryAuth;
use serde::Deserialize;

use super::error::ImageError;

/// A user name and password for the registry (`--username` with
/// `--password-stdin`), used instead of the Docker configuration.
#[derive(Clone, PartialEq, Eq)]
pub struct Login {
    /// The user name.
    pub username: String,
    /// The password or access token.
    pub password: String,
}

impl std::fmt::Debug for Login {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Login")
            .field("username", &self.username)
            .field("password", &"<redacted>")
            .finish()
    }
}

/// Docker Hub's key in `auths` and the address its helpers are asked for.
const DOCKER_HUB_KEY: &str = "https://index.docker.io/v1/";
/// A helper's answer when it has nothing for the registry.
const NOT_FOUND: &str = "credentials not found";

/// A credential and where it came from (for messages).
#[derive(Debug)]
pub(crate) struct Found {
    pub auth: Credential,
    pub source: String,
}

/// What the registry is sent.
#[derive(Clone, PartialEq, Eq)]
pub(crate) enum Credential {
    Anonymous,
    /// User name and password: HTTP Basic, or exchanged for a token where
    /// the registry announces a token service.
    Basic(String, String),
    /// An OAuth2 refresh token (`identitytoken`, or a helper's `<token>` user).
    IdentityToken(String),
    /// A bearer token sent as is (`registrytoken`).
    RegistryToken(String),
}

impl std::fmt::Debug for Credential {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Anonymous => f.write_str("Anonymous"),
            Self::Basic(user, _) => write!(f, "Basic({user}, <redacted>)"),
            Self::IdentityToken(_) => f.write_str("IdentityToken(<redacted>)"),
            Self::RegistryToken(_) => f.write_str("RegistryToken(<redacted>)"),
        }
    }
}

impl Credential {
    /// The credential as oci-client takes it (an identity token is
    /// exchanged before, see [`super::token`]).
    pub fn to_registry_auth(&self) -> RegistryAuth {
        match self {
            Self::Anonymous | Self::IdentityToken(_) => RegistryAuth::Anonymous,
            Self::Basic(user, password) => RegistryAuth::Basic(user.clone(), password.clone()),
            Self::RegistryToken(token) => RegistryAuth::Bearer(token.clone()),
        }
    }
}

/// The Docker configuration file: `$DOCKER_CONFIG/config.json`, else
/// `~/.docker/config.json`.
pub(crate) fn docker_config_path() -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os("DOCKER_CONFIG").filter(|d| !d.is_empty()) {
        return Some(Path::new(&dir).join("config.json"));
    }
    std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map(|home| Path::new(&home).join(".docker").join("config.json"))
}

/// The credential for `registry` (`host[:port]`, as in the image
/// reference): `login` if given, else from the Docker configuration.
pub(crate) fn find(registry: &str, login: Option<&Login>) -> Result<Found, ImageError> {
    if let Some(login) = login {
        return Ok(Found {
            auth: Credential::Basic(login.username.clone(), login.password.clone()),
            source: "--username and --password-stdin".to_owned(),
        });
    }
    let Some(path) = docker_config_path() else {
        return Ok(anonymous(
            "no Docker configuration ($HOME and $DOCKER_CONFIG are unset)",
        ));
    };
    find_in_config(registry, &path)
}

fn anonymous(why: &str) -> Found {
    Found {
        auth: Credential::Anonymous,
        source: why.to_owned(),
    }
}

/// `~/.docker/config.json`'s fields this reads.
#[derive(Debug, Default, Deserialize)]
struct DockerConfig {
    #[serde(default)]
    auths: std::collections::BTreeMap<String, AuthEntry>,
    #[serde(default, rename = "credHelpers")]
    cred_helpers: std::collections::BTreeMap<String, String>,
    #[serde(default, rename = "credsStore")]
    creds_store: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
struct AuthEntry {
    #[serde(default)]
    auth: Option<String>,
    #[serde(default)]
    username: Option<String>,
    #[serde(default)]
    password: Option<String>,
    #[serde(default)]
    identitytoken: Option<String>,
    #[serde(default)]
    registrytoken: Option<String>,
}

/// [`find`] in the configuration file at `path`.
fn find_in_config(registry: &str, path: &Path) -> Result<Found, ImageError> {
    let bad = |detail: String| ImageError::Credentials {
        registry: registry.to_owned(),
        detail: format!("{}: {detail}", path.display()),
    };
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Ok(anonymous(&format!(
                "no credentials: {} does not exist",
                path.display()
            )));
        }
        Err(e) => return Err(bad(format!("cannot read it: {e}"))),
    };
    let config: DockerConfig = if text.trim().is_empty() {
        DockerConfig::default()
    } else {
        serde_json::from_str(&text).map_err(|e| bad(format!("not valid JSON: {e}")))?
    };
    let host = normalize(registry);
    let helper = config
        .cred_helpers
        .iter()
        .find(|(key, _)| normalize(key) == host)
        .map(|(key, name)| (name, format!("credHelpers[{key:?}]")))
        .or_else(|| {
            config
                .creds_store
                .as_ref()
                .filter(|name| !name.is_empty())
                .map(|name| (name, "credsStore".to_owned()))
        });
    if let Some((name, field)) = helper {
        let source = format!(
            "docker-credential-{name} (named by {field} in {})",
            path.display()
        );
        match run_helper(name, &server_address(&host)) {
            Ok(Some(auth)) => return Ok(Found { auth, source }),
            Ok(None) => {
                tracing::debug!(registry, helper = %name, "the credential helper has nothing for the registry");
            }
            Err(detail) => {
                return Err(ImageError::Credentials {
                    registry: registry.to_owned(),
                    detail: format!("{source}: {detail}"),
                });
            }
        }
    }
    // An exact key first (docker login's), then any key naming the host.
    let entry = config
        .auths
        .iter()
        .find(|(key, _)| key.as_str() == server_address(&host))
        .or_else(|| config.auths.iter().find(|(key, _)| normalize(key) == host));
    let Some((key, entry)) = entry else {
        return Ok(anonymous(&format!(
            "no credentials for {registry} in {}",
            path.display()
        )));
    };
    let source = format!("auths[{key:?}] in {}", path.display());
    let auth = entry_credential(entry).map_err(|detail| ImageError::Credentials {
        registry: registry.to_owned(),
        detail: format!("{source}: {detail}"),
    })?;
    Ok(Found { auth, source })
}

/// The credential an `auths` entry holds.
fn entry_credential(entry: &AuthEntry) -> Result<Credential, String> {
    if let Some(token) = entry.identitytoken.as_ref().filter(|t| !t.is_empty()) {
        return Ok(Credential::IdentityToken(token.clone()));
    }
    if let Some(token) = entry.registrytoken.as_ref().filter(|t| !t.is_empty()) {
        return Ok(Credential::RegistryToken(token.clone()));
    }
    if let Some(encoded) = entry.auth.as_ref().filter(|a| !a.is_empty()) {
        let decoded = base64::engine::general_purpose::STANDARD
            .decode(encoded.trim())
            .map_err(|e| format!("`auth` is not base64: {e}"))?;
        let text = String::from_utf8(decoded).map_err(|_| "`auth` is not UTF-8".to_owned())?;
        let (user, password) = text
            .split_once(':')
            .ok_or_else(|| "`auth` is not base64 of `user:password`".to_owned())?;
        return Ok(Credential::Basic(user.to_owned(), password.to_owned()));
    }
    match (&entry.username, &entry.password) {
        (Some(user), Some(password)) if !user.is_empty() => {
            Ok(Credential::Basic(user.clone(), password.clone()))
        }
        _ => Ok(Credential::Anonymous),
    }
}

/// The answer of `docker-credential-<name> get`.
#[derive(Debug, Deserialize)]
struct HelperAnswer {
    #[serde(rename = "Username", default)]
    username: String,
    #[serde(rename = "Secret", default)]
    secret: String,
}

/// Runs `docker-credential-<name> get` for `server`; `None` when it has
/// nothing for it.
fn run_helper(name: &str, server: &str) -> Result<Option<Credential>, String> {
    let program = format!("docker-credential-{name}");
    let mut child = Command::new(&program)
        .arg("get")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => format!(
                "the credential helper {program} is not installed (not found on PATH); install \
                 it, or remove it from the Docker configuration, or pass --username and \
                 --password-stdin"
            ),
            _ => format!("cannot run {program}: {e}"),
        })?;
    if let Some(mut stdin) = child.stdin.take() {
        // A helper that exits without reading is judged by its answer.
        let _ = stdin.write_all(server.as_bytes());
    }
    let output = child
        .wait_with_output()
        .map_err(|e| format!("waiting for {program}: {e}"))?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    if !output.status.success() {
        if stdout.contains(NOT_FOUND) || stderr.contains(NOT_FOUND) {
            return Ok(None);
        }
        let said = format!("{} {}", stdout.trim(), stderr.trim());
        return Err(format!(
            "{program} get failed ({}): {}",
            output.status,
            said.trim()
        ));
    }
    let answer: HelperAnswer = serde_json::from_str(stdout.trim())
        .map_err(|e| format!("{program} get answered something that is not its JSON: {e}"))?;
    if answer.username == "<token>" {
        return Ok(Some(Credential::IdentityToken(answer.secret)));
    }
    if answer.username.is_empty() && answer.secret.is_empty() {
        return Ok(None);
    }
    Ok(Some(Credential::Basic(answer.username, answer.secret)))
}

/// A registry key as Docker compares it: no scheme, no path, lower case;
/// Docker Hub's names are one.
pub(crate) fn normalize(key: &str) -> String {
    let key = key.trim();
    let without_scheme = key
        .strip_prefix("https://")
        .or_else(|| key.strip_prefix("http://"))
        .unwrap_or(key);
    let host = without_scheme
        .split('/')
        .next()
        .unwrap_or(without_scheme)
        .to_ascii_lowercase();
    match host.as_str() {
        "docker.io" | "index.docker.io" | "registry-1.docker.io" | "registry.hub.docker.com" => {
            "index.docker.io".to_owned()
        }
        _ => host,
    }
}

/// The address a helper is asked for and `docker login` keys `auths` by.
fn server_address(host: &str) -> String {
    if host == "index.docker.io" {
        DOCKER_HUB_KEY.to_owned()
    } else {
        host.to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_normalize_as_docker_does() {
        for (key, host) in [
            ("https://index.docker.io/v1/", "index.docker.io"),
            ("docker.io", "index.docker.io"),
            ("registry-1.docker.io", "index.docker.io"),
            ("http://Registry.Example:5000", "registry.example:5000"),
            ("https://registry.example:5000/v2/", "registry.example:5000"),
            ("ghcr.io", "ghcr.io"),
            ("127.0.0.1:5000", "127.0.0.1:5000"),
        ] {
            assert_eq!(normalize(key), host, "{key}");
        }
        assert_eq!(server_address("index.docker.io"), DOCKER_HUB_KEY);
        assert_eq!(server_address("ghcr.io"), "ghcr.io");
    }

    fn config(dir: &Path, json: &str) -> PathBuf {
        let path = dir.join("config.json");
        std::fs::write(&path, json).unwrap();
        path
    }

    #[test]
    fn auths_entries_in_every_form() {
        let dir = tempfile::tempdir().unwrap();
        let auth = base64::engine::general_purpose::STANDARD.encode("alice:pa:ss");
        let path = config(
            dir.path(),
            &format!(
                r#"{{"auths": {{
                "https://index.docker.io/v1/": {{"auth": "{auth}"}},
                "https://registry.example:5000/v1/": {{"username": "bob", "password": "pw"}},
                "ghcr.io": {{"identitytoken": "refresh"}},
                "quay.io": {{"registrytoken": "bearer"}},
                "empty.example": {{}}
            }}}}"#
            ),
        );
        let found = find_in_config("docker.io", &path).unwrap();
        assert_eq!(
            found.auth,
            Credential::Basic("alice".into(), "pa:ss".into())
        );
        assert!(
            found
                .source
                .contains("auths[\"https://index.docker.io/v1/\"]"),
            "{}",
            found.source
        );
        let found = find_in_config("registry.example:5000", &path).unwrap();
        assert_eq!(found.auth, Credential::Basic("bob".into(), "pw".into()));
        let found = find_in_config("ghcr.io", &path).unwrap();
        assert_eq!(found.auth, Credential::IdentityToken("refresh".into()));
        let found = find_in_config("quay.io", &path).unwrap();
        assert_eq!(found.auth, Credential::RegistryToken("bearer".into()));
        for registry in ["empty.example", "other.example"] {
            let found = find_in_config(registry, &path).unwrap();
            assert_eq!(found.auth, Credential::Anonymous, "{registry}");
        }
    }

    #[test]
    fn bad_configurations_are_clear_errors() {
        let dir = tempfile::tempdir().unwrap();
        let path = config(dir.path(), "{not json");
        let err = find_in_config("ghcr.io", &path).unwrap_err().to_string();
        assert!(err.contains("not valid JSON"), "{err}");
        assert!(err.contains(&path.display().to_string()), "{err}");
        let path = config(dir.path(), r#"{"auths": {"ghcr.io": {"auth": "%%%"}}}"#);
        let err = find_in_config("ghcr.io", &path).unwrap_err().to_string();
        assert!(err.contains("`auth` is not base64"), "{err}");
        // A missing file is no credentials.
        let found = find_in_config("ghcr.io", &dir.path().join("none.json")).unwrap();
        assert_eq!(found.auth, Credential::Anonymous);
    }

    #[test]
    fn a_missing_helper_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let path = config(
            dir.path(),
            r#"{"credHelpers": {"ghcr.io": "opkit-no-such-helper"}}"#,
        );
        let err = find_in_config("ghcr.io", &path).unwrap_err().to_string();
        assert!(
            err.contains("docker-credential-opkit-no-such-helper is not installed"),
            "{err}"
        );
        assert!(err.contains("credHelpers[\"ghcr.io\"]"), "{err}");
        // Another registry does not use that helper.
        let found = find_in_config("quay.io", &path).unwrap();
        assert_eq!(found.auth, Credential::Anonymous);
    }

    #[test]
    fn logins_take_precedence_and_never_print_the_password() {
        let login = Login {
            username: "u".into(),
            password: "secret".into(),
        };
        let found = find("ghcr.io", Some(&login)).unwrap();
        assert_eq!(found.auth, Credential::Basic("u".into(), "secret".into()));
        assert!(!format!("{login:?} {found:?}").contains("secret"));
    }
}
