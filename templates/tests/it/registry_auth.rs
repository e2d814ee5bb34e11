//! `cargo opkit image --push` to a registry that wants credentials, as a
//! production one does: the real registry (distribution) with htpasswd
//! (HTTP Basic) over HTTPS from a private CA, and the credentials found
//! where docker and ko find them.
//!
//! Needs the registry (`make registry`). Also with distribution's `token`
//! auth: the registry verifies ES256 JWTs from a token service these tests
//! run (`token_service.rs`), reached by oci-client's token flow with a
//! password and by ours with an identity token.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use base64::Engine as _;
use oci_client::client::{Certificate, CertificateEncoding, ClientConfig, ClientProtocol};
use oci_client::secrets::RegistryAuth;
use oci_client::{Client, Reference};
use opkit_envtest::Registry;

use crate::support::{target_dir, text};
use crate::token_service::{ISSUER, SERVICE, TokenService};

const USER: &str = "opkit-pusher";
const PASSWORD: &str = "right-password";
const MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";

/// A tiny package to build images of, made once for every test here.
fn tiny_project() -> PathBuf {
    let dir = target_dir().join("opkit-it-registry-auth").join("tiny");
    std::fs::create_dir_all(dir.join("src")).unwrap();
    std::fs::write(
        dir.join("Cargo.toml"),
        "[package]\nname = \"tiny\"\nversion = \"1.0.0\"\nedition = \"2024\"\n\n[workspace]\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("src/main.rs"),
        "fn main() { println!(\"tiny\"); }\n",
    )
    .unwrap();
    dir
}

/// A registry that wants `USER`/`PASSWORD` over HTTPS.
async fn private_registry() -> Registry {
    Registry::builder()
        .htpasswd(USER, PASSWORD)
        .start()
        .await
        .unwrap()
}

/// `cargo opkit image --push REFERENCE ARGS` with `env` (and `HOME` set to
/// `home`, so no real Docker configuration is read), `stdin` piped in.
fn push(
    home: &Path,
    reference: &str,
    args: &[&str],
    env: &[(&str, &std::ffi::OsStr)],
    stdin: Option<&str>,
) -> Output {
    let project = tiny_project();
    let mut command = Command::new(env!("CARGO_BIN_EXE_cargo-opkit"));
    command
        .args(["opkit", "image", "--push", reference, "--output"])
        .arg(home.join("layout"))
        .args(args)
        .current_dir(&project)
        .env("CARGO_TARGET_DIR", target_dir())
        .env("HOME", home)
        .env_remove("DOCKER_CONFIG")
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (key, value) in env {
        command.env(key, value);
    }
    let mut child = command.spawn().unwrap();
    if let Some(input) = stdin {
        // A push that fails before it reads stdin (e.g. at the registry's
        // address) may have exited already: its output says why.
        let written = child.stdin.take().unwrap().write_all(input.as_bytes());
        if let Err(e) = written {
            assert_eq!(
                e.kind(),
                std::io::ErrorKind::BrokenPipe,
                "writing stdin: {e}"
            );
        }
    }
    child.wait_with_output().unwrap()
}

/// The digest `cargo opkit image` printed after `pushed REF@`.
fn pushed_digest(output: &Output) -> String {
    let stdout = String::from_utf8_lossy(&output.stdout);
    stdout
        .lines()
        .find_map(|l| l.strip_prefix("pushed "))
        .and_then(|l| l.rsplit_once('@'))
        .map(|(_, d)| d.to_owned())
        .unwrap_or_else(|| panic!("no pushed line:\n{}", text(output)))
}

/// The digest of `reference`'s manifest, pulled with the right password;
/// `None` when the registry has no such tag.
async fn pulled_digest(registry: &Registry, reference: &str) -> Option<String> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let ca = registry.ca_pem().unwrap().as_bytes().to_vec();
    let client = Client::try_from(ClientConfig {
        protocol: ClientProtocol::Https,
        extra_root_certificates: vec![Certificate {
            encoding: CertificateEncoding::Pem,
            data: ca,
        }],
        ..ClientConfig::default()
    })
    .unwrap();
    let image: Reference = reference.parse().unwrap();
    let auth = RegistryAuth::Basic(USER.to_owned(), PASSWORD.to_owned());
    match client.pull_manifest_raw(&image, &auth, &[MANIFEST]).await {
        Ok((_, digest)) => Some(digest),
        Err(e) => {
            let e = e.to_string();
            assert!(
                e.contains("manifest unknown") || e.contains("MANIFEST_UNKNOWN"),
                "{e}"
            );
            None
        }
    }
}

/// A Docker configuration directory holding `config`.
fn docker_config(dir: &Path, config: &serde_json::Value) -> PathBuf {
    let docker = dir.join("docker-config");
    std::fs::create_dir_all(&docker).unwrap();
    std::fs::write(docker.join("config.json"), config.to_string()).unwrap();
    docker
}

fn basic(user: &str, password: &str) -> String {
    base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"))
}

/// `auths` as `docker login` writes it (base64 `auth`), under a key with a
/// scheme and a path that Docker's normalisation strips; the pushed image
/// is pullable by its digest.
#[tokio::test]
async fn config_json_auths_push_and_the_image_is_pullable() {
    let registry = private_registry().await;
    let home = tempfile::tempdir().unwrap();
    let ca = registry.ca_file().unwrap();
    let key = format!("https://{}/v1/", registry.host());
    let config = docker_config(
        home.path(),
        &serde_json::json!({ "auths": { key: { "auth": basic(USER, PASSWORD) } } }),
    );
    let reference = registry.reference("opkit/tiny", "v1");
    let output = push(
        home.path(),
        &reference,
        &["--ca-file", ca.to_str().unwrap()],
        &[("DOCKER_CONFIG", config.as_os_str())],
        None,
    );
    assert!(output.status.success(), "{}", text(&output));
    let digest = pushed_digest(&output);
    assert_eq!(
        pulled_digest(&registry, &reference).await.as_deref(),
        Some(digest.as_str())
    );

    // ~/.docker/config.json, with `username` and `password` fields.
    let dot_docker = home.path().join(".docker");
    std::fs::create_dir_all(&dot_docker).unwrap();
    std::fs::write(
        dot_docker.join("config.json"),
        serde_json::json!({ "auths": { registry.host(): { "username": USER, "password": PASSWORD } } })
            .to_string(),
    )
    .unwrap();
    let reference = registry.reference("opkit/tiny", "v2");
    let output = push(
        home.path(),
        &reference,
        &["--ca-file", ca.to_str().unwrap()],
        &[],
        None,
    );
    assert!(output.status.success(), "{}", text(&output));
    assert_eq!(
        pulled_digest(&registry, &reference).await,
        Some(pushed_digest(&output))
    );
}

/// A wrong password: a clear 401 naming the registry and where the
/// credentials came from, the layout kept, and no tag in the registry.
/// Without credentials: the same 401, saying none were found.
#[tokio::test]
async fn a_wrong_password_is_a_clear_401_and_pushes_nothing() {
    let registry = private_registry().await;
    let home = tempfile::tempdir().unwrap();
    let ca = registry.ca_file().unwrap();
    let config = docker_config(
        home.path(),
        &serde_json::json!({ "auths": { registry.host(): { "auth": basic(USER, "wrong") } } }),
    );
    let reference = registry.reference("opkit/tiny", "bad");
    let output = push(
        home.path(),
        &reference,
        &["--ca-file", ca.to_str().unwrap()],
        &[("DOCKER_CONFIG", config.as_os_str())],
        None,
    );
    assert!(!output.status.success(), "{}", text(&output));
    let err = String::from_utf8_lossy(&output.stderr);
    assert!(
        err.contains(&format!(
            "https://{} answered 401 Unauthorized",
            registry.host()
        )),
        "{err}"
    );
    assert!(err.contains("refused the credentials from auths["), "{err}");
    assert!(
        err.contains(&config.join("config.json").display().to_string()),
        "{err}"
    );
    assert!(err.contains("the image is intact in"), "{err}");
    assert!(
        !err.contains("wrong"),
        "the password is never printed: {err}"
    );
    assert_eq!(pulled_digest(&registry, &reference).await, None);

    // No credentials at all.
    let empty = tempfile::tempdir().unwrap();
    let output = push(
        empty.path(),
        &reference,
        &["--ca-file", ca.to_str().unwrap()],
        &[],
        None,
    );
    assert!(!output.status.success(), "{}", text(&output));
    let err = String::from_utf8_lossy(&output.stderr);
    assert!(err.contains("401 Unauthorized"), "{err}");
    assert!(err.contains("none were found"), "{err}");
    assert!(
        err.contains(&format!("docker login {}", registry.host())),
        "{err}"
    );
    assert_eq!(pulled_digest(&registry, &reference).await, None);
}

/// `credHelpers` runs `docker-credential-<name> get` (found on PATH) with
/// the registry's address on stdin; `credsStore` naming a helper that is
/// not installed is an error naming it.
#[tokio::test]
async fn a_credential_helper_gives_the_password() {
    let registry = private_registry().await;
    let home = tempfile::tempdir().unwrap();
    let bin = home.path().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let asked = home.path().join("asked");
    let helper = bin.join("docker-credential-opkittest");
    std::fs::write(
        &helper,
        format!(
            "#!/bin/sh\n\
             [ \"$1\" = get ] || exit 2\n\
             server=$(cat)\n\
             printf '%s' \"$server\" > {asked}\n\
             if [ \"$server\" = \"{host}\" ]; then\n\
               printf '{{\"ServerURL\":\"%s\",\"Username\":\"{USER}\",\"Secret\":\"{PASSWORD}\"}}' \"$server\"\n\
             else\n\
               echo 'credentials not found in native keychain'; exit 1\n\
             fi\n",
            asked = asked.display(),
            host = registry.host(),
        ),
    )
    .unwrap();
    std::fs::set_permissions(&helper, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let path = std::env::join_paths(std::iter::once(bin.clone()).chain(std::env::split_paths(
        &std::env::var_os("PATH").unwrap_or_default(),
    )))
    .unwrap();
    let config = docker_config(
        home.path(),
        &serde_json::json!({
            "credHelpers": { registry.host(): "opkittest" },
            "auths": { registry.host(): {} }
        }),
    );
    let ca = registry.ca_file().unwrap();
    let reference = registry.reference("opkit/tiny", "helper");
    let output = push(
        home.path(),
        &reference,
        &["--ca-file", ca.to_str().unwrap()],
        &[("DOCKER_CONFIG", config.as_os_str()), ("PATH", &path)],
        None,
    );
    assert!(output.status.success(), "{}", text(&output));
    assert_eq!(std::fs::read_to_string(&asked).unwrap(), registry.host());
    assert_eq!(
        pulled_digest(&registry, &reference).await,
        Some(pushed_digest(&output))
    );

    // A credsStore that is not installed.
    let config = docker_config(
        home.path(),
        &serde_json::json!({ "credsStore": "opkit-not-installed" }),
    );
    let output = push(
        home.path(),
        &registry.reference("opkit/tiny", "nohelper"),
        &["--ca-file", ca.to_str().unwrap()],
        &[("DOCKER_CONFIG", config.as_os_str()), ("PATH", &path)],
        None,
    );
    assert!(!output.status.success(), "{}", text(&output));
    let err = String::from_utf8_lossy(&output.stderr);
    assert!(
        err.contains("docker-credential-opkit-not-installed is not installed"),
        "{err}"
    );
    assert!(err.contains("credsStore"), "{err}");
}

/// `--username` with `--password-stdin` wins over the Docker configuration.
#[tokio::test]
async fn password_stdin_signs_in() {
    let registry = private_registry().await;
    let home = tempfile::tempdir().unwrap();
    // A wrong password in the configuration is not used.
    let config = docker_config(
        home.path(),
        &serde_json::json!({ "auths": { registry.host(): { "auth": basic(USER, "wrong") } } }),
    );
    let ca = registry.ca_file().unwrap();
    let reference = registry.reference("opkit/tiny", "stdin");
    let output = push(
        home.path(),
        &reference,
        &[
            "--ca-file",
            ca.to_str().unwrap(),
            "--username",
            USER,
            "--password-stdin",
        ],
        &[("DOCKER_CONFIG", config.as_os_str())],
        Some(&format!("{PASSWORD}\n")),
    );
    assert!(output.status.success(), "{}", text(&output));
    assert_eq!(
        pulled_digest(&registry, &reference).await,
        Some(pushed_digest(&output))
    );

    // A loopback registry without a CA is spoken to in plain HTTP: the
    // error says to pass the CA.
    let output = push(
        home.path(),
        &reference,
        &["--username", USER, "--password-stdin"],
        &[],
        Some(PASSWORD),
    );
    assert!(!output.status.success(), "{}", text(&output));
    let err = String::from_utf8_lossy(&output.stderr);
    assert!(
        err.contains("may speak HTTPS") && err.contains("--ca-file"),
        "{err}"
    );

    // --password-stdin without --username is refused before anything runs.
    let output = push(
        home.path(),
        &reference,
        &["--password-stdin"],
        &[],
        Some("x\n"),
    );
    assert!(!output.status.success(), "{}", text(&output));
    assert!(
        String::from_utf8_lossy(&output.stderr).contains("--username"),
        "{}",
        text(&output)
    );
}

/// A registry with token auth (distribution's `token`, verifying the JWTs
/// of a token service): a password is exchanged for a token by oci-client's
/// `GET` with Basic, an `identitytoken` by our OAuth2 `refresh_token` POST;
/// a wrong password is a clear 401 and tags nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_bearer_token_flow_with_a_password_and_an_identity_token() {
    let home = tempfile::tempdir().unwrap();
    let tokens = TokenService::start(home.path(), USER, PASSWORD, "refresh-me").await;
    let registry = Registry::builder()
        .token_auth(tokens.realm(), SERVICE, ISSUER, tokens.jwks())
        .start()
        .await
        .unwrap();
    let ca = registry.ca_file().unwrap();
    let ca = ca.to_str().unwrap().to_owned();
    let run =
        |reference: String, args: Vec<String>, config: serde_json::Value, stdin: Option<String>| {
            let home = home.path().to_owned();
            tokio::task::spawn_blocking(move || {
                let docker = docker_config(&home, &config);
                let args: Vec<&str> = args.iter().map(String::as_str).collect();
                push(
                    &home,
                    &reference,
                    &args,
                    &[("DOCKER_CONFIG", docker.as_os_str())],
                    stdin.as_deref(),
                )
            })
        };

    // A password, from --password-stdin.
    let reference = registry.reference("opkit/tiny", "token");
    let output = run(
        reference.clone(),
        vec![
            "--ca-file".into(),
            ca.clone(),
            "--username".into(),
            USER.into(),
            "--password-stdin".into(),
        ],
        serde_json::json!({}),
        Some(PASSWORD.to_owned()),
    )
    .await
    .unwrap();
    assert!(output.status.success(), "{}", text(&output));
    assert_eq!(
        pulled_digest(&registry, &reference).await,
        Some(pushed_digest(&output))
    );
    assert!(tokens.seen.lock().unwrap().contains(&"basic".to_owned()));

    // An identity token in config.json.
    let reference = registry.reference("opkit/tiny", "identity");
    let output = run(
        reference.clone(),
        vec!["--ca-file".into(), ca.clone()],
        serde_json::json!({ "auths": { registry.host(): { "identitytoken": "refresh-me" } } }),
        None,
    )
    .await
    .unwrap();
    assert!(output.status.success(), "{}", text(&output));
    assert_eq!(
        pulled_digest(&registry, &reference).await,
        Some(pushed_digest(&output))
    );
    assert!(tokens.seen.lock().unwrap().contains(&"refresh".to_owned()));

    // A wrong password: the token service refuses it.
    let reference = registry.reference("opkit/tiny", "refused");
    let output = run(
        reference.clone(),
        vec!["--ca-file".into(), ca.clone()],
        serde_json::json!({ "auths": { registry.host(): { "auth": basic(USER, "wrong") } } }),
        None,
    )
    .await
    .unwrap();
    assert!(!output.status.success(), "{}", text(&output));
    let err = String::from_utf8_lossy(&output.stderr);
    assert!(err.contains("401 Unauthorized"), "{err}");
    assert!(err.contains("refused the credentials from auths["), "{err}");
    assert_eq!(pulled_digest(&registry, &reference).await, None);

    // A wrong identity token.
    let output = run(
        reference.clone(),
        vec!["--ca-file".into(), ca],
        serde_json::json!({ "auths": { registry.host(): { "identitytoken": "stale" } } }),
        None,
    )
    .await
    .unwrap();
    assert!(!output.status.success(), "{}", text(&output));
    let err = String::from_utf8_lossy(&output.stderr);
    assert!(
        err.contains("refused the identity token (401 Unauthorized)") && err.contains("auths["),
        "{err}"
    );
    assert_eq!(pulled_digest(&registry, &reference).await, None);
}
