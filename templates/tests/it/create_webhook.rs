//! `cargo opkit create webhook` end to end: a generated project gets a
//! webhook for its first kind and for a kind added later, renders their
//! configurations into `deploy/05-webhooks.yaml`, and passes the generated
//! webhook tests against a real kube-apiserver without an edit.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("templates/ has a parent")
        .to_owned()
}

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

fn succeeds(output: Output, what: &str) {
    assert!(output.status.success(), "{what} failed:\n{}", text(&output));
}

#[test]
fn created_webhooks_are_served_rendered_and_tested() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let workspace = workspace();
    let lock = workspace.join("Cargo.lock");
    succeeds(
        cargo_opkit(
            &[
                "opkit",
                "new",
                "gate-operator",
                "--group",
                "gate.example.com",
                "--kind",
                "Gate",
                "--dir",
                tmp.path().to_str().expect("utf-8"),
                "--opkit-path",
                workspace.to_str().expect("utf-8"),
                "--lock-from",
                lock.to_str().expect("utf-8"),
                "--skip-manifests",
            ],
            tmp.path(),
        ),
        "cargo opkit new",
    );
    let project = tmp.path().join("gate-operator");
    let dir = project.to_str().expect("utf-8");

    // Bad input: a kind the project lacks is refused, nothing written.
    let output = cargo_opkit(
        &["opkit", "create", "webhook", "--kind", "Door", "--dir", dir],
        &project,
    );
    assert!(!output.status.success());
    assert!(
        String::from_utf8_lossy(&output.stderr).contains("the project has no such kind"),
        "{}",
        text(&output)
    );
    assert!(!project.join("src/webhooks").exists());

    succeeds(
        cargo_opkit(
            &[
                "opkit",
                "create",
                "webhook",
                "--kind",
                "Gate",
                "--dir",
                dir,
                "--skip-manifests",
            ],
            &project,
        ),
        "cargo opkit create webhook --kind Gate",
    );
    // Twice is refused.
    let output = cargo_opkit(
        &[
            "opkit",
            "create",
            "webhook",
            "--kind",
            "Gate",
            "--dir",
            dir,
            "--skip-manifests",
        ],
        &project,
    );
    assert!(!output.status.success());
    assert!(
        String::from_utf8_lossy(&output.stderr).contains("already exists"),
        "{}",
        text(&output)
    );
    // Conversion for Gate: its version (v1alpha1) is the hub. The hub's own
    // version as the spoke is refused, nothing written.
    let output = cargo_opkit(
        &[
            "opkit",
            "create",
            "webhook",
            "--kind",
            "Gate",
            "--conversion",
            "--spoke",
            "v1alpha1",
            "--dir",
            dir,
            "--skip-manifests",
        ],
        &project,
    );
    assert!(!output.status.success());
    assert!(
        String::from_utf8_lossy(&output.stderr).contains("is the kind's version already"),
        "{}",
        text(&output)
    );
    assert!(!project.join("src/api/gate_v1alpha1.rs").exists());
    succeeds(
        cargo_opkit(
            &[
                "opkit",
                "create",
                "webhook",
                "--kind",
                "Gate",
                "--conversion",
                "--spoke",
                "v1beta1",
                "--dir",
                dir,
                "--skip-manifests",
            ],
            &project,
        ),
        "cargo opkit create webhook --kind Gate --conversion --spoke v1beta1",
    );
    // A second spoke is left to the user, with the reason.
    let output = cargo_opkit(
        &[
            "opkit",
            "create",
            "webhook",
            "--kind",
            "Gate",
            "--conversion",
            "--spoke",
            "v1",
            "--dir",
            dir,
            "--skip-manifests",
        ],
        &project,
    );
    assert!(!output.status.success());
    assert!(
        String::from_utf8_lossy(&output.stderr).contains("one spoke per kind"),
        "{}",
        text(&output)
    );

    // A second kind, cluster-scoped, then its webhook and conversion:
    // registered at the markers, tested with cluster-wide `Api`s.
    succeeds(
        cargo_opkit(
            &[
                "opkit",
                "create",
                "api",
                "--kind",
                "Lock",
                "--namespaced=false",
                "--dir",
                dir,
                "--skip-manifests",
            ],
            &project,
        ),
        "cargo opkit create api --kind Lock --namespaced=false",
    );
    succeeds(
        cargo_opkit(
            &[
                "opkit",
                "create",
                "webhook",
                "--kind",
                "Lock",
                "--dir",
                dir,
                "--skip-manifests",
            ],
            &project,
        ),
        "cargo opkit create webhook --kind Lock",
    );
    succeeds(
        cargo_opkit(
            &[
                "opkit",
                "create",
                "webhook",
                "--kind",
                "Lock",
                "--conversion",
                "--spoke",
                "v1beta1",
                "--dir",
                dir,
            ],
            &project,
        ),
        "cargo opkit create webhook --kind Lock --conversion --spoke v1beta1",
    );

    let yaml =
        std::fs::read_to_string(project.join("deploy/05-webhooks.yaml")).expect("05-webhooks");
    for expected in [
        "kind: Service",
        "name: gate-operator-webhook-service",
        "kind: ValidatingWebhookConfiguration",
        "kind: MutatingWebhookConfiguration",
        "path: /validate-gate-example-com-v1alpha1-gate",
        "path: /mutate-gate-example-com-v1alpha1-lock",
        "name: vgate-v1alpha1.gate.example.com",
        // The managed certificate's RBAC: its Secret, and the injection.
        "kind: Role",
        "- gate-operator-webhook-service-cert",
        "kind: ClusterRole",
        "- gate-operator-validating",
        "- gates.gate.example.com",
    ] {
        assert!(yaml.contains(expected), "{expected:?} missing:\n{yaml}");
    }
    // No caBundle in the files: the manager injects it.
    assert!(!yaml.contains("caBundle"), "{yaml}");
    let crds = std::fs::read_to_string(project.join("deploy/01-crds.yaml")).expect("01-crds");
    for expected in [
        "strategy: Webhook",
        "path: /convert",
        "name: gate-operator-webhook-service",
        "name: v1beta1",
        "name: v1alpha1",
    ] {
        assert!(crds.contains(expected), "{expected:?} missing:\n{crds}");
    }
    let main = std::fs::read_to_string(project.join("src/main.rs")).expect("main.rs");
    assert!(main.contains("webhook_server(gate_operator::webhooks::server("));
    assert!(main.contains("manage_webhook_certificate: bool"));
    // The Deployment exposes the port and has the certificate's volume;
    // `make deploy` applies 05-webhooks.yaml.
    let deployment =
        std::fs::read_to_string(project.join("deploy/04-deployment.yaml")).expect("04");
    for expected in [
        "- --manage-webhook-certificate",
        "containerPort: 9443",
        "mountPath: /tmp/k8s-webhook-server/serving-certs",
        "emptyDir: {}",
    ] {
        assert!(
            deployment.contains(expected),
            "{expected:?} missing:\n{deployment}"
        );
    }
    let makefile = std::fs::read_to_string(project.join("Makefile")).expect("Makefile");
    assert!(
        makefile
            .lines()
            .any(|l| l == "MANIFESTS = $(sort $(wildcard deploy/*.yaml))"),
        "make deploy must apply every deploy/*.yaml, 05-webhooks.yaml included:\n{makefile}"
    );

    let output = cargo_opkit::cargo_command()
        .args([
            "test",
            "--test",
            "gate_webhook",
            "--test",
            "lock_webhook",
            "--test",
            "gate_conversion",
            "--test",
            "lock_conversion",
            "--test",
            "manifests",
        ])
        .current_dir(&project)
        .env("CARGO_TARGET_DIR", target_dir())
        .output()
        .expect("run cargo test");
    assert!(
        output.status.success(),
        "the generated webhook tests failed:\n{}",
        text(&output)
    );
    let stdout = String::from_utf8_lossy(&output.stdout);
    for test in [
        "the_apiserver_defaults_and_validates_gate_through_the_webhooks",
        "the_apiserver_defaults_and_validates_lock_through_the_webhooks",
        "gate_is_converted_between_v1beta1_and_v1alpha1",
        "lock_is_converted_between_v1beta1_and_v1alpha1",
        "deploy_manifests_are_up_to_date",
    ] {
        assert!(
            stdout.contains(&format!("test {test} ... ok")),
            "{test} did not pass:\n{stdout}"
        );
    }
}
