//! Installing admission webhook configurations that point the apiserver
//! at a webhook server on loopback (controller-runtime envtest's
//! `WebhookInstallOptions`).

use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use opkit::webhook::{WebhookClient, Webhooks};

use super::control_plane::ControlPlane;
use super::error::{EnvtestError, Result};

/// The field manager envtest applies configurations with.
const FIELD_MANAGER: &str = "opkit-envtest";

#[cfg_attr(docsrs, doc(cfg(feature = "webhook")))]
impl ControlPlane {
    /// Installs the `ValidatingWebhookConfiguration` and the
    /// `MutatingWebhookConfiguration` of `webhooks`, both named `name`,
    /// reaching the webhook server through `client` (server-side apply, so
    /// installing again replaces them).
    ///
    /// The apiserver picks configurations up through a watch, within
    /// milliseconds but not synchronously: a test that must not race it
    /// sends a dry-run request the webhook refuses until it is refused.
    /// CRD conversion is installed with the CRD:
    /// `plane.install_crds(&[webhooks.crd_with_conversion(crd, &client)])`.
    ///
    /// ```no_run
    /// # async fn example(plane: &opkit_envtest::ControlPlane, webhooks: opkit::webhook::Webhooks) -> Result<(), Box<dyn std::error::Error>> {
    /// use opkit::webhook::{DevCertificate, WebhookClient, WebhookServer};
    /// use tokio_util::sync::CancellationToken;
    ///
    /// let dir = tempfile::tempdir()?;
    /// let dev = DevCertificate::generate(&["127.0.0.1"])?;
    /// let (cert, key) = dev.write_to(dir.path())?;
    /// let server = WebhookServer::new(webhooks.clone())
    ///     .bind_address("127.0.0.1:0")
    ///     .cert_files(cert, key)
    ///     .bind()
    ///     .await?;
    /// let client = WebhookClient::url(format!("https://{}", server.local_addr().unwrap()))
    ///     .ca_bundle(dev.ca_pem());
    /// plane.install_webhooks("my-webhooks", &webhooks, &client).await?;
    /// tokio::spawn(server.serve(CancellationToken::new()));
    /// # Ok(()) }
    /// ```
    pub async fn install_webhooks(
        &self,
        name: &str,
        webhooks: &Webhooks,
        client: &WebhookClient,
    ) -> Result<()> {
        let kube = self.client()?;
        let params = PatchParams::apply(FIELD_MANAGER).force();
        if let Some(config) = webhooks.validating_configuration(name, client) {
            let api: Api<ValidatingWebhookConfiguration> = Api::all(kube.clone());
            api.patch(name, &params, &Patch::Apply(&config))
                .await
                .map_err(|e| {
                    EnvtestError::Webhook(format!(
                        "applying ValidatingWebhookConfiguration {name}: {e}"
                    ))
                })?;
        }
        if let Some(config) = webhooks.mutating_configuration(name, client) {
            let api: Api<MutatingWebhookConfiguration> = Api::all(kube);
            api.patch(name, &params, &Patch::Apply(&config))
                .await
                .map_err(|e| {
                    EnvtestError::Webhook(format!(
                        "applying MutatingWebhookConfiguration {name}: {e}"
                    ))
                })?;
        }
        Ok(())
    }

    /// Deletes the webhook configurations named `name` (those that exist).
    pub async fn uninstall_webhooks(&self, name: &str) -> Result<()> {
        let kube = self.client()?;
        let validating: Api<ValidatingWebhookConfiguration> = Api::all(kube.clone());
        let mutating: Api<MutatingWebhookConfiguration> = Api::all(kube);
        for result in [
            validating
                .delete(name, &DeleteParams::default())
                .await
                .map(|_| ()),
            mutating
                .delete(name, &DeleteParams::default())
                .await
                .map(|_| ()),
        ] {
            match result {
                Ok(()) => {}
                Err(kube::Error::Api(status)) if status.code == 404 => {}
                Err(e) => {
                    return Err(EnvtestError::Webhook(format!(
                        "deleting webhook configuration {name}: {e}"
                    )));
                }
            }
        }
        Ok(())
    }
}
