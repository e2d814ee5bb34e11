//! `cargo opkit` end to end: a project generated in a temporary directory
//! builds, gets a second kind with `create api` (run from a subdirectory),
//! and passes its own tests — the envtest ones against a real
//! kube-apiserver — without a single edit. Without `--opkit-path` the
//! project uses the checkout this `cargo-opkit` was built from. Generated
//! code is `cargo fmt` and `cargo clippy -D warnings` clean for names of
//! any length. Bad input, and a build that fails, leave nothing behind.
//!
//! Generated projects build in the workspace's target directory, so they
//! reuse the dependencies the workspace already compiled.

use std::path::Path;
use std::process::Command;

use super::support::{
    cargo, cargo_opkit, cargo_opkit_with, lint, persist, render_manifests, target_dir, text,
    workspace,
};

/// The workspace's Cargo.lock: generated projects resolve to the versions
/// the workspace was built with (no registry look-up, no rebuild).
fn lock() -> String {
    workspace()
        .join("Cargo.lock")
        .to_str()
        .expect("utf-8")
        .to_owned()
}

fn entries(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .expect("read dir")
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[test]
fn bad_input_is_a_clear_error_and_writes_nothing() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().to_str().expect("utf-8 path");
    let cases: [(&[&str], &str); 5] = [
        (
            &[
                "opkit",
                "new",
                "Bad_Name",
                "--group",
                "a.example.com",
                "--kind",
                "Foo",
                "--dir",
                dir,
            ],
            "invalid project name \"Bad_Name\"",
        ),
        (
            &[
                "opkit", "new", "good", "--group", "nodomain", "--kind", "Foo", "--dir", dir,
            ],
            "invalid API group \"nodomain\"",
        ),
        (
            &[
                "opkit",
                "new",
                "good",
                "--group",
                "a.example.com",
                "--kind",
                "foo",
                "--dir",
                dir,
            ],
            "invalid kind \"foo\"",
        ),
        (
            &[
                "opkit",
                "new",
                "good",
                "--group",
                "a.example.com",
                "--kind",
                "Foo",
                "--version",
                "1",
                "--dir",
                dir,
            ],
            "invalid API version \"1\"",
        ),
        (
            &[
                "opkit",
                "new",
                "good",
                "--group",
                "a.example.com",
                "--kind",
                "Foo",
                "--bogus",
                "--dir",
                dir,
            ],
            "unexpected argument '--bogus'",
        ),
    ];
    for (args, expected) in cases {
        let output = cargo_opkit(args, tmp.path());
        assert!(!output.status.success(), "{args:?} succeeded");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(
            stderr.contains(expected),
            "{args:?}: expected {expected:?} in\n{}",
            text(&output)
        );
        // Checked before anything is said or built.
        assert!(
            !stderr.contains("building") && output.stdout.is_empty(),
            "{args:?}: said or built something before the error:\n{}",
            text(&output)
        );
    }
    assert!(
        entries(tmp.path()).is_empty(),
        "something was written: {:?}",
        entries(tmp.path())
    );

    std::fs::create_dir(tmp.path().join("taken")).expect("mkdir");
    let output = cargo_opkit(
        &[
            "opkit",
            "new",
            "taken",
            "--group",
            "a.example.com",
            "--kind",
            "Foo",
            "--dir",
            dir,
            "--skip-manifests",
        ],
        tmp.path(),
    );
    assert!(!output.status.success());
    assert!(
        String::from_utf8_lossy(&output.stderr).contains("already exists"),
        "{}",
        text(&output)
    );
    assert_eq!(entries(tmp.path()), ["taken"]);
    assert!(entries(&tmp.path().join("taken")).is_empty());

    let output = cargo_opkit(
        &["opkit", "create", "api", "--kind", "Foo", "--dir", dir],
        tmp.path(),
    );
    assert!(!output.status.success());
    assert!(
        String::from_utf8_lossy(&output.stderr).contains("not inside an opkit project"),
        "{}",
        text(&output)
    );
}

/// A build that fails (here: an opkit that does not compile; in real
/// life, an opkit the registry does not have) leaves no directory, so a
/// retry does not find one "already exists".
#[test]
fn a_failed_build_leaves_nothing() {
    let tmp = tempfile::tempdir().expect("tempdir");
    // A checkout: the broken opkit in sdk/, an opkit-envtest beside it.
    let checkout = tmp.path().join("broken-checkout");
    let broken = checkout.join("sdk");
    std::fs::create_dir_all(broken.join("src")).expect("mkdir");
    std::fs::write(
        broken.join("Cargo.toml"),
        // the features a new project turns on, so cargo gets as far as
        // compiling it
        "[package]\nname = \"opkit\"\nversion = \"0.1.0\"\nedition = \"2024\"\n\
         [features]\nsecure-metrics = []\n",
    )
    .expect("write");
    std::fs::write(
        broken.join("src/lib.rs"),
        "compile_error!(\"this opkit is broken on purpose\");\n",
    )
    .expect("write");
    let envtest = checkout.join("envtest");
    std::fs::create_dir_all(envtest.join("src")).expect("mkdir");
    std::fs::write(
        envtest.join("Cargo.toml"),
        "[package]\nname = \"opkit-envtest\"\nversion = \"0.1.0\"\nedition = \"2024\"\n",
    )
    .expect("write");
    std::fs::write(envtest.join("src/lib.rs"), "").expect("write");
    let projects = tmp.path().join("projects");
    std::fs::create_dir(&projects).expect("mkdir");
    let dir = projects.to_str().expect("utf-8");
    // Offline, so the answer does not depend on the network.
    let new = |opkit: &[&str]| {
        let mut args = vec![
            "opkit",
            "new",
            "doomed",
            "--group",
            "a.example.com",
            "--kind",
            "Foo",
            "--dir",
            dir,
        ];
        args.extend_from_slice(opkit);
        let lock = lock();
        args.extend_from_slice(&["--lock-from", &lock]);
        cargo_opkit_with(&args, &projects, &[("CARGO_NET_OFFLINE", "true")])
    };

    let output = new(&["--opkit-path", broken.to_str().expect("utf-8")]);
    assert!(!output.status.success(), "{}", text(&output));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("broken on purpose") && stderr.contains("generating the manifests failed"),
        "{}",
        text(&output)
    );
    assert!(
        entries(&projects).is_empty(),
        "left: {:?}",
        entries(&projects)
    );

    // The published opkit, which no registry has yet.
    let output = new(&["--opkit-version", "0.1"]);
    assert!(!output.status.success(), "{}", text(&output));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("opkit"), "{}", text(&output));
    assert!(
        entries(&projects).is_empty(),
        "left: {:?}",
        entries(&projects)
    );
}

/// Names short and long, with digits: the generated code is formatted and
/// lint-free as generated, and after `create api`.
#[test]
fn generated_code_is_fmt_and_clippy_clean_for_any_name() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let workspace = workspace();
    let cases = [
        ("ww-op", "w.io", "Ww", None),
        (
            "a-rather-long-operator-name-for-widths-9",
            "very-long-subdomain-for-testing.infrastructure.example.com",
            "ExtraordinarilyLongKindNameForWrapping",
            Some("AnotherQuiteLongKindNameToRegister"),
        ),
        (
            "db2-operator",
            "db2.example.com",
            "Db2Cluster",
            Some("S3Bucket"),
        ),
    ];
    for (name, group, kind, second) in cases {
        let output = cargo_opkit(
            &[
                "opkit",
                "new",
                name,
                "--group",
                group,
                "--kind",
                kind,
                "--dir",
                tmp.path().to_str().expect("utf-8"),
                "--opkit-path",
                workspace.to_str().expect("utf-8"),
                "--lock-from",
                &lock(),
                "--skip-manifests",
            ],
            tmp.path(),
        );
        assert!(output.status.success(), "new {name}:\n{}", text(&output));
        let staged = tmp.path().join(name);
        if let Some(second) = second {
            let output = cargo_opkit(
                &[
                    "opkit",
                    "create",
                    "api",
                    "--kind",
                    second,
                    "--skip-manifests",
                ],
                &staged.join("src/api"),
            );
            assert!(
                output.status.success(),
                "create api {second}:\n{}",
                text(&output)
            );
        }
        // Checked in a directory that persists between runs: unchanged, it
        // compiles nothing again.
        let persisted = persist(&staged, &format!("new_project-lint-{name}"), None);
        lint(&persisted.dir);
    }
}

#[test]
fn a_generated_project_builds_and_passes_its_own_tests() {
    let tmp = tempfile::tempdir().expect("tempdir");
    // No --opkit-path: the project depends on the checkout this
    // cargo-opkit was built from.
    let output = cargo_opkit(
        &[
            "opkit",
            "new",
            "journey-operator",
            "--group",
            "journey.example.com",
            "--version",
            "v1alpha1",
            "--kind",
            "Journey",
            "--dir",
            tmp.path().to_str().expect("utf-8"),
            "--lock-from",
            &lock(),
        ],
        tmp.path(),
    );
    assert!(
        output.status.success(),
        "cargo opkit new failed:\n{}",
        text(&output)
    );
    let stdout = String::from_utf8_lossy(&output.stdout);
    let sdk = std::fs::canonicalize(workspace().join("sdk")).expect("sdk");
    assert!(
        stdout.contains(&format!("opkit: the local checkout {}", sdk.display()))
            && stdout.contains("version = \"0.1\""),
        "{}",
        text(&output)
    );
    let project = tmp.path().join("journey-operator");
    let manifest = std::fs::read_to_string(project.join("Cargo.toml")).expect("Cargo.toml");
    assert!(
        manifest.contains(&format!(
            "opkit = {{ path = \"{}\", features = [\"secure-metrics\"] }}",
            sdk.display()
        )),
        "{manifest}"
    );
    let envtest = std::fs::canonicalize(workspace().join("envtest")).expect("envtest");
    assert!(
        manifest.contains(&format!(
            "[dev-dependencies]\nopkit-envtest = {{ path = \"{}\" }}",
            envtest.display()
        )),
        "{manifest}"
    );
    // cargo's own progress was shown while it built.
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("building journey-operator") && stderr.contains("Finished"),
        "{}",
        text(&output)
    );
    assert!(
        entries(tmp.path()) == ["journey-operator"],
        "{:?}",
        entries(tmp.path())
    );
    let rbac = std::fs::read_to_string(project.join("deploy/03-rbac.yaml")).expect("rbac");
    assert!(
        rbac.contains("journeys/status") && rbac.contains("leases"),
        "{rbac}"
    );
    let crds = std::fs::read_to_string(project.join("deploy/01-crds.yaml")).expect("crds");
    assert!(
        crds.contains("name: journeys.journey.example.com"),
        "{crds}"
    );

    // From a subdirectory, as cargo works: no --dir. `new` built the
    // project above in its own directory (what this test checks); the
    // next state is built in a directory that persists between runs, as a
    // package of its own (support::persist), so it compiles only when
    // changed; its manifests rendered there, as `create api` does last.
    let output = cargo_opkit(
        &[
            "opkit",
            "create",
            "api",
            "--kind",
            "Voyage",
            "--group",
            "travel.example.org",
            "--skip-manifests",
        ],
        &project.join("src/controllers"),
    );
    assert!(
        output.status.success(),
        "cargo opkit create api failed:\n{}",
        text(&output)
    );
    let voyage = persist(
        &project,
        "new_project-voyage",
        Some("journey-operator-voyage"),
    );
    let project = voyage.dir.clone();
    render_manifests(&project);
    let rbac = std::fs::read_to_string(project.join("deploy/03-rbac.yaml")).expect("rbac");
    assert!(
        rbac.contains("voyages/status") && rbac.contains("travel.example.org"),
        "{rbac}"
    );

    // `manifests` from a subdirectory rewrites deploy/ at the project root.
    std::fs::remove_file(project.join("deploy/03-rbac.yaml")).expect("rm");
    let output = cargo_opkit(&["opkit", "manifests"], &project.join("tests"));
    assert!(output.status.success(), "manifests:\n{}", text(&output));
    assert_eq!(
        std::fs::read_to_string(project.join("deploy/03-rbac.yaml")).expect("rbac"),
        rbac
    );
    assert!(!project.join("tests/deploy").exists());

    // --show-output prints what passing tests captured: the operator's logs.
    let output = cargo(&["test", "--", "--show-output"], &project);
    assert!(
        output.status.success(),
        "the generated project's tests failed:\n{}",
        text(&output)
    );
    let stdout = String::from_utf8_lossy(&output.stdout);
    for test in [
        "journey_gets_a_finalizer_and_a_ready_condition_and_goes_away",
        "voyage_gets_a_finalizer_and_a_ready_condition_and_goes_away",
        "deploy_manifests_are_up_to_date",
    ] {
        assert!(
            stdout.contains(&format!("test {test} ... ok")),
            "{test} did not pass:\n{stdout}"
        );
    }
    // The controller's own log line, through the test's subscriber.
    assert!(
        stdout.contains("reconciling") && stdout.contains("INFO"),
        "the operator's logs are not in the test output:\n{stdout}"
    );
}

/// One HTTP request an OTLP receiver got: (request line, body).
type Received = (String, Vec<u8>);

/// A minimal OTLP/HTTP receiver on loopback: answers every request with an
/// empty 200 and hands (request line, body) to the returned channel.
fn otlp_receiver() -> (u16, std::sync::mpsc::Receiver<Received>) {
    use std::io::{BufRead, BufReader, Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("addr").port();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { return };
            let Ok(clone) = stream.try_clone() else {
                return;
            };
            let mut reader = BufReader::new(clone);
            let mut request_line = String::new();
            if reader.read_line(&mut request_line).is_err() {
                continue;
            }
            let mut length = 0usize;
            loop {
                let mut header = String::new();
                if reader.read_line(&mut header).unwrap_or(0) == 0 || header == "\r\n" {
                    break;
                }
                if let Some((name, value)) = header.split_once(':')
                    && name.eq_ignore_ascii_case("content-length")
                {
                    length = value.trim().parse().unwrap_or(0);
                }
            }
            let mut body = vec![0; length];
            if reader.read_exact(&mut body).is_err() {
                continue;
            }
            let _ = stream.write_all(
                b"HTTP/1.1 200 OK\r\ncontent-type: application/x-protobuf\r\ncontent-length: 0\r\nconnection: close\r\n\r\n",
            );
            if tx.send((request_line.trim().to_owned(), body)).is_err() {
                return;
            }
        }
    });
    (port, rx)
}

/// Built with `--features otel` and given OTEL_EXPORTER_OTLP_ENDPOINT, the
/// operator's spans reach an OTLP/HTTP receiver; the default build has no
/// OpenTelemetry in it.
#[test]
fn spans_reach_an_otlp_receiver_when_an_endpoint_is_set() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let output = cargo_opkit(
        &[
            "opkit",
            "new",
            "traced-operator",
            "--group",
            "traced.example.com",
            "--kind",
            "Trace",
            "--dir",
            tmp.path().to_str().expect("utf-8"),
            "--opkit-path",
            workspace().to_str().expect("utf-8"),
            "--lock-from",
            &lock(),
            "--skip-manifests",
        ],
        tmp.path(),
    );
    assert!(output.status.success(), "{}", text(&output));
    // Built in a directory that persists between runs: unchanged, it
    // compiles nothing again.
    let persisted = persist(
        &tmp.path().join("traced-operator"),
        "new_project-otel",
        None,
    );
    let project = persisted.dir.clone();
    let output = cargo(&["tree", "--edges", "normal", "--prefix", "none"], &project);
    assert!(output.status.success(), "{}", text(&output));
    assert!(
        !String::from_utf8_lossy(&output.stdout).contains("opentelemetry"),
        "the default build pulls OpenTelemetry in:\n{}",
        text(&output)
    );
    let output = cargo(
        &[
            "build",
            "--quiet",
            "--features",
            "otel",
            "--bin",
            "traced-operator",
        ],
        &project,
    );
    assert!(output.status.success(), "{}", text(&output));

    let (port, received) = otlp_receiver();
    // A kubeconfig that does not exist: the operator starts, fails to
    // connect, and exits; its `operator` span ends and is exported on the
    // way out.
    let output = Command::new(target_dir().join("debug/traced-operator"))
        .args(["--kubeconfig", "/nonexistent/kubeconfig"])
        .env(
            "OTEL_EXPORTER_OTLP_ENDPOINT",
            format!("http://127.0.0.1:{port}"),
        )
        .env("RUST_LOG", "info")
        .output()
        .expect("run the operator");
    assert!(!output.status.success(), "{}", text(&output));
    let (request_line, body) = received
        .recv_timeout(std::time::Duration::from_secs(30))
        .unwrap_or_else(|e| panic!("no OTLP request arrived ({e}):\n{}", text(&output)));
    assert!(
        request_line.starts_with("POST /v1/traces "),
        "{request_line}"
    );
    let contains = |needle: &[u8]| body.windows(needle.len()).any(|w| w == needle);
    assert!(
        // Span.name (field 5, 8 bytes long) and the service name.
        contains(b"\x2a\x08operator") && contains(b"traced-operator"),
        "the export lacks the `operator` span or the service name: {body:?}"
    );
}
