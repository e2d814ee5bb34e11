#!/usr/bin/env bash
# The published crates, as a user gets them: packages opkit-macros, opkit,
# opkit-envtest and cargo-opkit (`cargo package`, nothing published), serves
# them from a local directory registry that stands in for crates.io (beside
# every other dependency, vendored from this workspace's Cargo.lock), installs
# `cargo opkit` from it, makes a project with `cargo opkit new` (which then
# depends on `opkit = "0.1.0"` and `opkit-envtest = "0.1.0"`, not on a path),
# and builds and tests that project; all with the toolchain of the declared
# MSRV (the workspace's `rust-version`), so the check is also the MSRV test.
#
#   tests/package/check.sh      # prints each step; exits non-zero on a failure
#
# The project's tests run against the control plane in the opkit cache
# (`make controlplane`). Everything is kept under $OPKIT_CACHE/package-check:
# the vendored sources (refreshed when Cargo.lock changes) and one target
# directory, where only the four crates rebuild when their packages change.
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
cache=${OPKIT_CACHE:-$HOME/.cache/opkit}
check="$cache/package-check"
crates=(opkit-macros opkit opkit-envtest cargo-opkit)
version=$(sed -n 's/^version = "\(.*\)"$/\1/p' "$repo/Cargo.toml" | head -n 1)
say() { echo "package-check: [${SECONDS}s] $*" >&2; }
die() { echo "package-check: error: $*" >&2; exit 1; }

# The declared MSRV, and the toolchain that tests it ("1.95" -> "1.95.0").
msrv=$(sed -n 's/^rust-version = "\([0-9.]*\)"$/\1/p' "$repo/Cargo.toml" | head -n 1)
[ -n "$msrv" ] || die "no rust-version in $repo/Cargo.toml"
toolchain=$msrv
[[ $toolchain == *.*.* ]] || toolchain=$toolchain.0
cargo=$(rustup which --toolchain "$toolchain" cargo 2>/dev/null) ||
  die "the MSRV toolchain $toolchain (rust-version = \"$msrv\") is not installed: rustup toolchain install $toolchain"
RUSTC=$(rustup which --toolchain "$toolchain" rustc)
RUSTDOC=$(rustup which --toolchain "$toolchain" rustdoc)
export CARGO=$cargo RUSTC RUSTDOC RUSTUP_TOOLCHAIN=$toolchain
say "MSRV $msrv: $("$RUSTC" --version)"

mkdir -p "$check"
exec 9>"$check/.lock"
flock 9

# 1. The packages, from this checkout as it is (uncommitted changes too).
packages="$check/packages"
rm -rf "$packages"
say "cargo package ${crates[*]}"
selection=()
for crate in "${crates[@]}"; do selection+=(-p "$crate"); done
(cd "$repo" && "$cargo" package --quiet --allow-dirty --no-verify "${selection[@]}" \
  --target-dir "$packages")
for crate in "${crates[@]}"; do
  file="$packages/package/$crate-$version.crate"
  [ -f "$file" ] || die "cargo package made no $file"
  size=$(stat -c %s "$file")
  # A package holds sources and templates: anything near this is a stray file.
  [ "$size" -lt 1048576 ] || die "$file is $size bytes; check \`cargo package -p $crate --list\`"
  say "  $(basename "$file"): $size bytes"
done

# 2. The registry: every crates.io dependency of the workspace (cargo vendor)
# and of a generated project (its optional OpenTelemetry crates are in no
# workspace member), redone when Cargo.lock or the project's Cargo.toml
# template changes; plus the four packages, unpacked with the checksums a
# directory source wants.
vendor="$check/vendor"
vendor_key=$(cat "$repo/Cargo.lock" "$repo/templates/project/Cargo.toml.tmpl" | sha256sum | cut -d' ' -f1)
vendored=true
if [ "$(cat "$vendor/.vendor-sha256" 2>/dev/null)" != "$vendor_key" ]; then
  vendored=false
  say "cargo vendor (Cargo.lock or the project template changed)"
  rm -rf "$vendor"
  (cd "$repo" && "$cargo" vendor --quiet --locked --versioned-dirs "$vendor" >/dev/null)
fi
contents=()
for file in "$packages"/package/*.crate; do
  dir="$vendor/$(basename "$file" .crate)"
  rm -rf "$dir"
  tar -xzf "$file" -C "$vendor"
  {
    printf '{"files":{'
    sep=
    while IFS= read -r -d '' f; do
      sum=$(sha256sum "$f" | cut -d' ' -f1)
      printf '%s"%s":"%s"' "$sep" "${f#"$dir"/}" "$sum"
      sep=,
      # What the packages hold, less the commit they were made at.
      [ "${f##*/}" = .cargo_vcs_info.json ] || contents+=("${f#"$vendor"/} $sum")
    done < <(find "$dir" -type f -print0 | sort -z)
    printf '},"package":"%s"}' "$(sha256sum "$file" | cut -d' ' -f1)"
  } >"$vendor/.checksum.tmp"
  mv "$vendor/.checksum.tmp" "$dir/.cargo-checksum.json"
done

# crates.io is replaced by the directory: nothing is fetched, and a
# dependency the packages need but the registry lacks fails the build.
work="$check/work"
rm -rf "$work"
mkdir -p "$work/.cargo"
cat >"$work/.cargo/config.toml" <<EOF
[source.crates-io]
replace-with = "opkit-package-check"

[source.opkit-package-check]
directory = "$vendor"
EOF

# One target directory for every run. Registry packages are fresh by their
# version, not their contents, so when the packages changed their build
# records go (their dependencies stay built).
export CARGO_TARGET_DIR="$check/target"
sums=$(printf '%s\n' "${contents[@]}" | sha256sum | cut -d' ' -f1)
if [ "$(cat "$CARGO_TARGET_DIR/.packages-sha256" 2>/dev/null)" != "$sums" ]; then
  rm -rf "$CARGO_TARGET_DIR"/*/.fingerprint/{opkit,cargo-opkit,package-check-operator}-*
fi

# 3. `cargo install cargo-opkit`, from the registry, with its packaged lock
# (the dev profile: its dependencies are the project's, built once). Install
# reads no project config: the registry's is given as a file.
say "cargo install cargo-opkit (from the local registry)"
(cd "$work" && "$cargo" install --config "$work/.cargo/config.toml" --quiet --debug --locked \
  --force cargo-opkit --root "$work/bin")
echo "$sums" >"$CARGO_TARGET_DIR/.packages-sha256"

# 4. A new project: a cargo-opkit from the registry defaults to the
# published opkit of its own version.
say "cargo opkit new"
(cd "$work" && "$work/bin/bin/cargo-opkit" opkit new package-check-operator \
  --group check.opkit.dev --kind Widget --skip-manifests)
project="$work/package-check-operator"
grep -q "^opkit = { version = \"$version\"" "$project/Cargo.toml" ||
  die "the project does not depend on the published opkit: $(grep opkit "$project/Cargo.toml")"
grep -qx "opkit-envtest = \"$version\"" "$project/Cargo.toml" ||
  die "the project does not depend on the published opkit-envtest"

# The project's own dependencies join the registry: a copy of it that takes
# the three crates from their unpacked packages ([patch]) resolves against
# crates.io, starting from the workspace's versions, and is vendored too.
if ! $vendored; then
  seed="$check/seed"
  rm -rf "$seed"
  cp -r "$project" "$seed"
  cp "$repo/Cargo.lock" "$seed/Cargo.lock"
  {
    echo
    echo "[patch.crates-io]"
    for crate in opkit opkit-macros opkit-envtest; do
      echo "$crate = { path = \"$vendor/$crate-$version\" }"
    done
  } >>"$seed/Cargo.toml"
  (cd "$seed" && "$cargo" metadata --format-version 1 >/dev/null)
  (cd "$repo" && "$cargo" vendor --quiet --locked --versioned-dirs --no-delete \
    --sync "$seed/Cargo.toml" "$vendor" >/dev/null)
  rm -rf "$seed"
  echo "$vendor_key" >"$vendor/.vendor-sha256"
fi

# `cargo opkit manifests` builds the project to render its manifests.
say "cargo opkit manifests (builds the project against the registry's opkit)"
(cd "$project" && "$work/bin/bin/cargo-opkit" opkit manifests)
for crate in opkit opkit-macros opkit-envtest; do
  grep -A2 "^name = \"$crate\"$" "$project/Cargo.lock" | grep -q '^source = "registry+' ||
    die "$crate is not resolved from the registry in the project's Cargo.lock"
done

# 5. Its build and its tests (against a real control plane).
say "cargo build, cargo test in the project"
(cd "$project" && "$cargo" build --quiet && "$cargo" test --quiet)

# 6. Without the control plane, the project's tests fail naming the build
# script opkit-envtest ships, by its path in the registry's copy; and that
# script runs from there (it finds the cache the tests above used).
say "the packaged opkit-envtest names its shipped build script, which runs from the package"
shipped="$vendor/opkit-envtest-$version/scripts/controlplane/build.sh"
none="$work/no-assets"
mkdir -p "$none"
if out=$(cd "$project" && KUBEBUILDER_ASSETS=$none "$cargo" test --quiet 2>&1); then
  die "the project's tests passed with KUBEBUILDER_ASSETS=$none (no binaries)"
fi
grep -qF "bash $shipped" <<<"$out" ||
  die "the missing-binaries error does not name $shipped:"$'\n'"$(grep -m 5 -A 3 panicked <<<"$out")"
bin=$(bash "$shipped") || die "$shipped failed"
if ! [ -x "$bin/kube-apiserver" ] || ! [ -x "$bin/etcd" ]; then
  die "$shipped printed $bin, without the binaries"
fi
say "ok: the packaged crates build and pass a generated project's tests with Rust $msrv"
