//! Finding the project's manager binary and building it: with the release
//! profile, as a static executable (`cargo build --release --target
//! x86_64-unknown-linux-gnu` with `-C target-feature=+crt-static`, and the
//! checkout, the cargo home and the target directory remapped to fixed
//! paths so the same source builds to the same bytes wherever it sits);
//! with the dev profile, exactly as `cargo build` builds it.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use super::error::ImageError;
use super::package::{Metadata, Project};
use super::profile::Profile;
use super::{progress, rustc_wrapper};

/// The target the manager is built for: glibc, linked statically.
pub const TARGET: &str = "x86_64-unknown-linux-gnu";

fn cargo() -> Command {
    crate::cargo_env::cargo_command()
}

/// Output of a cargo command that must succeed, or why not.
fn cargo_output(mut command: Command, what: &'static str) -> Result<String, ImageError> {
    let output = command
        .stdin(Stdio::null())
        .output()
        .map_err(|e| ImageError::Cargo {
            what,
            detail: format!("cannot run cargo: {e}"),
        })?;
    if !output.status.success() {
        return Err(ImageError::Cargo {
            what,
            detail: String::from_utf8_lossy(&output.stderr).trim().to_owned(),
        });
    }
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}

/// The Cargo package in `dir` (the nearest `Cargo.toml` at or above it;
/// any package, unlike [`crate::find_project`], which wants an opkit
/// project) and the binary to build: `bin` if given, else the package's
/// only binary, else the one named like the package (what `cargo opkit
/// new` makes).
pub(crate) fn locate_package(dir: &Path, bin: Option<&str>) -> Result<Project, ImageError> {
    if !dir.is_dir() {
        return Err(ImageError::NotACargoProject {
            dir: dir.to_owned(),
            detail: "no such directory".to_owned(),
        });
    }
    let mut locate = cargo();
    locate
        .current_dir(dir)
        .args(["locate-project", "--message-format", "plain"]);
    let manifest = match cargo_output(locate, "locating Cargo.toml") {
        Ok(out) => PathBuf::from(out.trim()),
        Err(ImageError::Cargo { detail, .. }) => {
            return Err(ImageError::NotACargoProject {
                dir: dir.to_owned(),
                detail,
            });
        }
        Err(e) => return Err(e),
    };
    let mut metadata = cargo();
    metadata
        .current_dir(dir)
        .args(["metadata", "--no-deps", "--format-version", "1"])
        .arg("--manifest-path")
        .arg(&manifest);
    let json = cargo_output(metadata, "reading the project's metadata")?;
    let metadata: Metadata = serde_json::from_str(&json).map_err(|e| ImageError::Cargo {
        what: "reading the project's metadata",
        detail: format!("unexpected `cargo metadata` output: {e}"),
    })?;
    let package = metadata
        .packages
        .iter()
        .find(|p| p.manifest_path == manifest)
        .or_else(|| match bin {
            // A virtual workspace: the package that has the binary.
            Some(bin) => metadata.packages.iter().find(|p| p.bins().contains(&bin)),
            None => None,
        })
        .ok_or_else(|| ImageError::NoBinary {
            manifest: manifest.clone(),
            detail: "it is a workspace without a package of its own; run this in the \
                     operator's package directory, or name its binary with --bin"
                .to_owned(),
        })?;
    let bins = package.bins();
    let chosen = match bin {
        Some(bin) if bins.contains(&bin) => bin,
        Some(bin) => {
            return Err(ImageError::NoBinary {
                manifest: package.manifest_path.clone(),
                detail: format!(
                    "package {} has no binary {bin:?} (its binaries: {})",
                    package.name,
                    list(&bins)
                ),
            });
        }
        None => match bins.as_slice() {
            [only] => only,
            _ if bins.contains(&package.name.as_str()) => package.name.as_str(),
            [] => {
                return Err(ImageError::NoBinary {
                    manifest: package.manifest_path.clone(),
                    detail: format!("package {} has no binary target", package.name),
                });
            }
            _ => {
                return Err(ImageError::NoBinary {
                    manifest: package.manifest_path.clone(),
                    detail: format!(
                        "package {} has several binaries ({}); choose one with --bin",
                        package.name,
                        list(&bins)
                    ),
                });
            }
        },
    };
    Ok(Project {
        manifest: package.manifest_path.clone(),
        workspace_root: metadata.workspace_root,
        target_dir: metadata.target_directory,
        version: package.version.clone(),
        repository: package.repository.clone().filter(|r| !r.is_empty()),
        bin: chosen.to_owned(),
    })
}

fn list(names: &[&str]) -> String {
    if names.is_empty() {
        "none".to_owned()
    } else {
        names.join(", ")
    }
}

/// The flags that make the binary static and independent of where the
/// checkout, the cargo home and the target directory are. With
/// `member_remap_in_wrapper`, the checkout's remap is left to the rustc
/// wrapper (see `rustc_wrapper`) so these flags, which every crate's
/// fingerprint includes, are the same for every project. Later remaps win
/// in rustc, so the more specific (longer) prefixes come last.
pub(crate) fn rustflags(project: &Project, member_remap_in_wrapper: bool) -> Vec<String> {
    let mut remaps: BTreeMap<usize, Vec<(PathBuf, &str)>> = BTreeMap::new();
    let cargo_home = std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| Path::new(&h).join(".cargo")));
    let mut add = |path: PathBuf, to: &'static str| {
        remaps
            .entry(path.as_os_str().len())
            .or_default()
            .push((path, to));
    };
    if !member_remap_in_wrapper {
        add(project.workspace_root.clone(), WORKSPACE_REMAP);
    }
    add(project.target_dir.clone(), "/target");
    if let Some(home) = cargo_home {
        add(home, "/cargo");
    }
    let mut flags = vec!["-C".to_owned(), "target-feature=+crt-static".to_owned()];
    for (path, to) in remaps.into_values().flatten() {
        flags.push(format!("--remap-path-prefix={}={to}", path.display()));
    }
    flags
}

/// What the workspace's directory reads as in the binary.
const WORKSPACE_REMAP: &str = "/src";

/// Builds the project's binary with `profile` (cargo's errors go to
/// stderr, with a line of progress at each step and every few seconds of
/// silence, the link included) and returns its path.
pub(crate) fn build(project: &Project, profile: Profile) -> Result<PathBuf, ImageError> {
    let mut command = cargo();
    let described = match profile {
        Profile::Release => {
            release_command(project, &mut command)?;
            format!(
                "cargo build --release --target {TARGET} --bin {}",
                project.bin
            )
        }
        // Exactly `cargo build --bin <bin>`: the flags, target and profile
        // of `cargo build`, `cargo run` and `cargo test`, so their
        // dependency builds are shared.
        Profile::Dev => {
            command.arg("build");
            format!("cargo build --bin {}", project.bin)
        }
    };
    command
        .args(["--bin", &project.bin])
        .arg("--manifest-path")
        .arg(&project.manifest)
        .args(["--message-format", "json-render-diagnostics"]);
    progress::run(command, project, profile).map_err(|detail| ImageError::Cargo {
        what: "building the manager",
        detail: format!("`{described}` {detail}"),
    })
}

/// `cargo build --release --target <TARGET>` with the static and remap
/// flags (added to the user's own) and, when this process serves as one,
/// itself as the members' rustc wrapper.
fn release_command(project: &Project, command: &mut Command) -> Result<(), ImageError> {
    check_target_installed()?;
    // The user's own RUSTFLAGS stay; ours are added after them.
    let mut flags: Vec<String> = match std::env::var("CARGO_ENCODED_RUSTFLAGS") {
        Ok(encoded) if !encoded.is_empty() => encoded.split('\x1f').map(str::to_owned).collect(),
        _ => std::env::var("RUSTFLAGS")
            .map(|f| f.split_whitespace().map(str::to_owned).collect())
            .unwrap_or_default(),
    };
    // This program as the members' rustc wrapper, when it serves as one.
    let wrapper = rustc_wrapper::available()
        .then(|| std::env::current_exe().ok())
        .flatten();
    flags.extend(rustflags(project, wrapper.is_some()));
    if let Some(wrapper) = wrapper {
        let mut remap = project.workspace_root.clone().into_os_string();
        remap.push(format!("={WORKSPACE_REMAP}"));
        if let Some(inner) = std::env::var_os("RUSTC_WORKSPACE_WRAPPER") {
            command.env(rustc_wrapper::INNER_WRAPPER_ENV, inner);
        }
        command
            .env("RUSTC_WORKSPACE_WRAPPER", wrapper)
            .env(rustc_wrapper::REMAP_ENV, remap);
    }
    command
        .args(["build", "--release", "--target", TARGET])
        .env_remove("RUSTFLAGS")
        .env("CARGO_ENCODED_RUSTFLAGS", flags.join("\x1f"));
    Ok(())
}

fn check_target_installed() -> Result<(), ImageError> {
    let rustc = std::env::var_os("RUSTC").unwrap_or_else(|| "rustc".into());
    let sysroot = Command::new(rustc)
        .args(["--print", "sysroot"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| PathBuf::from(String::from_utf8_lossy(&o.stdout).trim()));
    match sysroot {
        Some(root) if !root.join("lib/rustlib").join(TARGET).is_dir() => {
            Err(ImageError::TargetMissing {
                target: TARGET,
                sysroot: root,
            })
        }
        // Without an answer from rustc, let cargo report the problem.
        _ => Ok(()),
    }
}

/// Whether `elf` is a statically linked ELF executable (no `PT_INTERP`
/// program header, so no dynamic loader is needed in the image).
pub(crate) fn is_static_elf(elf: &[u8]) -> Result<bool, &'static str> {
    const PT_INTERP: u32 = 3;
    if elf.len() < 64 || &elf[..4] != b"\x7fELF" {
        return Err("not an ELF file");
    }
    if elf[4] != 2 || elf[5] != 1 {
        return Err("not a 64-bit little-endian ELF file");
    }
    let u16_at = |at: usize| u16::from_le_bytes([elf[at], elf[at + 1]]) as usize;
    let phoff = u64::from_le_bytes(elf[32..40].try_into().map_err(|_| "truncated")?) as usize;
    let (phentsize, phnum) = (u16_at(54), u16_at(56));
    for i in 0..phnum {
        let at = phoff
            .checked_add(i * phentsize)
            .filter(|at| at + 4 <= elf.len())
            .ok_or("truncated program headers")?;
        let kind = u32::from_le_bytes(elf[at..at + 4].try_into().map_err(|_| "truncated")?);
        if kind == PT_INTERP {
            return Ok(false);
        }
    }
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_test_binary_is_recognised_as_elf() {
        let me = std::fs::read(std::env::current_exe().unwrap()).unwrap();
        // Test binaries are linked dynamically.
        assert_eq!(is_static_elf(&me), Ok(false));
        assert!(is_static_elf(b"#!/bin/sh\n").is_err());
    }

    #[test]
    fn longer_prefixes_are_remapped_last() {
        let project = Project {
            manifest: "/w/app/Cargo.toml".into(),
            workspace_root: "/w".into(),
            target_dir: "/w/target".into(),
            version: "0.1.0".into(),
            repository: None,
            bin: "app".into(),
        };
        let flags = rustflags(&project, false);
        assert_eq!(flags[..2], ["-C", "target-feature=+crt-static"]);
        let src = flags
            .iter()
            .position(|f| f == "--remap-path-prefix=/w=/src");
        let target = flags
            .iter()
            .position(|f| f == "--remap-path-prefix=/w/target=/target");
        assert!(src.unwrap() < target.unwrap(), "{flags:?}");
        // With the wrapper, the flags every crate sees don't name the project.
        let shared = rustflags(&project, true);
        assert!(!shared.iter().any(|f| f.contains("=/src")), "{shared:?}");
        assert!(shared.contains(&"--remap-path-prefix=/w/target=/target".to_owned()));
    }
}
