//! The admission webhooks of `Website` v2, and the set of every webhook
//! the operator serves.

use opkit::webhook::{
    AdmissionRequest, Conversion, Defaulter, Denied, Operation, Validator, Verdict, WebhookOptions,
    Webhooks,
};

use crate::api::{v1, v2};

/// The most replicas a Website may ask for.
pub const MAX_REPLICAS: i32 = 5;

/// Validates and defaults Websites.
#[derive(Debug, Clone, Copy, Default)]
pub struct WebsiteWebhook;

// ANCHOR: webhooks
/// Every webhook of the operator: validating and defaulting Website v2
/// (a v1 request reaches them converted, through `matchPolicy:
/// Equivalent`), and the v1 ⇄ v2 conversion.
pub fn webhooks() -> Webhooks {
    Webhooks::new()
        .validating_with::<v2::Website, _>(
            WebsiteWebhook,
            WebhookOptions::new().operations([Operation::Create, Operation::Update]),
        )
        .defaulting::<v2::Website, _>(WebsiteWebhook)
        .conversion(Conversion::<v2::Website>::new().spoke::<v1::Website>())
}

// ANCHOR_END: webhooks

fn check_host(host: &str) -> Result<(), Denied> {
    let valid = !host.is_empty()
        && host.len() <= 253
        && host.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && !label.starts_with('-')
                && !label.ends_with('-')
                && label
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        });
    if valid {
        Ok(())
    } else {
        Err(Denied::invalid(format!(
            "spec.host {host:?} is not a lower-case DNS name"
        )))
    }
}

// ANCHOR: validator
impl Validator<v2::Website> for WebsiteWebhook {
    async fn validate_create(&self, site: &v2::Website, _: &AdmissionRequest) -> Verdict {
        check_host(&site.spec.host)?;
        if let Some(replicas) = site.spec.replicas
            && !(1..=MAX_REPLICAS).contains(&replicas)
        {
            return Err(Denied::invalid(format!(
                "spec.replicas {replicas} must be between 1 and {MAX_REPLICAS}"
            )));
        }
        let mut warnings = Vec::new();
        if site.spec.tls == Some(false) {
            warnings.push(format!("{} is served without TLS", site.spec.host));
        }
        Ok(warnings)
    }

    async fn validate_update(
        &self,
        old: &v2::Website,
        new: &v2::Website,
        request: &AdmissionRequest,
    ) -> Verdict {
        if old.spec.host != new.spec.host {
            return Err(Denied::new(format!(
                "spec.host cannot change (from {:?} to {:?}); create another Website",
                old.spec.host, new.spec.host
            )));
        }
        self.validate_create(new, request).await
    }
}

// ANCHOR_END: validator

// ANCHOR: defaulter
impl Defaulter<v2::Website> for WebsiteWebhook {
    async fn default(&self, site: &mut v2::Website, _: &AdmissionRequest) -> Verdict {
        site.spec.tls.get_or_insert(true);
        site.spec.replicas.get_or_insert(1);
        Ok(Vec::new())
    }
}
// ANCHOR_END: defaulter
