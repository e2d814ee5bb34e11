//! The backup-operator's tests against a real kube-apiserver and etcd
//! (`opkit_envtest`), in one test binary. A generated project has them as
//! `tests/backup_controller.rs`, `tests/backup_webhook.rs`,
//! `tests/backup_conversion.rs` and `tests/manifests.rs`; opkit's
//! workspace gathers each crate's tests in one binary (one link).
//! `tests/e2e.rs` (`make test-e2e`) is separate and `#[ignore]`d.

mod controller;
mod conversion;
mod manifests;
mod support;
mod webhook;
