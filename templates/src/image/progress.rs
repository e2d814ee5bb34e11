//! Running the image's `cargo build` and saying what it does: cargo's
//! JSON messages are read as they come, a line goes to stderr when the
//! project's own crates are built and when the manager binary alone is
//! left (its compile and link), and another every few seconds while cargo
//! is silent (a release link with fat LTO takes minutes), so a build is
//! never a silent wait.

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde::Deserialize;

use super::package::{Project, Target};
use super::profile::{Lto, Profile};

/// How long cargo may be silent before a progress line.
const HEARTBEAT: Duration = Duration::from_secs(10);

#[derive(Deserialize)]
struct Message {
    reason: String,
    #[serde(default)]
    target: Option<Target>,
    #[serde(default)]
    manifest_path: Option<PathBuf>,
    #[serde(default)]
    executable: Option<PathBuf>,
    #[serde(default)]
    fresh: bool,
}

/// What is being built, for the progress lines.
struct State<'a> {
    project: &'a Project,
    profile: Profile,
    /// The release build's LTO (unused for dev builds).
    lto: Lto,
    started: Instant,
    built: usize,
    last: Option<String>,
    binary_left: bool,
    executable: Option<PathBuf>,
}

impl State<'_> {
    fn on_message(&mut self, message: Message) {
        if message.reason != "compiler-artifact" {
            return;
        }
        let Some(target) = message.target else {
            return;
        };
        self.built += 1;
        let ours = message.manifest_path.as_deref() == Some(self.project.manifest.as_path());
        if ours && target.name == self.project.bin && target.kind.iter().any(|k| k == "bin") {
            self.executable = message.executable;
            return;
        }
        if ours && !message.fresh {
            eprintln!(
                "image: built {} ({} s)",
                target.name,
                self.started.elapsed().as_secs()
            );
        }
        if ours && target.kind.iter().any(|k| k == "lib") && !self.binary_left {
            self.binary_left = true;
            eprintln!(
                "image: compiling and linking {}{}",
                self.project.bin,
                match (self.profile, &self.lto) {
                    (Profile::Release, Lto::Fat) => format!(
                        " (release, {}: the link alone takes a minute or more)",
                        self.lto.describe()
                    ),
                    (Profile::Release, lto) => format!(" (release, {})", lto.describe()),
                    (Profile::Dev, _) => String::new(),
                }
            );
        }
        self.last = Some(target.name);
    }

    fn on_silence(&self) {
        let now = if self.binary_left {
            format!("compiling and linking {}", self.project.bin)
        } else {
            match &self.last {
                Some(last) => format!("{} crates built, the last {last}", self.built),
                None => "resolving and compiling".to_owned(),
            }
        };
        eprintln!(
            "image: still building ({} s): {now}",
            self.started.elapsed().as_secs()
        );
    }
}

/// Runs `command` (a `cargo build --message-format json-...`) and returns
/// the manager's executable, or what went wrong (cargo's errors are on
/// stderr already).
pub(crate) fn run(
    mut command: Command,
    project: &Project,
    profile: Profile,
) -> Result<PathBuf, String> {
    let lto = Lto::of(
        &project.workspace_root,
        std::env::var("CARGO_PROFILE_RELEASE_LTO").ok().as_deref(),
    );
    eprintln!(
        "image: building {} with the {} profile{}",
        project.bin,
        profile.name(),
        match profile {
            Profile::Dev => " (dependencies shared with cargo build, run and test)".to_owned(),
            Profile::Release => format!(" (static, {})", lto.describe()),
        }
    );
    let mut child = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .map_err(|e| format!("could not start: {e}"))?;
    let stdout = child
        .stdout
        .take()
        .ok_or_else(|| "started without its output".to_owned())?;
    let (lines, received) = mpsc::channel();
    let reader = std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if lines.send(line).is_err() {
                break;
            }
        }
    });
    let mut state = State {
        project,
        profile,
        lto,
        started: Instant::now(),
        built: 0,
        last: None,
        binary_left: false,
        executable: None,
    };
    loop {
        match received.recv_timeout(HEARTBEAT) {
            Ok(line) => {
                if let Ok(message) = serde_json::from_str::<Message>(&line) {
                    state.on_message(message);
                }
            }
            Err(mpsc::RecvTimeoutError::Timeout) => state.on_silence(),
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
        }
    }
    let _ = reader.join();
    let status = child.wait().map_err(|e| format!("did not finish: {e}"))?;
    if !status.success() {
        return Err(format!("failed ({status}); cargo's output is above"));
    }
    eprintln!(
        "image: {} built in {} s",
        project.bin,
        state.started.elapsed().as_secs()
    );
    state
        .executable
        .ok_or_else(|| format!("reported no executable for binary {}", project.bin))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn project() -> Project {
        Project {
            manifest: "/w/app/Cargo.toml".into(),
            workspace_root: "/w".into(),
            target_dir: "/w/target".into(),
            version: "0.1.0".into(),
            repository: None,
            bin: "app".into(),
        }
    }

    #[test]
    fn the_binary_artifact_gives_the_executable_and_the_lib_marks_the_link() {
        let project = project();
        let mut state = State {
            project: &project,
            profile: Profile::Dev,
            lto: Lto::Off,
            started: Instant::now(),
            built: 0,
            last: None,
            binary_left: false,
            executable: None,
        };
        let message = |json: &str| serde_json::from_str::<Message>(json).unwrap();
        state.on_message(message(
            r#"{"reason":"compiler-artifact","manifest_path":"/dep/Cargo.toml","target":{"name":"serde","kind":["lib"]},"fresh":true}"#,
        ));
        assert!(!state.binary_left);
        state.on_message(message(
            r#"{"reason":"compiler-artifact","manifest_path":"/w/app/Cargo.toml","target":{"name":"app","kind":["lib"]},"fresh":false}"#,
        ));
        assert!(state.binary_left);
        state.on_message(message(
            r#"{"reason":"compiler-artifact","manifest_path":"/w/app/Cargo.toml","target":{"name":"app","kind":["bin"]},"executable":"/w/target/debug/app","fresh":false}"#,
        ));
        assert_eq!(state.executable, Some(PathBuf::from("/w/target/debug/app")));
        assert_eq!(state.built, 3);
    }
}
