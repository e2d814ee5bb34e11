//! The checked-in decoders are what the generator makes now: run it into a
//! temporary file and compare (`make generate` rewrites them).

use std::{fs, path::Path, process::Command};

#[test]
fn checked_in_decoders_are_up_to_date() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let fresh = dir.path().join("generated.rs");
    let status = Command::new(env!("CARGO_BIN_EXE_opkit-protobuf-gen"))
        .arg(&fresh)
        .status()
        .expect("the generator runs");
    assert!(status.success(), "the generator failed (see its output)");
    let checked_in = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../sdk/src/cache/decode/protobuf/generated.rs");
    let want = fs::read_to_string(&fresh).expect("generated");
    let have = fs::read_to_string(&checked_in).expect("checked in");
    if want != have {
        let line = want
            .lines()
            .zip(have.lines())
            .position(|(a, b)| a != b)
            .unwrap_or_else(|| want.lines().count().min(have.lines().count()));
        panic!(
            "{} is out of date (first difference at line {}): run `make generate`",
            checked_in.display(),
            line + 1
        );
    }
}
