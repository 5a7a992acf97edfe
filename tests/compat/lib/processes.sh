# shellcheck shell=bash
# Process helpers shared by the suites that start their own Comet processes (ha/run.sh,
# failover/run.sh). Source it after defining `die MESSAGE` and setting START_TIMEOUT_S,
# STOP_TIMEOUT_S and PROCESS_LOG_TAG (the prefix of this file's own messages).

# port_open PORT: whether something accepts connections on 127.0.0.1:PORT.
port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# free_port: a loopback port nothing listens on now.
free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0))
print(s.getsockname()[1])'
}

# wait_port PID PORT NAME LOG: until PORT accepts connections (at most START_TIMEOUT_S);
# stops the run with the process's last output if it exits first.
wait_port() {
  local pid="$1" port="$2" name="$3" log="$4"
  local deadline=$((SECONDS + START_TIMEOUT_S))
  until port_open "$port"; do
    if ! kill -0 "$pid" 2>/dev/null; then
      tail -30 "$log" >&2 || true
      die "$name exited during start-up (output above)"
    fi
    ((SECONDS < deadline)) || die "$name not listening on $port after ${START_TIMEOUT_S}s"
    sleep 0.2
  done
}

# stop_pid PID NAME: TERM, then KILL after STOP_TIMEOUT_S; returns the process's status.
stop_pid() {
  local pid="$1" name="$2" rc=0
  [[ -n "$pid" ]] || return 0
  kill -TERM "$pid" 2>/dev/null || true
  local deadline=$((SECONDS + STOP_TIMEOUT_S))
  while kill -0 "$pid" 2>/dev/null && ((SECONDS < deadline)); do sleep 0.2; done
  if kill -0 "$pid" 2>/dev/null; then
    echo "$PROCESS_LOG_TAG: $name (pid $pid) ignored TERM for ${STOP_TIMEOUT_S} s; killing it" >&2
    kill -KILL "$pid" 2>/dev/null || true
  fi
  wait "$pid" 2>/dev/null || rc=$?
  return "$rc"
}
