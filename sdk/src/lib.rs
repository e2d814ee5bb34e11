//! opkit: build Kubernetes operators in Rust, controller-runtime style.
#![deny(unsafe_code)]

pub mod cache;

pub mod config;
#[cfg(feature = "envtest")]
pub mod envtest;
pub mod workqueue;
pub mod controller;
pub mod handler;
pub mod predicate;
pub mod reconcile;
pub mod leader;
