//! `examples/memcached` is what `cargo opkit new memcached-operator --group
//! cache.example.com --kind Memcached` generates, for the files a user
//! deploys with: its Makefile (less the shared target directory, since the
//! example builds in the workspace), the hand-written part of `deploy/`
//! (NetworkPolicies included) and the end-to-end test `make test-e2e` runs.
//! The deploy tests run against the example, so they cover generated
//! projects only while the two agree. Its opkit and opkit-envtest cargo
//! features are the generated ones too.

use std::path::Path;

use cargo_opkit::{NewProject, OpkitDependency};

/// The lines of the generated Makefile the example leaves out: it builds in
/// the workspace's target directory.
pub(crate) const SHARED_TARGET_DIR: &str =
    "# Builds go to a target directory shared by your opkit projects (where
# `cargo opkit new` compiled this one), so dependencies compile once.
# `make CARGO_TARGET_DIR=target ...` keeps them in the project instead.
OPKIT_CACHE ?= $(HOME)/.cache/opkit
CARGO_TARGET_DIR ?= $(OPKIT_CACHE)/target
export CARGO_TARGET_DIR
";

/// The cargo features of the `name = ...` dependency line of a
/// `Cargo.toml` (empty without a `features` list).
pub(crate) fn dependency_features(cargo_toml: &str, name: &str) -> Vec<String> {
    let prefix = format!("{name} = ");
    let line = cargo_toml
        .lines()
        .find(|l| l.starts_with(&prefix))
        .unwrap_or_else(|| panic!("no `{name} = ` line in:\n{cargo_toml}"));
    let Some((_, list)) = line.split_once("features = [") else {
        return Vec::new();
    };
    let list = list.split(']').next().unwrap_or_default();
    list.split(',')
        .map(|f| f.trim().trim_matches('"').to_owned())
        .filter(|f| !f.is_empty())
        .collect()
}

/// The example's opkit and opkit-envtest features are the generated
/// project's (its dependencies are paths, the project's a version).
pub(crate) fn assert_same_features(example: &Path, generated: &Path) {
    let example_toml = std::fs::read_to_string(example.join("Cargo.toml")).expect("Cargo.toml");
    let generated_toml =
        std::fs::read_to_string(generated.join("Cargo.toml")).expect("generated Cargo.toml");
    for name in ["opkit", "opkit-envtest"] {
        assert_eq!(
            dependency_features(&example_toml, name),
            dependency_features(&generated_toml, name),
            "{}: the {name} features differ from those `cargo opkit` turns on",
            example.join("Cargo.toml").display()
        );
    }
}

#[test]
fn the_memcached_example_deploys_with_the_generated_makefile_and_manifests() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let generated = NewProject {
        name: "memcached-operator".into(),
        group: "cache.example.com".into(),
        version: "v1alpha1".into(),
        kind: Some("Memcached".into()),
        dir: Some(tmp.path().to_owned()),
        opkit: OpkitDependency::Version("0.1".into()),
        sharding: false,
        multicluster: None,
    }
    .create()
    .expect("generate the project");
    let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/memcached");
    let read = |dir: &Path, file: &str| {
        std::fs::read_to_string(dir.join(file))
            .unwrap_or_else(|e| panic!("{}: {e}", dir.join(file).display()))
    };

    assert_same_features(&example, &generated);
    let makefile = read(&generated, "Makefile");
    assert!(makefile.contains(SHARED_TARGET_DIR), "{makefile}");
    assert_eq!(
        read(&example, "Makefile"),
        makefile.replace(SHARED_TARGET_DIR, ""),
        "examples/memcached/Makefile differs from the generated one: \
         change templates/project/Makefile.tmpl and the example together"
    );
    for file in [
        "deploy/00-namespace.yaml",
        "deploy/02-service-account.yaml",
        "deploy/04-deployment.yaml",
        "deploy/network-policy/allow-metrics-traffic.yaml",
        "grafana/controller-runtime-metrics.json",
        "tests/e2e.rs",
    ] {
        assert_eq!(
            read(&example, file),
            read(&generated, file),
            "examples/memcached/{file} differs from the generated one"
        );
    }
}
