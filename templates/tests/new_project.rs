//! `cargo opkit` end to end: a project generated in a temporary directory
//! (depending on this checkout's opkit by path) builds, gets a second kind
//! with `create api`, and passes its own tests — the envtest ones against a
//! real kube-apiserver — without a single edit. Bad input is refused with a
//! clear error and leaves nothing behind.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The workspace root (this crate lives in `templates/`).
fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("templates/ has a parent")
        .to_owned()
}

/// The workspace's target directory: the generated project builds there
/// too, so it reuses the dependencies the workspace already compiled.
fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace().join("target"))
}

fn cargo_opkit(args: &[&str], cwd: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_cargo-opkit"))
        .args(args)
        .current_dir(cwd)
        .env("CARGO_TARGET_DIR", target_dir())
        .output()
        .expect("run cargo-opkit")
}

fn text(output: &Output) -> String {
    format!(
        "status {}\n--- stdout\n{}\n--- stderr\n{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
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
        String::from_utf8_lossy(&output.stderr).contains("not an opkit project"),
        "{}",
        text(&output)
    );
}

#[test]
fn a_generated_project_builds_and_passes_its_own_tests() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let workspace = workspace();
    let lock = workspace.join("Cargo.lock");
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
            "--opkit-path",
            workspace.to_str().expect("utf-8"),
            "--lock-from",
            lock.to_str().expect("utf-8"),
        ],
        tmp.path(),
    );
    assert!(
        output.status.success(),
        "cargo opkit new failed:\n{}",
        text(&output)
    );
    let project = tmp.path().join("journey-operator");
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

    let output = cargo_opkit(
        &[
            "opkit",
            "create",
            "api",
            "--kind",
            "Voyage",
            "--dir",
            project.to_str().expect("utf-8"),
        ],
        &project,
    );
    assert!(
        output.status.success(),
        "cargo opkit create api failed:\n{}",
        text(&output)
    );
    let rbac = std::fs::read_to_string(project.join("deploy/03-rbac.yaml")).expect("rbac");
    assert!(rbac.contains("voyages/status"), "{rbac}");

    let output = Command::new(env!("CARGO"))
        .args(["test"])
        .current_dir(&project)
        .env("CARGO_TARGET_DIR", target_dir())
        .output()
        .expect("run cargo test");
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
}
