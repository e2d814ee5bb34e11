//! Unit tests of the manager.
