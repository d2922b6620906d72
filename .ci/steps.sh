# Step bookkeeping shared by .ci/run and .ci/background.sh (sourced, not run): `step NAME`
# starts a step and closes the previous one, printing its wall time and the CPU time its
# commands used (user + system, children that ended); `step_summary` prints every step's.

ci_start=$SECONDS
step_start=$SECONDS
step_cpu=0
step_name=""
timings=()

# CPU seconds (user + system) of the shell's ended children so far.
children_cpu() {
  # `times` prints the shell's own line, then the children's: "1m2.345s 0m6.789s".
  times | tail -n 1 | awk '{
    s = 0
    for (i = 1; i <= 2; i++) { split($i, p, "m"); sub("s", "", p[2]); s += p[1] * 60 + p[2] }
    printf "%d\n", s
  }'
}

finish_step() {
  if [ -n "$step_name" ]; then
    local wall=$((SECONDS - step_start)) cpu=$(($(children_cpu) - step_cpu))
    timings+=("$(printf '%5d s %6d s  %s' "$wall" "$cpu" "$step_name")")
    printf '   (%d s, %d s CPU)\n' "$wall" "$cpu"
  fi
}

step() {
  finish_step
  # A hook the sourcing script may define (.ci/run: fail early when the background lane failed).
  if declare -F step_hook > /dev/null; then step_hook; fi
  step_name="$*"
  step_start=$SECONDS
  step_cpu=$(children_cpu)
  printf '\n== %s\n' "$*"
}

step_summary() {
  finish_step
  step_name=""
  echo
  echo "step times (wall, CPU):"
  printf '  %s\n' "${timings[@]}"
}
