//! `#[derive(Controller)]`: the main mistakes are compile errors pointing
//! at the offending attribute
//! (`tests/ui/*.stderr` hold the expected messages; regenerate them with
//! `TRYBUILD=overwrite cargo test -p opkit-tests --test it macros_ui`).

#[test]
fn controller_derive() {
    let t = trybuild::TestCases::new();
    t.compile_fail("ui/missing_for.rs");
    t.compile_fail("ui/no_attribute.rs");
    t.compile_fail("ui/unknown_option.rs");
    t.compile_fail("ui/project_with_metadata.rs");
    t.compile_fail("ui/project_for_two_kinds.rs");
    t.compile_fail("ui/unknown_verb.rs");
    t.compile_fail("ui/misspelt_resource.rs");
    t.compile_fail("ui/watch_without_map.rs");
    t.compile_fail("ui/duplicate_for.rs");
    t.compile_fail("ui/zero_workers.rs");
    t.compile_fail("ui/wrong_mapper.rs");
    t.compile_fail("ui/not_a_resource.rs");
    t.compile_fail("ui/not_reconcile.rs");
    t.compile_fail("ui/kind_mismatch.rs");
    t.compile_fail("ui/rbac_typo_is_the_only_error.rs");
    t.compile_fail("ui/hub_watch_without_multicluster.rs");
    t.compile_fail("ui/member_watch_with_multicluster.rs");
}
