//! Shared helpers for opkit's end-to-end tests.
