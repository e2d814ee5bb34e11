//! opkit: build Kubernetes operators in Rust, controller-runtime style.
#![deny(unsafe_code)]
#![warn(clippy::unwrap_used)]

pub mod cache;
pub mod client;
pub mod conditions;

pub mod config;
pub mod controller;
pub mod derive;
#[cfg(feature = "envtest")]
pub mod envtest;
pub mod handler;
pub mod leader;
pub mod manager;
pub mod manifest;
pub mod metrics;
pub mod predicate;
pub mod rbac;
pub mod reconcile;
pub mod webhook;
pub mod workqueue;

pub use derive::ControllerWiring;
/// `#[derive(Controller)]`: see [`derive`](mod@derive) for the `#[controller(...)]` options.
pub use opkit_macros::Controller;
