#!/usr/bin/env bash
# Makes DIR a copy of exactly the files the Dockerfile's COPY lines take from the build context
# (COPY --from=stage lines take nothing from it). A build run in DIR then fails the way
# `docker build` would when a COPY line is missing. Usage: scripts/docker-context.sh DIR
set -euo pipefail
cd "$(dirname "$0")/.."
target=${1:?usage: docker-context.sh DIR}
[[ -e $target ]] && { echo "docker-context: $target exists" >&2; exit 1; }
mkdir -p "$target"

# Joins continued lines, keeps COPY instructions, drops flags; the last word is the destination.
sed -e ':a' -e '/\\$/N; s/\\\n//; ta' Dockerfile | while read -r instruction rest; do
    [[ ${instruction^^} == COPY ]] || continue
    read -ra words <<< "$rest"
    sources=()
    from_stage=false
    for word in "${words[@]}"; do
        case $word in
            --from=*) from_stage=true ;;
            --*) ;;
            *) sources+=("$word") ;;
        esac
    done
    $from_stage && continue
    unset 'sources[${#sources[@]}-1]'
    for source in "${sources[@]}"; do
        [[ -e $source ]] || { echo "docker-context: Dockerfile copies $source, which does not exist" >&2; exit 1; }
        cp -a --parents "$source" "$target/"
    done
done
# The build folders under copied directories are what .dockerignore keeps out.
rm -rf "$target/Fuzz/build" "$target/Fuzz/artifacts"
