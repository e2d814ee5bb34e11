//! Embeds every file under `project/`, `api/`, `controller/`, `webhook/` and `conversion/` into the binary: writes
//! `$OUT_DIR/templates.rs` with one `include_str!` per template file, so
//! adding a template needs no code change. Also records where the opkit
//! crate of this checkout is (`OPKIT_BUILT_FROM_SDK`), so projects made by
//! a `cargo-opkit` built from a checkout depend on that checkout.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

fn main() {
    let root = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").unwrap_or_default());
    // `templates/` sits next to `sdk/` in the opkit repository; a copy of
    // this crate elsewhere (a registry download) has no sibling, and
    // `cargo-opkit` then falls back to the published opkit.
    let sdk = root.parent().map(|p| p.join("sdk")).unwrap_or_default();
    println!("cargo:rustc-env=OPKIT_BUILT_FROM_SDK={}", sdk.display());
    let mut out = String::new();
    for set in ["project", "api", "controller", "webhook", "conversion"] {
        let dir = root.join(set);
        println!("cargo:rerun-if-changed={}", dir.display());
        let mut files = Vec::new();
        collect(&dir, &mut files);
        files.sort();
        let _ = writeln!(
            out,
            "/// The `{set}` templates: (path relative to `{set}/`, contents).\npub(crate) const {}: &[(&str, &str)] = &[",
            set.to_uppercase()
        );
        for file in files {
            let relative = file
                .strip_prefix(&dir)
                .unwrap_or(&file)
                .to_string_lossy()
                .replace('\\', "/");
            let _ = writeln!(
                out,
                "    ({relative:?}, include_str!({:?})),",
                file.display().to_string()
            );
        }
        out.push_str("];\n");
    }
    let target =
        PathBuf::from(std::env::var_os("OUT_DIR").unwrap_or_default()).join("templates.rs");
    if let Err(e) = std::fs::write(&target, out) {
        panic!("cannot write {}: {e}", target.display());
    }
}

fn collect(dir: &Path, files: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        println!("cargo:rerun-if-changed={}", path.display());
        if path.is_dir() {
            collect(&path, files);
        } else {
            files.push(path);
        }
    }
}
