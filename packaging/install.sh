#!/bin/sh
# Installs peerkit, listrd and listrctl with their man pages, shell completions and listrd's systemd
# unit. Called by `make install`; the executables must be built already.
#
#   packaging/install.sh BIN_DIR MAN_DIR
#
# BIN_DIR holds the built executables; MAN_DIR the generated man pages (*.1). Where to install comes
# from the environment: PREFIX (default /usr/local) and DESTDIR (default empty, for staging).
set -eu

bin_dir=$1
man_dir=$2
prefix=${PREFIX:-/usr/local}
root="${DESTDIR:-}$prefix"
tools="peerkit listrd listrctl"

install -d "$root/bin" "$root/share/man/man1" \
    "$root/share/bash-completion/completions" "$root/share/zsh/site-functions" \
    "$root/share/fish/vendor_completions.d" "$root/lib/systemd/system"

for tool in $tools; do
    [ -x "$bin_dir/$tool" ] || { echo "install: $bin_dir/$tool is missing; build it first (make install does)." >&2; exit 1; }
    install -m 0755 "$bin_dir/$tool" "$root/bin/$tool"
    # Completions come from the tool itself (ArgumentParser writes them).
    "$bin_dir/$tool" --generate-completion-script bash > "$root/share/bash-completion/completions/$tool"
    "$bin_dir/$tool" --generate-completion-script zsh > "$root/share/zsh/site-functions/_$tool"
    "$bin_dir/$tool" --generate-completion-script fish > "$root/share/fish/vendor_completions.d/$tool.fish"
done

found=0
for page in "$man_dir"/*.1; do
    [ -e "$page" ] || continue
    install -m 0644 "$page" "$root/share/man/man1/"
    found=$((found + 1))
done
[ "$found" -gt 0 ] || { echo "install: no man pages in $man_dir; run 'make man' first (make install does)." >&2; exit 1; }

sed "s|@BINDIR@|$prefix/bin|g" "$(dirname "$0")/systemd/listrd.service.in" > "$root/lib/systemd/system/listrd.service"
chmod 0644 "$root/lib/systemd/system/listrd.service"

echo "Installed $tools, $found man pages, completions and listrd.service under $root."
