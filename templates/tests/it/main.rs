//! `cargo opkit`'s tests, in one test binary: one module per subcommand
//! or promise.

mod book;
mod create_api;
mod create_webhook;
mod dev_cluster;
mod example_in_sync;
mod image;
mod installer;
mod make_test_e2e;
mod new_multicluster;
mod new_project;
mod new_sharded;
mod persist;
mod published_crates;
mod registry_auth;
mod support;
mod token_service;
mod tutorial_in_sync;
mod written_counts;
