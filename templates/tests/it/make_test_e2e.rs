//! `make test-e2e` of a generated project, for real: a project fresh from
//! `cargo opkit new` with a kind (its reconciler the template's TODO body),
//! whose end-to-end test starts opkit's local cluster with a registry (no
//! `KUBECONFIG`, as root), pushes the image `cargo opkit image` builds,
//! `make deploy NETWORK_POLICY=1`s it (the metrics NetworkPolicy selecting
//! the manager's pod: the local cluster does not enforce it), sees the
//! sample reconciled and the kind's roles
//! aggregated into the built-in `view` and `edit`, `make undeploy`s, and
//! stops the cluster leaving nothing behind. Needs root and the cluster's
//! assets (`make cluster-assets`), as `make test` in opkit has.

use std::process::{Command, Stdio};

use super::support::{new_project, path_with_cargo_opkit, target_dir, text};

#[test]
fn make_test_e2e_deploys_a_generated_operator_to_the_local_cluster() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let project = new_project(tmp.path(), "e2e-operator", "e2e.example.com", "Probe");
    let mut make = Command::new("make");
    cargo_opkit::clear_crate_env(&mut make)
        .arg("test-e2e")
        .current_dir(&project)
        .env("PATH", path_with_cargo_opkit())
        .env("CARGO_TARGET_DIR", target_dir())
        .env_remove("KUBECONFIG")
        .env_remove("MAKEFLAGS")
        .env_remove("MAKELEVEL")
        .stdin(Stdio::null());
    let started = std::time::Instant::now();
    let output = make.output().expect("run make test-e2e");
    let shown = text(&output);
    assert!(output.status.success(), "make test-e2e:\n{shown}");
    let stdout = String::from_utf8_lossy(&output.stdout);
    // The project is as it was: the test's push is not what a later
    // `make deploy` deploys.
    assert!(!project.join(".pushed-image").exists());
    for line in [
        "opkit's local cluster started",
        "NetworkPolicy e2e-operator-allow-metrics-traffic selects the manager's pod",
        "samples/probe.yaml: probe-sample reconciled",
        "test the_operator_deploys_reconciles_the_samples_and_undeploys ... ok",
        "test result: ok. 1 passed",
    ] {
        assert!(stdout.contains(line), "`{line}` missing:\n{shown}");
    }
    // The steps the generated test printed, for the log of this run.
    for line in stdout.lines().filter(|l| {
        l.starts_with("make ")
            || l.starts_with("opkit's local cluster")
            || l.starts_with("NetworkPolicy")
            || l.ends_with("reconciled")
    }) {
        eprintln!("  {line}");
    }
    eprintln!(
        "make test-e2e (build, cluster, image, deploy, sample, undeploy): {:.0}s",
        started.elapsed().as_secs_f64()
    );
}

/// With no `KUBECONFIG` and no root to start a cluster, `make test-e2e`
/// stops before building anything and says what to set.
#[test]
fn make_test_e2e_without_a_cluster_or_root_says_what_to_set() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let project = new_project(tmp.path(), "lone-operator", "lone.example.com", "Probe");
    // Readable by `nobody`, who runs make below.
    for dir in [tmp.path(), project.as_path()] {
        std::fs::set_permissions(dir, std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .expect("chmod");
    }
    let before = entries(&project);
    let mut make = Command::new("setpriv");
    cargo_opkit::clear_crate_env(&mut make)
        .args([
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            "make",
            "test-e2e",
        ])
        .current_dir(&project)
        .env("PATH", path_with_cargo_opkit())
        .env_remove("KUBECONFIG")
        .env_remove("MAKEFLAGS")
        .stdin(Stdio::null());
    let output = make.output().expect("run make test-e2e as nobody");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "{}", text(&output));
    assert!(
        stderr.contains("make test-e2e needs a cluster: set KUBECONFIG"),
        "{}",
        text(&output)
    );
    assert!(!stderr.contains("Compiling"), "{}", text(&output));
    assert_eq!(entries(&project), before, "nothing is left behind");
}

fn entries(dir: &std::path::Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .expect("read the project")
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}
