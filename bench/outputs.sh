#!/bin/sh
# bench/outputs.sh BIN OUTDIR: the simulation's outputs a change that must
# not alter results is checked against — three `omega sim` runs (shared
# state, two-level, four batch schedulers at load 3), the genuine Google
# 2011 excerpt replayed (when ../shared/traces is there) and every
# experiment's --quick grid. Compare two builds' directories with
#   diff -r -x summary.json -x host.csv -x store-cost.json -x report.md A B
# (host.csv holds each run's wall time; store-cost.json raw-vs-mediated's
# measured claims/s, which the reports quote; every result the reports
# are made of is in the CSV files compared).
set -e
B=$1
O=$2
TRACES=${TRACES:-$(dirname "$0")/../../shared/traces}
mkdir -p "$O"
"$B" sim --machines 2000 --days 0.25 --seed 3 --out "$O/sim1" --force >/dev/null 2>&1
"$B" sim --machines 2000 --days 0.25 --seed 4 --architecture two-level --out "$O/sim2" --force >/dev/null 2>&1
"$B" sim --machines 1000 --days 0.2 --seed 5 --schedulers batch=4,service=1 --load 3 --out "$O/sim3" --force >/dev/null 2>&1
if [ -d "$TRACES/google-clusterdata-2011-2" ]; then
	"$B" replay --format google2011 --trace "$TRACES/google-clusterdata-2011-2" --overcommit 2 --out "$O/replay1" --force >/dev/null 2>&1
fi
rm -rf "$O/bench"
"$B" bench all --quick --out "$O/bench" >/dev/null 2>&1
