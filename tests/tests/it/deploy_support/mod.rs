//! Helpers shared by the `deploy*` tests: running `make` and `kubectl` the
//! way a user does, against a local cluster's kubeconfig.
#![allow(dead_code)]

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

/// The workspace root (this crate lives in `tests/`).
pub fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ has a parent")
        .to_owned()
}

/// The workspace's target directory.
pub fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace().join("target"))
}

/// Generated projects that persist between runs (shared with cargo-opkit's
/// journeys).
#[path = "../../../../templates/tests/it/persist.rs"]
pub mod persist;

/// [`persist::persist`] under `$CARGO_TARGET_DIR/opkit-generated`, then the
/// project's manifests rendered there (`cargo opkit manifests`, what `cargo
/// opkit new` does last without `--skip-manifests`).
pub fn persist_and_render(staged: &Path, state: &str) -> persist::Persisted {
    let persisted = persist::persist(&target_dir().join("opkit-generated"), staged, state, None);
    let output = std::process::Command::new(target_dir().join("debug/cargo-opkit"))
        .args(["opkit", "manifests", "--dir"])
        .arg(&persisted.dir)
        .env("CARGO_TARGET_DIR", target_dir())
        .output()
        .expect("run cargo-opkit");
    assert!(
        output.status.success(),
        "cargo opkit manifests:\n{}",
        text(&output)
    );
    persisted
}

/// Builds the workspace's `cargo-opkit` (the Makefiles run `cargo opkit`)
/// as `cargo test --workspace --all-features` builds it for the crates'
/// integration tests (each crate's one binary, `it`): in a `make test` it
/// is built already, and the tests running beside this one never see
/// `target/debug/cargo-opkit` swapped for another build of it.
pub fn build_cargo_opkit() {
    let output = cargo_opkit::cargo_command()
        .args(["test", "--workspace", "--all-features", "--no-run"])
        .args(["--test", "it"])
        .current_dir(workspace())
        .env("CARGO_TARGET_DIR", target_dir())
        .output()
        .expect("run cargo");
    assert!(
        output.status.success(),
        "building cargo-opkit:\n{}",
        text(&output)
    );
}

/// An operator project with the Makefile `cargo opkit new` generates.
#[derive(Debug, Clone)]
pub struct Project {
    /// The project name (`memcached-operator`).
    pub name: &'static str,
    /// The namespace it deploys to.
    pub namespace: &'static str,
    /// The API group of its kinds.
    pub group: &'static str,
    /// The directory, relative to the workspace (or absolute).
    pub path: &'static str,
}

impl Project {
    /// The project's directory.
    pub fn dir(&self) -> PathBuf {
        workspace().join(self.path)
    }

    /// The manager's Deployment (and ServiceAccount) name.
    pub fn manager(&self) -> String {
        format!("{}-controller-manager", self.name)
    }
}

/// `examples/memcached`.
pub const MEMCACHED: Project = Project {
    name: "memcached-operator",
    namespace: "memcached-operator-system",
    group: "cache.example.com",
    path: "examples/memcached",
};

/// `kubectl` from the node assets and the kubeconfig it talks through.
pub struct Tools {
    /// The kubectl binary.
    pub kubectl: PathBuf,
    /// The admin kubeconfig of the local cluster.
    pub kubeconfig: PathBuf,
}

impl Tools {
    /// kubectl from `make cluster-assets`, talking to `kubeconfig`.
    pub fn new(kubeconfig: &Path) -> Self {
        let assets = opkit_envtest::find_node_assets()
            .expect("the node assets (make cluster-assets), for kubectl");
        Self {
            kubectl: assets.bin("kubectl"),
            kubeconfig: kubeconfig.to_owned(),
        }
    }

    /// `make <args>` in `dir`, with `KUBECTL` and `KUBECONFIG` set and the
    /// workspace's `cargo-opkit` first on `PATH`.
    pub fn make(&self, dir: &Path, args: &[&str]) -> Output {
        self.make_command(dir, args).output().expect("run make")
    }

    /// The `make` command [`Tools::make`] runs.
    pub fn make_command(&self, dir: &Path, args: &[&str]) -> Command {
        let path = std::env::var_os("PATH").unwrap_or_default();
        let mut paths = vec![target_dir().join("debug")];
        paths.extend(std::env::split_paths(&path));
        // Journeys run in separate test processes, several on one project
        // (examples/memcached): `make image` writes the image's layout into
        // the shared target dir, so one process at a time builds a project's
        // image (flock(1) on a lock file per project) ...
        let mut command = if args.first() == Some(&"image") {
            let project = dir.file_name().unwrap_or_default().to_string_lossy();
            let mut command = Command::new("flock");
            command
                .arg(target_dir().join(format!("image-{project}.lock")))
                .arg("make");
            command
        } else {
            Command::new("make")
        };
        cargo_opkit::clear_crate_env(&mut command)
            .arg("--no-print-directory")
            .arg(format!("KUBECTL={}", self.kubectl.display()))
            // ... and what `make image PUSH=1` pushed, which `make deploy`
            // and `make build-installer` deploy, is recorded per cluster,
            // not in the project's `.pushed-image`.
            .arg(format!(
                "PUSHED={}",
                self.kubeconfig.with_file_name("pushed-image").display()
            ))
            .args(args)
            .current_dir(dir)
            .env("KUBECONFIG", &self.kubeconfig)
            .env("CARGO_TARGET_DIR", target_dir())
            // A generated project ships with fat LTO (its Cargo.toml);
            // what the journeys prove does not depend on it, and cargo's
            // default release profile shares dependency builds with the
            // workspace's examples and links in seconds.
            .env("CARGO_PROFILE_RELEASE_LTO", "false")
            .env("CARGO_PROFILE_RELEASE_CODEGEN_UNITS", "16")
            .env("PATH", std::env::join_paths(paths).expect("PATH"));
        command
    }

    /// `kubectl <args>`.
    pub fn kubectl(&self, args: &[&str]) -> Output {
        Command::new(&self.kubectl)
            .args(args)
            .env("KUBECONFIG", &self.kubeconfig)
            .output()
            .expect("run kubectl")
    }

    /// `kubectl <args>`, which must succeed; returns its stdout.
    pub fn kubectl_ok(&self, args: &[&str]) -> String {
        succeeded(args, self.kubectl(args))
    }

    /// `kubectl <args>` with `input` on stdin, which must succeed.
    pub fn kubectl_stdin_ok(&self, args: &[&str], input: &str) -> String {
        let mut child = Command::new(&self.kubectl)
            .args(args)
            .env("KUBECONFIG", &self.kubeconfig)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("run kubectl");
        child
            .stdin
            .take()
            .expect("stdin")
            .write_all(input.as_bytes())
            .expect("write kubectl's stdin");
        succeeded(args, child.wait_with_output().expect("wait for kubectl"))
    }
}

/// The stdout of `kubectl <args>`, which must have succeeded.
fn succeeded(args: &[&str], output: Output) -> String {
    assert!(
        output.status.success(),
        "kubectl {}:\n{}",
        args.join(" "),
        text(&output)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// A command's status, stdout and stderr, for assertion messages.
pub fn text(output: &Output) -> String {
    format!(
        "status {}\n--- stdout\n{}\n--- stderr\n{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}
