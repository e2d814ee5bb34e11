//! [`ClusterProfile`]: a member cluster as the Cluster Inventory API
//! (KEP-4322, `multicluster.x-k8s.io/v1alpha1`) publishes it on a hub, the
//! kind [`ClusterProfiles`](super::ClusterProfiles) watches.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The label a cluster manager puts on its `ClusterProfile`s, its own name
/// as the value (`x-k8s.io/cluster-manager`).
pub const CLUSTER_MANAGER_LABEL: &str = "x-k8s.io/cluster-manager";

/// The condition a `ClusterProfile` reports its control plane's health
/// with (`ControlPlaneHealthy`): [`ClusterProfiles`](super::ClusterProfiles)
/// engages a profile once it is `True`.
pub const CONTROL_PLANE_HEALTHY: &str = "ControlPlaneHealthy";

/// The spec of a [`ClusterProfile`]: a cluster of the inventory, as its
/// cluster manager (Open Cluster Management, Fleet, Karmada, ...) publishes
/// it on the hub; an operator reads it. `ClusterProfile` (made by the
/// derive) carries this and a [`ClusterProfileStatus`], what the cluster
/// manager observed of the cluster, how to reach it among that.
/// `ClusterProfile::crd()` is the kind's CustomResourceDefinition, for a
/// hub that has none yet (tests, a local cluster).
///
/// ```
/// use kube::{CustomResourceExt, Resource};
/// use opkit::multicluster::ClusterProfile;
///
/// assert_eq!(ClusterProfile::api_version(&()), "multicluster.x-k8s.io/v1alpha1");
/// assert_eq!(ClusterProfile::crd_name(), "clusterprofiles.multicluster.x-k8s.io");
/// ```
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "multicluster.x-k8s.io",
    version = "v1alpha1",
    kind = "ClusterProfile",
    namespaced,
    status = "ClusterProfileStatus",
    doc = "A cluster of the Cluster Inventory API (KEP-4322), as its cluster manager publishes it on the hub: read by `ClusterProfiles`."
)]
#[serde(rename_all = "camelCase")]
pub struct ClusterProfileSpec {
    /// A name for people.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub display_name: Option<String>,
    /// The cluster manager that owns this profile (immutable).
    pub cluster_manager: ClusterManager,
}

/// The cluster manager that owns a [`ClusterProfile`].
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct ClusterManager {
    /// Its name (also the value of [`CLUSTER_MANAGER_LABEL`]).
    pub name: String,
}

/// What the cluster manager observed of a cluster.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClusterProfileStatus {
    /// Its conditions, [`CONTROL_PLANE_HEALTHY`] among them (read them
    /// with [`crate::conditions::find`] and [`is_true`](crate::conditions::is_true)).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "crate::conditions::schema")]
    pub conditions: Vec<Condition>,
    /// Its version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<ClusterVersion>,
    /// Its properties (KEP-2149's `ClusterProperty` names, such as
    /// `clusterset.k8s.io/cluster-id`, or the cluster manager's own).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub properties: Vec<ClusterProperty>,
    /// How to reach it, one entry per kind of access (the field's name
    /// before `accessProviders`; read too, an entry of `accessProviders`
    /// of the same name wins).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub credential_providers: Vec<AccessProvider>,
    /// How to reach it, one entry per kind of access (`"kubeconfig"`,
    /// `"oidc"`, a cloud's): its API server, and what the access
    /// provider's plugin needs.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub access_providers: Vec<AccessProvider>,
}

impl ClusterProfileStatus {
    /// The access provider named `name`: from `accessProviders`, else from
    /// the older `credentialProviders`.
    pub fn access_provider(&self, name: &str) -> Option<&AccessProvider> {
        let named = |p: &&AccessProvider| p.name == name;
        self.access_providers
            .iter()
            .find(named)
            .or_else(|| self.credential_providers.iter().find(named))
    }
}

/// A cluster's version.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct ClusterVersion {
    /// Its Kubernetes version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kubernetes: Option<String>,
}

/// A property of a cluster: a name, its value, and when it was observed.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClusterProperty {
    /// The property's name.
    pub name: String,
    /// Its value.
    pub value: String,
    /// When the cluster manager last observed it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_observed_time: Option<Time>,
}

/// One way to reach a cluster: the name of the kind of access (matched
/// against the operator's [`ClusterProfileAccess`](super::ClusterProfileAccess))
/// and the cluster's connection settings.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct AccessProvider {
    /// The kind of access (`"kubeconfig"`, `"oidc"`, a cloud's name).
    pub name: String,
    /// The cluster's API server and how it is trusted.
    #[serde(default)]
    pub cluster: AccessCluster,
}

/// A cluster's connection settings, as a kubeconfig's `cluster` entry
/// (client-go's `clientcmd/api/v1.Cluster`): no credentials, which come
/// from the access provider's exec plugin.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub struct AccessCluster {
    /// The API server's URL.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server: Option<String>,
    /// The name the server's certificate is checked against, if not the
    /// URL's host.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls_server_name: Option<String>,
    /// Skip checking the server's certificate (never in production).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub insecure_skip_tls_verify: Option<bool>,
    /// The CA bundle (PEM, base64-encoded) the server's certificate is
    /// checked against.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub certificate_authority_data: Option<String>,
    /// A proxy for requests to the server.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub proxy_url: Option<String>,
    /// Do not ask the server for compressed responses.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disable_compression: Option<bool>,
    /// Extensions: `client.authentication.k8s.io/exec` (handed to the exec
    /// plugin as its cluster's `config`), and KEP-5339's
    /// `clusterprofiles.multicluster.x-k8s.io/exec/additional-args` and
    /// `.../additional-envs` (per-cluster arguments and environment for
    /// the plugin, taken as the operator's access configuration allows).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub extensions: Vec<AccessExtension>,
}

/// A named extension of an [`AccessCluster`].
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct AccessExtension {
    /// Its name.
    pub name: String,
    /// Its value, any JSON.
    #[serde(default)]
    #[schemars(schema_with = "any_json")]
    pub extension: serde_json::Value,
}

/// The schema of a value of any JSON type, kept as it is.
fn any_json(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({ "x-kubernetes-preserve-unknown-fields": true })
}
