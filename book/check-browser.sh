#!/usr/bin/env bash
# Opens the built book in headless Chromium, as a reader would, and checks
# what it shows:
#
#   book/check-browser.sh     # builds the book, checks three pages, prints the screenshots' dir
#
# For the landing page, a tutorial page and a search for "reconcile": a
# screenshot under target/book-screens/ (BOOK_SCREENS moves it), the
# page's heading text from the rendered DOM (`--dump-dom`, after its
# scripts ran), no error on the browser console (`--enable-logging=stderr`),
# and, for the search, at least one result. Chromium is Debian's `chromium`,
# installed with apt-get when missing. Pages are opened as file:// URLs:
# nothing listens and nothing leaves the machine.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
out=${BOOK_SCREENS:-$root/target/book-screens}

browser=$(command -v chromium || true)
if [ -z "$browser" ]; then
  echo "check-browser.sh: installing Debian's chromium (once)" >&2
  "$root/tests/apt-install.sh" chromium ||
    { echo "check-browser.sh: chromium is missing and could not be installed" >&2; exit 1; }
  browser=$(command -v chromium)
fi

html=$("$here/build.sh")
mkdir -p "$out"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/opkit-book-browser.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

run_browser() { # run_browser LOG ARGS...: headless, a profile of its own, console on stderr
  local log=$1
  shift
  timeout 120 "$browser" --headless --no-sandbox --disable-gpu --no-first-run \
    --user-data-dir="$tmp/profile" --enable-logging=stderr --v=0 \
    --virtual-time-budget=5000 "$@" 2>>"$log"
}

failed=0
# check NAME PAGE EXPECTED_HEADING [SEARCH]
check() {
  local name=$1 page=$2 heading=$3 search=${4:-}
  local url="file://$html/$page" log="$tmp/$name.log"
  [ -n "$search" ] && url="$url?search=$search"
  run_browser "$log" --dump-dom "$url" >"$tmp/$name.html" || { echo "FAIL $name: chromium failed" >&2; failed=1; }
  run_browser "$log" --window-size=1280,960 --screenshot="$out/$name.png" "$url" >/dev/null ||
    { echo "FAIL $name: no screenshot" >&2; failed=1; }
  # The page's first <h1> (inside <main>, not the menu bar's title), tags stripped.
  local found
  found=$(tr '\n' ' ' <"$tmp/$name.html" | sed 's/.*<main[ >]//' | grep -o '<h1[^>]*>.*</h1>' | head -1 |
    sed -e 's#</h1>.*##' -e 's/<[^>]*>//g' -e 's/^ *//' -e 's/ *$//' || true)
  if [ "$found" != "$heading" ]; then
    echo "FAIL $name: heading is '$found', expected '$heading'" >&2
    failed=1
  fi
  if grep -E 'CONSOLE' "$log" | grep -Eiq 'error|uncaught|failed'; then
    echo "FAIL $name: console errors:" >&2
    grep -E 'CONSOLE' "$log" >&2
    failed=1
  fi
  if [ -n "$search" ]; then
    local hits
    hits=$(tr '\n' ' ' <"$tmp/$name.html" | grep -o '[0-9][0-9]* search results for' | head -1 | cut -d' ' -f1 || true)
    if [ "${hits:-0}" -lt 1 ]; then
      echo "FAIL $name: the search for '$search' shows no result" >&2
      failed=1
    else
      echo "ok   $name: $hits search results for '$search'" >&2
    fi
  fi
  [ $failed = 0 ] && echo "ok   $name: '$found', $out/$name.png" >&2
  return 0
}

check landing index.html "The opkit book"
check tutorial tutorial/api.html "Designing the API"
check search index.html "The opkit book" reconcile

[ $failed = 0 ] || exit 1
echo "$out"
