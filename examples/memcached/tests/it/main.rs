//! The Memcached operator's tests, in one test binary: one module per
//! area, `support` shared.

mod deploy;
mod manifests;
mod memcached_controller;

mod support;
