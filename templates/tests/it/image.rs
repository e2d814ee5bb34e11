//! `cargo opkit image` from the command line: what it prints, and a clear
//! error that loses nothing for every bad input.

use std::path::Path;
use std::process::{Command, Output};

fn cargo_opkit(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_cargo-opkit"))
        .current_dir(dir)
        .arg("opkit")
        .arg("image")
        .args(args)
        .output()
        .unwrap()
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// A package with two binaries, `first` and `second`.
fn two_bins(dir: &Path) {
    std::fs::create_dir_all(dir.join("src/bin")).unwrap();
    std::fs::write(
        dir.join("Cargo.toml"),
        "[package]\nname = \"two\"\nversion = \"1.0.0\"\nedition = \"2024\"\n\n[workspace]\n",
    )
    .unwrap();
    for bin in ["first", "second"] {
        std::fs::write(
            dir.join(format!("src/bin/{bin}.rs")),
            format!("fn main() {{ println!(\"{bin}\"); }}\n"),
        )
        .unwrap();
    }
}

#[test]
fn no_cargo_project_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let output = cargo_opkit(dir.path(), &[]);
    assert!(!output.status.success());
    let err = stderr(&output);
    assert!(err.contains("is not inside a Cargo project"), "{err}");
    let output = cargo_opkit(dir.path(), &["--dir", "missing"]);
    assert!(
        stderr(&output).contains("no such directory"),
        "{}",
        stderr(&output)
    );
}

#[test]
fn the_binary_must_be_chosen_and_exist() {
    let dir = tempfile::tempdir().unwrap();
    two_bins(dir.path());
    let output = cargo_opkit(dir.path(), &[]);
    let err = stderr(&output);
    assert!(!output.status.success());
    assert!(
        err.contains("several binaries (first, second); choose one with --bin"),
        "{err}"
    );
    let output = cargo_opkit(dir.path(), &["--bin", "third"]);
    let err = stderr(&output);
    assert!(
        err.contains("has no binary \"third\" (its binaries: first, second)"),
        "{err}"
    );
}

#[test]
fn builds_prints_and_refuses_to_clobber() {
    let dir = tempfile::tempdir().unwrap();
    two_bins(dir.path());
    let out = dir.path().join("second.tar");
    let output = cargo_opkit(
        dir.path(),
        &["--bin", "second", "--output", out.to_str().unwrap()],
    );
    assert!(output.status.success(), "{}", stderr(&output));
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        stdout.contains("image second:1.0.0 (OCI archive)"),
        "{stdout}"
    );
    assert!(stdout.contains("digest sha256:"), "{stdout}");
    assert!(out.is_file());

    // An output path holding something else is refused, and kept.
    let output = cargo_opkit(dir.path(), &["--bin", "second", "--output", "src"]);
    let err = stderr(&output);
    assert!(!output.status.success());
    assert!(err.contains("not an OCI image layout"), "{err}");
    assert!(dir.path().join("src/bin/first.rs").is_file());
}

#[test]
fn a_bad_reference_fails_before_building() {
    let dir = tempfile::tempdir().unwrap();
    two_bins(dir.path());
    let output = cargo_opkit(
        dir.path(),
        &["--bin", "first", "--push", "127.0.0.1:5000/Not Valid:v1"],
    );
    let err = stderr(&output);
    assert!(!output.status.success());
    assert!(err.contains("invalid image reference"), "{err}");
    assert!(!err.contains("Compiling"), "nothing was built: {err}");
}

#[test]
fn an_unreachable_registry_keeps_the_layout() {
    let dir = tempfile::tempdir().unwrap();
    two_bins(dir.path());
    // A port nothing listens on: bound, then released.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let out = dir.path().join("layout");
    let reference = format!("127.0.0.1:{port}/first:v1");
    let output = cargo_opkit(
        dir.path(),
        &[
            "--bin",
            "first",
            "--output",
            out.to_str().unwrap(),
            "--push",
            &reference,
        ],
    );
    let err = stderr(&output);
    assert!(!output.status.success());
    assert!(
        err.contains(&format!(
            "is a registry listening at http://127.0.0.1:{port}?"
        )),
        "{err}"
    );
    assert!(err.contains("the image is intact in"), "{err}");
    assert!(out.join("index.json").is_file());
}

/// A package `app` in `dir` with a path dependency on `lib_dir`.
fn app_with_dependency(dir: &Path, lib_dir: &Path) {
    std::fs::create_dir_all(dir.join("src")).unwrap();
    std::fs::write(
        dir.join("Cargo.toml"),
        format!(
            "[package]\nname = \"app\"\nversion = \"1.0.0\"\nedition = \"2024\"\n\n\
             [dependencies]\nshared-dep = {{ path = {:?} }}\n\n[workspace]\n",
            lib_dir.to_str().unwrap()
        ),
    )
    .unwrap();
    std::fs::write(
        dir.join("src/main.rs"),
        "fn main() { println!(\"{}\", shared_dep::answer()); }\n",
    )
    .unwrap();
}

/// The release image: static, and reproducible across checkouts.
#[test]
fn projects_sharing_a_target_dir_share_dependency_builds_and_digests() {
    let root = tempfile::tempdir().unwrap();
    let lib = root.path().join("shared-dep");
    std::fs::create_dir_all(lib.join("src")).unwrap();
    std::fs::write(
        lib.join("Cargo.toml"),
        "[package]\nname = \"shared-dep\"\nversion = \"0.1.0\"\nedition = \"2024\"\n",
    )
    .unwrap();
    std::fs::write(
        lib.join("src/lib.rs"),
        "/// The answer.\npub fn answer() -> u32 { 42 }\n",
    )
    .unwrap();
    let target = root.path().join("target");
    let mut digests = Vec::new();
    for (i, name) in ["one", "somewhere/else/two"].into_iter().enumerate() {
        let dir = root.path().join(name);
        app_with_dependency(&dir, &lib);
        let output = Command::new(env!("CARGO_BIN_EXE_cargo-opkit"))
            .current_dir(&dir)
            .args(["opkit", "image", "--release"])
            .env("CARGO_TARGET_DIR", &target)
            .output()
            .unwrap();
        let err = stderr(&output);
        assert!(output.status.success(), "{err}");
        // The second project's build reuses the first's dependency: the
        // flags every crate sees don't name the project's directory.
        assert_eq!(err.contains("Compiling shared-dep"), i == 0, "{err}");
        assert!(err.contains("Compiling app"), "{err}");
        let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
        let digest = stdout
            .split_whitespace()
            .find(|w| w.starts_with("sha256:"))
            .map(str::to_owned);
        digests.push(digest.unwrap_or_else(|| panic!("no digest in {stdout}")));
    }
    // The same source in another directory gives the same image.
    assert_eq!(digests[0], digests[1]);
}

#[test]
fn tag_names_the_image_in_the_layout_without_pushing() {
    let dir = tempfile::tempdir().unwrap();
    two_bins(dir.path());
    let out = dir.path().join("layout");
    let output = cargo_opkit(
        dir.path(),
        &[
            "--bin",
            "first",
            "--tag",
            "registry.example:5000/first:v9",
            "--output",
            out.to_str().unwrap(),
        ],
    );
    assert!(output.status.success(), "{}", stderr(&output));
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        stdout.contains("image registry.example:5000/first:v9 (OCI layout)"),
        "{stdout}"
    );
    let index: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("index.json")).unwrap()).unwrap();
    let annotations = &index["manifests"][0]["annotations"];
    assert_eq!(
        annotations["io.containerd.image.name"],
        "registry.example:5000/first:v9"
    );
    assert_eq!(annotations["org.opencontainers.image.ref.name"], "v9");

    // A bad tag is refused before anything is built.
    let output = cargo_opkit(dir.path(), &["--bin", "first", "--tag", "Not Valid:v1"]);
    let err = stderr(&output);
    assert!(!output.status.success());
    assert!(err.contains("invalid image reference"), "{err}");
    assert!(!err.contains("Compiling"), "nothing was built: {err}");
}

/// The dev image (the default) is `cargo build`'s own binary: nothing is
/// compiled again after a `cargo build`, the layer holds the loader and
/// the libraries the binary names, and the progress lines say what runs.
#[test]
fn the_dev_image_reuses_cargo_build_and_packs_its_libraries() {
    let dir = tempfile::tempdir().unwrap();
    two_bins(dir.path());
    let target = dir.path().join("target");
    let built = Command::new(env!("CARGO"))
        .current_dir(dir.path())
        .args(["build", "--bin", "first"])
        .env("CARGO_TARGET_DIR", &target)
        .env_remove("RUSTFLAGS")
        .output()
        .unwrap();
    assert!(built.status.success(), "{}", stderr(&built));
    let out = dir.path().join("dev.tar");
    let output = Command::new(env!("CARGO_BIN_EXE_cargo-opkit"))
        .current_dir(dir.path())
        .args(["opkit", "image", "--bin", "first", "--output"])
        .arg(&out)
        .env("CARGO_TARGET_DIR", &target)
        .env_remove("RUSTFLAGS")
        .output()
        .unwrap();
    let err = stderr(&output);
    assert!(output.status.success(), "{err}");
    assert!(
        !err.contains("Compiling"),
        "cargo build's binary is reused: {err}"
    );
    assert!(
        err.contains("image: building first with the dev profile")
            && err.contains("image: first built in"),
        "{err}"
    );
    // The layout archive holds the blobs; the largest is the layer.
    let mut archive = tar::Archive::new(std::fs::File::open(&out).unwrap());
    let mut layer = Vec::new();
    for entry in archive.entries().unwrap() {
        let mut entry = entry.unwrap();
        let mut bytes = Vec::new();
        std::io::Read::read_to_end(&mut entry, &mut bytes).unwrap();
        if bytes.len() > layer.len() {
            layer = bytes;
        }
    }
    let mut paths = Vec::new();
    let mut files = tar::Archive::new(flate2::read::GzDecoder::new(layer.as_slice()));
    for entry in files.entries().unwrap() {
        paths.push(
            entry
                .unwrap()
                .path()
                .unwrap()
                .to_string_lossy()
                .into_owned(),
        );
    }
    assert!(paths.iter().any(|p| p == "manager"), "{paths:?}");
    assert!(paths.iter().any(|p| p.ends_with("/libc.so.6")), "{paths:?}");
    assert!(paths.iter().any(|p| p.contains("ld-linux")), "{paths:?}");
}
