#!/usr/bin/env bash
# Submit the publish job to Kubernetes with plain spark-submit (no operator), cluster mode.
#   K8S_MASTER=https://<api-server>:6443 deploy/spark/spark-submit.sh [extra job arguments]
# Defaults match the Helm release "pyrocketmq" in namespace "pyrocketmq"; override with the variables below.
# Apply deploy/spark/rbac.yaml and deploy/spark/networkpolicy.yaml first.
# Exactly once with task retries on (as sparkapplication.yaml): the rocketmq sink's default deliveryGuarantee,
# exactly_once, publishes each task attempt under its own transaction and commits only the winning attempt of each
# partition, so spark.task.maxFailures stays at Spark's default 4 (a task of a lost executor pod is retried and
# stores nothing twice). Never set it to 1.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
: "${K8S_MASTER:?set K8S_MASTER to the API server URL, e.g. https://kubernetes.default.svc:443}"
NAMESPACE="${NAMESPACE:-pyrocketmq}"
RELEASE="${RELEASE:-pyrocketmq}"
SPARK_IMAGE="${SPARK_IMAGE:-pyrocketmq-spark:0.1.0}"
GATEWAY="${GATEWAY:-${RELEASE}-gateway.${NAMESPACE}.svc.cluster.local:8081}"
NAMESRV="${NAMESRV:-${RELEASE}-namesrv.${NAMESPACE}.svc.cluster.local:9876}"
exec spark-submit \
  --master "k8s://${K8S_MASTER}" \
  --deploy-mode cluster \
  --name publish-flights \
  --conf spark.kubernetes.namespace="${NAMESPACE}" \
  --conf spark.kubernetes.container.image="${SPARK_IMAGE}" \
  --conf spark.kubernetes.container.image.pullPolicy=Always \
  --conf spark.kubernetes.authenticate.driver.serviceAccountName=pyrocketmq-spark-driver \
  --conf spark.kubernetes.driver.podTemplateFile="${here}/driver-pod-template.yaml" \
  --conf spark.kubernetes.executor.podTemplateFile="${here}/executor-pod-template.yaml" \
  --conf spark.kubernetes.driver.podTemplateContainerName=spark-kubernetes-driver \
  --conf spark.kubernetes.executor.podTemplateContainerName=spark-kubernetes-executor \
  --conf spark.kubernetes.driver.label.pyrocketmq.io/admin=true \
  --conf spark.executor.instances=2 \
  --conf spark.driver.memory=2g \
  --conf spark.executor.memory=2g \
  --conf spark.task.maxFailures=4 \
  --conf spark.ui.enabled=false \
  --conf spark.sql.session.timeZone=UTC \
  local:///opt/pyrocketmq/jobs/publish_flights.py \
  --gateway "${GATEWAY}" --namesrv "${NAMESRV}" --cluster DefaultCluster --topic flights --guarantee exactly_once "$@"
