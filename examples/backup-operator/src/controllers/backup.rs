//! The reconciler of `Backup`: starts a Job when the schedule says so,
//! reports the Jobs in the Backup's status, deletes the finished Jobs
//! beyond the history limits, and stops the Backup's Jobs before it goes
//! (a finalizer).

use std::sync::Arc;

use k8s_openapi::api::batch::v1::{Job, JobSpec};
use k8s_openapi::api::core::v1::{Container, EnvVar, PodSpec, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DeleteParams, ObjectMeta, PostParams, PropagationPolicy};
use kube::{Resource, ResourceExt};
use opkit::Controller;
use opkit::client::{self, FinalizerEvent, IgnoreNotFound};
use opkit::conditions::{self, ConditionStatus};
use opkit::reconcile::{Action, Context, Reconcile, ReconcileError, Request};

use super::schedule::{self, Next, Outcome, SCHEDULED_AT};
use crate::api::backup::{Backup, BackupStatus};
use crate::metrics::BackupMetrics;

/// The finalizer that lets the reconciler clean up before a Backup goes.
pub const FINALIZER: &str = "tutorial.opkit.dev/finalizer";

/// The index of Jobs by their controlling Backup (`namespace/name`).
pub const OWNER_INDEX: &str = "owner";

/// The label every Job of a Backup carries: the Backup's name.
pub const BACKUP_LABEL: &str = "tutorial.opkit.dev/backup";

/// The image of the Job's container when the spec names none (the
/// defaulting webhook writes it into the spec).
pub const DEFAULT_IMAGE: &str = "busybox:1.37";

// ANCHOR: clock
/// Where the reconciler reads the time: the system clock in the
/// operator, a clock the test moves in tests.
#[derive(Clone)]
pub struct Clock(Arc<dyn Fn() -> Timestamp + Send + Sync>);

impl Clock {
    /// The system clock.
    pub fn system() -> Self {
        Self(Arc::new(Timestamp::now))
    }

    /// A clock that reads the time from `now`.
    pub fn new(now: impl Fn() -> Timestamp + Send + Sync + 'static) -> Self {
        Self(Arc::new(now))
    }

    /// The time now.
    pub fn now(&self) -> Timestamp {
        (self.0)()
    }
}
// ANCHOR_END: clock

// ANCHOR: index
/// The index values of a Job: its controlling Backup, as
/// `namespace/name` (none for a Job no Backup controls).
pub fn owner_of(job: &Job) -> Vec<String> {
    let owner = job
        .metadata
        .owner_references
        .iter()
        .flatten()
        .find(|o| o.controller == Some(true));
    match owner {
        Some(o) if o.kind == "Backup" && o.api_version.starts_with("tutorial.opkit.dev/") => {
            vec![format!(
                "{}/{}",
                job.namespace().unwrap_or_default(),
                o.name
            )]
        }
        _ => Vec::new(),
    }
}
// ANCHOR_END: index

// ANCHOR: controller
/// Reconciles Backup objects.
///
/// The attribute declares what the controller watches and writes; the
/// manager wiring and the RBAC rules in `deploy/03-rbac.yaml` both come
/// from it: a change to a Job wakes its Backup (`owns`), Jobs are found
/// by their Backup through an index of the cache (`index`), and the
/// reconciler creates and deletes Jobs (`rbac`).
#[derive(Controller)]
#[controller(
    for = Backup,
    owns(Job),
    index(Job, "owner", owner_of),
    rbac(create, delete on Job),
    status,
    finalizer,
    events
)]
pub struct BackupReconciler {
    clock: Clock,
    metrics: BackupMetrics,
}

impl BackupReconciler {
    /// A reconciler reading the time from `clock` and counting into `metrics`.
    pub fn new(clock: Clock, metrics: BackupMetrics) -> Self {
        Self { clock, metrics }
    }
}
// ANCHOR_END: controller

// ANCHOR: reconcile
impl Reconcile for BackupReconciler {
    type Object = Backup;

    async fn reconcile(
        &self,
        req: Request,
        ctx: &Context<Backup>,
    ) -> Result<Action, ReconcileError> {
        // Adds the finalizer before the first apply; on deletion runs the
        // cleanup, then removes the finalizer. Handed the read itself: a
        // Backup that is gone needs nothing, and one being deleted whose
        // body no longer decodes is cleaned up by its name.
        client::finalizer(
            &ctx.object_api(),
            FINALIZER,
            ctx.object().await,
            |event| async {
                match event {
                    FinalizerEvent::Apply(backup) => self.apply(&req, &backup, ctx).await,
                    FinalizerEvent::Cleanup(backup) => self.cleanup(&req, &backup, ctx).await,
                    FinalizerEvent::CleanupUndecodable(_) => {
                        self.delete_jobs(&req, ctx).await?;
                        Ok(Action::done())
                    }
                }
            },
        )
        .await
    }
    // ANCHOR_END: reconcile

    /// A failed reconcile sets `Ready` to `False` with the error and
    /// records a warning Event; the failure is then retried with backoff
    /// (or, for a terminal error, not).
    async fn on_error(&self, req: &Request, error: &ReconcileError, ctx: &Context<Backup>) {
        let Ok(Some(object)) = ctx.object().await else {
            return;
        };
        ctx.recorder().warning(
            &*object,
            "ReconcileFailed",
            "Reconciling",
            &error.to_string(),
        );
        let mut status = object.status.clone().unwrap_or_default();
        let changed = conditions::set(
            &mut status.conditions,
            conditions::new(
                "Ready",
                ConditionStatus::False,
                "ReconcileFailed",
                error.to_string(),
            )
            .observed_generation(object.meta().generation),
        );
        if changed && let Err(e) = client::patch_status(&ctx.object_api(), &req.name, &status).await
        {
            tracing::warn!(%req, error = %e, "cannot report the Ready condition");
        }
        tracing::debug!(%req, terminal = error.is_terminal(), "failure recorded");
    }
}

impl BackupReconciler {
    // ANCHOR: apply
    /// Deletes the Jobs beyond the history, starts the Job the schedule
    /// asks for, and reports them in the status.
    async fn apply(
        &self,
        req: &Request,
        backup: &Backup,
        ctx: &Context<Backup>,
    ) -> Result<Action, ReconcileError> {
        let namespace = backup.namespace().unwrap_or_default();
        let jobs_api: Api<Job> = Api::namespaced(ctx.client(), &namespace);

        // 1. The Backup's Jobs, from the cache's index (less those being
        // deleted already).
        let owned = ctx
            .by_index::<Job>(OWNER_INDEX, &format!("{namespace}/{}", req.name))
            .await?;
        let jobs: Vec<&Job> = owned
            .iter()
            .map(|job| &**job)
            .filter(|job| job.metadata.deletion_timestamp.is_none())
            .collect();

        // 2. History: delete the oldest finished Jobs beyond the limits.
        let doomed = schedule::beyond_history(&backup.spec, &jobs);
        for job in &doomed {
            if delete_job(&jobs_api, &job.name_any()).await? {
                self.metrics.jobs_deleted.inc();
            }
        }
        let kept: Vec<&Job> = jobs
            .iter()
            .copied()
            .filter(|job| !doomed.iter().any(|d| d.name_any() == job.name_any()))
            .collect();

        // 3. What the Jobs say, for the status.
        let mut status = backup.status.clone().unwrap_or_default();
        let mut active: Vec<String> = kept
            .iter()
            .filter(|job| schedule::outcome(job) == Outcome::Active)
            .map(|job| job.name_any())
            .collect();
        let last_success = kept
            .iter()
            .filter(|job| schedule::outcome(job) == Outcome::Succeeded)
            .filter_map(|job| job.status.as_ref()?.completion_time.as_ref())
            .map(|t| t.0)
            .chain(status.last_successful_time.as_ref().map(|t| t.0))
            .max();
        let mut last_scheduled = kept
            .iter()
            .filter_map(|job| schedule::scheduled_at(job))
            .chain(status.last_schedule_time.as_ref().map(|t| t.0))
            .max();

        // 4. The schedule: start the Job that is due, unless one still
        // runs (its completion wakes this Backup again, through `owns`).
        let now = self.clock.now();
        let created = backup
            .metadata
            .creation_timestamp
            .as_ref()
            .map_or(now, |t| t.0);
        let mut next = schedule::next(&backup.spec, created, last_scheduled, now);
        if let Next::Due(scheduled) = next
            && active.is_empty()
        {
            let job = job_for(backup, scheduled);
            let name = job.name_any();
            match jobs_api.create(&PostParams::default(), &job).await {
                Ok(_) => {
                    self.metrics.jobs_created.inc();
                    ctx.recorder().normal(
                        backup,
                        "Created",
                        "CreateJob",
                        &format!("created Job {name}"),
                    );
                }
                // Created by an earlier attempt whose status write failed.
                Err(kube::Error::Api(status)) if status.code == 409 => {}
                Err(e) => {
                    return Err(ReconcileError::retryable(format!(
                        "creating Job {name}: {e}"
                    )));
                }
            }
            active.push(name);
            last_scheduled = Some(scheduled);
            next = schedule::next(&backup.spec, created, last_scheduled, now);
        }
        active.sort();

        // 5. The status, written only when it changed.
        let generation = backup.meta().generation;
        let mut desired = BackupStatus {
            observed_generation: generation,
            active,
            last_schedule_time: last_scheduled.map(Time),
            last_successful_time: last_success.map(Time),
            conditions: status.conditions.clone(),
        };
        conditions::set(
            &mut desired.conditions,
            conditions::new(
                "Ready",
                ConditionStatus::True,
                "Reconciled",
                "the schedule is applied",
            )
            .observed_generation(generation),
        );
        if let Some((job, outcome)) = schedule::newest_finished(&kept) {
            let (state, reason, verb) = match outcome {
                Outcome::Succeeded => (ConditionStatus::True, "JobSucceeded", "succeeded"),
                _ => (ConditionStatus::False, "JobFailed", "failed"),
            };
            conditions::set(
                &mut desired.conditions,
                conditions::new(
                    "Succeeded",
                    state,
                    reason,
                    format!("Job {} {verb}", job.name_any()),
                )
                .observed_generation(generation),
            );
        }
        if desired != status {
            status = desired;
            client::patch_status(&ctx.object_api(), &req.name, &status).await?;
        }

        // 6. Come back when the next Job is due.
        Ok(match next {
            Next::At(at) => {
                Action::requeue_after(at.duration_since(now).try_into().unwrap_or_default())
            }
            Next::Due(_) | Next::Never => Action::done(),
        })
    }
    // ANCHOR_END: apply

    // ANCHOR: cleanup
    /// Deletes every Job of the Backup before the Backup goes: the garbage
    /// collector would delete them too, but only after the Backup is gone,
    /// while a running Job would go on copying a source its owner has
    /// given up.
    async fn cleanup(
        &self,
        req: &Request,
        backup: &Backup,
        ctx: &Context<Backup>,
    ) -> Result<Action, ReconcileError> {
        let deleted = self.delete_jobs(req, ctx).await?;
        ctx.recorder().normal(
            backup,
            "Finalizing",
            "DeleteJobs",
            &format!("deleted {deleted} Job(s); removing the finalizer"),
        );
        Ok(Action::done())
    }
    // ANCHOR_END: cleanup

    /// Deletes the Jobs of the Backup `req` names (by the owner index, so
    /// its name is all it needs); how many this call deleted.
    async fn delete_jobs(
        &self,
        req: &Request,
        ctx: &Context<Backup>,
    ) -> Result<usize, ReconcileError> {
        let namespace = req.namespace.clone().unwrap_or_default();
        let jobs_api: Api<Job> = Api::namespaced(ctx.client(), &namespace);
        let jobs = ctx
            .by_index::<Job>(OWNER_INDEX, &format!("{namespace}/{}", req.name))
            .await?;
        let mut deleted = 0;
        for job in &jobs {
            if delete_job(&jobs_api, &job.name_any()).await? {
                deleted += 1;
            }
        }
        Ok(deleted)
    }
}

// ANCHOR: job
/// The Job of `backup` scheduled for `scheduled`. Its name is a function
/// of the two, so a retry never starts a second Job for the same time.
fn job_for(backup: &Backup, scheduled: Timestamp) -> Job {
    let name = format!("{}-{}", backup.name_any(), scheduled.as_second() / 60);
    let image = backup
        .spec
        .image
        .clone()
        .unwrap_or_else(|| DEFAULT_IMAGE.to_owned());
    Job {
        metadata: ObjectMeta {
            name: Some(name),
            namespace: backup.namespace(),
            labels: Some([(BACKUP_LABEL.to_owned(), backup.name_any())].into()),
            annotations: Some([(SCHEDULED_AT.to_owned(), scheduled.to_string())].into()),
            owner_references: backup.controller_owner_ref(&()).map(|o| vec![o]),
            ..ObjectMeta::default()
        },
        spec: Some(JobSpec {
            backoff_limit: Some(2),
            template: PodTemplateSpec {
                spec: Some(PodSpec {
                    restart_policy: Some("Never".to_owned()),
                    containers: vec![Container {
                        name: "backup".to_owned(),
                        image: Some(image),
                        command: Some(vec![
                            "sh".to_owned(),
                            "-c".to_owned(),
                            "echo backing up \"$BACKUP_SOURCE\"".to_owned(),
                        ]),
                        env: Some(vec![EnvVar {
                            name: "BACKUP_SOURCE".to_owned(),
                            value: Some(backup.spec.source.clone()),
                            ..EnvVar::default()
                        }]),
                        ..Container::default()
                    }],
                    ..PodSpec::default()
                }),
                ..PodTemplateSpec::default()
            },
            ..JobSpec::default()
        }),
        ..Job::default()
    }
}
// ANCHOR_END: job

/// Deletes a Job and, in the background, its Pods: `true` if this call
/// deleted it, `false` if it was gone already.
async fn delete_job(api: &Api<Job>, name: &str) -> Result<bool, ReconcileError> {
    let params = DeleteParams {
        propagation_policy: Some(PropagationPolicy::Background),
        ..DeleteParams::default()
    };
    let deleted = api.delete(name, &params).await.ignore_not_found()?;
    Ok(deleted.is_some())
}
