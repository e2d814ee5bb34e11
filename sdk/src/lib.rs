//! opkit: build Kubernetes operators in Rust, controller-runtime style.
#![deny(unsafe_code)]
#![warn(clippy::unwrap_used)]

pub mod cache;
pub mod client;

pub mod config;
pub mod controller;
#[cfg(feature = "envtest")]
pub mod envtest;
pub mod handler;
pub mod leader;
pub mod manager;
pub mod metrics;
pub mod predicate;
pub mod reconcile;
pub mod workqueue;
