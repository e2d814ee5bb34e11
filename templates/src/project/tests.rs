//! `new`, `create api` and the PROJECT file, on temporary directories.

use std::path::Path;

use super::api::is_rust_path;
use super::*;
use crate::builtin_kinds::builtin_kind;
use crate::error::ScaffoldError;

fn project(dir: &Path) -> NewProject {
    NewProject {
        name: "demo-operator".into(),
        group: "demo.example.com".into(),
        version: "v1".into(),
        kind: Some("Widget".into()),
        dir: Some(dir.to_owned()),
        opkit: OpkitDependency::Version("0.1".into()),
        sharding: false,
        multicluster: None,
    }
}

#[test]
fn new_writes_every_template_and_no_placeholder_is_left() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = project(tmp.path()).create().unwrap();
    for file in [
        "Cargo.toml",
        "PROJECT",
        "Makefile",
        "Dockerfile",
        "README.md",
        ".gitignore",
        "src/main.rs",
        "src/lib.rs",
        "src/api/mod.rs",
        "src/api/widget.rs",
        "src/controllers/widget.rs",
        "tests/widget_controller.rs",
        "tests/manifests.rs",
        "deploy/00-namespace.yaml",
        "deploy/02-service-account.yaml",
        "deploy/04-deployment.yaml",
        "samples/widget.yaml",
        ".github/workflows/test.yml",
    ] {
        let text =
            std::fs::read_to_string(dir.join(file)).unwrap_or_else(|e| panic!("{file}: {e}"));
        assert!(!text.contains("{{"), "{file} has a placeholder left");
    }
    let cargo = std::fs::read_to_string(dir.join("Cargo.toml")).unwrap();
    assert!(cargo.contains("name = \"demo-operator\""), "{cargo}");
    // opkit's features: what the generated main uses (HTTPS metrics).
    assert!(
        cargo.contains("\nopkit = { version = \"0.1\", features = [\"secure-metrics\"] }\n"),
        "{cargo}"
    );
    assert!(
        cargo.contains("[dev-dependencies]\nopkit-envtest = \"0.1\"\n"),
        "{cargo}"
    );
    // No staging directory is left behind.
    let left: Vec<_> = std::fs::read_dir(tmp.path())
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert_eq!(left, [std::ffi::OsString::from("demo-operator")]);
}

/// A checkout's opkit and opkit-envtest, by path, from the repository
/// root or from `sdk/`; a directory without opkit-envtest beside opkit is
/// refused (a path opkit with a published opkit-envtest would be two opkits).
#[test]
fn path_dependencies_name_both_crates_of_the_checkout() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    for (dir, name) in [("sdk", "opkit"), ("envtest", "opkit-envtest")] {
        std::fs::create_dir(root.join(dir)).unwrap();
        std::fs::write(
            root.join(dir).join("Cargo.toml"),
            format!("[package]\nname = \"{name}\"\n"),
        )
        .unwrap();
    }
    let root = std::fs::canonicalize(root).unwrap();
    for given in [root.clone(), root.join("sdk")] {
        let (dependency, dev_dependency) = OpkitDependency::Path(given).lines(&["shard"]).unwrap();
        assert_eq!(
            dependency,
            format!(
                "opkit = {{ path = \"{}\", features = [\"shard\"] }}",
                root.join("sdk").display()
            )
        );
        assert_eq!(
            dev_dependency,
            format!(
                "opkit-envtest = {{ path = \"{}\" }}",
                root.join("envtest").display()
            )
        );
    }
    std::fs::remove_dir_all(root.join("envtest")).unwrap();
    assert!(OpkitDependency::Path(root).lines(&[]).is_err());
}

/// The parts of a GitHub Actions workflow the generated one must have.
#[derive(serde::Deserialize)]
struct Workflow {
    name: String,
    on: std::collections::BTreeMap<String, Option<serde::de::IgnoredAny>>,
    jobs: std::collections::BTreeMap<String, Job>,
}

#[derive(serde::Deserialize)]
struct Job {
    #[serde(rename = "runs-on")]
    runs_on: String,
    steps: Vec<Step>,
}

#[derive(serde::Deserialize)]
struct Step {
    uses: Option<String>,
    run: Option<String>,
}

#[test]
fn the_ci_workflow_is_valid_yaml_that_runs_make_test() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = project(tmp.path()).create().unwrap();
    let text = std::fs::read_to_string(dir.join(".github/workflows/test.yml")).unwrap();
    let workflow: Workflow = serde_saphyr::from_str(&text).unwrap();
    assert_eq!(workflow.name, "test");
    assert!(workflow.on.contains_key("push") && workflow.on.contains_key("pull_request"));
    let job = &workflow.jobs["test"];
    assert_eq!(job.runs_on, "ubuntu-latest");
    assert!(
        job.steps
            .iter()
            .all(|s| s.uses.is_some() != s.run.is_some())
    );
    let runs: Vec<&str> = job.steps.iter().filter_map(|s| s.run.as_deref()).collect();
    assert!(runs.iter().any(|r| r.starts_with("make test")), "{runs:?}");
    assert!(
        runs.iter().any(|r| r.contains("KUBEBUILDER_ASSETS")),
        "{runs:?}"
    );
    // The end-to-end job: a kind cluster with a registry the image is
    // pushed to, then `make test-e2e` naming that image.
    let e2e = &workflow.jobs["test-e2e"];
    assert!(
        e2e.steps
            .iter()
            .all(|s| s.uses.is_some() != s.run.is_some())
    );
    assert!(
        e2e.steps
            .iter()
            .any(|s| s.uses.as_deref() == Some("helm/kind-action@v1"))
    );
    assert!(
        e2e.steps
            .iter()
            .filter_map(|s| s.run.as_deref())
            .any(|r| r.starts_with(
                "KUBECONFIG=\"$HOME/.kube/config\" make test-e2e IMG=localhost:5000/demo-operator:e2e"
            )),
        "{:?}",
        e2e.steps
            .iter()
            .filter_map(|s| s.run.as_deref())
            .collect::<Vec<_>>()
    );
}

#[test]
fn a_staging_directory_of_a_killed_run_is_removed() {
    let tmp = tempfile::tempdir().unwrap();
    // No process has pid 4294967295 (above Linux's pid_max).
    let abandoned = tmp.path().join(".demo-operator.opkit-new-4294967295");
    std::fs::create_dir_all(abandoned.join("src")).unwrap();
    project(tmp.path()).create().unwrap();
    assert!(!abandoned.exists());
    assert!(tmp.path().join("demo-operator/Cargo.toml").is_file());
}

#[test]
fn bad_input_writes_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let mut bad = project(tmp.path());
    bad.kind = Some("widget".into());
    assert!(matches!(
        bad.create(),
        Err(ScaffoldError::InvalidKind { .. })
    ));
    let mut bad = project(tmp.path());
    bad.group = "nodots".into();
    assert!(matches!(
        bad.create(),
        Err(ScaffoldError::InvalidGroup { .. })
    ));
    let mut bad = project(tmp.path());
    bad.opkit = OpkitDependency::Path(tmp.path().join("nowhere"));
    assert!(matches!(bad.create(), Err(ScaffoldError::Io { .. })));
    assert_eq!(std::fs::read_dir(tmp.path()).unwrap().count(), 0);

    project(tmp.path()).create().unwrap();
    let again = project(tmp.path()).create().unwrap_err();
    assert!(again.to_string().contains("already exists"), "{again}");
}

#[test]
fn create_api_registers_the_kind_at_the_markers() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = project(tmp.path()).create().unwrap();
    let api = CreateApi {
        version: Some("v1beta1".into()),
        group: None,
        ..CreateApi::new(dir.clone(), "GuestBook")
    };
    api.create().unwrap();
    let lib = std::fs::read_to_string(dir.join("src/lib.rs")).unwrap();
    assert!(lib.contains("    controllers::guest_book::GuestBookReconciler.add_to(manager)?;\n    // opkit:scaffold:controllers"), "{lib}");
    assert!(
        lib.contains("        api::guest_book::GuestBook::crd(),\n        // opkit:scaffold:crds")
    );
    assert!(lib.contains(".merge(controllers::guest_book::GuestBookReconciler::rbac_rules())"));
    let types = std::fs::read_to_string(dir.join("src/api/guest_book.rs")).unwrap();
    assert!(
        types.contains("version = \"v1beta1\"") && types.contains("group = \"demo.example.com\"")
    );
    let project = ProjectFile::read(&dir).unwrap();
    assert_eq!(project.kinds(), ["Widget", "GuestBook"]);

    assert!(matches!(
        api.create(),
        Err(ScaffoldError::KindExists { .. })
    ));
    let before = std::fs::read_to_string(dir.join("src/lib.rs")).unwrap();
    std::fs::write(dir.join("src/api/mod.rs"), "pub mod widget;\n").unwrap();
    let err = CreateApi {
        version: None,
        group: None,
        ..CreateApi::new(dir.clone(), "Gadget")
    }
    .create()
    .unwrap_err();
    assert!(matches!(err, ScaffoldError::MissingMarker { .. }), "{err}");
    assert!(!dir.join("src/api/gadget.rs").exists());
    assert_eq!(
        std::fs::read_to_string(dir.join("src/lib.rs")).unwrap(),
        before
    );
}

#[test]
fn create_api_from_a_subdirectory_with_another_group() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = project(tmp.path()).create().unwrap();
    let changed = CreateApi {
        version: None,
        group: Some("other.example.org".into()),
        ..CreateApi::new(dir.join("src/controllers"), "Gadget")
    }
    .create()
    .unwrap();
    assert!(
        changed.contains(&dir.join("src/api/gadget.rs")),
        "{changed:?}"
    );
    let types = std::fs::read_to_string(dir.join("src/api/gadget.rs")).unwrap();
    assert!(types.contains("group = \"other.example.org\""), "{types}");
    assert_eq!(
        ProjectFile::read(&dir).unwrap().kinds(),
        ["Widget", "Gadget"]
    );
    assert_eq!(find_project(&dir.join("src/api")).unwrap(), dir);

    let err = CreateApi {
        version: None,
        group: Some("nodots".into()),
        ..CreateApi::new(dir.clone(), "Gizmo")
    }
    .create()
    .unwrap_err();
    assert!(matches!(err, ScaffoldError::InvalidGroup { .. }), "{err}");
    assert!(!dir.join("src/api/gizmo.rs").exists());
}

/// Issue 22: a second group used to be lost (`kinds:` had no group),
/// so `create webhook` and later commands put the kind in the
/// project's group. Each kind now keeps its group, version and scope
/// through any number of rewrites.
#[test]
fn two_groups_survive_a_round_trip_and_a_third_create_api() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = project(tmp.path()).create().unwrap();
    CreateApi {
        group: Some("other.example.org".into()),
        version: Some("v2".into()),
        namespaced: false,
        ..CreateApi::new(dir.clone(), "Gadget")
    }
    .create()
    .unwrap();
    let first = ProjectFile::read(&dir).unwrap();
    assert_eq!(ProjectFile::parse(&first.render()).unwrap(), first);
    CreateApi::new(dir.clone(), "Gizmo").create().unwrap();
    let project = ProjectFile::read(&dir).unwrap();
    let groups: Vec<(&str, &str, &str, bool)> = project
        .resources
        .iter()
        .map(|r| {
            (
                r.kind.as_str(),
                r.group.as_str(),
                r.version.as_str(),
                r.namespaced,
            )
        })
        .collect();
    assert_eq!(
        groups,
        [
            ("Widget", "demo.example.com", "v1", true),
            ("Gadget", "other.example.org", "v2", false),
            ("Gizmo", "demo.example.com", "v1", true),
        ]
    );
    // The first format still reads (examples/memcached has it).
    let old = "name: a\ngroup: a.example.com\nversion: v1\nkinds: A, B\n";
    let old = ProjectFile::parse(old).unwrap();
    assert_eq!(old.kinds(), ["A", "B"]);
    assert!(
        old.resources
            .iter()
            .all(|r| r.group == "a.example.com" && r.namespaced)
    );
}

#[test]
fn a_cluster_scoped_kind_has_no_namespace_anywhere() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = project(tmp.path()).create().unwrap();
    CreateApi {
        namespaced: false,
        ..CreateApi::new(dir.clone(), "Zone")
    }
    .create()
    .unwrap();
    let types = std::fs::read_to_string(dir.join("src/api/zone.rs")).unwrap();
    assert!(types.contains("kind = \"Zone\",\n    status"), "{types}");
    assert!(!types.contains("namespaced"), "{types}");
    let sample = std::fs::read_to_string(dir.join("samples/zone.yaml")).unwrap();
    assert!(!sample.contains("namespace"), "{sample}");
    let test = std::fs::read_to_string(dir.join("tests/zone_controller.rs")).unwrap();
    assert!(test.contains("Api::all(client.clone())"), "{test}");
    let widget = std::fs::read_to_string(dir.join("src/api/widget.rs")).unwrap();
    assert!(widget.contains("    namespaced,\n"), "{widget}");
}

#[test]
fn resource_false_scaffolds_only_a_controller() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = project(tmp.path()).create().unwrap();
    let changed = CreateApi {
        group: Some("apps".into()),
        version: Some("v1".into()),
        resource: false,
        ..CreateApi::new(dir.clone(), "Deployment")
    }
    .create()
    .unwrap();
    assert!(
        !changed.iter().any(|p| p.starts_with(dir.join("src/api"))),
        "{changed:?}"
    );
    assert!(!dir.join("tests/deployment_controller.rs").exists());
    assert!(!dir.join("samples/deployment.yaml").exists());
    let controller = std::fs::read_to_string(dir.join("src/controllers/deployment.rs")).unwrap();
    assert!(
        controller.contains("use k8s_openapi::api::apps::v1::Deployment;"),
        "{controller}"
    );
    assert!(!controller.contains("finalizer(") && !controller.contains("patch_status"));
    let lib = std::fs::read_to_string(dir.join("src/lib.rs")).unwrap();
    assert!(lib.contains("controllers::deployment::DeploymentReconciler.add_to(manager)?;"));
    assert!(!lib.contains("Deployment::crd()"), "{lib}");

    // The external type's module file must exist (kopium writes it); its
    // module is declared by `create api`, kept out of rustfmt.
    let external = || CreateApi {
        group: Some("cert-manager.io".into()),
        version: Some("v1".into()),
        resource: false,
        external_api_path: Some("crate::external::Certificate".into()),
        external_api_domain: Some("cert-manager.io".into()),
        ..CreateApi::new(dir.clone(), "Certificate")
    };
    let before = std::fs::read_to_string(dir.join("src/lib.rs")).unwrap();
    let missing = external().create().unwrap_err().to_string();
    assert!(
        missing.contains("src/external.rs") && missing.contains("kopium"),
        "{missing}"
    );
    assert_eq!(
        std::fs::read_to_string(dir.join("src/lib.rs")).unwrap(),
        before
    );
    assert!(!dir.join("src/controllers/certificate.rs").exists());
    std::fs::write(dir.join("src/external.rs"), "pub struct Certificate;\n").unwrap();
    CreateApi {
        group: Some("cert-manager.io".into()),
        version: Some("v1".into()),
        resource: false,
        external_api_path: Some("crate::external::Certificate".into()),
        external_api_domain: Some("cert-manager.io".into()),
        ..CreateApi::new(dir.clone(), "Certificate")
    }
    .create()
    .unwrap();
    let controller = std::fs::read_to_string(dir.join("src/controllers/certificate.rs")).unwrap();
    assert!(
        controller.contains("use crate::external::Certificate;"),
        "{controller}"
    );
    let lib = std::fs::read_to_string(dir.join("src/lib.rs")).unwrap();
    assert!(
        lib.contains("#[rustfmt::skip] // generated code, kept as written\npub mod external;"),
        "{lib}"
    );
    // Issue 38: the external kind's CRD is installed by the generated
    // tests (`test_crds`), not shipped in deploy/ (`crds`); a built-in
    // kind needs none.
    let test_crds = lib.split("pub fn test_crds()").nth(1).unwrap();
    assert!(
        test_crds.contains("crate::external::Certificate::crd(),"),
        "{lib}"
    );
    assert!(!lib.contains("Deployment::crd()"), "{lib}");
    let crds = lib
        .split("pub fn crds()")
        .nth(1)
        .unwrap()
        .split("pub fn")
        .next()
        .unwrap();
    assert!(!crds.contains("Certificate"), "{lib}");
    let project = ProjectFile::read(&dir).unwrap();
    let certificate = project.resource("Certificate").unwrap();
    assert_eq!(
        certificate.external.as_deref(),
        Some("crate::external::Certificate")
    );
    assert_eq!(certificate.domain.as_deref(), Some("cert-manager.io"));
    assert_eq!(
        project.resource("Deployment").unwrap().external.as_deref(),
        Some("k8s_openapi::api::apps::v1::Deployment")
    );
    assert_eq!(ProjectFile::parse(&project.render()).unwrap(), project);

    let webhook = crate::CreateWebhook {
        dir: dir.clone(),
        kind: "Deployment".into(),
        conversion_spoke: None,
    }
    .create()
    .unwrap_err();
    assert!(
        webhook.to_string().contains("does not define it"),
        "{webhook}"
    );
}

#[test]
fn flags_that_do_not_go_together_are_refused_before_any_write() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = project(tmp.path()).create().unwrap();
    let before = std::fs::read_to_string(dir.join("PROJECT")).unwrap();
    let builtin = |kind: &str| CreateApi {
        group: Some("apps".into()),
        version: Some("v1".into()),
        resource: false,
        ..CreateApi::new(dir.clone(), kind)
    };
    let cases = [
        (
            CreateApi {
                namespaced: false,
                ..builtin("Deployment")
            },
            "drop --namespaced=false",
        ),
        (
            CreateApi {
                group: None,
                ..builtin("Deployment")
            },
            "needs the kind's own --group and --version",
        ),
        // Issue 38: a misspelt built-in kind was accepted, failed to
        // compile and left its files.
        (builtin("Deploymnet"), "did you mean Deployment?"),
        (
            CreateApi {
                group: Some("core".into()),
                ..builtin("Deployment")
            },
            "--group apps --version v1 --kind Deployment",
        ),
        (
            CreateApi {
                group: Some("cert-manager.io".into()),
                ..builtin("Certificate")
            },
            "not a group of Kubernetes' built-in kinds",
        ),
        (
            CreateApi {
                external_api_path: Some("crate::external::Certificate".into()),
                ..CreateApi::new(dir.clone(), "Certificate")
            },
            "add --resource=false",
        ),
        (
            CreateApi {
                external_api_path: Some("crate::external::Cert".into()),
                ..builtin("Certificate")
            },
            "does not end in the kind Certificate",
        ),
        (
            CreateApi {
                external_api_path: Some("not a path".into()),
                ..builtin("Certificate")
            },
            "is not a Rust path",
        ),
        (
            CreateApi {
                external_api_domain: Some("cert-manager.io".into()),
                ..builtin("Deployment")
            },
            "--external-api-domain needs --external-api-path",
        ),
        (
            CreateApi {
                group: Some("apps".into()),
                ..CreateApi::new(dir.clone(), "Gadget")
            },
            "invalid API group \"apps\"",
        ),
    ];
    for (api, expected) in cases {
        let err = api.create().unwrap_err().to_string();
        assert!(err.contains(expected), "{api:?}: {err}");
    }
    assert_eq!(
        std::fs::read_to_string(dir.join("PROJECT")).unwrap(),
        before
    );
    assert!(!dir.join("src/controllers/deployment.rs").exists());
}

#[test]
fn new_without_a_kind_then_create_api_adds_the_first() {
    let tmp = tempfile::tempdir().unwrap();
    let mut new = project(tmp.path());
    new.kind = None;
    let dir = new.create().unwrap();
    assert!(!dir.join("src/api/widget.rs").exists());
    assert!(!dir.join("samples").exists());
    let lib = std::fs::read_to_string(dir.join("src/lib.rs")).unwrap();
    assert!(
        !lib.contains("ControllerWiring") && !lib.contains("CustomResourceExt"),
        "{lib}"
    );
    // No controller uses the manager yet: no unused-variable warning.
    assert!(
        lib.contains("add_controllers(_manager: &mut Manager)"),
        "{lib}"
    );
    assert!(ProjectFile::read(&dir).unwrap().resources.is_empty());
    let cargo = std::fs::read_to_string(dir.join("Cargo.toml")).unwrap();
    assert!(cargo.contains("description = \"A Kubernetes operator, built with opkit.\""));

    CreateApi::new(dir.clone(), "Widget").create().unwrap();
    let lib = std::fs::read_to_string(dir.join("src/lib.rs")).unwrap();
    assert!(
        lib.contains("use opkit::ControllerWiring;")
            && lib.contains("use kube::CustomResourceExt;"),
        "{lib}"
    );
    assert!(lib.contains("api::widget::Widget::crd(),"), "{lib}");
    assert!(
        lib.contains("add_controllers(manager: &mut Manager)"),
        "{lib}"
    );
    // Same code as a project made with the kind (but for the doc lines
    // naming it).
    let other = tmp.path().join("with");
    std::fs::create_dir(&other).unwrap();
    let made_with = project(&other).create().unwrap();
    let tail = |dir: &Path| {
        let lib = std::fs::read_to_string(dir.join("src/lib.rs")).unwrap();
        lib.split_once('\n').unwrap().1.to_owned()
    };
    assert_eq!(tail(&dir), tail(&made_with));
}

#[test]
fn built_in_kinds_map_to_their_k8s_openapi_types() {
    for (group, version, kind, path) in [
        (
            "core",
            "v1",
            "ConfigMap",
            "k8s_openapi::api::core::v1::ConfigMap",
        ),
        (
            "apps",
            "v1",
            "Deployment",
            "k8s_openapi::api::apps::v1::Deployment",
        ),
        (
            "batch",
            "v1",
            "CronJob",
            "k8s_openapi::api::batch::v1::CronJob",
        ),
        (
            "networking.k8s.io",
            "v1",
            "Ingress",
            "k8s_openapi::api::networking::v1::Ingress",
        ),
        (
            "rbac.authorization.k8s.io",
            "v1",
            "Role",
            "k8s_openapi::api::rbac::v1::Role",
        ),
        (
            "apiextensions.k8s.io",
            "v1",
            "CustomResourceDefinition",
            "k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition",
        ),
    ] {
        assert_eq!(builtin_kind(group, version, kind).map(|b| b.path), Ok(path));
    }
    for group in ["cert-manager.io", "example.com"] {
        assert!(builtin_kind(group, "v1", "Thing").is_err(), "{group}");
    }
    assert!(is_rust_path("crate::external::Certificate"));
    assert!(!is_rust_path("Certificate") && !is_rust_path("crate::a b::C"));
}

#[test]
fn create_api_outside_a_project_is_a_clear_error() {
    let tmp = tempfile::tempdir().unwrap();
    let err = CreateApi {
        version: None,
        group: None,
        ..CreateApi::new(tmp.path().to_owned(), "Gadget")
    }
    .create()
    .unwrap_err();
    assert!(
        err.to_string().contains("not inside an opkit project"),
        "{err}"
    );
}

/// Issue 38: a second `create webhook` for a kind said "choose another
/// name", `create api` for an existing kind did not point at conversion,
/// and `create webhook` reformatted the user's own files.
#[test]
fn second_scaffolds_say_what_to_do_and_own_formatting_is_kept() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = project(tmp.path()).create().unwrap();
    let lib = dir.join("src/lib.rs");
    let styled = "fn   kept_as_written( ) -> u8 { 1 }";
    let text = std::fs::read_to_string(&lib).unwrap();
    std::fs::write(&lib, format!("{text}\n#[allow(dead_code)]\n{styled}\n")).unwrap();
    let webhook = || crate::CreateWebhook {
        dir: dir.clone(),
        kind: "Widget".into(),
        conversion_spoke: None,
    };
    webhook().create().unwrap();
    let after = std::fs::read_to_string(&lib).unwrap();
    assert!(after.contains(styled), "{after}");
    assert!(after.contains("pub mod webhooks;"), "{after}");

    let again = webhook().create().unwrap_err().to_string();
    assert!(
        again.contains("has its webhooks already") && again.contains("--conversion --spoke"),
        "{again}"
    );
    let exists = CreateApi::new(dir.clone(), "Widget")
        .create()
        .unwrap_err()
        .to_string();
    assert!(
        exists.contains("create webhook --kind Widget --conversion --spoke"),
        "{exists}"
    );
}

/// Issue 38: `make run` bound metrics and probes on every interface.
#[test]
fn make_run_listens_on_loopback_unless_told_otherwise() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = project(tmp.path()).create().unwrap();
    let makefile = std::fs::read_to_string(dir.join("Makefile")).unwrap();
    assert!(
        makefile.contains("METRICS_ADDR ?= 127.0.0.1:8443"),
        "{makefile}"
    );
    assert!(
        makefile.contains("PROBE_ADDR ?= 127.0.0.1:8081"),
        "{makefile}"
    );
    let run = makefile
        .split("\nrun: ")
        .nth(1)
        .and_then(|rest| rest.split("\n\n").next())
        .unwrap();
    assert!(
        run.contains(
            "--metrics-bind-address=$(METRICS_ADDR) --health-probe-bind-address=$(PROBE_ADDR)"
        ),
        "{run}"
    );
}

/// Issue 38: `create api` whose build fails (here the build step fails
/// at once) leaves the project exactly as it was, as `new` does.
#[test]
fn create_api_whose_build_fails_leaves_the_project_as_it_was() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = project(tmp.path()).create().unwrap();
    let before = super::all_or_nothing::tree(&dir);
    let api = CreateApi {
        resource: false,
        group: Some("apps".into()),
        version: Some("v1".into()),
        ..CreateApi::new(dir.clone(), "Deployment")
    };
    let err = api
        .create_then(|_| {
            Err(ScaffoldError::Manifests {
                detail: "`cargo run --bin demo-operator -- manifests` failed".to_owned(),
            })
        })
        .unwrap_err();
    assert!(matches!(err, ScaffoldError::RolledBack { .. }), "{err:?}");
    assert!(err.to_string().contains("--skip-manifests"), "{err}");
    assert_eq!(super::all_or_nothing::tree(&dir), before);
    // And the same kind can be added afterwards.
    api.create().unwrap();
    assert!(dir.join("src/controllers/deployment.rs").is_file());
}

/// `new --multicluster`: each provider fills every placeholder; the
/// `PROJECT` file records the provider (and reads it back), so a kind
/// `create api` adds later runs in the members too, with a test that
/// engages a member; a single-cluster project has none of it.
#[test]
fn a_multicluster_project_runs_every_kind_in_the_members() {
    for provider in ClusterProvider::ALL {
        let tmp = tempfile::tempdir().unwrap();
        let dir = NewProject {
            multicluster: Some(provider),
            ..project(tmp.path())
        }
        .create()
        .unwrap();
        let read = |file: &str| std::fs::read_to_string(dir.join(file)).unwrap();
        for file in [
            "src/main.rs",
            "src/lib.rs",
            "README.md",
            "tests/widget_controller.rs",
        ] {
            assert!(!read(file).contains("{{"), "{file} has a placeholder left");
        }
        assert!(read("Cargo.toml").contains("features = [\"secure-metrics\", \"multicluster\"]"));
        assert!(read("src/main.rs").contains("manager.set_cluster_provider("));
        let written = ProjectFile::read(&dir).unwrap();
        assert_eq!(written.multicluster, Some(provider));
        assert_eq!(ProjectFile::parse(&written.render()).unwrap(), written);

        CreateApi::new(dir.clone(), "Gadget").create().unwrap();
        for controller in ["src/controllers/widget.rs", "src/controllers/gadget.rs"] {
            assert!(
                read(controller).contains("events, multicluster)]"),
                "{controller}"
            );
        }
        let test = read("tests/gadget_controller.rs");
        assert!(test.contains("ClusterSet::new()"), "{test}");
        assert!(
            test.contains(".client(hub.client().expect(\"hub admin client\"))"),
            "{test}"
        );
    }
    let tmp = tempfile::tempdir().unwrap();
    let dir = project(tmp.path()).create().unwrap();
    let read = |file: &str| std::fs::read_to_string(dir.join(file)).unwrap();
    assert!(!read("src/main.rs").contains("cluster_provider"));
    assert!(!read("src/controllers/widget.rs").contains("multicluster"));
    assert!(!read("PROJECT").contains("multicluster"));
    assert!(matches!(
        ClusterProvider::parse("carrier-pigeons"),
        Err(ScaffoldError::UnknownClusterProvider { .. })
    ));
}
