#!/usr/bin/env bash
# Runs one libFuzzer target briefly, for ctest:
#   run_fuzzer.sh BINARY SKIP_REASON SECONDS SEED_PATH...
# BINARY empty: prints SKIP_REASON and exits 77 (ctest's SKIP_RETURN_CODE).
# The seeds (files, or folders of files) are copied into a temporary corpus
# so the fuzzer never writes into the shared fixtures; a crash reproducer is
# left in the temporary folder, whose path is printed.
set -euo pipefail
bin=$1 reason=$2 seconds=$3
shift 3
if [[ -z "$bin" ]]; then
  echo "SKIP: $reason"
  exit 77
fi
if [[ ! -x "$bin" ]]; then
  echo "SKIP: $bin not built (build the tunefarm_fuzzers target)"
  exit 77
fi
work=$(mktemp -d "${TMPDIR:-/tmp}/tunefarm-fuzz.XXXXXX")
mkdir -p "$work/corpus" "$work/artifacts"
for seed in "$@"; do
  if [[ -d "$seed" ]]; then
    find "$seed" -type f ! -name '*.md' ! -name 'LICENSE*' \
      -exec cp -t "$work/corpus" {} +
  elif [[ -f "$seed" ]]; then
    cp "$seed" "$work/corpus/"
  else
    echo "seed $seed missing; fuzzing from an empty corpus for it"
  fi
done
echo "corpus: $(ls "$work/corpus" | wc -l) seed file(s); work dir $work"
set +e
"$bin" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
  -max_len=262144 -print_final_stats=1 \
  -artifact_prefix="$work/artifacts/" "$work/corpus"
rc=$?
set -e
if [[ $rc -eq 0 ]]; then
  rm -rf "$work"
else
  echo "FAILED (rc=$rc): reproducer(s) in $work/artifacts/"
fi
exit $rc
