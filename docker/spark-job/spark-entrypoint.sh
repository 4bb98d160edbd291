#!/usr/bin/env bash
# Entry point of the pyrocketmq-spark image (PID 1 is tini, which forwards signals to what this execs).
#
#   driver ARGS...   the driver pod of Spark on Kubernetes (spark-submit --master k8s://... --deploy-mode cluster,
#                    or the spark-operator's SparkApplication): spark-submit in client mode inside the pod,
#                    bound to SPARK_DRIVER_BIND_ADDRESS (the pod IP Spark puts in the pod's environment)
#   executor         an executor pod: Spark's KubernetesExecutorBackend with what Spark passes in the environment
#                    (SPARK_DRIVER_URL, SPARK_EXECUTOR_ID/CORES/MEMORY/POD_IP/POD_NAME, SPARK_APPLICATION_ID,
#                    SPARK_RESOURCE_PROFILE_ID, SPARK_JAVA_OPT_<n>)
#   anything else    exec'd unchanged, e.g. python /opt/pyrocketmq/jobs/publish_flights.py --gateway ... (local mode)
set -euo pipefail

spark_home() {
  python -c 'import os, pyspark; print(os.path.dirname(pyspark.__file__))'
}

case "${1:-}" in
  driver)
    shift
    SPARK_HOME="${SPARK_HOME:-$(spark_home)}"
    export SPARK_HOME
    exec "$SPARK_HOME/bin/spark-submit" --deploy-mode client \
      --conf "spark.driver.bindAddress=${SPARK_DRIVER_BIND_ADDRESS:-127.0.0.1}" "$@"
    ;;
  executor)
    shift
    SPARK_HOME="${SPARK_HOME:-$(spark_home)}"
    export SPARK_HOME
    java_opts=()
    while IFS= read -r name; do java_opts+=("${!name}"); done \
      < <(compgen -e | grep -E '^SPARK_JAVA_OPT_[0-9]+$' | sort -t_ -k4 -n)
    exec java "${java_opts[@]}" -Xms"${SPARK_EXECUTOR_MEMORY:?}" -Xmx"${SPARK_EXECUTOR_MEMORY}" \
      -cp "${SPARK_CLASSPATH:+$SPARK_CLASSPATH:}$SPARK_HOME/jars/*" \
      org.apache.spark.scheduler.cluster.k8s.KubernetesExecutorBackend \
      --driver-url "${SPARK_DRIVER_URL:?}" --executor-id "${SPARK_EXECUTOR_ID:?}" \
      --cores "${SPARK_EXECUTOR_CORES:?}" --app-id "${SPARK_APPLICATION_ID:?}" \
      --hostname "${SPARK_EXECUTOR_POD_IP:?}" --resourceProfileId "${SPARK_RESOURCE_PROFILE_ID:-0}" \
      --podName "${SPARK_EXECUTOR_POD_NAME:-}" "$@"
    ;;
  *)
    exec "$@"
    ;;
esac
