//! `cargo opkit new` without a kind, then `create api` in each of its
//! forms (issue 22), end to end: a project with a manager and no API
//! builds; a cluster-scoped kind, a kind in a second group and a
//! controller for a built-in kind are added; the project passes `cargo
//! fmt --check`, clippy and its own tests (against a real kube-apiserver);
//! then a controller for an external kind (a type the project does not
//! define, by Rust path) is added and the project still builds clean.
//! Flags that do not go together are refused before anything is written.

use std::path::Path;

use super::support::{
    Persisted, cargo, cargo_opkit, lint, persist, render_manifests, sync_into, text, workspace,
};

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Runs `cargo opkit create api ARGS --skip-manifests` in `project` (a
/// directory of the staged project); panics if it fails. [`built`] renders
/// the manifests after it, as `create api` without the flag does.
fn create_api(project: &Path, args: &[&str]) {
    let mut all = vec!["opkit", "create", "api"];
    all.extend_from_slice(args);
    all.push("--skip-manifests");
    let output = cargo_opkit(&all, project);
    assert!(
        output.status.success(),
        "create api {args:?}:\n{}",
        text(&output)
    );
}

/// The staged project as it is now, in a directory that persists between
/// runs, as package `fleet-operator-STATE` (the last state keeps the
/// project's name): its manifests rendered there (a build of this state,
/// nothing compiled again while it is unchanged), and the staged project
/// goes on from the rendered files, as after `create api` without
/// `--skip-manifests`.
fn built(staged: &Path, state: &str, last: bool) -> Persisted {
    let package = format!("fleet-operator-{state}");
    let persisted = persist(
        staged,
        &format!("create_api-{state}"),
        (!last).then_some(package.as_str()),
    );
    render_manifests(&persisted.dir);
    sync_into(&persisted.dir.join("deploy"), &staged.join("deploy"));
    persisted
}

/// A kind another operator defines, as the project would hold its type.
const EXTERNAL: &str = r#"//! Kinds other operators define, as Rust types.

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// cert-manager's Certificate, the fields this operator reads.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, JsonSchema)]
#[kube(group = "cert-manager.io", version = "v1", kind = "Certificate", namespaced)]
#[serde(rename_all = "camelCase")]
pub struct CertificateSpec {
    /// The Secret the certificate goes to.
    pub secret_name: String,
}
"#;

#[test]
fn new_without_a_kind_then_every_form_of_create_api() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let workspace = workspace();
    let lock = workspace.join("Cargo.lock");
    let output = cargo_opkit(
        &[
            "opkit",
            "new",
            "fleet-operator",
            "--group",
            "fleet.example.com",
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
    assert!(output.status.success(), "new:\n{}", text(&output));
    assert!(
        String::from_utf8_lossy(&output.stdout).contains("cargo opkit create api --kind"),
        "{}",
        text(&output)
    );
    let project = tmp.path().join("fleet-operator");
    let _new = built(&project, "new", false);
    assert!(!project.join("src/api/your_kind.rs").exists());
    assert!(!read(&project.join("deploy/01-crds.yaml")).contains("kind: CustomResourceDefinition"));

    // Bad combinations: refused, nothing written.
    let before = read(&project.join("PROJECT"));
    for (args, expected) in [
        (
            &[
                "--kind",
                "Deployment",
                "--group",
                "apps",
                "--version",
                "v1",
                "--resource=false",
                "--namespaced=false",
            ][..],
            "drop --namespaced=false",
        ),
        (
            &["--kind", "Deployment", "--resource=false"][..],
            "needs the kind's own --group and --version",
        ),
        (
            &[
                "--kind",
                "Thing",
                "--external-api-path",
                "crate::external::Thing",
            ][..],
            "add --resource=false",
        ),
        (
            &["--kind", "Zone", "--namespaced=maybe"][..],
            "invalid value 'maybe'",
        ),
    ] {
        let mut all = vec!["opkit", "create", "api", "--skip-manifests"];
        all.extend_from_slice(args);
        let output = cargo_opkit(&all, &project);
        assert!(!output.status.success(), "{args:?} succeeded");
        assert!(
            String::from_utf8_lossy(&output.stderr).contains(expected),
            "{args:?}: expected {expected:?} in\n{}",
            text(&output)
        );
    }
    assert_eq!(read(&project.join("PROJECT")), before);

    create_api(&project, &["--kind", "Zone", "--namespaced=false"]);
    let _zone = built(&project, "zone", false);
    create_api(
        &project.join("src"),
        &[
            "--kind",
            "Gadget",
            "--group",
            "other.example.org",
            "--version",
            "v1beta1",
        ],
    );
    let _gadget = built(&project, "gadget", false);
    create_api(
        &project,
        &[
            "--kind",
            "Deployment",
            "--group",
            "apps",
            "--version",
            "v1",
            "--resource=false",
        ],
    );
    let deployment = built(&project, "deployment", false);

    let crds = read(&project.join("deploy/01-crds.yaml"));
    assert!(crds.contains("name: zones.fleet.example.com"), "{crds}");
    assert!(crds.contains("name: gadgets.other.example.org"), "{crds}");
    let zone = crds
        .split("\n---")
        .find(|d| d.contains("name: zones."))
        .expect("zone CRD");
    assert!(zone.contains("scope: Cluster"), "{zone}");
    assert!(!crds.contains("deployments"), "{crds}");
    let rbac = read(&project.join("deploy/03-rbac.yaml"));
    assert!(
        rbac.contains("deployments") && rbac.contains("- apps"),
        "{rbac}"
    );
    assert!(!read(&project.join("samples/zone.yaml")).contains("namespace"));
    let manifest = read(&project.join("PROJECT"));
    assert!(
        manifest.contains("- kind: Gadget\n  group: other.example.org\n  version: v1beta1\n")
            && manifest.contains("- kind: Zone\n  group: fleet.example.com\n  version: v1alpha1\n  namespaced: false\n"),
        "{manifest}"
    );

    lint(&deployment.dir);
    let output = cargo(&["test"], &deployment.dir);
    assert!(
        output.status.success(),
        "the project's tests:\n{}",
        text(&output)
    );
    let stdout = String::from_utf8_lossy(&output.stdout);
    for test in [
        "zone_gets_a_finalizer_and_a_ready_condition_and_goes_away",
        "gadget_gets_a_finalizer_and_a_ready_condition_and_goes_away",
        "deploy_manifests_are_up_to_date",
    ] {
        assert!(
            stdout.contains(&format!("test {test} ... ok")),
            "{test}:\n{stdout}"
        );
    }

    // An external kind: its type in the project, given by path. `create
    // api` declares the module (`pub mod external;`) itself.
    std::fs::write(project.join("src/external.rs"), EXTERNAL).expect("write");
    create_api(
        &project,
        &[
            "--kind",
            "Certificate",
            "--group",
            "cert-manager.io",
            "--version",
            "v1",
            "--resource=false",
            "--external-api-path",
            "crate::external::Certificate",
            "--external-api-domain",
            "cert-manager.io",
        ],
    );

    // Issue 38: kopium's output, kept as written (the guide says so), in a
    // module of its own; `create api` declares it with `#[rustfmt::skip]`
    // so that `cargo fmt --check` passes on the project.
    std::fs::create_dir_all(project.join("src/external")).expect("mkdir");
    std::fs::copy(
        workspace.join("tests/kopium/widget.rs"),
        project.join("src/external/widget.rs"),
    )
    .expect("copy kopium's output");
    create_api(
        &project,
        &[
            "--kind",
            "Widget",
            "--group",
            "thirdparty.example.com",
            "--version",
            "v1",
            "--resource=false",
            "--external-api-path",
            "crate::external::widget::Widget",
        ],
    );
    let external = read(&project.join("src/external.rs"));
    assert!(external.contains("#[rustfmt::skip]"), "{external}");
    // Both external kinds built as one state: the last, so it keeps the
    // project's name.
    let external = built(&project, "external", true);
    let project = &external.dir;
    assert_eq!(
        read(&project.join("src/external/widget.rs")),
        read(&workspace.join("tests/kopium/widget.rs")),
        "kopium's output is left as written"
    );
    let rbac = read(&project.join("deploy/03-rbac.yaml"));
    assert!(
        rbac.contains("certificates") && rbac.contains("cert-manager.io"),
        "{rbac}"
    );
    assert!(
        rbac.contains("widgets") && rbac.contains("thirdparty.example.com"),
        "{rbac}"
    );
    let crds = read(&project.join("deploy/01-crds.yaml"));
    assert!(
        !crds.contains("certificates") && !crds.contains("widgets"),
        "{crds}"
    );
    lint(project);

    // Issue 38: the generated tests install the external kinds' CRDs
    // (`test_crds`), so the manager's informers for Certificate and Widget
    // list them at once. Before, the first list of each was a 404, retried
    // until the manager gave up about 10 s in (after these tests ended).
    let output = cargo_opkit::cargo_command()
        .args(["test", "--test", "zone_controller", "--", "--nocapture"])
        .current_dir(project)
        .env("CARGO_TARGET_DIR", super::support::target_dir())
        .env("RUST_LOG", "opkit=debug")
        .output()
        .expect("run cargo test");
    assert!(
        output.status.success(),
        "the project's tests:\n{}",
        text(&output)
    );
    let logs = text(&output);
    for kind in ["certificate", "widget"] {
        assert!(
            !logs
                .lines()
                .any(|line| line.contains("retrying") && line.to_lowercase().contains(kind)),
            "a list of {kind} failed: its CRD was not installed:\n{logs}"
        );
    }
}
