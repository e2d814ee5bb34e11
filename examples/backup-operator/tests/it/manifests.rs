//! `deploy/01-crds.yaml` and `deploy/03-rbac.yaml` are what the code
//! renders: run `make manifests` after changing an API type or a
//! `#[controller(...)]` attribute.

#[test]
fn deploy_manifests_are_up_to_date() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy");
    for (file, rendered) in backup_operator::manifests().expect("render the manifests") {
        let on_disk = std::fs::read_to_string(dir.join(file)).unwrap_or_default();
        assert!(
            on_disk == rendered,
            "deploy/{file} is out of date with the code: run `make manifests`"
        );
    }
}
