//! Starting cargo from a program that cargo itself started, without
//! disturbing the dependency builds of the target directory.
//!
//! ```no_run
//! // `cargo build` in a generated project, from a test of the project that
//! // generated it: the test's `CARGO_MANIFEST_DIR`, `CARGO_PKG_NAME`, ...
//! // do not reach the build.
//! let status = cargo_opkit::cargo_command()
//!     .arg("build")
//!     .current_dir("gen-operator")
//!     .status()?;
//!
//! // Any other command that runs cargo further down (here `make`), likewise.
//! let mut make = std::process::Command::new("make");
//! cargo_opkit::clear_crate_env(&mut make).arg("deploy");
//! # Ok::<(), std::io::Error>(())
//! ```
//!
//! `cargo test` and `cargo run` give the program they start the variables
//! cargo sets for a crate (`CARGO_MANIFEST_DIR`, `CARGO_PKG_NAME`,
//! `OUT_DIR`, ...). A cargo started by that program inherits them, and a
//! build script that watches one of them (`ring`'s watches
//! `CARGO_MANIFEST_DIR`) sees it changed and runs again: that crate and
//! every crate above it (rustls, kube, opkit, ...) rebuild, and rebuild once
//! more at the next plain `cargo build` in the same target directory.

use std::ffi::OsStr;
use std::process::Command;

/// Variables cargo sets for the crate it compiles, runs or tests, by
/// prefix or exact name (the cargo book, "Environment variables Cargo sets
/// for crates").
const CRATE_PREFIXES: [&str; 3] = ["CARGO_PKG_", "CARGO_MANIFEST_", "CARGO_BIN_EXE_"];
const CRATE_NAMES: [&str; 6] = [
    "CARGO_CRATE_NAME",
    "CARGO_BIN_NAME",
    "CARGO_PRIMARY_PACKAGE",
    "CARGO_TARGET_TMPDIR",
    "CARGO_RUSTC_CURRENT_DIR",
    "OUT_DIR",
];

/// Whether cargo sets `name` for the crate it starts (and so a nested
/// cargo should not inherit it).
fn is_crate_variable(name: &OsStr) -> bool {
    let Some(name) = name.to_str() else {
        return false;
    };
    CRATE_NAMES.contains(&name) || CRATE_PREFIXES.iter().any(|p| name.starts_with(p))
}

/// Removes from `command`'s environment the variables cargo set for the
/// crate this process belongs to (when cargo started it), so a cargo that
/// `command` runs builds exactly as a `cargo` typed in a shell would.
/// Everything else (`CARGO_TARGET_DIR`, `CARGO_HOME`, `PATH`, ...) is kept.
pub fn clear_crate_env(command: &mut Command) -> &mut Command {
    for (name, _) in std::env::vars_os() {
        if is_crate_variable(&name) {
            command.env_remove(name);
        }
    }
    command
}

/// The cargo to run (`$CARGO`, as cargo sets it for its subcommands, else
/// `cargo` on `PATH`), with [`clear_crate_env`] applied.
pub fn cargo_command() -> Command {
    let mut command = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
    clear_crate_env(&mut command);
    command
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_crate_variables_cargo_sets_are_recognised_and_nothing_else() {
        for name in [
            "CARGO_MANIFEST_DIR",
            "CARGO_MANIFEST_PATH",
            "CARGO_MANIFEST_LINKS",
            "CARGO_PKG_NAME",
            "CARGO_PKG_VERSION_MAJOR",
            "CARGO_CRATE_NAME",
            "CARGO_BIN_EXE_cargo-opkit",
            "CARGO_TARGET_TMPDIR",
            "OUT_DIR",
        ] {
            assert!(is_crate_variable(OsStr::new(name)), "{name}");
        }
        for name in [
            "CARGO",
            "CARGO_HOME",
            "CARGO_TARGET_DIR",
            "CARGO_INCREMENTAL",
            "CARGO_PROFILE_RELEASE_LTO",
            "CARGO_BUILD_JOBS",
            "PATH",
        ] {
            assert!(!is_crate_variable(OsStr::new(name)), "{name}");
        }
    }

    #[test]
    fn a_nested_command_does_not_inherit_them() {
        // This test process was started by cargo, so it has them.
        assert!(std::env::var_os("CARGO_MANIFEST_DIR").is_some());
        let output = {
            let mut command = Command::new("env");
            clear_crate_env(&mut command);
            command.output().expect("run env")
        };
        let env = String::from_utf8_lossy(&output.stdout);
        assert!(env.lines().any(|l| l.starts_with("PATH=")), "{env}");
        assert!(
            !env.lines()
                .any(|l| l.starts_with("CARGO_MANIFEST_DIR=") || l.starts_with("CARGO_PKG_")),
            "{env}"
        );
    }
}
