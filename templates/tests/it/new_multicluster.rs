//! `cargo opkit new --multicluster`: a hub operator. With
//! `kubeconfig-secrets`, opkit's `multicluster` feature is on, the manager
//! has `--fleet-namespace` and sets `KubeconfigSecrets` as its provider,
//! the kind's controller runs in every member (`multicluster` in its
//! derive, recorded in `PROJECT`), the rendered RBAC lets the hub read the
//! kubeconfig Secrets, the README says what the member credentials must
//! allow, and the generated test (a hub and a member control plane, the
//! member engaged as the provider would) passes. With `cluster-profiles`,
//! the manager reads an access-provider file and watches the hub's
//! ClusterProfiles; with `static`, it takes `--member NAME=KUBECONFIG`
//! flags and refuses a malformed one. Both are `clippy -D warnings` clean.

use super::support::{cargo, cargo_opkit, lint, new_project_with, persist, text};

/// `cargo opkit new NAME --group fleet.example.com --kind KIND
/// --multicluster PROVIDER` under `dir`, without building it.
fn generate(dir: &std::path::Path, name: &str, kind: &str, provider: &str) {
    new_project_with(
        dir,
        name,
        "fleet.example.com",
        kind,
        &["--multicluster", provider],
    );
}

#[test]
fn a_multicluster_project_reconciles_its_kind_in_a_member_cluster() {
    let tmp = tempfile::tempdir().expect("tempdir");
    // Its own project name: package names are binary names in the shared
    // target directory (create_api builds a `fleet-operator`).
    generate(
        tmp.path(),
        "beacon-operator",
        "Beacon",
        "kubeconfig-secrets",
    );
    // Built in a directory that persists between runs (support::persist):
    // unchanged, it compiles nothing again.
    let persisted = persist(
        &tmp.path().join("beacon-operator"),
        "new_multicluster",
        None,
    );
    let project = persisted.dir.clone();
    let read = |file: &str| std::fs::read_to_string(project.join(file)).expect(file);

    let manifest = read("Cargo.toml");
    assert!(
        manifest.contains("features = [\"secure-metrics\", \"multicluster\"] }\n"),
        "opkit's multicluster feature is not on:\n{manifest}"
    );
    let main = read("src/main.rs");
    assert!(main.contains("fleet_namespace: String,"), "{main}");
    assert!(main.contains("KubeconfigSecrets::new("), "{main}");
    let controller = read("src/controllers/beacon.rs");
    assert!(
        controller.contains("#[controller(for = Beacon, status, finalizer, events, multicluster)]"),
        "{controller}"
    );
    assert!(
        read("PROJECT").contains("multicluster: kubeconfig-secrets\n"),
        "{}",
        read("PROJECT")
    );
    let readme = read("README.md");
    assert!(readme.contains("## Member clusters"), "{readme}");
    assert!(
        readme.contains("What the member credentials must allow"),
        "{readme}"
    );

    lint(&project);
    let output = cargo(
        &["run", "--quiet", "--", "manifests", "--dir", "deploy"],
        &project,
    );
    assert!(output.status.success(), "manifests:\n{}", text(&output));
    // The members' kubeconfig Secrets are read in the fleet namespace
    // only: a Role there, no Secret rule in the ClusterRole; and not the
    // namespace itself (`make undeploy` would delete the Secrets).
    let rbac = read("deploy/03-rbac.yaml");
    let docs: Vec<serde_json::Value> =
        serde_saphyr::from_multiple(&rbac).unwrap_or_else(|e| panic!("{e}\n{rbac}"));
    let of = |kind: &'static str| docs.iter().filter(move |d| d["kind"] == kind);
    let cluster_role = of("ClusterRole")
        .find(|d| d["metadata"]["name"] == "beacon-operator-manager-role")
        .unwrap_or_else(|| panic!("no manager ClusterRole:\n{rbac}"));
    assert!(!cluster_role.to_string().contains("secrets"), "{rbac}");
    assert_eq!(of("Namespace").count(), 0, "{rbac}");
    let role = of("Role")
        .find(|d| d["metadata"]["namespace"] == "fleet")
        .unwrap_or_else(|| panic!("no Role in the fleet namespace:\n{rbac}"));
    assert_eq!(role["rules"][0]["resources"][0], "secrets", "{rbac}");
    assert_eq!(
        role["rules"][0]["verbs"],
        serde_json::json!(["get", "list", "watch"]),
        "{rbac}"
    );
    let binding = of("RoleBinding")
        .find(|d| d["metadata"]["namespace"] == "fleet")
        .unwrap_or_else(|| panic!("no RoleBinding in the fleet namespace:\n{rbac}"));
    assert_eq!(binding["roleRef"]["name"], role["metadata"]["name"]);
    assert_eq!(
        binding["subjects"][0]["name"],
        "beacon-operator-controller-manager"
    );
    let output = cargo(&["run", "--quiet", "--", "--help"], &project);
    assert!(
        text(&output).contains("--fleet-namespace"),
        "{}",
        text(&output)
    );
    // the generated test: a hub and a member control plane
    let output = cargo(&["test", "--", "--show-output"], &project);
    assert!(
        output.status.success(),
        "the generated project's tests failed:\n{}",
        text(&output)
    );
    assert!(
        String::from_utf8_lossy(&output.stdout)
            .contains("beacon_gets_a_finalizer_and_a_ready_condition_and_goes_away ... ok"),
        "{}",
        text(&output)
    );
}

#[test]
fn a_cluster_profiles_project_reads_its_provider_file_and_is_lint_clean() {
    let tmp = tempfile::tempdir().expect("tempdir");
    generate(
        tmp.path(),
        "inventory-operator",
        "Probe",
        "cluster-profiles",
    );
    let persisted = persist(
        &tmp.path().join("inventory-operator"),
        "new_multicluster_profiles",
        None,
    );
    let project = persisted.dir.clone();
    let main = std::fs::read_to_string(project.join("src/main.rs")).expect("main.rs");
    assert!(
        main.contains("ClusterProfileAccess::from_file(&args.clusterprofile_provider_file)"),
        "{main}"
    );
    let lib = std::fs::read_to_string(project.join("src/lib.rs")).expect("lib.rs");
    assert!(lib.contains("\"clusterprofiles\""), "{lib}");
    lint(&project);
}

#[test]
fn a_static_project_takes_its_members_on_the_command_line_and_is_lint_clean() {
    let tmp = tempfile::tempdir().expect("tempdir");
    generate(tmp.path(), "pinned-operator", "Anchor", "static");
    let persisted = persist(
        &tmp.path().join("pinned-operator"),
        "new_multicluster_static",
        None,
    );
    let project = persisted.dir.clone();
    let main = std::fs::read_to_string(project.join("src/main.rs")).expect("main.rs");
    assert!(main.contains("StaticClusters::new()"), "{main}");
    assert!(
        main.contains("members = members.kubeconfig(name, kubeconfig);"),
        "{main}"
    );
    lint(&project);
    // a member that is not NAME=KUBECONFIG is refused before anything starts
    let output = cargo(&["run", "--quiet", "--", "--member", "east"], &project);
    assert!(!output.status.success());
    assert!(
        text(&output).contains("expected NAME=KUBECONFIG, got \"east\""),
        "{}",
        text(&output)
    );
}

#[test]
fn an_unknown_provider_is_refused_and_nothing_is_written() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let output = cargo_opkit(
        &[
            "opkit",
            "new",
            "lost-operator",
            "--group",
            "fleet.example.com",
            "--multicluster",
            "carrier-pigeons",
            "--dir",
            tmp.path().to_str().expect("utf-8"),
        ],
        tmp.path(),
    );
    assert!(!output.status.success());
    let said = text(&output);
    assert!(
        said.contains("kubeconfig-secrets") && said.contains("cluster-profiles"),
        "{said}"
    );
    assert!(!tmp.path().join("lost-operator").exists());
}
