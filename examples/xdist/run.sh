#!/bin/sh
# The suites spread over several Python processes or machines with pytest-xdist, timings
# merged on the controller into one saved run.
#
#   sh examples/xdist/run.sh                       # two local workers (--tx 2*popen)
#   HOSTS="lab1 lab2" sh examples/xdist/run.sh     # one worker per host, over ssh
#
# Remote hosts need $PYTHON (default python3) with pytest-folio installed (pip install
# pytest-folio), as for any pytest plugin under --tx ssh. The fsx seed and the parameter lists are decided
# here, on the controller, and handed to every worker, so all collect the same tests.
set -e
out=$(realpath -m "${OUT:-/tmp/folio-xdist.json}")
# xdist refuses a bare argument that is a path here but not under an --rsyncdir (as
# "-p pytest_folio" is in a checkout, beside pytest_folio/): run from this directory
cd "$(dirname "$0")"
python=${PYTHON:-python3}
tx="--tx 2*popen//python=$python"
if [ -n "${HOSTS:-}" ]; then
    tx=""
    for host in $HOSTS; do tx="$tx --tx ssh=$host//python=$python"; done
fi
# shellcheck disable=SC2086
python3 -m pytest -p pytest_folio --pyargs pytest_folio.suites $tx --dist load \
    "--folio-save=$out" -q "$@"
echo "saved: $out (python -m pytest_folio compare BASE.json $out)"
