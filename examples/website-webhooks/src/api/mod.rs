//! The two versions of `Website` (group `example.opkit.dev`).

pub mod v1;
pub mod v2;
