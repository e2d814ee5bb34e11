//! `cargo opkit`: scaffolds Kubernetes operator projects that use opkit.
//! See the library docs (`cargo_opkit`) and `cargo opkit --help`.
#![warn(clippy::unwrap_used)]

use std::path::PathBuf;
use std::process::ExitCode;

use cargo_opkit::{CreateApi, CreateWebhook, NewProject, OpkitDependency, ScaffoldError};
use clap::{Args, Parser, Subcommand};

/// Scaffold and maintain Kubernetes operators built with opkit.
#[derive(Parser, Debug)]
#[command(name = "cargo opkit", bin_name = "cargo opkit", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Top,
}

#[derive(Subcommand, Debug)]
enum Top {
    /// Create a new operator project in ./NAME (builds it and writes its manifests).
    #[command(disable_version_flag = true)]
    New(New),
    /// Add to an existing project.
    #[command(subcommand)]
    Create(Create),
    /// Build an OCI image of the manager without a container engine (and push it).
    Image(Image),
    /// Write every manifest of deploy/ (in apply order) to one file,
    /// dist/install.yaml, with the manager's image set: what `kubectl apply
    /// --server-side -f` installs.
    Installer {
        /// The project's directory, or any directory inside it.
        #[arg(long, default_value = ".")]
        dir: PathBuf,
        /// The manager's image (repository[:tag][@sha256:digest]; default
        /// <name>:latest, as deploy/ has it).
        #[arg(long, value_name = "REFERENCE")]
        image: Option<String>,
        /// Where to write it (default: <project>/dist/install.yaml).
        #[arg(long, short)]
        out: Option<PathBuf>,
    },
    /// Render a Helm chart from deploy/ into dist/chart (replacing it):
    /// values for the image, replicas, resources, leader election, metrics,
    /// webhooks, CRDs and image pull secrets, checked by values.schema.json.
    Chart {
        /// The project's directory, or any directory inside it.
        #[arg(long, default_value = ".")]
        dir: PathBuf,
        /// The chart's directory (default: <project>/dist/chart).
        #[arg(long, short)]
        out: Option<PathBuf>,
    },
    /// Regenerate deploy/01-crds.yaml and deploy/03-rbac.yaml from the code.
    Manifests {
        /// The project's directory, or any directory inside it.
        #[arg(long, default_value = ".")]
        dir: PathBuf,
    },
}

#[derive(Args, Debug)]
struct New {
    /// The project name: lower-case letters, digits and '-' (e.g. memcached-operator).
    name: String,
    /// The API group of the first kind, and the default of `create api`
    /// (e.g. cache.example.com).
    #[arg(long)]
    group: String,
    /// The API version of the first kind, and the default of `create api`.
    #[arg(long = "version", default_value = "v1alpha1")]
    api_version: String,
    /// The first kind, UpperCamelCase (e.g. Memcached). Without it, the
    /// project has a manager and no API yet: `cargo opkit create api` adds the first.
    #[arg(long)]
    kind: Option<String>,
    /// Create the project under this directory instead of the current one.
    #[arg(long)]
    dir: Option<PathBuf>,
    /// Depend on a local opkit checkout (its sdk/ directory, or the repository root).
    /// Default: the checkout this cargo-opkit was built from, if it still exists,
    /// else the published opkit.
    #[arg(long, conflicts_with = "opkit_version")]
    opkit_path: Option<PathBuf>,
    /// Depend on the published opkit, with this version requirement (e.g. 0.1).
    #[arg(long)]
    opkit_version: Option<String>,
    /// Deploy sharded instead of leader-elected: the manager gets a `--sharding` flag (the
    /// replicas split the objects, see opkit::shard), the Deployment runs 3 replicas with it, and
    /// the RBAC allows the ring's Leases.
    #[arg(long)]
    sharding: bool,
    /// A hub operator: its kinds are reconciled in every member cluster the provider engages
    /// (opkit::multicluster): kubeconfig Secrets in a hub namespace, the hub's ClusterProfiles
    /// (Cluster Inventory API), or a static set of kubeconfig files; with the provider's flags,
    /// the hub's RBAC for its source, and tests that run a hub and a member control plane.
    #[arg(long, value_enum, value_name = "PROVIDER")]
    multicluster: Option<MulticlusterProvider>,
    /// Do not build the project to write deploy/01-crds.yaml and deploy/03-rbac.yaml.
    #[arg(long)]
    skip_manifests: bool,
    /// Seed the project's Cargo.lock from this one (pins dependency versions).
    #[arg(long, hide = true)]
    lock_from: Option<PathBuf>,
}

/// Where `new --multicluster`'s member clusters come from.
#[derive(clap::ValueEnum, Clone, Copy, Debug)]
enum MulticlusterProvider {
    // Plain comments: documented variants would turn `new --help` into
    // clap's long, multi-line layout for every option.
    // Kubeconfig Secrets in a hub namespace (`--fleet-namespace`),
    // multicluster-runtime's kubeconfig provider.
    KubeconfigSecrets,
    // The hub's ClusterProfiles (Cluster Inventory API), with an
    // access-provider file.
    ClusterProfiles,
    // A fixed set, each `--member NAME=KUBECONFIG`.
    Static,
}

impl MulticlusterProvider {
    fn provider(self) -> cargo_opkit::ClusterProvider {
        match self {
            Self::KubeconfigSecrets => cargo_opkit::ClusterProvider::KubeconfigSecrets,
            Self::ClusterProfiles => cargo_opkit::ClusterProvider::ClusterProfiles,
            Self::Static => cargo_opkit::ClusterProvider::Static,
        }
    }
}

/// `cargo opkit image`: see the `cargo_opkit::image` docs.
#[derive(Args, Debug)]
struct Image {
    /// The project's directory, or any directory inside it.
    #[arg(long, default_value = ".")]
    dir: PathBuf,
    /// The binary to put in the image (default: the package's only binary,
    /// or the one named like the package).
    #[arg(long)]
    bin: Option<String>,
    /// Write the OCI image layout here: a directory, or a tar archive if the
    /// path ends in .tar (default: <target dir>/oci/<bin>).
    #[arg(long, short)]
    output: Option<PathBuf>,
    /// Name the image in the layout as this reference (name:tag or
    /// host[:port]/name:tag), as `ctr images import` and skopeo read it
    /// (default: the --push reference, else <bin>:<package version>).
    #[arg(long, value_name = "REFERENCE")]
    tag: Option<String>,
    /// Push the image to a registry as this reference (host[:port]/name:tag).
    ///
    /// Credentials are found as docker and ko find them: --username with
    /// --password-stdin; else the Docker configuration
    /// ($DOCKER_CONFIG/config.json, else ~/.docker/config.json):
    /// credHelpers["<registry>"] or credsStore (runs
    /// docker-credential-<name> get), then auths["<registry>"] (as `docker
    /// login` writes it); else none. The registry's WWW-Authenticate
    /// decides between HTTP Basic and a bearer token from its token
    /// service.
    #[arg(long, value_name = "REFERENCE", verbatim_doc_comment)]
    push: Option<String>,
    /// Push over plain HTTP (automatic for registries on loopback that
    /// have no CA configured by --ca-file or certs.d).
    #[arg(long, requires = "push")]
    insecure: bool,
    /// Sign in to the registry as this user (with --password-stdin),
    /// instead of the credentials in the Docker configuration.
    #[arg(long, requires = "password_stdin", value_name = "USER")]
    username: Option<String>,
    /// Read the password (or access token) for --username from stdin.
    #[arg(long, requires_all = ["username", "push"])]
    password_stdin: bool,
    /// Trust the CA certificates in this PEM file for the registry's HTTPS
    /// (besides the system's roots and /etc/docker/certs.d/<host:port>/*.crt).
    /// A loopback registry with a CA is reached over HTTPS.
    #[arg(long, value_name = "FILE", requires = "push")]
    ca_file: Option<PathBuf>,
    /// Build what ships: `cargo build --release --target
    /// x86_64-unknown-linux-gnu`, static, reproducible (the project's
    /// release profile: fat LTO, minutes). Without it, the dev profile:
    /// exactly `cargo build`'s binary with the host's glibc beside it, its
    /// dependencies shared with `cargo build`, `run` and `test`, seconds
    /// after a change.
    #[arg(long)]
    release: bool,
    /// After the push, write the pushed reference with its digest
    /// (host/name:tag@sha256:...) to this file: what `make deploy` deploys,
    /// so a new build of the same tag rolls the Deployment out.
    #[arg(long, value_name = "FILE", requires = "push")]
    write_pushed: Option<PathBuf>,
}

#[derive(Subcommand, Debug)]
enum Create {
    /// Add a kind and its controller (API type, reconciler, test, sample);
    /// with --resource=false, a controller for a kind the project does not
    /// define (a built-in kind, or --external-api-path).
    #[command(disable_version_flag = true)]
    Api {
        /// The kind, UpperCamelCase.
        #[arg(long)]
        kind: String,
        /// Its API version (default: the project's).
        #[arg(long = "version")]
        api_version: Option<String>,
        /// Its API group (default: the project's; `core` for the core group).
        #[arg(long)]
        group: Option<String>,
        /// Whether its objects live in namespaces; --namespaced=false makes a
        /// cluster-scoped kind.
        #[arg(long, default_value_t = true, num_args = 0..=1, require_equals = true, default_missing_value = "true", action = clap::ArgAction::Set)]
        namespaced: bool,
        /// Whether the project defines the kind (its type and CRD);
        /// --resource=false scaffolds only a controller, for a built-in kind
        /// (--group apps --version v1 --kind Deployment) or --external-api-path.
        #[arg(long, default_value_t = true, num_args = 0..=1, require_equals = true, default_missing_value = "true", action = clap::ArgAction::Set)]
        resource: bool,
        /// With --resource=false: the Rust path of the kind's type, for a
        /// kind that is not built in (e.g. crate::external::Certificate).
        #[arg(long, value_name = "RUST_PATH")]
        external_api_path: Option<String>,
        /// With --external-api-path: the domain of the kind's group (recorded
        /// in PROJECT, e.g. cert-manager.io).
        #[arg(long, value_name = "DOMAIN")]
        external_api_domain: Option<String>,
        /// The project's directory, or any directory inside it.
        #[arg(long, default_value = ".")]
        dir: PathBuf,
        /// Do not build the project to regenerate the manifests (without it, a
        /// failed build undoes the whole change).
        #[arg(long)]
        skip_manifests: bool,
    },
    /// Add a validating and defaulting webhook for a kind, served by the manager
    /// behind a Service with a certificate it issues itself (its configurations go
    /// to deploy/05-webhooks.yaml); with --conversion --spoke VERSION, a second
    /// version of the kind converted to and from the first (the hub).
    Webhook {
        /// The kind (one of the project's), UpperCamelCase.
        #[arg(long)]
        kind: String,
        /// Also scaffold a conversion webhook: the kind gains the version --spoke,
        /// converted to and from its version (the hub, stored).
        #[arg(long, requires = "spoke")]
        conversion: bool,
        /// The new version for --conversion (e.g. v1beta1).
        #[arg(long, requires = "conversion")]
        spoke: Option<String>,
        /// The project's directory.
        #[arg(long, default_value = ".")]
        dir: PathBuf,
        /// Do not build the project to regenerate the manifests (without it, a
        /// failed build undoes the whole change).
        #[arg(long)]
        skip_manifests: bool,
    },
}

/// Why a command failed: scaffolding, the installer or the chart, or the
/// image (each as its own error says it).
#[derive(Debug, thiserror::Error)]
enum CommandError {
    /// `new`, `create api`, `create webhook`, `manifests`.
    #[error(transparent)]
    Scaffold(#[from] ScaffoldError),
    /// `installer`, `chart`.
    #[error(transparent)]
    Dist(#[from] cargo_opkit::installer::InstallerError),
    /// `image`.
    #[error(transparent)]
    Image(#[from] cargo_opkit::image::ImageError),
}

fn main() -> ExitCode {
    // `cargo opkit image` names this program as the rustc wrapper of its
    // workspace's crates.
    if let Some(code) = cargo_opkit::image::serve_as_rustc_wrapper() {
        return code;
    }
    // As a cargo subcommand, `cargo opkit new ..` runs `cargo-opkit opkit new ..`.
    let mut args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    if args.get(1).is_some_and(|a| a == "opkit") {
        args.remove(1);
    }
    let cli = Cli::parse_from(args);
    match run(cli.command) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run(command: Top) -> Result<(), CommandError> {
    match command {
        Top::New(new) => {
            let opkit = match (new.opkit_path, new.opkit_version) {
                (Some(path), _) => OpkitDependency::Path(path),
                (None, Some(version)) => OpkitDependency::Version(version),
                (None, None) => OpkitDependency::default_for_new(),
            };
            let project = NewProject {
                name: new.name,
                group: new.group,
                version: new.api_version,
                kind: new.kind,
                dir: new.dir,
                opkit,
                sharding: new.sharding,
                multicluster: new.multicluster.map(MulticlusterProvider::provider),
            };
            // Every input is checked before anything is said or built.
            project.validate()?;
            println!("{}", project.opkit.describe());
            let dir = if new.skip_manifests {
                project.create_with_lockfile(new.lock_from.as_deref())?
            } else {
                match cargo_opkit::shared_target_dir() {
                    Some(target) => eprintln!(
                        "building {} to render deploy/01-crds.yaml and deploy/03-rbac.yaml \
                         (in {}, shared by your opkit projects: the first build takes a few \
                         minutes, later projects reuse it)",
                        project.name,
                        target.display()
                    ),
                    None => eprintln!(
                        "building {} to render deploy/01-crds.yaml and deploy/03-rbac.yaml",
                        project.name
                    ),
                }
                project.create_with_manifests(new.lock_from.as_deref())?
            };
            println!("created {}", dir.display());
            match &project.kind {
                Some(kind) => println!(
                    "next: cd {} && make test   (then implement src/controllers/{}.rs)",
                    dir.display(),
                    cargo_opkit::snake_case(kind)
                ),
                None => println!(
                    "next: cd {} && cargo opkit create api --kind YourKind   (the first kind and its controller)",
                    dir.display()
                ),
            }
            Ok(())
        }
        Top::Create(Create::Api {
            kind,
            api_version,
            group,
            namespaced,
            resource,
            external_api_path,
            external_api_domain,
            dir,
            skip_manifests,
        }) => {
            let create = CreateApi {
                dir,
                kind,
                version: api_version,
                group,
                namespaced,
                resource,
                external_api_path,
                external_api_domain,
            };
            let changed = if skip_manifests {
                create.create()?
            } else {
                create.create_with_manifests()?
            };
            for path in changed {
                println!("wrote {}", path.display());
            }
            Ok(())
        }
        Top::Create(Create::Webhook {
            kind,
            conversion: _,
            spoke,
            dir,
            skip_manifests,
        }) => {
            let create = CreateWebhook {
                dir,
                kind,
                conversion_spoke: spoke,
            };
            let changed = if skip_manifests {
                create.create()?
            } else {
                create.create_with_manifests()?
            };
            for path in changed {
                println!("wrote {}", path.display());
            }
            Ok(())
        }
        Top::Manifests { dir } => Ok(cargo_opkit::manifests(&dir)?),
        Top::Installer { dir, image, out } => {
            let path =
                cargo_opkit::installer::install_yaml(&dir, image.as_deref(), out.as_deref())?;
            println!("wrote {}", path.display());
            Ok(())
        }
        Top::Chart { dir, out } => {
            let path = cargo_opkit::installer::chart(&dir, out.as_deref())?;
            println!("wrote {}", path.display());
            Ok(())
        }
        Top::Image(image) => build_image(image),
    }
}

fn build_image(args: Image) -> Result<(), CommandError> {
    use cargo_opkit::image::{
        ImageError, ImageOptions, Login, OutputFormat, Profile, PushOptions, check_reference,
    };
    for reference in [&args.tag, &args.push].into_iter().flatten() {
        check_reference(reference)?;
    }
    // Read the password before building, as `docker login --password-stdin`.
    let login = match args.username {
        Some(username) if args.password_stdin => Some(Login {
            username,
            password: read_password_stdin()?,
        }),
        _ => None,
    };
    let image = ImageOptions {
        dir: args.dir,
        bin: args.bin,
        output: args.output,
        reference: args.tag.clone().or_else(|| args.push.clone()),
        profile: if args.release {
            Profile::Release
        } else {
            Profile::Dev
        },
    }
    .build()?;
    let kind = match image.format {
        OutputFormat::Directory => "OCI layout",
        OutputFormat::Archive => "OCI archive",
    };
    println!(
        "image {} ({kind}) {}",
        image.reference,
        image.output.display()
    );
    println!(
        "digest {}  size {} bytes (manager {} bytes)",
        image.digest, image.size, image.binary_size
    );
    if let Some(reference) = args.push {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| ImageError::Internal(format!("starting the async runtime: {e}")))?;
        let options = PushOptions {
            insecure: args.insecure,
            login,
            ca_file: args.ca_file,
        };
        let digest = runtime
            .block_on(image.push(&reference, options))
            .inspect_err(|_| {
                eprintln!("note: the image is intact in {}", image.output.display());
            })?;
        println!("pushed {reference}@{digest}");
        if let Some(file) = args.write_pushed {
            std::fs::write(&file, format!("{reference}@{digest}\n")).map_err(|source| {
                ImageError::Io {
                    what: "recording the pushed reference",
                    path: file.clone(),
                    source,
                }
            })?;
        }
    }
    Ok(())
}

/// The password on stdin, without its line end; empty is an error.
fn read_password_stdin() -> Result<String, CommandError> {
    use cargo_opkit::image::ImageError;
    let mut password = String::new();
    std::io::Read::read_to_string(&mut std::io::stdin(), &mut password).map_err(|source| {
        ImageError::Io {
            what: "reading the password from stdin (--password-stdin)",
            path: PathBuf::from("<stdin>"),
            source,
        }
    })?;
    let password = password.trim_end_matches(['\n', '\r']).to_owned();
    if password.is_empty() {
        return Err(ImageError::Credentials {
            registry: "the registry".to_owned(),
            detail: "--password-stdin read an empty password".to_owned(),
        }
        .into());
    }
    Ok(password)
}
