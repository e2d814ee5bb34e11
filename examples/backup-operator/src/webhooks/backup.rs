//! The admission webhooks of `Backup` (tutorial.opkit.dev/v1):
//! defaults set on create and update, and checks the apiserver runs before
//! it stores an object. A refusal's message is what the client sees.

use kube::ResourceExt;
use opkit::webhook::{AdmissionRequest, Defaulter, Denied, Validator, Verdict, Webhooks};

use crate::api::backup::Backup;
use crate::controllers::backup::DEFAULT_IMAGE;
use crate::controllers::schedule::{DEFAULT_FAILED_HISTORY, DEFAULT_SUCCESSFUL_HISTORY};

/// The longest Backup name: a Job's name is the Backup's, `-` and up to
/// ten digits, and must fit in a label value (63 characters).
pub const MAX_NAME_LENGTH: usize = 52;

/// Validates and defaults Backup objects.
#[derive(Debug, Clone, Copy, Default)]
pub struct BackupWebhook;

/// Adds the Backup webhooks to `webhooks`. Options (operations, failure
/// policy, timeout) go in `validating_with` / `defaulting_with`.
pub fn register(webhooks: Webhooks) -> Webhooks {
    webhooks
        .validating::<Backup, _>(BackupWebhook)
        .defaulting::<Backup, _>(BackupWebhook)
}

// ANCHOR: defaulter
impl Defaulter<Backup> for BackupWebhook {
    async fn default(&self, backup: &mut Backup, _request: &AdmissionRequest) -> Verdict {
        let spec = &mut backup.spec;
        spec.image.get_or_insert_with(|| DEFAULT_IMAGE.to_owned());
        spec.successful_jobs_history_limit
            .get_or_insert(DEFAULT_SUCCESSFUL_HISTORY);
        spec.failed_jobs_history_limit
            .get_or_insert(DEFAULT_FAILED_HISTORY);
        Ok(Vec::new())
    }
}
// ANCHOR_END: defaulter

// ANCHOR: validator
impl Validator<Backup> for BackupWebhook {
    async fn validate_create(&self, backup: &Backup, _request: &AdmissionRequest) -> Verdict {
        // With `generateName`, the name is not known yet: check the prefix.
        let name = match backup.metadata.name.as_deref() {
            Some(name) => name.to_owned(),
            None => backup.metadata.generate_name.clone().unwrap_or_default(),
        };
        if name.len() > MAX_NAME_LENGTH {
            return Err(Denied::invalid(format!(
                "metadata.name {name:?} is longer than {MAX_NAME_LENGTH} characters \
                 (its Jobs' names add a suffix)"
            )));
        }
        if backup.spec.source.trim().is_empty() {
            return Err(Denied::invalid("spec.source must not be blank"));
        }
        let mut warnings = Vec::new();
        if backup.spec.failed_jobs_history_limit == Some(0) {
            warnings.push(format!(
                "{}: failedJobsHistoryLimit 0 keeps no failed Job to look into",
                backup.name_any()
            ));
        }
        Ok(warnings)
    }

    async fn validate_update(
        &self,
        old: &Backup,
        new: &Backup,
        request: &AdmissionRequest,
    ) -> Verdict {
        if old.spec.source != new.spec.source {
            return Err(Denied::new(format!(
                "spec.source cannot change (from {:?} to {:?}); create another Backup",
                old.spec.source, new.spec.source
            )));
        }
        self.validate_create(new, request).await
    }
}
// ANCHOR_END: validator
