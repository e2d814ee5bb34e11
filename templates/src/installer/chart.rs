//! The chart's templates: `deploy/`'s documents with the manager's
//! Deployment parameterised, in the release's namespace.

use super::error::InstallerError;
use super::manifests::{GENERATED, Manifests, containers_running, kind};
use super::values::{Metrics, Values};
use super::yaml::{self, Node};

const IMAGE: &str = "\"{{ .Values.image.repository }}{{ with .Values.image.tag }}:{{ . }}{{ end }}{{ with .Values.image.digest }}@{{ . }}{{ end }}\"";
const RELEASE_NAMESPACE: &str = "{{ .Release.Namespace }}";
const WEBHOOK_KINDS: [&str; 2] = [
    "ValidatingWebhookConfiguration",
    "MutatingWebhookConfiguration",
];

/// The chart's files (path under the chart, text).
pub(super) fn render(mut manifests: Manifests) -> Result<Vec<(String, String)>, InstallerError> {
    let placeholder = manifests.placeholder();
    let namespace = manifests.namespace();
    let mut values = Values::new(&manifests);
    let mut found = false;
    for (_, docs) in &mut manifests.files {
        for doc in docs.iter_mut() {
            if kind(doc) == "Deployment" && !containers_running(doc, &placeholder).is_empty() {
                parameterise_deployment(doc, &placeholder, &mut values);
                found = true;
            }
        }
    }
    if !found {
        return Err(manifests.no_manager());
    }
    values.webhook = manifests
        .files
        .iter()
        .flat_map(|(_, docs)| docs)
        .any(|d| WEBHOOK_KINDS.contains(&kind(d)));

    let mut files = Vec::new();
    for (file, docs) in &manifests.files {
        let mut text = String::new();
        for doc in docs {
            if kind(doc) == "Namespace"
                && doc.at(&["metadata", "name"]).and_then(Node::as_str) == namespace.as_deref()
            {
                // Helm installs into the release's namespace
                // (`--namespace ... --create-namespace`). Another
                // namespace the manifests make (a hub's fleet namespace,
                // where its Role is) stays.
                continue;
            }
            let mut doc = doc.clone();
            text.push_str(&template(&mut doc, namespace.as_deref(), &values));
        }
        if values.webhook
            && namespace.is_some()
            && docs.iter().any(|d| WEBHOOK_KINDS.contains(&kind(d)))
        {
            // The manager issues its serving certificate for
            // <service>.<namespace>.svc, the namespace its code names.
            let namespace = namespace.as_deref().unwrap_or_default();
            text.insert_str(
                0,
                &format!(
                    "{{{{- if and .Values.webhook.enabled (ne .Release.Namespace \"{namespace}\") }}}}\n\
                     {{{{- fail \"the webhooks need the release in namespace {namespace} (the manager's certificate names it): helm install --namespace {namespace}, or --set webhook.enabled=false\" }}}}\n\
                     {{{{- end }}}}\n"
                ),
            );
        }
        if !text.is_empty() {
            files.push((
                format!("templates/{file}"),
                format!("{GENERATED} chart` from deploy/{file}; do not edit.\n{text}"),
            ));
        }
    }
    files.push(("Chart.yaml".to_owned(), values.chart_yaml()));
    files.push(("values.yaml".to_owned(), values.values_yaml()));
    files.push(("values.schema.json".to_owned(), values.schema()));
    files.push(("templates/NOTES.txt".to_owned(), values.notes()));
    files.sort();
    Ok(files)
}

/// One document as a template (`---` and the document, in a condition when
/// it belongs to a feature a value turns off).
fn template(doc: &mut Node, namespace: Option<&str>, values: &Values) -> String {
    if let Some(namespace) = namespace {
        in_release_namespace(doc, namespace);
    }
    escape_actions(doc);
    add_release_labels(doc);
    let condition = match kind(doc) {
        "CustomResourceDefinition" => {
            keep_on_uninstall(doc);
            Some("if .Values.crd.enable")
        }
        k if WEBHOOK_KINDS.contains(&k) => Some("if .Values.webhook.enabled"),
        "Service" if serves(doc, "webhook", values.webhook_port) && values.webhook => {
            Some("if .Values.webhook.enabled")
        }
        "Service" => match &values.metrics {
            Some(metrics) if serves(doc, "metrics", Some(metrics.port)) => {
                metrics_service_port(doc, metrics.port);
                Some("if .Values.metrics.enabled")
            }
            _ => None,
        },
        _ => None,
    };
    let body = format!("---\n{}", yaml::emit(doc));
    match condition {
        Some(condition) => format!("{{{{- {condition} }}}}\n{body}{{{{- end }}}}\n"),
        None => body,
    }
}

/// Every `namespace: <ns>` (and `<svc>.<ns>.svc` name) becomes the release's.
fn in_release_namespace(doc: &mut Node, namespace: &str) {
    let dns = format!(".{namespace}.svc");
    doc.visit_strings(None, &mut |key, node| {
        let Some(s) = node.as_str() else { return };
        if key == Some("namespace") && s == namespace {
            *node = Node::Action(RELEASE_NAMESPACE.to_owned());
        } else if s.contains(&dns) {
            let quoted = serde_json::Value::String(s.to_owned()).to_string();
            *node = Node::Action(quoted.replace(&dns, &format!(".{RELEASE_NAMESPACE}.svc")));
        }
    });
}

/// A string holding `{{` is printed by Helm as it is, not run.
fn escape_actions(doc: &mut Node) {
    doc.visit_strings(None, &mut |_, node| {
        if let Some(s) = node.as_str().filter(|s| s.contains("{{")) {
            let quoted = serde_json::Value::String(s.to_owned()).to_string();
            *node = Node::Action(format!("{{{{ {quoted} | toJson }}}}"));
        }
    });
}

/// `app.kubernetes.io/managed-by` and `instance` on the object (not on
/// selectors: those cannot change on upgrade).
fn add_release_labels(doc: &mut Node) {
    let Some(metadata) = doc.get_mut("metadata") else {
        return;
    };
    if metadata.get("labels").is_none() {
        metadata.insert_before("annotations", "labels", Node::Map(Vec::new()));
    }
    if let Some(labels) = metadata.get_mut("labels") {
        labels.set(
            "app.kubernetes.io/managed-by",
            Node::Action("{{ .Release.Service }}".to_owned()),
        );
        labels.set(
            "app.kubernetes.io/instance",
            Node::Action("{{ .Release.Name | quote }}".to_owned()),
        );
    }
}

/// `helm.sh/resource-policy: keep` on a CRD while `crd.keep`: `helm
/// uninstall` leaves it (and every custom resource) in place.
fn keep_on_uninstall(doc: &mut Node) {
    let Some(metadata) = doc.get_mut("metadata") else {
        return;
    };
    let keep = (
        "helm.sh/resource-policy".to_owned(),
        Node::Str("keep".to_owned()),
    );
    match metadata.get_mut("annotations") {
        Some(Node::Map(annotations)) => annotations.push((
            "helm.sh/resource-policy".to_owned(),
            Node::Wrap(
                "if .Values.crd.keep".to_owned(),
                Box::new(Node::Str("keep".to_owned())),
            ),
        )),
        _ => metadata.set(
            "annotations",
            Node::Wrap(
                "if .Values.crd.keep".to_owned(),
                Box::new(Node::Map(vec![keep])),
            ),
        ),
    }
}

/// Whether a Service sends to the container port `name` (or its number).
fn serves(service: &Node, name: &str, number: Option<i64>) -> bool {
    let Some(Node::Seq(ports)) = service.at(&["spec", "ports"]) else {
        return false;
    };
    ports.iter().any(|p| match p.get("targetPort") {
        Some(Node::Str(s)) => s == name,
        Some(Node::Int(n)) => Some(*n) == number,
        _ => false,
    })
}

/// The metrics Service's port follows `metrics.port` when it was the
/// container's port.
fn metrics_service_port(service: &mut Node, port: i64) {
    if let Some(Node::Seq(ports)) = service.at_mut(&["spec", "ports"]) {
        for p in ports {
            if p.get("port") == Some(&Node::Int(port)) {
                p.set(
                    "port",
                    Node::Action("{{ .Values.metrics.port }}".to_owned()),
                );
            }
            if p.get("targetPort") == Some(&Node::Int(port)) {
                p.set(
                    "targetPort",
                    Node::Action("{{ .Values.metrics.port }}".to_owned()),
                );
            }
        }
    }
}

/// The manager's Deployment: replicas, image, pull policy and secrets,
/// resources, and the flags and ports the values turn on and off.
fn parameterise_deployment(doc: &mut Node, placeholder: &str, values: &mut Values) {
    if let Some(spec) = doc.get_mut("spec") {
        if let Some(Node::Int(n)) = spec.get("replicas") {
            values.replicas = *n;
        }
        spec.set(
            "replicas",
            Node::Action("{{ .Values.replicas }}".to_owned()),
        );
    }
    for container in containers_running(doc, placeholder) {
        parameterise_container(container, values);
    }
    if let Some(pod) = doc.at_mut(&["spec", "template", "spec"]) {
        if let Some(secrets) = pod.get("imagePullSecrets") {
            values.image_pull_secrets = secrets.clone();
        }
        let secrets = Node::Wrap(
            "with .Values.imagePullSecrets".to_owned(),
            Box::new(Node::Block("toYaml .".to_owned())),
        );
        if pod.get("imagePullSecrets").is_some() {
            pod.set("imagePullSecrets", secrets);
        } else {
            pod.insert_before("containers", "imagePullSecrets", secrets);
        }
    }
}

fn parameterise_container(container: &mut Node, values: &mut Values) {
    container.set("image", Node::Action(IMAGE.to_owned()));
    if let Some(policy) = container.get("imagePullPolicy").and_then(Node::as_str) {
        values.pull_policy = policy.to_owned();
    }
    let policy = Node::Wrap(
        "with .Values.image.pullPolicy".to_owned(),
        Box::new(Node::Action("{{ . }}".to_owned())),
    );
    if container.get("imagePullPolicy").is_some() {
        container.set("imagePullPolicy", policy);
    } else {
        // After `image` (never the first key, which a sequence item's
        // condition cannot wrap).
        let next = match container {
            Node::Map(entries) => entries
                .iter()
                .position(|(k, _)| k == "image")
                .and_then(|i| entries.get(i + 1))
                .map(|(k, _)| k.clone()),
            _ => None,
        };
        container.insert_before(next.as_deref().unwrap_or(""), "imagePullPolicy", policy);
    }
    if let Some(resources) = container.get("resources") {
        values.resources = resources.clone();
    }
    container.set(
        "resources",
        Node::Block("toYaml .Values.resources".to_owned()),
    );
    // Ports first: the metrics flag's default port is the container's.
    let mut metrics_port = None;
    if let Some(Node::Seq(ports)) = container.get_mut("ports") {
        for port in ports.iter_mut() {
            let name = port.get("name").and_then(Node::as_str).unwrap_or_default();
            let number = match port.get("containerPort") {
                Some(Node::Int(n)) => Some(*n),
                _ => None,
            };
            match name {
                "metrics" => {
                    metrics_port = number;
                    port.set(
                        "containerPort",
                        Node::Action("{{ .Values.metrics.port }}".to_owned()),
                    );
                    *port = Node::Wrap(
                        "if .Values.metrics.enabled".to_owned(),
                        Box::new(port.clone()),
                    );
                }
                "webhook" => {
                    values.webhook_port = number;
                    *port = Node::Wrap(
                        "if .Values.webhook.enabled".to_owned(),
                        Box::new(port.clone()),
                    );
                }
                _ => {}
            }
        }
    }
    let mut disables_webhooks = false;
    if let Some(Node::Seq(args)) = container.get_mut("args") {
        for arg in args.iter_mut() {
            let Some(text) = arg.as_str().map(str::to_owned) else {
                continue;
            };
            let (flag, value) = match text.split_once('=') {
                Some((flag, value)) => (flag, Some(value)),
                None => (text.as_str(), None),
            };
            match flag {
                "--leader-elect" => {
                    values.leader_election = Some(value.is_none_or(|v| v == "true"));
                    *arg = Node::Action(
                        "{{ if .Values.leaderElection.enabled }}--leader-elect{{ else }}--leader-elect=false{{ end }}"
                            .to_owned(),
                    );
                }
                "--sharding" => values.sharding = true,
                "--metrics-bind-address" => {
                    let address = value.unwrap_or_default();
                    let (host, port) = address.rsplit_once(':').unwrap_or(("", address));
                    let port = port.parse::<i64>().ok().filter(|p| *p > 0);
                    let metrics = values.metrics.get_or_insert(Metrics::default());
                    metrics.enabled = port.is_some();
                    metrics.port = port.or(metrics_port).unwrap_or(8080);
                    let host = serde_json::Value::String(host.to_owned()).to_string();
                    let host = host.trim_matches('"');
                    *arg = Node::Action(format!(
                        "\"--metrics-bind-address={{{{ if .Values.metrics.enabled }}}}{host}:{{{{ .Values.metrics.port }}}}{{{{ else }}}}0{{{{ end }}}}\""
                    ));
                }
                "--metrics-secure" => {
                    let metrics = values.metrics.get_or_insert(Metrics::default());
                    metrics.secure = Some(value.is_none_or(|v| v == "true"));
                    *arg = Node::Action(
                        "{{ if .Values.metrics.secure }}--metrics-secure{{ else }}--metrics-secure=false{{ end }}"
                            .to_owned(),
                    );
                }
                "--manage-webhook-certificate" => {
                    disables_webhooks = true;
                    *arg = Node::Wrap(
                        "if .Values.webhook.enabled".to_owned(),
                        Box::new(arg.clone()),
                    );
                }
                _ => {}
            }
        }
    }
    if values.metrics.is_none() && metrics_port.is_some() {
        values.metrics = Some(Metrics {
            enabled: true,
            port: metrics_port.unwrap_or(8080),
            secure: None,
        });
    }
    if disables_webhooks || values.webhook_port.is_some() {
        // Without webhooks the manager must not serve them either.
        let off = Node::Wrap(
            "if not .Values.webhook.enabled".to_owned(),
            Box::new(Node::Map(vec![
                ("name".to_owned(), Node::Str("ENABLE_WEBHOOKS".to_owned())),
                ("value".to_owned(), Node::Str("false".to_owned())),
            ])),
        );
        match container.get_mut("env") {
            Some(Node::Seq(env)) => env.push(off),
            _ => container.insert_before("ports", "env", Node::Seq(vec![off])),
        }
    }
}
