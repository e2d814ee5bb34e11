//! The Backup controller against a real kube-apiserver and etcd. envtest
//! runs no job controller and no kubelet: nothing runs a Job, so the test
//! writes each Job's status itself (as kubebuilder's CronJob tutorial does),
//! and moves the reconciler's clock instead of waiting an hour.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use opkit::ControllerWiring;
use opkit::conditions;
use opkit::manager::Manager;
use opkit_envtest::eventually;
use serde_json::json;

use backup_operator::api::backup::{Backup, BackupSpec};
use backup_operator::controllers::backup::{BackupReconciler, Clock, FINALIZER};
use backup_operator::metrics::BackupMetrics;

use crate::support::control_plane;

const WAIT: Duration = Duration::from_secs(30);
const NAMESPACE: &str = "backup-controller-test";
const HOUR: SignedDuration = SignedDuration::from_hours(1);

// ANCHOR: finish
/// Writes what the job controller would once `job`'s Pod ends: the
/// conditions (`SuccessCriteriaMet` then `Complete`, or `FailureTarget`
/// then `Failed`, as the apiserver requires), the counts and the times.
async fn finish(jobs: &Api<Job>, job: &str, succeeded: bool, at: Timestamp) {
    let time = at.to_string();
    let condition =
        |type_: &str| json!({"type": type_, "status": "True", "lastTransitionTime": time});
    let status = if succeeded {
        json!({
            "startTime": time, "completionTime": time, "succeeded": 1,
            "conditions": [condition("SuccessCriteriaMet"), condition("Complete")],
        })
    } else {
        json!({
            "startTime": time, "failed": 1,
            "conditions": [condition("FailureTarget"), condition("Failed")],
        })
    };
    jobs.patch_status(
        job,
        &PatchParams::default(),
        &Patch::Merge(json!({ "status": status })),
    )
    .await
    .unwrap_or_else(|e| panic!("set the status of Job {job}: {e}"));
}
// ANCHOR_END: finish

/// The names of the Jobs in the namespace, sorted.
async fn job_names(jobs: &Api<Job>) -> Vec<String> {
    let mut names: Vec<String> = jobs
        .list(&ListParams::default())
        .await
        .map(|list| {
            list.items
                .into_iter()
                .filter_map(|j| j.metadata.name)
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

// ANCHOR: test
#[tokio::test]
async fn backup_runs_jobs_on_its_interval_keeps_its_history_and_cleans_up() {
    let (plane, client) = control_plane(NAMESPACE).await;
    plane
        .install_crds(&backup_operator::crds())
        .await
        .expect("install the CRDs");

    // The operator, as `add_controllers` wires it, with a clock the test moves.
    let now = Arc::new(Mutex::new(Timestamp::now() + SignedDuration::from_secs(2)));
    let clock = {
        let now = now.clone();
        Clock::new(move || *now.lock().expect("the clock"))
    };
    let mut manager = Manager::builder()
        .client(client.clone())
        .build()
        .await
        .expect("manager");
    let metrics = manager.metrics().clone();
    BackupReconciler::new(clock, BackupMetrics::register(&metrics))
        .add_to(&mut manager)
        .expect("add the controller");
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let running = tokio::spawn(manager.run_until(async move {
        let _ = stopped.await;
    }));

    // An hourly Backup keeping one Job of each outcome.
    let backups: Api<Backup> = Api::namespaced(client.clone(), NAMESPACE);
    let jobs: Api<Job> = Api::namespaced(client.clone(), NAMESPACE);
    let mut backup = Backup::new(
        "nightly",
        BackupSpec {
            source: "orders-db".into(),
            image: None,
            interval_minutes: Some(60),
            suspend: None,
            successful_jobs_history_limit: Some(1),
            failed_jobs_history_limit: Some(1),
        },
    );
    backup = backups
        .create(&PostParams::default(), &backup)
        .await
        .expect("create the Backup");
    let created = backup
        .metadata
        .creation_timestamp
        .as_ref()
        .expect("a creation time")
        .0;
    // The Job scheduled `hours` after the Backup's creation.
    let job = |hours: i64| {
        format!(
            "nightly-{}",
            (created + HOUR * hours as i32).as_second() / 60
        )
    };

    *now.lock().expect("the clock") = created + SignedDuration::from_secs(1);
    // The first Job starts at once; the Backup reports it as active.
    eventually("the first Job and the status", WAIT, || async {
        let backup = backups.get("nightly").await.ok()?;
        let status = backup.status?;
        let ready = conditions::is_true(&status.conditions, "Ready");
        let finalized = backup.metadata.finalizers?.iter().any(|f| f == FINALIZER);
        (ready && finalized && status.active == [job(0)]).then_some(())
    })
    .await;
    let first = jobs.get(&job(0)).await.expect("the first Job");
    let owner = &first.metadata.owner_references.as_ref().expect("an owner")[0];
    assert_eq!(
        (owner.kind.as_str(), owner.controller),
        ("Backup", Some(true))
    );

    // An hour later the first Job succeeds: the second starts.
    *now.lock().expect("the clock") = created + HOUR + SignedDuration::from_secs(1);
    finish(&jobs, &job(0), true, created + SignedDuration::from_mins(2)).await;
    eventually("the second Job", WAIT, || async {
        let status = backups.get("nightly").await.ok()?.status?;
        (status.active == [job(1)] && status.last_successful_time.is_some()).then_some(())
    })
    .await;

    // It fails; an hour later the third starts.
    finish(&jobs, &job(1), false, created + HOUR).await;
    *now.lock().expect("the clock") = created + HOUR * 2;
    // Any event wakes the Backup; here, a label on it.
    backups
        .patch(
            "nightly",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"tick": "2"}}})),
        )
        .await
        .expect("label the Backup");
    eventually("the third Job, and the failure reported", WAIT, || async {
        let status = backups.get("nightly").await.ok()?.status?;
        let failed = conditions::find(&status.conditions, "Succeeded")
            .is_some_and(|c| c.status == "False" && c.reason == "JobFailed");
        (status.active == [job(2)] && failed).then_some(())
    })
    .await;

    // The third succeeds: one succeeded Job is kept, so the first goes.
    finish(&jobs, &job(2), true, created + HOUR * 2).await;
    eventually("the history limit applied", WAIT, || async {
        let mut expected = vec![job(1), job(2)];
        expected.sort();
        let status = backups.get("nightly").await.ok()?.status?;
        let succeeded = conditions::is_true(&status.conditions, "Succeeded");
        (succeeded && job_names(&jobs).await == expected).then_some(())
    })
    .await;
    let text = metrics.encode().expect("the metrics");
    assert!(text.contains("backup_jobs_created_total 3"), "{text}");
    assert!(text.contains("backup_jobs_deleted_total 1"), "{text}");

    // Deleting the Backup: the finalizer deletes its Jobs first (envtest
    // has no garbage collector: nothing else would).
    backups
        .delete("nightly", &DeleteParams::default())
        .await
        .expect("delete the Backup");
    eventually("the Backup and its Jobs gone", WAIT, || async {
        let gone = backups.get_opt("nightly").await.ok()?.is_none();
        (gone && job_names(&jobs).await.is_empty()).then_some(())
    })
    .await;

    let _ = stop.send(());
    running
        .await
        .expect("manager task")
        .expect("manager stopped cleanly");
}
// ANCHOR_END: test
