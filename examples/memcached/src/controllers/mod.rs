//! The operator's reconcilers, one per API type.

pub mod memcached;
// opkit:scaffold:controllers
