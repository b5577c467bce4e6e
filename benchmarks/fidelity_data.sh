#!/usr/bin/env bash
# The recordings benchmarks/fidelity.py measures on, collected from the real environments and exported as JSONL.
#
#   bash benchmarks/fidelity_data.sh [OUT_DIR]      # default /tmp/fidelity-data; about 10 minutes on 2 cores
#
# Exploratory (`--policy curious`: revisits, reads after writes, invalid actions) and expert recordings: ALFWorld's
# 36 shared games, TextWorld games of four configurations at seeds 1-8 (construction) and 101-108 (unseen), ten
# ScienceWorld tasks in two variations, the 18 shell chores twice, and all 800 BFCL multi-turn entries.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-/tmp/fidelity-data}
WS="$OUT/workspace"
mkdir -p "$OUT"
export OMP_NUM_THREADS=1 HF_HUB_OFFLINE=1
WORLDSMITH=.venv/bin/worldsmith

collect() {  # dataset name, then the collect arguments
  local name=$1; shift
  "$WORLDSMITH" collect "$@" --dataset "$name" --workspace "$WS" --json > "$OUT/$name.collect.json"
  "$WORLDSMITH" export --dataset "$name" --format jsonl --out "$OUT/$name.jsonl" --workspace "$WS" > /dev/null
}

TW_TASKS="$OUT/textworld_tasks.txt"
: > "$TW_TASKS"
for config in 'coin_collector:level=10' 'cooking:cut,go=6,open,recipe=2,take=1' \
              'custom:nb_objects=8,quest_length=4,world_size=4' 'treasure_hunter:level=10'; do
  for seed in 1 2 3 4 5 6 7 8 101 102 103 104 105 106 107 108; do echo "$config:seed=$seed" >> "$TW_TASKS"; done
done
SW_TASKS=$(for task in boil melt find-living-thing find-animal grow-plant power-component test-conductivity \
                       use-thermometer chemistry-mix-paint-secondary-color lifespan-longest-lived; do
             echo -n "$task:0 $task:1 "; done)
BFCL_TASKS=$(for category in multi_turn_base multi_turn_miss_func multi_turn_miss_param multi_turn_long_context; do
               for i in $(seq 0 199); do echo -n "${category}_$i "; done; done)

collect alf-curious alfworld --policy curious --max-steps 40 --workers 2
collect tw-curious textworld --tasks-file "$TW_TASKS" --policy curious --max-steps 40 --workers 2 \
  --policy-arg min_steps=30
collect tw-expert textworld --tasks-file "$TW_TASKS" --policy expert --workers 2 --keep all
# shellcheck disable=SC2086
collect sw-curious scienceworld --tasks $SW_TASKS --policy curious --max-steps 40 --workers 2 --policy-arg min_steps=30
collect shell-curious shell --policy curious --episodes 36 --max-steps 25 --workers 2 --policy-arg expert=0.1
# shellcheck disable=SC2086
collect bfcl-expert bfcl --tasks $BFCL_TASKS --policy expert --workers 2 --keep all
# shellcheck disable=SC2086
collect bfcl-curious bfcl --tasks $BFCL_TASKS --policy curious --workers 2
echo "recordings in $OUT"
