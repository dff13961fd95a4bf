#!/usr/bin/env bash
# Validates every recipe under configs/ with the real binary; all must pass.
set -uo pipefail
ftcore="$1"; configs="$2"
status=0; count=0
while IFS= read -r recipe; do
  # Experiment files ([experiment] + [[arm]]) are `ftcore ab` input: the install
  # test resolves configs/ab/optimizers.toml with its third-party arm built.
  if grep -q '^\[experiment\]' "$recipe"; then echo "experiment file (checked by the install test): $recipe"; continue; fi
  count=$((count + 1))
  if ! "$ftcore" validate "$recipe"; then
    echo "FAILED: $recipe"; status=1
  fi
done < <(find "$configs" -name '*.toml' | sort)
if [[ $count -eq 0 ]]; then echo "no recipes found under $configs"; exit 1; fi
echo "$count recipes checked"
exit $status
