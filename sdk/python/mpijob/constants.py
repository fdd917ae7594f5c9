"""Names the SDK shares with Trainer, JobSet, Kueue and mpijob-manager."""

from __future__ import annotations

from . import jobspec as _jobspec

GROUP = "trainer.kubeflow.org"
VERSION = "v1alpha1"
STATUS_ANNOTATION = "mpijob.dev/status"
# mpijob-manager's status of each job lives in a JobStatus of its own (Go: pkg/api/jobstatus.go),
# named after the TrainJob and owned by it; its "status" is what STATUS_ANNOTATION held.
JOB_STATUS_GROUP, JOB_STATUS_VERSION, JOB_STATUS_PLURAL = "mpijob.dev", "v1alpha1", "jobstatuses"
# Where a stuck job's ranks waited when mpijob-manager took their stacks: the JobStatus's "stacks"
# (an older manager's annotation of this name). Go: api.StacksAnnotation.
STACKS_ANNOTATION = "mpijob.dev/stacks"
#: mpijob-manager's leader-election Lease, readable by every signed-in user.
MANAGER_LEASE_NAMESPACE = "mpijob-system"
MANAGER_LEASE_NAME = "mpijob-manager.mpijob.dev"
CREATOR_ANNOTATION = "mpijob.dev/creator"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
JOBSET_NAME = "jobset.sigs.k8s.io/jobset-name"
REPLICATED_JOB = "jobset.sigs.k8s.io/replicatedjob-name"
COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"
# The field manager of the runtime patches the SDK writes (volumes, node selector).
PATCH_MANAGER = "mpijob.dev/python-sdk"
# JobSet's Launcher pod name "<name>-launcher-0-0-xxxxx" fits 63 characters.
MAX_NAME = _jobspec.MAX_NAME

# The log store's read API that mpijob-manager serves (pkg/logstore, config/logstore).
LOG_STORE_GROUP_VERSION = "logs.mpijob.dev/v1alpha1"
