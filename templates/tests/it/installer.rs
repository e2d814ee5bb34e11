//! `cargo opkit installer` and `cargo opkit chart`: the installer holds
//! every manifest of `deploy/` in apply order with the image set; the
//! example's committed chart is what `cargo opkit chart` renders; rendered
//! by the real `helm` (tests/helm/build.sh) with its default values, the
//! chart is the installer less the Namespace (helm installs into the
//! release's) and the release labels; its values turn features off; its
//! schema rejects bad values saying which and why. Installing both on a
//! cluster is `opkit-tests`' `deploy_helm`.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use cargo_opkit::{CreateWebhook, NewProject, OpkitDependency};
use serde_json::Value;

use super::support::{cargo_opkit, workspace};

const NAMESPACE: &str = "memcached-operator-system";
const DIGEST: &str = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

fn example() -> PathBuf {
    workspace().join("examples/memcached")
}

fn text(output: &Output) -> String {
    format!(
        "status {}\n--- stdout\n{}\n--- stderr\n{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

/// The documents of a multi-document YAML text (empty ones skipped).
fn docs(yaml: &str) -> Vec<Value> {
    serde_saphyr::from_multiple::<Value>(yaml)
        .unwrap_or_else(|e| panic!("{e}\n{yaml}"))
        .into_iter()
        .filter(|d| !d.is_null())
        .collect()
}

/// `deploy/`'s documents, in file order.
fn deploy_docs(project: &Path) -> Vec<Value> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(project.join("deploy"))
        .expect("deploy/")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    files.sort();
    files
        .iter()
        .flat_map(|f| docs(&std::fs::read_to_string(f).expect("read")))
        .collect()
}

/// A copy of the example's PROJECT, Cargo.toml and deploy/ in `dir`.
fn copy_example(dir: &Path) -> PathBuf {
    let project = dir.join("memcached-operator");
    std::fs::create_dir_all(project.join("deploy")).expect("mkdir");
    for file in ["PROJECT", "Cargo.toml"] {
        std::fs::copy(example().join(file), project.join(file)).expect("copy");
    }
    // deploy/*.yaml, what the installer and the chart take (not the opt-in
    // deploy/network-policy/).
    for entry in std::fs::read_dir(example().join("deploy")).expect("deploy/") {
        let path = entry.expect("entry").path();
        if path.is_dir() {
            continue;
        }
        std::fs::copy(
            &path,
            project.join("deploy").join(path.file_name().expect("name")),
        )
        .expect("copy");
    }
    project
}

/// The helm tests/helm/build.sh builds (at once when it is built).
fn helm() -> PathBuf {
    let output = Command::new(workspace().join("tests/helm/build.sh"))
        .output()
        .expect("run tests/helm/build.sh");
    assert!(
        output.status.success(),
        "tests/helm/build.sh (make helm):\n{}",
        text(&output)
    );
    PathBuf::from(String::from_utf8_lossy(&output.stdout).trim()).join("helm")
}

/// `helm template memcached-operator CHART --namespace NS ARGS`.
fn helm_template(chart: &Path, namespace: &str, args: &[&str]) -> Output {
    Command::new(helm())
        .args(["template", "memcached-operator"])
        .arg(chart)
        .args(["--namespace", namespace])
        .args(args)
        .env(
            "HELM_CACHE_HOME",
            std::env::temp_dir().join("opkit-helm-test-cache"),
        )
        .output()
        .expect("run helm")
}

fn rendered(chart: &Path, args: &[&str]) -> Vec<Value> {
    let output = helm_template(chart, NAMESPACE, args);
    assert!(
        output.status.success(),
        "helm template {args:?}:\n{}",
        text(&output)
    );
    docs(&String::from_utf8_lossy(&output.stdout))
}

fn find<'a>(docs: &'a [Value], kind: &str) -> Vec<&'a Value> {
    docs.iter().filter(|d| d["kind"] == kind).collect()
}

fn manager(docs: &[Value]) -> Value {
    let deployment = find(docs, "Deployment");
    assert_eq!(deployment.len(), 1, "{docs:#?}");
    deployment[0]["spec"]["template"]["spec"]["containers"][0].clone()
}

fn args(container: &Value) -> Vec<String> {
    container["args"]
        .as_array()
        .expect("args")
        .iter()
        .map(|a| a.as_str().expect("a string").to_owned())
        .collect()
}

#[test]
fn the_installer_holds_every_manifest_of_deploy_in_order_with_the_image() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let out = tmp.path().join("dist/install.yaml");
    let image = format!("localhost:5000/memcached-operator:v1@{DIGEST}");
    let output = cargo_opkit(
        &[
            "opkit",
            "installer",
            "--image",
            &image,
            "--out",
            out.to_str().expect("utf-8"),
        ],
        &example().join("src"),
    );
    assert!(output.status.success(), "{}", text(&output));
    let installed = docs(&std::fs::read_to_string(&out).expect("install.yaml"));
    let mut expected = deploy_docs(&example());
    expected
        .iter_mut()
        .filter(|d| d["kind"] == "Deployment")
        .for_each(|d| {
            d["spec"]["template"]["spec"]["containers"][0]["image"] = image.clone().into()
        });
    assert_eq!(installed, expected);
    let kinds: Vec<&str> = installed
        .iter()
        .map(|d| d["kind"].as_str().expect("kind"))
        .collect();
    // In apply order: the Namespace, then the CRDs, before what lives in them.
    assert_eq!(
        kinds[..2],
        ["Namespace", "CustomResourceDefinition"],
        "{kinds:?}"
    );
    assert!(kinds.contains(&"Deployment"), "{kinds:?}");
}

#[test]
fn the_installer_refuses_a_bad_image_or_a_deploy_without_the_manager_and_writes_nothing() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let project = copy_example(tmp.path());
    let out = project.join("dist/install.yaml");
    let output = cargo_opkit(
        &["opkit", "installer", "--image", "Registry/Web:1"],
        &project,
    );
    assert!(!output.status.success());
    assert!(
        String::from_utf8_lossy(&output.stderr)
            .contains("invalid image \"Registry/Web:1\": the repository must be lower-case"),
        "{}",
        text(&output)
    );
    let deployment = project.join("deploy/04-deployment.yaml");
    let edited = std::fs::read_to_string(&deployment)
        .expect("read")
        .replace("image: memcached-operator:latest", "image: somebody-else:1");
    std::fs::write(&deployment, edited).expect("write");
    for command in ["installer", "chart"] {
        let output = cargo_opkit(&["opkit", command], &project);
        assert!(!output.status.success(), "{command}");
        assert!(
            String::from_utf8_lossy(&output.stderr)
                .contains("has a container with image \"memcached-operator:latest\""),
            "{command}: {}",
            text(&output)
        );
    }
    assert!(!out.exists() && !project.join("dist/chart").exists());
    // The chart replaces its directory whole: never one it did not render.
    std::fs::write(
        &deployment,
        std::fs::read_to_string(example().join("deploy/04-deployment.yaml")).expect("read"),
    )
    .expect("write");
    let output = cargo_opkit(&["opkit", "chart", "--out", "deploy"], &project);
    assert!(!output.status.success());
    assert!(
        String::from_utf8_lossy(&output.stderr).contains("refusing to replace deploy"),
        "{}",
        text(&output)
    );
    assert!(project.join("deploy/04-deployment.yaml").is_file());
    let output = cargo_opkit(&["opkit", "chart"], &project);
    assert!(output.status.success(), "{}", text(&output));
    let output = cargo_opkit(&["opkit", "chart"], &project);
    assert!(
        output.status.success(),
        "a rendered chart is replaced: {}",
        text(&output)
    );
    std::fs::write(
        project.join("deploy/02-service-account.yaml"),
        "kind: [unclosed\n",
    )
    .expect("write");
    let output = cargo_opkit(&["opkit", "chart"], &project);
    assert!(
        String::from_utf8_lossy(&output.stderr).contains("02-service-account.yaml"),
        "{}",
        text(&output)
    );
}

#[test]
fn the_example_chart_is_what_cargo_opkit_chart_renders() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let out = tmp.path().join("chart");
    let output = cargo_opkit(
        &["opkit", "chart", "--out", out.to_str().expect("utf-8")],
        &example(),
    );
    assert!(output.status.success(), "{}", text(&output));
    let committed = example().join("dist/chart");
    let list = |dir: &Path| {
        let mut files = Vec::new();
        for sub in ["", "templates"] {
            for entry in std::fs::read_dir(dir.join(sub)).expect("read_dir") {
                let path = entry.expect("entry").path();
                if path.is_file() {
                    files.push(path.strip_prefix(dir).expect("prefix").to_owned());
                }
            }
        }
        files.sort();
        files
    };
    let files = list(&out);
    assert_eq!(
        list(&committed),
        files,
        "examples/memcached/dist/chart has other files than `cargo opkit chart` renders: run `make chart` in examples/memcached"
    );
    for file in files {
        assert_eq!(
            std::fs::read_to_string(committed.join(&file)).expect("read"),
            std::fs::read_to_string(out.join(&file)).expect("read"),
            "examples/memcached/dist/chart/{} differs from what `cargo opkit chart` renders: run `make chart` in examples/memcached",
            file.display()
        );
    }
}

/// What only the chart adds: the release's labels, the CRDs' keep policy.
fn without_release_marks(mut doc: Value) -> Value {
    let metadata = doc
        .get_mut("metadata")
        .and_then(Value::as_object_mut)
        .expect("metadata");
    for (field, added) in [
        (
            "labels",
            &["app.kubernetes.io/managed-by", "app.kubernetes.io/instance"][..],
        ),
        ("annotations", &["helm.sh/resource-policy"][..]),
    ] {
        if let Some(map) = metadata.get_mut(field).and_then(Value::as_object_mut) {
            for key in added {
                map.remove(*key);
            }
            if map.is_empty() {
                metadata.remove(field);
            }
        }
    }
    doc
}

fn key(doc: &Value) -> String {
    format!("{}/{}", doc["kind"], doc["metadata"]["name"])
}

#[test]
fn the_chart_with_its_defaults_renders_what_the_installer_installs() {
    let chart = example().join("dist/chart");
    let mut from_helm: Vec<Value> = rendered(&chart, &[])
        .into_iter()
        .map(without_release_marks)
        .collect();
    let mut installed: Vec<Value> = deploy_docs(&example())
        .into_iter()
        .filter(|d| d["kind"] != "Namespace")
        .collect();
    // helm applies in its own kind order.
    from_helm.sort_by_key(key);
    installed.sort_by_key(key);
    assert_eq!(from_helm, installed);
    let lint = Command::new(helm())
        .args(["lint", "--strict"])
        .arg(&chart)
        .output()
        .expect("run helm lint");
    assert!(
        lint.status.success(),
        "helm lint --strict:\n{}",
        text(&lint)
    );
    let crd = &rendered(&chart, &[])
        .into_iter()
        .find(|d| d["kind"] == "CustomResourceDefinition")
        .expect("a CRD");
    assert_eq!(
        crd["metadata"]["annotations"]["helm.sh/resource-policy"],
        "keep"
    );
}

#[test]
fn the_chart_values_set_the_image_and_turn_features_off() {
    let chart = example().join("dist/chart");
    let docs = rendered(
        &chart,
        &[
            "--set",
            "replicas=3,metrics.enabled=false,leaderElection.enabled=false,crd.keep=false",
            "--set-string",
            &format!(
                "image.repository=registry.example.com/team/memcached,image.tag=v2,image.digest={DIGEST},image.pullPolicy=IfNotPresent"
            ),
            "--set",
            "imagePullSecrets[0].name=pull-secret,resources.limits.memory=1Gi",
        ],
    );
    let deployment = find(&docs, "Deployment")[0];
    assert_eq!(deployment["spec"]["replicas"], 3);
    assert_eq!(
        deployment["spec"]["template"]["spec"]["imagePullSecrets"][0]["name"],
        "pull-secret"
    );
    let container = manager(&docs);
    assert_eq!(
        container["image"],
        format!("registry.example.com/team/memcached:v2@{DIGEST}")
    );
    assert_eq!(container["imagePullPolicy"], "IfNotPresent");
    assert_eq!(container["resources"]["limits"]["memory"], "1Gi");
    let flags = args(&container);
    assert!(
        flags.contains(&"--leader-elect=false".to_owned()),
        "{flags:?}"
    );
    assert!(
        flags.contains(&"--metrics-bind-address=0".to_owned()),
        "{flags:?}"
    );
    let ports: Vec<&Value> = container["ports"]
        .as_array()
        .expect("ports")
        .iter()
        .collect();
    assert!(ports.iter().all(|p| p["name"] != "metrics"), "{ports:?}");
    assert!(find(&docs, "Service").is_empty(), "no metrics Service");
    let crd = find(&docs, "CustomResourceDefinition");
    assert!(crd[0]["metadata"]["annotations"]["helm.sh/resource-policy"].is_null());

    let docs = rendered(&chart, &["--set", "metrics.port=9090,crd.enable=false"]);
    assert!(find(&docs, "CustomResourceDefinition").is_empty());
    assert!(args(&manager(&docs)).contains(&"--metrics-bind-address=:9090".to_owned()));
    assert_eq!(find(&docs, "Service")[0]["spec"]["ports"][0]["port"], 9090);
    assert_eq!(manager(&docs)["ports"][0]["containerPort"], 9090);

    // Another release namespace: every namespaced object and reference moves.
    let output = helm_template(&chart, "ops", &[]);
    assert!(output.status.success(), "{}", text(&output));
    for doc in docs_of(&output) {
        if let Some(ns) = doc["metadata"]["namespace"].as_str() {
            assert_eq!(ns, "ops", "{}", key(&doc));
        }
        if doc["kind"] == "ClusterRoleBinding" {
            assert_eq!(doc["subjects"][0]["namespace"], "ops");
        }
    }
}

fn docs_of(output: &Output) -> Vec<Value> {
    docs(&String::from_utf8_lossy(&output.stdout))
}

#[test]
fn the_chart_schema_rejects_bad_values_saying_which_and_why() {
    let chart = example().join("dist/chart");
    for (set, says) in [
        ("replicas=three", "at '/replicas': got string, want integer"),
        ("replicas=-1", "at '/replicas'"),
        ("replica=2", "additional properties 'replica' not allowed"),
        ("metrics.port=70000", "at '/metrics/port'"),
        ("image.pullPolicy=Sometimes", "at '/image/pullPolicy'"),
        ("image.digest=sha256:abc", "at '/image/digest'"),
        (
            "leaderElection.enabled=maybe",
            "at '/leaderElection/enabled'",
        ),
    ] {
        let output = helm_template(&chart, NAMESPACE, &["--set", set]);
        assert!(!output.status.success(), "{set} was accepted");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(
            stderr.contains("values don't meet the specifications of the schema")
                && stderr.contains(says),
            "{set}: {stderr}"
        );
    }
}

/// A generated project with a webhook (`create webhook`; its
/// deploy/05-webhooks.yaml as `cargo opkit manifests` writes it, here by
/// hand as the project is not built).
#[test]
fn a_webhook_project_chart_turns_the_webhooks_on_and_off() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let project = NewProject {
        name: "hook-operator".into(),
        group: "hooks.example.com".into(),
        version: "v1".into(),
        kind: Some("Hook".into()),
        dir: Some(tmp.path().to_owned()),
        opkit: OpkitDependency::Version("0.1".into()),
        sharding: false,
        multicluster: None,
    }
    .create()
    .expect("generate the project");
    CreateWebhook {
        dir: project.clone(),
        kind: "Hook".into(),
        conversion_spoke: None,
    }
    .create()
    .expect("create webhook");
    std::fs::write(
        project.join("deploy/05-webhooks.yaml"),
        "---\napiVersion: v1\nkind: Service\nmetadata:\n  name: hook-operator-webhook-service\n  namespace: hook-operator-system\nspec:\n  selector:\n    app.kubernetes.io/name: hook-operator\n  ports:\n  - name: webhook\n    port: 443\n    targetPort: 9443\n---\napiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingWebhookConfiguration\nmetadata:\n  name: hook-operator-validating\nwebhooks:\n- name: vhook.hooks.example.com\n  admissionReviewVersions: [v1]\n  sideEffects: None\n  clientConfig:\n    service:\n      name: hook-operator-webhook-service\n      namespace: hook-operator-system\n      path: /validate\n",
    )
    .expect("write 05-webhooks.yaml");
    let output = cargo_opkit(&["opkit", "chart"], &project);
    assert!(output.status.success(), "{}", text(&output));
    let chart = project.join("dist/chart");
    let values = std::fs::read_to_string(chart.join("values.yaml")).expect("values.yaml");
    assert!(values.contains("webhook:\n  enabled: true"), "{values}");
    let template = |args: &[&str]| {
        let output = Command::new(helm())
            .args(["template", "hook-operator"])
            .arg(&chart)
            .args(["--namespace", "hook-operator-system"])
            .args(args)
            .output()
            .expect("helm");
        assert!(output.status.success(), "{}", text(&output));
        docs_of(&output)
    };
    let on = template(&[]);
    assert_eq!(find(&on, "ValidatingWebhookConfiguration").len(), 1);
    let container = manager(&on);
    assert!(args(&container).contains(&"--manage-webhook-certificate".to_owned()));
    assert!(
        container["ports"]
            .as_array()
            .expect("ports")
            .iter()
            .any(|p| p["name"] == "webhook")
    );
    assert!(container["env"].is_null(), "{container:#?}");

    let off = template(&["--set", "webhook.enabled=false"]);
    assert!(find(&off, "ValidatingWebhookConfiguration").is_empty());
    assert!(
        find(&off, "Service")
            .iter()
            .all(|s| s["metadata"]["name"] != "hook-operator-webhook-service")
    );
    let container = manager(&off);
    assert!(!args(&container).contains(&"--manage-webhook-certificate".to_owned()));
    assert!(
        container["ports"]
            .as_array()
            .expect("ports")
            .iter()
            .all(|p| p["name"] != "webhook")
    );
    assert_eq!(container["env"][0]["name"], "ENABLE_WEBHOOKS");
    assert_eq!(container["env"][0]["value"], "false");

    // The manager's certificate names its namespace: another one is refused.
    let output = Command::new(helm())
        .args(["template", "hook-operator"])
        .arg(&chart)
        .args(["--namespace", "elsewhere"])
        .output()
        .expect("helm");
    assert!(!output.status.success());
    assert!(
        String::from_utf8_lossy(&output.stderr)
            .contains("the webhooks need the release in namespace hook-operator-system"),
        "{}",
        text(&output)
    );
}

/// What `deploy/` holds (metrics over HTTPS on 8443 with `--metrics-secure`)
/// and what a user adds to it (here a ClusterRole and a NetworkPolicy) flows
/// into the chart without a change to `cargo opkit chart`: its defaults
/// still render `deploy/`, and `metrics.secure` appears; a namespace
/// other than the operator's, and a Role in it, stay in the chart.
#[test]
fn the_chart_takes_whatever_deploy_holds() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let project = copy_example(tmp.path());
    // deploy/ serves metrics over HTTPS on 8443 with `--metrics-secure`.
    let deployment =
        std::fs::read_to_string(project.join("deploy/04-deployment.yaml")).expect("read");
    assert!(
        deployment.contains("- --metrics-bind-address=:8443\n            - --metrics-secure"),
        "{deployment}"
    );
    std::fs::write(
        project.join("deploy/06-extras.yaml"),
        "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata:\n  name: memcached-operator-metrics-reader\nrules:\n- nonResourceURLs: [/metrics]\n  verbs: [get]\n---\napiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata:\n  name: allow-metrics\n  namespace: memcached-operator-system\nspec:\n  podSelector:\n    matchLabels:\n      app.kubernetes.io/component: manager\n  ingress:\n  - ports:\n    - port: 8443\n---\napiVersion: v1\nkind: Namespace\nmetadata:\n  name: fleet\n---\napiVersion: rbac.authorization.k8s.io/v1\nkind: Role\nmetadata:\n  name: fleet-secrets\n  namespace: fleet\nrules:\n- apiGroups: ['']\n  resources: [secrets]\n  verbs: [get, list, watch]\n",
    )
    .expect("write 06-extras.yaml");
    let output = cargo_opkit(&["opkit", "chart"], &project);
    assert!(output.status.success(), "{}", text(&output));
    let chart = project.join("dist/chart");
    let values = std::fs::read_to_string(chart.join("values.yaml")).expect("values.yaml");
    assert!(
        values.contains("metrics:\n  enabled: true\n  port: 8443\n  secure: true"),
        "{values}"
    );
    let mut from_helm: Vec<Value> = rendered(&chart, &[])
        .into_iter()
        .map(without_release_marks)
        .collect();
    // Only the operator's own Namespace is left to helm; another one (a
    // hub's fleet namespace, where its Role is) is the chart's.
    let mut installed: Vec<Value> = deploy_docs(&project)
        .into_iter()
        .filter(|d| !(d["kind"] == "Namespace" && d["metadata"]["name"] == NAMESPACE))
        .collect();
    from_helm.sort_by_key(key);
    installed.sort_by_key(key);
    assert_eq!(from_helm, installed);
    assert!(
        from_helm
            .iter()
            .any(|d| d["kind"] == "Role" && d["metadata"]["namespace"] == "fleet"),
        "{from_helm:?}"
    );

    let docs = rendered(&chart, &["--set", "metrics.secure=false,metrics.port=9443"]);
    let flags = args(&manager(&docs));
    assert!(
        flags.contains(&"--metrics-secure=false".to_owned()),
        "{flags:?}"
    );
    assert!(
        flags.contains(&"--metrics-bind-address=:9443".to_owned()),
        "{flags:?}"
    );
    let output = helm_template(&chart, NAMESPACE, &["--set", "metrics.secure=yes-please"]);
    assert!(!output.status.success());
    assert!(
        String::from_utf8_lossy(&output.stderr).contains("at '/metrics/secure'"),
        "{}",
        text(&output)
    );
}
