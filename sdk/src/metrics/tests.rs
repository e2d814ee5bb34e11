//! The exported text: controller-runtime's names, labels and buckets, and
//! how each reconcile result moves them.

use std::collections::BTreeMap;
use std::time::Duration;

use super::Metrics;
use super::names::*;
use crate::controller::ReconcileResult;
use crate::workqueue::WorkQueue;

/// Every sample of the OpenMetrics text: `name{labels}` → value.
fn samples(text: &str) -> BTreeMap<String, f64> {
    text.lines()
        .filter(|line| !line.starts_with('#') && !line.is_empty())
        .map(|line| {
            let (series, value) = line.rsplit_once(' ').unwrap();
            (series.to_owned(), value.parse().unwrap())
        })
        .collect()
}

fn value(metrics: &Metrics, series: &str) -> f64 {
    let all = samples(&metrics.encode().unwrap());
    *all.get(series)
        .unwrap_or_else(|| panic!("no {series} in:\n{all:#?}"))
}

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

#[test]
fn a_controller_shows_at_zero_before_its_first_reconcile() {
    let metrics = Metrics::new();
    let _observer = metrics.controller_observer("gadget", 4);
    let all = samples(&metrics.encode().unwrap());
    for result in ["success", "error", "requeue", "requeue_after"] {
        assert_eq!(
            all[&format!(r#"{RECONCILE_TOTAL}{{controller="gadget",result="{result}"}}"#)],
            0.0
        );
    }
    for name in [
        RECONCILE_ERRORS_TOTAL,
        TERMINAL_RECONCILE_ERRORS_TOTAL,
        RECONCILE_PANICS_TOTAL,
        RECONCILE_TIMEOUTS_TOTAL,
        ACTIVE_WORKERS,
    ] {
        assert_eq!(
            all[&format!(r#"{name}{{controller="gadget"}}"#)],
            0.0,
            "{name}"
        );
    }
    assert_eq!(
        all[&format!(r#"{MAX_CONCURRENT_RECONCILES}{{controller="gadget"}}"#)],
        4.0
    );
    assert_eq!(
        all[&format!(r#"{RECONCILE_TIME_SECONDS}_count{{controller="gadget"}}"#)],
        0.0
    );
}

#[test]
fn each_result_moves_its_counters() {
    let metrics = Metrics::new();
    let observer = metrics.controller_observer("gadget", 1);
    let results = [
        (ReconcileResult::Success, 2),
        (ReconcileResult::Requeue, 1),
        (ReconcileResult::RequeueAfter, 3),
        (ReconcileResult::Error, 1),
        (ReconcileResult::TerminalError, 2),
        (ReconcileResult::Panic, 1),
        (ReconcileResult::Timeout, 1),
    ];
    for (result, times) in results {
        for _ in 0..times {
            observer.started();
            observer.finished(result, Duration::from_millis(30));
            observer.stopped();
        }
    }
    let series = |name: &str| format!(r#"{name}{{controller="gadget"}}"#);
    let total = |result: &str| {
        value(
            &metrics,
            &format!(r#"{RECONCILE_TOTAL}{{controller="gadget",result="{result}"}}"#),
        )
    };
    assert_eq!(total("success"), 2.0);
    assert_eq!(total("requeue"), 1.0);
    assert_eq!(total("requeue_after"), 3.0);
    // Retryable, terminal, panic and timeout are all errors.
    assert_eq!(total("error"), 5.0);
    assert_eq!(value(&metrics, &series(RECONCILE_ERRORS_TOTAL)), 5.0);
    assert_eq!(
        value(&metrics, &series(TERMINAL_RECONCILE_ERRORS_TOTAL)),
        2.0
    );
    assert_eq!(value(&metrics, &series(RECONCILE_PANICS_TOTAL)), 1.0);
    assert_eq!(value(&metrics, &series(RECONCILE_TIMEOUTS_TOTAL)), 1.0);
    assert_eq!(value(&metrics, &series(ACTIVE_WORKERS)), 0.0);

    let count = format!(r#"{RECONCILE_TIME_SECONDS}_count{{controller="gadget"}}"#);
    assert_eq!(value(&metrics, &count), 11.0);
    // 30 ms lands in the 0.05 bucket, not in 0.025.
    let bucket = |le: &str| {
        value(
            &metrics,
            &format!(r#"{RECONCILE_TIME_SECONDS}_bucket{{le="{le}",controller="gadget"}}"#),
        )
    };
    assert_eq!(bucket("0.025"), 0.0);
    assert_eq!(bucket("0.05"), 11.0);
    assert_eq!(bucket("+Inf"), 11.0);
}

#[test]
fn active_workers_follow_running_reconciles() {
    let metrics = Metrics::new();
    let observer = metrics.controller_observer("gadget", 2);
    let active = format!(r#"{ACTIVE_WORKERS}{{controller="gadget"}}"#);
    observer.started();
    observer.started();
    assert_eq!(value(&metrics, &active), 2.0);
    observer.stopped();
    assert_eq!(value(&metrics, &active), 1.0);
}

#[test]
fn reconcile_time_has_controller_runtimes_buckets() {
    let metrics = Metrics::new();
    let _observer = metrics.controller_observer("gadget", 1);
    let text = metrics.encode().unwrap();
    let bounds: Vec<f64> = samples(&text)
        .keys()
        .filter(|k| k.starts_with(&format!("{RECONCILE_TIME_SECONDS}_bucket")))
        .filter_map(|k| {
            let le = k.split("le=\"").nth(1)?.split('"').next()?;
            le.parse().ok()
        })
        .collect();
    let mut sorted = bounds.clone();
    sorted.sort_by(f64::total_cmp);
    let mut expected = RECONCILE_TIME_BUCKETS.to_vec();
    expected.push(f64::INFINITY);
    assert_eq!(sorted, expected);
    assert!(text.contains(&format!("# TYPE {RECONCILE_TIME_SECONDS} histogram")));
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

#[test]
fn counters_keep_controller_runtimes_sample_names() {
    let metrics = Metrics::new();
    let _observer = metrics.controller_observer("gadget", 1);
    let text = metrics.encode().unwrap();
    assert!(text.contains("# TYPE controller_runtime_reconcile counter"));
    assert!(
        text.contains(
            r#"controller_runtime_reconcile_total{controller="gadget",result="success"} 0"#
        )
    );
    assert!(!text.contains("_total_total"), "{text}");
}
