//! The website-webhooks example's tests, in one test binary.

mod in_cluster;
mod website;
