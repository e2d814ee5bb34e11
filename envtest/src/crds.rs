//! Installing CustomResourceDefinitions and waiting until they are served.

use std::time::{Duration, Instant};

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, Patch, PatchParams};

use super::error::{EnvtestError, Result};

/// The field manager envtest applies CRDs with.
const FIELD_MANAGER: &str = "opkit-envtest";
/// How often the CRD's conditions are polled.
const POLL_INTERVAL: Duration = Duration::from_millis(50);

/// Applies each CRD (server-side apply, so re-installing is harmless) and
/// waits until every one is `Established` and none has `NamesAccepted=False`.
pub(crate) async fn install(
    client: &kube::Client,
    crds: &[CustomResourceDefinition],
    timeout: Duration,
) -> Result<()> {
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    let params = PatchParams::apply(FIELD_MANAGER).force();
    let mut names = Vec::with_capacity(crds.len());
    for crd in crds {
        let name = crd.metadata.name.clone().ok_or_else(|| {
            EnvtestError::Crd("a CustomResourceDefinition has no metadata.name".to_owned())
        })?;
        let mut body = crd.clone();
        body.metadata.managed_fields = None;
        body.metadata.resource_version = None;
        api.patch(&name, &params, &Patch::Apply(&body))
            .await
            .map_err(|e| EnvtestError::Crd(format!("applying {name}: {e}")))?;
        names.push(name);
    }
    let begun = Instant::now();
    for name in names {
        loop {
            let crd = api
                .get(&name)
                .await
                .map_err(|e| EnvtestError::Crd(format!("reading {name}: {e}")))?;
            let conditions = crd
                .status
                .as_ref()
                .and_then(|s| s.conditions.as_deref())
                .unwrap_or_default();
            let status_of = |kind: &str| {
                conditions
                    .iter()
                    .find(|c| c.type_ == kind)
                    .map(|c| (c.status.as_str(), c.message.as_deref().unwrap_or_default()))
            };
            if let Some(("False", message)) = status_of("NamesAccepted") {
                return Err(EnvtestError::Crd(format!(
                    "{name}: names not accepted: {message}"
                )));
            }
            if let Some(("True", _)) = status_of("Established") {
                break;
            }
            if begun.elapsed() >= timeout {
                return Err(EnvtestError::Crd(format!(
                    "{name} was not Established after {timeout:?}; conditions: {conditions:?}"
                )));
            }
            tokio::time::sleep(POLL_INTERVAL).await;
        }
    }
    Ok(())
}
