# Helpers of the root scripts that build test hosts (cluster.sh, slurm.sh);
# sourced after they set SELF (their own path).

# Prints the message, prefixed with the script's name, and exits 1.
die() {
  echo "$(basename "$SELF"): $*" >&2
  exit 1
}

# Prints the script's header comment (its usage) and exits 2.
usage() {
  sed -n '2,/^set -euo/p' "$SELF" | sed '$d; s/^# \{0,1\}//' >&2
  exit 2
}
