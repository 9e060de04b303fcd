#!/usr/bin/env bash
# Installs the real servers the tests start: versitygw (S3) into
# $(go env GOPATH)/bin. Embedded etcd and the GCS emulator are Go libraries
# pulled by their nested modules. Idempotent; a cached binary is reused.
set -euo pipefail
VERSITYGW_VERSION=v1.8.0
bin="$(go env GOPATH)/bin"
if ! "$bin/versitygw" --version >/dev/null 2>&1; then
  echo "installing versitygw $VERSITYGW_VERSION (a few minutes on 2 cores)"
  go install "github.com/versity/versitygw/cmd/versitygw@$VERSITYGW_VERSION"
fi
echo "versitygw: $bin/versitygw"
