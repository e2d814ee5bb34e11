//! `cargo opkit create webhook`: a validating and defaulting webhook for
//! one kind of the project and, with `--conversion --spoke <version>`, a
//! second version of the kind converted through the hub; served by the
//! manager, deployed behind a Service with a certificate the manager
//! issues, with their manifests and envtest tests.

use std::path::{Path, PathBuf};

use crate::error::ScaffoldError;
use crate::names::{snake_case, validate_version};
use crate::project::{
    ProjectFile, insert_before_marker, kind_values, read, render_set, write_all_or_nothing,
};
use crate::templates;

/// The generated module holding every webhook of the project.
const MODULE: &str = "src/webhooks/mod.rs";
/// The opt-in NetworkPolicy letting webhook calls in (`make deploy
/// NETWORK_POLICY=1`), written with the first webhook.
const NETWORK_POLICY: &str = "deploy/network-policy/allow-webhook-traffic.yaml";
/// Where the manager reads its serving certificate (opkit's default).
const CERT_DIR: &str = "/tmp/k8s-webhook-server/serving-certs";

/// `cargo opkit create webhook`.
///
/// Without `conversion_spoke`: adds `src/webhooks/<kind>.rs` (a `Validator`
/// and a `Defaulter` to fill in) and `tests/<kind>_webhook.rs`. The first
/// webhook of a project also creates `src/webhooks/mod.rs` (the Service,
/// the managed certificate's RBAC and the webhook configurations `cargo
/// opkit manifests` writes to `deploy/05-webhooks.yaml`), has the manager
/// serve the webhooks (`--manage-webhook-certificate`), exposes port 9443
/// in `deploy/04-deployment.yaml` with an `emptyDir` at the cert dir, and
/// turns on opkit's `webhook` and `dev-cert` features (and opkit-envtest's
/// `webhook`, for the tests) (`make deploy` applies every
/// `deploy/*.yaml` in name order, so `05-webhooks.yaml` needs no edit).
///
/// With `conversion_spoke`: also (or, if the kind has its admission webhook
/// already, only) adds the version `src/api/<kind>_<spoke>.rs` converted to
/// and from the kind's version (the hub, stored), puts both versions in
/// the kind's CRD, registers the conversion, and adds
/// `tests/<kind>_conversion.rs`.
#[derive(Debug, Clone)]
pub struct CreateWebhook {
    /// The project's directory.
    pub dir: PathBuf,
    /// The kind (one of the project's).
    pub kind: String,
    /// A new version of the kind to convert to and from (`v1beta1`).
    pub conversion_spoke: Option<String>,
}

/// A change to one line of a file.
struct Edit {
    file: &'static str,
    anchor: String,
    change: Change,
    what: &'static str,
}

enum Change {
    /// Insert lines after the anchor line, each with its indentation
    /// (plus the text's own).
    After(String),
    /// Insert one line before the anchor line (a marker), with its
    /// indentation.
    BeforeMarker(String),
    /// Insert lines before the anchor line, each with its indentation.
    Before(String),
    /// Replace the anchor line (keeping its indentation).
    Replace(String),
    /// Turn on these cargo features on the first line that is the anchor
    /// (`opkit = `, a dependency) followed by its version or table.
    Features(&'static [&'static str]),
}

impl CreateWebhook {
    /// Validates, then writes; every check runs before the first write, and
    /// if writing or formatting fails, the project is left as it was
    /// ([`ScaffoldError::RolledBack`]). Returns the files created or changed.
    pub fn create(&self) -> Result<Vec<PathBuf>, ScaffoldError> {
        self.create_then(|_| Ok(()))
    }

    /// As [`create`](Self::create), then builds the project to render its
    /// manifests ([`manifests`](crate::manifests)); if the build fails,
    /// everything `create` wrote is undone.
    pub fn create_with_manifests(&self) -> Result<Vec<PathBuf>, ScaffoldError> {
        self.create_then(crate::project::manifests)
    }

    /// [`create`](Self::create), then `finish` on the project's directory;
    /// undone if `finish` fails.
    fn create_then(
        &self,
        finish: impl FnOnce(&Path) -> Result<(), ScaffoldError>,
    ) -> Result<Vec<PathBuf>, ScaffoldError> {
        let root = super::project::find_project(&self.dir)?;
        let project = ProjectFile::read(&root)?;
        let Some(resource) = project.resource(&self.kind) else {
            return Err(ScaffoldError::InvalidKind {
                kind: self.kind.clone(),
                reason: format!(
                    "the project has no such kind (it has: {}); add it first with `cargo opkit create api --kind {}`",
                    project.kinds().join(", "),
                    self.kind
                ),
            });
        };
        if !resource.owned() {
            return Err(ScaffoldError::InvalidKind {
                kind: self.kind.clone(),
                reason: "the project does not define it (`create api --resource=false`): \
                         webhooks are for the project's own kinds"
                    .to_owned(),
            });
        }
        let group = resource.group.clone();
        let snake = snake_case(&self.kind);
        let api_file = root.join("src/api").join(format!("{snake}.rs"));
        let version = read(&api_file)?
            .lines()
            .find_map(|l| {
                let rest = l.trim().strip_prefix("version = \"")?;
                rest.split('"').next().map(str::to_owned)
            })
            .unwrap_or_else(|| resource.version.clone());
        let mut values = kind_values(&project.name, &group, &version, &self.kind);
        // A cluster-scoped kind: no `namespaced` in the spoke's `#[kube]`,
        // and the tests' `Api`s span the cluster.
        if resource.namespaced {
            values
                .set("namespaced_attr", "\n    namespaced,")
                .set(
                    "webhook_test_api",
                    format!(
                        "Api::namespaced(client, \"{}-webhook-test\")",
                        self.kind.to_ascii_lowercase()
                    ),
                )
                .set("hub_test_api", "Api::namespaced(client.clone(), namespace)")
                .set("spoke_test_api", "Api::namespaced(client, namespace)");
        } else {
            values
                .set("namespaced_attr", "")
                .set("webhook_test_api", "Api::all(client)")
                .set("hub_test_api", "Api::all(client.clone())")
                .set("spoke_test_api", "Api::all(client)");
        }
        let first = !root.join(MODULE).exists();
        let admission_file = format!("src/webhooks/{snake}.rs");
        let admission_exists = root.join(&admission_file).exists();
        if admission_exists && self.conversion_spoke.is_none() {
            return Err(ScaffoldError::WebhookExists {
                kind: self.kind.clone(),
                path: admission_file.into(),
            });
        }
        let crate_name = project.name.replace('-', "_");

        let mut files: Vec<(String, String)> = Vec::new();
        let mut edits = Vec::new();
        if !admission_exists || self.conversion_spoke.is_none() {
            for (path, text) in render_set(templates::WEBHOOK, &values)? {
                if (path == MODULE || path == NETWORK_POLICY) && !first {
                    continue;
                }
                files.push((path, text));
            }
            if first {
                edits.extend(first_webhook_edits(&crate_name));
            } else {
                edits.push(Edit {
                    file: MODULE,
                    anchor: "// opkit:scaffold:webhook-modules".to_owned(),
                    change: Change::BeforeMarker(format!("pub mod {snake};")),
                    what: "the webhook module",
                });
                edits.push(Edit {
                    file: MODULE,
                    anchor: "// opkit:scaffold:webhooks".to_owned(),
                    change: Change::BeforeMarker(format!(
                        "let webhooks = {snake}::register(webhooks);"
                    )),
                    what: "the webhook registration",
                });
            }
        }
        if let Some(spoke) = &self.conversion_spoke {
            validate_version(spoke)?;
            if spoke == &version {
                return Err(ScaffoldError::Conversion {
                    kind: self.kind.clone(),
                    reason: format!(
                        "{spoke} is the kind's version already (the hub); name the other version, e.g. --spoke v1beta1"
                    ),
                });
            }
            let hub_crd = format!("api::{snake}::{}::crd(),", self.kind);
            let lib = read(&root.join("src/lib.rs"))?;
            if !lib.lines().any(|l| l.trim() == hub_crd) {
                return Err(ScaffoldError::Conversion {
                    kind: self.kind.clone(),
                    reason: format!(
                        "src/lib.rs's crds() has no line `{hub_crd}` (the kind has a spoke already, or crds() was edited); the scaffold adds one spoke per kind, add further versions by hand"
                    ),
                });
            }
            values.set("spoke", spoke.as_str());
            files.extend(render_set(templates::CONVERSION, &values)?);
            let module = format!("{snake}_{spoke}");
            edits.push(Edit {
                file: "src/api/mod.rs",
                anchor: "// opkit:scaffold:api".to_owned(),
                change: Change::BeforeMarker(format!("pub mod {module};")),
                what: "the spoke module",
            });
            edits.push(Edit {
                file: "src/lib.rs",
                anchor: hub_crd,
                change: Change::Replace(format!(
                    "api::{module}::add_version(api::{snake}::{}::crd()),",
                    self.kind
                )),
                what: "the two-version CRD",
            });
            edits.push(Edit {
                file: MODULE,
                anchor: "// opkit:scaffold:webhooks".to_owned(),
                change: Change::Before(format!(
                    "let webhooks = webhooks.conversion(\n    opkit::webhook::Conversion::<crate::api::{snake}::{kind}>::new()\n        .spoke::<crate::api::{module}::{kind}>(),\n);",
                    kind = self.kind
                )),
                what: "the conversion registration",
            });
        }
        for (path, _) in &files {
            let target = root.join(path);
            if target.exists() {
                return Err(ScaffoldError::Exists { path: target });
            }
        }

        let mut edited: Vec<(String, String)> = Vec::new();
        for edit in edits {
            let text = match edited.iter().position(|(f, _)| f == edit.file) {
                Some(i) => edited.remove(i).1,
                None => match files.iter().find(|(f, _)| f == edit.file) {
                    // A file created in this run (the first webhook's module).
                    Some((_, text)) => text.clone(),
                    None => read(&root.join(edit.file))?,
                },
            };
            let changed = apply(&text, &edit).ok_or_else(|| ScaffoldError::MissingAnchor {
                path: root.join(edit.file),
                anchor: edit.anchor.clone(),
                what: edit.what.to_owned(),
            })?;
            match files.iter_mut().find(|(f, _)| f == edit.file) {
                Some(created) => created.1 = changed,
                None => edited.push((edit.file.to_owned(), changed)),
            }
        }

        write_all_or_nothing(&root, &files, &edited, finish)
    }
}

/// The edits the project's first webhook makes: the module, the manager's
/// webhook server and its flag, the CRDs with their conversion stanza, the
/// Deployment's port and certificate volume, and
/// opkit's `webhook` and `dev-cert` features (the managed certificate and
/// the tests' `DevCertificate`) and opkit-envtest's `webhook`.
fn first_webhook_edits(crate_name: &str) -> Vec<Edit> {
    vec![
        Edit {
            file: "src/lib.rs",
            anchor: "pub mod controllers;".to_owned(),
            change: Change::After("pub mod webhooks;".to_owned()),
            what: "the webhooks module",
        },
        Edit {
            file: "src/lib.rs",
            anchor: "let crds = opkit::manifest::to_yaml(&crds())?;".to_owned(),
            change: Change::Replace(
                "let crds = opkit::manifest::to_yaml(&webhooks::crds_with_conversion())?;"
                    .to_owned(),
            ),
            what: "the CRDs' conversion stanza",
        },
        Edit {
            file: "src/lib.rs",
            anchor: "(\"03-rbac.yaml\", format!(\"{HEADER}{rbac}\")),".to_owned(),
            change: Change::After(
                "(\n    \"05-webhooks.yaml\",\n    format!(\"{HEADER}{}\", webhooks::manifest()?),\n),"
                    .to_owned(),
            ),
            what: "deploy/05-webhooks.yaml",
        },
        Edit {
            file: "src/main.rs",
            anchor: "log_level: String,".to_owned(),
            change: Change::After(
                "/// Issue the webhook serving certificate in the cluster (a Secret) and inject its CA,\n\
                 /// instead of reading a mounted one (cert-manager); see src/webhooks/mod.rs.\n\
                 #[arg(long, default_value_t = false)]\n\
                 manage_webhook_certificate: bool,\n\
                 /// Serve the webhooks: `true` as in the cluster (behind the Service), `local` for an\n\
                 /// apiserver on this machine, registered by URL while this process runs (what `make run`\n\
                 /// sets), `false` not here.\n\
                 #[arg(long, env = \"ENABLE_WEBHOOKS\", value_enum, default_value_t = WebhookMode::True, num_args = 0..=1, default_missing_value = \"true\")]\n\
                 enable_webhooks: WebhookMode,\n\
                 /// Where to serve the webhooks (default: 0.0.0.0:9443; with `local`, 127.0.0.1:9443).\n\
                 #[arg(long, env = \"WEBHOOK_BIND_ADDRESS\")]\n\
                 webhook_bind_address: Option<String>,"
                    .to_owned(),
            ),
            what: "the --manage-webhook-certificate, --enable-webhooks and --webhook-bind-address flags",
        },
        Edit {
            file: "src/main.rs",
            anchor: "#[tokio::main]".to_owned(),
            change: Change::Before(
                "/// Where the webhooks are served (`--enable-webhooks`).\n\
                 #[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]\n\
                 enum WebhookMode {\n    \
                 /// Here, as in the cluster: behind the Service, with the certificate in the cert dir.\n    \
                 True,\n    \
                 /// Here, for an apiserver on this machine, registered by URL while this process runs.\n    \
                 Local,\n    \
                 /// Not here: the cluster calls a deployed operator.\n    \
                 False,\n\
                 }\n"
                    .to_owned(),
            ),
            what: "the webhook modes",
        },
        Edit {
            file: "src/main.rs",
            anchor: "let mut manager = builder.build().await?;".to_owned(),
            change: Change::Before(format!(
                "let builder = match args.enable_webhooks {{\n    WebhookMode::True => {{\n        let mut server = {crate_name}::webhooks::server(args.manage_webhook_certificate);\n        if let Some(address) = &args.webhook_bind_address {{\n            server = server.bind_address(address.clone());\n        }}\n        builder.webhook_server(server)\n    }}\n    WebhookMode::Local => builder.webhook_server({crate_name}::webhooks::local_server(\n        args.webhook_bind_address.as_deref(),\n    )),\n    WebhookMode::False => {{\n        tracing::warn!(\n            \"webhooks not served (ENABLE_WEBHOOKS=false): the cluster calls them through the \\\n             operator's Service (`make deploy`)\"\n        );\n        builder\n    }}\n}};"
            )),
            what: "the webhook server",
        },
        Edit {
            file: "deploy/04-deployment.yaml",
            anchor: "- --log-format=json".to_owned(),
            change: Change::After("- --manage-webhook-certificate".to_owned()),
            what: "the --manage-webhook-certificate argument",
        },
        Edit {
            file: "deploy/04-deployment.yaml",
            anchor: "ports:".to_owned(),
            change: Change::After(
                "  - name: webhook\n    containerPort: 9443\n    protocol: TCP".to_owned(),
            ),
            what: "the webhook port",
        },
        Edit {
            file: "deploy/04-deployment.yaml",
            anchor: "livenessProbe:".to_owned(),
            change: Change::Before(format!(
                "volumeMounts:\n  - name: webhook-certs\n    mountPath: {CERT_DIR}"
            )),
            what: "the certificate's volume mount",
        },
        Edit {
            file: "deploy/04-deployment.yaml",
            anchor: "containers:".to_owned(),
            change: Change::Before(
                "volumes:\n  # The manager writes its certificate here (--manage-webhook-certificate);\n  # with cert-manager, mount the Certificate's Secret instead:\n  #   secret: { secretName: <the Certificate's secretName> }\n  - name: webhook-certs\n    emptyDir: {}"
                    .to_owned(),
            ),
            what: "the certificate's volume",
        },
        Edit {
            file: "Cargo.toml",
            anchor: "opkit = ".to_owned(),
            change: Change::Features(crate::features::WEBHOOK),
            what: "opkit's webhook and dev-cert features",
        },
        Edit {
            file: "Cargo.toml",
            anchor: "opkit-envtest = ".to_owned(),
            change: Change::Features(crate::features::ENVTEST_WEBHOOK),
            what: "opkit-envtest's webhook feature",
        },
    ]
}

fn apply(text: &str, edit: &Edit) -> Option<String> {
    match &edit.change {
        Change::After(lines) => insert_after_line(text, &edit.anchor, lines),
        Change::BeforeMarker(line) => insert_before_marker(text, &edit.anchor, line),
        Change::Before(lines) => replace_line(text, &edit.anchor, |indent, anchor| {
            let mut out = indented(indent, lines);
            out.push_str(anchor);
            out
        }),
        Change::Features(features) => crate::features::with_features(text, &edit.anchor, features),
        Change::Replace(line) => replace_line(text, &edit.anchor, |indent, anchor| {
            let newline = if anchor.ends_with('\n') { "\n" } else { "" };
            format!("{indent}{line}{newline}")
        }),
    }
}

/// Each line of `lines` prefixed with `indent`.
fn indented(indent: &str, lines: &str) -> String {
    let mut out = String::new();
    for part in lines.lines() {
        out.push_str(indent);
        out.push_str(part);
        out.push('\n');
    }
    out
}

/// Replaces the first line that is `anchor` (trimmed) with what `with`
/// makes of (its indentation, the line); `None` when no line is.
fn replace_line(text: &str, anchor: &str, with: impl Fn(&str, &str) -> String) -> Option<String> {
    let mut out = String::with_capacity(text.len() + 64);
    let mut found = false;
    for existing in text.split_inclusive('\n') {
        if !found && existing.trim() == anchor {
            let indent: String = existing.chars().take_while(|c| c.is_whitespace()).collect();
            out.push_str(&with(&indent, existing));
            found = true;
        } else {
            out.push_str(existing);
        }
    }
    found.then_some(out)
}

/// Inserts `line` (one or more lines) after the line that is `anchor`
/// (trimmed), each with the anchor's indentation; `None` when no line is.
fn insert_after_line(text: &str, anchor: &str, line: &str) -> Option<String> {
    let mut out = String::with_capacity(text.len() + line.len() + 8);
    let mut found = false;
    for existing in text.split_inclusive('\n') {
        out.push_str(existing);
        if !found && existing.trim() == anchor {
            if !existing.ends_with('\n') {
                out.push('\n');
            }
            let indent: String = existing.chars().take_while(|c| c.is_whitespace()).collect();
            out.push_str(&indented(&indent, line));
            found = true;
        }
    }
    found.then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The one document of a YAML file of `dir`, as JSON.
    fn yaml(dir: &std::path::Path, file: &str) -> serde_json::Value {
        let text = std::fs::read_to_string(dir.join(file)).unwrap();
        let docs: Vec<serde_json::Value> = serde_saphyr::from_multiple(&text).unwrap();
        docs.into_iter().find(|d| !d.is_null()).unwrap()
    }

    /// The opt-in NetworkPolicies (`make deploy NETWORK_POLICY=1`): the
    /// metrics one from `new`, the webhook one from the first `create
    /// webhook` (and only then). Each is in the manager's namespace, selects
    /// its pods by labels the Deployment's pod template carries, and names
    /// a port the manager's container declares.
    #[test]
    fn network_policies_select_the_managers_pods_and_name_its_ports() {
        let tmp = tempfile::tempdir().unwrap();
        let root = crate::NewProject {
            name: "netpol-operator".into(),
            group: "netpol.example.com".into(),
            version: "v1".into(),
            kind: Some("Widget".into()),
            dir: Some(tmp.path().to_owned()),
            opkit: crate::OpkitDependency::Version("0.1".into()),
            sharding: false,
            multicluster: None,
        }
        .create()
        .unwrap();
        let policy_dir = root.join("deploy/network-policy");
        assert!(!policy_dir.join("allow-webhook-traffic.yaml").exists());
        let webhook = |kind: &str| CreateWebhook {
            dir: root.clone(),
            kind: kind.into(),
            conversion_spoke: None,
        };
        webhook("Widget").create().unwrap();
        let deployment = yaml(&root, "deploy/04-deployment.yaml");
        let pod_labels = &deployment["spec"]["template"]["metadata"]["labels"];
        let ports: Vec<&str> = deployment["spec"]["template"]["spec"]["containers"][0]["ports"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|p| p["name"].as_str())
            .collect();
        for (file, port) in [
            ("allow-metrics-traffic.yaml", "metrics"),
            ("allow-webhook-traffic.yaml", "webhook"),
        ] {
            let policy = yaml(&policy_dir, file);
            assert_eq!(policy["kind"], "NetworkPolicy", "{file}");
            assert_eq!(policy["apiVersion"], "networking.k8s.io/v1", "{file}");
            assert_eq!(
                policy["metadata"]["namespace"], deployment["metadata"]["namespace"],
                "{file}"
            );
            let selector = policy["spec"]["podSelector"]["matchLabels"]
                .as_object()
                .unwrap();
            assert!(!selector.is_empty(), "{file} selects every pod");
            for (key, value) in selector {
                assert_eq!(&pod_labels[key], value, "{file}: label {key}");
            }
            assert_eq!(
                policy["spec"]["policyTypes"],
                serde_json::json!(["Ingress"])
            );
            let allowed = &policy["spec"]["ingress"][0]["ports"][0];
            assert_eq!(allowed["port"], port, "{file}");
            assert!(
                ports.contains(&port),
                "{file}: the manager has no port {port}: {ports:?}"
            );
        }
        let metrics = yaml(&policy_dir, "allow-metrics-traffic.yaml");
        assert_eq!(
            metrics["spec"]["ingress"][0]["from"][0]["namespaceSelector"]["matchLabels"],
            serde_json::json!({ "metrics": "enabled" })
        );
        // A second kind's webhook leaves the policy as it is (and fails on
        // no existing file).
        std::fs::write(policy_dir.join("allow-webhook-traffic.yaml"), "# edited\n").unwrap();
        crate::CreateApi::new(&root, "Gadget").create().unwrap();
        webhook("Gadget").create().unwrap();
        assert_eq!(
            std::fs::read_to_string(policy_dir.join("allow-webhook-traffic.yaml")).unwrap(),
            "# edited\n"
        );
    }

    #[test]
    fn inserts_after_the_anchor_with_its_indentation() {
        let text = "a\n    pub mod controllers;\nb\n";
        assert_eq!(
            insert_after_line(text, "pub mod controllers;", "pub mod webhooks;").unwrap(),
            "a\n    pub mod controllers;\n    pub mod webhooks;\nb\n"
        );
        assert!(insert_after_line(text, "missing", "x").is_none());
    }

    #[test]
    fn replaces_a_line_keeping_its_indentation() {
        let text = "vec![\n        api::gate::Gate::crd(),\n]\n";
        let out = replace_line(text, "api::gate::Gate::crd(),", |indent, _| {
            format!("{indent}api::gate_v1::crd(),\n")
        })
        .unwrap();
        assert_eq!(out, "vec![\n        api::gate_v1::crd(),\n]\n");
    }

    #[test]
    fn deployment_edits_keep_the_yaml_shape() {
        let deployment = "    spec:\n      containers:\n        - name: manager\n          args:\n            - --log-format=json\n          ports:\n            - name: metrics\n              containerPort: 8080\n          livenessProbe:\n            httpGet: {}\n";
        let mut text = deployment.to_owned();
        for edit in first_webhook_edits("demo")
            .into_iter()
            .filter(|e| e.file == "deploy/04-deployment.yaml")
        {
            text = apply(&text, &edit).unwrap();
        }
        assert_eq!(
            text,
            "    spec:\n      volumes:\n        # The manager writes its certificate here (--manage-webhook-certificate);\n        # with cert-manager, mount the Certificate's Secret instead:\n        #   secret: { secretName: <the Certificate's secretName> }\n        - name: webhook-certs\n          emptyDir: {}\n      containers:\n        - name: manager\n          args:\n            - --log-format=json\n            - --manage-webhook-certificate\n          ports:\n            - name: webhook\n              containerPort: 9443\n              protocol: TCP\n            - name: metrics\n              containerPort: 8080\n          volumeMounts:\n            - name: webhook-certs\n              mountPath: /tmp/k8s-webhook-server/serving-certs\n          livenessProbe:\n            httpGet: {}\n"
        );
    }
}
