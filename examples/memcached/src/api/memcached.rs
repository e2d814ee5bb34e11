//! The `Memcached` custom resource (cache.example.com/v1alpha1), as in
//! operator-sdk's tutorial.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// `Available`: the Deployment reports `spec.size` available replicas for
/// the current spec.
pub const AVAILABLE: &str = "Available";
/// `Progressing`: the Deployment is being created or scaled and has not
/// reported the replicas yet.
pub const PROGRESSING: &str = "Progressing";
/// `Degraded`: the last reconcile failed (the message says why).
pub const DEGRADED: &str = "Degraded";

/// The desired state of a Memcached: how many memcached pods to run.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "cache.example.com",
    version = "v1alpha1",
    kind = "Memcached",
    namespaced,
    status = "MemcachedStatus",
    shortname = "mc",
    doc = "A memcached cluster: a Deployment of `size` memcached pods behind a Service.",
    printcolumn = r#"{"name":"Size","type":"integer","jsonPath":".spec.size"}"#,
    printcolumn = r#"{"name":"Available","type":"string","jsonPath":".status.conditions[?(@.type==\"Available\")].status"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct MemcachedSpec {
    /// How many memcached pods to run, 1 to 5 (the apiserver rejects other values).
    #[schemars(range(min = 1, max = 5))]
    pub size: i32,
}

/// The observed state of a Memcached.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MemcachedStatus {
    /// The generation of the spec this status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// `Available`, `Progressing` and `Degraded`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "opkit::conditions::schema")]
    pub conditions: Vec<Condition>,
}
