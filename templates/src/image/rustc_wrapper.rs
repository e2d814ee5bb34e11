//! `cargo-opkit` as cargo's `RUSTC_WORKSPACE_WRAPPER` during an image
//! build: it adds the remap of the project's own directory to the rustc
//! calls of workspace members only.
//!
//! Every flag in `RUSTFLAGS` is part of every crate's fingerprint, so a
//! remap naming the project's directory there would rebuild all
//! dependencies for each project sharing a target directory (and for the
//! same project in another checkout). The dependencies only need the
//! target directory and cargo home remapped, which do not change; the
//! members get the project's remap through this wrapper.
//!
//! ```no_run
//! use std::process::ExitCode;
//!
//! fn main() -> ExitCode {
//!     // First thing: when cargo runs this program as the rustc wrapper of
//!     // an image build, it only runs rustc.
//!     if let Some(code) = cargo_opkit::image::serve_as_rustc_wrapper() {
//!         return code;
//!     }
//!     // ... the program's own work, which may build images ...
//!     ExitCode::SUCCESS
//! }
//! ```

use std::ffi::OsString;
use std::process::{Command, ExitCode};
use std::sync::atomic::{AtomicBool, Ordering};

/// The remap (`FROM=TO`) the wrapper adds to members' rustc calls.
pub(crate) const REMAP_ENV: &str = "OPKIT_IMAGE_MEMBER_REMAP";
/// A `RUSTC_WORKSPACE_WRAPPER` the user had set, which the wrapper runs.
pub(crate) const INNER_WRAPPER_ENV: &str = "OPKIT_IMAGE_INNER_WRAPPER";

/// Whether this process answers cargo as a wrapper (it called
/// [`serve_as_rustc_wrapper`] and was not one).
static SERVES: AtomicBool = AtomicBool::new(false);

/// Whether an image build may name this process as the workspace wrapper.
pub(crate) fn available() -> bool {
    SERVES.load(Ordering::Relaxed)
}

/// Call first in `main` of a program that builds images: when cargo runs
/// the program as the rustc wrapper of an image build, this runs rustc
/// (with the project's path remap) and returns its exit code; otherwise it
/// returns `None`, and image builds from this process keep dependencies'
/// flags independent of the project's path (see the module docs). Programs
/// that don't call it still build correct images; their builds just don't
/// share dependencies across project directories.
pub fn serve_as_rustc_wrapper() -> Option<ExitCode> {
    let Some(remap) = std::env::var_os(REMAP_ENV) else {
        SERVES.store(true, Ordering::Relaxed);
        return None;
    };
    let mut args = std::env::args_os().skip(1);
    let Some(rustc) = args.next() else {
        eprintln!("error: {REMAP_ENV} is set, but cargo passed no rustc to wrap");
        return Some(ExitCode::FAILURE);
    };
    let inner = std::env::var_os(INNER_WRAPPER_ENV).filter(|w| !w.is_empty());
    let mut command = match &inner {
        Some(wrapper) => {
            let mut c = Command::new(wrapper);
            c.arg(&rustc);
            c
        }
        None => Command::new(&rustc),
    };
    // First, so the RUSTFLAGS remaps that follow (target directory, cargo
    // home: longer or unrelated prefixes) win where both match.
    let mut flag = OsString::from("--remap-path-prefix=");
    flag.push(&remap);
    command
        .arg(flag)
        .args(args)
        .env_remove(REMAP_ENV)
        .env_remove(INNER_WRAPPER_ENV);
    match command.status() {
        Ok(status) => Some(
            status
                .code()
                .and_then(|c| u8::try_from(c).ok())
                .map_or(ExitCode::FAILURE, ExitCode::from),
        ),
        Err(e) => {
            let program = inner.as_ref().unwrap_or(&rustc);
            eprintln!("error: cannot run {}: {e}", program.to_string_lossy());
            Some(ExitCode::FAILURE)
        }
    }
}
