//! The Grafana dashboard `cargo opkit new` generates
//! (`templates/project/grafana/controller-runtime-metrics.json`) queries
//! only metrics a running manager serves: every metric name in every
//! panel's PromQL appears in a scrape of a manager (leader election on)
//! whose controller has reconciled.

use std::collections::BTreeSet;
use std::path::Path;
use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ObjectMeta, PostParams};
use opkit::controller::Controller;
use opkit::manager::{LeaderElection, Manager};
use opkit::reconcile::{Action, Context, Reconcile, ReconcileError, Request};
use opkit_tests::metrics_client::{MetricsClient, Trust};
use opkit_tests::{eventually, plane_with_namespace};
use tokio_util::sync::CancellationToken;

const DASHBOARD: &str = "../templates/project/grafana/controller-runtime-metrics.json";

/// PromQL words that are not metric names (aggregations may be followed
/// by `by (...)` rather than `(`).
const PROMQL_WORDS: [&str; 21] = [
    "by",
    "without",
    "on",
    "ignoring",
    "group_left",
    "group_right",
    "and",
    "or",
    "unless",
    "sum",
    "min",
    "max",
    "avg",
    "count",
    "stddev",
    "stdvar",
    "topk",
    "bottomk",
    "quantile",
    "count_values",
    "group",
];

/// Every PromQL expression of the dashboard's panels.
fn panel_expressions(dashboard: &serde_json::Value) -> Vec<String> {
    let mut exprs = Vec::new();
    let mut stack = vec![dashboard.get("panels").cloned().unwrap_or_default()];
    while let Some(value) = stack.pop() {
        match value {
            serde_json::Value::Array(items) => stack.extend(items),
            serde_json::Value::Object(map) => {
                if let Some(serde_json::Value::String(expr)) = map.get("expr") {
                    exprs.push(expr.clone());
                }
                stack.extend(map.into_iter().map(|(_, v)| v));
            }
            _ => {}
        }
    }
    exprs
}

/// The metric names a PromQL expression selects: identifiers outside label
/// matchers (`{...}`), ranges (`[...]`), strings and grouping clauses
/// (`by (...)`), that are neither functions (followed by `(`) nor keywords.
fn metric_names(expr: &str) -> BTreeSet<String> {
    let chars: Vec<char> = expr.chars().collect();
    let mut names = BTreeSet::new();
    let mut i = 0;
    let mut skip_group = false;
    while i < chars.len() {
        let c = chars[i];
        match c {
            '{' | '[' | '"' => {
                let close = match c {
                    '{' => '}',
                    '[' => ']',
                    _ => '"',
                };
                i += 1;
                while i < chars.len() && chars[i] != close {
                    i += 1;
                }
                i += 1;
            }
            '(' if skip_group => {
                while i < chars.len() && chars[i] != ')' {
                    i += 1;
                }
                skip_group = false;
                i += 1;
            }
            c if c.is_ascii_alphabetic() || c == '_' || c == ':' => {
                let start = i;
                while i < chars.len()
                    && (chars[i].is_ascii_alphanumeric() || chars[i] == '_' || chars[i] == ':')
                {
                    i += 1;
                }
                let word: String = chars[start..i].iter().collect();
                let next = chars[i..].iter().find(|c| !c.is_whitespace());
                if matches!(word.as_str(), "by" | "without" | "on" | "ignoring") {
                    skip_group = true;
                } else if next != Some(&'(') && !PROMQL_WORDS.contains(&word.as_str()) {
                    names.insert(word);
                }
            }
            _ => i += 1,
        }
    }
    names
}

/// The sample names of an exposition text.
fn sample_names(text: &str) -> BTreeSet<String> {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .filter_map(|l| l.split(['{', ' ']).next())
        .map(str::to_owned)
        .collect()
}

struct Noop;

impl Reconcile for Noop {
    type Object = ConfigMap;

    async fn reconcile(
        &self,
        _: Request,
        _: &Context<ConfigMap>,
    ) -> Result<Action, ReconcileError> {
        Ok(Action::done())
    }
}

#[test]
fn metric_names_are_found_in_promql() {
    let names = metric_names(
        r#"histogram_quantile(0.99, sum by (name, le) (rate(workqueue_queue_duration_seconds_bucket{job=~"$job"}[5m]))) / sum(up)"#,
    );
    assert_eq!(
        names.into_iter().collect::<Vec<_>>(),
        ["up", "workqueue_queue_duration_seconds_bucket"]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_metric_the_grafana_dashboard_queries_is_served_by_a_manager() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(DASHBOARD);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let dashboard: serde_json::Value = serde_json::from_str(&text).expect("the dashboard is JSON");
    let exprs = panel_expressions(&dashboard);
    assert!(exprs.len() >= 10, "{exprs:?}");
    let queried: BTreeSet<String> = exprs.iter().flat_map(|e| metric_names(e)).collect();
    for name in ["controller_runtime_reconcile_total", "workqueue_depth"] {
        assert!(queried.contains(name), "{name} not found in {queried:?}");
    }

    let ns = "metrics-dashboard";
    let (plane, admin) = plane_with_namespace(ns).await;
    let mut manager = Manager::builder()
        .config(plane.config().clone())
        .namespace(ns)
        .leader_election(LeaderElection::new("dashboard-lock").namespace(ns))
        .metrics_bind_address("127.0.0.1:0")
        .build()
        .await
        .expect("the manager builds");
    manager
        .add(Controller::new(Noop))
        .expect("add the controller");
    let addr = manager.metrics_address().expect("metrics are served");
    let stop = CancellationToken::new();
    let task = tokio::spawn(manager.run_until(stop.clone().cancelled_owned()));
    let cm = ConfigMap {
        metadata: ObjectMeta {
            name: Some("reconciled".to_owned()),
            ..ObjectMeta::default()
        },
        ..ConfigMap::default()
    };
    Api::<ConfigMap>::namespaced(admin, ns)
        .create(&PostParams::default(), &cm)
        .await
        .expect("create a ConfigMap");

    let scrape = eventually(
        "a successful reconcile to be counted",
        Duration::from_secs(30),
        || async {
            let mut client = MetricsClient::connect(addr, Trust::PlainHttp).await.ok()?;
            let (status, body) = client.get("/metrics", None).await.ok()?;
            (status == 200
                && body.lines().any(|l| {
                    l.starts_with("controller_runtime_reconcile_total{")
                        && l.contains(r#"result="success""#)
                        && !l.ends_with(" 0")
                }))
            .then_some(body)
        },
    )
    .await;
    let served = sample_names(&scrape);
    let missing: Vec<&String> = queried.iter().filter(|n| !served.contains(*n)).collect();
    assert!(
        missing.is_empty(),
        "the dashboard queries metrics the manager does not serve: {missing:?}\nserved: {served:?}"
    );
    stop.cancel();
    task.await
        .expect("the manager task")
        .expect("a clean shutdown");
}
