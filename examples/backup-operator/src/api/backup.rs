//! The `Backup` custom resource (tutorial.opkit.dev/v1): what to back up,
//! how often, and how many finished Jobs to keep. `v1` is the hub and the
//! version the apiserver stores; `v2` ([`super::backup_v2`]) converts to
//! and from it.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

// ANCHOR: spec
/// The desired state of a Backup: a Job that copies `source`, started
/// once, or every `intervalMinutes`.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "tutorial.opkit.dev",
    version = "v1",
    kind = "Backup",
    namespaced,
    status = "BackupStatus",
    shortname = "backup",
    doc = "A Backup (tutorial.opkit.dev/v1): Jobs that copy a source, once or on an interval.",
    printcolumn = r#"{"name":"Source","type":"string","jsonPath":".spec.source"}"#,
    printcolumn = r#"{"name":"Last success","type":"date","jsonPath":".status.lastSuccessfulTime"}"#,
    printcolumn = r#"{"name":"Ready","type":"string","jsonPath":".status.conditions[?(@.type==\"Ready\")].status"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct BackupSpec {
    /// What to back up (a database, a volume): passed to the Job as `BACKUP_SOURCE`.
    #[schemars(length(min = 1, max = 253))]
    pub source: String,
    /// The image of the Job's container (the defaulting webhook sets it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
    /// Start a Job every this many minutes; unset: one Job, when the Backup is created.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub interval_minutes: Option<u32>,
    /// Start no new Job while `true` (running ones finish).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub suspend: Option<bool>,
    /// How many succeeded Jobs to keep (the defaulting webhook sets 3).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub successful_jobs_history_limit: Option<u32>,
    /// How many failed Jobs to keep (the defaulting webhook sets 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failed_jobs_history_limit: Option<u32>,
}
// ANCHOR_END: spec

// ANCHOR: status
/// The observed state of a Backup.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BackupStatus {
    /// The generation of the spec this status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// The Jobs still running.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub active: Vec<String>,
    /// When the last Job was scheduled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_schedule_time: Option<Time>,
    /// When the last successful Job completed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_successful_time: Option<Time>,
    /// `Ready`: whether the last reconcile succeeded; `Succeeded`: whether
    /// the newest finished Job succeeded (absent before a Job finished).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "opkit::conditions::schema")]
    pub conditions: Vec<Condition>,
}
// ANCHOR_END: status
