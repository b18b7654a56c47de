# shellcheck shell=bash
# bench/lib.sh: what the benchmark scripts share. Sourced, not run:
#   . "$ROOT/bench/lib.sh"

# Sets BIN to the teammem binary to measure: $TEAMMEM_BIN when set (e.g. a
# debug build), else a release build of this checkout (built here).
# shellcheck disable=SC2034 # BIN is the caller's
teammem_bin() {
    if [ -n "${TEAMMEM_BIN:-}" ]; then
        BIN="$TEAMMEM_BIN"
    else
        echo "building teammem (release)" >&2
        cargo build --release --quiet --manifest-path "$ROOT/Cargo.toml"
        BIN="$ROOT/target/release/teammem"
    fi
}

# wait_healthy PORT LOG: waits up to 10 s for the daemon on PORT to answer
# /healthz; if it never does, prints its LOG and exits the script.
wait_healthy() {
    local port="$1" log="$2"
    for _ in $(seq 1 100); do
        curl -fsS "http://127.0.0.1:$port/healthz" >/dev/null 2>&1 && return 0
        sleep 0.1
    done
    curl -fsS "http://127.0.0.1:$port/healthz" >/dev/null || { cat "$log"; exit 1; }
}

# relax_limits BIN CONFIG: lets the bench's own token poll as fast as it
# likes (a [limits] section), when BIN knows the section (a baseline build
# may not: then CONFIG stays as it was).
relax_limits() {
    local bin="$1" config="$2"
    cp "$config" "$config.strict"
    printf '\n[limits]\nrequests_per_second = 100000\nrequest_burst = 100000\n' >> "$config"
    if "$bin" check-config --config "$config" >/dev/null 2>&1; then
        rm -f "$config.strict"
    else
        mv "$config.strict" "$config"
    fi
}
