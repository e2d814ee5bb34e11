//! Derive macros for opkit. Use them through the `opkit` crate, which
//! re-exports them; this crate holds no runtime code.
//!
//! The controller derive lands with the user-journey work; until then this
//! crate is intentionally empty.
#![warn(clippy::unwrap_used)]
