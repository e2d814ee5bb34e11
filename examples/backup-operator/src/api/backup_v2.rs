//! `Backup` in `tutorial.opkit.dev/v2`: a spoke version, converted to and
//! from the hub (`v1`, [`super::backup`], the version the
//! apiserver stores) by the conversion webhook the manager serves.
//!
//! `v2` groups the two history limits into one `history` object. Clients
//! of either version read every object: the apiserver sends each object it
//! must convert to the webhook, which converts it through the hub
//! ([`Spoke::to_hub`], [`Spoke::from_hub`]). Both directions are lossless.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::{CustomResource, CustomResourceExt};
use opkit::webhook::{ConversionError, Hub, Spoke};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::backup as hub;

/// The status is the same in both versions.
pub type BackupStatus = hub::BackupStatus;

// ANCHOR: spec
/// The desired state of a Backup, as `v2` has it.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "tutorial.opkit.dev",
    version = "v2",
    kind = "Backup",
    namespaced,
    status = "BackupStatus",
    doc = "A Backup (tutorial.opkit.dev/v2), converted to and from v1."
)]
#[serde(rename_all = "camelCase")]
pub struct BackupSpec {
    /// What to back up.
    #[schemars(length(min = 1, max = 253))]
    pub source: String,
    /// The image of the Job's container.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
    /// Start a Job every this many minutes; unset: once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub interval_minutes: Option<u32>,
    /// Start no new Job while `true`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub suspend: Option<bool>,
    /// How many finished Jobs to keep.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub history: Option<History>,
}

/// How many finished Jobs to keep, by outcome.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct History {
    /// Succeeded Jobs kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub successful: Option<u32>,
    /// Failed Jobs kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failed: Option<u32>,
}
// ANCHOR_END: spec

// ANCHOR: conversion
impl Hub for hub::Backup {}

impl Spoke<hub::Backup> for Backup {
    fn to_hub(self) -> Result<hub::Backup, ConversionError> {
        let history = self.spec.history.unwrap_or_default();
        Ok(hub::Backup {
            metadata: self.metadata,
            spec: hub::BackupSpec {
                source: self.spec.source,
                image: self.spec.image,
                interval_minutes: self.spec.interval_minutes,
                suspend: self.spec.suspend,
                successful_jobs_history_limit: history.successful,
                failed_jobs_history_limit: history.failed,
            },
            status: self.status,
        })
    }

    fn from_hub(hub: hub::Backup) -> Result<Self, ConversionError> {
        let spec = hub.spec;
        let history = (spec.successful_jobs_history_limit.is_some()
            || spec.failed_jobs_history_limit.is_some())
        .then_some(History {
            successful: spec.successful_jobs_history_limit,
            failed: spec.failed_jobs_history_limit,
        });
        Ok(Self {
            metadata: hub.metadata,
            spec: BackupSpec {
                source: spec.source,
                image: spec.image,
                interval_minutes: spec.interval_minutes,
                suspend: spec.suspend,
                history,
            },
            status: hub.status,
        })
    }
}
// ANCHOR_END: conversion

/// `crd` (the hub's, `v1`, stored) with the `v2` version
/// added (served, converted by the webhook).
pub fn add_version(mut crd: CustomResourceDefinition) -> CustomResourceDefinition {
    crd.spec
        .versions
        .extend(Backup::crd().spec.versions.into_iter().map(|mut version| {
            version.storage = false;
            version
        }));
    crd
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::api::ObjectMeta;

    fn v1(successful: Option<u32>, failed: Option<u32>) -> hub::Backup {
        hub::Backup {
            metadata: ObjectMeta {
                name: Some("nightly".into()),
                ..ObjectMeta::default()
            },
            spec: hub::BackupSpec {
                source: "orders-db".into(),
                image: Some("busybox:1.37".into()),
                interval_minutes: Some(60),
                suspend: None,
                successful_jobs_history_limit: successful,
                failed_jobs_history_limit: failed,
            },
            status: None,
        }
    }

    #[test]
    fn a_round_trip_through_v2_loses_nothing() {
        for (successful, failed) in [
            (None, None),
            (Some(3), None),
            (None, Some(0)),
            (Some(5), Some(2)),
        ] {
            let hub = v1(successful, failed);
            let spoke = Backup::from_hub(hub.clone()).expect("from the hub");
            assert_eq!(
                spoke.spec.history.is_some(),
                successful.is_some() || failed.is_some()
            );
            let back = spoke.to_hub().expect("to the hub");
            assert_eq!((back.metadata, back.spec), (hub.metadata, hub.spec));
        }
    }
}
