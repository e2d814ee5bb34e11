//! `make test-e2e` of a generated project, for real: a project fresh from
//! `cargo opkit new` with a kind (its reconciler the template's TODO body),
//! whose end-to-end test starts opkit's local cluster with a registry (no
//! `KUBECONFIG`, as root), pushes the image `cargo opkit image` builds,
//! `make deploy NETWORK_POLICY=1`s it (the metrics NetworkPolicy selecting
//! the manager's pod: the local cluster does not enforce it), sees the
//! sample reconciled and the kind's roles
//! aggregated into the built-in `view` and `edit`, `make undeploy`s, and
//! stops the cluster leaving nothing behind; then the same with
//! `KUBECONFIG` and `IMG` naming a cluster (and its registry) the journey
//! started, as CI's kind cluster would be. Needs root and the cluster's
//! assets (`make cluster-assets`), as `make test` in opkit has.

use std::path::Path;
use std::process::{Command, Stdio};

use super::support::{new_project, path_with_cargo_opkit, persist, target_dir, text};

#[test]
fn make_test_e2e_deploys_a_generated_operator_to_the_local_cluster() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let staged = new_project(tmp.path(), "e2e-operator", "e2e.example.com", "Probe");
    // Built in a directory that persists between runs: unchanged, it
    // compiles nothing again.
    let persisted = persist(&staged, "make_test_e2e", None);
    let project = persisted.dir.clone();

    // No KUBECONFIG, as root: the test starts opkit's local cluster.
    let stdout = make_test_e2e(&project, None, &[]);
    assert!(stdout.contains("opkit's local cluster started"), "{stdout}");

    // KUBECONFIG and IMG: the test deploys to that cluster (here one this
    // journey starts, with the registry IMG names) and leaves it running.
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    let cluster = runtime
        .block_on(
            opkit_envtest::Cluster::builder()
                .with_registry()
                .without_dns()
                .start(),
        )
        .expect("start a local cluster");
    let registry = cluster.registry().expect("registry");
    let image = format!("IMG={}", registry.reference("e2e-operator", "given"));
    let stdout = make_test_e2e(
        &project,
        Some(cluster.kubeconfig_path()),
        &[&image, "INSECURE=1"],
    );
    assert!(
        !stdout.contains("opkit's local cluster started"),
        "{stdout}"
    );
    assert!(stdout.contains("/e2e-operator:given PUSH=1"), "{stdout}");
    cluster.stop();
    assert_eq!(cluster.footprint().remaining(), Vec::<String>::new());
}

/// Runs `make test-e2e ARGS` in `project` (with `KUBECONFIG` if given, and
/// the local cluster's kubectl on `PATH`), checks what it reports and that
/// the project is as it was; its output.
fn make_test_e2e(project: &Path, kubeconfig: Option<&Path>, args: &[&str]) -> String {
    let kubectl = opkit_envtest::find_node_assets()
        .expect("the cluster's assets (make cluster-assets)")
        .bin("kubectl");
    let path = std::env::join_paths(
        kubectl
            .parent()
            .map(Path::to_owned)
            .into_iter()
            .chain(std::env::split_paths(&path_with_cargo_opkit())),
    )
    .expect("PATH");
    let mut make = Command::new("make");
    cargo_opkit::clear_crate_env(&mut make)
        .arg("test-e2e")
        .args(args)
        .current_dir(project)
        .env("PATH", path)
        .env("CARGO_TARGET_DIR", target_dir())
        .env_remove("KUBECONFIG")
        .env_remove("MAKEFLAGS")
        .env_remove("MAKELEVEL")
        .stdin(Stdio::null());
    if let Some(kubeconfig) = kubeconfig {
        make.env("KUBECONFIG", kubeconfig);
    }
    let started = std::time::Instant::now();
    let output = make.output().expect("run make test-e2e");
    let shown = text(&output);
    assert!(output.status.success(), "make test-e2e:\n{shown}");
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    // The project is as it was: the test's push is not what a later
    // `make deploy` deploys.
    assert!(!project.join(".pushed-image").exists());
    for line in [
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
        "make test-e2e {} (image, deploy, sample, undeploy): {:.0}s",
        args.join(" "),
        started.elapsed().as_secs_f64()
    );
    stdout
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
