//! `cargo opkit create webhook` end to end: a generated project gets a
//! webhook for its first kind and for a kind added later, renders their
//! configurations into `deploy/05-webhooks.yaml`, and passes the generated
//! webhook tests against a real kube-apiserver without an edit.

use std::path::Path;
use std::process::Command;

use super::support::{
    cargo_opkit, free_loopback_address, new_project, path_with_cargo_opkit, persist,
    render_manifests, succeeds, sync_into, target_dir, text,
};

#[test]
fn created_webhooks_are_served_rendered_and_tested() {
    // Generated and changed in a temporary directory; each state that is
    // built goes to a directory of its own that persists between runs
    // (support::persist), so an unchanged state compiles nothing again.
    let tmp = tempfile::tempdir().expect("tempdir");
    let project = new_project(tmp.path(), "gate-operator", "gate.example.com", "Gate");
    let dir = project.to_str().expect("utf-8");

    // Bad input: a kind the project lacks is refused, nothing written.
    let output = cargo_opkit(
        &["opkit", "create", "webhook", "--kind", "Door", "--dir", dir],
        &project,
    );
    assert!(!output.status.success());
    assert!(
        String::from_utf8_lossy(&output.stderr).contains("the project has no such kind"),
        "{}",
        text(&output)
    );
    assert!(!project.join("src/webhooks").exists());

    succeeds(
        cargo_opkit(
            &[
                "opkit",
                "create",
                "webhook",
                "--kind",
                "Gate",
                "--dir",
                dir,
                "--skip-manifests",
            ],
            &project,
        ),
        "cargo opkit create webhook --kind Gate",
    );
    // Twice is refused.
    let output = cargo_opkit(
        &[
            "opkit",
            "create",
            "webhook",
            "--kind",
            "Gate",
            "--dir",
            dir,
            "--skip-manifests",
        ],
        &project,
    );
    assert!(!output.status.success());
    // Issue 38: a second `create webhook` for a kind says what to do
    // instead (before: "already exists; choose another name").
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("has its webhooks already") && stderr.contains("--conversion --spoke"),
        "{}",
        text(&output)
    );
    // Conversion for Gate: its version (v1alpha1) is the hub. The hub's own
    // version as the spoke is refused, nothing written.
    let output = cargo_opkit(
        &[
            "opkit",
            "create",
            "webhook",
            "--kind",
            "Gate",
            "--conversion",
            "--spoke",
            "v1alpha1",
            "--dir",
            dir,
            "--skip-manifests",
        ],
        &project,
    );
    assert!(!output.status.success());
    assert!(
        String::from_utf8_lossy(&output.stderr).contains("is the kind's version already"),
        "{}",
        text(&output)
    );
    assert!(!project.join("src/api/gate_v1alpha1.rs").exists());
    succeeds(
        cargo_opkit(
            &[
                "opkit",
                "create",
                "webhook",
                "--kind",
                "Gate",
                "--conversion",
                "--spoke",
                "v1beta1",
                "--dir",
                dir,
                "--skip-manifests",
            ],
            &project,
        ),
        "cargo opkit create webhook --kind Gate --conversion --spoke v1beta1",
    );
    // A second spoke is left to the user, with the reason.
    let output = cargo_opkit(
        &[
            "opkit",
            "create",
            "webhook",
            "--kind",
            "Gate",
            "--conversion",
            "--spoke",
            "v1",
            "--dir",
            dir,
            "--skip-manifests",
        ],
        &project,
    );
    assert!(!output.status.success());
    assert!(
        String::from_utf8_lossy(&output.stderr).contains("one spoke per kind"),
        "{}",
        text(&output)
    );

    // A second kind, cluster-scoped, then its webhook and conversion:
    // registered at the markers, tested with cluster-wide `Api`s.
    succeeds(
        cargo_opkit(
            &[
                "opkit",
                "create",
                "api",
                "--kind",
                "Lock",
                "--namespaced=false",
                "--dir",
                dir,
                "--skip-manifests",
            ],
            &project,
        ),
        "cargo opkit create api --kind Lock --namespaced=false",
    );
    succeeds(
        cargo_opkit(
            &[
                "opkit",
                "create",
                "webhook",
                "--kind",
                "Lock",
                "--dir",
                dir,
                "--skip-manifests",
            ],
            &project,
        ),
        "cargo opkit create webhook --kind Lock",
    );
    succeeds(
        cargo_opkit(
            &[
                "opkit",
                "create",
                "webhook",
                "--kind",
                "Lock",
                "--conversion",
                "--spoke",
                "v1beta1",
                "--dir",
                dir,
                "--skip-manifests",
            ],
            &project,
        ),
        "cargo opkit create webhook --kind Lock --conversion --spoke v1beta1",
    );
    // What `create webhook` without --skip-manifests does next: render
    // the manifests (a build of this state, under a package name of its
    // own); the staged project goes on from the rendered files.
    {
        let lock = persist(&project, "create_webhook-lock", Some("gate-operator-lock"));
        render_manifests(&lock.dir);
        sync_into(&lock.dir.join("deploy"), &project.join("deploy"));
    }

    // A kind whose spec the user replaced (the template's `message` gone)
    // before adding its webhook: the webhook compiles whatever the spec
    // holds (its bodies are TODOs), and so does its test.
    succeeds(
        cargo_opkit(
            &[
                "opkit",
                "create",
                "api",
                "--kind",
                "Door",
                "--dir",
                dir,
                "--skip-manifests",
            ],
            &project,
        ),
        "cargo opkit create api --kind Door",
    );
    replace_door_spec(&project);
    succeeds(
        cargo_opkit(
            &[
                "opkit",
                "create",
                "webhook",
                "--kind",
                "Door",
                "--dir",
                dir,
                "--skip-manifests",
            ],
            &project,
        ),
        "cargo opkit create webhook --kind Door (a spec without `message`)",
    );
    // The user's first rule in the Door validator: what `make run`'s
    // webhooks refuse below.
    let door = project.join("src/webhooks/door.rs");
    let code = std::fs::read_to_string(&door).expect("door.rs");
    let rule = "return Err(opkit::webhook::Denied::invalid(\"spec.message must not be blank\"));\n        // }\n        let _ = object;\n";
    assert!(code.contains(rule), "{code}");
    std::fs::write(
        &door,
        code.replacen(
            rule,
            "return Err(opkit::webhook::Denied::invalid(\"spec.message must not be blank\"));\n        // }\n        if object.spec.panels > 8 {\n            return Err(opkit::webhook::Denied::invalid(\n                \"spec.panels must be at most 8\",\n            ));\n        }\n",
            1,
        ),
    )
    .expect("write door.rs");
    let last = persist(&project, "create_webhook", None);
    let project = last.dir.clone();
    render_manifests(&project);
    let door_webhook =
        std::fs::read_to_string(project.join("src/webhooks/door.rs")).expect("door.rs");
    assert!(door_webhook.contains("// TODO(user)"), "{door_webhook}");

    let yaml =
        std::fs::read_to_string(project.join("deploy/05-webhooks.yaml")).expect("05-webhooks");
    for expected in [
        "kind: Service",
        "name: gate-operator-webhook-service",
        "kind: ValidatingWebhookConfiguration",
        "kind: MutatingWebhookConfiguration",
        "path: /validate-gate-example-com-v1alpha1-gate",
        "path: /mutate-gate-example-com-v1alpha1-lock",
        "name: vgate-v1alpha1.gate.example.com",
        // The managed certificate's RBAC: its Secret, and the injection.
        "kind: Role",
        "- gate-operator-webhook-service-cert",
        "kind: ClusterRole",
        "- gate-operator-validating",
        "- gates.gate.example.com",
    ] {
        assert!(yaml.contains(expected), "{expected:?} missing:\n{yaml}");
    }
    // No caBundle in the files: the manager injects it.
    assert!(!yaml.contains("caBundle"), "{yaml}");
    let crds = std::fs::read_to_string(project.join("deploy/01-crds.yaml")).expect("01-crds");
    for expected in [
        "strategy: Webhook",
        "path: /convert",
        "name: gate-operator-webhook-service",
        "name: v1beta1",
        "name: v1alpha1",
    ] {
        assert!(crds.contains(expected), "{expected:?} missing:\n{crds}");
    }
    let main = std::fs::read_to_string(project.join("src/main.rs")).expect("main.rs");
    assert!(main.contains("gate_operator::webhooks::server(args.manage_webhook_certificate)"));
    assert!(main.contains("gate_operator::webhooks::local_server("));
    assert!(main.contains("manage_webhook_certificate: bool"));
    assert!(main.contains("env = \"ENABLE_WEBHOOKS\""), "{main}");
    // The Deployment exposes the port and has the certificate's volume;
    // `make deploy` applies 05-webhooks.yaml.
    let deployment =
        std::fs::read_to_string(project.join("deploy/04-deployment.yaml")).expect("04");
    for expected in [
        "- --manage-webhook-certificate",
        "containerPort: 9443",
        "mountPath: /tmp/k8s-webhook-server/serving-certs",
        "emptyDir: {}",
    ] {
        assert!(
            deployment.contains(expected),
            "{expected:?} missing:\n{deployment}"
        );
    }
    let makefile = std::fs::read_to_string(project.join("Makefile")).expect("Makefile");
    assert!(
        makefile
            .lines()
            .any(|l| l == "MANIFESTS = $(sort $(wildcard deploy/*.yaml))"),
        "make deploy must apply every deploy/*.yaml, 05-webhooks.yaml included:\n{makefile}"
    );

    // What `create` wrote is formatted: `make lint` passes right after.
    let output = cargo_opkit::cargo_command()
        .args(["fmt", "--check"])
        .current_dir(&project)
        .output()
        .expect("run cargo fmt");
    assert!(
        output.status.success(),
        "the generated project is not rustfmt-clean:\n{}",
        text(&output)
    );

    let output = cargo_opkit::cargo_command()
        .args([
            "test",
            "--test",
            "gate_webhook",
            "--test",
            "lock_webhook",
            "--test",
            "door_webhook",
            "--test",
            "gate_conversion",
            "--test",
            "lock_conversion",
            "--test",
            "manifests",
        ])
        .current_dir(&project)
        .env("CARGO_TARGET_DIR", target_dir())
        .output()
        .expect("run cargo test");
    assert!(
        output.status.success(),
        "the generated webhook tests failed:\n{}",
        text(&output)
    );
    let stdout = String::from_utf8_lossy(&output.stdout);
    for test in [
        "the_apiserver_calls_the_gate_webhooks",
        "the_apiserver_calls_the_lock_webhooks",
        "the_apiserver_calls_the_door_webhooks",
        "gate_is_converted_between_v1beta1_and_v1alpha1",
        "lock_is_converted_between_v1beta1_and_v1alpha1",
        "deploy_manifests_are_up_to_date",
    ] {
        assert!(
            stdout.contains(&format!("test {test} ... ok")),
            "{test} did not pass:\n{stdout}"
        );
    }

    make_run_works_with_webhooks(&project);
}

/// What a user does after `create api --kind Door`: the example field
/// `message` replaced by their own, in the type, the sample and the test.
fn replace_door_spec(project: &Path) {
    let edit = |file: &str, from: &str, to: &str| {
        let path = project.join(file);
        let text = std::fs::read_to_string(&path).expect("read");
        assert!(text.contains(from), "{file} has no {from:?}:\n{text}");
        std::fs::write(&path, text.replace(from, to)).expect("write");
    };
    edit(
        "src/api/door.rs",
        "    pub message: Option<String>,",
        "    pub width: Option<String>,\n    /// How many panels.\n    pub panels: u32,",
    );
    edit("samples/door.yaml", "  message: hello", "  panels: 2");
    edit(
        "tests/door_controller.rs",
        "message: Some(\"hello\".into()),",
        "width: None,\n            panels: 2,",
    );
}

/// `make install` then `make run` against a real control plane, with
/// webhooks in the project and no other step (issue 38): the manager
/// serves them itself for the apiserver on this machine (`ENABLE_WEBHOOKS`
/// unset: `local`), registered by URL, so the user's Door rule refuses a
/// bad object; at Ctrl-C (SIGINT) the registration is gone.
fn make_run_works_with_webhooks(project: &Path) {
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    let plane = runtime
        .block_on(opkit_envtest::ControlPlane::start())
        .expect("start etcd and kube-apiserver");
    let path = path_with_cargo_opkit();
    let (probes_address, webhook_address) = (free_loopback_address(), free_loopback_address());
    let make = |args: &[&str]| {
        let mut command = Command::new("make");
        cargo_opkit::clear_crate_env(&mut command)
            .args(args)
            .current_dir(project)
            .env("PATH", &path)
            .env("KUBECONFIG", plane.kubeconfig_path())
            .env("CARGO_TARGET_DIR", target_dir())
            .env("WEBHOOK_BIND_ADDRESS", webhook_address.to_string())
            .env_remove("ENABLE_WEBHOOKS");
        command
    };
    let output = make(&["install"]).output().expect("run make install");
    assert!(output.status.success(), "make install:\n{}", text(&output));

    // Outside the temporary project, so it is there to read when this fails.
    let log = target_dir().join(format!("make-run-{}.log", std::process::id()));
    let log_file = std::fs::File::create(&log).expect("log file");
    let mut run = make(&[
        "run",
        "METRICS_ADDR=0",
        &format!("PROBE_ADDR={probes_address}"),
    ]);
    std::os::unix::process::CommandExt::process_group(&mut run, 0);
    let child = run
        .stdout(log_file.try_clone().expect("log"))
        .stderr(log_file)
        .spawn()
        .expect("run make run");
    let child = std::sync::Mutex::new(child);
    let waiting = format!("make run to serve /readyz (its output: {})", log.display());
    let ready = runtime.block_on(opkit_envtest::eventually(
        &waiting,
        std::time::Duration::from_secs(180),
        || async {
            if let Ok(Some(status)) = child.lock().expect("child").try_wait() {
                return Some(format!("make run exited ({status})"));
            }
            let mut stream = tokio::net::TcpStream::connect(probes_address).await.ok()?;
            use tokio::io::{AsyncReadExt, AsyncWriteExt};
            stream
                .write_all(b"GET /readyz HTTP/1.0\r\nHost: probes\r\n\r\n")
                .await
                .ok()?;
            // The status line is in the first bytes; the server may keep
            // the connection open after its answer.
            let mut answer = vec![0; 512];
            let read =
                tokio::time::timeout(std::time::Duration::from_secs(5), stream.read(&mut answer))
                    .await
                    .ok()?
                    .ok()?;
            let answer = String::from_utf8_lossy(&answer[..read]).into_owned();
            let status = answer.lines().next().unwrap_or_default().to_owned();
            status.contains(" 200").then_some(status)
        },
    ));
    let output = || std::fs::read_to_string(&log).expect("make run's output");
    assert!(ready.contains(" 200"), "{ready}\n{}", output());

    // The apiserver calls `make run`'s webhooks: a Door of 9 panels is
    // refused with the user's message, one of 2 admitted.
    // A kube client spawns its buffer's task on the runtime it is made in.
    let client = {
        let _entered = runtime.enter();
        plane.client().expect("a client")
    };
    let configurations: kube::Api<
        k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration,
    > = kube::Api::all(client.clone());
    let local = runtime
        .block_on(configurations.get_opt("gate-operator-local"))
        .expect("read the configurations");
    let url = local
        .and_then(|c| c.webhooks)
        .and_then(|w| w.into_iter().next())
        .and_then(|w| w.client_config.url);
    assert!(
        url.as_deref()
            .is_some_and(|u| u.starts_with(&format!("https://{webhook_address}/validate-"))),
        "{url:?}\n{}",
        output()
    );
    let doors = kube::Api::<kube::api::DynamicObject>::namespaced_with(
        client,
        "default",
        &kube::api::ApiResource {
            group: "gate.example.com".to_owned(),
            version: "v1alpha1".to_owned(),
            api_version: "gate.example.com/v1alpha1".to_owned(),
            kind: "Door".to_owned(),
            plural: "doors".to_owned(),
        },
    );
    let door = |name: &str, panels: u32| -> kube::api::DynamicObject {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "gate.example.com/v1alpha1",
            "kind": "Door",
            "metadata": { "name": name },
            "spec": { "panels": panels },
        }))
        .expect("a Door")
    };
    // The apiserver picks a new configuration up within a moment: until it
    // has, a create is admitted (and deleted again here).
    let refused = runtime.block_on(opkit_envtest::eventually(
        "make run's webhook to refuse a Door of 9 panels",
        std::time::Duration::from_secs(60),
        || async {
            match doors.create(&Default::default(), &door("wide", 9)).await {
                Err(kube::Error::Api(status)) => Some(status),
                Err(_) => None,
                Ok(_) => {
                    let _ = doors.delete("wide", &Default::default()).await;
                    None
                }
            }
        },
    ));
    assert!(
        refused.message.contains("spec.panels must be at most 8"),
        "{refused:?}\n{}",
        output()
    );
    runtime
        .block_on(doors.create(&Default::default(), &door("narrow", 2)))
        .unwrap_or_else(|e| panic!("a Door of 2 panels: {e}\n{}", output()));

    // Ctrl-C stops make and the manager (the whole process group, `--`
    // so the negative id is read as a group, not as an option).
    let group = format!("-{}", child.lock().expect("child").id());
    let _ = Command::new("kill")
        .args(["-s", "INT", "--", &group])
        .status();
    runtime.block_on(opkit_envtest::eventually(
        "make run to stop on SIGINT",
        std::time::Duration::from_secs(60),
        || async { child.lock().expect("child").try_wait().ok().flatten() },
    ));
    let gone = runtime
        .block_on(configurations.get_opt("gate-operator-local"))
        .expect("read the configurations");
    assert!(
        gone.is_none(),
        "the local configuration outlived make run:\n{}",
        output()
    );
    let served: Vec<String> = output()
        .lines()
        .filter(|l| l.contains("webhooks served locally"))
        .map(str::to_owned)
        .collect();
    assert_eq!(served.len(), 1, "one line says where:\n{}", output());
    let _ = std::fs::remove_file(&log);
}
