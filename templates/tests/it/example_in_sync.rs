//! `examples/memcached` is what `cargo opkit new memcached-operator --group
//! cache.example.com --kind Memcached` generates, for the files a user
//! deploys with: its Makefile (less the shared target directory, since the
//! example builds in the workspace), the hand-written part of `deploy/`
//! (NetworkPolicies included) and the end-to-end test `make test-e2e` runs.
//! The deploy tests run against the example, so they cover generated
//! projects only while the two agree.

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
    }
    .create()
    .expect("generate the project");
    let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/memcached");
    let read = |dir: &Path, file: &str| {
        std::fs::read_to_string(dir.join(file))
            .unwrap_or_else(|e| panic!("{}: {e}", dir.join(file).display()))
    };

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
