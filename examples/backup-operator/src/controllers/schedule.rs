//! When a Backup's next Job is due, and which of its finished Jobs to
//! delete: pure functions of the spec, the Jobs and the time, so the
//! reconciler stays a sequence of reads and writes, and these rules are
//! tested without a cluster or a clock.

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::jiff::{SignedDuration, Timestamp};

use crate::api::backup::BackupSpec;

/// The annotation on each Job: the time it was scheduled for (RFC 3339).
pub const SCHEDULED_AT: &str = "tutorial.opkit.dev/scheduled-at";

/// The successful Jobs kept when the spec does not say.
pub const DEFAULT_SUCCESSFUL_HISTORY: u32 = 3;
/// The failed Jobs kept when the spec does not say.
pub const DEFAULT_FAILED_HISTORY: u32 = 1;

// ANCHOR: outcome
/// Where a Job is in its life, from its conditions (as `kubectl` and
/// kubebuilder's CronJob tutorial read them).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Neither `Complete` nor `Failed` yet.
    Active,
    /// `Complete` is `True`.
    Succeeded,
    /// `Failed` is `True`.
    Failed,
}

/// The outcome of `job`.
pub fn outcome(job: &Job) -> Outcome {
    let conditions = job.status.as_ref().and_then(|s| s.conditions.as_ref());
    let is_true = |type_: &str| {
        conditions
            .into_iter()
            .flatten()
            .any(|c| c.type_ == type_ && c.status == "True")
    };
    if is_true("Complete") {
        Outcome::Succeeded
    } else if is_true("Failed") {
        Outcome::Failed
    } else {
        Outcome::Active
    }
}
// ANCHOR_END: outcome

/// The time `job` was scheduled for: its [`SCHEDULED_AT`] annotation.
pub fn scheduled_at(job: &Job) -> Option<Timestamp> {
    job.metadata
        .annotations
        .as_ref()?
        .get(SCHEDULED_AT)?
        .parse()
        .ok()
}

/// The newest finished Job (by scheduled time) and how it ended: what
/// the Backup's `Succeeded` condition reports.
pub fn newest_finished<'a>(jobs: &[&'a Job]) -> Option<(&'a Job, Outcome)> {
    jobs.iter()
        .map(|job| (*job, outcome(job)))
        .filter(|(_, outcome)| *outcome != Outcome::Active)
        .max_by_key(|(job, _)| (scheduled_at(job), job.metadata.name.clone()))
}

// ANCHOR: next
/// What the schedule asks for now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Next {
    /// Start the Job scheduled for this time now.
    Due(Timestamp),
    /// Nothing now; the next Job is due at this time.
    At(Timestamp),
    /// Nothing now or later (suspended, or a one-shot Backup already ran).
    Never,
}

/// The next Job of a Backup created at `created`, whose latest Job was
/// scheduled for `last` (from its status or its Jobs, whichever is
/// later). The first Job is scheduled for the creation time; then one
/// every `intervalMinutes`. Runs missed while the operator was down are
/// not made up: only the most recent missed one starts (as a CronJob with
/// `startingDeadlineSeconds` unset does).
pub fn next(
    spec: &BackupSpec,
    created: Timestamp,
    last: Option<Timestamp>,
    now: Timestamp,
) -> Next {
    if spec.suspend == Some(true) {
        return Next::Never;
    }
    let Some(last) = last else {
        return if now >= created {
            Next::Due(created)
        } else {
            Next::At(created)
        };
    };
    let Some(minutes) = spec.interval_minutes.filter(|m| *m > 0) else {
        return Next::Never; // a one-shot Backup: its Job exists
    };
    let interval = SignedDuration::from_mins(i64::from(minutes));
    let Ok(following) = last.checked_add(interval) else {
        return Next::Never;
    };
    if now < following {
        return Next::At(following);
    }
    // The most recent missed time: last + k * interval <= now.
    let missed = now.duration_since(last).as_secs() / interval.as_secs();
    match last.checked_add(SignedDuration::from_secs(missed * interval.as_secs())) {
        Ok(due) => Next::Due(due),
        Err(_) => Next::Never,
    }
}
// ANCHOR_END: next

// ANCHOR: history
/// The finished Jobs to delete: the oldest beyond each history limit
/// (the spec's, else [`DEFAULT_SUCCESSFUL_HISTORY`] and
/// [`DEFAULT_FAILED_HISTORY`]). Running Jobs are never deleted.
pub fn beyond_history<'a>(spec: &BackupSpec, jobs: &'a [&'a Job]) -> Vec<&'a Job> {
    let mut doomed = Vec::new();
    for (outcome, limit) in [
        (
            Outcome::Succeeded,
            spec.successful_jobs_history_limit
                .unwrap_or(DEFAULT_SUCCESSFUL_HISTORY),
        ),
        (
            Outcome::Failed,
            spec.failed_jobs_history_limit
                .unwrap_or(DEFAULT_FAILED_HISTORY),
        ),
    ] {
        let mut finished: Vec<&Job> = jobs
            .iter()
            .copied()
            .filter(|job| self::outcome(job) == outcome)
            .collect();
        // Oldest first: by scheduled time, then name.
        finished.sort_by_key(|job| (scheduled_at(job), job.metadata.name.clone()));
        let excess = finished.len().saturating_sub(limit as usize);
        doomed.extend(finished.into_iter().take(excess));
    }
    doomed
}
// ANCHOR_END: history

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::batch::v1::JobStatus;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    fn spec(interval_minutes: Option<u32>) -> BackupSpec {
        BackupSpec {
            source: "orders-db".into(),
            image: None,
            interval_minutes,
            suspend: None,
            successful_jobs_history_limit: Some(2),
            failed_jobs_history_limit: Some(1),
        }
    }

    fn at(s: &str) -> Timestamp {
        s.parse().expect("a timestamp")
    }

    fn job(name: &str, scheduled: &str, condition: Option<&str>) -> Job {
        Job {
            metadata: ObjectMeta {
                name: Some(name.into()),
                annotations: Some([(SCHEDULED_AT.to_owned(), scheduled.to_owned())].into()),
                ..ObjectMeta::default()
            },
            status: condition.map(|type_| JobStatus {
                conditions: Some(vec![k8s_openapi::api::batch::v1::JobCondition {
                    type_: type_.into(),
                    status: "True".into(),
                    ..Default::default()
                }]),
                ..JobStatus::default()
            }),
            ..Job::default()
        }
    }

    #[test]
    fn the_first_job_is_scheduled_for_the_creation_time() {
        let created = at("2026-01-01T00:00:00Z");
        let now = at("2026-01-01T00:00:05Z");
        assert_eq!(next(&spec(None), created, None, now), Next::Due(created));
        assert_eq!(
            next(&spec(Some(60)), created, None, now),
            Next::Due(created)
        );
    }

    #[test]
    fn a_one_shot_backup_runs_once() {
        let created = at("2026-01-01T00:00:00Z");
        let later = at("2026-03-01T00:00:00Z");
        assert_eq!(
            next(&spec(None), created, Some(created), later),
            Next::Never
        );
    }

    #[test]
    fn an_interval_schedules_the_next_job_and_skips_missed_runs() {
        let created = at("2026-01-01T00:00:00Z");
        let s = spec(Some(60));
        assert_eq!(
            next(&s, created, Some(created), at("2026-01-01T00:59:59Z")),
            Next::At(at("2026-01-01T01:00:00Z"))
        );
        assert_eq!(
            next(&s, created, Some(created), at("2026-01-01T01:00:00Z")),
            Next::Due(at("2026-01-01T01:00:00Z"))
        );
        // Down for three and a half hours: only the latest missed run starts.
        assert_eq!(
            next(&s, created, Some(created), at("2026-01-01T03:30:00Z")),
            Next::Due(at("2026-01-01T03:00:00Z"))
        );
    }

    #[test]
    fn a_suspended_backup_starts_nothing() {
        let mut s = spec(Some(1));
        s.suspend = Some(true);
        let created = at("2026-01-01T00:00:00Z");
        assert_eq!(
            next(&s, created, None, at("2026-01-02T00:00:00Z")),
            Next::Never
        );
    }

    #[test]
    fn history_keeps_the_newest_finished_jobs_and_every_running_one() {
        let jobs = [
            job("a", "2026-01-01T00:00:00Z", Some("Complete")),
            job("b", "2026-01-01T01:00:00Z", Some("Failed")),
            job("c", "2026-01-01T02:00:00Z", Some("Complete")),
            job("d", "2026-01-01T03:00:00Z", Some("Failed")),
            job("e", "2026-01-01T04:00:00Z", Some("Complete")),
            job("f", "2026-01-01T05:00:00Z", None),
        ];
        let refs: Vec<&Job> = jobs.iter().collect();
        let doomed: Vec<&str> = beyond_history(&spec(Some(60)), &refs)
            .into_iter()
            .filter_map(|j| j.metadata.name.as_deref())
            .collect();
        assert_eq!(doomed, ["a", "b"]);
        assert_eq!(outcome(&jobs[5]), Outcome::Active);
        let (newest, how) = newest_finished(&refs).expect("finished Jobs");
        assert_eq!(
            (newest.metadata.name.as_deref(), how),
            (Some("e"), Outcome::Succeeded)
        );
    }
}
