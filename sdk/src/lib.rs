//! opkit: build Kubernetes operators in Rust, controller-runtime style.
#![deny(unsafe_code)]

pub mod cache;

pub mod config;
#[cfg(feature = "envtest")]
pub mod envtest;
pub mod workqueue;
