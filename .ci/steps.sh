# Step bookkeeping shared by .ci/run and .ci/background.sh (sourced, not run): `step NAME`
# starts a step and closes the previous one, printing its wall time and the CPU time its
# commands used (user + system, children that ended); `step_summary` prints every step's.

ci_start=$SECONDS
step_start=$SECONDS
step_cpu=0
step_name=""
timings=()

# Sets `cpu_now` to the CPU seconds (user + system) of the shell's ended children so far.
# (`times` must run in this shell, not in a command substitution's subshell, whose children
# are its own.)
cpu_now=0
read_cpu() {
  local f="${TMPDIR:-/tmp}/nrt-ci-times.$$"
  # `times` prints the shell's own line, then the children's: "1m2.345s 0m6.789s".
  times > "$f"
  cpu_now=$(awk 'NR == 2 {
    s = 0
    for (i = 1; i <= 2; i++) { split($i, p, "m"); sub("s", "", p[2]); s += p[1] * 60 + p[2] }
    printf "%d\n", s
  }' "$f")
  rm -f "$f"
}

finish_step() {
  if [ -n "$step_name" ]; then
    read_cpu
    local wall=$((SECONDS - step_start)) cpu=$((cpu_now - step_cpu))
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
  read_cpu
  step_cpu=$cpu_now
  printf '\n== %s\n' "$*"
}

step_summary() {
  finish_step
  step_name=""
  echo
  echo "step times (wall, CPU):"
  printf '  %s\n' "${timings[@]}"
}
