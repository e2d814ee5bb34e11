//! The reconcile series a controller's observer moves: controller-runtime's
//! names, labels and buckets, and how each reconcile result counts.

use std::time::Duration;

use crate::controller::{ControllerObservers, ReconcileResult};
use crate::metrics::Metrics;
use crate::metrics::names::*;
use crate::metrics::testing::{samples, value};

#[test]
fn a_controller_shows_at_zero_before_its_first_reconcile() {
    let metrics = Metrics::new();
    let _observer = metrics.reconcile_observer("gadget", 4, None);
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
    let observer = metrics.reconcile_observer("gadget", 1, None);
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
    let observer = metrics.reconcile_observer("gadget", 2, None);
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
    let _observer = metrics.reconcile_observer("gadget", 1, None);
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

#[test]
fn counters_keep_controller_runtimes_sample_names() {
    let metrics = Metrics::new();
    let _observer = metrics.reconcile_observer("gadget", 1, None);
    let text = metrics.encode().unwrap();
    assert!(text.contains("# TYPE controller_runtime_reconcile counter"));
    assert!(
        text.contains(
            r#"controller_runtime_reconcile_total{controller="gadget",result="success"} 0"#
        )
    );
    assert!(!text.contains("_total_total"), "{text}");
}
