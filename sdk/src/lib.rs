//! opkit: build Kubernetes operators in Rust, controller-runtime style.
#![deny(unsafe_code)]

#[cfg(feature = "envtest")]
pub mod envtest;
