//! The chart's values: their defaults (what `deploy/` says), Chart.yaml,
//! values.yaml and the schema Helm checks them against.

use serde_json::{Value, json};

use super::manifests::{GENERATED, Manifests, kind};
use super::yaml::{self, Node};

/// The metrics endpoint's values.
#[derive(Debug, Clone, Default)]
pub(super) struct Metrics {
    pub(super) enabled: bool,
    pub(super) port: i64,
    /// Only when the manager has `--metrics-secure`.
    pub(super) secure: Option<bool>,
}

/// The chart's values, with the defaults `deploy/` gives them.
#[derive(Debug)]
pub(super) struct Values {
    name: String,
    version: String,
    pub(super) replicas: i64,
    pub(super) pull_policy: String,
    pub(super) image_pull_secrets: Node,
    pub(super) resources: Node,
    /// Only when the manager has `--leader-elect`.
    pub(super) leader_election: Option<bool>,
    /// The manager has `--sharding`: its replicas share the objects.
    pub(super) sharding: bool,
    pub(super) metrics: Option<Metrics>,
    /// Whether the project has webhooks.
    pub(super) webhook: bool,
    pub(super) webhook_port: Option<i64>,
    crds: bool,
}

impl Values {
    pub(super) fn new(manifests: &Manifests) -> Self {
        let cargo = std::fs::read_to_string(manifests.root.join("Cargo.toml")).unwrap_or_default();
        let version = crate::cargo_toml::table_value(&cargo, "package", "version")
            .filter(|v| {
                !v.is_empty()
                    && v.chars()
                        .all(|c| c.is_ascii_alphanumeric() || ".-+".contains(c))
            })
            .unwrap_or_else(|| "0.1.0".to_owned());
        Self {
            name: manifests.name.clone(),
            version,
            replicas: 1,
            pull_policy: String::new(),
            image_pull_secrets: Node::Seq(Vec::new()),
            resources: Node::Map(Vec::new()),
            leader_election: None,
            sharding: false,
            metrics: None,
            webhook: false,
            webhook_port: None,
            crds: manifests
                .files
                .iter()
                .flat_map(|(_, docs)| docs)
                .any(|d| kind(d) == "CustomResourceDefinition"),
        }
    }

    pub(super) fn chart_yaml(&self) -> String {
        format!(
            "{header} chart` from deploy/; do not edit.\napiVersion: v2\nname: {name}\ndescription: {name}, a Kubernetes operator built with opkit.\ntype: application\nversion: {version}\nappVersion: \"{version}\"\n",
            header = GENERATED,
            name = self.name,
            version = self.version
        )
    }

    pub(super) fn values_yaml(&self) -> String {
        let mut out = format!(
            "{} chart` from deploy/; do not edit (change deploy/, run `make chart`).\n\
             # Every value is checked against values.schema.json.\n\n",
            GENERATED
        );
        let mut section = |comment: &str, key: &str, value: Node| {
            out.push_str(comment);
            out.push_str(&yaml::emit(&Node::Map(vec![(key.to_owned(), value)])));
            out.push('\n');
        };
        section(
            "# The manager's image: repository[:tag][@digest]. A digest (sha256:...) pins\n\
             # the exact image. pullPolicy: Always, IfNotPresent, Never, or \"\" for the\n\
             # cluster's default (Always for :latest).\n",
            "image",
            Node::Map(vec![
                ("repository".into(), Node::Str(self.name.clone())),
                ("tag".into(), Node::Str("latest".into())),
                ("digest".into(), Node::Str(String::new())),
                ("pullPolicy".into(), Node::Str(self.pull_policy.clone())),
            ]),
        );
        section(
            "# Secrets to pull the image with: [{name: my-registry-secret}].\n",
            "imagePullSecrets",
            self.image_pull_secrets.clone(),
        );
        section(
            if self.sharding {
                "# Manager pods; they share the objects (--sharding: one Lease each, a hash ring).\n"
            } else {
                "# Manager pods; one leads at a time (leader election), the others wait.\n"
            },
            "replicas",
            Node::Int(self.replicas),
        );
        section(
            "# The manager container's resources.\n",
            "resources",
            self.resources.clone(),
        );
        if let Some(enabled) = self.leader_election {
            section(
                "# One active manager among the replicas (a Lease in the release's namespace).\n",
                "leaderElection",
                Node::Map(vec![("enabled".into(), Node::Bool(enabled))]),
            );
        }
        if let Some(metrics) = &self.metrics {
            let mut entries = vec![
                ("enabled".into(), Node::Bool(metrics.enabled)),
                ("port".into(), Node::Int(metrics.port)),
            ];
            if let Some(secure) = metrics.secure {
                entries.push(("secure".into(), Node::Bool(secure)));
            }
            section(
                "# /metrics (Prometheus format), served on port and by the metrics Service.\n",
                "metrics",
                Node::Map(entries),
            );
        }
        if self.webhook {
            section(
                "# The admission webhooks (their configurations, Service and certificate).\n",
                "webhook",
                Node::Map(vec![("enabled".into(), Node::Bool(true))]),
            );
        }
        if self.crds {
            section(
                "# The CRDs: installed and upgraded with the chart (enable); kept by\n\
                 # `helm uninstall` (keep: helm.sh/resource-policy), so the custom resources\n\
                 # survive. Delete them with kubectl once you mean it.\n",
                "crd",
                Node::Map(vec![
                    ("enable".into(), Node::Bool(true)),
                    ("keep".into(), Node::Bool(true)),
                ]),
            );
        }
        let trimmed = out.trim_end().len();
        out.truncate(trimmed);
        out.push('\n');
        out
    }

    pub(super) fn schema(&self) -> String {
        let boolean = |what: &str| json!({"type": "boolean", "description": what});
        let object = |properties: Value, required: Vec<&str>| {
            json!({
                "type": "object",
                "additionalProperties": false,
                "required": required,
                "properties": properties,
            })
        };
        let mut properties = serde_json::Map::new();
        properties.insert(
            "image".into(),
            object(
                json!({
                    "repository": {"type": "string", "minLength": 1, "pattern": "^[a-z0-9._/:-]+$",
                        "description": "[host[:port]/]path of the manager's image"},
                    "tag": {"type": "string", "pattern": "^([A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?$"},
                    "digest": {"type": "string", "pattern": "^(sha256:[a-f0-9]{64})?$",
                        "description": "sha256:<64 hex digits>; pins the image"},
                    "pullPolicy": {"type": "string", "enum": ["", "Always", "IfNotPresent", "Never"]},
                }),
                vec!["repository"],
            ),
        );
        properties.insert(
            "imagePullSecrets".into(),
            json!({"type": "array", "items": object(json!({"name": {"type": "string", "minLength": 1}}), vec!["name"])}),
        );
        properties.insert(
            "replicas".into(),
            json!({"type": "integer", "minimum": 0, "description": "manager pods"}),
        );
        properties.insert(
            "resources".into(),
            json!({"type": "object", "additionalProperties": false, "properties": {
                "requests": {"type": "object", "additionalProperties": {"type": ["string", "integer", "number"]}},
                "limits": {"type": "object", "additionalProperties": {"type": ["string", "integer", "number"]}},
                "claims": {"type": "array"},
            }}),
        );
        if self.leader_election.is_some() {
            properties.insert(
                "leaderElection".into(),
                object(
                    json!({"enabled": boolean("one active manager among the replicas")}),
                    vec![],
                ),
            );
        }
        if let Some(metrics) = &self.metrics {
            let mut m = json!({
                "enabled": boolean("serve /metrics and create the metrics Service"),
                "port": {"type": "integer", "minimum": 1, "maximum": 65535},
            });
            if metrics.secure.is_some() {
                m["secure"] = boolean("serve /metrics over HTTPS, to authorized clients");
            }
            properties.insert("metrics".into(), object(m, vec![]));
        }
        if self.webhook {
            properties.insert(
                "webhook".into(),
                object(
                    json!({"enabled": boolean("the admission webhooks")}),
                    vec![],
                ),
            );
        }
        if self.crds {
            properties.insert(
                "crd".into(),
                object(
                    json!({"enable": boolean("install and upgrade the CRDs with the chart"),
                           "keep": boolean("leave the CRDs on helm uninstall")}),
                    vec![],
                ),
            );
        }
        let schema = json!({
            "$schema": "https://json-schema.org/draft-07/schema#",
            "title": format!("Values of the {} chart", self.name),
            "type": "object",
            // Helm adds `global` to every chart's values.
            "properties": Value::Object(properties),
            "additionalProperties": false,
            "patternProperties": {"^global$": {"type": "object"}},
        });
        let mut text = serde_json::to_string_pretty(&schema).unwrap_or_default();
        text.push('\n');
        text
    }

    pub(super) fn notes(&self) -> String {
        format!(
            "{name} is installed in namespace {{{{ .Release.Namespace }}}}.\n\
             The manager: kubectl -n {{{{ .Release.Namespace }}}} get deployment -l app.kubernetes.io/name={name}\n\
             Its log:     kubectl -n {{{{ .Release.Namespace }}}} logs -l app.kubernetes.io/name={name},app.kubernetes.io/component=manager\n",
            name = self.name
        )
    }
}
