//! `example.opkit.dev/v2`: the hub and storage version; the host and the
//! scheme are separate fields, and a replica count is new.

use kube::CustomResource;
use opkit::webhook::{ConversionError, Hub, Spoke};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::v1;

// ANCHOR: v2
/// A website served by some replicas.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "example.opkit.dev",
    version = "v2",
    kind = "Website",
    namespaced
)]
pub struct WebsiteSpec {
    /// The DNS name.
    pub host: String,
    /// Served over HTTPS (defaulted to `true`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls: Option<bool>,
    /// How many replicas serve it (defaulted to 1, at most 5).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicas: Option<i32>,
}
// ANCHOR_END: v2

/// The annotation that keeps v2's `replicas` on a v1 object, so a round
/// trip through v1 loses nothing.
pub const REPLICAS_ANNOTATION: &str = "example.opkit.dev/replicas";

impl Website {
    /// `scheme://host`.
    pub fn url(&self) -> String {
        let scheme = if self.spec.tls.unwrap_or(true) {
            "https"
        } else {
            "http"
        };
        format!("{scheme}://{}", self.spec.host)
    }
}

// ANCHOR: conversion
impl Hub for Website {}

impl Spoke<Website> for v1::Website {
    fn to_hub(self) -> Result<Website, ConversionError> {
        let (tls, host) = match self.spec.url.split_once("://") {
            Some(("https", host)) => (true, host),
            Some(("http", host)) => (false, host),
            _ => {
                return Err(ConversionError::new(format!(
                    "spec.url {:?} must start with https:// or http://",
                    self.spec.url
                )));
            }
        };
        let mut metadata = self.metadata;
        let replicas = metadata
            .annotations
            .as_mut()
            .and_then(|a| a.remove(REPLICAS_ANNOTATION))
            .and_then(|r| r.parse().ok());
        Ok(Website {
            metadata,
            spec: WebsiteSpec {
                host: host.trim_end_matches('/').to_owned(),
                tls: Some(tls),
                replicas,
            },
        })
    }

    fn from_hub(hub: Website) -> Result<Self, ConversionError> {
        let url = hub.url();
        let mut metadata = hub.metadata;
        if let Some(replicas) = hub.spec.replicas {
            metadata
                .annotations
                .get_or_insert_default()
                .insert(REPLICAS_ANNOTATION.to_owned(), replicas.to_string());
        }
        Ok(v1::Website {
            metadata,
            spec: v1::WebsiteSpec { url },
        })
    }
}
// ANCHOR_END: conversion
