//! The operator's API types (custom resources).

pub mod memcached;
// opkit:scaffold:api
