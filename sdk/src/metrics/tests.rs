//! The exported text: controller-runtime's names, labels and buckets (the
//! reconcile series, fed through the manager's observers, are tested in
//! `manager/observers_tests.rs`).

use std::time::Duration;

use super::Metrics;
use super::names::*;
use super::testing::value;
use crate::workqueue::WorkQueue;

#[test]
fn a_new_registry_exports_only_the_process_series() {
    let text = Metrics::new().encode().unwrap();
    let series: Vec<&str> = text
        .lines()
        .filter(|l| !l.starts_with('#'))
        // process-wide (every informer of the process reports into it), so
        // other tests of this binary may have set it
        .filter(|l| !l.starts_with("opkit_cache_undecodable_objects"))
        .filter_map(|l| l.split(' ').next())
        .collect();
    let expected: &[&str] = if cfg!(target_os = "linux") {
        &[
            "process_cpu_seconds_total",
            "process_resident_memory_bytes",
            "process_virtual_memory_bytes",
            "process_open_fds",
            "process_max_fds",
            "process_start_time_seconds",
        ]
    } else {
        &[]
    };
    assert_eq!(series, expected, "{text}");
    assert!(text.ends_with("# EOF\n"));
    // the encoder ends each HELP with a period of its own
    assert!(!text.contains(".."), "{text}");
}

#[tokio::test(start_paused = true)]
async fn a_queue_reports_controller_runtimes_workqueue_metrics() {
    let metrics = Metrics::new();
    let queue: WorkQueue<&'static str> = WorkQueue::builder()
        .name("gadget")
        .metrics(&metrics)
        .build();
    let series = |name: &str| format!(r#"{name}{{name="gadget",controller="gadget"}}"#);

    queue.add("a");
    queue.add("b");
    queue.add("a");
    assert_eq!(value(&metrics, &series(WORKQUEUE_DEPTH)), 2.0);
    assert_eq!(value(&metrics, &series(WORKQUEUE_ADDS_TOTAL)), 2.0);

    tokio::time::advance(Duration::from_millis(20)).await;
    let item = queue.get().await.unwrap();
    assert_eq!(value(&metrics, &series(WORKQUEUE_DEPTH)), 1.0);
    tokio::time::advance(Duration::from_secs(3)).await;
    queue.update_unfinished_work_metrics();
    assert_eq!(
        value(
            &metrics,
            &series(WORKQUEUE_LONGEST_RUNNING_PROCESSOR_SECONDS)
        ),
        3.0
    );
    assert_eq!(
        value(&metrics, &series(WORKQUEUE_UNFINISHED_WORK_SECONDS)),
        3.0
    );
    queue.add_rate_limited(item);
    queue.done(&item);
    assert_eq!(value(&metrics, &series(WORKQUEUE_RETRIES_TOTAL)), 1.0);

    let count = |name: &str| {
        value(
            &metrics,
            &format!(r#"{name}_count{{name="gadget",controller="gadget"}}"#),
        )
    };
    assert_eq!(count(WORKQUEUE_QUEUE_DURATION_SECONDS), 1.0);
    assert_eq!(count(WORKQUEUE_WORK_DURATION_SECONDS), 1.0);
    let work_sum = value(
        &metrics,
        &format!(r#"{WORKQUEUE_WORK_DURATION_SECONDS}_sum{{name="gadget",controller="gadget"}}"#),
    );
    assert_eq!(work_sum, 3.0);
    // controller-runtime's buckets: 1e-8 s to 1000 s.
    let text = metrics.encode().unwrap();
    assert!(
        text.contains(r#"workqueue_work_duration_seconds_bucket{le="1e-8","#),
        "{text}"
    );
    assert!(
        text.contains(r#"workqueue_work_duration_seconds_bucket{le="1000.0","#),
        "{text}"
    );
    queue.shutdown();
}

#[test]
fn leader_status_is_one_only_while_leading() {
    let metrics = Metrics::new();
    let series = format!(r#"{LEADER_ELECTION_MASTER_STATUS}{{name="operator-lock"}}"#);
    metrics.set_leader("operator-lock", false);
    assert_eq!(value(&metrics, &series), 0.0);
    metrics.set_leader("operator-lock", true);
    assert_eq!(value(&metrics, &series), 1.0);
    metrics.set_leader("operator-lock", false);
    assert_eq!(value(&metrics, &series), 0.0);
}

/// A member cluster's series carry its `cluster` label beside the
/// single-cluster ones (unchanged), and go when the cluster is forgotten:
/// the items its dropped queue left waiting count nowhere.
#[cfg(feature = "multicluster")]
#[tokio::test]
async fn member_series_carry_the_cluster_and_go_with_it() {
    use crate::workqueue::metrics::MetricsProvider;

    let metrics = Metrics::new();
    let _single = metrics.controller("gadget", 1, None);
    let east = metrics.controller("gadget", 2, Some("east"));
    east.success.inc();
    let queue = |cluster| {
        let provider: std::sync::Arc<dyn MetricsProvider> =
            std::sync::Arc::new(metrics.workqueue(cluster));
        WorkQueue::<&'static str>::builder()
            .name("gadget")
            .metrics_provider(provider)
            .unfinished_work_update_period(Duration::ZERO)
            .build()
    };
    let (west_queue, east_queue) = (queue(Some("west")), queue(Some("east")));
    east_queue.add("a");
    east_queue.add("b");
    west_queue.add("c");
    let text = metrics.encode().unwrap();
    for series in [
        r#"controller_runtime_reconcile_total{controller="gadget",result="success"} 0"#,
        r#"controller_runtime_reconcile_total{controller="gadget",result="success",cluster="east"} 1"#,
        r#"controller_runtime_max_concurrent_reconciles{controller="gadget",cluster="east"} 2"#,
        r#"workqueue_depth{name="gadget",controller="gadget",cluster="east"} 2"#,
        r#"workqueue_depth{name="gadget",controller="gadget",cluster="west"} 1"#,
    ] {
        assert!(text.contains(series), "{series} in\n{text}");
    }

    drop(east_queue); // with two items waiting
    metrics.forget_cluster("gadget", "east");
    let text = metrics.encode().unwrap();
    assert!(!text.contains(r#"cluster="east""#), "{text}");
    assert!(
        text.contains(r#"workqueue_depth{name="gadget",controller="gadget",cluster="west"} 1"#),
        "{text}"
    );
    assert!(
        text.contains(
            r#"controller_runtime_reconcile_total{controller="gadget",result="success"} 0"#
        ),
        "{text}"
    );
}
