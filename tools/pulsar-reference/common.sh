# Shared by pulsar-standalone.sh and pulsar-broker.sh, which source it after setting HERE (this
# directory), LIB (the jars), NAME (the script's name, for messages) and, for the start helpers,
# RUN_DIR, BROKER_PORT, WEB_PORT, EXTRA_OPTS, SETS and TIMEOUT from their command line.

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'
}

pid_alive() { [ -f "$1/pulsar.pid" ] && kill -0 "$(cat "$1/pulsar.pid")" 2>/dev/null; }

# Resolves lib/ from Maven Central when it is missing or older than pom.xml.
resolve() {
  if [ -f "$LIB/.complete" ] && [ "$LIB/.complete" -nt "$HERE/pom.xml" ]; then return 0; fi
  command -v mvn >/dev/null || { echo "$NAME: mvn not found (apt-get install maven)" >&2; exit 1; }
  echo "$NAME: resolving Pulsar jars from Maven Central into $LIB (first run: a few minutes)"
  rm -rf "$LIB"
  (cd "$HERE" && mvn -q -B -Dstyle.color=never package)
  touch "$LIB/.complete"
}

# Module opens that Pulsar's own launcher passes on Java 17 (netty, bookkeeper, metrics).
JVM_OPENS=(
  --add-opens java.base/java.io=ALL-UNNAMED
  --add-opens java.base/java.util.zip=ALL-UNNAMED
  --add-opens java.base/sun.net=ALL-UNNAMED
  --add-opens java.base/java.nio=ALL-UNNAMED
  --add-opens java.base/jdk.internal.misc=ALL-UNNAMED
  --add-exports java.base/jdk.internal.misc=ALL-UNNAMED
  --add-opens java.management/sun.management=ALL-UNNAMED
  --add-opens jdk.management/com.sun.management.internal=ALL-UNNAMED
)

# `status`: "running pid=... ports... health=..." (exit 0) or "stopped" (exit 3).
status_cmd() {
  if pid_alive "$RUN_DIR"; then
    web=$(sed -n 's/^webServicePort=//p' "$RUN_DIR/ports")
    health=$(curl -s -m 5 "http://127.0.0.1:$web/admin/v2/brokers/health" || true)
    echo "running pid=$(cat "$RUN_DIR/pulsar.pid") $(tr '\n' ' ' < "$RUN_DIR/ports")health=${health:-none}"
  else
    echo "stopped"; exit 3
  fi
}

# `stop`: SIGTERM, SIGKILL after 30 s.
stop_cmd() {
  if ! pid_alive "$RUN_DIR"; then echo "$NAME: not running"; rm -f "$RUN_DIR/pulsar.pid"; return 0; fi
  pid=$(cat "$RUN_DIR/pulsar.pid")
  kill -TERM "$pid"
  for _ in $(seq 1 60); do kill -0 "$pid" 2>/dev/null || break; sleep 0.5; done
  if kill -0 "$pid" 2>/dev/null; then
    echo "$NAME: pid $pid still alive after 30 s, sending KILL"
    kill -KILL "$pid"
  fi
  rm -f "$RUN_DIR/pulsar.pid"
  echo "$NAME: stopped pid $pid"
}

# Exits 1 when already running; picks the free ports asked for (port 0).
prepare_start() {
  if pid_alive "$RUN_DIR"; then
    echo "$NAME: already running (pid $(cat "$RUN_DIR/pulsar.pid")) in $RUN_DIR" >&2; exit 1
  fi
  resolve
  [ "$BROKER_PORT" = 0 ] && BROKER_PORT=$(free_port)
  [ "$WEB_PORT" = 0 ] && WEB_PORT=$(free_port)
  return 0
}

# write_conf BASE CONF [KEY=VALUE]...: CONF is BASE, the given settings, the two ports, then the
# caller's --set settings (the last of a key wins); RUN_DIR/ports gets the ports.
write_conf() {
  local base=$1 conf=$2
  shift 2
  {
    cat "$base"
    for kv in "$@"; do echo "$kv"; done
    echo "brokerServicePort=$BROKER_PORT"
    echo "webServicePort=$WEB_PORT"
    echo "# caller's settings"
    for kv in "${SETS[@]+"${SETS[@]}"}"; do echo "$kv"; done
  } > "$conf"
  printf 'brokerServicePort=%s\nwebServicePort=%s\n' "$BROKER_PORT" "$WEB_PORT" > "$RUN_DIR/ports"
}

# launch "HEAP OPTIONS" MAIN_CLASS [ARG]...: the JVM in its own session in RUN_DIR (stdout and
# stderr in RUN_DIR/pulsar.out), its pid in RUN_DIR/pulsar.pid and in PID.
launch() {
  local heap=$1
  shift
  # shellcheck disable=SC2086
  (cd "$RUN_DIR" && exec setsid java \
      $heap -XX:+UseG1GC \
      "${JVM_OPENS[@]}" \
      -Dio.netty.tryReflectionSetAccessible=true \
      -Djava.net.preferIPv4Stack=true \
      -Dlog4j2.configurationFile="$HERE/conf/log4j2.xml" \
      -Dpulsar.log.dir="$RUN_DIR/logs" \
      $EXTRA_OPTS \
      -cp "$LIB/*" "$@" \
      > "$RUN_DIR/pulsar.out" 2>&1 < /dev/null) &
  PID=$!
  echo "$PID" > "$RUN_DIR/pulsar.pid"
  echo "$NAME: pid $PID, broker pulsar://127.0.0.1:$BROKER_PORT, web http://127.0.0.1:$WEB_PORT, run dir $RUN_DIR"
}

# wait_healthy [CURL ARG]...: exits 0 once GET /admin/v2/brokers/health on WEB_PORT answers "ok";
# exits 1 when the process PID ends first or after TIMEOUT seconds (then stops it).
wait_healthy() {
  local start_s
  start_s=$(date +%s)
  while true; do
    if ! kill -0 "$PID" 2>/dev/null; then
      echo "$NAME: process exited during start; see $RUN_DIR/logs/pulsar.log and $RUN_DIR/pulsar.out" >&2
      tail -n 20 "$RUN_DIR/pulsar.out" >&2 || true
      rm -f "$RUN_DIR/pulsar.pid"; exit 1
    fi
    if [ "$(curl -s -m 5 "$@" "http://127.0.0.1:$WEB_PORT/admin/v2/brokers/health" 2>/dev/null)" = "ok" ]; then
      echo "$NAME: healthy after $(( $(date +%s) - start_s )) s"
      exit 0
    fi
    if [ $(( $(date +%s) - start_s )) -ge "$TIMEOUT" ]; then
      echo "$NAME: not healthy after $TIMEOUT s; stopping it" >&2
      stop_cmd >&2 || true
      exit 1
    fi
    sleep 1
  done
}
