//! The shared libraries a dynamically linked manager needs (a dev-profile
//! build, linked against the host's glibc as `cargo build` links it), found
//! with `ldd` and packed at the same paths, so the image runs the binary
//! with the host's loader and libc and needs no separate target build.

use std::path::{Path, PathBuf};
use std::process::Command;

use super::error::ImageError;

/// A file of the image outside `/manager`: its absolute path there, and
/// its contents.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ImageFile {
    /// Absolute path in the image (`/lib/x86_64-linux-gnu/libc.so.6`).
    pub path: String,
    /// The bytes (of the file the host's path resolves to).
    pub contents: Vec<u8>,
}

/// The loader and the libraries `binary` loads, read from this host.
pub(crate) fn for_binary(binary: &Path) -> Result<Vec<ImageFile>, ImageError> {
    let output = Command::new("ldd")
        .arg(binary)
        .output()
        .map_err(|e| ImageError::Libraries {
            binary: binary.to_owned(),
            detail: format!("cannot run ldd: {e}; build with `--release` for a static binary"),
        })?;
    if !output.status.success() {
        return Err(ImageError::Libraries {
            binary: binary.to_owned(),
            detail: format!(
                "ldd failed ({}): {}",
                output.status,
                String::from_utf8_lossy(&output.stderr).trim()
            ),
        });
    }
    let paths = parse_ldd(&String::from_utf8_lossy(&output.stdout)).map_err(|detail| {
        ImageError::Libraries {
            binary: binary.to_owned(),
            detail,
        }
    })?;
    paths
        .into_iter()
        .map(|path| {
            let contents = std::fs::read(&path).map_err(|source| ImageError::Io {
                what: "reading a shared library of the manager",
                path: path.clone(),
                source,
            })?;
            Ok(ImageFile {
                path: path.to_string_lossy().into_owned(),
                contents,
            })
        })
        .collect()
}

/// The absolute paths in `ldd`'s output: `name => /path (0x..)` and the
/// loader's `/path (0x..)`; the kernel's vDSO has no file. A library ldd
/// could not find is an error naming it.
fn parse_ldd(text: &str) -> Result<Vec<PathBuf>, String> {
    let mut paths = Vec::new();
    for line in text.lines().map(str::trim).filter(|l| !l.is_empty()) {
        if line == "statically linked" {
            continue;
        }
        let resolved = match line.split_once("=>") {
            Some((name, rest)) => {
                let rest = rest.trim();
                if rest.starts_with("not found") {
                    return Err(format!("ldd found no {} on this host", name.trim()));
                }
                rest
            }
            None => line,
        };
        let path = resolved.split_whitespace().next().unwrap_or_default();
        if path.starts_with('/') {
            paths.push(PathBuf::from(path));
        }
    }
    paths.sort();
    paths.dedup();
    Ok(paths)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ldd_output_gives_the_loader_and_the_libraries() {
        let text = "\tlinux-vdso.so.1 (0x00007f66c3fa8000)\n\
            \tlibgcc_s.so.1 => /lib/x86_64-linux-gnu/libgcc_s.so.1 (0x00007f66c21e0000)\n\
            \tlibc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x00007f66c1f1e000)\n\
            \t/lib64/ld-linux-x86-64.so.2 (0x00007f66c3faa000)\n";
        assert_eq!(
            parse_ldd(text).unwrap(),
            [
                PathBuf::from("/lib/x86_64-linux-gnu/libc.so.6"),
                PathBuf::from("/lib/x86_64-linux-gnu/libgcc_s.so.1"),
                PathBuf::from("/lib64/ld-linux-x86-64.so.2"),
            ]
        );
        let missing = parse_ldd("\tlibssl.so.3 => not found\n").unwrap_err();
        assert!(missing.contains("libssl.so.3"), "{missing}");
        assert!(parse_ldd("\tstatically linked\n").unwrap().is_empty());
    }

    #[test]
    fn this_test_binary_needs_libc() {
        let me = std::env::current_exe().unwrap();
        let files = for_binary(&me).unwrap();
        assert!(
            files.iter().any(|f| f.path.contains("libc.so")),
            "{:?}",
            files.iter().map(|f| &f.path).collect::<Vec<_>>()
        );
    }
}
