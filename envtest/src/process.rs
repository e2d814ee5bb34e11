//! Child processes of a control plane: spawned so they die with the test
//! process, logged to a file, killed on drop.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::sync::{Mutex, OnceLock};

use super::error::{EnvtestError, Result};

/// How many log lines an error message quotes.
const LOG_TAIL_LINES: usize = 25;

/// How long a child process lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Lifetime {
    /// Killed when dropped and when this process ends.
    OfThisProcess,
    /// Outlives this process once [`ChildProcess::detach`]ed: whoever
    /// started the run stops it (a control plane shared across processes).
    Detached,
}

/// A running etcd or kube-apiserver, killed when dropped.
#[derive(Debug)]
pub(crate) struct ChildProcess {
    name: &'static str,
    log: PathBuf,
    child: Mutex<Child>,
}

type SpawnRequest = (Command, mpsc::Sender<std::io::Result<Child>>);

/// Spawns every child from one long-lived thread.
///
/// On Linux each child gets `PR_SET_PDEATHSIG = SIGKILL`, so it dies with the
/// process that started it even when that process is killed or exits without
/// running destructors (a control plane kept in a `static`). The signal is
/// tied to the *thread* that forked the child, so that thread must live as
/// long as the process: a tokio worker or a test thread would not.
fn spawn_from_reaper_thread(command: Command) -> std::io::Result<Child> {
    static SPAWNER: OnceLock<Mutex<mpsc::Sender<SpawnRequest>>> = OnceLock::new();
    let sender = SPAWNER.get_or_init(|| {
        let (tx, rx) = mpsc::channel::<SpawnRequest>();
        // If the thread cannot start, requests fail below with a clear error.
        let _ = std::thread::Builder::new()
            .name("opkit-envtest-spawner".to_owned())
            .spawn(move || {
                for (mut command, reply) in rx {
                    let _ = reply.send(command.spawn());
                }
            });
        Mutex::new(tx)
    });
    let (reply_tx, reply_rx) = mpsc::channel();
    let gone = || std::io::Error::other("the envtest spawner thread is not running");
    sender
        .lock()
        .map_err(|_| gone())?
        .send((command, reply_tx))
        .map_err(|_| gone())?;
    reply_rx.recv().map_err(|_| gone())?
}

#[cfg(target_os = "linux")]
#[allow(unsafe_code)]
fn die_with_parent(command: &mut Command) {
    use std::os::unix::process::CommandExt;
    // SAFETY: the closure runs between fork and exec and only calls prctl,
    // which is async-signal-safe; it allocates nothing and takes no locks.
    unsafe {
        command.pre_exec(|| {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

#[cfg(not(target_os = "linux"))]
fn die_with_parent(_command: &mut Command) {}

impl ChildProcess {
    /// Starts `binary args...` with stdout and stderr appended to `log`.
    pub fn spawn(name: &'static str, binary: &Path, args: &[String], log: PathBuf) -> Result<Self> {
        Self::spawn_as(name, binary, args, log, Lifetime::OfThisProcess)
    }

    /// [`spawn`](Self::spawn), dying with this process or outliving it.
    pub fn spawn_as(
        name: &'static str,
        binary: &Path,
        args: &[String],
        log: PathBuf,
        lifetime: Lifetime,
    ) -> Result<Self> {
        let io_err = |source| EnvtestError::Io {
            what: "creating a log file",
            path: log.clone(),
            source,
        };
        let out = File::options()
            .create(true)
            .append(true)
            .open(&log)
            .map_err(io_err)?;
        let err = out.try_clone().map_err(io_err)?;
        let mut command = Command::new(binary);
        command
            .args(args)
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err);
        match lifetime {
            Lifetime::OfThisProcess => die_with_parent(&mut command),
            // A process group of its own: a signal to the test's group (a
            // runner's timeout or Ctrl-C) leaves it running for the others.
            Lifetime::Detached => {
                std::os::unix::process::CommandExt::process_group(&mut command, 0);
            }
        }
        let child = spawn_from_reaper_thread(command).map_err(|source| EnvtestError::Spawn {
            name,
            path: binary.to_owned(),
            source,
        })?;
        tracing::debug!(process = name, pid = child.id(), log = %log.display(), "started");
        super::footprint::record_process(child.id(), name);
        Ok(Self {
            name,
            log,
            child: Mutex::new(child),
        })
    }

    /// The process name (`etcd` or `kube-apiserver`).
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// The log file.
    pub fn log_path(&self) -> &Path {
        &self.log
    }

    /// The OS process id.
    pub fn pid(&self) -> u32 {
        self.child.lock().map(|c| c.id()).unwrap_or(0)
    }

    /// How the process exited, if it has.
    pub fn exit_status(&self) -> Option<ExitStatus> {
        self.child.lock().ok()?.try_wait().ok().flatten()
    }

    /// An error saying the process exited early, quoting its log.
    pub fn exited_early(&self, status: ExitStatus) -> EnvtestError {
        EnvtestError::ExitedEarly {
            name: self.name,
            status: status.to_string(),
            log: self.log.clone(),
            tail: self.log_tail(),
        }
    }

    /// The last lines of the log.
    pub fn log_tail(&self) -> String {
        tail_of_file(&self.log, LOG_TAIL_LINES)
    }

    /// Lets the process run on after this handle (and this process) is
    /// gone: nothing kills it on drop. Only for a [`Lifetime::Detached`]
    /// process; its PID is in the run's footprint.
    pub fn detach(self) {
        std::mem::forget(self);
    }

    /// Kills the process (SIGKILL) and reaps it. Idempotent.
    pub fn kill(&self) {
        if let Ok(mut child) = self.child.lock() {
            if matches!(child.try_wait(), Ok(Some(_))) {
                return;
            }
            let _ = child.kill();
            let _ = child.wait();
            tracing::debug!(process = self.name, pid = child.id(), "stopped");
        }
    }
}

impl Drop for ChildProcess {
    fn drop(&mut self) {
        self.kill();
    }
}

/// The last `lines` lines of a text file (at most the last 64 KiB are read).
pub(crate) fn tail_of_file(path: &Path, lines: usize) -> String {
    const WINDOW: u64 = 64 * 1024;
    let Ok(mut file) = File::open(path) else {
        return format!("(no log at {})", path.display());
    };
    let len = file.metadata().map(|m| m.len()).unwrap_or(0);
    let _ = file.seek(SeekFrom::Start(len.saturating_sub(WINDOW)));
    let mut bytes = Vec::new();
    let _ = file.read_to_end(&mut bytes);
    let text = String::from_utf8_lossy(&bytes);
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn early_exit_error_quotes_the_log() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("sh.log");
        let args = vec![
            "-c".to_owned(),
            "for i in $(seq 1 40); do echo line $i; done; echo boom >&2; exit 3".to_owned(),
        ];
        let process = ChildProcess::spawn("etcd", Path::new("/bin/sh"), &args, log).unwrap();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        let status = loop {
            if let Some(status) = process.exit_status() {
                break status;
            }
            assert!(std::time::Instant::now() < deadline, "sh did not exit");
            std::thread::yield_now();
        };
        let msg = process.exited_early(status).to_string();
        assert!(msg.contains("etcd exited early"), "{msg}");
        assert!(msg.contains("exit status: 3"), "{msg}");
        assert!(msg.contains("boom"), "{msg}");
        assert!(msg.contains("line 40"), "{msg}");
        assert!(!msg.contains("line 1\n"), "only the tail is quoted: {msg}");
    }

    #[test]
    fn kill_stops_a_running_process() {
        let dir = tempfile::tempdir().unwrap();
        let args = vec!["-c".to_owned(), "exec sleep 600".to_owned()];
        let process =
            ChildProcess::spawn("etcd", Path::new("/bin/sh"), &args, dir.path().join("log"))
                .unwrap();
        let pid = process.pid();
        assert!(Path::new(&format!("/proc/{pid}")).exists());
        process.kill();
        assert!(process.exit_status().is_some());
        process.kill(); // idempotent
    }

    #[test]
    fn missing_binary_is_a_spawn_error() {
        let dir = tempfile::tempdir().unwrap();
        let err = ChildProcess::spawn(
            "kube-apiserver",
            Path::new("/nonexistent/kube-apiserver"),
            &[],
            dir.path().join("log"),
        )
        .unwrap_err();
        assert!(
            err.to_string().contains("could not start kube-apiserver"),
            "{err}"
        );
    }
}
