//! [`LocalWebhooks`]: webhooks served by a manager running outside the
//! cluster (`make run`), registered by URL with an apiserver on the same
//! machine for as long as the server runs (feature `dev-cert`); see the
//! type's docs.
//!
//! ```
//! use opkit::webhook::LocalWebhooks;
//!
//! assert!(LocalWebhooks::apiserver_is_on_this_host("https://127.0.0.1:6443"));
//! ```

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};

use json_patch::jsonptr::PointerBuf;
use json_patch::{PatchOperation, ReplaceOperation};
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DeleteParams, Patch, PatchParams};

use super::dev_cert::DevCertificate;
use super::error::WebhookError;
use super::manifests::WebhookClient;
use super::webhooks::Webhooks;

/// The field manager of the configurations a local server applies.
const FIELD_MANAGER: &str = "opkit-local-webhooks";

/// Serve the webhooks for an apiserver on this machine, registered by URL
/// while the server runs. Give it to
/// [`WebhookServer::local`](super::WebhookServer::local).
///
/// ```no_run
/// use opkit::manager::{Manager, ManagerError};
/// use opkit::webhook::{LocalWebhooks, WebhookServer, Webhooks};
///
/// # async fn example(webhooks: Webhooks) -> Result<(), ManagerError> {
/// let local = LocalWebhooks::new("memcached-operator-local").crd("memcacheds.cache.example.com");
/// let manager = Manager::builder()
///     .webhook_server(WebhookServer::new(webhooks).bind_address("127.0.0.1:9443").local(local))
///     .build()
///     .await?;
/// manager.run().await
/// # }
/// ```
///
/// At [`ManagerBuilder::build`](crate::manager::ManagerBuilder::build),
/// when the kubeconfig's server is on this machine (a loopback address, or
/// an address of one of its interfaces: opkit's local cluster and control
/// plane):
///
/// 1. a development certificate ([`DevCertificate`]) is issued for the
///    server's address and written to a directory of its own, which the
///    server reads;
/// 2. a ValidatingWebhookConfiguration and a MutatingWebhookConfiguration
///    named as given (those the webhooks have) are applied, each webhook
///    at `https://<address><path>` with the certificate's CA as its
///    `caBundle`;
/// 3. the conversion webhook of each named CRD is pointed there too.
///
/// When the server stops (the manager's shutdown, e.g. Ctrl-C), the
/// configurations are deleted, the CRDs' `spec.conversion` is put back as it
/// was, and the certificate's directory is removed. A process killed
/// outright leaves them: the next start replaces them.
///
/// An apiserver elsewhere (a remote cluster) could not call this machine,
/// so there the server is left out with one warning. kind's apiserver is
/// published on 127.0.0.1 but runs in a container, which cannot reach the
/// host's loopback: serve the webhooks in the cluster there (`make deploy`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LocalWebhooks {
    name: String,
    crds: Vec<String>,
}

impl LocalWebhooks {
    /// Registers the webhooks in configurations named `name` (one
    /// validating, one mutating: those the webhooks have). Choose a name of
    /// its own (the operator's name with `-local`), so that the
    /// configurations of a deployed operator stay as they are.
    pub fn new(name: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            crds: Vec::new(),
        }
    }

    /// Points the conversion webhook of the CRD `name` at this server while
    /// it runs (a kind the webhooks convert).
    pub fn crd(mut self, name: impl Into<String>) -> Self {
        self.crds.push(name.into());
        self
    }

    /// The configurations' name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Whether an apiserver at `url` runs on this machine: its host is
    /// `localhost`, a loopback address, or an address of one of this
    /// machine's interfaces (one a socket can bind to). Names other than
    /// `localhost` are not looked up, and count as elsewhere.
    pub fn apiserver_is_on_this_host(url: &str) -> bool {
        let Ok(uri) = url.parse::<http::Uri>() else {
            return false;
        };
        let Some(host) = uri.host() else {
            return false;
        };
        if host.eq_ignore_ascii_case("localhost") {
            return true;
        }
        match host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .parse::<IpAddr>()
        {
            Ok(ip) => ip.is_loopback() || std::net::UdpSocket::bind((ip, 0)).is_ok(),
            Err(_) => false,
        }
    }

    /// Issues the certificate for `bound` (the server's address; an
    /// unspecified one is reached on loopback), writes it under a new
    /// directory and applies the configurations and CRD patches with
    /// `client`. Returns what [`Registered::remove`] undoes, and the
    /// certificate's files.
    pub(crate) async fn register(
        &self,
        client: &kube::Client,
        webhooks: &Webhooks,
        bound: SocketAddr,
    ) -> Result<(Registered, PathBuf, PathBuf), WebhookError> {
        let ip = match bound.ip() {
            ip if ip.is_unspecified() => IpAddr::V4(Ipv4Addr::LOCALHOST),
            ip => ip,
        };
        let address = SocketAddr::new(ip, bound.port());
        let host = ip.to_string();
        let certificate = DevCertificate::generate(&[host.as_str(), "localhost"])?;
        let dir = std::env::temp_dir().join(format!(
            "opkit-local-webhooks-{}-{}",
            self.name,
            std::process::id()
        ));
        let (cert, key) = certificate.write_to(&dir)?;
        let url = format!("https://{address}");
        let target = WebhookClient::url(url.clone()).ca_bundle(certificate.ca_pem());
        let mut registered = Registered {
            client: client.clone(),
            name: self.name.clone(),
            validating: false,
            mutating: false,
            crds: Vec::new(),
            dir,
        };
        if let Err(error) = self.apply(&mut registered, webhooks, &target).await {
            // Nothing half-registered stays behind.
            registered.remove().await;
            return Err(error);
        }
        tracing::info!(
            url = %url,
            configurations = %self.name,
            crds = ?self.crds,
            "webhooks served locally: registered with the apiserver by URL until the manager stops"
        );
        Ok((registered, cert, key))
    }
}

impl LocalWebhooks {
    /// Applies the configurations and points the CRDs' conversion at
    /// `target`, noting each in `registered` as it goes.
    async fn apply(
        &self,
        registered: &mut Registered,
        webhooks: &Webhooks,
        target: &WebhookClient,
    ) -> Result<(), WebhookError> {
        let client = &registered.client;
        let failed = |action, object: String| {
            move |source| WebhookError::LocalRegistration {
                action,
                object,
                source: Box::new(source),
            }
        };
        if let Some(config) = webhooks.validating_configuration(&self.name, target) {
            registered.validating = true;
            apply_configuration(client, &self.name, &config)
                .await
                .map_err(failed(
                    "applying",
                    format!("ValidatingWebhookConfiguration {}", self.name),
                ))?;
        }
        if let Some(config) = webhooks.mutating_configuration(&self.name, target) {
            registered.mutating = true;
            apply_configuration(client, &self.name, &config)
                .await
                .map_err(failed(
                    "applying",
                    format!("MutatingWebhookConfiguration {}", self.name),
                ))?;
        }
        let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
        for name in &self.crds {
            let object = format!("CustomResourceDefinition {name}");
            let crd = crds
                .get(name)
                .await
                .map_err(failed("reading", object.clone()))?;
            let converted = webhooks.crd_with_conversion(crd.clone(), target);
            let (Some(before), Some(after)) = (crd.spec.conversion, converted.spec.conversion)
            else {
                continue;
            };
            replace_conversion(&crds, name, &after)
                .await
                .map_err(failed("pointing the conversion of", object))?;
            registered.crds.push((name.clone(), before));
        }
        Ok(())
    }
}

/// Replaces the CRD `name`'s `spec.conversion` with `conversion`.
async fn replace_conversion(
    crds: &Api<CustomResourceDefinition>,
    name: &str,
    conversion: &impl serde::Serialize,
) -> Result<(), kube::Error> {
    let value = serde_json::to_value(conversion).map_err(kube::Error::SerdeError)?;
    let patch = json_patch::Patch(vec![PatchOperation::Replace(ReplaceOperation {
        path: PointerBuf::from_tokens(["spec", "conversion"]),
        value,
    })]);
    crds.patch(name, &PatchParams::default(), &Patch::<()>::Json(patch))
        .await
        .map(|_| ())
}

/// What a local server registered: removed when it stops.
#[derive(Clone)]
pub(crate) struct Registered {
    client: kube::Client,
    name: String,
    validating: bool,
    mutating: bool,
    /// Each CRD, with its `spec.conversion` from before.
    crds: Vec<(
        String,
        k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceConversion,
    )>,
    dir: PathBuf,
}

impl std::fmt::Debug for Registered {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Registered")
            .field("name", &self.name)
            .field("dir", &self.dir)
            .finish_non_exhaustive()
    }
}

impl Registered {
    /// Deletes the configurations, puts the CRDs' conversion back and
    /// removes the certificate's directory; each failure is logged, and the
    /// rest still done.
    pub(crate) async fn remove(self) {
        if self.validating {
            delete_configuration::<ValidatingWebhookConfiguration>(&self.client, &self.name).await;
        }
        if self.mutating {
            delete_configuration::<MutatingWebhookConfiguration>(&self.client, &self.name).await;
        }
        let crds: Api<CustomResourceDefinition> = Api::all(self.client.clone());
        for (name, before) in &self.crds {
            if let Err(error) = replace_conversion(&crds, name, before).await {
                tracing::warn!(crd = %name, %error, "could not put the CRD's conversion webhook back");
            }
        }
        remove_dir(&self.dir);
        tracing::info!(configurations = %self.name, "local webhooks unregistered");
    }
}

/// A webhook configuration kind (cluster-scoped).
trait Configuration:
    kube::Resource<DynamicType = (), Scope = kube::core::ClusterResourceScope>
    + Clone
    + serde::Serialize
    + serde::de::DeserializeOwned
    + std::fmt::Debug
{
}
impl Configuration for ValidatingWebhookConfiguration {}
impl Configuration for MutatingWebhookConfiguration {}

/// Server-side applies `config` as `name`, taking its fields over.
async fn apply_configuration<K: Configuration>(
    client: &kube::Client,
    name: &str,
    config: &K,
) -> Result<(), kube::Error> {
    let params = PatchParams::apply(FIELD_MANAGER).force();
    Api::<K>::all(client.clone())
        .patch(name, &params, &Patch::Apply(config))
        .await
        .map(|_| ())
}

/// Deletes the configuration `name` (gone already is fine; a failure is
/// logged).
async fn delete_configuration<K: Configuration>(client: &kube::Client, name: &str) {
    match Api::<K>::all(client.clone())
        .delete(name, &DeleteParams::default())
        .await
    {
        Ok(_) => {}
        Err(kube::Error::Api(status)) if status.code == 404 => {}
        Err(error) => {
            tracing::warn!(configuration = %name, %error, "could not delete the local webhook configuration")
        }
    }
}

fn remove_dir(dir: &Path) {
    if let Err(error) = std::fs::remove_dir_all(dir)
        && error.kind() != std::io::ErrorKind::NotFound
    {
        tracing::warn!(dir = %dir.display(), %error, "could not remove the local webhook certificate");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_and_this_machines_addresses_are_on_this_host() {
        for url in [
            "https://127.0.0.1:6443",
            "https://localhost:6443",
            "https://[::1]:6443",
            "https://127.0.0.5",
        ] {
            assert!(LocalWebhooks::apiserver_is_on_this_host(url), "{url}");
        }
        // TEST-NET-3 (RFC 5737): never an address of this machine.
        for url in [
            "https://203.0.113.7:6443",
            "https://api.example.com:6443",
            "not a url",
            "/no/host",
        ] {
            assert!(!LocalWebhooks::apiserver_is_on_this_host(url), "{url}");
        }
    }
}
