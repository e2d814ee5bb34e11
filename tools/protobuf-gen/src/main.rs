//! `opkit-protobuf-gen <output file>`: writes opkit's protobuf decoders
//! (`sdk/src/cache/decode/protobuf/generated.rs`, `make generate`).
//!
//! Reads three sources, each pinned:
//! - the `generated.proto` files of `k8s.io/api`, `k8s.io/apimachinery`,
//!   `k8s.io/apiextensions-apiserver` and `k8s.io/kube-aggregator` at
//!   [`GO_VERSION`] (the release the pinned k8s-openapi feature describes),
//!   fetched through the Go module proxy into `$OPKIT_CACHE/gomod`;
//! - the Go structs next to them (JSON names, pointers, `omitempty`,
//!   inlined structs: how the JSON the decoders must agree with is made);
//! - the k8s-openapi source the workspace builds against (its
//!   [`OPENAPI_VERSION_MODULE`] module).
//!
//! Every field of every struct a listable kind reaches is mapped, or the
//! generator fails naming each field it could not map.

mod emit;
mod gotypes;
mod openapi;
mod proto;

use std::{
    collections::BTreeMap,
    env, fs,
    path::{Path, PathBuf},
    process::{Command, ExitCode},
};

/// The Kubernetes Go modules' version: the release of the k8s-openapi
/// feature the workspace enables (`v1_36`).
const GO_VERSION: &str = "v0.36.3";
/// The k8s-openapi module describing that release.
const OPENAPI_VERSION_MODULE: &str = "v1_36";
/// The Go modules and the packages read from each.
const MODULES: &[(&str, &[&str])] = &[
    ("k8s.io/api", &[""]),
    (
        "k8s.io/apimachinery",
        &[
            "pkg/apis/meta/v1",
            "pkg/runtime",
            "pkg/util/intstr",
            "pkg/api/resource",
        ],
    ),
    (
        "k8s.io/apiextensions-apiserver",
        &["pkg/apis/apiextensions/v1"],
    ),
    ("k8s.io/kube-aggregator", &["pkg/apis/apiregistration/v1"]),
];
/// Types decoded although no listable kind reaches them: what the list,
/// watch and error envelopes carry.
const EXTRA: &[&str] = &[
    "k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta",
    "k8s_openapi::apimachinery::pkg::apis::meta::v1::ListMeta",
    "k8s_openapi::apimachinery::pkg::apis::meta::v1::Status",
];

fn main() -> ExitCode {
    let args: Vec<String> = env::args().skip(1).collect();
    let [out] = args.as_slice() else {
        eprintln!("usage: opkit-protobuf-gen <output file>");
        return ExitCode::from(2);
    };
    match generate() {
        Ok(code) => match fs::write(out, code) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("{out}: {e}");
                ExitCode::FAILURE
            }
        },
        Err(errors) => {
            for e in &errors {
                eprintln!("protobuf-gen: {e}");
            }
            eprintln!(
                "protobuf-gen: {} field(s) or type(s) not mapped",
                errors.len()
            );
            ExitCode::FAILURE
        }
    }
}

fn generate() -> Result<String, Vec<String>> {
    let one = |e: String| vec![e];
    let mut messages = BTreeMap::new();
    let mut go = BTreeMap::new();
    let mut sources = Vec::new();
    for (module, packages) in MODULES {
        let dir = go_module(module).map_err(one)?;
        sources.push(format!("{module}@{GO_VERSION}"));
        for package in *packages {
            for proto_file in proto_files(&dir.join(package)).map_err(one)? {
                read_package(&proto_file, &mut messages, &mut go).map_err(one)?;
            }
        }
    }
    let openapi = openapi_dir().map_err(one)?;
    let types = openapi::read(&openapi.join("src").join(OPENAPI_VERSION_MODULE)).map_err(one)?;
    let openapi_name = openapi
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    sources.push(format!("{openapi_name} ({OPENAPI_VERSION_MODULE})"));
    let inputs = emit::Inputs {
        messages,
        go,
        types,
    };
    let body = emit::Gen::new(&inputs).run(EXTRA)?;
    Ok(emit::file(&body, &sources.join(", ")))
}

/// One package: its `generated.proto` and the Go structs beside it.
fn read_package(
    proto_file: &Path,
    messages: &mut BTreeMap<String, proto::Message>,
    go: &mut BTreeMap<String, gotypes::GoPackage>,
) -> Result<(), String> {
    let text =
        fs::read_to_string(proto_file).map_err(|e| format!("{}: {e}", proto_file.display()))?;
    let mut found = BTreeMap::new();
    proto::parse(&text, &proto_file.display().to_string(), &mut found)?;
    let Some(package) = found.values().next().map(|m| m.package.clone()) else {
        return Ok(());
    };
    messages.extend(found);
    let dir = proto_file.parent().unwrap_or(Path::new("."));
    let mut go_files: Vec<PathBuf> = fs::read_dir(dir)
        .map_err(|e| format!("{}: {e}", dir.display()))?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| {
            let name = p
                .file_name()
                .map(|n| n.to_string_lossy())
                .unwrap_or_default();
            name.ends_with(".go")
                && !name.ends_with("_test.go")
                && !name.starts_with("zz_generated")
                && name != "generated.pb.go"
        })
        .collect();
    go_files.sort();
    let fields = go.entry(package).or_default();
    for file in go_files {
        let text = fs::read_to_string(&file).map_err(|e| format!("{}: {e}", file.display()))?;
        gotypes::parse(&text, fields);
    }
    Ok(())
}

/// Every `generated.proto` under `dir`, sorted.
fn proto_files(dir: &Path) -> Result<Vec<PathBuf>, String> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in fs::read_dir(&d).map_err(|e| format!("{}: {e}", d.display()))? {
            let path = entry.map_err(|e| e.to_string())?.path();
            if path.is_dir() {
                stack.push(path);
            } else if path.file_name().is_some_and(|n| n == "generated.proto") {
                out.push(path);
            }
        }
    }
    out.sort();
    Ok(out)
}

/// The directory of `module` at [`GO_VERSION`], downloaded through the Go
/// module proxy into `$OPKIT_CACHE/gomod` if it is not there yet.
fn go_module(module: &str) -> Result<PathBuf, String> {
    let cache = env::var_os("OPKIT_CACHE")
        .map(PathBuf::from)
        .or_else(|| env::var_os("HOME").map(|h| Path::new(&h).join(".cache/opkit")))
        .ok_or("neither OPKIT_CACHE nor HOME is set")?;
    let modcache = cache.join("gomod");
    let dir = modcache.join(format!("{module}@{GO_VERSION}"));
    if dir.join("go.mod").exists() {
        return Ok(dir);
    }
    let work = env::temp_dir();
    // `make` hands over the toolchain `tests/controlplane/ensure-go.sh`
    // found or installed; `go` on PATH otherwise.
    let go = env::var_os("GO").unwrap_or_else(|| "go".into());
    let status = Command::new(go)
        .args(["mod", "download", &format!("{module}@{GO_VERSION}")])
        .env("GOMODCACHE", &modcache)
        .env("GOFLAGS", "-mod=mod")
        .current_dir(&work)
        .status()
        .map_err(|e| format!("go mod download {module}: {e} (a Go toolchain is needed)"))?;
    if !status.success() || !dir.join("go.mod").exists() {
        return Err(format!("go mod download {module}@{GO_VERSION} failed"));
    }
    Ok(dir)
}

/// The host's target triple (`rustc -vV`'s `host:` line).
fn host_triple() -> Result<String, String> {
    let rustc = env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    let out = Command::new(rustc)
        .arg("-vV")
        .output()
        .map_err(|e| format!("rustc -vV: {e}"))?;
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .find_map(|line| line.strip_prefix("host: "))
        .map(str::to_owned)
        .ok_or_else(|| "rustc -vV printed no host triple".into())
}

/// The k8s-openapi crate the workspace builds against (from `cargo
/// metadata`, offline, for the host platform only: a new machine's
/// registry holds what a build downloaded, not other platforms' crates).
fn openapi_dir() -> Result<PathBuf, String> {
    let cargo = env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../Cargo.toml");
    let out = Command::new(cargo)
        .args([
            "metadata",
            "--format-version",
            "1",
            "--offline",
            "--filter-platform",
            &host_triple()?,
            "--manifest-path",
        ])
        .arg(&manifest)
        .output()
        .map_err(|e| format!("cargo metadata: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "cargo metadata: {}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    let text = String::from_utf8_lossy(&out.stdout);
    text.split("\"manifest_path\":\"")
        .skip(1)
        .filter_map(|s| s.split('"').next())
        .map(Path::new)
        .find(|p| {
            p.parent()
                .and_then(Path::file_name)
                .is_some_and(|n| n.to_string_lossy().starts_with("k8s-openapi-"))
        })
        .and_then(Path::parent)
        .map(Path::to_path_buf)
        .ok_or_else(|| "k8s-openapi is not in the workspace's dependencies".into())
}
