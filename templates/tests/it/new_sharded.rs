//! `cargo opkit new --sharding`: the manager has a `--sharding` flag (and
//! opkit's `shard` feature is on), the
//! Deployment runs three replicas with it instead of `--leader-elect`, the
//! RBAC the project renders allows the ring's Leases, and the generated
//! code is `cargo fmt` and `cargo clippy -D warnings` clean.

use super::support::{cargo, cargo_opkit, lint, persist, text, workspace};

#[test]
fn a_sharded_project_has_the_flag_three_replicas_and_the_lease_rbac() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let workspace = workspace();
    let lock = workspace.join("Cargo.lock");
    let output = cargo_opkit(
        &[
            "opkit",
            "new",
            "split-operator",
            "--group",
            "split.example.com",
            "--kind",
            "Piece",
            "--sharding",
            "--dir",
            tmp.path().to_str().expect("utf-8"),
            "--opkit-path",
            workspace.to_str().expect("utf-8"),
            "--lock-from",
            lock.to_str().expect("utf-8"),
            "--skip-manifests",
        ],
        tmp.path(),
    );
    assert!(
        output.status.success(),
        "new --sharding:\n{}",
        text(&output)
    );
    // Built in a directory that persists between runs (support::persist):
    // unchanged, it compiles nothing again.
    let persisted = persist(&tmp.path().join("split-operator"), "new_sharded", None);
    let project = persisted.dir.clone();
    let read = |file: &str| std::fs::read_to_string(project.join(file)).expect(file);

    let deployment = read("deploy/04-deployment.yaml");
    assert!(deployment.contains("  replicas: 3\n"), "{deployment}");
    assert!(deployment.contains("- --sharding\n"), "{deployment}");
    assert!(!deployment.contains("--leader-elect"), "{deployment}");
    let main = read("src/main.rs");
    assert!(main.contains("sharding: bool,"), "{main}");
    assert!(
        main.contains("Sharding::new(split_operator::SHARD_RING)"),
        "{main}"
    );
    let manifest = read("Cargo.toml");
    assert!(
        manifest.contains("features = [\"secure-metrics\", \"shard\"] }\n"),
        "opkit's shard feature is not on:\n{manifest}"
    );
    let lib = read("src/lib.rs");
    assert!(lib.contains("pub const SHARD_RING: &str = \"split-operator\";"));
    assert!(lib.contains(".sharding()"), "{lib}");

    lint(&project);
    // the rendered RBAC: the ring's Leases (list and delete beyond leader election's verbs)
    let output = cargo(
        &["run", "--quiet", "--", "manifests", "--dir", "deploy"],
        &project,
    );
    assert!(output.status.success(), "manifests:\n{}", text(&output));
    let rbac = read("deploy/03-rbac.yaml");
    let leases = rbac
        .split("- apiGroups:")
        .find(|rule| rule.contains("coordination.k8s.io") && rule.contains("leases"))
        .unwrap_or_else(|| panic!("no Lease rule:\n{rbac}"));
    for verb in ["get", "list", "create", "update", "delete"] {
        assert!(leases.contains(&format!("- {verb}")), "{verb}:\n{leases}");
    }
    let output = cargo(&["run", "--quiet", "--", "--help"], &project);
    assert!(text(&output).contains("--sharding"), "{}", text(&output));
    // the chart made from deploy/ says what its replicas do
    let output = cargo_opkit(&["opkit", "chart", "--out", "dist/chart"], &project);
    assert!(output.status.success(), "chart:\n{}", text(&output));
    let values = read("dist/chart/values.yaml");
    assert!(
        values.contains("# Manager pods; they share the objects (--sharding"),
        "{values}"
    );
}
