#!/usr/bin/env bash
# The Python half of the test suite: installs the package's dependencies and the package, then
# runs pytest (GPU tests skip with a message where torch sees no GPU).
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}

./scripts/setup_python.sh
"$PYTHON" -m pytest tests/python -q -rs -p no:cacheprovider
