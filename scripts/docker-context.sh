#!/usr/bin/env bash
# Makes DIR the build context `docker build` would get from a fresh clone, cut to what the
# Dockerfile's COPY lines take from it (COPY --from=stage lines take nothing from it): the files
# git tracks, less what .dockerignore excludes. A build run in DIR then fails the way
# `docker build` would when a file is not copied, not committed or excluded. Each path a COPY
# line names must be tracked, matched by none of the repository's own .gitignore rules, and
# not excluded by .dockerignore; otherwise this fails, naming it and why.
# Usage: scripts/docker-context.sh DIR
set -euo pipefail
cd "$(dirname "$0")/.."
target=${1:?usage: docker-context.sh DIR}
[[ -e $target ]] && { echo "docker-context: $target exists" >&2; exit 1; }
git rev-parse --is-inside-work-tree >/dev/null 2>&1 || { echo "docker-context: $PWD is not a git work tree" >&2; exit 1; }
fail() { echo "docker-context: $*" >&2; exit 1; }
# Only the repository's rules count: a machine's own excludes file (core.excludesFile) is not
# in a fresh clone.
repo_git() { git -c core.excludesFile=/dev/null "$@"; }

# Joins continued lines, keeps COPY instructions, drops flags; the last word is the destination.
sources=()
while read -r instruction rest; do
    [[ ${instruction^^} == COPY ]] || continue
    read -ra words <<< "$rest"
    named=()
    from_stage=false
    for word in "${words[@]}"; do
        case $word in
            --from=*) from_stage=true ;;
            --*) ;;
            *) named+=("${word%/}") ;;
        esac
    done
    $from_stage && continue
    unset 'named[${#named[@]}-1]'
    sources+=("${named[@]}")
done < <(sed -e ':a' -e '/\\$/N; s/\\\n//; ta' Dockerfile)
[[ ${#sources[@]} -gt 0 ]] || fail "the Dockerfile copies nothing from the context"

# The context: tracked files that exist, less .dockerignore's exclusions (moby's patternmatcher
# rules: the last matching line wins, `!` re-includes, a pattern also matches every path under
# a directory it matches, `*` and `?` stop at `/`, `**` crosses it).
context=$(repo_git ls-files -z --cached | python3 -c '
import os, re, sys
def compile(pattern):
    out, i = "", 0
    while i < len(pattern):
        c = pattern[i]
        if pattern.startswith("**", i):
            i += 2
            if pattern.startswith("/", i):
                i += 1
            out += ".*" if i >= len(pattern) else "(.*/)?"
            continue
        if c == "*": out += "[^/]*"
        elif c == "?": out += "[^/]"
        elif c == "\\" and i + 1 < len(pattern):
            i += 1
            out += re.escape(pattern[i])
        elif c in "[]-^": out += c
        else: out += re.escape(c)
        i += 1
    return re.compile("^" + out + "$")
rules = []
if os.path.exists(".dockerignore"):
    for line in open(".dockerignore", encoding="utf-8"):
        line = line.strip()
        if not line or line.startswith("#"): continue
        negated = line.startswith("!")
        if negated: line = line[1:].strip()
        line = os.path.normpath(line).lstrip("/")
        rules.append((negated, compile(line)))
def excluded(path):
    parts = path.split("/")
    candidates = [path] + ["/".join(parts[:n]) for n in range(1, len(parts))]
    matched = False
    for negated, rule in rules:
        if negated != matched: continue
        if any(rule.match(c) for c in candidates): matched = not negated
    return matched
for path in sys.stdin.read().split("\0"):
    if path and os.path.lexists(path) and not excluded(path): print(path)
')

mkdir -p "$target"
for source in "${sources[@]}"; do
    [[ -e $source ]] || fail "the Dockerfile copies $source, which does not exist"
    ignored=$(repo_git ls-files --cached --ignored --exclude-standard -- "$source" | head -5)
    [[ -z $ignored ]] || fail "the Dockerfile copies $source, but .gitignore matches $(echo $ignored): keep what the image is built from out of .gitignore"
    repo_git ls-files --error-unmatch -- "$source" >/dev/null 2>&1 \
        || fail "the Dockerfile copies $source, which git does not track: a fresh clone lacks it (git add it)"
    files=$(grep -E "^$(printf '%s' "$source" | sed 's/[][\.^$*+?(){}|]/\\&/g')(/|\$)" <<< "$context" || true)
    [[ -n $files ]] || fail "the Dockerfile copies $source, which .dockerignore excludes from the build context"
    xargs -d '\n' cp -a --parents -t "$target" <<< "$files"
    untracked=$(repo_git ls-files --others --exclude-standard -- "$source" | head -5)
    [[ -z $untracked ]] || echo "docker-context: note: left out, not tracked by git: $(echo $untracked)" >&2
done
