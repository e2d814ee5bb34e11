//! `example.opkit.dev/v1`: the first version, a single URL.

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

// ANCHOR: v1
/// A website, addressed by its URL.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "example.opkit.dev",
    version = "v1",
    kind = "Website",
    namespaced
)]
pub struct WebsiteSpec {
    /// `https://host` or `http://host`.
    pub url: String,
}
// ANCHOR_END: v1
