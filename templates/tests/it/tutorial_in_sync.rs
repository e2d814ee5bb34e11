//! `examples/backup-operator`, the book's tutorial operator, is what the
//! tutorial tells the reader to run (`cargo opkit new backup-operator
//! --group tutorial.opkit.dev --version v1 --kind Backup`, then `cargo opkit
//! create webhook --kind Backup` and `cargo opkit create webhook --kind Backup
//! --conversion --spoke v2`) plus the reader's edits: the files the
//! tutorial does not edit are the generated ones, so the book never walks
//! a project the scaffolder no longer makes.

use std::path::Path;

use cargo_opkit::{CreateWebhook, NewProject, OpkitDependency};

use crate::example_in_sync::{SHARED_TARGET_DIR, assert_same_features};

#[test]
fn the_tutorial_operator_is_the_generated_project_plus_the_tutorials_edits() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let generated = NewProject {
        name: "backup-operator".into(),
        group: "tutorial.opkit.dev".into(),
        version: "v1".into(),
        kind: Some("Backup".into()),
        dir: Some(tmp.path().to_owned()),
        opkit: OpkitDependency::Version("0.1".into()),
        sharding: false,
        multicluster: None,
    }
    .create()
    .expect("generate the project");
    for conversion_spoke in [None, Some("v2".to_owned())] {
        CreateWebhook {
            dir: generated.clone(),
            kind: "Backup".into(),
            conversion_spoke,
        }
        .create()
        .expect("cargo opkit create webhook");
    }
    let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/backup-operator");
    let read = |dir: &Path, file: &str| {
        std::fs::read_to_string(dir.join(file))
            .unwrap_or_else(|e| panic!("{}: {e}", dir.join(file).display()))
    };
    // The book includes parts of these by `// ANCHOR:` comments.
    let without_anchors = |text: String| {
        text.lines()
            .filter(|line| !line.trim_start().starts_with("// ANCHOR"))
            .map(|line| format!("{line}\n"))
            .collect::<String>()
    };

    assert_same_features(&example, &generated);
    assert_eq!(
        read(&example, "Makefile"),
        read(&generated, "Makefile").replace(SHARED_TARGET_DIR, ""),
        "examples/backup-operator/Makefile differs from the generated one"
    );
    for file in [
        "PROJECT",
        "Dockerfile",
        ".dockerignore",
        "deploy/00-namespace.yaml",
        "deploy/02-service-account.yaml",
        "deploy/04-deployment.yaml",
        "deploy/network-policy/allow-metrics-traffic.yaml",
        "deploy/network-policy/allow-webhook-traffic.yaml",
        "grafana/controller-runtime-metrics.json",
        "src/api/mod.rs",
        "src/webhooks/mod.rs",
        "tests/e2e.rs",
    ] {
        assert_eq!(
            without_anchors(read(&example, file)),
            without_anchors(read(&generated, file)),
            "examples/backup-operator/{file} differs from what `cargo opkit` generates: \
             the tutorial does not edit it (change the template and the example together)"
        );
    }
}
