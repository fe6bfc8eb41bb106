#!/bin/sh
# supervise's shim: the parent of one supervised child. It costs one idle dash (~0.1 MiB),
# outlives the CLI and the daemon, and records how the child ended.
# Usage: shim.sh RUN_DIR CMD [ARG...]
# stdout and stderr already point at RUN_DIR/output.log (O_APPEND). stdin is the write end of
# the launcher's "ready" pipe (a fixed fd: dash cannot redirect fds above 9); the child's pid
# goes there, and the child itself gets /dev/null.
dir=$1
shift
echo $$ >"$dir/shim.pid"
# A handler, not '': ignored signals would be inherited by the child, handled ones are not.
# The shim survives a stray signal and still writes exit.json.
trap ':' HUP INT TERM QUIT
# The child runs in the foreground (a background job would start with SIGINT ignored, so a
# Python child would never see KeyboardInterrupt), writes its pid, then becomes the leader of
# its own session and process group: `supervise stop` signals that group, never the shim.
# A launcher that died before reading the pid (a daemon SIGKILLed while it started a restart)
# must not keep the child from starting: that write ignores SIGPIPE, and the child gets the
# default back.
sh -c 'echo $$ >"$0.tmp" && mv -f "$0.tmp" "$0"; trap "" PIPE; echo $$ >&0 2>/dev/null
trap - PIPE; exec setsid "$@" </dev/null' \
  "$dir/child.pid" "$@"
status=$?
ended=$(date +%s.%N)
record=$(printf '{"status": %d, "ended_at": %s}' "$status" "${ended:-0}")
# Write-then-rename: the daemon sees either no exit record or a whole one (it never reads
# exit.json.tmp). On a full disk the write fails: try again each second until it is written,
# staying alive meanwhile, so the daemon sees a process not yet recorded rather than lost.
until printf '%s\n' "$record" >"$dir/exit.json.tmp" && mv -f "$dir/exit.json.tmp" "$dir/exit.json"
do
  [ -d "$dir" ] || exit 0 # the run dir was deleted: nobody will read a record
  sleep 1
done
