//! The operator's API types (custom resources).

pub mod backup;
pub mod backup_v2;
// opkit:scaffold:api
