//! The book's Rust code, compiled (and, unless `no_run`, run) as doc tests
//! of this crate against the workspace's crates: one item per page of
//! `book/src` that has Rust code. templates/tests/it/book.rs fails when a
//! page with Rust code is missing here.

/// Quick start.
#[doc = include_str!("../../book/src/quick-start.md")]
pub struct QuickStart;

/// Testing.
#[doc = include_str!("../../book/src/testing.md")]
pub struct Testing;

/// Reconciling.
#[doc = include_str!("../../book/src/concepts/reconcile.md")]
pub struct Reconciling;

/// The informer cache.
#[doc = include_str!("../../book/src/concepts/cache.md")]
pub struct TheCache;

/// The manager.
#[doc = include_str!("../../book/src/concepts/manager.md")]
pub struct TheManager;

/// The local cluster.
#[doc = include_str!("../../book/src/concepts/local-cluster.md")]
pub struct LocalCluster;

/// The `#[controller(...)]` reference.
#[doc = include_str!("../../book/src/reference/controller.md")]
pub struct ControllerReference;

/// Migrating from controller-runtime.
#[doc = include_str!("../../book/src/guides/from-controller-runtime.md")]
pub struct FromControllerRuntime;
