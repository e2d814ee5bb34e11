//! What every journey of this binary shares: where the workspace and its
//! target directory are, running `cargo opkit` and cargo, and showing a
//! command's output when it fails.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The opkit workspace (generated projects depend on its crates).
pub fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("templates/ has a parent")
        .to_owned()
}

/// The target directory generated projects build in: this run's, so their
/// dependencies compile once.
pub fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace().join("target"))
}

/// A loopback address with a port no one listens on now (for a `make run`
/// of a journey: other journeys run theirs at the same time).
pub fn free_loopback_address() -> std::net::SocketAddr {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a free port");
    listener.local_addr().expect("address")
}

/// Runs `cargo-opkit ARGS` (ARGS start with `opkit`, as cargo passes them)
/// in `cwd`.
pub fn cargo_opkit(args: &[&str], cwd: &Path) -> Output {
    cargo_opkit_with(args, cwd, &[])
}

/// [`cargo_opkit`] with more environment variables.
pub fn cargo_opkit_with(args: &[&str], cwd: &Path, env: &[(&str, &str)]) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_cargo-opkit"));
    command
        .args(args)
        .current_dir(cwd)
        .env("CARGO_TARGET_DIR", target_dir());
    for (key, value) in env {
        command.env(key, value);
    }
    command.output().expect("run cargo-opkit")
}

/// Runs `cargo ARGS` in `dir` as a shell's cargo would.
pub fn cargo(args: &[&str], dir: &Path) -> Output {
    cargo_opkit::cargo_command()
        .args(args)
        .current_dir(dir)
        .env("CARGO_TARGET_DIR", target_dir())
        .output()
        .expect("run cargo")
}

/// `PATH` with this build's `cargo-opkit` first, so `cargo opkit` in a
/// generated project's Makefile runs it.
pub fn path_with_cargo_opkit() -> OsString {
    let bin_dir = Path::new(env!("CARGO_BIN_EXE_cargo-opkit"))
        .parent()
        .expect("bin dir")
        .to_owned();
    std::env::join_paths(std::iter::once(bin_dir).chain(std::env::split_paths(
        &std::env::var_os("PATH").unwrap_or_default(),
    )))
    .expect("PATH")
}

/// A command's status and output, for an assertion's message.
pub fn text(output: &Output) -> String {
    format!(
        "status {}\n--- stdout\n{}\n--- stderr\n{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

/// Panics with the output when the command failed.
pub fn succeeds(output: Output, what: &str) {
    assert!(output.status.success(), "{what} failed:\n{}", text(&output));
}

/// `cargo opkit new NAME --group GROUP --kind KIND` in `dir`, depending on
/// this checkout and resolving to the workspace's Cargo.lock, without
/// rendering the manifests (the first `create` or `make` does); panics if
/// it fails. The project's directory.
pub fn new_project(dir: &Path, name: &str, group: &str, kind: &str) -> PathBuf {
    new_project_with(dir, name, group, kind, &[])
}

/// [`new_project`] with more flags for `cargo opkit new` (`--sharding`,
/// `--multicluster PROVIDER`).
pub fn new_project_with(
    dir: &Path,
    name: &str,
    group: &str,
    kind: &str,
    flags: &[&str],
) -> PathBuf {
    let workspace = workspace();
    let lock = workspace.join("Cargo.lock");
    let mut args = vec![
        "opkit",
        "new",
        name,
        "--group",
        group,
        "--kind",
        kind,
        "--dir",
        dir.to_str().expect("utf-8"),
        "--opkit-path",
        workspace.to_str().expect("utf-8"),
        "--lock-from",
        lock.to_str().expect("utf-8"),
        "--skip-manifests",
    ];
    args.extend_from_slice(flags);
    succeeds(cargo_opkit(&args, dir), "cargo opkit new");
    dir.join(name)
}

/// `cargo opkit manifests` in `project` (what `new`, `create api` and
/// `create webhook` do last without `--skip-manifests`); panics if it fails.
pub fn render_manifests(project: &Path) {
    succeeds(
        cargo_opkit(
            &[
                "opkit",
                "manifests",
                "--dir",
                project.to_str().expect("utf-8"),
            ],
            project,
        ),
        "cargo opkit manifests",
    );
}

/// Where journeys keep the projects they build between runs:
/// `$CARGO_TARGET_DIR/opkit-generated`, one directory per journey state.
pub fn generated_root() -> PathBuf {
    target_dir().join("opkit-generated")
}

pub use super::persist::{Persisted, sync_into};

/// [`super::persist::persist`] under [`generated_root`].
pub fn persist(staged: &Path, state: &str, package: Option<&str>) -> Persisted {
    super::persist::persist(&generated_root(), staged, state, package)
}

/// `cargo fmt --check` and `cargo clippy --all-targets -D warnings` pass in
/// `project`; panics with their output if not.
pub fn lint(project: &Path) {
    let output = cargo(&["fmt", "--check"], project);
    assert!(
        output.status.success(),
        "{}: cargo fmt --check:\n{}",
        project.display(),
        text(&output)
    );
    let output = cargo(
        &["clippy", "--all-targets", "--quiet", "--", "-D", "warnings"],
        project,
    );
    assert!(
        output.status.success(),
        "{}: cargo clippy:\n{}",
        project.display(),
        text(&output)
    );
}
