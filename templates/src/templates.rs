//! The template files, embedded at build time (`build.rs` writes the
//! table: each set's files, their paths and contents).

include!(concat!(env!("OUT_DIR"), "/templates.rs"));
