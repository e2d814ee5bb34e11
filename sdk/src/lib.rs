//! opkit: build Kubernetes operators in Rust, controller-runtime style.
#![deny(missing_docs)]
// docs.rs: items behind a feature say so (`--cfg docsrs`, nightly).
#![cfg_attr(docsrs, feature(doc_cfg))]
#![forbid(unsafe_code)]
#![warn(clippy::unwrap_used)]

// What a reconcile is asked and answers: leaf values, re-exported by
// `reconcile` (the client's `finalizer` helper, below it, returns them).
mod action;
mod request;

pub mod cache;
pub mod client;
pub mod conditions;

pub mod config;
pub mod controller;
pub mod derive;
mod handler;
mod host;
pub mod leader;
pub mod manager;
pub mod manifest;
pub mod metrics;
pub mod predicate;
pub mod rbac;
pub mod reconcile;
pub mod shard;
pub mod webhook;
pub mod workqueue;

#[cfg(test)]
mod test_log;

pub use derive::ControllerWiring;
/// `#[derive(Controller)]`: see [`derive`](mod@derive) for the `#[controller(...)]` options.
pub use opkit_macros::Controller;
